//! CUDA graphs, the explicit API: a graph is built node by node (kernel, memset, memcpy, host,
//! empty, event record, event wait and child-graph nodes, each after the nodes it names as
//! dependencies), instantiated into an executable graph, and launched into streams.
//!
//! - **Adding a node** checks it as the matching stream call would: a kernel node is a
//!   [`KernelLaunch`] (geometry, shared memory, `kernelParams` or `extra` against the `.param`
//!   list, argument values copied now, as CUDA does), a memset or memcpy node's ranges must lie
//!   inside live allocations. Dependencies must be live nodes of the same graph, without
//!   duplicates. A child-graph node holds a clone of the child graph as it is now.
//! - **Instantiating** snapshots the graph: its nodes in a topological order (dependencies
//!   first, else in the order they were added; a cycle is refused), child graphs flattened in
//!   place. Later changes of the graph do not reach the executable graph. All nodes that run in
//!   a context (kernels, memsets, memcpys, event records) must share one.
//! - **Launching** enqueues the nodes one after the other on the stream, a valid schedule of
//!   the graph's partial order, as one stream operation: stream-ordered like any other work,
//!   and after the previous launch of the same executable graph (on any stream), as CUDA
//!   orders launches of one `CUgraphExec`. Memory ranges and events are checked again first,
//!   so a launch is enqueued whole or not at all. A fault is the context's sticky error, as for
//!   any work. Kernel arguments are packed at launch: `cuGraphExecKernelNodeSetParams` changes
//!   launches made after it, never queued ones.
//! - Host memory that a memcpy node names is read or written when the node runs (no staging),
//!   so it must stay valid until then, pinned or not.
//!
//! Graph, node and executable-graph handles are table handles like every other (`handles.rs`);
//! a bad one is `CUDA_ERROR_INVALID_VALUE`, as the graph API documents. Node handles of a
//! destroyed graph are dead; its executable graphs live on.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::ffi::{c_uint, c_ulonglong, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{
    CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_HOST_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v1,
    CUDA_KERNEL_NODE_PARAMS_v2, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, CUcontext, CUevent,
    CUgraph, CUgraphExec, CUgraphInstantiateResult, CUgraphNode, CUgraphNodeType, CUresult,
    CUstream,
};
use parking_lot::Mutex;
use streamexec::{Event, Stream};

use crate::context::Context;
use crate::copy::{Memset, Side, issue_copy, side};
use crate::entry::{CuErr, CuResult, as_host_fn, call, invalid, non_null, put};
use crate::event::CuEvent;
use crate::launch::KernelLaunch;
use crate::memory::resolve;
use crate::module::function_any;
use crate::state::driver;
use crate::stream::resolve as resolve_stream;

/// `CUDA_GRAPH_INSTANTIATE_FLAG_*`.
const AUTO_FREE_ON_LAUNCH: u64 = 1;
const UPLOAD: u64 = 2;
const DEVICE_LAUNCH: u64 = 4;
const USE_NODE_PRIORITY: u64 = 8;

/// `CUmemorytype` values.
const MEM_HOST: u32 = 1;
const MEM_DEVICE: u32 = 2;
const MEM_ARRAY: u32 = 3;
const MEM_UNIFIED: u32 = 4;

fn not_supported(detail: impl Into<String>) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_NOT_SUPPORTED, detail)
}

/// What a node does.
#[derive(Clone)]
enum Op {
    Kernel(Arc<KernelLaunch>),
    Memset(Arc<MemsetNode>),
    Memcpy(Arc<MemcpyNode>),
    Host {
        f: unsafe extern "C" fn(*mut c_void),
        user: usize,
    },
    Empty,
    Record(Arc<CuEvent>),
    Wait(Arc<CuEvent>),
    /// A clone of the child graph: its operations in a topological order, flattened.
    Child(Arc<Vec<Op>>),
}

impl Op {
    fn kind(&self) -> CUgraphNodeType {
        use CUgraphNodeType as T;
        match self {
            Op::Kernel(_) => T::CU_GRAPH_NODE_TYPE_KERNEL,
            Op::Memset(_) => T::CU_GRAPH_NODE_TYPE_MEMSET,
            Op::Memcpy(_) => T::CU_GRAPH_NODE_TYPE_MEMCPY,
            Op::Host { .. } => T::CU_GRAPH_NODE_TYPE_HOST,
            Op::Empty => T::CU_GRAPH_NODE_TYPE_EMPTY,
            Op::Record(_) => T::CU_GRAPH_NODE_TYPE_EVENT_RECORD,
            Op::Wait(_) => T::CU_GRAPH_NODE_TYPE_WAIT_EVENT,
            Op::Child(_) => T::CU_GRAPH_NODE_TYPE_GRAPH,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Op::Kernel(_) => "kernel",
            Op::Memset(_) => "memset",
            Op::Memcpy(_) => "memcpy",
            Op::Host { .. } => "host",
            Op::Empty => "empty",
            Op::Record(_) => "event record",
            Op::Wait(_) => "event wait",
            Op::Child(_) => "child graph",
        }
    }

    /// The contexts this operation runs in (an event wait may wait for any context's event).
    fn contexts(&self, out: &mut HashSet<usize>) {
        match self {
            Op::Kernel(k) => {
                out.insert(k.func.ctx);
            }
            Op::Memset(m) => {
                out.insert(m.ctx);
            }
            Op::Memcpy(m) => {
                out.insert(m.ctx);
            }
            Op::Record(e) => {
                out.insert(e.ctx);
            }
            Op::Child(ops) => ops.iter().for_each(|o| o.contexts(out)),
            Op::Host { .. } | Op::Empty | Op::Wait(_) => {}
        }
    }

    /// Checks what may have changed since the node was made (memory freed, an event
    /// destroyed, a module unloaded) and resolves its memory: what a launch enqueues, or
    /// `None` for a node that does nothing.
    fn prepare(&self) -> CuResult<Option<Ready>> {
        let drv = driver()?;
        let live_event = |e: &Arc<CuEvent>| {
            if drv.events.get(e.handle).is_none() {
                return Err(invalid(format!(
                    "event {:#x} of an event node was destroyed; a graph's events must outlive \
                     its launches",
                    e.handle
                )));
            }
            Ok(e.clone())
        };
        Ok(Some(match self {
            Op::Kernel(k) => {
                if drv.functions.get(k.func.handle).is_none() {
                    return Err(invalid(format!(
                        "the module of kernel node function `{}` was unloaded; a graph's \
                         modules must outlive its launches",
                        k.func.entry.name
                    )));
                }
                Ready::Kernel(k.clone())
            }
            Op::Memset(m) => Ready::Memset(m.rows()?),
            Op::Memcpy(m) => Ready::Copy(m.prepare()?),
            &Op::Host { f, user } => Ready::Host { f, user },
            Op::Empty => return Ok(None),
            Op::Record(e) => Ready::Record(live_event(e)?),
            Op::Wait(e) => Ready::Wait(live_event(e)?),
            Op::Child(_) => {
                return Err(CuErr::new(
                    CUresult::CUDA_ERROR_UNKNOWN,
                    "internal error (please report): a child graph was not flattened",
                ));
            }
        }))
    }
}

