//! What every entry point runs in, and what it returns: [`call`] catches panics (never across
//! the C boundary: `CUDA_ERROR_UNKNOWN`), refuses calls from inside a host function
//! (`CUDA_ERROR_NOT_PERMITTED`) and calls in a child forked after `cuInit`
//! (`CUDA_ERROR_NOT_INITIALIZED`), and keeps the detail of the last failure per thread; the error
//! names and strings of every code this library returns; the extra `streamexec_cuda_*` exports.

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::sys::CUresult;
use parking_lot::Mutex;

/// A failed call: the code returned, and what went wrong (kept for
/// [`streamexec_cuda_last_error_detail`], printed with `STREAMEXEC_CUDA_LOG=1`).
#[derive(Clone, Debug)]
pub(crate) struct CuErr {
    pub(crate) code: CUresult,
    pub(crate) detail: String,
}

/// The result of the work behind an entry point.
pub(crate) type CuResult<T> = Result<T, CuErr>;

impl CuErr {
    pub(crate) fn new(code: CUresult, detail: impl Into<String>) -> Self {
        CuErr {
            code,
            detail: detail.into(),
        }
    }
}

/// `CUDA_ERROR_INVALID_VALUE` with `detail`.
pub(crate) fn invalid(detail: impl Into<String>) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_INVALID_VALUE, detail)
}

/// `CUDA_ERROR_INVALID_HANDLE` with `detail`.
pub(crate) fn bad_handle(detail: impl Into<String>) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_INVALID_HANDLE, detail)
}

/// `Err(invalid)` when `p` is null: every out-pointer and input pointer the driver dereferences.
pub(crate) fn non_null<T>(p: *const T, what: &str) -> CuResult<()> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    Ok(())
}

/// Writes `v` through the caller's out-pointer `p` (checked non-null).
///
/// # Safety
/// `p` is null or valid for a write of `T`, as the driver API's contract says.
pub(crate) unsafe fn put<T>(p: *mut T, v: T, what: &str) -> CuResult<()> {
    non_null(p, what)?;
    // SAFETY: non-null, and valid for writes by this function's contract.
    unsafe { p.write(v) };
    Ok(())
}

thread_local! {
    /// Set while this thread runs a `cuLaunchHostFunc` function.
    static IN_HOST_FN: Cell<bool> = const { Cell::new(false) };
    /// The detail of this thread's last failed call.
    static LAST_DETAIL: RefCell<String> = const { RefCell::new(String::new()) };
    /// Set while this thread runs a per-thread default-stream export (`_ptds`, `_ptsz`).
    static PER_THREAD_DEFAULT: Cell<bool> = const { Cell::new(false) };
}

/// Whether the call running on this thread is a `_ptds`/`_ptsz` export: its NULL stream is the
/// per-thread default stream (`CU_STREAM_PER_THREAD`), not the legacy one.
pub(crate) fn per_thread_default_stream() -> bool {
    PER_THREAD_DEFAULT.with(Cell::get)
}

/// [`call`] for a per-thread default-stream export (`cuLaunchKernel_ptsz`,
/// `cuMemcpyHtoD_v2_ptds`, ...): `f` sees the NULL stream as `CU_STREAM_PER_THREAD`.
pub(crate) fn call_per_thread(name: &'static str, f: impl FnOnce() -> CuResult<()>) -> CUresult {
    PER_THREAD_DEFAULT.with(|p| p.set(true));
    let r = call(name, f);
    PER_THREAD_DEFAULT.with(|p| p.set(false));
    r
}

/// The last kernel fault of the process (its engine report).
static LAST_FAULT: Mutex<String> = Mutex::new(String::new());

