//! The kernel cases: saxpy, the tiled matmul, the block tree reduction and the warp reduction.
//! Each sets up its inputs, computes the Rust result, checks every engine against it and times
//! them (`crate::bench_all`).

use criterion::{Criterion, Throughput};

use crate::baselines::{self, RED_THREADS, TILE};
use crate::common::{DevicePtr, TypedKernel};
use crate::pocl::Arg;
use crate::{Case, Env};
use crate::{bench_all, check_pocl, check_ptx, first_difference, launch, pocl_buffers, upload};
use crate::{random_f32, random_i32};

const SAXPY_THREADS: usize = 256;
const WARP_THREADS: usize = 256;

/// y = a x + y, one element per thread: bit-identical everywhere (one fma per element).
pub fn saxpy(c: &mut Criterion, env: &Env, case: Case) {
    let (exec, n, a) = (&env.exec, case.dims.0, 0.75f32);
    let (x, y0) = (random_f32(n, 1), random_f32(n, 2));
    let mut want = y0.clone();
    baselines::saxpy(a, &x, &mut want);
    let verify = |engine: &str, got: &[f32]| {
        let bad = first_difference(got, &want);
        assert!(bad.is_none(), "saxpy on {engine}: y[{bad:?}] differs");
    };
    let blocks = n.div_ceil(SAXPY_THREADS);

    let (dx, dy) = (upload(exec, &x), upload(exec, &y0));
    type Args = (u32, f32, DevicePtr<f32>, DevicePtr<f32>);
    let args: Args = (n as u32, a, dx.ptr(), dy.ptr());
    let run = |k: &TypedKernel<Args>| launch(exec, SAXPY_THREADS as u32, blocks as u32, k, args);
    let reset = || exec.synchronous_memcpy_h2d(&y0, &dy).expect("reset y");
    let kernels = check_ptx(env, "bench_saxpy", &run, &reset, &dy, &verify);

    let bufs = pocl_buffers(env, [&x[..], &y0[..]]);
    let pocl = env.pocl().zip(bufs.as_ref()).and_then(|(p, [cx, cy])| {
        let args = [Arg::U32(n as u32), Arg::F32(a), cx.into(), cy.into()];
        let l = p.launch("bench_saxpy", &args, [SAXPY_THREADS, 1], [blocks, 1]);
        check_pocl(l, "bench_saxpy", || p.read(cy, n), &verify)
    });

    let mut group = case.group(c);
    group.throughput(Throughput::Elements(n as u64));
    let mut y = y0.clone();
    let rust = || baselines::saxpy(a, &x, &mut y);
    bench_all(&mut group, env, rust, pocl, &kernels, &run);
    group.finish();
}

/// C = A B (n x n) by 16x16 tiles in shared memory: bit-identical everywhere (each element an
/// fma chain over k in order).
pub fn matmul(c: &mut Criterion, env: &Env, case: Case) {
    let (exec, n) = (&env.exec, case.dims.0);
    let (a, b) = (random_f32(n * n, 3), random_f32(n * n, 4));
    let mut want = vec![0.0f32; n * n];
    baselines::matmul(&a, &b, &mut want, n);
    let verify = |engine: &str, got: &[f32]| {
        let bad = first_difference(got, &want);
        assert!(bad.is_none(), "matmul on {engine}: c[{bad:?}] differs");
    };
    let poison = vec![f32::NAN; n * n];
    let g = n / TILE;

    let (da, db, dc) = (upload(exec, &a), upload(exec, &b), upload(exec, &poison));
    type Args = (DevicePtr<f32>, DevicePtr<f32>, DevicePtr<f32>, u32);
    let args: Args = (da.ptr(), db.ptr(), dc.ptr(), n as u32);
    let (threads, blocks) = ((TILE as u32, TILE as u32), (g as u32, g as u32));
    let run = |k: &TypedKernel<Args>| launch(exec, threads, blocks, k, args);
    let reset = || exec.synchronous_memcpy_h2d(&poison, &dc).expect("poison c");
    let kernels = check_ptx(env, "bench_matmul", &run, &reset, &dc, &verify);

    let bufs = pocl_buffers(env, [&a[..], &b[..], &poison[..]]);
    let pocl = env.pocl().zip(bufs.as_ref()).and_then(|(p, [ca, cb, cc])| {
        let args = [ca.into(), cb.into(), cc.into(), Arg::U32(n as u32)];
        let l = p.launch("bench_matmul", &args, [TILE, TILE], [g, g]);
        check_pocl(l, "bench_matmul", || p.read(cc, n * n), &verify)
    });

    let mut group = case.group(c);
    group.throughput(Throughput::Elements((n * n * n) as u64));
    let mut out = vec![0.0f32; n * n];
    let rust = || baselines::matmul(&a, &b, &mut out, n);
    bench_all(&mut group, env, rust, pocl, &kernels, &run);
    group.finish();
}

