//! Pointer arguments that safe code can still hold but must not launch with: a stale pointer
//! (a `DevicePtr` whose `DeviceMemory` was dropped) and a foreign pointer (memory of another
//! executor). At launch every pointer argument must be owned by the launching executor and lie
//! inside one of its live allocations, on every platform; a refused launch fails its stream
//! (later work is skipped) and nothing else. In-range offsets must still launch.

use std::sync::mpsc;

use bytemuck::Pod;
use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{
    ArgList, BlockDim, DeviceMemory, Error, HostMemory, Stream, StreamExecutor, ThreadDim,
};

use crate::common::{POISON_F32_BITS, POISON_U32, executors, random_f32s, random_u32s, rng};
use crate::{kernels, on_each_platform};

/// Keeps `mem`'s backing memory from being handed out again after `mem` is dropped: a stream
/// that waits (in a host callback) for the returned sender to be dropped, with a write to `mem`
/// queued behind it. Backends keep memory that queued work uses until that work has run, so no
/// allocation (not even a concurrent test's, on this shared executor) can land at a stale
/// pointer's address while it is being launched with.
fn hold<T: Pod>(exec: &StreamExecutor, mem: &DeviceMemory<T>) -> (Stream, mpsc::Sender<()>) {
    let (release, wait) = mpsc::channel::<()>();
    let mut s = exec.create_stream().unwrap();
    s.then_host_callback(move || {
        // Returns when the sender is dropped, also when the test panics first.
        let _ = wait.recv();
    })
    .then_mem_zero(mem);
    assert!(s.ok(), "{:?}", s.status());
    (s, release)
}

/// `a` as an exact power of two (±2^-3 ..= ±2^3), so that `a * x + y` rounds the same with or
/// without a fused multiply-add and device results can be compared exactly.
fn power_of_two(r: &mut StdRng) -> f32 {
    let a = 2f32.powi(r.random_range(-3..=3));
    if r.random::<bool>() { a } else { -a }
}

fn saxpy_ref(a: f32, x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| a * x + y).collect()
}

fn grid(n: usize) -> (ThreadDim, BlockDim) {
    (256.into(), (n as u32).div_ceil(256).into())
}

fn poisoned_f32s(n: usize) -> Vec<f32> {
    vec![f32::from_bits(POISON_F32_BITS); n]
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn assert_refused(err: &Error, argument: usize, needles: &[&str]) {
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&format!("argument {argument})")), "{text}");
    for needle in needles {
        assert!(text.contains(needle), "`{needle}` not in: {text}");
    }
}

/// A correct saxpy on a fresh stream: the executor is still usable after a refused launch.
fn assert_still_usable(exec: &StreamExecutor, r: &mut StdRng) {
    let k: kernels::Saxpy = exec.get_kernel(&kernels::saxpy()).unwrap();
    let n = r.random_range(1..5000usize);
    let a = power_of_two(r);
    let (x, y) = (random_f32s(r, n), random_f32s(r, n));
    let (dx, dy) = (
        exec.copy_to_device(&x).unwrap(),
        exec.copy_to_device(&y).unwrap(),
    );
    let (t, b) = grid(n);
    let mut s = exec.create_stream().unwrap();
    s.then_launch(t, b, &k, (n as u32, a, dx.ptr(), dy.ptr()))
        .block_host_until_done()
        .unwrap();
    assert_eq!(
        bits(&exec.copy_to_vec(&dy).unwrap()),
        bits(&saxpy_ref(a, &x, &y)),
        "a launch on a fresh stream after the refused one"
    );
}

