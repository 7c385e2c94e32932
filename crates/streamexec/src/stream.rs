//! `Stream`: an in-order queue of device work with a fluent `then_*` chain.
//!
//! StreamExecutor's error model: the first failure puts the stream in an error state and
//! every later `then_*` is skipped. The stream keeps that first `Error`, and
//! `block_host_until_done`, `status` and every stream that waits on this one report it.
//! Failures found when an operation is enqueued (bounds, ownership, launch limits) and failures
//! while it runs (a kernel panic, a failed callback) are both caught; a run-time failure is
//! earlier in chain order than any enqueue-time failure seen after it, so it wins.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytemuck::Pod;
use parking_lot::Mutex;

use crate::error::{Error, Result, panic_message};
use crate::event::{Event, Timer};
use crate::executor::{StreamExecutor, check_same_len};
use crate::interface::StreamInterface;
use crate::kernel::{Kernel, TypedKernel};
use crate::memory::DeviceSlice;
use crate::stream_order::SharedStream;
use crate::types::{
    ArgList, ArgView, BlockDim, HostMemory, KernelArgs, LaunchDims, PackedArg, ThreadDim,
};

/// Something a stream can wait for: an [`Event`] or another [`Stream`].
pub trait Waitable {
    /// Makes `stream`'s later work wait for `self`.
    fn enqueue_wait(&self, stream: &Stream) -> Result<()>;
}

impl Waitable for Event {
    fn enqueue_wait(&self, stream: &Stream) -> Result<()> {
        stream.check_same_platform(self.executor(), "then_wait_for", "event")?;
        stream.iface().wait_event(&self.inner)
    }
}

impl Waitable for Stream {
    fn enqueue_wait(&self, stream: &Stream) -> Result<()> {
        if let Some(e) = self.first_error() {
            return Err(Error::dependency("then_wait_for(stream)", e));
        }
        stream.check_same_platform(&self.exec, "then_wait_for(stream)", "stream")?;
        let event = self.exec.interface().create_event()?;
        self.iface().record_event(&event)?;
        stream.iface().wait_event(&event)
    }
}

/// An in-order queue of device work. See the module docs for the error model.
pub struct Stream {
    exec: StreamExecutor,
    /// The backend stream, shared with the other handles on it (the default stream's).
    shared: Arc<SharedStream>,
    error: Option<Error>,
    /// Philox seed and block offset for `then_populate_rand_*` (src/rng.rs).
    pub(crate) rng: Option<crate::types::philox::PhiloxStream>,
}

impl Stream {
    pub(crate) fn new(exec: StreamExecutor, shared: Arc<SharedStream>) -> Self {
        Stream {
            exec,
            shared,
            error: None,
            rng: None,
        }
    }

    /// The executor it runs on.
    pub fn executor(&self) -> &StreamExecutor {
        &self.exec
    }

    fn first_error(&self) -> Option<Error> {
        self.iface().async_error().or_else(|| self.error.clone())
    }

    /// True while no failure is known (does not wait for queued work).
    pub fn ok(&self) -> bool {
        self.first_error().is_none()
    }

    /// The first failure known so far (does not wait for queued work).
    pub fn status(&self) -> Result<()> {
        self.first_error().map_or(Ok(()), Err)
    }

    /// `InvalidArgument` unless `other` (the executor of an event or stream handed to
    /// `operation`) is of this stream's platform: a backend only understands its own objects.
    fn check_same_platform(
        &self,
        other: &StreamExecutor,
        operation: &str,
        what: &str,
    ) -> Result<()> {
        if other.platform_name() == self.exec.platform_name() {
            return Ok(());
        }
        Err(Error::invalid(
            operation,
            format!(
                "the {what} belongs to another platform ({} device {}), not to this stream's {}; \
                 synchronize across platforms on the host (block_host_until_done)",
                other.platform_name(),
                other.device_ordinal(),
                self.exec.platform_name()
            ),
        ))
    }

    /// The backend stream, for canned operations (src/blas.rs, src/rng.rs).
    pub(crate) fn iface(&self) -> &dyn StreamInterface {
        self.shared.iface.as_ref()
    }

