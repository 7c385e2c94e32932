//! OpenCL streams: one in-order, profiling command queue per stream.
//!
//! Host memory lent to a copy (`HostRegion` and its lock guard) is released by an event
//! callback when the copy completes.
//!
//! Two submission modes. Direct: each `then_*` enqueues its OpenCL command at once. Deferred,
//! from the first host callback (or wait on a deferred record) on: operations go to a per-stream
//! worker thread that enqueues them in order, waits for earlier commands before running a host
//! callback, and skips everything after a failure — so a failed callback really stops the rest
//! of the chain (failing a user event instead crashes PoCL 3.1) and callbacks may call blocking
//! OpenCL APIs.
//!
//! On devices with red zones (`red_zone.rs`) each launch that takes a buffer registers the
//! check of the buffers' red zones on its completion; a failed check fails the stream with
//! `Error::KernelFault`, which `finish` and host callbacks wait for.

use std::ffi::c_void;
use std::sync::Arc;

use opencl3::memory::{Buffer, CL_BUFFER_CREATE_TYPE_REGION, CL_MEM_READ_WRITE, cl_buffer_region};
use opencl3::types::{CL_NON_BLOCKING, cl_int, cl_kernel, cl_mem};

use super::device::OpenClExecutor;
use super::event::{DeferredRecord, OpenClEvent, WaitTarget, wait_event};
use super::kernel::OpenClKernel;
use super::memory::{ClAlloc, copy, keep_svm, keep_until_complete};
use super::queue::StreamShared;
use super::red_zone_check::{self, CheckJob};
use super::status::{PLATFORM, cl_error, error_text};
use crate::error::{Error, Result};
use crate::interface::{DoneFn, EventInterface, HostCallbackFn, KernelInterface, StreamInterface};
use crate::platform::downcast::{downcast, downcast_arc};
use crate::platform::work_queue::done_either_way;
use crate::types::{ArgView, DeviceAddress, HostRegion, LaunchDims, PackedArg};

impl Drop for OpenClStream {
    fn drop(&mut self) {
        // The worker (if any) drains what is queued, then exits.
        self.shared.submitter.work().close();
    }
}

/// A streamexec stream on OpenCL.
pub(crate) struct OpenClStream {
    exec: Arc<OpenClExecutor>,
    shared: Arc<StreamShared>,
}

impl OpenClStream {
    pub(crate) fn new(exec: Arc<OpenClExecutor>) -> Result<Self> {
        let shared = Arc::new(StreamShared::new(&exec.context)?);
        Ok(OpenClStream { exec, shared })
    }

    pub(crate) fn shared(&self) -> &Arc<StreamShared> {
        &self.shared
    }

    pub(crate) fn executor(&self) -> &Arc<OpenClExecutor> {
        &self.exec
    }
}

/// A `Send` wrapper for an OpenCL handle moved into a queued operation.
struct SendHandle<T>(T);
// SAFETY: OpenCL handles (kernels under their Mutex, events, memory) are thread-safe.
unsafe impl<T> Send for SendHandle<T> {}

