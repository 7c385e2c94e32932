//! The CPU libcuda (libcuda/) on bad input: every error situation returns the code the CUDA
//! driver API documentation gives, and afterwards nothing is lost (memory from
//! `cuMemGetInfo_v2` is back to its baseline once the test's allocations are freed) and the
//! context and stream still run a correct operation, except where an error is sticky by design
//! (a kernel fault).
//!
//! The library is called through cudarc's `driver::sys` (dynamic loading: build it with
//! `scripts/build-libcuda.sh` and run with `LD_LIBRARY_PATH=$PWD/target/libcuda`). Without it
//! the tests skip with a note, or fail when `STREAMEXEC_REQUIRE` names `cuda`. A libcuda that
//! is not streamexec's (NVIDIA's driver, found first) is skipped: these tests pin down the CPU
//! driver's messages and extra exports.
//!
//! The tests of one process share the driver, device 0's memory count and the last fault
//! report, so they run one at a time ([`SERIAL`]). Situations that need a fresh process (calls
//! before `cuInit`, `STREAMEXEC_CUDA_DEVICES`) re-run this test binary as a child
//! ([`in_child`]).
#![cfg(feature = "cuda")]

mod common;

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::process::Command;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use cudarc::driver::sys::{
    self, CUcontext, CUdeviceptr, CUevent, CUfunction, CUfunction_attribute, CUjit_option,
    CUmodule, CUresult, CUstream,
};
use rand::RngExt;

use common::{POISON_U32, random_u32s, required_platforms, rng};

// ---------------------------------------------------------------------------------------------
// Calling the driver.

/// Calls `sys::$f`.
macro_rules! cu {
    ($f:ident($($a:expr),* $(,)?)) => {{
        // SAFETY: every pointer the tests pass is valid for what the call does with it, or
        // deliberately NULL or a stale/forged handle, which the driver API turns into an error
        // code without dereferencing it.
        unsafe { sys::$f($($a),*) }
    }};
}

/// Calls `sys::$f` and asserts it returned `CUresult::$want`.
macro_rules! expect {
    ($want:ident, $f:ident($($a:expr),* $(,)?)) => {{
        let got = cu!($f($($a),*));
        check(got, CUresult::$want, stringify!($f($($a),*)));
    }};
}

/// Calls `sys::$f` and asserts it succeeded.
macro_rules! ok {
    ($f:ident($($a:expr),* $(,)?)) => {
        expect!(CUDA_SUCCESS, $f($($a),*))
    };
}

/// Every code these tests expect; `cuGetErrorName`/`cuGetErrorString` must know each
/// ([`check`] refuses a code missing here).
const CODES_SEEN: &[CUresult] = &[
    CUresult::CUDA_SUCCESS,
    CUresult::CUDA_ERROR_INVALID_VALUE,
    CUresult::CUDA_ERROR_NOT_INITIALIZED,
    CUresult::CUDA_ERROR_NO_DEVICE,
    CUresult::CUDA_ERROR_INVALID_DEVICE,
    CUresult::CUDA_ERROR_INVALID_IMAGE,
    CUresult::CUDA_ERROR_INVALID_CONTEXT,
    CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
    CUresult::CUDA_ERROR_INVALID_PTX,
    CUresult::CUDA_ERROR_INVALID_HANDLE,
    CUresult::CUDA_ERROR_NOT_FOUND,
    CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
    CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
    CUresult::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
    CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
    CUresult::CUDA_ERROR_NOT_PERMITTED,
    CUresult::CUDA_ERROR_NOT_SUPPORTED,
];

#[track_caller]
fn check(got: CUresult, want: CUresult, what: &str) {
    assert!(
        CODES_SEEN.contains(&want),
        "add {want:?} to CODES_SEEN (cuGetErrorName is checked for each)"
    );
    if got != want {
        let detail = match got {
            CUresult::CUDA_SUCCESS => String::new(),
            _ => format!(" ({})", last_error_detail()),
        };
        panic!("{what}: got {got:?}, want {want:?}{detail}");
    }
}

