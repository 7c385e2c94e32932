//! Launch limits and parameter buffers; a kernel fault is sticky; host functions may not call the driver.

use super::*;

#[test]
fn bad_launches_are_invalid_value() {
    let Some(_drv) = setup("bad_launches_are_invalid_value") else {
        return;
    };
    let base = free_memory();
    let m = load(PTX);
    let (add, echo, noargs) = (
        function(m, c"add_k"),
        function(m, c"smem_echo"),
        function(m, c"noargs"),
    );
    let s = stream();
    let n = 32u32;
    let (din, dout) = (alloc(n as usize * 4), alloc(n as usize * 4));
    ok!(cuMemsetD32_v2(din, 5, n as usize));
    ok!(cuMemsetD32_v2(dout, POISON_U32, n as usize));
    let (mut o, mut i, mut k, mut nn) = (dout, din, 1u32, n);
    let mut params = [
        (&raw mut o).cast::<c_void>(),
        (&raw mut i).cast(),
        (&raw mut k).cast(),
        (&raw mut nn).cast(),
    ];
    let pp = params.as_mut_ptr();
    // Zero and oversized geometry.
    let geometries: [([u32; 3], [u32; 3]); 10] = [
        ([0, 1, 1], [32, 1, 1]),
        ([1, 0, 1], [32, 1, 1]),
        ([1, 1, 0], [32, 1, 1]),
        ([1, 1, 1], [0, 1, 1]),
        ([1, 1, 1], [32, 0, 1]),
        ([1, 1, 1], [1025, 1, 1]),
        ([1, 1, 1], [32, 32, 2]),
        ([1, 1, 1], [1, 1, 65]),
        ([1, 65536, 1], [32, 1, 1]),
        ([1 << 31, 1, 1], [32, 1, 1]),
    ];
    for (g, b) in geometries {
        let r = cu!(cuLaunchKernel(
            add,
            g[0],
            g[1],
            g[2],
            b[0],
            b[1],
            b[2],
            0,
            s,
            pp,
            null_mut()
        ));
        check(
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            &format!("cuLaunchKernel(grid {g:?}, block {b:?})"),
        );
    }
    // Parameters: NULL kernelParams for a kernel with parameters, both forms, a NULL
    // parameter pointer, a wrong `extra` buffer size.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 0, s, null_mut(), null_mut())
    );
    #[repr(C)]
    struct AddArgs {
        out: u64,
        input: u64,
        k: u32,
        n: u32,
    }
    let mut packed = AddArgs {
        out: dout,
        input: din,
        k: 1,
        n,
    };
    let mut size = size_of::<AddArgs>();
    let mut extra = [
        std::ptr::without_provenance_mut(1), // CU_LAUNCH_PARAM_BUFFER_POINTER
        (&raw mut packed).cast(),
        std::ptr::without_provenance_mut(2), // CU_LAUNCH_PARAM_BUFFER_SIZE
        (&raw mut size).cast(),
        null_mut(), // CU_LAUNCH_PARAM_END
    ];
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchKernel(add, 1, 1, 1, 32, 1, 1, 0, s, pp, extra.as_mut_ptr())
    );
    for wrong in [size - 4, size + 8, 0] {
        let mut wrong_size = wrong;
        let mut bad_extra = extra;
        bad_extra[3] = (&raw mut wrong_size).cast();
        let r = cu!(cuLaunchKernel(
            add,
            1,
            1,
            1,
            32,
            1,
            1,
            0,
            s,
            null_mut(),
            bad_extra.as_mut_ptr()
        ));
        check(
            r,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            &format!("cuLaunchKernel(extra with a {wrong}-byte buffer, kernel takes {size})"),
        );
    }
    let mut null_param = params;
    null_param[2] = null_mut();
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchKernel(
            add,
            1,
            1,
            1,
            32,
            1,
            1,
            0,
            s,
            null_param.as_mut_ptr(),
            null_mut()
        )
    );
    // Dynamic shared memory above the device's 48 KiB, then above a lowered limit.
    let mut out_echo = dout;
    let mut echo_params = [(&raw mut out_echo).cast::<c_void>()];
    let ep = echo_params.as_mut_ptr();
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchKernel(echo, 1, 1, 1, 32, 1, 1, 48 * 1024 + 1, s, ep, null_mut())
    );
    use CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as MAX_DYN;
    ok!(cuFuncSetAttribute(echo, MAX_DYN, 1024));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchKernel(echo, 1, 1, 1, 32, 1, 1, 2048, s, ep, null_mut())
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuFuncSetAttribute(echo, MAX_DYN, 48 * 1024 + 1)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuFuncSetAttribute(echo, MAX_DYN, -1)
    );
    let mut v = 0;
    ok!(cuFuncGetAttribute(&mut v, MAX_DYN, echo));
    assert_eq!(v, 1024, "a refused set changes nothing");
    // Nothing ran so far.
    ok!(cuStreamSynchronize(s));
    assert_eq!(download(dout, n as usize), vec![POISON_U32; n as usize]);
    // Raising the limit again within 48 KiB: the launch works.
    ok!(cuFuncSetAttribute(echo, MAX_DYN, 48 * 1024));
    ok!(cuLaunchKernel(
        echo,
        1,
        1,
        1,
        32,
        1,
        1,
        2048,
        s,
        ep,
        null_mut()
    ));
    ok!(cuStreamSynchronize(s));
    let want: Vec<u32> = (0..n).map(|t| 2 * t).collect();
    assert_eq!(download(dout, n as usize), want);
    ok!(cuLaunchKernel(
        echo,
        1,
        1,
        1,
        32,
        1,
        1,
        48 * 1024,
        s,
        ep,
        null_mut()
    ));
    ok!(cuStreamSynchronize(s));
    // The right `extra` buffer works, and so does a kernel without parameters with neither.
    ok!(cuMemsetD32_v2(dout, POISON_U32, n as usize));
    ok!(cuLaunchKernel(
        add,
        1,
        1,
        1,
        32,
        1,
        1,
        0,
        s,
        null_mut(),
        extra.as_mut_ptr()
    ));
    ok!(cuLaunchKernel(
        noargs,
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        s,
        null_mut(),
        null_mut()
    ));
    ok!(cuStreamSynchronize(s));
    assert_eq!(download(dout, n as usize), vec![6; n as usize]);
    add_works(add, s, "bad_launches");
    ok!(cuMemFree_v2(din));
    ok!(cuMemFree_v2(dout));
    ok!(cuStreamDestroy_v2(s));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// A kernel fault: sticky in its context.

