//! Half precision: `.f16` / `.bf16` arithmetic, `setp` and `cvt`, and the packed `.f16x2` /
//! `.bf16x2` forms, against a reference that computes exactly.
//!
//! The reference knows the two formats only by their definitions (PTX ISA 5.2.5.1: f16 is
//! IEEE 754 binary16, bf16 is the upper 16 bits of an f32); it decodes a half into an exact
//! dyadic rational `m * 2^e`, forms the exact sum or product (or fused `a * b + c`) as a
//! list of such terms, and rounds by a binary search over the format's finite values,
//! comparing exactly with big-integer arithmetic. So it shares no code or method with the
//! engine (which rounds from `f64` with a round-to-odd step).
//!
//! PTX ISA 9.7.4 (half precision instructions): `add`, `sub`, `mul`, `fma` round to nearest
//! even once from the exact result; `.ftz` flushes subnormal inputs and results to zeros of
//! their sign; `.sat` clamps to [0, 1] with NaN to +0; `fma.relu` makes a negative result +0
//! and keeps NaN; `neg`/`abs` change the sign bit only; `min`/`max` return the non-NaN
//! operand (`.NaN`: NaN if either is), with -0 below +0. Packed forms apply the operation to
//! each half (element 0 in the low 16 bits); `setp` on pairs sets `p` from the lower halves
//! and `q` from the upper ones. 9.7.9.21 (cvt): float results round as the modifier says,
//! integer results round as the integer modifier says and saturate (NaN to 0); the `x2` form
//! puts `a` in the upper half.

use super::*;
use Ty::*;
use common::half::*;

/// Applies `f` to each half of packed operands (one half unless `x2`).
fn each(x2: bool, v: &[u64; 3], f: impl Fn(u16, u16, u16) -> u16) -> u64 {
    let lo = f(v[0] as u16, v[1] as u16, v[2] as u16) as u64;
    if !x2 {
        return lo;
    }
    let hi = f(
        (v[0] >> 16) as u16,
        (v[1] >> 16) as u16,
        (v[2] >> 16) as u16,
    ) as u64;
    (hi << 16) | lo
}

// ---- inputs ----

/// One half for lane `i`: edge values first, then random bits or moderate values.
pub fn draw_half(rng: &mut StdRng, bf: bool, i: usize) -> u16 {
    const F16: [u16; 20] = [
        0x0000, 0x8000, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0x7BFF, 0xFBFF, 0x0400,
        0x0001, 0x03FF, 0x8001, 0x3800, 0x3E00, 0x4100, 0x3C01, 0x6800, 0x0200,
    ];
    const BF16: [u16; 20] = [
        0x0000, 0x8000, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x7F7F, 0xFF7F, 0x0080,
        0x0001, 0x007F, 0x8001, 0x3F00, 0x3FC0, 0x4020, 0x3F81, 0x4380, 0x0040,
    ];
    let edges = if bf { &BF16 } else { &F16 };
    if i < 120 && rng.random_bool(0.6) {
        return edges[rng.random_range(0..edges.len())];
    }
    if rng.random_bool(0.4) {
        return rng.random::<u16>();
    }
    // Moderate magnitudes (exponents around 0), where sums cancel and products stay normal.
    let (mb, bias, _) = fmt(bf);
    let e = rng.random_range(bias - 6..bias + 6) as u16;
    let m = rng.random::<u16>() & ((1 << mb) - 1);
    (rng.random::<u16>() & 0x8000) | e << mb | m
}

fn name(bf: bool, x2: bool) -> &'static str {
    match (bf, x2) {
        (false, false) => "f16",
        (false, true) => "f16x2",
        (true, false) => "bf16",
        (true, true) => "bf16x2",
    }
}

fn slot(x2: bool) -> Ty {
    if x2 { B32 } else { U16 }
}

fn half_cell(
    text: String,
    x2: bool,
    bf: bool,
    n: usize,
    r: impl Fn(&[u64; 3]) -> u64 + 'static,
) -> Cell {
    let t = slot(x2);
    let srcs = vec![t; n];
    let mut c = Cell::new(text, t, &srcs, r).cmp(Cmp::Half { bf });
    for k in 0..n {
        c = c.input(k, Gen::Half { bf });
    }
    c
}

