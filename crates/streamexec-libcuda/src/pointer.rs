//! Pointer attributes (`cuPointerGetAttribute(s)`): what the address map (`memory.rs`) and the
//! `cuMemHostRegister` ranges say of an address.

use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUdeviceptr, CUpointer_attribute, CUresult};

use crate::context::current;
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid, non_null};
use crate::memory::{Region, lookup, registered_range};

/// What a pointer attribute query finds at an address.
enum Pointee {
    /// Inside a region of the address map.
    Region(Arc<Region>),
    /// Inside host memory registered with `cuMemHostRegister` (pinned for copies, not mapped):
    /// its base and size.
    Registered(u64, u64),
}

fn pointee(ptr: u64) -> Option<Pointee> {
    if let Some(r) = lookup(ptr) {
        return Some(Pointee::Region(r));
    }
    let (base, bytes) = registered_range(ptr)?;
    Some(Pointee::Registered(base, bytes))
}

/// `CUmemorytype`: host, device.
const MEMORYTYPE_HOST: u32 = 1;
const MEMORYTYPE_DEVICE: u32 = 2;

/// One attribute's value, written with the C type the driver API gives it.
enum AttrValue {
    Ptr(usize),
    U32(u32),
    I32(i32),
    U64(u64),
    Bool(bool),
}

impl AttrValue {
    /// Writes the value through `data`.
    ///
    /// # Safety
    /// `data` is valid for a write of the attribute's type.
    unsafe fn write(self, data: *mut c_void) {
        // SAFETY: the caller's contract; unaligned writes, as the caller's buffer may be any
        // C object of that type.
        unsafe {
            match self {
                AttrValue::Ptr(v) => data.cast::<usize>().write_unaligned(v),
                AttrValue::U32(v) => data.cast::<u32>().write_unaligned(v),
                AttrValue::I32(v) => data.cast::<i32>().write_unaligned(v),
                AttrValue::U64(v) => data.cast::<u64>().write_unaligned(v),
                AttrValue::Bool(v) => data.cast::<bool>().write(v),
            }
        }
    }
}

/// The value of pointer attribute `attr` of `ptr`, found at `at` (`None`: not memory this
/// driver knows, where `cuPointerGetAttributes` reports the attribute's null value).
fn pointer_attribute(attr: u32, ptr: u64, at: Option<&Pointee>) -> CuResult<AttrValue> {
    use AttrValue::*;
    let not_device = || {
        invalid(format!(
            "{ptr:#x} is host memory registered with cuMemHostRegister, which the CPU driver \
             does not map for kernels (use cuMemHostAlloc)"
        ))
    };
    let (base, bytes) = match at {
        Some(Pointee::Region(r)) => (r.base, r.bytes),
        Some(Pointee::Registered(b, n)) => (*b, *n),
        None => (0, 0),
    };
    let region = match at {
        Some(Pointee::Region(r)) => Some(r),
        _ => None,
    };
    Ok(match attr {
        // CONTEXT: registered memory is the current context's.
        1 => Ptr(match at {
            Some(Pointee::Region(r)) => r.ctx,
            Some(Pointee::Registered(..)) => current().map_or(0, |c| c.handle),
            None => 0,
        }),
        2 => U32(match at {
            Some(Pointee::Region(r)) if r.is_host() => MEMORYTYPE_HOST,
            Some(Pointee::Region(_)) => MEMORYTYPE_DEVICE,
            Some(Pointee::Registered(..)) => MEMORYTYPE_HOST,
            None => 0,
        }),
        // DEVICE_POINTER: mapped pinned memory is its own device address.
        3 => match at {
            Some(Pointee::Registered(..)) => return Err(not_device()),
            Some(_) => Ptr(ptr as usize),
            None => Ptr(0),
        },
        // HOST_POINTER: device memory has none.
        4 => match at {
            Some(Pointee::Region(r)) if !r.host_reachable() => {
                return Err(invalid(format!(
                    "{ptr:#x} is device memory: it has no host pointer"
                )));
            }
            Some(_) => Ptr(ptr as usize),
            None => Ptr(0),
        },
        5 => {
            return Err(CuErr::new(
                CUresult::CUDA_ERROR_NOT_SUPPORTED,
                "CU_POINTER_ATTRIBUTE_P2P_TOKENS: there is no GPUDirect RDMA",
            ));
        }
        // SYNC_MEMOPS: copies are always synchronous as it asks.
        6 => Bool(at.is_some()),
        7 | 20 => U64(region.map_or(0, |r| r.id)),
        8 => Bool(region.is_some_and(|r| r.is_managed())),
        10 | 21 => Bool(false),
        9 => I32(match at {
            Some(Pointee::Region(r)) => r.device as i32,
            Some(Pointee::Registered(..)) => current().map_or(-2, |c| c.device as i32),
            None => -2,
        }),
        11 | 19 => Ptr(base as usize),
        12 | 18 => Ptr(bytes as usize),
        13 => Bool(matches!(at, Some(Pointee::Region(_)))),
        14 => U64(0),
        15 => U32(0),
        // ACCESS_FLAGS: read-write.
        16 => U32(if at.is_some() { 3 } else { 0 }),
        // MEMPOOL_HANDLE: no memory comes from a pool.
        17 => Ptr(0),
        a => return Err(invalid(format!("{a} is not a CUpointer_attribute"))),
    })
}

