//! How driver failures get their kind in the shared backend. The drivers map their own status
//! codes to `Error::Driver` (`cuda/status.rs`, `hip/status.rs`); the backend re-kinds the
//! failures that have a better kind for the user: a failed allocation is `OutOfMemory`, a
//! refused launch is `LaunchConfig`, both keeping the driver's message.

use super::Driver;
use crate::error::Error;

/// `OutOfMemory` for `bytes` on device `device`, with the driver's error `e` as the detail.
pub(crate) fn out_of_memory<D: Driver>(device: usize, bytes: u64, e: Error) -> Error {
    Error::OutOfMemory {
        platform: D::PLATFORM,
        device,
        bytes,
        detail: e.to_string(),
    }
}

/// `LaunchConfig` for a launch of `kernel` the driver refused with `e`.
pub(crate) fn launch_failed<D: Driver>(kernel: &str, e: Error) -> Error {
    Error::LaunchConfig {
        platform: D::PLATFORM,
        kernel: kernel.into(),
        detail: e.to_string(),
    }
}
