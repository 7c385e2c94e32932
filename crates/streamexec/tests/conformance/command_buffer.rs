//! Command buffers: record once, replay on any stream of the executor, update a launch's
//! arguments in place; validated at record time, memory pinned for the buffer's life, replay
//! failures fail the submitting stream. Every result is checked against a plain Rust loop on
//! random inputs, with poisoned outputs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use streamexec::{ArgList, Error, StreamExecutor};

use crate::common::{POISON_U32, random_u32s, rng};
use crate::kernels::{self, Affine};
use crate::on_each_platform;

const N: usize = 1000;

/// What a platform's finalized buffer is replayed as. OpenCL: on a device with
/// cl_khr_command_buffer 0.9.0-0.9.4 (PoCL 3.1, which the suite runs on), unless
/// `STREAMEXEC_OPENCL_COMMAND_BUFFER=0` turns it off.
fn expected_kind(exec: &StreamExecutor) -> &'static str {
    match exec.platform_name() {
        "host" => "host op list",
        "cuda" => "CUDA graph",
        "opencl"
            if std::env::var_os("STREAMEXEC_OPENCL_COMMAND_BUFFER").is_some_and(|v| v == "0") =>
        {
            "plain replay"
        }
        "opencl" => "cl_khr_command_buffer",
        _ => "plain replay",
    }
}

#[test]
fn a_buffer_replays_many_times_and_updates_scalars_and_pointers() {
    on_each_platform(|exec| {
        let mut r = rng("command_buffer_replay");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input = random_u32s(&mut r, N, 1 << 20);
        let src = exec.copy_to_device(&input).unwrap();
        let a = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        let b = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));

        // a = src; a = a * 3 + 7; b = a; b = b * 5 + 1; count.
        let mut cb = exec.create_command_buffer();
        cb.memcpy_d2d(&src, &a).unwrap();
        let first = cb.launch(128, 8, &k, (a.ptr(), N as u32, 3, 7)).unwrap();
        cb.memcpy_d2d(&a, &b).unwrap();
        let second = cb
            .launch_untyped(
                128,
                8,
                k.untyped(),
                &ArgList::new()
                    .arg(b.ptr())
                    .arg(N as u32)
                    .arg(5u32)
                    .arg(1u32),
            )
            .unwrap();
        let c = calls.clone();
        cb.host_callback(move || {
            c.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        cb.finalize().unwrap();
        assert_eq!(cb.len(), 5);
        assert_eq!(cb.replay_kind(), expected_kind(exec), "{cb:?}");

        let mut s = exec.create_stream().unwrap();
        for round in 0..3 {
            s.then_submit(&cb);
            s.block_host_until_done().unwrap();
            let (mut wa, mut wb) = (input.clone(), vec![0; N]);
            kernels::affine_ref(&mut wa, 3, 7);
            wb.copy_from_slice(&wa);
            kernels::affine_ref(&mut wb, 5, 1);
            assert_eq!(exec.copy_to_vec(&a).unwrap(), wa, "round {round}");
            assert_eq!(exec.copy_to_vec(&b).unwrap(), wb, "round {round}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);

        // New scalars for the first launch; the second now works in place on `c`.
        let c_mem = exec.copy_to_device(&input).unwrap();
        cb.update(&first, (a.ptr(), N as u32, 11, 13)).unwrap();
        cb.update_untyped(
            &second,
            &ArgList::new()
                .arg(c_mem.ptr())
                .arg(N as u32)
                .arg(2u32)
                .arg(9u32),
        )
        .unwrap();
        exec.synchronous_memcpy_h2d(&[POISON_U32; N], &b).unwrap();
        // Two replays on two streams, one after the other.
        let mut s2 = exec.create_stream().unwrap();
        s.then_submit(&cb);
        s2.then_wait_for(&s).then_submit(&cb);
        s2.block_host_until_done().unwrap();
        let mut wa = input.clone();
        kernels::affine_ref(&mut wa, 11, 13);
        let mut wc = input.clone();
        kernels::affine_ref(&mut wc, 2, 9);
        kernels::affine_ref(&mut wc, 2, 9);
        assert_eq!(exec.copy_to_vec(&a).unwrap(), wa);
        assert_eq!(
            exec.copy_to_vec(&b).unwrap(),
            wa,
            "the copy into b still runs"
        );
        assert_eq!(exec.copy_to_vec(&c_mem).unwrap(), wc);
        assert_eq!(calls.load(Ordering::SeqCst), 5);
    });
}

#[test]
fn an_update_does_not_reach_a_replay_already_queued() {
    on_each_platform(|exec| {
        let mut r = rng("command_buffer_queued_update");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input = random_u32s(&mut r, N, 1 << 20);
        let x = exec.copy_to_device(&input).unwrap();
        let mut cb = exec.create_command_buffer();
        let l = cb.launch(256, 4, &k, (x.ptr(), N as u32, 3, 1)).unwrap();
        cb.finalize().unwrap();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback_with_status(move || {
            gate.recv_timeout(Duration::from_secs(20))
                .map_err(|_| Error::HostCallback {
                    detail: "the gate was never opened".into(),
                })
        })
        .then_submit(&cb);
        cb.update(&l, (x.ptr(), N as u32, 5, 2)).unwrap();
        s.then_submit(&cb);
        open.send(()).unwrap();
        s.block_host_until_done().unwrap();
        let mut want = input.clone();
        kernels::affine_ref(&mut want, 3, 1);
        kernels::affine_ref(&mut want, 5, 2);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), want);
    });
}