#[test]
fn a_stale_pointer_fails_the_launch_and_only_its_stream() {
    on_each_platform(|exec| {
        let mut r = rng("a_stale_pointer_fails_the_launch_and_only_its_stream");
        let typed: kernels::Saxpy = exec.get_kernel(&kernels::saxpy()).unwrap();
        let untyped = exec.get_untyped_kernel(&kernels::saxpy()).unwrap();
        for launch_typed in [false, true] {
            let n = r.random_range(1..4000usize);
            let a = power_of_two(&mut r);
            let x = random_f32s(&mut r, n);
            let dx = exec.copy_to_device(&x).unwrap();
            let dy = exec.copy_to_device(&poisoned_f32s(n)).unwrap();
            let doomed = exec.copy_to_device(&random_f32s(&mut r, n)).unwrap();
            let (mut held, release) = hold(exec, &doomed);
            let stale = doomed.ptr();
            drop(doomed);

            let (t, b) = grid(n);
            let mut s = exec.create_stream().unwrap();
            // The stale pointer is x (argument 2) in the typed launch, y (argument 3) in the
            // run-time argument list.
            let argument = if launch_typed {
                s.then_launch(t, b, &typed, (n as u32, a, stale, dy.ptr()));
                2
            } else {
                let args = ArgList::new().arg(n as u32).arg(a).arg(dx.ptr()).arg(stale);
                s.then_launch_untyped(t, b, &untyped, &args);
                3
            };
            assert!(!s.ok(), "refused when enqueued");
            // Later work on the failed stream is skipped.
            let mut back = HostMemory::from_slice(&poisoned_f32s(n)).unwrap();
            s.then_launch(t, b, &typed, (n as u32, a, dx.ptr(), dy.ptr()))
                .then_memcpy_d2h(&dx, &mut back);
            let err = s.block_host_until_done().unwrap_err();
            assert_refused(
                &err,
                argument,
                &["not inside one live allocation", &format!("#{}", exec.id())],
            );
            assert_eq!(s.status().unwrap_err(), err, "the first error sticks");
            assert_eq!(
                bits(back.as_slice()),
                bits(&poisoned_f32s(n)),
                "the copy after the refused launch must not run"
            );
            drop(release);
            held.block_host_until_done().unwrap();

            // Nothing ran: y is still poisoned, x unchanged.
            assert_eq!(
                bits(&exec.copy_to_vec(&dy).unwrap()),
                bits(&poisoned_f32s(n))
            );
            assert_eq!(bits(&exec.copy_to_vec(&dx).unwrap()), bits(&x));
            assert_still_usable(exec, &mut r);
        }
    });
}

#[test]
fn a_pointer_of_another_executor_fails_the_launch() {
    on_each_platform(|exec| {
        let others: Vec<StreamExecutor> = executors()
            .into_iter()
            .filter(|e| !e.same_as(exec))
            .collect();
        if others.is_empty() {
            eprintln!(
                "note: only {} is available; no foreign executor to take memory from",
                exec.platform_name()
            );
            return;
        }
        let mut r = rng("a_pointer_of_another_executor_fails_the_launch");
        let typed: kernels::Saxpy = exec.get_kernel(&kernels::saxpy()).unwrap();
        let untyped = exec.get_untyped_kernel(&kernels::saxpy()).unwrap();
        for other in &others {
            eprintln!("   with memory of {other:?}");
            for launch_typed in [false, true] {
                let n = r.random_range(1..4000usize);
                let a = power_of_two(&mut r);
                let (x, y) = (random_f32s(&mut r, n), random_f32s(&mut r, n));
                let dx = exec.copy_to_device(&x).unwrap();
                let dy = exec.copy_to_device(&poisoned_f32s(n)).unwrap();
                let foreign = other.copy_to_device(&y).unwrap();
                let (t, b) = grid(n);
                let mut s = exec.create_stream().unwrap();
                // The foreign memory is y (argument 3) in the typed launch, x (argument 2) in the
                // run-time argument list.
                let (argument, out) = if launch_typed {
                    s.then_launch(t, b, &typed, (n as u32, a, dx.ptr(), foreign.ptr()));
                    (3, &dx)
                } else {
                    let args = ArgList::new()
                        .arg(n as u32)
                        .arg(a)
                        .arg(foreign.ptr())
                        .arg(dy.ptr());
                    s.then_launch_untyped(t, b, &untyped, &args);
                    (2, &dy)
                };
                let mut back = HostMemory::from_slice(&poisoned_f32s(n)).unwrap();
                s.then_memcpy_d2h(out, &mut back);
                let err = s.block_host_until_done().unwrap_err();
                assert_refused(
                    &err,
                    argument,
                    &[
                        &format!("belongs to executor #{}", other.id()),
                        &format!("executor #{})", exec.id()),
                    ],
                );
                assert_eq!(bits(back.as_slice()), bits(&poisoned_f32s(n)), "skipped");
                assert_eq!(
                    bits(&other.copy_to_vec(&foreign).unwrap()),
                    bits(&y),
                    "the foreign memory is untouched"
                );
                assert_eq!(bits(&exec.copy_to_vec(&dx).unwrap()), bits(&x));
                assert_eq!(
                    bits(&exec.copy_to_vec(&dy).unwrap()),
                    bits(&poisoned_f32s(n))
                );
                assert_still_usable(exec, &mut r);
                assert_still_usable(other, &mut r);
            }
        }
    });
}

