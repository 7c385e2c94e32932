//! NULL pointers, and unknown, destroyed or mixed-up handles.

use super::*;

#[test]
fn null_pointers_are_invalid_value() {
    let Some(_drv) = setup("null_pointers_are_invalid_value") else {
        return;
    };
    let base = free_memory();
    let m = load(PTX);
    let f = function(m, c"add_k");
    let p = alloc(64);
    let s = stream();
    let mut e = null_mut();
    ok!(cuEventCreate(&mut e, 0));
    let mut buf = [0u32; 16];
    let ptx = CString::new(PTX).unwrap();
    expect!(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(null_mut()));
    expect!(CUDA_ERROR_INVALID_VALUE, cuDeviceGetCount(null_mut()));
    expect!(CUDA_ERROR_INVALID_VALUE, cuDeviceGet(null_mut(), 0));
    expect!(CUDA_ERROR_INVALID_VALUE, cuDeviceGetName(null_mut(), 64, 0));
    expect!(CUDA_ERROR_INVALID_VALUE, cuDeviceTotalMem_v2(null_mut(), 0));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuDeviceGetAttribute(
            null_mut(),
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE,
            0
        )
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuCtxGetCurrent(null_mut()));
    expect!(CUDA_ERROR_INVALID_VALUE, cuCtxGetDevice(null_mut()));
    expect!(CUDA_ERROR_INVALID_VALUE, cuCtxCreate_v2(null_mut(), 0, 0));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuDevicePrimaryCtxRetain(null_mut(), 0)
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemAlloc_v2(null_mut(), 64));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemAllocHost_v2(null_mut(), 64));
    expect!(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(null_mut(), 0));
    expect!(CUDA_ERROR_INVALID_VALUE, cuEventCreate(null_mut(), 0));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuModuleLoadData(null_mut(), ptx.as_ptr().cast())
    );
    let mut m2 = null_mut();
    expect!(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&mut m2, null()));
    assert!(m2.is_null());
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuModuleGetFunction(null_mut(), m, c"add_k".as_ptr())
    );
    let mut g = null_mut();
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuModuleGetFunction(&mut g, m, null())
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuModuleGetGlobal_v2(null_mut(), null_mut(), m, null())
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(p, null(), 64));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(null_mut(), p, 64));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoDAsync_v2(p, null(), 64, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoHAsync_v2(null_mut(), p, 64, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuLaunchHostFunc(s, None, null_mut())
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuEventElapsedTime(null_mut(), e, e)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemHostRegister_v2(null_mut(), 64, 0)
    );
    // NULL inputs that are not pointers to memory: a zero-sized allocation.
    let mut q = 0;
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemAlloc_v2(&mut q, 0));
    assert_eq!(q, 0);
    // Nothing was written, nothing is lost; the stream still works.
    ok!(cuMemcpyDtoH_v2(buf.as_mut_ptr().cast(), p, 64));
    add_works(f, s, "null_pointers");
    ok!(cuEventDestroy_v2(e));
    ok!(cuStreamDestroy_v2(s));
    ok!(cuMemFree_v2(p));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

