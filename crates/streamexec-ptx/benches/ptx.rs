//! The two PTX engines, the JIT and the interpreter, against plain Rust doing the same work, in
//! one run: saxpy (1M and 16M f32), a 16x16-tiled shared-memory matmul (256 and
//! 512), a shared-memory tree reduction with a barrier per level and a `shfl.sync.down` warp
//! reduction (kernels/bench.cu, compiled by clang-19 -O3 to kernels/ptx/bench.O3.ptx).
//!
//! Each case is a criterion group `ptx_<case>` with three benches: `rust` (rayon loops, no
//! streamexec), `jit` and `interpreter` (the same PTX on one device of the tests' harness,
//! `tests/common/mod.rs`, over this crate's API; the engine is switched right before each
//! bench's measurements, so both share the device). Before
//! timing, each engine's result is checked once against the Rust result. An engine that cannot
//! run a kernel (`PtxEngine::Jit` on a kernel the JIT does not support) is reported and skipped.
//! The run ends with the JIT's compile time per kernel and a table of time ratios computed from
//! this run's criterion medians (target/criterion/<group>/<bench>/new/estimates.json).
//!
//! Run with `cargo bench -p streamexec-ptx --bench ptx` (`-- matmul` for one case; the checks
//! still run for all).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput, measurement::WallTime};
use criterion::{criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use rayon::prelude::*;
#[path = "../tests/common/mod.rs"]
mod common;

use common::{Device, DeviceMemory, DevicePtr, KernelArgs, PtxEngine, Spec, TypedKernel};

const SAXPY_THREADS: u32 = 256;
const TILE: usize = 16;
const RED_THREADS: usize = 256;
const REDUCE_N: usize = 1 << 22;

/// Loads `name` with `engine` chosen, runs it once with `launch`, and returns the kernel if the
/// output `check` reads afterwards is right; `None` (reported) if the engine cannot run it.
fn checked_kernel<A: KernelArgs>(
    exec: &Device,
    engine: (&str, PtxEngine),
    name: &str,
    launch: &dyn Fn(&TypedKernel<A>) -> common::Result<()>,
    check: &dyn Fn(),
) -> Option<TypedKernel<A>> {
    exec.set_ptx_engine(engine.1).expect("set_ptx_engine");
    let run = load(exec, name).and_then(|k| {
        let before = streamexec_ptx::warp_instructions_executed();
        launch(&k)?;
        Ok((k, streamexec_ptx::warp_instructions_executed() - before))
    });
    match run {
        Ok((k, wi)) => {
            check();
            eprintln!(
                "{name} on {}: checked; {wi} interpreted warp instructions",
                engine.0
            );
            Some(k)
        }
        Err(e) => {
            eprintln!("{name} on {}: skipped, it cannot run there: {e}", engine.0);
            None
        }
    }
}

/// Times `launch` on each engine that passed its check, setting that engine first.
fn bench_engines<A: KernelArgs>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    exec: &Device,
    kernels: &[Option<TypedKernel<A>>],
    launch: &dyn Fn(&TypedKernel<A>) -> common::Result<()>,
) {
    for ((label, engine), kernel) in ENGINES.iter().zip(kernels) {
        let Some(kernel) = kernel else { continue };
        group.bench_function(*label, |b| {
            exec.set_ptx_engine(*engine).expect("set_ptx_engine");
            b.iter(|| launch(kernel).expect("launch"));
        });
    }
}

