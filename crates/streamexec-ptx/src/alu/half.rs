//! Half precision: `.f16` (IEEE 754 binary16) and `.bf16` (bfloat16) in the low 16 bits of
//! a register slot, and `.f16x2` / `.bf16x2`, two of them packed in 32 bits (element 0 in the
//! low half).
//!
//! Every result is rounded once from the exact one, as PTX specifies. Halves convert to `f64`
//! exactly; a sum or product of halves, or a fused `a * b + c`, is computed in `f64` together
//! with its rounding error (the product of two halves is exact in `f64`, the error of a sum is
//! exact by two-sum), the pair is rounded to odd in `f64`, and that is rounded to the half
//! format by [`round`]. Rounding to odd at 53 bits and then to at most 11 bits in any mode
//! gives the correctly rounded result (Boldo and Melquiond's theorem: the intermediate needs
//! two more bits than the target), so no double-rounding error is possible.
//!
//! Conversions (`cvt` with an f16/bf16 side) take their options at run time, packed in an
//! immediate operand ([`CvtSpec`]), so one lane function serves every type pair.

use super::{RM, RN, RZ, round_int};

/// The canonical NaN PTX writes for both half formats.
pub const CANON_NAN: u16 = 0x7FFF;

/// `(mantissa bits, exponent bits)` of the format (`bf`: bfloat16).
const fn layout(bf: bool) -> (i32, i32) {
    if bf { (7, 8) } else { (10, 5) }
}

/// The bits of +infinity.
const fn inf(bf: bool) -> u16 {
    if bf { 0x7F80 } else { 0x7C00 }
}

/// 2^k for -1022 <= k <= 1023.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// The exact value of half bits `h`.
pub fn to_f64(h: u16, bf: bool) -> f64 {
    if bf {
        return f32::from_bits((h as u32) << 16) as f64;
    }
    let e = ((h >> 10) & 0x1F) as i32;
    let m = (h & 0x3FF) as f64;
    let mag = match e {
        0 => m * pow2(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1024.0 + m) * pow2(e - 25),
    };
    if h & 0x8000 != 0 { -mag } else { mag }
}

/// NaN bits (either format).
pub fn is_nan(h: u16, bf: bool) -> bool {
    h & 0x7FFF > inf(bf)
}

/// Subnormal bits (either format).
fn is_subnormal(h: u16, bf: bool) -> bool {
    h & inf(bf) == 0 && h & 0x7FFF != 0
}

/// `.ftz`: a subnormal becomes a zero of its sign.
fn flush(h: u16, bf: bool) -> u16 {
    if is_subnormal(h, bf) { h & 0x8000 } else { h }
}

/// `x` rounded to the half format in mode `r` (`RN`, `RZ`, `RM`, `RP`); NaN is the canonical
/// NaN. Overflow gives infinity or the largest finite value, as IEEE 754 says for the mode.
pub fn round(x: f64, bf: bool, r: u8) -> u16 {
    let (mbits, ebits) = layout(bf);
    let emin = 2 - (1 << (ebits - 1)); // 1 - bias
    if x.is_nan() {
        return CANON_NAN;
    }
    let neg = x.is_sign_negative();
    let sign: u16 = if neg { 0x8000 } else { 0 };
    let a = x.abs();
    if a == 0.0 {
        return sign;
    }
    if a.is_infinite() {
        return sign | inf(bf);
    }
    // The exponent of the result's unit in the last place, and `a` in those units (exact: a
    // scaling by a power of two of a value of at most 53 bits).
    let e = ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let q = e.max(emin) - mbits;
    let scaled = a * pow2(-q);
    let whole = scaled.floor();
    let frac = scaled - whole;
    let mut m = whole as u64;
    let up = match r {
        RN => frac > 0.5 || (frac == 0.5 && m & 1 == 1),
        RZ => false,
        RM => neg && frac > 0.0,
        _ => !neg && frac > 0.0,
    };
    m += up as u64;
    // Subnormals and the lowest binade share q = emin - mbits; a carry into the next binade
    // lands on its first value.
    let bits = (((q - (emin - mbits)) as u64) << mbits) + m;
    if bits >= inf(bf) as u64 {
        let max = inf(bf) - 1;
        return sign
            | match r {
                RN => inf(bf),
                RZ => max,
                RM if neg => inf(bf),
                RM => max,
                _ if neg => max,
                _ => inf(bf),
            };
    }
    sign | bits as u16
}

