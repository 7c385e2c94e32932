//! kernels/corpus_math.cu: divergent loops, `.func` calls, 64-bit and double math, conversions.

use super::*;

fn divergent_ref(x: i32) -> i32 {
    let mut acc = 0i32;
    for j in 0..(x & 15) {
        for k in 0..((x >> 4) & 7) {
            acc += j * k + 1;
            if acc > 40 + ((x >> 8) & 31) {
                return -acc;
            }
        }
        if (x >> 13) % 5 == j {
            return acc * 2;
        }
    }
    acc
}

#[test]
fn divergent_nested_loops_with_early_exit() {
    let exec = host();
    let mut rng = common::rng("divergent_nested_loops_with_early_exit");
    for (opt, ptx) in MATH {
        let k = load::<(P<i32>, P<i32>, i32)>(&exec, ptx, "divergent_loops");
        for (n, t) in [(500usize, 96u32), (1, 1), (70, 32)] {
            let x = ints(&mut rng, n, i32::MIN, i32::MAX);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, n, POISON_I32);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (dx.ptr(), out.ptr(), n as i32),
            );
            let got = download(&exec, &out);
            for i in 0..n {
                assert_eq!(got[i], divergent_ref(x[i]), "{opt} x={:#x}", x[i]);
            }
        }
    }
}

fn collatz_ref(mut x: u32, limit: i32) -> i32 {
    let mut s = 0;
    while x != 1 && s < limit {
        x = if x & 1 == 1 {
            x.wrapping_mul(3).wrapping_add(1)
        } else {
            x / 2
        };
        s += 1;
    }
    s
}

#[test]
fn noinline_device_function_calls() {
    let exec = host();
    let mut rng = common::rng("noinline_device_function_calls");
    for (opt, ptx) in MATH {
        type A = (P<u32>, P<f64>, P<f64>, i32, P<i32>, P<f64>, i32);
        let k = load::<A>(&exec, ptx, "call_funcs");
        for (n, t) in [(100usize, 64u32), (1, 1)] {
            let xs: Vec<u32> = (0..n).map(|_| rng.random_range(0..2_000_000)).collect();
            let ds: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
            let coef: Vec<f64> = (0..6).map(|_| rng.random_range(-3.0..3.0)).collect();
            let deg = 5;
            let (dxs, dds, dc) = (upload(&exec, &xs), upload(&exec, &ds), upload(&exec, &coef));
            let steps = poisoned(&exec, n, POISON_I32);
            let poly = poisoned(&exec, n, POISON_F64);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (
                    dxs.ptr(),
                    dds.ptr(),
                    dc.ptr(),
                    deg,
                    steps.ptr(),
                    poly.ptr(),
                    n as i32,
                ),
            );
            let (got_s, got_p) = (download(&exec, &steps), download(&exec, &poly));
            for i in 0..n {
                assert_eq!(
                    got_s[i],
                    collatz_ref(xs[i], 200),
                    "{opt} collatz({})",
                    xs[i]
                );
                let mut acc = coef[deg as usize];
                for c in coef[..deg as usize].iter().rev() {
                    acc = acc.mul_add(ds[i], *c);
                }
                assert!(
                    same_f64(got_p[i], acc),
                    "{opt} horner({}): {} vs {acc}",
                    ds[i],
                    got_p[i]
                );
            }
        }
    }
}

/// Random i64 pairs with edge values; b is never 0 and (MIN, -1) never occurs.
fn i64_pairs(rng: &mut StdRng, n: usize) -> (Vec<i64>, Vec<i64>) {
    let edges = [
        0i64,
        1,
        -1,
        i64::MIN,
        i64::MAX,
        63,
        64,
        -64,
        1 << 32,
        (1 << 32) - 1,
    ];
    let pick = |rng: &mut StdRng| {
        if rng.random_bool(0.3) {
            edges[rng.random_range(0..edges.len())]
        } else if rng.random_bool(0.5) {
            rng.random_range(-1000..1000)
        } else {
            rng.random()
        }
    };
    let mut a = Vec::with_capacity(n);
    let mut b = Vec::with_capacity(n);
    while a.len() < n {
        let (x, y) = (pick(rng), pick(rng));
        if y == 0 || (x == i64::MIN && y == -1) {
            continue;
        }
        a.push(x);
        b.push(y);
    }
    (a, b)
}

