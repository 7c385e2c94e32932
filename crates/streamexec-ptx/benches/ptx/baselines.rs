//! The Rust baselines: each kernel's work as plain rayon loops, no streamexec. Where the
//! kernel's arithmetic has one order (saxpy, matmul, the blur, the layer normalisation) the
//! baseline keeps it, so the engines' results can be checked bit for bit; where the order is
//! the kernel's own business (the block reduction's tree) the baseline sums left to right, as a
//! Rust programmer would, and the check allows for the difference.

use rayon::prelude::*;

/// The matmul's tile and the blur's (CUDA blocks of TILE x TILE threads).
pub const TILE: usize = 16;
/// Threads per block of the block reduction.
pub const RED_THREADS: usize = 256;
/// Threads per block (one block per row) of the layer normalisation.
pub const NORM_THREADS: usize = 256;

pub fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    y.par_chunks_mut(1 << 14)
        .zip(x.par_chunks(1 << 14))
        .for_each(|(y, x)| saxpy_chunk(a, x, y));
}

/// `mul_add`: the PTX is one `fma.rn.f32` per element, so both round once (bit-identical).
#[inline(always)]
fn saxpy_body(a: f32, x: &[f32], y: &mut [f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = a.mul_add(*x, *y);
    }
}

/// C = A * B (n x n, row-major), tiled like the kernel: rayon over TILE-row blocks of C.
pub fn matmul(a: &[f32], b: &[f32], c: &mut [f32], n: usize) {
    c.par_chunks_mut(TILE * n)
        .enumerate()
        .for_each(|(rb, rows)| matmul_rows(a, b, rows, rb * TILE, n));
}

/// Rows `row0..` of C (`rows`), TILE x TILE blocks of A and B in i-k-j order (the j loop
/// vectorizes). Each C element is an fma chain over k = 0..n in order, as in the kernel, so the
/// two agree bit for bit.
#[inline(always)]
fn matmul_rows_body(a: &[f32], b: &[f32], rows: &mut [f32], row0: usize, n: usize) {
    rows.fill(0.0);
    for kk in (0..n).step_by(TILE) {
        for jj in (0..n).step_by(TILE) {
            for (i, crow) in rows.chunks_mut(n).enumerate() {
                let arow = &a[(row0 + i) * n..][..n];
                let cblk = &mut crow[jj..jj + TILE];
                for k in kk..kk + TILE {
                    let (aik, brow) = (arow[k], &b[k * n + jj..][..TILE]);
                    for (c, b) in cblk.iter_mut().zip(brow) {
                        *c = aik.mul_add(*b, *c);
                    }
                }
            }
        }
    }
}

/// `partial[b]` = the sum of `x`'s b-th run of RED_THREADS elements, left to right.
pub fn block_reduce(x: &[f32], partial: &mut [f32]) {
    partial
        .par_iter_mut()
        .zip(x.par_chunks(RED_THREADS))
        .with_min_len(64)
        .for_each(|(p, c)| *p = c.iter().sum());
}

/// `partial[w]` = the wrapping sum of `x`'s w-th run of 32 elements.
pub fn warp_reduce(x: &[i32], partial: &mut [i32]) {
    partial
        .par_iter_mut()
        .zip(x.par_chunks(32))
        .with_min_len(512)
        .for_each(|(p, c)| *p = c.iter().fold(0, |s, v| s.wrapping_add(*v)));
}

/// The 3x3 binomial filter [1 2 1; 2 4 2; 1 2 1] / 16 of bench_blur, by row then column.
/// Powers of two: every product with a float is exact.
pub const BLUR_WEIGHTS: [[f32; 3]; 3] = [
    [0.0625, 0.125, 0.0625],
    [0.125, 0.25, 0.125],
    [0.0625, 0.125, 0.0625],
];

/// `out` = `input` (w x h, row-major) blurred by `BLUR_WEIGHTS`, coordinates clamped into the
/// image: rayon over rows.
pub fn blur(input: &[f32], out: &mut [f32], w: usize, h: usize) {
    out.par_chunks_mut(w)
        .enumerate()
        .for_each(|(y, row)| blur_row(input, row, y, w, h));
}

