//! DNN on CUDA-like devices: the built-in kernels of kernels/dnn.cu (PTX committed under
//! kernels/ptx/, `Driver::DNN_PTX`), so they run on NVIDIA's driver and on the CPU libcuda
//! alike; the operations themselves are the ones `platform/dnn_builtin` shares with OpenCL.
//! The fused matmul's product goes through this executor's BLAS (cuBLAS or the built-in GEMM,
//! as decided at creation). cuDNN is not wired in this build.

use std::sync::Arc;

use super::{Driver, GpuExecutor};
use crate::error::{Error, Result};
use crate::interface::blas::Operand;
use crate::interface::{BlasSupport, KernelInterface, StreamExecutorInterface};
use crate::platform::dnn_builtin::DnnDevice;
use crate::types::{Packable, PackedArg};

/// Threads per block of the DNN kernels.
const THREADS: u32 = 256;
/// Blocks per launch at most: the kernels loop with grid strides, and the CPU libcuda runs a
/// grid's blocks on a few cores, where more blocks only add scheduling.
const MAX_BLOCKS: u32 = 1024;

impl<D: Driver> DnnDevice for GpuExecutor<D> {
    fn dnn_platform(&self) -> &'static str {
        D::PLATFORM
    }

    fn dnn_kernel(&self, name: &'static str, _fp64: bool) -> Result<Arc<dyn KernelInterface>> {
        let ptx = D::DNN_PTX.ok_or_else(|| {
            Error::unsupported(
                D::PLATFORM,
                "dnn",
                "this platform has no built-in DNN kernels; use the host platform",
            )
        })?;
        self.builtin_kernel(ptx, name)
    }

    fn dnn_operand(&self, o: Operand, elem: u64, op: &str) -> Result<[PackedArg; 2]> {
        let bytes = o.len.checked_mul(elem).ok_or_else(|| {
            Error::invalid(
                op,
                format!("an operand of {} elements overflows 64 bits", o.len),
            )
        })?;
        Ok([
            PackedArg::backend_pointer(o.addr, bytes, elem as usize, "dnn operand"),
            0u64.pack(),
        ])
    }

    fn dnn_grid(&self) -> (u32, u32) {
        (THREADS, self.description().max_grid_dims[0].min(MAX_BLOCKS))
    }

    fn dnn_blas(&self) -> Option<&dyn BlasSupport> {
        self.blas()
    }
}
