//! Native code for the lane functions the decoder picks most often.
//!
//! The decoded IR names an operation by the Rust function that computes it (`alu::ibin::<u32,
//! 0>` is `add.u32`). The compiler recognises the common ones by address and emits the same
//! computation as Cranelift instructions; anything else is called. An address can only match
//! the function it was taken from or code identical to it (merged functions), so a match
//! never changes a result; a miss only costs a call.

use std::collections::HashMap;
use std::sync::OnceLock;

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Value, types};
use cranelift_frontend::FunctionBuilder;

use crate::alu::*;
use crate::ir::{Fn1, Fn2, Fn3};

const I64: types::Type = types::I64;

/// A recognised lane function.
#[derive(Clone, Copy, Debug)]
pub(crate) enum N {
    /// `ibin` K = add, sub, mul.lo, min, max, and, or, xor.
    Bin { k: u8, bits: u8, signed: bool },
    /// `icmp` with the `Cmp` number `c`.
    Cmp { c: u8, bits: u8, signed: bool },
    /// `imad` lo.
    MadLo { bits: u8, signed: bool },
    /// `imul_wide` from `bits`.
    MulWide { bits: u8, signed: bool },
    /// `imad_wide` from `bits`.
    MadWide { bits: u8, signed: bool },
    /// `ishift`.
    Shift { left: bool, bits: u8, signed: bool },
    /// `cvt` between integers without `.sat`.
    CvtII {
        sbits: u8,
        ssigned: bool,
        dbits: u8,
        dsigned: bool,
    },
    /// `fadd`/`fsub`/`fmul`/`fdiv` (0..4) rounded to nearest, no `.ftz`/`.sat`.
    FArith { op: u8, f64: bool },
    /// `fma.rn` without `.ftz`/`.sat`.
    Fma { f64: bool },
    /// `fcmp` without `.ftz`.
    FCmp { c: u8, f64: bool },
    /// `selp`.
    Selp,
    /// `mov`.
    Mov,
    /// Predicate and/or/xor.
    PBin { k: u8 },
    /// `sqrt.rn` without `.ftz`.
    Sqrt { f64: bool },
    /// `rcp.rn` without `.ftz` (`1 / x`, IEEE).
    Rcp { f64: bool },
    /// `cvt.rn` from a 32-bit integer to a float, without `.sat`.
    CvtIF { signed: bool, f64: bool },
}

fn int_entries<I: Int>(t: &mut HashMap<usize, N>) {
    let (bits, signed) = (I::BITS as u8, I::SIGNED);
    let bins: [(Fn2, u8); 8] = [
        (ibin::<I, 0>, 0),
        (ibin::<I, 1>, 1),
        (ibin::<I, 2>, 2),
        (ibin::<I, 6>, 6),
        (ibin::<I, 7>, 7),
        (ibin::<I, 8>, 8),
        (ibin::<I, 9>, 9),
        (ibin::<I, 10>, 10),
    ];
    for (f, k) in bins {
        t.insert(f as usize, N::Bin { k, bits, signed });
    }
    let cmps: [Fn2; 6] = [
        icmp::<I, 0>,
        icmp::<I, 1>,
        icmp::<I, 2>,
        icmp::<I, 3>,
        icmp::<I, 4>,
        icmp::<I, 5>,
    ];
    for (c, f) in cmps.into_iter().enumerate() {
        t.insert(
            f as usize,
            N::Cmp {
                c: c as u8,
                bits,
                signed,
            },
        );
    }
    t.insert(imad::<I, 0> as Fn3 as usize, N::MadLo { bits, signed });
    t.insert(
        ishift::<I, true> as Fn2 as usize,
        N::Shift {
            left: true,
            bits,
            signed,
        },
    );
    t.insert(
        ishift::<I, false> as Fn2 as usize,
        N::Shift {
            left: false,
            bits,
            signed,
        },
    );
}

fn cvt_entries<S: Int>(t: &mut HashMap<usize, N>) {
    fn one<D: Int, S: Int>(t: &mut HashMap<usize, N>) {
        t.insert(
            cvt_ii::<S, D, false> as Fn1 as usize,
            N::CvtII {
                sbits: S::BITS as u8,
                ssigned: S::SIGNED,
                dbits: D::BITS as u8,
                dsigned: D::SIGNED,
            },
        );
        t.insert(
            crate::decode::cvt_ii_to::<D, S, false> as Fn1 as usize,
            N::CvtII {
                sbits: S::BITS as u8,
                ssigned: S::SIGNED,
                dbits: D::BITS as u8,
                dsigned: D::SIGNED,
            },
        );
    }
    one::<u8, S>(t);
    one::<u16, S>(t);
    one::<u32, S>(t);
    one::<u64, S>(t);
    one::<i8, S>(t);
    one::<i16, S>(t);
    one::<i32, S>(t);
    one::<i64, S>(t);
}

