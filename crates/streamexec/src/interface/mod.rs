//! The plugin interface: the object-safe traits a backend implements, and the types that only
//! a backend reads or writes (packed kernel arguments, host regions lent for copies, kernel
//! images in a loader spec, launch geometry, what a backend reports about device RPC). User
//! code needs none of them; the crate root holds what it does.
//!
//! A backend is one folder under `src/platform/` implementing [`PlatformInterface`],
//! [`StreamExecutorInterface`], [`StreamInterface`], [`EventInterface`] and
//! [`KernelInterface`] (plus [`BlasSupport`] / [`RngSupport`] / [`FftSupport`] /
//! [`DnnSupport`] where it has them), registered by one line in `src/registry.rs`. The traits
//! are public so that this contract is documented; user code never holds a backend object (the
//! handles keep theirs private).
//!
//! **Validation is the caller's duty** (as wgpu-hal puts it). User-facing types
//! (`StreamExecutor`, `Stream`, `DeviceMemory`, ...) check bounds, executor ownership, that
//! pointer arguments lie in live allocations, launch limits and signatures before they call into
//! these traits. Every method that trusts a device range is `unsafe fn`, and its `# Safety`
//! section says what the caller guarantees; a backend may then skip re-checking, and must still
//! return `Err` for everything its driver refuses. Nothing here may panic on bad input.
//!
//! **Ordering.** Every `StreamInterface` operation runs after all operations enqueued before it
//! on the same stream have finished, and before any enqueued after it starts. A stream that has
//! failed skips every later operation (returning the first error from `block_until_done`),
//! except that skipped event records mark their event as failed so that waiters fail too.
//!
//! **Threads.** Every trait is `Send + Sync`; methods may be called from any thread.

pub mod blas;
pub mod command_buffer;
pub mod dnn;
pub mod fft;
pub mod rng;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

pub use blas::BlasSupport;
pub use command_buffer::{Command, CommandBufferInterface, ReplayCallbackFn};
pub use dnn::DnnSupport;
pub use fft::{FftPlanInterface, FftSupport};
pub use rng::RngSupport;

// The backend contract's own types: defined in the floor (`types`), where the handles that
// make them live, and published here rather than at the crate root.
pub use crate::types::{
    AlignedHostBuffer, ArgView, HostBuffer, HostReadGuard, HostRegion, HostWriteGuard,
    InProcessKernel, KernelFormat, KernelImage, KernelSource, LaunchDims, PackedArg, ParamKind,
    RpcBlockMemory, RpcCapability, RpcLockPlacement,
};

use crate::error::Result;
use crate::types::{
    DeviceAddress, DeviceDescription, MemoryUsage, MultiKernelLoaderSpec, PluginConfig,
    PluginFamily, PluginStatus,
};

/// A host function run in stream order; its `Err` fails the stream.
pub type HostCallbackFn = Box<dyn FnOnce() -> Result<()> + Send + 'static>;

/// What [`StreamInterface::notify_done`] calls once: a completion signal, which must be cheap
/// (it wakes a future).
pub type DoneFn = Box<dyn FnOnce() + Send + 'static>;

/// What [`EventInterface::notify_complete`] calls once, with the record's outcome: `Ok` when
/// the work before it finished, the recording stream's error when that failed first.
pub type ReadyFn = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// A platform: one driver, some devices. Creating executors is its `init`.
pub trait PlatformInterface: Send + Sync + 'static {
    /// Lower-case platform name (`"host"`, `"opencl"`, ...).
    fn name(&self) -> &'static str;
    /// Number of devices; 0 when the driver works but finds none.
    fn device_count(&self) -> usize;
    /// Description of device `ordinal` (already range-checked by the caller).
    fn description(&self, ordinal: usize) -> Result<DeviceDescription>;
    /// Opens device `ordinal` (already range-checked) with `plugins` choosing what serves each
    /// canned family. Called once per live (ordinal, config) executor. A `Plugin::Vendor` the
    /// backend cannot honour is an `Err` naming the missing library (`types::decide`).
    fn create_executor(
        &self,
        ordinal: usize,
        plugins: &PluginConfig,
    ) -> Result<Arc<dyn StreamExecutorInterface>>;
}

