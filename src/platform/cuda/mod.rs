//! The CUDA platform, on cudarc's driver API with run-time loading of libcuda.
//!
//! cudarc panics when libcuda is missing, so `open` probes for the library first and every
//! later call goes through `result`-level functions that return errors. Streams, events,
//! memory and kernels are the shared CUDA-like backend in `platform/gpu/`; this folder holds
//! the driver calls (`driver.rs`), the kernel image choice (PTX by compute capability, cubin,
//! or CUDA C++ through NVRTC) and the device description.

mod blas;
mod driver;

use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::gpu::GpuExecutor;
use crate::error::{Error, Result};
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;
pub(crate) use driver::CudaDriver;

pub(crate) const PLATFORM: &str = "cuda";

/// A driver error as a crate error: the call, the code, its name and description.
pub(crate) fn cu_error(call: &str, e: result::DriverError) -> Error {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    Error::Driver {
        platform: PLATFORM.into(),
        call: call.into(),
        code: e.0 as i64,
        detail: match (name, text) {
            (Ok(n), Ok(t)) => format!("{n}: {t}"),
            (Ok(n), Err(_)) => n,
            _ => format!("{:?}", e.0),
        },
    }
}

/// Opens the CUDA driver: `Err(reason)` when libcuda is missing, fails to initialise, or has no
/// device.
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    // SAFETY: only tries to dlopen the library names cudarc would use.
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "the CUDA driver library (libcuda.so) was not found; install the NVIDIA \
                    driver, or put its folder on LD_LIBRARY_PATH"
                .into(),
        );
    }
    result::init().map_err(|e| match e.0 {
        sys::CUresult::CUDA_ERROR_NO_DEVICE => {
            "the CUDA driver reports no device (CUDA_ERROR_NO_DEVICE)".to_string()
        }
        _ => format!("cuInit failed: {}", cu_error("cuInit", e)),
    })?;
    let count =
        result::device::get_count().map_err(|e| cu_error("cuDeviceGetCount", e).to_string())?;
    if count <= 0 {
        return Err("the CUDA driver reports no device (CUDA_ERROR_NO_DEVICE)".into());
    }
    Ok(Arc::new(CudaPlatform {
        count: count as usize,
    }))
}

struct CudaPlatform {
    count: usize,
}

impl PlatformInterface for CudaPlatform {
    fn name(&self) -> &'static str {
        PLATFORM
    }

    fn device_count(&self) -> usize {
        self.count
    }

    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        let dev = result::device::get(ordinal as i32).map_err(|e| cu_error("cuDeviceGet", e))?;
        driver::describe(dev, ordinal)
    }

    fn create_executor(&self, ordinal: usize) -> Result<Arc<dyn StreamExecutorInterface>> {
        Ok(GpuExecutor::new(CudaDriver::new(ordinal)?)?)
    }
}
