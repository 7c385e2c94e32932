//! The BLAS plugins of one platform against each other, in one run:
//!
//! - `opencl_sgemm_256` / `opencl_sgemm_512`: n³ `then_blas_gemm` (f32, no transposes, alpha 1,
//!   beta 0) + `block_host_until_done` on OpenCL device 0, through an executor created with
//!   `Plugin::Builtin` for BLAS (the built-in OpenCL C kernels, the baseline) and one with
//!   `Plugin::Vendor` (CLBlast). Same inputs, same stream shape; each result is checked
//!   against an f64 reference before timing. CLBlast's first call compiles its kernels; that
//!   happens in the check, not in the timing.
//!
//! When the `opencl` platform or CLBlast is missing, the cases that need it print why and are
//! skipped.
//!
//! Run with `cargo bench -p streamexec --bench plugins`.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use streamexec::{DeviceMemory, PlatformManager, Plugin, PluginConfig, StreamExecutor, Transpose};

const SIZES: [usize; 2] = [256, 512];

fn executor(blas: Plugin) -> Option<StreamExecutor> {
    let platform = PlatformManager::platform_with_name("opencl")
        .map_err(|e| eprintln!("opencl unavailable: {e}"))
        .ok()?;
    platform
        .executor_for_device_with(0, PluginConfig::default().blas(blas))
        .map_err(|e| eprintln!("opencl with BLAS {blas}: {e}"))
        .ok()
}

/// Deterministic inputs in [-1, 1).
fn input(n: usize, salt: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let h = (i ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            (h as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn gemm(
    s: &mut streamexec::Stream,
    n: usize,
    [a, b, c]: [&DeviceMemory<f32>; 3],
) -> streamexec::Result<()> {
    s.then_blas_gemm(
        Transpose::None,
        Transpose::None,
        n,
        n,
        n,
        1.0f32,
        a,
        n,
        b,
        n,
        0.0,
        c,
        n,
    )
    .block_host_until_done()
}

/// Checks C = A·B against f64 sums on a sample of elements.
fn check(name: &str, n: usize, a: &[f32], b: &[f32], c: &[f32]) {
    for idx in (0..n * n).step_by(n * n / 97 + 1) {
        let (i, j) = (idx % n, idx / n);
        let want: f64 = (0..n)
            .map(|l| f64::from(a[i + l * n]) * f64::from(b[l + j * n]))
            .sum();
        let got = f64::from(c[idx]);
        assert!(
            (got - want).abs() <= 1e-4 * n as f64,
            "{name}: C[{i},{j}] = {got}, want {want}"
        );
    }
}

fn sgemm(c: &mut Criterion) {
    let plugins = [("builtin", Plugin::Builtin), ("clblast", Plugin::Vendor)];
    let execs: Vec<(&str, StreamExecutor)> = plugins
        .iter()
        .filter_map(|&(name, p)| executor(p).map(|e| (name, e)))
        .collect();
    for n in SIZES {
        let mut group = c.benchmark_group(format!("opencl_sgemm_{n}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3))
            .throughput(Throughput::Elements((2 * n * n * n) as u64));
        let (a, b) = (input(n * n, 1), input(n * n, 2));
        for (name, exec) in &execs {
            let da = exec.copy_to_device(&a).expect("A");
            let db = exec.copy_to_device(&b).expect("B");
            let dc = exec.copy_to_device(&vec![f32::NAN; n * n]).expect("C");
            let mut s = exec.create_stream().expect("stream");
            gemm(&mut s, n, [&da, &db, &dc]).expect("sgemm");
            check(name, n, &a, &b, &exec.copy_to_vec(&dc).expect("C back"));
            group.bench_function(*name, |bench| {
                bench.iter(|| gemm(&mut s, n, [&da, &db, &dc]).expect("sgemm"))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, sgemm);
criterion_main!(benches);