/// `unsafe extern "C" fn(buf, size) -> full length`: the library's extra text exports.
type TextExport = unsafe extern "C" fn(*mut c_char, usize) -> usize;

/// Extra export `name` (NUL-terminated) of the loaded libcuda, if it has it.
fn text_export(name: &[u8]) -> Option<TextExport> {
    // SAFETY: only called once the library loaded (`culib` panics otherwise); the symbol, where
    // it exists, has this signature (libcuda/src/entry.rs).
    unsafe { sys::culib().get::<TextExport>(name).ok().map(|s| *s) }
}

fn read_text(f: TextExport) -> String {
    // SAFETY: NULL with size 0 asks for the length only.
    let n = unsafe { f(null_mut(), 0) };
    let mut buf = vec![0u8; n + 1];
    // SAFETY: `buf` has `buf.len()` bytes.
    let m = unsafe { f(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(m, n, "the text changed between two reads");
    buf.truncate(n);
    String::from_utf8_lossy(&buf).into_owned()
}

/// What went wrong in this thread's last failed call (`streamexec_cuda_last_error_detail`).
fn last_error_detail() -> String {
    text_export(b"streamexec_cuda_last_error_detail\0").map_or_else(String::new, read_text)
}

/// The engine's report of the last kernel fault (`streamexec_cuda_last_fault`).
fn last_fault() -> String {
    read_text(text_export(b"streamexec_cuda_last_fault\0").expect("checked by lib_available"))
}

/// True when streamexec's libcuda can be loaded; else fails (`STREAMEXEC_REQUIRE` names
/// `cuda`) or prints why the test is skipped.
fn lib_available(test: &str) -> bool {
    // SAFETY: dlopen of libcuda by its usual names; nothing is called.
    let present = unsafe { sys::is_culib_present() };
    if !present {
        assert!(
            !required_platforms().iter().any(|p| p == "cuda"),
            "{test}: STREAMEXEC_REQUIRE names cuda, but libcuda cannot be loaded: build it with \
             `bash scripts/build-libcuda.sh` and run with LD_LIBRARY_PATH=$PWD/target/libcuda"
        );
        eprintln!("{test}: skipped, libcuda cannot be loaded (LD_LIBRARY_PATH=target/libcuda)");
        return false;
    }
    if text_export(b"streamexec_cuda_last_fault\0").is_none() {
        eprintln!(
            "{test}: skipped, the libcuda found first is not streamexec's CPU driver (put \
             target/libcuda first on LD_LIBRARY_PATH)"
        );
        return false;
    }
    true
}

/// Set in a child process (to the name of the test it runs): that test does its checks.
const CHILD_VAR: &str = "LIBCUDA_ERRORS_CHILD";

/// In the parent: runs test `test` again in a child process of this binary with `env` set,
/// and asserts the child passed; returns false. In that child: returns true (run the checks).
fn in_child(test: &str, env: &[(&str, &str)]) -> bool {
    if std::env::var(CHILD_VAR).as_deref() == Ok(test) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, test)
        .env_remove("STREAMEXEC_CUDA_DEVICES")
        .envs(env.iter().copied())
        .output()
        .expect("running the test binary as a child");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "child `{test}` {env:?} failed:\n{text}"
    );
    assert!(
        text.contains("1 passed"),
        "child `{test}` ran no test:\n{text}"
    );
    false
}

/// One test at a time per process (shared driver, device memory count, fault report).
static SERIAL: Mutex<()> = Mutex::new(());

/// Device 0's primary context, retained once for the whole process.
static PRIMARY: OnceLock<usize> = OnceLock::new();

/// A test's hold on the driver: serialised, initialised, device 0's primary context current.
struct Driver {
    _serial: MutexGuard<'static, ()>,
    primary: CUcontext,
}

