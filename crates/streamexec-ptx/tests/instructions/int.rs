//! Integer arithmetic, bit operations, comparisons and selects.

use super::*;
use Ty::*;

/// The low bits of `v` for type `t` (two's complement wrap).
fn wrap(v: i128, t: Ty) -> u64 {
    (v as u64) & t.mask()
}

fn range(t: Ty) -> (i128, i128) {
    let b = t.bits();
    if t.signed() {
        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
    } else {
        (0, (1i128 << b) - 1)
    }
}

const INTS: [Ty; 4] = [S32, U32, S64, U64];

/// PTX ISA 9.7.1 (integer arithmetic): add/sub/mul.lo/mad.lo wrap; mul.hi is the high half of
/// the 2N-bit product, mul.wide the full product of N-bit operands; div/rem truncate toward
/// zero (a zero divisor, and MIN / -1, are unspecified: not drawn); add.sat/sub.sat.s32 clamp
/// to the s32 range; abs/neg of MIN wrap to MIN.
pub fn integer_arithmetic_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for t in INTS {
        let n = t.name();
        let iv = move |v: u64| ival(v, t);
        cells.push(Cell::new(
            format!("add.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| wrap(iv(v[0]) + iv(v[1]), t),
        ));
        cells.push(Cell::new(
            format!("sub.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| wrap(iv(v[0]) - iv(v[1]), t),
        ));
        cells.push(Cell::new(
            format!("mul.lo.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| v[0].wrapping_mul(v[1]) & t.mask(),
        ));
        cells.push(Cell::new(
            format!("mul.hi.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| {
                let w = t.bits();
                let p = if t == U64 {
                    ((v[0] as u128 * v[1] as u128) >> 64) as i128
                } else {
                    (iv(v[0]) * iv(v[1])) >> w
                };
                wrap(p, t)
            },
        ));
        cells.push(Cell::new(
            format!("mad.lo.{n} {{d}}, {{a}}, {{b}}, {{c}}"),
            t,
            &[t, t, t],
            move |v| v[0].wrapping_mul(v[1]).wrapping_add(v[2]) & t.mask(),
        ));
        let divisible = move |v: &[u64; 3]| {
            let (a, b) = (iv(v[0]), iv(v[1]));
            b != 0 && !(t.signed() && b == -1 && a == range(t).0)
        };
        cells.push(
            Cell::new(
                format!("div.{n} {{d}}, {{a}}, {{b}}"),
                t,
                &[t, t],
                move |v| wrap(iv(v[0]) / iv(v[1]), t),
            )
            .valid(divisible),
        );
        cells.push(
            Cell::new(
                format!("rem.{n} {{d}}, {{a}}, {{b}}"),
                t,
                &[t, t],
                move |v| wrap(iv(v[0]) % iv(v[1]), t),
            )
            .valid(divisible),
        );
        cells.push(Cell::new(
            format!("min.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| wrap(iv(v[0]).min(iv(v[1])), t),
        ));
        cells.push(Cell::new(
            format!("max.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| wrap(iv(v[0]).max(iv(v[1])), t),
        ));
    }
    for t in [S32, S64] {
        let n = t.name();
        cells.push(Cell::new(
            format!("abs.{n} {{d}}, {{a}}"),
            t,
            &[t],
            move |v| wrap(ival(v[0], t).abs(), t),
        ));
        cells.push(Cell::new(
            format!("neg.{n} {{d}}, {{a}}"),
            t,
            &[t],
            move |v| wrap(-ival(v[0], t), t),
        ));
    }
    for (src, dst) in [(S32, S64), (U32, U64), (S16, S32), (U16, U32)] {
        cells.push(Cell::new(
            format!("mul.wide.{} {{d}}, {{a}}, {{b}}", src.name()),
            dst,
            &[src, src],
            move |v| wrap(ival(v[0], src) * ival(v[1], src), dst),
        ));
    }
    for (op, sign) in [("add", 1i128), ("sub", -1)] {
        cells.push(Cell::new(
            format!("{op}.sat.s32 {{d}}, {{a}}, {{b}}"),
            S32,
            &[S32, S32],
            move |v| {
                let (lo, hi) = range(S32);
                wrap(
                    (ival(v[0], S32) + sign * ival(v[1], S32)).clamp(lo, hi),
                    S32,
                )
            },
        ));
    }
    cells
}

#[test]
fn integer_arithmetic() {
    run_cells("integer_arithmetic", integer_arithmetic_cells());
}

/// PTX ISA 9.7.8 (logic and shift): the shift amount is an unsigned 32-bit register; amounts
/// at or past the width N give 0 for shl and logical shr and the sign fill for shr.s ("shift
/// amounts greater than the register width N are clamped to N"). PTX ISA 9.7.1 popc/clz/brev
/// and bfe/bfi: position and length are taken mod 256 (b & 0xff), bits past the msb are not
/// extracted/inserted, bfe.s fills with the sign of the last extracted bit (0 when len = 0).
pub fn bit_operations_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for t in [B32, B64] {
        let n = t.name();
        let m = t.mask();
        cells.push(Cell::new(
            format!("and.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| v[0] & v[1] & m,
        ));
        cells.push(Cell::new(
            format!("or.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| (v[0] | v[1]) & m,
        ));
        cells.push(Cell::new(
            format!("xor.{n} {{d}}, {{a}}, {{b}}"),
            t,
            &[t, t],
            move |v| (v[0] ^ v[1]) & m,
        ));
        cells.push(Cell::new(
            format!("not.{n} {{d}}, {{a}}"),
            t,
            &[t],
            move |v| !v[0] & m,
        ));
        cells.push(Cell::new(
            format!("popc.{n} {{d}}, {{a}}"),
            U32,
            &[t],
            move |v| (v[0] & m).count_ones() as u64,
        ));
        cells.push(Cell::new(
            format!("clz.{n} {{d}}, {{a}}"),
            U32,
            &[t],
            move |v| ((v[0] & m).leading_zeros() - (64 - t.bits())) as u64,
        ));
        cells.push(Cell::new(
            format!("brev.{n} {{d}}, {{a}}"),
            t,
            &[t],
            move |v| (v[0] & m).reverse_bits() >> (64 - t.bits()),
        ));
        cells.push(
            Cell::new(
                format!("shl.{n} {{d}}, {{a}}, {{b}}"),
                t,
                &[t, U32],
                move |v| {
                    let sh = v[1] & 0xFFFF_FFFF;
                    if sh >= t.bits() as u64 {
                        0
                    } else {
                        (v[0] << sh) & m
                    }
                },
            )
            .input(1, Gen::Shift),
        );
    }
    for t in [B32, U32, B64, U64, S32, S64] {
        let w = t.bits() as u64;
        cells.push(
            Cell::new(
                format!("shr.{} {{d}}, {{a}}, {{b}}", t.name()),
                t,
                &[t, U32],
                move |v| {
                    let sh = (v[1] & 0xFFFF_FFFF).min(w);
                    if t.signed() {
                        let x = sx(v[0], w as u32);
                        ((x >> sh.min(63)) as u64) & t.mask()
                    } else if sh >= w {
                        0
                    } else {
                        (v[0] & t.mask()) >> sh
                    }
                },
            )
            .input(1, Gen::Shift),
        );
    }
    for t in [U32, S32, U64, S64] {
        let msb = t.bits() - 1;
        cells.push(
            Cell::new(
                format!("bfe.{} {{d}}, {{a}}, {{b}}, {{c}}", t.name()),
                t,
                &[t, U32, U32],
                move |v| {
                    let (pos, len) = ((v[1] & 0xff) as u32, (v[2] & 0xff) as u32);
                    let bit = |i: u32| (v[0] >> i) & 1;
                    let sbit = if !t.signed() || len == 0 {
                        0
                    } else {
                        bit((pos + len - 1).min(msb))
                    };
                    (0..=msb).fold(0u64, |d, i| {
                        let b = if i < len && pos + i <= msb {
                            bit(pos + i)
                        } else {
                            sbit
                        };
                        d | (b << i)
                    })
                },
            )
            .input(1, Gen::Shift)
            .input(2, Gen::Shift),
        );
    }
    for t in [B32, B64] {
        let msb = t.bits() - 1;
        for len in [0u32, 5, 31, 40] {
            cells.push(
                Cell::new(
                    format!("bfi.{} {{d}}, {{a}}, {{b}}, {{c}}, {len}", t.name()),
                    t,
                    &[t, t, U32],
                    move |v| {
                        let pos = (v[2] & 0xff) as u32;
                        let mut f = v[1] & t.mask();
                        let mut i = 0;
                        while i < len && pos + i <= msb {
                            f = (f & !(1 << (pos + i))) | (((v[0] >> i) & 1) << (pos + i));
                            i += 1;
                        }
                        f
                    },
                )
                .input(2, Gen::Shift),
            );
        }
    }
    cells
}

#[test]
fn bit_operations() {
    run_cells("bit_operations", bit_operations_cells());
}

/// PTX ISA 9.7.3 (comparison and selection): setp with signed/unsigned integer comparisons
/// (lo/ls/hi/hs are the unsigned names); ordered float comparisons are false when either
/// operand is NaN, the unordered ones (equ neu ltu leu gtu geu) true; num = neither NaN,
/// nan = either NaN. selp d = c ? a : b.
pub fn compare_and_select_cells() -> Vec<Cell> {
    use std::cmp::Ordering::*;
    let mut cells = Vec::new();
    for t in INTS {
        let mut cmps = vec!["eq", "ne", "lt", "le", "gt", "ge"];
        if !t.signed() {
            cmps.extend(["lo", "ls", "hi", "hs"]);
        }
        for c in cmps {
            cells.push(Cell::new(
                format!("setp.{c}.{} {{d}}, {{a}}, {{b}}", t.name()),
                Pred,
                &[t, t],
                move |v| {
                    let o = ival(v[0], t).cmp(&ival(v[1], t));
                    let r = match c {
                        "eq" => o == Equal,
                        "ne" => o != Equal,
                        "lt" | "lo" => o == Less,
                        "le" | "ls" => o != Greater,
                        "gt" | "hi" => o == Greater,
                        _ => o != Less,
                    };
                    r as u64
                },
            ));
        }
    }
    for t in [F32, F64] {
        for c in [
            "eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num",
            "nan",
        ] {
            cells.push(Cell::new(
                format!("setp.{c}.{} {{d}}, {{a}}, {{b}}", t.name()),
                Pred,
                &[t, t],
                move |v| {
                    let (a, b) = if t == F32 {
                        (f32v(v[0]) as f64, f32v(v[1]) as f64)
                    } else {
                        (f64v(v[0]), f64v(v[1]))
                    };
                    let unordered = a.is_nan() || b.is_nan();
                    let o = a.partial_cmp(&b);
                    let r = match c {
                        "num" => !unordered,
                        "nan" => unordered,
                        _ if unordered => c.ends_with('u'),
                        "eq" | "equ" => o == Some(Equal),
                        "ne" | "neu" => o != Some(Equal),
                        "lt" | "ltu" => o == Some(Less),
                        "le" | "leu" => o != Some(Greater),
                        "gt" | "gtu" => o == Some(Greater),
                        _ => o != Some(Less),
                    };
                    r as u64
                },
            ));
        }
    }
    for t in [B32, S32, U64, B64, F32, F64] {
        cells.push(
            Cell::new(
                format!("selp.{} {{d}}, {{a}}, {{b}}, {{c}}", t.name()),
                t,
                &[t, t, Pred],
                move |v| (if v[2] & 1 != 0 { v[0] } else { v[1] }) & t.mask(),
            )
            .cmp(Cmp::Exact),
        );
    }
    cells
}

#[test]
fn compare_and_select() {
    run_cells("compare_and_select", compare_and_select_cells());
}
