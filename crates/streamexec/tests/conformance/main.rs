//! The conformance suite: platform-independent behaviour, run on device 0 of every available
//! platform. `STREAMEXEC_REQUIRE=opencl` (comma-separated names) turns a missing platform into a
//! failure instead of a skip. The template backend `noop` (`--features noop`) supports nothing:
//! the positive tests skip it, and `unsupported.rs` checks it against what every platform must
//! do for an operation it does not support.

#[path = "../common/mod.rs"]
mod common;
mod kernels;

mod arity;
mod async_done;
mod blas;
mod command_buffer;
mod default_stream;
mod errors;
mod forged;
mod launch;
mod lifetime;
mod memory;
mod rng;
mod streams;
mod unified;
mod unsupported;

use streamexec::StreamExecutor;

/// Runs `test` on every platform under test, naming the platform if it fails.
pub fn on_each_platform(test: impl Fn(&StreamExecutor)) {
    for exec in common::executors() {
        eprintln!("-- on platform {}", exec.platform_name());
        test(&exec);
    }
}
