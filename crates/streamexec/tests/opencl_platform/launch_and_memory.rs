//! Launch limits, memory bounds, sub-buffer arguments, timers and host callbacks.

use super::*;

#[test]
fn a_local_size_over_the_device_limit_is_a_launch_config_error() {
    let exec = opencl_or_skip!("launch_limits");
    let mut r = rng("launch_limits");
    let desc = exec.description().clone();
    assert!(desc.max_threads_per_block > 0, "{desc:?}");
    assert!(desc.max_block_dims.iter().all(|&d| d > 0), "{desc:?}");
    let k: Affine = load(&exec, AFFINE_CL, "affine");
    let data = random_u32s(&mut r, 16, u32::MAX);
    let dev = exec.copy_to_device(&data).unwrap();

    let too_many = desc.max_threads_per_block + 1;
    let mut s = exec.create_stream().unwrap();
    s.then_launch(too_many, 1, &k, (dev.ptr(), 16, 3, 1));
    let err = s.block_host_until_done().unwrap_err();
    assert!(
        matches!(&err, Error::LaunchConfig { platform, kernel, .. }
            if *platform == "opencl" && kernel == "affine"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&desc.max_threads_per_block.to_string()),
        "names the device limit: {msg}"
    );
    assert!(!s.ok(), "the error sticks to the stream");

    // One axis over its own limit.
    let mut s = exec.create_stream().unwrap();
    s.then_launch(
        (1, desc.max_block_dims[1] + 1, 1),
        1,
        &k,
        (dev.ptr(), 16, 3, 1),
    );
    let err = s.block_host_until_done().unwrap_err();
    assert!(matches!(err, Error::LaunchConfig { .. }), "{err:?}");

    // Dynamic local memory over the device's local memory size.
    let lk: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, SharedMemory<u32>)> =
        load(&exec, LOCAL_SUM_CL, "local_sum");
    let too_much = SharedMemory::<u32>::new(desc.shared_memory_per_block as usize / 4 + 1);
    let err = run(&exec, 1, 1, &lk, (dev.ptr(), dev.ptr(), too_much)).unwrap_err();
    assert!(
        matches!(err, Error::LaunchConfig { .. }) && err.to_string().contains("shared"),
        "{err:?}"
    );

    assert_eq!(
        exec.copy_to_vec(&dev).unwrap(),
        data,
        "no rejected launch ran"
    );

    // A kernel's own limit: reqd_work_group_size(64, 1, 1) launched with 32 threads.
    let src = "__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
               void fixed64(__global uint* x) { x[get_global_id(0)] = get_local_id(0); }";
    let fk: TypedKernel<(DevicePtr<u32>,)> = load(&exec, src, "fixed64");
    let out = exec.copy_to_device(&[POISON_U32; 128]).unwrap();
    let err = run(&exec, 32, 4, &fk, (out.ptr(),)).unwrap_err();
    assert!(
        matches!(&err, Error::LaunchConfig { kernel, .. } if kernel == "fixed64"),
        "{err:?}"
    );
    assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![POISON_U32; 128]);
    run(&exec, 64, 2, &fk, (out.ptr(),)).unwrap();
    let want: Vec<u32> = (0..128).map(|i| i % 64).collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);

    // The largest legal local size runs.
    let max = desc.max_threads_per_block.min(desc.max_block_dims[0]);
    let big = random_u32s(&mut r, max as usize * 2, u32::MAX);
    let dbig = exec.copy_to_device(&big).unwrap();
    run(&exec, max, 2, &k, (dbig.ptr(), big.len() as u32, 5, 7)).unwrap();
    assert_eq!(exec.copy_to_vec(&dbig).unwrap(), affine_ref(&big, 5, 7));
    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 5. Copies out of bounds
// ---------------------------------------------------------------------------------------------