#[test]
fn nested_buffers_and_event_waits_replay_in_order() {
    on_each_platform(|exec| {
        let mut r = rng("command_buffer_nested");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input = random_u32s(&mut r, N, 1 << 20);
        let x = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        let staged = exec.copy_to_device(&input).unwrap();

        let mut inner = exec.create_command_buffer();
        inner
            .launch(100, 10, &k, (x.ptr(), N as u32, 3, 1))
            .unwrap();
        inner.memset32(x.slice(0..4).unwrap(), 0x1234_5678).unwrap();

        // Another stream fills `x` from `staged` behind a gate; the buffer waits for it.
        let ready = exec.create_event().unwrap();
        let mut outer = exec.create_command_buffer();
        outer.wait_for(&ready).unwrap();
        outer.nested(&inner).unwrap();
        outer.nested(&inner).unwrap();
        assert_eq!(outer.len(), 5);
        // Later changes to `inner` do not reach `outer` (it copied them).
        inner.memset(&x, 0xFF).unwrap();
        outer.finalize().unwrap();

        let (open, gate) = std::sync::mpsc::channel::<()>();
        let mut producer = exec.create_stream_non_blocking().unwrap();
        let mut consumer = exec.create_stream_non_blocking().unwrap();
        producer
            .then_host_callback_with_status(move || {
                gate.recv_timeout(Duration::from_secs(20))
                    .map_err(|_| Error::HostCallback {
                        detail: "the gate was never opened".into(),
                    })
            })
            .then_memcpy_d2d(&staged, &x)
            .then_record_event(&ready);
        consumer.then_submit(&outer);
        open.send(()).unwrap();
        consumer.block_host_until_done().unwrap();
        producer.block_host_until_done().unwrap();
        let mut want = input.clone();
        for _ in 0..2 {
            kernels::affine_ref(&mut want, 3, 1);
            want[..4].fill(0x1234_5678);
        }
        assert_eq!(exec.copy_to_vec(&x).unwrap(), want);
    });
}

#[test]
fn memory_freed_while_recorded_stays_allocated_for_the_buffer() {
    on_each_platform(|exec| {
        let mut r = rng("command_buffer_pins");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input = random_u32s(&mut r, N, 1 << 20);
        let scratch = exec.copy_to_device(&input).unwrap();
        let out = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        let stale = scratch.ptr();
        let mut cb = exec.create_command_buffer();
        cb.launch(128, 8, &k, (scratch.ptr(), N as u32, 1, 1))
            .unwrap();
        cb.memcpy_d2d(&scratch, &out).unwrap();
        cb.finalize().unwrap();
        drop(scratch);
        // Dead to everything else at once ...
        let mut s = exec.create_stream().unwrap();
        s.then_launch(128, 8, &k, (stale, N as u32, 1, 1));
        let e = s.block_host_until_done().unwrap_err();
        assert!(e.to_string().contains("live allocation"), "{e}");
        let mut other = exec.create_command_buffer();
        let e = other
            .launch(128, 8, &k, (stale, N as u32, 1, 1))
            .unwrap_err();
        assert!(e.to_string().contains("live allocation"), "{e}");
        // ... but still there for the buffer, which replays into it twice.
        let mut s = exec.create_stream().unwrap();
        s.then_submit(&cb).then_submit(&cb);
        s.block_host_until_done().unwrap();
        let want: Vec<u32> = input.iter().map(|v| v + 2).collect();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
        // Dropping the buffer with a replay queued is safe: the memory outlives the replay.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        s.then_host_callback_with_status(move || {
            gate.recv_timeout(Duration::from_secs(20))
                .map_err(|_| Error::HostCallback {
                    detail: "the gate was never opened".into(),
                })
        })
        .then_submit(&cb);
        drop(cb);
        open.send(()).unwrap();
        s.block_host_until_done().unwrap();
        let want: Vec<u32> = input.iter().map(|v| v + 3).collect();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
    });
}