/// `hi + lo` (with `hi` the nearest `f64` of the sum, as two-sum gives it) rounded to odd:
/// toward zero, then to the odd neighbour if inexact. Any later rounding to a format of at
/// most 51 bits is then the correct rounding of `hi + lo`.
fn to_odd(hi: f64, lo: f64) -> f64 {
    if !hi.is_finite() || lo == 0.0 || lo.is_nan() {
        return hi;
    }
    let b = hi.to_bits();
    let t = if (lo < 0.0) != (hi < 0.0) { b - 1 } else { b };
    f64::from_bits(t | 1)
}

/// `a + b` exactly, as the nearest `f64` and its error.
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Binary operations: 0 add, 1 sub, 2 mul, 3 min, 4 max, 5 min.NaN, 6 max.NaN.
pub const ADD: u8 = 0;
/// `sub`.
pub const SUB: u8 = 1;
/// `mul`.
pub const MUL: u8 = 2;
/// `min`.
pub const MIN: u8 = 3;
/// `max`.
pub const MAX: u8 = 4;
/// `min.NaN`.
pub const MIN_NAN: u8 = 5;
/// `max.NaN`.
pub const MAX_NAN: u8 = 6;

/// The result's `.ftz` and `.sat`.
fn finish(h: u16, bf: bool, ftz: bool, sat: bool) -> u16 {
    let h = if ftz { flush(h, bf) } else { h };
    if !sat {
        return h;
    }
    let one = round(1.0, bf, RN);
    if is_nan(h, bf) || (h & 0x8000 != 0 && h & 0x7FFF != 0) {
        0
    } else if h & 0x8000 == 0 && h > one {
        one
    } else {
        h
    }
}

fn bin1<const K: u8>(x: u16, y: u16, bf: bool, ftz: bool, sat: bool) -> u16 {
    let (x, y) = if ftz {
        (flush(x, bf), flush(y, bf))
    } else {
        (x, y)
    };
    let (a, b) = (to_f64(x, bf), to_f64(y, bf));
    let r = match K {
        ADD | SUB => {
            let b = if K == SUB { -b } else { b };
            let (s, e) = two_sum(a, b);
            round(to_odd(s, e), bf, RN)
        }
        MUL => round(a * b, bf, RN),
        _ => {
            let max = K == MAX || K == MAX_NAN;
            if a.is_nan() || b.is_nan() {
                if K >= MIN_NAN || (a.is_nan() && b.is_nan()) {
                    CANON_NAN
                } else if a.is_nan() {
                    y
                } else {
                    x
                }
            } else if a == b {
                // Equal, or zeros of either sign: -0 is below +0.
                let xneg = x & 0x8000 != 0;
                if max != xneg { x } else { y }
            } else if (a > b) == max {
                x
            } else {
                y
            }
        }
    };
    finish(r, bf, ftz, sat)
}

/// `add/sub/mul/min/max` (`K`) of `.f16`/`.bf16` (`BF`), packed pairs with `X2`.
#[inline(never)]
pub fn hbin<const BF: bool, const X2: bool, const K: u8, const FTZ: bool, const SAT: bool>(
    a: u64,
    b: u64,
) -> u64 {
    let lo = bin1::<K>(a as u16, b as u16, BF, FTZ, SAT) as u64;
    if !X2 {
        return lo;
    }
    let hi = bin1::<K>((a >> 16) as u16, (b >> 16) as u16, BF, FTZ, SAT) as u64;
    (hi << 16) | lo
}

fn fma1(x: u16, y: u16, z: u16, bf: bool, ftz: bool, sat: bool, relu: bool) -> u16 {
    let (x, y, z) = if ftz {
        (flush(x, bf), flush(y, bf), flush(z, bf))
    } else {
        (x, y, z)
    };
    let p = to_f64(x, bf) * to_f64(y, bf); // exact: at most 22 significant bits
    let (s, e) = two_sum(p, to_f64(z, bf));
    let r = finish(round(to_odd(s, e), bf, RN), bf, ftz, sat);
    if relu && !is_nan(r, bf) && r & 0x8000 != 0 {
        0
    } else {
        r
    }
}

/// `fma.rn{.ftz}{.sat|.relu}` of halves.
#[inline(never)]
pub fn hfma<const BF: bool, const X2: bool, const FTZ: bool, const SAT: bool, const RELU: bool>(
    a: u64,
    b: u64,
    c: u64,
) -> u64 {
    let lo = fma1(a as u16, b as u16, c as u16, BF, FTZ, SAT, RELU) as u64;
    if !X2 {
        return lo;
    }
    let hi = fma1(
        (a >> 16) as u16,
        (b >> 16) as u16,
        (c >> 16) as u16,
        BF,
        FTZ,
        SAT,
        RELU,
    ) as u64;
    (hi << 16) | lo
}

