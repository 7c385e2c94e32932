//! Command buffers on a CUDA-like driver: runs of device commands (launches, fills, copies)
//! become driver graphs, each a chain of nodes instantiated once and launched per replay;
//! host callbacks and event waits between them replay through the stream's own operations
//! (a host callback must be able to fail the stream, which a graph host node cannot).
//!
//! An update sets the kernel node's parameters in the instantiated graph in place
//! (`cuGraphExecKernelNodeSetParams`) when no submit of it still waits on a stream worker to
//! be issued; otherwise it rebuilds that graph, so replays already queued keep their
//! arguments either way.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::device::GpuExecutor;
use super::kernel::GpuKernel;
use super::stream::{GpuStream, PackedParams, grid_block, shared_bytes};
use super::{Driver, GraphNode, KernelNode, RawGraph, RawGraphExec, RawGraphNode};
use crate::error::{Error, Result};
use crate::interface::{Command, CommandBufferInterface, KernelInterface, StreamInterface};
use crate::platform::downcast::downcast;
use crate::types::PackedArg;

/// A finalized command list of device `D`.
pub(crate) struct GpuCommandBuffer<D: Driver> {
    exec: Arc<GpuExecutor<D>>,
    segments: Vec<Segment<D>>,
    /// For each command: its segment, and its position there (for graph segments).
    place: Vec<(usize, usize)>,
}

enum Segment<D: Driver> {
    /// Device commands, as one instantiated graph (swapped whole on a rebuild).
    Graph(Mutex<Arc<Graph<D>>>),
    /// A host callback or event wait, replayed through the stream.
    Stream(Command),
}

/// One instantiated graph and what it was built from.
struct Graph<D: Driver> {
    drv: Arc<D>,
    graph: RawGraph,
    exec: RawGraphExec,
    /// Per command: its node (`None` for an empty fill or copy, which has none).
    nodes: Vec<Option<RawGraphNode>>,
    /// The commands as of the latest update (keeps their kernels, and so their modules,
    /// alive; a rebuild starts from them).
    commands: Mutex<Vec<Command>>,
    /// Submits queued on a stream worker that have not called `graph_launch` yet.
    unissued: AtomicUsize,
}

impl<D: Driver> Drop for Graph<D> {
    fn drop(&mut self) {
        // SAFETY: ours and unused from here; launches already made finish (driver rule).
        unsafe {
            self.drv.graph_exec_destroy(self.exec);
            self.drv.graph_destroy(self.graph);
        }
    }
}

/// A kernel command's node parameters: the function, geometry and packed values.
struct KernelParts {
    f: super::RawFunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    params: PackedParams,
}

fn kernel_parts<D: Driver>(
    kernel: &Arc<dyn KernelInterface>,
    dims: &crate::types::LaunchDims,
    args: &[PackedArg],
) -> Result<KernelParts> {
    let k = downcast::<GpuKernel<D>>(kernel.as_any(), "a recorded kernel")?;
    let (grid, block) = grid_block(dims);
    Ok(KernelParts {
        f: k.function(),
        grid,
        block,
        shared_bytes: shared_bytes::<D>(k.name(), dims)?,
        params: PackedParams::new(args),
    })
}

impl<D: Driver> Graph<D> {
    /// Builds and instantiates the graph of `commands` (device commands only).
    ///
    /// # Safety
    /// As `CommandBufferInterface::submit` for the commands.
    unsafe fn build(drv: &Arc<D>, commands: Vec<Command>) -> Result<Self> {
        let mut kernels: Vec<Option<KernelParts>> = Vec::with_capacity(commands.len());
        for c in &commands {
            kernels.push(match c {
                Command::Launch { kernel, dims, args } => {
                    Some(kernel_parts::<D>(kernel, dims, args)?)
                }
                _ => None,
            });
        }
        let mut pointers: Vec<Vec<*mut c_void>> = kernels
            .iter_mut()
            .map(|k| k.as_mut().map_or_else(Vec::new, |k| k.params.pointers()))
            .collect();
        let mut nodes = Vec::new();
        let mut node_of = Vec::with_capacity(commands.len());
        for ((c, k), p) in commands.iter().zip(&kernels).zip(pointers.iter_mut()) {
            let node = match (c, k) {
                (Command::Launch { .. }, Some(k)) => Some(GraphNode::Kernel(KernelNode {
                    f: k.f,
                    grid: k.grid,
                    block: k.block,
                    shared_bytes: k.shared_bytes,
                    params: p,
                })),
                (Command::MemcpyD2D { src, dst, bytes }, _) => {
                    (*bytes > 0).then(|| GraphNode::MemcpyD2D {
                        src: src.raw(),
                        dst: dst.raw(),
                        bytes: *bytes as usize,
                    })
                }
                (Command::Memset8 { dst, value, bytes }, _) => {
                    (*bytes > 0).then(|| GraphNode::MemsetD8 {
                        dst: dst.raw(),
                        value: *value,
                        bytes: *bytes as usize,
                    })
                }
                (Command::Memset32 { dst, value, count }, _) => {
                    (*count > 0).then(|| GraphNode::MemsetD32 {
                        dst: dst.raw(),
                        value: *value,
                        count: *count as usize,
                    })
                }
                _ => {
                    return Err(Error::internal(
                        "CommandBuffer::finalize: a host-side command in a graph segment",
                    ));
                }
            };
            node_of.push(node.as_ref().map(|_| nodes.len()));
            nodes.extend(node);
        }
        // SAFETY: the caller's guarantees for every range; the parameter values live in
        // `kernels` across the call (the driver copies them).
        let (graph, handles) = unsafe { drv.graph_chain(&mut nodes) }?;
        drop(nodes);
        // SAFETY: the graph just built.
        let exec = match unsafe { drv.graph_instantiate(graph) } {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: ours, unused from here.
                unsafe { drv.graph_destroy(graph) };
                return Err(e);
            }
        };
        Ok(Graph {
            drv: drv.clone(),
            graph,
            exec,
            nodes: node_of.into_iter().map(|n| n.map(|i| handles[i])).collect(),
            commands: Mutex::new(commands),
            unissued: AtomicUsize::new(0),
        })
    }
}

