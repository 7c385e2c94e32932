//! Contexts: the primary context of each device (retain/release/reset) and contexts made with
//! `cuCtxCreate`; the per-thread stack of current contexts; a context's sticky error; the order
//! of work between a context's streams, and which stream a handle names in it.
//!
//! A kernel fault poisons its context as on a GPU: every later call that uses the context
//! returns the fault's code until the context is destroyed (for a primary context: released
//! by every holder, or reset) and made again.
//!
//! The `cuCtx*` and `cuDevicePrimaryCtx*` entry points are in `api.rs`, above the families
//! whose objects a destroyed context frees.

pub(crate) mod api;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock, Weak};

use cudarc::driver::sys::{CUresult, CUstream};
use parking_lot::Mutex;
use streamexec::{Event, EventStatus, Stream};

use crate::driver::driver;
use crate::entry::{CuErr, CuResult, bad_handle, per_thread_default_stream, report_fault};
use crate::handles::Table;
use crate::stream::{self, CuStream, Kind, STREAM_LEGACY, STREAM_PER_THREAD, ctx_exec, se_error};

/// Live contexts (primary ones included).
static CONTEXTS: Table<Context> = Table::new(0x1000_0000);

/// One context.
pub(crate) struct Context {
    pub(crate) handle: usize,
    pub(crate) device: usize,
    pub(crate) primary: bool,
    /// The legacy default stream (`NULL`, `CU_STREAM_LEGACY`).
    pub(crate) legacy: Arc<CuStream>,
    /// Every other stream of the context, for ordering and fault polling.
    pub(crate) streams: Mutex<Vec<Weak<CuStream>>>,
    sticky: Mutex<Option<CuErr>>,
    /// Devices whose memory this context's kernels may use (`cuCtxEnablePeerAccess`).
    pub(crate) peers: Mutex<HashSet<usize>>,
    /// `cuCtxSetLimit` values, `cuCtxSetCacheConfig`, `cuCtxSetFlags`.
    pub(crate) settings: Mutex<Settings>,
}

/// What a context remembers for its getters.
pub(crate) struct Settings {
    pub(crate) limits: HashMap<u32, usize>,
    pub(crate) cache_config: u32,
    pub(crate) flags: u32,
}

/// A device's primary context and how many holders retained it.
#[derive(Default)]
pub(crate) struct Primary {
    pub(super) ctx: Option<Arc<Context>>,
    pub(super) refs: u32,
    pub(super) flags: u32,
}

thread_local! {
    /// This thread's context stack; the top is the current context.
    pub(super) static CURRENT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    /// This thread's per-thread default stream, per context.
    static PER_THREAD: RefCell<HashMap<usize, Arc<CuStream>>> = RefCell::new(HashMap::new());
}

/// `CUDA_ERROR_INVALID_CONTEXT` with `detail`.
pub(crate) fn bad_context(detail: impl Into<String>) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_INVALID_CONTEXT, detail)
}

/// Device `d`'s primary context state (`d` checked by the caller).
pub(super) fn primary(d: usize) -> CuResult<&'static Mutex<Primary>> {
    static PRIMARY: OnceLock<Vec<Mutex<Primary>>> = OnceLock::new();
    let count = driver()?.device_count;
    let all = PRIMARY.get_or_init(|| (0..count).map(|_| Mutex::default()).collect());
    Ok(&all[d])
}

/// A new context of device `device`, registered (not made current).
pub(super) fn make(device: usize, primary: bool, flags: u32) -> CuResult<Arc<Context>> {
    let handle = CONTEXTS.reserve();
    let legacy = CuStream::new(handle, Kind::Legacy, 0, 0)?;
    let ctx = Arc::new(Context {
        handle,
        device,
        primary,
        legacy,
        streams: Mutex::new(Vec::new()),
        sticky: Mutex::new(None),
        peers: Mutex::new(HashSet::new()),
        settings: Mutex::new(Settings {
            limits: HashMap::from([(0, 1024), (1, 1 << 20), (2, 8 << 20)]),
            cache_config: 0,
            flags,
        }),
    });
    CONTEXTS.insert(handle, ctx.clone());
    Ok(ctx)
}

/// The context of handle `h` (live), else `CUDA_ERROR_INVALID_CONTEXT`.
pub(crate) fn lookup(h: usize) -> CuResult<Arc<Context>> {
    CONTEXTS.get(h).ok_or_else(|| {
        bad_context(format!(
            "{h:#x} is not a live context (destroyed, released, or never made)"
        ))
    })
}

/// The calling thread's current context, usable (no sticky error); else the error.
pub(crate) fn current() -> CuResult<Arc<Context>> {
    let ctx = current_any()?;
    ctx.usable()?;
    Ok(ctx)
}

/// The calling thread's current context, even when it has a sticky error.
pub(crate) fn current_any() -> CuResult<Arc<Context>> {
    driver()?;
    let top = CURRENT.with(|c| c.borrow().last().copied());
    let Some(h) = top else {
        return Err(bad_context(
            "no context is current on this thread: retain the device's primary context \
             (cuDevicePrimaryCtxRetain) and make it current (cuCtxSetCurrent), or cuCtxCreate",
        ));
    };
    lookup(h)
}