/// One sum per block of 256 by a tree in shared memory, against Rust's left-to-right sums:
/// within a stated bound.
pub fn block_reduce(c: &mut Criterion, env: &Env, case: Case) {
    let (exec, n) = (&env.exec, case.dims.0);
    let blocks = n.div_ceil(RED_THREADS);
    let x = random_f32(n, 5);
    let mut want = vec![0.0f32; blocks];
    baselines::block_reduce(&x, &mut want);
    // A sum of m = 256 terms in any order is within gamma_(m-1) * sum |x| of the exact sum; the
    // tree's depth is 8, so Rust's left-to-right sum and the tree differ by at most
    // (gamma_255 + gamma_8) * sum |x| <= 264 u (1.01) * sum |x|.
    let abs_sums: Vec<f64> = x
        .chunks(RED_THREADS)
        .map(|c| c.iter().map(|v| f64::from(v.abs())).sum())
        .collect();
    let factor = 264.0 * f64::from(f32::EPSILON) / 2.0 * 1.01;
    let verify = |engine: &str, got: &[f32]| {
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let ok = (f64::from(*g) - f64::from(*w)).abs() <= factor * abs_sums[i];
            assert!(ok, "block reduce on {engine}: [{i}] = {g}, Rust {w}");
        }
    };
    let poison = vec![f32::NAN; blocks];

    let (dx, dp) = (upload(exec, &x), upload(exec, &poison));
    type Args = (DevicePtr<f32>, DevicePtr<f32>, u32);
    let args: Args = (dx.ptr(), dp.ptr(), n as u32);
    let run = |k: &TypedKernel<Args>| launch(exec, RED_THREADS as u32, blocks as u32, k, args);
    let reset = || exec.synchronous_memcpy_h2d(&poison, &dp).expect("poison");
    let kernels = check_ptx(env, "bench_block_reduce", &run, &reset, &dp, &verify);

    let bufs = pocl_buffers(env, [&x[..], &poison[..]]);
    let pocl = env.pocl().zip(bufs.as_ref()).and_then(|(p, [cx, cp])| {
        let args = [cx.into(), cp.into(), Arg::U32(n as u32)];
        let l = p.launch("bench_block_reduce", &args, [RED_THREADS, 1], [blocks, 1]);
        check_pocl(l, "bench_block_reduce", || p.read(cp, blocks), &verify)
    });

    let mut group = case.group(c);
    group.throughput(Throughput::Elements(n as u64));
    let mut out = vec![0.0f32; blocks];
    let rust = || baselines::block_reduce(&x, &mut out);
    bench_all(&mut group, env, rust, pocl, &kernels, &run);
    group.finish();
}

/// One wrapping i32 sum per 32 threads (`shfl.sync.down` in the PTX, local memory in the
/// OpenCL C): exact everywhere.
pub fn warp_reduce(c: &mut Criterion, env: &Env, case: Case) {
    let (exec, n) = (&env.exec, case.dims.0);
    let warps = n.div_ceil(32);
    let x = random_i32(n, 6);
    let mut want = vec![0i32; warps];
    baselines::warp_reduce(&x, &mut want);
    let verify = |engine: &str, got: &[i32]| {
        let bad = got.iter().zip(&want).position(|(g, w)| g != w);
        assert!(bad.is_none(), "warp reduce on {engine}: [{bad:?}] differs");
    };
    let poison = vec![i32::MIN; warps];
    let blocks = n.div_ceil(WARP_THREADS);

    let (dx, dp) = (upload(exec, &x), upload(exec, &poison));
    type Args = (DevicePtr<i32>, DevicePtr<i32>, u32);
    let args: Args = (dx.ptr(), dp.ptr(), n as u32);
    let run = |k: &TypedKernel<Args>| launch(exec, WARP_THREADS as u32, blocks as u32, k, args);
    let reset = || exec.synchronous_memcpy_h2d(&poison, &dp).expect("poison");
    let kernels = check_ptx(env, "bench_warp_reduce", &run, &reset, &dp, &verify);

    let bufs = pocl_buffers(env, [&x[..], &poison[..]]);
    let pocl = env.pocl().zip(bufs.as_ref()).and_then(|(p, [cx, cp])| {
        let args = [cx.into(), cp.into(), Arg::U32(n as u32)];
        let l = p.launch("bench_warp_reduce", &args, [WARP_THREADS, 1], [blocks, 1]);
        check_pocl(l, "bench_warp_reduce", || p.read(cp, warps), &verify)
    });

    let mut group = case.group(c);
    group.throughput(Throughput::Elements(n as u64));
    let mut out = vec![0i32; warps];
    let rust = || baselines::warp_reduce(&x, &mut out);
    bench_all(&mut group, env, rust, pocl, &kernels, &run);
    group.finish();
}
