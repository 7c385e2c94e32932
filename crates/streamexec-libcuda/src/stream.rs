//! Streams. Each CUDA stream wraps a host-platform `streamexec::Stream` (a worker thread
//! running its operations in order), so work runs off the calling thread as on a GPU.
//!
//! Ordering between streams follows CUDA's legacy default stream: an operation on the legacy
//! stream (`NULL`, `CU_STREAM_LEGACY`) first waits for all earlier work of every blocking
//! stream of its context, and an operation on a blocking stream (flags 0, and the per-thread
//! default stream `CU_STREAM_PER_THREAD`) first waits for all earlier work of the legacy stream;
//! `CU_STREAM_NON_BLOCKING` streams do neither. The waits are `then_wait_for` on the other
//! stream, taken only when it has work enqueued since the last wait.
//!
//! Locks: an enqueue locks the streams it orders against in handle order (never two contexts),
//! and nothing blocks while holding a stream's lock: synchronizing records an event under the
//! lock and waits for it outside, so a host thread serving a running kernel (RPC) can still
//! call the driver.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUcontext, CUhostFn, CUresult, CUstream};
use parking_lot::{Mutex, MutexGuard};
use streamexec::{Event, EventStatus, Stream};

use crate::context::{Context, current, current_any};
use crate::entry::{CuErr, CuResult, as_host_fn, bad_handle, call, invalid, put};
use crate::state::{Driver, driver};

