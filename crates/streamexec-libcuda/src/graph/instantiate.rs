//! Executable graphs: instantiation (`cuGraphInstantiateWithFlags`/`WithParams`: the nodes in
//! a topological order, child graphs flattened, one context), `cuGraphExecDestroy`, and the
//! node updates of an executable graph (`cuGraphExec*NodeSetParams`), which reach later
//! launches only.

use std::collections::HashSet;
use std::ffi::c_ulonglong;
use std::sync::Arc;

use cudarc::driver::sys::{
    CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v1, CUDA_KERNEL_NODE_PARAMS_v2,
    CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS, CUcontext, CUgraph, CUgraphExec,
    CUgraphInstantiateResult, CUgraphNode, CUgraphNodeType, CUresult,
};
use parking_lot::Mutex;

use super::launch::upload_checks;
use super::nodes::{KernelParams, MemcpyNode, MemsetNode, Op, not_supported};
use super::{EXECS, Exec, exec, flatten, graph, node_context};
use crate::driver::driver;
use crate::entry::{CuResult, invalid, non_null, put};

/// `CUDA_GRAPH_INSTANTIATE_FLAG_*`.
const AUTO_FREE_ON_LAUNCH: u64 = 1;
const UPLOAD: u64 = 2;
const DEVICE_LAUNCH: u64 = 4;
const USE_NODE_PRIORITY: u64 = 8;

/// Makes an executable graph of `hGraph`.
fn instantiate(hGraph: CUgraph) -> CuResult<usize> {
    driver()?;
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
    let handle = EXECS.reserve();
    EXECS.insert(
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
pub(crate) unsafe fn cuGraphInstantiateWithFlags(
    phGraphExec: *mut CUgraphExec,
    hGraph: CUgraph,
    flags: c_ulonglong,
) -> CuResult<()> {
    driver()?;
    non_null(phGraphExec, "phGraphExec")?;
    graph(hGraph)?;
    check_flags(flags, false)?;
    let h = instantiate(hGraph)?;
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(phGraphExec, h as CUgraphExec, "phGraphExec") }
}

/// `cuGraphInstantiateWithParams`: as `cuGraphInstantiateWithFlags`, and
/// `CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD` checks `hUploadStream` as `cuGraphUpload` does;
/// `hErrNode_out` is NULL and `result_out` says how instantiation went.
///
/// # Safety
/// Pointers are null or valid.
pub(crate) unsafe fn cuGraphInstantiateWithParams(
    phGraphExec: *mut CUgraphExec,
    hGraph: CUgraph,
    instantiateParams: *mut CUDA_GRAPH_INSTANTIATE_PARAMS,
) -> CuResult<()> {
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
            EXECS.remove(h);
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
}

/// `cuGraphExecDestroy`: launches already made still run to completion.
pub(crate) fn cuGraphExecDestroy(hGraphExec: CUgraphExec) -> CuResult<()> {
    driver()?;
    EXECS
        .remove(hGraphExec as usize)
        .map(|_| ())
        .ok_or_else(|| {
            invalid(format!(
                "{:#x} is not a live executable graph",
                hGraphExec as usize
            ))
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
pub(crate) unsafe fn cuGraphExecKernelNodeSetParams_v2(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe { set_kernel(hGraphExec, hNode, KernelParams::v2(nodeParams)?) }
}

/// `cuGraphExecKernelNodeSetParams`: the CUDA 11 entry point, with
/// `CUDA_KERNEL_NODE_PARAMS_v1`.
///
/// # Safety
/// As `cuGraphAddKernelNode`.
pub(crate) unsafe fn cuGraphExecKernelNodeSetParams(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe { set_kernel(hGraphExec, hNode, KernelParams::v1(nodeParams)?) }
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
pub(crate) unsafe fn cuGraphExecMemsetNodeSetParams(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
    ctx: CUcontext,
) -> CuResult<()> {
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
}

/// `cuGraphExecMemcpyNodeSetParams`: later launches copy as `copyParams` says. As CUDA
/// requires, the node's and the new copy are 1-D, and each end's memory is of the same
/// context (or host memory) as before.
///
/// # Safety
/// Pointers are null or valid; host memory stays valid while the graph runs.
pub(crate) unsafe fn cuGraphExecMemcpyNodeSetParams(
    hGraphExec: CUgraphExec,
    hNode: CUgraphNode,
    copyParams: *const CUDA_MEMCPY3D,
    ctx: CUcontext,
) -> CuResult<()> {
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
}
