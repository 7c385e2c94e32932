//! Copies and memsets, synchronous and in stream order.
//!
//! Synchronous copies are complete when they return, whatever memory their sides are: those to
//! or from pageable host memory wait for the legacy stream (and so for every blocking stream's
//! earlier work) and copy on the calling thread; those between regions of the address map
//! (device memory, and mapped pinned host memory, whose pointer is its device address) are
//! enqueued on the legacy stream and waited for. Memsets of device memory are enqueued and
//! return at once, as the driver API documents; memsets of memory the host reads directly
//! (pinned host memory, managed memory) finish before returning. Asynchronous
//! copies touch page-locked host memory (`cuMemHostAlloc`, `cuMemHostRegister`) on the stream's
//! worker when their turn comes, so that memory must stay valid until then (the driver API's
//! rule). Pageable host memory is handled as NVIDIA's driver does, which callers rely on (cudarc's
//! safe API hands it borrowed `Vec`s): an asynchronous copy from it is staged (copied before the
//! call returns, so the caller may reuse or free it), one to it returns only once the copy is
//! done, and host-to-host copies are fully synchronous.

use std::ffi::{c_uchar, c_uint, c_ushort, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUcontext, CUdeviceptr, CUresult, CUstream};
use streamexec::{DeviceSlice, Stream};

use crate::context::{self, Context, current, resolve as resolve_stream};
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid, non_null};
use crate::memory::{self, Region, lookup, resolve};
use crate::stream::{CuStream, SendPtr};

fn unknown(e: streamexec::Error) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_UNKNOWN, e.to_string())
}

/// Copies `n` bytes from host `src` into `dst` (inside `r`) now.
///
/// # Safety
/// `src` is valid for reads of `n` bytes.
unsafe fn h2d_now(r: &Region, dst: u64, src: *const c_void, n: usize) -> CuResult<()> {
    // SAFETY: the caller's contract.
    let src = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) };
    driver()?
        .exec
        .synchronous_memcpy_h2d(src, r.slice(dst, n as u64)?)
        .map_err(unknown)
}

/// Copies `n` bytes of `src` (inside `r`) to host `dst` now.
///
/// # Safety
/// `dst` is valid for writes of `n` bytes.
unsafe fn d2h_now(r: &Region, src: u64, dst: *mut c_void, n: usize) -> CuResult<()> {
    // SAFETY: the caller's contract.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), n) };
    driver()?
        .exec
        .synchronous_memcpy_d2h(r.slice(src, n as u64)?, dst)
        .map_err(unknown)
}

/// One side of a copy: a device range (in the address map) or host memory.
#[derive(Clone)]
pub(crate) enum Side {
    Device(Arc<Region>),
    Host,
}

/// The side `[addr, addr + n)` is on: device memory (it must then lie inside one live
/// allocation) when the address map holds `addr`, else host memory.
pub(crate) fn side(addr: u64, n: usize, what: &str) -> CuResult<Side> {
    match lookup(addr) {
        Some(_) => Ok(Side::Device(resolve(addr, n as u64, what)?)),
        None if addr == 0 => Err(invalid(format!("{what} is NULL"))),
        None => Ok(Side::Host),
    }
}

