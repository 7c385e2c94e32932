//! An exact reference for half precision (`.f16`, IEEE 754 binary16, and `.bf16`, the upper
//! 16 bits of an f32): a half decodes into an exact dyadic rational `m * 2^e`; a sum or a
//! product (or a fused `a * b + c`) is a list of such terms; rounding is a binary search over
//! the format's finite values comparing exactly with big-integer arithmetic. It shares no code
//! or method with the engine (which rounds from `f64` with a round-to-odd step).
//!
//! PTX ISA 9.7.4 (half precision instructions): `add`, `sub`, `mul`, `fma` round to nearest
//! even once from the exact result; `.ftz` flushes subnormal inputs and results to zeros of
//! their sign; `.sat` clamps to [0, 1] with NaN to +0; `fma.relu` makes a negative result +0
//! and keeps NaN; `min`/`max` return the non-NaN operand (`.NaN`: NaN if either is), with -0
//! below +0.

use super::Round;
use std::cmp::Ordering;

/// `m * 2^e`.
#[derive(Clone, Copy, Debug)]
pub struct Dy {
    pub m: i128,
    pub e: i32,
}

/// A decoded float.
#[derive(Clone, Copy, Debug)]
pub enum V {
    Nan,
    /// Infinity (negative with the flag).
    Inf(bool),
    /// A finite value; the flag is the sign (kept for zeros).
    Fin(Dy, bool),
}

/// (mantissa bits, bias, exponent field of infinity) of a half format.
pub fn fmt(bf: bool) -> (u32, i32, u16) {
    if bf { (7, 127, 0xFF) } else { (10, 15, 0x1F) }
}

/// Decodes IEEE-style bits with `mb` mantissa bits, exponent field width `eb`, bias `bias`.
pub fn ieee(bits: u64, mb: u32, eb: u32, bias: i32) -> V {
    let neg = (bits >> (mb + eb)) & 1 == 1;
    let ef = ((bits >> mb) & ((1 << eb) - 1)) as i32;
    let mant = (bits & ((1 << mb) - 1)) as i128;
    if ef == (1 << eb) - 1 {
        return if mant == 0 { V::Inf(neg) } else { V::Nan };
    }
    let (m, e) = if ef == 0 {
        (mant, 1 - bias - mb as i32)
    } else {
        (mant | 1 << mb, ef - bias - mb as i32)
    };
    V::Fin(
        Dy {
            m: if neg { -m } else { m },
            e,
        },
        neg,
    )
}

pub fn hv(h: u16, bf: bool) -> V {
    let (mb, bias, _) = fmt(bf);
    ieee(h as u64, mb, if bf { 8 } else { 5 }, bias)
}

pub fn is_nan(h: u16, bf: bool) -> bool {
    matches!(hv(h, bf), V::Nan)
}

pub fn is_sub(h: u16, bf: bool) -> bool {
    let (mb, _, _) = fmt(bf);
    (h >> mb) & fmt(bf).2 == 0 && h & 0x7FFF != 0
}

pub fn flush(h: u16, bf: bool, ftz: bool) -> u16 {
    if ftz && is_sub(h, bf) { h & 0x8000 } else { h }
}

/// The sign of `sum(m * 2^e)`, exactly (32-bit limbs, signed accumulation).
pub fn sign(terms: &[Dy]) -> Ordering {
    let terms: Vec<Dy> = terms.iter().copied().filter(|t| t.m != 0).collect();
    let Some(emin) = terms.iter().map(|t| t.e).min() else {
        return Ordering::Equal;
    };
    let emax = terms.iter().map(|t| t.e).max().unwrap_or(emin);
    let mut limbs = vec![0i64; ((emax - emin) as usize + 130) / 32 + 2];
    for t in &terms {
        let s = (t.e - emin) as usize;
        let (mut k, mut v) = (s / 32, t.m << (s % 32));
        while v != 0 {
            if v == -1 {
                limbs[k] -= 1;
                break;
            }
            limbs[k] += (v & 0xFFFF_FFFF) as i64;
            v >>= 32;
            k += 1;
        }
    }
    for k in 0..limbs.len() - 1 {
        let c = limbs[k].div_euclid(1 << 32);
        limbs[k] -= c << 32;
        limbs[k + 1] += c;
    }
    match limbs.iter().rposition(|&l| l != 0) {
        None => Ordering::Equal,
        Some(k) if limbs[k] < 0 => Ordering::Less,
        Some(_) => Ordering::Greater,
    }
}

