//! Streams on a CUDA-like driver: one non-blocking driver stream each, direct submission until
//! the first host callback (see `Submitter`), then a worker thread that runs callbacks after
//! `stream_synchronize`, so a failed callback skips the rest and callbacks may call the driver.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use parking_lot::Mutex;

use super::device::{GpuExecutor, StreamShared};
use super::event::{GpuEvent, WaitTarget};
use super::kernel::GpuKernel;
use super::status::launch_failed;
use super::{Driver, RawStream};
use crate::error::{Error, Result};
use crate::interface::{DoneFn, EventInterface, HostCallbackFn, KernelInterface, StreamInterface};
use crate::platform::downcast::{downcast, downcast_arc};
use crate::platform::work_queue::done_either_way;
use crate::types::{ArgView, DeviceAddress, HostRegion, LaunchDims, PackedArg};

/// A streamexec stream on a CUDA-like driver.
pub(crate) struct GpuStream<D: Driver> {
    shared: Arc<StreamShared<D>>,
}

impl<D: Driver> GpuStream<D> {
    pub(crate) fn new(exec: Arc<GpuExecutor<D>>) -> Result<Self> {
        Ok(GpuStream {
            shared: Arc::new(StreamShared::new(exec)?),
        })
    }

    /// The driver's legacy default stream.
    pub(crate) fn legacy(exec: Arc<GpuExecutor<D>>) -> Self {
        GpuStream {
            shared: Arc::new(StreamShared::legacy(exec)),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<StreamShared<D>> {
        &self.shared
    }

    /// Runs `f` with the driver and the driver stream, in stream order.
    pub(crate) fn submit_driver(
        &self,
        f: impl FnOnce(&D, RawStream) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        let sh = self.shared.clone();
        self.shared.submit(move || f(&sh.drv, sh.raw))
    }

    /// Later work waits for the latest record of `event`. A failed record fails this stream
    /// with `DependencyFailed` when `propagate`, else it is no wait (the default stream's
    /// implicit ordering).
    fn wait(&self, event: &Arc<dyn EventInterface>, what: &str, propagate: bool) -> Result<()> {
        let ev = self.event(event, what)?;
        let failed = move |e: Error| {
            if propagate {
                Err(Error::dependency("then_wait_for", e))
            } else {
                Ok(())
            }
        };
        let sh = self.shared.clone();
        match ev.wait_target() {
            WaitTarget::Nothing => Ok(()),
            WaitTarget::Failed(e) => failed(e),
            WaitTarget::Event(target) => self.shared.submitter.submit(
                Box::new(move || sh.drv.stream_wait_event(sh.raw, target.raw)),
                None,
                false,
            ),
            // Not recorded yet: the stream goes deferred and its worker waits for the record.
            WaitTarget::Later(generation) => self.shared.submitter.submit(
                Box::new(move || match ev.take_published(generation) {
                    Ok(Some(target)) => sh.drv.stream_wait_event(sh.raw, target.raw),
                    Ok(None) => Ok(()),
                    Err(e) => failed(e),
                }),
                None,
                true,
            ),
        }
    }

    /// `event` as this platform's (the handle layer refused events of other platforms).
    fn event(&self, event: &Arc<dyn EventInterface>, what: &str) -> Result<Arc<GpuEvent<D>>> {
        downcast_arc(
            event,
            event.as_any(),
            &format!("the event passed to {what}"),
        )
    }
}

impl<D: Driver> Drop for GpuStream<D> {
    fn drop(&mut self) {
        // The worker (if any) drains what is queued, then exits.
        self.shared.submitter.work().close();
    }
}

/// Releases what an async copy borrowed once the copy is done: through a driver host function
/// where possible, else by waiting for the stream.
fn release_after<D: Driver>(drv: &D, s: RawStream, keep: Box<dyn Send>) -> Result<()> {
    let keep = Arc::new(Mutex::new(Some(keep)));
    let in_fn = keep.clone();
    if let Err(e) = drv.launch_host_fn(s, Box::new(move || drop(in_fn.lock().take()))) {
        let synced = drv.stream_synchronize(s);
        drop(keep.lock().take());
        synced?;
        return Err(e);
    }
    Ok(())
}

impl<D: Driver> StreamInterface for GpuStream<D> {
    unsafe fn memcpy_h2d(&self, src: HostRegion, dst: DeviceAddress) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let sh = self.shared.clone();
        self.shared.submit(move || {
            let guard = src.lock_read();
            // SAFETY: `guard` keeps the host bytes readable until `release_after` drops it
            // once the copy is done; the caller checked the device range.
            unsafe {
                sh.drv
                    .memcpy_htod_async(dst.raw(), guard.as_ptr(), guard.len(), sh.raw)?
            };
            release_after(&*sh.drv, sh.raw, Box::new((guard, src)))
        })
    }

    unsafe fn memcpy_d2h(&self, src: DeviceAddress, mut dst: HostRegion) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let sh = self.shared.clone();
        self.shared.submit(move || {
            let mut guard = dst.lock_write().ok_or_else(|| {
                Error::invalid("then_memcpy_d2h", "the host region was lent read-only")
            })?;
            // SAFETY: `guard` gives exclusive access to the host bytes until `release_after`
            // drops it once the copy is done; the caller checked the device range.
            unsafe {
                sh.drv
                    .memcpy_dtoh_async(guard.as_mut_ptr(), src.raw(), guard.len(), sh.raw)?
            };
            release_after(&*sh.drv, sh.raw, Box::new((guard, dst)))
        })
    }

