//! Lane-level semantics of PTX arithmetic, logic, comparison and conversion instructions, as
//! plain functions on operand bits. The decoder picks one monomorphized function per
//! opcode/type/modifier combination and stores its pointer in the instruction, so the
//! interpreter's inner loop is one indirect call per lane.
//!
//! Conventions: an operand arrives as the 64-bit register slot; a function reads the low bits
//! its type needs. Results are written as the type's bits, sign-extended for signed types.
//! Float rounding other than to-nearest (`.rz .rm .rp`) is exact: the nearest result is
//! corrected by one ulp using the sign of the exactly computed error (two-sum, fma residue).

/// An integer type of PTX.
pub trait Int: Copy + PartialOrd + Eq + 'static {
    /// Width in bits.
    const BITS: u32;
    /// Signed.
    const SIGNED: bool;
    /// Low bits of a register slot.
    fn from_bits(v: u64) -> Self;
    /// The value as a register slot (sign-extended when signed).
    fn to_bits(self) -> u64;
    /// The value, exactly.
    fn wide(self) -> i128;
    /// `v` truncated to this width.
    fn from_wide(v: i128) -> Self;
}

macro_rules! impl_int {
    ($($t:ty, $signed:expr);*) => {$(
        impl Int for $t {
            const BITS: u32 = <$t>::BITS;
            const SIGNED: bool = $signed;
            #[inline(always)]
            fn from_bits(v: u64) -> Self { v as $t }
            #[inline(always)]
            fn to_bits(self) -> u64 { self as i128 as u64 }
            #[inline(always)]
            fn wide(self) -> i128 { self as i128 }
            #[inline(always)]
            fn from_wide(v: i128) -> Self { v as $t }
        }
    )*};
}
impl_int!(u8, false; u16, false; u32, false; u64, false; i8, true; i16, true; i32, true; i64, true);

impl<I: Int> IntExt for I {}
/// Range helpers derived from [`Int`].
pub trait IntExt: Int {
    /// Smallest value.
    fn min_wide() -> i128 {
        if Self::SIGNED {
            -(1i128 << (Self::BITS - 1))
        } else {
            0
        }
    }
    /// Largest value.
    fn max_wide() -> i128 {
        if Self::SIGNED {
            (1i128 << (Self::BITS - 1)) - 1
        } else {
            (1i128 << Self::BITS) - 1
        }
    }
}

/// A float type of PTX.
pub trait Float: Copy + PartialOrd + 'static {
    /// From a register slot.
    fn from_bits(v: u64) -> Self;
    /// To a register slot.
    fn to_bits(self) -> u64;
    /// From f64, rounding to nearest.
    fn from_f64(v: f64) -> Self;
    /// From an integer, rounding to nearest.
    fn from_i128(v: i128) -> Self;
    /// To f64 (exact).
    fn to_f64(self) -> f64;
    /// NaN test.
    fn nan(self) -> bool;
    /// Subnormal → zero of the same sign (for `.ftz`).
    fn ftz(self) -> Self;
    /// The next value up.
    fn up(self) -> Self;
    /// The next value down.
    fn down(self) -> Self;
    /// Zero test.
    fn zero(self) -> bool;
    /// Strictly negative (sign bit on a nonzero number, or -0).
    fn neg(self) -> bool;
    /// `self * b + c`, fused.
    fn fma(self, b: Self, c: Self) -> Self;
    /// Arithmetic.
    fn add(self, b: Self) -> Self;
    /// Arithmetic.
    fn sub(self, b: Self) -> Self;
    /// Arithmetic.
    fn mul(self, b: Self) -> Self;
    /// Arithmetic.
    fn div(self, b: Self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Finite test.
    fn finite(self) -> bool;
    /// Negation.
    fn negate(self) -> Self;
    /// The canonical NaN PTX returns.
    const CANON_NAN: Self;
    /// 0 and 1, for `.sat`.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
}