fn float_entries<F: Float>(t: &mut HashMap<usize, N>, f64: bool) {
    let ar: [Fn2; 4] = [
        fadd::<F, 0, false, false>,
        fsub::<F, 0, false, false>,
        fmul::<F, 0, false, false>,
        fdiv::<F, 0, false>,
    ];
    for (op, f) in ar.into_iter().enumerate() {
        t.insert(f as usize, N::FArith { op: op as u8, f64 });
    }
    t.insert(ffma::<F, 0, false, false> as Fn3 as usize, N::Fma { f64 });
    t.insert(fsqrt::<F, 0, false> as Fn1 as usize, N::Sqrt { f64 });
    t.insert(frcp::<F, 0, false> as Fn1 as usize, N::Rcp { f64 });
    let cvts: [(Fn1, Fn1, bool); 2] = [
        (
            cvt_if::<u32, F, 0, false>,
            crate::decode::cvt_if_to::<F, u32, 0, false>,
            false,
        ),
        (
            cvt_if::<i32, F, 0, false>,
            crate::decode::cvt_if_to::<F, i32, 0, false>,
            true,
        ),
    ];
    for (a, b, signed) in cvts {
        t.insert(a as usize, N::CvtIF { signed, f64 });
        t.insert(b as usize, N::CvtIF { signed, f64 });
    }
    let cmps: [Fn2; 14] = [
        fcmp::<F, 0, false>,
        fcmp::<F, 1, false>,
        fcmp::<F, 2, false>,
        fcmp::<F, 3, false>,
        fcmp::<F, 4, false>,
        fcmp::<F, 5, false>,
        fcmp::<F, 6, false>,
        fcmp::<F, 7, false>,
        fcmp::<F, 8, false>,
        fcmp::<F, 9, false>,
        fcmp::<F, 10, false>,
        fcmp::<F, 11, false>,
        fcmp::<F, 12, false>,
        fcmp::<F, 13, false>,
    ];
    for (c, f) in cmps.into_iter().enumerate() {
        t.insert(f as usize, N::FCmp { c: c as u8, f64 });
    }
}

fn table() -> &'static HashMap<usize, N> {
    static T: OnceLock<HashMap<usize, N>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = HashMap::new();
        int_entries::<u8>(&mut t);
        int_entries::<u16>(&mut t);
        int_entries::<u32>(&mut t);
        int_entries::<u64>(&mut t);
        int_entries::<i8>(&mut t);
        int_entries::<i16>(&mut t);
        int_entries::<i32>(&mut t);
        int_entries::<i64>(&mut t);
        cvt_entries::<u8>(&mut t);
        cvt_entries::<u16>(&mut t);
        cvt_entries::<u32>(&mut t);
        cvt_entries::<u64>(&mut t);
        cvt_entries::<i8>(&mut t);
        cvt_entries::<i16>(&mut t);
        cvt_entries::<i32>(&mut t);
        cvt_entries::<i64>(&mut t);
        let wides: [(Fn2, Fn3, u8, bool); 4] = [
            (imul_wide::<u16, u32>, imad_wide::<u16, u32>, 16, false),
            (imul_wide::<u32, u64>, imad_wide::<u32, u64>, 32, false),
            (imul_wide::<i16, i32>, imad_wide::<i16, i32>, 16, true),
            (imul_wide::<i32, i64>, imad_wide::<i32, i64>, 32, true),
        ];
        for (m, a, bits, signed) in wides {
            t.insert(m as usize, N::MulWide { bits, signed });
            t.insert(a as usize, N::MadWide { bits, signed });
        }
        float_entries::<f32>(&mut t, false);
        float_entries::<f64>(&mut t, true);
        t.insert(selp as Fn3 as usize, N::Selp);
        t.insert(mov as Fn1 as usize, N::Mov);
        t.insert(pbin::<0> as Fn2 as usize, N::PBin { k: 0 });
        t.insert(pbin::<1> as Fn2 as usize, N::PBin { k: 1 });
        t.insert(pbin::<2> as Fn2 as usize, N::PBin { k: 2 });
        t
    })
}

/// What `f` computes, when it is one of the recognised lane functions.
pub(crate) fn kind(f: usize) -> Option<N> {
    table().get(&f).copied()
}

/// Whether `f` has native code (for the compile statistics).
pub(crate) fn known(f: usize) -> bool {
    table().contains_key(&f)
}

/// `v`'s low `bits` as a register slot of that signedness (sign- or zero-extended).
fn norm(b: &mut FunctionBuilder<'_>, v: Value, bits: u8, signed: bool) -> Value {
    if bits >= 64 {
        return v;
    }
    if signed {
        let s = b.ins().ishl_imm_s(v, 64 - bits as i64);
        b.ins().sshr_imm_s(s, 64 - bits as i64)
    } else {
        b.ins().band_imm_s(v, ((1u64 << bits) - 1) as i64)
    }
}