/// Issues a copy of `n` bytes from `src` to `dst` (on the sides given) on `se`, touching host
/// memory only when the copy runs (no staging, no waiting): what a copy from or to page-locked
/// memory, and a graph's memcpy node, does.
///
/// # Safety
/// Host sides stay valid for `n` bytes until the copy has run.
pub(crate) unsafe fn issue_copy(
    se: &mut Stream,
    (d, dst): (&Side, u64),
    (r, src): (&Side, u64),
    n: usize,
) -> CuResult<()> {
    let exec = driver()?.exec.clone();
    let (dp, sp) = (SendPtr(dst as *mut c_void), SendPtr(src as *mut c_void));
    match (d, r) {
        (Side::Device(dr), Side::Device(sr)) => {
            let (a, b) = (sr.slice(src, n as u64)?, dr.slice(dst, n as u64)?);
            se.then_memcpy_d2d(a, b);
        }
        (Side::Device(dr), Side::Host) => {
            let dr = dr.clone();
            se.then_host_callback_with_status(move || {
                let sp = sp;
                // SAFETY: this function's contract: `src` stays valid until the copy has run.
                let src = unsafe { std::slice::from_raw_parts(sp.0.cast::<u8>(), n) };
                let dst: DeviceSlice<'_, u8> = dr.slice(dst, n as u64).map_err(as_se)?;
                exec.synchronous_memcpy_h2d(src, dst)
            });
        }
        (Side::Host, Side::Device(sr)) => {
            let sr = sr.clone();
            se.then_host_callback_with_status(move || {
                let dp = dp;
                // SAFETY: this function's contract: `dst` stays valid until the copy has run.
                let dst = unsafe { std::slice::from_raw_parts_mut(dp.0.cast::<u8>(), n) };
                exec.synchronous_memcpy_d2h(sr.slice(src, n as u64).map_err(as_se)?, dst)
            });
        }
        (Side::Host, Side::Host) => {
            se.then_host_callback(move || {
                let (dp, sp) = (dp, sp);
                // SAFETY: this function's contract: both stay valid until the copy has run.
                unsafe { std::ptr::copy(sp.0.cast::<u8>(), dp.0.cast::<u8>(), n) };
            });
        }
    }
    Ok(())
}

/// Enqueues `issue` on `s`; an error `issue` reports (before it enqueued anything) is returned.
fn enqueue_issue(
    ctx: &Context,
    s: &CuStream,
    issue: impl FnOnce(&mut Stream) -> CuResult<()>,
) -> CuResult<()> {
    let mut res = Ok(());
    s.enqueue(ctx, |se| res = issue(se))?;
    res
}

/// Enqueues a copy of `n` bytes from `src` to `dst` (each device or host, as the address map
/// says) on `s`.
fn enqueue_copy(ctx: &Context, s: &CuStream, dst: u64, src: u64, n: usize) -> CuResult<()> {
    let (d, r) = (side(dst, n, "dst")?, side(src, n, "src")?);
    // SAFETY: the driver API's rule: page-locked host memory stays valid until the copy has
    // run; pageable memory is handled below (staged, or waited for).
    let copy = |se: &mut Stream| unsafe { issue_copy(se, (&d, dst), (&r, src), n) };
    match (&d, &r) {
        (Side::Device(dr), Side::Host) if !page_locked(src, n) => {
            // Pageable source: staged now, as NVIDIA's driver does, so the caller may reuse it
            // as soon as the call returns.
            let exec = driver()?.exec.clone();
            let dr = dr.clone();
            // SAFETY: the caller's contract: `src` is valid for reads of `n` bytes now.
            let staged = unsafe { std::slice::from_raw_parts(src as *const u8, n) }.to_vec();
            s.enqueue(ctx, move |se| {
                se.then_host_callback_with_status(move || {
                    let dst: DeviceSlice<'_, u8> = dr.slice(dst, n as u64).map_err(as_se)?;
                    exec.synchronous_memcpy_h2d(&staged, dst)
                });
            })
        }
        (Side::Device(_), _) => enqueue_issue(ctx, s, copy),
        (Side::Host, Side::Device(_)) => {
            enqueue_issue(ctx, s, copy)?;
            if page_locked(dst, n) {
                Ok(())
            } else {
                // Pageable destination: the call returns once the copy is done.
                s.synchronize(ctx)
            }
        }
        (Side::Host, Side::Host) => {
            enqueue_issue(ctx, s, copy)?;
            // Host-to-host copies are fully synchronous.
            s.synchronize(ctx)
        }
    }
}

/// Whether host range `[addr, addr + n)` is page-locked (registered with `cuMemHostRegister`);
/// memory from `cuMemHostAlloc` is in the address map and never reaches here.
fn page_locked(addr: u64, n: usize) -> bool {
    memory::registered(addr, n as u64).is_some()
}

fn as_se(e: CuErr) -> streamexec::Error {
    streamexec::Error::HostCallback { detail: e.detail }
}