/// One device of a platform.
pub trait StreamExecutorInterface: Send + Sync + 'static {
    /// The device's description (cached; cheap).
    fn description(&self) -> &DeviceDescription;

    /// Allocates `bytes` of device memory (`bytes` may be 0). Errors: `OutOfMemory`.
    fn allocate(&self, bytes: u64) -> Result<DeviceAddress>;

    /// Frees memory from [`allocate`](Self::allocate) or
    /// [`allocate_unified`](Self::allocate_unified). Must not release the memory while
    /// operations enqueued before this call may still touch it (defer, or wait). Never blocks on
    /// operations enqueued after it. Infallible from the caller's side: failures are logged.
    ///
    /// # Safety
    /// `addr` is the base address of a live allocation of this executor, and the caller never
    /// uses it (or any address inside it) again.
    unsafe fn deallocate(&self, addr: DeviceAddress);

    /// Allocates `bytes` of zeroed host memory, page-locked where the platform has it.
    fn host_allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>>;

    /// In-place host access to `[addr, addr + bytes)` of device memory, where the host can
    /// address it (the host platform): its host pointer and what keeps it alive. `None` (the
    /// default) means the host reaches it only through copies (`memcpy_*_sync`). Emissary calls
    /// use this to hand device buffers to host APIs without staging.
    fn host_view(
        &self,
        _addr: DeviceAddress,
        _bytes: u64,
    ) -> Option<(*mut u8, Box<dyn Send + Sync>)> {
        None
    }

    /// Allocates `bytes` of unified memory: one zeroed allocation that kernels reach through the
    /// returned `DeviceAddress` (as any device memory: kernel arguments, copies, fills) and the
    /// host through the returned pointer, both at once, with atomics on both sides (fine-grained
    /// SVM with atomics on OpenCL, ordinary memory on host). Freed with `deallocate`, which must
    /// not free it under queued work. `Unsupported` where the device has no such memory.
    fn allocate_unified(&self, _bytes: u64) -> Result<(DeviceAddress, *mut u8)> {
        let d = self.description();
        Err(crate::error::Error::unsupported(
            d.platform,
            "allocate_unified",
            format!(
                "{} has no host-coherent unified memory; use device memory and copies",
                d.name
            ),
        ))
    }

    /// Makes the caller's host memory `[host, host + bytes)` reachable by this device's
    /// kernels and copies at the returned device address (CUDA's `cuMemHostRegister` with
    /// `DEVICEMAP`); `deallocate` of that address unregisters it and never frees the memory.
    /// `Unsupported` where the device cannot reach host memory it did not allocate.
    ///
    /// # Safety
    /// `host` is valid for reads and writes of `bytes` bytes, from any thread through atomic
    /// accesses, until it is deallocated and every operation enqueued before has finished.
    unsafe fn register_host(&self, _host: *mut u8, _bytes: u64) -> Result<DeviceAddress> {
        let d = self.description();
        Err(crate::error::Error::unsupported(
            d.platform,
            "register_host",
            format!("{} cannot map host memory it did not allocate", d.name),
        ))
    }

    /// Free and total device memory.
    fn memory_usage(&self) -> Result<MemoryUsage>;

    /// True when this device can be given direct access to `other`'s memory (another device
    /// of the same platform). Default: no.
    fn can_enable_peer_access(&self, _other: &dyn StreamExecutorInterface) -> bool {
        false
    }

    /// Lets this device's kernels and copies reach `other`'s memory directly.
    fn enable_peer_access(&self, _other: &dyn StreamExecutorInterface) -> Result<()> {
        Err(crate::error::Error::unsupported(
            self.description().platform,
            "enable_peer_access",
            "this platform has no peer access; stage copies through host memory",
        ))
    }

    /// Turns the data-race checker on or off for kernels launched after this call (the host
    /// platform's PTX engine has one). Default: `Unsupported`.
    fn set_race_check(&self, _on: bool) -> Result<()> {
        Err(crate::error::Error::unsupported(
            self.description().platform,
            "set_race_check",
            "this platform has no data-race checker; run the kernel's PTX on the host platform",
        ))
    }

    /// Chooses the engine that runs PTX for kernels launched after this call (the host
    /// platform has an interpreter and a native-code compiler). Default: `Unsupported`.
    fn set_ptx_engine(&self, _engine: crate::types::PtxEngine) -> Result<()> {
        Err(crate::error::Error::unsupported(
            self.description().platform,
            "set_ptx_engine",
            "only the host platform runs PTX with a choice of engines",
        ))
    }

    /// What PTX kernels' `printf`, `malloc` and `free` reach on this device (the host
    /// platform's engine serves them). Default: `Unsupported`.
    fn ptx_services(&self) -> Result<Arc<crate::types::PtxServices>> {
        Err(crate::error::Error::unsupported(
            self.description().platform,
            "ptx_services",
            "only the host platform runs PTX itself; a GPU driver serves printf and malloc",
        ))
    }

    /// Loads the format of `spec` this platform prefers. Errors: `NoSuitableFormat` listing what
    /// the spec holds, `KernelLoad` with the compiler/JIT log, `Io` for unreadable files.
    fn load_kernel(&self, spec: &MultiKernelLoaderSpec) -> Result<Arc<dyn KernelInterface>>;

    /// A new stream. Streams run concurrently with each other.
    fn create_stream(&self) -> Result<Box<dyn StreamInterface>>;
    /// The stream behind `StreamExecutor::default_stream` (made once per executor). The
    /// crate orders it against the other streams with events; a driver with its own legacy
    /// default stream (CUDA, HIP) returns that, so other users of the context see the same
    /// stream.
    fn create_default_stream(&self) -> Result<Box<dyn StreamInterface>> {
        self.create_stream()
    }

    /// The backend's replayable form of a validated command list (a CUDA graph, a host op
    /// list), or `Ok(None)` when it has none: the crate then replays the list through the
    /// stream's ordinary methods. See [`command_buffer`].
    fn create_command_buffer(
        &self,
        _commands: &[Command],
    ) -> Result<Option<Box<dyn CommandBufferInterface>>> {
        Ok(None)
    }

    /// A new event, not yet recorded.
    fn create_event(&self) -> Result<Arc<dyn EventInterface>>;

    /// Blocks until every operation enqueued on every stream of this executor has finished.
    fn synchronize_all(&self) -> Result<()>;

    /// Copies `src` to device memory now; does not wait for streams.
    ///
    /// # Safety
    /// `[dst, dst + src.len())` lies inside one live allocation of this executor.
    unsafe fn memcpy_h2d_sync(&self, src: &[u8], dst: DeviceAddress) -> Result<()>;

    /// Copies device memory to `dst` now; does not wait for streams.
    ///
    /// # Safety
    /// `[src, src + dst.len())` lies inside one live allocation of this executor.
    unsafe fn memcpy_d2h_sync(&self, src: DeviceAddress, dst: &mut [u8]) -> Result<()>;

    /// Sets `bytes` bytes to `value` now; does not wait for streams.
    ///
    /// # Safety
    /// `[dst, dst + bytes)` lies inside one live allocation of this executor.
    unsafe fn memset_sync(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()>;

    /// The backend itself, for downcasting inside the backend.
    fn as_any(&self) -> &dyn Any;

    /// BLAS on this device, if the platform has it; `None` makes `then_blas_*` fail with
    /// `Unsupported`.
    fn blas(&self) -> Option<&dyn BlasSupport> {
        None
    }

    /// Philox random fills on this device, if the platform has them; `None` makes
    /// `then_set_rng_seed` / `then_populate_rand_*` fail with `Unsupported`.
    fn rng(&self) -> Option<&dyn RngSupport> {
        None
    }

    /// FFT plans on this device, if the platform has them; `None` makes
    /// `StreamExecutor::create_fft_plan` fail with `Unsupported`.
    fn fft(&self) -> Option<&dyn FftSupport> {
        None
    }

    /// DNN operations on this device, if the platform has them; `None` makes every
    /// `then_convolution_*` / `then_pooling_*` / ... fail with `Unsupported`.
    fn dnn(&self) -> Option<&dyn DnnSupport> {
        None
    }

    /// What serves `family` on this executor and why, as decided at creation from its
    /// `PluginConfig`. `None` (the default) lets `StreamExecutor::plugins` describe the family
    /// from [`blas`](Self::blas) / [`rng`](Self::rng) / [`fft`](Self::fft) alone.
    fn plugin_status(&self, _family: PluginFamily) -> Option<PluginStatus> {
        None
    }

    /// How device code on this executor reaches an RPC server (lane size, where the block and
    /// the device side's port locks live), if the platform has device-initiated RPC; `None`
    /// makes `StreamExecutor::rpc` fail with `Unsupported`.
    fn rpc_capability(&self) -> Option<RpcCapability> {
        None
    }
}

