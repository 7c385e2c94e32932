//! The workload-shaped cases: an image filter (a 3x3 blur through shared-memory tiles with a
//! halo, borders clamped) and a layer normalisation (per-row mean and variance by block
//! reductions, then the row normalised, scaled and shifted). Both are bit-identical on every
//! engine: the blur's products are exact (power-of-two weights) and its sums run in one order,
//! and the normalisation's Rust baseline keeps the kernel's order of additions (256 running
//! sums, then the tree), with correctly rounded division and square root on every side
//! (`div.rn` / `sqrt.rn` in the PTX, `-cl-fp32-correctly-rounded-divide-sqrt` for PoCL).

use criterion::{Criterion, Throughput};

use crate::baselines::{self, NORM_THREADS, TILE};
use crate::common::{DevicePtr, TypedKernel};
use crate::pocl::Arg;
use crate::random_f32;
use crate::{Case, Env};
use crate::{bench_all, check_pocl, check_ptx, first_difference, launch, pocl_buffers, upload};

/// A w x h image (`case.dims`) blurred by the 3x3 binomial filter; 16x16 threads per block,
/// partial blocks at the right and bottom edges where the size is not a multiple of 16.
pub fn blur(c: &mut Criterion, env: &Env, case: Case) {
    let (exec, (w, h)) = (&env.exec, case.dims);
    let image = random_f32(w * h, 7);
    let mut want = vec![0.0f32; w * h];
    baselines::blur(&image, &mut want, w, h);
    let verify = |engine: &str, got: &[f32]| {
        let bad = first_difference(got, &want).map(|i| (i % w, i / w));
        assert!(
            bad.is_none(),
            "blur on {engine}: pixel (x, y) {bad:?} differs"
        );
    };
    let poison = vec![f32::NAN; w * h];
    let (gx, gy) = (w.div_ceil(TILE), h.div_ceil(TILE));

    let (din, dout) = (upload(exec, &image), upload(exec, &poison));
    type Args = (DevicePtr<f32>, DevicePtr<f32>, u32, u32);
    let args: Args = (din.ptr(), dout.ptr(), w as u32, h as u32);
    let (threads, blocks) = ((TILE as u32, TILE as u32), (gx as u32, gy as u32));
    let run = |k: &TypedKernel<Args>| launch(exec, threads, blocks, k, args);
    let reset = || exec.synchronous_memcpy_h2d(&poison, &dout).expect("poison");
    let kernels = check_ptx(env, "bench_blur", &run, &reset, &dout, &verify);

    let bufs = pocl_buffers(env, [&image[..], &poison[..]]);
    let pocl = env.pocl().zip(bufs.as_ref()).and_then(|(p, [cin, cout])| {
        let args = [
            cin.into(),
            cout.into(),
            Arg::U32(w as u32),
            Arg::U32(h as u32),
        ];
        let l = p.launch("bench_blur", &args, [TILE, TILE], [gx, gy]);
        check_pocl(l, "bench_blur", || p.read(cout, w * h), &verify)
    });

    let mut group = case.group(c);
    group.throughput(Throughput::Elements((w * h) as u64));
    let mut out = vec![0.0f32; w * h];
    let rust = || baselines::blur(&image, &mut out, w, h);
    bench_all(&mut group, env, rust, pocl, &kernels, &run);
    group.finish();
}

/// Layer normalisation of a rows x cols matrix (`case.dims`), one block of 256 threads per
/// row. The rows are shifted apart (means from -2 to 2) so that the mean matters.
pub fn layernorm(c: &mut Criterion, env: &Env, case: Case) {
    let (exec, (rows, cols)) = (&env.exec, case.dims);
    let eps = 1e-5f32;
    let mut x = random_f32(rows * cols, 8);
    for (r, row) in x.chunks_mut(cols).enumerate() {
        let shift = (r % 5) as f32 - 2.0;
        row.iter_mut().for_each(|v| *v = v.mul_add(3.0, shift));
    }
    let gamma: Vec<f32> = random_f32(cols, 9).iter().map(|v| 1.0 + v / 4.0).collect();
    let beta = random_f32(cols, 10);
    let mut want = vec![0.0f32; rows * cols];
    baselines::layernorm(&x, &gamma, &beta, &mut want, cols, eps);
    let verify = |engine: &str, got: &[f32]| {
        let bad = first_difference(got, &want).map(|i| (i / cols, i % cols));
        assert!(
            bad.is_none(),
            "layernorm on {engine}: (row, col) {bad:?} differs"
        );
    };
    let poison = vec![f32::NAN; rows * cols];

    let (dx, dg, db) = (upload(exec, &x), upload(exec, &gamma), upload(exec, &beta));
    let dy = upload(exec, &poison);
    type Args = (
        DevicePtr<f32>,
        DevicePtr<f32>,
        DevicePtr<f32>,
        DevicePtr<f32>,
        u32,
        f32,
    );
    let args: Args = (dx.ptr(), dg.ptr(), db.ptr(), dy.ptr(), cols as u32, eps);
    let run = |k: &TypedKernel<Args>| launch(exec, NORM_THREADS as u32, rows as u32, k, args);
    let reset = || exec.synchronous_memcpy_h2d(&poison, &dy).expect("poison");
    let kernels = check_ptx(env, "bench_layernorm", &run, &reset, &dy, &verify);

    let bufs = pocl_buffers(env, [&x[..], &gamma[..], &beta[..], &poison[..]]);
    let pocl = env
        .pocl()
        .zip(bufs.as_ref())
        .and_then(|(p, [cx, cg, cb, cy])| {
            let (cols32, dims) = (Arg::U32(cols as u32), [NORM_THREADS, 1]);
            let args = [
                cx.into(),
                cg.into(),
                cb.into(),
                cy.into(),
                cols32,
                Arg::F32(eps),
            ];
            let l = p.launch("bench_layernorm", &args, dims, [rows, 1]);
            check_pocl(l, "bench_layernorm", || p.read(cy, rows * cols), &verify)
        });

    let mut group = case.group(c);
    group.throughput(Throughput::Elements((rows * cols) as u64));
    let mut out = vec![0.0f32; rows * cols];
    let rust = || baselines::layernorm(&x, &gamma, &beta, &mut out, cols, eps);
    bench_all(&mut group, env, rust, pocl, &kernels, &run);
    group.finish();
}
