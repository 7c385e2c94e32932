//! The two PTX engines, the JIT and the interpreter, against plain Rust and against PoCL
//! (OpenCL on the CPU) doing the same work, in one run. The kernels: saxpy (1M and 16M f32), a
//! 16x16-tiled shared-memory matmul (256 and 512), a shared-memory tree reduction with a
//! barrier per level, a `shfl.sync.down` warp reduction, and two workload-shaped kernels: a 3x3
//! blur of a 1920x1080 image through shared-memory tiles with a halo, and a layer
//! normalisation of 1024 rows of 1024 (mean and variance by block reductions). The PTX is
//! kernels/bench.cu compiled by clang-19 -O3 (kernels/ptx/bench.O3.ptx), the OpenCL C is its
//! twin kernels/cl/bench.cl.
//!
//! Each case is a criterion group `ptx_<case>` with four benches: `rust` (rayon loops, no
//! streamexec; `ptx/baselines.rs`), `pocl` (the OpenCL C on the first OpenCL device through raw
//! `opencl3`, enqueue + `clFinish` of the CUDA launch's shape; `ptx/pocl.rs`), and `jit` and
//! `interpreter` (the same PTX on one device of the tests' harness, `tests/common/mod.rs`, over
//! this crate's API; the engine is switched right before each bench's measurements, so both
//! share the device). Before timing, each engine's result is checked once against the Rust
//! result. An engine that cannot run a kernel (`PtxEngine::Jit` on a kernel the JIT does not
//! support, an OpenCL build or launch failure) is reported and skipped; without an OpenCL
//! platform every `pocl` bench is skipped with the reason, and the rest runs.
//!
//! The run ends with the JIT's compile time per kernel, PoCL's build and first-launch times,
//! and a table of time ratios (JIT / Rust and JIT / PoCL with their geometric means over the
//! cases) computed from this run's criterion medians
//! (target/criterion/<group>/<bench>/new/estimates.json; `ptx/report.rs`).
//!
//! Run with `cargo bench -p streamexec-ptx --bench ptx` (`-- matmul` for one case; the checks
//! still run for all).

use std::time::Duration;

use bytemuck::Pod;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, measurement::WallTime};
use criterion::{criterion_group, criterion_main};
use opencl3::memory::Buffer;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

#[path = "ptx/baselines.rs"]
mod baselines;
#[path = "ptx/cases.rs"]
mod cases;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "ptx/pocl.rs"]
mod pocl;
#[path = "ptx/report.rs"]
mod report;
#[path = "ptx/workloads.rs"]
mod workloads;

use common::{Device, DeviceMemory, KernelArgs, PtxEngine, Spec, TypedKernel};
use pocl::Pocl;
use streamexec_ptx::Dim3;

/// The cases, in run order.
const CASES: [Case; 8] = [
    Case::new("saxpy_1m", (1 << 20, 1), cases::saxpy),
    Case::new("saxpy_16m", (1 << 24, 1), cases::saxpy),
    Case::new("matmul_256", (256, 256), cases::matmul),
    Case::new("matmul_512", (512, 512), cases::matmul),
    Case::new("block_reduce_4m", (1 << 22, 1), cases::block_reduce),
    Case::new("warp_reduce_4m", (1 << 22, 1), cases::warp_reduce),
    Case::new("blur_1920x1080", (1920, 1080), workloads::blur),
    Case::new("layernorm_1024x1024", (1024, 1024), workloads::layernorm),
];

fn all_cases(c: &mut Criterion) {
    report::mark_start();
    let env = Env::open();
    for case in CASES {
        (case.run)(c, &env, case);
    }
    report::print_summary(&CASES.map(|case| case.name), &env);
}

criterion_group!(benches, all_cases);
criterion_main!(benches);

const PTX: &str = include_str!("../../../kernels/ptx/bench.O3.ptx");

/// The PTX engines each case runs on, with their bench names.
const ENGINES: [(&str, PtxEngine); 2] = [
    ("jit", PtxEngine::Jit),
    ("interpreter", PtxEngine::Interpreter),
];

/// What every case shares: the PTX engines' device, and the OpenCL device with bench.cl built
/// (or why there is none).
pub struct Env {
    exec: Device,
    pocl: Result<Pocl, String>,
}

impl Env {
    fn open() -> Env {
        let pocl = Pocl::open();
        match &pocl {
            Ok(p) => eprintln!(
                "pocl: {}; kernels/cl/bench.cl built in {:.1} ms",
                p.name,
                p.build.as_secs_f64() * 1e3
            ),
            Err(e) => println!("pocl: skipped ({e})"),
        }
        Env {
            exec: common::host(),
            pocl,
        }
    }

