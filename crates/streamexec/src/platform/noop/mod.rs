//! `noop`: the template backend. It implements every interface trait, runs nothing, and answers
//! every operation that would do work with `Error::Unsupported` naming the platform, the
//! operation and a reason. It is compiled only with the test-only cargo feature `noop`, so that
//! the conformance suite (`tests/conformance/unsupported.rs`) can check, on a platform where
//! nothing is supported, what every platform must do for an operation it does not support.
//!
//! # Starting a new backend from this one
//!
//! 1. Copy this folder to `src/platform/<name>/` and rename `Noop*` to your prefix.
//! 2. Declare it in `src/platform/mod.rs` behind a cargo feature (`#[cfg(feature = "<name>")]
//!    mod <name>;`), add the feature to `Cargo.toml` (with `dep:` on your driver crate), and add
//!    one line to `REGISTRY` in `src/registry.rs`:
//!    `feature_backend!("<name>", "<name>", platform::<name>::open)`.
//! 3. Make [`open`] find the driver and its devices; a missing driver or no device is
//!    `Err(reason)` (the platform is then listed as unavailable with that reason), never a
//!    panic. Fill in `describe` from the driver's device queries: the handle layer checks every
//!    launch and allocation against that description.
//! 4. Replace each `status::unsupported(..)` with the real operation, one at a time. An
//!    operation your device really lacks stays `Unsupported`, with a reason that says what to
//!    use instead. Map your driver's status codes to `Error`s in `status.rs` (one place, so every
//!    message names the platform and the failed call the same way; see `opencl/status.rs`).
//! 5. Run `STREAMEXEC_REQUIRE=<name> cargo test --features <name> --test conformance`: the suite
//!    runs on every available platform and fails when a required one is missing.
//!
//! # The shape every backend has
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the platform (`PlatformInterface`), `open`, and the backend's design notes |
//! | `executor.rs` | the `StreamExecutorInterface` impl: one device |
//! | `stream.rs` | the `StreamInterface` impl: an in-order queue of device work |
//! | `event.rs` | the `EventInterface` impl: a marker in a stream |
//! | `kernel.rs` | the `KernelInterface` impl: a loaded kernel |
//! | `blas.rs`, `rng.rs` | `BlasSupport` and `RngSupport`, where the backend has them |
//! | `status.rs` | the driver's status codes (or the backend's own failures) as `Error`s |
//!
//! A backend whose streams need the executor's state (an allocation table, a context) puts that
//! state in a `device.rs` that both `executor.rs` and `stream.rs` use, instead of `stream.rs`
//! reaching into `executor.rs` while `executor.rs` creates streams (see `host/device.rs`,
//! `opencl/device.rs`). Other files a backend needs get names that say what they hold
//! (`memory.rs`, `queue.rs`, ...). Getting a backend object back from an interface object goes
//! through `platform::downcast` (a mismatch is an internal error: the handle layer never hands
//! a backend another platform's objects).
//!
//! # What the handle layer does for you, and what it relies on
//!
//! The handles (`StreamExecutor`, `Stream`, ...) validate before they call a backend: bounds,
//! memory ownership, live pointer arguments, launch geometry against the description, kernel
//! arity and signature, that events and kernels belong to this platform. The methods that
//! trust a device range are `unsafe fn`; their `# Safety` sections (in `src/interface/`) say
//! what the caller guarantees. A backend must still return `Err` for anything its driver
//! refuses, and must never panic on any input.
//!
//! The stream error model is shared: a failed operation (at enqueue, or later through
//! `async_error`) puts the stream in its error state, later operations are skipped, and
//! `block_until_done` reports the first error. Skipped event records must mark their event
//! failed (`EventInterface::record_failure`), so that a stream waiting on that event fails with
//! `DependencyFailed` instead of waiting forever.
//!
//! # Which noop operations are real
//!
//! Everything that would do work is `Unsupported`: allocations, copies, fills, kernel loads and
//! launches, host callbacks, event records, timing, peer access, the race checker, memory
//! queries. What the error model needs is real, because the handle layer relies on it and every
//! backend has to get it right: the platform has one device with a description; streams and
//! events can be created; a stream with nothing enqueued is done (`block_until_done`,
//! `synchronize_all` return at once); an event never recorded is complete; a failed record
//! (`record_failure`) fails the event, and waits on it fail with `DependencyFailed`.
//!
//! `blas()` and `rng()` stay `None` (the default), so `then_blas_*` and the random-number
//! operations fail with `Unsupported` in the handle layer before it looks at their operands: the
//! path of every platform without them. `blas.rs` and `rng.rs` still implement the traits, as
//! the place to start when a backend gets them.

mod blas;
mod event;
mod executor;
mod kernel;
mod rng;
mod status;
mod stream;

use std::sync::Arc;

use crate::error::Result;
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;
use executor::NoopExecutor;
use status::PLATFORM;

/// The noop platform: one device that runs nothing.
struct NoopPlatform;

/// Opens the platform. A real backend loads its driver here and counts the devices, returning
/// `Err(reason)` (what is missing, and how to install it) when it cannot run on this machine.
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    Ok(Arc::new(NoopPlatform))
}

/// Device `ordinal`'s description. A real backend asks its driver; the handle layer checks
/// launches against `max_threads_per_block`, `max_block_dims`, `max_grid_dims` and
/// `shared_memory_per_block`, and allocations against `max_allocation`.
fn describe(ordinal: usize) -> DeviceDescription {
    DeviceDescription {
        platform: PLATFORM,
        ordinal,
        name: "noop template device".into(),
        vendor: "streamexec".into(),
        platform_version: format!("streamexec {}", env!("CARGO_PKG_VERSION")),
        driver_version: "none (the noop template backend has no driver)".into(),
        driver: "none: the noop template backend loads no library".into(),
        total_memory: 0,
        compute_units: 0,
        max_threads_per_block: 1,
        max_block_dims: [1, 1, 1],
        max_grid_dims: [1, 1, 1],
        warp_size: 1,
        shared_memory_per_block: 0,
        clock_rate_khz: None,
        compute_capability: None,
        isa: None,
        unified_memory: false,
        host_mapped_memory: false,
        // No limit of its own to report: every allocation reaches the backend, which refuses it
        // as `Unsupported` (with 0, the handle layer would answer `OutOfMemory` first). A real
        // backend reports its device's largest allocation.
        max_allocation: u64::MAX,
        max_cooperative_blocks: 0,
    }
}

impl PlatformInterface for NoopPlatform {
    fn name(&self) -> &'static str {
        PLATFORM
    }

    fn device_count(&self) -> usize {
        1
    }

    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        // `ordinal` is below `device_count()`: the registry checked it.
        Ok(describe(ordinal))
    }

    fn create_executor(
        &self,
        ordinal: usize,
        plugins: &crate::types::PluginConfig,
    ) -> Result<Arc<dyn StreamExecutorInterface>> {
        // Called once per live executor of a device and plugin config: the registry hands out
        // the live one while any handle to it exists. A backend decides each canned family
        // here (`types::decide`); noop has no vendor library, so `Plugin::Vendor` fails.
        crate::types::refuse_vendor(PLATFORM, plugins, &crate::types::PluginFamily::ALL)?;
        Ok(Arc::new(NoopExecutor::new(describe(ordinal))))
    }
}
