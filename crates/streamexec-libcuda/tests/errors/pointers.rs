//! Pointer attributes, device and context identification, stream callbacks: the queries
//! numba-cuda and cuda-core make about memory, devices, contexts and streams.

use super::*;
use sys::CUpointer_attribute as A;

/// `cuPointerGetAttribute` into a `T`.
fn attr<T: Default>(a: A, p: CUdeviceptr) -> (CUresult, T) {
    let mut v = T::default();
    let r = cu!(cuPointerGetAttribute((&raw mut v).cast(), a, p));
    (r, v)
}

#[track_caller]
fn attr_ok<T: Default>(a: A, p: CUdeviceptr) -> T {
    let (r, v) = attr::<T>(a, p);
    check(
        r,
        CUresult::CUDA_SUCCESS,
        &format!("cuPointerGetAttribute({a:?})"),
    );
    v
}

#[test]
fn pointer_attributes() {
    let Some(drv) = setup("pointer_attributes") else {
        return;
    };
    let base = free_memory();
    let (d, d2) = (alloc(4096), alloc(64));
    let inside = d + 100;
    assert_eq!(
        attr_ok::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside),
        2
    ); // DEVICE
    assert_eq!(
        attr_ok::<u64>(A::CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside),
        inside
    );
    assert_eq!(
        attr_ok::<usize>(A::CU_POINTER_ATTRIBUTE_CONTEXT, inside),
        drv.primary as usize
    );
    assert_eq!(
        attr_ok::<i32>(A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside),
        0
    );
    assert_eq!(
        attr_ok::<u64>(A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside),
        d
    );
    assert_eq!(
        attr_ok::<usize>(A::CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside),
        4096
    );
    assert!(!attr_ok::<bool>(A::CU_POINTER_ATTRIBUTE_IS_MANAGED, inside));
    assert!(attr_ok::<bool>(A::CU_POINTER_ATTRIBUTE_MAPPED, inside));
    let (id1, id2) = (
        attr_ok::<u64>(A::CU_POINTER_ATTRIBUTE_BUFFER_ID, d),
        attr_ok::<u64>(A::CU_POINTER_ATTRIBUTE_BUFFER_ID, d2),
    );
    assert_ne!(id1, id2, "each allocation has its own buffer id");
    assert_eq!(
        attr_ok::<u64>(A::CU_POINTER_ATTRIBUTE_BUFFER_ID, inside),
        id1
    );
    // Device memory has no host pointer.
    let (r, _) = attr::<usize>(A::CU_POINTER_ATTRIBUTE_HOST_POINTER, d);
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "HOST_POINTER of device memory",
    );
    expect!(
        CUDA_ERROR_NOT_SUPPORTED,
        cuPointerGetAttribute(
            std::ptr::dangling_mut(),
            A::CU_POINTER_ATTRIBUTE_P2P_TOKENS,
            d
        )
    );

    // Mapped pinned memory: host and device pointer are the same address.
    let mut h = null_mut();
    ok!(cuMemHostAlloc(&mut h, 256, 0x2));
    let hp = h as CUdeviceptr;
    assert_eq!(attr_ok::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hp), 1); // HOST
    assert_eq!(
        attr_ok::<usize>(A::CU_POINTER_ATTRIBUTE_HOST_POINTER, hp + 8),
        h as usize + 8
    );
    assert_eq!(
        attr_ok::<u64>(A::CU_POINTER_ATTRIBUTE_DEVICE_POINTER, hp),
        hp
    );

    // Registered memory is host memory the kernels do not reach: no device pointer.
    let mut buf = vec![0u8; 512];
    ok!(cuMemHostRegister_v2(buf.as_mut_ptr().cast(), 512, 0));
    let bp = buf.as_ptr() as CUdeviceptr;
    assert_eq!(
        attr_ok::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, bp + 3),
        1
    );
    assert_eq!(
        attr_ok::<usize>(A::CU_POINTER_ATTRIBUTE_HOST_POINTER, bp),
        bp as usize
    );
    let (r, _) = attr::<u64>(A::CU_POINTER_ATTRIBUTE_DEVICE_POINTER, bp);
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "DEVICE_POINTER of registered memory",
    );

    // Memory the driver does not know: an error for one attribute; null values for several.
    let stack = 0u64;
    let unknown = (&raw const stack).addr() as CUdeviceptr;
    let (r, _) = attr::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, unknown);
    check(r, CUresult::CUDA_ERROR_INVALID_VALUE, "an unknown pointer");
    let mut attrs = [
        A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        A::CU_POINTER_ATTRIBUTE_CONTEXT,
        A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        A::CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
    ];
    let (mut ty, mut ctx, mut ord, mut dp) = (7u32, 7usize, 7i32, 7u64);
    let mut data = [
        (&raw mut ty).cast::<c_void>(),
        (&raw mut ctx).cast(),
        (&raw mut ord).cast(),
        (&raw mut dp).cast(),
    ];
    ok!(cuPointerGetAttributes(
        4,
        attrs.as_mut_ptr(),
        data.as_mut_ptr(),
        unknown
    ));
    assert_eq!((ty, ctx, ord, dp), (0, 0, -2, 0));
    ok!(cuPointerGetAttributes(
        4,
        attrs.as_mut_ptr(),
        data.as_mut_ptr(),
        d2 + 8
    ));
    assert_eq!((ty, ctx, ord, dp), (2, drv.primary as usize, 0, d2 + 8));
    ok!(cuPointerGetAttributes(
        4,
        attrs.as_mut_ptr(),
        data.as_mut_ptr(),
        bp
    ));
    assert_eq!((ty, ord, dp), (1, 0, 0));

    ok!(cuMemHostUnregister(buf.as_mut_ptr().cast()));
    ok!(cuMemFreeHost(h));
    ok!(cuMemFree_v2(d));
    ok!(cuMemFree_v2(d2));
    // A freed allocation is unknown memory again.
    let (r, _) = attr::<u32>(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d);
    check(r, CUresult::CUDA_ERROR_INVALID_VALUE, "a freed allocation");
    assert_eq!(free_memory(), base);
}

