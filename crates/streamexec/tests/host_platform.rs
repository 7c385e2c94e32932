//! Host-platform specifics: the CUDA execution model on the CPU, and kernel faults that fail a
//! stream without taking the process down.

mod common;

use std::cell::Cell;

use streamexec::{
    BlockDim, DevicePtr, Error, HostKernel, MultiKernelLoaderSpec, PlatformManager, StreamExecutor,
    ThreadCtx, ThreadDim, TypedKernel,
};

use common::{POISON_U32, random_u32s, rng};

fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("HOST")
        .unwrap()
        .executor_for_device(0)
        .unwrap()
}

fn kernel<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    name: &str,
    f: impl Fn(&ThreadCtx<'_>, A) + Send + Sync + 'static,
) -> TypedKernel<A> {
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_host_kernel(HostKernel::new(name, f));
    exec.get_kernel(&spec).unwrap()
}

fn run<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    t: impl Into<ThreadDim>,
    b: impl Into<BlockDim>,
    k: &TypedKernel<A>,
    args: A,
) -> streamexec::Result<()> {
    let mut s = exec.create_stream()?;
    s.then_launch(t, b, k, args);
    s.block_host_until_done()
}

fn fault_text(r: streamexec::Result<()>) -> String {
    match r {
        Err(e @ Error::KernelFault { .. }) => e.to_string(),
        other => panic!("expected a KernelFault, got {other:?}"),
    }
}

#[test]
fn a_panicking_kernel_fails_its_stream_and_the_process_lives() {
    let exec = host();
    let k = kernel(&exec, "boom", |ctx, (n,): (u32,)| {
        if ctx.global_id_x() == n as usize {
            panic!("kernel exploded at {n}");
        }
    });
    let msg = fault_text(run(&exec, 64, 4, &k, (77,)));
    assert!(
        msg.contains("kernel exploded at 77") && msg.contains("`boom`"),
        "{msg}"
    );
    assert!(msg.contains("block (1, 0, 0) thread (13, 0, 0)"), "{msg}");
    // The executor still works.
    run(&exec, 64, 4, &k, (100_000,)).unwrap();
}

#[test]
fn out_of_bounds_access_is_a_fault_naming_the_index() {
    let exec = host();
    let k = kernel(&exec, "oob", |ctx, (p,): (DevicePtr<u32>,)| {
        ctx.global(p).set(ctx.global_id_x(), 1);
    });
    let mem = exec.allocate_array::<u32>(100).unwrap();
    let msg = fault_text(run(&exec, 128, 1, &k, (mem.ptr(),)));
    assert!(
        msg.contains("element 100 past the end of a 100-element buffer"),
        "{msg}"
    );
    // A sub-slice pointer is bounded by the slice, not the allocation.
    let msg = fault_text(run(&exec, 20, 1, &k, (mem.slice(0..10).unwrap().ptr(),)));
    assert!(
        msg.contains("element 10 past the end of a 10-element buffer"),
        "{msg}"
    );
}

