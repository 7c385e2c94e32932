//! Canned operations, each next to a baseline in the same run:
//!
//! - `sgemm_1024`: 1024³ `then_blas_gemm` (f32, no transposes, beta 0) on the host platform vs
//!   the `gemm` crate called directly on `Vec`s with the same thread count; and the same call
//!   on OpenCL (PoCL here), reported against the host.
//! - `philox_fill_64MiB`: `then_populate_rand_uniform` of 16M `u32` (and gaussian `f32`) vs
//!   `then_memset32` of the same bytes (the memory-bandwidth bound), per platform.
//!
//! Run with `cargo bench --bench canned`.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use streamexec::{PlatformManager, StreamExecutor, Transpose};

const N: usize = 1024;
const FILL: usize = 16 << 20;

fn executor(name: &str) -> Option<StreamExecutor> {
    let p = PlatformManager::platform_with_name(name).ok()?;
    p.executor_for_device(0).ok()
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
}

fn inputs(len: usize, salt: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ salt) >> 8) as f32 / 16_777_216.0 - 0.5)
        .collect()
}

fn sgemm(c: &mut Criterion) {
    let (a, b) = (inputs(N * N, 1), inputs(N * N, 2));
    let mut group = c.benchmark_group("sgemm_1024");
    configure(&mut group);
    group.throughput(Throughput::Elements(2 * (N * N * N) as u64));

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    let mut out = vec![0f32; N * N];
    group.bench_function("gemm_crate_direct", |bench| {
        bench.iter(|| {
            pool.install(|| {
                // SAFETY: three live N×N column-major buffers; strides stay inside them.
                unsafe {
                    gemm::gemm(
                        N,
                        N,
                        N,
                        out.as_mut_ptr(),
                        N as isize,
                        1,
                        false,
                        a.as_ptr(),
                        N as isize,
                        1,
                        b.as_ptr(),
                        N as isize,
                        1,
                        0.0f32,
                        1.0f32,
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(0),
                    )
                }
            });
            black_box(&out);
        })
    });

    for platform in ["host", "opencl"] {
        let Some(exec) = executor(platform) else {
            eprintln!("sgemm_1024: {platform} unavailable, skipped");
            continue;
        };
        let da = exec.copy_to_device(&a).expect("A");
        let db = exec.copy_to_device(&b).expect("B");
        let dc = exec.allocate_zeroed_array::<f32>(N * N).expect("C");
        let mut s = exec.create_stream().expect("stream");
        group.bench_function(format!("streamexec_{platform}"), |bench| {
            bench.iter(|| {
                s.then_blas_gemm(
                    Transpose::None,
                    Transpose::None,
                    N,
                    N,
                    N,
                    1.0f32,
                    &da,
                    N,
                    &db,
                    N,
                    0.0,
                    &dc,
                    N,
                )
                .block_host_until_done()
                .expect("sgemm")
            })
        });
    }
    group.finish();
}

fn philox(c: &mut Criterion) {
    let mut group = c.benchmark_group("philox_fill_64MiB");
    configure(&mut group);
    group.throughput(Throughput::Bytes((FILL * 4) as u64));
    for platform in ["host", "opencl"] {
        let Some(exec) = executor(platform) else {
            eprintln!("philox_fill_64MiB: {platform} unavailable, skipped");
            continue;
        };
        let words = exec.allocate_array::<u32>(FILL).expect("words");
        let floats = exec.allocate_array::<f32>(FILL).expect("floats");
        let mut s = exec.create_stream().expect("stream");
        s.then_set_rng_seed(b"benchmark seed, 16+ bytes");
        group.bench_function(format!("{platform}_memset32_baseline"), |bench| {
            bench.iter(|| {
                s.then_memset32(&words, 0x1234_5678)
                    .block_host_until_done()
                    .expect("memset")
            })
        });
        group.bench_function(format!("{platform}_uniform_u32"), |bench| {
            bench.iter(|| {
                s.then_populate_rand_uniform(&words)
                    .block_host_until_done()
                    .expect("fill")
            })
        });
        group.bench_function(format!("{platform}_gaussian_f32"), |bench| {
            bench.iter(|| {
                s.then_populate_rand_gaussian(0.0f32, 1.0, &floats)
                    .block_host_until_done()
                    .expect("fill")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sgemm, philox);
criterion_main!(benches);
