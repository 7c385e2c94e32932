//! Building a graph (`cuGraphCreate`, `cuGraphAdd*Node`, `cuGraphDestroy`) and reading it
//! back (`cuGraphGetNodes`, `cuGraphNodeGetDependencies`, `cuGraphKernelNodeGetParams`, ...).

use std::collections::HashSet;
use std::ffi::c_uint;
use std::sync::Arc;

use cudarc::driver::sys::{
    CUDA_HOST_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v1, CUDA_KERNEL_NODE_PARAMS_v2, CUDA_MEMCPY3D,
    CUDA_MEMSET_NODE_PARAMS, CUcontext, CUevent, CUfunction, CUgraph, CUgraphNode, CUgraphNodeType,
};
use parking_lot::Mutex;

use super::nodes::{KernelParams, MemcpyNode, MemsetNode, Op};
use super::{GRAPHS, Graph, NODES, Node, flatten, graph, node, node_context};
use crate::driver::driver;
use crate::entry::{CuResult, invalid, non_null, put};
use crate::event;
use crate::launch::KernelLaunch;

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
    driver()?;
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
        let dep = NODES.get(d).ok_or_else(|| {
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
    let handle = NODES.reserve();
    let node = Arc::new(Node {
        handle,
        graph: g.handle,
        deps,
        op,
    });
    NODES.insert(handle, node.clone());
    nodes.push(node);
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(ph, handle as CUgraphNode, "phGraphNode") }
}

/// `cuGraphCreate`: `flags` must be 0.
///
/// # Safety
/// `phGraph` is null or valid for a write.
pub(crate) unsafe fn cuGraphCreate(phGraph: *mut CUgraph, flags: c_uint) -> CuResult<()> {
    driver()?;
    non_null(phGraph, "phGraph")?;
    if flags != 0 {
        return Err(invalid(format!("flags must be 0, got {flags:#x}")));
    }
    let handle = GRAPHS.reserve();
    GRAPHS.insert(
        handle,
        Arc::new(Graph {
            handle,
            nodes: Mutex::new(Vec::new()),
        }),
    );
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(phGraph, handle as CUgraph, "phGraph") }
}

/// `cuGraphDestroy`: the graph and its nodes; executable graphs made from it live on.
pub(crate) fn cuGraphDestroy(hGraph: CUgraph) -> CuResult<()> {
    driver()?;
    let g = GRAPHS
        .remove(hGraph as usize)
        .ok_or_else(|| invalid(format!("{:#x} is not a live graph", hGraph as usize)))?;
    for n in g.nodes.lock().drain(..) {
        NODES.remove(n.handle);
    }
    Ok(())
}

/// `cuGraphAddKernelNode_v2` (CUDA 12's `cuGraphAddKernelNode`): checked as `cuLaunchKernel`
/// checks a launch; the argument values are copied now. The node runs in `func`'s context
/// (`ctx` is ignored when `func` is set, as documented); `kern` alone (a `CUkernel` of the
/// library API) is refused.
///
/// # Safety
/// Pointers are null or valid; `nodeParams` as for `cuLaunchKernel`.
pub(crate) unsafe fn cuGraphAddKernelNode_v2(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CuResult<()> {
    let op = || {
        // SAFETY: the caller's contract.
        let launch = unsafe { KernelParams::v2(nodeParams)?.launch()? };
        Ok(Op::Kernel(Arc::new(launch)))
    };
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
}

/// `cuGraphAddKernelNode`: the CUDA 11 entry point, with `CUDA_KERNEL_NODE_PARAMS_v1` (no
/// `kern`, no `ctx`), as NVIDIA's driver keeps it for programs built with CUDA 11.
///
/// # Safety
/// As `cuGraphAddKernelNode_v2`.
pub(crate) unsafe fn cuGraphAddKernelNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CuResult<()> {
    let op = || {
        // SAFETY: the caller's contract.
        let launch = unsafe { KernelParams::v1(nodeParams)?.launch()? };
        Ok(Op::Kernel(Arc::new(launch)))
    };
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
}

/// `cuGraphAddMemsetNode`: elements of 1, 2 or 4 bytes, `height` rows `pitch` bytes apart,
/// in context `ctx`; `value` is cut to the element size.
///
/// # Safety
/// Pointers are null or valid.
pub(crate) unsafe fn cuGraphAddMemsetNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
    ctx: CUcontext,
) -> CuResult<()> {
    let op = || {
        let ctx = node_context(ctx)?;
        // SAFETY: the caller's contract.
        let node = unsafe { MemsetNode::new(memsetParams, ctx)? };
        Ok(Op::Memset(Arc::new(node)))
    };
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
}

/// `cuGraphAddMemcpyNode`: 1-D and 2-D copies between `CU_MEMORYTYPE_HOST`, `_DEVICE` and
/// `_UNIFIED` memory; arrays and 3-D copies are refused (`CUDA_ERROR_NOT_SUPPORTED`). Host
/// memory is touched when the node runs.
///
/// # Safety
/// Pointers are null or valid; host memory the copy names stays valid while the graph runs.
pub(crate) unsafe fn cuGraphAddMemcpyNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    copyParams: *const CUDA_MEMCPY3D,
    ctx: CUcontext,
) -> CuResult<()> {
    let op = || {
        let ctx = node_context(ctx)?;
        // SAFETY: the caller's contract.
        let node = unsafe { MemcpyNode::new(copyParams, ctx)? };
        Ok(Op::Memcpy(Arc::new(node)))
    };
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
}

