//! The `cuCtx*` and `cuDevicePrimaryCtx*` entry points. Destroying a context (`cuCtxDestroy`,
//! the last `cuDevicePrimaryCtxRelease`, `cuDevicePrimaryCtxReset`) waits for its work and
//! frees what it owns in every family (streams, events, functions, modules, memory), so this
//! file sits above them.

use std::ffi::{c_int, c_uint, c_ulonglong};
use std::sync::Arc;

use cudarc::driver::sys::{CUcontext, CUdevice, CUexecAffinityParam, CUfunc_cache, CUresult};

use super::{CURRENT, Context, bad_context, current, current_any, lookup, make, primary};
use crate::driver::{DRIVER_VERSION, driver};
use crate::entry::{CuErr, CuResult, invalid, non_null, put};
use crate::{event, memory, module, stream};

/// Destroys `ctx`: waits for its work, frees its memory, modules, streams and events.
fn destroy(ctx: &Arc<Context>) {
    ctx.retire();
    stream::unregister_context(ctx.handle);
    event::unregister_context(ctx.handle);
    module::unload_context(ctx.handle);
    memory::free_context(ctx.handle);
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
pub(crate) unsafe fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    non_null(pctx, "pctx")?;
    let mut p = primary(d)?.lock();
    let ctx = match &p.ctx {
        Some(c) => c.clone(),
        None => {
            let c = make(d, true, p.flags)?;
            p.ctx = Some(c.clone());
            c
        }
    };
    p.refs += 1;
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pctx, ctx_handle(&ctx), "pctx") }
}

/// `cuDevicePrimaryCtxRelease_v2`: destroys the primary context when the last holder releases.
pub(crate) fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    let mut p = primary(d)?.lock();
    if p.refs == 0 {
        return Err(bad_context(format!(
            "the primary context of device {d} is not retained"
        )));
    }
    p.refs -= 1;
    if p.refs == 0
        && let Some(c) = p.ctx.take()
    {
        destroy(&c);
    }
    Ok(())
}

/// `cuDevicePrimaryCtxReset_v2`: destroys the primary context now (its holders' handles die).
pub(crate) fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    let mut p = primary(d)?.lock();
    if let Some(c) = p.ctx.take() {
        destroy(&c);
    }
    p.refs = 0;
    Ok(())
}

/// `cuDevicePrimaryCtxGetState`.
///
/// # Safety
/// `flags` and `active` are null or valid for writes.
pub(crate) unsafe fn cuDevicePrimaryCtxGetState(
    dev: CUdevice,
    flags: *mut c_uint,
    active: *mut c_int,
) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    let p = primary(d)?.lock();
    // SAFETY: the caller's out-pointers.
    unsafe {
        put(flags, p.flags, "flags")?;
        put(active, c_int::from(p.ctx.is_some()), "active")
    }
}

/// `cuDevicePrimaryCtxSetFlags_v2`.
pub(crate) fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    check_ctx_flags(flags)?;
    primary(d)?.lock().flags = flags;
    Ok(())
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
    let d = driver()?.device(dev)?;
    non_null(pctx, "pctx")?;
    check_ctx_flags(flags)?;
    let ctx = make(d, false, flags)?;
    CURRENT.with(|c| c.borrow_mut().push(ctx.handle));
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pctx, ctx_handle(&ctx), "pctx") }
}

/// `cuCtxCreate_v2`: a new context, pushed on the calling thread's stack.
///
/// # Safety
/// `pctx` is null or valid for a write.
pub(crate) unsafe fn cuCtxCreate_v2(
    pctx: *mut CUcontext,
    flags: c_uint,
    dev: CUdevice,
) -> CuResult<()> {
    create(pctx, flags, dev)
}

/// `cuCtxCreate_v3`: as `cuCtxCreate_v2`; execution-affinity parameters are refused.
///
/// # Safety
/// `pctx` is null or valid for a write.
pub(crate) unsafe fn cuCtxCreate_v3(
    pctx: *mut CUcontext,
    paramsArray: *mut CUexecAffinityParam,
    numParams: c_int,
    flags: c_uint,
    dev: CUdevice,
) -> CuResult<()> {
    if numParams != 0 || !paramsArray.is_null() {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
            "execution-affinity parameters are not supported by the CPU driver",
        ));
    }
    create(pctx, flags, dev)
}

