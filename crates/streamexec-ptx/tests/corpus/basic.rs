//! kernels/corpus_basic.cu: elementwise kernels, grid-stride loop, matmul, transpose.

use super::*;

#[test]
fn vadd_i32_f32_f64() {
    let exec = host();
    let mut rng = common::rng("vadd_i32_f32_f64");
    // (n, threads per block, extra blocks past the data)
    let shapes = [
        (1usize, 1u32, 0u32),
        (37, 32, 0),
        (1000, 128, 0),
        (100, 64, 3),
        (45, 1, 0),
    ];
    for (opt, ptx) in BASIC {
        let ki = load::<(P<i32>, P<i32>, P<i32>, i32)>(&exec, ptx, "vadd_i32");
        let kf = load::<(P<f32>, P<f32>, P<f32>, i32)>(&exec, ptx, "vadd_f32");
        let kd = load::<(P<f64>, P<f64>, P<f64>, i32)>(&exec, ptx, "vadd_f64");
        for (n, t, extra) in shapes {
            let b = blocks_for(n, t) + extra;
            // The output is one longer than n: the element past n must stay poisoned.
            let (a, c) = (
                ints(&mut rng, n, i32::MIN, i32::MAX),
                ints(&mut rng, n, i32::MIN, i32::MAX),
            );
            let (da, dc) = (upload(&exec, &a), upload(&exec, &c));
            let out = poisoned(&exec, n + 1, POISON_I32);
            run(&exec, t, b, &ki, (da.ptr(), dc.ptr(), out.ptr(), n as i32));
            let got = download(&exec, &out);
            for i in 0..n {
                assert_eq!(
                    got[i],
                    a[i].wrapping_add(c[i]),
                    "{opt} vadd_i32 n={n} t={t} i={i}"
                );
            }
            assert_eq!(got[n], POISON_I32, "{opt} vadd_i32 wrote past n");

            let (x, y) = (
                floats(&mut rng, n, -1e6, 1e6),
                floats(&mut rng, n, -1e6, 1e6),
            );
            let (dx, dy) = (upload(&exec, &x), upload(&exec, &y));
            let out = poisoned(&exec, n + 1, POISON_F32);
            run(&exec, t, b, &kf, (dx.ptr(), dy.ptr(), out.ptr(), n as i32));
            let got = download(&exec, &out);
            for i in 0..n {
                // f32 + f32 rounded once from the exact (f64) sum: exact.
                let want = (x[i] as f64 + y[i] as f64) as f32;
                assert!(
                    same_f32(got[i], want),
                    "{opt} vadd_f32 i={i}: {} vs {want}",
                    got[i]
                );
            }
            assert_eq!(
                got[n].to_bits(),
                POISON_F32.to_bits(),
                "{opt} vadd_f32 wrote past n"
            );

            let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1e12..1e12)).collect();
            let y: Vec<f64> = (0..n).map(|_| rng.random_range(-1e12..1e12)).collect();
            let (dx, dy) = (upload(&exec, &x), upload(&exec, &y));
            let out = poisoned(&exec, n + 1, POISON_F64);
            run(&exec, t, b, &kd, (dx.ptr(), dy.ptr(), out.ptr(), n as i32));
            let got = download(&exec, &out);
            for i in 0..n {
                assert!(same_f64(got[i], x[i] + y[i]), "{opt} vadd_f64 i={i}");
            }
            assert_eq!(
                got[n].to_bits(),
                POISON_F64.to_bits(),
                "{opt} vadd_f64 wrote past n"
            );
        }
    }
}

#[test]
fn saxpy() {
    let exec = host();
    let mut rng = common::rng("saxpy");
    for (opt, ptx) in BASIC {
        let k = load::<(i32, f32, P<f32>, P<f32>)>(&exec, ptx, "saxpy");
        for (n, t) in [(1usize, 1u32), (300, 96), (77, 32)] {
            let a = rng.random_range(-4.0f32..4.0);
            let (x, y) = (
                floats(&mut rng, n, -100.0, 100.0),
                floats(&mut rng, n, -100.0, 100.0),
            );
            let dx = upload(&exec, &x);
            let dy = upload(&exec, &y);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (n as i32, a, dx.ptr(), dy.ptr()),
            );
            let got = download(&exec, &dy);
            for i in 0..n {
                // The compiler may fuse a*x+y (fma.rn) or not: within one rounding of each
                // step of the exact value.
                let exact = a as f64 * x[i] as f64 + y[i] as f64;
                // (1.001: room for the second-order term of two roundings.)
                let tol = 1.001
                    * f32::EPSILON as f64
                    * ((a as f64 * x[i] as f64).abs() + y[i].abs() as f64);
                assert!(
                    (got[i] as f64 - exact).abs() <= tol,
                    "{opt} saxpy i={i}: {} vs {exact}",
                    got[i]
                );
            }
        }
    }
}

