//! Host-platform streams: one worker thread per stream runs its operations in order.

use std::sync::Arc;

use super::block::run_grid;
use super::device::HostExecutor;
use super::event::HostEvent;
use super::kernel::HostKernel;
use super::launch::LaunchCtx;
use super::status::{self, PLATFORM};
use crate::error::{Error, Result};
use crate::interface::{DoneFn, EventInterface, HostCallbackFn, KernelInterface, StreamInterface};
use crate::platform::downcast::{downcast, downcast_arc};
use crate::platform::work_queue::{RunFn, SkipFn, WorkQueue, done_either_way};
use crate::ptx::device_bytes;
use crate::types::HostRegion;
use crate::types::{ArgView, PackedArg};
use crate::types::{DeviceAddress, LaunchDims};

/// A host-platform stream.
pub(crate) struct HostStream {
    shared: Arc<WorkQueue>,
    exec: Arc<HostExecutor>,
}

impl HostStream {
    pub(crate) fn new(exec: Arc<HostExecutor>, name: String) -> Result<Self> {
        let shared = Arc::new(WorkQueue::default());
        shared.spawn(name, PLATFORM)?;
        exec.streams.insert(&shared);
        Ok(HostStream { shared, exec })
    }

    fn push(&self, run: RunFn, skip: Option<SkipFn>) -> Result<()> {
        self.shared.push(run, skip);
        Ok(())
    }

    /// Later work waits for the latest record of `event`. A failed record fails this stream
    /// with `DependencyFailed` when `propagate`, else it is no wait (the default stream's
    /// implicit ordering).
    fn wait(&self, event: &Arc<dyn EventInterface>, what: &str, propagate: bool) -> Result<()> {
        self.push(wait_op(event, what, propagate)?, None)
    }

    /// Queues an operation made by one of the `*_op` functions below (a command buffer's
    /// replay).
    pub(super) fn push_op(&self, run: RunFn) -> Result<()> {
        self.push(run, None)
    }

    /// The executor it runs on.
    pub(super) fn executor(&self) -> &Arc<HostExecutor> {
        &self.exec
    }
}

/// `event` as this platform's (the handle layer refused events of other platforms).
fn host_event(event: &Arc<dyn EventInterface>, operation: &str) -> Result<Arc<HostEvent>> {
    downcast_arc(
        event,
        event.as_any(),
        &format!("the event passed to {operation}"),
    )
}

/// Waits for the latest record of `event` as of now. A failed record fails the stream with
/// `DependencyFailed` when `propagate`, else it is no wait (the default stream's implicit
/// ordering).
pub(super) fn wait_op(
    event: &Arc<dyn EventInterface>,
    what: &str,
    propagate: bool,
) -> Result<RunFn> {
    let ev = host_event(event, what)?;
    let target = ev.wait_target();
    Ok(Box::new(move || match ev.wait_for(target) {
        Err(e) if propagate => Err(Error::dependency("then_wait_for", e)),
        _ => Ok(()),
    }))
}

impl Drop for HostStream {
    fn drop(&mut self) {
        // The worker drains what is queued, then exits; nobody waits for it here.
        self.shared.close();
    }
}

impl StreamInterface for HostStream {
    unsafe fn memcpy_h2d(&self, src: HostRegion, dst: DeviceAddress) -> Result<()> {
        let dst = self.exec.pin(dst, src.len() as u64, "then_memcpy_h2d")?;
        self.push(
            Box::new(move || {
                let bytes = src.lock_read();
                // SAFETY: `dst` pins `bytes.len()` bytes of live device memory.
                unsafe { device_bytes::store_bytes(dst.as_ptr(), &bytes) };
                Ok(())
            }),
            None,
        )
    }

