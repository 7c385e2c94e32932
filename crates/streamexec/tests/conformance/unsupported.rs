//! What every platform must do for an operation it does not support: return
//! `Err(Error::Unsupported)` naming the platform and the operation, with a reason (never a
//! panic, never a hang); a stream whose `then_*` is unsupported enters its error state, skips
//! later work (its skipped event records fail their events) and reports that first error from
//! `block_host_until_done`.
//!
//! Each expectation runs on every available platform where it applies (where the platform
//! reports the operation as unsupported), and all of them run on the template backend `noop`
//! when it is compiled in (`cargo test --features noop --test conformance`), where every
//! operation that would do work is unsupported. noop has no memory, so where an operation takes
//! device slices, noop gets the host platform's: BLAS and random-number support are checked
//! before the operands, so a platform without them answers `Unsupported` whatever it is given.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use streamexec::{
    DeviceMemory, Error, EventStatus, HostKernel, MultiKernelLoaderSpec, PlatformManager,
    StreamExecutor, Transpose,
};

use crate::common::{self, POISON_U32};

/// The template backend, on which every expectation must hold.
const NOOP: &str = "noop";

/// Every platform this file checks: noop included.
fn platforms() -> Vec<StreamExecutor> {
    let execs = common::executors_with_templates();
    if !execs.iter().any(|e| e.platform_name() == NOOP) {
        eprintln!("the noop template backend is not compiled in (--features noop): not checked");
    }
    execs
}

/// Runs `f` on its own thread: a panic fails the test naming `what`, and so does a hang
/// (`f` not done within a minute).
fn without_panic_or_hang<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => worker.join().unwrap_or_else(|_| panic!("{what}: panicked")),
        // The sender dropped without sending: `f` panicked.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let _ = worker.join();
            panic!("{what}: panicked")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for 60 s"),
    }
}

/// Checks that `err` is `Unsupported` on `exec`'s platform naming `operation` (any operation
/// when `None`) with a reason.
#[track_caller]
fn assert_unsupported(exec: &StreamExecutor, operation: Option<&str>, err: &Error) {
    let Error::Unsupported {
        platform,
        operation: op,
        reason,
    } = err
    else {
        panic!(
            "{}: expected Unsupported ({operation:?}), got: {err}",
            exec.platform_name()
        );
    };
    if let Some(want) = operation {
        assert_eq!(op, want, "{err}");
    }
    assert!(!op.is_empty() && !reason.is_empty(), "{err}");
    // The trait's default `then_memcpy_peer` cannot know the platform's name.
    if *platform != "this platform" {
        assert_eq!(*platform, exec.platform_name(), "{err}");
    }
    assert!(err.to_string().contains(op.as_str()), "{err}");
}

/// True when `r` says `Unsupported` (checked as [`assert_unsupported`]); false when the
/// platform supports the operation (`Ok`, or an error of another kind), which noop never does.
#[track_caller]
fn unsupported_here<T>(
    exec: &StreamExecutor,
    operation: Option<&str>,
    r: &Result<T, Error>,
) -> bool {
    match r {
        Err(e @ Error::Unsupported { .. }) => {
            assert_unsupported(exec, operation, e);
            true
        }
        Err(e) => {
            assert_ne!(exec.platform_name(), NOOP, "{operation:?}: {e}");
            false
        }
        Ok(_) => {
            assert_ne!(
                exec.platform_name(),
                NOOP,
                "{operation:?} succeeded on noop"
            );
            false
        }
    }
}

/// Four `1.0`s in device memory: `exec`'s own, or the host platform's where `exec` has none.
fn ones(exec: &StreamExecutor) -> (StreamExecutor, DeviceMemory<f32>) {
    match exec.copy_to_device(&[1.0f32; 4]) {
        Ok(m) => (exec.clone(), m),
        Err(e) => {
            assert_unsupported(exec, Some("allocate"), &e);
            let host = PlatformManager::default_platform()
                .unwrap()
                .executor_for_device(0)
                .unwrap();
            let m = host.copy_to_device(&[1.0f32; 4]).unwrap();
            (host, m)
        }
    }
}

