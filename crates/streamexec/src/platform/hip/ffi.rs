//! The HIP entry points streamexec calls, declared with a plain integer status.
//!
//! hip-runtime-sys declares them returning `hipError_t`, a Rust enum: a status code the
//! installed runtime has and the bindings lack would be an invalid enum value, which is
//! undefined behaviour. These declarations take the same symbols with `HipStatus` (an `i32`),
//! and use the bindings for handle types, constants and `hipDeviceProp_t` (whose layout a test
//! checks against the installed header). hip-runtime-sys also links libamdhip64.

use std::ffi::{c_char, c_int, c_uint, c_void};

use hip_runtime_sys::{hipDeviceProp_t, hipEvent_t, hipFunction_t, hipModule_t, hipStream_t};

/// `hipStreamCallback_t` with an integer status.
pub(crate) type StreamCallback = extern "C" fn(hipStream_t, HipStatus, *mut c_void);

/// A HIP status code (`hipSuccess` = 0).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HipStatus(pub c_int);

impl HipStatus {
    pub(crate) const SUCCESS: HipStatus = HipStatus(0);
    pub(crate) const NOT_READY: HipStatus = HipStatus(600);
    pub(crate) const NO_DEVICE: HipStatus = HipStatus(100);
    pub(crate) const PEER_ACCESS_ALREADY_ENABLED: HipStatus = HipStatus(704);
    /// `hipErrorNotFound`: e.g. no global of that name in a module.
    pub(crate) const NOT_FOUND: HipStatus = HipStatus(500);
}

unsafe extern "C" {
    pub(crate) fn hipGetDeviceCount(count: *mut c_int) -> HipStatus;
    pub(crate) fn hipSetDevice(device: c_int) -> HipStatus;
    pub(crate) fn hipGetErrorName(e: HipStatus) -> *const c_char;
    pub(crate) fn hipGetErrorString(e: HipStatus) -> *const c_char;
    pub(crate) fn hipRuntimeGetVersion(v: *mut c_int) -> HipStatus;
    pub(crate) fn hipDriverGetVersion(v: *mut c_int) -> HipStatus;
    pub(crate) fn hipGetDeviceProperties(p: *mut hipDeviceProp_t, device: c_int) -> HipStatus;
    pub(crate) fn hipDeviceSynchronize() -> HipStatus;
    pub(crate) fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> HipStatus;
    pub(crate) fn hipMalloc(p: *mut *mut c_void, size: usize) -> HipStatus;
    pub(crate) fn hipFree(p: *mut c_void) -> HipStatus;
    pub(crate) fn hipHostMalloc(p: *mut *mut c_void, size: usize, flags: c_uint) -> HipStatus;
    pub(crate) fn hipHostFree(p: *mut c_void) -> HipStatus;
    pub(crate) fn hipHostGetDevicePointer(
        d: *mut *mut c_void,
        h: *mut c_void,
        flags: c_uint,
    ) -> HipStatus;
    pub(crate) fn hipStreamCreateWithFlags(s: *mut hipStream_t, flags: c_uint) -> HipStatus;
    pub(crate) fn hipStreamDestroy(s: hipStream_t) -> HipStatus;
    pub(crate) fn hipStreamSynchronize(s: hipStream_t) -> HipStatus;
    /// `hipLaunchHostFunc` is missing from HIP 5.2; the stream callback does the same.
    pub(crate) fn hipStreamAddCallback(
        s: hipStream_t,
        f: StreamCallback,
        user: *mut c_void,
        flags: c_uint,
    ) -> HipStatus;
    pub(crate) fn hipStreamWaitEvent(s: hipStream_t, e: hipEvent_t, flags: c_uint) -> HipStatus;
    pub(crate) fn hipMemcpyHtoDAsync(
        dst: *mut c_void,
        src: *mut c_void,
        n: usize,
        s: hipStream_t,
    ) -> HipStatus;
    pub(crate) fn hipMemcpyDtoHAsync(
        dst: *mut c_void,
        src: *mut c_void,
        n: usize,
        s: hipStream_t,
    ) -> HipStatus;
    pub(crate) fn hipMemcpyDtoDAsync(
        dst: *mut c_void,
        src: *mut c_void,
        n: usize,
        s: hipStream_t,
    ) -> HipStatus;
    pub(crate) fn hipMemsetD8Async(dst: *mut c_void, v: u8, n: usize, s: hipStream_t) -> HipStatus;
    pub(crate) fn hipMemsetD32Async(
        dst: *mut c_void,
        v: c_int,
        n: usize,
        s: hipStream_t,
    ) -> HipStatus;
    pub(crate) fn hipDeviceCanAccessPeer(can: *mut c_int, dev: c_int, peer: c_int) -> HipStatus;
    pub(crate) fn hipDeviceEnablePeerAccess(peer: c_int, flags: c_uint) -> HipStatus;
    pub(crate) fn hipMemcpyPeerAsync(
        dst: *mut c_void,
        dst_dev: c_int,
        src: *mut c_void,
        src_dev: c_int,
        n: usize,
        s: hipStream_t,
    ) -> HipStatus;
    pub(crate) fn hipMemcpyHtoD(dst: *mut c_void, src: *mut c_void, n: usize) -> HipStatus;
    pub(crate) fn hipMemcpyDtoH(dst: *mut c_void, src: *mut c_void, n: usize) -> HipStatus;
    pub(crate) fn hipMemsetD8(dst: *mut c_void, v: u8, n: usize) -> HipStatus;
    pub(crate) fn hipEventCreateWithFlags(e: *mut hipEvent_t, flags: c_uint) -> HipStatus;
    pub(crate) fn hipEventDestroy(e: hipEvent_t) -> HipStatus;
    pub(crate) fn hipEventRecord(e: hipEvent_t, s: hipStream_t) -> HipStatus;
    pub(crate) fn hipEventQuery(e: hipEvent_t) -> HipStatus;
    pub(crate) fn hipEventSynchronize(e: hipEvent_t) -> HipStatus;
    pub(crate) fn hipEventElapsedTime(ms: *mut f32, a: hipEvent_t, b: hipEvent_t) -> HipStatus;
    pub(crate) fn hipModuleLoadData(m: *mut hipModule_t, image: *const c_void) -> HipStatus;
    pub(crate) fn hipModuleUnload(m: hipModule_t) -> HipStatus;
    pub(crate) fn hipModuleGetFunction(
        f: *mut hipFunction_t,
        m: hipModule_t,
        name: *const c_char,
    ) -> HipStatus;
    pub(crate) fn hipModuleGetGlobal(
        d: *mut *mut c_void,
        bytes: *mut usize,
        m: hipModule_t,
        name: *const c_char,
    ) -> HipStatus;
    pub(crate) fn hipModuleLaunchKernel(
        f: hipFunction_t,
        gx: c_uint,
        gy: c_uint,
        gz: c_uint,
        bx: c_uint,
        by: c_uint,
        bz: c_uint,
        shared: c_uint,
        s: hipStream_t,
        params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> HipStatus;
}
