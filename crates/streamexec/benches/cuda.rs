//! CUDA-platform overheads next to the same work through raw cudarc calls in the same run (its
//! own stream on the same device):
//!
//! - `cuda_launch_empty`: an empty kernel on 1×1 through a stream (`then_launch` +
//!   `block_host_until_done`) vs `launch_builder(..).launch` + `CudaStream::synchronize`.
//! - `cuda_copy_h2d_256MiB` / `cuda_copy_d2h_256MiB`: `then_memcpy_h2d` / `then_memcpy_d2h`
//!   between `allocate_host` (page-locked) memory and `DeviceMemory<u8>`, vs cudarc's
//!   `memcpy_htod` / `memcpy_dtoh` with a `PinnedHostSlice` + `synchronize`.
//!
//! Without a CUDA device it prints why and exits. Run with `cargo bench --bench cuda`, or
//! build it here and run it on a GPU machine with scripts/gpu-check.sh.

use std::time::Duration;

use criterion::{Criterion, Throughput};
use cudarc::driver::{CudaContext, LaunchConfig, sys};
use cudarc::nvrtc::Ptx;
use streamexec::{MultiKernelLoaderSpec, PlatformManager, TypedKernel};

const COPY_BYTES: usize = 256 << 20;
const PTX: &str = include_str!("../../../kernels/ptx/params.O3.ptx");

fn main() {
    let exec =
        match PlatformManager::platform_with_name("cuda").and_then(|p| p.executor_for_device(0)) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("benches/cuda: skipped: {e}");
                return;
            }
        };
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    let ctx = CudaContext::new(0).expect("cudarc context on device 0");
    let raw_stream = ctx.new_stream().expect("cudarc stream");
    let module = ctx.load_module(Ptx::from_src(PTX)).expect("cudarc module");
    let raw_fn = module.load_function("no_params").expect("cudarc function");
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };

    let spec = MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory(PTX, "no_params");
    let kernel: TypedKernel<()> = exec.get_kernel(&spec).expect("streamexec kernel");
    let mut stream = exec.create_stream().expect("streamexec stream");

    let mut g = c.benchmark_group("cuda_launch_empty");
    g.bench_function("streamexec", |b| {
        b.iter(|| {
            stream
                .then_launch(1, 1, &kernel, ())
                .block_host_until_done()
                .unwrap()
        })
    });
    g.bench_function("cudarc", |b| {
        b.iter(|| {
            // SAFETY: `no_params` takes no arguments.
            unsafe { raw_stream.launch_builder(&raw_fn).launch(one) }.unwrap();
            raw_stream.synchronize().unwrap();
        })
    });
    g.finish();

    let mut host = exec.allocate_host::<u8>(COPY_BYTES).expect("pinned host");
    host.as_mut_slice()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = (i * 31) as u8);
    let mut dev = exec
        .allocate_array::<u8>(COPY_BYTES)
        .expect("device memory");
    // SAFETY: filled before use below.
    let mut raw_host =
        unsafe { ctx.alloc_pinned_with_flags::<u8>(COPY_BYTES, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .expect("cudarc pinned");
    raw_host
        .as_mut_slice()
        .unwrap()
        .iter_mut()
        .for_each(|b| *b = 7);
    // SAFETY: written by the copies below before any read.
    let mut raw_dev = unsafe { raw_stream.alloc::<u8>(COPY_BYTES) }.expect("cudarc device memory");

    // Check once: a round trip through streamexec gives the bytes back.
    let back = exec.copy_to_vec(&{
        stream
            .then_memcpy_h2d(&host, &mut dev)
            .block_host_until_done()
            .unwrap();
        dev
    });
    let back = back.unwrap();
    assert!(back.iter().enumerate().all(|(i, &b)| b == (i * 31) as u8));
    let mut dev = exec
        .allocate_array::<u8>(COPY_BYTES)
        .expect("device memory");

    for (name, h2d) in [
        ("cuda_copy_h2d_256MiB", true),
        ("cuda_copy_d2h_256MiB", false),
    ] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(COPY_BYTES as u64));
        g.bench_function("streamexec", |b| {
            b.iter(|| {
                if h2d {
                    stream.then_memcpy_h2d(&host, &mut dev);
                } else {
                    stream.then_memcpy_d2h(&dev, &mut host);
                }
                stream.block_host_until_done().unwrap()
            })
        });
        g.bench_function("cudarc", |b| {
            b.iter(|| {
                if h2d {
                    raw_stream.memcpy_htod(&raw_host, &mut raw_dev).unwrap();
                } else {
                    raw_stream.memcpy_dtoh(&raw_dev, &mut raw_host).unwrap();
                }
                raw_stream.synchronize().unwrap()
            })
        });
        g.finish();
    }
    c.final_summary();
}
