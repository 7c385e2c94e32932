//! Contexts: the primary context of each device (retain/release/reset) and contexts made with
//! `cuCtxCreate`; the per-thread stack of current contexts; a context's sticky error.
//!
//! A kernel fault poisons its context as on a GPU: every later call that uses the context
//! returns the fault's code until the context is destroyed (for a primary context: released
//! by every holder, or reset) and made again.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use cudarc::driver::sys::{CUcontext, CUdevice, CUresult};
use parking_lot::Mutex;

use crate::entry::{CuErr, CuResult, call, invalid, put, report_fault};
use crate::state::{Driver, driver};
use crate::stream::{CuStream, Kind};

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
    destroyed: AtomicBool,
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
    ctx: Option<Arc<Context>>,
    refs: u32,
    flags: u32,
}

thread_local! {
    /// This thread's context stack; the top is the current context.
    static CURRENT: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// `CUDA_ERROR_INVALID_CONTEXT` with `detail`.
pub(crate) fn bad_context(detail: impl Into<String>) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_INVALID_CONTEXT, detail)
}

impl Driver {
    fn make_context(
        &'static self,
        device: usize,
        primary: bool,
        flags: u32,
    ) -> CuResult<Arc<Context>> {
        let handle = self.contexts.reserve();
        let legacy = CuStream::new(self, handle, Kind::Legacy, 0, 0)?;
        let ctx = Arc::new(Context {
            handle,
            device,
            primary,
            legacy,
            streams: Mutex::new(Vec::new()),
            sticky: Mutex::new(None),
            destroyed: AtomicBool::new(false),
            peers: Mutex::new(HashSet::new()),
            settings: Mutex::new(Settings {
                limits: HashMap::from([(0, 1024), (1, 1 << 20), (2, 8 << 20)]),
                cache_config: 0,
                flags,
            }),
        });
        self.contexts.insert(handle, ctx.clone());
        Ok(ctx)
    }

    /// The context of handle `h` (live), else `CUDA_ERROR_INVALID_CONTEXT`.
    pub(crate) fn context(&self, h: usize) -> CuResult<Arc<Context>> {
        self.contexts.get(h).ok_or_else(|| {
            bad_context(format!(
                "{h:#x} is not a live context (destroyed, released, or never made)"
            ))
        })
    }

    /// Destroys `ctx`: waits for its work, frees its memory, modules, streams and events.
    fn destroy(&self, ctx: &Arc<Context>) {
        ctx.destroyed.store(true, Ordering::Release);
        self.contexts.remove(ctx.handle);
        for s in ctx.all_streams() {
            let _ = s.drain();
        }
        for s in self.streams.filter(|s| s.ctx == ctx.handle) {
            self.streams.remove(s.handle);
        }
        for e in self.events.filter(|e| e.ctx == ctx.handle) {
            self.events.remove(e.handle);
        }
        for f in self.functions.filter(|f| f.ctx == ctx.handle) {
            self.functions.remove(f.handle);
        }
        for m in self.modules.filter(|m| m.ctx == ctx.handle) {
            crate::module::unload(self, &m);
        }
        crate::memory::free_context(ctx.handle);
    }
}

/// The calling thread's current context, usable (no sticky error); else the error.
pub(crate) fn current() -> CuResult<Arc<Context>> {
    let ctx = current_any()?;
    ctx.usable()?;
    Ok(ctx)
}

/// The calling thread's current context, even when it has a sticky error.
pub(crate) fn current_any() -> CuResult<Arc<Context>> {
    let drv = driver()?;
    let top = CURRENT.with(|c| c.borrow().last().copied());
    let Some(h) = top else {
        return Err(bad_context(
            "no context is current on this thread: retain the device's primary context \
             (cuDevicePrimaryCtxRetain) and make it current (cuCtxSetCurrent), or cuCtxCreate",
        ));
    };
    drv.context(h)
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
        E::DependencyFailed { source, .. } => return fault_code(source),
        _ => CUresult::CUDA_ERROR_LAUNCH_FAILED,
    };
    CuErr::new(code, text)
}

