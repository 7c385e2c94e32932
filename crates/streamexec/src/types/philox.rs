//! Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11, the
//! Random123 generator) and the maps from its words to the values a fill writes.
//!
//! This module *is* the specification every backend implements; the host backend calls it
//! directly and the OpenCL kernel (src/platform/opencl/builtins.cl) is a line-by-line copy, tested
//! bit for bit against it.
//!
//! **Seed.** `then_set_rng_seed(bytes)` needs at least 16 bytes. They are XOR-folded into 16
//! bytes (byte `i` into byte `i % 16`) and read as four little-endian `u32`: words 0–1 are the
//! Philox key, words 2–3 are counter words 2–3 (`counter_hi`). Seeding resets the stream's
//! block offset to 0.
//!
//! **Stream.** Block `b` is `philox4x32_10([lo32(b), hi32(b), counter_hi[0], counter_hi[1]],
//! key)`: four words. A fill starts at the stream's block offset, uses as many whole blocks as it
//! needs, and moves the offset past them, so element `i` of a fill depends only on (seed,
//! offset, i) and fills never share a block.
//!
//! **Elements per block.** `u32` and uniform `f32`: element `i` is word `i` of the fill.
//! Uniform `f64`: element `i` is made of words `2i` (low half) and `2i + 1` (high half).
//! Gaussian `f32`: elements `2p`, `2p + 1` come from words `2p`, `2p + 1`. Gaussian `f64`:
//! elements `2p`, `2p + 1` come from block `p`. An odd count drops the second value of the last
//! pair.
//!
//! **Maps.** Uniform `f32` = `(w >> 8) · 2⁻²⁴` ∈ [0, 1) (24 random bits, exact). Uniform `f64` =
//! `(((hi << 32) | lo) >> 11) · 2⁻⁵³` ∈ [0, 1) (53 bits, exact). Gaussian: Box–Muller on a pair
//! with `u1 = (top bits + 1) · 2⁻ᵇ` ∈ (0, 1] (never 0, so the log is finite) and `t = top bits ·
//! 2⁻ᵇ` ∈ [0, 1) in turns (b = 24 from one word for `f32`, 53 from two words for `f64`):
//! `r = √(−2 ln u1)`, `z0 = r cos 2πt`, `z1 = r sin 2πt`, then `mean + stddev · z` in `f64`
//! (rounded once to `f32` for `f32`). `ln` and `sincos` are the polynomial versions below, built
//! only from IEEE-exact `+ − × ÷ √` with no fused multiply-add, so every platform that follows
//! them produces the same bits (the OpenCL kernel turns `FP_CONTRACT` off; a CUDA kernel must
//! use `__dmul_rn`/`__dadd_rn` or `-fmad=false`).

/// What a Philox fill writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RandDistribution {
    /// Raw `u32` words.
    U32,
    /// `f32` in `[0, 1)`.
    UniformF32,
    /// `f64` in `[0, 1)`.
    UniformF64,
    /// Normal `f32` (computed in `f64`, rounded once).
    GaussianF32 {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
    },
    /// Normal `f64`.
    GaussianF64 {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        stddev: f64,
    },
}

impl RandDistribution {
    /// Bytes per element written.
    pub const fn elem_size(&self) -> u64 {
        match self {
            RandDistribution::U32 | RandDistribution::UniformF32 => 4,
            RandDistribution::GaussianF32 { .. } => 4,
            RandDistribution::UniformF64 | RandDistribution::GaussianF64 { .. } => 8,
        }
    }
    /// Elements produced by one Philox block (four `u32` words).
    pub const fn elems_per_block(&self) -> u64 {
        match self {
            RandDistribution::UniformF64 | RandDistribution::GaussianF64 { .. } => 2,
            _ => 4,
        }
    }
}

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Philox4x32 with 10 rounds: the Random123 `philox4x32_R(10, ctr, key)`.
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// Key and counter words 2–3 from a seed (the fold described in the module docs).
pub fn seed_words(seed: &[u8]) -> ([u32; 2], [u32; 2]) {
    let mut folded = [0u8; 16];
    for (i, b) in seed.iter().enumerate() {
        folded[i % 16] ^= b;
    }
    let w = |i: usize| u32::from_le_bytes([folded[i], folded[i + 1], folded[i + 2], folded[i + 3]]);
    ([w(0), w(4)], [w(8), w(12)])
}

/// A seeded stream position: key, counter words 2–3, and the block offset of a fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhiloxStream {
    /// Philox key.
    pub key: [u32; 2],
    /// Counter words 2 and 3.
    pub counter_hi: [u32; 2],
    /// Counter (words 0–1) of the first block.
    pub offset: u64,
}

impl PhiloxStream {
    /// Block `b` after the offset (the counter wraps at 2⁶⁴).
    pub fn block(&self, b: u64) -> [u32; 4] {
        let c = self.offset.wrapping_add(b);
        philox4x32_10(
            [
                c as u32,
                (c >> 32) as u32,
                self.counter_hi[0],
                self.counter_hi[1],
            ],
            self.key,
        )
    }
}