/// `cuCtxDestroy_v2`: waits for the context's work and frees everything it owns. Primary
/// contexts are released with `cuDevicePrimaryCtxRelease`, not destroyed.
pub(crate) fn cuCtxDestroy_v2(ctx: CUcontext) -> CuResult<()> {
    driver()?;
    let c = lookup(ctx as usize)?;
    if c.primary {
        return Err(bad_context(
            "a primary context is not destroyed with cuCtxDestroy; use \
             cuDevicePrimaryCtxRelease",
        ));
    }
    destroy(&c);
    CURRENT.with(|s| s.borrow_mut().retain(|&h| h != c.handle));
    Ok(())
}

/// `cuCtxSetCurrent`: replaces the top of the calling thread's stack (`NULL` unbinds).
pub(crate) fn cuCtxSetCurrent(ctx: CUcontext) -> CuResult<()> {
    driver()?;
    if ctx.is_null() {
        set_top(None);
        return Ok(());
    }
    let c = lookup(ctx as usize)?;
    set_top(Some(c.handle));
    Ok(())
}

/// `cuCtxGetCurrent`: `NULL` when none is current.
///
/// # Safety
/// `pctx` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CuResult<()> {
    driver()?;
    let top = CURRENT.with(|c| c.borrow().last().copied());
    // SAFETY: the caller's out-pointer.
    unsafe { put(pctx, top.unwrap_or(0) as CUcontext, "pctx") }
}

/// `cuCtxPushCurrent_v2`.
pub(crate) fn cuCtxPushCurrent_v2(ctx: CUcontext) -> CuResult<()> {
    driver()?;
    let c = lookup(ctx as usize)?;
    CURRENT.with(|s| s.borrow_mut().push(c.handle));
    Ok(())
}

/// `cuCtxPopCurrent_v2`.
///
/// # Safety
/// `pctx` is null or valid for a write.
pub(crate) unsafe fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) -> CuResult<()> {
    driver()?;
    let Some(h) = CURRENT.with(|s| s.borrow_mut().pop()) else {
        return Err(bad_context("the calling thread's context stack is empty"));
    };
    if !pctx.is_null() {
        // SAFETY: the caller's out-pointer, non-null.
        unsafe { pctx.write(h as CUcontext) };
    }
    Ok(())
}

/// `cuCtxGetDevice`.
///
/// # Safety
/// `device` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetDevice(device: *mut CUdevice) -> CuResult<()> {
    let c = current_any()?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(device, c.device as CUdevice, "device") }
}

/// `cuCtxSynchronize`: waits for every stream of the current context.
pub(crate) fn cuCtxSynchronize() -> CuResult<()> {
    current()?.synchronize()
}

/// `cuCtxEnablePeerAccess`: kernels of the current context may use `peerContext`'s memory.
pub(crate) fn cuCtxEnablePeerAccess(peerContext: CUcontext, Flags: c_uint) -> CuResult<()> {
    let c = current()?;
    driver()?;
    let peer = lookup(peerContext as usize)?;
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
}

/// `cuCtxDisablePeerAccess`.
pub(crate) fn cuCtxDisablePeerAccess(peerContext: CUcontext) -> CuResult<()> {
    let c = current()?;
    driver()?;
    let peer = lookup(peerContext as usize)?;
    if !c.peers.lock().remove(&peer.device) {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
            format!("peer access to device {} was not enabled", peer.device),
        ));
    }
    Ok(())
}

/// `cuCtxGetLimit`.
///
/// # Safety
/// `pvalue` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetLimit(pvalue: *mut usize, limit: u32) -> CuResult<()> {
    let c = current()?;
    let v = limit_value(&c, limit, None)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(pvalue, v, "pvalue") }
}

/// `cuCtxSetLimit`: `CU_LIMIT_MALLOC_HEAP_SIZE` sizes the heap kernels' `malloc` draws from
/// (refused with `CUDA_ERROR_INVALID_VALUE` while kernels hold heap memory, as CUDA refuses it
/// after kernels used the heap); the other limits are remembered for `cuCtxGetLimit` (the CPU
/// has no such limits to set).
pub(crate) fn cuCtxSetLimit(limit: u32, value: usize) -> CuResult<()> {
    let c = current()?;
    limit_value(&c, limit, Some(value)).map(|_| ())
}

