//! Launching an executable graph: `cuGraphLaunch` checks every node again, then enqueues them
//! all as one stream operation after the previous launch of the same executable graph;
//! `cuGraphUpload` only checks (there is nothing to upload on the CPU).

use cudarc::driver::sys::{CUgraphExec, CUresult, CUstream};

use super::nodes::{Ready, not_supported};
use super::{Exec, exec};
use crate::context::{Context, resolve as resolve_stream};
use crate::driver::driver;
use crate::entry::{CuErr, CuResult};

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
pub(super) fn upload_checks(hGraphExec: CUgraphExec, hStream: CUstream) -> CuResult<()> {
    let x = exec(hGraphExec)?;
    let (ctx, _) = resolve_stream(hStream)?;
    x.check_context(&ctx)
}

/// `cuGraphUpload`: nothing to upload on the CPU; the executable graph and stream are checked.
pub(crate) fn cuGraphUpload(hGraphExec: CUgraphExec, hStream: CUstream) -> CuResult<()> {
    upload_checks(hGraphExec, hStream)
}

/// `cuGraphLaunch`: the nodes in their topological order, as one operation of `hStream`, after
/// the previous launch of the same executable graph.
pub(crate) fn cuGraphLaunch(hGraphExec: CUgraphExec, hStream: CUstream) -> CuResult<()> {
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
}
