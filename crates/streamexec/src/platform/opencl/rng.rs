//! Philox random fills on OpenCL: the `se_philox_*` built-in kernels of `builtins.cl`, a
//! line-by-line port of [`crate::philox`], so fills are bit-identical to every other platform.

use super::builtins::{WG, groups, ptr};
use super::device::OpenClExecutor;
use crate::error::Result;
use crate::interface::rng::PhiloxFill;
use crate::interface::{RngSupport, StreamInterface};
use crate::types::{BlockDim, Packable, RandDistribution, ThreadDim};

impl RngSupport for OpenClExecutor {
    unsafe fn philox_fill(&self, stream: &dyn StreamInterface, f: &PhiloxFill) -> Result<()> {
        let (name, fp64, op, gauss) = match f.dist {
            RandDistribution::U32 => ("se_philox_u32", false, "then_populate_rand_uniform", None),
            RandDistribution::UniformF32 => (
                "se_philox_uniform_f32",
                false,
                "then_populate_rand_uniform",
                None,
            ),
            RandDistribution::UniformF64 => (
                "se_philox_uniform_f64",
                true,
                "then_populate_rand_uniform",
                None,
            ),
            RandDistribution::GaussianF32 { mean, stddev } => (
                "se_philox_gaussian_f32",
                true,
                "then_populate_rand_gaussian",
                Some((mean, stddev)),
            ),
            RandDistribution::GaussianF64 { mean, stddev } => (
                "se_philox_gaussian_f64",
                true,
                "then_populate_rand_gaussian",
                Some((mean, stddev)),
            ),
        };
        let [dst, off] = ptr(&f.dst, f.dist.elem_size(), op)?;
        let mut args = vec![
            dst,
            off,
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
        let blocks = f.count.div_ceil(f.dist.elems_per_block());
        let grid = BlockDim::new(groups(blocks, WG, op)?, 1, 1);
        // SAFETY: `args` points only at the validated operands of this call (the
        // trait method's contract).
        unsafe {
            self.run_builtin(
                stream,
                (fp64, name, op),
                ThreadDim::new(WG as u32, 1, 1),
                grid,
                &args,
            )
        }
    }
}
