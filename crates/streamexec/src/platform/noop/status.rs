//! How noop reports failures. A real backend maps its driver's status codes here (every failed
//! call becomes `Error::Driver` naming the call, the code and what the driver says about it;
//! see `opencl/status.rs`, `cuda/status.rs`), so messages name the platform the same way
//! everywhere. noop has one failure: the operation is not supported.

use crate::error::Error;

/// The platform's name in every error and description.
pub(crate) const PLATFORM: &str = "noop";

/// `Unsupported` for `operation` (the user-facing name, e.g. `then_memcpy_h2d`), with `reason`
/// (what noop lacks) and what to do instead.
pub(crate) fn unsupported(operation: &str, reason: &str) -> Error {
    Error::unsupported(
        PLATFORM,
        operation,
        format!(
            "{reason}: noop is the template backend for new platforms (src/platform/noop/) and \
             runs nothing; use a working platform such as `host`"
        ),
    )
}