#[test]
fn grid_stride_loop() {
    let exec = host();
    let mut rng = common::rng("grid_stride_loop");
    for (opt, ptx) in BASIC {
        let k = load::<(i32, i32, P<i32>, P<i32>)>(&exec, ptx, "grid_stride_scale");
        // (n, threads, blocks): many iterations per thread, one thread, more threads than data.
        for (n, t, b) in [
            (1000usize, 32u32, 2u32),
            (50, 1, 1),
            (10, 48, 3),
            (333, 33, 5),
        ] {
            let kk = rng.random_range(-1000..1000);
            let x = ints(&mut rng, n, i32::MIN, i32::MAX);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, n + 1, POISON_I32);
            run(&exec, t, b, &k, (n as i32, kk, dx.ptr(), out.ptr()));
            let got = download(&exec, &out);
            for i in 0..n {
                let want = x[i].wrapping_mul(kk).wrapping_add(i as i32);
                assert_eq!(got[i], want, "{opt} n={n} t={t} b={b} i={i}");
            }
            assert_eq!(got[n], POISON_I32);
        }
    }
}

/// C = A·B in f64, and per element the sum of |a||b| (for the tolerance).
fn matmul_ref(a: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for r in 0..m {
        for col in 0..n {
            for p in 0..k {
                let prod = a[r * k + p] as f64 * b[p * n + col] as f64;
                c[r * n + col] += prod;
                mag[r * n + col] += prod.abs();
            }
        }
    }
    (c, mag)
}

fn check_matmul(opt: &str, name: &str, got: &[f32], want: &[f64], mag: &[f64], k: usize) {
    for (i, (&g, (&w, &s))) in got.iter().zip(want.iter().zip(mag)).enumerate() {
        // k f32 roundings (fused or not) of partial sums bounded by `s`.
        let tol = (k as f64 + 1.0) * f32::EPSILON as f64 * s + 1e-30;
        assert!(
            (g as f64 - w).abs() <= tol,
            "{opt} {name} element {i}: {g} vs {w} (tol {tol})"
        );
    }
}

#[test]
fn matmul_naive_and_tiled() {
    let exec = host();
    let mut rng = common::rng("matmul_naive_and_tiled");
    for (opt, ptx) in BASIC {
        type Mm = (P<f32>, P<f32>, P<f32>, i32, i32, i32);
        let naive = load::<Mm>(&exec, ptx, "matmul_naive");
        let tiled = load::<Mm>(&exec, ptx, "matmul_tiled");
        for (m, n, k) in [
            (13usize, 11usize, 9usize),
            (16, 16, 16),
            (1, 1, 1),
            (19, 10, 21),
        ] {
            let a = floats(&mut rng, m * k, -1.0, 1.0);
            let b = floats(&mut rng, k * n, -1.0, 1.0);
            let (want, mag) = matmul_ref(&a, &b, m, n, k);
            let (da, db) = (upload(&exec, &a), upload(&exec, &b));
            let dims = (m as i32, n as i32, k as i32);

            // Naive: 8×4 threads, a 2-D grid covering C (columns along x).
            let c = poisoned(&exec, m * n, POISON_F32);
            let grid = (n.div_ceil(8) as u32, m.div_ceil(4) as u32);
            run(
                &exec,
                (8, 4),
                grid,
                &naive,
                (da.ptr(), db.ptr(), c.ptr(), dims.0, dims.1, dims.2),
            );
            check_matmul(opt, "matmul_naive", &download(&exec, &c), &want, &mag, k);

            // Tiled: 8×8 tiles (MM_TILE), shared memory and two barriers per tile.
            let c = poisoned(&exec, m * n, POISON_F32);
            let grid = (n.div_ceil(8) as u32, m.div_ceil(8) as u32);
            run(
                &exec,
                (8, 8),
                grid,
                &tiled,
                (da.ptr(), db.ptr(), c.ptr(), dims.0, dims.1, dims.2),
            );
            check_matmul(opt, "matmul_tiled", &download(&exec, &c), &want, &mag, k);
        }
    }
}

#[test]
fn transpose_with_padded_shared_tile() {
    let exec = host();
    let mut rng = common::rng("transpose_with_padded_shared_tile");
    for (opt, ptx) in BASIC {
        let k = load::<(P<f32>, P<f32>, i32, i32)>(&exec, ptx, "transpose_shared");
        for (rows, cols) in [(13usize, 21usize), (8, 8), (1, 5), (17, 3)] {
            let a = floats(&mut rng, rows * cols, -1e3, 1e3);
            let da = upload(&exec, &a);
            let out = poisoned(&exec, rows * cols, POISON_F32);
            let grid = (cols.div_ceil(8) as u32, rows.div_ceil(8) as u32);
            run(
                &exec,
                (8, 8),
                grid,
                &k,
                (da.ptr(), out.ptr(), rows as i32, cols as i32),
            );
            let got = download(&exec, &out);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(
                        got[c * rows + r].to_bits(),
                        a[r * cols + c].to_bits(),
                        "{opt} {rows}x{cols} at ({r},{c})"
                    );
                }
            }
        }
    }
}
