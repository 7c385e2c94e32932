//! Kernel launches: results against a Rust reference, index math, shared memory and barriers.

use rand::RngExt;
use streamexec::{ArgList, BlockDim, DevicePtr, Error, SharedMemory, ThreadDim};

use crate::common::{POISON_F32_BITS, POISON_U32, random_f32s, random_u32s, rng};
use crate::{kernels, on_each_platform};

#[test]
fn saxpy_matches_f64_reference() {
    on_each_platform(|exec| {
        let k: kernels::Saxpy = exec.get_kernel(&kernels::saxpy()).unwrap();
        let mut r = rng("saxpy_matches_f64_reference");
        for _ in 0..6 {
            let n = r.random_range(1..200_000usize);
            let a: f32 = r.random_range(-4.0..4.0);
            let x = random_f32s(&mut r, n);
            let y = random_f32s(&mut r, n);
            let (dx, dy) = (
                exec.copy_to_device(&x).unwrap(),
                exec.copy_to_device(&y).unwrap(),
            );
            let threads = 256u32;
            let blocks = (n as u32).div_ceil(threads);
            let mut s = exec.create_stream().unwrap();
            s.then_launch(threads, blocks, &k, (n as u32, a, dx.ptr(), dy.ptr()));
            s.block_host_until_done().unwrap();
            let got = exec.copy_to_vec(&dy).unwrap();
            for i in 0..n {
                let want = a as f64 * x[i] as f64 + y[i] as f64;
                let tol = 1e-5 * (a.abs() as f64 * x[i].abs() as f64 + y[i].abs() as f64) + 1e-6;
                assert!(
                    (got[i] as f64 - want).abs() <= tol,
                    "y[{i}] = {} want {want}",
                    got[i]
                );
            }
        }
    });
}

#[test]
fn thread_and_block_indices_cover_3d_launches() {
    on_each_platform(|exec| {
        let k: kernels::ThreadIds = exec.get_kernel(&kernels::thread_ids()).unwrap();
        for (t, b) in [
            ((1, 1, 1), (1, 1, 1)),
            ((32, 1, 1), (3, 1, 1)),
            ((4, 3, 2), (2, 3, 4)),
            ((7, 5, 3), (1, 2, 1)),
            ((1, 1, 64), (5, 1, 1)),
        ] {
            let (td, bd) = (ThreadDim::from(t), BlockDim::from(b));
            let n = (td.count() * bd.count()) as usize;
            let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
            let mut s = exec.create_stream().unwrap();
            s.then_launch(td, bd, &k, (out.ptr(),));
            s.block_host_until_done().unwrap();
            let got = exec.copy_to_vec(&out).unwrap();
            let per_block = td.count() as u32;
            for (i, v) in got.iter().enumerate() {
                let i = i as u32;
                assert_eq!(
                    *v,
                    (i / per_block) * 65536 + i % per_block,
                    "{t:?} x {b:?} element {i}"
                );
            }
        }
    });
}

fn check_block_sums(input: &[u32], block: usize, got: &[u32]) {
    for (b, chunk) in input.chunks(block).enumerate() {
        let want = chunk.iter().fold(0u32, |a, v| a.wrapping_add(*v));
        assert_eq!(got[b], want, "block size {block}, block {b}");
    }
}