#[test]
fn int64_math() {
    let exec = host();
    let mut rng = common::rng("int64_math");
    for (opt, ptx) in MATH {
        let k = load::<(P<i64>, P<i64>, P<i64>, i32)>(&exec, ptx, "i64_math");
        let n = 200;
        let (a, b) = i64_pairs(&mut rng, n);
        let (da, db) = (upload(&exec, &a), upload(&exec, &b));
        let out = poisoned(&exec, n * 14, POISON_I64);
        run(
            &exec,
            64,
            blocks_for(n, 64),
            &k,
            (da.ptr(), db.ptr(), out.ptr(), n as i32),
        );
        let got = download(&exec, &out);
        for i in 0..n {
            let (x, y) = (a[i], b[i]);
            let (ux, uy) = (x as u64, y as u64);
            let sh = (y & 63) as u32;
            let want = [
                x.wrapping_mul(y),
                x / y,
                x % y,
                (ux / uy) as i64,
                (ux % uy) as i64,
                (ux << sh) as i64,
                x >> sh,
                (ux >> sh) as i64,
                ((x as i128 * y as i128) >> 64) as i64,
                ((ux as u128 * uy as u128) >> 64) as i64,
                x.wrapping_add(y),
                x.wrapping_sub(y),
                x.min(y),
                ux.max(uy) as i64,
            ];
            assert_eq!(
                &got[i * 14..i * 14 + 14],
                &want,
                "{opt} a={x} b={y}: [mul div rem udiv urem shl sar shr mulhi umulhi add sub min umax]"
            );
        }
    }
}

/// Random doubles with edge values: zeros, infinities, NaN, denormals, extremes.
fn f64_values(rng: &mut StdRng, n: usize) -> Vec<f64> {
    let edges = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        f64::MIN_POSITIVE / 3.0,
        -5e-324,
        f64::MAX,
        f64::MIN,
        0.5,
        2.5,
        -3.5,
    ];
    (0..n)
        .map(|_| match rng.random_range(0..4) {
            0 => edges[rng.random_range(0..edges.len())],
            1 => f64::from_bits(rng.random()),
            _ => rng.random_range(-1e6..1e6),
        })
        .collect()
}

#[test]
fn double_math() {
    let exec = host();
    let mut rng = common::rng("double_math");
    for (opt, ptx) in MATH {
        let k = load::<(P<f64>, P<f64>, P<f64>, P<f64>, i32)>(&exec, ptx, "f64_math");
        let n = 300;
        let (a, b, c) = (
            f64_values(&mut rng, n),
            f64_values(&mut rng, n),
            f64_values(&mut rng, n),
        );
        let (da, db, dc) = (upload(&exec, &a), upload(&exec, &b), upload(&exec, &c));
        let out = poisoned(&exec, n * 9, POISON_F64);
        run(
            &exec,
            96,
            blocks_for(n, 96),
            &k,
            (da.ptr(), db.ptr(), dc.ptr(), out.ptr(), n as i32),
        );
        let got = download(&exec, &out);
        for i in 0..n {
            let (x, y, z) = (a[i], b[i], c[i]);
            let g = &got[i * 9..i * 9 + 9];
            // Correctly rounded IEEE operations: bit-exact (any NaN for NaN).
            let exact = [x * y, x + y, x - y, x / y, x.abs().sqrt(), x.mul_add(y, z)];
            for (j, w) in exact.iter().enumerate() {
                assert!(
                    same_f64(g[j], *w),
                    "{opt} op {j} on ({x:e}, {y:e}, {z:e}): {:e} vs {w:e}",
                    g[j]
                );
            }
            // min/max (minNum/maxNum): the non-NaN operand when one is NaN; the sign of a zero
            // result is not specified when both are zeros, so compare numerically.
            for (j, w) in [(6, x.min(y)), (7, x.max(y))] {
                assert!(
                    (g[j].is_nan() && w.is_nan()) || g[j] == w,
                    "{opt} {} ({x:e}, {y:e}): {:e} vs {w:e}",
                    if j == 6 { "min" } else { "max" },
                    g[j]
                );
            }
            assert!(same_f64(g[8], 1.0 / z), "{opt} 1/{z:e}: {:e}", g[8]);
        }
    }
}

/// Random floats for conversions: ties (k + 0.5), values near the integer limits, NaN, ±inf,
/// denormals, negative values for unsigned targets.
fn cvt_inputs(rng: &mut StdRng, n: usize) -> (Vec<f32>, Vec<f64>) {
    let edges = [
        0.5,
        1.5,
        2.5,
        -0.5,
        -1.5,
        -2.5,
        0.0,
        -0.0,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        4294967296.0,
        9.2233715e18,
        -9.2233720e18,
        1.8446743e19,
        3e38,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1e-40,
        -1e-45,
        1e300,
        -1e300,
        2147483647.5,
        4294967295.4,
        4294967295.6,
        -0.99,
        0.99,
    ];
    let mut f = Vec::with_capacity(n);
    let mut d = Vec::with_capacity(n);
    for _ in 0..n {
        let v: f64 = match rng.random_range(0..4) {
            0 => edges[rng.random_range(0..edges.len())],
            1 => rng.random_range(-1000i32..1000) as f64 + 0.5,
            2 => rng.random_range(-3e9..3e9),
            _ => f64::from_bits(rng.random()),
        };
        f.push(v as f32);
        d.push(if rng.random_bool(0.5) {
            v
        } else {
            rng.random_range(-1e20..1e20)
        });
    }
    (f, d)
}