/// Runs `f` as a host function: driver calls it makes are refused.
pub(crate) fn as_host_fn(f: impl FnOnce()) {
    IN_HOST_FN.with(|h| h.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    IN_HOST_FN.with(|h| h.set(false));
    if r.is_err() {
        eprintln!("libcuda (streamexec): a host function panicked; the panic was stopped there");
    }
}

/// Keeps a kernel fault's report and prints it (`STREAMEXEC_CUDA_QUIET=1` keeps stderr quiet).
pub(crate) fn report_fault(report: &str) {
    if std::env::var_os("STREAMEXEC_CUDA_QUIET").is_none() {
        eprintln!("libcuda (streamexec): {report}");
    }
    *LAST_FAULT.lock() = report.to_string();
}

/// Set in the child of a `fork()` made after `cuInit` succeeded (a `pthread_atfork` child
/// handler, [`note_forks`]): the driver's state (its worker threads above all) belongs to the
/// parent, so every call there is `CUDA_ERROR_NOT_INITIALIZED`, as CUDA answers in such a
/// child, `cuInit` included.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Entry points that need no driver state, allowed in a forked child as before `cuInit`.
const ALLOWED_AFTER_FORK: &[&str] = &["cuDriverGetVersion", "cuGetErrorName", "cuGetErrorString"];

extern "C" fn forked_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// Makes every driver call in a child forked from now on `CUDA_ERROR_NOT_INITIALIZED`: called by
/// `cuInit` once it set the driver up (a child of a process that never initialised the driver
/// may initialise its own). Registered once per process.
pub(crate) fn note_forks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `forked_child` is async-signal-safe (one atomic store), as a child handler
        // of a multithreaded process must be; the handler stays valid as long as the library
        // is loaded, and the library is never unloaded while its threads run.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
        if rc != 0 {
            eprintln!(
                "libcuda (streamexec): pthread_atfork failed ({rc}); a forked child's driver \
                 calls will not be refused"
            );
        }
    });
}

/// Runs one entry point: `f`'s error becomes its code, a panic `CUDA_ERROR_UNKNOWN`.
pub(crate) fn call(name: &'static str, f: impl FnOnce() -> CuResult<()>) -> CUresult {
    if FORKED.load(Ordering::Relaxed) && !ALLOWED_AFTER_FORK.contains(&name) {
        return fail(
            name,
            CuErr::new(
                CUresult::CUDA_ERROR_NOT_INITIALIZED,
                "this process is a fork() child of a process that initialised the driver; \
                 CUDA cannot be used in it (use exec, or initialise the driver after fork)",
            ),
        );
    }
    if IN_HOST_FN.with(Cell::get) {
        return fail(
            name,
            CuErr::new(
                CUresult::CUDA_ERROR_NOT_PERMITTED,
                "a host function (cuLaunchHostFunc) must not call the driver API",
            ),
        );
    }
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CUresult::CUDA_SUCCESS,
        Ok(Err(e)) => fail(name, e),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            fail(
                name,
                CuErr::new(
                    CUresult::CUDA_ERROR_UNKNOWN,
                    format!("internal error (please report): {msg}"),
                ),
            )
        }
    }
}

fn fail(name: &str, e: CuErr) -> CUresult {
    let text = format!("{name}: {}: {}", error_name(e.code as u32).1, e.detail);
    if std::env::var_os("STREAMEXEC_CUDA_LOG").is_some() {
        eprintln!("libcuda (streamexec): {text}");
    }
    LAST_DETAIL.with(|d| *d.borrow_mut() = text);
    e.code
}

/// Copies `text` into the caller's buffer (truncated, NUL-terminated); returns its full length.
///
/// # Safety
/// `buf` is null or valid for `size` bytes.
unsafe fn copy_out(text: &str, buf: *mut c_char, size: usize) -> usize {
    if !buf.is_null() && size > 0 {
        let n = text.len().min(size - 1);
        // SAFETY: `buf` has `size` > `n` bytes (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    text.len()
}

/// Copies what went wrong in this thread's last failed driver call (the function, the code's
/// name, and the detail) into `buf` (at most `size` bytes, NUL-terminated); returns the full
/// length, so a call with `size` 0 asks how much room it needs.
///
/// # Safety
/// `buf` is null or valid for writes of `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamexec_cuda_last_error_detail(buf: *mut c_char, size: usize) -> usize {
    let text = LAST_DETAIL.with(|d| d.borrow().clone());
    // SAFETY: the caller's contract.
    unsafe { copy_out(&text, buf, size) }
}

