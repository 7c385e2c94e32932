//! `StreamExecutor`: one device, and everything made on it.
//!
//! The executor is where validation above the plugin interface starts: it knows which
//! allocations of its device are live ([`LiveAllocations`]), so a pointer argument that outlived
//! its memory is refused at launch on every platform, and it only hands backends ranges that
//! lie inside memory it allocated.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytemuck::Pod;

use crate::allocations::LiveAllocations;
pub(crate) use crate::allocations::{AllocationPin, InternalAllocator, OwnedAllocation};
use crate::error::{Error, Result};
use crate::event::{Event, Timer};
use crate::interface::{KernelInterface, StreamExecutorInterface};
use crate::kernel::{Kernel, TypedKernel};
use crate::memory::{DeviceMemory, DeviceSlice, UnifiedMemory};
use crate::stream::Stream;
use crate::stream_order::{SharedStream, StreamKind, StreamOrder};
use crate::types::{
    AllocatorStats, DeviceAddress, DeviceDescription, HostMemory, KernelArgs, MemoryUsage,
    MultiKernelLoaderSpec, PluginConfig, PluginFamily, PluginReport, PluginStatus,
};

/// The executor's cache of loaded kernels: the backend kernel and whether it is an RPC launch,
/// not the [`Kernel`] handle (which holds the executor: a reference cycle).
type KernelCache = parking_lot::Mutex<
    std::collections::HashMap<(&'static str, std::any::TypeId), (Arc<dyn KernelInterface>, bool)>,
>;

/// A device, with its allocator, kernel loader and stream factory. Cheap to clone: clones share
/// the device. Memory, streams, kernels and events each hold a clone, so the device stays open
/// until the last of them drops.
#[derive(Clone)]
pub struct StreamExecutor {
    inner: Arc<ExecutorShared>,
}

pub(crate) struct ExecutorShared {
    id: u64,
    platform: &'static str,
    ordinal: usize,
    /// Kernels loaded by [`StreamExecutor::get_kernel_cached`], by key and `Args` type. Before
    /// `iface`, so they drop first, as kernels held by handles do.
    kernels: KernelCache,
    iface: Arc<dyn StreamExecutorInterface>,
    /// Allocations made through this executor and not yet freed.
    live: Arc<LiveAllocations>,
    /// The device-initiated RPC server, started on first use (`StreamExecutor::rpc`).
    rpc: std::sync::OnceLock<crate::executor_rpc::ExecutorRpc>,
    /// The default stream and the blocking streams it orders against.
    order: StreamOrder,
    /// What the executor was asked to serve each canned family with.
    plugins: PluginConfig,
}

impl StreamExecutor {
    #[cfg(test)]
    pub(crate) fn new(
        platform: &'static str,
        ordinal: usize,
        iface: Arc<dyn StreamExecutorInterface>,
    ) -> Self {
        Self::with_plugins(platform, ordinal, iface, PluginConfig::default())
    }

    /// The handle of backend executor `iface`, created with plugin config `plugins`.
    pub(crate) fn with_plugins(
        platform: &'static str,
        ordinal: usize,
        iface: Arc<dyn StreamExecutorInterface>,
        plugins: PluginConfig,
    ) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        StreamExecutor {
            inner: Arc::new(ExecutorShared {
                id,
                platform,
                ordinal,
                kernels: KernelCache::default(),
                iface,
                live: Arc::default(),
                rpc: std::sync::OnceLock::new(),
                order: StreamOrder::default(),
                plugins,
            }),
        }
    }

    pub(crate) fn from_shared(inner: Arc<ExecutorShared>) -> Self {
        StreamExecutor { inner }
    }

    pub(crate) fn downgrade(&self) -> Weak<ExecutorShared> {
        Arc::downgrade(&self.inner)
    }

    /// A process-unique id; memory and pointers remember the id of their executor.
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    /// Name of the platform.
    pub fn platform_name(&self) -> &'static str {
        self.inner.platform
    }
    /// Device ordinal within the platform.
    pub fn device_ordinal(&self) -> usize {
        self.inner.ordinal
    }
    /// The device's description.
    pub fn description(&self) -> &DeviceDescription {
        self.inner.iface.description()
    }
    /// The plugin config this executor was created with (`Platform::executor_for_device_with`).
    pub fn plugin_config(&self) -> PluginConfig {
        self.inner.plugins
    }

    /// What serves each canned family (BLAS, RNG, FFT, DNN) on this executor and why, as
    /// decided from its [`PluginConfig`] when it was created. `Display` prints one line per
    /// family.
    pub fn plugins(&self) -> PluginReport {
        let iface = self.interface();
        let families = PluginFamily::ALL
            .iter()
            .map(|&family| {
                iface
                    .plugin_status(family)
                    .unwrap_or_else(|| self.served_by_default(family))
            })
            .collect();
        PluginReport {
            platform: self.platform_name(),
            families,
        }
    }

    /// A family's report entry where the backend gives none: what it serves, as the only
    /// implementation it has.
    fn served_by_default(&self, family: PluginFamily) -> PluginStatus {
        let iface = self.interface();
        let only = "the platform's only implementation";
        let (implementation, reason) = match family {
            PluginFamily::Blas if iface.blas().is_some() => ("built-in", only),
            PluginFamily::Rng if iface.rng().is_some() => ("built-in", only),
            PluginFamily::Fft => match iface.fft() {
                Some(f) => (f.implementation(), only),
                None => ("none", "no FFT on this platform in this build"),
            },
            PluginFamily::Dnn => match iface.dnn() {
                Some(d) => (d.implementation(), only),
                None => ("none", "no DNN on this platform in this build"),
            },
            _ => ("none", "this platform does not implement it"),
        };
        PluginStatus {
            family,
            choice: self.inner.plugins.get(family),
            implementation: implementation.to_string(),
            reason: reason.to_string(),
        }
    }

    /// The backend (crate-private: user code never reaches a backend object).
    pub(crate) fn interface(&self) -> &Arc<dyn StreamExecutorInterface> {
        &self.inner.iface
    }

    /// What a pointer argument must satisfy at launch: its memory belongs to this executor
    /// (`owner`), and `[addr, addr + bytes)` lies inside allocation `alloc`, which is still
    /// live. `InvalidArgument` otherwise; `operation` is only built then, off the launch path.
    pub(crate) fn check_pointer(
        &self,
        (owner, alloc): (u64, u64),
        addr: DeviceAddress,
        bytes: u64,
        operation: impl FnOnce() -> String,
    ) -> Result<()> {
        if owner != self.id() {
            return Err(self.foreign_memory(owner, &operation()));
        }
        if self.inner.live.contains(alloc, addr, bytes) {
            return Ok(());
        }
        Err(Error::invalid(
            operation(),
            format!(
                "{bytes} bytes at {addr} are not inside one live allocation of this {} device {} \
                 (executor #{}): the allocation the pointer was taken from has been freed; was \
                 the DeviceMemory it came from dropped?",
                self.platform_name(),
                self.device_ordinal(),
                self.id()
            ),
        ))
    }

    /// Frees memory this executor allocated (`DeviceMemory`'s drop): allocation `alloc` at
    /// `addr`.
    pub(crate) fn release(&self, addr: DeviceAddress, alloc: u64) {
        if self.inner.live.free(alloc) {
            // SAFETY: `addr` is the base of an allocation made by `allocate_raw`, released
            // once by its only owner, which never uses it again; `DevicePtr`s that outlive it
            // fail the live check at launch. A pinned allocation is deallocated by its last
            // pin instead.
            unsafe { self.inner.iface.deallocate(addr) };
        }
    }

    /// As [`check_pointer`](Self::check_pointer), and pins the allocation: it is not
    /// deallocated while the pin lives, even once its owner frees it.
    pub(crate) fn pin_pointer(
        &self,
        (owner, alloc): (u64, u64),
        addr: DeviceAddress,
        bytes: u64,
        operation: impl FnOnce() -> String,
    ) -> Result<AllocationPin> {
        if owner == self.id() && self.inner.live.pin(alloc, addr, bytes) {
            return Ok(AllocationPin {
                iface: self.inner.iface.clone(),
                live: self.inner.live.clone(),
                id: alloc,
            });
        }
        // Not pinnable: the check says why.
        self.check_pointer((owner, alloc), addr, bytes, operation)?;
        Err(Error::invalid(
            "pin_pointer",
            "the allocation was freed while it was being pinned; keep its DeviceMemory alive",
        ))
    }

    /// Pins the live allocation of this executor that holds `bytes` bytes at `addr`, found by
    /// its device address or, for unified memory, its host address (what OpenCL kernels see):
    /// the pin, and the range's host pointer when it is unified memory. For an address
    /// a kernel passed to the host (emissary calls), which carries no allocation id.
    pub(crate) fn pin_address(
        &self,
        addr: u64,
        bytes: u64,
    ) -> Result<(AllocationPin, Option<u64>)> {
        let (id, host) = self.inner.live.pin_range(addr, bytes).ok_or_else(|| {
            Error::invalid(
                "emissary pointer",
                format!(
                    "{bytes} bytes at {addr:#x} are not inside one live allocation of this {} \
                     device {} (executor #{}); pass device or unified memory of the executor \
                     that runs the kernel",
                    self.platform_name(),
                    self.device_ordinal(),
                    self.id()
                ),
            )
        })?;
        let pin = AllocationPin {
            iface: self.inner.iface.clone(),
            live: self.inner.live.clone(),
            id,
        };
        Ok((pin, host))
    }

    /// `bytes` of device memory, registered as live: its address and allocation id.
    fn allocate_raw(&self, bytes: u64) -> Result<(DeviceAddress, u64)> {
        let addr = self.inner.iface.allocate(bytes)?;
        Ok((addr, self.inner.live.insert(addr, bytes)))
    }

    /// An allocator for parts of the executor itself; see [`InternalAllocator`].
    pub(crate) fn internal_allocator(&self) -> InternalAllocator {
        InternalAllocator {
            iface: self.inner.iface.clone(),
            live: self.inner.live.clone(),
        }
    }
    pub(crate) fn rpc_cell(&self) -> &std::sync::OnceLock<crate::executor_rpc::ExecutorRpc> {
        &self.inner.rpc
    }
    /// True when both handles refer to the same executor.
    pub fn same_as(&self, other: &StreamExecutor) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// True when `other` is another device of the same platform whose memory this device can
    /// be given direct access to ([`enable_peer_access_to`](Self::enable_peer_access_to)).
    pub fn can_enable_peer_access_to(&self, other: &StreamExecutor) -> bool {
        !self.same_as(other)
            && self.platform_name() == other.platform_name()
            && self
                .inner
                .iface
                .can_enable_peer_access(other.inner.iface.as_ref())
    }

    /// Turns the data-race checker on or off for kernels this executor launches from now on.
    /// With it on, the first pair of conflicting accesses (two threads, at least one a write,
    /// not both atomic, with no barrier between them) fails the launch's stream with both
    /// threads, both instructions and the address. `Unsupported` where the platform has none.
    pub fn set_race_check(&self, on: bool) -> Result<()> {
        self.inner.iface.set_race_check(on)
    }

    /// Chooses the engine that runs PTX kernels this executor launches from now on (the host
    /// platform: [`PtxEngine::Auto`](crate::PtxEngine) compiles kernels to native code and
    /// interprets those the compiler does not support). `Unsupported` on other platforms.
    pub fn set_ptx_engine(&self, engine: crate::PtxEngine) -> Result<()> {
        self.inner.iface.set_ptx_engine(engine)
    }

    /// What PTX kernels' `printf` (`vprintf`), `malloc` and `free` reach on this executor:
    /// where `printf` text goes (stdout at once by default, or a buffer flushed on demand) and
    /// the device heap's limit. `Unsupported` on platforms that do not run PTX themselves.
    pub fn ptx_services(&self) -> Result<std::sync::Arc<crate::PtxServices>> {
        self.inner.iface.ptx_services()
    }

    /// Gives this device direct access to `other`'s memory (for peer copies and kernels).
    /// Errors: `InvalidArgument` for the same executor or another platform, `Unsupported` where
    /// the devices cannot reach each other.
    pub fn enable_peer_access_to(&self, other: &StreamExecutor) -> Result<()> {
        if self.same_as(other) || self.platform_name() != other.platform_name() {
            return Err(Error::invalid(
                "enable_peer_access_to",
                format!(
                    "peer access needs two devices of one platform; got {} device {} and {} device {}",
                    self.platform_name(),
                    self.device_ordinal(),
                    other.platform_name(),
                    other.device_ordinal()
                ),
            ));
        }
        self.inner
            .iface
            .enable_peer_access(other.inner.iface.as_ref())
    }

    /// `InvalidArgument` unless memory with `owner` id belongs to this executor.
    pub(crate) fn check_owner(&self, owner: u64, operation: &str) -> Result<()> {
        if owner != self.id() {
            return Err(self.foreign_memory(owner, operation));
        }
        Ok(())
    }

    /// `InvalidArgument` for memory of executor `owner` passed to `operation` of this one.
    fn foreign_memory(&self, owner: u64, operation: &str) -> Error {
        Error::invalid(
            operation,
            format!(
                "the memory belongs to executor #{owner}, not to this {} device {} (executor \
                 #{}); copy it across with a host staging buffer or a peer copy",
                self.platform_name(),
                self.device_ordinal(),
                self.id()
            ),
        )
    }

    fn bytes_for<T>(&self, len: usize, operation: &str) -> Result<u64> {
        let bytes = (len as u64)
            .checked_mul(std::mem::size_of::<T>() as u64)
            .ok_or_else(|| {
                Error::invalid(operation, format!("{len} elements overflow a 64-bit size"))
            })?;
        let max = self.description().max_allocation;
        if bytes > max {
            return Err(Error::OutOfMemory {
                platform: self.platform_name(),
                device: self.device_ordinal(),
                bytes,
                detail: format!("the device's largest allocation is {max} bytes"),
            });
        }
        Ok(bytes)
    }

    /// `len` elements of device memory, contents unspecified.
    pub fn allocate_array<T: Pod>(&self, len: usize) -> Result<DeviceMemory<T>> {
        let bytes = self.bytes_for::<T>(len, "allocate_array")?;
        let (addr, alloc) = self.allocate_raw(bytes)?;
        Ok(DeviceMemory::from_raw(self.clone(), addr, len, alloc))
    }

    /// `len` elements of device memory, zeroed.
    pub fn allocate_zeroed_array<T: Pod>(&self, len: usize) -> Result<DeviceMemory<T>> {
        let mem = self.allocate_array::<T>(len)?;
        // SAFETY: the range is the whole of `mem`, a live allocation of this executor.
        unsafe {
            self.inner
                .iface
                .memset_sync(mem.address(), 0, mem.size_bytes())?
        };
        Ok(mem)
    }

    /// `len` zeroed elements of unified memory, reachable by kernels and the host at once.
    /// `Unsupported` on devices without it (OpenCL devices without fine-grained SVM atomics).
    pub fn allocate_unified<T: Pod>(&self, len: usize) -> Result<UnifiedMemory<T>> {
        let bytes = self.bytes_for::<T>(len, "allocate_unified")?;
        let (addr, host) = self.inner.iface.allocate_unified(bytes)?;
        let alloc = self
            .inner
            .live
            .insert_with_host(addr, bytes, Some(host as u64));
        let mem = DeviceMemory::from_raw(self.clone(), addr, len, alloc);
        Ok(UnifiedMemory::from_raw(mem, host))
    }

    /// Registers the caller's host memory `[ptr, ptr + len)` with the device: kernels and
    /// copies reach it as device memory (on the host platform at its own address) while the
    /// host keeps its pointer, as CUDA's `cuMemHostRegister` with `DEVICEMAP` does. Dropping
    /// the returned memory unregisters it; it never frees it. `Unsupported` where the device
    /// cannot reach host memory it did not allocate.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` elements until the returned memory has
    /// been dropped and every operation enqueued on it has finished; while kernels or copies
    /// may touch it, the host touches it only through atomic accesses, as unified memory.
    pub unsafe fn register_host_memory<T: Pod>(
        &self,
        ptr: *mut T,
        len: usize,
    ) -> Result<DeviceMemory<T>> {
        let bytes = self.bytes_for::<T>(len, "register_host_memory")?;
        // SAFETY: the caller's contract is the interface's.
        let addr = unsafe { self.inner.iface.register_host(ptr.cast(), bytes)? };
        let alloc = self
            .inner
            .live
            .insert_with_host(addr, bytes, Some(ptr as u64));
        Ok(DeviceMemory::from_raw(self.clone(), addr, len, alloc))
    }

    /// One element of device memory, contents unspecified.
    pub fn allocate_scalar<T: Pod>(&self) -> Result<DeviceMemory<T>> {
        self.allocate_array(1)
    }

    /// One element of device memory, zeroed.
    pub fn allocate_zeroed_scalar<T: Pod>(&self) -> Result<DeviceMemory<T>> {
        self.allocate_zeroed_array(1)
    }

    /// `len` zeroed elements of host memory for asynchronous copies, page-locked where the
    /// platform has it.
    pub fn allocate_host<T: Pod>(&self, len: usize) -> Result<HostMemory<T>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::invalid("allocate_host", format!("{len} elements overflow usize"))
        })?;
        let buf = self.inner.iface.host_allocate(bytes)?;
        Ok(HostMemory::from_buffer(buf, len))
    }

    /// A device copy of `data`.
    pub fn copy_to_device<T: Pod>(&self, data: &[T]) -> Result<DeviceMemory<T>> {
        let mem = self.allocate_array::<T>(data.len())?;
        // SAFETY: `data` has exactly `mem`'s size; `mem` is a live allocation of this executor.
        unsafe {
            self.inner
                .iface
                .memcpy_h2d_sync(bytemuck::cast_slice(data), mem.address())?
        };
        Ok(mem)
    }

    /// A host copy of device memory (does not wait for streams).
    pub fn copy_to_vec<'a, T: Pod>(&self, src: impl Into<DeviceSlice<'a, T>>) -> Result<Vec<T>> {
        let src = src.into();
        let mut out = vec![T::zeroed(); src.len()];
        self.synchronous_memcpy_d2h(src, &mut out)?;
        Ok(out)
    }

    /// Free and total device memory.
    pub fn memory_usage(&self) -> Result<MemoryUsage> {
        self.inner.iface.memory_usage()
    }

    /// What this executor's allocations hold now and held at most (see [`AllocatorStats`]):
    /// exact on every platform, unlike [`memory_usage`](Self::memory_usage)'s free bytes.
    pub fn allocator_stats(&self) -> AllocatorStats {
        self.inner.live.stats()
    }

    /// Copies `src` into `dst` now (lengths must match). Does not wait for streams: call
    /// `block_host_until_done` on streams that use `dst` first.
    pub fn synchronous_memcpy_h2d<'a, T: Pod>(
        &self,
        src: &[T],
        dst: impl Into<DeviceSlice<'a, T>>,
    ) -> Result<()> {
        let dst = dst.into();
        self.check_owner(dst.owner(), "synchronous_memcpy_h2d")?;
        check_same_len(src.len(), dst.len(), "synchronous_memcpy_h2d")?;
        // SAFETY: `dst` borrows live memory of this executor (owner checked) and `src` has
        // exactly its size.
        unsafe {
            self.inner
                .iface
                .memcpy_h2d_sync(bytemuck::cast_slice(src), dst.address())
        }
    }

    /// Copies `src` into `dst` now (lengths must match). Does not wait for streams.
    pub fn synchronous_memcpy_d2h<'a, T: Pod>(
        &self,
        src: impl Into<DeviceSlice<'a, T>>,
        dst: &mut [T],
    ) -> Result<()> {
        let src = src.into();
        self.check_owner(src.owner(), "synchronous_memcpy_d2h")?;
        check_same_len(dst.len(), src.len(), "synchronous_memcpy_d2h")?;
        // SAFETY: `src` borrows live memory of this executor (owner checked) and `dst` has
        // exactly its size.
        unsafe {
            self.inner
                .iface
                .memcpy_d2h_sync(src.address(), bytemuck::cast_slice_mut(dst))
        }
    }

    /// Element 0 of `src`, copied now. Does not wait for streams.
    pub fn synchronous_copy_scalar_to_host<'a, T: Pod>(
        &self,
        src: impl Into<DeviceSlice<'a, T>>,
    ) -> Result<T> {
        let src = src.into();
        let first = src.slice(0..1).map_err(|_| {
            Error::bounds(
                "synchronous_copy_scalar_to_host",
                "the device memory is empty",
            )
        })?;
        let mut out = [T::zeroed()];
        self.synchronous_memcpy_d2h(first, &mut out)?;
        Ok(out[0])
    }

    /// Loads a kernel whose arguments are `Args`. Checks the spec's arity against `Args` and
    /// against the kernel's own parameter count (as [`get_untyped_kernel`](Self::get_untyped_kernel)),
    /// then the kernel's own signature where its format carries one.
    pub fn get_kernel<Args: KernelArgs>(
        &self,
        spec: &MultiKernelLoaderSpec,
    ) -> Result<TypedKernel<Args>> {
        if spec.arity() != Args::ARITY {
            return Err(Error::SignatureMismatch {
                kernel: spec.kernel_name().to_string(),
                detail: format!(
                    "the loader spec declares {} parameter(s) but the TypedKernel's Args `{}` \
                     has {}",
                    spec.arity(),
                    std::any::type_name::<Args>(),
                    Args::ARITY
                ),
            });
        }
        let kernel = self.get_untyped_kernel(spec)?;
        kernel.inner.verify_signature(&Args::signature())?;
        Ok(TypedKernel::new(kernel))
    }

    /// [`get_kernel`](Self::get_kernel) once per executor: the first call for `key` (with
    /// these `Args`) loads `spec()`, later calls return the same kernel without building the
    /// spec. A failed load is not cached. `key` names the kernel uniquely in the program; the
    /// launchers that `streamexec-build` generates use their module path. The cache lives as
    /// long as the executor.
    pub fn get_kernel_cached<Args: KernelArgs>(
        &self,
        key: &'static str,
        spec: impl FnOnce() -> MultiKernelLoaderSpec,
    ) -> Result<TypedKernel<Args>> {
        let id = (key, std::any::TypeId::of::<Args>());
        if let Some((inner, rpc)) = self.inner.kernels.lock().get(&id) {
            return Ok(TypedKernel::new(Kernel {
                exec: self.clone(),
                inner: inner.clone(),
                rpc: *rpc,
            }));
        }
        // Loaded outside the lock (a load may compile); a racing load of the same key wins
        // once, the other kernel is dropped.
        let kernel = self.get_kernel::<Args>(&spec())?;
        let untyped = kernel.untyped();
        self.inner
            .kernels
            .lock()
            .entry(id)
            .or_insert_with(|| (untyped.inner.clone(), untyped.rpc));
        Ok(kernel)
    }

    /// Loads a kernel for launches with a run-time [`ArgList`](crate::ArgList).
    ///
    /// The spec's arity must be the kernel's own parameter count where its format carries one
    /// (PTX, OpenCL, host kernels), or the load is `SignatureMismatch` naming the kernel and
    /// both counts, on every platform. `SharedMemory` arguments count, except that a PTX entry
    /// that names dynamic shared memory (a launch attribute in PTX) takes any number of them
    /// beyond its `.param`s.
    pub fn get_untyped_kernel(&self, spec: &MultiKernelLoaderSpec) -> Result<Kernel> {
        let inner = self.inner.iface.load_kernel(spec)?;
        crate::kernel::check_arity(spec, inner.as_ref())?;
        let rpc = inner
            .rpc_client_symbol()
            .filter(|_| !spec.foreign_rpc_client());
        if let Some((symbol, size)) = rpc {
            self.attach_rpc_client(inner.name(), symbol, size)?;
        }
        Ok(Kernel {
            exec: self.clone(),
            inner,
            rpc: rpc.is_some(),
        })
    }

    /// A new stream, blocking with respect to the [default stream](Self::default_stream), as
    /// `cuStreamCreate(.., 0)`: each of its operations first waits for the default stream's
    /// earlier work, and the default stream's operations wait for its earlier work.
    pub fn create_stream(&self) -> Result<Stream> {
        let shared = SharedStream::new(self.inner.iface.create_stream()?, StreamKind::Blocking);
        self.inner.order.add_blocking(&shared);
        Ok(Stream::new(self.clone(), shared))
    }

    /// A new stream that does not order against the default stream
    /// (`CU_STREAM_NON_BLOCKING`).
    pub fn create_stream_non_blocking(&self) -> Result<Stream> {
        let shared = SharedStream::new(self.inner.iface.create_stream()?, StreamKind::NonBlocking);
        Ok(Stream::new(self.clone(), shared))
    }

    /// A handle on the executor's default stream, CUDA's legacy default stream: its operations
    /// wait for the earlier work of every blocking stream ([`create_stream`](Self::create_stream))
    /// and blocking streams' operations wait for its earlier work; non-blocking streams opt
    /// out. Every handle is the same stream (made on first use, kept while the executor
    /// lives), with one error state. On CUDA/HIP it is the driver's own legacy stream.
    ///
    /// The executor's synchronous calls (`copy_to_device`, `synchronize_all`, ...) are not
    /// operations of any stream and do not order against it, except that `synchronize_all`
    /// waits for it too.
    pub fn default_stream(&self) -> Result<Stream> {
        let shared = self
            .inner
            .order
            .default_stream(|| self.inner.iface.create_default_stream())?;
        Ok(Stream::new(self.clone(), shared))
    }

    /// The default stream's ordering state.
    pub(crate) fn stream_order(&self) -> &StreamOrder {
        &self.inner.order
    }

    /// A new event.
    pub fn create_event(&self) -> Result<Event> {
        Ok(Event::new(self.clone(), self.inner.iface.create_event()?))
    }

    /// A new timer (two events).
    pub fn create_timer(&self) -> Result<Timer> {
        Ok(Timer::new(self.create_event()?, self.create_event()?))
    }

    /// Blocks until all work on every stream of this executor has finished.
    pub fn synchronize_all(&self) -> Result<()> {
        self.inner.iface.synchronize_all()
    }
}

