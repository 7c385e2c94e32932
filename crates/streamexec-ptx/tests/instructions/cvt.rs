//! `cvt` between every integer width, integer <-> float with each rounding, float <-> float,
//! and `.sat`.

use super::*;
use Ty::*;

const INTS: [Ty; 8] = [U8, S8, U16, S16, U32, S32, U64, S64];

fn int_range(t: Ty) -> (i128, i128) {
    let b = t.bits();
    if t.signed() {
        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
    } else {
        (0, (1i128 << b) - 1)
    }
}

/// `x` (already rounded to an integral value, or NaN/inf) saturated into `t`, NaN -> 0.
fn saturate_float(x: f64, t: Ty) -> u64 {
    let (lo, hi) = int_range(t);
    let v = if x.is_nan() {
        0
    } else if x <= lo as f64 {
        lo
    } else if x >= hi as f64 {
        hi
    } else {
        x as i128
    };
    (v as u64) & t.mask()
}

fn float_of(v: u64, t: Ty) -> f64 {
    if t == F32 { f32v(v) as f64 } else { f64v(v) }
}

/// PTX ISA 9.7.9.21 (cvt): between integer types the source is sign- or zero-extended by its
/// own type and the result is the destination's low bits; with `.sat` it is clamped to the
/// destination's range instead.
pub fn cvt_int_to_int_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for d in INTS {
        for a in INTS {
            if d == a {
                continue;
            }
            let text = format!("cvt.{}.{} {{d}}, {{a}}", d.name(), a.name());
            cells.push(Cell::new(text, d, &[a], move |v| {
                (ival(v[0], a) as u64) & d.mask()
            }));
            let text = format!("cvt.sat.{}.{} {{d}}, {{a}}", d.name(), a.name());
            cells.push(Cell::new(text, d, &[a], move |v| {
                let (lo, hi) = int_range(d);
                (ival(v[0], a).clamp(lo, hi) as u64) & d.mask()
            }));
        }
    }
    cells
}

#[test]
fn cvt_int_to_int() {
    run_cells("cvt_int_to_int", cvt_int_to_int_cells());
}

/// PTX ISA 9.7.9.21 (cvt): integer to float takes a float rounding modifier (.rn .rz .rm .rp,
/// IEEE directions); the reference rounds the exact integer in that direction.
pub fn cvt_int_to_float_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for r in Round::ALL {
        for d in [F32, F64] {
            for a in [S32, U32, S64, U64, S16, U16] {
                let text = format!("cvt.{}.{}.{} {{d}}, {{a}}", r.float(), d.name(), a.name());
                cells.push(Cell::new(text, d, &[a], move |v| {
                    let x = ival(v[0], a);
                    if d == F32 {
                        of32(int_to_f32(x, r))
                    } else {
                        of64(int_to_f64(x, r))
                    }
                }));
            }
        }
    }
    cells
}

#[test]
fn cvt_int_to_float() {
    run_cells("cvt_int_to_float", cvt_int_to_float_cells());
}

/// PTX ISA 9.7.9.21 (cvt): float to integer takes an integer rounding modifier (.rni .rzi
/// .rmi .rpi: nearest-even, toward zero, down, up) and saturates to the destination range,
/// NaN giving 0 ("For float-to-integer conversions, the result is clamped to the destination
/// range by default"), the same as Rust's `as` after rounding.
pub fn cvt_float_to_int_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for r in Round::ALL {
        for a in [F32, F64] {
            for d in [S32, U32, S64, U64, S16, U16, S8, U8] {
                let text = format!("cvt.{}.{}.{} {{d}}, {{a}}", r.int(), d.name(), a.name());
                cells.push(Cell::new(text, d, &[a], move |v| {
                    saturate_float(r.integral(float_of(v[0], a)), d)
                }));
            }
        }
    }
    cells
}

#[test]
fn cvt_float_to_int() {
    run_cells("cvt_float_to_int", cvt_float_to_int_cells());
}

/// PTX ISA 9.7.9.21 (cvt): f64 -> f32 rounds in the given direction (.rn .rz .rm .rp, IEEE
/// directed rounding, overflow to ±inf or ±MAX as the direction says, subnormals kept);
/// f32 -> f64 is exact; an integer rounding modifier on a float -> same float conversion rounds
/// to an integral value; `.sat` on a float destination clamps to [0.0, 1.0] with NaN -> +0.0
/// (compared numerically, so the sign of a zero is not checked).
pub fn cvt_float_to_float_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for r in Round::ALL {
        let text = format!("cvt.{}.f32.f64 {{d}}, {{a}}", r.float());
        cells.push(Cell::new(text, F32, &[F64], move |v| {
            of32(f64_to_f32(f64v(v[0]), r))
        }));
        for t in [F32, F64] {
            let text = format!("cvt.{}.{}.{} {{d}}, {{a}}", r.int(), t.name(), t.name());
            cells.push(Cell::new(text, t, &[t], move |v| {
                let x = r.integral(float_of(v[0], t));
                if t == F32 { of32(x as f32) } else { of64(x) }
            }));
        }
    }
    cells.push(Cell::new("cvt.f64.f32 {d}, {a}", F64, &[F32], |v| {
        of64(f32v(v[0]) as f64)
    }));
    let sat = |x: f64| if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
    cells.push(
        Cell::new("cvt.sat.f32.f32 {d}, {a}", F32, &[F32], move |v| {
            of32(sat(f32v(v[0]) as f64) as f32)
        })
        .cmp(Cmp::FloatNumeric),
    );
    cells.push(
        Cell::new("cvt.rn.sat.f32.f64 {d}, {a}", F32, &[F64], move |v| {
            of32(sat(f64_to_f32(f64v(v[0]), Round::N) as f64) as f32)
        })
        .cmp(Cmp::FloatNumeric),
    );
    cells.push(
        Cell::new("cvt.sat.f64.f32 {d}, {a}", F64, &[F32], move |v| {
            of64(sat(f32v(v[0]) as f64))
        })
        .cmp(Cmp::FloatNumeric),
    );
    cells
}