/// A synchronous copy: complete when it returns, whatever memory either side is. Copies between
/// regions of the address map (device memory, mapped pinned host memory, module globals) run in
/// stream order on the legacy (or per-thread) stream and are waited for: pinned host memory is
/// in the map, and the host reads it directly as soon as the call returns. (CUDA lets a
/// device-to-device copy return early; finishing it is one of the orders it allows.)
fn sync_copy(dst: u64, src: u64, n: usize) -> CuResult<()> {
    let ctx = current()?;
    if n == 0 {
        return Ok(());
    }
    // The legacy stream, or the per-thread one in a `_ptds` export.
    let null = context::resolve_in(&ctx, std::ptr::null_mut())?;
    match (side(dst, n, "dst")?, side(src, n, "src")?) {
        (Side::Device(_), Side::Device(_)) => {
            enqueue_copy(&ctx, &null, dst, src, n)?;
            null.synchronize(&ctx)
        }
        (Side::Device(dr), Side::Host) => {
            null.synchronize(&ctx)?;
            // SAFETY: the caller's contract: `src` is valid for `n` bytes.
            unsafe { h2d_now(&dr, dst, src as *const c_void, n) }
        }
        (Side::Host, Side::Device(sr)) => {
            null.synchronize(&ctx)?;
            // SAFETY: the caller's contract: `dst` is valid for `n` bytes.
            unsafe { d2h_now(&sr, src, dst as *mut c_void, n) }
        }
        (Side::Host, Side::Host) => {
            null.synchronize(&ctx)?;
            // SAFETY: the caller's contract: both are valid for `n` bytes.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) };
            Ok(())
        }
    }
}

fn async_copy(dst: u64, src: u64, n: usize, stream: CUstream) -> CuResult<()> {
    let (ctx, s) = resolve_stream(stream)?;
    if n == 0 {
        return Ok(());
    }
    enqueue_copy(&ctx, &s, dst, src, n)
}

/// A host pointer as an address, after a NULL check.
fn host(p: *const c_void, what: &str) -> CuResult<u64> {
    non_null(p, what)?;
    Ok(p as u64)
}

/// A device address that must be in the map (not host memory).
fn device(p: CUdeviceptr, n: usize, what: &str) -> CuResult<u64> {
    if n > 0 {
        resolve(p, n as u64, what)?;
    }
    Ok(p)
}

/// `cuMemcpyHtoD_v2`.
///
/// # Safety
/// `srcHost` is valid for reads of `ByteCount` bytes.
pub(crate) unsafe fn cuMemcpyHtoD_v2(
    dstDevice: CUdeviceptr,
    srcHost: *const c_void,
    ByteCount: usize,
) -> CuResult<()> {
    sync_copy(
        device(dstDevice, ByteCount, "dstDevice")?,
        host(srcHost, "srcHost")?,
        ByteCount,
    )
}

/// `cuMemcpyDtoH_v2`.
///
/// # Safety
/// `dstHost` is valid for writes of `ByteCount` bytes.
pub(crate) unsafe fn cuMemcpyDtoH_v2(
    dstHost: *mut c_void,
    srcDevice: CUdeviceptr,
    ByteCount: usize,
) -> CuResult<()> {
    sync_copy(
        host(dstHost, "dstHost")?,
        device(srcDevice, ByteCount, "srcDevice")?,
        ByteCount,
    )
}

/// `cuMemcpyDtoD_v2`: enqueued on the legacy stream.
pub(crate) fn cuMemcpyDtoD_v2(
    dstDevice: CUdeviceptr,
    srcDevice: CUdeviceptr,
    ByteCount: usize,
) -> CuResult<()> {
    sync_copy(
        device(dstDevice, ByteCount, "dstDevice")?,
        device(srcDevice, ByteCount, "srcDevice")?,
        ByteCount,
    )
}

/// `cuMemcpy`: either side host or device, as unified addressing tells.
///
/// # Safety
/// Host sides are valid for `ByteCount` bytes.
pub(crate) unsafe fn cuMemcpy(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    ByteCount: usize,
) -> CuResult<()> {
    sync_copy(dst, src, ByteCount)
}

/// `cuMemcpyAsync`.
///
/// # Safety
/// Host sides stay valid for `ByteCount` bytes until the copy has run.
pub(crate) unsafe fn cuMemcpyAsync(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    ByteCount: usize,
    hStream: CUstream,
) -> CuResult<()> {
    async_copy(dst, src, ByteCount, hStream)
}

