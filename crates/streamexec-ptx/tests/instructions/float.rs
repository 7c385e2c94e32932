//! Float arithmetic: correctly rounded `.rn` operations bit-exactly, `.approx` within bounds.

use super::*;
use Ty::*;

/// A binary f32/f64 operation as a cell reference.
fn bin(t: Ty, f32op: fn(f32, f32) -> f32, f64op: fn(f64, f64) -> f64) -> impl Fn(&[u64; 3]) -> u64 {
    move |v| {
        if t == F32 {
            of32(f32op(f32v(v[0]), f32v(v[1])))
        } else {
            of64(f64op(f64v(v[0]), f64v(v[1])))
        }
    }
}

fn un(t: Ty, f32op: fn(f32) -> f32, f64op: fn(f64) -> f64) -> impl Fn(&[u64; 3]) -> u64 {
    move |v| {
        if t == F32 {
            of32(f32op(f32v(v[0])))
        } else {
            of64(f64op(f64v(v[0])))
        }
    }
}

/// PTX ISA 9.7.3 (floating-point instructions): add/sub/mul/fma/div/sqrt/rcp with `.rn` are
/// IEEE 754 round-to-nearest-even and keep subnormals (no `.ftz`); fma is fused (one
/// rounding); add/sub/mul without a rounding modifier also round to nearest. min/max return
/// the non-NaN operand when one is NaN (NaN when both); the sign of a zero result from +0/-0 is
/// compared numerically. neg/abs flip/clear the sign bit (a NaN stays a NaN).
pub fn float_arithmetic_rn_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for t in [F32, F64] {
        let n = t.name();
        let c2 = |op: &str| format!("{op}.{n} {{d}}, {{a}}, {{b}}");
        cells.push(Cell::new(
            c2("add.rn"),
            t,
            &[t, t],
            bin(t, |a, b| a + b, |a, b| a + b),
        ));
        cells.push(Cell::new(
            c2("add"),
            t,
            &[t, t],
            bin(t, |a, b| a + b, |a, b| a + b),
        ));
        cells.push(Cell::new(
            c2("sub.rn"),
            t,
            &[t, t],
            bin(t, |a, b| a - b, |a, b| a - b),
        ));
        cells.push(Cell::new(
            c2("mul.rn"),
            t,
            &[t, t],
            bin(t, |a, b| a * b, |a, b| a * b),
        ));
        cells.push(Cell::new(
            c2("mul"),
            t,
            &[t, t],
            bin(t, |a, b| a * b, |a, b| a * b),
        ));
        cells.push(Cell::new(
            c2("div.rn"),
            t,
            &[t, t],
            bin(t, |a, b| a / b, |a, b| a / b),
        ));
        cells.push(
            Cell::new(c2("min"), t, &[t, t], bin(t, f32::min, f64::min)).cmp(Cmp::FloatNumeric),
        );
        cells.push(
            Cell::new(c2("max"), t, &[t, t], bin(t, f32::max, f64::max)).cmp(Cmp::FloatNumeric),
        );
        // `.NaN`: a NaN operand makes the result NaN (PTX ISA 9.7.3.10, sm_80).
        for (op, max) in [("min.NaN", false), ("max.NaN", true)] {
            let f = move |v: &[u64; 3]| {
                let (a, b) = if t == F32 {
                    (f32v(v[0]) as f64, f32v(v[1]) as f64)
                } else {
                    (f64v(v[0]), f64v(v[1]))
                };
                let r = match (a.is_nan() || b.is_nan(), max) {
                    (true, _) => f64::NAN,
                    (false, true) => a.max(b),
                    (false, false) => a.min(b),
                };
                if t == F32 { of32(r as f32) } else { of64(r) }
            };
            cells.push(Cell::new(c2(op), t, &[t, t], f).cmp(Cmp::FloatNumeric));
        }
        cells.push(Cell::new(
            format!("fma.rn.{n} {{d}}, {{a}}, {{b}}, {{c}}"),
            t,
            &[t, t, t],
            move |v| {
                if t == F32 {
                    of32(f32v(v[0]).mul_add(f32v(v[1]), f32v(v[2])))
                } else {
                    of64(f64v(v[0]).mul_add(f64v(v[1]), f64v(v[2])))
                }
            },
        ));
        let c1 = |op: &str| format!("{op}.{n} {{d}}, {{a}}");
        cells.push(Cell::new(
            c1("sqrt.rn"),
            t,
            &[t],
            un(t, f32::sqrt, f64::sqrt),
        ));
        cells.push(Cell::new(
            c1("rcp.rn"),
            t,
            &[t],
            un(t, |x| 1.0 / x, |x| 1.0 / x),
        ));
        cells.push(Cell::new(c1("neg"), t, &[t], un(t, |x| -x, |x| -x)));
        cells.push(Cell::new(c1("abs"), t, &[t], un(t, f32::abs, f64::abs)));
    }
    cells
}

#[test]
fn float_arithmetic_rn() {
    run_cells("float_arithmetic_rn", float_arithmetic_rn_cells());
}

/// PTX ISA 9.7.3: the `.approx` f32 operations are implementation-defined within bounds
/// (rcp/sqrt/div: a few ulp; rsqrt: 2^-22 relative; ex2: 2 ulp; lg2: 2^-22 absolute). Inputs
/// are positive normal numbers (small ones for ex2), and the test allows 2^-20 relative
/// (absolute below 1), looser than every documented bound.
pub fn float_approx_f32_cells() -> Vec<Cell> {
    let tol = Cmp::Within(2f64.powi(-20));
    let pos = |text: &str, f: fn(f32) -> f32| {
        Cell::new(text, F32, &[F32], un(F32, f, |x| x))
            .cmp(tol)
            .input(0, Gen::PositiveNormal)
    };
    let cells = vec![
        pos("rcp.approx.f32 {d}, {a}", |x| 1.0 / x),
        pos("rcp.approx.ftz.f32 {d}, {a}", |x| 1.0 / x),
        pos("sqrt.approx.f32 {d}, {a}", f32::sqrt),
        pos("rsqrt.approx.f32 {d}, {a}", |x| {
            (1.0 / (x as f64).sqrt()) as f32
        }),
        pos("lg2.approx.ftz.f32 {d}, {a}", |x| (x as f64).log2() as f32),
        Cell::new(
            "ex2.approx.ftz.f32 {d}, {a}",
            F32,
            &[F32],
            un(F32, |x| (x as f64).exp2() as f32, |x| x),
        )
        .cmp(tol)
        .input(0, Gen::Small),
        Cell::new(
            "div.approx.f32 {d}, {a}, {b}",
            F32,
            &[F32, F32],
            bin(F32, |a, b| a / b, |a, b| a / b),
        )
        .cmp(tol)
        .input(0, Gen::PositiveNormal)
        .input(1, Gen::PositiveNormal),
        Cell::new(
            "div.full.f32 {d}, {a}, {b}",
            F32,
            &[F32, F32],
            bin(F32, |a, b| a / b, |a, b| a / b),
        )
        .cmp(tol)
        .input(0, Gen::PositiveNormal)
        .input(1, Gen::PositiveNormal),
    ];
    cells
}

#[test]
fn float_approx_f32() {
    run_cells("float_approx_f32", float_approx_f32_cells());
}
