//! CUDA driver status codes (`CUresult`) as the crate's errors: every failed driver call is
//! `Error::Driver` naming the call, the code, and the driver's own name and description of the
//! code (`cuGetErrorName`, `cuGetErrorString`); cuBLAS, cuFFT and cuDNN statuses likewise. The shared
//! backend gives some of them a better kind (see `gpu/status.rs`).

use cudarc::cublas::sys as cb;
use cudarc::driver::result;

use crate::error::{Error, Result};

/// The platform's name in every error and description.
pub(crate) const PLATFORM: &str = "cuda";

/// A driver error as a crate error: the call, the code, its name and description.
pub(crate) fn cu_error(call: &str, e: result::DriverError) -> Error {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    Error::Driver {
        platform: PLATFORM,
        call: call.into(),
        code: e.0 as i64,
        detail: match (name, text) {
            (Ok(n), Ok(t)) => format!("{n}: {t}"),
            (Ok(n), Err(_)) => n,
            _ => format!("{:?}", e.0),
        },
    }
}

/// `Ok` for `CUBLAS_STATUS_SUCCESS`, else `Error::Driver` for cuBLAS call `call`.
pub(crate) fn cublas_check(call: &str, s: cb::cublasStatus_t) -> Result<()> {
    if s == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    Err(Error::Driver {
        platform: PLATFORM,
        call: call.into(),
        code: s as i64,
        detail: format!("{s:?}"),
    })
}

/// `Ok` for `CUDNN_STATUS_SUCCESS`, else `Error::Driver` for cuDNN call `call`, with cuDNN's
/// own text for the status.
pub(crate) fn cudnn_check(call: &str, s: cudarc::cudnn::sys::cudnnStatus_t) -> Result<()> {
    if s == cudarc::cudnn::sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: cudnnGetErrorString returns a static NUL-terminated string for any status.
    let text = unsafe { std::ffi::CStr::from_ptr(cudarc::cudnn::sys::cudnnGetErrorString(s)) };
    Err(Error::Driver {
        platform: PLATFORM,
        call: call.into(),
        code: s as i64,
        detail: format!("{s:?}: {}", text.to_string_lossy()),
    })
}

/// `Ok` for `CUFFT_SUCCESS`, else `Error::Driver` for cuFFT call `call`.
pub(crate) fn cufft_check(call: &str, s: cudarc::cufft::sys::cufftResult) -> Result<()> {
    if s == cudarc::cufft::sys::cufftResult::CUFFT_SUCCESS {
        return Ok(());
    }
    Err(Error::Driver {
        platform: PLATFORM,
        call: call.into(),
        code: s as i64,
        detail: format!("{s:?}"),
    })
}
