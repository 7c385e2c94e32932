//! `Stream::done`: the future that resolves when a stream's work has finished, woken by the
//! backend's completion path, on any executor (here `futures`' single-threaded ones).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::executor::block_on;
use rand::RngExt;
use streamexec::{Error, HostMemory};

use crate::common::{POISON_U32, rng};
use crate::kernels::{self, Affine};
use crate::on_each_platform;

#[test]
fn done_resolves_after_the_work_with_its_results() {
    on_each_platform(|exec| {
        let mut r = rng("done_results");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input: Vec<u32> = (0..1000).map(|_| r.random_range(0..1 << 20)).collect();
        let dev = exec.copy_to_device(&input).unwrap();
        let mut back = HostMemory::from_slice(&[POISON_U32; 1000]).unwrap();
        let mut s = exec.create_stream().unwrap();
        // The work waits for a gate the test opens only after seeing the future pending: a
        // `done` that blocked its poller would time the gate out and fail the stream.
        let (open, gate) = std::sync::mpsc::channel::<()>();
        s.then_host_callback_with_status(move || {
            gate.recv_timeout(Duration::from_secs(10))
                .map_err(|_| Error::HostCallback {
                    detail: "the gate was never opened: done() blocked its poller".into(),
                })
        })
        .then_launch(128, 8, &k, (dev.ptr(), 1000, 3, 7))
        .then_memcpy_d2h(&dev, &mut back);
        let mut done = Box::pin(s.done());
        assert!(
            (&mut done).now_or_never().is_none(),
            "pending behind the gate"
        );
        open.send(()).unwrap();
        block_on(done).unwrap();
        let mut want = input.clone();
        kernels::affine_ref(&mut want, 3, 7);
        assert_eq!(back.as_slice(), &want[..]);
        // A second wait with nothing new queued resolves too.
        block_on(s.done()).unwrap();
    });
}

/// Many streams awaited together on one thread: each future is woken by its own stream.
#[test]
fn many_concurrent_waits_complete_on_one_thread() {
    on_each_platform(|exec| {
        // Every stream has a worker thread (two on CUDA: the backend's and the CPU libcuda's).
        let streams = if exec.platform_name() == "host" {
            1000
        } else {
            200
        };
        let mut r = rng("done_many");
        let ran = Arc::new(AtomicUsize::new(0));
        let mut all: Vec<_> = (0..streams)
            .map(|_| exec.create_stream().unwrap())
            .collect();
        for s in &mut all {
            let (ran, us) = (ran.clone(), r.random_range(0..2000));
            s.then_host_callback(move || {
                std::thread::sleep(Duration::from_micros(us));
                ran.fetch_add(1, Ordering::SeqCst);
            });
        }
        let results = block_on(futures::future::join_all(all.iter_mut().map(|s| s.done())));
        assert_eq!(results.len(), streams);
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(ran.load(Ordering::SeqCst), streams);
    });
}

#[test]
fn done_resolves_to_the_first_error_of_a_failed_stream() {
    on_each_platform(|exec| {
        let failure = Error::HostCallback {
            detail: "injected failure".into(),
        };
        let dev = exec.copy_to_device(&[1u32; 16]).unwrap();
        let mut back = HostMemory::from_slice(&[POISON_U32; 16]).unwrap();
        let mut s = exec.create_stream().unwrap();
        let f = failure.clone();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(10)))
            .then_host_callback_with_status(move || Err(f))
            .then_memcpy_d2h(&dev, &mut back);
        assert_eq!(block_on(s.done()).unwrap_err(), failure);
        assert_eq!(
            back.as_slice(),
            &[POISON_U32; 16],
            "skipped after the failure"
        );
        // It sticks, as for block_host_until_done.
        assert_eq!(block_on(s.done()).unwrap_err(), failure);
        assert_eq!(s.block_host_until_done().unwrap_err(), failure);
    });
}