#[test]
fn a_failure_inside_a_replay_fails_the_stream_and_skips_the_rest() {
    on_each_platform(|exec| {
        let x = exec.copy_to_device(&[1u32; 64]).unwrap();
        let mut cb = exec.create_command_buffer();
        cb.memset32(&x, 2).unwrap();
        cb.host_callback_with_status(|| {
            Err(Error::HostCallback {
                detail: "replay says no".into(),
            })
        })
        .unwrap();
        cb.memset32(&x, 3).unwrap();
        cb.finalize().unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_submit(&cb).then_memset32(&x, 4);
        let e = s.block_host_until_done().unwrap_err();
        assert!(e.to_string().contains("replay says no"), "{e}");
        assert_eq!(exec.copy_to_vec(&x).unwrap(), vec![2; 64]);
        // A panic is caught the same way.
        let mut cb = exec.create_command_buffer();
        cb.host_callback(|| panic!("replay panics")).unwrap();
        cb.finalize().unwrap();
        let mut s = exec.create_stream().unwrap();
        let e = s.then_submit(&cb).block_host_until_done().unwrap_err();
        assert!(e.to_string().contains("replay panics"), "{e}");
    });
}

#[test]
fn bad_commands_are_refused_at_record_time() {
    on_each_platform(|exec| {
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let x = exec.copy_to_device(&[0u32; 64]).unwrap();
        let y = exec.copy_to_device(&[0u32; 32]).unwrap();
        let mut cb = exec.create_command_buffer();
        let too_many = exec.description().max_threads_per_block + 1;
        let e = cb.launch(too_many, 1, &k, (x.ptr(), 64, 1, 1)).unwrap_err();
        assert!(matches!(e, Error::LaunchConfig { .. }), "{e}");
        let e = cb.memcpy_d2d(&x, &y).unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { .. }), "{e}");
        let e = cb.memset32(
            x.slice(0..3)
                .unwrap()
                .cast::<u8>()
                .unwrap()
                .slice(1..5)
                .unwrap(),
            0,
        );
        assert!(matches!(e, Err(Error::InvalidArgument { .. })), "{e:?}");
        let wrong = ArgList::new().arg(x.ptr()).arg(64u32);
        let e = cb.launch_untyped(1, 1, k.untyped(), &wrong).unwrap_err();
        assert!(matches!(e, Error::SignatureMismatch { .. }), "{e}");
        assert!(cb.is_empty(), "nothing refused was recorded");

        // Not finalized: a submit fails the stream; finalized: recording fails.
        let l = cb.launch(64, 1, &k, (x.ptr(), 64, 1, 1)).unwrap();
        let mut s = exec.create_stream().unwrap();
        let e = s.then_submit(&cb).block_host_until_done().unwrap_err();
        assert!(e.to_string().contains("not finalized"), "{e}");
        cb.finalize().unwrap();
        let e = cb.memset(&x, 0).unwrap_err();
        assert!(e.to_string().contains("finalized"), "{e}");
        // An update with another buffer's handle, or of another kind, is refused.
        let mut other = exec.create_command_buffer();
        let e = other.update(&l, (x.ptr(), 64, 1, 1)).unwrap_err();
        assert!(e.to_string().contains("another command buffer"), "{e}");
        let untyped = ArgList::new().arg(x.ptr()).arg(64u32).arg(1u32).arg(1u32);
        let ul = other.launch_untyped(64, 1, k.untyped(), &untyped).unwrap();
        let e = other
            .update_untyped(
                &ul,
                &ArgList::new().arg(x.ptr()).arg(64u32).arg(1u64).arg(1u32),
            )
            .unwrap_err();
        assert!(e.to_string().contains("differ in kind"), "{e}");
        // A buffer of another executor cannot be submitted here.
        if let Some(other_exec) = second_executor(exec) {
            let mut s = other_exec.create_stream().unwrap();
            let e = s.then_submit(&cb).block_host_until_done().unwrap_err();
            assert!(
                e.to_string().contains("record it on the stream's executor"),
                "{e}"
            );
        }
    });
}