impl Context {
    /// The context's streams: the legacy stream first, then the live others.
    pub(crate) fn all_streams(&self) -> Vec<Arc<CuStream>> {
        let mut v = vec![self.legacy.clone()];
        let mut list = self.streams.lock();
        list.retain(|w| w.strong_count() > 0);
        v.extend(list.iter().filter_map(Weak::upgrade));
        v
    }

    /// `Ok` unless the context has a sticky error (a kernel fault seen on any of its streams).
    pub(crate) fn usable(&self) -> CuResult<()> {
        if let Some(e) = self.sticky.lock().clone() {
            return Err(e);
        }
        for s in self.all_streams() {
            if let Err(e) = s.status() {
                return Err(self.fail(&e));
            }
        }
        Ok(())
    }

    /// Records `e` (a failure of this context's asynchronous work) as the sticky error and
    /// returns it; the first one wins.
    pub(crate) fn fail(&self, e: &streamexec::Error) -> CuErr {
        let mut sticky = self.sticky.lock();
        if let Some(first) = &*sticky {
            return first.clone();
        }
        let err = fault_code(e);
        // The failure itself, not the waits it failed on the way (legacy-stream ordering).
        let mut root = e;
        while let streamexec::Error::DependencyFailed { source, .. } = root {
            root = source;
        }
        // What the kernels printed before it failed comes first, then CUDA's assertion text.
        crate::driver::flush_printf();
        if let streamexec::Error::KernelAssert { failure, .. } = root {
            eprintln!("{failure}");
        }
        report_fault(&format!("context {:#x}: {root}", self.handle));
        *sticky = Some(err.clone());
        err
    }

    /// Waits for every stream of the context; its sticky error if any work failed.
    pub(crate) fn synchronize(&self) -> CuResult<()> {
        for s in self.all_streams() {
            s.synchronize(self)?;
        }
        self.usable()
    }

    /// Takes the context out of the table and waits for its streams' work (it is being
    /// destroyed; `api.rs` frees what it owns).
    pub(super) fn retire(&self) {
        CONTEXTS.remove(self.handle);
        for s in self.all_streams() {
            let _ = s.drain();
        }
        crate::driver::flush_printf();
    }
}

/// The CUDA code for an asynchronous failure the host platform reports.
fn fault_code(e: &streamexec::Error) -> CuErr {
    use streamexec::Error as E;
    let text = e.to_string();
    let code = match e {
        E::KernelFault { detail, .. } => {
            let d = detail.to_lowercase();
            if d.contains("misaligned") {
                CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            } else if d.contains("barrier") || d.contains("trap") || d.contains("deadlock") {
                CUresult::CUDA_ERROR_LAUNCH_FAILED
            } else if d.contains("assert") {
                CUresult::CUDA_ERROR_ASSERT
            } else {
                CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            }
        }
        E::KernelAssert { .. } => CUresult::CUDA_ERROR_ASSERT,
        E::DependencyFailed { source, .. } => return fault_code(source),
        _ => CUresult::CUDA_ERROR_LAUNCH_FAILED,
    };
    CuErr::new(code, text)
}

/// Stream order within a context: the implicit waits of the legacy default stream, and the
/// context's sticky error before an enqueue and after a wait.
impl CuStream {
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
        self.enqueue_after(&self.orders_after(ctx), op)
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
        let r = ev.synchronize().map_err(|e| ctx.fail(&e));
        crate::driver::flush_printf();
        r
    }

    /// `Ok(true)` when everything enqueued so far is done.
    pub(crate) fn query(&self, ctx: &Context) -> CuResult<bool> {
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
}

/// The stream of handle `h` in the current context, and that context: `NULL` and
/// `CU_STREAM_LEGACY` are the legacy stream, `CU_STREAM_PER_THREAD` this thread's default
/// stream (and so is `NULL` in a `_ptds`/`_ptsz` export). A stream of another context is `CUDA_ERROR_INVALID_HANDLE`.
pub(crate) fn resolve(h: CUstream) -> CuResult<(Arc<Context>, Arc<CuStream>)> {
    let ctx = current()?;
    let s = resolve_in(&ctx, h)?;
    Ok((ctx, s))
}

/// As [`resolve`], for a known context.
pub(crate) fn resolve_in(ctx: &Arc<Context>, h: CUstream) -> CuResult<Arc<CuStream>> {
    driver()?;
    match h as usize {
        0 if per_thread_default_stream() => resolve_in(ctx, STREAM_PER_THREAD as CUstream),
        0 | STREAM_LEGACY => Ok(ctx.legacy.clone()),
        STREAM_PER_THREAD => PER_THREAD.with(|m| {
            let mut m = m.borrow_mut();
            if let Some(s) = m.get(&ctx.handle) {
                return Ok(s.clone());
            }
            let s = CuStream::new(ctx.handle, Kind::PerThread, 0, 0)?;
            ctx.streams.lock().push(Arc::downgrade(&s));
            m.insert(ctx.handle, s.clone());
            Ok(s)
        }),
        raw => {
            let s = stream::lookup(raw)
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