#[test]
fn noop_answers_every_operation_with_unsupported_naming_it() {
    for exec in platforms()
        .into_iter()
        .filter(|e| e.platform_name() == NOOP)
    {
        without_panic_or_hang("noop's operations", move || {
            let platform = PlatformManager::platform_with_name(NOOP).unwrap();
            assert_eq!(platform.device_count(), 1);
            assert_eq!(platform.description(0).unwrap().platform, NOOP);
            assert!(matches!(
                platform.executor_for_device(1),
                Err(Error::InvalidDevice { .. })
            ));
            let op = |operation: &str, e: Error| assert_unsupported(&exec, Some(operation), &e);
            op("allocate", exec.allocate_array::<f32>(4).unwrap_err());
            op(
                "allocate",
                exec.allocate_zeroed_array::<u32>(4).unwrap_err(),
            );
            op("allocate", exec.allocate_scalar::<f64>().unwrap_err());
            op("allocate", exec.copy_to_device(&[1u8, 2]).unwrap_err());
            op(
                "allocate_unified",
                exec.allocate_unified::<u32>(4).unwrap_err(),
            );
            op("allocate_host", exec.allocate_host::<f32>(4).unwrap_err());
            op("memory_usage", exec.memory_usage().unwrap_err());
            op("set_race_check", exec.set_race_check(true).unwrap_err());
            let spec = MultiKernelLoaderSpec::new(1)
                .add_host_kernel(HostKernel::new("k", |_, (_x,): (u32,)| {}));
            op("load_kernel", exec.get_untyped_kernel(&spec).unwrap_err());
            op("load_kernel", exec.get_kernel::<(u32,)>(&spec).unwrap_err());
            assert_unsupported(&exec, None, exec.rpc().err().as_ref().unwrap());
            assert!(!exec.can_enable_peer_access_to(&exec));
            // Bookkeeping with nothing to do works: streams and events exist, nothing is queued.
            exec.synchronize_all().unwrap();
            let (event, other) = (exec.create_event().unwrap(), exec.create_event().unwrap());
            assert_eq!(event.status(), EventStatus::Unrecorded);
            event.synchronize().unwrap();
            op("elapsed_since", event.elapsed_since(&other).unwrap_err());
            let timer = exec.create_timer().unwrap();
            assert!(matches!(timer.elapsed(), Err(Error::Event { .. })));
            let mut s = exec.create_stream().unwrap();
            s.block_host_until_done().unwrap();
            futures::executor::block_on(s.done()).unwrap();
            // Each `then_*` as the first operation of a fresh stream.
            let first = |f: &dyn Fn(&mut streamexec::Stream)| {
                let mut s = exec.create_stream().unwrap();
                f(&mut s);
                s.block_host_until_done().unwrap_err()
            };
            op(
                "then_host_callback",
                first(&|s| {
                    s.then_host_callback(|| {});
                }),
            );
            op(
                "then_host_callback",
                first(&|s| {
                    s.then_host_callback_with_status(|| Ok(()));
                }),
            );
            op(
                "then_record_event",
                first(&|s| {
                    s.then_record_event(&event);
                }),
            );
            op(
                "then_record_event",
                first(&|s| {
                    s.then_start_timer(&timer);
                }),
            );
            op(
                "then_set_rng_seed",
                first(&|s| {
                    s.then_set_rng_seed(&[7; 16]);
                }),
            );
            let (_, x) = ones(&exec);
            op(
                "then_populate_rand_uniform",
                first(&|s| {
                    s.then_populate_rand_uniform(&x);
                }),
            );
            op(
                "then_populate_rand_gaussian",
                first(&|s| {
                    s.then_populate_rand_gaussian(0.0f32, 1.0, &x);
                }),
            );
            op(
                "then_blas_axpy",
                first(&|s| {
                    s.then_blas_axpy(4, 2.0f32, &x, 1, &x, 1);
                }),
            );
            op(
                "then_blas_dot",
                first(&|s| {
                    s.then_blas_dot(4, &x, 1, &x, 1, &x);
                }),
            );
            op(
                "then_blas_gemv",
                first(&|s| {
                    s.then_blas_gemv(Transpose::None, 2, 2, 1.0f32, &x, 2, &x, 1, 0.0, &x, 1);
                }),
            );
            // Waiting for an event never recorded is waiting for nothing.
            s.then_wait_for(&event).block_host_until_done().unwrap();
        });
    }
}

