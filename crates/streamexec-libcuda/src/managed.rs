//! Managed memory (`cuMemAllocManaged`): on the CPU it is ordinary memory, in the address map as
//! a region of its own kind, which the host reads and writes through the returned pointer and
//! kernels reach at the same address. There is nothing to migrate, so `cuMemAdvise`,
//! `cuMemPrefetchAsync` and `cuStreamAttachMemAsync` check their arguments as CUDA does and
//! record what they were told (the whole allocation at a time), which `cuMemRangeGetAttribute(s)`
//! report back; a prefetch is a no-op in stream order. Every device reports
//! `CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY`, `CONCURRENT_MANAGED_ACCESS` and
//! `DIRECT_MANAGED_MEM_ACCESS_FROM_HOST` (the host and kernels may touch it at once).

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUdevice, CUdeviceptr, CUmem_range_attribute, CUresult, CUstream};
use parking_lot::Mutex;

use crate::context::{current, resolve as resolve_stream};
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid, non_null, put};
use crate::memory::{Backing, DEVICE_INVALID, ManagedState, Region, insert, lookup, oom, resolve};

/// `CU_MEM_ATTACH_GLOBAL`, `_HOST`, `_SINGLE`.
const ATTACH_GLOBAL: u32 = 1;
const ATTACH_HOST: u32 = 2;
const ATTACH_SINGLE: u32 = 4;
/// `CU_DEVICE_CPU`: the host as a location.
const DEVICE_CPU: i32 = -1;

/// `cuMemAllocManaged`: `flags` is `CU_MEM_ATTACH_GLOBAL` or `CU_MEM_ATTACH_HOST`.
///
/// # Safety
/// `dptr` is null or valid for a write.
pub(crate) unsafe fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    flags: c_uint,
) -> CuResult<()> {
    let ctx = current()?;
    non_null(dptr, "dptr")?;
    if bytesize == 0 {
        return Err(invalid("bytesize is 0"));
    }
    if flags != ATTACH_GLOBAL && flags != ATTACH_HOST {
        return Err(invalid(format!(
            "flags {flags:#x}: give CU_MEM_ATTACH_GLOBAL (1) or CU_MEM_ATTACH_HOST (2)"
        )));
    }
    let drv = driver()?;
    let real = drv
        .backing_bytes(bytesize)
        .ok_or_else(|| CuErr::new(CUresult::CUDA_ERROR_OUT_OF_MEMORY, "bytesize overflows"))?;
    let mem = drv
        .exec
        .allocate_unified::<u8>(real)
        .map_err(|e| oom(bytesize as u64, e))?;
    let base = mem.ptr().address().raw();
    debug_assert_eq!(
        base,
        mem.host_ptr() as u64,
        "one address for host and kernels"
    );
    insert(Region {
        base,
        bytes: bytesize as u64,
        ctx: ctx.handle,
        device: ctx.device,
        backing: Backing::Managed {
            mem,
            state: Mutex::new(ManagedState {
                attach: flags,
                read_mostly: false,
                preferred: DEVICE_INVALID,
                accessed_by: Vec::new(),
                last_prefetch: DEVICE_INVALID,
            }),
        },
        id: 0,
    });
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(dptr, base, "dptr") }
}

/// The managed region holding all of `[ptr, ptr + count)` (`count` > 0).
fn managed(ptr: CUdeviceptr, count: usize, what: &str) -> CuResult<Arc<Region>> {
    if count == 0 {
        return Err(invalid(format!("{what}: count is 0")));
    }
    let r = resolve(ptr, count as u64, what)?;
    if !r.is_managed() {
        return Err(invalid(format!(
            "{what}: {count} bytes at {ptr:#x} are not managed memory (cuMemAllocManaged)"
        )));
    }
    Ok(r)
}

/// The recorded state of a managed region.
fn state(r: &Region) -> &Mutex<ManagedState> {
    match &r.backing {
        Backing::Managed { state, .. } => state,
        _ => unreachable!("checked by `managed`"),
    }
}

/// `dev` as a location: a device of this driver or `CU_DEVICE_CPU`.
fn location(dev: CUdevice) -> CuResult<i32> {
    if dev == DEVICE_CPU {
        return Ok(DEVICE_CPU);
    }
    driver()?.device(dev)?;
    Ok(dev)
}

/// `CUmemLocation` (CUDA 12.2's location-based managed-memory calls) with its type as an
/// integer, so any value a caller passes can be read.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemLocation {
    /// `CUmemLocationType`: DEVICE (1), HOST (2), HOST_NUMA (3), HOST_NUMA_CURRENT (4).
    pub(crate) kind: u32,
    /// The device ordinal (DEVICE) or NUMA node (HOST_NUMA).
    pub(crate) id: c_int,
}