pub fn neg(d: Dy) -> Dy {
    Dy { m: -d.m, e: d.e }
}

/// The value of a non-negative finite half pattern (or `2^(emax+1)` for the infinity
/// pattern, the first value past the largest finite one).
pub fn value(p: u16, bf: bool) -> Dy {
    if p == fmt(bf).2 << fmt(bf).0 {
        return Dy {
            m: 1,
            e: if bf { 128 } else { 16 },
        };
    }
    match hv(p, bf) {
        V::Fin(d, _) => d,
        _ => unreachable!("a finite pattern"),
    }
}

/// The exact non-zero value `sum(terms)` rounded to the half format in `r`.
pub fn round_terms(terms: &[Dy], bf: bool, r: Round) -> u16 {
    let negative = sign(terms) == Ordering::Less;
    let mag: Vec<Dy> = terms
        .iter()
        .map(|&t| if negative { neg(t) } else { t })
        .collect();
    let cmp_with = |p: u16| {
        let mut v = mag.clone();
        v.push(neg(value(p, bf)));
        sign(&v) // sign of |x| - value(p)
    };
    let inf_pat = fmt(bf).2 << fmt(bf).0;
    // The largest finite pattern <= |x|.
    let (mut lo, mut hi) = (0u16, inf_pat - 1);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if cmp_with(mid) != Ordering::Less {
            lo = mid
        } else {
            hi = mid - 1
        }
    }
    let below = lo;
    let above = below + 1;
    let pick = if cmp_with(below) == Ordering::Equal {
        below
    } else {
        match r {
            Round::N => {
                // Compare 2|x| with value(below) + value(above).
                let mut v: Vec<Dy> = mag.iter().map(|t| Dy { m: t.m, e: t.e + 1 }).collect();
                v.push(neg(value(below, bf)));
                v.push(neg(value(above, bf)));
                match sign(&v) {
                    Ordering::Greater => above,
                    Ordering::Less => below,
                    Ordering::Equal if below & 1 == 0 => below,
                    Ordering::Equal => above,
                }
            }
            Round::Z => below,
            Round::M if negative => above,
            Round::P if !negative => above,
            _ => below,
        }
    };
    if negative { pick | 0x8000 } else { pick }
}

/// A decoded value rounded to the half format (zeros and infinities keep their sign).
pub fn round_v(v: V, bf: bool, r: Round) -> u16 {
    match v {
        V::Nan => 0x7FFF,
        V::Inf(n) => (fmt(bf).2 << fmt(bf).0) | if n { 0x8000 } else { 0 },
        V::Fin(d, n) if d.m == 0 => {
            if n {
                0x8000
            } else {
                0
            }
        }
        V::Fin(d, _) => round_terms(&[d], bf, r),
    }
}

/// The result of `sum(terms)` of finite terms: exact zero is `zero_neg`'s zero.
pub fn round_sum(terms: &[Dy], zero_neg: bool, bf: bool) -> u16 {
    if sign(terms) == Ordering::Equal {
        if zero_neg { 0x8000 } else { 0 }
    } else {
        round_terms(terms, bf, Round::N)
    }
}

pub fn to_f64(v: V) -> f64 {
    match v {
        V::Nan => f64::NAN,
        V::Inf(n) => {
            if n {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }
        }
        V::Fin(d, n) if d.m == 0 => {
            if n {
                -0.0
            } else {
                0.0
            }
        }
        V::Fin(d, _) => d.m as f64 * 2f64.powi(d.e),
    }
}

#[derive(Clone, Copy, PartialEq)]
pub enum Op2 {
    Add,
    Sub,
    Mul,
    Min,
    Max,
    MinNan,
    MaxNan,
}

pub fn finish(h: u16, bf: bool, ftz: bool, sat: bool) -> u16 {
    let h = flush(h, bf, ftz);
    if !sat {
        return h;
    }
    match hv(h, bf) {
        V::Nan => 0,
        V::Fin(d, true) if d.m != 0 => 0,
        V::Inf(true) => 0,
        v if to_f64(v) > 1.0 => round_v(V::Fin(Dy { m: 1, e: 0 }, false), bf, Round::N),
        _ => h,
    }
}

