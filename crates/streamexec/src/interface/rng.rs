//! The random-number plugin trait: Philox fills.
//!
//! The generator keeps no state in the backend: the stream owns the Philox key and counter
//! offset and passes them with each fill, so every backend computes the same pure function
//! (`streamexec::philox`) and produces bit-identical output. A backend that runs fills returns
//! an implementation from [`StreamExecutorInterface::rng`](super::StreamExecutorInterface::rng);
//! the default `None` makes the stream fail with `Error::Unsupported`.

use super::StreamInterface;
use super::blas::Operand;
use crate::error::Result;
use crate::types::RandDistribution;

/// One fill: `count` elements at `dst` from Philox blocks `offset, offset + 1, ...` of the
/// stream keyed by `key` with counter words 2–3 fixed to `counter_hi` (see `streamexec::philox`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhiloxFill {
    /// Destination.
    pub dst: Operand,
    /// Elements to write (≥ 1).
    pub count: u64,
    /// Philox key.
    pub key: [u32; 2],
    /// Counter words 2 and 3.
    pub counter_hi: [u32; 2],
    /// Counter (words 0–1) of the fill's first block.
    pub offset: u64,
    /// What to write.
    pub dist: RandDistribution,
}

/// Random numbers on one executor: Philox4x32-10 fills, enqueued on `stream`.
pub trait RngSupport: Send + Sync {
    /// Writes `fill.count` elements as `streamexec::philox::generate` defines them.
    ///
    /// # Safety
    /// `stream` belongs to this executor and `fill.dst` lies inside one live allocation of this
    /// executor with room for `fill.count` elements of the distribution's size.
    unsafe fn philox_fill(&self, stream: &dyn StreamInterface, fill: &PhiloxFill) -> Result<()>;
}