/// `add/sub/mul` (`.rn`, `.ftz`, `.sat`), `fma.rn` (`.ftz`, `.sat`, `.relu`), `neg`, `abs`,
/// `min`, `max` (`.NaN`) on every half type where PTX defines them.
pub fn half_arithmetic_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for bf in [false, true] {
        for x2 in [false, true] {
            let ty = name(bf, x2);
            // bfloat16 has no .ftz or .sat.
            let mods: &[(&str, bool, bool)] = if bf {
                &[("", false, false), (".rn", false, false)]
            } else {
                &[
                    ("", false, false),
                    (".rn", false, false),
                    (".ftz", true, false),
                    (".sat", false, true),
                    (".rn.ftz.sat", true, true),
                ]
            };
            for &(m, ftz, sat) in mods {
                for (op, o) in [("add", Op2::Add), ("sub", Op2::Sub), ("mul", Op2::Mul)] {
                    cells.push(half_cell(
                        format!("{op}{m}.{ty} {{d}}, {{a}}, {{b}}"),
                        x2,
                        bf,
                        2,
                        move |v| each(x2, v, |a, b, _| op2(o, a, b, bf, ftz, sat)),
                    ));
                }
            }
            let fmods: &[(&str, bool, bool, bool)] = if bf {
                &[
                    (".rn", false, false, false),
                    (".rn.relu", false, false, true),
                ]
            } else {
                &[
                    (".rn", false, false, false),
                    (".rn.ftz", true, false, false),
                    (".rn.sat", false, true, false),
                    (".rn.relu", false, false, true),
                    (".rn.ftz.relu", true, false, true),
                ]
            };
            for &(m, ftz, sat, relu) in fmods {
                cells.push(half_cell(
                    format!("fma{m}.{ty} {{d}}, {{a}}, {{b}}, {{c}}"),
                    x2,
                    bf,
                    3,
                    move |v| each(x2, v, |a, b, c| fma1(a, b, c, bf, ftz, sat, relu)),
                ));
            }
            for ftz in if bf { vec![false] } else { vec![false, true] } {
                let m = if ftz { ".ftz" } else { "" };
                cells.push(half_cell(
                    format!("neg{m}.{ty} {{d}}, {{a}}"),
                    x2,
                    bf,
                    1,
                    move |v| each(x2, v, |a, _, _| flush(a, bf, ftz) ^ 0x8000),
                ));
                cells.push(half_cell(
                    format!("abs{m}.{ty} {{d}}, {{a}}"),
                    x2,
                    bf,
                    1,
                    move |v| each(x2, v, |a, _, _| flush(a, bf, ftz) & 0x7FFF),
                ));
                for (op, o, on) in [
                    ("min", Op2::Min, Op2::MinNan),
                    ("max", Op2::Max, Op2::MaxNan),
                ] {
                    cells.push(half_cell(
                        format!("{op}{m}.{ty} {{d}}, {{a}}, {{b}}"),
                        x2,
                        bf,
                        2,
                        move |v| each(x2, v, |a, b, _| op2(o, a, b, bf, ftz, false)),
                    ));
                    cells.push(half_cell(
                        format!("{op}{m}.NaN.{ty} {{d}}, {{a}}, {{b}}"),
                        x2,
                        bf,
                        2,
                        move |v| each(x2, v, |a, b, _| op2(on, a, b, bf, ftz, false)),
                    ));
                }
            }
        }
    }
    // tanh.approx and ex2.approx: the f64 function of the exact input, rounded once.
    for (bf, x2, op, ftz) in [
        (false, false, "tanh", false),
        (false, true, "tanh", false),
        (true, false, "tanh", false),
        (true, true, "tanh", false),
        (false, false, "ex2", false),
        (false, true, "ex2", false),
        (true, false, "ex2", true),
        (true, true, "ex2", true),
    ] {
        let ty = name(bf, x2);
        let m = if ftz { ".ftz" } else { "" };
        cells.push(half_cell(
            format!("{op}.approx{m}.{ty} {{d}}, {{a}}"),
            x2,
            bf,
            1,
            move |v| {
                each(x2, v, |a, _, _| {
                    let x = to_f64(hv(flush(a, bf, ftz), bf));
                    let r = if op == "tanh" { x.tanh() } else { x.exp2() };
                    let h = round_v(ieee(r.to_bits(), 52, 11, 1023), bf, Round::N);
                    flush(h, bf, ftz)
                })
            },
        ));
    }
    cells
}