/// `cuGraphAddHostNode`: `fn(userData)` runs on a host thread when the node runs; driver calls
/// from it are `CUDA_ERROR_NOT_PERMITTED`, as from a `cuLaunchHostFunc` function.
///
/// # Safety
/// Pointers are null or valid; `fn` may be called with `userData` at every launch.
pub(crate) unsafe fn cuGraphAddHostNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    nodeParams: *const CUDA_HOST_NODE_PARAMS,
) -> CuResult<()> {
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
}

/// `cuGraphAddEmptyNode`.
///
/// # Safety
/// Pointers are null or valid.
pub(crate) unsafe fn cuGraphAddEmptyNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe {
        add(phGraphNode, hGraph, dependencies, numDependencies, || {
            Ok(Op::Empty)
        })
    }
}

/// `cuGraphAddEventRecordNode`: records `event` when the node runs.
///
/// # Safety
/// Pointers are null or valid.
pub(crate) unsafe fn cuGraphAddEventRecordNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    event: CUevent,
) -> CuResult<()> {
    let op = || Ok(Op::Record(event::lookup(event)?));
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
}

/// `cuGraphAddEventWaitNode`: later nodes wait for the event's last record made before the
/// launch (an event never recorded by then is no wait, as for `cuStreamWaitEvent`).
///
/// # Safety
/// Pointers are null or valid.
pub(crate) unsafe fn cuGraphAddEventWaitNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    event: CUevent,
) -> CuResult<()> {
    let op = || Ok(Op::Wait(event::lookup(event)?));
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
}

/// `cuGraphAddChildGraphNode`: a clone of `childGraph` as it is now (later changes of it, or
/// destroying it, do not reach the node).
///
/// # Safety
/// Pointers are null or valid.
pub(crate) unsafe fn cuGraphAddChildGraphNode(
    phGraphNode: *mut CUgraphNode,
    hGraph: CUgraph,
    dependencies: *const CUgraphNode,
    numDependencies: usize,
    childGraph: CUgraph,
) -> CuResult<()> {
    let op = || Ok(Op::Child(Arc::new(flatten(&*graph(childGraph)?)?.0)));
    // SAFETY: the caller's contract.
    unsafe { add(phGraphNode, hGraph, dependencies, numDependencies, op) }
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
pub(crate) unsafe fn cuGraphGetNodes(
    hGraph: CUgraph,
    nodes: *mut CUgraphNode,
    numNodes: *mut usize,
) -> CuResult<()> {
    let list: Vec<usize> = graph(hGraph)?
        .nodes
        .lock()
        .iter()
        .map(|n| n.handle)
        .collect();
    // SAFETY: the caller's contract.
    unsafe { put_nodes(&list, nodes, numNodes) }
}

/// `cuGraphGetRootNodes`: the nodes without dependencies, in the order they were added.
///
/// # Safety
/// As CUDA's: `rootNodes` is null or holds `*numRootNodes` entries.
pub(crate) unsafe fn cuGraphGetRootNodes(
    hGraph: CUgraph,
    rootNodes: *mut CUgraphNode,
    numRootNodes: *mut usize,
) -> CuResult<()> {
    let list: Vec<usize> = graph(hGraph)?
        .nodes
        .lock()
        .iter()
        .filter(|n| n.deps.is_empty())
        .map(|n| n.handle)
        .collect();
    // SAFETY: the caller's contract.
    unsafe { put_nodes(&list, rootNodes, numRootNodes) }
}

/// `cuGraphNodeGetDependencies`: in the order they were given.
///
/// # Safety
/// As CUDA's: `dependencies` is null or holds `*numDependencies` entries.
pub(crate) unsafe fn cuGraphNodeGetDependencies(
    hNode: CUgraphNode,
    dependencies: *mut CUgraphNode,
    numDependencies: *mut usize,
) -> CuResult<()> {
    let n = node(hNode)?;
    // SAFETY: the caller's contract.
    unsafe { put_nodes(&n.deps, dependencies, numDependencies) }
}

/// `cuGraphNodeGetType`.
///
/// # Safety
/// `type_` is null or valid for a write.
pub(crate) unsafe fn cuGraphNodeGetType(
    hNode: CUgraphNode,
    type_: *mut CUgraphNodeType,
) -> CuResult<()> {
    let n = node(hNode)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(type_, n.op.kind(), "type") }
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
pub(crate) unsafe fn cuGraphKernelNodeGetParams_v2(
    hNode: CUgraphNode,
    nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v2,
) -> CuResult<()> {
    let k = kernel_of(hNode)?;
    let p = CUDA_KERNEL_NODE_PARAMS_v2 {
        func: k.func.handle as CUfunction,
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
}

/// `cuGraphKernelNodeGetParams`: the CUDA 11 entry point, with `CUDA_KERNEL_NODE_PARAMS_v1`.
///
/// # Safety
/// `nodeParams` is null or valid for a write.
pub(crate) unsafe fn cuGraphKernelNodeGetParams(
    hNode: CUgraphNode,
    nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v1,
) -> CuResult<()> {
    let k = kernel_of(hNode)?;
    let p = CUDA_KERNEL_NODE_PARAMS_v1 {
        func: k.func.handle as CUfunction,
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
}