fn set_top(h: Option<usize>) {
    CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        c.pop();
        if let Some(h) = h {
            c.push(h);
        }
    });
}

fn ctx_handle(ctx: &Context) -> CUcontext {
    ctx.handle as CUcontext
}

/// `cuDevicePrimaryCtxRetain`: makes the primary context on first retain.
///
/// # Safety
/// `pctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    call("cuDevicePrimaryCtxRetain", || {
        let drv = driver()?;
        let d = drv.device(dev)?;
        crate::entry::non_null(pctx, "pctx")?;
        let mut p = drv.primary[d].lock();
        let ctx = match &p.ctx {
            Some(c) => c.clone(),
            None => {
                let c = drv.make_context(d, true, p.flags)?;
                p.ctx = Some(c.clone());
                c
            }
        };
        p.refs += 1;
        // SAFETY: the caller's out-pointer (checked non-null above).
        unsafe { put(pctx, ctx_handle(&ctx), "pctx") }
    })
}

/// `cuDevicePrimaryCtxRelease_v2`: destroys the primary context when the last holder releases.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    call("cuDevicePrimaryCtxRelease_v2", || {
        let drv = driver()?;
        let d = drv.device(dev)?;
        let mut p = drv.primary[d].lock();
        if p.refs == 0 {
            return Err(bad_context(format!(
                "the primary context of device {d} is not retained"
            )));
        }
        p.refs -= 1;
        if p.refs == 0
            && let Some(c) = p.ctx.take()
        {
            drv.destroy(&c);
        }
        Ok(())
    })
}

/// `cuDevicePrimaryCtxReset_v2`: destroys the primary context now (its holders' handles die).
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) -> CUresult {
    call("cuDevicePrimaryCtxReset_v2", || {
        let drv = driver()?;
        let d = drv.device(dev)?;
        let mut p = drv.primary[d].lock();
        if let Some(c) = p.ctx.take() {
            drv.destroy(&c);
        }
        p.refs = 0;
        Ok(())
    })
}

/// `cuDevicePrimaryCtxGetState`.
///
/// # Safety
/// `flags` and `active` are null or valid for writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxGetState(
    dev: CUdevice,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CUresult {
    call("cuDevicePrimaryCtxGetState", || {
        let drv = driver()?;
        let d = drv.device(dev)?;
        let p = drv.primary[d].lock();
        // SAFETY: the caller's out-pointers.
        unsafe {
            put(flags, p.flags, "flags")?;
            put(active, c_int::from(p.ctx.is_some()), "active")
        }
    })
}

/// `cuDevicePrimaryCtxSetFlags_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint) -> CUresult {
    call("cuDevicePrimaryCtxSetFlags_v2", || {
        let drv = driver()?;
        let d = drv.device(dev)?;
        check_ctx_flags(flags)?;
        drv.primary[d].lock().flags = flags;
        Ok(())
    })
}

fn check_ctx_flags(flags: c_uint) -> CuResult<()> {
    // Scheduling (0x07), MAP_HOST (0x08), LMEM_RESIZE_TO_MAX (0x10), COREDUMP/SYNC_MEMOPS bits.
    if flags & !0x3f != 0 || flags & 0x07 > 4 || flags & 0x07 == 3 {
        return Err(invalid(format!(
            "{flags:#x} is not a valid set of CUctx_flags"
        )));
    }
    Ok(())
}

fn create(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) -> CuResult<()> {
    let drv = driver()?;
    let d = drv.device(dev)?;
    crate::entry::non_null(pctx, "pctx")?;
    check_ctx_flags(flags)?;
    let ctx = drv.make_context(d, false, flags)?;
    CURRENT.with(|c| c.borrow_mut().push(ctx.handle));
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pctx, ctx_handle(&ctx), "pctx") }
}

/// `cuCtxCreate_v2`: a new context, pushed on the calling thread's stack.
///
/// # Safety
/// `pctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    call("cuCtxCreate_v2", || create(pctx, flags, dev))
}