#[test]
fn device_context_and_stream_identity() {
    let Some(drv) = setup("device_context_and_stream_identity") else {
        return;
    };
    let (mut major, mut minor) = (0, 0);
    ok!(cuDeviceComputeCapability(&mut major, &mut minor, 0));
    let mut attr_major = 0;
    ok!(cuDeviceGetAttribute(
        &mut attr_major,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        0
    ));
    assert_eq!((major, minor), (attr_major, 0));
    expect!(
        CUDA_ERROR_INVALID_DEVICE,
        cuDeviceComputeCapability(&mut major, &mut minor, 9)
    );
    let mut bus = [0 as c_char; 32];
    ok!(cuDeviceGetPCIBusId(bus.as_mut_ptr(), 32, 0));
    // SAFETY: NUL-terminated by the driver.
    let id = unsafe { CStr::from_ptr(bus.as_ptr()) };
    assert_eq!(id, c"0000:00:00.0");
    let mut dev = -1;
    ok!(cuDeviceGetByPCIBusId(&mut dev, id.as_ptr()));
    assert_eq!(dev, 0);
    ok!(cuDeviceGetByPCIBusId(&mut dev, c"00:00.0".as_ptr()));
    assert_eq!(dev, 0);
    expect!(
        CUDA_ERROR_INVALID_DEVICE,
        cuDeviceGetByPCIBusId(&mut dev, c"0000:3f:00.0".as_ptr())
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuDeviceGetByPCIBusId(&mut dev, c"bogus".as_ptr())
    );
    // Truncated to `len`, NUL-terminated.
    ok!(cuDeviceGetPCIBusId(bus.as_mut_ptr(), 5, 0));
    // SAFETY: NUL-terminated by the driver.
    assert_eq!(unsafe { CStr::from_ptr(bus.as_ptr()) }, c"0000");
    let mut mode = sys::CUmoduleLoadingMode::CU_MODULE_LAZY_LOADING;
    ok!(cuModuleGetLoadingMode(&mut mode));
    assert_eq!(mode, sys::CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING);

    // Context and stream ids: distinct, stable.
    let (mut a, mut b, mut c) = (0u64, 0u64, 0u64);
    ok!(cuCtxGetId(drv.primary, &mut a));
    ok!(cuCtxGetId(null_mut(), &mut b));
    assert_eq!(a, b, "NULL is the current context");
    let other = created_context();
    ok!(cuCtxGetId(other, &mut c));
    assert_ne!(a, c);
    ok!(cuCtxDestroy_v2(other));
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetId(other, &mut c));
    ok!(cuCtxSetCurrent(drv.primary));
    let (s1, s2) = (stream(), stream());
    let (mut i1, mut i2, mut i0) = (0u64, 0u64, 0u64);
    ok!(cuStreamGetId(s1, &mut i1));
    ok!(cuStreamGetId(s2, &mut i2));
    ok!(cuStreamGetId(null_mut(), &mut i0));
    assert!(i1 != i2 && i0 != i1 && i0 != i2);
    ok!(cuStreamGetId(s1, &mut i0));
    assert_eq!(i0, i1, "a stream's id is stable");
    ok!(cuStreamDestroy_v2(s1));
    ok!(cuStreamDestroy_v2(s2));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuStreamGetId(s1, &mut i0));
}

/// What the stream callback saw: (stream, status, user data) per call.
static CALLS: Mutex<Vec<(usize, u32, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn record(s: CUstream, status: CUresult, user: *mut c_void) {
    CALLS.lock().unwrap_or_else(PoisonError::into_inner).push((
        s as usize,
        status as u32,
        user as usize,
    ));
}

#[test]
fn stream_callbacks() {
    let Some(_drv) = setup("stream_callbacks") else {
        return;
    };
    CALLS.lock().unwrap_or_else(PoisonError::into_inner).clear();
    let s = stream();
    let d = alloc(64);
    ok!(cuMemsetD32Async(d, 0x1234_5678, 16, s));
    ok!(cuStreamAddCallback(s, Some(record), 0x55 as *mut c_void, 0));
    ok!(cuStreamAddCallback(
        null_mut(),
        Some(record),
        0x66 as *mut c_void,
        0
    ));
    ok!(cuStreamSynchronize(s));
    ok!(cuCtxSynchronize());
    let calls = CALLS.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(calls, [(s as usize, 0, 0x55), (0, 0, 0x66)]);
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuStreamAddCallback(s, Some(record), null_mut(), 1)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuStreamAddCallback(s, None, null_mut(), 0)
    );
    ok!(cuMemFree_v2(d));
    ok!(cuStreamDestroy_v2(s));
}
