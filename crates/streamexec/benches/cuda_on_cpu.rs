//! The CUDA platform on the CPU libcuda (`libcuda/`, on `LD_LIBRARY_PATH`) against the same PTX
//! kernels run directly on the host platform's PTX engine, in the same run: what the FFI, the
//! driver layer and the CUDA backend add on top of the engine.
//!
//! - `launch_empty`: `no_params` (kernels/params.cu) on 1×1, `then_launch` +
//!   `block_host_until_done`;
//! - `saxpy_1M`: `bench_saxpy` (kernels/bench.cu), one element per thread, 256 per block.
//!
//! The baseline of each group is `host`. Run with
//! `LD_LIBRARY_PATH=$(bash scripts/build-libcuda.sh) cargo bench --bench cuda_on_cpu`; without
//! the library (or on a machine with a real GPU, where `cuda` is the GPU) it says so.

use std::time::Duration;

use criterion::Criterion;
use streamexec::{DevicePtr, MultiKernelLoaderSpec, PlatformManager, StreamExecutor, TypedKernel};

const PARAMS_PTX: &str = include_str!("../../../kernels/ptx/params.O3.ptx");
const BENCH_PTX: &str = include_str!("../../../kernels/ptx/bench.O3.ptx");
const SAXPY_N: usize = 1 << 20;

fn exec(name: &str) -> Option<StreamExecutor> {
    match PlatformManager::platform_with_name(name).and_then(|p| p.executor_for_device(0)) {
        Ok(e) => Some(e),
        Err(e) => {
            eprintln!("benches/cuda_on_cpu: skipped: {e}");
            None
        }
    }
}

fn kernel<A: streamexec::KernelArgs>(e: &StreamExecutor, ptx: &str, name: &str) -> TypedKernel<A> {
    e.get_kernel(&MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(ptx, name))
        .expect("load PTX kernel")
}

fn main() {
    let (Some(host), Some(cuda)) = (exec("host"), exec("cuda")) else {
        return;
    };
    if !cuda.description().name.contains("streamexec CPU") {
        eprintln!(
            "benches/cuda_on_cpu: skipped: `cuda` is a real GPU here ({})",
            cuda.description().name
        );
        return;
    }
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    let mut group = c.benchmark_group("launch_empty");
    for e in [&host, &cuda] {
        let k: TypedKernel<()> = kernel(e, PARAMS_PTX, "no_params");
        let mut s = e.create_stream().expect("stream");
        group.bench_function(e.platform_name(), |b| {
            b.iter(|| {
                s.then_launch(1, 1, &k, ())
                    .block_host_until_done()
                    .expect("launch")
            })
        });
    }
    group.finish();

    type Saxpy = (u32, f32, DevicePtr<f32>, DevicePtr<f32>);
    let mut group = c.benchmark_group("saxpy_1M");
    group.sample_size(10);
    for e in [&host, &cuda] {
        let k: TypedKernel<Saxpy> = kernel(e, BENCH_PTX, "bench_saxpy");
        let x = e.copy_to_device(&vec![1.0f32; SAXPY_N]).expect("x");
        let y = e.copy_to_device(&vec![2.0f32; SAXPY_N]).expect("y");
        let mut s = e.create_stream().expect("stream");
        let blocks = SAXPY_N.div_ceil(256) as u32;
        group.bench_function(e.platform_name(), |b| {
            b.iter(|| {
                s.then_launch(256, blocks, &k, (SAXPY_N as u32, 0.5, x.ptr(), y.ptr()))
                    .block_host_until_done()
                    .expect("saxpy")
            })
        });
    }
    group.finish();
    c.final_summary();
}
