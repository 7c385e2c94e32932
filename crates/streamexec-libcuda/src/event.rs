//! Events: host-platform `streamexec::Event`s recorded in stream order.

use std::ffi::c_uint;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::sys::{CUevent, CUresult, CUstream};
use streamexec::{Event, EventStatus};

use crate::context::{self, current, current_any, resolve};
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, bad_handle, invalid, non_null, put};
use crate::handles::Table;

/// Live events.
static EVENTS: Table<CuEvent> = Table::new(0x3000_0000);

/// `CU_EVENT_DISABLE_TIMING`.
const DISABLE_TIMING: c_uint = 0x2;
/// `CU_EVENT_INTERPROCESS`.
const INTERPROCESS: c_uint = 0x4;

/// One event.
pub(crate) struct CuEvent {
    pub(crate) handle: usize,
    pub(crate) ctx: usize,
    flags: c_uint,
    pub(crate) se: Event,
    recorded: AtomicBool,
}

impl CuEvent {
    /// Whether `cuEventRecord` was ever called on it.
    pub(crate) fn recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }
    /// Notes a record of the event (enqueued by a stream or a graph launch).
    pub(crate) fn mark_recorded(&self) {
        self.recorded.store(true, Ordering::Release);
    }
    fn timing(&self) -> bool {
        self.flags & DISABLE_TIMING == 0
    }
}

/// The event of handle `h`, else `CUDA_ERROR_INVALID_HANDLE`.
pub(crate) fn lookup(h: CUevent) -> CuResult<Arc<CuEvent>> {
    driver()?;
    EVENTS
        .get(h as usize)
        .ok_or_else(|| bad_handle(format!("{:#x} is not a live event", h as usize)))
}

/// Whether `e` is still live (not destroyed, nor freed with its context).
pub(crate) fn is_live(e: &CuEvent) -> bool {
    EVENTS.get(e.handle).is_some()
}

/// Takes every event of context `ctx` out of the table (the context is destroyed).
pub(crate) fn unregister_context(ctx: usize) {
    for e in EVENTS.filter(|e| e.ctx == ctx) {
        EVENTS.remove(e.handle);
    }
}

/// `cuEventCreate`.
///
/// # Safety
/// `phEvent` is null or valid for a write.
pub(crate) unsafe fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint) -> CuResult<()> {
    let ctx = current()?;
    non_null(phEvent, "phEvent")?;
    if Flags & !0x7 != 0 {
        return Err(invalid(format!(
            "{Flags:#x} is not a valid set of CUevent_flags"
        )));
    }
    if Flags & INTERPROCESS != 0 && Flags & DISABLE_TIMING == 0 {
        return Err(invalid(
            "CU_EVENT_INTERPROCESS needs CU_EVENT_DISABLE_TIMING as well",
        ));
    }
    let se = driver()?.exec.create_event().map_err(|e| {
        CuErr::new(
            CUresult::CUDA_ERROR_UNKNOWN,
            format!("creating the event: {e}"),
        )
    })?;
    let handle = EVENTS.reserve();
    EVENTS.insert(
        handle,
        Arc::new(CuEvent {
            handle,
            ctx: ctx.handle,
            flags: Flags,
            se,
            recorded: AtomicBool::new(false),
        }),
    );
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(phEvent, handle as CUevent, "phEvent") }
}

/// `cuEventDestroy_v2`.
pub(crate) fn cuEventDestroy_v2(hEvent: CUevent) -> CuResult<()> {
    current_any()?;
    EVENTS
        .remove(hEvent as usize)
        .map(|_| ())
        .ok_or_else(|| bad_handle(format!("{:#x} is not a live event", hEvent as usize)))
}

fn record(hEvent: CUevent, hStream: CUstream) -> CuResult<()> {
    let (ctx, s) = resolve(hStream)?;
    let e = lookup(hEvent)?;
    if e.ctx != ctx.handle {
        return Err(bad_handle(
            "the event and the stream belong to different contexts",
        ));
    }
    s.enqueue(&ctx, |se| {
        se.then_record_event(&e.se);
    })?;
    e.mark_recorded();
    Ok(())
}

/// `cuEventRecord`.
pub(crate) fn cuEventRecord(hEvent: CUevent, hStream: CUstream) -> CuResult<()> {
    record(hEvent, hStream)
}

/// `cuEventRecordWithFlags`: flags 0 (`CU_EVENT_RECORD_DEFAULT`) only; the external flag
/// belongs to stream capture, which is refused.
pub(crate) fn cuEventRecordWithFlags(
    hEvent: CUevent,
    hStream: CUstream,
    flags: c_uint,
) -> CuResult<()> {
    if flags != 0 {
        return Err(invalid(format!(
            "flags must be 0 outside stream capture, got {flags}"
        )));
    }
    record(hEvent, hStream)
}

/// `cuEventQuery`: `CUDA_ERROR_NOT_READY` while its last record has not run.
pub(crate) fn cuEventQuery(hEvent: CUevent) -> CuResult<()> {
    let e = lookup(hEvent)?;
    let ctx = context::lookup(e.ctx)?;
    if !e.recorded() {
        return Ok(());
    }
    match e.se.status() {
        EventStatus::Complete => Ok(()),
        EventStatus::Error(_) => {
            ctx.usable()?;
            Err(CuErr::new(
                CUresult::CUDA_ERROR_LAUNCH_FAILED,
                "the work before the event failed",
            ))
        }
        _ => Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_READY,
            "the event's stream has not reached it yet",
        )),
    }
}

/// `cuEventSynchronize`.
pub(crate) fn cuEventSynchronize(hEvent: CUevent) -> CuResult<()> {
    let e = lookup(hEvent)?;
    let ctx = context::lookup(e.ctx)?;
    let r = e.se.synchronize().map_err(|err| ctx.fail(&err));
    crate::driver::flush_printf();
    r
}

/// `cuEventElapsedTime`: milliseconds between two completed records; events made with
/// `CU_EVENT_DISABLE_TIMING` or never recorded are `CUDA_ERROR_INVALID_HANDLE`, as documented.
///
/// # Safety
/// `pMilliseconds` is null or valid for a write.
pub(crate) unsafe fn cuEventElapsedTime(
    pMilliseconds: *mut f32,
    hStart: CUevent,
    hEnd: CUevent,
) -> CuResult<()> {
    let (a, b) = (lookup(hStart)?, lookup(hEnd)?);
    non_null(pMilliseconds, "pMilliseconds")?;
    if !a.timing() || !b.timing() {
        return Err(bad_handle(
            "an event made with CU_EVENT_DISABLE_TIMING cannot be timed",
        ));
    }
    if !a.recorded() || !b.recorded() {
        return Err(bad_handle("both events must have been recorded"));
    }
    if a.se.status() != EventStatus::Complete || b.se.status() != EventStatus::Complete {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_READY,
            "an event's record has not run yet",
        ));
    }
    let ms = match b.se.elapsed_since(&a.se) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(_) => {
            -(a.se
                .elapsed_since(&b.se)
                .map_or(0.0, |d| d.as_secs_f64() * 1e3))
        }
    };
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pMilliseconds, ms as f32, "pMilliseconds") }
}