fn saxpy_rust(a: f32, x: &[f32], y: &mut [f32]) {
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

fn saxpy(c: &mut Criterion, case: Case) {
    let (exec, n, a) = (executor(), case.n, 0.75f32);
    let (x, y0) = (random_f32(n, 1), random_f32(n, 2));
    let mut want = y0.clone();
    saxpy_rust(a, &x, &mut want);
    let (dx, dy) = (upload(&exec, &x), upload(&exec, &y0));
    type Args = (u32, f32, DevicePtr<f32>, DevicePtr<f32>);
    let args: Args = (n as u32, a, dx.ptr(), dy.ptr());
    let blocks = (n as u32).div_ceil(SAXPY_THREADS);
    let launch = |k: &TypedKernel<Args>| launch_1d(&exec, SAXPY_THREADS, blocks, k, args);
    let kernels = ENGINES.map(|engine| {
        exec.synchronous_memcpy_h2d(&y0, &dy).expect("reset y");
        let check = || {
            let got = exec.copy_to_vec(&dy).expect("y");
            let bad = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g.to_bits() != w.to_bits());
            assert!(bad.is_none(), "saxpy on {}: y[{bad:?}] differs", engine.0);
        };
        checked_kernel(&exec, engine, "bench_saxpy", &launch, &check)
    });
    let mut group = case.group(c);
    group.throughput(Throughput::Elements(n as u64));
    let mut y = y0.clone();
    group.bench_function("rust", |b| b.iter(|| saxpy_rust(a, &x, &mut y)));
    bench_engines(&mut group, &exec, &kernels, &launch);
    group.finish();
}

/// C = A * B (n x n, row-major), tiled like the kernel: rayon over TILE-row blocks of C.
fn matmul_rust(a: &[f32], b: &[f32], c: &mut [f32], n: usize) {
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

fn matmul(c: &mut Criterion, case: Case) {
    let (exec, n) = (executor(), case.n);
    let (a, b) = (random_f32(n * n, 3), random_f32(n * n, 4));
    let mut want = vec![0.0f32; n * n];
    matmul_rust(&a, &b, &mut want, n);
    let (da, db) = (upload(&exec, &a), upload(&exec, &b));
    let dc = upload(&exec, &vec![f32::NAN; n * n]);
    type Args = (DevicePtr<f32>, DevicePtr<f32>, DevicePtr<f32>, u32);
    let args: Args = (da.ptr(), db.ptr(), dc.ptr(), n as u32);
    let g = (n / TILE) as u32;
    let launch = |k: &TypedKernel<Args>| {
        let mut stream = exec.create_stream()?;
        stream
            .then_launch((TILE as u32, TILE as u32), (g, g), k, args)
            .block_host_until_done()
    };
    let kernels = ENGINES.map(|engine| {
        exec.synchronous_memcpy_h2d(&vec![f32::NAN; n * n], &dc)
            .expect("poison c");
        let check = || {
            let got = exec.copy_to_vec(&dc).expect("c");
            let bad = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g.to_bits() != w.to_bits());
            assert!(bad.is_none(), "matmul on {}: c[{bad:?}] differs", engine.0);
        };
        checked_kernel(&exec, engine, "bench_matmul", &launch, &check)
    });
    let mut group = case.group(c);
    group.throughput(Throughput::Elements((n * n * n) as u64));
    let mut out = vec![0.0f32; n * n];
    group.bench_function("rust", |bn| bn.iter(|| matmul_rust(&a, &b, &mut out, n)));
    bench_engines(&mut group, &exec, &kernels, &launch);
    group.finish();
}

fn block_reduce_rust(x: &[f32], partial: &mut [f32]) {
    partial
        .par_iter_mut()
        .zip(x.par_chunks(RED_THREADS))
        .with_min_len(64)
        .for_each(|(p, c)| *p = c.iter().sum());
}