pub fn op2(op: Op2, x: u16, y: u16, bf: bool, ftz: bool, sat: bool) -> u16 {
    let (x, y) = (flush(x, bf, ftz), flush(y, bf, ftz));
    let (a, b) = (hv(x, bf), hv(y, bf));
    let r = match op {
        Op2::Add | Op2::Sub => {
            let b = match (b, op) {
                (V::Inf(n), Op2::Sub) => V::Inf(!n),
                (V::Fin(d, n), Op2::Sub) => V::Fin(neg(d), !n),
                (b, _) => b,
            };
            match (a, b) {
                (V::Nan, _) | (_, V::Nan) => 0x7FFF,
                (V::Inf(p), V::Inf(q)) if p != q => 0x7FFF,
                (V::Inf(p), _) | (_, V::Inf(p)) => round_v(V::Inf(p), bf, Round::N),
                (V::Fin(d, n), V::Fin(e, m)) => round_sum(&[d, e], n && m, bf),
            }
        }
        Op2::Mul => match (a, b) {
            (V::Nan, _) | (_, V::Nan) => 0x7FFF,
            (V::Inf(_), V::Fin(d, _)) | (V::Fin(d, _), V::Inf(_)) if d.m == 0 => 0x7FFF,
            (V::Inf(p), V::Inf(q)) => round_v(V::Inf(p != q), bf, Round::N),
            (V::Inf(p), V::Fin(_, q)) | (V::Fin(_, q), V::Inf(p)) => {
                round_v(V::Inf(p != q), bf, Round::N)
            }
            (V::Fin(d, n), V::Fin(e, m)) => round_sum(
                &[Dy {
                    m: d.m * e.m,
                    e: d.e + e.e,
                }],
                n != m,
                bf,
            ),
        },
        _ => {
            let max = matches!(op, Op2::Max | Op2::MaxNan);
            let nan_wins = matches!(op, Op2::MinNan | Op2::MaxNan);
            match (a, b) {
                (V::Nan, V::Nan) => 0x7FFF,
                (V::Nan, _) | (_, V::Nan) if nan_wins => 0x7FFF,
                (V::Nan, _) => y,
                (_, V::Nan) => x,
                _ => {
                    let (fa, fb) = (to_f64(a), to_f64(b));
                    // -0 is below +0.
                    let key = |f: f64| (f, f == 0.0 && f.is_sign_positive());
                    let x_first = if max {
                        key(fa) >= key(fb)
                    } else {
                        key(fa) <= key(fb)
                    };
                    if x_first { x } else { y }
                }
            }
        }
    };
    finish(r, bf, ftz, sat)
}

pub fn fma1(x: u16, y: u16, z: u16, bf: bool, ftz: bool, sat: bool, relu: bool) -> u16 {
    let (x, y, z) = (flush(x, bf, ftz), flush(y, bf, ftz), flush(z, bf, ftz));
    let (a, b, c) = (hv(x, bf), hv(y, bf), hv(z, bf));
    // The product, as a value.
    let p = match (a, b) {
        (V::Nan, _) | (_, V::Nan) => V::Nan,
        (V::Inf(_), V::Fin(d, _)) | (V::Fin(d, _), V::Inf(_)) if d.m == 0 => V::Nan,
        (V::Inf(p), V::Inf(q)) => V::Inf(p != q),
        (V::Inf(p), V::Fin(_, q)) | (V::Fin(_, q), V::Inf(p)) => V::Inf(p != q),
        (V::Fin(d, n), V::Fin(e, m)) => V::Fin(
            Dy {
                m: d.m * e.m,
                e: d.e + e.e,
            },
            n != m,
        ),
    };
    let r = match (p, c) {
        (V::Nan, _) | (_, V::Nan) => 0x7FFF,
        (V::Inf(p), V::Inf(q)) if p != q => 0x7FFF,
        (V::Inf(p), _) | (_, V::Inf(p)) => round_v(V::Inf(p), bf, Round::N),
        (V::Fin(d, n), V::Fin(e, m)) => round_sum(&[d, e], n && m, bf),
    };
    let r = finish(r, bf, ftz, sat);
    if relu && !is_nan(r, bf) && r & 0x8000 != 0 {
        0
    } else {
        r
    }
}
