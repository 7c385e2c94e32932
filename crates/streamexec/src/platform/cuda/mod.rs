//! The CUDA platform, on cudarc's driver API with run-time loading of libcuda: a thin driver
//! folder under the shared CUDA-like backend (`platform/gpu/`, whose notes cover streams,
//! events, memory and kernels). This folder holds `open`, the driver calls (`driver.rs`: the
//! kernel image choice, NVRTC, the device description from attributes), cuBLAS (`blas.rs`;
//! where libcublas is not installed, BLAS runs the shared backend's built-in PTX kernels, see
//! `gpu/blas.rs`), cuFFT (`fft.rs`; where libcufft is not installed, FFT runs the built-in
//! kernels, see `gpu/fft.rs`), cuDNN (`dnn.rs`; where libcudnn is not installed, DNN runs the
//! built-in kernels, see `gpu/dnn.rs`) and the `CUresult` mapping (`status.rs`).
//!
//! # No panics from cudarc
//!
//! cudarc panics if libcuda is missing or a symbol is absent, so `open` calls
//! `is_culib_present()` first, and the bindings are the `cuda-12000` set (every symbol used
//! exists in any CUDA 12+ driver). Every later call goes through `result`-level functions that
//! return errors. NVRTC is probed the same way before compiling CUDA C++.
//!
//! # Contexts and images
//!
//! Each device's primary context is retained for the driver's life and made current on the
//! calling thread before every call (a thread-local store in the driver). Images are chosen
//! cubin first (no JIT), then the PTX keyed by the highest compute capability not above the
//! device's (else unkeyed PTX), then CUDA C++ through NVRTC; a JIT failure carries the JIT log.

mod blas;
mod dnn;
mod driver;
mod fft;
mod graph;
mod status;

use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::gpu::GpuPlatform;
use crate::interface::PlatformInterface;
pub(crate) use driver::CudaDriver;
use status::cu_error;

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
    Ok(GpuPlatform::<CudaDriver>::with_devices(count as usize))
}