fn block_reduce(c: &mut Criterion, case: Case) {
    let (exec, n) = (executor(), case.n);
    let blocks = n.div_ceil(RED_THREADS);
    let x = random_f32(n, 5);
    let mut want = vec![0.0f32; blocks];
    block_reduce_rust(&x, &mut want);
    // A sum of m = 256 terms in any order is within gamma_(m-1) * sum |x| of the exact sum; the
    // tree's depth is 8, so Rust's left-to-right sum and the tree differ by at most
    // (gamma_255 + gamma_8) * sum |x| <= 264 u (1.01) * sum |x|.
    let abs_sums: Vec<f64> = x
        .chunks(RED_THREADS)
        .map(|c| c.iter().map(|v| f64::from(v.abs())).sum())
        .collect();
    let factor = 264.0 * f64::from(f32::EPSILON) / 2.0 * 1.01;
    let dx = upload(&exec, &x);
    let dp = upload(&exec, &vec![f32::NAN; blocks]);
    type Args = (DevicePtr<f32>, DevicePtr<f32>, u32);
    let args: Args = (dx.ptr(), dp.ptr(), n as u32);
    let launch =
        |k: &TypedKernel<Args>| launch_1d(&exec, RED_THREADS as u32, blocks as u32, k, args);
    let kernels = ENGINES.map(|engine| {
        exec.synchronous_memcpy_h2d(&vec![f32::NAN; blocks], &dp)
            .expect("poison partials");
        let check = || {
            let got = exec.copy_to_vec(&dp).expect("partials");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let tol = factor * abs_sums[i];
                let ok = (f64::from(*g) - f64::from(*w)).abs() <= tol;
                assert!(ok, "block reduce on {}: [{i}] = {g}, Rust {w}", engine.0);
            }
        };
        checked_kernel(&exec, engine, "bench_block_reduce", &launch, &check)
    });
    let mut group = case.group(c);
    group.throughput(Throughput::Elements(n as u64));
    let mut out = vec![0.0f32; blocks];
    group.bench_function("rust", |b| b.iter(|| block_reduce_rust(&x, &mut out)));
    bench_engines(&mut group, &exec, &kernels, &launch);
    group.finish();
}

fn warp_reduce_rust(x: &[i32], partial: &mut [i32]) {
    partial
        .par_iter_mut()
        .zip(x.par_chunks(32))
        .with_min_len(512)
        .for_each(|(p, c)| *p = c.iter().fold(0, |s, v| s.wrapping_add(*v)));
}

fn warp_reduce(c: &mut Criterion, case: Case) {
    let (exec, n) = (executor(), case.n);
    let warps = n.div_ceil(32);
    let x = random_i32(n, 6);
    let mut want = vec![0i32; warps];
    warp_reduce_rust(&x, &mut want);
    let dx = upload(&exec, &x);
    let dp = upload(&exec, &vec![i32::MIN; warps]);
    type Args = (DevicePtr<i32>, DevicePtr<i32>, u32);
    let args: Args = (dx.ptr(), dp.ptr(), n as u32);
    let blocks = (n as u32).div_ceil(256);
    let launch = |k: &TypedKernel<Args>| launch_1d(&exec, 256, blocks, k, args);
    let kernels = ENGINES.map(|engine| {
        exec.synchronous_memcpy_h2d(&vec![i32::MIN; warps], &dp)
            .expect("poison partials");
        let check = || {
            let got = exec.copy_to_vec(&dp).expect("partials");
            let bad = got.iter().zip(&want).position(|(g, w)| g != w);
            assert!(
                bad.is_none(),
                "warp reduce on {}: [{bad:?}] differs",
                engine.0
            );
        };
        checked_kernel(&exec, engine, "bench_warp_reduce", &launch, &check)
    });
    let mut group = case.group(c);
    group.throughput(Throughput::Elements(n as u64));
    let mut out = vec![0i32; warps];
    group.bench_function("rust", |b| b.iter(|| warp_reduce_rust(&x, &mut out)));
    bench_engines(&mut group, &exec, &kernels, &launch);
    group.finish();
}

fn upload<T: bytemuck::Pod>(exec: &Device, data: &[T]) -> DeviceMemory<T> {
    exec.copy_to_device(data).expect("copy to device")
}

fn launch_1d<A: KernelArgs>(
    exec: &Device,
    threads: u32,
    blocks: u32,
    k: &TypedKernel<A>,
    args: A,
) -> common::Result<()> {
    let mut stream = exec.create_stream()?;
    stream
        .then_launch(threads, blocks, k, args)
        .block_host_until_done()
}

/// The cases, in run order: group name and size.
const CASES: [(&str, usize); 6] = [
    ("saxpy_1m", 1 << 20),
    ("saxpy_16m", 1 << 24),
    ("matmul_256", 256),
    ("matmul_512", 512),
    ("block_reduce_4m", REDUCE_N),
    ("warp_reduce_4m", REDUCE_N),
];

