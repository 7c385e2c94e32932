//! CUDA graphs for command buffers: a chain of kernel, memset and copy nodes, instantiated
//! once, launched per replay, with kernel nodes updated in place
//! (`cuGraphExecKernelNodeSetParams`).

use cudarc::driver::sys;

use super::driver::CudaDriver;
use crate::error::Result;
use crate::platform::gpu::{GraphNode, KernelNode, RawGraph, RawGraphExec, RawGraphNode};

/// A kernel node's parameters in the driver's layout (v2: `kern` and `ctx` unset).
fn kernel_params(n: &mut KernelNode<'_>) -> sys::CUDA_KERNEL_NODE_PARAMS_v2 {
    sys::CUDA_KERNEL_NODE_PARAMS_v2 {
        func: n.f.0 as sys::CUfunction,
        gridDimX: n.grid[0],
        gridDimY: n.grid[1],
        gridDimZ: n.grid[2],
        blockDimX: n.block[0],
        blockDimY: n.block[1],
        blockDimZ: n.block[2],
        sharedMemBytes: n.shared_bytes,
        kernelParams: n.params.as_mut_ptr(),
        extra: std::ptr::null_mut(),
        kern: std::ptr::null_mut(),
        ctx: std::ptr::null_mut(),
    }
}

/// A 1-D device-to-device copy as the driver's 3-D copy descriptor.
fn copy_params(src: u64, dst: u64, bytes: usize) -> sys::CUDA_MEMCPY3D {
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE;
    sys::CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: device,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: 0,
        srcHeight: 0,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: device,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: 0,
        dstHeight: 0,
        WidthInBytes: bytes,
        Height: 1,
        Depth: 1,
    }
}

impl CudaDriver {
    /// See `Driver::graph_chain`.
    ///
    /// # Safety
    /// As there.
    pub(super) unsafe fn chain(
        &self,
        nodes: &mut [GraphNode<'_>],
    ) -> Result<(RawGraph, Vec<RawGraphNode>)> {
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: an out-pointer for the new graph; flags must be 0.
        self.call("cuGraphCreate", || unsafe {
            sys::cuGraphCreate(&mut graph, 0)
        })?;
        let g = RawGraph(graph as usize);
        // SAFETY: the caller's guarantees for every node.
        match unsafe { self.add_nodes(graph, nodes) } {
            Ok(handles) => Ok((g, handles)),
            Err(e) => {
                // SAFETY: ours, not used again.
                let _ = self.call("cuGraphDestroy", || unsafe { sys::cuGraphDestroy(graph) });
                Err(e)
            }
        }
    }

    /// # Safety
    /// As `chain`.
    unsafe fn add_nodes(
        &self,
        graph: sys::CUgraph,
        nodes: &mut [GraphNode<'_>],
    ) -> Result<Vec<RawGraphNode>> {
        let mut handles = Vec::with_capacity(nodes.len());
        let mut prev: Option<sys::CUgraphNode> = None;
        for n in nodes {
            let mut node: sys::CUgraphNode = std::ptr::null_mut();
            let (deps, ndeps) = match &prev {
                Some(p) => (p as *const sys::CUgraphNode, 1),
                None => (std::ptr::null(), 0),
            };
            match n {
                GraphNode::Kernel(k) => {
                    self.allow_shared(k.f, k.shared_bytes)?;
                    let p = kernel_params(k);
                    // SAFETY: `p` points at live parameter values (the driver copies them).
                    self.call("cuGraphAddKernelNode", || unsafe {
                        sys::cuGraphAddKernelNode_v2(&mut node, graph, deps, ndeps, &p)
                    })?;
                }
                GraphNode::MemsetD8 { dst, value, bytes } => {
                    // SAFETY: a live device range (the caller's guarantee).
                    unsafe {
                        self.add_memset(
                            graph,
                            &mut node,
                            deps,
                            ndeps,
                            *dst,
                            *value as u32,
                            1,
                            *bytes,
                        )
                    }?;
                }
                GraphNode::MemsetD32 { dst, value, count } => {
                    // SAFETY: a live, 4-aligned device range (the caller's guarantee).
                    unsafe {
                        self.add_memset(graph, &mut node, deps, ndeps, *dst, *value, 4, *count)
                    }?;
                }
                GraphNode::MemcpyD2D { src, dst, bytes } => {
                    let p = copy_params(*src, *dst, *bytes);
                    // SAFETY: two live device ranges (the caller's guarantee).
                    self.call("cuGraphAddMemcpyNode", || unsafe {
                        sys::cuGraphAddMemcpyNode(&mut node, graph, deps, ndeps, &p, self.context())
                    })?;
                }
            }
            handles.push(RawGraphNode(node as usize));
            prev = Some(node);
        }
        Ok(handles)
    }

    /// # Safety
    /// `[dst, dst + elem * width)` is live device memory.
    #[allow(clippy::too_many_arguments)]
    unsafe fn add_memset(
        &self,
        graph: sys::CUgraph,
        node: &mut sys::CUgraphNode,
        deps: *const sys::CUgraphNode,
        ndeps: usize,
        dst: u64,
        value: u32,
        elem: u32,
        width: usize,
    ) -> Result<()> {
        let p = sys::CUDA_MEMSET_NODE_PARAMS {
            dst,
            pitch: 0,
            value,
            elementSize: elem,
            width,
            height: 1,
        };
        // SAFETY: the caller's range; `p` lives across the call.
        self.call("cuGraphAddMemsetNode", || unsafe {
            sys::cuGraphAddMemsetNode(node, graph, deps, ndeps, &p, self.context())
        })
    }

    /// See `Driver::graph_instantiate`.
    ///
    /// # Safety
    /// As there.
    pub(super) unsafe fn instantiate(&self, g: RawGraph) -> Result<RawGraphExec> {
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: a live graph and an out-pointer.
        self.call("cuGraphInstantiateWithFlags", || unsafe {
            sys::cuGraphInstantiateWithFlags(&mut exec, g.0 as sys::CUgraph, 0)
        })?;
        Ok(RawGraphExec(exec as usize))
    }

    /// See `Driver::graph_exec_kernel_params`.
    ///
    /// # Safety
    /// As there.
    pub(super) unsafe fn set_kernel_params(
        &self,
        e: RawGraphExec,
        n: RawGraphNode,
        mut node: KernelNode<'_>,
    ) -> Result<()> {
        self.allow_shared(node.f, node.shared_bytes)?;
        let p = kernel_params(&mut node);
        // SAFETY: a kernel node of the graph `e` came from; `p` points at live values.
        self.call("cuGraphExecKernelNodeSetParams", || unsafe {
            sys::cuGraphExecKernelNodeSetParams_v2(
                e.0 as sys::CUgraphExec,
                n.0 as sys::CUgraphNode,
                &p,
            )
        })
    }

    /// Opts `f` into more than 48 KiB of dynamic shared memory when it needs it.
    pub(super) fn allow_shared(
        &self,
        f: crate::platform::gpu::RawFunction,
        bytes: u32,
    ) -> Result<()> {
        if bytes <= 48 * 1024 {
            return Ok(());
        }
        // SAFETY: a live function; the attribute takes a byte count.
        self.call("cuFuncSetAttribute", || unsafe {
            sys::cuFuncSetAttribute(
                f.0 as sys::CUfunction,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        })
    }
}
