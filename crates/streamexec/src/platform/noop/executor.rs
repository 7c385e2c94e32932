//! noop's device: the `StreamExecutorInterface` impl. Every method that would do work returns
//! `Unsupported`; streams and events can be made (their operations are unsupported in turn).
//!
//! A real executor holds the device's context and the state its streams share (put that in a
//! `device.rs`), and keeps whatever `deallocate` must not free under queued work.

use std::any::Any;
use std::sync::Arc;

use super::event::NoopEvent;
use super::status::unsupported;
use super::stream::NoopStream;
use crate::error::Result;
use crate::interface::{
    BlasSupport, EventInterface, KernelInterface, RngSupport, StreamExecutorInterface,
    StreamInterface,
};
use crate::types::MultiKernelLoaderSpec;
use crate::types::{DeviceAddress, DeviceDescription, HostBuffer, MemoryUsage};

/// The one noop device.
pub(crate) struct NoopExecutor {
    description: DeviceDescription,
}

impl NoopExecutor {
    pub(super) fn new(description: DeviceDescription) -> Self {
        NoopExecutor { description }
    }
}

impl StreamExecutorInterface for NoopExecutor {
    fn description(&self) -> &DeviceDescription {
        &self.description
    }

    fn allocate(&self, _bytes: u64) -> Result<DeviceAddress> {
        // A real backend: `OutOfMemory` (with what the driver said) when the device refuses.
        Err(unsupported("allocate", "noop has no device memory"))
    }

    fn allocate_unified(&self, _bytes: u64) -> Result<(DeviceAddress, *mut u8)> {
        // Optional: the trait's default says `Unsupported` too. A backend with memory that
        // kernels and the host reach at once (zeroed, 64-byte aligned) returns both addresses.
        Err(unsupported(
            "allocate_unified",
            "noop has no host-coherent unified memory",
        ))
    }

    unsafe fn deallocate(&self, _addr: DeviceAddress) {
        // noop never hands out an address, so nothing can be freed. A real backend must not
        // release memory that operations enqueued before this call may still touch (defer the
        // free behind them, or let the driver defer it), must not block on later work, and
        // logs rather than returns failures.
    }

    fn host_allocate(&self, _bytes: usize) -> Result<Box<dyn HostBuffer>> {
        // A real backend: page-locked memory where the driver has it, else `AlignedHostBuffer`.
        Err(unsupported(
            "allocate_host",
            "noop allocates no host memory",
        ))
    }

    fn memory_usage(&self) -> Result<MemoryUsage> {
        Err(unsupported("memory_usage", "noop has no device memory"))
    }

    fn can_enable_peer_access(&self, _other: &dyn StreamExecutorInterface) -> bool {
        false
    }

    fn enable_peer_access(&self, _other: &dyn StreamExecutorInterface) -> Result<()> {
        // A real backend gets `other` back with `platform::downcast` (the handle layer passes
        // only devices of this platform).
        Err(unsupported(
            "enable_peer_access_to",
            "noop has no peer access between devices",
        ))
    }

    fn set_race_check(&self, _on: bool) -> Result<()> {
        Err(unsupported(
            "set_race_check",
            "noop has no data-race checker",
        ))
    }

    fn load_kernel(&self, _spec: &MultiKernelLoaderSpec) -> Result<Arc<dyn KernelInterface>> {
        // A real backend picks the spec's format it prefers (`NoSuitableFormat` listing what
        // the spec holds when there is none), builds it (`KernelLoad` with the compiler's log)
        // and reports the kernel's own parameter count (`KernelInterface::param_count`), which
        // the executor checks the spec's arity against.
        Err(unsupported("load_kernel", "noop loads no kernels"))
    }

    fn create_stream(&self) -> Result<Box<dyn StreamInterface>> {
        Ok(Box::new(NoopStream))
    }

    fn create_event(&self) -> Result<Arc<dyn EventInterface>> {
        Ok(Arc::new(NoopEvent::default()))
    }

    fn synchronize_all(&self) -> Result<()> {
        // Nothing is ever enqueued on a noop stream. A real backend waits for every stream of
        // this executor (their failures are reported by the streams, not here).
        Ok(())
    }

    unsafe fn memcpy_h2d_sync(&self, _src: &[u8], _dst: DeviceAddress) -> Result<()> {
        Err(unsupported(
            "synchronous_memcpy_h2d",
            "noop has no device memory",
        ))
    }

    unsafe fn memcpy_d2h_sync(&self, _src: DeviceAddress, _dst: &mut [u8]) -> Result<()> {
        Err(unsupported(
            "synchronous_memcpy_d2h",
            "noop has no device memory",
        ))
    }

    unsafe fn memset_sync(&self, _dst: DeviceAddress, _value: u8, _bytes: u64) -> Result<()> {
        Err(unsupported(
            "synchronous_memset",
            "noop has no device memory",
        ))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn blas(&self) -> Option<&dyn BlasSupport> {
        // `None` (the default): the handle layer fails `then_blas_*` with `Unsupported` before
        // it looks at the operands. A backend whose blas.rs works returns `Some(self)`.
        None
    }

    fn rng(&self) -> Option<&dyn RngSupport> {
        // As `blas`: `Some(self)` once rng.rs works.
        None
    }

    fn rpc_capability(&self) -> Option<crate::interface::RpcCapability> {
        // `None` (the default): `StreamExecutor::rpc` fails with `Unsupported`. A backend whose
        // kernels can call the host says how its device clients work (lane size, where the
        // RPC block lives, where the port locks are); see `types/rpc_caps.rs`.
        None
    }
}