/// `cuMemcpyHtoDAsync_v2`.
///
/// # Safety
/// `srcHost` stays valid for reads of `ByteCount` bytes until the copy has run.
pub(crate) unsafe fn cuMemcpyHtoDAsync_v2(
    dstDevice: CUdeviceptr,
    srcHost: *const c_void,
    ByteCount: usize,
    hStream: CUstream,
) -> CuResult<()> {
    async_copy(
        device(dstDevice, ByteCount, "dstDevice")?,
        host(srcHost, "srcHost")?,
        ByteCount,
        hStream,
    )
}

/// `cuMemcpyDtoHAsync_v2`.
///
/// # Safety
/// `dstHost` stays valid for writes of `ByteCount` bytes until the copy has run.
pub(crate) unsafe fn cuMemcpyDtoHAsync_v2(
    dstHost: *mut c_void,
    srcDevice: CUdeviceptr,
    ByteCount: usize,
    hStream: CUstream,
) -> CuResult<()> {
    async_copy(
        host(dstHost, "dstHost")?,
        device(srcDevice, ByteCount, "srcDevice")?,
        ByteCount,
        hStream,
    )
}

/// `cuMemcpyDtoDAsync_v2`.
pub(crate) fn cuMemcpyDtoDAsync_v2(
    dstDevice: CUdeviceptr,
    srcDevice: CUdeviceptr,
    ByteCount: usize,
    hStream: CUstream,
) -> CuResult<()> {
    async_copy(
        device(dstDevice, ByteCount, "dstDevice")?,
        device(srcDevice, ByteCount, "srcDevice")?,
        ByteCount,
        hStream,
    )
}

fn peer(
    dst: u64,
    dst_ctx: CUcontext,
    src: u64,
    src_ctx: CUcontext,
    n: usize,
    stream: Option<CUstream>,
) -> CuResult<()> {
    driver()?;
    let (dc, sc) = (
        context::lookup(dst_ctx as usize)?,
        context::lookup(src_ctx as usize)?,
    );
    let (dr, sr) = (device(dst, n, "dstDevice")?, device(src, n, "srcDevice")?);
    for (addr, c) in [(dr, &dc), (sr, &sc)] {
        if n > 0 && lookup(addr).is_some_and(|r| r.device != c.device) {
            return Err(invalid(format!(
                "{addr:#x} is memory of another device than context {:#x}'s",
                c.handle
            )));
        }
    }
    match stream {
        None => sync_copy(dst, src, n),
        Some(s) => async_copy(dst, src, n, s),
    }
}

/// `cuMemcpyPeer`.
pub(crate) fn cuMemcpyPeer(
    dstDevice: CUdeviceptr,
    dstContext: CUcontext,
    srcDevice: CUdeviceptr,
    srcContext: CUcontext,
    ByteCount: usize,
) -> CuResult<()> {
    peer(
        dstDevice, dstContext, srcDevice, srcContext, ByteCount, None,
    )
}

/// `cuMemcpyPeerAsync`.
pub(crate) fn cuMemcpyPeerAsync(
    dstDevice: CUdeviceptr,
    dstContext: CUcontext,
    srcDevice: CUdeviceptr,
    srcContext: CUcontext,
    ByteCount: usize,
    hStream: CUstream,
) -> CuResult<()> {
    peer(
        dstDevice,
        dstContext,
        srcDevice,
        srcContext,
        ByteCount,
        Some(hStream),
    )
}

/// A checked memset of `count` (> 0) elements of `width` bytes (1, 2, 4) to `value` at `dst`:
/// what `cuMemsetD*` enqueue and a graph's memset node issues for each row.
pub(crate) struct Memset {
    region: Arc<Region>,
    dst: u64,
    value: u32,
    width: u64,
    bytes: u64,
}

impl Memset {
    /// Checks the alignment and that the range lies inside one live allocation.
    pub(crate) fn new(dst: CUdeviceptr, value: u32, width: u64, count: usize) -> CuResult<Memset> {
        if !dst.is_multiple_of(width) {
            return Err(invalid(format!(
                "dstDevice {dst:#x} is not aligned to the {width}-byte element"
            )));
        }
        let bytes = (count as u64)
            .checked_mul(width)
            .ok_or_else(|| invalid("the element count overflows"))?;
        let region = resolve(dst, bytes, "dstDevice")?;
        Ok(Memset {
            region,
            dst,
            value,
            width,
            bytes,
        })
    }