/// `cuCtxCreate_v3`: as `cuCtxCreate_v2`; execution-affinity parameters are refused.
///
/// # Safety
/// `pctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxCreate_v3(
    pctx: *mut CUcontext,
    paramsArray: *mut cudarc::driver::sys::CUexecAffinityParam,
    numParams: c_int,
    flags: c_uint,
    dev: CUdevice,
) -> CUresult {
    call("cuCtxCreate_v3", || {
        if numParams != 0 || !paramsArray.is_null() {
            return Err(CuErr::new(
                CUresult::CUDA_ERROR_NOT_SUPPORTED,
                "execution-affinity parameters are not supported by the CPU driver",
            ));
        }
        create(pctx, flags, dev)
    })
}

/// `cuCtxDestroy_v2`: waits for the context's work and frees everything it owns. Primary
/// contexts are released with `cuDevicePrimaryCtxRelease`, not destroyed.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxDestroy_v2(ctx: CUcontext) -> CUresult {
    call("cuCtxDestroy_v2", || {
        let drv = driver()?;
        let c = drv.context(ctx as usize)?;
        if c.primary {
            return Err(bad_context(
                "a primary context is not destroyed with cuCtxDestroy; use \
                 cuDevicePrimaryCtxRelease",
            ));
        }
        drv.destroy(&c);
        CURRENT.with(|s| s.borrow_mut().retain(|&h| h != c.handle));
        Ok(())
    })
}

/// `cuCtxSetCurrent`: replaces the top of the calling thread's stack (`NULL` unbinds).
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    call("cuCtxSetCurrent", || {
        let drv = driver()?;
        if ctx.is_null() {
            set_top(None);
            return Ok(());
        }
        let c = drv.context(ctx as usize)?;
        set_top(Some(c.handle));
        Ok(())
    })
}

/// `cuCtxGetCurrent`: `NULL` when none is current.
///
/// # Safety
/// `pctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    call("cuCtxGetCurrent", || {
        driver()?;
        let top = CURRENT.with(|c| c.borrow().last().copied());
        // SAFETY: the caller's out-pointer.
        unsafe { put(pctx, top.unwrap_or(0) as CUcontext, "pctx") }
    })
}

/// `cuCtxPushCurrent_v2`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CUresult {
    call("cuCtxPushCurrent_v2", || {
        let c = driver()?.context(ctx as usize)?;
        CURRENT.with(|s| s.borrow_mut().push(c.handle));
        Ok(())
    })
}

/// `cuCtxPopCurrent_v2`.
///
/// # Safety
/// `pctx` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) -> CUresult {
    call("cuCtxPopCurrent_v2", || {
        driver()?;
        let Some(h) = CURRENT.with(|s| s.borrow_mut().pop()) else {
            return Err(bad_context("the calling thread's context stack is empty"));
        };
        if !pctx.is_null() {
            // SAFETY: the caller's out-pointer, non-null.
            unsafe { pctx.write(h as CUcontext) };
        }
        Ok(())
    })
}

/// `cuCtxGetDevice`.
///
/// # Safety
/// `device` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    call("cuCtxGetDevice", || {
        let c = current_any()?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(device, c.device as CUdevice, "device") }
    })
}

/// `cuCtxSynchronize`: waits for every stream of the current context.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSynchronize() -> CUresult {
    call("cuCtxSynchronize", || current()?.synchronize())
}

/// `cuCtxEnablePeerAccess`: kernels of the current context may use `peerContext`'s memory.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxEnablePeerAccess(peerContext: CUcontext, Flags: c_uint) -> CUresult {
    call("cuCtxEnablePeerAccess", || {
        let c = current()?;
        let peer = driver()?.context(peerContext as usize)?;
        if Flags != 0 {
            return Err(invalid(format!("Flags must be 0, got {Flags}")));
        }
        if peer.device == c.device {
            return Err(CuErr::new(
                CUresult::CUDA_ERROR_INVALID_DEVICE,
                "peer access is between contexts of two different devices",
            ));
        }
        if !c.peers.lock().insert(peer.device) {
            return Err(CuErr::new(
                CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                format!("peer access to device {} is already enabled", peer.device),
            ));
        }
        Ok(())
    })
}