    unsafe fn memcpy_d2d(&self, src: DeviceAddress, dst: DeviceAddress, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let sh = self.shared.clone();
        // SAFETY: the caller checked both ranges; deallocation fences keep them live.
        self.shared.submit(move || unsafe {
            sh.drv
                .memcpy_dtod_async(dst.raw(), src.raw(), bytes as usize, sh.raw)
        })
    }

    unsafe fn memcpy_peer(
        &self,
        src_exec: &dyn crate::interface::StreamExecutorInterface,
        src: DeviceAddress,
        dst: DeviceAddress,
        bytes: u64,
    ) -> Result<()> {
        // The handle layer refused a source of another platform.
        let src_exec =
            downcast::<GpuExecutor<D>>(src_exec.as_any(), "the source executor of a peer copy")?;
        if bytes == 0 {
            return Ok(());
        }
        // The source device's frees must wait for this stream too.
        src_exec.fence_also(&self.shared);
        let (sh, src_drv) = (self.shared.clone(), src_exec.driver().clone());
        // SAFETY: the caller checked both ranges; fences on both devices keep them live.
        self.shared.submit(move || unsafe {
            sh.drv
                .memcpy_peer_async(dst.raw(), &src_drv, src.raw(), bytes as usize, sh.raw)
        })
    }

    unsafe fn memset8(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let sh = self.shared.clone();
        // SAFETY: the caller checked the range; deallocation fences keep it live.
        self.shared.submit(move || unsafe {
            sh.drv
                .memset_d8_async(dst.raw(), value, bytes as usize, sh.raw)
        })
    }