    /// The context of the allocation it sets.
    pub(crate) fn ctx(&self) -> usize {
        self.region.ctx
    }

    /// Whether the host reads the memory directly (pinned host or managed memory).
    pub(crate) fn host_reachable(&self) -> bool {
        self.region.host_reachable()
    }

    /// Issues the memset on `se`.
    pub(crate) fn issue(&self, se: &mut Stream) -> CuResult<()> {
        let (dst, value, bytes) = (self.dst, self.value, self.bytes);
        let slice = self.region.slice(dst, bytes)?;
        match self.width {
            1 => {
                se.then_memset(slice, value as u8);
            }
            4 => {
                se.then_memset32(slice, value);
            }
            _ => {
                // 16-bit patterns: written from a pattern buffer in chunks, in stream order.
                let exec = driver()?.exec.clone();
                let region = self.region.clone();
                se.then_host_callback_with_status(move || {
                    const CHUNK: u64 = 1 << 16;
                    let pattern: Vec<u8> = (0..CHUNK / 2)
                        .flat_map(|_| (value as u16).to_ne_bytes())
                        .collect();
                    let mut at = 0;
                    while at < bytes {
                        let n = (bytes - at).min(CHUNK);
                        let dst = region.slice(dst + at, n).map_err(as_se)?;
                        exec.synchronous_memcpy_h2d(&pattern[..n as usize], dst)?;
                        at += n;
                    }
                    Ok(())
                });
            }
        }
        Ok(())
    }
}

/// A memset of `count` elements of `width` bytes (1, 2, 4) to `value` at `dst`, on `stream`
/// (`None`: the synchronous form on the legacy stream).
fn memset(
    dst: CUdeviceptr,
    value: u32,
    width: u64,
    count: usize,
    stream: Option<CUstream>,
) -> CuResult<()> {
    let (ctx, s) = match stream {
        Some(h) => resolve_stream(h)?,
        None => resolve_stream(std::ptr::null_mut())?,
    };
    if count == 0 {
        return Ok(());
    }
    let op = Memset::new(dst, value, width, count)?;
    enqueue_issue(&ctx, &s, |se| op.issue(se))?;
    if stream.is_none() && op.host_reachable() {
        s.synchronize(&ctx)?;
    }
    Ok(())
}

/// `cuMemsetD8_v2`.
pub(crate) fn cuMemsetD8_v2(dstDevice: CUdeviceptr, uc: c_uchar, N: usize) -> CuResult<()> {
    memset(dstDevice, uc.into(), 1, N, None)
}

/// `cuMemsetD16_v2`.
pub(crate) fn cuMemsetD16_v2(dstDevice: CUdeviceptr, us: c_ushort, N: usize) -> CuResult<()> {
    memset(dstDevice, us.into(), 2, N, None)
}

/// `cuMemsetD32_v2`.
pub(crate) fn cuMemsetD32_v2(dstDevice: CUdeviceptr, ui: c_uint, N: usize) -> CuResult<()> {
    memset(dstDevice, ui, 4, N, None)
}

/// `cuMemsetD8Async`.
pub(crate) fn cuMemsetD8Async(
    dstDevice: CUdeviceptr,
    uc: c_uchar,
    N: usize,
    hStream: CUstream,
) -> CuResult<()> {
    memset(dstDevice, uc.into(), 1, N, Some(hStream))
}

/// `cuMemsetD16Async`.
pub(crate) fn cuMemsetD16Async(
    dstDevice: CUdeviceptr,
    us: c_ushort,
    N: usize,
    hStream: CUstream,
) -> CuResult<()> {
    memset(dstDevice, us.into(), 2, N, Some(hStream))
}

/// `cuMemsetD32Async`.
pub(crate) fn cuMemsetD32Async(
    dstDevice: CUdeviceptr,
    ui: c_uint,
    N: usize,
    hStream: CUstream,
) -> CuResult<()> {
    memset(dstDevice, ui, 4, N, Some(hStream))
}
