//! The kernels of benches/ptx.rs (kernels/bench.cu, clang-19 at -O0 and -O3) at small sizes on
//! the host platform's default PTX engine, against plain Rust references on random inputs
//! (`STREAMEXEC_TEST_SEED` replays a run), outputs poisoned. Every comparison is exact: the PTX
//! of saxpy, matmul and the blur rounds with `fma.rn.f32` (one rounding, as `f32::mul_add`) in
//! the source's order, the block reduction's tree and the layer normalisation's reductions are
//! replayed in the same order (with `div.rn`/`sqrt.rn`/`rcp.rn`, which round correctly as
//! Rust's `/` and `sqrt` do), and the warp reduction adds integers (wrapping, as `add.s32`).
//! `scripts/ptx-engines-agree.sh` runs these on both engines and compares every download.

mod common;

use common::DevicePtr;
use rand::RngExt;
use rand::rngs::StdRng;

use common::*;

const BUILDS: [(&str, &str); 2] = [
    ("O0", include_str!("../../../kernels/ptx/bench.O0.ptx")),
    ("O3", include_str!("../../../kernels/ptx/bench.O3.ptx")),
];

type P<T> = DevicePtr<T>;

fn floats(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-4.0f32..4.0)).collect()
}

#[test]
fn saxpy_matches_mul_add_and_leaves_elements_past_n() {
    let exec = host();
    let mut rng = common::rng("saxpy");
    for (build, ptx) in BUILDS {
        let k = load::<(u32, f32, P<f32>, P<f32>)>(&exec, ptx, "bench_saxpy");
        for _ in 0..3 {
            let n = rng.random_range(1..3000usize);
            // A tail past n that the kernel must not touch, and a grid larger than n.
            let len = n + 37;
            let a = rng.random_range(0.5f32..2.0);
            let (x, y0) = (floats(&mut rng, len), floats(&mut rng, len));
            let (dx, dy) = (upload(&exec, &x), upload(&exec, &y0));
            let blocks = (len as u32).div_ceil(256) + 1;
            run(&exec, 256, blocks, &k, (n as u32, a, dx.ptr(), dy.ptr()));
            let got = download(&exec, &dy);
            for i in 0..len {
                let want = if i < n { a.mul_add(x[i], y0[i]) } else { y0[i] };
                assert!(
                    same_f32(got[i], want),
                    "{build} n={n}: y[{i}] {} != {want}",
                    got[i]
                );
            }
        }
    }
}