#[test]
fn a_stream_whose_operation_is_unsupported_fails_and_skips_later_work() {
    for exec in platforms() {
        let name = exec.platform_name();
        eprintln!("-- on platform {name}");
        let e2 = exec.clone();
        without_panic_or_hang(name, move || {
            let exec = e2;
            // noop: a host callback. Elsewhere: a peer copy from the stream's own executor,
            // which platforms without peer copies (host, OpenCL) do not support.
            let mem = exec.copy_to_device(&[1u32; 4]).ok();
            let mut s = exec.create_stream().unwrap();
            match &mem {
                Some(m) => {
                    let other = exec.copy_to_device(&[2u32; 4]).unwrap();
                    s.then_memcpy_peer(&exec, &other, m)
                }
                None => s.then_host_callback(|| {}),
            };
            let Err(first) = s.status() else {
                eprintln!(
                    "{}: peer copies are supported; nothing to check",
                    exec.platform_name()
                );
                s.block_host_until_done().unwrap();
                return;
            };
            assert_unsupported(&exec, None, &first);
            // Later work is skipped: a callback, a fill, an event record (which fails its event).
            let ran = Arc::new(AtomicBool::new(false));
            let flag = ran.clone();
            s.then_host_callback(move || flag.store(true, Ordering::SeqCst));
            if let Some(m) = &mem {
                s.then_memset32(m, POISON_U32);
            }
            let event = exec.create_event().unwrap();
            s.then_record_event(&event);
            assert_eq!(s.block_host_until_done().unwrap_err(), first);
            assert_eq!(futures::executor::block_on(s.done()).unwrap_err(), first);
            assert_eq!(s.status().unwrap_err(), first);
            assert!(!s.ok());
            assert!(
                !ran.load(Ordering::SeqCst),
                "a callback after the failure ran"
            );
            if let Some(m) = &mem {
                assert_eq!(
                    exec.copy_to_vec(m).unwrap(),
                    [1; 4],
                    "a fill after the failure ran"
                );
            }
            assert_eq!(event.status(), EventStatus::Error(first.clone()));
            assert_eq!(event.synchronize().unwrap_err(), first);
            // Waiters on the failed stream, or on its skipped record, fail instead of hanging.
            let mut waiter = exec.create_stream().unwrap();
            let err = waiter
                .then_wait_for(&event)
                .block_host_until_done()
                .unwrap_err();
            assert!(
                matches!(&err, Error::DependencyFailed { source, .. } if **source == first),
                "{err}"
            );
            let mut waiter = exec.create_stream().unwrap();
            let err = waiter
                .then_wait_for(&s)
                .block_host_until_done()
                .unwrap_err();
            assert!(
                matches!(&err, Error::DependencyFailed { source, .. } if **source == first),
                "{err}"
            );
            // The executor and its other streams are unaffected.
            exec.create_stream()
                .unwrap()
                .block_host_until_done()
                .unwrap();
            exec.synchronize_all().unwrap();
        });
    }
}