#[test]
fn pointers_inside_live_memory_launch_and_offsets_past_the_end_are_none() {
    on_each_platform(|exec| {
        let mut r = rng("pointers_inside_live_memory_launch_and_offsets_past_the_end_are_none");
        let k: kernels::Affine = exec.get_kernel(&kernels::affine()).unwrap();
        let untyped = exec.get_untyped_kernel(&kernels::affine()).unwrap();
        // Offsets in multiples of 128 elements (512 bytes: a multiple of any OpenCL device's
        // base-address alignment, which sub-buffers need).
        let len = 128 * r.random_range(2..10usize);
        let data = random_u32s(&mut r, len, u32::MAX);
        let mem = exec.copy_to_device(&data).unwrap();
        let base = mem.ptr();
        assert_eq!((base.len(), base.owner()), (len, exec.id()));

        let at = 128 * r.random_range(1..len / 128);
        let p = base.offset(at).unwrap();
        assert_eq!(p.len(), len - at);
        assert_eq!(p.owner(), exec.id());
        assert_eq!(p.address().raw(), mem.address().raw() + 4 * at as u64);
        // Only part of the remaining range: the kernel touches `count` elements from `at`.
        let count = r.random_range(1..=len - at);
        let (mul, add) = (r.random::<u32>() | 1, r.random::<u32>());
        let mut want = data.clone();
        kernels::affine_ref(&mut want[at..at + count], mul, add);
        let (t, b) = grid(count);
        let mut s = exec.create_stream().unwrap();
        s.then_launch(t, b, &k, (p, count as u32, mul, add))
            .block_host_until_done()
            .unwrap();
        assert_eq!(
            exec.copy_to_vec(&mem).unwrap(),
            want,
            "typed, from element {at}"
        );

        // The same through a run-time argument list, with a pointer from a sub-slice.
        let slice = mem.slice(at..).unwrap().ptr();
        assert_eq!(slice.address(), p.address());
        let (mul, add) = (r.random::<u32>() | 1, r.random::<u32>());
        kernels::affine_ref(&mut want[at..at + count], mul, add);
        let args = ArgList::new()
            .arg(slice)
            .arg(count as u32)
            .arg(mul)
            .arg(add);
        s.then_launch_untyped(t, b, &untyped, &args)
            .block_host_until_done()
            .unwrap();
        assert_eq!(
            exec.copy_to_vec(&mem).unwrap(),
            want,
            "untyped, from element {at}"
        );

        // One past the end is a pointer to nothing; it launches (a kernel of 0 elements).
        let end = base.offset(len).unwrap();
        assert!(end.is_empty());
        assert_eq!(p.offset(len - at).unwrap().address(), end.address());
        s.then_launch(1, 1, &k, (end, 0, 3, 1))
            .block_host_until_done()
            .unwrap();
        assert_eq!(
            exec.copy_to_vec(&mem).unwrap(),
            want,
            "an empty launch writes nothing"
        );

        // Past the end there is no pointer.
        assert!(base.offset(len + 1).is_none());
        assert!(p.offset(len - at + 1).is_none());
        assert!(base.offset(usize::MAX).is_none());
        let empty = exec.allocate_array::<u32>(0).unwrap();
        assert!(empty.ptr().offset(0).is_some_and(|e| e.is_empty()));
        assert!(empty.ptr().offset(1).is_none());

        // A stream that launched with in-range pointers only is still fine.
        let mut back = HostMemory::from_slice(&vec![POISON_U32; len]).unwrap();
        s.then_memcpy_d2h(&mem, &mut back)
            .block_host_until_done()
            .unwrap();
        assert_eq!(back.as_slice(), &want[..]);
    });
}