/// Copies the PTX engine's report of the process's last kernel fault (kernel, block, thread,
/// PTX line and instruction, address) into `buf` as
/// [`streamexec_cuda_last_error_detail`] does; 0 when no kernel has faulted.
///
/// # Safety
/// `buf` is null or valid for writes of `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamexec_cuda_last_fault(buf: *mut c_char, size: usize) -> usize {
    let text = LAST_FAULT.lock().clone();
    // SAFETY: the caller's contract.
    unsafe { copy_out(&text, buf, size) }
}

/// Identifies this library as streamexec's CPU libcuda, which NVIDIA's driver has no symbol
/// for: returns its version, a static NUL-terminated string. The CUDA platform's
/// `DeviceDescription::driver` and `scripts/gpu-check.sh` look it up to tell the two apart.
#[unsafe(no_mangle)]
pub extern "C" fn streamexec_cpu_libcuda_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

use CUresult as R;

/// Every code this library returns, with CUDA's name and description for it.
const CODES: &[(R, &CStr, &CStr)] = &[
    (R::CUDA_SUCCESS, c"CUDA_SUCCESS", c"no error"),
    (
        R::CUDA_ERROR_INVALID_VALUE,
        c"CUDA_ERROR_INVALID_VALUE",
        c"invalid argument",
    ),
    (
        R::CUDA_ERROR_OUT_OF_MEMORY,
        c"CUDA_ERROR_OUT_OF_MEMORY",
        c"out of memory",
    ),
    (
        R::CUDA_ERROR_NOT_INITIALIZED,
        c"CUDA_ERROR_NOT_INITIALIZED",
        c"initialization error",
    ),
    (
        R::CUDA_ERROR_DEINITIALIZED,
        c"CUDA_ERROR_DEINITIALIZED",
        c"driver shutting down",
    ),
    (
        R::CUDA_ERROR_NO_DEVICE,
        c"CUDA_ERROR_NO_DEVICE",
        c"no CUDA-capable device is detected",
    ),
    (
        R::CUDA_ERROR_INVALID_DEVICE,
        c"CUDA_ERROR_INVALID_DEVICE",
        c"invalid device ordinal",
    ),
    (
        R::CUDA_ERROR_INVALID_IMAGE,
        c"CUDA_ERROR_INVALID_IMAGE",
        c"device kernel image is invalid",
    ),
    (
        R::CUDA_ERROR_INVALID_CONTEXT,
        c"CUDA_ERROR_INVALID_CONTEXT",
        c"invalid device context",
    ),
    (
        R::CUDA_ERROR_NO_BINARY_FOR_GPU,
        c"CUDA_ERROR_NO_BINARY_FOR_GPU",
        c"no kernel image is available for execution on the device",
    ),
    (
        R::CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
        c"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
        c"peer access is not supported between these two devices",
    ),
    (
        R::CUDA_ERROR_INVALID_PTX,
        c"CUDA_ERROR_INVALID_PTX",
        c"a PTX JIT compilation failed",
    ),
    (
        R::CUDA_ERROR_FILE_NOT_FOUND,
        c"CUDA_ERROR_FILE_NOT_FOUND",
        c"file not found",
    ),
    (
        R::CUDA_ERROR_INVALID_HANDLE,
        c"CUDA_ERROR_INVALID_HANDLE",
        c"invalid resource handle",
    ),
    (
        R::CUDA_ERROR_NOT_FOUND,
        c"CUDA_ERROR_NOT_FOUND",
        c"named symbol not found",
    ),
    (
        R::CUDA_ERROR_NOT_READY,
        c"CUDA_ERROR_NOT_READY",
        c"device not ready",
    ),
    (
        R::CUDA_ERROR_ILLEGAL_ADDRESS,
        c"CUDA_ERROR_ILLEGAL_ADDRESS",
        c"an illegal memory access was encountered",
    ),
    (
        R::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        c"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        c"too many resources requested for launch",
    ),
    (
        R::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
        c"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
        c"peer access is already enabled",
    ),
    (
        R::CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
        c"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
        c"peer access has not been enabled",
    ),
    (
        R::CUDA_ERROR_CONTEXT_IS_DESTROYED,
        c"CUDA_ERROR_CONTEXT_IS_DESTROYED",
        c"context is destroyed",
    ),
    (
        R::CUDA_ERROR_ASSERT,
        c"CUDA_ERROR_ASSERT",
        c"device-side assert triggered",
    ),
    (
        R::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        c"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
        c"part or all of the requested memory range is already mapped",
    ),
    (
        R::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        c"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
        c"pointer does not correspond to a registered memory region",
    ),
    (
        R::CUDA_ERROR_ILLEGAL_INSTRUCTION,
        c"CUDA_ERROR_ILLEGAL_INSTRUCTION",
        c"an illegal instruction was encountered",
    ),
    (
        R::CUDA_ERROR_MISALIGNED_ADDRESS,
        c"CUDA_ERROR_MISALIGNED_ADDRESS",
        c"misaligned address",
    ),
    (
        R::CUDA_ERROR_LAUNCH_FAILED,
        c"CUDA_ERROR_LAUNCH_FAILED",
        c"unspecified launch failure",
    ),
    (
        R::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
        c"CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
        c"too many blocks in cooperative launch",
    ),
    (
        R::CUDA_ERROR_NOT_PERMITTED,
        c"CUDA_ERROR_NOT_PERMITTED",
        c"operation not permitted",
    ),
    (
        R::CUDA_ERROR_NOT_SUPPORTED,
        c"CUDA_ERROR_NOT_SUPPORTED",
        c"operation not supported",
    ),
    (
        R::CUDA_ERROR_UNKNOWN,
        c"CUDA_ERROR_UNKNOWN",
        c"unknown error",
    ),
];