/// A node's operation resolved for one launch.
enum Ready {
    Kernel(Arc<KernelLaunch>),
    Memset(Vec<Memset>),
    Copy(ReadyCopy),
    Host {
        f: unsafe extern "C" fn(*mut c_void),
        user: usize,
    },
    Record(Arc<CuEvent>),
    Wait(Arc<CuEvent>),
}

impl Ready {
    /// Enqueues the operation on `se`; an error only where a range checked by
    /// [`Op::prepare`] no longer resolves (a module global unloaded in between).
    fn issue(&self, se: &mut Stream) -> CuResult<()> {
        match self {
            Ready::Kernel(k) => k.issue(se),
            Ready::Memset(rows) => {
                for row in rows {
                    row.issue(se)?;
                }
            }
            Ready::Copy(c) => c.issue(se)?,
            &Ready::Host { f, user } => {
                se.then_host_callback(move || {
                    // SAFETY: the caller's contract (CUDA_HOST_NODE_PARAMS): `fn` may be called
                    // with `userData` whenever the node runs.
                    as_host_fn(|| unsafe { f(user as *mut c_void) });
                });
            }
            Ready::Record(e) => {
                se.then_record_event(&e.se);
            }
            Ready::Wait(e) => {
                // As cuStreamWaitEvent: the event's last record when the launch is made; an
                // event never recorded is no wait.
                if e.recorded() {
                    se.then_wait_for(&e.se);
                }
            }
        }
        Ok(())
    }
}

/// A memset node (`CUDA_MEMSET_NODE_PARAMS`).
struct MemsetNode {
    ctx: usize,
    /// The context whose allocation `dst` lies in.
    mem_ctx: usize,
    dst: u64,
    pitch: usize,
    value: u32,
    elem: u32,
    width: usize,
    height: usize,
}

impl MemsetNode {
    /// Reads and checks `p` (ranges must lie inside live allocations).
    ///
    /// # Safety
    /// `p` is null or valid for a read.
    unsafe fn new(p: *const CUDA_MEMSET_NODE_PARAMS, ctx: usize) -> CuResult<MemsetNode> {
        non_null(p, "memsetParams")?;
        // SAFETY: non-null, and valid for a read (the caller's contract); no enum fields.
        let p = unsafe { p.read() };
        if ![1, 2, 4].contains(&p.elementSize) {
            return Err(invalid(format!(
                "elementSize is {}: a memset node sets elements of 1, 2 or 4 bytes",
                p.elementSize
            )));
        }
        if p.width == 0 || p.height == 0 {
            return Err(invalid(format!(
                "width {} and height {}: a memset node sets at least one element (height 1 for \
                 a 1-D memset)",
                p.width, p.height
            )));
        }
        let row = (p.width as u64)
            .checked_mul(p.elementSize.into())
            .ok_or_else(|| invalid("width * elementSize overflows"))?;
        if p.height > 1 && (p.pitch as u64) < row {
            return Err(invalid(format!(
                "pitch {} is less than a row's {row} bytes (width * elementSize)",
                p.pitch
            )));
        }
        let value = match p.elementSize {
            1 => p.value & 0xff,
            2 => p.value & 0xffff,
            _ => p.value,
        };
        let mut node = MemsetNode {
            ctx,
            mem_ctx: 0,
            dst: p.dst,
            pitch: p.pitch,
            value,
            elem: p.elementSize,
            width: p.width,
            height: p.height,
        };
        let rows = node.rows()?;
        node.mem_ctx = rows[0].ctx();
        Ok(node)
    }

    /// One checked memset per row (one in all where the rows are contiguous).
    fn rows(&self) -> CuResult<Vec<Memset>> {
        let elem = u64::from(self.elem);
        let row = self.width as u64 * elem;
        if self.height == 1 || self.pitch as u64 == row {
            let count = self
                .width
                .checked_mul(self.height)
                .ok_or_else(|| invalid("width * height overflows"))?;
            return Ok(vec![Memset::new(self.dst, self.value, elem, count)?]);
        }
        (0..self.height as u64)
            .map(|y| {
                let at = y
                    .checked_mul(self.pitch as u64)
                    .and_then(|o| self.dst.checked_add(o))
                    .ok_or_else(|| invalid("dst + height * pitch overflows"))?;
                Memset::new(at, self.value, elem, self.width)
            })
            .collect()
    }
}

/// `CUDA_MEMCPY3D` with its `CUmemorytype` fields as integers, so any value the caller passes
/// is a value this library can read (the layout is checked against cudarc's struct below).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawMemcpy3D {
    srcXInBytes: usize,
    srcY: usize,
    srcZ: usize,
    srcLOD: usize,
    srcMemoryType: u32,
    srcHost: *const c_void,
    srcDevice: u64,
    srcArray: *mut c_void,
    reserved0: *mut c_void,
    srcPitch: usize,
    srcHeight: usize,
    dstXInBytes: usize,
    dstY: usize,
    dstZ: usize,
    dstLOD: usize,
    dstMemoryType: u32,
    dstHost: *mut c_void,
    dstDevice: u64,
    dstArray: *mut c_void,
    reserved1: *mut c_void,
    dstPitch: usize,
    dstHeight: usize,
    WidthInBytes: usize,
    Height: usize,
    Depth: usize,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<RawMemcpy3D>() == size_of::<CUDA_MEMCPY3D>());
    assert!(offset_of!(RawMemcpy3D, srcMemoryType) == offset_of!(CUDA_MEMCPY3D, srcMemoryType));
    assert!(offset_of!(RawMemcpy3D, srcHost) == offset_of!(CUDA_MEMCPY3D, srcHost));
    assert!(offset_of!(RawMemcpy3D, dstMemoryType) == offset_of!(CUDA_MEMCPY3D, dstMemoryType));
    assert!(offset_of!(RawMemcpy3D, dstHost) == offset_of!(CUDA_MEMCPY3D, dstHost));
    assert!(offset_of!(RawMemcpy3D, Depth) == offset_of!(CUDA_MEMCPY3D, Depth));
};

/// One end of a memcpy node: its memory type, first byte and row pitch.
#[derive(Clone, Copy)]
struct End {
    kind: u32,
    start: u64,
    pitch: usize,
}

/// A memcpy node (1-D or 2-D).
struct MemcpyNode {
    ctx: usize,
    dst: End,
    src: End,
    width: usize,
    height: usize,
    /// The context whose allocation each end lies in (`None`: host memory), for
    /// `cuGraphExecMemcpyNodeSetParams`.
    mem_ctx: (Option<usize>, Option<usize>),
}

/// A memcpy node's ends resolved for one launch.
struct ReadyCopy {
    dst: (Side, End),
    src: (Side, End),
    width: usize,
    height: usize,
}