#[test]
fn a_pointer_to_freed_memory_is_a_fault_not_a_use_after_free() {
    let exec = host();
    let stale = {
        let mem = exec.allocate_array::<u32>(16).unwrap();
        mem.ptr()
    };
    let k = kernel(&exec, "stale", move |ctx, (): ()| {
        ctx.global(stale).set(0, 1);
    });
    let msg = fault_text(run(&exec, 1, 1, &k, ()));
    assert!(msg.contains("does not refer to live memory"), "{msg}");
    // Passed as an argument, it is rejected when the launch is enqueued.
    let k2 = kernel(&exec, "arg", |_ctx, (_p,): (DevicePtr<u32>,)| {});
    let err = run(&exec, 1, 1, &k2, (stale,)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
}

#[test]
fn barrier_divergence_is_an_error_not_a_hang() {
    let exec = host();
    // Thread 0 exits early; the others reach the barrier.
    let k = kernel(&exec, "diverge0", |ctx, (): ()| {
        if ctx.thread_idx().x == 0 {
            return;
        }
        ctx.sync_threads();
    });
    let msg = fault_text(run(&exec, 32, 2, &k, ()));
    assert!(msg.contains("barrier divergence"), "{msg}");
    // Thread 5 exits early; thread 0 and the others wait at the barrier.
    let k = kernel(&exec, "diverge5", |ctx, (): ()| {
        if ctx.thread_idx().x == 5 {
            return;
        }
        ctx.sync_threads();
    });
    let msg = fault_text(run(&exec, 32, 2, &k, ()));
    assert!(
        msg.contains("barrier divergence") && msg.contains("thread (5, 0, 0)"),
        "{msg}"
    );
    // Uneven barrier counts.
    let k = kernel(&exec, "uneven", |ctx, (): ()| {
        ctx.sync_threads();
        if ctx.thread_idx().x % 2 == 0 {
            ctx.sync_threads();
        }
    });
    assert!(fault_text(run(&exec, 8, 1, &k, ())).contains("barrier divergence"));
}

#[test]
fn a_panic_while_others_wait_at_a_barrier_aborts_the_block_cleanly() {
    let exec = host();
    let k = kernel(&exec, "panic_at_barrier", |ctx, (): ()| {
        ctx.sync_threads();
        if ctx.thread_idx().x == 17 {
            panic!("thread 17 gives up");
        }
        ctx.sync_threads();
    });
    let msg = fault_text(run(&exec, 64, 8, &k, ()));
    assert!(msg.contains("thread 17 gives up"), "{msg}");
}

/// Hillis–Steele inclusive scan in shared memory: many barriers inside a loop.
#[test]
fn inclusive_scan_in_shared_memory_for_odd_block_sizes() {
    let exec = host();
    let k = kernel(&exec, "scan", |ctx, (data,): (DevicePtr<u32>,)| {
        let bd = ctx.block_dim().x as usize;
        let t = ctx.thread_idx().x as usize;
        let base = ctx.block_idx().x as usize * bd;
        let (a, b) = (ctx.shared_array::<u32>(1024), ctx.shared_array::<u32>(1024));
        let g = ctx.global(data);
        a[t].set(g.get(base + t));
        ctx.sync_threads();
        let (mut src, mut dst): (&[Cell<u32>], &[Cell<u32>]) = (a, b);
        let mut off = 1;
        while off < bd {
            let v = src[t].get() + if t >= off { src[t - off].get() } else { 0 };
            dst[t].set(v);
            ctx.sync_threads();
            std::mem::swap(&mut src, &mut dst);
            off *= 2;
        }
        g.set(base + t, src[t].get());
    });
    let mut r = rng("inclusive_scan");
    for bs in [1usize, 3, 17, 32, 100, 333, 1000, 1024] {
        let blocks = 3;
        let input = random_u32s(&mut r, bs * blocks, 100);
        let dev = exec.copy_to_device(&input).unwrap();
        run(&exec, bs as u32, blocks as u32, &k, (dev.ptr(),)).unwrap();
        let got = exec.copy_to_vec(&dev).unwrap();
        for (c, chunk) in input.chunks(bs).enumerate() {
            let mut acc = 0;
            for (i, v) in chunk.iter().enumerate() {
                acc += v;
                assert_eq!(
                    got[c * bs + i],
                    acc,
                    "block size {bs}, block {c}, element {i}"
                );
            }
        }
    }
}

/// Matrix transpose through a shared tile with 2-D blocks.
#[test]
fn tiled_transpose_with_2d_blocks() {
    let exec = host();
    const T: usize = 16;
    let k = kernel(
        &exec,
        "transpose",
        |ctx, (inp, out, w, h): (DevicePtr<f32>, DevicePtr<f32>, u32, u32)| {
            let tile = ctx.shared_array::<f32>(T * (T + 1));
            let (tx, ty) = (ctx.thread_idx().x as usize, ctx.thread_idx().y as usize);
            let (bx, by) = (
                ctx.block_idx().x as usize * T,
                ctx.block_idx().y as usize * T,
            );
            let (w, h) = (w as usize, h as usize);
            if bx + tx < w && by + ty < h {
                tile[ty * (T + 1) + tx].set(ctx.global(inp).get((by + ty) * w + bx + tx));
            }
            ctx.sync_threads();
            let (ox, oy) = (by + tx, bx + ty);
            if ox < h && oy < w {
                ctx.global(out)
                    .set(oy * h + ox, tile[tx * (T + 1) + ty].get());
            }
        },
    );
    let mut r = rng("tiled_transpose");
    let (w, h) = (37usize, 53usize);
    let input = common::random_f32s(&mut r, w * h);
    let din = exec.copy_to_device(&input).unwrap();
    let dout = exec.copy_to_device(&vec![f32::NAN; w * h]).unwrap();
    let grid = ((w as u32).div_ceil(T as u32), (h as u32).div_ceil(T as u32));
    run(
        &exec,
        (T as u32, T as u32),
        grid,
        &k,
        (din.ptr(), dout.ptr(), w as u32, h as u32),
    )
    .unwrap();
    let got = exec.copy_to_vec(&dout).unwrap();
    for y in 0..h {
        for x in 0..w {
            assert_eq!(got[x * h + y], input[y * w + x], "({x}, {y})");
        }
    }
}

#[test]
fn device_atomics_from_many_blocks() {
    let exec = host();
    let k = kernel(
        &exec,
        "histogram",
        |ctx,
         (data, hist, sum, mx, n): (
            DevicePtr<u32>,
            DevicePtr<u32>,
            DevicePtr<f64>,
            DevicePtr<i64>,
            u32,
        )| {
            let i = ctx.global_id_x();
            if i < n as usize {
                let v = ctx.global(data).get(i);
                ctx.global(hist).atomic_add((v % 16) as usize, 1);
                ctx.global(sum).atomic_add(0, v as f64);
                ctx.global(mx).atomic_max(0, v as i64);
                // CAS loop minimum into slot 1.
                let m = ctx.global(mx);
                let mut cur = m.get(1);
                while (v as i64) < cur {
                    let seen = m.atomic_cas(1, cur, v as i64);
                    if seen == cur {
                        break;
                    }
                    cur = seen;
                }
            }
        },
    );
    let mut r = rng("device_atomics");
    let n = 100_003usize;
    let data = random_u32s(&mut r, n, 1_000_000);
    let d = exec.copy_to_device(&data).unwrap();
    let hist = exec.allocate_zeroed_array::<u32>(16).unwrap();
    let sum = exec.allocate_zeroed_array::<f64>(1).unwrap();
    let mx = exec.copy_to_device(&[i64::MIN, i64::MAX]).unwrap();
    run(
        &exec,
        256,
        (n as u32).div_ceil(256),
        &k,
        (d.ptr(), hist.ptr(), sum.ptr(), mx.ptr(), n as u32),
    )
    .unwrap();
    let mut want = vec![0u32; 16];
    data.iter().for_each(|v| want[(v % 16) as usize] += 1);
    assert_eq!(exec.copy_to_vec(&hist).unwrap(), want);
    assert_eq!(
        exec.copy_to_vec(&sum).unwrap()[0],
        data.iter().map(|&v| v as f64).sum::<f64>()
    );
    let m = exec.copy_to_vec(&mx).unwrap();
    assert_eq!(m[0], *data.iter().max().unwrap() as i64);
    assert_eq!(m[1], *data.iter().min().unwrap() as i64);
}

#[test]
fn asking_for_too_much_shared_memory_is_a_fault() {
    let exec = host();
    let limit = exec.description().shared_memory_per_block as usize;
    let k = kernel(&exec, "greedy", move |ctx, (): ()| {
        let _ = ctx.shared_array::<u8>(limit + 1);
    });
    let msg = fault_text(run(&exec, 4, 1, &k, ()));
    assert!(msg.contains("shared memory per block"), "{msg}");
}

#[test]
fn shared_memory_is_zeroed_for_every_block() {
    let exec = host();
    let k = kernel(&exec, "dirty", |ctx, (out,): (DevicePtr<u32>,)| {
        let s = ctx.shared_array::<u32>(256);
        let t = ctx.thread_idx().x as usize;
        let before = s[t].get();
        s[t].set(0xFFFF_FFFF);
        ctx.global(out).set(ctx.global_id_x(), before);
    });
    let out = exec.copy_to_device(&vec![POISON_U32; 256 * 64]).unwrap();
    run(&exec, 256, 64, &k, (out.ptr(),)).unwrap();
    assert!(exec.copy_to_vec(&out).unwrap().iter().all(|&v| v == 0));
}

#[test]
fn warp_and_lane_ids_follow_cuda() {
    let exec = host();
    let k = kernel(&exec, "lanes", |ctx, (out,): (DevicePtr<u32>,)| {
        let t = ctx.linear_thread_idx();
        ctx.global(out)
            .set(t as usize, ctx.warp_id() * 100 + ctx.lane_id());
    });
    let out = exec.copy_to_device(&vec![POISON_U32; 8 * 12]).unwrap();
    run(&exec, (8, 12), 1, &k, (out.ptr(),)).unwrap();
    let got = exec.copy_to_vec(&out).unwrap();
    for (t, v) in got.iter().enumerate() {
        assert_eq!(*v, (t as u32 / 32) * 100 + t as u32 % 32);
    }
}

#[test]
fn a_large_grid_of_small_blocks_runs_every_block_once() {
    let exec = host();
    let k = kernel(&exec, "count", |ctx, (c,): (DevicePtr<u64>,)| {
        ctx.global(c).atomic_add(0, ctx.block_idx().x as u64 + 1);
    });
    let c = exec.allocate_zeroed_array::<u64>(1).unwrap();
    let blocks = 200_000u64;
    run(&exec, 1, blocks as u32, &k, (c.ptr(),)).unwrap();
    assert_eq!(exec.copy_to_vec(&c).unwrap()[0], blocks * (blocks + 1) / 2);
}

#[test]
fn host_spec_checks_name_arity_and_formats() {
    let exec = host();
    let spec = MultiKernelLoaderSpec::new(3)
        .add_host_kernel(HostKernel::new("two", |_ctx, (_a, _b): (u32, u32)| {}));
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    assert!(
        matches!(e, Error::SignatureMismatch { .. }) && e.to_string().contains("3"),
        "{e}"
    );
    let spec = MultiKernelLoaderSpec::new(1)
        .add_opencl_text_in_memory("__kernel void k(int x) {}", "k")
        .add_cuda_ptx_on_disk("/nonexistent/k.ptx", "k");
    let e = exec.get_untyped_kernel(&spec).unwrap_err().to_string();
    assert!(
        e.contains("OpenCL C text `k`") && e.contains("/nonexistent/k.ptx"),
        "{e}"
    );
    assert!(
        e.contains("add_host_kernel"),
        "the error says what to add: {e}"
    );
    let e = PlatformManager::platform_with_name("metal")
        .unwrap_err()
        .to_string();
    assert!(e.contains("host, opencl, cuda, hip"), "{e}");
}

#[test]
fn bulk_slice_access_reads_and_writes_contiguous_runs() {
    let exec = host();
    let k = kernel(
        &exec,
        "chunks",
        |ctx, (x, y, chunk): (DevicePtr<f32>, DevicePtr<f32>, u32)| {
            let (x, y) = (ctx.global(x), ctx.global(y));
            let start = ctx.global_id_x() * chunk as usize;
            if start >= x.len() {
                return;
            }
            let len = (chunk as usize).min(x.len() - start);
            let mut buf = vec![0f32; len];
            x.read_slice(start, &mut buf);
            buf.iter_mut().for_each(|v| *v = *v * 2.0 + 1.0);
            y.write_slice(start, &buf);
        },
    );
    let mut r = rng("bulk_slice_access");
    let n = 10_007;
    let xs = common::random_f32s(&mut r, n);
    let (dx, dy) = (
        exec.copy_to_device(&xs).unwrap(),
        exec.copy_to_device(&vec![f32::NAN; n]).unwrap(),
    );
    run(
        &exec,
        64,
        4,
        &k,
        (dx.ptr(), dy.ptr(), (n as u32).div_ceil(256)),
    )
    .unwrap();
    let got = exec.copy_to_vec(&dy).unwrap();
    for i in 0..n {
        assert_eq!(got[i], xs[i] * 2.0 + 1.0, "element {i}");
    }
    // A run past the end is a fault, and writes nothing.
    let k = kernel(&exec, "overrun", |ctx, (y,): (DevicePtr<f32>,)| {
        ctx.global(y).write_slice(10_000, &[0.0; 8]);
    });
    let msg = fault_text(run(&exec, 1, 1, &k, (dy.ptr(),)));
    assert!(
        msg.contains("write_slice of element 10007 past the end of a 10007-element buffer"),
        "{msg}"
    );
    assert_eq!(exec.copy_to_vec(&dy).unwrap(), got);
}

/// One element per thread, CUDA style (`i = global_id_x(); if i < n`), over many blocks with a
/// ragged last block: the blocks run in plain-loop mode (no barrier).
#[test]
fn one_element_per_thread_over_many_blocks_with_a_ragged_tail() {
    let exec = host();
    type Args = (u32, f32, DevicePtr<f32>, DevicePtr<f32>, DevicePtr<f32>);
    let k = kernel(&exec, "saxpy_per_thread", |ctx, (n, a, x, y, out): Args| {
        let i = ctx.global_id_x();
        if i < n as usize {
            let (x, y) = (ctx.global(x), ctx.global(y));
            ctx.global(out).set(i, a * x.get(i) + y.get(i));
        }
    });
    let mut r = rng("one_element_per_thread");
    for (n, threads) in [(100_003usize, 256u32), (1usize, 256), (4097, 96), (999, 1)] {
        let (xs, ys) = (
            common::random_f32s(&mut r, n),
            common::random_f32s(&mut r, n),
        );
        let a = 0.75f32;
        let (dx, dy) = (
            exec.copy_to_device(&xs).unwrap(),
            exec.copy_to_device(&ys).unwrap(),
        );
        let out = exec
            .copy_to_device(&vec![f32::from_bits(common::POISON_F32_BITS); n])
            .unwrap();
        let blocks = n.div_ceil(threads as usize) as u32;
        run(
            &exec,
            threads,
            blocks,
            &k,
            (n as u32, a, dx.ptr(), dy.ptr(), out.ptr()),
        )
        .unwrap();
        let got = exec.copy_to_vec(&out).unwrap();
        for i in 0..n {
            let want = a as f64 * xs[i] as f64 + ys[i] as f64;
            let tol = 1e-6 * (a as f64 * xs[i].abs() as f64 + ys[i].abs() as f64) + 1e-30;
            assert!(
                (got[i] as f64 - want).abs() <= tol,
                "n {n}, element {i}: got {} want {want}",
                got[i]
            );
        }
    }
}

/// Plain-loop mode steps thread indices without dividing: check them against CUDA's order for a
/// 3-D block in a 2-D grid.
#[test]
fn thread_and_block_indices_of_3d_blocks_without_barriers() {
    let exec = host();
    let k = kernel(&exec, "where_am_i", |ctx, (out,): (DevicePtr<u32>,)| {
        let (t, b, bd, gd) = (
            ctx.thread_idx(),
            ctx.block_idx(),
            ctx.block_dim(),
            ctx.grid_dim(),
        );
        let block = (b.y * gd.x + b.x) as usize;
        let slot = block * (bd.x * bd.y * bd.z) as usize + ctx.linear_thread_idx() as usize;
        let code = t.x | t.y << 8 | t.z << 16 | b.x << 24 | b.y << 28;
        ctx.global(out).set(slot, code);
    });
    let (bx, by, bz, gx, gy) = (5u32, 3u32, 2u32, 3u32, 2u32);
    let total = (bx * by * bz * gx * gy) as usize;
    let out = exec.copy_to_device(&vec![POISON_U32; total]).unwrap();
    run(&exec, (bx, by, bz), (gx, gy), &k, (out.ptr(),)).unwrap();
    let mut want = Vec::new();
    for gb_y in 0..gy {
        for gb_x in 0..gx {
            for z in 0..bz {
                for y in 0..by {
                    for x in 0..bx {
                        want.push(x | y << 8 | z << 16 | gb_x << 24 | gb_y << 28);
                    }
                }
            }
        }
    }
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
}

/// Blocks that use different amounts of shared memory, on few workers: each block still sees
/// its shared memory zeroed (only the bytes a block used are cleared for the next one).
#[test]
fn shared_memory_of_varying_size_is_zeroed_for_every_block() {
    let exec = host();
    let k = kernel(&exec, "varying", |ctx, (out,): (DevicePtr<u32>,)| {
        let b = ctx.block_idx().x as usize;
        let len = 1 + (b * 2027) % 12_000;
        let s = ctx.shared_array::<u32>(len);
        let t = ctx.linear_thread_idx() as usize;
        if t == 0 {
            // Thread 0 runs first: nothing of this block has written yet.
            let dirty = s.iter().filter(|c| c.get() != 0).count() as u32;
            ctx.global(out).set(b, dirty);
        }
        for c in s.iter().skip(t).step_by(ctx.block_dim().x as usize) {
            c.set(0xFFFF_FFFF);
        }
    });
    let blocks = 300usize;
    let out = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
    run(&exec, 32, blocks as u32, &k, (out.ptr(),)).unwrap();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![0u32; blocks]);
}