#[test]
fn copies_past_the_end_of_a_buffer_are_out_of_bounds() {
    let exec = opencl_or_skip!("copy_bounds");
    let mut r = rng("copy_bounds");
    let data = random_u32s(&mut r, 128, u32::MAX);
    let dev = exec.copy_to_device(&data).unwrap();

    // A sub-slice out of range.
    let e = dev.slice(100..200).unwrap_err();
    assert!(
        matches!(e, Error::OutOfBounds { .. })
            && e.to_string().contains("100..200")
            && e.to_string().contains("128"),
        "{e}"
    );
    let inner = dev.slice(64..128).unwrap();
    let e = inner.slice(0..65).unwrap_err();
    assert!(
        matches!(e, Error::OutOfBounds { .. }) && e.to_string().contains("0..65"),
        "{e}"
    );

    // Length mismatches, synchronous.
    let e = exec
        .synchronous_memcpy_h2d(&[7u32; 10], dev.slice(120..128).unwrap())
        .unwrap_err();
    assert!(
        matches!(e, Error::OutOfBounds { .. })
            && e.to_string().contains("10")
            && e.to_string().contains("8"),
        "{e}"
    );
    let mut small = [0u32; 3];
    let e = exec.synchronous_memcpy_d2h(&dev, &mut small).unwrap_err();
    assert!(matches!(e, Error::OutOfBounds { .. }), "{e}");

    // Length mismatches, on a stream: the error sticks and the rest of the chain is skipped.
    let src = HostMemory::from_slice(&[0u32; 65]).unwrap();
    let zeros = HostMemory::from_slice(&[0u32; 64]).unwrap();
    let mut back = HostMemory::from_slice(&[POISON_U32; 128]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_memcpy_h2d(&src, inner)
        .then_memcpy_h2d(&zeros, inner)
        .then_memcpy_d2h(&dev, &mut back);
    let e = s.block_host_until_done().unwrap_err();
    assert!(
        matches!(e, Error::OutOfBounds { .. })
            && e.to_string().contains("65")
            && e.to_string().contains("64"),
        "{e}"
    );
    assert_eq!(
        back.as_slice(),
        &[POISON_U32; 128],
        "skipped after the error"
    );
    let other = exec.allocate_array::<u32>(63).unwrap();
    let mut s2 = exec.create_stream().unwrap();
    s2.then_memcpy_d2d(inner, &other);
    assert!(matches!(
        s2.block_host_until_done(),
        Err(Error::OutOfBounds { .. })
    ));
    assert_eq!(
        exec.copy_to_vec(&dev).unwrap(),
        data,
        "no rejected copy wrote anything"
    );

    // Correct copies into and out of sub-slices at odd offsets land in the right place.
    let patch = random_u32s(&mut r, 5, u32::MAX);
    let hpatch = HostMemory::from_slice(&patch).unwrap();
    let mut hback = HostMemory::from_slice(&[POISON_U32; 7]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_memcpy_h2d(&hpatch, dev.slice(3..8).unwrap())
        .then_memcpy_d2h(dev.slice(2..9).unwrap(), &mut hback)
        .then_memcpy_d2d(dev.slice(3..8).unwrap(), dev.slice(121..126).unwrap());
    s.block_host_until_done().unwrap();
    let mut want = data.clone();
    want[3..8].copy_from_slice(&patch);
    assert_eq!(hback.as_slice(), &want[2..9]);
    want[121..126].copy_from_slice(&patch);
    assert_eq!(exec.copy_to_vec(&dev).unwrap(), want);
    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 6. Allocation limits
// ---------------------------------------------------------------------------------------------

#[test]
fn an_allocation_over_the_device_maximum_is_out_of_memory() {
    let exec = opencl_or_skip!("allocation_limit");
    let mut r = rng("allocation_limit");
    let desc = exec.description().clone();
    assert!(desc.max_allocation > 0, "{desc:?}");
    assert!(
        desc.total_memory == 0 || desc.max_allocation <= desc.total_memory,
        "{desc:?}"
    );
    let bytes = desc.max_allocation + 1;
    let e = exec.allocate_array::<u8>(bytes as usize).unwrap_err();
    assert!(
        matches!(&e, Error::OutOfMemory { platform, bytes: b, .. }
            if *platform == "opencl" && *b == bytes),
        "{e:?}"
    );
    assert!(e.to_string().contains(&bytes.to_string()), "{e}");
    let e = exec
        .allocate_zeroed_array::<u32>((desc.max_allocation / 4 + 1) as usize)
        .unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { .. }), "{e:?}");

    // Zero-sized allocations work, and so do normal ones afterwards.
    let empty = exec.allocate_array::<u32>(0).unwrap();
    assert!(empty.is_empty());
    let z = exec.allocate_zeroed_array::<u64>(1000).unwrap();
    assert!(exec.copy_to_vec(&z).unwrap().iter().all(|&v| v == 0));
    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 7. Kernels from files and binaries
// ---------------------------------------------------------------------------------------------

const TWICE_PLUS_ID_CL: &str = "
__kernel void twice_plus_id(__global const uint* x, __global uint* y, uint n) {
    uint i = get_global_id(0);
    if (i < n) y[i] = x[i] * 2u + i;
}";

type TwicePlusId = TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, u32)>;

#[test]
fn a_sub_slice_passed_as_a_kernel_argument_is_offset() {
    let exec = opencl_or_skip!("sub_slice_argument");
    let mut r = rng("sub_slice_argument");
    let k: Affine = load(&exec, AFFINE_CL, "affine");
    let data = random_u32s(&mut r, 256, u32::MAX);
    let mem = exec.copy_to_device(&data).unwrap();
    let sub = mem.slice(64..128).unwrap();
    // More threads than the slice has elements: the kernel's bound check uses n = 64.
    run(&exec, 32, 3, &k, (sub.ptr(), 64, 7, 3)).unwrap();
    let got = exec.copy_to_vec(&mem).unwrap();
    let mut want = data.clone();
    want[64..128].copy_from_slice(&affine_ref(&data[64..128], 7, 3));
    assert_eq!(&got[..64], &data[..64], "before the slice: untouched");
    assert_eq!(&got[64..128], &want[64..128], "the slice: transformed");
    assert_eq!(&got[128..], &data[128..], "after the slice: untouched");

    // Input and output both sub-slices, of different buffers, with the thread index.
    let k2: TwicePlusId = load(&exec, TWICE_PLUS_ID_CL, "twice_plus_id");
    let out = exec.copy_to_device(&vec![POISON_U32; 256]).unwrap();
    run(
        &exec,
        64,
        1,
        &k2,
        (
            mem.slice(128..192).unwrap().ptr(),
            out.slice(192..256).unwrap().ptr(),
            64,
        ),
    )
    .unwrap();
    let got = exec.copy_to_vec(&out).unwrap();
    assert_eq!(&got[..192], &[POISON_U32; 192][..]);
    for i in 0..64 {
        assert_eq!(
            got[192 + i],
            data[128 + i].wrapping_mul(2).wrapping_add(i as u32),
            "element {i}"
        );
    }

    // DevicePtr::offset is a sub-slice too (512 bytes in: a multiple of any device's
    // base-address alignment).
    let p = mem.ptr().offset(128).unwrap();
    run(&exec, 64, 2, &k, (p, 128, 1, 1)).unwrap();
    let got = exec.copy_to_vec(&mem).unwrap();
    assert_eq!(&got[..64], &data[..64]);
    assert_eq!(&got[64..128], &want[64..128]);
    let tail: Vec<u32> = data[128..].iter().map(|v| v.wrapping_add(1)).collect();
    assert_eq!(&got[128..], &tail[..]);
    assert_still_usable(&exec, &mut r);
}

/// A sub-slice whose offset is not a multiple of the device's base-address alignment (12 and 4
/// bytes, and 1000 bytes through `DevicePtr::offset`). OpenCL sub-buffers cannot start there;
/// the backend must either run the kernel on the right elements or refuse the launch with a
/// clear `InvalidArgument` that mentions the alignment. It must never run on the wrong
/// elements, write anything when it refuses, or poison the executor.
#[test]
fn an_unaligned_sub_slice_argument_is_offset_or_refused_clearly() {
    let exec = opencl_or_skip!("unaligned_sub_slice_argument");
    let mut r = rng("unaligned_sub_slice_argument");
    let k: TwicePlusId = load(&exec, TWICE_PLUS_ID_CL, "twice_plus_id");
    let data = random_u32s(&mut r, 300, u32::MAX);
    let mem = exec.copy_to_device(&data).unwrap();
    let out = exec.copy_to_device(&vec![POISON_U32; 300]).unwrap();
    let cases = [
        (3usize, 1usize, 40usize),
        (3, 0, 40),
        (0, 1, 40),
        (250, 257, 40),
    ];
    for (src_at, dst_at, n) in cases {
        let src = mem.ptr().offset(src_at).unwrap();
        let dst = out.slice(dst_at..dst_at + n).unwrap().ptr();
        let before = exec.copy_to_vec(&out).unwrap();
        match run(&exec, 10, (n / 10) as u32, &k, (src, dst, n as u32)) {
            Ok(()) => {
                let got = exec.copy_to_vec(&out).unwrap();
                let mut want = before.clone();
                for i in 0..n {
                    want[dst_at + i] = data[src_at + i].wrapping_mul(2).wrapping_add(i as u32);
                }
                assert_eq!(got, want, "src at {src_at}, dst at {dst_at}");
            }
            Err(e) => {
                eprintln!(
                    "note: unaligned sub-slice refused (src at {src_at}, dst at {dst_at}): {e}"
                );
                assert!(
                    matches!(e, Error::InvalidArgument { .. }) && e.to_string().contains("align"),
                    "{e:?}"
                );
                assert_eq!(
                    exec.copy_to_vec(&out).unwrap(),
                    before,
                    "a refused launch wrote"
                );
            }
        }
    }
    assert_eq!(
        exec.copy_to_vec(&mem).unwrap(),
        data,
        "the input is untouched"
    );
    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 10. Timers from profiling timestamps
// ---------------------------------------------------------------------------------------------

const SPIN_CL: &str = "
__kernel void spin(__global uint* out, uint iters) {
    uint x = get_global_id(0);
    for (uint k = 0; k < iters; ++k) x = x * 1664525u + 1013904223u;
    out[get_global_id(0)] = x;
}";

fn spin_ref(i: u32, iters: u32) -> u32 {
    (0..iters).fold(i, |x, _| {
        x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
    })
}

#[test]
fn a_timer_measures_a_kernel_with_profiling_timestamps() {
    let exec = opencl_or_skip!("timer");
    let mut r = rng("timer");
    let k: TypedKernel<(DevicePtr<u32>, u32)> = load(&exec, SPIN_CL, "spin");
    let n = 256usize;
    let iters = 200_000 + random_u32s(&mut r, 1, 1000)[0];
    let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
    let timer = exec.create_timer().unwrap();
    assert!(
        matches!(timer.elapsed(), Err(Error::Event { .. })),
        "a timer never started is an Event error"
    );
    let mut s = exec.create_stream().unwrap();
    let wall = Instant::now();
    s.then_start_timer(&timer)
        .then_launch(64, (n / 64) as u32, &k, (out.ptr(), iters))
        .then_stop_timer(&timer);
    s.block_host_until_done().unwrap();
    let wall = wall.elapsed();
    let elapsed = timer.elapsed().unwrap();
    eprintln!("timer: device {elapsed:?}, host wall clock {wall:?}");
    assert!(elapsed > Duration::ZERO, "elapsed {elapsed:?}");
    assert!(
        elapsed <= wall + Duration::from_millis(5),
        "device time {elapsed:?} cannot exceed the host's wall clock {wall:?} around it"
    );
    let got = exec.copy_to_vec(&out).unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, spin_ref(i as u32, iters), "element {i}");
    }

    // Events of the same stream: a re-used timer measures the new interval.
    let mut s = exec.create_stream().unwrap();
    s.then_start_timer(&timer)
        .then_launch(64, (n / 64) as u32, &k, (out.ptr(), 1))
        .then_stop_timer(&timer)
        .block_host_until_done()
        .unwrap();
    assert!(timer.elapsed().is_ok());
}

