//! BLAS on noop: every call `Unsupported`. noop's `blas()` stays `None`, so the handle layer
//! answers `then_blas_*` before these are reached; they are the place a backend's BLAS starts.
//!
//! A real implementation enqueues the call on `stream` (the stream's own `launch`, a
//! `host_callback`, or a vendor library bound to the stream's native handle, which it gets with
//! `StreamInterface::native` and `platform::downcast`), so it keeps the stream's order and error
//! state. The handle layer has checked every dimension, leading dimension, increment and
//! operand extent (see `src/blas.rs`).

use super::executor::NoopExecutor;
use super::status::unsupported;
use crate::error::Result;
use crate::interface::blas::{GemmCall, GemvCall, Level1Call};
use crate::interface::{BlasSupport, StreamInterface};

const REASON: &str = "noop has no BLAS";

impl BlasSupport for NoopExecutor {
    unsafe fn gemm(&self, _stream: &dyn StreamInterface, call: &GemmCall) -> Result<()> {
        let op = if call.batch > 1 {
            "then_blas_gemm_strided_batched"
        } else {
            "then_blas_gemm"
        };
        Err(unsupported(op, REASON))
    }

    unsafe fn gemv(&self, _stream: &dyn StreamInterface, _call: &GemvCall) -> Result<()> {
        Err(unsupported("then_blas_gemv", REASON))
    }

    unsafe fn level1(&self, _stream: &dyn StreamInterface, call: &Level1Call) -> Result<()> {
        Err(unsupported(
            &format!("then_blas_{}", call.op.name()),
            REASON,
        ))
    }
}
