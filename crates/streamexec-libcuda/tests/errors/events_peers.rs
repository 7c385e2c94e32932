//! Event timing errors, peer access, and the names of every code.

use super::*;

#[test]
fn event_timing_errors() {
    let Some(_drv) = setup("event_timing_errors") else {
        return;
    };
    const DISABLE_TIMING: c_uint = 0x2;
    let s = stream();
    let (mut a, mut b, mut quiet) = (null_mut(), null_mut(), null_mut());
    ok!(cuEventCreate(&mut a, 0));
    ok!(cuEventCreate(&mut b, 0));
    ok!(cuEventCreate(&mut quiet, DISABLE_TIMING));
    let mut ms = -1.0f32;
    // Never recorded: queries succeed, timing is INVALID_HANDLE.
    ok!(cuEventQuery(a));
    ok!(cuEventSynchronize(a));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&mut ms, a, b));
    ok!(cuEventRecord(a, s));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&mut ms, a, b));
    expect!(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&mut ms, b, a));
    // A CU_EVENT_DISABLE_TIMING event, recorded, still cannot be timed.
    ok!(cuEventRecord(quiet, s));
    ok!(cuEventSynchronize(quiet));
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuEventElapsedTime(&mut ms, a, quiet)
    );
    expect!(
        CUDA_ERROR_INVALID_HANDLE,
        cuEventElapsedTime(&mut ms, quiet, a)
    );
    assert_eq!(ms, -1.0, "nothing written on failure");
    // Bad flags.
    let mut e = null_mut();
    expect!(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&mut e, 0x80));
    expect!(CUDA_ERROR_INVALID_VALUE, cuEventRecordWithFlags(a, s, 0x80));
    // Timing works once both are recorded.
    ok!(cuEventRecord(b, s));
    ok!(cuEventSynchronize(b));
    ok!(cuEventElapsedTime(&mut ms, a, b));
    assert!(ms >= 0.0, "{ms}");
    ok!(cuEventQuery(quiet));
    for e in [a, b, quiet] {
        ok!(cuEventDestroy_v2(e));
    }
    ok!(cuStreamDestroy_v2(s));
}

// ---------------------------------------------------------------------------------------------
// Peer access (two devices, child process).

#[test]
fn peer_access_errors_and_an_exact_peer_copy() {
    const NAME: &str = "events_peers::peer_access_errors_and_an_exact_peer_copy";
    if !lib_available(NAME) || !in_child(NAME, &[("STREAMEXEC_CUDA_DEVICES", "2")]) {
        return;
    }
    ok!(cuInit(0));
    let mut n = 0;
    ok!(cuDeviceGetCount(&mut n));
    assert_eq!(n, 2);
    let mut d = 0;
    expect!(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&mut d, 2));
    let mut can: c_int = -1;
    ok!(cuDeviceCanAccessPeer(&mut can, 0, 1));
    assert_eq!(can, 1);
    ok!(cuDeviceCanAccessPeer(&mut can, 1, 0));
    assert_eq!(can, 1);
    ok!(cuDeviceCanAccessPeer(&mut can, 0, 0));
    assert_eq!(can, 0, "a device is not its own peer");
    expect!(
        CUDA_ERROR_INVALID_DEVICE,
        cuDeviceCanAccessPeer(&mut can, 0, 2)
    );
    let (mut c0, mut c1) = (null_mut(), null_mut());
    ok!(cuDevicePrimaryCtxRetain(&mut c0, 0));
    ok!(cuDevicePrimaryCtxRetain(&mut c1, 1));
    ok!(cuCtxSetCurrent(c1));
    let base1 = free_memory();
    ok!(cuCtxSetCurrent(c0));
    let base0 = free_memory();
    expect!(
        CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        cuCtxDisablePeerAccess(c1)
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuCtxEnablePeerAccess(c1, 1));
    ok!(cuCtxEnablePeerAccess(c1, 0));
    expect!(
        CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        cuCtxEnablePeerAccess(c1, 0)
    );
    // The same device: its primary context itself, or another context of it.
    expect!(CUDA_ERROR_INVALID_DEVICE, cuCtxEnablePeerAccess(c0, 0));
    let other0 = created_context(); // pushed: current now
    expect!(CUDA_ERROR_INVALID_DEVICE, cuCtxEnablePeerAccess(c0, 0));
    ok!(cuCtxDestroy_v2(other0));
    expect!(CUDA_ERROR_INVALID_CONTEXT, cuCtxEnablePeerAccess(other0, 0));
    // A peer copy between the two devices' memory is exact (sync and async).
    let mut r = rng(NAME);
    let len = r.random_range(1..5000usize);
    let data = random_u32s(&mut r, len, u32::MAX);
    let a0 = alloc(len * 4);
    upload(a0, &data);
    ok!(cuCtxSetCurrent(c1));
    let a1 = alloc(len * 4);
    let b1 = alloc(len * 4);
    ok!(cuMemsetD32_v2(a1, POISON_U32, len));
    ok!(cuMemcpyPeer(a1, c1, a0, c0, len * 4));
    assert_eq!(download(a1, len), data, "cuMemcpyPeer 0 -> 1");
    let s = stream();
    ok!(cuMemsetD32_v2(b1, POISON_U32, len));
    ok!(cuMemcpyPeerAsync(b1, c1, a1, c1, len * 4, s));
    ok!(cuStreamSynchronize(s));
    ok!(cuCtxSetCurrent(c0));
    ok!(cuMemsetD32_v2(a0, POISON_U32, len));
    ok!(cuMemcpyPeer(a0, c0, b1, c1, len * 4));
    assert_eq!(download(a0, len), data, "cuMemcpyPeer 1 -> 0");
    // Past the end of the peer's allocation.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyPeer(a0, c0, b1, c1, len * 4 + 4)
    );
    ok!(cuCtxDisablePeerAccess(c1));
    expect!(
        CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        cuCtxDisablePeerAccess(c1)
    );
    ok!(cuMemFree_v2(a0));
    assert_eq!(free_memory(), base0);
    ok!(cuCtxSetCurrent(c1));
    ok!(cuStreamDestroy_v2(s));
    ok!(cuMemFree_v2(a1));
    ok!(cuMemFree_v2(b1));
    assert_eq!(free_memory(), base1);
}