/// `cuCtxDisablePeerAccess`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxDisablePeerAccess(peerContext: CUcontext) -> CUresult {
    call("cuCtxDisablePeerAccess", || {
        let c = current()?;
        let peer = driver()?.context(peerContext as usize)?;
        if !c.peers.lock().remove(&peer.device) {
            return Err(CuErr::new(
                CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
                format!("peer access to device {} was not enabled", peer.device),
            ));
        }
        Ok(())
    })
}

/// `cuCtxGetLimit`.
///
/// # Safety
/// `pvalue` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetLimit(pvalue: *mut usize, limit: u32) -> CUresult {
    call("cuCtxGetLimit", || {
        let c = current()?;
        let v = limit_value(&c, limit, None)?;
        // SAFETY: the caller's out-pointer.
        unsafe { put(pvalue, v, "pvalue") }
    })
}

/// `cuCtxSetLimit`: remembered for `cuCtxGetLimit` (the CPU has no such limits to set).
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetLimit(limit: u32, value: usize) -> CUresult {
    call("cuCtxSetLimit", || {
        let c = current()?;
        limit_value(&c, limit, Some(value)).map(|_| ())
    })
}

fn limit_value(c: &Context, limit: u32, set: Option<usize>) -> CuResult<usize> {
    if limit > 6 {
        return Err(invalid(format!("{limit} is not a CUlimit")));
    }
    let mut s = c.settings.lock();
    if let Some(v) = set {
        s.limits.insert(limit, v);
    }
    Ok(s.limits.get(&limit).copied().unwrap_or(0))
}

/// `cuCtxGetCacheConfig`.
///
/// # Safety
/// `pconfig` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCacheConfig(
    pconfig: *mut cudarc::driver::sys::CUfunc_cache,
) -> CUresult {
    call("cuCtxGetCacheConfig", || {
        let c = current()?;
        let v = c.settings.lock().cache_config;
        // SAFETY: the caller's out-pointer; the stored value came from the enum's range.
        unsafe { put(pconfig.cast::<u32>(), v, "pconfig") }
    })
}

/// `cuCtxSetCacheConfig`: remembered (the CPU has no L1/shared split).
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetCacheConfig(config: u32) -> CUresult {
    call("cuCtxSetCacheConfig", || {
        let c = current()?;
        if config > 3 {
            return Err(invalid(format!("{config} is not a CUfunc_cache")));
        }
        c.settings.lock().cache_config = config;
        Ok(())
    })
}

/// `cuCtxGetFlags`.
///
/// # Safety
/// `flags` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetFlags(flags: *mut c_uint) -> CUresult {
    call("cuCtxGetFlags", || {
        let c = current()?;
        let v = c.settings.lock().flags;
        // SAFETY: the caller's out-pointer.
        unsafe { put(flags, v, "flags") }
    })
}

/// `cuCtxSetFlags`.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetFlags(flags: c_uint) -> CUresult {
    call("cuCtxSetFlags", || {
        let c = current()?;
        check_ctx_flags(flags)?;
        c.settings.lock().flags = flags;
        Ok(())
    })
}

/// `cuCtxGetStreamPriorityRange`: one priority level (0).
///
/// # Safety
/// Each pointer is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    leastPriority: *mut c_int,
    greatestPriority: *mut c_int,
) -> CUresult {
    call("cuCtxGetStreamPriorityRange", || {
        current()?;
        // SAFETY: the caller's out-pointers (either may be NULL, as CUDA allows).
        unsafe {
            if !leastPriority.is_null() {
                leastPriority.write(0);
            }
            if !greatestPriority.is_null() {
                greatestPriority.write(0);
            }
        }
        Ok(())
    })
}

/// `cuCtxGetApiVersion`.
///
/// # Safety
/// `version` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint) -> CUresult {
    call("cuCtxGetApiVersion", || {
        let drv = driver()?;
        if !ctx.is_null() {
            drv.context(ctx as usize)?;
        } else {
            current_any()?;
        }
        // SAFETY: the caller's out-pointer.
        unsafe { put(version, crate::state::DRIVER_VERSION as c_uint, "version") }
    })
}