#[test]
fn half_arithmetic() {
    run_cells("half_arithmetic", half_arithmetic_cells());
}

/// IEEE comparison of two decoded values: (ordered result, unordered result).
fn compare(c: &str, a: f64, b: f64) -> bool {
    let un = a.is_nan() || b.is_nan();
    match c {
        "eq" => !un && a == b,
        "ne" => !un && a != b,
        "lt" => !un && a < b,
        "le" => !un && a <= b,
        "gt" => !un && a > b,
        "ge" => !un && a >= b,
        "equ" => un || a == b,
        "neu" => un || a != b,
        "ltu" => un || a < b,
        "leu" => un || a <= b,
        "gtu" => un || a > b,
        "geu" => un || a >= b,
        "num" => !un,
        _ => un,
    }
}

const CMPS: [&str; 14] = [
    "eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan",
];

/// `setp` on halves (every comparison), with `.ftz`, a boolean combination, and both
/// predicates of the packed form.
pub fn half_compare_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    let cmp_half = |c: &'static str, bf: bool, ftz: bool, a: u64, b: u64| {
        let f = |h: u64| to_f64(hv(flush(h as u16, bf, ftz), bf));
        compare(c, f(a), f(b))
    };
    for bf in [false, true] {
        let ty = name(bf, false);
        for c in CMPS {
            cells.push(
                Cell::new(
                    format!("setp.{c}.{ty} {{d}}, {{a}}, {{b}}"),
                    Pred,
                    &[U16, U16],
                    move |v| cmp_half(c, bf, false, v[0], v[1]) as u64,
                )
                .halves(bf),
            );
        }
        let t2 = name(bf, true);
        for c in ["lt", "equ", "ge"] {
            // p: the lower halves; q: the upper halves.
            cells.push(
                Cell::new(
                    format!("setp.{c}.{t2} {{d}}|%p20, {{a}}, {{b}}"),
                    Pred,
                    &[B32, B32],
                    move |v| cmp_half(c, bf, false, v[0], v[1]) as u64,
                )
                .halves(bf),
            );
            cells.push(
                Cell::new(
                    format!("setp.{c}.{t2} %p20|{{d}}, {{a}}, {{b}}"),
                    Pred,
                    &[B32, B32],
                    move |v| cmp_half(c, bf, false, v[0] >> 16, v[1] >> 16) as u64,
                )
                .halves(bf),
            );
            cells.push(
                Cell::new(
                    format!("setp.{c}.or.{t2} %p20|{{d}}, {{a}}, {{b}}, !{{c}}"),
                    Pred,
                    &[B32, B32, Pred],
                    move |v| (cmp_half(c, bf, false, v[0] >> 16, v[1] >> 16) || v[2] == 0) as u64,
                )
                .halves(bf),
            );
        }
    }
    // set: the comparison as a value (1.0 in a half destination, all ones in an integer), per
    // half for pairs.
    for (c, dst, bf, x2, one) in [
        ("eq", "f16", false, false, 0x3C00u64),
        ("nan", "f16", false, false, 0x3C00),
        ("lt", "u16", false, false, 0xFFFF),
        ("geu", "u32", false, false, 0xFFFF_FFFF),
        ("nan", "bf16", true, false, 0x3F80),
        ("gt", "s32", true, false, 0xFFFF_FFFF),
        ("eq", "f16x2", false, true, 0x3C00),
        ("nan", "f16x2", false, true, 0x3C00),
        ("lt", "u32", false, true, 0xFFFF),
        ("nan", "bf16x2", true, true, 0x3F80),
        ("le", "s32", true, true, 0xFFFF),
    ] {
        let ty = name(bf, x2);
        let d = if x2 || dst == "u32" || dst == "s32" {
            U32
        } else {
            U16
        };
        let s = slot(x2);
        let r = move |v: &[u64; 3], sh: u32| {
            if cmp_half(c, bf, false, v[0] >> sh, v[1] >> sh) {
                one
            } else {
                0
            }
        };
        cells.push(
            Cell::new(
                format!("set.{c}.{dst}.{ty} {{d}}, {{a}}, {{b}}"),
                d,
                &[s, s],
                move |v| {
                    if x2 {
                        r(v, 16) << 16 | r(v, 0)
                    } else {
                        r(v, 0)
                    }
                },
            )
            .halves(bf),
        );
    }
    // set on 32-bit sources, with a boolean combination.
    cells.push(Cell::new(
        "set.nan.f32.f32 {d}, {a}, {b}",
        F32,
        &[F32, F32],
        |v| {
            if f32v(v[0]).is_nan() || f32v(v[1]).is_nan() {
                of32(1.0)
            } else {
                0
            }
        },
    ));
    cells.push(Cell::new(
        "set.lt.xor.u32.s32 {d}, {a}, {b}, {c}",
        U32,
        &[S32, S32, Pred],
        |v| {
            if (ival(v[0], S32) < ival(v[1], S32)) != (v[2] != 0) {
                0xFFFF_FFFF
            } else {
                0
            }
        },
    ));
    cells.push(Cell::new(
        "set.hs.u32.u64 {d}, {a}, {b}",
        U32,
        &[U64, U64],
        |v| if v[0] >= v[1] { 0xFFFF_FFFF } else { 0 },
    ));
    for c in ["lt", "eq", "gtu"] {
        cells.push(
            Cell::new(
                format!("setp.{c}.ftz.f16 {{d}}, {{a}}, {{b}}"),
                Pred,
                &[U16, U16],
                move |v| cmp_half(c, false, true, v[0], v[1]) as u64,
            )
            .halves(false),
        );
    }
    cells
}