const _: () = {
    use cudarc::driver::sys::CUmemLocation;
    assert!(size_of::<MemLocation>() == size_of::<CUmemLocation>());
    assert!(align_of::<MemLocation>() == align_of::<CUmemLocation>());
};

impl MemLocation {
    /// As the device argument of the CUDA 8 calls: a device ordinal or `CU_DEVICE_CPU`.
    fn device(self) -> CuResult<CUdevice> {
        match self.kind {
            1 => Ok(self.id),
            2..=4 => Ok(DEVICE_CPU),
            k => Err(invalid(format!(
                "location type {k}: give CU_MEM_LOCATION_TYPE_DEVICE or _HOST(_NUMA)"
            ))),
        }
    }
}

/// `cuMemAdvise_v2` (CUDA 12.2): `cuMemAdvise` with a `CUmemLocation`.
pub(crate) fn cuMemAdvise_v2(
    devPtr: CUdeviceptr,
    count: usize,
    advice: u32,
    location: MemLocation,
) -> CuResult<()> {
    // Advice without a location (READ_MOSTLY, the UNSETs of a preferred location) ignores it.
    let device = match advice {
        1 | 2 | 4 => DEVICE_CPU,
        _ => location.device()?,
    };
    cuMemAdvise(devPtr, count, advice, device)
}

/// `cuMemPrefetchAsync_v2` (CUDA 12.2): `cuMemPrefetchAsync` with a `CUmemLocation`; `flags`
/// must be 0.
pub(crate) fn cuMemPrefetchAsync_v2(
    devPtr: CUdeviceptr,
    count: usize,
    location: MemLocation,
    flags: c_uint,
    hStream: CUstream,
) -> CuResult<()> {
    if flags != 0 {
        return Err(invalid(format!("flags must be 0, got {flags}")));
    }
    cuMemPrefetchAsync(devPtr, count, location.device()?, hStream)
}

/// `cuMemAdvise`: recorded for `cuMemRangeGetAttribute`; nothing moves on the CPU.
pub(crate) fn cuMemAdvise(
    devPtr: CUdeviceptr,
    count: usize,
    advice: u32,
    device: CUdevice,
) -> CuResult<()> {
    current()?;
    let r = managed(devPtr, count, "devPtr")?;
    let mut st = state(&r).lock();
    match advice {
        1 => st.read_mostly = true,
        2 => st.read_mostly = false,
        3 => st.preferred = location(device)?,
        4 => st.preferred = DEVICE_INVALID,
        5 => {
            let d = location(device)?;
            if !st.accessed_by.contains(&d) {
                st.accessed_by.push(d);
            }
        }
        6 => {
            let d = location(device)?;
            st.accessed_by.retain(|&x| x != d);
        }
        a => return Err(invalid(format!("{a} is not a CUmem_advise"))),
    }
    Ok(())
}

/// `cuMemPrefetchAsync`: checked, recorded, and a no-op in stream order (the memory is where
/// both sides reach it already).
pub(crate) fn cuMemPrefetchAsync(
    devPtr: CUdeviceptr,
    count: usize,
    dstDevice: CUdevice,
    hStream: CUstream,
) -> CuResult<()> {
    let (_ctx, _s) = resolve_stream(hStream)?;
    let r = managed(devPtr, count, "devPtr")?;
    let dst = location(dstDevice)?;
    state(&r).lock().last_prefetch = dst;
    Ok(())
}

/// `cuStreamAttachMemAsync`: `dptr` is the start of a managed allocation and `length` 0 or its
/// size; `flags` one of `CU_MEM_ATTACH_GLOBAL`, `_HOST`, `_SINGLE` (not on the NULL stream).
/// Recorded; on the CPU every stream sees all managed memory anyway.
pub(crate) fn cuStreamAttachMemAsync(
    hStream: CUstream,
    dptr: CUdeviceptr,
    length: usize,
    flags: c_uint,
) -> CuResult<()> {
    let (_ctx, _s) = resolve_stream(hStream)?;
    if ![ATTACH_GLOBAL, ATTACH_HOST, ATTACH_SINGLE].contains(&flags) {
        return Err(invalid(format!(
            "flags {flags:#x}: give one of CU_MEM_ATTACH_GLOBAL, _HOST, _SINGLE"
        )));
    }
    if flags == ATTACH_SINGLE && hStream.is_null() {
        return Err(invalid(
            "CU_MEM_ATTACH_SINGLE needs a stream, not the NULL stream",
        ));
    }
    let r = match lookup(dptr) {
        Some(r) if r.is_managed() && r.base == dptr => r,
        _ => {
            return Err(invalid(format!(
                "{dptr:#x} is not the start of a cuMemAllocManaged allocation"
            )));
        }
    };
    if length != 0 && length as u64 != r.bytes {
        return Err(invalid(format!(
            "length {length}: give 0 or the allocation's size ({})",
            r.bytes
        )));
    }
    state(&r).lock().attach = flags;
    Ok(())
}

