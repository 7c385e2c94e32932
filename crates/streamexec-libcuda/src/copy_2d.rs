//! `cuMemcpy2D*` and `cuMemcpy3D*`: pitched copies between host, device and unified memory,
//! checked and issued as a graph's memcpy node is (`graph/nodes.rs`: every device row inside a
//! live allocation; CUDA arrays refused). A 3-D copy is its slices, each a 2-D copy.
//!
//! The synchronous forms are complete when they return, whatever memory their ends are. An
//! asynchronous form whose ends include host memory outside the address map (pageable, or
//! registered without mapping) also returns once it is done, as NVIDIA's driver does for
//! pageable memory; between regions of the map it is only enqueued.

use std::ffi::c_void;

use cudarc::driver::sys::{CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUstream};

use crate::context::{self, current, resolve as resolve_stream};
use crate::entry::{CuResult, invalid, non_null};
use crate::graph::nodes::{MemcpyNode, RawMemcpy3D, ReadyCopy};

/// `CUDA_MEMCPY2D` with its `CUmemorytype` fields as integers (its layout checked against
/// cudarc's struct below).
#[repr(C)]
#[derive(Clone, Copy)]
struct RawMemcpy2D {
    srcXInBytes: usize,
    srcY: usize,
    srcMemoryType: u32,
    srcHost: *const c_void,
    srcDevice: u64,
    srcArray: *mut c_void,
    srcPitch: usize,
    dstXInBytes: usize,
    dstY: usize,
    dstMemoryType: u32,
    dstHost: *mut c_void,
    dstDevice: u64,
    dstArray: *mut c_void,
    dstPitch: usize,
    WidthInBytes: usize,
    Height: usize,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<RawMemcpy2D>() == size_of::<CUDA_MEMCPY2D>());
    assert!(offset_of!(RawMemcpy2D, srcMemoryType) == offset_of!(CUDA_MEMCPY2D, srcMemoryType));
    assert!(offset_of!(RawMemcpy2D, srcHost) == offset_of!(CUDA_MEMCPY2D, srcHost));
    assert!(offset_of!(RawMemcpy2D, dstMemoryType) == offset_of!(CUDA_MEMCPY2D, dstMemoryType));
    assert!(offset_of!(RawMemcpy2D, dstHost) == offset_of!(CUDA_MEMCPY2D, dstHost));
    assert!(offset_of!(RawMemcpy2D, Height) == offset_of!(CUDA_MEMCPY2D, Height));
};

impl RawMemcpy2D {
    /// The same copy as a one-slice `CUDA_MEMCPY3D`.
    fn as_3d(&self) -> RawMemcpy3D {
        RawMemcpy3D {
            srcXInBytes: self.srcXInBytes,
            srcY: self.srcY,
            srcZ: 0,
            srcLOD: 0,
            srcMemoryType: self.srcMemoryType,
            srcHost: self.srcHost,
            srcDevice: self.srcDevice,
            srcArray: self.srcArray,
            reserved0: std::ptr::null_mut(),
            srcPitch: self.srcPitch,
            srcHeight: 0,
            dstXInBytes: self.dstXInBytes,
            dstY: self.dstY,
            dstZ: 0,
            dstLOD: 0,
            dstMemoryType: self.dstMemoryType,
            dstHost: self.dstHost,
            dstDevice: self.dstDevice,
            dstArray: self.dstArray,
            reserved1: std::ptr::null_mut(),
            dstPitch: self.dstPitch,
            dstHeight: 0,
            WidthInBytes: self.WidthInBytes,
            Height: self.Height,
            Depth: 1,
        }
    }
}

/// The checked slices of copy `p` (a 2-D copy is one), resolved for one issue.
fn slices(p: &RawMemcpy3D, ctx: usize) -> CuResult<Vec<ReadyCopy>> {
    if p.Depth == 0 {
        return Err(invalid(
            "Depth is 0: a copy moves at least one slice (Depth 1 for 2-D)",
        ));
    }
    if p.Depth > 1 {
        for (what, y, height) in [("src", p.srcY, p.srcHeight), ("dst", p.dstY, p.dstHeight)] {
            if height < y.saturating_add(p.Height) {
                return Err(invalid(format!(
                    "{what}Height {height} is less than {what}Y + Height ({y} + {})",
                    p.Height
                )));
            }
        }
    }
    (0..p.Depth)
        .map(|z| {
            // Slice z is rows (Z + z) * height + Y.. of each end.
            let row = |y: usize, zz: usize, height: usize| {
                zz.checked_add(z)
                    .and_then(|s| s.checked_mul(height))
                    .and_then(|r| r.checked_add(y))
                    .ok_or_else(|| invalid("the slice's start row overflows"))
            };
            let mut one = *p;
            one.srcY = if p.Depth > 1 || p.srcZ > 0 {
                row(p.srcY, p.srcZ, p.srcHeight)?
            } else {
                p.srcY
            };
            one.dstY = if p.Depth > 1 || p.dstZ > 0 {
                row(p.dstY, p.dstZ, p.dstHeight)?
            } else {
                p.dstY
            };
            (one.srcZ, one.dstZ, one.Depth) = (0, 0, 1);
            // SAFETY: `one` is a valid `RawMemcpy3D`, which has `CUDA_MEMCPY3D`'s layout and is
            // read back as a `RawMemcpy3D` (no enum field is read as an enum).
            let node = unsafe { MemcpyNode::new((&raw const one).cast::<CUDA_MEMCPY3D>(), ctx)? };
            node.prepare()
        })
        .collect()
}

