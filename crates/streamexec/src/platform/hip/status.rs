//! HIP status codes as the crate's errors: every failed HIP call is `Error::Driver` naming the
//! call, the code, and the runtime's own name and description of it (`hipGetErrorName`,
//! `hipGetErrorString`). Statuses arrive as plain integers (`ffi::HipStatus`, see `ffi.rs`), so
//! a code the bindings do not know is still just a number. The shared backend gives some of
//! them a better kind (see `gpu/status.rs`).

use std::ffi::CStr;

use super::ffi::{self, HipStatus};
use crate::error::{Error, Result};

/// The platform's name in every error and description.
pub(crate) const PLATFORM: &str = "hip";

fn status_text(s: HipStatus) -> String {
    let text = |p: *const std::ffi::c_char| {
        // SAFETY: HIP returns static NUL-terminated strings (or NULL).
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    // SAFETY: plain queries taking the status by value.
    let (name, desc) = unsafe {
        (
            text(ffi::hipGetErrorName(s)),
            text(ffi::hipGetErrorString(s)),
        )
    };
    match (name, desc) {
        (Some(n), Some(d)) if n != d => format!("{n}: {d}"),
        (Some(n), _) => n,
        _ => format!("HIP status {}", s.0),
    }
}

/// A failed HIP call as a crate error.
pub(crate) fn hip_error(call: &str, s: HipStatus) -> Error {
    Error::Driver {
        platform: PLATFORM,
        call: call.into(),
        code: s.0 as i64,
        detail: status_text(s),
    }
}

/// `Ok` for `hipSuccess`, else the error of `call`.
pub(crate) fn check(call: &str, s: HipStatus) -> Result<()> {
    if s == HipStatus::SUCCESS {
        Ok(())
    } else {
        Err(hip_error(call, s))
    }
}
