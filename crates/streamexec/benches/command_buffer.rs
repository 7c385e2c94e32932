//! Command buffers: a chain of 64 small kernel launches (`affine` on 32 elements, one block of one warp
//! each) replayed from a finalized `CommandBuffer` against the same 64 launches issued one by
//! one with `then_launch`, both waited for with `block_host_until_done`, on every platform
//! that is available in the same run (host; OpenCL through PoCL; CUDA where a libcuda loads,
//! here the CPU one). The ratio replay / one-by-one is what the README reports, for the whole
//! chain (issue and run) and for the issuing thread's time alone (`issue_only`: the wait that
//! follows is not timed).
//!
//! Run with `cargo bench --bench command_buffer` (CUDA on the CPU libcuda:
//! `LD_LIBRARY_PATH=$PWD/target/libcuda` after `bash scripts/build-libcuda.sh`). On OpenCL the
//! replay is `cl_khr_command_buffer` where the device has it; `STREAMEXEC_OPENCL_COMMAND_BUFFER=0`
//! makes it plain replay, to compare the two.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use streamexec::{CommandBuffer, DeviceMemory, PlatformManager, Stream, StreamExecutor};

const LAUNCHES: usize = 64;
const N: usize = 32;

/// The conformance suite's kernels (`affine` in PTX, OpenCL C and as a host kernel).
#[path = "../tests/conformance/kernels.rs"]
#[allow(dead_code)]
mod kernels;

use kernels::{Affine, affine as affine_spec};

struct Setup {
    stream: Stream,
    kernel: Affine,
    x: DeviceMemory<u32>,
    buffer: CommandBuffer,
}

fn setup(exec: &StreamExecutor) -> Setup {
    let kernel: Affine = exec.get_kernel(&affine_spec()).expect("affine");
    let x = exec.copy_to_device(&[1u32; N]).expect("x");
    let mut buffer = exec.create_command_buffer();
    for i in 0..LAUNCHES {
        buffer
            .launch(N as u32, 1, &kernel, (x.ptr(), N as u32, 3, i as u32))
            .expect("record");
    }
    buffer.finalize().expect("finalize");
    Setup {
        stream: exec.create_stream().expect("stream"),
        kernel,
        x,
        buffer,
    }
}

fn issue_one_by_one(s: &mut Setup) {
    for i in 0..LAUNCHES {
        s.stream
            .then_launch(N as u32, 1, &s.kernel, (s.x.ptr(), N as u32, 3, i as u32));
    }
}

/// Total time of `iters` calls of `issue`, each followed by an untimed wait.
fn timed_issue(s: &mut Setup, iters: u64, issue: impl Fn(&mut Setup)) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t = Instant::now();
        issue(s);
        total += t.elapsed();
        s.stream.block_host_until_done().expect("chain");
    }
    total
}

fn bench(c: &mut Criterion) {
    for info in PlatformManager::platforms() {
        if info.availability.is_err() || info.name == "noop" {
            continue;
        }
        let exec = PlatformManager::platform_with_name(info.name)
            .and_then(|p| p.executor_for_device(0))
            .expect("device 0");
        let mut s = setup(&exec);
        let mut group = c.benchmark_group(format!("launch_chain_64/{}", info.name));
        group
            .sample_size(20)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(4));
        let kind = s.buffer.replay_kind();
        group.bench_function(format!("replay ({kind})"), |b| {
            b.iter(|| {
                s.stream.then_submit(&s.buffer);
                s.stream.block_host_until_done().expect("replay");
            })
        });
        group.bench_function("one_by_one", |b| {
            b.iter(|| {
                issue_one_by_one(&mut s);
                s.stream.block_host_until_done().expect("launches");
            })
        });
        // What the host thread spends issuing the chain (the wait is not timed).
        group.bench_function(format!("issue_only/replay ({kind})"), |b| {
            b.iter_custom(|iters| {
                timed_issue(&mut s, iters, |s| {
                    s.stream.then_submit(&s.buffer);
                })
            })
        });
        group.bench_function("issue_only/one_by_one", |b| {
            b.iter_custom(|iters| timed_issue(&mut s, iters, issue_one_by_one))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