/// Issues copy `p` on `stream` (`None`: the synchronous form on the legacy stream, or the
/// per-thread one in a `_ptds` export) and waits as the module docs say.
fn copy(p: &RawMemcpy3D, stream: Option<CUstream>) -> CuResult<()> {
    let (ctx, s) = match stream {
        Some(h) => resolve_stream(h)?,
        None => {
            let ctx = current()?;
            let s = context::resolve_in(&ctx, std::ptr::null_mut())?;
            (ctx, s)
        }
    };
    let parts = slices(p, ctx.handle)?;
    let mut res = Ok(());
    s.enqueue(&ctx, |se| {
        res = parts.iter().try_for_each(|c| c.issue(se));
    })?;
    res?;
    if stream.is_none() || parts.iter().any(ReadyCopy::touches_host) {
        s.synchronize(&ctx)?;
    }
    Ok(())
}

/// Reads a `CUDA_MEMCPY2D` as a one-slice 3-D copy.
///
/// # Safety
/// `p` is null or valid for a read.
unsafe fn read_2d(p: *const CUDA_MEMCPY2D) -> CuResult<RawMemcpy3D> {
    non_null(p, "pCopy")?;
    // SAFETY: non-null, valid for a read (the caller's contract); `RawMemcpy2D` has the layout
    // of `CUDA_MEMCPY2D` with integers where it has enums.
    Ok(unsafe { p.cast::<RawMemcpy2D>().read() }.as_3d())
}

/// Reads a `CUDA_MEMCPY3D`.
///
/// # Safety
/// `p` is null or valid for a read.
unsafe fn read_3d(p: *const CUDA_MEMCPY3D) -> CuResult<RawMemcpy3D> {
    non_null(p, "pCopy")?;
    // SAFETY: as `read_2d`, for `RawMemcpy3D`.
    Ok(unsafe { p.cast::<RawMemcpy3D>().read() })
}

/// `cuMemcpy2D_v2`.
///
/// # Safety
/// `pCopy` is null or valid for a read; its host ends are valid for the rows they name.
pub(crate) unsafe fn cuMemcpy2D_v2(pCopy: *const CUDA_MEMCPY2D) -> CuResult<()> {
    // SAFETY: the caller's contract.
    copy(&unsafe { read_2d(pCopy)? }, None)
}

/// `cuMemcpy2DUnaligned_v2`: as `cuMemcpy2D_v2` (no alignment rule to relax on the CPU).
///
/// # Safety
/// As `cuMemcpy2D_v2`.
pub(crate) unsafe fn cuMemcpy2DUnaligned_v2(pCopy: *const CUDA_MEMCPY2D) -> CuResult<()> {
    // SAFETY: the caller's contract.
    copy(&unsafe { read_2d(pCopy)? }, None)
}

/// `cuMemcpy2DAsync_v2`.
///
/// # Safety
/// As `cuMemcpy2D_v2`; page-locked host ends stay valid until the copy has run.
pub(crate) unsafe fn cuMemcpy2DAsync_v2(
    pCopy: *const CUDA_MEMCPY2D,
    hStream: CUstream,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    copy(&unsafe { read_2d(pCopy)? }, Some(hStream))
}

/// `cuMemcpy3D_v2`.
///
/// # Safety
/// As `cuMemcpy2D_v2`, for a `CUDA_MEMCPY3D`.
pub(crate) unsafe fn cuMemcpy3D_v2(pCopy: *const CUDA_MEMCPY3D) -> CuResult<()> {
    // SAFETY: the caller's contract.
    copy(&unsafe { read_3d(pCopy)? }, None)
}

/// `cuMemcpy3DAsync_v2`.
///
/// # Safety
/// As `cuMemcpy2DAsync_v2`, for a `CUDA_MEMCPY3D`.
pub(crate) unsafe fn cuMemcpy3DAsync_v2(
    pCopy: *const CUDA_MEMCPY3D,
    hStream: CUstream,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    copy(&unsafe { read_3d(pCopy)? }, Some(hStream))
}