/// Row `y` of the blur. Each pixel is the kernel's chain of 9 fmas from 0, row by row; the
/// interior runs over three row slices without clamping (it vectorizes), the two edge columns
/// clamp.
#[inline(always)]
fn blur_row_body(input: &[f32], row: &mut [f32], y: usize, w: usize, h: usize) {
    let rows = [y.saturating_sub(1), y, (y + 1).min(h - 1)].map(|r| &input[r * w..][..w]);
    let pixel = |x: usize| {
        let xs = [x.saturating_sub(1), x, (x + 1).min(w - 1)];
        let mut acc = 0.0f32;
        for (r, weights) in rows.iter().zip(&BLUR_WEIGHTS) {
            for (&c, wt) in xs.iter().zip(weights) {
                acc = wt.mul_add(r[c], acc);
            }
        }
        acc
    };
    row[0] = pixel(0);
    if w > 1 {
        row[w - 1] = pixel(w - 1);
    }
    if w > 2 {
        let [r0, r1, r2] = rows;
        let taps = r0.windows(3).zip(r1.windows(3)).zip(r2.windows(3));
        for (o, ((a, b), c)) in row[1..w - 1].iter_mut().zip(taps) {
            let mut acc = 0.0f32;
            for (r, weights) in [a, b, c].iter().zip(&BLUR_WEIGHTS) {
                for (v, wt) in r.iter().zip(weights) {
                    acc = wt.mul_add(*v, acc);
                }
            }
            *o = acc;
        }
    }
}

/// Layer normalisation of each row of `x` (`cols` wide) into `y`, one row per rayon task.
pub fn layernorm(x: &[f32], gamma: &[f32], beta: &[f32], y: &mut [f32], cols: usize, eps: f32) {
    y.par_chunks_mut(cols)
        .zip(x.par_chunks(cols))
        .for_each(|(out, row)| layernorm_row(row, gamma, beta, out, eps));
}

/// One row, in bench_layernorm's order: NORM_THREADS running sums (sum k of row[k * 256 + t],
/// in k order: a vector add per 256 elements), the block reduction's tree over them, the same
/// again for the squared deviations (fma), then `fma((x - mean) * rstd, gamma, beta)`.
/// Division and `sqrt` round correctly in Rust as in the PTX (`div.rn`, `sqrt.rn`, `rcp.rn`).
#[inline(always)]
fn layernorm_row_body(row: &[f32], gamma: &[f32], beta: &[f32], out: &mut [f32], eps: f32) {
    let cols = row.len() as f32;
    let mut lanes = [0.0f32; NORM_THREADS];
    for chunk in row.chunks(NORM_THREADS) {
        for (l, v) in lanes.iter_mut().zip(chunk) {
            *l += v;
        }
    }
    let mean = tree_sum(&mut lanes) / cols;
    lanes.fill(0.0);
    for chunk in row.chunks(NORM_THREADS) {
        for (l, v) in lanes.iter_mut().zip(chunk) {
            let d = v - mean;
            *l = d.mul_add(d, *l);
        }
    }
    let rstd = 1.0 / (tree_sum(&mut lanes) / cols + eps).sqrt();
    for (((o, v), g), b) in out.iter_mut().zip(row).zip(gamma).zip(beta) {
        *o = ((v - mean) * rstd).mul_add(*g, *b);
    }
}

/// The block reduction's tree: at each level (stride 128, 64, .., 1) `s[t] += s[t + stride]`
/// for t < stride; the sum ends in `s[0]`.
#[inline(always)]
pub fn tree_sum(s: &mut [f32]) -> f32 {
    let mut stride = s.len() / 2;
    while stride > 0 {
        let (lo, hi) = s.split_at_mut(stride);
        for (a, b) in lo.iter_mut().zip(&hi[..stride]) {
            *a += b;
        }
        stride /= 2;
    }
    s[0]
}

/// Defines `$name(args)`, which runs `$body(args)` (an `#[inline(always)]` function) compiled
/// with the CPU's FMA instructions where it has them (checked at run time), else as is:
/// `f32::mul_add` without them is a libm call per element, too slow for a fair baseline.
macro_rules! with_fma {
    ($name:ident => $body:ident($($arg:ident: $ty:ty),*)) => {
        fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "fma")]
                fn fma($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU has FMA (checked just above), the one feature `fma` needs.
                    return unsafe { fma($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}

with_fma!(saxpy_chunk => saxpy_body(a: f32, x: &[f32], y: &mut [f32]));
with_fma!(matmul_rows => matmul_rows_body(a: &[f32], b: &[f32], rows: &mut [f32], row0: usize, n: usize));
with_fma!(blur_row => blur_row_body(input: &[f32], row: &mut [f32], y: usize, w: usize, h: usize));
with_fma!(layernorm_row => layernorm_row_body(row: &[f32], gamma: &[f32], beta: &[f32], out: &mut [f32], eps: f32));