/// In plain-loop mode (thread 0 exited without a barrier) a later thread that calls
/// `sync_threads` fails the launch with barrier divergence naming it: no hang, no panic.
#[test]
fn a_barrier_only_a_later_thread_reaches_is_divergence() {
    let exec = host();
    type Args = (u32, u32, DevicePtr<u32>);
    let k = kernel(&exec, "late_barrier", |ctx, (block, thread, out): Args| {
        let i = ctx.global_id_x();
        ctx.global(out).set(i, i as u32);
        if ctx.block_idx().x == block && ctx.linear_thread_idx() == thread {
            ctx.sync_threads();
        }
    });
    let n = 128 * 5;
    let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_launch(128, 5, &k, (3, 70, out.ptr()));
    let msg = fault_text(s.block_host_until_done());
    assert!(
        msg.contains("barrier divergence")
            && msg.contains("`late_barrier`")
            && msg.contains("block (3, 0, 0) thread (70, 0, 0)"),
        "{msg}"
    );
    assert!(!s.ok(), "the stream must report the failed launch");
    assert!(fault_text(s.status()).contains("barrier divergence"));

    // A 2-D block: the message names the thread's (x, y).
    let k2 = kernel(&exec, "late_barrier_2d", |ctx, (): ()| {
        let t = ctx.thread_idx();
        if (t.x, t.y) == (1, 2) {
            ctx.sync_threads();
        }
    });
    let msg = fault_text(run(&exec, (4, 4), 2, &k2, ()));
    assert!(
        msg.contains("barrier divergence") && msg.contains("thread (1, 2, 0)"),
        "{msg}"
    );

    // The executor stays usable: the same kernel with no thread at the barrier runs fully.
    let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
    run(&exec, 128, 5, &k, (99, 0, out.ptr())).unwrap();
    let want: Vec<u32> = (0..n as u32).collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
}
