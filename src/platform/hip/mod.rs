//! The HIP platform (feature `hip`), on hip-runtime-sys (links libamdhip64).
//!
//! Streams, events, memory and kernels are the shared CUDA-like backend in `platform/gpu/`;
//! this folder holds the HIP calls (`driver.rs`, through the integer-status declarations of
//! `ffi.rs`), HSACO loading and the device description from `hipDeviceProp_t`.

mod driver;
mod ffi;

use std::ffi::CStr;
use std::sync::Arc;

use super::gpu::GpuExecutor;
use crate::error::{Error, Result};
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;
use driver::HipDriver;
use ffi::HipStatus;

pub(crate) const PLATFORM: &str = "hip";

/// The HIP major version whose `hipDeviceProp_t` layout hip-runtime-sys 0.1 declares (checked
/// against the installed header by `tests/hip_platform.rs`).
const BINDINGS_MAJOR: i32 = 5;

fn status_text(s: HipStatus) -> String {
    let text = |p: *const std::ffi::c_char| {
        // SAFETY: HIP returns static NUL-terminated strings (or NULL).
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    // SAFETY: plain queries taking the status by value.
    let (name, desc) = unsafe {
        (
            text(ffi::hipGetErrorName(s)),
            text(ffi::hipGetErrorString(s)),
        )
    };
    match (name, desc) {
        (Some(n), Some(d)) if n != d => format!("{n}: {d}"),
        (Some(n), _) => n,
        _ => format!("HIP status {}", s.0),
    }
}

/// A failed HIP call as a crate error.
pub(crate) fn hip_error(call: &str, s: HipStatus) -> Error {
    Error::Driver {
        platform: PLATFORM.into(),
        call: call.into(),
        code: s.0 as i64,
        detail: status_text(s),
    }
}

/// `Ok` for `hipSuccess`, else the error of `call`.
pub(crate) fn check(call: &str, s: HipStatus) -> Result<()> {
    if s == HipStatus::SUCCESS {
        Ok(())
    } else {
        Err(hip_error(call, s))
    }
}

/// Opens the HIP runtime: `Err(reason)` when it has no device.
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    let mut count = 0;
    // SAFETY: writes one int.
    let s = unsafe { ffi::hipGetDeviceCount(&mut count) };
    if s == HipStatus::NO_DEVICE || (s == HipStatus::SUCCESS && count <= 0) {
        return Err("the HIP runtime reports no device (hipErrorNoDevice)".into());
    }
    check("hipGetDeviceCount", s).map_err(|e| e.to_string())?;
    Ok(Arc::new(HipPlatform {
        count: count as usize,
    }))
}

struct HipPlatform {
    count: usize,
}

impl PlatformInterface for HipPlatform {
    fn name(&self) -> &'static str {
        PLATFORM
    }

    fn device_count(&self) -> usize {
        self.count
    }

    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        driver::describe(ordinal)
    }

    fn create_executor(&self, ordinal: usize) -> Result<Arc<dyn StreamExecutorInterface>> {
        Ok(GpuExecutor::new(HipDriver::new(ordinal)?)?)
    }
}
