//! Random numbers on a stream: `then_set_rng_seed`, `then_populate_rand_uniform`,
//! `then_populate_rand_gaussian`.
//!
//! The stream owns the generator state (key, counter words 2–3, block offset); backends only
//! compute the pure function in [`crate::philox`], so the same seed and the same sequence of
//! fills give bit-identical results on every platform.

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::interface::RngSupport;
use crate::interface::blas::Operand;
use crate::interface::rng::PhiloxFill;
use crate::memory::DeviceSlice;
use crate::stream::Stream;
use crate::types::RandDistribution;
use crate::types::philox::{PhiloxStream, seed_words};

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Element types `then_populate_rand_uniform` writes: `u32` (raw Philox words), `f32` and `f64`
/// in [0, 1).
pub trait UniformElement: Pod + sealed::Sealed {
    /// The distribution.
    const UNIFORM: RandDistribution;
}
impl UniformElement for u32 {
    const UNIFORM: RandDistribution = RandDistribution::U32;
}
impl UniformElement for f32 {
    const UNIFORM: RandDistribution = RandDistribution::UniformF32;
}
impl UniformElement for f64 {
    const UNIFORM: RandDistribution = RandDistribution::UniformF64;
}

/// Element types `then_populate_rand_gaussian` writes: `f32`, `f64`.
pub trait GaussianElement: Pod + sealed::Sealed + Into<f64> {
    /// The distribution with these parameters.
    fn gaussian(mean: f64, stddev: f64) -> RandDistribution;
}
impl GaussianElement for f32 {
    fn gaussian(mean: f64, stddev: f64) -> RandDistribution {
        RandDistribution::GaussianF32 { mean, stddev }
    }
}
impl GaussianElement for f64 {
    fn gaussian(mean: f64, stddev: f64) -> RandDistribution {
        RandDistribution::GaussianF64 { mean, stddev }
    }
}

/// The minimum seed length, as StreamExecutor required.
pub const MIN_SEED_BYTES: usize = 16;

impl Stream {
    fn rng_support(&self, operation: &str) -> Result<&dyn RngSupport> {
        let exec = self.executor();
        exec.interface().rng().ok_or_else(|| {
            Error::unsupported(
                exec.platform_name(),
                operation,
                format!(
                    "{} has no random-number support; fill on a platform that has it (host, \
                     opencl) and copy",
                    exec.description().name
                ),
            )
        })
    }

    /// Seeds this stream's Philox4x32-10 generator with `seed` (at least 16 bytes) and resets
    /// its offset; see [`crate::philox`] for how the bytes are used.
    pub fn then_set_rng_seed(&mut self, seed: &[u8]) -> &mut Self {
        let mut state = None;
        self.enqueue(|s| {
            s.rng_support("then_set_rng_seed")?;
            if seed.len() < MIN_SEED_BYTES {
                return Err(Error::invalid(
                    "then_set_rng_seed",
                    format!(
                        "the seed has {} bytes; give at least {MIN_SEED_BYTES}",
                        seed.len()
                    ),
                ));
            }
            let (key, counter_hi) = seed_words(seed);
            state = Some(PhiloxStream {
                key,
                counter_hi,
                offset: 0,
            });
            Ok(())
        });
        if state.is_some() {
            self.rng = state;
        }
        self
    }

    /// Moves this stream's generator to Philox block `offset` (counter words 0–1), as cuRAND's
    /// `curandSetGeneratorOffset`: the next fill starts there. Lets a run reproduce one fill of
    /// a longer sequence without generating the earlier ones. Needs a seed first.
    pub fn then_set_rng_offset(&mut self, offset: u64) -> &mut Self {
        let seeded = self.rng.is_some();
        self.enqueue(|s| {
            s.rng_support("then_set_rng_offset")?;
            if !seeded {
                return Err(Error::invalid(
                    "then_set_rng_offset",
                    "the stream's generator has no seed; call then_set_rng_seed first",
                ));
            }
            Ok(())
        });
        if self.ok()
            && let Some(st) = self.rng.as_mut()
        {
            st.offset = offset;
        }
        self
    }

    /// Fills `dst` with uniform values: raw words for `u32`, [0, 1) for `f32`/`f64`.
    pub fn then_populate_rand_uniform<'a, T: UniformElement>(
        &mut self,
        dst: impl Into<DeviceSlice<'a, T>>,
    ) -> &mut Self {
        self.populate("then_populate_rand_uniform", T::UNIFORM, dst.into())
    }

    /// Fills `dst` with normal values of `mean` and `stddev` (finite, `stddev ≥ 0`).
    pub fn then_populate_rand_gaussian<'a, T: GaussianElement>(
        &mut self,
        mean: T,
        stddev: T,
        dst: impl Into<DeviceSlice<'a, T>>,
    ) -> &mut Self {
        let (mean, stddev): (f64, f64) = (mean.into(), stddev.into());
        const OP: &str = "then_populate_rand_gaussian";
        if !(mean.is_finite() && stddev.is_finite() && stddev >= 0.0) {
            return self.enqueue(|_| {
                Err(Error::invalid(
                    OP,
                    format!("mean {mean} and stddev {stddev}: both must be finite, stddev ≥ 0"),
                ))
            });
        }
        self.populate(OP, T::gaussian(mean, stddev), dst.into())
    }

    fn populate<T: Pod>(
        &mut self,
        operation: &str,
        dist: RandDistribution,
        dst: DeviceSlice<'_, T>,
    ) -> &mut Self {
        let state = self.rng;
        let mut used_blocks = 0;
        self.enqueue(|s| {
            let rng = s.rng_support(operation)?;
            s.check_slice(&dst, operation)?;
            let Some(state) = state else {
                return Err(Error::invalid(
                    operation,
                    "the stream's generator has no seed; call then_set_rng_seed first",
                ));
            };
            if dst.is_empty() {
                return Ok(());
            }
            let count = dst.len() as u64;
            used_blocks = count.div_ceil(dist.elems_per_block());
            let fill = PhiloxFill {
                dst: Operand {
                    addr: dst.address(),
                    len: count,
                },
                count,
                key: state.key,
                counter_hi: state.counter_hi,
                offset: state.offset,
                dist,
            };
            // SAFETY: `dst` borrows live memory of this executor (owner checked above) with
            // room for `count` elements of the distribution's size.
            unsafe { rng.philox_fill(s.iface(), &fill) }
        });
        if let Some(st) = self.rng.as_mut() {
            st.offset = st.offset.wrapping_add(used_blocks);
        }
        self
    }
}