impl StreamInterface for OpenClStream {
    unsafe fn memcpy_h2d(&self, src: HostRegion, dst: DeviceAddress) -> Result<()> {
        let (alloc, off) = self
            .exec
            .resolve(dst, src.len() as u64, "then_memcpy_h2d")?;
        if src.is_empty() {
            return Ok(());
        }
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || {
                let guard = src.lock_read();
                // SAFETY: `guard` keeps the host bytes readable until the callback registered
                // below releases it after the copy; the device range is live and in bounds.
                let raw = unsafe {
                    alloc.write(
                        shared.queue.get(),
                        CL_NON_BLOCKING,
                        off,
                        guard.as_ptr() as *const c_void,
                        guard.len(),
                    )
                }
                .map_err(|e| cl_error("clEnqueueWriteBuffer / clEnqueueSVMMemcpy", e))?;
                keep_until_complete(&shared.track(raw), Box::new((guard, src, alloc)));
                Ok(())
            }),
            None,
            false,
        )
    }

    unsafe fn memcpy_d2h(&self, src: DeviceAddress, mut dst: HostRegion) -> Result<()> {
        let (alloc, off) = self
            .exec
            .resolve(src, dst.len() as u64, "then_memcpy_d2h")?;
        if dst.is_empty() {
            return Ok(());
        }
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || {
                let mut guard = dst.lock_write().ok_or_else(|| {
                    Error::invalid("then_memcpy_d2h", "the host region was lent read-only")
                })?;
                // SAFETY: `guard` gives exclusive access to the host bytes until the callback
                // releases it after the copy; the device range is live and in bounds.
                let raw = unsafe {
                    alloc.read(
                        shared.queue.get(),
                        CL_NON_BLOCKING,
                        off,
                        guard.as_mut_ptr() as *mut c_void,
                        guard.len(),
                    )
                }
                .map_err(|e| cl_error("clEnqueueReadBuffer / clEnqueueSVMMemcpy", e))?;
                keep_until_complete(&shared.track(raw), Box::new((guard, dst, alloc)));
                Ok(())
            }),
            None,
            false,
        )
    }

    unsafe fn memcpy_d2d(&self, src: DeviceAddress, dst: DeviceAddress, bytes: u64) -> Result<()> {
        let (sa, so) = self.exec.resolve(src, bytes, "then_memcpy_d2d")?;
        let (da, doff) = self.exec.resolve(dst, bytes, "then_memcpy_d2d")?;
        if bytes == 0 {
            return Ok(());
        }
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || {
                // SAFETY: both ranges are live and in bounds.
                let raw = unsafe { copy(shared.queue.get(), &sa, so, &da, doff, bytes as usize) }
                    .map_err(|e| cl_error("clEnqueueCopyBuffer / clEnqueueSVMMemcpy", e))?;
                keep_svm(&shared.track(raw), &[&sa, &da]);
                Ok(())
            }),
            None,
            false,
        )
    }

    unsafe fn memset8(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()> {
        self.fill(dst, value.to_ne_bytes().to_vec(), bytes, "then_memset")
    }

    unsafe fn memset32(&self, dst: DeviceAddress, value: u32, count: u64) -> Result<()> {
        self.fill(
            dst,
            value.to_ne_bytes().to_vec(),
            count * 4,
            "then_memset32",
        )
    }

    unsafe fn launch(
        &self,
        kernel: &Arc<dyn KernelInterface>,
        dims: &LaunchDims,
        args: &[PackedArg],
    ) -> Result<()> {
        let kernel: Arc<OpenClKernel> =
            downcast_arc(kernel, kernel.as_any(), "the kernel passed to then_launch")?;
        // Resolve pointers now, so a bad pointer is an enqueue-time error.
        let resolved = resolve_args(&self.exec, &kernel, args, "then_launch")?;
        let (args, dims) = (args.to_vec(), *dims);
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || enqueue_kernel(&shared, &kernel, &dims, &args, resolved)),
            None,
            false,
        )
    }

    fn host_callback(&self, f: HostCallbackFn) -> Result<()> {
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || {
                wait_event(&shared.marker()?)?;
                shared.checks.wait_idle();
                // A red-zone check of an earlier launch may have failed the stream meanwhile.
                if let Some(e) = shared.error.lock().clone() {
                    return Err(e);
                }
                f()
            }),
            None,
            true,
        )
    }

    fn notify_done(&self, done: DoneFn) -> Result<()> {
        let (call, skip) = done_either_way(done);
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || {
                let finished = shared.marker().and_then(|m| wait_event(&m));
                shared.checks.wait_idle();
                let _ = call();
                finished
            }),
            Some(skip),
            true,
        )
    }

    fn record_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        let ev = downcast::<OpenClEvent>(event.as_any(), "the event passed to then_record_event")?;
        if !self.shared.is_deferred() {
            ev.set_recorded(self.shared.marker()?);
            return Ok(());
        }
        let rec = Arc::new(DeferredRecord::default());
        ev.set_deferred(rec.clone());
        let (shared, skipped) = (self.shared.clone(), rec.clone());
        self.shared.submit(
            Box::new(move || {
                let marker = shared.marker();
                match marker {
                    Ok(m) => {
                        rec.resolve(Ok(m));
                        Ok(())
                    }
                    Err(e) => {
                        rec.resolve(Err(e.clone()));
                        Err(e)
                    }
                }
            }),
            Some(Box::new(move |e: &Error| skipped.resolve(Err(e.clone())))),
            false,
        )
    }

    fn wait_event(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        wait(&self.shared, event, "then_wait_for", true)
    }

    fn wait_event_for_order(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        wait(&self.shared, event, "default stream ordering", false)
    }

    fn block_until_done(&self) -> Result<()> {
        self.shared.finish()
    }

    fn async_error(&self) -> Option<Error> {
        self.shared.error.lock().clone()
    }

    fn native(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// Later work of `shared` waits for the latest record of `event`. A failed record fails the
/// stream with `DependencyFailed` when `propagate`, else it is no wait (the default stream's
/// implicit ordering).
fn wait(
    shared: &Arc<StreamShared>,
    event: &Arc<dyn EventInterface>,
    what: &str,
    propagate: bool,
) -> Result<()> {
    let ev = downcast::<OpenClEvent>(event.as_any(), &format!("the event passed to {what}"))?;
    let failed = move |e: Error| {
        if propagate {
            Err(Error::dependency("then_wait_for", e))
        } else {
            Ok(())
        }
    };
    let sh = shared.clone();
    match ev.wait_target() {
        WaitTarget::Nothing => Ok(()),
        WaitTarget::Failed(e) => failed(e),
        WaitTarget::Event(target) => {
            let target = SendHandle(target);
            shared.submit(Box::new(move || sh.barrier_on(&target.0)), None, false)
        }
        WaitTarget::Deferred(rec) => shared.submit(
            Box::new(move || match rec.wait() {
                Ok(target) => sh.barrier_on(&target),
                Err(e) => failed(e),
            }),
            None,
            true,
        ),
    }
}

/// The allocation and byte offset behind each argument of a launch (`None` but for pointers).
pub(super) type ResolvedArgs = Vec<Option<(Arc<ClAlloc>, usize)>>;

/// The allocation and byte offset behind every pointer argument (`None` for other kinds), so
/// a bad pointer is an error before anything is enqueued or recorded.
pub(super) fn resolve_args(
    exec: &OpenClExecutor,
    k: &OpenClKernel,
    args: &[PackedArg],
    what: &str,
) -> Result<ResolvedArgs> {
    let mut resolved = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        resolved.push(match a.view() {
            ArgView::Pointer { addr, bytes } => {
                Some(exec.try_resolve(addr, bytes).ok_or_else(|| {
                    Error::invalid(
                        format!("{what} of `{}` (argument {i})", k.name()),
                        format!(
                            "{bytes} bytes at {addr} are not inside one live allocation of \
                             this device"
                        ),
                    )
                })?)
            }
            _ => None,
        });
    }
    Ok(resolved)
}

