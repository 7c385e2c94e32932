//! The `cuStream*` entry points (and `cuLaunchHostFunc`): creating and destroying streams,
//! waiting for them and for events, and their getters. Above `event.rs`, which resolves the
//! stream of `cuEventRecord` through the context as these do.

use std::ffi::{c_int, c_uint, c_ulonglong, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{
    CUcontext, CUevent, CUhostFn, CUresult, CUstream, CUstreamCallback, CUstreamCaptureStatus,
};

use super::{CuStream, Kind, STREAM_LEGACY, STREAM_PER_THREAD, SendPtr};
use crate::context::{current, current_any, resolve};
use crate::entry::{CuErr, CuResult, as_host_fn, bad_handle, invalid, non_null, put};
use crate::event;

/// `CU_STREAM_NON_BLOCKING`.
const NON_BLOCKING: c_uint = 0x1;

fn create(ph: *mut CUstream, flags: c_uint, priority: c_int) -> CuResult<()> {
    let ctx = current()?;
    non_null(ph, "phStream")?;
    if flags & !NON_BLOCKING != 0 {
        return Err(invalid(format!(
            "{flags:#x} is not a valid set of stream flags (CU_STREAM_DEFAULT, CU_STREAM_NON_BLOCKING)"
        )));
    }
    let kind = if flags & NON_BLOCKING != 0 {
        Kind::NonBlocking
    } else {
        Kind::Blocking
    };
    let s = CuStream::new(ctx.handle, kind, flags, priority.clamp(0, 0))?;
    ctx.streams.lock().push(Arc::downgrade(&s));
    super::register(&s);
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(ph, s.handle as CUstream, "phStream") }
}

/// `cuStreamCreate`.
///
/// # Safety
/// `phStream` is null or valid for a write.
pub(crate) unsafe fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint) -> CuResult<()> {
    create(phStream, Flags, 0)
}

/// `cuStreamCreateWithPriority`: one priority level; any value is clamped to it, as CUDA
/// clamps to its range.
///
/// # Safety
/// `phStream` is null or valid for a write.
pub(crate) unsafe fn cuStreamCreateWithPriority(
    phStream: *mut CUstream,
    flags: c_uint,
    priority: c_int,
) -> CuResult<()> {
    create(phStream, flags, priority)
}

/// `cuStreamDestroy_v2`: returns at once; work already enqueued still runs.
pub(crate) fn cuStreamDestroy_v2(hStream: CUstream) -> CuResult<()> {
    current_any()?;
    let h = hStream as usize;
    if matches!(h, 0 | STREAM_LEGACY | STREAM_PER_THREAD) {
        return Err(bad_handle("the default streams cannot be destroyed"));
    }
    super::unregister(h)
        .map(|_| ())
        .ok_or_else(|| bad_handle(format!("{h:#x} is not a live stream")))
}

/// `cuStreamSynchronize`.
pub(crate) fn cuStreamSynchronize(hStream: CUstream) -> CuResult<()> {
    let (ctx, s) = resolve(hStream)?;
    s.synchronize(&ctx)
}

/// `cuStreamQuery`: `CUDA_SUCCESS` when all its work is done, else `CUDA_ERROR_NOT_READY`.
pub(crate) fn cuStreamQuery(hStream: CUstream) -> CuResult<()> {
    let (ctx, s) = resolve(hStream)?;
    if s.query(&ctx)? {
        Ok(())
    } else {
        Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_READY,
            "work is still running",
        ))
    }
}

/// `cuStreamWaitEvent`: later work of the stream waits for the event's last record (an event
/// never recorded is no wait).
pub(crate) fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, Flags: c_uint) -> CuResult<()> {
    let (ctx, s) = resolve(hStream)?;
    let e = event::lookup(hEvent)?;
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
}

/// `cuLaunchHostFunc`: runs `fn_(userData)` in stream order on the stream's worker thread;
/// driver calls from it are `CUDA_ERROR_NOT_PERMITTED`.
///
/// # Safety
/// `fn_` may be called with `userData` once, on another thread.
pub(crate) unsafe fn cuLaunchHostFunc(
    hStream: CUstream,
    fn_: CUhostFn,
    userData: *mut c_void,
) -> CuResult<()> {
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
}

/// `cuStreamGetFlags`.
///
/// # Safety
/// `flags` is null or valid for a write.
pub(crate) unsafe fn cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint) -> CuResult<()> {
    let (_, s) = resolve(hStream)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(flags, s.flags, "flags") }
}

/// `cuStreamGetPriority`.
///
/// # Safety
/// `priority` is null or valid for a write.
pub(crate) unsafe fn cuStreamGetPriority(hStream: CUstream, priority: *mut c_int) -> CuResult<()> {
    let (_, s) = resolve(hStream)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(priority, s.priority, "priority") }
}

/// `cuStreamGetCtx`.
///
/// # Safety
/// `pctx` is null or valid for a write.
pub(crate) unsafe fn cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext) -> CuResult<()> {
    let (_, s) = resolve(hStream)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(pctx, s.ctx as CUcontext, "pctx") }
}

/// `cuStreamIsCapturing`: never capturing (stream capture is refused).
///
/// # Safety
/// `captureStatus` is null or valid for a write.
pub(crate) unsafe fn cuStreamIsCapturing(
    hStream: CUstream,
    captureStatus: *mut CUstreamCaptureStatus,
) -> CuResult<()> {
    resolve(hStream)?;
    // SAFETY: the caller's out-pointer.
    unsafe {
        put(
            captureStatus,
            CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
            "captureStatus",
        )
    }
}

/// `cuStreamGetId`: a number unique to the stream over the process's life (the default
/// streams have theirs).
///
/// # Safety
/// `streamId` is null or valid for a write.
pub(crate) unsafe fn cuStreamGetId(hStream: CUstream, streamId: *mut c_ulonglong) -> CuResult<()> {
    let (_, s) = resolve(hStream)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(streamId, (s.handle >> 4) as c_ulonglong, "streamId") }
}

/// `cuStreamAddCallback`: runs `callback(hStream, CUDA_SUCCESS, userData)` in stream order on
/// the stream's worker thread, as `cuLaunchHostFunc` (driver calls from it are
/// `CUDA_ERROR_NOT_PERMITTED`); after a failure of the stream's work it is not called (the
/// stream skips its later work). `flags` must be 0.
///
/// # Safety
/// `callback` may be called with `userData` once, on another thread.
pub(crate) unsafe fn cuStreamAddCallback(
    hStream: CUstream,
    callback: CUstreamCallback,
    userData: *mut c_void,
    flags: c_uint,
) -> CuResult<()> {
    let (ctx, s) = resolve(hStream)?;
    let f = callback.ok_or_else(|| invalid("callback is NULL"))?;
    if flags != 0 {
        return Err(invalid(format!("flags must be 0, got {flags:#x}")));
    }
    let (user, stream) = (SendPtr(userData), SendPtr(hStream.cast()));
    s.enqueue(&ctx, move |se| {
        se.then_host_callback(move || {
            let (user, stream) = (user, stream);
            // SAFETY: the caller's contract: `callback` may be called once with `userData`.
            as_host_fn(|| unsafe { f(stream.0.cast(), CUresult::CUDA_SUCCESS, user.0) });
        });
    })
}