    unsafe fn memcpy_d2h(&self, src: DeviceAddress, mut dst: HostRegion) -> Result<()> {
        let src = self.exec.pin(src, dst.len() as u64, "then_memcpy_d2h")?;
        self.push(
            Box::new(move || {
                let mut bytes = dst.lock_write().ok_or_else(|| {
                    Error::invalid("then_memcpy_d2h", "the host region was lent read-only")
                })?;
                // SAFETY: `src` pins `bytes.len()` bytes of live device memory.
                unsafe { device_bytes::load_bytes(&mut bytes, src.as_ptr()) };
                Ok(())
            }),
            None,
        )
    }

    unsafe fn memcpy_d2d(&self, src: DeviceAddress, dst: DeviceAddress, bytes: u64) -> Result<()> {
        self.push(Box::new(d2d_op(&self.exec, src, dst, bytes)?), None)
    }

    unsafe fn memset8(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()> {
        self.push(Box::new(memset8_op(&self.exec, dst, value, bytes)?), None)
    }

    unsafe fn memset32(&self, dst: DeviceAddress, value: u32, count: u64) -> Result<()> {
        self.push(Box::new(memset32_op(&self.exec, dst, value, count)?), None)
    }

    unsafe fn launch(
        &self,
        kernel: &Arc<dyn KernelInterface>,
        dims: &LaunchDims,
        args: &[PackedArg],
    ) -> Result<()> {
        self.push(launch_op(&self.exec, kernel, dims, args)?, None)
    }
    fn host_callback(&self, f: HostCallbackFn) -> Result<()> {
        self.push(f, None)
    }

    fn notify_done(&self, done: DoneFn) -> Result<()> {
        let (run, skip) = done_either_way(done);
        self.push(run, Some(skip))
    }

    fn record_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        let ev = host_event(event, "then_record_event")?;
        let generation = ev.begin_record();
        let skip_ev = ev.clone();
        self.push(
            Box::new(move || {
                ev.complete(generation, Ok(()));
                Ok(())
            }),
            Some(Box::new(move |e: &Error| {
                skip_ev.complete(generation, Err(e.clone()))
            })),
        )
    }

