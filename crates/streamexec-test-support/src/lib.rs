//! Test support shared by the crates of the workspace: seeded random inputs that a failing run
//! can replay, and poison values that no correct operation writes.
//!
//! Platform-specific support stays with the crate whose tests need it (`streamexec`'s
//! `tests/common/`: executors of every available platform, the examples).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

pub use rand;

/// A seeded RNG; the seed comes from `STREAMEXEC_TEST_SEED` or the clock and is printed, so a
/// failing run can be replayed.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("STREAMEXEC_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("{test}: STREAMEXEC_TEST_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

/// `n` integers uniform in `0..below`.
pub fn random_u32s(rng: &mut StdRng, n: usize, below: u32) -> Vec<u32> {
    (0..n).map(|_| rng.random_range(0..below)).collect()
}

/// `n` floats uniform in `-100..100`.
pub fn random_f32s(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-100.0f32..100.0)).collect()
}

/// A value no correct operation writes, to detect unwritten outputs.
pub const POISON_U32: u32 = 0xDEAD_BEEF;
/// Bytes of `POISON_U32` as f32 bits: a NaN.
pub const POISON_F32_BITS: u32 = 0x7FBA_DBAD;
