//! noop's streams: every operation is `Unsupported` at enqueue time, so the handle layer puts
//! the stream in its error state and skips later work. Nothing is ever enqueued, so the stream
//! is always done and never has an asynchronous error.
//!
//! A real stream runs its operations in order (a driver queue, or a `WorkQueue` worker thread;
//! see `platform::work_queue`), keeps what an operation borrows (the `HostRegion` of a copy,
//! pinned allocations) until the operation is done, and after its first failure skips every
//! later operation except that skipped event records call `record_failure`.

use std::sync::Arc;

use super::event::NoopEvent;
use super::status::unsupported;
use crate::error::{Error, Result};
use crate::interface::{
    DoneFn, EventInterface, HostCallbackFn, KernelInterface, StreamExecutorInterface,
    StreamInterface,
};
use crate::platform::downcast::downcast;
use crate::types::{DeviceAddress, HostRegion, LaunchDims, PackedArg};

/// A noop stream.
pub(crate) struct NoopStream;

impl StreamInterface for NoopStream {
    unsafe fn memcpy_h2d(&self, _src: HostRegion, _dst: DeviceAddress) -> Result<()> {
        Err(unsupported("then_memcpy_h2d", "noop has no device memory"))
    }

    unsafe fn memcpy_d2h(&self, _src: DeviceAddress, _dst: HostRegion) -> Result<()> {
        Err(unsupported("then_memcpy_d2h", "noop has no device memory"))
    }

    unsafe fn memcpy_d2d(
        &self,
        _src: DeviceAddress,
        _dst: DeviceAddress,
        _bytes: u64,
    ) -> Result<()> {
        Err(unsupported("then_memcpy_d2d", "noop has no device memory"))
    }

    unsafe fn memcpy_peer(
        &self,
        _src_exec: &dyn StreamExecutorInterface,
        _src: DeviceAddress,
        _dst: DeviceAddress,
        _bytes: u64,
    ) -> Result<()> {
        // Optional: the trait's default is `Unsupported` too.
        Err(unsupported(
            "then_memcpy_peer",
            "noop has no peer copies between devices",
        ))
    }

    unsafe fn memset8(&self, _dst: DeviceAddress, _value: u8, _bytes: u64) -> Result<()> {
        Err(unsupported("then_memset", "noop has no device memory"))
    }

    unsafe fn memset32(&self, _dst: DeviceAddress, _value: u32, _count: u64) -> Result<()> {
        Err(unsupported("then_memset32", "noop has no device memory"))
    }

    unsafe fn launch(
        &self,
        _kernel: &Arc<dyn KernelInterface>,
        _dims: &LaunchDims,
        _args: &[PackedArg],
    ) -> Result<()> {
        // Unreachable through the handles (noop loads no kernel). A real backend gets its
        // kernel back with `platform::downcast_arc` and keeps it (and every pointer argument's
        // allocation) alive until the launch is done.
        Err(unsupported("then_launch", "noop runs no kernels"))
    }

    fn host_callback(&self, _f: HostCallbackFn) -> Result<()> {
        // A real backend runs `f` on a host thread once earlier work is done; its `Err` fails
        // the stream.
        Err(unsupported(
            "then_host_callback",
            "noop runs no stream work",
        ))
    }

    fn notify_done(&self, done: DoneFn) -> Result<()> {
        // Nothing is ever queued, so everything enqueued so far has finished. A real backend
        // calls `done` from its completion path (a worker, a driver callback) once earlier work
        // has finished or been skipped.
        done();
        Ok(())
    }

    fn record_event(&self, _event: &Arc<dyn EventInterface>) -> Result<()> {
        Err(unsupported("then_record_event", "noop records no events"))
    }

    fn wait_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        // The error model, which needs no device: an event never recorded is complete (nothing
        // to wait for), and a failed record fails this stream with `DependencyFailed`. noop
        // events cannot be pending, since noop records none.
        let event = downcast::<NoopEvent>(event.as_any(), "the event passed to then_wait_for")?;
        match event.failure() {
            Some(e) => Err(Error::dependency("then_wait_for", e)),
            None => Ok(()),
        }
    }

    fn block_until_done(&self) -> Result<()> {
        // Nothing was enqueued. A real backend waits, then reports the stream's first error.
        Ok(())
    }

    fn async_error(&self) -> Option<Error> {
        // No work ever ran. A real backend returns its first asynchronous failure.
        None
    }
}