/// `CU_STREAM_LEGACY`.
const STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`.
const STREAM_PER_THREAD: usize = 0x2;
/// `CU_STREAM_NON_BLOCKING`.
const NON_BLOCKING: c_uint = 0x1;

/// How a stream orders against the legacy default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Legacy,
    PerThread,
    Blocking,
    NonBlocking,
}

/// One stream.
pub(crate) struct CuStream {
    pub(crate) handle: usize,
    pub(crate) ctx: usize,
    pub(crate) kind: Kind,
    flags: c_uint,
    priority: c_int,
    state: Mutex<State>,
}

struct State {
    se: Stream,
    /// Operations enqueued so far.
    ops: u64,
    /// For each stream this one waited for: its `ops` at that wait.
    waited: HashMap<usize, u64>,
}

/// A raw pointer handed to work on another thread (the caller guarantees its validity until
/// the work has run, as the driver API requires of asynchronous operations).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut c_void);
// SAFETY: only dereferenced by the operation the caller enqueued, under the driver API's
// contract that the memory stays valid until that operation has run.
unsafe impl Send for SendPtr {}

thread_local! {
    /// This thread's per-thread default stream, per context.
    static PER_THREAD: RefCell<HashMap<usize, Arc<CuStream>>> = RefCell::new(HashMap::new());
}

fn se_error(what: &str, e: streamexec::Error) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_UNKNOWN, format!("{what}: {e}"))
}

impl CuStream {
    pub(crate) fn new(
        drv: &Driver,
        ctx: usize,
        kind: Kind,
        flags: c_uint,
        priority: c_int,
    ) -> CuResult<Arc<CuStream>> {
        let se = drv
            .exec
            .create_stream()
            .map_err(|e| se_error("creating the stream", e))?;
        Ok(Arc::new(CuStream {
            handle: drv.streams.reserve(),
            ctx,
            kind,
            flags,
            priority,
            state: Mutex::new(State {
                se,
                ops: 0,
                waited: HashMap::new(),
            }),
        }))
    }

    /// The first failure of the stream's work so far (does not wait).
    pub(crate) fn status(&self) -> Result<(), streamexec::Error> {
        self.state.lock().se.status()
    }

    /// The streams an operation on this one must first wait for.
    fn orders_after(&self, ctx: &Context) -> Vec<Arc<CuStream>> {
        match self.kind {
            Kind::NonBlocking => Vec::new(),
            Kind::Blocking | Kind::PerThread => vec![ctx.legacy.clone()],
            Kind::Legacy => ctx
                .all_streams()
                .into_iter()
                .filter(|s| matches!(s.kind, Kind::Blocking | Kind::PerThread))
                .collect(),
        }
    }

    /// Enqueues `op` after the implicit waits CUDA's stream semantics ask for. `op` must only
    /// enqueue (never block). A failure `op` reports synchronously is returned as
    /// `CUDA_ERROR_INVALID_VALUE` and leaves the stream usable.
    pub(crate) fn enqueue(&self, ctx: &Context, op: impl FnOnce(&mut Stream)) -> CuResult<()> {
        ctx.usable()?;
        let deps = self.orders_after(ctx);
        let mut order: Vec<&CuStream> = deps.iter().map(|d| &**d).collect();
        order.push(self);
        order.sort_by_key(|s| s.handle);
        order.dedup_by_key(|s| s.handle);
        let mut guards: Vec<(usize, MutexGuard<'_, State>)> =
            order.iter().map(|s| (s.handle, s.state.lock())).collect();
        let me = guards
            .iter()
            .position(|(h, _)| *h == self.handle)
            .expect("self is in the lock order"); // ok: pushed above
        let (mine, rest) = {
            let (a, b) = guards.split_at_mut(me);
            let (m, c) = b.split_first_mut().expect("non-empty"); // ok: index `me` exists
            (m, a.iter().chain(c.iter()).collect::<Vec<_>>())
        };
        let state = &mut *mine.1;
        for (h, other) in rest {
            if other.ops > state.waited.get(h).copied().unwrap_or(0) {
                state.se.then_wait_for(&other.se);
                state.waited.insert(*h, other.ops);
            }
        }
        let was_ok = state.se.ok();
        op(&mut state.se);
        state.ops += 1;
        if was_ok && let Err(e) = state.se.status() {
            use streamexec::Error as E;
            if !matches!(
                e,
                E::KernelFault { .. } | E::DependencyFailed { .. } | E::HostCallback { .. }
            ) {
                // A check of the handle layer refused the operation: report it, and give the
                // stream a fresh queue that starts after the old one's work.
                let fresh = ctx_exec()
                    .create_stream()
                    .map_err(|e| se_error("stream", e))?;
                let mut old = std::mem::replace(&mut state.se, fresh);
                let _ = old.block_host_until_done();
                return Err(invalid(e.to_string()));
            }
        }
        Ok(())
    }

    /// Records a fresh event after everything enqueued so far (with the implicit waits).
    fn mark(&self, ctx: &Context) -> CuResult<Event> {
        let ev = ctx_exec()
            .create_event()
            .map_err(|e| se_error("creating an event", e))?;
        self.enqueue(ctx, |se| {
            se.then_record_event(&ev);
        })?;
        Ok(ev)
    }

    /// Waits for everything enqueued so far; the context's sticky error if any work failed.
    pub(crate) fn synchronize(&self, ctx: &Context) -> CuResult<()> {
        let ev = self.mark(ctx)?;
        ev.synchronize().map_err(|e| ctx.fail(&e))
    }

    /// `Ok(true)` when everything enqueued so far is done.
    fn query(&self, ctx: &Context) -> CuResult<bool> {
        let ev = self.mark(ctx)?;
        match ev.status() {
            EventStatus::Complete => Ok(true),
            EventStatus::Error(_) => Err(ctx.usable().err().unwrap_or_else(|| {
                CuErr::new(
                    CUresult::CUDA_ERROR_LAUNCH_FAILED,
                    "the stream's work failed",
                )
            })),
            _ => Ok(false),
        }
    }

    /// Waits for the stream's work, ignoring ordering (teardown).
    pub(crate) fn drain(&self) -> Result<(), streamexec::Error> {
        let ev = ctx_exec().create_event()?;
        self.state.lock().se.then_record_event(&ev);
        ev.synchronize()
    }
}

fn ctx_exec() -> &'static streamexec::StreamExecutor {
    &driver().expect("streams exist only after cuInit").exec // ok: a stream implies cuInit
}

/// The stream of handle `h` in the current context, and that context: `NULL` and
/// `CU_STREAM_LEGACY` are the legacy stream, `CU_STREAM_PER_THREAD` this thread's default
/// stream. A stream of another context is `CUDA_ERROR_INVALID_HANDLE`.
pub(crate) fn resolve(h: CUstream) -> CuResult<(Arc<Context>, Arc<CuStream>)> {
    let ctx = current()?;
    let s = resolve_in(&ctx, h)?;
    Ok((ctx, s))
}

/// As [`resolve`], for a known context.
pub(crate) fn resolve_in(ctx: &Arc<Context>, h: CUstream) -> CuResult<Arc<CuStream>> {
    let drv = driver()?;
    match h as usize {
        0 | STREAM_LEGACY => Ok(ctx.legacy.clone()),
        STREAM_PER_THREAD => PER_THREAD.with(|m| {
            let mut m = m.borrow_mut();
            if let Some(s) = m.get(&ctx.handle) {
                return Ok(s.clone());
            }
            let s = CuStream::new(drv, ctx.handle, Kind::PerThread, 0, 0)?;
            ctx.streams.lock().push(Arc::downgrade(&s));
            m.insert(ctx.handle, s.clone());
            Ok(s)
        }),
        raw => {
            let s = drv
                .streams
                .get(raw)
                .ok_or_else(|| bad_handle(format!("{raw:#x} is not a live stream")))?;
            if s.ctx != ctx.handle {
                return Err(bad_handle(format!(
                    "stream {raw:#x} belongs to context {:#x}, not to the current context {:#x}",
                    s.ctx, ctx.handle
                )));
            }
            Ok(s)
        }
    }
}

fn create(ph: *mut CUstream, flags: c_uint, priority: c_int) -> CuResult<()> {
    let ctx = current()?;
    crate::entry::non_null(ph, "phStream")?;
    if flags & !NON_BLOCKING != 0 {
        return Err(invalid(format!(
            "{flags:#x} is not a valid set of stream flags (CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING)"
        )));
    }
    let drv = driver()?;
    let kind = if flags & NON_BLOCKING != 0 {
        Kind::NonBlocking
    } else {
        Kind::Blocking
    };
    let s = CuStream::new(drv, ctx.handle, kind, flags, priority.clamp(0, 0))?;
    ctx.streams.lock().push(Arc::downgrade(&s));
    drv.streams.insert(s.handle, s.clone());
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(ph, s.handle as CUstream, "phStream") }
}

/// `cuStreamCreate`.
///
/// # Safety
/// `phStream` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint) -> CUresult {
    call("cuStreamCreate", || create(phStream, Flags, 0))
}

/// `cuStreamCreateWithPriority`: one priority level; any value is clamped to it, as CUDA
/// clamps to its range.
///
/// # Safety
/// `phStream` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    phStream: *mut CUstream,
    flags: c_uint,
    priority: c_int,
) -> CUresult {
    call("cuStreamCreateWithPriority", || {
        create(phStream, flags, priority)
    })
}

/// `cuStreamDestroy_v2`: returns at once; work already enqueued still runs.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamDestroy_v2(hStream: CUstream) -> CUresult {
    call("cuStreamDestroy_v2", || {
        let drv = driver()?;
        current_any()?;
        let h = hStream as usize;
        if matches!(h, 0 | STREAM_LEGACY | STREAM_PER_THREAD) {
            return Err(bad_handle("the default streams cannot be destroyed"));
        }
        drv.streams
            .remove(h)
            .map(|_| ())
            .ok_or_else(|| bad_handle(format!("{h:#x} is not a live stream")))
    })
}

/// `cuStreamSynchronize`.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamSynchronize(hStream: CUstream) -> CUresult {
    call("cuStreamSynchronize", || {
        let (ctx, s) = resolve(hStream)?;
        s.synchronize(&ctx)
    })
}

/// `cuStreamQuery`: `CUDA_SUCCESS` when all its work is done, else `CUDA_ERROR_NOT_READY`.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamQuery(hStream: CUstream) -> CUresult {
    call("cuStreamQuery", || {
        let (ctx, s) = resolve(hStream)?;
        if s.query(&ctx)? {
            Ok(())
        } else {
            Err(CuErr::new(
                CUresult::CUDA_ERROR_NOT_READY,
                "work is still running",
            ))
        }
    })
}

/// `cuStreamWaitEvent`: later work of the stream waits for the event's last record (an event
/// never recorded is no wait).
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamWaitEvent(
    hStream: CUstream,
    hEvent: cudarc::driver::sys::CUevent,
    Flags: c_uint,
) -> CUresult {
    call("cuStreamWaitEvent", || {
        let (ctx, s) = resolve(hStream)?;
        let e = crate::event::lookup(hEvent)?;
        if Flags & !1 != 0 {
            return Err(invalid(format!(
                "{Flags:#x} is not a valid CUevent_wait_flags"
            )));
        }
        if !e.recorded() {
            return Ok(());
        }
        s.enqueue(&ctx, |se| {
            se.then_wait_for(&e.se);
        })
    })
}

/// `cuLaunchHostFunc`: runs `fn_(userData)` in stream order on the stream's worker thread;
/// driver calls from it are `CUDA_ERROR_NOT_PERMITTED`.
///
/// # Safety
/// `fn_` may be called with `userData` once, on another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchHostFunc(
    hStream: CUstream,
    fn_: CUhostFn,
    userData: *mut c_void,
) -> CUresult {
    call("cuLaunchHostFunc", || {
        let (ctx, s) = resolve(hStream)?;
        let f = fn_.ok_or_else(|| invalid("fn is NULL"))?;
        let user = SendPtr(userData);
        s.enqueue(&ctx, move |se| {
            se.then_host_callback(move || {
                let user = user;
                // SAFETY: the caller's contract: `f` may be called once with `userData`.
                as_host_fn(|| unsafe { f(user.0) });
            });
        })
    })
}

/// `cuStreamGetFlags`.
///
/// # Safety
/// `flags` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint) -> CUresult {
    call("cuStreamGetFlags", || {
        let (_, s) = resolve(hStream)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(flags, s.flags, "flags") }
    })
}

/// `cuStreamGetPriority`.
///
/// # Safety
/// `priority` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetPriority(hStream: CUstream, priority: *mut c_int) -> CUresult {
    call("cuStreamGetPriority", || {
        let (_, s) = resolve(hStream)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(priority, s.priority, "priority") }
    })
}

/// `cuStreamGetCtx`.
///
/// # Safety
/// `pctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext) -> CUresult {
    call("cuStreamGetCtx", || {
        let (_, s) = resolve(hStream)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pctx, s.ctx as CUcontext, "pctx") }
    })
}

/// `cuStreamIsCapturing`: never capturing (stream capture is refused).
///
/// # Safety
/// `captureStatus` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamIsCapturing(
    hStream: CUstream,
    captureStatus: *mut cudarc::driver::sys::CUstreamCaptureStatus,
) -> CUresult {
    call("cuStreamIsCapturing", || {
        resolve(hStream)?;
        // SAFETY: the caller's out-pointer.
        unsafe {
            put(
                captureStatus,
                cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
                "captureStatus",
            )
        }
    })
}