impl ReadyCopy {
    fn issue(&self, se: &mut Stream) -> CuResult<()> {
        let ((ds, d), (ss, s)) = (&self.dst, &self.src);
        let contiguous = self.height == 1 || (d.pitch == self.width && s.pitch == self.width);
        let (rows, n) = if contiguous {
            (1, self.width * self.height)
        } else {
            (self.height, self.width)
        };
        for y in 0..rows as u64 {
            let (dst, src) = (d.start + y * d.pitch as u64, s.start + y * s.pitch as u64);
            // SAFETY: the caller's contract for a memcpy node: its host memory stays valid
            // while the graph may run; device ranges were checked (resolved) for this launch.
            unsafe { issue_copy(se, (ds, dst), (ss, src), n)? };
        }
        Ok(())
    }
}

impl MemcpyNode {
    /// Reads and checks `p`: 1-D and 2-D copies between host, device and unified memory.
    ///
    /// # Safety
    /// `p` is null or valid for a read.
    unsafe fn new(p: *const CUDA_MEMCPY3D, ctx: usize) -> CuResult<MemcpyNode> {
        non_null(p, "copyParams")?;
        // SAFETY: non-null, valid for a read (the caller's contract), and `RawMemcpy3D` has
        // the layout of `CUDA_MEMCPY3D` with integers where it has enums.
        let p = unsafe { p.cast::<RawMemcpy3D>().read() };
        for (what, kind) in [("src", p.srcMemoryType), ("dst", p.dstMemoryType)] {
            match kind {
                MEM_HOST | MEM_DEVICE | MEM_UNIFIED => {}
                MEM_ARRAY => {
                    return Err(not_supported(format!(
                        "{what}MemoryType is CU_MEMORYTYPE_ARRAY: the CPU driver (streamexec \
                         libcuda) has no CUDA arrays; copy linear memory (HOST, DEVICE or \
                         UNIFIED)"
                    )));
                }
                k => {
                    return Err(invalid(format!(
                        "{what}MemoryType {k} is not a CUmemorytype"
                    )));
                }
            }
        }
        if p.Depth > 1 || p.srcZ != 0 || p.dstZ != 0 {
            return Err(not_supported(format!(
                "a 3-D copy (Depth {}, srcZ {}, dstZ {}): the CPU driver (streamexec libcuda) \
                 offers 1-D and 2-D memcpy nodes; give Depth 1 and srcZ = dstZ = 0, or one \
                 node per slice",
                p.Depth, p.srcZ, p.dstZ
            )));
        }
        if p.srcLOD != 0 || p.dstLOD != 0 {
            return Err(invalid("srcLOD and dstLOD must be 0 (they are for arrays)"));
        }
        if !p.reserved0.is_null() || !p.reserved1.is_null() {
            return Err(invalid("reserved0 and reserved1 must be NULL"));
        }
        if p.WidthInBytes == 0 || p.Height == 0 || p.Depth == 0 {
            return Err(invalid(format!(
                "WidthInBytes {}, Height {}, Depth {}: a copy moves at least one byte (Height \
                 and Depth 1 for a 1-D copy)",
                p.WidthInBytes, p.Height, p.Depth
            )));
        }
        let end = |what: &str, kind: u32, host: u64, device: u64, x: usize, y: usize, pitch| {
            let base = if kind == MEM_HOST { host } else { device };
            if base == 0 {
                let field = if kind == MEM_HOST { "Host" } else { "Device" };
                return Err(invalid(format!("{what}{field} is NULL")));
            }
            let row = x
                .checked_add(p.WidthInBytes)
                .ok_or_else(|| invalid(format!("{what}XInBytes + WidthInBytes overflows")))?;
            if (p.Height > 1 || y > 0) && pitch < row {
                return Err(invalid(format!(
                    "{what}Pitch {pitch} is less than {what}XInBytes + WidthInBytes ({row})"
                )));
            }
            let start = (y as u64)
                .checked_mul(pitch as u64)
                .and_then(|o| o.checked_add(x as u64))
                .and_then(|o| base.checked_add(o))
                .ok_or_else(|| invalid(format!("{what}: the start address overflows")))?;
            Ok(End { kind, start, pitch })
        };
        let dst = end(
            "dst",
            p.dstMemoryType,
            p.dstHost as u64,
            p.dstDevice,
            p.dstXInBytes,
            p.dstY,
            p.dstPitch,
        )?;
        let src = end(
            "src",
            p.srcMemoryType,
            p.srcHost as u64,
            p.srcDevice,
            p.srcXInBytes,
            p.srcY,
            p.srcPitch,
        )?;
        let mut node = MemcpyNode {
            ctx,
            dst,
            src,
            width: p.WidthInBytes,
            height: p.Height,
            mem_ctx: (None, None),
        };
        let ready = node.prepare()?;
        let owner = |s: &Side| match s {
            Side::Device(r) => Some(r.ctx),
            Side::Host => None,
        };
        node.mem_ctx = (owner(&ready.dst.0), owner(&ready.src.0));
        Ok(node)
    }

    /// Bytes from the first to the last byte of an end.
    fn span(&self, e: &End) -> CuResult<usize> {
        (self.height - 1)
            .checked_mul(e.pitch)
            .and_then(|s| s.checked_add(self.width))
            .ok_or_else(|| invalid("Height * pitch overflows"))
    }

    fn prepare(&self) -> CuResult<ReadyCopy> {
        let resolve_end = |what: &str, e: End| -> CuResult<(Side, End)> {
            let n = self.span(&e)?;
            let side = if e.kind == MEM_DEVICE {
                Side::Device(resolve(e.start, n as u64, &format!("{what}Device"))?)
            } else {
                // HOST memory the address map holds (cuMemHostAlloc) is used through it;
                // UNIFIED addresses are whatever the map says.
                side(e.start, n, what)?
            };
            Ok((side, e))
        };
        Ok(ReadyCopy {
            dst: resolve_end("dst", self.dst)?,
            src: resolve_end("src", self.src)?,
            width: self.width,
            height: self.height,
        })
    }
}

/// One node of a graph.
pub(crate) struct Node {
    handle: usize,
    graph: usize,
    deps: Vec<usize>,
    op: Op,
}

/// A graph: its nodes in the order they were added.
pub(crate) struct Graph {
    handle: usize,
    nodes: Mutex<Vec<Arc<Node>>>,
}

/// An executable graph.
pub(crate) struct Exec {
    /// The operations, in the order a launch enqueues them.
    steps: Mutex<Vec<Op>>,
    /// For each node of the graph it was made from: its step (`None`: a child-graph node).
    node_at: HashMap<usize, Option<usize>>,
    /// The context every node runs in (`None`: no node runs in a context).
    ctx: Option<usize>,
    /// Done when the last launch is done (the next one waits for it); held while launching,
    /// so launches of one executable graph are ordered.
    last: Mutex<Option<Event>>,
}