/// The driver for test `test`, or `None` when it is skipped.
fn setup(test: &str) -> Option<Driver> {
    if !lib_available(test) {
        return None;
    }
    let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    ok!(cuInit(0));
    let primary = *PRIMARY.get_or_init(|| {
        let mut ctx = null_mut();
        ok!(cuDevicePrimaryCtxRetain(&mut ctx, 0));
        ctx as usize
    }) as CUcontext;
    ok!(cuCtxSetCurrent(primary));
    Some(Driver {
        _serial: serial,
        primary,
    })
}

/// Free device memory (`cuMemGetInfo_v2`) as the current context sees it.
fn free_memory() -> usize {
    let (mut free, mut total) = (0, 0);
    ok!(cuMemGetInfo_v2(&mut free, &mut total));
    assert!(free <= total);
    free
}

fn alloc(bytes: usize) -> CUdeviceptr {
    let mut p = 0;
    ok!(cuMemAlloc_v2(&mut p, bytes));
    assert_ne!(p, 0);
    p
}

fn upload(dst: CUdeviceptr, data: &[u32]) {
    ok!(cuMemcpyHtoD_v2(
        dst,
        data.as_ptr().cast(),
        size_of_val(data)
    ));
}

fn download(src: CUdeviceptr, n: usize) -> Vec<u32> {
    let mut v = vec![POISON_U32; n];
    ok!(cuMemcpyDtoH_v2(v.as_mut_ptr().cast(), src, n * 4));
    v
}

fn load(ptx: &str) -> CUmodule {
    let text = CString::new(ptx).expect("no NUL in PTX");
    let mut m = null_mut();
    ok!(cuModuleLoadData(&mut m, text.as_ptr().cast()));
    m
}

fn function(m: CUmodule, name: &CStr) -> CUfunction {
    let mut f = null_mut();
    ok!(cuModuleGetFunction(&mut f, m, name.as_ptr()));
    f
}

fn stream() -> CUstream {
    let mut s = null_mut();
    ok!(cuStreamCreate(&mut s, 0));
    s
}

fn created_context() -> CUcontext {
    let mut c = null_mut();
    ok!(cuCtxCreate_v2(&mut c, 0, 0));
    c
}

/// The 1-based line of `ptx` that contains `needle` (once).
fn line_of(ptx: &str, needle: &str) -> usize {
    let lines: Vec<usize> = (1..)
        .zip(ptx.lines())
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(lines.len(), 1, "`{needle}` must be on exactly one line");
    lines[0]
}

// ---------------------------------------------------------------------------------------------
// Kernels (hand-written PTX the engine runs).

/// `add_k(out, in, k, n)`: `out[i] = in[i] + k` for `i < n`; `read_client(out)`: copies the 24
/// bytes of `__llvm_rpc_client` to `out`; `smem_echo(out)`: `out[t] = 2 t` through dynamic
/// shared memory; `oob_store(out)`: stores 1 TiB past `out`; `noargs()`.
const PTX: &str = r#".version 7.0
.target sm_70
.address_size 64

.visible .global .align 8 .b8 __llvm_rpc_client[24];
.extern .shared .align 4 .b8 dyn_smem[];

.visible .entry add_k(.param .u64 pout, .param .u64 pin, .param .u32 pk, .param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [pout];
    ld.param.u64 %rd2, [pin];
    ld.param.u32 %r1, [pk];
    ld.param.u32 %r2, [pn];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r6, %r3, %r4, %r5;
    setp.ge.u32 %p1, %r6, %r2;
    @%p1 bra DONE;
    mul.wide.u32 %rd3, %r6, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r7, [%rd4];
    add.u32 %r7, %r7, %r1;
    add.s64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r7;
DONE:
    ret;
}