    /// Runs `op` unless the stream has failed; stores its error if it fails.
    pub(crate) fn enqueue(&mut self, op: impl FnOnce(&Stream) -> Result<()>) -> &mut Self {
        self.enqueue_or_skip(op, |_| {})
    }

    /// [`enqueue`](Self::enqueue), calling `skipped` with the stream's error instead of `op`
    /// when the stream has failed. One check decides: a failure that arrives from the device
    /// meanwhile cannot both pass a caller's check and skip `op`.
    pub(crate) fn enqueue_or_skip(
        &mut self,
        op: impl FnOnce(&Stream) -> Result<()>,
        skipped: impl FnOnce(Error),
    ) -> &mut Self {
        if self.error.is_none() {
            self.error = self.iface().async_error();
        }
        if let Some(e) = &self.error {
            skipped(e.clone());
            return self;
        }
        // The default stream's implicit waits (stream_order.rs), then the operation.
        let order = self.exec.stream_order();
        match order
            .before_op(&self.shared, self.exec.interface().as_ref())
            .and_then(|()| op(self))
        {
            Ok(()) => self.shared.count_op(),
            Err(e) => self.error = Some(e),
        }
        self
    }

    pub(crate) fn check_slice<T: Pod>(
        &self,
        s: &DeviceSlice<'_, T>,
        operation: &str,
    ) -> Result<()> {
        self.exec.check_owner(s.owner(), operation)
    }

    /// Launches `kernel` on `blocks` × `threads` with `args`.
    pub fn then_launch<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> &mut Self {
        self.launch_typed_maybe_rpc(threads.into(), blocks.into(), kernel, args, false)
    }

