//! noop's kernel type. noop loads no kernel (`load_kernel` is `Unsupported`), so none is ever
//! made; the impl is here as the place a new backend starts from.
//!
//! A real kernel keeps its module alive, and `verify_signature` checks the `TypedKernel`'s
//! parameter kinds against the kernel's own parameter list where the format carries one
//! (`SignatureMismatch` naming the argument and both types; see `opencl/kernel.rs`, and
//! `platform::ptx_signature` for PTX).

use std::any::Any;

use super::status::unsupported;
use crate::error::Result;
use crate::interface::{KernelInterface, ParamCount};
use crate::types::ParamKind;

/// A loaded noop kernel (never made).
#[expect(
    dead_code,
    reason = "the template's kernel type: noop loads no kernel, a new backend starts here"
)]
pub(crate) struct NoopKernel {
    name: String,
}

impl KernelInterface for NoopKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn param_count(&self) -> Option<ParamCount> {
        // A real backend reports the kernel's own parameter count where its format carries
        // one; the executor checks the spec's arity against it.
        None
    }

    fn verify_signature(&self, _expected: &[ParamKind]) -> Result<()> {
        Err(unsupported("verify_signature", "noop loads no kernels"))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