/// The name and description of `code`, or `None` for a code this library does not know.
fn lookup(code: u32) -> Option<&'static (R, &'static CStr, &'static CStr)> {
    CODES.iter().find(|(c, _, _)| *c as u32 == code)
}

/// `(known, name)` of `code` for messages.
fn error_name(code: u32) -> (bool, String) {
    match lookup(code) {
        Some((_, n, _)) => (true, n.to_string_lossy().into_owned()),
        None => (false, format!("CUresult {code}")),
    }
}

/// `cuGetErrorName`.
///
/// # Safety
/// `pStr` is null or valid for a write.
pub(crate) unsafe fn cuGetErrorName(error: u32, pStr: *mut *const c_char) -> CuResult<()> {
    let name = lookup(error).map_or(std::ptr::null(), |(_, n, _)| n.as_ptr());
    // SAFETY: the caller's out-pointer.
    unsafe { put(pStr, name, "pStr")? };
    if name.is_null() {
        return Err(invalid(format!(
            "{error} is not a CUresult this driver returns"
        )));
    }
    Ok(())
}

/// `cuGetErrorString`.
///
/// # Safety
/// `pStr` is null or valid for a write.
pub(crate) unsafe fn cuGetErrorString(error: u32, pStr: *mut *const c_char) -> CuResult<()> {
    let text = lookup(error).map_or(std::ptr::null(), |(_, _, t)| t.as_ptr());
    // SAFETY: the caller's out-pointer.
    unsafe { put(pStr, text, "pStr")? };
    if text.is_null() {
        return Err(invalid(format!(
            "{error} is not a CUresult this driver returns"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_matching_its_variant() {
        for (code, name, text) in CODES {
            assert_eq!(format!("{code:?}"), name.to_str().unwrap());
            assert!(!text.is_empty());
            assert_eq!(CODES.iter().filter(|(c, ..)| c == code).count(), 1);
        }
    }

    #[test]
    fn a_panic_is_unknown_and_a_host_function_may_not_call() {
        assert_eq!(call("t", || panic!("boom")), R::CUDA_ERROR_UNKNOWN);
        let mut seen = None;
        as_host_fn(|| seen = Some(call("t", || Ok(()))));
        assert_eq!(seen, Some(R::CUDA_ERROR_NOT_PERMITTED));
        assert_eq!(call("t", || Ok(())), R::CUDA_SUCCESS);
    }
}