fn is_device_command(c: &Command) -> bool {
    !matches!(c, Command::HostCallback(_) | Command::WaitEvent(_))
}

impl<D: Driver> GpuCommandBuffer<D> {
    /// Builds the graphs of `commands`; `Ok(None)` where the driver has no graphs.
    ///
    /// # Safety
    /// As `CommandBufferInterface::submit` for the commands.
    pub(crate) unsafe fn new(
        exec: Arc<GpuExecutor<D>>,
        commands: &[Command],
    ) -> Result<Option<Self>> {
        if !exec.driver().has_graphs() {
            return Ok(None);
        }
        let mut segments = Vec::new();
        let mut place = Vec::with_capacity(commands.len());
        let mut run: Vec<Command> = Vec::new();
        let flush = |run: &mut Vec<Command>, segments: &mut Vec<Segment<D>>| -> Result<()> {
            if !run.is_empty() {
                // SAFETY: the caller's guarantees for the commands.
                let g = unsafe { Graph::build(exec.driver(), std::mem::take(run)) }?;
                segments.push(Segment::Graph(Mutex::new(Arc::new(g))));
            }
            Ok(())
        };
        for c in commands {
            if is_device_command(c) {
                place.push((segments.len(), run.len()));
                run.push(c.clone());
            } else {
                flush(&mut run, &mut segments)?;
                place.push((segments.len(), 0));
                segments.push(Segment::Stream(c.clone()));
            }
        }
        flush(&mut run, &mut segments)?;
        Ok(Some(GpuCommandBuffer {
            exec,
            segments,
            place,
        }))
    }
}

impl<D: Driver> CommandBufferInterface for GpuCommandBuffer<D> {
    unsafe fn submit(&self, stream: &dyn StreamInterface) -> Result<()> {
        let s = stream
            .native()
            .ok_or_else(|| Error::invalid("then_submit", "not a stream of this platform"))
            .and_then(|s| downcast::<GpuStream<D>>(s, "the stream passed to then_submit"))?;
        for seg in &self.segments {
            match seg {
                Segment::Graph(g) => {
                    let g = {
                        let slot = g.lock();
                        slot.unissued.fetch_add(1, Ordering::SeqCst);
                        slot.clone()
                    };
                    let r = s.submit_driver(move |drv, raw| {
                        // SAFETY: the graph's memory is pinned while the command buffer
                        // lives, and a free after this submit is fenced behind it.
                        let r = unsafe { drv.graph_launch(g.exec, raw) };
                        g.unissued.fetch_sub(1, Ordering::SeqCst);
                        r
                    });
                    r?;
                }
                // SAFETY: a host callback or event wait, validated at record time.
                Segment::Stream(c) => unsafe { c.enqueue_on(stream)? },
            }
        }
        Ok(())
    }

    unsafe fn update_launch(&self, index: usize, args: &[PackedArg]) -> Result<()> {
        let not_launch = || {
            Error::invalid(
                "CommandBuffer::update",
                format!("command {index} is not a launch"),
            )
        };
        let &(seg, pos) = self.place.get(index).ok_or_else(not_launch)?;
        let Some(Segment::Graph(slot)) = self.segments.get(seg) else {
            return Err(not_launch());
        };
        // Submits take this lock to count themselves as unissued: holding it, the count is
        // exact.
        let mut slot = slot.lock();
        let mut commands = slot.commands.lock().clone();
        let Some(Command::Launch {
            kernel,
            dims,
            args: old,
        }) = commands.get_mut(pos)
        else {
            return Err(not_launch());
        };
        *old = args.to_vec();
        if let (0, Some(node)) = (slot.unissued.load(Ordering::SeqCst), slot.nodes[pos]) {
            let mut k = kernel_parts::<D>(kernel, dims, args)?;
            let mut p = k.params.pointers();
            let node_params = KernelNode {
                f: k.f,
                grid: k.grid,
                block: k.block,
                shared_bytes: k.shared_bytes,
                params: &mut p,
            };
            // SAFETY: the new arguments were checked as at record time and their memory is
            // pinned; `node` is this kernel's node in the graph `exec` came from. Every submit
            // of this graph has been issued to the driver, so only later ones see the change.
            unsafe {
                slot.drv
                    .graph_exec_kernel_params(slot.exec, node, node_params)
            }?;
            *slot.commands.lock() = commands;
            return Ok(());
        }
        // A submit still waits on a stream worker: it must launch the old arguments.
        // SAFETY: the commands were validated (the new arguments just now).
        let fresh = unsafe { Graph::build(self.exec.driver(), commands) }?;
        *slot = Arc::new(fresh);
        Ok(())
    }

    fn kind(&self) -> &'static str {
        D::GRAPH_KIND
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