/// Dropping the future before the work finishes (a cancelled task) leaves the work running and
/// the stream usable.
#[test]
fn dropping_done_early_is_safe() {
    on_each_platform(|exec| {
        let dev = exec.copy_to_device(&[0u32; 4096]).unwrap();
        let src = HostMemory::from_slice(&[9u32; 4096]).unwrap();
        let mut back = HostMemory::from_slice(&[POISON_U32; 4096]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(50)))
            .then_memcpy_h2d(&src, &dev);
        assert!(
            s.done().now_or_never().is_none(),
            "still pending after one poll"
        );
        drop(src); // kept alive by the queued copy
        s.then_memcpy_d2h(&dev, &mut back);
        block_on(s.done()).unwrap();
        assert!(back.as_slice().iter().all(|&v| v == 9));
    });
}

/// `Event::ready`: pending while the record waits behind a gate, then `Ok` with the work
/// before the record visible; at once for an event never recorded.
#[test]
fn event_ready_resolves_when_its_record_completes() {
    on_each_platform(|exec| {
        let mut r = rng("event_ready");
        let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let input: Vec<u32> = (0..1000).map(|_| r.random_range(0..1 << 20)).collect();
        let dev = exec.copy_to_device(&input).unwrap();
        let ev = exec.create_event().unwrap();
        block_on(ev.ready()).expect("never recorded: ready at once");
        let (open, gate) = std::sync::mpsc::channel::<()>();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback_with_status(move || {
            gate.recv_timeout(Duration::from_secs(10))
                .map_err(|_| Error::HostCallback {
                    detail: "the gate was never opened: ready() blocked its poller".into(),
                })
        })
        .then_launch(128, 8, &k, (dev.ptr(), 1000, 5, 3))
        .then_record_event(&ev);
        let mut ready = Box::pin(ev.ready());
        assert!(
            (&mut ready).now_or_never().is_none(),
            "pending behind the gate"
        );
        open.send(()).unwrap();
        block_on(ready).unwrap();
        assert!(ev.is_complete());
        let mut want = input.clone();
        kernels::affine_ref(&mut want, 5, 3);
        assert_eq!(exec.copy_to_vec(&dev).unwrap(), want);
        s.block_host_until_done().unwrap();
    });
}

/// Many events awaited together on one thread, recorded on a few streams at random points.
#[test]
fn many_event_waits_complete_on_one_thread() {
    on_each_platform(|exec| {
        let events = if exec.platform_name() == "host" {
            2000
        } else {
            300
        };
        let mut r = rng("event_ready_many");
        let mut streams: Vec<_> = (0..4).map(|_| exec.create_stream().unwrap()).collect();
        let ran = Arc::new(AtomicUsize::new(0));
        let evs: Vec<_> = (0..events).map(|_| exec.create_event().unwrap()).collect();
        for ev in &evs {
            let s = &mut streams[r.random_range(0..4)];
            let ran = ran.clone();
            s.then_host_callback(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .then_record_event(ev);
        }
        let results = block_on(futures::future::join_all(evs.iter().map(|e| e.ready())));
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(ran.load(Ordering::SeqCst), events);
        assert!(evs.iter().all(|e| e.is_complete()));
    });
}

/// A record skipped by a failed stream resolves `ready` to that stream's error; dropping a
/// pending `ready` leaves the event and its stream usable.
#[test]
fn event_ready_reports_a_failed_record_and_can_be_dropped() {
    on_each_platform(|exec| {
        let failure = Error::HostCallback {
            detail: "record never reached".into(),
        };
        let ev = exec.create_event().unwrap();
        let mut s = exec.create_stream().unwrap();
        let f = failure.clone();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(10)))
            .then_host_callback_with_status(move || Err(f))
            .then_record_event(&ev);
        let e = block_on(ev.ready()).unwrap_err();
        assert!(e.to_string().contains("record never reached"), "{e}");

        let ev = exec.create_event().unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_host_callback(|| std::thread::sleep(Duration::from_millis(30)))
            .then_record_event(&ev);
        assert!(
            ev.ready().now_or_never().is_none(),
            "pending after one poll"
        );
        s.block_host_until_done().unwrap();
        block_on(ev.ready()).unwrap();
    });
}
