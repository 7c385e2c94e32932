//! The CPU libcuda (this crate) on bad input: every error situation returns the code the CUDA
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

#[macro_use]
#[path = "../support/mod.rs"]
mod support;

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

use support::{POISON_U32, last_fault, random_u32s, rng, text_export};

// ---------------------------------------------------------------------------------------------
// Calling the driver (`cu!`, `expect!`, `ok!` from `support`).

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
    CUresult::CUDA_ERROR_ASSERT,
    CUresult::CUDA_ERROR_LAUNCH_FAILED,
    CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
];

/// [`support::check`], for a code listed in [`CODES_SEEN`].
#[track_caller]
fn check(got: CUresult, want: CUresult, what: &str) {
    assert!(
        CODES_SEEN.contains(&want),
        "add {want:?} to CODES_SEEN (cuGetErrorName is checked for each)"
    );
    support::check(got, want, what);
}

/// True when streamexec's libcuda can be loaded; else fails (`STREAMEXEC_REQUIRE` names
/// `cuda`) or prints why the test is skipped.
fn lib_available(test: &str) -> bool {
    if !support::libcuda_loads(test) {
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

// After the macros above (macro_rules! scope is textual).
mod attributes;
mod contexts;
mod cooperative;
mod copies_2d;
mod events_peers;
mod fork;
mod free_queued;
mod frees;
mod granule;
mod handles;
mod init;
mod launches;
mod libraries;
mod lookup;
mod managed;
mod mapped;
mod memory;
mod modules;
mod pointers;
mod services;
mod sync_copies;
