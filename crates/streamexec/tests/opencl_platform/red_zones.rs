//! Out-of-bounds writes by kernels on CPU devices: red zones turn them into `KernelFault`s
//! that name the kernel, the argument and how far past the end (or before the start) they
//! went, and the process stays healthy. Without red zones (`STREAMEXEC_OPENCL_RED_ZONES=0`)
//! the first test corrupts the heap: the launch returns `Ok` and the process dies later.

use super::*;

/// `out[i] = in[i] * a + b` for every work-item, whatever the buffers' sizes (not contracted
/// to a fused multiply-add, so the plain-Rust reference matches exactly).
const SCALE_CL: &str = "
#pragma OPENCL FP_CONTRACT OFF
__kernel void scale(__global float* out, __global const float* in, float a, float b) {
    size_t i = get_global_id(0);
    out[i] = in[i] * a + b;
}";

/// `out[i - shift] = i` for every work-item: `shift` > 0 writes before the start.
const SHIFTED_CL: &str = "
__kernel void shifted(__global uint* out, int shift) {
    int i = (int)get_global_id(0);
    out[i - shift] = (uint)i;
}";

type Scale = TypedKernel<(DevicePtr<f32>, DevicePtr<f32>, f32, f32)>;

fn scale_ref(x: &[f32], a: f32, b: f32) -> Vec<f32> {
    x.iter().map(|v| v * a + b).collect()
}

/// Device 0 when it is a CPU device (where red zones apply), else `None` after a message.
fn cpu_device(test: &str) -> Option<StreamExecutor> {
    let exec = opencl(test)?;
    let name = exec.description().name.to_ascii_lowercase();
    if name.starts_with("pthread") || name.starts_with("cpu") {
        Some(exec)
    } else {
        eprintln!("{test}: skipping, `{name}` is not a PoCL CPU device");
        None
    }
}

/// The `A..B` of "bytes A..B past its end" in a fault's detail.
fn past_end(detail: &str) -> (usize, usize) {
    let at = detail.find("bytes ").expect(detail) + 6;
    let rest = &detail[at..];
    let (a, rest) = rest.split_once("..").expect(detail);
    let b = rest.split_once(' ').expect(detail).0;
    (a.parse().expect(detail), b.parse().expect(detail))
}

/// Asserts that the writes went from `near` to `far` bytes past the end. A written byte that
/// happens to equal the canary's byte there (one chance in 256 per byte) is not seen, so the
/// first and the last byte may each be off by up to 3.
fn assert_past_end(detail: &str, near: usize, far: usize) {
    let (a, b) = past_end(detail);
    assert!(
        (near..=near + 3).contains(&a) && (far - 3..=far).contains(&b),
        "expected about bytes {near}..{far} past the end: {detail}"
    );
}

fn fault_detail(e: &Error, kernel: &str) -> String {
    match e {
        Error::KernelFault {
            platform,
            kernel: k,
            detail,
        } if *platform == "opencl" && k == kernel => detail.clone(),
        other => panic!("expected Error::KernelFault of `{kernel}`, got {other:?}"),
    }
}

/// Uses the executor after a fault: new allocations, a launch, copies, checked results.
fn still_healthy(exec: &StreamExecutor, k: &Scale, r: &mut StdRng) {
    for n in [16usize, 1000, 4096] {
        let x = random_f32s(r, n);
        let dx = exec.copy_to_device(&x).unwrap();
        let dy = exec.copy_to_device(&vec![POISON_F32; n]).unwrap();
        let blocks = n.div_ceil(16) as u32;
        if n.is_multiple_of(16) {
            run(exec, 16, blocks, k, (dy.ptr(), dx.ptr(), 3.0, -1.0)).unwrap();
            assert_eq!(exec.copy_to_vec(&dy).unwrap(), scale_ref(&x, 3.0, -1.0));
        }
        let back = exec.copy_to_vec(&dx).unwrap();
        assert_eq!(back, x, "a copy round trip of {n} floats");
    }
    assert_still_usable(exec, r);
}

