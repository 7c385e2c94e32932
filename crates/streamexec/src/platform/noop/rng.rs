//! Random fills on noop: `Unsupported`. noop's `rng()` stays `None`, so the handle layer answers
//! `then_set_rng_seed` / `then_populate_rand_*` before this is reached; it is the place a
//! backend's random numbers start.
//!
//! A real implementation computes [`crate::philox`]'s pure function of (seed, offset, index) for
//! `fill.count` elements of `fill.dist` into `fill.dst`, in stream order, so that fills are
//! bit-identical on every platform (the conformance suite compares them with the reference).

use super::executor::NoopExecutor;
use super::status::unsupported;
use crate::error::Result;
use crate::interface::rng::PhiloxFill;
use crate::interface::{RngSupport, StreamInterface};
use crate::types::RandDistribution;

impl RngSupport for NoopExecutor {
    unsafe fn philox_fill(&self, _stream: &dyn StreamInterface, fill: &PhiloxFill) -> Result<()> {
        let op = match fill.dist {
            RandDistribution::GaussianF32 { .. } | RandDistribution::GaussianF64 { .. } => {
                "then_populate_rand_gaussian"
            }
            _ => "then_populate_rand_uniform",
        };
        Err(unsupported(op, "noop has no random-number generator"))
    }
}
