//! What every entry point runs in, and what it returns: [`call`] catches panics (never across
//! the C boundary: `NVRTC_ERROR_INTERNAL_ERROR`) and keeps the detail of the last failure per
//! thread; `nvrtcGetErrorString`; the version and architecture queries; the extra
//! `streamexec_nvrtc_last_error_detail` export.

use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use cudarc::nvrtc::sys::nvrtcResult;

/// A failed call: the code returned, and what went wrong (kept for
/// [`streamexec_nvrtc_last_error_detail`], printed with `STREAMEXEC_NVRTC_LOG=1`).
#[derive(Clone, Debug)]
pub(crate) struct NvErr {
    pub(crate) code: nvrtcResult,
    pub(crate) detail: String,
}

/// The result of the work behind an entry point.
pub(crate) type NvResult<T> = Result<T, NvErr>;

impl NvErr {
    pub(crate) fn new(code: nvrtcResult, detail: impl Into<String>) -> Self {
        NvErr {
            code,
            detail: detail.into(),
        }
    }
}

/// `NVRTC_ERROR_INVALID_INPUT` with `detail`.
pub(crate) fn invalid(detail: impl Into<String>) -> NvErr {
    NvErr::new(nvrtcResult::NVRTC_ERROR_INVALID_INPUT, detail)
}

/// Writes `v` through the caller's out-pointer `p` (`NVRTC_ERROR_INVALID_INPUT` when null).
///
/// # Safety
/// `p` is null or valid for a write of `T`, as NVRTC's contract says.
pub(crate) unsafe fn put<T>(p: *mut T, v: T, what: &str) -> NvResult<()> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null, and valid for writes by this function's contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Reads the caller's NUL-terminated string `p` (`NVRTC_ERROR_INVALID_INPUT` when null).
///
/// # Safety
/// `p` is null or points to a NUL-terminated string that outlives the returned reference.
pub(crate) unsafe fn c_str<'a>(p: *const c_char, what: &str) -> NvResult<&'a CStr> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null and NUL-terminated by this function's contract.
    Ok(unsafe { CStr::from_ptr(p) })
}

thread_local! {
    /// The detail of this thread's last failed call.
    static LAST_DETAIL: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs one entry point: `f`'s error becomes its code, a panic `NVRTC_ERROR_INTERNAL_ERROR`.
pub(crate) fn call(name: &'static str, f: impl FnOnce() -> NvResult<()>) -> nvrtcResult {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => nvrtcResult::NVRTC_SUCCESS,
        Ok(Err(e)) => fail(name, e),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            fail(
                name,
                NvErr::new(
                    nvrtcResult::NVRTC_ERROR_INTERNAL_ERROR,
                    format!("internal error (please report): {msg}"),
                ),
            )
        }
    }
}

fn fail(name: &str, e: NvErr) -> nvrtcResult {
    let text = format!("{name}: {}: {}", error_name(e.code as u32), e.detail);
    if std::env::var_os("STREAMEXEC_NVRTC_LOG").is_some() {
        eprintln!("libnvrtc (streamexec): {text}");
    }
    LAST_DETAIL.with(|d| *d.borrow_mut() = text);
    e.code
}