    /// [`then_launch`](Self::then_launch) of the kernel `load` returns for this stream's
    /// executor; a failed load fails the stream like a failed launch. On a stream that has
    /// already failed, `load` is not called. The launchers that `streamexec-build` generates
    /// call it with their cached `load`, so `module::launch(&mut stream, threads, blocks,
    /// args..)` is the whole call.
    pub fn then_launch_with<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        load: impl FnOnce(&StreamExecutor) -> Result<TypedKernel<Args>>,
        args: Args,
    ) -> &mut Self {
        if self.error.is_none() {
            self.error = self.iface().async_error();
        }
        if self.error.is_some() {
            return self;
        }
        match load(&self.exec) {
            Ok(kernel) => self.then_launch(threads, blocks, &kernel, args),
            Err(e) => {
                self.error = Some(e);
                self
            }
        }
    }

    /// A typed launch, through the executor's RPC server when the kernel's module defines
    /// `__llvm_rpc_client` (its kernels may call the server).
    fn launch_typed_maybe_rpc<Args: KernelArgs>(
        &mut self,
        threads: ThreadDim,
        blocks: BlockDim,
        kernel: &TypedKernel<Args>,
        args: Args,
        cooperative: bool,
    ) -> &mut Self {
        let launch = |s: &mut Self| {
            s.enqueue(|s| {
                s.launch_packed(threads, blocks, &kernel.kernel, args.pack(), cooperative)
            });
        };
        if kernel.kernel.rpc {
            return self.with_rpc(kernel.name(), launch);
        }
        launch(self);
        self
    }

    pub(crate) fn launch_typed<Args: KernelArgs>(
        &mut self,
        threads: ThreadDim,
        blocks: BlockDim,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> &mut Self {
        self.enqueue(|s| s.launch_packed(threads, blocks, &kernel.kernel, args.pack(), false))
    }

    /// Launches `kernel` as a cooperative grid, CUDA's `cudaLaunchCooperativeKernel`: every
    /// block is resident at once, so the blocks may wait for each other (a grid-wide barrier,
    /// `this_grid().sync()`). At most [`max_cooperative_blocks`] blocks; a platform without
    /// cooperative launches (0 there) fails the stream with [`Error::Unsupported`].
    ///
    /// [`max_cooperative_blocks`]: crate::DeviceDescription::max_cooperative_blocks
    pub fn then_launch_cooperative<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> &mut Self {
        self.launch_typed_maybe_rpc(threads.into(), blocks.into(), kernel, args, true)
    }

    /// [`then_launch_cooperative`](Self::then_launch_cooperative) with a run-time argument
    /// list, checked as [`then_launch_untyped`](Self::then_launch_untyped) checks it.
    pub fn then_launch_cooperative_untyped(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &Kernel,
        args: &ArgList,
    ) -> &mut Self {
        self.launch_untyped(threads.into(), blocks.into(), kernel, args, true)
    }

    /// Launches a kernel with a run-time argument list; the list is checked against the
    /// kernel's signature where the format carries one.
    pub fn then_launch_untyped(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &Kernel,
        args: &ArgList,
    ) -> &mut Self {
        self.launch_untyped(threads.into(), blocks.into(), kernel, args, false)
    }

    fn launch_untyped(
        &mut self,
        threads: ThreadDim,
        blocks: BlockDim,
        kernel: &Kernel,
        args: &ArgList,
        cooperative: bool,
    ) -> &mut Self {
        let launch = |s: &mut Self| {
            s.enqueue(|s| {
                kernel.inner.verify_signature(&args.kinds())?;
                s.launch_packed(
                    threads,
                    blocks,
                    kernel,
                    args.as_slice().to_vec(),
                    cooperative,
                )
            });
        };
        if kernel.rpc {
            return self.with_rpc(kernel.name(), launch);
        }
        launch(self);
        self
    }

    fn launch_packed(
        &self,
        threads: ThreadDim,
        blocks: BlockDim,
        kernel: &Kernel,
        args: Vec<PackedArg>,
        cooperative: bool,
    ) -> Result<()> {
        let dims = check_launch(
            &self.exec,
            threads,
            blocks,
            kernel,
            &args,
            cooperative,
            |i, a, addr, bytes| {
                // Every pointer a user can pass was packed from a `DevicePtr`.
                self.exec
                    .check_pointer(a.origin().unwrap_or_default(), addr, bytes, || {
                        format!("then_launch of `{}` (argument {i})", kernel.name())
                    })
            },
        )?;
        // SAFETY: the geometry and shared memory are within the device's limits, the kernel
        // was loaded by this executor (and its signature checked at load or above), and every
        // pointer argument is owned by this executor and inside a live allocation (checked
        // above).
        unsafe { self.iface().launch(&kernel.inner, &dims, &args) }
    }

    /// Copies `src` to `dst` (same length). `src` stays readable; writing it waits for the copy.
    pub fn then_memcpy_h2d<'a, T: Pod>(
        &mut self,
        src: &HostMemory<T>,
        dst: impl Into<DeviceSlice<'a, T>>,
    ) -> &mut Self {
        let dst = dst.into();
        self.enqueue(|s| {
            s.check_slice(&dst, "then_memcpy_h2d")?;
            check_same_len(src.len(), dst.len(), "then_memcpy_h2d")?;
            // SAFETY: `dst` borrows live memory of this executor (owner checked); the region
            // has exactly its size.
            unsafe { s.iface().memcpy_h2d(src.region_for_read(), dst.address()) }
        })
    }

    /// Copies `src` into `dst` (same length). Reading `dst` waits for the copy.
    pub fn then_memcpy_d2h<'a, T: Pod>(
        &mut self,
        src: impl Into<DeviceSlice<'a, T>>,
        dst: &mut HostMemory<T>,
    ) -> &mut Self {
        let src = src.into();
        self.enqueue(|s| {
            s.check_slice(&src, "then_memcpy_d2h")?;
            check_same_len(dst.len(), src.len(), "then_memcpy_d2h")?;
            // SAFETY: `src` borrows live memory of this executor (owner checked); the region
            // has exactly its size.
            unsafe { s.iface().memcpy_d2h(src.address(), dst.region_for_write()) }
        })
    }

    /// Copies device memory to device memory (same length).
    pub fn then_memcpy_d2d<'a, 'b, T: Pod>(
        &mut self,
        src: impl Into<DeviceSlice<'a, T>>,
        dst: impl Into<DeviceSlice<'b, T>>,
    ) -> &mut Self {
        let (src, dst) = (src.into(), dst.into());
        self.enqueue(|s| {
            s.check_slice(&src, "then_memcpy_d2d")?;
            s.check_slice(&dst, "then_memcpy_d2d")?;
            check_d2d_len(src.len(), dst.len(), "then_memcpy_d2d")?;
            // SAFETY: both slices borrow live memory of this executor (owners checked) and
            // have the same size.
            unsafe {
                s.iface()
                    .memcpy_d2d(src.address(), dst.address(), dst.size_bytes())
            }
        })
    }

    /// Copies `src`, memory of `src_exec` (another device of the same platform), into `dst` on
    /// this stream's device (same length). Where the platform has no peer copies the stream
    /// fails with `Unsupported`.
    pub fn then_memcpy_peer<'a, 'b, T: Pod>(
        &mut self,
        src_exec: &StreamExecutor,
        src: impl Into<DeviceSlice<'a, T>>,
        dst: impl Into<DeviceSlice<'b, T>>,
    ) -> &mut Self {
        let (src, dst) = (src.into(), dst.into());
        self.enqueue(|s| {
            src_exec.check_owner(src.owner(), "then_memcpy_peer (source)")?;
            s.check_slice(&dst, "then_memcpy_peer (destination)")?;
            if src_exec.platform_name() != s.exec.platform_name() {
                return Err(Error::invalid(
                    "then_memcpy_peer",
                    "the source belongs to another platform; stage the copy through host memory",
                ));
            }
            check_d2d_len(src.len(), dst.len(), "then_memcpy_peer")?;
            // SAFETY: `src` borrows live memory of `src_exec`, `dst` of this executor (owners
            // checked), both of the same size.
            unsafe {
                s.iface().memcpy_peer(
                    src_exec.interface().as_ref(),
                    src.address(),
                    dst.address(),
                    dst.size_bytes(),
                )
            }
        })
    }

    /// Sets every byte of `dst` to `value`.
    pub fn then_memset<'a, T: Pod>(
        &mut self,
        dst: impl Into<DeviceSlice<'a, T>>,
        value: u8,
    ) -> &mut Self {
        let dst = dst.into();
        self.enqueue(|s| {
            s.check_slice(&dst, "then_memset")?;
            // SAFETY: `dst` borrows live memory of this executor (owner checked).
            unsafe { s.iface().memset8(dst.address(), value, dst.size_bytes()) }
        })
    }

    /// Sets every 32-bit word of `dst` to `pattern`; `dst`'s size must be a multiple of 4.
    pub fn then_memset32<'a, T: Pod>(
        &mut self,
        dst: impl Into<DeviceSlice<'a, T>>,
        pattern: u32,
    ) -> &mut Self {
        let dst = dst.into();
        self.enqueue(|s| {
            s.check_slice(&dst, "then_memset32")?;
            check_words(&dst, "then_memset32")?;
            // SAFETY: `dst` borrows live memory of this executor (owner checked), 4-aligned
            // and a whole number of words.
            unsafe {
                s.iface()
                    .memset32(dst.address(), pattern, dst.size_bytes() / 4)
            }
        })
    }

    /// Sets every byte of `dst` to zero.
    pub fn then_mem_zero<'a, T: Pod>(&mut self, dst: impl Into<DeviceSlice<'a, T>>) -> &mut Self {
        self.then_memset(dst, 0)
    }

    /// Runs `f` on a host thread after earlier work; later work waits for it. A panic in `f`
    /// fails the stream with its message.
    pub fn then_host_callback(&mut self, f: impl FnOnce() + Send + 'static) -> &mut Self {
        self.then_host_callback_with_status(move || {
            f();
            Ok(())
        })
    }

    /// As [`then_host_callback`](Self::then_host_callback); an `Err` from `f` fails the stream.
    pub fn then_host_callback_with_status(
        &mut self,
        f: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> &mut Self {
        self.enqueue(|s| s.iface().host_callback(Box::new(move || run_caught(f))))
    }

    /// Records `event` after earlier work. On a failed stream the event is marked failed, so
    /// streams waiting for it fail instead of waiting forever.
    pub fn then_record_event(&mut self, event: &Event) -> &mut Self {
        self.enqueue_or_skip(
            |s| {
                s.check_same_platform(event.executor(), "then_record_event", "event")?;
                s.iface().record_event(&event.inner)
            },
            |e| event.inner.record_failure(e),
        )
    }

    /// Later work waits for `other` (an [`Event`], or everything enqueued so far on another
    /// [`Stream`]). If `other` fails, this stream fails too.
    pub fn then_wait_for(&mut self, other: &impl Waitable) -> &mut Self {
        self.enqueue(|s| other.enqueue_wait(s))
    }

    /// Starts `timer` after earlier work.
    pub fn then_start_timer(&mut self, timer: &Timer) -> &mut Self {
        self.then_record_event(&timer.start)
    }

    /// Stops `timer` after earlier work.
    pub fn then_stop_timer(&mut self, timer: &Timer) -> &mut Self {
        self.then_record_event(&timer.stop)
    }

    /// Blocks until everything enqueued has finished; the stream's first error if any failed.
    pub fn block_host_until_done(&mut self) -> Result<()> {
        let r = self.iface().block_until_done();
        if let Err(e) = r {
            self.error = Some(e);
        }
        match &self.error {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// `block_host_until_done` as a future: resolves once everything enqueued so far has
    /// finished, to the stream's first error if any failed. The task is woken by the backend's
    /// completion path: on host, the stream's worker; on OpenCL and CUDA/HIP, the stream's
    /// worker once the driver reports the earlier work done (the stream switches to its worker,
    /// as for a host callback). No thread polls, and no particular async runtime is needed.
    ///
    /// Nothing is enqueued until it is first polled. Dropping it early is safe: the queued work
    /// goes on, and the stream stays usable.
    pub fn done(&mut self) -> StreamDone<'_> {
        StreamDone {
            stream: self,
            signal: None,
        }
    }
}

/// `OutOfBounds` unless a device-to-device copy's two sides have the same length.
pub(crate) fn check_d2d_len(src: usize, dst: usize, operation: &str) -> Result<()> {
    if src != dst {
        return Err(Error::bounds(
            operation,
            format!("source has {src} elements, destination {dst}; slice one side"),
        ));
    }
    Ok(())
}

/// `InvalidArgument` unless `dst` is whole, 4-aligned 32-bit words (a `memset32`).
pub(crate) fn check_words<T: Pod>(dst: &DeviceSlice<'_, T>, operation: &str) -> Result<()> {
    if !dst.size_bytes().is_multiple_of(4) || !dst.address().raw().is_multiple_of(4) {
        return Err(Error::invalid(
            operation,
            format!(
                "{} bytes at {}: size and address must be multiples of 4",
                dst.size_bytes(),
                dst.address()
            ),
        ));
    }
    Ok(())
}

/// Runs a user's host callback: a panic in it is the stream's `HostCallback` error.
pub(crate) fn run_caught(f: impl FnOnce() -> Result<()>) -> Result<()> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Error::HostCallback {
            detail: format!("panicked: {}", panic_message(p.as_ref())),
        }),
    }
}