#[test]
fn block_reduction_with_shared_memory_and_barriers_for_every_block_size() {
    on_each_platform(|exec| {
        let stat: kernels::Reduce = exec.get_kernel(&kernels::block_reduce()).unwrap();
        let dynk: kernels::ReduceDyn = exec.get_kernel(&kernels::block_reduce_dyn()).unwrap();
        let mut r = rng("block_reduction");
        let mut sizes = vec![
            1, 2, 3, 5, 7, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256,
        ];
        sizes.extend([257, 383, 500, 511, 512, 513, 640, 777, 1000, 1023, 1024]);
        sizes.extend((0..4).map(|_| r.random_range(1..=1024)));
        for bs in sizes {
            let blocks = r.random_range(1..6usize);
            // The last block is partial when `cut` > 0.
            let cut = if bs > 1 { r.random_range(0..bs) } else { 0 };
            let n = blocks * bs - cut;
            let input = random_u32s(&mut r, n, 1000);
            let din = exec.copy_to_device(&input).unwrap();
            let out1 = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
            let out2 = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
            let mut s = exec.create_stream().unwrap();
            s.then_launch(
                bs as u32,
                blocks as u32,
                &stat,
                (din.ptr(), out1.ptr(), n as u32),
            )
            .then_launch(
                bs as u32,
                blocks as u32,
                &dynk,
                (din.ptr(), out2.ptr(), n as u32, SharedMemory::new(bs)),
            );
            s.block_host_until_done().unwrap();
            check_block_sums(&input, bs, &exec.copy_to_vec(&out1).unwrap());
            check_block_sums(&input, bs, &exec.copy_to_vec(&out2).unwrap());
        }
    });
}

#[test]
fn untyped_launch_checks_arguments_at_run_time() {
    on_each_platform(|exec| {
        let k = exec.get_untyped_kernel(&kernels::affine()).unwrap();
        let data: Vec<u32> = (0..100).collect();
        let dev = exec.copy_to_device(&data).unwrap();
        let args = ArgList::new()
            .arg(dev.ptr())
            .arg(100u32)
            .arg(3u32)
            .arg(1u32);
        let mut s = exec.create_stream().unwrap();
        s.then_launch_untyped(128, 1, &k, &args);
        s.block_host_until_done().unwrap();
        let mut want = data.clone();
        kernels::affine_ref(&mut want, 3, 1);
        assert_eq!(exec.copy_to_vec(&dev).unwrap(), want);

        // Three arguments to a four-parameter kernel.
        let bad = ArgList::new().arg(dev.ptr()).arg(100u32).arg(3u32);
        let mut s = exec.create_stream().unwrap();
        s.then_launch_untyped(128, 1, &k, &bad);
        let err = s.block_host_until_done().unwrap_err();
        assert!(matches!(err, Error::SignatureMismatch { .. }), "{err}");
        assert_eq!(
            exec.copy_to_vec(&dev).unwrap(),
            want,
            "the bad launch must not run"
        );
    });
}

#[test]
fn f32_outputs_are_written_not_left_poisoned() {
    on_each_platform(|exec| {
        let k: kernels::Saxpy = exec.get_kernel(&kernels::saxpy()).unwrap();
        let n = 1000;
        let x = exec.copy_to_device(&vec![1.0f32; n]).unwrap();
        let y = exec
            .copy_to_device(&vec![f32::from_bits(POISON_F32_BITS); n])
            .unwrap();
        let mut s = exec.create_stream().unwrap();
        // Zero y, then y = 2 * x + y over only the first 999 elements.
        s.then_mem_zero(&y)
            .then_launch(64, 16, &k, (999, 2.0, x.ptr(), y.ptr()));
        s.block_host_until_done().unwrap();
        let got = exec.copy_to_vec(&y).unwrap();
        assert!(got[..999].iter().all(|&v| v == 2.0));
        assert_eq!(got[999], 0.0);
    });
}