// ---------------------------------------------------------------------------------------------
// 11. Host callbacks in stream order
// ---------------------------------------------------------------------------------------------

const FILL_CL: &str = "
__kernel void fill(__global uint* x, uint n, uint seed, uint iters) {
    uint i = get_global_id(0);
    uint v = seed ^ i;
    for (uint k = 0; k < iters; ++k) v = v * 1664525u + 1013904223u;
    if (i < n) x[i] = v;
}";

fn fill_ref(n: usize, seed: u32, iters: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| {
            (0..iters).fold(seed ^ i, |v, _| {
                v.wrapping_mul(1_664_525).wrapping_add(1_013_904_223)
            })
        })
        .collect()
}

#[test]
fn host_callbacks_run_in_stream_order_with_opencl_commands() {
    let exec = opencl_or_skip!("callback_order");
    let mut r = rng("callback_order");
    let k: TypedKernel<(DevicePtr<u32>, u32, u32, u32)> = load(&exec, FILL_CL, "fill");
    let n = 4096usize;
    let seeds = random_u32s(&mut r, 2, u32::MAX);
    let mem = Arc::new(exec.copy_to_device(&vec![POISON_U32; n]).unwrap());
    let seen_first = Arc::new(Mutex::new(None::<Vec<u32>>));
    let seen_second = Arc::new(Mutex::new(None::<Vec<u32>>));
    // The first kernel is slow, so a callback that ran early would see the poison; the
    // callback is slow too, so a second kernel that did not wait for it would overwrite the
    // memory before the callback reads it.
    let slow = 20_000;
    let mut s = exec.create_stream().unwrap();
    s.then_launch(
        64,
        (n / 64) as u32,
        &k,
        (mem.ptr(), n as u32, seeds[0], slow),
    );
    {
        let (mem, seen) = (mem.clone(), seen_first.clone());
        s.then_host_callback_with_status(move || {
            std::thread::sleep(Duration::from_millis(50));
            let v = mem.executor().copy_to_vec(&*mem)?;
            *seen.lock().unwrap() = Some(v);
            Ok(())
        });
    }
    s.then_launch(64, (n / 64) as u32, &k, (mem.ptr(), n as u32, seeds[1], 0));
    {
        let (mem, seen) = (mem.clone(), seen_second.clone());
        s.then_host_callback_with_status(move || {
            *seen.lock().unwrap() = Some(mem.executor().copy_to_vec(&*mem)?);
            Ok(())
        });
    }
    s.block_host_until_done().unwrap();

    let first = fill_ref(n, seeds[0], slow);
    let second = fill_ref(n, seeds[1], 0);
    let got_first = seen_first
        .lock()
        .unwrap()
        .take()
        .expect("first callback ran");
    assert!(
        got_first == first,
        "the callback after kernel 1 saw {} element(s) that are not kernel 1's values \
         (poison: {}, kernel 2's: {})",
        got_first.iter().zip(&first).filter(|(a, b)| a != b).count(),
        got_first.iter().filter(|&&v| v == POISON_U32).count(),
        got_first
            .iter()
            .zip(&second)
            .filter(|(a, b)| a == b)
            .count(),
    );
    let got_second = seen_second
        .lock()
        .unwrap()
        .take()
        .expect("second callback ran");
    assert!(
        got_second == second,
        "the callback after kernel 2 saw kernel 2's values"
    );
    assert_eq!(exec.copy_to_vec(&*mem).unwrap(), second);

    // A failing callback stops the rest of the stream: the kernel after it does not run.
    let mut s = exec.create_stream().unwrap();
    s.then_host_callback_with_status(|| {
        Err(Error::HostCallback {
            detail: "injected".into(),
        })
    })
    .then_launch(64, (n / 64) as u32, &k, (mem.ptr(), n as u32, seeds[0], 0));
    assert!(matches!(
        s.block_host_until_done(),
        Err(Error::HostCallback { .. })
    ));
    assert_eq!(exec.copy_to_vec(&*mem).unwrap(), second);
    assert_still_usable(&exec, &mut r);
}