#[test]
fn cvt_float_to_float() {
    run_cells("cvt_float_to_float", cvt_float_to_float_cells());
}

/// The directed-rounding references themselves, checked against their definition (no engine
/// needed): the result is a float on the right side of the exact value with no float strictly
/// between them.
#[test]
fn rounding_references_follow_their_definition() {
    let mut rng = common::rng("rounding_references_follow_their_definition");
    let mut ints: Vec<i128> = vec![
        0,
        1,
        -1,
        16777217,
        -16777219,
        (1 << 53) + 1,
        i64::MIN as i128,
        i64::MAX as i128,
        u64::MAX as i128,
    ];
    ints.extend((0..2000).map(|_| rng.random::<i64>() as i128 >> rng.random_range(0..63)));
    for &v in &ints {
        for r in Round::ALL {
            let f = int_to_f32(v, r);
            let d = int_to_f64(v, r);
            // The exact comparison of a float with the integer v (fractions included).
            let exact = |x: f64| match (x.trunc() as i128).cmp(&v) {
                std::cmp::Ordering::Equal => x.fract().partial_cmp(&0.0).unwrap(),
                o => o,
            };
            check_directed(
                f as f64,
                (f.next_down() as f64, f.next_up() as f64),
                r,
                exact,
                || format!("{v} -> f32 {r:?}"),
            );
            check_directed(d, (d.next_down(), d.next_up()), r, exact, || {
                format!("{v} -> f64 {r:?}")
            });
        }
    }
    for i in 0..4000 {
        let x = if i % 2 == 0 {
            f64::from_bits(rng.random())
        } else {
            rng.random_range(-1e6..1e6)
        };
        if !x.is_finite() || x.abs() > f32::MAX as f64 {
            continue;
        }
        for r in Round::ALL {
            let f = f64_to_f32(x, r);
            let exact = |c: f64| c.partial_cmp(&x).unwrap();
            check_directed(
                f as f64,
                (f.next_down() as f64, f.next_up() as f64),
                r,
                exact,
                || format!("{x:e} -> f32 {r:?}"),
            );
        }
    }
    // Known values.
    assert_eq!(int_to_f32(16777217, Round::N), 16777216.0);
    assert_eq!(int_to_f32(16777217, Round::P), 16777218.0);
    assert_eq!(int_to_f32(-16777217, Round::M), -16777218.0);
    assert_eq!(int_to_f32(-16777217, Round::Z), -16777216.0);
    assert_eq!(f64_to_f32(1e300, Round::Z), f32::MAX);
    assert_eq!(f64_to_f32(1e300, Round::N), f32::INFINITY);
    assert_eq!(f64_to_f32(-1e300, Round::P), f32::MIN);
    assert_eq!(saturate_float(Round::N.integral(2.5), S32), 2);
    assert_eq!(
        saturate_float(Round::N.integral(-3.5), S32),
        (-4i64) as u64 & S32.mask()
    );
    assert_eq!(saturate_float(f64::NAN, U64), 0);
    assert_eq!(saturate_float(1e30, S64), i64::MAX as u64);
    assert_eq!(saturate_float(-1.0, U32), 0);
}

/// `got` is the float next to the exact value in direction `r` (neighbours: next down / up).
fn check_directed(
    got: f64,
    (down, up): (f64, f64),
    r: Round,
    cmp: impl Fn(f64) -> std::cmp::Ordering,
    what: impl Fn() -> String,
) {
    use std::cmp::Ordering::*;
    let (c, cd, cu) = (cmp(got), cmp(down), cmp(up));
    let ok = match r {
        Round::M => c != Greater && cu == Greater,
        Round::P => c != Less && cd == Less,
        // Toward zero: round down above zero, up below it (the exact value's sign).
        Round::Z if cmp(0.0) != Greater => c != Greater && (c == Equal || cu == Greater),
        Round::Z => c != Less && (c == Equal || cd == Less),
        // Nearest: the exact value lies between the neighbours' midpoints (ties are checked
        // by the known values above).
        Round::N => cd == Less && cu == Greater || c == Equal,
    };
    assert!(ok, "{}: {got:e} is not rounded {r:?}", what());
}
