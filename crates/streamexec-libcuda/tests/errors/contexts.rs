//! Calls without a current context, and with a destroyed one.

use super::*;

#[test]
fn no_current_context_is_invalid_context() {
    let Some(_drv) = setup("no_current_context_is_invalid_context") else {
        return;
    };
    let base = free_memory();
    let m = load(PTX);
    let f = function(m, c"add_k");
    let (fa, ma) = (f as usize, m as usize);
    std::thread::spawn(move || {
        let (f, m) = (fa as CUfunction, ma as CUmodule);
        let mut ctx = 1 as CUcontext;
        ok!(cuCtxGetCurrent(&mut ctx));
        assert!(ctx.is_null(), "a fresh thread has no current context");
        let (mut p, mut s, mut e, mut m2, mut g) =
            (0, null_mut(), null_mut(), null_mut(), null_mut());
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc_v2(&mut p, 64));
        assert_eq!(p, 0);
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&mut s, 0));
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuEventCreate(&mut e, 0));
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());
        let ptx = CString::new(PTX).unwrap();
        expect!(
            CUDA_ERROR_INVALID_CONTEXT,
            cuModuleLoadData(&mut m2, ptx.as_ptr().cast())
        );
        expect!(
            CUDA_ERROR_INVALID_CONTEXT,
            cuModuleGetFunction(&mut g, m, c"add_k".as_ptr())
        );
        expect!(
            CUDA_ERROR_INVALID_CONTEXT,
            cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, null_mut(), null_mut(), null_mut())
        );
        let (mut free, mut total) = (0, 0);
        expect!(
            CUDA_ERROR_INVALID_CONTEXT,
            cuMemGetInfo_v2(&mut free, &mut total)
        );
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent_v2(&mut ctx));
    })
    .join()
    .expect("the thread's checks");
    add_works(f, null_mut(), "no_current_context");
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

#[test]
fn a_destroyed_context_is_invalid_context() {
    let Some(drv) = setup("a_destroyed_context_is_invalid_context") else {
        return;
    };
    let base = free_memory();
    let c = created_context();
    // Its memory, module, stream and event die with it.
    let p = alloc(1 << 16);
    let s = stream();
    let mut e = null_mut();
    ok!(cuEventCreate(&mut e, 0));
    let m = load(PTX);
    let f = function(m, c"add_k");
    // Another thread has it current when it is destroyed.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let cu = c as usize;
    let other = std::thread::spawn(move || {
        ok!(cuCtxSetCurrent(cu as CUcontext));
        ready_tx.send(()).unwrap();
        rx.recv().unwrap();
        let mut q = 0;
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc_v2(&mut q, 64));
        expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());
        ok!(cuCtxSetCurrent(null_mut()));
    });
    ready_rx.recv().unwrap();
    ok!(cuCtxDestroy_v2(c));
    tx.send(()).unwrap();
    other.join().expect("the other thread's checks");
    // The destroyed context was popped from this thread's stack: the primary is current.
    let mut cur = null_mut();
    ok!(cuCtxGetCurrent(&mut cur));
    assert_eq!(cur, drv.primary);
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent(c));
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent_v2(c));
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy_v2(c));
    let mut v = 0;
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetApiVersion(c, &mut v));
    // The destroyed context's objects are unknown handles now.
    expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
    let mut attr = 0;
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuFuncGetAttribute(
            &mut attr,
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            f
        )
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(p));
    // A primary context is not destroyed with cuCtxDestroy.
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy_v2(drv.primary));
    assert_eq!(
        free_memory(),
        base,
        "the destroyed context's memory is freed"
    );
    let m = load(PTX);
    add_works(function(m, c"add_k"), null_mut(), "destroyed_context");
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// NULL pointers and handles.