fn all_cases(c: &mut Criterion) {
    mark_start();
    for (name, n) in CASES {
        let case = Case { name, n };
        match name.split('_').next() {
            Some("saxpy") => saxpy(c, case),
            Some("matmul") => matmul(c, case),
            Some("block") => block_reduce(c, case),
            _ => warp_reduce(c, case),
        }
    }
    print_summary(&CASES.map(|(name, ..)| name));
}

criterion_group!(benches, all_cases);
criterion_main!(benches);

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

const PTX: &str = include_str!("../../../kernels/ptx/bench.O3.ptx");

/// The engines each case runs on, with their bench names.
const ENGINES: [(&str, PtxEngine); 2] = [
    ("jit", PtxEngine::Jit),
    ("interpreter", PtxEngine::Interpreter),
];

/// The bench names of a group, in table order.
const BENCHES: [&str; 3] = ["rust", "jit", "interpreter"];

/// One case: its group is `ptx_<name>`; `n` is its size (elements, or the matrix order).
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    n: usize,
}

impl Case {
    /// The case's group: 10 samples of equal iteration counts in about 2 s. An interpreter
    /// launch takes 0.1 s to several seconds, so its bench costs the minimum, 1 warm-up launch
    /// and 10 timed ones (criterion says it could not finish in 2 s; that is expected).
    fn group<'a>(&self, c: &'a mut Criterion) -> BenchmarkGroup<'a, WallTime> {
        let mut group = c.benchmark_group(format!("ptx_{}", self.name));
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_secs(2));
        group
    }
}

/// The device every case shares.
fn executor() -> Device {
    common::host()
}

fn load<A: KernelArgs>(exec: &Device, name: &str) -> common::Result<TypedKernel<A>> {
    exec.get_kernel(&Spec::new(A::ARITY).add_cuda_ptx_in_memory(PTX, name))
}

/// `n` floats in [-1, 1) from a fixed seed (the same inputs every run).
fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// `n` integers in [-1000, 1000] from a fixed seed.
fn random_i32(n: usize, seed: u64) -> Vec<i32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1000..=1000)).collect()
}

/// When this run started: estimates older than this are another run's.
static START: OnceLock<SystemTime> = OnceLock::new();

fn mark_start() {
    START.get_or_init(SystemTime::now);
}

/// Where criterion writes (its own rule, less `cargo metadata`: `cargo bench` runs here).
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or("target".into(), PathBuf::from);
    target.join("criterion")
}

/// The median time per iteration, in seconds, criterion measured for `group/bench` in this
/// run (`None` if it did not run this time: filtered out, skipped, or `cargo test` mode).
fn median_s(group: &str, bench: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(bench)
        .join("new/estimates.json");
    let fresh = std::fs::metadata(&path).and_then(|m| m.modified()).ok()? >= *START.get()?;
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    let ns = json["median"]["point_estimate"].as_f64()?;
    fresh.then_some(ns * 1e-9)
}

fn print_summary(cases: &[&str]) {
    println!("\nPTX JIT compile times (kernel: time):");
    let compiles = streamexec_ptx::jit_compile_times();
    if compiles.is_empty() {
        println!("  none: the JIT compiled no kernel in this run");
    }
    for (kernel, t) in compiles {
        println!("  {kernel}: {:.2} ms", t.as_secs_f64() * 1e3);
    }
    println!("\nMedians of this run and their ratios (- : not run this time):");
    println!(
        "| case | rust | jit | interpreter | jit / rust | interpreter / rust | interpreter / jit |"
    );
    println!("|---|---|---|---|---|---|---|");
    let time = |t: Option<f64>| t.map_or("-".into(), |t| format!("{:.3} ms", t * 1e3));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.1}x", a / b),
        _ => "-".into(),
    };
    for case in cases {
        let group = format!("ptx_{case}");
        let [rust, jit, interp] = BENCHES.map(|b| median_s(&group, b));
        println!(
            "| {case} | {} | {} | {} | {} | {} | {} |",
            time(rust),
            time(jit),
            time(interp),
            ratio(jit, rust),
            ratio(interp, rust),
            ratio(interp, jit)
        );
    }
}