/// `neg` (`ABS` false) and `abs` of halves: the sign bit (after `.ftz`).
#[inline(never)]
pub fn hunary<const BF: bool, const X2: bool, const ABS: bool, const FTZ: bool>(a: u64) -> u64 {
    let one = |h: u16| {
        let h = if FTZ { flush(h, BF) } else { h };
        (if ABS { h & 0x7FFF } else { h ^ 0x8000 }) as u64
    };
    let lo = one(a as u16);
    if X2 {
        (one((a >> 16) as u16) << 16) | lo
    } else {
        lo
    }
}

/// `tanh.approx` (`K` 0) and `ex2.approx` (`K` 1) of halves: Rust's `f64` function rounded
/// once to the format (more accurate than a GPU's approximation, like the other `.approx`
/// functions).
#[inline(never)]
pub fn happrox<const BF: bool, const X2: bool, const K: u8, const FTZ: bool>(a: u64) -> u64 {
    let one = |h: u16| {
        let x = to_f64(if FTZ { flush(h, BF) } else { h }, BF);
        let r = if K == 0 { x.tanh() } else { x.exp2() };
        finish(round(r, BF, RN), BF, FTZ, false) as u64
    };
    let lo = one(a as u16);
    if X2 {
        (one((a >> 16) as u16) << 16) | lo
    } else {
        lo
    }
}

/// `setp.C` of halves (`C` a [`Cmp`](crate::ir::Cmp) as the float comparisons number them),
/// on the half at bit `SHIFT` (0, or 16 for the upper half of a pair).
#[inline(never)]
pub fn hcmp<const BF: bool, const C: u8, const FTZ: bool, const SHIFT: u32>(a: u64, b: u64) -> u64 {
    let get = |v: u64| {
        let h = (v >> SHIFT) as u16;
        to_f64(if FTZ { flush(h, BF) } else { h }, BF)
    };
    super::fcmp::<f64, C, false>(get(a).to_bits(), get(b).to_bits())
}

/// The value kinds of a conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `.f16`.
    F16,
    /// `.bf16`.
    Bf16,
    /// `.f32`.
    F32,
    /// `.f64`.
    F64,
    /// An integer of `bytes` bytes.
    Int {
        /// Width in bytes (1, 2, 4, 8).
        bytes: u8,
        /// Signed.
        signed: bool,
    },
}

impl Kind {
    fn code(self) -> u64 {
        match self {
            Kind::F16 => 0,
            Kind::Bf16 => 1,
            Kind::F32 => 2,
            Kind::F64 => 3,
            Kind::Int { bytes, signed } => {
                4 | (bytes.trailing_zeros() as u64 & 3) << 3 | (signed as u64) << 5
            }
        }
    }
    fn from_code(c: u64) -> Kind {
        match c & 7 {
            0 => Kind::F16,
            1 => Kind::Bf16,
            2 => Kind::F32,
            3 => Kind::F64,
            _ => Kind::Int {
                bytes: 1 << ((c >> 3) & 3),
                signed: (c >> 5) & 1 == 1,
            },
        }
    }
}

/// The options of a conversion with an f16/bf16 side, packed into a `u64` (an immediate
/// operand of [`cvt16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CvtSpec {
    /// Destination.
    pub dst: Kind,
    /// Source.
    pub src: Kind,
    /// Float rounding (`RN`..`RP`), or integer rounding with `int_round`.
    pub round: u8,
    /// `.rni .rzi .rmi .rpi` rather than `.rn .rz .rm .rp`.
    pub int_round: bool,
    /// `.ftz`: subnormal source and result become zeros.
    pub ftz: bool,
    /// `.sat`: the result clamped to [0, 1] (NaN to 0).
    pub sat: bool,
    /// `.relu`: a negative result becomes +0.
    pub relu: bool,
    /// `.satfinite`: an infinite result becomes the largest finite value of its sign.
    pub satfinite: bool,
}

impl CvtSpec {
    /// The packed form.
    pub fn encode(self) -> u64 {
        self.dst.code()
            | self.src.code() << 8
            | (self.round as u64 & 3) << 16
            | (self.int_round as u64) << 18
            | (self.ftz as u64) << 19
            | (self.sat as u64) << 20
            | (self.relu as u64) << 21
            | (self.satfinite as u64) << 22
    }

    /// From the packed form.
    pub fn decode(v: u64) -> CvtSpec {
        let bit = |k: u32| (v >> k) & 1 == 1;
        CvtSpec {
            dst: Kind::from_code(v),
            src: Kind::from_code(v >> 8),
            round: ((v >> 16) & 3) as u8,
            int_round: bit(18),
            ftz: bit(19),
            sat: bit(20),
            relu: bit(21),
            satfinite: bit(22),
        }
    }
}