/// Checks a launch of `kernel` on `exec` (the kernel's executor, the geometry and dynamic
/// shared memory against the device's limits) and calls `pointer` for each pointer argument
/// (its index, the argument, its range), which checks or pins it; the launch's dims.
pub(crate) fn check_launch(
    exec: &StreamExecutor,
    threads: ThreadDim,
    blocks: BlockDim,
    kernel: &Kernel,
    args: &[PackedArg],
    cooperative: bool,
    mut pointer: impl FnMut(usize, &PackedArg, crate::types::DeviceAddress, u64) -> Result<()>,
) -> Result<LaunchDims> {
    let desc = exec.description();
    let fail = |detail: String| Error::LaunchConfig {
        platform: exec.platform_name(),
        kernel: kernel.name().to_string(),
        detail,
    };
    if !kernel.exec.same_as(exec) {
        return Err(fail(format!(
            "the kernel was loaded on {:?}, not on this stream's {:?}; load it on this executor",
            kernel.exec, exec
        )));
    }
    let (t, b) = (threads.0, blocks.0);
    if t.count() == 0 || b.count() == 0 {
        return Err(fail(format!(
            "empty launch: {t} threads × {b} blocks; no extent may be 0"
        )));
    }
    if t.count() > desc.max_threads_per_block as u64 {
        return Err(fail(format!(
            "{} threads per block ({t}) exceeds the device limit of {}",
            t.count(),
            desc.max_threads_per_block
        )));
    }
    for (axis, got, max) in [
        ("x", t.x, desc.max_block_dims[0]),
        ("y", t.y, desc.max_block_dims[1]),
        ("z", t.z, desc.max_block_dims[2]),
    ] {
        if got > max {
            return Err(fail(format!(
                "block extent {axis} = {got} exceeds the device limit {max}"
            )));
        }
    }
    for (axis, got, max) in [
        ("x", b.x, desc.max_grid_dims[0]),
        ("y", b.y, desc.max_grid_dims[1]),
        ("z", b.z, desc.max_grid_dims[2]),
    ] {
        if got > max {
            return Err(fail(format!(
                "grid extent {axis} = {got} exceeds the device limit {max}"
            )));
        }
    }
    let mut dynamic_shared_bytes = 0u64;
    for (i, a) in args.iter().enumerate() {
        match a.view() {
            ArgView::Pointer { addr, bytes } => pointer(i, a, addr, bytes)?,
            ArgView::SharedMemory { bytes, .. } => dynamic_shared_bytes += bytes,
            ArgView::Scalar(_) => {}
        }
    }
    if dynamic_shared_bytes > desc.shared_memory_per_block {
        return Err(fail(format!(
            "{dynamic_shared_bytes} bytes of dynamic shared memory per block exceeds the \
             device's {} bytes",
            desc.shared_memory_per_block
        )));
    }
    if cooperative {
        let most = desc.max_cooperative_blocks;
        if most == 0 {
            return Err(Error::unsupported(
                exec.platform_name(),
                format!("then_launch_cooperative of `{}`", kernel.name()),
                "this platform has no cooperative launches (a grid whose blocks are all \
                 resident at once); launch it on host or cuda",
            ));
        }
        if b.count() > most as u64 {
            return Err(fail(format!(
                "a cooperative launch of {} blocks exceeds the device's {most} blocks that can \
                 be resident at once",
                b.count()
            )));
        }
    }
    Ok(LaunchDims {
        threads,
        blocks,
        dynamic_shared_bytes,
        cooperative,
    })
}

