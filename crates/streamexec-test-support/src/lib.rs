//! Test support shared by the crates of the workspace: seeded random inputs that a failing run
//! can replay, poison values that no correct operation writes, and an error's whole source
//! chain as text.
//!
//! Platform-specific support stays with the crate whose tests need it (`streamexec`'s
//! `tests/common/`: executors of every available platform, the examples).

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

pub use rand;

/// A seeded RNG; the seed comes from `STREAMEXEC_TEST_SEED` or the clock and is printed, so a
/// failing run can be replayed. Under Miri, whose isolation has no clock, the seed is fixed.
pub fn rng(test: &str) -> StdRng {
    let seed = std::env::var("STREAMEXEC_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            if cfg!(miri) {
                return 1;
            }
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

/// `POISON_U32`'s bits as an `i32`.
pub const POISON_I32: i32 = 0xDEAD_BEEFu32 as i32;
/// A 64-bit poison pattern.
pub const POISON_I64: i64 = 0xDEAD_BEEF_DEAD_BEEFu64 as i64;
/// A NaN with a payload no arithmetic produces.
pub const POISON_F32: f32 = f32::from_bits(POISON_F32_BITS);
/// A NaN with a payload no arithmetic produces.
pub const POISON_F64: f64 = f64::from_bits(0x7FF7_BADB_ADBA_DBAD);

/// Bit-identical, or both NaN (PTX does not promise a NaN payload).
pub fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.to_bits() != POISON_F32.to_bits())
}

/// Bit-identical, or both NaN.
pub fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.to_bits() != POISON_F64.to_bits())
}

/// `e`'s message followed by each of its sources' (`: `-separated): what a test that looks for
/// a cause's text searches, since an error's `Display` leaves its sources out.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let chain = std::iter::successors(Some(e), |e| e.source());
    chain.map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

pub mod imports;
