//! cuInit and the device count: calls before `cuInit`, bad configuration (child processes).

use super::*;

#[test]
fn calls_before_cuinit_are_not_initialized() {
    const NAME: &str = "init::calls_before_cuinit_are_not_initialized";
    if !lib_available(NAME) || !in_child(NAME, &[]) {
        return;
    }
    // Allowed before cuInit.
    let mut v = 0;
    ok!(cuDriverGetVersion(&mut v));
    assert!(v >= 12000);
    let mut name = null();
    ok!(cuGetErrorName(
        CUresult::CUDA_ERROR_NOT_INITIALIZED,
        &mut name
    ));
    // Everything else.
    let (mut n, mut d, mut ctx, mut p, mut s, mut m) =
        (0, 0, null_mut(), 0, null_mut(), null_mut());
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&mut n));
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGet(&mut d, 0));
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuCtxGetCurrent(&mut ctx));
    expect!(
        CUDA_ERROR_NOT_INITIALIZED,
        cuDevicePrimaryCtxRetain(&mut ctx, 0)
    );
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuCtxCreate_v2(&mut ctx, 0, 0));
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuMemAlloc_v2(&mut p, 16));
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuStreamCreate(&mut s, 0));
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuCtxSynchronize());
    let ptx = CString::new(PTX).unwrap();
    expect!(
        CUDA_ERROR_NOT_INITIALIZED,
        cuModuleLoadData(&mut m, ptx.as_ptr().cast())
    );
    // cuInit's flags must be 0; a refused cuInit initialises nothing.
    expect!(CUDA_ERROR_INVALID_VALUE, cuInit(1));
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&mut n));
    ok!(cuInit(0));
    ok!(cuDeviceGetCount(&mut n));
    assert_eq!(n, 1, "one device by default");
    ok!(cuInit(0));
    expect!(CUDA_ERROR_INVALID_VALUE, cuInit(1));
    expect!(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&mut d, 1));
    expect!(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&mut d, -1));
}

#[test]
fn zero_devices_is_no_device() {
    const NAME: &str = "init::zero_devices_is_no_device";
    if !lib_available(NAME) || !in_child(NAME, &[("STREAMEXEC_CUDA_DEVICES", "0")]) {
        return;
    }
    expect!(CUDA_ERROR_NO_DEVICE, cuInit(0));
    let mut n = -1;
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&mut n));
    assert_eq!(n, -1, "nothing written on failure");
    expect!(CUDA_ERROR_NO_DEVICE, cuInit(0));
}

#[test]
fn a_malformed_device_count_is_invalid_value() {
    const NAME: &str = "init::a_malformed_device_count_is_invalid_value";
    if !lib_available(NAME) || !in_child(NAME, &[("STREAMEXEC_CUDA_DEVICES", "abc")]) {
        return;
    }
    expect!(CUDA_ERROR_INVALID_VALUE, cuInit(0));
    let mut n = 0;
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&mut n));
}

// ---------------------------------------------------------------------------------------------
// Contexts.
