//! DNN operations, each next to a baseline in the same run:
//!
//! - `conv_fwd_f32_n8_c64_28x28_k64_3x3` (pad 1) and `conv_fwd_f32_n8_c64_28x28_k64_1x1`: `host`
//!   is `then_convolution_forward` + `block_host_until_done` on the host platform (NCHW);
//!   `plain_im2col_gemm` is the same convolution in plain Rust on `Vec`s: per image an im2col
//!   matrix (none for 1×1, where the image already is the matrix) and one `gemm` crate call,
//!   the images spread over a rayon pool of the host platform's thread count (each gemm on one
//!   thread), as the host platform spreads them. The im2col buffers are allocated once, outside
//!   the timed loop. Both results are checked against each other before timing.
//! - `cnn_train_step`: one SGD step of `examples/cnn_train` (the network of
//!   `examples/cnn/model.rs`: forward, backward and update, then `block_host_until_done`) on
//!   `host`, `opencl` and `cuda` (the CPU libcuda on `LD_LIBRARY_PATH`); the platforms that are
//!   absent are skipped with a message.
//!
//! Run with `LD_LIBRARY_PATH=$(bash scripts/build-libcuda.sh) cargo bench --bench dnn`.

#[path = "../../../examples/cnn/model.rs"]
mod model;

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use gemm::Parallelism;
use rayon::prelude::*;
use streamexec::{
    ConvDesc, ConvProblem, DnnDataType, FilterDesc, PlatformManager, StreamExecutor, TensorDesc,
    TensorLayout,
};

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

fn inputs(len: usize, salt: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| ((i.wrapping_mul(2_654_435_761) ^ salt) >> 8) as f32 / 16_777_216.0 - 0.5)
        .collect()
}

/// A convolution shape: batch, channels, side, filters, filter side (pad `side / 2`, stride 1).
#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    c: usize,
    hw: usize,
    k: usize,
    rs: usize,
}

impl Shape {
    fn pad(self) -> usize {
        self.rs / 2
    }
    /// Output side (stride 1, "same" padding for odd filters).
    fn out(self) -> usize {
        self.hw + 2 * self.pad() + 1 - self.rs
    }
}

const SHAPES: &[Shape] = &[
    Shape {
        n: 8,
        c: 64,
        hw: 28,
        k: 64,
        rs: 3,
    },
    Shape {
        n: 8,
        c: 64,
        hw: 28,
        k: 64,
        rs: 1,
    },
];

/// The im2col matrix (`C·R·S × P·Q`, row-major) of one NCHW image, stride 1: each output row
/// of a tap is a shifted copy of an input row with zeros where it reaches into the padding.
fn im2col(s: Shape, x: &[f32], col: &mut [f32]) {
    let (hw, rs, pad, out) = (s.hw, s.rs, s.pad(), s.out());
    for c in 0..s.c {
        let plane = &x[c * hw * hw..][..hw * hw];
        for r in 0..rs {
            for t in 0..rs {
                let row = &mut col[((c * rs + r) * rs + t) * out * out..][..out * out];
                for p in 0..out {
                    let dst = &mut row[p * out..][..out];
                    let ih = (p + r) as isize - pad as isize;
                    if !(0..hw as isize).contains(&ih) {
                        dst.fill(0.0);
                        continue;
                    }
                    let src = &plane[ih as usize * hw..][..hw];
                    // Output column q reads input column q + t − pad.
                    let lo = pad.saturating_sub(t).min(out);
                    let hi = (hw + pad - t).min(out);
                    dst[..lo].fill(0.0);
                    dst[hi..].fill(0.0);
                    if lo < hi {
                        dst[lo..hi].copy_from_slice(&src[lo + t - pad..hi + t - pad]);
                    }
                }
            }
        }
    }
}

/// `y = conv(x, w)` (NCHW, KCRS filter) in plain Rust: per image im2col (unless 1×1) and one
/// single-threaded gemm `K × P·Q = W (K × C·R·S) · col (C·R·S × P·Q)`, images in parallel on
/// the current rayon pool.
fn plain_im2col_gemm(s: Shape, x: &[f32], w: &[f32], y: &mut [f32], cols: &mut [Vec<f32>]) {
    let (crs, pq) = (s.c * s.rs * s.rs, s.out() * s.out());
    let x_img = s.c * s.hw * s.hw;
    y.par_chunks_mut(s.k * pq)
        .zip(cols.par_iter_mut())
        .enumerate()
        .for_each(|(n, (yi, col))| {
            let xi = &x[n * x_img..][..x_img];
            let rhs = if s.rs == 1 {
                xi
            } else {
                im2col(s, xi, col);
                col
            };
            // SAFETY: `yi` is K × PQ, `w` K × CRS and `rhs` CRS × PQ, all row-major and live;
            // this task alone writes `yi`.
            unsafe {
                gemm::gemm(
                    s.k,
                    pq,
                    crs,
                    yi.as_mut_ptr(),
                    1,
                    pq as isize,
                    false,
                    w.as_ptr(),
                    1,
                    crs as isize,
                    rhs.as_ptr(),
                    1,
                    pq as isize,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    Parallelism::None,
                )
            };
        });
}