.visible .entry read_client(.param .u64 pout)
{
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    mov.u64 %rd2, __llvm_rpc_client;
    ld.global.u64 %rd3, [%rd2];
    st.global.u64 [%rd1], %rd3;
    ld.global.u64 %rd3, [%rd2+8];
    st.global.u64 [%rd1+8], %rd3;
    ld.global.u64 %rd3, [%rd2+16];
    st.global.u64 [%rd1+16], %rd3;
    ret;
}

.visible .entry smem_echo(.param .u64 pout)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 1;
    mov.u64 %rd2, dyn_smem;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.shared.u32 [%rd4], %r2;
    bar.sync 0;
    ld.shared.u32 %r3, [%rd4];
    add.s64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r3;
    ret;
}

.visible .entry oob_store(.param .u64 pout)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    add.s64 %rd2, %rd1, 1099511627776;
    mov.u32 %r1, 7;
    st.global.u32 [%rd2], %r1; // the faulting store
    ret;
}

.visible .entry noargs()
{
    ret;
}
"#;

/// Launches `add_k` (`out[i] = in[i] + k`, `i < n`) with `kernelParams`.
fn launch_add(f: CUfunction, s: CUstream, out: CUdeviceptr, input: CUdeviceptr, k: u32, n: u32) {
    let (mut o, mut i, mut k, mut n) = (out, input, k, n);
    let mut params = [
        (&raw mut o).cast::<c_void>(),
        (&raw mut i).cast(),
        (&raw mut k).cast(),
        (&raw mut n).cast(),
    ];
    ok!(cuLaunchKernel(
        f,
        n.div_ceil(64),
        1,
        1,
        64,
        1,
        1,
        0,
        s,
        params.as_mut_ptr(),
        null_mut()
    ));
}

/// A correct `add_k` round trip on `s` with random input and a poisoned output: the context
/// and stream still work.
fn add_works(f: CUfunction, s: CUstream, what: &str) {
    let mut r = rng(what);
    let n = r.random_range(1..300usize);
    let k = r.random::<u32>();
    let input = random_u32s(&mut r, n, u32::MAX);
    let (din, dout) = (alloc(n * 4), alloc(n * 4));
    upload(din, &input);
    ok!(cuMemsetD32_v2(dout, POISON_U32, n));
    launch_add(f, s, dout, din, k, n as u32);
    ok!(cuStreamSynchronize(s));
    let want: Vec<u32> = input.iter().map(|x| x.wrapping_add(k)).collect();
    assert_eq!(download(dout, n), want, "{what}: add_k after the error");
    ok!(cuMemFree_v2(din));
    ok!(cuMemFree_v2(dout));
}

// ---------------------------------------------------------------------------------------------
// Initialisation (child processes).

#[test]
fn calls_before_cuinit_are_not_initialized() {
    const NAME: &str = "calls_before_cuinit_are_not_initialized";
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
    const NAME: &str = "zero_devices_is_no_device";
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
    const NAME: &str = "a_malformed_device_count_is_invalid_value";
    if !lib_available(NAME) || !in_child(NAME, &[("STREAMEXEC_CUDA_DEVICES", "abc")]) {
        return;
    }
    expect!(CUDA_ERROR_INVALID_VALUE, cuInit(0));
    let mut n = 0;
    expect!(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&mut n));
}

// ---------------------------------------------------------------------------------------------
// Contexts.

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