/// The assertions of the unit test this file replaced, which ran the host executor behind a
/// wrapper without `blas()`/`rng()`: now on every platform without them, noop included.
#[test]
fn blas_rng_fft_and_dnn_on_a_platform_without_them_fail_with_unsupported() {
    for exec in platforms() {
        let name = exec.platform_name();
        eprintln!("-- on platform {name}");
        let e2 = exec.clone();
        without_panic_or_hang(name, move || {
            let exec = e2;
            let (owner, x) = ones(&exec);
            let supported = |op: &str, fail: &dyn Fn(&mut streamexec::Stream)| {
                let mut s = exec.create_stream().unwrap();
                fail(&mut s);
                let r = s.status();
                let _ = s.block_host_until_done();
                !unsupported_here(&exec, Some(op), &r)
            };
            for op in ["then_blas_gemm", "then_blas_axpy", "then_set_rng_seed"] {
                let enqueue = |s: &mut streamexec::Stream| {
                    match op {
                        "then_blas_gemm" => s.then_blas_gemm(
                            Transpose::None,
                            Transpose::None,
                            2,
                            2,
                            1,
                            1.0f32,
                            &x,
                            2,
                            &x,
                            1,
                            0.0,
                            &x,
                            2,
                        ),
                        "then_blas_axpy" => s.then_blas_axpy(4, 2.0f32, &x, 1, &x, 1),
                        _ => s.then_set_rng_seed(&[0; 16]),
                    };
                };
                if supported(op, &enqueue) {
                    // Supported here: it ran on `x`; put the ones back.
                    owner.synchronous_memcpy_h2d(&[1.0f32; 4], &x).unwrap();
                    continue;
                }
                let mut s = exec.create_stream().unwrap();
                enqueue(&mut s);
                // The stream is in its error state: later work is skipped.
                let ran = Arc::new(AtomicBool::new(false));
                let flag = ran.clone();
                s.then_memset(&x, 0)
                    .then_host_callback(move || flag.store(true, Ordering::SeqCst));
                let err = s.block_host_until_done().unwrap_err();
                assert_unsupported(&exec, Some(op), &err);
                assert!(!ran.load(Ordering::SeqCst), "{op}: later work ran");
                let mut back = [0f32; 4];
                owner.synchronous_memcpy_d2h(&x, &mut back).unwrap();
                assert_eq!(back, [1.0; 4], "{op}: later work ran");
            }
            // Fills without a seed fail the same way where there is no random-number support.
            let mut s = exec.create_stream().unwrap();
            s.then_populate_rand_uniform(&x);
            unsupported_here(&exec, Some("then_populate_rand_uniform"), &s.status());
            // A platform without FFT refuses the plan, naming the operation and the platform.
            let spec = streamexec::FftPlanSpec::new(&[8]);
            let plan = exec.create_fft_plan::<[f32; 2], [f32; 2]>(&spec);
            unsupported_here(&exec, Some("create_fft_plan"), &plan);
            // A platform without DNN refuses a valid call, naming the operation (ReLU in place
            // on ones changes nothing where it runs).
            let desc = streamexec::TensorDesc::new(
                streamexec::DnnDataType::F32,
                streamexec::TensorLayout::Nchw,
                1,
                1,
                2,
                2,
            )
            .unwrap();
            let mut s = exec.create_stream().unwrap();
            s.then_activation_forward(streamexec::Activation::Relu, &desc, &x, &x);
            unsupported_here(&exec, Some("then_activation_forward"), &s.status());
        });
    }
}

#[test]
fn rpc_race_check_unified_memory_and_peer_access_where_unsupported() {
    for exec in platforms() {
        let name = exec.platform_name();
        eprintln!("-- on platform {name}");
        let e2 = exec.clone();
        without_panic_or_hang(name, move || {
            let exec = e2;
            // Turning the checker off changes nothing where it exists (it starts off).
            unsupported_here(&exec, Some("set_race_check"), &exec.set_race_check(false));
            unsupported_here(
                &exec,
                Some("allocate_unified"),
                &exec.allocate_unified::<u32>(16),
            );
            unsupported_here(&exec, None, &exec.rpc().map(drop));
            // Peer access: never to itself; to another device of the platform, where the two
            // cannot reach each other, `Unsupported`.
            assert!(!exec.can_enable_peer_access_to(&exec));
            assert!(matches!(
                exec.enable_peer_access_to(&exec),
                Err(Error::InvalidArgument { .. })
            ));
            let platform = PlatformManager::platform_with_name(exec.platform_name()).unwrap();
            if platform.device_count() > 1 {
                let other = platform.executor_for_device(1).unwrap();
                if !exec.can_enable_peer_access_to(&other) {
                    let err = exec.enable_peer_access_to(&other).unwrap_err();
                    assert_unsupported(&exec, None, &err);
                    let Error::Unsupported { operation, .. } = &err else {
                        unreachable!()
                    };
                    assert!(operation.starts_with("enable_peer_access"), "{err}");
                }
            }
        });
    }
}