#[test]
fn half_compare() {
    run_cells("half_compare", half_compare_cells());
}

/// The exact value of operand bits `v` of type `t`.
fn exact(v: u64, t: Ty) -> V {
    match t {
        F32 => ieee(v & 0xFFFF_FFFF, 23, 8, 127),
        F64 => ieee(v, 52, 11, 1023),
        t => {
            let i = ival(v, t);
            V::Fin(Dy { m: i, e: 0 }, false)
        }
    }
}

fn f32_sub(v: u64) -> bool {
    let x = f32v(v);
    x.is_subnormal()
}

/// Saturation modifiers of `cvt` to a half: `.sat`, `.relu`, `.satfinite`.
fn saturate(h: u16, bf: bool, sat: bool, relu: bool, satfinite: bool) -> u16 {
    let inf = fmt(bf).2 << fmt(bf).0;
    let mut h = h;
    if satfinite && h & 0x7FFF == inf {
        h -= 1;
    }
    if relu && !is_nan(h, bf) && h & 0x8000 != 0 {
        h = 0;
    }
    finish(h, bf, false, sat)
}

/// `cvt` to and from halves: from f32/f64/integers with each float rounding (and `.ftz`,
/// `.sat`, `.relu`, `.satfinite`), to f32/f64 (exact), to integers with each integer
/// rounding, between the two half formats, integer rounding within one, and the pair form.
pub fn half_cvt_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for bf in [false, true] {
        let ty = name(bf, false);
        // From f32, f64 and integers (numba writes `cvt.rn.f16.s32` and friends), each
        // rounding.
        for src in [F32, F64, S8, U8, S16, U16, S32, U32, S64, U64] {
            for r in Round::ALL {
                if bf && r != Round::N && src.bits() < 32 {
                    continue;
                }
                cells.push(
                    Cell::new(
                        format!("cvt.{}.{ty}.{} {{d}}, {{a}}", r.float(), src.name()),
                        U16,
                        &[src],
                        move |v| round_v(exact(v[0], src), bf, r) as u64,
                    )
                    .cmp(Cmp::Half { bf }),
                );
            }
        }
        for (m, ftz, sat, relu, satfinite) in [
            (".rn.ftz", true, false, false, false),
            (".rz.sat", false, true, false, false),
            (".rn.relu", false, false, true, false),
            (".rz.satfinite", false, false, false, true),
            (".rn.relu.satfinite", false, false, true, true),
        ] {
            cells.push(
                Cell::new(
                    format!("cvt{m}.{ty}.f32 {{d}}, {{a}}"),
                    U16,
                    &[F32],
                    move |v| {
                        let x = if ftz && f32_sub(v[0]) {
                            v[0] & 0x8000_0000
                        } else {
                            v[0]
                        };
                        let r = if m.starts_with(".rz") {
                            Round::Z
                        } else {
                            Round::N
                        };
                        let h = flush(round_v(exact(x, F32), bf, r), bf, ftz);
                        saturate(h, bf, sat, relu, satfinite) as u64
                    },
                )
                .cmp(Cmp::Half { bf }),
            );
        }
        // To f32 and f64: exact.
        for dst in [F32, F64] {
            cells.push(
                Cell::new(
                    format!("cvt.{}.{ty} {{d}}, {{a}}", dst.name()),
                    dst,
                    &[U16],
                    move |v| {
                        let x = to_f64(hv(v[0] as u16, bf));
                        if dst == F32 { of32(x as f32) } else { of64(x) }
                    },
                )
                .input(0, Gen::Half { bf }),
            );
        }
        // To integers, each integer rounding; saturating, NaN to 0.
        for dst in [S8, U8, S16, U16, S32, U32, S64, U64] {
            for r in Round::ALL {
                if dst.bits() < 32 && r != Round::Z {
                    continue;
                }
                cells.push(
                    Cell::new(
                        format!("cvt.{}.{}.{ty} {{d}}, {{a}}", r.int(), dst.name()),
                        dst,
                        &[U16],
                        move |v| {
                            let x = to_f64(hv(v[0] as u16, bf));
                            if x.is_nan() {
                                return 0;
                            }
                            let i = r.integral(x);
                            let (lo, hi) = if dst.signed() {
                                (
                                    -(1i128 << (dst.bits() - 1)),
                                    (1i128 << (dst.bits() - 1)) - 1,
                                )
                            } else {
                                (0, (1i128 << dst.bits()) - 1)
                            };
                            let v = if i <= lo as f64 {
                                lo
                            } else if i >= hi as f64 {
                                hi
                            } else {
                                i as i128
                            };
                            (v as u64) & dst.mask()
                        },
                    )
                    .input(0, Gen::Half { bf }),
                );
            }
        }
        // Integer rounding within the format.
        for r in Round::ALL {
            cells.push(half_cell(
                format!("cvt.{}.{ty}.{ty} {{d}}, {{a}}", r.int()),
                false,
                bf,
                1,
                move |v| match hv(v[0] as u16, bf) {
                    V::Fin(d, n)
                        if d.m != 0 && r.integral(to_f64(V::Fin(d, n))) != to_f64(V::Fin(d, n)) =>
                    {
                        // Not integral: below 2^mantissa bits, so the integer is small.
                        let x = r.integral(to_f64(V::Fin(d, n)));
                        if x == 0.0 {
                            if n { 0x8000 } else { 0 }
                        } else {
                            round_terms(&[Dy { m: x as i128, e: 0 }], bf, Round::N) as u64
                        }
                    }
                    V::Nan => 0x7FFF,
                    _ => v[0] & 0xFFFF,
                },
            ));
        }
        // Into the other half format.
        let other = name(!bf, false);
        for r in [Round::N, Round::Z] {
            cells.push(
                Cell::new(
                    format!("cvt.{}.{other}.{ty} {{d}}, {{a}}", r.float()),
                    U16,
                    &[U16],
                    move |v| round_v(hv(v[0] as u16, bf), !bf, r) as u64,
                )
                .input(0, Gen::Half { bf })
                .cmp(Cmp::Half { bf: !bf }),
            );
        }
        // Two f32 into a pair: `a` in the upper half.
        let t2 = name(bf, true);
        for (m, r, relu) in [
            (".rn", Round::N, false),
            (".rz", Round::Z, false),
            (".rn.relu", Round::N, true),
        ] {
            cells.push(
                Cell::new(
                    format!("cvt{m}.{t2}.f32 {{d}}, {{a}}, {{b}}"),
                    B32,
                    &[F32, F32],
                    move |v| {
                        let one = |x: u64| {
                            saturate(round_v(exact(x, F32), bf, r), bf, false, relu, false) as u64
                        };
                        (one(v[0]) << 16) | one(v[1])
                    },
                )
                .cmp(Cmp::Half { bf }),
            );
        }
    }
    cells
}

#[test]
fn half_cvt() {
    run_cells("half_cvt", half_cvt_cells());
}