/// Device 1 of `exec`'s platform, if there is one.
fn second_executor(exec: &StreamExecutor) -> Option<StreamExecutor> {
    let p = streamexec::PlatformManager::platform_with_name(exec.platform_name()).ok()?;
    (p.device_count() > 1)
        .then(|| p.executor_for_device(1).ok())
        .flatten()
}

/// The pinned copy of a stream with a failed record: a buffer's wait on an event whose record
/// failed fails the submitting stream.
#[test]
fn a_wait_on_a_failed_event_fails_the_replay() {
    on_each_platform(|exec| {
        let x = exec.copy_to_device(&[7u32; 16]).unwrap();
        let ev = exec.create_event().unwrap();
        let mut cb = exec.create_command_buffer();
        cb.wait_for(&ev).unwrap();
        cb.memset32(&x, 1).unwrap();
        cb.finalize().unwrap();
        let mut failing = exec.create_stream_non_blocking().unwrap();
        failing
            .then_host_callback_with_status(|| {
                Err(Error::HostCallback {
                    detail: "producer failed".into(),
                })
            })
            .then_record_event(&ev);
        let _ = failing.block_host_until_done();
        let mut s = exec.create_stream_non_blocking().unwrap();
        let e = s.then_submit(&cb).block_host_until_done().unwrap_err();
        assert!(matches!(e, Error::DependencyFailed { .. }), "{e}");
        assert_eq!(exec.copy_to_vec(&x).unwrap(), vec![7; 16]);
    });
}

/// A host callback between two runs of device commands (on OpenCL: two cl command buffers with
/// the callback replayed through the stream between them) runs after the first run and before
/// the second, at every replay, also after a launch of the second run is updated (on OpenCL:
/// that run re-recorded).
#[test]
fn a_host_callback_between_device_segments_replays_in_order_after_an_update() {
    on_each_platform(|exec| {
        let mut r = rng("command_buffer_segments");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input = random_u32s(&mut r, N, 1 << 20);
        let src = exec.copy_to_device(&input).unwrap();
        let a = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        let b = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        let (reached, at_callback) = std::sync::mpsc::channel::<()>();
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);

        // a = src * 3 + 7; [callback]; b = a; b = b * m + c; b[..4] = 0x1234_5678.
        let mut cb = exec.create_command_buffer();
        cb.memcpy_d2d(&src, &a).unwrap();
        cb.launch(128, 8, &k, (a.ptr(), N as u32, 3, 7)).unwrap();
        cb.host_callback_with_status(move || {
            reached.send(()).map_err(|_| Error::HostCallback {
                detail: "the test stopped listening".into(),
            })?;
            gate.lock()
                .unwrap()
                .recv_timeout(Duration::from_secs(20))
                .map_err(|_| Error::HostCallback {
                    detail: "the gate was never opened".into(),
                })
        })
        .unwrap();
        cb.memcpy_d2d(&a, &b).unwrap();
        let second = cb.launch(128, 8, &k, (b.ptr(), N as u32, 5, 1)).unwrap();
        cb.memset32(b.slice(0..4).unwrap(), 0x1234_5678).unwrap();
        cb.finalize().unwrap();
        assert_eq!(cb.replay_kind(), expected_kind(exec), "{cb:?}");

        let mut s = exec.create_stream().unwrap();
        for (round, (mul, add)) in [(5, 1), (11, 2)].into_iter().enumerate() {
            if round == 1 {
                cb.update(&second, (b.ptr(), N as u32, mul, add)).unwrap();
                exec.synchronous_memcpy_h2d(&[POISON_U32; N], &a).unwrap();
                exec.synchronous_memcpy_h2d(&[POISON_U32; N], &b).unwrap();
            }
            s.then_submit(&cb);
            at_callback
                .recv_timeout(Duration::from_secs(20))
                .expect("the callback ran");
            // At the callback: the first run is done, the second has not started.
            let mut wa = input.clone();
            kernels::affine_ref(&mut wa, 3, 7);
            assert_eq!(
                exec.copy_to_vec(&a).unwrap(),
                wa,
                "round {round}: first run"
            );
            assert_eq!(
                exec.copy_to_vec(&b).unwrap(),
                vec![POISON_U32; N],
                "round {round}: the second run started before the callback returned"
            );
            open.send(()).unwrap();
            s.block_host_until_done().unwrap();
            let mut wb = wa.clone();
            kernels::affine_ref(&mut wb, mul, add);
            wb[..4].fill(0x1234_5678);
            assert_eq!(exec.copy_to_vec(&a).unwrap(), wa, "round {round}");
            assert_eq!(exec.copy_to_vec(&b).unwrap(), wb, "round {round}");
        }
    });
}