/// What [`set_kernel_args`] made or borrowed that must outlive the commands that use the
/// arguments: sub-buffers for pointers at an offset, and SVM allocations.
#[derive(Default)]
pub(super) struct ArgKeep {
    pub(super) subs: Vec<Buffer<u8>>,
    pub(super) svm: Vec<Arc<ClAlloc>>,
}

/// Sets every argument of kernel `kh` (`name` and `what`, the operation, for messages).
///
/// # Safety
/// No other thread sets arguments on `kh` meanwhile (its lock is held, or it is private), its
/// signature was checked against `args`, and `resolved` is `resolve_args` of `args`.
pub(super) unsafe fn set_kernel_args(
    kh: cl_kernel,
    name: &str,
    what: &str,
    args: &[PackedArg],
    resolved: ResolvedArgs,
) -> Result<ArgKeep> {
    let set_err = |i: usize, e: cl_int| {
        Error::invalid(
            format!("{what} of `{name}`"),
            format!("argument {i}: clSetKernelArg failed: {}", error_text(e)),
        )
    };
    let mut keep = ArgKeep::default();
    for (i, (a, res)) in args.iter().zip(resolved).enumerate() {
        let r = match (a.view(), res) {
            // SAFETY: `bytes` is the scalar's value, of the size the signature check accepted.
            (ArgView::Scalar(bytes), _) => unsafe {
                opencl3::kernel::set_kernel_arg(
                    kh,
                    i as u32,
                    bytes.len(),
                    bytes.as_ptr() as *const c_void,
                )
            },
            (ArgView::Pointer { bytes, .. }, Some((alloc, off))) => {
                if let Some(p) = alloc.svm_ptr(off) {
                    keep.svm.push(alloc);
                    // SAFETY: an SVM pointer into a live fine-grained allocation.
                    unsafe { opencl3::kernel::set_kernel_arg_svm_pointer(kh, i as u32, p) }
                } else {
                    let parent = alloc.buffer().expect("not SVM, so a buffer"); // ok: checked
                    let mem: cl_mem = if off == 0 || bytes == 0 {
                        parent
                    } else {
                        let region = cl_buffer_region {
                            origin: off,
                            size: bytes as usize,
                        };
                        // SAFETY: a region inside the live parent buffer.
                        let sub = unsafe {
                            opencl3::memory::create_sub_buffer(
                                parent,
                                CL_MEM_READ_WRITE,
                                CL_BUFFER_CREATE_TYPE_REGION,
                                &region as *const cl_buffer_region as *const c_void,
                            )
                        }
                        .map_err(|e| {
                            Error::invalid(
                                format!("{what} of `{name}`"),
                                format!(
                                    "argument {i}: a sub-slice at byte offset {off} needs a sub-buffer, \
                                     which failed: {}; slice at multiples of the device's base address \
                                     alignment",
                                    error_text(e)
                                ),
                            )
                        })?;
                        keep.subs.push(Buffer::<u8>::new(sub));
                        sub
                    };
                    // SAFETY: a cl_mem argument by value.
                    unsafe {
                        opencl3::kernel::set_kernel_arg(
                            kh,
                            i as u32,
                            std::mem::size_of::<cl_mem>(),
                            &mem as *const cl_mem as *const c_void,
                        )
                    }
                }
            }
            // SAFETY: a __local argument: size only, no value.
            (ArgView::SharedMemory { bytes, .. }, _) => unsafe {
                opencl3::kernel::set_kernel_arg(
                    kh,
                    i as u32,
                    bytes.max(1) as usize,
                    std::ptr::null(),
                )
            },
            (ArgView::Pointer { .. }, None) => unreachable!("pointers are resolved at enqueue"), // ok
        };
        r.map_err(|e| set_err(i, e))?;
    }
    Ok(keep)
}

