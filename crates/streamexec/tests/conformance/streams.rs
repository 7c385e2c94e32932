//! Stream ordering, host callbacks, events, cross-stream waits and timers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use streamexec::{EventStatus, HostMemory};

use crate::common::{POISON_U32, random_u32s, rng};
use crate::{kernels, on_each_platform};

use crate::kernels::Affine;

#[test]
fn operations_run_in_stream_order() {
    on_each_platform(|exec| {
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let mut r = rng("operations_run_in_stream_order");
        let n = 3000;
        let data = random_u32s(&mut r, n, u32::MAX);
        let src = HostMemory::from_slice(&data).unwrap();
        let dev = exec.allocate_array::<u32>(n).unwrap();
        let copy = exec.allocate_array::<u32>(n).unwrap();
        let mut back = HostMemory::from_slice(&vec![POISON_U32; n]).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut want = data.clone();
        let mut s = exec.create_stream().unwrap();
        s.then_memcpy_h2d(&src, &dev);
        for step in 0..20 {
            let (mul, add) = (r.random::<u32>() | 1, r.random::<u32>());
            s.then_launch(
                256,
                (n as u32).div_ceil(256),
                &k,
                (dev.ptr(), n as u32, mul, add),
            );
            kernels::affine_ref(&mut want, mul, add);
            let order = order.clone();
            s.then_host_callback(move || order.lock().unwrap().push(step));
        }
        s.then_memcpy_d2d(&dev, &copy)
            .then_memcpy_d2h(&copy, &mut back);
        s.block_host_until_done().unwrap();
        assert_eq!(back.as_slice(), &want[..]);
        assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
    });
}

#[test]
fn host_callback_runs_after_earlier_work_and_before_later_work() {
    on_each_platform(|exec| {
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let dev = Arc::new(exec.copy_to_device(&[5u32; 64]).unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (e2, dev2, seen2) = (exec.clone(), dev.clone(), seen.clone());
        let mut s = exec.create_stream().unwrap();
        s.then_launch(64, 1, &k, (dev.ptr(), 64, 2, 0)) // 10
            .then_host_callback(move || {
                // Sees the first launch's result; the second has not run yet.
                seen2
                    .lock()
                    .unwrap()
                    .extend(e2.copy_to_vec(&*dev2).unwrap());
            })
            .then_launch(64, 1, &k, (dev.ptr(), 64, 1, 1)); // 11
        s.block_host_until_done().unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![10u32; 64]);
        assert_eq!(exec.copy_to_vec(&*dev).unwrap(), vec![11u32; 64]);
    });
}

#[test]
fn two_streams_joined_by_an_event() {
    on_each_platform(|exec| {
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let mut r = rng("two_streams_joined_by_an_event");
        let n = 2048u32;
        let data = random_u32s(&mut r, n as usize, u32::MAX);
        let src = HostMemory::from_slice(&data).unwrap();
        let a_buf = exec.allocate_array::<u32>(n as usize).unwrap();
        let b_buf = exec.copy_to_device(&vec![POISON_U32; n as usize]).unwrap();
        let mut back = HostMemory::from_slice(&vec![POISON_U32; n as usize]).unwrap();
        let ev = exec.create_event().unwrap();
        let mut a = exec.create_stream().unwrap();
        let mut b = exec.create_stream().unwrap();
        // A is slow: without the wait, B would copy before A has written anything.
        a.then_host_callback(|| std::thread::sleep(Duration::from_millis(60)))
            .then_memcpy_h2d(&src, &a_buf)
            .then_launch(256, n / 256, &k, (a_buf.ptr(), n, 3, 7))
            .then_record_event(&ev);
        b.then_wait_for(&ev)
            .then_memcpy_d2d(&a_buf, &b_buf)
            .then_launch(256, n / 256, &k, (b_buf.ptr(), n, 5, 1))
            .then_memcpy_d2h(&b_buf, &mut back);
        b.block_host_until_done().unwrap();
        a.block_host_until_done().unwrap();
        let mut want = data.clone();
        kernels::affine_ref(&mut want, 3, 7);
        kernels::affine_ref(&mut want, 5, 1);
        assert_eq!(back.as_slice(), &want[..]);
        assert_eq!(ev.status(), EventStatus::Complete);
    });
}