/// `CU_LIMIT_STACK_SIZE`, `CU_LIMIT_PRINTF_FIFO_SIZE`, `CU_LIMIT_MALLOC_HEAP_SIZE`.
const LIMIT_STACK: u32 = 0;
const LIMIT_PRINTF_FIFO: u32 = 1;
const LIMIT_MALLOC_HEAP: u32 = 2;

fn limit_value(c: &Context, limit: u32, set: Option<usize>) -> CuResult<usize> {
    if limit > 6 {
        return Err(invalid(format!("{limit} is not a CUlimit")));
    }
    if limit == LIMIT_MALLOC_HEAP {
        // One heap for the library: its devices share one executor (`driver.rs`).
        let heap = crate::stream::ctx_exec()
            .ptx_services()
            .map_err(|e| crate::stream::se_error("the device heap", e))?;
        if let Some(v) = set {
            if heap.heap_used() > 0 {
                return Err(invalid(format!(
                    "kernels hold {} bytes of the device heap (malloc without free); its size \
                     must be set before they allocate",
                    heap.heap_used()
                )));
            }
            heap.set_heap_limit(v as u64);
        }
        return Ok(heap.heap_limit() as usize);
    }
    let mut s = c.settings.lock();
    if let Some(v) = set {
        s.limits.insert(limit, v);
    }
    // CUDA's defaults: a 1 KiB stack per thread, a 1 MiB printf buffer.
    let default = match limit {
        LIMIT_STACK => 1024,
        LIMIT_PRINTF_FIFO => 1 << 20,
        _ => 0,
    };
    Ok(s.limits.get(&limit).copied().unwrap_or(default))
}

/// `cuCtxGetCacheConfig`.
///
/// # Safety
/// `pconfig` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetCacheConfig(pconfig: *mut CUfunc_cache) -> CuResult<()> {
    let c = current()?;
    let v = c.settings.lock().cache_config;
    // SAFETY: the caller's out-pointer; the stored value came from the enum's range.
    unsafe { put(pconfig.cast::<u32>(), v, "pconfig") }
}

/// `cuCtxSetCacheConfig`: remembered (the CPU has no L1/shared split).
pub(crate) fn cuCtxSetCacheConfig(config: u32) -> CuResult<()> {
    let c = current()?;
    if config > 3 {
        return Err(invalid(format!("{config} is not a CUfunc_cache")));
    }
    c.settings.lock().cache_config = config;
    Ok(())
}

/// `cuCtxGetFlags`.
///
/// # Safety
/// `flags` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetFlags(flags: *mut c_uint) -> CuResult<()> {
    let c = current()?;
    let v = c.settings.lock().flags;
    // SAFETY: the caller's out-pointer.
    unsafe { put(flags, v, "flags") }
}

/// `cuCtxSetFlags`.
pub(crate) fn cuCtxSetFlags(flags: c_uint) -> CuResult<()> {
    let c = current()?;
    check_ctx_flags(flags)?;
    c.settings.lock().flags = flags;
    Ok(())
}

/// `cuCtxGetStreamPriorityRange`: one priority level (0).
///
/// # Safety
/// Each pointer is null or valid for a write.
pub(crate) unsafe fn cuCtxGetStreamPriorityRange(
    leastPriority: *mut c_int,
    greatestPriority: *mut c_int,
) -> CuResult<()> {
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
}

/// `cuCtxGetApiVersion`.
///
/// # Safety
/// `version` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint) -> CuResult<()> {
    driver()?;
    if !ctx.is_null() {
        lookup(ctx as usize)?;
    } else {
        current_any()?;
    }
    // SAFETY: the caller's out-pointer.
    unsafe { put(version, DRIVER_VERSION as c_uint, "version") }
}

/// `cuCtxGetId`: a number unique to the context over the process's life (of the current
/// context when `ctx` is NULL).
///
/// # Safety
/// `ctxId` is null or valid for a write.
pub(crate) unsafe fn cuCtxGetId(ctx: CUcontext, ctxId: *mut c_ulonglong) -> CuResult<()> {
    driver()?;
    let c = if ctx.is_null() {
        current_any()?
    } else {
        lookup(ctx as usize)?
    };
    // SAFETY: the caller's out-pointer.
    unsafe { put(ctxId, (c.handle >> 4) as c_ulonglong, "ctxId") }
}
