//! BLAS on CUDA-like devices: through the driver's vendor library (`Driver::blas`, cuBLAS on
//! CUDA), called in stream order through the stream's submitter on its driver stream handle,
//! so calls keep stream order in deferred mode too.

use super::stream::GpuStream;
use super::{Driver, GpuExecutor};
use crate::error::{Error, Result};
use crate::interface::blas::{GemmCall, GemvCall, Level1Call};
use crate::interface::{BlasSupport, StreamInterface};
use crate::platform::downcast::downcast;

/// The stream as this backend's, for calls that need its driver handle (the handle layer
/// passes only streams of the executor whose `BlasSupport` this is).
fn gpu_stream<'s, D: Driver>(
    stream: &'s dyn StreamInterface,
    op: &str,
) -> Result<&'s GpuStream<D>> {
    let what = format!("the stream of {op}");
    let native = stream
        .native()
        .ok_or_else(|| Error::internal(format!("{what} has no native stream")))?;
    downcast::<GpuStream<D>>(native, &what)
}

impl<D: Driver> BlasSupport for GpuExecutor<D> {
    unsafe fn gemm(&self, stream: &dyn StreamInterface, call: &GemmCall) -> Result<()> {
        let call = *call;
        gpu_stream::<D>(stream, "then_blas_gemm")?
            .submit_driver(move |drv, s| drv.blas()?.gemm(s, &call))
    }

    unsafe fn gemv(&self, stream: &dyn StreamInterface, call: &GemvCall) -> Result<()> {
        let call = *call;
        gpu_stream::<D>(stream, "then_blas_gemv")?
            .submit_driver(move |drv, s| drv.blas()?.gemv(s, &call))
    }

    unsafe fn level1(&self, stream: &dyn StreamInterface, call: &Level1Call) -> Result<()> {
        let call = *call;
        gpu_stream::<D>(stream, "then_blas_*")?
            .submit_driver(move |drv, s| drv.blas()?.level1(s, &call))
    }
}