fn float_in(b: &mut FunctionBuilder<'_>, v: Value, f64: bool) -> Value {
    if f64 {
        b.ins().bitcast(types::F64, MemFlagsData::new(), v)
    } else {
        let x = b.ins().ireduce(types::I32, v);
        b.ins().bitcast(types::F32, MemFlagsData::new(), x)
    }
}

fn float_out(b: &mut FunctionBuilder<'_>, v: Value, f64: bool) -> Value {
    if f64 {
        b.ins().bitcast(I64, MemFlagsData::new(), v)
    } else {
        let x = b.ins().bitcast(types::I32, MemFlagsData::new(), v);
        b.ins().uextend(I64, x)
    }
}

fn flag(b: &mut FunctionBuilder<'_>, c: Value) -> Value {
    b.ins().uextend(I64, c)
}

/// Native code for `f(args)`, or `None` when `f` is not recognised.
pub(crate) fn emit(b: &mut FunctionBuilder<'_>, f: usize, args: &[Value]) -> Option<Value> {
    let n = *table().get(&f)?;
    let a = args[0];
    Some(match n {
        N::Mov => a,
        N::Bin { k, bits, signed } => {
            let y = args[1];
            if k == 6 || k == 7 {
                let (x, y) = (norm(b, a, bits, signed), norm(b, y, bits, signed));
                return Some(match (k, signed) {
                    (6, true) => b.ins().smin(x, y),
                    (6, false) => b.ins().umin(x, y),
                    (_, true) => b.ins().smax(x, y),
                    _ => b.ins().umax(x, y),
                });
            }
            // The low `bits` of these depend only on the operands' low bits.
            let r = match k {
                0 => b.ins().iadd(a, y),
                1 => b.ins().isub(a, y),
                2 => b.ins().imul(a, y),
                8 => b.ins().band(a, y),
                9 => b.ins().bor(a, y),
                _ => b.ins().bxor(a, y),
            };
            norm(b, r, bits, signed)
        }
        N::Cmp { c, bits, signed } => {
            let (x, y) = (norm(b, a, bits, signed), norm(b, args[1], bits, signed));
            let r = b.ins().icmp(int_cc(c, signed), x, y);
            flag(b, r)
        }
        N::MadLo { bits, signed } => {
            let p = b.ins().imul(a, args[1]);
            let r = b.ins().iadd(p, args[2]);
            norm(b, r, bits, signed)
        }
        N::MulWide { bits, signed } => {
            let (x, y) = (norm(b, a, bits, signed), norm(b, args[1], bits, signed));
            let r = b.ins().imul(x, y);
            norm(b, r, bits * 2, signed)
        }
        N::MadWide { bits, signed } => {
            let (x, y) = (norm(b, a, bits, signed), norm(b, args[1], bits, signed));
            let p = b.ins().imul(x, y);
            let r = b.ins().iadd(p, args[2]);
            norm(b, r, bits * 2, signed)
        }
        N::Shift { left, bits, signed } => {
            let amt = b.ins().band_imm_s(args[1], 0xFFFF_FFFF);
            let big = b
                .ins()
                .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, amt, bits as i64);
            let x = norm(b, a, bits, signed);
            if left {
                let s = b.ins().ishl(x, amt);
                let s = norm(b, s, bits, signed);
                let zero = b.ins().iconst(I64, 0);
                b.ins().select(big, zero, s)
            } else if signed {
                let s = b.ins().sshr(x, amt);
                let fill = b.ins().sshr_imm_s(x, 63);
                b.ins().select(big, fill, s)
            } else {
                let s = b.ins().ushr(x, amt);
                let zero = b.ins().iconst(I64, 0);
                b.ins().select(big, zero, s)
            }
        }
        N::CvtII {
            sbits,
            ssigned,
            dbits,
            dsigned,
        } => {
            let x = norm(b, a, sbits, ssigned);
            norm(b, x, dbits, dsigned)
        }
        N::FArith { op, f64 } => {
            let (x, y) = (float_in(b, a, f64), float_in(b, args[1], f64));
            let r = farith(b, op, x, y);
            float_out(b, r, f64)
        }
        N::Fma { f64 } => {
            let x = float_in(b, a, f64);
            let y = float_in(b, args[1], f64);
            let z = float_in(b, args[2], f64);
            let r = b.ins().fma(x, y, z);
            float_out(b, r, f64)
        }
        N::FCmp { c, f64 } => {
            let (x, y) = (float_in(b, a, f64), float_in(b, args[1], f64));
            let r = b.ins().fcmp(float_cc(c), x, y);
            flag(b, r)
        }
        N::Sqrt { f64 } => {
            let x = float_in(b, a, f64);
            let r = b.ins().sqrt(x);
            float_out(b, r, f64)
        }
        N::Rcp { f64 } => {
            let x = float_in(b, a, f64);
            let one = if f64 {
                b.ins().f64const(1.0)
            } else {
                b.ins().f32const(1.0)
            };
            let r = b.ins().fdiv(one, x);
            float_out(b, r, f64)
        }
        N::CvtIF { signed, f64 } => {
            let x = b.ins().ireduce(types::I32, a);
            let ty = if f64 { types::F64 } else { types::F32 };
            let r = if signed {
                b.ins().fcvt_from_sint(ty, x)
            } else {
                b.ins().fcvt_from_uint(ty, x)
            };
            float_out(b, r, f64)
        }
        N::Selp => {
            let c = b.ins().icmp_imm_s(IntCC::NotEqual, args[2], 0);
            b.ins().select(c, a, args[1])
        }
        N::PBin { k } => {
            let x = b.ins().icmp_imm_s(IntCC::NotEqual, a, 0);
            let y = b.ins().icmp_imm_s(IntCC::NotEqual, args[1], 0);
            let r = match k {
                0 => b.ins().band(x, y),
                1 => b.ins().bor(x, y),
                _ => b.ins().bxor(x, y),
            };
            flag(b, r)
        }
    })
}