// ---------------------------------------------------------------------------------------------
// Error names and strings.

/// `cuGetErrorName`/`cuGetErrorString` taking the code as a plain integer, so a code outside
/// `CUresult` can be passed.
type ErrorText = unsafe extern "C" fn(u32, *mut *const c_char) -> CUresult;

fn error_text_fn(name: &[u8]) -> ErrorText {
    // SAFETY: called after `lib_available`; the symbols have this ABI (CUresult is a u32).
    unsafe { *sys::culib().get::<ErrorText>(name).expect("exported") }
}

#[test]
fn every_code_seen_has_a_name_and_a_string() {
    let Some(_drv) = setup("every_code_seen_has_a_name_and_a_string") else {
        return;
    };
    let get_name = error_text_fn(b"cuGetErrorName\0");
    let get_string = error_text_fn(b"cuGetErrorString\0");
    for &code in CODES_SEEN {
        let (mut name, mut text) = (null(), null());
        // SAFETY: valid out-pointers.
        let (a, b) = unsafe {
            (
                get_name(code as u32, &mut name),
                get_string(code as u32, &mut text),
            )
        };
        check(
            a,
            CUresult::CUDA_SUCCESS,
            &format!("cuGetErrorName({code:?})"),
        );
        check(
            b,
            CUresult::CUDA_SUCCESS,
            &format!("cuGetErrorString({code:?})"),
        );
        assert!(!name.is_null() && !text.is_null(), "{code:?}");
        // SAFETY: the driver returns static NUL-terminated strings.
        let (name, text) = unsafe { (CStr::from_ptr(name), CStr::from_ptr(text)) };
        assert_eq!(name.to_str().unwrap(), format!("{code:?}"));
        assert!(
            !text.to_bytes().is_empty(),
            "{code:?} has an empty description"
        );
    }
    // Through cudarc's typed signatures as well.
    let mut name = null();
    ok!(cuGetErrorName(
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        &mut name
    ));
    // SAFETY: a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(name) };
    assert_eq!(name, c"CUDA_ERROR_ILLEGAL_ADDRESS");
    // Unknown codes: INVALID_VALUE, and *pStr is set to NULL.
    for unknown in [12345u32, 0xffff_ffff, 1000] {
        let (mut name, mut text) = (c"x".as_ptr(), c"x".as_ptr());
        // SAFETY: valid out-pointers.
        let (a, b) = unsafe { (get_name(unknown, &mut name), get_string(unknown, &mut text)) };
        check(
            a,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            &format!("cuGetErrorName({unknown})"),
        );
        check(
            b,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            &format!("cuGetErrorString({unknown})"),
        );
        assert!(
            name.is_null() && text.is_null(),
            "{unknown}: *pStr must be NULL"
        );
    }
    // A NULL out-pointer.
    // SAFETY: NULL is what is being tested; the driver checks it.
    let r = unsafe { get_name(0, null_mut()) };
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_VALUE,
        "cuGetErrorName(0, NULL)",
    );
}