#[test]
fn a_kernel_writing_past_the_end_is_a_kernel_fault_and_the_process_stays_healthy() {
    let Some(exec) = cpu_device("oob_past_end") else {
        return;
    };
    let mut r = rng("oob_past_end");
    let k: Scale = load(&exec, SCALE_CL, "scale");
    let x = random_f32s(&mut r, 16);
    let dx = exec.copy_to_device(&x).unwrap();
    let dy = exec.copy_to_device(&[POISON_F32; 16]).unwrap();
    // A neighbour next to it, launched correctly on the same stream first.
    let nx = random_f32s(&mut r, 64);
    let dnx = exec.copy_to_device(&nx).unwrap();
    let dny = exec.copy_to_device(&[POISON_F32; 64]).unwrap();

    let mut s = exec.create_stream().unwrap();
    let ran_after = Arc::new(Mutex::new(false));
    let flag = ran_after.clone();
    // 64 work-items on 16-float buffers: 48 floats (192 bytes) past the end.
    s.then_launch(16, 4, &k, (dny.ptr(), dnx.ptr(), 2.0, 0.5))
        .then_launch(16, 4, &k, (dy.ptr(), dx.ptr(), 2.0, 0.5))
        .then_host_callback(move || *flag.lock().unwrap() = true);
    let err = s.block_host_until_done().unwrap_err();
    let detail = fault_detail(&err, "scale");
    assert!(detail.contains("past the end"), "{detail}");
    assert!(detail.contains("64-byte buffer of argument 0"), "{detail}");
    assert_past_end(&detail, 0, 192);
    assert!(
        !detail.contains("argument 1"),
        "reads are not blamed: {detail}"
    );
    assert!(!s.ok(), "the fault sticks to the stream");
    assert!(
        !*ran_after.lock().unwrap(),
        "the callback after the faulting launch was skipped"
    );

    // The launch before it, in bounds, is intact; the in-bounds part of the faulting one ran.
    assert_eq!(exec.copy_to_vec(&dny).unwrap(), scale_ref(&nx, 2.0, 0.5));
    assert_eq!(exec.copy_to_vec(&dy).unwrap(), scale_ref(&x, 2.0, 0.5));
    assert_eq!(exec.copy_to_vec(&dx).unwrap(), x, "the input is untouched");

    // The red zones were restored: the same buffers, launched correctly, are fine.
    run(&exec, 16, 1, &k, (dy.ptr(), dx.ptr(), -1.0, 4.0)).unwrap();
    assert_eq!(exec.copy_to_vec(&dy).unwrap(), scale_ref(&x, -1.0, 4.0));
    // And a second overrun of them is caught again.
    let err = run(&exec, 16, 2, &k, (dy.ptr(), dx.ptr(), 1.0, 0.0)).unwrap_err();
    assert_past_end(&fault_detail(&err, "scale"), 0, 64);

    still_healthy(&exec, &k, &mut r);
}

#[test]
fn a_copy_kernel_overrunning_two_equal_buffers_is_caught() {
    // `out[i] = in[i]` past the end of both copies `in`'s red zone into `out`'s; the canaries
    // differ per buffer, so this still changes `out`'s.
    let Some(exec) = cpu_device("oob_copy") else {
        return;
    };
    let mut r = rng("oob_copy");
    let k: Scale = load(&exec, SCALE_CL, "scale");
    let x = random_f32s(&mut r, 256);
    let dx = exec.copy_to_device(&x).unwrap();
    let dy = exec.copy_to_device(&[POISON_F32; 256]).unwrap();
    let err = run(&exec, 64, 5, &k, (dy.ptr(), dx.ptr(), 1.0, 0.0)).unwrap_err();
    let detail = fault_detail(&err, "scale");
    assert!(
        detail.contains("1024-byte buffer of argument 0"),
        "{detail}"
    );
    assert_past_end(&detail, 0, 256);
    assert_eq!(exec.copy_to_vec(&dy).unwrap(), x);
    still_healthy(&exec, &k, &mut r);
}