#[test]
fn int_float_conversions() {
    let exec = host();
    let mut rng = common::rng("int_float_conversions");
    for (opt, ptx) in MATH {
        type A = (
            P<f32>,
            P<f64>,
            P<i32>,
            P<i64>,
            P<i32>,
            P<i64>,
            P<f32>,
            P<f64>,
            i32,
        );
        let k = load::<A>(&exec, ptx, "conversions");
        let n = 300;
        let (f, d) = cvt_inputs(&mut rng, n);
        let iv: Vec<i32> = (0..n)
            .map(|_| {
                if rng.random_bool(0.2) {
                    [i32::MIN, i32::MAX, -1, 0, 16777217][rng.random_range(0..5)]
                } else {
                    rng.random()
                }
            })
            .collect();
        let lv: Vec<i64> = (0..n)
            .map(|_| {
                if rng.random_bool(0.2) {
                    [
                        i64::MIN,
                        i64::MAX,
                        -1,
                        (1 << 53) + 1,
                        -(1 << 53) - 3,
                        1 << 62,
                    ][rng.random_range(0..6)]
                } else {
                    rng.random()
                }
            })
            .collect();
        let (df, dd, di, dl) = (
            upload(&exec, &f),
            upload(&exec, &d),
            upload(&exec, &iv),
            upload(&exec, &lv),
        );
        let oi = poisoned(&exec, n * 11, POISON_I32);
        let ol = poisoned(&exec, n * 9, POISON_I64);
        let of = poisoned(&exec, n * 11, POISON_F32);
        let od = poisoned(&exec, n * 7, POISON_F64);
        run(
            &exec,
            128,
            blocks_for(n, 128),
            &k,
            (
                df.ptr(),
                dd.ptr(),
                di.ptr(),
                dl.ptr(),
                oi.ptr(),
                ol.ptr(),
                of.ptr(),
                od.ptr(),
                n as i32,
            ),
        );
        let (gi, gl, gf, gd) = (
            download(&exec, &oi),
            download(&exec, &ol),
            download(&exec, &of),
            download(&exec, &od),
        );
        for i in 0..n {
            let (x, y, kk, l) = (f[i], d[i], iv[i], lv[i]);
            let xf = x as f64;
            // float -> int: round in the given direction, then saturate, NaN -> 0 (PTX cvt
            // with an integer destination clamps to the destination range; Rust's `as` does
            // exactly that).
            let want_i = [
                xf as i32,
                Round::N.integral(xf) as i32,
                Round::M.integral(xf) as i32,
                Round::P.integral(xf) as i32,
                y as i32,
                Round::N.integral(y) as i32,
                xf as u32 as i32,
                Round::P.integral(y) as u32 as i32,
                kk as i8 as i32,
                kk as u16 as i32,
                l as i16 as i32,
            ];
            assert_eq!(
                &gi[i * 11..i * 11 + 11],
                &want_i,
                "{opt} f={x:e} d={y:e} i={kk} l={l}: [f2i.rz rn rm rp d2i.rz rn f2u.rz d2u.rp s8 u16 s16]"
            );
            let want_l = [
                xf as i64,
                y as i64,
                y as u64 as i64,
                Round::N.integral(xf) as i64,
                Round::M.integral(xf) as u64 as i64,
                Round::M.integral(y) as i64,
                Round::P.integral(y) as i64,
                kk as i64,
                kk as u32 as i64,
            ];
            assert_eq!(
                &gl[i * 9..i * 9 + 9],
                &want_l,
                "{opt} f={x:e} d={y:e} i={kk}: [f2ll.rz d2ll.rz d2ull.rz f2ll.rn f2ull.rm d2ll.rm d2ll.rp sext zext]"
            );
            let want_f = [
                int_to_f32(kk as i128, Round::N),
                int_to_f32(kk as u32 as i128, Round::M),
                int_to_f32(kk as i128, Round::P),
                int_to_f32(l as i128, Round::N),
                int_to_f32(l as i128, Round::M),
                f64_to_f32(y, Round::N),
                f64_to_f32(y, Round::Z),
                f64_to_f32(y, Round::M),
                f64_to_f32(y, Round::P),
                int_to_f32(l as u64 as i128, Round::N),
            ];
            for (j, w) in want_f.iter().enumerate() {
                assert!(
                    same_f32(gf[i * 11 + j], *w),
                    "{opt} f32 result {j} (i={kk} l={l} d={y:e}): {:e} vs {w:e}",
                    gf[i * 11 + j]
                );
            }
            // cvt.sat.f32.f32: clamp to [0, 1], NaN -> 0 (compared numerically: ±0).
            let sat = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
            assert!(
                gf[i * 11 + 10] == sat,
                "{opt} saturate({x:e}): {:e}",
                gf[i * 11 + 10]
            );
            let want_d = [
                xf,
                kk as f64,
                int_to_f64(l as i128, Round::N),
                int_to_f64(l as i128, Round::M),
                int_to_f64(l as i128, Round::P),
                int_to_f64(l as u64 as i128, Round::N),
                int_to_f64(l as u64 as i128, Round::P),
            ];
            for (j, w) in want_d.iter().enumerate() {
                assert!(
                    same_f64(gd[i * 7 + j], *w),
                    "{opt} f64 result {j} (f={x:e} i={kk} l={l}): {:e} vs {w:e}",
                    gd[i * 7 + j]
                );
            }
        }
    }
}
