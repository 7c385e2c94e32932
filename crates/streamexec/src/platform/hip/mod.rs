//! The HIP platform (feature `hip`), on hip-runtime-sys (links libamdhip64): a thin driver
//! folder under the shared CUDA-like backend (`platform/gpu/`, whose notes cover streams,
//! events, memory and kernels). This folder holds `open`, the HIP calls (`driver.rs`: HSACO
//! loading, the device description from `hipDeviceProp_t`), their declarations (`ffi.rs`) and
//! the status mapping (`status.rs`).
//!
//! # Integer statuses
//!
//! hip-runtime-sys declares its entry points returning `hipError_t`, a Rust enum: a status the
//! installed runtime has and the bindings lack would be an invalid enum value, which is
//! undefined behaviour. `ffi.rs` redeclares the entry points streamexec calls with an integer
//! status (`HipStatus`) and uses the bindings only for handle types, constants and
//! `hipDeviceProp_t`.
//!
//! # Device properties
//!
//! `hipDeviceProp_t` is read only when the runtime's major version is the one whose layout the
//! bindings declare (`BINDINGS_MAJOR`, checked against the installed header by
//! `tests/hip_platform.rs`), into a zeroed buffer larger than the struct; another major version
//! is `Unsupported` rather than garbage. HIP has no BLAS here (`then_blas_*` is `Unsupported`)
//! and, not loading PTX, no built-in Philox kernels.

mod driver;
mod ffi;
mod status;

use std::sync::Arc;

use super::gpu::GpuPlatform;
use crate::interface::PlatformInterface;
use driver::HipDriver;
use ffi::HipStatus;
use status::check;

/// The HIP major version whose `hipDeviceProp_t` layout hip-runtime-sys 0.1 declares (checked
/// against the installed header by `tests/hip_platform.rs`).
const BINDINGS_MAJOR: i32 = 5;

/// Opens the HIP runtime: `Err(reason)` when it has no device.
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    let mut count = 0;
    // SAFETY: writes one int.
    let s = unsafe { ffi::hipGetDeviceCount(&mut count) };
    if s == HipStatus::NO_DEVICE || (s == HipStatus::SUCCESS && count <= 0) {
        return Err("the HIP runtime reports no device (hipErrorNoDevice)".into());
    }
    check("hipGetDeviceCount", s).map_err(|e| e.to_string())?;
    Ok(GpuPlatform::<HipDriver>::with_devices(count as usize))
}