/// An in-order queue of device work. Every method enqueues and returns at once; errors
/// returned here are enqueue-time errors (the operation was not enqueued).
///
/// # Safety (the `unsafe` methods)
/// Every device range passed in lies inside one live allocation of this stream's executor (of
/// `src_exec` for a peer copy's source) at the time of the call; the backend keeps it valid
/// until the operation is done (`deallocate` defers).
pub trait StreamInterface: Send + Sync {
    /// Copies `src` to `dst` (`src.len()` bytes). Keep `src` until the copy has finished.
    ///
    /// # Safety
    /// `[dst, dst + src.len())` is device memory of this executor (see the trait).
    unsafe fn memcpy_h2d(&self, src: HostRegion, dst: DeviceAddress) -> Result<()>;
    /// Copies `dst.len()` bytes from `src` into `dst`. Keep `dst` until the copy has finished.
    ///
    /// # Safety
    /// `[src, src + dst.len())` is device memory of this executor (see the trait).
    unsafe fn memcpy_d2h(&self, src: DeviceAddress, dst: HostRegion) -> Result<()>;
    /// Copies `bytes` between two device ranges (they may belong to different allocations).
    ///
    /// # Safety
    /// Both ranges are device memory of this executor (see the trait).
    unsafe fn memcpy_d2d(&self, src: DeviceAddress, dst: DeviceAddress, bytes: u64) -> Result<()>;
    /// Copies `bytes` from `src` in the memory of `src_exec` (another device of this
    /// platform) to `dst` on this stream's device. The backend must keep `src` valid until the
    /// copy is done even if `src_exec`'s owner frees it.
    ///
    /// # Safety
    /// `src` is memory of `src_exec`, `dst` of this stream's executor (see the trait).
    unsafe fn memcpy_peer(
        &self,
        _src_exec: &dyn StreamExecutorInterface,
        _src: DeviceAddress,
        _dst: DeviceAddress,
        _bytes: u64,
    ) -> Result<()> {
        Err(crate::error::Error::unsupported(
            "this platform",
            "then_memcpy_peer",
            "no peer copies between devices; stage the copy through host memory",
        ))
    }
    /// Sets `bytes` bytes to `value`.
    ///
    /// # Safety
    /// `[dst, dst + bytes)` is device memory of this executor (see the trait).
    unsafe fn memset8(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()>;
    /// Sets `count` 32-bit words to `value` (`dst` is 4-byte aligned).
    ///
    /// # Safety
    /// `[dst, dst + 4 * count)` is device memory of this executor (see the trait).
    unsafe fn memset32(&self, dst: DeviceAddress, value: u32, count: u64) -> Result<()>;
    /// Launches `kernel` (loaded by this stream's executor) with packed arguments.
    ///
    /// # Safety
    /// The caller has checked the geometry against the device description and the arguments
    /// against the kernel's signature, and every pointer argument lies inside one live
    /// allocation of this executor.
    unsafe fn launch(
        &self,
        kernel: &Arc<dyn KernelInterface>,
        dims: &LaunchDims,
        args: &[PackedArg],
    ) -> Result<()>;
    /// Runs `f` on a host thread once earlier work is done; later work waits for it.
    fn host_callback(&self, f: HostCallbackFn) -> Result<()>;
    /// Calls `done` once everything enqueued so far has finished or been skipped because the
    /// stream failed: what wakes `Stream::done`'s future. It runs on the backend's completion
    /// path (a worker thread, a driver callback), or at once when nothing is pending. Unless
    /// this returns `Err`, `done` is called exactly once, on a failed stream too; a stream
    /// dropped with it queued still calls it.
    fn notify_done(&self, done: DoneFn) -> Result<()>;
    /// Completes `event` once earlier work is done (records its time).
    fn record_event(&self, event: &Arc<dyn EventInterface>) -> Result<()>;
    /// Later work waits until the most recent record of `event` (at the time of this call)
    /// completes; if that record failed, this stream fails with `DependencyFailed`. An event
    /// never recorded is complete.
    fn wait_event(&self, event: &Arc<dyn EventInterface>) -> Result<()>;
    /// As [`wait_event`](Self::wait_event), for an implicit wait of the default stream's
    /// ordering: a failed record is no wait rather than a failure, so a failed stream does not
    /// fail every stream that orders against it.
    fn wait_event_for_order(&self, event: &Arc<dyn EventInterface>) -> Result<()> {
        self.wait_event(event)
    }
    /// Blocks until everything enqueued so far has finished; the first error if any failed.
    fn block_until_done(&self) -> Result<()>;
    /// The first asynchronous error seen so far, without blocking.
    fn async_error(&self) -> Option<crate::error::Error>;
    /// The backend stream, for canned operations and command buffers that need its native
    /// handle (a vendor BLAS bound to the stream, a graph launch); `None` where nothing needs
    /// it.
    fn native(&self) -> Option<&dyn Any> {
        None
    }
}

/// State of an event's most recent record.
#[derive(Clone, Debug, PartialEq)]
pub enum EventStatus {
    /// Never recorded.
    Unrecorded,
    /// Recorded; the work before it has not finished.
    Pending,
    /// The work before the record has finished.
    Complete,
    /// The recording stream failed before reaching the record.
    Error(crate::error::Error),
}

/// A marker in a stream: completes when the work before it does.
pub trait EventInterface: Send + Sync {
    /// State of the most recent record.
    fn status(&self) -> EventStatus;
    /// Blocks until the most recent record completes (or fails: its error).
    fn synchronize(&self) -> Result<()>;
    /// Time between `start`'s completion and this event's (both must be complete, both from
    /// this backend).
    fn elapsed_since(&self, start: &dyn EventInterface) -> Result<Duration>;
    /// Calls `ready` once the most recent record (at the time of this call) has completed, with
    /// its outcome, from the backend's completion path (a stream worker, a driver callback),
    /// or at once when it already has (or the event was never recorded: `Ok`). Unless this
    /// returns `Err`, `ready` is called exactly once, even if the event is dropped first.
    fn notify_complete(&self, ready: ReadyFn) -> Result<()>;
    /// Records a failure in place of a record: the stream that would have recorded it is in an
    /// error state, so waiters must fail with `error` rather than wait forever.
    fn record_failure(&self, error: crate::error::Error);
    /// The backend itself, for downcasting inside the backend.
    fn as_any(&self) -> &dyn Any;
}

/// A kernel's own parameter count, as its format declares it: what the executor checks a
/// loader spec's arity against ([`KernelInterface::param_count`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamCount {
    /// Parameters in the kernel's own list (PTX `.param`s, OpenCL arguments, a host
    /// kernel's `Args`).
    pub params: usize,
    /// What declares them, for the mismatch message: "the PTX entry (line 12)", "the OpenCL
    /// kernel".
    pub declared_by: String,
    /// `SharedMemory` arguments are launch attributes here, not parameters (PTX), and the
    /// kernel names dynamic shared memory: a spec may count any number of them beyond
    /// `params`.
    pub takes_dynamic_shared: bool,
}