/// Uniform `f32` in [0, 1) from one word.
pub fn uniform_f32(w: u32) -> f32 {
    (w >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Uniform `f64` in [0, 1) from two words.
pub fn uniform_f64(lo: u32, hi: u32) -> f64 {
    (((u64::from(hi) << 32) | u64::from(lo)) >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Natural log of `x` ∈ (0, 1] (normal numbers), from `+ − × ÷` only: `x = m·2ᵉ` with
/// `m` ∈ [√½, √2), `ln m = 2 atanh s`, `s = (m − 1)/(m + 1)`, series to `s²³`.
pub fn ln(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut p = 1.0 / 23.0;
    for d in [21.0, 19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0] {
        p = p * s2 + 1.0 / d;
    }
    2.0 * s * p + e as f64 * core::f64::consts::LN_2
}

/// `(sin 2πt, cos 2πt)` for `t` ∈ [0, 1) turns, from `+ − ×` only: an exact reduction to
/// |r| ≤ ⅛ turn, then Taylor series to degree 15 (sin) and 16 (cos).
pub fn sincos_turns(t: f64) -> (f64, f64) {
    let q = (t * 4.0 + 0.5).floor();
    let r = t - q * 0.25;
    let x = r * core::f64::consts::TAU;
    let x2 = x * x;
    // Coefficients 1/n! with alternating signs, constant-folded the same way everywhere.
    let mut s = -1.0 / 1_307_674_368_000.0;
    for c in [
        1.0 / 6_227_020_800.0,
        -1.0 / 39_916_800.0,
        1.0 / 362_880.0,
        -1.0 / 5_040.0,
        1.0 / 120.0,
        -1.0 / 6.0,
    ] {
        s = s * x2 + c;
    }
    let sin = x + x * x2 * s;
    let mut c = 1.0 / 20_922_789_888_000.0;
    for k in [
        -1.0 / 87_178_291_200.0,
        1.0 / 479_001_600.0,
        -1.0 / 3_628_800.0,
        1.0 / 40_320.0,
        -1.0 / 720.0,
        1.0 / 24.0,
        -1.0 / 2.0,
    ] {
        c = c * x2 + k;
    }
    let cos = 1.0 + x2 * c;
    match q as u32 & 3 {
        0 => (sin, cos),
        1 => (cos, -sin),
        2 => (-sin, -cos),
        _ => (-cos, sin),
    }
}

/// Box–Muller: two standard normal values from `u1` ∈ (0, 1] and `t` ∈ [0, 1) turns.
pub fn box_muller(u1: f64, t: f64) -> (f64, f64) {
    let r = (-2.0 * ln(u1)).sqrt();
    let (s, c) = sincos_turns(t);
    (r * c, r * s)
}

/// Writes elements `first..first + out.len() / elem_size` of a fill of `dist` from `stream`
/// into `out` (native byte order). `first` must be a multiple of `dist.elems_per_block()`.
pub fn generate(stream: &PhiloxStream, dist: RandDistribution, first: u64, out: &mut [u8]) {
    let per = dist.elems_per_block();
    debug_assert_eq!(first % per, 0);
    let size = dist.elem_size() as usize;
    let chunk = size * per as usize;
    for (j, dst) in out.chunks_mut(chunk).enumerate() {
        let w = stream.block(first / per + j as u64);
        let mut vals = [0u8; 16];
        match dist {
            RandDistribution::U32 => {
                for i in 0..4 {
                    vals[4 * i..4 * i + 4].copy_from_slice(&w[i].to_ne_bytes());
                }
            }
            RandDistribution::UniformF32 => {
                for i in 0..4 {
                    vals[4 * i..4 * i + 4].copy_from_slice(&uniform_f32(w[i]).to_ne_bytes());
                }
            }
            RandDistribution::UniformF64 => {
                vals[..8].copy_from_slice(&uniform_f64(w[0], w[1]).to_ne_bytes());
                vals[8..].copy_from_slice(&uniform_f64(w[2], w[3]).to_ne_bytes());
            }
            RandDistribution::GaussianF32 { mean, stddev } => {
                for p in 0..2 {
                    let u1 = f64::from((w[2 * p] >> 8) + 1) * (1.0 / 16_777_216.0);
                    let t = f64::from(w[2 * p + 1] >> 8) * (1.0 / 16_777_216.0);
                    let (z0, z1) = box_muller(u1, t);
                    let a = (mean + stddev * z0) as f32;
                    let b = (mean + stddev * z1) as f32;
                    vals[8 * p..8 * p + 4].copy_from_slice(&a.to_ne_bytes());
                    vals[8 * p + 4..8 * p + 8].copy_from_slice(&b.to_ne_bytes());
                }
            }
            RandDistribution::GaussianF64 { mean, stddev } => {
                let u1 = uniform_f64(w[0], w[1]) + 1.0 / 9_007_199_254_740_992.0;
                let t = uniform_f64(w[2], w[3]);
                let (z0, z1) = box_muller(u1, t);
                vals[..8].copy_from_slice(&(mean + stddev * z0).to_ne_bytes());
                vals[8..].copy_from_slice(&(mean + stddev * z1).to_ne_bytes());
            }
        }
        dst.copy_from_slice(&vals[..dst.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers_from_random123() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri deliberately perturbs std's ln/sin/cos")]
    fn ln_and_sincos_match_std_closely() {
        for i in 1..=4096u32 {
            let x = f64::from(i) / 4096.0;
            assert!((ln(x) - x.ln()).abs() <= 4.0 * f64::EPSILON * x.ln().abs().max(1.0));
            let (s, c) = sincos_turns(x - 1.0 / 4096.0);
            let a = (x - 1.0 / 4096.0) * core::f64::consts::TAU;
            assert!(
                (s - a.sin()).abs() < 2e-15 && (c - a.cos()).abs() < 2e-15,
                "{x}"
            );
        }
        assert!((ln(f64::MIN_POSITIVE) - f64::MIN_POSITIVE.ln()).abs() < 1e-12);
    }
}