    fn wait_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        self.wait(event, "then_wait_for", true)
    }

    fn wait_event_for_order(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        self.wait(event, "default stream ordering", false)
    }

    fn block_until_done(&self) -> Result<()> {
        self.shared.wait_idle()
    }

    fn async_error(&self) -> Option<Error> {
        self.shared.error()
    }

    fn native(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

// The operations as closures: a stream queues each alone, a command buffer (see
// command_buffer.rs) prepares them once and queues a whole replay as one. Each pins what it
// touches for its lifetime, and may run any number of times, concurrently too.

/// An operation that may run again (a command buffer's, prepared once).
pub(super) type ReplayFn = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// What the `*_op` builders return: boxed once for a stream, shared for a command buffer.
pub(super) trait Op: Fn() -> Result<()> + Send + Sync + 'static {}
impl<F: Fn() -> Result<()> + Send + Sync + 'static> Op for F {}

/// A device-to-device copy of `bytes`.
pub(super) fn d2d_op(
    exec: &HostExecutor,
    src: DeviceAddress,
    dst: DeviceAddress,
    bytes: u64,
) -> Result<impl Op> {
    let src = exec.pin(src, bytes, "then_memcpy_d2d")?;
    let dst = exec.pin(dst, bytes, "then_memcpy_d2d")?;
    Ok(move || {
        // SAFETY: both pinned for `bytes` bytes.
        unsafe { device_bytes::copy_device(dst.as_ptr(), src.as_ptr(), bytes as usize) };
        Ok(())
    })
}

/// Sets `bytes` bytes at `dst` to `value`.
pub(super) fn memset8_op(
    exec: &HostExecutor,
    dst: DeviceAddress,
    value: u8,
    bytes: u64,
) -> Result<impl Op> {
    let dst = exec.pin(dst, bytes, "then_memset")?;
    Ok(move || {
        // SAFETY: pinned for `bytes` bytes.
        unsafe { device_bytes::fill_u8(dst.as_ptr(), value, bytes as usize) };
        Ok(())
    })
}

/// Sets `count` words at `dst` (4-byte aligned, checked by the caller) to `value`.
pub(super) fn memset32_op(
    exec: &HostExecutor,
    dst: DeviceAddress,
    value: u32,
    count: u64,
) -> Result<impl Op> {
    let dst = exec.pin(dst, count * 4, "then_memset32")?;
    Ok(move || {
        // SAFETY: pinned for `4 * count` bytes; the caller checked 4-byte alignment.
        unsafe { device_bytes::fill_u32(dst.as_ptr(), value, count as usize) };
        Ok(())
    })
}

/// A kernel launch (PTX on the engine, or a native kernel).
pub(super) fn launch_op(
    exec: &HostExecutor,
    kernel: &Arc<dyn KernelInterface>,
    dims: &LaunchDims,
    args: &[PackedArg],
) -> Result<RunFn> {
    // The host platform loads two kinds of kernel: PTX for the engine, else native.
    if let Some(pk) = kernel.as_any().downcast_ref::<super::ptx::PtxKernel>() {
        return super::ptx::prepare(exec, pk, dims, args);
    }
    if dims.cooperative {
        return Err(Error::unsupported(
            super::PLATFORM,
            format!("then_launch_cooperative of `{}`", kernel.name()),
            "cooperative launches on host run PTX kernels (a native kernel has no grid-wide \
             barrier to wait at); launch it with then_launch",
        ));
    }
    Ok(Box::new(native_launch(exec, kernel, dims, args)?))
}

/// A launch prepared once to run any number of times: native kernels (`None` for PTX, whose
/// launch state is per run: a command buffer prepares those at each submit).
pub(super) fn replayable_launch(
    exec: &HostExecutor,
    kernel: &Arc<dyn KernelInterface>,
    dims: &LaunchDims,
    args: &[PackedArg],
) -> Result<Option<ReplayFn>> {
    if kernel.as_any().is::<super::ptx::PtxKernel>() {
        return Ok(None);
    }
    Ok(Some(Arc::new(native_launch(exec, kernel, dims, args)?)))
}

/// A native kernel's launch. Memory its threads reach through pointers that are not arguments
/// is pinned on first use for as long as the launch lives (`LaunchCtx::extra`).
fn native_launch(
    exec: &HostExecutor,
    kernel: &Arc<dyn KernelInterface>,
    dims: &LaunchDims,
    args: &[PackedArg],
) -> Result<impl Op> {
    let hk = downcast::<HostKernel>(kernel.as_any(), "the kernel passed to then_launch")?;
    let name = hk.name().to_string();
    let mut placed = Vec::with_capacity(args.len());
    let mut pins = Vec::new();
    let mut dynamic = 0u64;
    for (i, a) in args.iter().enumerate() {
        match a.view() {
            ArgView::Pointer { addr, bytes } => pins.push(exec.pin_arg(addr, bytes, &name, i)?),
            ArgView::SharedMemory { bytes, .. } => {
                placed.push(a.placed_at(dynamic));
                dynamic += bytes.next_multiple_of(16);
                continue;
            }
            ArgView::Scalar(_) => {}
        }
        placed.push(a.clone());
    }
    let args = placed;
    let shared_limit = exec.description.shared_memory_per_block as usize;
    if dynamic as usize > shared_limit {
        return Err(Error::LaunchConfig {
            platform: PLATFORM,
            kernel: name,
            detail: format!(
                "{dynamic} bytes of dynamic shared memory (each region rounded up to 16) \
                 exceed the {shared_limit} bytes per block"
            ),
        });
    }
    let body = hk.bind(&args)?;
    let launch = LaunchCtx {
        grid: dims.blocks.0,
        block: dims.threads.0,
        dynamic_bytes: dynamic as usize,
        shared_limit,
        pins,
        table: exec.table.clone(),
        extra: Default::default(),
    };
    let pool = exec.pool.clone();
    Ok(move || {
        run_grid(&pool, &launch, &body).map_err(|detail| status::kernel_fault(name.clone(), detail))
    })
}
