//! Host-platform overheads, each next to its plain-Rust baseline in the same run:
//!
//! - `launch_empty`: an empty 1×1 kernel through a stream (`then_launch` +
//!   `block_host_until_done`) vs `ThreadPool::install` of an empty closure.
//! - `saxpy_16M`: `y = a*x + y` on 16M `f32` as a host kernel vs a rayon loop.
//! - `saxpy_per_thread_1M` / `_16M`: `y = a*x + y` written one element per thread, the way a
//!   CUDA kernel is (`i = global_id_x(); if i < n {..}`, 256-thread blocks, one block per 256
//!   elements), vs the same rayon loop.
//! - `copy_h2d_64MiB`: `then_memcpy_h2d` from `HostMemory<u8>` vs `copy_from_slice`.
//!
//! Run with `cargo bench --bench host`.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use rayon::prelude::*;
use streamexec::{
    DevicePtr, HostKernel, MultiKernelLoaderSpec, PlatformManager, StreamExecutor, ThreadCtx,
    TypedKernel,
};

const SAXPY_N: usize = 16 << 20;
const SAXPY_A: f32 = 0.5;
const COPY_BYTES: usize = 64 << 20;

fn executor() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .expect("host platform")
        .executor_for_device(0)
        .expect("host executor")
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
}

fn launch_empty(c: &mut Criterion) {
    let exec = executor();
    let spec = MultiKernelLoaderSpec::new(0).add_host_kernel(HostKernel::new("empty", |_, ()| {}));
    let kernel: TypedKernel<()> = exec.get_kernel(&spec).expect("load empty kernel");
    let mut stream = exec.create_stream().expect("stream");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(cores())
        .build()
        .expect("rayon pool");

    let mut group = c.benchmark_group("launch_empty");
    configure(&mut group);
    group.bench_function("streamexec", |b| {
        b.iter(|| {
            stream
                .then_launch(1, 1, &kernel, ())
                .block_host_until_done()
                .expect("empty launch")
        })
    });
    group.bench_function("rayon_install", |b| {
        b.iter(|| pool.install(|| black_box(())))
    });
    group.finish();
}

/// The contiguous run of `n` elements that thread `ctx` handles: thread `t` of the grid takes
/// one chunk of `n / threads` elements (a grid-stride loop would interleave threads element by
/// element, which is cache-hostile when a block's threads run one after another on one core).
fn my_run(ctx: &ThreadCtx<'_>, n: usize) -> std::ops::Range<usize> {
    let chunk = n.div_ceil(ctx.grid_size_x());
    let start = (ctx.global_id_x() * chunk).min(n);
    start..(start + chunk).min(n)
}

/// `y = a*x + y`, one element access at a time (`Global::get`/`set`).
fn saxpy_elementwise() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(3).add_host_kernel(HostKernel::new(
        "saxpy",
        |ctx, (a, x, y): (f32, DevicePtr<f32>, DevicePtr<f32>)| {
            let (x, y) = (ctx.global(x), ctx.global(y));
            for i in my_run(ctx, x.len().min(y.len())) {
                y.set(i, a * x.get(i) + y.get(i));
            }
        },
    ))
}

/// `y = a*x + y` through stack tiles (`Global::read_slice`/`write_slice`), which vectorise.
fn saxpy_tiled() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(3).add_host_kernel(HostKernel::new(
        "saxpy",
        |ctx, (a, x, y): (f32, DevicePtr<f32>, DevicePtr<f32>)| {
            let (x, y) = (ctx.global(x), ctx.global(y));
            let run = my_run(ctx, x.len().min(y.len()));
            const TILE: usize = 2048;
            let (mut xs, mut ys) = ([0f32; TILE], [0f32; TILE]);
            let mut i = run.start;
            while i < run.end {
                let len = TILE.min(run.end - i);
                let (xs, ys) = (&mut xs[..len], &mut ys[..len]);
                x.read_slice(i, xs);
                y.read_slice(i, ys);
                ys.iter_mut().zip(xs.iter()).for_each(|(y, x)| *y += a * *x);
                y.write_slice(i, ys);
                i += len;
            }
        },
    ))
}

