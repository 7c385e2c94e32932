//! The conformance suite: platform-independent behaviour, run on device 0 of every available
//! platform. `STREAMEXEC_REQUIRE=opencl` (comma-separated names) turns a missing platform into a
//! failure instead of a skip.

#[path = "../common/mod.rs"]
mod common;
mod kernels;

mod blas;
mod errors;
mod forged;
mod launch;
mod lifetime;
mod memory;
mod rng;
mod streams;
mod unified;

use streamexec::StreamExecutor;

/// Runs `test` on every platform under test, naming the platform if it fails.
pub fn on_each_platform(test: impl Fn(&StreamExecutor)) {
    for exec in common::executors() {
        eprintln!("-- on platform {}", exec.platform_name());
        test(&exec);
    }
}