#[test]
fn unknown_and_destroyed_handles_are_invalid_handle() {
    let Some(drv) = setup("unknown_and_destroyed_handles_are_invalid_handle") else {
        return;
    };
    let base = free_memory();
    let forged = 0xdead_0000usize;
    // Streams.
    let s = stream();
    ok!(cuStreamDestroy_v2(s));
    for h in [s, forged as CUstream] {
        expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(h));
        expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(h));
        expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy_v2(h));
        let mut flags = 0;
        expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamGetFlags(h, &mut flags));
        let p = alloc(16);
        expect!(CUDA_ERROR_INVALID_HANDLE, cuMemsetD8Async(p, 0, 16, h));
        ok!(cuMemFree_v2(p));
    }
    // The default streams are not destroyed.
    expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy_v2(null_mut()));
    // Events.
    let mut e = null_mut();
    ok!(cuEventCreate(&mut e, 0));
    ok!(cuEventDestroy_v2(e));
    // An event handle is not a stream, a stream handle not an event.
    let s2 = stream();
    expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(e.cast()));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(s2.cast()));
    for h in [e, forged as CUevent] {
        expect!(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(h, null_mut()));
        expect!(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(h));
        expect!(CUDA_ERROR_INVALID_HANDLE, cuEventSynchronize(h));
        expect!(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy_v2(h));
        expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamWaitEvent(s2, h, 0));
        let mut ms = 0.0f32;
        expect!(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&mut ms, h, h));
    }
    // Modules and functions.
    let m = load(PTX);
    let f = function(m, c"add_k");
    let keep = load(PTX);
    let fk = function(keep, c"add_k");
    ok!(cuModuleUnload(m));
    for (hm, hf) in [(m, f), (forged as CUmodule, forged as CUfunction)] {
        let mut g = null_mut();
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuModuleGetFunction(&mut g, hm, c"add_k".as_ptr())
        );
        let (mut dptr, mut bytes) = (0, 0);
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuModuleGetGlobal_v2(&mut dptr, &mut bytes, hm, c"__llvm_rpc_client".as_ptr())
        );
        expect!(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(hm));
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(hf, 1, 1, 1, 1, 1, 1, 0, null_mut(), null_mut(), null_mut())
        );
        let mut v = 0;
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuFuncGetAttribute(
                &mut v,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                hf
            )
        );
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuFuncSetAttribute(
                hf,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                0
            )
        );
    }
    // A module handle is not a function handle.
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuLaunchKernel(
            keep.cast(),
            1,
            1,
            1,
            1,
            1,
            1,
            0,
            null_mut(),
            null_mut(),
            null_mut()
        )
    );
    // A stream, event, module and function of another context.
    let c = created_context();
    let sc = stream();
    let mut ec = null_mut();
    ok!(cuEventCreate(&mut ec, 0));
    let mc = load(PTX);
    let fc = function(mc, c"add_k");
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    assert_eq!(popped, c);
    let p = alloc(64);
    let mut one = 0u32;
    expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(sc));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuMemsetD32Async(p, 1, 16, sc));
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuMemcpyHtoDAsync_v2(p, (&raw const one).cast(), 4, sc)
    );
    expect!(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(ec, null_mut()));
    let mut g = null_mut();
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuModuleGetFunction(&mut g, mc, c"add_k".as_ptr())
    );
    {
        let (mut o, mut i, mut k, mut n) = (p, p, 1u32, 16u32);
        let mut params = [
            (&raw mut o).cast::<c_void>(),
            (&raw mut i).cast(),
            (&raw mut k).cast(),
            (&raw mut n).cast(),
        ];
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(
                fk,
                1,
                1,
                1,
                16,
                1,
                1,
                0,
                sc,
                params.as_mut_ptr(),
                null_mut()
            )
        );
        expect!(
            CUDA_ERROR_INVALID_HANDLE,
            cuLaunchKernel(
                fc,
                1,
                1,
                1,
                16,
                1,
                1,
                0,
                null_mut(),
                params.as_mut_ptr(),
                null_mut()
            )
        );
    }
    // Nothing ran: the memory is untouched.
    ok!(cuMemsetD32_v2(p, POISON_U32, 16));
    assert_eq!(download(p, 16), vec![POISON_U32; 16]);
    ok!(cuMemcpyDtoH_v2((&raw mut one).cast(), p, 4));
    ok!(cuCtxDestroy_v2(c));
    let mut cur = null_mut();
    ok!(cuCtxGetCurrent(&mut cur));
    assert_eq!(cur, drv.primary);
    add_works(fk, s2, "unknown_handles");
    ok!(cuStreamDestroy_v2(s2));
    ok!(cuMemFree_v2(p));
    ok!(cuModuleUnload(keep));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Memory.