/// `cuPointerGetAttribute`: one attribute of `ptr`, which must lie in memory this driver
/// allocated or registered (else `CUDA_ERROR_INVALID_VALUE`).
///
/// # Safety
/// `data` is null or valid for a write of the attribute's type.
pub(crate) unsafe fn cuPointerGetAttribute(
    data: *mut c_void,
    attribute: u32,
    ptr: CUdeviceptr,
) -> CuResult<()> {
    driver()?;
    non_null(data, "data")?;
    let at = pointee(ptr).ok_or_else(|| {
        invalid(format!(
            "{ptr:#x} is not in memory allocated, mapped or registered by this driver"
        ))
    })?;
    let v = pointer_attribute(attribute, ptr, Some(&at))?;
    // SAFETY: non-null, valid for the attribute's type (the caller's contract).
    unsafe { v.write(data) };
    Ok(())
}

/// `cuPointerGetAttributes`: several attributes of `ptr` at once; memory this driver does not
/// know gets each attribute's null value (and success), as CUDA documents.
///
/// # Safety
/// `attributes` holds `numAttributes` entries; `data` holds as many pointers, each null or
/// valid for a write of its attribute's type.
pub(crate) unsafe fn cuPointerGetAttributes(
    numAttributes: c_uint,
    attributes: *mut CUpointer_attribute,
    data: *mut *mut c_void,
    ptr: CUdeviceptr,
) -> CuResult<()> {
    driver()?;
    if numAttributes == 0 {
        return Ok(());
    }
    non_null(attributes, "attributes")?;
    non_null(data, "data")?;
    // SAFETY: `numAttributes` entries each (the caller's contract); attributes read as
    // integers, so a value outside the enum is not undefined behaviour.
    let (attrs, out) = unsafe {
        (
            std::slice::from_raw_parts(attributes.cast::<u32>(), numAttributes as usize),
            std::slice::from_raw_parts(data, numAttributes as usize),
        )
    };
    let at = pointee(ptr);
    for (&a, &d) in attrs.iter().zip(out) {
        let v = match pointer_attribute(a, ptr, at.as_ref()) {
            Ok(v) => v,
            // Unmapped registered memory has no device pointer: NULL, as for unknown memory.
            Err(e) if a == 3 && e.code == CUresult::CUDA_ERROR_INVALID_VALUE => AttrValue::Ptr(0),
            Err(e) if a == 4 && e.code == CUresult::CUDA_ERROR_INVALID_VALUE => AttrValue::Ptr(0),
            Err(e) => return Err(e),
        };
        if !d.is_null() {
            // SAFETY: valid for the attribute's type (the caller's contract).
            unsafe { v.write(d) };
        }
    }
    Ok(())
}