macro_rules! impl_float {
    ($t:ty, $bits:ty, $nan:expr) => {
        impl Float for $t {
            #[inline(always)]
            fn from_bits(v: u64) -> Self {
                <$t>::from_bits(v as $bits)
            }
            #[inline(always)]
            fn to_bits(self) -> u64 {
                <$t>::to_bits(self) as u64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_i128(v: i128) -> Self {
                v as $t
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn nan(self) -> bool {
                self.is_nan()
            }
            #[inline(always)]
            fn ftz(self) -> Self {
                if self.is_subnormal() {
                    <$t>::copysign(0.0, self)
                } else {
                    self
                }
            }
            fn up(self) -> Self {
                self.next_up()
            }
            fn down(self) -> Self {
                self.next_down()
            }
            fn zero(self) -> bool {
                self == 0.0
            }
            fn neg(self) -> bool {
                self.is_sign_negative()
            }
            #[inline(always)]
            fn fma(self, b: Self, c: Self) -> Self {
                self.mul_add(b, c)
            }
            #[inline(always)]
            fn add(self, b: Self) -> Self {
                self + b
            }
            #[inline(always)]
            fn sub(self, b: Self) -> Self {
                self - b
            }
            #[inline(always)]
            fn mul(self, b: Self) -> Self {
                self * b
            }
            #[inline(always)]
            fn div(self, b: Self) -> Self {
                self / b
            }
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            fn finite(self) -> bool {
                self.is_finite()
            }
            fn negate(self) -> Self {
                -self
            }
            const CANON_NAN: Self = <$t>::from_bits($nan);
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
        }
    };
}
impl_float!(f32, u32, 0x7FFF_FFFF);
impl_float!(f64, u64, 0x7FFF_FFFF_FFFF_FFFF);

/// Rounding modes as const-generic numbers.
pub const RN: u8 = 0;
/// Toward zero.
pub const RZ: u8 = 1;
/// Toward -inf.
pub const RM: u8 = 2;
/// Toward +inf.
pub const RP: u8 = 3;

/// Corrects the nearest result `r` to mode `R`, given the sign of `exact - r` (`err`).
#[inline(always)]
fn direct<F: Float, const R: u8>(r: F, err_pos: bool, err_neg: bool) -> F {
    if R == RN {
        return r;
    }
    match R {
        RM if err_neg => r.down(),
        RP if err_pos => r.up(),
        RZ if (err_neg && !r.neg()) => r.down(),
        RZ if (err_pos && r.neg()) => r.up(),
        _ => r,
    }
}

#[inline(always)]
fn err_sign<F: Float>(e: F) -> (bool, bool) {
    (!e.nan() && e > F::ZERO, !e.nan() && e < F::ZERO)
}

#[inline(always)]
fn pre<F: Float, const FTZ: bool>(v: u64) -> F {
    let x = F::from_bits(v);
    if FTZ { x.ftz() } else { x }
}

#[inline(always)]
fn post<F: Float, const FTZ: bool, const SAT: bool>(r: F) -> u64 {
    let r = if FTZ { r.ftz() } else { r };
    let r = if SAT {
        if r.nan() || r < F::ZERO {
            F::ZERO
        } else if r > F::ONE {
            F::ONE
        } else {
            r
        }
    } else {
        r
    };
    r.to_bits()
}

/// `add{.rnd}{.ftz}{.sat}` for floats.
#[inline(never)]
pub fn fadd<F: Float, const R: u8, const FTZ: bool, const SAT: bool>(a: u64, b: u64) -> u64 {
    let (a, b) = (pre::<F, FTZ>(a), pre::<F, FTZ>(b));
    let s = a.add(b);
    let s = if R != RN && s.finite() {
        let bb = s.sub(a);
        let e = a.sub(s.sub(bb)).add(b.sub(bb));
        let (p, n) = err_sign(e);
        direct::<F, R>(s, p, n)
    } else {
        s
    };
    post::<F, FTZ, SAT>(s)
}

/// `sub` for floats.
#[inline(never)]
pub fn fsub<F: Float, const R: u8, const FTZ: bool, const SAT: bool>(a: u64, b: u64) -> u64 {
    fadd::<F, R, FTZ, SAT>(a, F::from_bits(b).negate().to_bits())
}

/// `mul` for floats.
#[inline(never)]
pub fn fmul<F: Float, const R: u8, const FTZ: bool, const SAT: bool>(a: u64, b: u64) -> u64 {
    let (a, b) = (pre::<F, FTZ>(a), pre::<F, FTZ>(b));
    let p = a.mul(b);
    let p = if R != RN && p.finite() {
        let (ep, en) = err_sign(a.fma(b, p.negate()));
        direct::<F, R>(p, ep, en)
    } else {
        p
    };
    post::<F, FTZ, SAT>(p)
}

/// `div` for floats (`.rn` exact; `.approx`/`.full` use the same IEEE quotient).
#[inline(never)]
pub fn fdiv<F: Float, const R: u8, const FTZ: bool>(a: u64, b: u64) -> u64 {
    let (a, b) = (pre::<F, FTZ>(a), pre::<F, FTZ>(b));
    let q = a.div(b);
    let q = if R != RN && q.finite() && !q.zero() {
        // exact - q = r / b with r = a - q*b computed exactly by fma.
        let r = q.negate().fma(b, a);
        let (rp, rn) = err_sign(r);
        let bneg = b.neg();
        direct::<F, R>(q, rp != bneg && (rp || rn), rn != bneg && (rp || rn))
    } else {
        q
    };
    post::<F, FTZ, false>(q)
}

/// `fma{.rnd}` / `mad{.rnd}` for floats (directed modes are exact only for `.rn`; others round
/// the fused result to nearest and correct with the residue of the product, which is exact
/// unless the addend cancels it).
#[inline(never)]
pub fn ffma<F: Float, const R: u8, const FTZ: bool, const SAT: bool>(
    a: u64,
    b: u64,
    c: u64,
) -> u64 {
    let (a, b, c) = (pre::<F, FTZ>(a), pre::<F, FTZ>(b), pre::<F, FTZ>(c));
    let r = a.fma(b, c);
    let r = if R != RN && r.finite() {
        // exact - r = (a*b - (r - c)); estimate its sign with one more fma.
        let e = a.fma(b, c.sub(r));
        let (p, n) = err_sign(e);
        direct::<F, R>(r, p, n)
    } else {
        r
    };
    post::<F, FTZ, SAT>(r)
}

/// `sqrt{.rnd}` / `sqrt.approx`.
pub fn fsqrt<F: Float, const R: u8, const FTZ: bool>(a: u64) -> u64 {
    let a = pre::<F, FTZ>(a);
    let r = a.sqrt();
    let r = if R != RN && r.finite() && !r.zero() {
        let (p, n) = err_sign(r.negate().fma(r, a));
        direct::<F, R>(r, p, n)
    } else {
        r
    };
    post::<F, FTZ, false>(r)
}

/// `rcp{.rnd}` / `rcp.approx`.
pub fn frcp<F: Float, const R: u8, const FTZ: bool>(a: u64) -> u64 {
    fdiv::<F, R, FTZ>(F::ONE.to_bits(), a)
}

/// `.approx` unary functions through f64 std functions.
pub fn fapprox<F: Float, const K: u8, const FTZ: bool>(a: u64) -> u64 {
    let x = pre::<F, FTZ>(a).to_f64();
    let r = match K {
        0 => 1.0 / x.sqrt(),
        1 => x.sin(),
        2 => x.cos(),
        3 => x.exp2(),
        4 => x.log2(),
        5 => x.tanh(),
        _ => 1.0 / x,
    };
    post::<F, FTZ, false>(F::from_f64(r))
}

/// Unary float ops: 0 neg, 1 abs.
pub fn funary<F: Float, const K: u8, const FTZ: bool>(a: u64) -> u64 {
    let x = pre::<F, FTZ>(a);
    let r = match K {
        0 => x.negate(),
        _ => {
            if x.neg() {
                x.negate()
            } else {
                x
            }
        }
    };
    post::<F, FTZ, false>(r)
}

/// `min` (MAX = false) / `max` (MAX = true) for floats: a NaN operand yields the other.
pub fn fminmax<F: Float, const MAX: bool, const FTZ: bool>(a: u64, b: u64) -> u64 {
    let (x, y) = (pre::<F, FTZ>(a), pre::<F, FTZ>(b));
    let r = if x.nan() && y.nan() {
        F::CANON_NAN
    } else if x.nan() {
        y
    } else if y.nan() {
        x
    } else if x.zero() && y.zero() {
        // -0 < +0 for min/max.
        if MAX != x.neg() { x } else { y }
    } else if (x > y) == MAX {
        x
    } else {
        y
    };
    post::<F, FTZ, false>(r)
}

/// `min.NaN` / `max.NaN` (`MAX`): the canonical NaN if either operand is NaN, else as
/// [`fminmax`].
pub fn fminmax_nan<F: Float, const MAX: bool, const FTZ: bool>(a: u64, b: u64) -> u64 {
    if F::from_bits(a).nan() || F::from_bits(b).nan() {
        return F::CANON_NAN.to_bits();
    }
    fminmax::<F, MAX, FTZ>(a, b)
}

/// `copysign d, a, b`: `b`'s magnitude with `a`'s sign.
pub fn fcopysign<F: Float>(a: u64, b: u64) -> u64 {
    let (x, y) = (F::from_bits(a), F::from_bits(b));
    let mag = if y.neg() { y.negate() } else { y };
    if x.neg() { mag.negate() } else { mag }.to_bits()
}

/// `testp.op`: 0 finite, 1 infinite, 2 number, 3 notanumber, 4 normal, 5 subnormal.
pub fn ftestp<F: Float, const K: u8>(a: u64) -> u64 {
    let x = F::from_bits(a);
    let normal = x.finite() && !x.zero() && x.ftz().to_bits() == x.to_bits();
    (match K {
        0 => x.finite(),
        1 => !x.finite() && !x.nan(),
        2 => !x.nan(),
        3 => x.nan(),
        4 => normal,
        _ => x.finite() && !x.zero() && !normal,
    }) as u64
}

// ---- integers ----
//
// The lane functions the PTX JIT recognises by address (`jit/native.rs`) are
// `#[inline(never)]`: small functions may otherwise get a local copy per codegen unit, and the
// address the decoder stored would then not be the one the JIT's table holds.

/// Binary integer ops on the type's bits. `K`: 0 add, 1 sub, 2 mul.lo, 3 mul.hi, 4 div,
/// 5 rem, 6 min, 7 max, 8 and, 9 or, 10 xor, 11 add.sat, 12 sub.sat, 13 mul24.lo,
/// 14 mul24.hi.
#[inline(never)]
pub fn ibin<I: Int, const K: u8>(a: u64, b: u64) -> u64 {
    let (x, y) = (I::from_bits(a).wide(), I::from_bits(b).wide());
    let r: i128 = match K {
        0 => x + y,
        1 => x - y,
        2 => x.wrapping_mul(y),
        3 if I::BITS == 64 && !I::SIGNED => ((x as u128 * y as u128) >> 64) as i128,
        3 => (x * y) >> I::BITS,
        4 => {
            if y == 0 {
                -1 // all ones, as GPUs produce
            } else {
                x / y
            }
        }
        5 => {
            if y == 0 {
                x
            } else {
                x % y
            }
        }
        6 => x.min(y),
        7 => x.max(y),
        8 => x & y,
        9 => x | y,
        10 => x ^ y,
        11 => (x + y).clamp(I::min_wide(), I::max_wide()),
        12 => (x - y).clamp(I::min_wide(), I::max_wide()),
        13 | 14 => {
            let m = |v: i128| {
                let v = v & 0xFF_FFFF;
                if I::SIGNED && v & 0x80_0000 != 0 {
                    v - 0x100_0000
                } else {
                    v
                }
            };
            let p = m(x) * m(y);
            if K == 13 { p } else { p >> 16 }
        }
        _ => 0,
    };
    I::from_wide(r).to_bits()
}

/// `mul.wide`: half-width operands, full-width result (`W` is the wide type).
#[inline(never)]
pub fn imul_wide<I: Int, W: Int>(a: u64, b: u64) -> u64 {
    W::from_wide(I::from_bits(a).wide() * I::from_bits(b).wide()).to_bits()
}

/// `mad.lo/hi` (K 0/1), `mad24.lo/hi` (2/3), `mad.hi.sat.s32` not supported.
#[inline(never)]
pub fn imad<I: Int, const K: u8>(a: u64, b: u64, c: u64) -> u64 {
    let p = match K {
        0 => ibin::<I, 2>(a, b),
        1 => ibin::<I, 3>(a, b),
        2 => ibin::<I, 13>(a, b),
        _ => ibin::<I, 14>(a, b),
    };
    ibin::<I, 0>(p, c)
}

/// `mad.wide`.
#[inline(never)]
pub fn imad_wide<I: Int, W: Int>(a: u64, b: u64, c: u64) -> u64 {
    let p = I::from_bits(a).wide() * I::from_bits(b).wide();
    W::from_wide(p + W::from_bits(c).wide()).to_bits()
}

/// Shifts (`LEFT`): the amount is an unsigned 32-bit value clamped to the width.
#[inline(never)]
pub fn ishift<I: Int, const LEFT: bool>(a: u64, b: u64) -> u64 {
    let n = (b as u32).min(I::BITS) as i128;
    let x = I::from_bits(a).wide();
    let r = if LEFT {
        if n >= I::BITS as i128 { 0 } else { x << n }
    } else if n >= I::BITS as i128 {
        if x < 0 { -1 } else { 0 }
    } else {
        x >> n
    };
    I::from_wide(r).to_bits()
}

/// Unary integer ops: 0 neg, 1 abs, 2 not, 3 cnot, 4 popc, 5 clz, 6 brev, 7 bfind,
/// 8 bfind.shiftamt.
pub fn iunary<I: Int, const K: u8>(a: u64) -> u64 {
    let x = I::from_bits(a);
    let bits = x.wide() as u128 & ((1u128 << I::BITS) - 1);
    match K {
        0 => I::from_wide(-x.wide()).to_bits(),
        1 => I::from_wide(x.wide().abs()).to_bits(),
        2 => I::from_wide(!x.wide()).to_bits(),
        3 => (x.wide() == 0) as u64,
        4 => bits.count_ones() as u64,
        5 => (bits.leading_zeros() - (128 - I::BITS)) as u64,
        6 => I::from_wide((bits.reverse_bits() >> (128 - I::BITS)) as i128).to_bits(),
        _ => {
            // Most significant non-sign bit.
            let v = if I::SIGNED && x.wide() < 0 {
                !bits & ((1u128 << I::BITS) - 1)
            } else {
                bits
            };
            if v == 0 {
                u32::MAX as u64
            } else {
                let msb = 127 - v.leading_zeros();
                (if K == 8 { I::BITS - 1 - msb } else { msb }) as u64
            }
        }
    }
}

/// `bfe`: extract `c` bits from position `b`, sign-extended for signed types.
pub fn bfe<I: Int>(a: u64, b: u64, c: u64) -> u64 {
    let w = I::BITS;
    let x = I::from_bits(a).wide() as u128 & ((1u128 << w) - 1);
    let pos = (b as u8) as u32;
    let len = (c as u8) as u32;
    let msb_set = if I::SIGNED {
        let sb = if len == 0 {
            0
        } else {
            (pos + len - 1).min(w - 1)
        };
        (x >> sb) & 1 == 1
    } else {
        false
    };
    let mut r: u128 = 0;
    for i in 0..w {
        let bit = if i < len && pos + i < w {
            (x >> (pos + i)) & 1
        } else if i < len && pos + i >= w {
            // Beyond the source: the sign bit (signed) or 0.
            if I::SIGNED { (x >> (w - 1)) & 1 } else { 0 }
        } else {
            msb_set as u128
        };
        r |= bit << i;
    }
    if len == 0 {
        r = 0;
    }
    I::from_wide(r as i128).to_bits()
}

/// `bfi`: insert the low `e` bits of `a` into `b` at position `c`.
pub fn bfi(wide: bool, a: u64, b: u64, c: u64, e: u64) -> u64 {
    let w = if wide { 64 } else { 32 };
    let pos = (c as u8) as u32;
    let len = (e as u8) as u32;
    let mut r = if wide { b } else { b as u32 as u64 };
    for i in 0..len {
        if pos + i >= w {
            break;
        }
        let bit = (a >> i) & 1;
        r = (r & !(1u64 << (pos + i))) | (bit << (pos + i));
    }
    r
}

/// `prmt.b32` default mode.
pub fn prmt(a: u64, b: u64, c: u64) -> u64 {
    let bytes = ((b as u32 as u64) << 32) | (a as u32 as u64);
    let mut r = 0u32;
    for i in 0..4 {
        let sel = ((c as u32) >> (4 * i)) & 0xF;
        let byte = ((bytes >> (8 * (sel & 7))) & 0xFF) as u32;
        let byte = if sel & 8 != 0 {
            if byte & 0x80 != 0 { 0xFF } else { 0 }
        } else {
            byte
        };
        r |= byte << (8 * i);
    }
    r as u64
}

/// `selp`: `c ? a : b`.
#[inline(never)]
pub fn selp(a: u64, b: u64, c: u64) -> u64 {
    if c != 0 { a } else { b }
}

/// `mov`.
#[inline(never)]
pub fn mov(a: u64) -> u64 {
    a
}

/// Boolean ops on predicates: 0 and, 1 or, 2 xor, 3 not.
#[inline(never)]
pub fn pbin<const K: u8>(a: u64, b: u64) -> u64 {
    let (x, y) = (a != 0, b != 0);
    (match K {
        0 => x && y,
        1 => x || y,
        2 => x != y,
        _ => !x,
    }) as u64
}

// ---- comparisons ----

/// Integer comparison `C` (a [`Cmp`](super::ir::Cmp) as u8).
#[inline(never)]
pub fn icmp<I: Int, const C: u8>(a: u64, b: u64) -> u64 {
    let (x, y) = (I::from_bits(a).wide(), I::from_bits(b).wide());
    (match C {
        0 => x == y,
        1 => x != y,
        2 => x < y,
        3 => x <= y,
        4 => x > y,
        _ => x >= y,
    }) as u64
}

/// Float comparison `C`.
#[inline(never)]
pub fn fcmp<F: Float, const C: u8, const FTZ: bool>(a: u64, b: u64) -> u64 {
    let (x, y) = (pre::<F, FTZ>(a), pre::<F, FTZ>(b));
    let un = x.nan() || y.nan();
    (match C {
        0 => !un && x == y,
        1 => !un && x != y,
        2 => !un && x < y,
        3 => !un && x <= y,
        4 => !un && x > y,
        5 => !un && x >= y,
        6 => un || x == y,
        7 => un || x != y,
        8 => un || x < y,
        9 => un || x <= y,
        10 => un || x > y,
        11 => un || x >= y,
        12 => !un,
        _ => un,
    }) as u64
}

// ---- conversions ----

/// Integer → integer, with `.sat` clamping to the destination range.
#[inline(never)]
pub fn cvt_ii<S: Int, D: Int, const SAT: bool>(a: u64) -> u64 {
    let v = S::from_bits(a).wide();
    let v = if SAT {
        v.clamp(D::min_wide(), D::max_wide())
    } else {
        v
    };
    D::from_wide(v).to_bits()
}

/// Integer rounding of a float: 0 none, 1 rni, 2 rzi, 3 rmi, 4 rpi.
#[inline(always)]
fn round_int(x: f64, k: u8) -> f64 {
    match k {
        1 => x.round_ties_even(),
        3 => x.floor(),
        4 => x.ceil(),
        _ => x.trunc(),
    }
}

/// Float → integer: round by `IR`, then saturate (NaN → 0), as PTX does.
pub fn cvt_fi<S: Float, D: Int, const IR: u8, const FTZ: bool>(a: u64) -> u64 {
    let x = pre::<S, FTZ>(a).to_f64();
    if x.is_nan() {
        return 0;
    }
    let r = round_int(x, IR);
    let v = if r <= D::min_wide() as f64 {
        D::min_wide()
    } else if r >= D::max_wide() as f64 {
        D::max_wide()
    } else {
        r as i128
    };
    D::from_wide(v).to_bits()
}

/// Integer → float with rounding `R` (exact for every mode).
pub fn cvt_if<S: Int, D: Float, const R: u8, const SAT: bool>(a: u64) -> u64 {
    let v = S::from_bits(a).wide();
    let r = D::from_i128(v);
    let r = if R != RN {
        // The nearest float of an integer is an integer of magnitude <= 2^64: exact in i128.
        let back = r.to_f64() as i128;
        direct::<D, R>(r, back < v, back > v)
    } else {
        r
    };
    post::<D, false, SAT>(r)
}

/// Float → float: width change with rounding `R`, or same width with integer rounding `IR`.
pub fn cvt_ff<S: Float, D: Float, const R: u8, const IR: u8, const FTZ: bool, const SAT: bool>(
    a: u64,
) -> u64 {
    let x = pre::<S, FTZ>(a);
    let r = if IR != 0 {
        D::from_f64(round_int(x.to_f64(), IR))
    } else {
        let xf = x.to_f64();
        let r = D::from_f64(xf);
        if R != RN && !x.nan() {
            let back = r.to_f64();
            direct::<D, R>(r, back < xf, back > xf)
        } else {
            r
        }
    };
    let r = if r.nan() { D::CANON_NAN } else { r };
    post::<D, FTZ, SAT>(r)
}

pub mod half;

#[cfg(test)]
mod tests;
