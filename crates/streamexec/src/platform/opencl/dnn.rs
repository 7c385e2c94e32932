//! DNN on OpenCL: the built-in DNN kernel text (kernels/dnn_math.h + dnn_body.h, the text the
//! CUDA platform compiles to PTX) as OpenCL C, built on first use per precision; the
//! operations themselves are the ones `platform/dnn_builtin` shares with the CUDA-like backend.
//! The fused matmul's product goes through this executor's BLAS (CLBlast or the built-in GEMM).

use std::sync::Arc;

use super::builtins::{WG, ptr};
use super::device::OpenClExecutor;
use super::status::PLATFORM;
use crate::error::Result;
use crate::interface::blas::Operand;
use crate::interface::{BlasSupport, KernelInterface, StreamExecutorInterface};
use crate::platform::dnn_builtin::{DnnDevice, OPENCL_SOURCE, arity, opencl_options};
use crate::types::PackedArg;

/// Work-groups per launch at most (the kernels loop with grid strides).
const MAX_GROUPS: u32 = 4096;

impl DnnDevice for OpenClExecutor {
    fn dnn_platform(&self) -> &'static str {
        PLATFORM
    }

    fn dnn_kernel(&self, name: &'static str, fp64: bool) -> Result<Arc<dyn KernelInterface>> {
        self.builtin_kernel_from(
            (OPENCL_SOURCE, opencl_options(fp64)),
            fp64,
            name,
            arity(name),
            "dnn",
        )
    }

    fn dnn_operand(&self, o: Operand, elem: u64, op: &str) -> Result<[PackedArg; 2]> {
        ptr(&o, elem, op)
    }

    fn dnn_grid(&self) -> (u32, u32) {
        (WG as u32, MAX_GROUPS)
    }

    fn dnn_blas(&self) -> Option<&dyn BlasSupport> {
        self.blas()
    }
}