    /// The OpenCL device, if there is one.
    fn pocl(&self) -> Option<&Pocl> {
        self.pocl.as_ref().ok()
    }
}

/// One case: its group is `ptx_<name>`; `dims` its size (elements and 1, a matrix's order
/// twice, an image's width and height, a matrix's rows and columns); `run` checks and times it.
#[derive(Clone, Copy)]
pub struct Case {
    name: &'static str,
    dims: (usize, usize),
    run: fn(&mut Criterion, &Env, Case),
}

impl Case {
    const fn new(
        name: &'static str,
        dims: (usize, usize),
        run: fn(&mut Criterion, &Env, Case),
    ) -> Case {
        Case { name, dims, run }
    }

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

/// A case's launch on the PTX engines.
type PtxLaunch<'a, A> = &'a dyn Fn(&TypedKernel<A>) -> common::Result<()>;

/// Checks kernel `name` once on each PTX engine: `reset` (inputs back, output poisoned), the
/// launch, then `verify(engine, output)`, which panics on a wrong result. An engine that cannot
/// run the kernel is reported and skipped (`None`).
fn check_ptx<A: KernelArgs, T: Pod>(
    env: &Env,
    name: &str,
    launch: PtxLaunch<'_, A>,
    reset: &dyn Fn(),
    out: &DeviceMemory<T>,
    verify: &dyn Fn(&str, &[T]),
) -> [Option<TypedKernel<A>>; 2] {
    let exec = &env.exec;
    ENGINES.map(|engine| {
        reset();
        exec.set_ptx_engine(engine.1).expect("set_ptx_engine");
        let run = load(exec, name).and_then(|k| {
            let before = streamexec_ptx::warp_instructions_executed();
            launch(&k)?;
            Ok((k, streamexec_ptx::warp_instructions_executed() - before))
        });
        match run {
            Ok((k, wi)) => {
                verify(engine.0, &exec.copy_to_vec(out).expect("download"));
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
    })
}

/// Checks the OpenCL twin once: its first launch (which PoCL's compile for the local size
/// lands in), then `verify("pocl", the first len elements of out)`. A kernel that cannot be set
/// up or launched is reported and skipped (`None`).
fn check_pocl<'a, T: Pod>(
    launch: Result<pocl::Launch<'a>, String>,
    name: &str,
    read: impl FnOnce() -> Vec<T>,
    verify: &dyn Fn(&str, &[T]),
) -> Option<pocl::Launch<'a>> {
    match launch.and_then(|l| l.run_first().map(|()| l)) {
        Ok(l) => {
            verify("pocl", &read());
            eprintln!("{name} on pocl: checked");
            Some(l)
        }
        Err(e) => {
            eprintln!("{name} on pocl: skipped, it cannot run there: {e}");
            None
        }
    }
}

/// The case's OpenCL buffers, uploaded from `inputs` on the OpenCL device (if any).
fn pocl_buffers<T: Pod, const N: usize>(env: &Env, inputs: [&[T]; N]) -> Option<[Buffer<T>; N]> {
    env.pocl().map(|p| inputs.map(|data| p.upload(data)))
}

/// Times the Rust baseline, then PoCL and each PTX engine that passed its check.
fn bench_all<A: KernelArgs>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    env: &Env,
    mut rust: impl FnMut(),
    pocl: Option<pocl::Launch<'_>>,
    kernels: &[Option<TypedKernel<A>>; 2],
    launch: PtxLaunch<'_, A>,
) {
    group.bench_function("rust", |b| b.iter(&mut rust));
    if let Some(pocl) = pocl {
        group.bench_function("pocl", |b| b.iter(|| pocl.run().expect("pocl launch")));
    }
    for ((label, engine), kernel) in ENGINES.iter().zip(kernels) {
        let Some(kernel) = kernel else { continue };
        group.bench_function(*label, |b| {
            env.exec.set_ptx_engine(*engine).expect("set_ptx_engine");
            b.iter(|| launch(kernel).expect("launch"));
        });
    }
}

/// The index of the first element whose bits differ, if any.
fn first_difference(got: &[f32], want: &[f32]) -> Option<usize> {
    assert_eq!(got.len(), want.len(), "output lengths differ");
    got.iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits())
}

fn upload<T: Pod>(exec: &Device, data: &[T]) -> DeviceMemory<T> {
    exec.copy_to_device(data).expect("copy to device")
}

/// One launch of `threads` x `blocks` on a fresh stream, waited for.
fn launch<A: KernelArgs>(
    exec: &Device,
    threads: impl Into<Dim3>,
    blocks: impl Into<Dim3>,
    k: &TypedKernel<A>,
    args: A,
) -> common::Result<()> {
    let mut stream = exec.create_stream()?;
    stream
        .then_launch(threads, blocks, k, args)
        .block_host_until_done()
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