fn graph(h: CUgraph) -> CuResult<Arc<Graph>> {
    driver()?
        .graphs
        .get(h as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live graph", h as usize)))
}

fn node(h: CUgraphNode) -> CuResult<Arc<Node>> {
    driver()?
        .nodes
        .get(h as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live graph node", h as usize)))
}

fn exec(h: CUgraphExec) -> CuResult<Arc<Exec>> {
    driver()?
        .execs
        .get(h as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live executable graph", h as usize)))
}

/// The live context `ctx` a memset or memcpy node runs in.
fn node_context(ctx: CUcontext) -> CuResult<usize> {
    if ctx.is_null() {
        return Err(invalid(
            "ctx is NULL: pass the context the node runs in (cuCtxGetCurrent)",
        ));
    }
    Ok(driver()?.context(ctx as usize)?.handle)
}

/// `nodes` in a topological order: dependencies first, else in the order they were added.
fn topological(nodes: &[Arc<Node>]) -> CuResult<Vec<Arc<Node>>> {
    let at: HashMap<usize, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.handle, i))
        .collect();
    let mut waiting = vec![0usize; nodes.len()];
    let mut dependents = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for d in &n.deps {
            let j = *at.get(d).ok_or_else(|| {
                invalid(format!(
                    "node {:#x} depends on {d:#x}, which is not in its graph",
                    n.handle
                ))
            })?;
            waiting[i] += 1;
            dependents[j].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..nodes.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(nodes[i].clone());
        for &k in &dependents[i] {
            waiting[k] -= 1;
            if waiting[k] == 0 {
                ready.push(Reverse(k));
            }
        }
    }
    if order.len() != nodes.len() {
        return Err(invalid(format!(
            "the graph has a cycle through {} of its nodes; a graph must be acyclic",
            nodes.len() - order.len()
        )));
    }
    Ok(order)
}

/// The operations of `g` in a topological order, child graphs flattened; and for each node of
/// `g`, its operation's index (`None` for a child-graph node).
type Flat = (Vec<Op>, HashMap<usize, Option<usize>>);

fn flatten(g: &Graph) -> CuResult<Flat> {
    let nodes = g.nodes.lock().clone();
    let (mut ops, mut at) = (Vec::with_capacity(nodes.len()), HashMap::new());
    for n in topological(&nodes)? {
        match &n.op {
            Op::Child(inner) => {
                at.insert(n.handle, None);
                ops.extend(inner.iter().cloned());
            }
            op => {
                at.insert(n.handle, Some(ops.len()));
                ops.push(op.clone());
            }
        }
    }
    Ok((ops, at))
}

/// Adds a node doing `op()` to graph `hGraph` after `dependencies`, and writes its handle.
///
/// # Safety
/// `ph` is null or valid for a write; `deps` is null or holds `n` handles.
unsafe fn add(
    ph: *mut CUgraphNode,
    hGraph: CUgraph,
    deps: *const CUgraphNode,
    n: usize,
    op: impl FnOnce() -> CuResult<Op>,
) -> CuResult<()> {
    let drv = driver()?;
    non_null(ph, "phGraphNode")?;
    let g = graph(hGraph)?;
    if n > 0 && deps.is_null() {
        return Err(invalid(format!(
            "dependencies is NULL and numDependencies is {n}"
        )));
    }
    let deps: Vec<usize> = if n == 0 {
        Vec::new()
    } else {
        // SAFETY: non-null, `n` handles (the caller's contract).
        unsafe { std::slice::from_raw_parts(deps, n) }
            .iter()
            .map(|&d| d as usize)
            .collect()
    };
    let op = op()?;
    let mut nodes = g.nodes.lock();
    let mut seen = HashSet::new();
    for (i, &d) in deps.iter().enumerate() {
        let dep = drv.nodes.get(d).ok_or_else(|| {
            invalid(format!(
                "dependencies[{i}] = {d:#x} is not a live graph node"
            ))
        })?;
        if dep.graph != g.handle {
            return Err(invalid(format!(
                "dependencies[{i}] = {d:#x} is a node of graph {:#x}, not of graph {:#x}: a \
                 node depends only on nodes of its own graph",
                dep.graph, g.handle
            )));
        }
        if !seen.insert(d) {
            return Err(invalid(format!(
                "dependencies[{i}] = {d:#x} is named twice"
            )));
        }
    }
    let handle = drv.nodes.reserve();
    let node = Arc::new(Node {
        handle,
        graph: g.handle,
        deps,
        op,
    });
    drv.nodes.insert(handle, node.clone());
    nodes.push(node);
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(ph, handle as CUgraphNode, "phGraphNode") }
}

/// `CUDA_KERNEL_NODE_PARAMS` (v1, or v2 with its `kern` field) as read from the caller.
struct KernelParams {
    func: cudarc::driver::sys::CUfunction,
    kern: bool,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

impl KernelParams {
    /// # Safety
    /// `p` is null or valid for a read.
    unsafe fn v1(p: *const CUDA_KERNEL_NODE_PARAMS_v1) -> CuResult<KernelParams> {
        non_null(p, "nodeParams")?;
        // SAFETY: non-null, valid for a read (the caller's contract); no enum fields.
        let p = unsafe { p.read() };
        Ok(KernelParams {
            func: p.func,
            kern: false,
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            kernel_params: p.kernelParams,
            extra: p.extra,
        })
    }

    /// # Safety
    /// `p` is null or valid for a read.
    unsafe fn v2(p: *const CUDA_KERNEL_NODE_PARAMS_v2) -> CuResult<KernelParams> {
        non_null(p, "nodeParams")?;
        // SAFETY: non-null, valid for a read (the caller's contract); no enum fields.
        let p = unsafe { p.read() };
        Ok(KernelParams {
            func: p.func,
            kern: !p.kern.is_null(),
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            kernel_params: p.kernelParams,
            extra: p.extra,
        })
    }

    /// The checked launch (arguments copied now).
    ///
    /// # Safety
    /// `kernelParams` or `extra` are valid as for `cuLaunchKernel`.
    unsafe fn launch(&self) -> CuResult<KernelLaunch> {
        if self.func.is_null() {
            if self.kern {
                return Err(not_supported(
                    "a kernel node with a CUkernel (kern) instead of a CUfunction: the CPU \
                     driver (streamexec libcuda) has no cuLibrary API; set func \
                     (cuModuleGetFunction)",
                ));
            }
            return Err(invalid("nodeParams->func is NULL"));
        }
        let func = function_any(self.func)?;
        // SAFETY: the caller's contract.
        unsafe {
            KernelLaunch::new(
                func,
                self.grid,
                self.block,
                self.shared,
                self.kernel_params,
                self.extra,
            )
        }
    }
}

/// `cuGraphCreate`: `flags` must be 0.
///
/// # Safety
/// `phGraph` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphCreate(phGraph: *mut CUgraph, flags: c_uint) -> CUresult {
    call("cuGraphCreate", || {
        let drv = driver()?;
        non_null(phGraph, "phGraph")?;
        if flags != 0 {
            return Err(invalid(format!("flags must be 0, got {flags:#x}")));
        }
        let handle = drv.graphs.reserve();
        drv.graphs.insert(
            handle,
            Arc::new(Graph {
                handle,
                nodes: Mutex::new(Vec::new()),
            }),
        );
        // SAFETY: the caller's out-pointer (checked non-null above).
        unsafe { put(phGraph, handle as CUgraph, "phGraph") }
    })
}