    unsafe fn memset32(&self, dst: DeviceAddress, value: u32, count: u64) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        let sh = self.shared.clone();
        // SAFETY: the caller checked the range and its 4-byte alignment.
        self.shared.submit(move || unsafe {
            sh.drv
                .memset_d32_async(dst.raw(), value, count as usize, sh.raw)
        })
    }

    unsafe fn launch(
        &self,
        kernel: &Arc<dyn KernelInterface>,
        dims: &LaunchDims,
        args: &[PackedArg],
    ) -> Result<()> {
        let k: Arc<GpuKernel<D>> =
            downcast_arc(kernel, kernel.as_any(), "the kernel passed to then_launch")?;
        let shared_bytes = shared_bytes::<D>(k.name(), dims)?;
        let mut params = PackedParams::new(args);
        let (grid, block) = grid_block(dims);
        let sh = self.shared.clone();
        let cooperative = dims.cooperative;
        self.shared.submit(move || {
            let (f, raw, p) = (k.function(), sh.raw, &mut params.pointers());
            // SAFETY: one pointer per kernel parameter (the signature was checked at load and
            // launch), each to a value of that parameter's size; memory is fenced on free.
            unsafe {
                if cooperative {
                    sh.drv
                        .launch_cooperative(f, grid, block, shared_bytes, raw, p)
                } else {
                    sh.drv.launch(f, grid, block, shared_bytes, raw, p)
                }
            }
            .map_err(|e| launch_failed::<D>(k.name(), e))
        })
    }

    fn host_callback(&self, f: HostCallbackFn) -> Result<()> {
        let sh = self.shared.clone();
        self.shared.submitter.submit(
            Box::new(move || {
                sh.drv.stream_synchronize(sh.raw)?;
                f()
            }),
            None,
            true,
        )
    }

    fn notify_done(&self, done: DoneFn) -> Result<()> {
        // On the stream's worker, as a host callback, not a driver host function: a function
        // queued behind a failed launch might never be called, and `done` must be.
        let (call, skip) = done_either_way(done);
        let sh = self.shared.clone();
        self.shared.submitter.submit(
            Box::new(move || {
                let synced = sh.drv.stream_synchronize(sh.raw);
                let _ = call();
                synced
            }),
            Some(skip),
            true,
        )
    }

    fn record_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        let ev = self.event(event, "then_record_event")?;
        self.shared.record(ev).map(drop)
    }

    fn wait_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        self.wait(event, "then_wait_for", true)
    }

    fn wait_event_for_order(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        self.wait(event, "default stream ordering", false)
    }

    fn block_until_done(&self) -> Result<()> {
        self.shared.finish()
    }

    fn async_error(&self) -> Option<Error> {
        self.shared.error.lock().clone()
    }

    fn native(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

/// Kernel parameter values for the driver, each at an 8-byte aligned slot of one buffer:
/// SharedMemory arguments are a launch attribute in CUDA and HIP, not parameters.
pub(super) struct PackedParams {
    storage: Vec<u64>,
    offsets: Vec<usize>,
}

impl PackedParams {
    pub(super) fn new(args: &[PackedArg]) -> Self {
        let mut storage: Vec<u64> = Vec::with_capacity(args.len());
        let mut offsets = Vec::with_capacity(args.len());
        for a in args {
            let pointer;
            let bytes: &[u8] = match a.view() {
                ArgView::Scalar(bytes) => bytes,
                ArgView::Pointer { addr, .. } => {
                    pointer = addr.raw().to_ne_bytes();
                    &pointer
                }
                ArgView::SharedMemory { .. } => continue,
            };
            let at = storage.len();
            storage.resize(at + bytes.len().div_ceil(8).max(1), 0);
            bytemuck::cast_slice_mut::<u64, u8>(&mut storage[at..])[..bytes.len()]
                .copy_from_slice(bytes);
            offsets.push(at);
        }
        PackedParams { storage, offsets }
    }

    /// One pointer per parameter, into `self` (valid while `self` is neither moved nor
    /// dropped; the driver copies the values when a launch is enqueued or a node is made).
    pub(super) fn pointers(&mut self) -> Vec<*mut c_void> {
        let base = self.storage.as_mut_ptr();
        self.offsets
            .iter()
            // SAFETY: every offset is inside `storage`.
            .map(|&w| unsafe { base.add(w) } as *mut c_void)
            .collect()
    }
}

/// A launch's grid and block extents in the driver's order.
pub(super) fn grid_block(dims: &LaunchDims) -> ([u32; 3], [u32; 3]) {
    let (t, b) = (dims.threads.0, dims.blocks.0);
    ([b.x, b.y, b.z], [t.x, t.y, t.z])
}

/// A launch's dynamic shared memory as the driver's 32-bit size.
pub(super) fn shared_bytes<D: Driver>(kernel: &str, dims: &LaunchDims) -> Result<u32> {
    u32::try_from(dims.dynamic_shared_bytes).map_err(|_| Error::LaunchConfig {
        platform: D::PLATFORM,
        kernel: kernel.into(),
        detail: format!(
            "{} bytes of dynamic shared memory do not fit the driver's 32-bit size",
            dims.dynamic_shared_bytes
        ),
    })
}
