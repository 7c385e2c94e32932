//! The OpenCL platform, on `opencl3` with the OpenCL library loaded at run time.
//!
//! No OpenCL library, no platform or no device: the platform is listed as unavailable with the
//! reason; nothing panics and the build never needs OpenCL. Every device of every OpenCL
//! platform is one streamexec device, in the order the ICD loader reports them.

mod canned;
mod event;
mod executor;
mod kernel;
mod memory;
mod stream;

use std::sync::Arc;

use opencl3::device::{
    CL_DEVICE_SVM_ATOMICS, CL_DEVICE_SVM_FINE_GRAIN_BUFFER, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU,
    Device,
};
use opencl3::types::cl_device_id;

use crate::error::{Error, Result};
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;

pub(crate) const PLATFORM: &str = "opencl";

/// `Error::Driver` for a failed OpenCL call.
pub(crate) fn cl_error(call: &str, code: impl Into<i32>) -> Error {
    let code = code.into();
    Error::Driver {
        platform: PLATFORM.into(),
        call: call.into(),
        code: code as i64,
        detail: format!(
            "{} (see the OpenCL specification for {call}; check the driver with `clinfo`)",
            opencl3::error_codes::error_text(code)
        ),
    }
}

/// The OpenCL platform: every device the ICD loader reports.
pub(crate) struct OpenClPlatform {
    devices: Vec<cl_device_id>,
}

// SAFETY: device ids are process-wide handles that OpenCL allows on any thread.
unsafe impl Send for OpenClPlatform {}
// SAFETY: as above; the list never changes after `open`.
unsafe impl Sync for OpenClPlatform {}

/// Opens the platform, or says why it cannot be used here.
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    let platforms = opencl3::platform::get_platforms().map_err(|e| {
        format!(
            "no OpenCL library or platform ({}); install an ICD loader and a driver, e.g. Debian's \
             `ocl-icd-libopencl1` and `pocl-opencl-icd`",
            opencl3::error_codes::error_text(e.0)
        )
    })?;
    let mut devices = Vec::new();
    for p in &platforms {
        // A platform with no device answers CL_DEVICE_NOT_FOUND: skip it.
        devices.extend(p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default());
    }
    if devices.is_empty() {
        return Err(format!(
            "{} OpenCL platform(s) found but no device; check the driver with `clinfo`",
            platforms.len()
        ));
    }
    Ok(Arc::new(OpenClPlatform { devices }))
}

fn describe(id: cl_device_id, ordinal: usize) -> Result<DeviceDescription> {
    let d = Device::new(id);
    let info = |call: &str, e: opencl3::error_codes::ClError| cl_error(call, e.0);
    let name = d
        .name()
        .map_err(|e| info("clGetDeviceInfo(CL_DEVICE_NAME)", e))?;
    let vendor = d
        .vendor()
        .map_err(|e| info("clGetDeviceInfo(CL_DEVICE_VENDOR)", e))?;
    let sizes = d
        .max_work_item_sizes()
        .map_err(|e| info("clGetDeviceInfo(MAX_WORK_ITEM_SIZES)", e))?;
    let dim = |i: usize| sizes.get(i).map_or(1, |&s| s.min(u32::MAX as usize) as u32);
    let svm = d.svm_mem_capability();
    let fine_svm = svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0 && svm & CL_DEVICE_SVM_ATOMICS != 0;
    // SIMD width of one hardware thread: none on CPUs; NVIDIA warps and AMD wavefronts.
    let lower = vendor.to_ascii_lowercase();
    let cpu = d.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0);
    let warp = if cpu {
        1
    } else if lower.contains("nvidia") {
        32
    } else if lower.contains("advanced micro devices") || lower.contains("amd") {
        64
    } else {
        1
    };
    Ok(DeviceDescription {
        platform: PLATFORM.into(),
        ordinal,
        name,
        vendor,
        platform_version: d.version().unwrap_or_default(),
        driver_version: d.driver_version().unwrap_or_default(),
        total_memory: d
            .global_mem_size()
            .map_err(|e| info("clGetDeviceInfo(GLOBAL_MEM_SIZE)", e))?,
        compute_units: d.max_compute_units().unwrap_or(1),
        max_threads_per_block: d
            .max_work_group_size()
            .map_or(1, |s| s.min(u32::MAX as usize) as u32),
        max_block_dims: [dim(0), dim(1), dim(2)],
        max_grid_dims: [u32::MAX, u32::MAX, u32::MAX],
        warp_size: warp,
        shared_memory_per_block: d.local_mem_size().unwrap_or(0),
        clock_rate_khz: d
            .max_clock_frequency()
            .ok()
            .map(|mhz| mhz.saturating_mul(1000)),
        compute_capability: None,
        isa: None,
        unified_memory: fine_svm || d.host_unified_memory().unwrap_or(false),
        host_mapped_memory: true,
        max_allocation: d
            .max_mem_alloc_size()
            .map_err(|e| info("clGetDeviceInfo(MAX_MEM_ALLOC_SIZE)", e))?,
    })
}

impl PlatformInterface for OpenClPlatform {
    fn name(&self) -> &'static str {
        PLATFORM
    }
    fn device_count(&self) -> usize {
        self.devices.len()
    }
    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        describe(self.devices[ordinal], ordinal)
    }
    fn create_executor(&self, ordinal: usize) -> Result<Arc<dyn StreamExecutorInterface>> {
        let desc = describe(self.devices[ordinal], ordinal)?;
        Ok(executor::OpenClExecutor::new(self.devices[ordinal], desc)?)
    }
}