/// The 3-D global and local work sizes of a launch.
pub(super) fn work_sizes(dims: &LaunchDims) -> ([usize; 3], [usize; 3]) {
    let (t, b) = (dims.threads.0, dims.blocks.0);
    let local = [t.x as usize, t.y as usize, t.z as usize];
    let global = [
        local[0] * b.x as usize,
        local[1] * b.y as usize,
        local[2] * b.z as usize,
    ];
    (global, local)
}

/// Index, address, allocation and byte offset of every pointer argument.
pub(super) fn pointer_args<'a>(
    args: &'a [PackedArg],
    resolved: &'a ResolvedArgs,
) -> impl Iterator<Item = (usize, DeviceAddress, Arc<ClAlloc>, usize)> + 'a {
    args.iter()
        .zip(resolved)
        .enumerate()
        .filter_map(|(i, (a, r))| match (a.view(), r) {
            (ArgView::Pointer { addr, .. }, Some((alloc, off))) => {
                Some((i, addr, alloc.clone(), *off))
            }
            _ => None,
        })
}

/// Sets the arguments and enqueues the launch, then registers the red-zone check of its buffers
/// on its completion (on devices with red zones).
fn enqueue_kernel(
    shared: &StreamShared,
    k: &OpenClKernel,
    dims: &LaunchDims,
    args: &[PackedArg],
    resolved: ResolvedArgs,
) -> Result<()> {
    let name = k.name();
    let check = CheckJob::new(name, pointer_args(args, &resolved), shared);
    let guard = k.kernel.lock();
    let kh = guard.get();
    // SAFETY: the kernel's lock is held; its signature was checked at launch and the pointers
    // resolved by `launch`.
    let keep = unsafe { set_kernel_args(kh, name, "then_launch", args, resolved)? };
    let (global, local) = work_sizes(dims);
    // SAFETY: every argument is set; the sizes describe a 3-D range.
    let raw = unsafe {
        opencl3::command_queue::enqueue_nd_range_kernel(
            shared.queue.get(),
            kh,
            3,
            std::ptr::null(),
            global.as_ptr(),
            local.as_ptr(),
            0,
            std::ptr::null(),
        )
    }
    .map_err(|e| Error::LaunchConfig {
        platform: PLATFORM,
        kernel: name.to_string(),
        detail: format!("clEnqueueNDRangeKernel failed: {} ({e})", error_text(e)),
    })?;
    drop(keep.subs); // OpenCL keeps sub-buffers alive for the enqueued command
    drop(guard);
    let ev = shared.track(raw);
    if !keep.svm.is_empty() {
        keep_until_complete(&ev, Box::new(keep.svm)); // SVM must outlive the kernel
    }
    if let Some(job) = check {
        red_zone_check::check_on_complete(shared, &ev, job);
    }
    Ok(())
}

impl OpenClStream {
    fn fill(&self, dst: DeviceAddress, pattern: Vec<u8>, bytes: u64, what: &str) -> Result<()> {
        let (alloc, off) = self.exec.resolve(dst, bytes, what)?;
        if bytes == 0 {
            return Ok(());
        }
        let shared = self.shared.clone();
        self.shared.submit(
            Box::new(move || {
                // SAFETY: a fill of a live, in-bounds range; the pattern is copied at enqueue.
                let raw = unsafe { alloc.fill(shared.queue.get(), off, &pattern, bytes as usize) }
                    .map_err(|e| cl_error("clEnqueueFillBuffer / clEnqueueSVMMemFill", e))?;
                keep_svm(&shared.track(raw), &[&alloc]);
                Ok(())
            }),
            None,
            false,
        )
    }
}
