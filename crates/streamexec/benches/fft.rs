//! FFT plans through the stream against `rustfft` called directly on the same data, in one run
//! (C2C, f32, out of place):
//!
//! - `fft_c2c_f32_1024x256` (256 transforms of 1024 points), `fft_c2c_f32_1M` (one transform of
//!   2^20 points), `fft_c2c_f32_512x512` (one 2-D transform): `host` is `then_fft` +
//!   `block_host_until_done` on the host platform; `rustfft_direct` copies the input into a
//!   work buffer (an out-of-place transform keeps its input) and transforms it there with a
//!   plan made once, its batches (and 2-D rows) spread over a rayon pool of the host platform's
//!   thread count, as the host platform spreads them; 2-D as rows, transpose, rows, transpose.
//!   `rustfft_1thread` is the same on one thread.
//! - `fft_platforms_*`: the same plan on the CUDA platform (the CPU libcuda on
//!   `LD_LIBRARY_PATH`) against the host platform; skipped, with a message, where `cuda` is
//!   absent, is a real GPU, or has no FFT.
//!
//! Run with `LD_LIBRARY_PATH=$(bash scripts/build-libcuda.sh) cargo bench --bench fft`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use rayon::prelude::*;
use rustfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};
use streamexec::{FftDirection, FftPlanSpec, PlatformManager, StreamExecutor};

fn executor(name: &str) -> Option<StreamExecutor> {
    let p = PlatformManager::platform_with_name(name).ok()?;
    p.executor_for_device(0).ok()
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
}

fn inputs(len: usize) -> Vec<[f32; 2]> {
    (0..len as u32)
        .map(|i| {
            let h = i.wrapping_mul(2_654_435_761);
            [
                (h >> 8) as f32 / 16_777_216.0 - 0.5,
                (h & 0xffff) as f32 / 65536.0 - 0.5,
            ]
        })
        .collect()
}

/// The benchmarked shapes: (group name, dims, batch).
const SHAPES: &[(&str, &[usize], usize)] = &[
    ("1024x256", &[1024], 256),
    ("1M", &[1 << 20], 1),
    ("512x512", &[512, 512], 1),
];

/// rustfft on `work` (packed transforms of `dims`): each row along the last axis, and for 2-D
/// a transpose, the rows again, and a transpose back; batches and rows split into one chunk per
/// scratch buffer in `scratch` over the current rayon pool (one buffer: one thread). Scratch is
/// allocated once, outside the timed loop, as the host platform's plan keeps its own.
fn rustfft_direct(
    ffts: &[Arc<dyn Fft<f32>>],
    dims: &[usize],
    work: &mut [Complex32],
    tmp: &mut [Complex32],
    scratch: &mut [Vec<Complex32>],
) {
    let mut rows = |buf: &mut [Complex32], fft: &Arc<dyn Fft<f32>>| {
        let n = fft.len();
        let per = (buf.len() / n).div_ceil(scratch.len()) * n;
        buf.par_chunks_mut(per)
            .zip(scratch.par_iter_mut())
            .for_each(|(c, s)| fft.process_with_scratch(c, s));
    };
    rows(work, &ffts[dims.len() - 1]);
    if let [n0, n1] = dims {
        transpose::transpose(work, tmp, *n1, *n0);
        rows(tmp, &ffts[0]);
        transpose::transpose(tmp, work, *n0, *n1);
    }
}

fn host_vs_rustfft(c: &mut Criterion) {
    let Some(host) = executor("host") else {
        eprintln!("benches/fft: skipped: no host platform");
        return;
    };
    let threads = host.description().compute_units as usize;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    for (name, dims, batch) in SHAPES {
        let n: usize = dims.iter().product::<usize>() * batch;
        let x = inputs(n);
        let mut group = c.benchmark_group(format!("fft_c2c_f32_{name}"));
        configure(&mut group);
        group.throughput(Throughput::Elements(n as u64));

        let mut planner = FftPlanner::<f32>::new();
        let ffts: Vec<Arc<dyn Fft<f32>>> =
            dims.iter().map(|&d| planner.plan_fft_forward(d)).collect();
        let xc: Vec<Complex32> = x.iter().map(|v| Complex32::new(v[0], v[1])).collect();
        let (mut work, mut tmp) = (xc.clone(), xc.clone());
        let scratch_len = ffts.iter().map(|f| f.get_inplace_scratch_len()).max();
        for (case, chunks) in [("rustfft_direct", threads), ("rustfft_1thread", 1)] {
            let mut scratch = vec![vec![Complex32::default(); scratch_len.unwrap_or(0)]; chunks];
            group.bench_function(case, |bench| {
                bench.iter(|| {
                    pool.install(|| {
                        work.copy_from_slice(&xc);
                        rustfft_direct(&ffts, dims, &mut work, &mut tmp, &mut scratch);
                    });
                    black_box(&work);
                })
            });
        }

        let plan = host
            .create_fft_plan::<[f32; 2], [f32; 2]>(&FftPlanSpec::new(dims).batch(*batch))
            .expect("host FFT plan");
        let (din, dout) = (
            host.copy_to_device(&x).expect("upload"),
            host.allocate_array::<[f32; 2]>(n).expect("allocate"),
        );
        let mut s = host.create_stream().expect("stream");
        group.bench_function("host", |bench| {
            bench.iter(|| {
                s.then_fft(&plan, FftDirection::Forward, &din, &dout)
                    .block_host_until_done()
                    .expect("host FFT")
            })
        });
        group.finish();
    }
}

fn cuda_vs_host(c: &mut Criterion) {
    let (Some(host), Some(cuda)) = (executor("host"), executor("cuda")) else {
        eprintln!(
            "benches/fft: fft_platforms skipped: no cuda platform (put the CPU libcuda on LD_LIBRARY_PATH)"
        );
        return;
    };
    if !cuda.description().name.contains("streamexec CPU") {
        eprintln!(
            "benches/fft: fft_platforms skipped: `cuda` is a real GPU here ({})",
            cuda.description().name
        );
        return;
    }
    for (name, dims, batch) in SHAPES {
        let n: usize = dims.iter().product::<usize>() * batch;
        let x = inputs(n);
        let spec = FftPlanSpec::new(dims).batch(*batch);
        let mut runs = Vec::new();
        for (label, exec) in [("host", &host), ("cuda", &cuda)] {
            match exec.create_fft_plan::<[f32; 2], [f32; 2]>(&spec) {
                Ok(plan) => runs.push((label, exec, plan)),
                Err(e) => {
                    eprintln!("benches/fft: fft_platforms_c2c_f32_{name} {label} skipped: {e}")
                }
            }
        }
        if runs.len() < 2 {
            continue;
        }
        let mut group = c.benchmark_group(format!("fft_platforms_c2c_f32_{name}"));
        configure(&mut group);
        group.throughput(Throughput::Elements(n as u64));
        for (label, exec, plan) in &runs {
            let din = exec.copy_to_device(&x).expect("upload");
            let dout = exec.allocate_array::<[f32; 2]>(n).expect("allocate");
            let mut s = exec.create_stream().expect("stream");
            group.bench_function(*label, |bench| {
                bench.iter(|| {
                    s.then_fft(plan, FftDirection::Forward, &din, &dout)
                        .block_host_until_done()
                        .expect("FFT")
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, host_vs_rustfft, cuda_vs_host);
criterion_main!(benches);