/// `cuGraphDestroy`: the graph and its nodes; executable graphs made from it live on.
#[unsafe(no_mangle)]
pub extern "C" fn cuGraphDestroy(hGraph: CUgraph) -> CUresult {
    call("cuGraphDestroy", || {
        let drv = driver()?;
        let g = drv
            .graphs
            .remove(hGraph as usize)
            .ok_or_else(|| invalid(format!("{:#x} is not a live graph", hGraph as usize)))?;
        for n in g.nodes.lock().drain(..) {
            drv.nodes.remove(n.handle);
        }
        Ok(())
    })
}

/// `cuGraphAddKernelNode_v2` (CUDA 12's `cuGraphAddKernelNode`): checked as `cuLaunchKernel`
/// checks a launch; the argument values are copied now. The node runs in `func`'s context
/// (`ctx` is ignored when `func` is set, as documented); `kern` alone (a `CUkernel` of the
/// library API) is refused.
///
/// # Safety
/// Pointers are null or valid; `nodeParams` as for `cuLaunchKernel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddKernelNode_v2(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CUresult {
    call("cuGraphAddKernelNode_v2", || {
        let op = || {
            // SAFETY: the caller's contract.
            let launch = unsafe { KernelParams::v2(nodeParams)?.launch()? };
            Ok(Op::Kernel(Arc::new(launch)))
        };
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddKernelNode`: the CUDA 11 entry point, with `CUDA_KERNEL_NODE_PARAMS_v1` (no
/// `kern`, no `ctx`), as NVIDIA's driver keeps it for programs built with CUDA 11.
///
/// # Safety
/// As `cuGraphAddKernelNode_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddKernelNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult {
    call("cuGraphAddKernelNode", || {
        let op = || {
            // SAFETY: the caller's contract.
            let launch = unsafe { KernelParams::v1(nodeParams)?.launch()? };
            Ok(Op::Kernel(Arc::new(launch)))
        };
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddMemsetNode`: elements of 1, 2 or 4 bytes, `height` rows `pitch` bytes apart,
/// in context `ctx`; `value` is cut to the element size.
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddMemsetNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
    ctx: CUcontext,
) -> CUresult {
    call("cuGraphAddMemsetNode", || {
        let op = || {
            let ctx = node_context(ctx)?;
            // SAFETY: the caller's contract.
            let node = unsafe { MemsetNode::new(memsetParams, ctx)? };
            Ok(Op::Memset(Arc::new(node)))
        };
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddMemcpyNode`: 1-D and 2-D copies between `CU_MEMORYTYPE_HOST`, `_DEVICE` and
/// `_UNIFIED` memory; arrays and 3-D copies are refused (`CUDA_ERROR_NOT_SUPPORTED`). Host
/// memory is touched when the node runs.
///
/// # Safety
/// Pointers are null or valid; host memory the copy names stays valid while the graph runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddMemcpyNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    copyParams: *const CUDA_MEMCPY3D,
    ctx: CUcontext,
) -> CUresult {
    call("cuGraphAddMemcpyNode", || {
        let op = || {
            let ctx = node_context(ctx)?;
            // SAFETY: the caller's contract.
            let node = unsafe { MemcpyNode::new(copyParams, ctx)? };
            Ok(Op::Memcpy(Arc::new(node)))
        };
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddHostNode`: `fn(userData)` runs on a host thread when the node runs; driver calls
/// from it are `CUDA_ERROR_NOT_PERMITTED`, as from a `cuLaunchHostFunc` function.
///
/// # Safety
/// Pointers are null or valid; `fn` may be called with `userData` at every launch.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddHostNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    nodeParams: *const CUDA_HOST_NODE_PARAMS,
) -> CUresult {
    call("cuGraphAddHostNode", || {
        let op = || {
            non_null(nodeParams, "nodeParams")?;
            // SAFETY: non-null, valid for a read (the caller's contract).
            let p = unsafe { nodeParams.read() };
            let f = p.fn_.ok_or_else(|| invalid("nodeParams->fn is NULL"))?;
            Ok(Op::Host {
                f,
                user: p.userData as usize,
            })
        };
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddEmptyNode`.
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddEmptyNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
) -> CUresult {
    call("cuGraphAddEmptyNode", || {
        // SAFETY: the caller's contract.
        unsafe {
            add(phGraphNode, hGraph, dependencies, numDependencies, || {
                Ok(Op::Empty)
            })
        }
    })
}

/// `cuGraphAddEventRecordNode`: records `event` when the node runs.
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddEventRecordNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    event: CUevent,
) -> CUresult {
    call("cuGraphAddEventRecordNode", || {
        let op = || Ok(Op::Record(crate::event::lookup(event)?));
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddEventWaitNode`: later nodes wait for the event's last record made before the
/// launch (an event never recorded by then is no wait, as for `cuStreamWaitEvent`).
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddEventWaitNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    event: CUevent,
) -> CUresult {
    call("cuGraphAddEventWaitNode", || {
        let op = || Ok(Op::Wait(crate::event::lookup(event)?));
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// `cuGraphAddChildGraphNode`: a clone of `childGraph` as it is now (later changes of it, or
/// destroying it, do not reach the node).
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphAddChildGraphNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    childGraph: CUgraph,
) -> CUresult {
    call("cuGraphAddChildGraphNode", || {
        let op = || Ok(Op::Child(Arc::new(flatten(&*graph(childGraph)?)?.0)));
        // SAFETY: the caller's contract.
        unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
    })
}

/// Makes an executable graph of `hGraph`.
fn instantiate(hGraph: CUgraph) -> CuResult<usize> {
    let drv = driver()?;
    let (steps, node_at) = flatten(&*graph(hGraph)?)?;
    let mut ctxs = HashSet::new();
    steps.iter().for_each(|o| o.contexts(&mut ctxs));
    if ctxs.len() > 1 {
        let mut v: Vec<_> = ctxs.into_iter().collect();
        v.sort_unstable();
        return Err(not_supported(format!(
            "the graph's nodes run in contexts {v:#x?}: the CPU driver (streamexec libcuda) \
             runs a graph in one context; make one graph per context"
        )));
    }
    let handle = drv.execs.reserve();
    drv.execs.insert(
        handle,
        Arc::new(Exec {
            steps: Mutex::new(steps),
            node_at,
            ctx: ctxs.into_iter().next(),
            last: Mutex::new(None),
        }),
    );
    Ok(handle)
}

/// Checks `cuGraphInstantiateWithFlags`' flags (`UPLOAD` only with `with_params`).
fn check_flags(flags: u64, with_params: bool) -> CuResult<()> {
    if flags & DEVICE_LAUNCH != 0 {
        return Err(not_supported(
            "CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH: the CPU driver (streamexec libcuda) \
             launches graphs from the host only",
        ));
    }
    let known = AUTO_FREE_ON_LAUNCH | USE_NODE_PRIORITY | if with_params { UPLOAD } else { 0 };
    if flags & !known != 0 {
        return Err(invalid(format!(
            "{flags:#x} is not a valid set of CUgraphInstantiate_flags here \
             (AUTO_FREE_ON_LAUNCH, USE_NODE_PRIORITY{})",
            if with_params {
                ", UPLOAD"
            } else {
                "; UPLOAD only with cuGraphInstantiateWithParams"
            }
        )));
    }
    Ok(())
}

/// `cuGraphInstantiateWithFlags`: `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH` (there are
/// no allocation nodes to free) and `_USE_NODE_PRIORITY` (one priority level) change nothing;
/// `_DEVICE_LAUNCH` is refused.
///
/// # Safety
/// `phGraphExec` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphInstantiateWithFlags(
    phGraphExec: *mut CUgraphExec,
    hGraph: CUgraph,
    flags: c_ulonglong,
) -> CUresult {
    call("cuGraphInstantiateWithFlags", || {
        driver()?;
        non_null(phGraphExec, "phGraphExec")?;
        graph(hGraph)?;
        check_flags(flags, false)?;
        let h = instantiate(hGraph)?;
        // SAFETY: the caller's out-pointer (checked non-null above).
        unsafe { put(phGraphExec, h as CUgraphExec, "phGraphExec") }
    })
}

/// `cuGraphInstantiateWithParams`: as `cuGraphInstantiateWithFlags`, and
/// `CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD` checks `hUploadStream` as `cuGraphUpload` does;
/// `hErrNode_out` is NULL and `result_out` says how instantiation went.
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphInstantiateWithParams(
    phGraphExec: *mut CUgraphExec,
    hGraph: CUgraph,
    instantiateParams: *mut CUDA_GRAPH_INSTANTIATE_PARAMS,
) -> CUresult {
    call("cuGraphInstantiateWithParams", || {
        driver()?;
        non_null(phGraphExec, "phGraphExec")?;
        non_null(instantiateParams, "instantiateParams")?;
        let p = instantiateParams;
        // SAFETY: non-null, valid (the caller's contract); only the input fields are read
        // (`result_out` may hold anything).
        let (flags, upload) = unsafe { ((*p).flags, (*p).hUploadStream) };
        let result = (|| {
            graph(hGraph)?;
            check_flags(flags, true)?;
            let h = instantiate(hGraph)?;
            if flags & UPLOAD != 0
                && let Err(e) = upload_checks(h as CUgraphExec, upload)
            {
                driver()?.execs.remove(h);
                return Err(e);
            }
            Ok(h)
        })();
        use CUgraphInstantiateResult as I;
        let outcome = match &result {
            Ok(_) => I::CUDA_GRAPH_INSTANTIATE_SUCCESS,
            Err(e) if e.detail.contains("cycle") => I::CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE,
            Err(e) if e.code == CUresult::CUDA_ERROR_NOT_SUPPORTED => {
                I::CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED
            }
            Err(_) => I::CUDA_GRAPH_INSTANTIATE_ERROR,
        };
        // SAFETY: non-null, valid for writes (the caller's contract).
        unsafe {
            (*p).hErrNode_out = std::ptr::null_mut();
            (*p).result_out = outcome;
        }
        let h = result?;
        // SAFETY: the caller's out-pointer (checked non-null above).
        unsafe { put(phGraphExec, h as CUgraphExec, "phGraphExec") }
    })
}

/// `cuGraphExecDestroy`: launches already made still run to completion.
#[unsafe(no_mangle)]
pub extern "C" fn cuGraphExecDestroy(hGraphExec: CUgraphExec) -> CUresult {
    call("cuGraphExecDestroy", || {
        driver()?
            .execs
            .remove(hGraphExec as usize)
            .map(|_| ())
            .ok_or_else(|| {
                invalid(format!(
                    "{:#x} is not a live executable graph",
                    hGraphExec as usize
                ))
            })
    })
}

impl Exec {
    /// `Ok` when the executable graph may run in context `ctx`.
    fn check_context(&self, ctx: &Context) -> CuResult<()> {
        match self.ctx {
            Some(c) if c != ctx.handle => Err(not_supported(format!(
                "the graph's nodes run in context {c:#x}, the stream belongs to context {:#x}: \
                 the CPU driver (streamexec libcuda) launches a graph into a stream of its \
                 nodes' context only",
                ctx.handle
            ))),
            _ => Ok(()),
        }
    }
}

/// What `cuGraphUpload` checks.
fn upload_checks(hGraphExec: CUgraphExec, hStream: CUstream) -> CuResult<()> {
    let x = exec(hGraphExec)?;
    let (ctx, _) = resolve_stream(hStream)?;
    x.check_context(&ctx)
}

/// `cuGraphUpload`: nothing to upload on the CPU; the executable graph and stream are checked.
#[unsafe(no_mangle)]
pub extern "C" fn cuGraphUpload(hGraphExec: CUgraphExec, hStream: CUstream) -> CUresult {
    call("cuGraphUpload", || upload_checks(hGraphExec, hStream))
}

/// `cuGraphLaunch`: the nodes in their topological order, as one operation of `hStream`, after
/// the previous launch of the same executable graph.
#[unsafe(no_mangle)]
pub extern "C" fn cuGraphLaunch(hGraphExec: CUgraphExec, hStream: CUstream) -> CUresult {
    call("cuGraphLaunch", || {
        let drv = driver()?;
        let x = exec(hGraphExec)?;
        let (ctx, s) = resolve_stream(hStream)?;
        x.check_context(&ctx)?;
        let steps = x.steps.lock().clone();
        let mut ready = Vec::with_capacity(steps.len());
        for op in &steps {
            if let Some(r) = op.prepare()? {
                ready.push(r);
            }
        }
        let done = drv.exec.create_event().map_err(|e| {
            CuErr::new(
                CUresult::CUDA_ERROR_UNKNOWN,
                format!("creating an event: {e}"),
            )
        })?;
        let mut last = x.last.lock();
        let mut failed = None;
        s.enqueue(&ctx, |se| {
            if let Some(prev) = &*last {
                se.then_wait_for(prev);
            }
            for r in &ready {
                if let Err(e) = r.issue(se) {
                    // The rest of this launch must not run: fail the stream in order.
                    let detail = format!("a graph launch stopped: {}", e.detail);
                    se.then_host_callback_with_status(move || {
                        Err(streamexec::Error::HostCallback { detail })
                    });
                    failed = Some(e);
                    break;
                }
            }
            se.then_record_event(&done);
        })?;
        *last = Some(done);
        drop(last);
        for r in &ready {
            if let Ready::Record(e) = r {
                e.mark_recorded();
            }
        }
        failed.map_or(Ok(()), Err)
    })
}

/// The step of kernel node `hNode` in `x`, else why not.
fn kernel_step(x: &Exec, hNode: CUgraphNode) -> CuResult<usize> {
    let h = hNode as usize;
    let not_kernel = |what: &str| {
        invalid(format!(
            "node {h:#x} is {what}, not a kernel node; cuGraphExecKernelNodeSetParams updates \
             kernel nodes"
        ))
    };
    match x.node_at.get(&h) {
        None => Err(invalid(format!(
            "node {h:#x} is not a node of the graph this executable graph was instantiated from"
        ))),
        Some(None) => Err(not_kernel("a child graph node")),
        Some(Some(i)) => match &x.steps.lock()[*i] {
            Op::Kernel(_) => Ok(*i),
            op => Err(not_kernel(&format!("a {} node", op.name()))),
        },
    }
}

/// Replaces kernel node `hNode` of `hGraphExec` with `p` (checked as when adding).
///
/// # Safety
/// `p`'s `kernelParams` or `extra` are valid as for `cuLaunchKernel`.
unsafe fn set_kernel(hGraphExec: CUgraphExec, hNode: CUgraphNode, p: KernelParams) -> CuResult<()> {
    let x = exec(hGraphExec)?;
    let i = kernel_step(&x, hNode)?;
    // SAFETY: the caller's contract.
    let new = unsafe { p.launch()? };
    let mut steps = x.steps.lock();
    let Op::Kernel(old) = &steps[i] else {
        return Err(invalid("the node is not a kernel node"));
    };
    if old.func.ctx != new.func.ctx {
        return Err(invalid(format!(
            "function `{}` belongs to context {:#x}, the node's function to context {:#x}: a \
             kernel node's function may not move to another context",
            new.func.entry.name, new.func.ctx, old.func.ctx
        )));
    }
    steps[i] = Op::Kernel(Arc::new(new));
    Ok(())
}

/// `cuGraphExecKernelNodeSetParams_v2` (CUDA 12's `cuGraphExecKernelNodeSetParams`): later
/// launches of `hGraphExec` use `nodeParams` (checked as when adding; the function stays in
/// its context); launches already made keep the old ones.
///
/// # Safety
/// As `cuGraphAddKernelNode_v2`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphExecKernelNodeSetParams_v2(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CUresult {
    call("cuGraphExecKernelNodeSetParams_v2", || {
        // SAFETY: the caller's contract.
        unsafe { set_kernel(hGraphExec, hNode, KernelParams::v2(nodeParams)?) }
    })
}

/// `cuGraphExecKernelNodeSetParams`: the CUDA 11 entry point, with
/// `CUDA_KERNEL_NODE_PARAMS_v1`.
///
/// # Safety
/// As `cuGraphAddKernelNode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphExecKernelNodeSetParams(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult {
    call("cuGraphExecKernelNodeSetParams", || {
        // SAFETY: the caller's contract.
        unsafe { set_kernel(hGraphExec, hNode, KernelParams::v1(nodeParams)?) }
    })
}

/// The step of node `hNode` of `x` when it is a node of type `want`, else why not.
fn step_of(x: &Exec, hNode: CUgraphNode, want: CUgraphNodeType, api: &str) -> CuResult<usize> {
    let h = hNode as usize;
    let step = x.node_at.get(&h).ok_or_else(|| {
        invalid(format!(
            "node {h:#x} is not a node of the graph this executable graph was instantiated from"
        ))
    })?;
    let kind = step.map_or(CUgraphNodeType::CU_GRAPH_NODE_TYPE_GRAPH, |i| {
        x.steps.lock()[i].kind()
    });
    match step {
        Some(i) if kind == want => Ok(*i),
        _ => Err(invalid(format!(
            "node {h:#x} is a node of type {kind:?}; {api} updates nodes of type {want:?}"
        ))),
    }
}

/// `cuGraphExecMemsetNodeSetParams`: later launches set `memsetParams`. As CUDA requires, the
/// node's and the new memset are 1-D, and the memory is of the same context as before.
///
/// # Safety
/// Pointers are null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphExecMemsetNodeSetParams(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
    ctx: CUcontext,
) -> CUresult {
    call("cuGraphExecMemsetNodeSetParams", || {
        let x = exec(hGraphExec)?;
        let i = step_of(
            &x,
            hNode,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMSET,
            "cuGraphExecMemsetNodeSetParams",
        )?;
        // SAFETY: the caller's contract.
        let new = unsafe { MemsetNode::new(memsetParams, node_context(ctx)?)? };
        let mut steps = x.steps.lock();
        let Op::Memset(old) = &steps[i] else {
            return Err(invalid("the node is not a memset node"));
        };
        if old.height != 1 || new.height != 1 {
            return Err(invalid(
                "only 1-D memset nodes (height 1) can be updated in an executable graph",
            ));
        }
        if new.ctx != old.ctx || new.mem_ctx != old.mem_ctx {
            return Err(invalid(
                "the node's context and its memory's context may not change",
            ));
        }
        steps[i] = Op::Memset(Arc::new(new));
        Ok(())
    })
}

/// `cuGraphExecMemcpyNodeSetParams`: later launches copy as `copyParams` says. As CUDA
/// requires, the node's and the new copy are 1-D, and each end's memory is of the same
/// context (or host memory) as before.
///
/// # Safety
/// Pointers are null or valid; host memory stays valid while the graph runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphExecMemcpyNodeSetParams(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    copyParams: *const CUDA_MEMCPY3D,
    ctx: CUcontext,
) -> CUresult {
    call("cuGraphExecMemcpyNodeSetParams", || {
        let x = exec(hGraphExec)?;
        let i = step_of(
            &x,
            hNode,
            CUgraphNodeType::CU_GRAPH_NODE_TYPE_MEMCPY,
            "cuGraphExecMemcpyNodeSetParams",
        )?;
        // SAFETY: the caller's contract.
        let new = unsafe { MemcpyNode::new(copyParams, node_context(ctx)?)? };
        let mut steps = x.steps.lock();
        let Op::Memcpy(old) = &steps[i] else {
            return Err(invalid("the node is not a memcpy node"));
        };
        if old.height != 1 || new.height != 1 {
            return Err(invalid(
                "only 1-D memcpy nodes (Height 1) can be updated in an executable graph",
            ));
        }
        if new.ctx != old.ctx || new.mem_ctx != old.mem_ctx {
            return Err(invalid(
                "the node's context and the contexts of its source and destination memory may \
                 not change",
            ));
        }
        steps[i] = Op::Memcpy(Arc::new(new));
        Ok(())
    })
}

/// Writes `list` for the caller as CUDA's getters do: with `out` NULL only its length;
/// else `*num` entries (NULL past the end), and `*num` becomes how many were written.
///
/// # Safety
/// `num` is null or valid; `out` is null or valid for `*num` writes.
unsafe fn put_nodes(list: &[usize], out: *mut CUgraphNode, num: *mut usize) -> CuResult<()> {
    non_null(num, "the count pointer")?;
    if out.is_null() {
        // SAFETY: non-null (checked), the caller's contract.
        unsafe { num.write(list.len()) };
        return Ok(());
    }
    // SAFETY: as above.
    let cap = unsafe { num.read() };
    for i in 0..cap {
        let h = list.get(i).copied().unwrap_or(0) as CUgraphNode;
        // SAFETY: `out` holds `cap` entries (the caller's contract).
        unsafe { out.add(i).write(h) };
    }
    // SAFETY: as above.
    unsafe { num.write(cap.min(list.len())) };
    Ok(())
}

/// `cuGraphGetNodes`: in the order they were added.
///
/// # Safety
/// As CUDA's: `nodes` is null or holds `*numNodes` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphGetNodes(
    hGraph: CUgraph,
    nodes: *mut CUgraphNode,
    numNodes: *mut usize,
) -> CUresult {
    call("cuGraphGetNodes", || {
        let list: Vec<usize> = graph(hGraph)?
            .nodes
            .lock()
            .iter()
            .map(|n| n.handle)
            .collect();
        // SAFETY: the caller's contract.
        unsafe { put_nodes(&list, nodes, numNodes) }
    })
}

/// `cuGraphGetRootNodes`: the nodes without dependencies, in the order they were added.
///
/// # Safety
/// As CUDA's: `rootNodes` is null or holds `*numRootNodes` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphGetRootNodes(
    hGraph: CUgraph,
    rootNodes: *mut CUgraphNode,
    numRootNodes: *mut usize,
) -> CUresult {
    call("cuGraphGetRootNodes", || {
        let list: Vec<usize> = graph(hGraph)?
            .nodes
            .lock()
            .iter()
            .filter(|n| n.deps.is_empty())
            .map(|n| n.handle)
            .collect();
        // SAFETY: the caller's contract.
        unsafe { put_nodes(&list, rootNodes, numRootNodes) }
    })
}

/// `cuGraphNodeGetDependencies`: in the order they were given.
///
/// # Safety
/// As CUDA's: `dependencies` is null or holds `*numDependencies` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphNodeGetDependencies(
    hNode: CUgraphNode,
    dependencies: *mut CUgraphNode,
    numDependencies: *mut usize,
) -> CUresult {
    call("cuGraphNodeGetDependencies", || {
        let n = node(hNode)?;
        // SAFETY: the caller's contract.
        unsafe { put_nodes(&n.deps, dependencies, numDependencies) }
    })
}

/// `cuGraphNodeGetType`.
///
/// # Safety
/// `type_` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphNodeGetType(
    hNode: CUgraphNode,
    type_: *mut CUgraphNodeType,
) -> CUresult {
    call("cuGraphNodeGetType", || {
        let n = node(hNode)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(type_, n.op.kind(), "type") }
    })
}

/// The kernel launch of kernel node `hNode`.
fn kernel_of(hNode: CUgraphNode) -> CuResult<Arc<KernelLaunch>> {
    let n = node(hNode)?;
    match &n.op {
        Op::Kernel(k) => Ok(k.clone()),
        op => Err(invalid(format!(
            "node {:#x} is a {} node, not a kernel node",
            n.handle,
            op.name()
        ))),
    }
}

/// `cuGraphKernelNodeGetParams_v2`: `kernelParams` points at the node's copies of the argument
/// values (owned by the node: valid while it lives), `extra` is NULL, `kern` NULL and `ctx`
/// the function's context.
///
/// # Safety
/// `nodeParams` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphKernelNodeGetParams_v2(
    hNode: CUgraphNode,
    nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v2,
) -> CUresult {
    call("cuGraphKernelNodeGetParams_v2", || {
        let k = kernel_of(hNode)?;
        let p = CUDA_KERNEL_NODE_PARAMS_v2 {
            func: k.func.handle as cudarc::driver::sys::CUfunction,
            gridDimX: k.grid[0],
            gridDimY: k.grid[1],
            gridDimZ: k.grid[2],
            blockDimX: k.block[0],
            blockDimY: k.block[1],
            blockDimZ: k.block[2],
            sharedMemBytes: k.shared,
            kernelParams: k.kernel_params(),
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: k.func.ctx as CUcontext,
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(nodeParams, p, "nodeParams") }
    })
}

/// `cuGraphKernelNodeGetParams`: the CUDA 11 entry point, with `CUDA_KERNEL_NODE_PARAMS_v1`.
///
/// # Safety
/// `nodeParams` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGraphKernelNodeGetParams(
    hNode: CUgraphNode,
    nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult {
    call("cuGraphKernelNodeGetParams", || {
        let k = kernel_of(hNode)?;
        let p = CUDA_KERNEL_NODE_PARAMS_v1 {
            func: k.func.handle as cudarc::driver::sys::CUfunction,
            gridDimX: k.grid[0],
            gridDimY: k.grid[1],
            gridDimZ: k.grid[2],
            blockDimX: k.block[0],
            blockDimY: k.block[1],
            blockDimZ: k.block[2],
            sharedMemBytes: k.shared,
            kernelParams: k.kernel_params(),
            extra: std::ptr::null_mut(),
        };
        // SAFETY: the caller's out-pointer.
        unsafe { put(nodeParams, p, "nodeParams") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(deps: &[&[usize]]) -> Vec<Arc<Node>> {
        deps.iter()
            .enumerate()
            .map(|(i, d)| {
                Arc::new(Node {
                    handle: 100 + i,
                    graph: 1,
                    deps: d.iter().map(|&j| 100 + j).collect(),
                    op: Op::Empty,
                })
            })
            .collect()
    }

    fn order(deps: &[&[usize]]) -> CuResult<Vec<usize>> {
        Ok(topological(&nodes(deps))?
            .iter()
            .map(|n| n.handle - 100)
            .collect())
    }

    #[test]
    fn dependencies_first_else_the_order_of_adding() {
        // A diamond given as D(B, C), B(A), C(A), A: dependencies first.
        assert_eq!(order(&[&[1, 2], &[3], &[3], &[]]).unwrap(), [3, 1, 2, 0]);
        assert_eq!(order(&[&[], &[], &[0]]).unwrap(), [0, 1, 2]);
        assert_eq!(order(&[]).unwrap(), Vec::<usize>::new());
    }

    #[test]
    fn a_cycle_or_a_foreign_dependency_is_refused() {
        // The API cannot build either; instantiation refuses them all the same.
        let e = order(&[&[], &[2], &[1]]).unwrap_err();
        assert_eq!(e.code, CUresult::CUDA_ERROR_INVALID_VALUE);
        assert!(e.detail.contains("cycle through 2"), "{}", e.detail);
        let e = order(&[&[7]]).unwrap_err();
        assert!(e.detail.contains("not in its graph"), "{}", e.detail);
    }
}
