//! Philox fills on CUDA-like devices: the built-in `se_philox_*` kernels of
//! kernels/canned.cu (PTX committed under kernels/ptx/, `Driver::CANNED_PTX`), launched like
//! any kernel on the user's stream, so they keep its order and error state.

use std::sync::Arc;

use super::{Driver, GpuExecutor};
use crate::error::{Error, Result};
use crate::interface::rng::PhiloxFill;
use crate::interface::{KernelInterface, RngSupport, StreamExecutorInterface, StreamInterface};
use crate::types::{
    BlockDim, LaunchDims, MultiKernelLoaderSpec, Packable, PackedArg, RandDistribution, ThreadDim,
};

/// Threads per block of the fill kernels.
const THREADS: u64 = 256;

impl<D: Driver> GpuExecutor<D> {
    /// The built-in kernel `name` (loaded once; the module cache holds the PTX).
    pub(super) fn builtin_kernel(
        &self,
        ptx: &str,
        name: &'static str,
    ) -> Result<Arc<dyn KernelInterface>> {
        if let Some(k) = self.builtins.lock().get(name) {
            return Ok(k.clone());
        }
        let spec = MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory(ptx, name);
        let k = self.load_kernel(&spec)?;
        self.builtins.lock().insert(name, k.clone());
        Ok(k)
    }
}

impl<D: Driver> RngSupport for GpuExecutor<D> {
    unsafe fn philox_fill(&self, stream: &dyn StreamInterface, f: &PhiloxFill) -> Result<()> {
        let Some(ptx) = D::CANNED_PTX else {
            return Err(Error::unsupported(
                D::PLATFORM,
                "then_populate_rand_*",
                "no built-in kernels",
            ));
        };
        let (name, gauss) = match f.dist {
            RandDistribution::U32 => ("se_philox_u32", None),
            RandDistribution::UniformF32 => ("se_philox_uniform_f32", None),
            RandDistribution::UniformF64 => ("se_philox_uniform_f64", None),
            RandDistribution::GaussianF32 { mean, stddev } => {
                ("se_philox_gaussian_f32", Some((mean, stddev)))
            }
            RandDistribution::GaussianF64 { mean, stddev } => {
                ("se_philox_gaussian_f64", Some((mean, stddev)))
            }
        };
        let op = "then_populate_rand";
        let kernel = self.builtin_kernel(ptx, name)?;
        let elem = f.dist.elem_size();
        let mut args = vec![
            PackedArg::backend_pointer(
                f.dst.addr,
                f.dst.len * elem,
                elem as usize,
                "random element",
            ),
            f.count.pack(),
            f.key[0].pack(),
            f.key[1].pack(),
            f.counter_hi[0].pack(),
            f.counter_hi[1].pack(),
            f.offset.pack(),
        ];
        if let Some((mean, stddev)) = gauss {
            args.extend([mean.pack(), stddev.pack()]);
        }
        let blocks = f.count.div_ceil(f.dist.elems_per_block()).div_ceil(THREADS);
        let max = u64::from(self.description().max_grid_dims[0]);
        if blocks > max {
            return Err(Error::invalid(
                op,
                format!(
                    "{} elements need {blocks} blocks, more than the device's {max}; fill in parts",
                    f.count
                ),
            ));
        }
        let dims = LaunchDims {
            threads: ThreadDim::new(THREADS as u32, 1, 1),
            blocks: BlockDim::new(blocks as u32, 1, 1),
            dynamic_shared_bytes: 0,
            cooperative: false,
        };
        // SAFETY: the canned kernel's parameter list matches `args` (tested against its PTX);
        // the destination is the validated operand of `fill` (this method's contract); the
        // grid fits the device (checked above).
        unsafe { stream.launch(&kernel, &dims, &args) }
    }
}
