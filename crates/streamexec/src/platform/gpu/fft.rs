//! FFT on CUDA-like devices, from one of two sources decided when the executor is created
//! (`GpuExecutor::fft_served`, from the executor's `PluginConfig`):
//!
//! - the driver's vendor library (`Driver::fft_plan`, cuFFT on CUDA): one vendor plan per FFT
//!   plan, executed in stream order through the stream's submitter on its driver stream
//!   handle, as blas.rs calls cuBLAS;
//! - the built-in kernels of kernels/fft.cu (PTX committed under kernels/ptx/,
//!   `Driver::FFT_PTX`), planned and enqueued by the plan the OpenCL backend shares
//!   (`platform/fft_builtin`), launched like any kernel on the user's stream.
//!
//! A vendor plan has one work area, so its executions are serialised across streams by an
//! event, as the built-in plan's are; dropping it waits for its last execution before the
//! vendor plan is destroyed.

use std::sync::Arc;

use super::blas::gpu_stream;
use super::{Driver, GpuExecutor, GpuFftPlan};
use crate::error::{Error, Result};
use crate::interface::blas::Operand;
use crate::interface::fft::{FftDirection, FftPlanDesc, FftPlanInterface};
use crate::interface::{FftSupport, StreamExecutorInterface, StreamInterface};
use crate::platform::fft_builtin::{self, Device, Serial};
use crate::types::{DeviceAddress, PackedArg, Served};

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
        self.fft_vendor.unwrap_or("built-in kernels")
    }

    fn create_plan(&self, desc: &FftPlanDesc) -> Result<Box<dyn FftPlanInterface>> {
        if self.fft_served == Served::Vendor {
            let exec = self
                .me
                .upgrade()
                .ok_or_else(|| Error::internal("an FFT plan made while its executor drops"))?;
            return Ok(Box::new(VendorPlan {
                plan: Arc::from(self.drv.fft_plan(desc)?),
                exec,
                order: Serial::default(),
            }));
        }
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

/// A vendor library's plan (cuFFT), with what orders its executions.
struct VendorPlan<D: Driver> {
    plan: Arc<dyn GpuFftPlan>,
    /// Keeps the device (and its context) alive while the plan is.
    exec: Arc<GpuExecutor<D>>,
    /// Orders its executions (they share the plan's work area).
    order: Serial,
}

impl<D: Driver> FftPlanInterface for VendorPlan<D> {
    unsafe fn execute(
        &self,
        stream: &dyn StreamInterface,
        direction: FftDirection,
        input: Operand,
        output: Operand,
    ) -> Result<()> {
        const OP: &str = "then_fft";
        let plan = self.plan.clone();
        let (i, o) = (input.addr.raw(), output.addr.raw());
        self.order.run(&*self.exec, stream, || {
            gpu_stream::<D>(stream, OP)?.submit_driver(move |_, s| plan.execute(s, direction, i, o))
        })
    }
}

impl<D: Driver> Drop for VendorPlan<D> {
    fn drop(&mut self) {
        // The vendor plan (and its work area) must outlive its pending executions; they are
        // serialised, so the last one's end is all there is to wait for.
        self.order.wait();
    }
}