#[test]
fn bad_memory_ranges_are_invalid_value() {
    let Some(_drv) = setup("bad_memory_ranges_are_invalid_value") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("bad_memory_ranges_are_invalid_value");
    let s = stream();
    let n = 64usize; // u32 elements of each allocation
    let (p, q) = (alloc(n * 4), alloc(n * 4));
    assert_eq!(free_memory(), base - 2 * n * 4);
    let data = random_u32s(&mut r, n, u32::MAX);
    upload(q, &data);
    let host = vec![0u32; 2 * n];
    let mut back = vec![0u32; 2 * n];
    let (hp, bp) = (
        host.as_ptr().cast::<c_void>(),
        back.as_mut_ptr().cast::<c_void>(),
    );
    // Past the end of q: copies in and out, device to device, memsets (sync and async).
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(q, hp, n * 4 + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(q + 200, hp, 100));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(bp, q, n * 4 + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD_v2(p, q, n * 4 + 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD_v2(q + 4, p, n * 4));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoDAsync_v2(q, hp, n * 4 + 1, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoHAsync_v2(bp, q + 8, n * 4, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoDAsync_v2(p, q, n * 4 + 1, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemsetD8_v2(q + n as u64 * 4 - 1, 0, 2)
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD16_v2(q, 0, 2 * n + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(q, 0, n + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32Async(q + 4, 0, n, s));
    // An address range that wraps around.
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD8_v2(q, 0, usize::MAX));
    // Misaligned memsets.
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(q + 2, 0, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32Async(q + 1, 0, 4, s));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD16_v2(q + 1, 0, 4));
    // Nothing was partly written.
    ok!(cuStreamSynchronize(s));
    assert_eq!(download(q, n), data, "a refused copy or memset wrote");
    // Freed memory, double free, an offset pointer, host memory.
    ok!(cuMemFree_v2(p));
    assert_eq!(free_memory(), base - n * 4);
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(p, hp, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(bp, p, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD_v2(q, p, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoDAsync_v2(p, q, 4, s));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(p, 0, 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(p));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(q + 16));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(hp as CUdeviceptr));
    let (mut pb, mut ps) = (0, 0);
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuMemGetAddressRange_v2(&mut pb, &mut ps, p)
    );
    ok!(cuMemGetAddressRange_v2(&mut pb, &mut ps, q + 16));
    assert_eq!((pb, ps), (q, n * 4));
    assert_eq!(free_memory(), base - n * 4, "refused frees freed nothing");
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemFreeHost(host.as_ptr().cast_mut().cast())
    );
    // q is intact and the stream still works.
    assert_eq!(download(q, n), data);
    let more = random_u32s(&mut r, n, u32::MAX);
    ok!(cuMemcpyHtoDAsync_v2(q, more.as_ptr().cast(), n * 4, s));
    ok!(cuMemcpyDtoHAsync_v2(bp, q, n * 4, s));
    ok!(cuStreamSynchronize(s));
    assert_eq!(&back[..n], &more[..]);
    ok!(cuMemFree_v2(q));
    ok!(cuStreamDestroy_v2(s));
    assert_eq!(free_memory(), base);
}

#[test]
fn host_registration_errors() {
    let Some(_drv) = setup("host_registration_errors") else {
        return;
    };
    let base = free_memory();
    const DEVICEMAP: c_uint = 0x2;
    let mut r = rng("host_registration_errors");
    let mut buf = random_u32s(&mut r, 1024, u32::MAX);
    let bytes = size_of_val(&buf[..]);
    let hb = buf.as_mut_ptr().cast::<c_void>();
    let other = [0u32; 16];
    // Registered memory is not mapped for kernels on the CPU driver.
    expect!(
        CUDA_ERROR_NOT_SUPPORTED,
        cuMemHostRegister_v2(hb, bytes, DEVICEMAP)
    );
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(hb)
    );
    ok!(cuMemHostRegister_v2(hb, bytes, 0));
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(hb, bytes, 0)
    );
    // SAFETY: inside `buf`.
    let inner = unsafe { hb.byte_add(400) };
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(inner, 100, 0)
    );
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(inner)
    );
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(other.as_ptr().cast_mut().cast())
    );
    let mut flags = 99;
    ok!(cuMemHostGetFlags(&mut flags, hb));
    assert_eq!(flags, 0);
    let mut dptr = 0;
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemHostGetDevicePointer_v2(&mut dptr, hb, 0)
    );
    // Copies through the registration still work.
    let d = alloc(bytes);
    ok!(cuMemcpyHtoD_v2(d, hb, bytes));
    assert_eq!(download(d, buf.len()), buf);
    ok!(cuMemHostUnregister(hb));
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(hb)
    );
    // Registering again after unregistering works.
    ok!(cuMemHostRegister_v2(hb, bytes, 0));
    ok!(cuMemHostUnregister(hb));
    ok!(cuMemFree_v2(d));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Modules.