/// A cooperative launch: blocks that wait for every other block of the grid finish (they are
/// all resident at once) on platforms with cooperative launches, and more blocks than can be
/// resident, or a platform without them, are clear errors on the stream.
#[test]
fn cooperative_launches_let_blocks_wait_for_each_other() {
    on_each_platform(|exec| {
        let most = exec.description().max_cooperative_blocks;
        let spec = kernels::grid_arrive();
        let k: kernels::GridArrive = match exec.get_kernel(&spec) {
            Ok(k) => k,
            Err(e) => {
                // A platform that loads no PTX has no cooperative launch either.
                assert_eq!(most, 0, "{} loads no PTX: {e}", exec.platform_name());
                return;
            }
        };
        let (blocks, threads) = (most.min(9), 32u32);
        let n = (blocks.max(1) * threads) as usize;
        let arrived = exec.copy_to_device(&[0u32]).unwrap();
        let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
        let mut s = exec.create_stream().unwrap();
        if most == 0 {
            s.then_launch_cooperative(threads, 2, &k, (arrived.ptr(), out.ptr()));
            let e = s.block_host_until_done().unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            return;
        }
        s.then_launch_cooperative(threads, blocks, &k, (arrived.ptr(), out.ptr()));
        s.block_host_until_done().unwrap();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![blocks; n]);
        assert_eq!(exec.copy_to_vec(&arrived).unwrap(), vec![blocks]);
        let mut s = exec.create_stream().unwrap();
        s.then_launch_cooperative(
            threads,
            BlockDim::new(most + 1, 1, 1),
            &k,
            (arrived.ptr(), out.ptr()),
        );
        let e = s.block_host_until_done().unwrap_err();
        assert!(matches!(e, Error::LaunchConfig { .. }), "{e}");
        assert!(e.to_string().contains("resident"), "{e}");
    });
}

/// The entry points generated launchers use (streamexec-build): `get_kernel_cached` builds the
/// spec and loads once per executor; `then_launch_with` launches what it returns, fails the
/// stream when the load fails (which is not cached), and does not load on a failed stream.
#[test]
fn cached_loads_happen_once_and_then_launch_with_fails_the_stream_on_a_failed_load() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    type Affine = (DevicePtr<u32>, u32, u32, u32);
    on_each_platform(|exec| {
        let built = AtomicUsize::new(0);
        let load = |e: &streamexec::StreamExecutor| {
            e.get_kernel_cached::<Affine>("conformance::launch::affine", || {
                built.fetch_add(1, Ordering::Relaxed);
                kernels::affine()
            })
        };
        let mut r = rng("cached_loads_happen_once");
        let n = 1000;
        let mut want = random_u32s(&mut r, n, u32::MAX);
        let x = exec.copy_to_device(&want).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_launch_with(128u32, 8u32, load, (x.ptr(), n as u32, 3, 7))
            .then_launch_with(128u32, 8u32, load, (x.ptr(), n as u32, 5, 1))
            .block_host_until_done()
            .unwrap();
        kernels::affine_ref(&mut want, 3, 7);
        kernels::affine_ref(&mut want, 5, 1);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), want);
        assert_eq!(built.load(Ordering::Relaxed), 1, "one spec, one load");
        assert_eq!(load(exec).unwrap().name(), "affine");
        assert_eq!(built.load(Ordering::Relaxed), 1);

        // Args of another arity than the spec's: the load fails, the stream takes the error.
        let bad_loads = AtomicUsize::new(0);
        let bad = |e: &streamexec::StreamExecutor| {
            e.get_kernel_cached::<(DevicePtr<u32>, u32)>("conformance::launch::bad", || {
                bad_loads.fetch_add(1, Ordering::Relaxed);
                kernels::affine()
            })
        };
        let mut s = exec.create_stream().unwrap();
        s.then_launch_with(1u32, 1u32, bad, (x.ptr(), 1));
        assert!(
            matches!(s.status(), Err(Error::SignatureMismatch { .. })),
            "{:?}",
            s.status()
        );
        // The failed stream skips the next launch without loading.
        s.then_launch_with(1u32, 1u32, bad, (x.ptr(), 1));
        assert_eq!(bad_loads.load(Ordering::Relaxed), 1);
        assert!(matches!(
            s.block_host_until_done(),
            Err(Error::SignatureMismatch { .. })
        ));
        // A failed load is not cached: the next try builds the spec again.
        assert!(bad(exec).is_err());
        assert_eq!(bad_loads.load(Ordering::Relaxed), 2);
    });
}