pub(crate) fn check_same_len(host: usize, device: usize, operation: &str) -> Result<()> {
    if host != device {
        return Err(Error::bounds(
            operation,
            format!(
                "the host side has {host} elements but the device side has {device}; slice one \
                 side so the lengths match"
            ),
        ));
    }
    Ok(())
}

impl std::fmt::Debug for StreamExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StreamExecutor(#{} {} device {})",
            self.id(),
            self.platform_name(),
            self.device_ordinal()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::PlatformManager;
    use crate::types::{ArgList, DevicePtr};
    use crate::{HostKernel, ThreadCtx};

    /// A pointer whose allocation was freed is refused even when a new allocation now covers
    /// the same addresses (allocators reuse addresses; the allocation id tells them apart).
    #[test]
    #[cfg_attr(miri, ignore = "the host platform reads /proc, which Miri isolates")]
    fn a_stale_pointer_is_refused_even_when_its_addresses_are_live_again() {
        let exec = PlatformManager::platform_with_name("host")
            .unwrap()
            .executor_for_device(0)
            .unwrap();
        let spec = MultiKernelLoaderSpec::new(1).add_host_kernel(HostKernel::new(
            "set",
            |ctx: &ThreadCtx<'_>, (p,): (DevicePtr<u32>,)| ctx.global(p).set(0, 7),
        ));
        let kernel = exec.get_untyped_kernel(&spec).unwrap();
        let old = exec.allocate_zeroed_array::<u32>(4).unwrap();
        let old_id = old.ptr().allocation();
        drop(old);
        let new = exec.allocate_zeroed_array::<u32>(4).unwrap();
        // The new allocation's addresses under the freed allocation's id: what a stale pointer
        // looks like after the allocator handed its addresses out again.
        let stale = DevicePtr::<u32>::from_parts(new.address(), 4, exec.id(), old_id);
        let mut s = exec.create_stream().unwrap();
        let err = s
            .then_launch_untyped(1, 1, &kernel, &ArgList::new().arg(stale))
            .block_host_until_done()
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { detail, .. } if detail.contains("has been freed")),
            "{err}"
        );
        assert_eq!(
            exec.copy_to_vec(&new).unwrap(),
            [0; 4],
            "the new owner's memory is untouched"
        );
        let mut s = exec.create_stream().unwrap();
        s.then_launch_untyped(1, 1, &kernel, &ArgList::new().arg(new.ptr()))
            .block_host_until_done()
            .unwrap();
        assert_eq!(exec.copy_to_vec(&new).unwrap(), [7, 0, 0, 0]);
    }

    /// Pins defer a free to the last unpin; a freed allocation is dead to checks at once.
    /// Pure Rust: Miri runs it.
    #[test]
    fn a_pinned_allocation_is_deallocated_by_its_last_unpin() {
        let live = LiveAllocations::default();
        let base = DeviceAddress::new(0x1000);
        let a = live.insert(base, 64);
        assert!(!live.pin(a, DeviceAddress::new(0x1030), 32), "past the end");
        assert!(live.pin(a, base, 64) && live.pin(a, DeviceAddress::new(0x1010), 16));
        assert!(!live.free(a), "pinned: the owner may not deallocate");
        assert!(!live.contains(a, base, 4), "dead to checks at once");
        assert!(!live.pin(a, base, 4), "and to new pins");
        assert_eq!(live.unpin(a), None, "one pin left");
        assert_eq!(live.unpin(a), Some(base), "the last unpin deallocates");
        assert!(!live.contains(a, base, 4));
        // Unpinned: the owner's free deallocates; a pin that outlives no free frees nothing.
        let b = live.insert(base, 8);
        assert!(live.pin(b, base, 8));
        assert_eq!(live.unpin(b), None, "not freed by its owner yet");
        assert!(live.contains(b, base, 8));
        assert!(live.free(b));
        assert!(!live.contains(b, base, 8));
    }
}