/// A source value: exact.
enum Val {
    Float(f64),
    Int(i128),
}

/// `cvt` with an f16/bf16 side, the options in `spec` ([`CvtSpec::encode`]).
#[inline(never)]
pub fn cvt16(a: u64, spec: u64) -> u64 {
    let s = CvtSpec::decode(spec);
    let val = match s.src {
        Kind::F16 | Kind::Bf16 => {
            let bf = s.src == Kind::Bf16;
            let h = a as u16;
            Val::Float(to_f64(if s.ftz { flush(h, bf) } else { h }, bf))
        }
        Kind::F32 => {
            let x = f32::from_bits(a as u32);
            let x = if s.ftz && x.is_subnormal() {
                0f32.copysign(x)
            } else {
                x
            };
            Val::Float(x as f64)
        }
        Kind::F64 => {
            let x = f64::from_bits(a);
            Val::Float(if s.ftz && x.is_subnormal() {
                0f64.copysign(x)
            } else {
                x
            })
        }
        Kind::Int { bytes, signed } => {
            let sh = 64 - 8 * bytes as u32;
            Val::Int(if signed {
                ((a << sh) as i64 >> sh) as i128
            } else {
                ((a << sh) >> sh) as i128
            })
        }
    };
    match s.dst {
        Kind::Int { bytes, signed } => {
            let Val::Float(x) = val else { return 0 };
            if x.is_nan() {
                return 0;
            }
            let k = if s.int_round { s.round + 1 } else { 2 };
            let r = round_int(x, k);
            let bits = 8 * bytes as u32;
            let (lo, hi) = if signed {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            } else {
                (0, (1i128 << bits) - 1)
            };
            let v = if r <= lo as f64 {
                lo
            } else if r >= hi as f64 {
                hi
            } else {
                r as i128
            };
            // Signed results are sign-extended in the slot, unsigned ones zero-extended.
            let mask = if signed || bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
            v as i64 as u64 & mask
        }
        Kind::F16 | Kind::Bf16 => {
            let bf = s.dst == Kind::Bf16;
            let x = match val {
                Val::Float(x) if s.int_round => round_int(x, s.round + 1),
                Val::Float(x) => x,
                Val::Int(v) => {
                    // The nearest f64, rounded to odd with the sign of its error (|v| < 2^64,
                    // so the nearest f64 is an integer that fits i128).
                    let r = v as f64;
                    let back = r as i128;
                    let lo = match back.cmp(&v) {
                        std::cmp::Ordering::Less => 1.0,
                        std::cmp::Ordering::Greater => -1.0,
                        std::cmp::Ordering::Equal => 0.0,
                    };
                    to_odd(r, lo)
                }
            };
            let mut h = round(x, bf, s.round);
            if s.satfinite && h & 0x7FFF == inf(bf) {
                h -= 1;
            }
            if s.relu && !is_nan(h, bf) && h & 0x8000 != 0 {
                h = 0;
            }
            finish(h, bf, s.ftz, s.sat) as u64
        }
        Kind::F32 | Kind::F64 => {
            // From a half: exact in either.
            let x = match val {
                Val::Float(x) if s.int_round => round_int(x, s.round + 1),
                Val::Float(x) => x,
                Val::Int(v) => v as f64,
            };
            if s.dst == Kind::F32 {
                let f = x as f32;
                let f = if s.ftz && f.is_subnormal() {
                    0f32.copysign(f)
                } else {
                    f
                };
                let f = if s.sat {
                    if f.is_nan() || f < 0.0 {
                        0.0
                    } else {
                        f.min(1.0)
                    }
                } else if f.is_nan() {
                    f32::from_bits(0x7FFF_FFFF)
                } else {
                    f
                };
                f.to_bits() as u64
            } else {
                let f = if s.sat {
                    if x.is_nan() || x < 0.0 {
                        0.0
                    } else {
                        x.min(1.0)
                    }
                } else if x.is_nan() {
                    f64::from_bits(0x7FFF_FFFF_FFFF_FFFF)
                } else {
                    x
                };
                f.to_bits()
            }
        }
    }
}

/// `cvt.frnd.{f16,bf16}x2.f32 d, a, b`: `a` converted into the upper half, `b` into the lower.
#[inline(never)]
pub fn cvt16x2(a: u64, b: u64, spec: u64) -> u64 {
    (cvt16(a, spec) << 16) | cvt16(b, spec)
}

#[cfg(test)]
mod tests;