fn conv_forward(c: &mut Criterion) {
    let Some(host) = executor("host") else {
        eprintln!("benches/dnn: skipped: no host platform");
        return;
    };
    let threads = host.description().compute_units as usize;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    for &s in SHAPES {
        let (f32_, nchw) = (DnnDataType::F32, TensorLayout::Nchw);
        let u = |v: usize| v as u64;
        let xd = TensorDesc::new(f32_, nchw, u(s.n), u(s.c), u(s.hw), u(s.hw)).expect("x");
        let wd = FilterDesc::new(f32_, nchw, u(s.k), u(s.c), u(s.rs), u(s.rs)).expect("w");
        let conv = ConvDesc::new([u(s.pad()); 2], [1, 1], [1, 1], 1).expect("conv");
        let p = ConvProblem::new(&xd, &wd, &conv).expect("problem");
        let (x, w) = (
            inputs(xd.elements() as usize, 1),
            inputs(wd.elements() as usize, 2),
        );
        let y_len = p.y.elements() as usize;
        assert_eq!(y_len, s.n * s.k * s.out() * s.out());

        let dx = host.allocate_array::<f32>(x.len()).expect("x");
        let dw = host.allocate_array::<f32>(w.len()).expect("w");
        let dy = host.allocate_array::<f32>(y_len).expect("y");
        host.synchronous_memcpy_h2d(&x, &dx).expect("h2d");
        host.synchronous_memcpy_h2d(&w, &dw).expect("h2d");
        let mut stream = host.create_stream().expect("stream");

        let crs_pq = s.c * s.rs * s.rs * s.out() * s.out();
        let mut cols = vec![vec![0f32; if s.rs == 1 { 0 } else { crs_pq }]; s.n];
        let mut y = vec![0f32; y_len];

        // One check before timing: the two results agree.
        stream
            .then_convolution_forward(&p, &dx, &dw, &dy)
            .block_host_until_done()
            .expect("host convolution");
        let mut got = vec![0f32; y_len];
        host.synchronous_memcpy_d2h(&dy, &mut got).expect("d2h");
        pool.install(|| plain_im2col_gemm(s, &x, &w, &mut y, &mut cols));
        let scale = y.iter().fold(0f32, |m, v| m.max(v.abs()));
        let diff = y
            .iter()
            .zip(&got)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            diff <= 1e-5 * scale,
            "host convolution and plain im2col + gemm differ by {diff} (scale {scale})"
        );

        let name = format!(
            "conv_fwd_f32_n{}_c{}_{}x{}_k{}_{}x{}",
            s.n, s.c, s.hw, s.hw, s.k, s.rs, s.rs
        );
        let mut group = c.benchmark_group(name);
        configure(&mut group);
        group.throughput(Throughput::Elements(2 * (y_len * s.c * s.rs * s.rs) as u64));
        group.bench_function("host", |b| {
            b.iter(|| {
                stream
                    .then_convolution_forward(&p, &dx, &dw, &dy)
                    .block_host_until_done()
                    .expect("host convolution")
            })
        });
        group.bench_function("plain_im2col_gemm", |b| {
            b.iter(|| {
                pool.install(|| plain_im2col_gemm(s, &x, &w, &mut y, &mut cols));
                black_box(&y);
            })
        });
        group.finish();
    }
}

fn cnn_train_step(c: &mut Criterion) {
    let data = model::Dataset::new(2024);
    let params = model::initial_params(7);
    let mut group = c.benchmark_group("cnn_train_step");
    configure(&mut group);
    group.throughput(Throughput::Elements(model::BATCH as u64));
    for name in ["host", "opencl", "cuda"] {
        let Some(exec) = executor(name) else {
            eprintln!("benches/dnn: cnn_train_step on {name} skipped: platform unavailable");
            continue;
        };
        let mut net = model::Net::new(&exec, &data, &params, 0.01).expect("network");
        let mut stream = exec.create_stream().expect("stream");
        let mut step = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                net.enqueue_step(&mut stream, step).expect("step");
                stream.block_host_until_done().expect("step");
                step += 1;
            })
        });
        // The steps trained something: the mean loss of the timed steps is finite.
        let loss = net.take_mean_loss(&exec, &mut stream).expect("loss");
        assert!(loss.is_some_and(f32::is_finite), "{name}: loss {loss:?}");
    }
    group.finish();
}

criterion_group!(benches, conv_forward, cnn_train_step);
criterion_main!(benches);
