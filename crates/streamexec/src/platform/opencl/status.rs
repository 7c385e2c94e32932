//! OpenCL status codes as the crate's errors: every failed OpenCL call becomes
//! `Error::Driver` naming the call, the code and its `CL_*` name, with where to look next.
//! (Failures with a better kind of their own, such as a failed `clCreateBuffer` being
//! `OutOfMemory` or a refused `clEnqueueNDRangeKernel` being `LaunchConfig`, are built where
//! they happen, with [`error_text`] for the code.)

use crate::error::Error;

/// The platform's name in every error and description.
pub(crate) const PLATFORM: &str = "opencl";

/// The `CL_*` name of status `code`.
pub(crate) fn error_text(code: i32) -> &'static str {
    opencl3::error_codes::error_text(code)
}

/// `Error::Driver` for a failed OpenCL call.
pub(crate) fn cl_error(call: &str, code: impl Into<i32>) -> Error {
    let code = code.into();
    Error::Driver {
        platform: PLATFORM,
        call: call.into(),
        code: code as i64,
        detail: format!(
            "{} (see the OpenCL specification for {call}; check the driver with `clinfo`)",
            error_text(code)
        ),
    }
}

/// The failure of a command that an event waited for (a negative execution status).
pub(crate) fn command_failed(code: i32) -> Error {
    cl_error("a command before the event", code)
}
