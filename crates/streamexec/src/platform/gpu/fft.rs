//! FFT on CUDA-like devices: the built-in kernels of kernels/fft.cu (PTX committed under
//! kernels/ptx/, `Driver::FFT_PTX`), planned and enqueued by the plan the OpenCL backend
//! shares (`platform/fft_builtin`), launched like any kernel on the user's stream. cuFFT is
//! not used yet.

use super::{Driver, GpuExecutor};
use crate::error::{Error, Result};
use crate::interface::fft::{FftPlanDesc, FftPlanInterface};
use crate::interface::{FftSupport, StreamExecutorInterface};
use crate::platform::fft_builtin::{self, Device};
use crate::types::{DeviceAddress, PackedArg};

/// Threads per block of the FFT kernels.
const THREADS: u32 = 256;
/// Blocks per launch at most: the kernels loop with grid strides, and the CPU libcuda runs a
/// grid's blocks on a few cores, where more blocks only add scheduling.
const MAX_BLOCKS: u32 = 1024;

/// A device pointer, passed as itself (offset 0).
fn pointer(addr: DeviceAddress, bytes: u64, scalar: u64) -> Result<(PackedArg, u64)> {
    let name = if scalar == 8 { "f64" } else { "f32" };
    Ok((
        PackedArg::backend_pointer(addr, bytes, scalar as usize, name),
        0,
    ))
}

impl<D: Driver> FftSupport for GpuExecutor<D> {
    fn implementation(&self) -> &'static str {
        "built-in kernels"
    }

    fn create_plan(&self, desc: &FftPlanDesc) -> Result<Box<dyn FftPlanInterface>> {
        let Some(ptx) = D::FFT_PTX else {
            return Err(Error::unsupported(
                D::PLATFORM,
                "create_fft_plan",
                "this platform has no built-in FFT kernels; use the host platform",
            ));
        };
        let exec = self
            .me
            .upgrade()
            .ok_or_else(|| Error::internal("an FFT plan made while its executor drops"))?;
        let dev = Device {
            exec,
            pointer,
            threads: THREADS,
            max_blocks: self.description().max_grid_dims[0].min(MAX_BLOCKS),
        };
        fft_builtin::create_plan(dev, desc, &|name| self.builtin_kernel(ptx, name))
    }
}