/// The future of [`Stream::done`].
#[must_use = "a future does nothing unless polled"]
pub struct StreamDone<'a> {
    stream: &'a mut Stream,
    /// Set at the first poll, when the completion callback is queued.
    signal: Option<Arc<Signal<()>>>,
}

/// Shared by a future and the backend's completion callback: the outcome once delivered, and
/// the task to wake then. `Stream::done` and `Event::ready` use it.
pub(crate) struct Signal<T> {
    outcome: Mutex<Option<T>>,
    waker: Mutex<Option<Waker>>,
}

impl<T> Default for Signal<T> {
    fn default() -> Self {
        Signal {
            outcome: Mutex::new(None),
            waker: Mutex::new(None),
        }
    }
}

impl<T> Signal<T> {
    /// Delivers the outcome and wakes the waiting task (the completion callback's part).
    pub(crate) fn fire(&self, outcome: T) {
        *self.outcome.lock() = Some(outcome);
        if let Some(w) = self.waker.lock().take() {
            w.wake();
        }
    }

    /// The future's part: the outcome if delivered, else keeps `cx`'s waker for `fire`. The
    /// waker goes in before the outcome is read, so a callback that fires after the read finds
    /// it and wakes the task.
    pub(crate) fn poll(&self, cx: &Context<'_>) -> Option<T> {
        {
            let mut slot = self.waker.lock();
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
        }
        self.outcome.lock().take()
    }
}

impl Future for StreamDone<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        let signal = match &this.signal {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(Signal::default());
                let fire = s.clone();
                if let Err(e) = this
                    .stream
                    .iface()
                    .notify_done(Box::new(move || fire.fire(())))
                {
                    this.stream.error.get_or_insert(e.clone());
                    return Poll::Ready(Err(e));
                }
                this.signal = Some(s.clone());
                s
            }
        };
        if signal.poll(cx).is_some() {
            // Everything has finished: this only collects the result (at most a moment's wait
            // for the worker to finish the bookkeeping of the op that fired).
            Poll::Ready(this.stream.block_host_until_done())
        } else {
            Poll::Pending
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream(on {:?}, ok: {})", self.exec, self.ok())
    }
}
