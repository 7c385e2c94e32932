//! The host platform's PTX engine against native host kernels doing the same work, in the
//! same run: saxpy and a 16x16-tiled matrix multiply (kernels/bench.cu, compiled by clang-19
//! to kernels/ptx/bench.O3.ptx). Throughput is in warp instructions per second for the PTX
//! engine (criterion's "elem/s"); the native kernel of each group is the baseline.
//!
//! Run with `cargo bench --bench ptx`.

use std::cell::Cell;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use streamexec::{
    DevicePtr, HostKernel, MultiKernelLoaderSpec, PlatformManager, StreamExecutor, TypedKernel,
};

const PTX: &str = include_str!("../kernels/ptx/bench.O3.ptx");
const SAXPY_N: usize = 1 << 20;
const MATMUL_N: usize = 128;
const TILE: usize = 16;

fn executor() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .expect("host platform")
        .executor_for_device(0)
        .expect("host executor")
}

fn ptx<A: streamexec::KernelArgs>(exec: &StreamExecutor, name: &str) -> TypedKernel<A> {
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(PTX, name);
    exec.get_kernel(&spec).expect("load PTX kernel")
}

fn native<A: streamexec::KernelArgs>(exec: &StreamExecutor, k: HostKernel) -> TypedKernel<A> {
    exec.get_kernel(&MultiKernelLoaderSpec::new(A::ARITY).add_host_kernel(k))
        .expect("load host kernel")
}

/// Warp instructions one call of `f` makes the engine execute.
fn warp_instructions(f: impl FnOnce()) -> u64 {
    let before = streamexec::ptx_warp_instructions_executed();
    f();
    streamexec::ptx_warp_instructions_executed() - before
}

fn saxpy(c: &mut Criterion) {
    let exec = executor();
    type Args = (u32, f32, DevicePtr<f32>, DevicePtr<f32>);
    let on_ptx: TypedKernel<Args> = ptx(&exec, "bench_saxpy");
    let on_host: TypedKernel<Args> = native(
        &exec,
        HostKernel::new("saxpy", |ctx, (n, a, x, y): Args| {
            let i = ctx.global_id_x();
            if i < n as usize {
                let (x, y) = (ctx.global(x), ctx.global(y));
                y.set(i, a * x.get(i) + y.get(i));
            }
        }),
    );
    let x = exec.copy_to_device(&vec![1.0f32; SAXPY_N]).expect("x");
    let y = exec.copy_to_device(&vec![2.0f32; SAXPY_N]).expect("y");
    let mut stream = exec.create_stream().expect("stream");
    let blocks = SAXPY_N.div_ceil(256) as u32;
    let args = (SAXPY_N as u32, 0.5f32, x.ptr(), y.ptr());
    let mut run = |k: &TypedKernel<Args>| {
        stream
            .then_launch(256, blocks, k, args)
            .block_host_until_done()
            .expect("saxpy");
    };
    let wi = warp_instructions(|| run(&on_ptx));
    eprintln!("saxpy {SAXPY_N}: {wi} warp instructions per launch");
    let mut group = c.benchmark_group("ptx_saxpy_1M");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(wi));
    group.bench_function("ptx_engine", |b| b.iter(|| run(&on_ptx)));
    group.bench_function("host_kernel", |b| b.iter(|| run(&on_host)));
    group.finish();
}

fn matmul(c: &mut Criterion) {
    let exec = executor();
    type Args = (DevicePtr<f32>, DevicePtr<f32>, DevicePtr<f32>, u32);
    let on_ptx: TypedKernel<Args> = ptx(&exec, "bench_matmul");
    let on_host: TypedKernel<Args> = native(
        &exec,
        HostKernel::new("matmul", |ctx, (a, b, c, n): Args| {
            let (n, t, bi) = (n as usize, ctx.thread_idx(), ctx.block_idx());
            let (tx, ty) = (t.x as usize, t.y as usize);
            let (row, col) = (bi.y as usize * TILE + ty, bi.x as usize * TILE + tx);
            let ash: &[Cell<f32>] = ctx.shared_array(TILE * TILE);
            let bsh: &[Cell<f32>] = ctx.shared_array(TILE * TILE);
            let (a, b, c) = (ctx.global(a), ctx.global(b), ctx.global(c));
            let mut acc = 0.0f32;
            for t in (0..n).step_by(TILE) {
                ash[ty * TILE + tx].set(a.get(row * n + t + tx));
                bsh[ty * TILE + tx].set(b.get((t + ty) * n + col));
                ctx.sync_threads();
                for k in 0..TILE {
                    acc += ash[ty * TILE + k].get() * bsh[k * TILE + tx].get();
                }
                ctx.sync_threads();
            }
            c.set(row * n + col, acc);
        }),
    );
    let n = MATMUL_N;
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 5) as f32).collect();
    let (da, db) = (
        exec.copy_to_device(&a).expect("a"),
        exec.copy_to_device(&b).expect("b"),
    );
    let dc = exec.allocate_zeroed_array::<f32>(n * n).expect("c");
    let mut stream = exec.create_stream().expect("stream");
    let g = (n / TILE) as u32;
    let args = (da.ptr(), db.ptr(), dc.ptr(), n as u32);
    let mut run = |k: &TypedKernel<Args>| {
        stream
            .then_launch((TILE as u32, TILE as u32), (g, g), k, args)
            .block_host_until_done()
            .expect("matmul");
    };
    let wi = warp_instructions(|| run(&on_ptx));
    // Both kernels must agree with a plain loop (integer-valued, so exact).
    let check = |exec: &StreamExecutor| {
        let got = exec.copy_to_vec(&dc).expect("c");
        for (i, g) in got.iter().enumerate().step_by(97) {
            let (r, c) = (i / n, i % n);
            let want: f32 = (0..n).map(|k| a[r * n + k] * b[k * n + c]).sum();
            assert_eq!(*g, want, "c[{r}][{c}]");
        }
    };
    check(&exec);
    run(&on_host);
    check(&exec);
    eprintln!("matmul {n}x{n}: {wi} warp instructions per launch");
    let mut group = c.benchmark_group("ptx_matmul_128");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(wi));
    group.bench_function("ptx_engine", |b| b.iter(|| run(&on_ptx)));
    group.bench_function("host_kernel", |b| b.iter(|| run(&on_host)));
    group.finish();
}

criterion_group!(benches, saxpy, matmul);
criterion_main!(benches);