/// Copies what went wrong in this thread's last failed NVRTC call (the function, the code's
/// name, and the detail) into `buf` (at most `size` bytes, NUL-terminated); returns the full
/// length, so a call with `size` 0 asks how much room it needs. (Compilation errors are in the
/// program log, as NVRTC has them; this is for the calls around it.)
///
/// # Safety
/// `buf` is null or valid for writes of `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn streamexec_nvrtc_last_error_detail(
    buf: *mut c_char,
    size: usize,
) -> usize {
    let text = LAST_DETAIL.with(|d| d.borrow().clone());
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

use nvrtcResult as R;

/// Every code of NVRTC 12.0 with its name, which is what `nvrtcGetErrorString` returns.
const CODES: &[(R, &CStr)] = &[
    (R::NVRTC_SUCCESS, c"NVRTC_SUCCESS"),
    (R::NVRTC_ERROR_OUT_OF_MEMORY, c"NVRTC_ERROR_OUT_OF_MEMORY"),
    (
        R::NVRTC_ERROR_PROGRAM_CREATION_FAILURE,
        c"NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
    ),
    (R::NVRTC_ERROR_INVALID_INPUT, c"NVRTC_ERROR_INVALID_INPUT"),
    (
        R::NVRTC_ERROR_INVALID_PROGRAM,
        c"NVRTC_ERROR_INVALID_PROGRAM",
    ),
    (R::NVRTC_ERROR_INVALID_OPTION, c"NVRTC_ERROR_INVALID_OPTION"),
    (R::NVRTC_ERROR_COMPILATION, c"NVRTC_ERROR_COMPILATION"),
    (
        R::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE,
        c"NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
    ),
    (
        R::NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION,
        c"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    ),
    (
        R::NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION,
        c"NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    ),
    (
        R::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
        c"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
    ),
    (R::NVRTC_ERROR_INTERNAL_ERROR, c"NVRTC_ERROR_INTERNAL_ERROR"),
];

/// What NVRTC answers for a code it does not know.
const UNKNOWN: &CStr = c"NVRTC_ERROR unknown";

fn error_string(code: u32) -> &'static CStr {
    CODES
        .iter()
        .find(|(c, _)| *c as u32 == code)
        .map_or(UNKNOWN, |(_, n)| n)
}

fn error_name(code: u32) -> String {
    error_string(code).to_string_lossy().into_owned()
}

/// `nvrtcGetErrorString`: the code's name (a static string), `"NVRTC_ERROR unknown"` for a
/// value that is not a code.
pub(crate) fn nvrtcGetErrorString(result: u32) -> *const c_char {
    catch_unwind(|| error_string(result).as_ptr()).unwrap_or(UNKNOWN.as_ptr())
}

/// The NVRTC version this library stands in for: 12.0, the API of cudarc's `cuda-12000`
/// bindings (every entry point of it is exported).
const VERSION: (c_int, c_int) = (12, 0);

/// The virtual architectures NVRTC 12.0 accepts (`compute_NN`), all of which clang 19 targets.
pub(crate) const SUPPORTED_ARCHS: &[c_int] =
    &[50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];

/// `nvrtcVersion`.
///
/// # Safety
/// `major` and `minor` are null or valid for a write.
pub(crate) unsafe fn nvrtcVersion(major: *mut c_int, minor: *mut c_int) -> NvResult<()> {
    if major.is_null() || minor.is_null() {
        return Err(invalid("major or minor is NULL"));
    }
    // SAFETY: the caller's out-pointers.
    unsafe {
        put(major, VERSION.0, "major")?;
        put(minor, VERSION.1, "minor")
    }
}

/// `nvrtcGetNumSupportedArchs`.
///
/// # Safety
/// `numArchs` is null or valid for a write.
pub(crate) unsafe fn nvrtcGetNumSupportedArchs(numArchs: *mut c_int) -> NvResult<()> {
    // SAFETY: the caller's out-pointer.
    unsafe { put(numArchs, SUPPORTED_ARCHS.len() as c_int, "numArchs") }
}

/// `nvrtcGetSupportedArchs`: as many entries as `nvrtcGetNumSupportedArchs` says.
///
/// # Safety
/// `supportedArchs` is null or valid for that many writes.
pub(crate) unsafe fn nvrtcGetSupportedArchs(supportedArchs: *mut c_int) -> NvResult<()> {
    if supportedArchs.is_null() {
        return Err(invalid("supportedArchs is NULL"));
    }
    // SAFETY: non-null and valid for `SUPPORTED_ARCHS.len()` writes (the caller's
    // contract); a caller's buffer never overlaps this constant.
    unsafe {
        std::ptr::copy_nonoverlapping(
            SUPPORTED_ARCHS.as_ptr(),
            supportedArchs,
            SUPPORTED_ARCHS.len(),
        )
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::{
        nvrtcGetErrorString, nvrtcGetNumSupportedArchs, nvrtcGetSupportedArchs, nvrtcVersion,
    };

    #[test]
    fn every_code_has_its_variant_name_and_unknown_values_are_named_as_nvrtc_does() {
        for (code, name) in CODES {
            assert_eq!(format!("{code:?}"), name.to_str().unwrap());
            assert_eq!(CODES.iter().filter(|(c, _)| c == code).count(), 1);
        }
        // SAFETY: the returned strings are static and NUL-terminated.
        let s = |c| unsafe { CStr::from_ptr(nvrtcGetErrorString(c)) };
        assert_eq!(s(6), c"NVRTC_ERROR_COMPILATION");
        assert_eq!(s(999), c"NVRTC_ERROR unknown");
    }

    #[test]
    fn a_panic_is_an_internal_error_with_its_detail() {
        assert_eq!(call("t", || panic!("boom")), R::NVRTC_ERROR_INTERNAL_ERROR);
        let mut buf = [0 as c_char; 128];
        // SAFETY: a 128-byte buffer.
        let n = unsafe { streamexec_nvrtc_last_error_detail(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: NUL-terminated by the call.
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
        assert_eq!(n, text.len());
        assert!(
            text.contains("NVRTC_ERROR_INTERNAL_ERROR") && text.contains("boom"),
            "{text}"
        );
        assert_eq!(call("t", || Ok(())), R::NVRTC_SUCCESS);
    }

    #[test]
    fn version_and_architectures() {
        let (mut major, mut minor, mut n) = (0, 0, 0);
        // SAFETY: valid out-pointers.
        unsafe {
            assert_eq!(nvrtcVersion(&mut major, &mut minor), R::NVRTC_SUCCESS);
            assert_eq!(nvrtcGetNumSupportedArchs(&mut n), R::NVRTC_SUCCESS);
        }
        assert_eq!((major, minor), (12, 0));
        let mut archs = vec![0; n as usize];
        // SAFETY: `n` entries.
        let got = unsafe { nvrtcGetSupportedArchs(archs.as_mut_ptr()) };
        assert_eq!(got, R::NVRTC_SUCCESS);
        assert_eq!(archs, SUPPORTED_ARCHS);
        // SAFETY: null pointers are refused before any write.
        let refused = unsafe { nvrtcVersion(std::ptr::null_mut(), &mut minor) };
        assert_eq!(refused, R::NVRTC_ERROR_INVALID_INPUT);
    }
}