/// The same buffer submitted many times back to back, without waiting in between (on OpenCL:
/// each enqueue while earlier ones are still pending), on one stream and then alternating
/// between two streams ordered by events: every replay runs, in order.
#[test]
fn a_buffer_submitted_many_times_without_waiting_replays_in_order() {
    on_each_platform(|exec| {
        const REPLAYS: usize = 100;
        let mut r = rng("command_buffer_back_to_back");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input = random_u32s(&mut r, N, u32::MAX);
        let x = exec.copy_to_device(&input).unwrap();
        let y = exec.copy_to_device(&[POISON_U32; N]).unwrap();
        // x = x * 3 + 1; y = x; y = y * 5 + 2: not commutative across replays.
        let mut cb = exec.create_command_buffer();
        cb.launch(128, 8, &k, (x.ptr(), N as u32, 3, 1)).unwrap();
        cb.memcpy_d2d(&x, &y).unwrap();
        cb.launch(128, 8, &k, (y.ptr(), N as u32, 5, 2)).unwrap();
        cb.finalize().unwrap();
        assert_eq!(cb.replay_kind(), expected_kind(exec), "{cb:?}");
        let want = |replays: usize, x0: &[u32]| {
            let mut wx = x0.to_vec();
            for _ in 0..replays {
                kernels::affine_ref(&mut wx, 3, 1);
            }
            let mut wy = wx.clone();
            kernels::affine_ref(&mut wy, 5, 2);
            (wx, wy)
        };

        let mut s = exec.create_stream().unwrap();
        for _ in 0..REPLAYS {
            s.then_submit(&cb);
        }
        s.block_host_until_done().unwrap();
        let (wx, wy) = want(REPLAYS, &input);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), wx, "one stream");
        assert_eq!(exec.copy_to_vec(&y).unwrap(), wy, "one stream");

        let mut s2 = exec.create_stream().unwrap();
        for i in 0..REPLAYS {
            let (from, to) = if i % 2 == 0 {
                (&mut s2, &mut s)
            } else {
                (&mut s, &mut s2)
            };
            to.then_wait_for(&*from).then_submit(&cb);
        }
        s.block_host_until_done().unwrap();
        s2.block_host_until_done().unwrap();
        let (wx, wy) = want(REPLAYS, &wx);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), wx, "two streams");
        assert_eq!(exec.copy_to_vec(&y).unwrap(), wy, "two streams");
    });
}

/// A buffer of PTX launches where the platform loads PTX (on host the engine's launch state is
/// per run, so its launches are prepared at each submit): replays and an update are correct.
#[test]
fn ptx_launches_replay_and_update() {
    on_each_platform(|exec| {
        let spec = streamexec::MultiKernelLoaderSpec::new(4)
            .add_cuda_ptx_in_memory(kernels::PTX, "affine");
        let k: Affine = match exec.get_kernel(&spec) {
            Ok(k) => k,
            Err(Error::NoSuitableFormat { .. }) => return,
            Err(e) => panic!("{e}"),
        };
        let mut r = rng("command_buffer_ptx");
        let input = random_u32s(&mut r, N, 1 << 20);
        let x = exec.copy_to_device(&input).unwrap();
        let mut cb = exec.create_command_buffer();
        let l = cb.launch(128, 8, &k, (x.ptr(), N as u32, 3, 1)).unwrap();
        cb.finalize().unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_submit(&cb).then_submit(&cb);
        cb.update(&l, (x.ptr(), N as u32, 7, 2)).unwrap();
        s.then_submit(&cb).block_host_until_done().unwrap();
        let mut want = input.clone();
        kernels::affine_ref(&mut want, 3, 1);
        kernels::affine_ref(&mut want, 3, 1);
        kernels::affine_ref(&mut want, 7, 2);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), want);
    });
}