/// Loads `image` with `cuModuleLoadDataEx` and both JIT log buffers; returns the code, the
/// error log and the size the driver wrote back.
fn load_with_log(image: *const c_void) -> (CUresult, CUmodule, String, usize) {
    let mut log = vec![0u8; 4096];
    let mut info = vec![0u8; 4096];
    let mut options = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER,
        CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
    ];
    let mut values = [
        log.as_mut_ptr().cast::<c_void>(),
        std::ptr::without_provenance_mut(log.len()),
        info.as_mut_ptr().cast(),
        std::ptr::without_provenance_mut(info.len()),
    ];
    let mut m = null_mut();
    let r = cu!(cuModuleLoadDataEx(
        &mut m,
        image,
        4,
        options.as_mut_ptr(),
        values.as_mut_ptr()
    ));
    let text = CStr::from_bytes_until_nul(&log)
        .expect("the log is NUL-terminated")
        .to_string_lossy()
        .into_owned();
    (r, m, text, values[1] as usize)
}

#[test]
fn module_errors() {
    let Some(_drv) = setup("module_errors") else {
        return;
    };
    let base = free_memory();
    // A cubin (ELF) and fatbins (the fatbin and its wrapper's magic): no GPU code runs here.
    let mut cubin = vec![0u8; 64];
    cubin[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
    let mut fatbin = vec![0u8; 64];
    fatbin[..4].copy_from_slice(&0xBA55_ED50u32.to_le_bytes());
    let mut wrapper = vec![0u8; 64];
    wrapper[..4].copy_from_slice(&0x4662_43B1u32.to_le_bytes());
    for image in [&cubin, &fatbin, &wrapper] {
        let mut m = null_mut();
        expect!(
            CUDA_ERROR_NO_BINARY_FOR_GPU,
            cuModuleLoadData(&mut m, image.as_ptr().cast())
        );
        assert!(m.is_null());
        let (r, m, _, _) = load_with_log(image.as_ptr().cast());
        check(
            r,
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
            "cuModuleLoadDataEx(binary)",
        );
        assert!(m.is_null());
    }
    let mut m = null_mut();
    expect!(
        CUDA_ERROR_NO_BINARY_FOR_GPU,
        cuModuleLoadFatBinary(&mut m, fatbin.as_ptr().cast())
    );
    // Neither text nor a known binary.
    let junk = b"\xff\xfe\x80junk\0";
    expect!(
        CUDA_ERROR_INVALID_IMAGE,
        cuModuleLoadData(&mut m, junk.as_ptr().cast())
    );
    // Malformed PTX: the error log names the line and the instruction.
    let bad = PTX.replace(
        "    shl.b32 %r2, %r1, 1;",
        "    frobnicate.b32 %r2, %r1, 1;",
    );
    let line = line_of(&bad, "frobnicate");
    let text = CString::new(bad).unwrap();
    let (r, m, log, written) = load_with_log(text.as_ptr().cast());
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_PTX,
        "cuModuleLoadDataEx(bad PTX)",
    );
    assert!(m.is_null());
    assert!(
        log.contains(&format!("line {line}")) && log.contains("frobnicate"),
        "the JIT error log must name PTX line {line} and the instruction: {log:?}"
    );
    assert_eq!(
        written,
        log.len() + 1,
        "the size option holds the bytes written"
    );
    // A syntax error too.
    let broken = PTX.replace("    ld.param.u32 %r2, [pn];", "    ld.param.u32 %r2, [pn;");
    let line = line_of(&broken, "[pn;");
    let text = CString::new(broken).unwrap();
    let (r, _, log, _) = load_with_log(text.as_ptr().cast());
    check(
        r,
        CUresult::CUDA_ERROR_INVALID_PTX,
        "cuModuleLoadDataEx(syntax error)",
    );
    assert!(
        log.contains(&format!("line {line}")),
        "the JIT error log must name PTX line {line}: {log:?}"
    );
    // A good module: its log is empty; unknown names are NOT_FOUND.
    let good = CString::new(PTX).unwrap();
    let (r, m, log, _) = load_with_log(good.as_ptr().cast());
    check(r, CUresult::CUDA_SUCCESS, "cuModuleLoadDataEx(good PTX)");
    assert!(log.is_empty(), "{log}");
    let mut f = null_mut();
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuModuleGetFunction(&mut f, m, c"no_such_kernel".as_ptr())
    );
    assert!(f.is_null());
    let (mut dptr, mut bytes) = (0, 0);
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuModuleGetGlobal_v2(&mut dptr, &mut bytes, m, c"no_such_global".as_ptr())
    );
    // A kernel is not a global, nor shared memory.
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuModuleGetGlobal_v2(&mut dptr, &mut bytes, m, c"add_k".as_ptr())
    );
    // The RPC client global of LLVM's GPU libc: address and size, and a copy into it reaches
    // the kernels.
    ok!(cuModuleGetGlobal_v2(
        &mut dptr,
        &mut bytes,
        m,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(bytes, 24);
    assert_ne!(dptr, 0);
    let mut size_only = 0;
    ok!(cuModuleGetGlobal_v2(
        null_mut(),
        &mut size_only,
        m,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(size_only, 24);
    let mut r = rng("module_errors");
    let client: [u64; 3] = [r.random(), r.random(), r.random()];
    ok!(cuMemcpyHtoD_v2(dptr, client.as_ptr().cast(), 24));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoD_v2(dptr + 8, client.as_ptr().cast(), 24)
    );
    let out = alloc(24);
    ok!(cuMemsetD32_v2(out, POISON_U32, 6));
    let read = function(m, c"read_client");
    let mut o = out;
    let mut params = [(&raw mut o).cast::<c_void>()];
    ok!(cuLaunchKernel(
        read,
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    let mut got = [0u64; 3];
    ok!(cuMemcpyDtoH_v2(got.as_mut_ptr().cast(), out, 24));
    assert_eq!(
        got, client,
        "the kernel reads what was copied into the global"
    );
    let mut back = [0u64; 3];
    ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr, 24));
    assert_eq!(back, client);
    // A second live load of the same PTX (here in another context) has its own globals, and
    // unloading one module leaves the other's global usable.
    let c = created_context();
    let m2 = load(PTX);
    let (mut dptr2, mut bytes2) = (0, 0);
    ok!(cuModuleGetGlobal_v2(
        &mut dptr2,
        &mut bytes2,
        m2,
        c"__llvm_rpc_client".as_ptr()
    ));
    assert_eq!(bytes2, 24);
    assert_ne!(dptr2, dptr, "two loads of one PTX share a global");
    let client2: [u64; 3] = [r.random(), r.random(), r.random()];
    ok!(cuMemcpyHtoD_v2(dptr2, client2.as_ptr().cast(), 24));
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    assert_eq!(popped, c);
    ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr, 24));
    assert_eq!(back, client, "the other module's copy changed this global");
    ok!(cuMemFree_v2(out));
    // Unloading drops the global's range.
    ok!(cuModuleUnload(m));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoD_v2(dptr, client.as_ptr().cast(), 24)
    );
    ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr2, 24));
    assert_eq!(
        back, client2,
        "the live module's global after unloading its twin"
    );
    ok!(cuCtxDestroy_v2(c));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dptr2, 24)
    );
    assert_eq!(free_memory(), base);
    let m = load(PTX);
    add_works(function(m, c"add_k"), null_mut(), "module_errors");
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Launches.

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
    const NAME: &str = "peer_access_errors_and_an_exact_peer_copy";
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