#[test]
fn a_stream_waits_for_another_stream() {
    on_each_platform(|exec| {
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let n = 1024u32;
        let buf = exec.copy_to_device(&vec![1u32; n as usize]).unwrap();
        let mut back = HostMemory::from_slice(&vec![POISON_U32; n as usize]).unwrap();
        let mut a = exec.create_stream().unwrap();
        let mut b = exec.create_stream().unwrap();
        a.then_host_callback(|| std::thread::sleep(Duration::from_millis(60)))
            .then_launch(256, 4, &k, (buf.ptr(), n, 10, 0)); // 10
        b.then_wait_for(&a)
            .then_launch(256, 4, &k, (buf.ptr(), n, 1, 5))
            .then_memcpy_d2h(&buf, &mut back); // 15
        b.block_host_until_done().unwrap();
        assert!(
            back.as_slice().iter().all(|&v| v == 15),
            "{:?}",
            &back.as_slice()[..4]
        );
        a.block_host_until_done().unwrap();
    });
}

#[test]
fn events_report_their_state() {
    on_each_platform(|exec| {
        let ev = exec.create_event().unwrap();
        assert_eq!(ev.status(), EventStatus::Unrecorded);
        ev.synchronize().unwrap(); // never recorded: complete at once
        let mut s = exec.create_stream().unwrap();
        let gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let g = gate.clone();
        s.then_host_callback(move || {
            let (m, cv) = &*g;
            let mut open = m.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        })
        .then_record_event(&ev);
        assert_eq!(ev.status(), EventStatus::Pending);
        *gate.0.lock().unwrap() = true;
        gate.1.notify_all();
        ev.synchronize().unwrap();
        assert_eq!(ev.status(), EventStatus::Complete);
        assert!(ev.is_complete());
        s.block_host_until_done().unwrap();
    });
}

#[test]
fn timer_measures_time_between_start_and_stop() {
    on_each_platform(|exec| {
        let t = exec.create_timer().unwrap();
        assert!(
            t.elapsed().is_err(),
            "a timer never started has no elapsed time"
        );
        let mut s = exec.create_stream().unwrap();
        s.then_start_timer(&t)
            .then_host_callback(|| std::thread::sleep(Duration::from_millis(30)))
            .then_stop_timer(&t);
        let elapsed = t.elapsed().unwrap();
        // A lower bound from the sleep: a correctness check, not a performance threshold.
        assert!(elapsed >= Duration::from_millis(25), "{elapsed:?}");
        s.block_host_until_done().unwrap();
    });
}

#[test]
fn many_streams_run_concurrently_and_independently() {
    on_each_platform(|exec| {
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let bufs: Vec<_> = (0..8u32)
            .map(|i| exec.copy_to_device(&vec![i; 500]).unwrap())
            .collect();
        let mut streams: Vec<_> = (0..8).map(|_| exec.create_stream().unwrap()).collect();
        for (i, (s, b)) in streams.iter_mut().zip(&bufs).enumerate() {
            for _ in 0..=i {
                s.then_launch(128, 4, &k, (b.ptr(), 500, 2, 1));
            }
        }
        exec.synchronize_all().unwrap();
        for (i, b) in bufs.iter().enumerate() {
            let mut want = vec![i as u32; 500];
            for _ in 0..=i {
                kernels::affine_ref(&mut want, 2, 1);
            }
            assert_eq!(exec.copy_to_vec(b).unwrap(), want, "stream {i}");
        }
        for s in &mut streams {
            s.block_host_until_done().unwrap();
        }
    });
}