/// A loaded kernel.
pub trait KernelInterface: Send + Sync {
    /// Name of the entry point.
    fn name(&self) -> &str;
    /// The kernel's own parameter count where its format carries one (PTX, OpenCL, host
    /// kernels); `None` where it does not (cubin, HSACO), which skips the arity check. The
    /// executor checks every load's spec arity against it, one rule for every platform.
    fn param_count(&self) -> Option<ParamCount>;
    /// Checks `expected` (from the `TypedKernel`'s `Args`) against the kernel's own parameter
    /// list where the format carries one; `SignatureMismatch` naming the index and both types.
    fn verify_signature(&self, expected: &[ParamKind]) -> Result<()>;
    /// The backend itself, for downcasting inside the backend.
    fn as_any(&self) -> &dyn Any;
    /// Device address and byte size of the `__llvm_rpc_client` global of the kernel's module,
    /// when it defines one (CUDA/HIP device code built against LLVM's GPU libc): the executor
    /// then writes its RPC server's client image there and launches the kernel with RPC.
    fn rpc_client_symbol(&self) -> Option<(DeviceAddress, usize)> {
        None
    }
    /// Device address and byte size of the module-scope variable `name` (`.global`/`.const`)
    /// of the kernel's module, where the backend can tell (`cuModuleGetGlobal`). The memory
    /// lives as long as this kernel object.
    fn module_global(&self, _name: &str) -> Option<(DeviceAddress, u64)> {
        None
    }
}