#[test]
fn tiled_matmul_matches_an_fma_chain_in_k_order() {
    let exec = host();
    let mut rng = common::rng("matmul");
    for (build, ptx) in BUILDS {
        let k = load::<(P<f32>, P<f32>, P<f32>, u32)>(&exec, ptx, "bench_matmul");
        for tiles in [1usize, 2, 5] {
            let n = 16 * tiles;
            let (a, b) = (floats(&mut rng, n * n), floats(&mut rng, n * n));
            let (da, db) = (upload(&exec, &a), upload(&exec, &b));
            let dc = poisoned(&exec, n * n, POISON_F32);
            let g = tiles as u32;
            run(
                &exec,
                (16, 16),
                (g, g),
                &k,
                (da.ptr(), db.ptr(), dc.ptr(), n as u32),
            );
            let got = download(&exec, &dc);
            for r in 0..n {
                for c in 0..n {
                    let want =
                        (0..n).fold(0.0f32, |acc, k| a[r * n + k].mul_add(b[k * n + c], acc));
                    let g = got[r * n + c];
                    assert!(
                        same_f32(g, want),
                        "{build} n={n}: c[{r}][{c}] {g} != {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn block_reduce_matches_the_same_tree() {
    const THREADS: usize = 256;
    let exec = host();
    let mut rng = common::rng("block_reduce");
    for (build, ptx) in BUILDS {
        let k = load::<(P<f32>, P<f32>, u32)>(&exec, ptx, "bench_block_reduce");
        for _ in 0..3 {
            let n = rng.random_range(1..3000usize);
            let blocks = n.div_ceil(THREADS);
            let x = floats(&mut rng, n);
            let (dx, dp) = (upload(&exec, &x), poisoned(&exec, blocks, POISON_F32));
            run(
                &exec,
                THREADS as u32,
                blocks as u32,
                &k,
                (dx.ptr(), dp.ptr(), n as u32),
            );
            let got = download(&exec, &dp);
            for (blk, g) in got.iter().enumerate() {
                let mut s: Vec<f32> = (0..THREADS)
                    .map(|t| x.get(blk * THREADS + t).copied().unwrap_or(0.0))
                    .collect();
                let mut stride = THREADS / 2;
                while stride > 0 {
                    for t in 0..stride {
                        s[t] += s[t + stride];
                    }
                    stride /= 2;
                }
                assert!(
                    same_f32(*g, s[0]),
                    "{build} n={n}: block {blk}: {g} != {}",
                    s[0]
                );
            }
        }
    }
}

#[test]
fn warp_reduce_matches_wrapping_sums_per_warp() {
    let exec = host();
    let mut rng = common::rng("warp_reduce");
    for (build, ptx) in BUILDS {
        let k = load::<(P<i32>, P<i32>, u32)>(&exec, ptx, "bench_warp_reduce");
        for threads in [32u32, 96, 256] {
            let n = rng.random_range(1..3000usize);
            let blocks = (n as u32).div_ceil(threads);
            // Every launched warp writes its entry (0 for warps wholly past n).
            let warps = (blocks * threads / 32) as usize;
            // Full-range values, so the sums wrap.
            let x: Vec<i32> = (0..n).map(|_| rng.random()).collect();
            let (dx, dp) = (upload(&exec, &x), poisoned(&exec, warps, POISON_I32));
            run(&exec, threads, blocks, &k, (dx.ptr(), dp.ptr(), n as u32));
            let got = download(&exec, &dp);
            for (w, g) in got.iter().enumerate() {
                let want = x
                    .iter()
                    .skip(w * 32)
                    .take(32)
                    .fold(0i32, |s, v| s.wrapping_add(*v));
                assert_eq!(*g, want, "{build} n={n} threads={threads}: warp {w}");
            }
        }
    }
}

#[test]
fn blur_matches_the_binomial_filter_with_clamped_borders() {
    // [1 2 1; 2 4 2; 1 2 1] / 16 by row then column, as the kernel's fma chain runs.
    const W: [[f32; 3]; 3] = [
        [0.0625, 0.125, 0.0625],
        [0.125, 0.25, 0.125],
        [0.0625, 0.125, 0.0625],
    ];
    let exec = host();
    let mut rng = common::rng("blur");
    for (build, ptx) in BUILDS {
        let k = load::<(P<f32>, P<f32>, u32, u32)>(&exec, ptx, "bench_blur");
        // One pixel, whole tiles, and partial tiles at the right and bottom edges.
        let random = (rng.random_range(1..70usize), rng.random_range(1..70usize));
        for (w, h) in [(1, 1), (16, 16), (17, 5), (3, 40), random] {
            let image = floats(&mut rng, w * h);
            let (din, dout) = (upload(&exec, &image), poisoned(&exec, w * h, POISON_F32));
            let blocks = (w.div_ceil(16) as u32, h.div_ceil(16) as u32);
            run(
                &exec,
                (16, 16),
                blocks,
                &k,
                (din.ptr(), dout.ptr(), w as u32, h as u32),
            );
            let got = download(&exec, &dout);
            let at = |x: isize, y: isize| {
                let x = x.clamp(0, w as isize - 1) as usize;
                image[y.clamp(0, h as isize - 1) as usize * w + x]
            };
            for y in 0..h as isize {
                for x in 0..w as isize {
                    let mut want = 0.0f32;
                    for dy in -1..=1 {
                        for dx in -1..=1 {
                            let wt = W[(dy + 1) as usize][(dx + 1) as usize];
                            want = wt.mul_add(at(x + dx, y + dy), want);
                        }
                    }
                    let g = got[y as usize * w + x as usize];
                    assert!(
                        same_f32(g, want),
                        "{build} {w}x{h}: ({x}, {y}) {g} != {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn layernorm_matches_the_same_reductions_and_rounding() {
    const THREADS: usize = 256;
    // The kernel's block reduction: THREADS running sums (thread t adds elements t, t + 256,
    // ... in order, with `add`), then the tree.
    fn block_sum(row: &[f32], term: impl Fn(f32, f32) -> f32) -> f32 {
        let mut s = [0.0f32; THREADS];
        for (j, v) in row.iter().enumerate() {
            s[j % THREADS] = term(*v, s[j % THREADS]);
        }
        let mut stride = THREADS / 2;
        while stride > 0 {
            for t in 0..stride {
                s[t] += s[t + stride];
            }
            stride /= 2;
        }
        s[0]
    }
    let exec = host();
    let mut rng = common::rng("layernorm");
    for (build, ptx) in BUILDS {
        let k = load::<(P<f32>, P<f32>, P<f32>, P<f32>, u32, f32)>(&exec, ptx, "bench_layernorm");
        // Fewer columns than threads, one per thread, and a partial last stride.
        for cols in [1usize, 7, 256, 300, rng.random_range(1..1200)] {
            let rows = rng.random_range(1..5usize);
            let eps = 1e-5f32;
            let mut x = floats(&mut rng, rows * cols);
            for (r, row) in x.chunks_mut(cols).enumerate() {
                row.iter_mut().for_each(|v| *v += r as f32);
            }
            let (gamma, beta) = (floats(&mut rng, cols), floats(&mut rng, cols));
            let (dx, dg, db) = (
                upload(&exec, &x),
                upload(&exec, &gamma),
                upload(&exec, &beta),
            );
            let dy = poisoned(&exec, rows * cols, POISON_F32);
            let args = (dx.ptr(), dg.ptr(), db.ptr(), dy.ptr(), cols as u32, eps);
            run(&exec, THREADS as u32, rows as u32, &k, args);
            let got = download(&exec, &dy);
            for (r, row) in x.chunks(cols).enumerate() {
                let n = cols as f32;
                let mean = block_sum(row, |v, acc| acc + v) / n;
                let var = block_sum(row, |v, acc| (v - mean).mul_add(v - mean, acc)) / n;
                let rstd = 1.0 / (var + eps).sqrt();
                for (j, v) in row.iter().enumerate() {
                    let want = ((v - mean) * rstd).mul_add(gamma[j], beta[j]);
                    let g = got[r * cols + j];
                    assert!(
                        same_f32(g, want),
                        "{build} {rows}x{cols}: ({r}, {j}) {g} != {want}"
                    );
                }
            }
        }
    }
}