/// `y = a*x + y` on plain slices of the thread's own run (`Global::as_*slice_unchecked`): each
/// thread owns its run exclusively, which is what the unsafe contract asks.
fn saxpy_unchecked() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(3).add_host_kernel(HostKernel::new(
        "saxpy",
        |ctx, (a, x, y): (f32, DevicePtr<f32>, DevicePtr<f32>)| {
            let (x, y) = (ctx.global(x), ctx.global(y));
            let run = my_run(ctx, x.len().min(y.len()));
            // SAFETY: runs of different threads are disjoint, and no other work on the stream
            // or elsewhere touches x or y while the launch runs.
            let (xs, ys) = unsafe {
                (
                    x.as_slice_unchecked(run.start, run.len()),
                    y.as_mut_slice_unchecked(run.start, run.len()),
                )
            };
            ys.iter_mut().zip(xs).for_each(|(y, x)| *y += a * *x);
        },
    ))
}

fn rayon_saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    y.par_iter_mut()
        .zip(x.par_iter())
        .for_each(|(y, x)| *y += a * *x);
}

type Saxpy = TypedKernel<(f32, DevicePtr<f32>, DevicePtr<f32>)>;

fn saxpy(c: &mut Criterion) {
    let exec = executor();
    let kernels: Vec<(&str, Saxpy)> = vec![
        (
            "streamexec_elementwise",
            exec.get_kernel(&saxpy_elementwise()).expect("load saxpy"),
        ),
        (
            "streamexec_tiled",
            exec.get_kernel(&saxpy_tiled()).expect("load saxpy"),
        ),
        (
            "streamexec_unchecked",
            exec.get_kernel(&saxpy_unchecked()).expect("load saxpy"),
        ),
    ];
    let mut stream = exec.create_stream().expect("stream");

    let x_host: Vec<f32> = (0..SAXPY_N).map(|i| (i % 1000) as f32 * 0.25).collect();
    let y_init: Vec<f32> = (0..SAXPY_N).map(|i| (i % 777) as f32 - 100.0).collect();
    let x_dev = exec.copy_to_device(&x_host).expect("x to device");
    let y_dev = exec.copy_to_device(&y_init).expect("y to device");
    let mut y_host = y_init.clone();
    rayon_saxpy(SAXPY_A, &x_host, &mut y_host);

    let blocks = 4 * cores() as u32;
    let threads = 256u32;
    let launch = |stream: &mut streamexec::Stream, k: &Saxpy| {
        stream
            .then_launch(threads, blocks, k, (SAXPY_A, x_dev.ptr(), y_dev.ptr()))
            .block_host_until_done()
            .expect("saxpy launch")
    };

    // Check each kernel once, so a broken kernel cannot report a fast time.
    for (name, k) in &kernels {
        exec.synchronous_memcpy_h2d(&y_init, &y_dev)
            .expect("reset y");
        launch(&mut stream, k);
        let got = exec.copy_to_vec(&y_dev).expect("y to host");
        assert!(got == y_host, "{name}: saxpy result differs from rayon");
    }

    let mut group = c.benchmark_group("saxpy_16M");
    configure(&mut group);
    // Read x, read y, write y.
    group.throughput(Throughput::Bytes(3 * 4 * SAXPY_N as u64));
    for (name, k) in &kernels {
        group.bench_function(*name, |b| b.iter(|| launch(&mut stream, k)));
    }
    group.bench_function("rayon", |b| {
        b.iter(|| rayon_saxpy(SAXPY_A, black_box(&x_host), black_box(&mut y_host)))
    });
    group.finish();
}

type PerThread = TypedKernel<(u32, f32, DevicePtr<f32>, DevicePtr<f32>)>;