/// `add`/`sub`/`mul`/`div` (0..4) rounded to nearest on floats or float vectors. `fsub` is
/// `a + (-b)`, which differs from `a - b` only in NaN payloads.
pub(crate) fn farith(b: &mut FunctionBuilder<'_>, op: u8, x: Value, y: Value) -> Value {
    match op {
        0 => b.ins().fadd(x, y),
        1 => {
            let ny = b.ins().fneg(y);
            b.ins().fadd(x, ny)
        }
        2 => b.ins().fmul(x, y),
        _ => b.ins().fdiv(x, y),
    }
}

/// The integer comparison of the engine's `Cmp` number `c`.
pub(crate) fn int_cc(c: u8, signed: bool) -> IntCC {
    match (c, signed) {
        (0, _) => IntCC::Equal,
        (1, _) => IntCC::NotEqual,
        (2, true) => IntCC::SignedLessThan,
        (3, true) => IntCC::SignedLessThanOrEqual,
        (4, true) => IntCC::SignedGreaterThan,
        (_, true) => IntCC::SignedGreaterThanOrEqual,
        (2, false) => IntCC::UnsignedLessThan,
        (3, false) => IntCC::UnsignedLessThanOrEqual,
        (4, false) => IntCC::UnsignedGreaterThan,
        _ => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// `lop3.b32`: the lookup table applied bit by bit, as a sum of the minterms it selects.
pub(crate) fn lop3(b: &mut FunctionBuilder<'_>, lut: u8, a: Value, x: Value, c: Value) -> Value {
    let zero = b.ins().iconst(I64, 0);
    let acc = minterms(b, lut, a, x, c, zero);
    b.ins().band_imm_s(acc, 0xFFFF_FFFF)
}

/// The minterms `lut` selects of `a`, `x`, `c`, summed onto `zero` (a scalar or vector zero:
/// the same bit logic serves both).
pub(crate) fn minterms(
    b: &mut FunctionBuilder<'_>,
    lut: u8,
    a: Value,
    x: Value,
    c: Value,
    zero: Value,
) -> Value {
    let (na, nx, nc) = (b.ins().bnot(a), b.ins().bnot(x), b.ins().bnot(c));
    let mut acc = zero;
    for idx in 0..8u8 {
        if lut >> idx & 1 == 0 {
            continue;
        }
        let p = if idx & 4 != 0 { a } else { na };
        let q = if idx & 2 != 0 { x } else { nx };
        let r = if idx & 1 != 0 { c } else { nc };
        let t = b.ins().band(p, q);
        let t = b.ins().band(t, r);
        acc = b.ins().bor(acc, t);
    }
    acc
}

/// Float comparisons Cranelift has, by the engine's `Cmp` number.
fn float_cc(c: u8) -> FloatCC {
    match c {
        0 => FloatCC::Equal,
        1 => FloatCC::OrderedNotEqual,
        2 => FloatCC::LessThan,
        3 => FloatCC::LessThanOrEqual,
        4 => FloatCC::GreaterThan,
        5 => FloatCC::GreaterThanOrEqual,
        6 => FloatCC::UnorderedOrEqual,
        7 => FloatCC::NotEqual,
        8 => FloatCC::UnorderedOrLessThan,
        9 => FloatCC::UnorderedOrLessThanOrEqual,
        10 => FloatCC::UnorderedOrGreaterThan,
        11 => FloatCC::UnorderedOrGreaterThanOrEqual,
        12 => FloatCC::Ordered,
        _ => FloatCC::Unordered,
    }
}