#[test]
fn a_kernel_fault_is_sticky_illegal_address() {
    let Some(drv) = setup("a_kernel_fault_is_sticky_illegal_address") else {
        return;
    };
    let base = free_memory();
    let c = created_context();
    let m = load(PTX);
    let (oob, add) = (function(m, c"oob_store"), function(m, c"add_k"));
    let s = stream();
    let p = alloc(256);
    let mut o = p;
    let mut params = [(&raw mut o).cast::<c_void>()];
    ok!(cuLaunchKernel(
        oob,
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        s,
        params.as_mut_ptr(),
        null_mut()
    ));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    // Every later call that uses the context returns it.
    let (mut q, mut s2, mut e, mut m2) = (0, null_mut(), null_mut(), null_mut());
    let x = 1u32;
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(s));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamSynchronize(null_mut()));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamQuery(s));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemAlloc_v2(&mut q, 64));
    expect!(
        CUDA_ERROR_ILLEGAL_ADDRESS,
        cuMemcpyHtoD_v2(p, (&raw const x).cast(), 4)
    );
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemsetD32_v2(p, 0, 1));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuStreamCreate(&mut s2, 0));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuEventCreate(&mut e, 0));
    let ptx = CString::new(PTX).unwrap();
    expect!(
        CUDA_ERROR_ILLEGAL_ADDRESS,
        cuModuleLoadData(&mut m2, ptx.as_ptr().cast())
    );
    expect!(
        CUDA_ERROR_ILLEGAL_ADDRESS,
        cuLaunchKernel(oob, 1, 1, 1, 1, 1, 1, 0, s, params.as_mut_ptr(), null_mut())
    );
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuMemFree_v2(p));
    // The engine's report names the kernel and the faulting PTX line.
    let report = last_fault();
    let line = line_of(PTX, "// the faulting store");
    assert!(
        report.contains("oob_store") && report.contains(&format!("line {line}")),
        "the fault report must name `oob_store` and PTX line {line}: {report}"
    );
    // Other contexts are not poisoned.
    ok!(cuCtxPushCurrent_v2(drv.primary));
    let mp = load(PTX);
    add_works(function(mp, c"add_k"), null_mut(), "fault/primary");
    ok!(cuModuleUnload(mp));
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    assert_eq!(popped, drv.primary);
    // Destroying the context recovers: its memory is freed, a new context works.
    ok!(cuCtxDestroy_v2(c));
    assert_eq!(free_memory(), base);
    let c2 = created_context();
    let m3 = load(PTX);
    add_works(function(m3, c"add_k"), null_mut(), "fault/new context");
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, null_mut(), null_mut(), null_mut())
    );
    ok!(cuCtxDestroy_v2(c2));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Host functions.

/// The codes driver calls from inside a host function got.
static HOST_FN_CODES: [AtomicU32; 3] = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
const UNSET: u32 = u32::MAX;

unsafe extern "C" fn calls_the_driver(user: *mut c_void) {
    let mut p = 0;
    let a = cu!(cuMemAlloc_v2(&mut p, 64));
    let b = cu!(cuCtxSynchronize());
    let c = cu!(cuStreamQuery(user.cast()));
    for (slot, r) in HOST_FN_CODES.iter().zip([a, b, c]) {
        slot.store(r as u32, Ordering::SeqCst);
    }
}

#[test]
fn a_host_function_may_not_call_the_driver() {
    let Some(_drv) = setup("a_host_function_may_not_call_the_driver") else {
        return;
    };
    let base = free_memory();
    for slot in &HOST_FN_CODES {
        slot.store(UNSET, Ordering::SeqCst);
    }
    let s = stream();
    ok!(cuLaunchHostFunc(s, Some(calls_the_driver), s.cast()));
    ok!(cuStreamSynchronize(s));
    let want = CUresult::CUDA_ERROR_NOT_PERMITTED as u32;
    for (i, slot) in HOST_FN_CODES.iter().enumerate() {
        assert_eq!(
            slot.load(Ordering::SeqCst),
            want,
            "driver call {i} from a host function"
        );
    }
    // Nothing was allocated; the stream and context still work.
    assert_eq!(free_memory(), base);
    let m = load(PTX);
    add_works(function(m, c"add_k"), s, "host_function");
    ok!(cuStreamDestroy_v2(s));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Events.