#[test]
fn a_kernel_writing_before_the_start_is_a_kernel_fault() {
    let Some(exec) = cpu_device("oob_underflow") else {
        return;
    };
    let mut r = rng("oob_underflow");
    let k: TypedKernel<(DevicePtr<u32>, i32)> = load(&exec, SHIFTED_CL, "shifted");
    let out = exec.copy_to_device(&[POISON_U32; 32]).unwrap();

    // In bounds: shift 0 over 32 work-items.
    run(&exec, 32, 1, &k, (out.ptr(), 0)).unwrap();
    let want: Vec<u32> = (0..32).collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);

    // Shift 4 over 32 work-items: 4 words before the start (16 bytes), the rest in bounds.
    let err = run(&exec, 32, 1, &k, (out.ptr(), 4)).unwrap_err();
    let detail = fault_detail(&err, "shifted");
    assert!(detail.contains("before the start"), "{detail}");
    assert!(detail.contains("128-byte buffer of argument 0"), "{detail}");
    // 16 bytes, or a little less where the first written bytes equal the canary's.
    assert!(
        (13..=16).any(|b| detail.contains(&format!("up to {b} bytes before its start"))),
        "{detail}"
    );
    assert!(!detail.contains("past the end"), "{detail}");
    let got = exec.copy_to_vec(&out).unwrap();
    assert_eq!(&got[..28], &(4..32).collect::<Vec<u32>>()[..]);

    let scale: Scale = load(&exec, SCALE_CL, "scale");
    still_healthy(&exec, &scale, &mut r);
}

#[test]
fn in_bounds_launches_on_random_data_stay_ok_with_red_zones() {
    let Some(exec) = cpu_device("oob_in_bounds") else {
        return;
    };
    let mut r = rng("oob_in_bounds");
    let k: Scale = load(&exec, SCALE_CL, "scale");
    let mut s = exec.create_stream().unwrap();
    // Sizes around page boundaries, so the buffers end at every kind of offset in a page.
    for n in [1usize, 3, 1023, 1024, 1025, 4096, 5000, 65_536] {
        let x = random_f32s(&mut r, n);
        let ab = random_f32s(&mut r, 2);
        let dx = exec.copy_to_device(&x).unwrap();
        let dy = exec.copy_to_device(&vec![POISON_F32; n]).unwrap();
        s.then_launch(1, n as u32, &k, (dy.ptr(), dx.ptr(), ab[0], ab[1]));
        s.block_host_until_done().unwrap();
        assert_eq!(
            exec.copy_to_vec(&dy).unwrap(),
            scale_ref(&x, ab[0], ab[1]),
            "{n}"
        );
    }
    assert!(s.ok());
}

#[test]
fn an_overrun_inside_a_command_buffer_is_caught_at_each_replay() {
    let Some(exec) = cpu_device("oob_command_buffer") else {
        return;
    };
    let mut r = rng("oob_command_buffer");
    let k: Scale = load(&exec, SCALE_CL, "scale");
    let x = random_f32s(&mut r, 32);
    let dx = exec.copy_to_device(&x).unwrap();
    let good = exec.copy_to_device(&[POISON_F32; 32]).unwrap();
    let bad = exec.copy_to_device(&[POISON_F32; 16]).unwrap();

    // In bounds: replays stay Ok, whether native (cl_khr_command_buffer) or plain.
    let mut cb = exec.create_command_buffer();
    cb.launch(32, 1, &k, (good.ptr(), dx.ptr(), 2.0, 1.0))
        .unwrap();
    cb.finalize().unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_submit(&cb).then_submit(&cb);
    s.block_host_until_done().unwrap();
    assert_eq!(exec.copy_to_vec(&good).unwrap(), scale_ref(&x, 2.0, 1.0));

    // 32 work-items into 16 floats, after an in-bounds launch in the same part.
    let mut cb = exec.create_command_buffer();
    cb.launch(32, 1, &k, (good.ptr(), dx.ptr(), 1.0, 0.0))
        .unwrap();
    cb.launch(32, 1, &k, (bad.ptr(), dx.ptr(), 1.0, 0.0))
        .unwrap();
    cb.finalize().unwrap();
    for replay in 0..2 {
        let mut s = exec.create_stream().unwrap();
        s.then_submit(&cb);
        let err = s.block_host_until_done().unwrap_err();
        let detail = fault_detail(&err, "scale");
        assert!(
            detail.contains("64-byte buffer of argument 0"),
            "{replay}: {detail}"
        );
        assert_past_end(&detail, 0, 64);
        assert!(!s.ok());
    }
    assert_eq!(exec.copy_to_vec(&good).unwrap(), x);
    assert_eq!(exec.copy_to_vec(&bad).unwrap(), x[..16].to_vec());
    still_healthy(&exec, &k, &mut r);
}