/// `y = a*x + y`, one element per thread (CUDA style: many blocks, no loop in the kernel).
fn saxpy_per_thread_kernel() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(4).add_host_kernel(HostKernel::new(
        "saxpy_per_thread",
        |ctx, (n, a, x, y): (u32, f32, DevicePtr<f32>, DevicePtr<f32>)| {
            let i = ctx.global_id_x();
            if i < n as usize {
                let (x, y) = (ctx.global(x), ctx.global(y));
                y.set(i, a * x.get(i) + y.get(i));
            }
        },
    ))
}

fn saxpy_per_thread(c: &mut Criterion) {
    let exec = executor();
    let kernel: PerThread = exec
        .get_kernel(&saxpy_per_thread_kernel())
        .expect("load saxpy_per_thread");
    let mut stream = exec.create_stream().expect("stream");
    for (label, n) in [("1M", 1usize << 20), ("16M", 16 << 20)] {
        let x_host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
        let y_init: Vec<f32> = (0..n).map(|i| (i % 777) as f32 - 100.0).collect();
        let x_dev = exec.copy_to_device(&x_host).expect("x to device");
        let y_dev = exec.copy_to_device(&y_init).expect("y to device");
        let mut y_host = y_init.clone();
        rayon_saxpy(SAXPY_A, &x_host, &mut y_host);
        let threads = 256u32;
        let blocks = n.div_ceil(threads as usize) as u32;
        let mut launch = || {
            stream
                .then_launch(
                    threads,
                    blocks,
                    &kernel,
                    (n as u32, SAXPY_A, x_dev.ptr(), y_dev.ptr()),
                )
                .block_host_until_done()
                .expect("saxpy_per_thread launch")
        };
        // Check once, so a broken kernel cannot report a fast time.
        launch();
        let got = exec.copy_to_vec(&y_dev).expect("y to host");
        assert!(
            got == y_host,
            "saxpy_per_thread {label}: differs from rayon"
        );

        let mut group = c.benchmark_group(format!("saxpy_per_thread_{label}"));
        configure(&mut group);
        group.throughput(Throughput::Bytes(3 * 4 * n as u64));
        group.bench_function("streamexec", |b| b.iter(&mut launch));
        group.bench_function("rayon", |b| {
            b.iter(|| rayon_saxpy(SAXPY_A, black_box(&x_host), black_box(&mut y_host)))
        });
        group.finish();
    }
}

fn copy_h2d(c: &mut Criterion) {
    let exec = executor();
    let mut stream = exec.create_stream().expect("stream");

    let pattern = |i: usize| (i.wrapping_mul(31) ^ (i >> 11)) as u8;
    let mut src = exec.allocate_host::<u8>(COPY_BYTES).expect("host memory");
    for (i, b) in src.as_mut_slice().iter_mut().enumerate() {
        *b = pattern(i);
    }
    let dst = exec
        .allocate_array::<u8>(COPY_BYTES)
        .expect("device memory");
    let src_vec: Vec<u8> = (0..COPY_BYTES).map(pattern).collect();
    let mut dst_vec = vec![0u8; COPY_BYTES];

    // Check once.
    stream
        .then_memcpy_h2d(&src, &dst)
        .block_host_until_done()
        .expect("h2d copy");
    let got = exec.copy_to_vec(&dst).expect("d2h copy");
    assert!(got == src_vec, "then_memcpy_h2d copied the wrong bytes");
    drop(got);

    let mut group = c.benchmark_group("copy_h2d_64MiB");
    configure(&mut group);
    group.throughput(Throughput::Bytes(COPY_BYTES as u64));
    group.bench_function("streamexec", |b| {
        b.iter(|| {
            stream
                .then_memcpy_h2d(&src, &dst)
                .block_host_until_done()
                .expect("h2d copy")
        })
    });
    group.bench_function("copy_from_slice", |b| {
        b.iter(|| black_box(&mut dst_vec[..]).copy_from_slice(black_box(&src_vec)))
    });
    group.finish();
}

criterion_group!(benches, launch_empty, saxpy, saxpy_per_thread, copy_h2d);
criterion_main!(benches);