/// The `CUmemLocationType` of a location: DEVICE (1), HOST (2) or INVALID (0).
fn location_type(loc: i32) -> i32 {
    match loc {
        DEVICE_CPU => 2,
        d if d >= 0 => 1,
        _ => 0,
    }
}

/// Writes range attribute `attribute` of `r` into `dataSize` bytes at `data`.
///
/// # Safety
/// `data` is valid for writes of `dataSize` bytes.
unsafe fn range_attribute(
    r: &Region,
    data: *mut c_void,
    dataSize: usize,
    attribute: u32,
) -> CuResult<()> {
    non_null(data, "data")?;
    let st = state(r).lock().clone();
    let one = |v: i32| -> CuResult<()> {
        if dataSize != 4 {
            return Err(invalid(format!(
                "dataSize {dataSize}: range attribute {attribute} is one 32-bit integer"
            )));
        }
        // SAFETY: `data` holds 4 bytes (checked above; the caller's contract).
        unsafe { data.cast::<i32>().write_unaligned(v) };
        Ok(())
    };
    match attribute {
        1 => one(st.read_mostly as i32),
        2 => one(st.preferred),
        3 => {
            if dataSize == 0 || !dataSize.is_multiple_of(4) {
                return Err(invalid(format!(
                    "dataSize {dataSize}: CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY fills 32-bit \
                     integers"
                )));
            }
            let n = dataSize / 4;
            for i in 0..n {
                let v = st.accessed_by.get(i).copied().unwrap_or(DEVICE_INVALID);
                // SAFETY: `i` < `dataSize / 4` (the caller's contract).
                unsafe { data.cast::<i32>().add(i).write_unaligned(v) };
            }
            Ok(())
        }
        4 => one(st.last_prefetch),
        // CUDA 12.2: the locations as a CUmemLocationType and an id.
        5 => one(location_type(st.preferred)),
        6 => one(st.preferred.max(0)),
        7 => one(location_type(st.last_prefetch)),
        8 => one(st.last_prefetch.max(0)),
        a => Err(invalid(format!(
            "{a} is not a CUmem_range_attribute (READ_MOSTLY, PREFERRED_LOCATION, ACCESSED_BY, \
             LAST_PREFETCH_LOCATION and their _TYPE/_ID forms)"
        ))),
    }
}

/// `cuMemRangeGetAttribute`: what `cuMemAdvise`/`cuMemPrefetchAsync` recorded for the managed
/// allocation holding `[devPtr, devPtr + count)`.
///
/// # Safety
/// `data` is null or valid for writes of `dataSize` bytes.
pub(crate) unsafe fn cuMemRangeGetAttribute(
    data: *mut c_void,
    dataSize: usize,
    attribute: u32,
    devPtr: CUdeviceptr,
    count: usize,
) -> CuResult<()> {
    current()?;
    let r = managed(devPtr, count, "devPtr")?;
    // SAFETY: the caller's contract.
    unsafe { range_attribute(&r, data, dataSize, attribute) }
}

/// `cuMemRangeGetAttributes`: several range attributes at once.
///
/// # Safety
/// `data`, `dataSizes` and `attributes` hold `numAttributes` entries each; each `data[i]` is
/// null or valid for writes of `dataSizes[i]` bytes.
pub(crate) unsafe fn cuMemRangeGetAttributes(
    data: *mut *mut c_void,
    dataSizes: *mut usize,
    attributes: *mut CUmem_range_attribute,
    numAttributes: usize,
    devPtr: CUdeviceptr,
    count: usize,
) -> CuResult<()> {
    current()?;
    if numAttributes == 0 {
        return Err(invalid("numAttributes is 0"));
    }
    non_null(data, "data")?;
    non_null(dataSizes, "dataSizes")?;
    non_null(attributes, "attributes")?;
    let r = managed(devPtr, count, "devPtr")?;
    // SAFETY: `numAttributes` entries each (the caller's contract); attributes read as
    // integers, so a value outside the enum is not undefined behaviour.
    let (out, sizes, attrs) = unsafe {
        (
            std::slice::from_raw_parts(data, numAttributes),
            std::slice::from_raw_parts(dataSizes, numAttributes),
            std::slice::from_raw_parts(attributes.cast::<u32>(), numAttributes),
        )
    };
    for ((&d, &n), &a) in out.iter().zip(sizes).zip(attrs) {
        // SAFETY: `d` holds `n` bytes (the caller's contract).
        unsafe { range_attribute(&r, d, n, a)? };
    }
    Ok(())
}
