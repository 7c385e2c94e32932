//! StreamExecutor's error model: the first failure sticks, the rest of the chain is skipped,
//! waiters on a failed stream fail, and bad input is a clear `Err`.

use std::time::Duration;

use streamexec::{DevicePtr, Error, HostMemory, MultiKernelLoaderSpec, SharedMemory};

use crate::common::{POISON_U32, error_chain};
use crate::{kernels, on_each_platform};

fn callback_failure() -> Error {
    Error::HostCallback {
        detail: "injected failure".into(),
    }
}

#[test]
fn a_failure_skips_the_rest_of_the_chain_and_sticks() {
    on_each_platform(|exec| {
        let dev = exec.copy_to_device(&[1u32, 2, 3, 4]).unwrap();
        let mut back = HostMemory::from_slice(&[POISON_U32; 4]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_mem_zero(&dev)
            .then_host_callback_with_status(|| Err(callback_failure()))
            .then_memcpy_d2h(&dev, &mut back);
        let err = s.block_host_until_done().unwrap_err();
        assert_eq!(err, callback_failure());
        assert_eq!(
            back.as_slice(),
            &[POISON_U32; 4],
            "the copy after the failure must not run"
        );
        assert!(!s.ok());
        assert_eq!(s.status().unwrap_err(), callback_failure());
        // Later operations are skipped too, and the first error stays.
        s.then_memcpy_d2h(&dev, &mut back);
        assert_eq!(s.block_host_until_done().unwrap_err(), callback_failure());
        assert_eq!(back.as_slice(), &[POISON_U32; 4]);
        // The executor and other streams are unaffected.
        let mut s2 = exec.create_stream().unwrap();
        s2.then_memcpy_d2h(&dev, &mut back)
            .block_host_until_done()
            .unwrap();
        assert_eq!(back.as_slice(), &[0; 4]);
    });
}

#[test]
fn a_panicking_callback_fails_its_stream_with_the_message() {
    on_each_platform(|exec| {
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback(|| panic!("callback exploded"));
        let err = s.block_host_until_done().unwrap_err();
        assert!(
            matches!(&err, Error::HostCallback { detail } if detail.contains("callback exploded")),
            "{err}"
        );
    });
}

#[test]
fn an_enqueue_time_error_is_kept_and_skips_the_rest() {
    on_each_platform(|exec| {
        let dev = exec.copy_to_device(&[9u32; 8]).unwrap();
        let mut short = HostMemory::from_slice(&[POISON_U32; 4]).unwrap();
        let mut ok_back = HostMemory::from_slice(&[POISON_U32; 8]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_memcpy_d2h(&dev, &mut short)
            .then_memcpy_d2h(&dev, &mut ok_back);
        let err = s.block_host_until_done().unwrap_err();
        assert!(matches!(err, Error::OutOfBounds { .. }), "{err}");
        assert!(
            err.to_string().contains("4 elements") && err.to_string().contains("8"),
            "{err}"
        );
        assert_eq!(
            ok_back.as_slice(),
            &[POISON_U32; 8],
            "skipped after the error"
        );
    });
}

#[test]
fn waiting_on_a_failed_stream_fails_the_waiter() {
    on_each_platform(|exec| {
        let dev = exec.copy_to_device(&[3u32; 16]).unwrap();
        let mut back = HostMemory::from_slice(&[POISON_U32; 16]).unwrap();

        // Already failed when the wait is enqueued.
        let mut a = exec.create_stream().unwrap();
        a.then_host_callback_with_status(|| Err(callback_failure()));
        let _ = a.block_host_until_done();
        let mut b = exec.create_stream().unwrap();
        b.then_wait_for(&a).then_memcpy_d2h(&dev, &mut back);
        let err = b.block_host_until_done().unwrap_err();
        assert!(
            matches!(&err, Error::DependencyFailed { source, .. } if **source == callback_failure()),
            "{err}"
        );
        assert_eq!(back.as_slice(), &[POISON_U32; 16]);

        // Fails only after the wait was enqueued.
        let mut a = exec.create_stream().unwrap();
        a.then_host_callback(|| std::thread::sleep(Duration::from_millis(40)))
            .then_host_callback_with_status(|| Err(callback_failure()));
        let mut b = exec.create_stream().unwrap();
        b.then_wait_for(&a).then_memcpy_d2h(&dev, &mut back);
        let err = b.block_host_until_done().unwrap_err();
        assert!(matches!(&err, Error::DependencyFailed { .. }), "{err}");
        // The dependency's failure is the source, not part of the message.
        assert!(!err.to_string().contains("injected failure"), "{err}");
        assert!(error_chain(&err).contains("injected failure"), "{err}");
        assert_eq!(back.as_slice(), &[POISON_U32; 16]);
        assert_eq!(a.block_host_until_done().unwrap_err(), callback_failure());
    });
}

#[test]
fn an_event_recorded_on_a_failed_stream_fails_its_waiters() {
    on_each_platform(|exec| {
        let ev = exec.create_event().unwrap();
        let mut a = exec.create_stream().unwrap();
        a.then_host_callback_with_status(|| Err(callback_failure()))
            .then_record_event(&ev);
        let mut b = exec.create_stream().unwrap();
        b.then_wait_for(&ev);
        assert!(matches!(
            b.block_host_until_done().unwrap_err(),
            Error::DependencyFailed { .. }
        ));
        assert_eq!(ev.synchronize().unwrap_err(), callback_failure());
    });
}

#[test]
fn bounds_and_size_errors_are_clear() {
    on_each_platform(|exec| {
        let dev = exec.allocate_array::<u32>(10).unwrap();
        let e = dev.slice(5..11).unwrap_err();
        assert!(
            matches!(e, Error::OutOfBounds { .. }) && e.to_string().contains("5..11"),
            "{e}"
        );
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = dev.slice(8..3);
        assert!(reversed.is_err());
        assert!(dev.slice(..=10).is_err());
        assert_eq!(dev.slice(10..).unwrap().len(), 0);

        let mut small = vec![0u32; 3];
        assert!(matches!(
            exec.synchronous_memcpy_d2h(&dev, &mut small),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(matches!(
            exec.synchronous_memcpy_h2d(&small, &dev),
            Err(Error::OutOfBounds { .. })
        ));

        let bytes = exec.allocate_array::<u8>(6).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_memset32(&bytes, 1);
        assert!(matches!(
            s.block_host_until_done(),
            Err(Error::InvalidArgument { .. })
        ));

        let mut s = exec.create_stream().unwrap();
        let other = exec.allocate_array::<u32>(9).unwrap();
        s.then_memcpy_d2d(&dev, &other);
        assert!(matches!(
            s.block_host_until_done(),
            Err(Error::OutOfBounds { .. })
        ));

        let huge = exec.allocate_array::<u8>(usize::MAX / 2);
        assert!(matches!(huge, Err(Error::OutOfMemory { .. })), "{huge:?}");
    });
}

#[test]
fn launches_beyond_device_limits_are_rejected() {
    on_each_platform(|exec| {
        let k: kernels::Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let d = exec.description().clone();
        let dev = exec.copy_to_device(&[1u32; 4]).unwrap();
        let launches: Vec<(streamexec::ThreadDim, streamexec::BlockDim)> = vec![
            ((d.max_threads_per_block + 1).into(), 1.into()),
            ((1, 1, d.max_block_dims[2] + 1).into(), 1.into()),
            (0.into(), 1.into()),
            (1.into(), (1, 0, 1).into()),
        ];
        for (t, b) in launches {
            let mut s = exec.create_stream().unwrap();
            s.then_launch(t, b, &k, (dev.ptr(), 4, 2, 0));
            let err = s.block_host_until_done().unwrap_err();
            assert!(
                matches!(err, Error::LaunchConfig { .. }),
                "{t:?} {b:?}: {err}"
            );
        }
        let dynk: kernels::ReduceDyn = exec.get_kernel(&kernels::block_reduce_dyn()).unwrap();
        let too_much = SharedMemory::<u32>::new(d.shared_memory_per_block as usize / 4 + 1);
        let mut s = exec.create_stream().unwrap();
        s.then_launch(1, 1, &dynk, (dev.ptr(), dev.ptr(), 4, too_much));
        let err = s.block_host_until_done().unwrap_err();
        assert!(
            matches!(err, Error::LaunchConfig { .. }) && err.to_string().contains("shared"),
            "{err}"
        );
        assert_eq!(
            exec.copy_to_vec(&dev).unwrap(),
            vec![1; 4],
            "no rejected launch ran"
        );
    });
}

#[test]
fn kernel_loading_errors_name_the_problem() {
    on_each_platform(|exec| {
        // Wrong arity for the spec.
        let e = exec
            .get_kernel::<(DevicePtr<u32>, u32)>(&kernels::affine())
            .unwrap_err();
        assert!(
            matches!(e, Error::SignatureMismatch { .. }) && e.to_string().contains("4"),
            "{e}"
        );
        // Right arity, wrong pointee type: caught where the format carries pointee types
        // (host Rust kernels, OpenCL argument info). A PTX pointer parameter is a `.u64`, so
        // a platform loading PTX (CUDA, HIP) cannot tell, as with the CUDA driver itself.
        let r = exec.get_kernel::<(DevicePtr<f32>, u32, u32, u32)>(&kernels::affine());
        if matches!(exec.platform_name(), "cuda" | "hip") {
            assert!(r.is_ok(), "{r:?}");
        } else {
            let e = r.unwrap_err();
            assert!(
                matches!(e, Error::SignatureMismatch { .. })
                    && e.to_string().contains("argument 0"),
                "{e}"
            );
        }
        // Right arity, a scalar of the wrong type: caught everywhere.
        let e = exec
            .get_kernel::<(DevicePtr<u32>, f32, u32, u32)>(&kernels::affine())
            .unwrap_err();
        assert!(
            matches!(e, Error::SignatureMismatch { .. })
                && (e.to_string().contains("argument 1") || e.to_string().contains("parameter 1")),
            "{e}"
        );
        // A spec with no format this platform loads lists what it holds.
        let spec = MultiKernelLoaderSpec::new(0).add_hsaco_in_memory(&[0u8; 4], "k");
        let e = exec.get_untyped_kernel(&spec).unwrap_err();
        assert!(
            matches!(e, Error::NoSuitableFormat { .. }) && e.to_string().contains("HSACO"),
            "{e}"
        );
    });
}

#[test]
fn objects_of_another_platform_are_refused_before_the_backend() {
    // Every pair of available platforms, the noop template included (it has streams and
    // events): the handle layer refuses the other platform's event, stream or kernel with an
    // error naming the operation, so a backend never sees an object it did not make.
    let execs = crate::common::executors_with_templates();
    let host = execs.iter().find(|e| e.platform_name() == "host").unwrap();
    let kernel = host.get_untyped_kernel(&kernels::saxpy()).unwrap();
    let xy = host.copy_to_device(&[1.0f32; 4]).unwrap();
    let args = streamexec::ArgList::new()
        .arg(4u32)
        .arg(2.0f32)
        .arg(xy.ptr())
        .arg(xy.ptr());
    for a in &execs {
        for b in execs
            .iter()
            .filter(|b| b.platform_name() != a.platform_name())
        {
            let pair = format!("{} / {}", a.platform_name(), b.platform_name());
            let (event, other) = (a.create_event().unwrap(), b.create_event().unwrap());
            let invalid = |err: Error, operation: &str| {
                assert!(
                    matches!(&err, Error::InvalidArgument { operation: op, detail }
                        if op == operation && detail.contains("another platform")),
                    "{pair}: {err}"
                );
            };
            let mut s = b.create_stream().unwrap();
            s.then_wait_for(&event);
            invalid(s.block_host_until_done().unwrap_err(), "then_wait_for");
            let mut s = b.create_stream().unwrap();
            s.then_record_event(&event);
            invalid(s.block_host_until_done().unwrap_err(), "then_record_event");
            assert_eq!(
                event.status(),
                streamexec::EventStatus::Unrecorded,
                "{pair}"
            );
            let mut s = b.create_stream().unwrap();
            let waited = a.create_stream().unwrap();
            s.then_wait_for(&waited);
            invalid(
                s.block_host_until_done().unwrap_err(),
                "then_wait_for(stream)",
            );
            let err = other.elapsed_since(&event).unwrap_err();
            assert!(
                matches!(&err, Error::Event { detail } if detail.contains("another platform")),
                "{pair}: {err}"
            );
            if a.same_as(host) {
                let mut s = b.create_stream().unwrap();
                s.then_launch_untyped(4, 1, &kernel, &args);
                let err = s.block_host_until_done().unwrap_err();
                assert!(
                    matches!(&err, Error::LaunchConfig { detail, .. }
                        if detail.contains("load it on this executor")),
                    "{pair}: {err}"
                );
            }
        }
    }
}
