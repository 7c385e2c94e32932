//! One device of a CUDA-like driver: allocations (freed behind per-stream fences), pinned and
//! mapped host memory, the module cache, synchronous copies.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::event::GpuEvent;
use super::kernel::{GpuKernel, GpuModule};
use super::stream::{GpuStream, StreamShared};
use super::{Driver, RawModule};
use crate::error::{Error, Result};
use crate::interface::{EventInterface, KernelInterface, StreamExecutorInterface, StreamInterface};
use crate::platform::work_queue::StreamSet;
use crate::ptx::parse_entries;
use crate::types::AlignedHostBuffer;
use crate::types::DeviceDescription;
use crate::types::MultiKernelLoaderSpec;
use crate::types::{DeviceAddress, HostBuffer, MemoryUsage};

/// What a device address was allocated as.
#[derive(Clone, Copy, Debug)]
enum Allocation {
    Device,
    /// Mapped page-locked host memory, with its host address.
    Mapped(usize),
}

/// An allocation freed by the user, waiting for the work queued before the free.
struct Parked<D: Driver> {
    ptr: u64,
    kind: Allocation,
    fences: Vec<(Arc<GpuEvent<D>>, u64)>,
}

/// One device.
pub(crate) struct GpuExecutor<D: Driver> {
    drv: Arc<D>,
    description: DeviceDescription,
    streams: StreamSet<StreamShared<D>>,
    modules: Mutex<HashMap<Vec<u8>, Arc<GpuModule>>>,
    allocs: Mutex<HashMap<u64, Allocation>>,
    parked: Mutex<Vec<Parked<D>>>,
    /// Built-in kernels of canned operations, by name.
    pub(super) canned: Mutex<HashMap<&'static str, Arc<dyn KernelInterface>>>,
    me: Weak<GpuExecutor<D>>,
}

impl<D: Driver> GpuExecutor<D> {
    pub(crate) fn new(drv: D) -> Result<Arc<Self>> {
        let description = drv.describe()?;
        Ok(Arc::new_cyclic(|me| GpuExecutor {
            drv: Arc::new(drv),
            description,
            streams: StreamSet::default(),
            modules: Mutex::new(HashMap::new()),
            allocs: Mutex::new(HashMap::new()),
            parked: Mutex::new(Vec::new()),
            canned: Mutex::new(HashMap::new()),
            me: me.clone(),
        }))
    }

    pub(crate) fn driver(&self) -> &Arc<D> {
        &self.drv
    }

    /// Makes this executor's frees also fence `stream` (of another device), which is about to
    /// read this executor's memory in a peer copy.
    pub(crate) fn fence_also(&self, stream: &Arc<StreamShared<D>>) {
        self.streams.insert(stream);
    }

    fn oom(&self, bytes: u64, e: Error) -> Error {
        Error::OutOfMemory {
            platform: D::PLATFORM.into(),
            device: self.description.ordinal,
            bytes,
            detail: e.to_string(),
        }
    }

    /// Frees parked allocations whose fences have all completed.
    fn reap(&self) {
        let mut parked = self.parked.lock();
        parked.retain(|p| {
            if !p.fences.iter().all(|(ev, g)| ev.is_done(*g)) {
                return true;
            }
            self.free(p.ptr, p.kind);
            false
        });
    }

    fn free(&self, ptr: u64, kind: Allocation) {
        // SAFETY: every fence recorded after the work that could use `ptr` has completed (or
        // the device is idle, in `drop`); the allocation came from this driver.
        let r = unsafe {
            match kind {
                Allocation::Device => self.drv.mem_free(ptr),
                Allocation::Mapped(host) => {
                    self.drv.host_free(host as *mut u8);
                    Ok(())
                }
            }
        };
        if let Err(e) = r {
            eprintln!("streamexec: {}: freeing {ptr:#x} failed: {e}", D::PLATFORM);
        }
    }

    fn module(&self, spec: &MultiKernelLoaderSpec) -> Result<(Arc<GpuModule>, String)> {
        let image = self.drv.select_image(spec, &self.description)?;
        if let Some(m) = self.modules.lock().get(&image.bytes) {
            return Ok((m.clone(), image.kernel_name));
        }
        let raw = self.drv.module_load(&image)?;
        // A PTX entry list our parser cannot read leaves the kernel unchecked rather than
        // refusing PTX the driver accepted.
        let entries = image.ptx.as_deref().and_then(|t| parse_entries(t).ok());
        let rpc_client = match self.drv.module_global(raw, crate::rpc::CLIENT_SYMBOL) {
            Ok(g) => g,
            Err(e) => {
                // SAFETY: just loaded; nothing uses it.
                unsafe { self.drv.module_unload(raw) };
                return Err(e);
            }
        };
        let module = Arc::new(GpuModule {
            raw,
            entries,
            rpc_client,
        });
        self.modules.lock().insert(image.bytes, module.clone());
        Ok((module, image.kernel_name))
    }
}

/// Page-locked host memory from the driver.
struct PinnedHost<D: Driver> {
    drv: Arc<D>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain host memory owned by this value until drop.
unsafe impl<D: Driver> Send for PinnedHost<D> {}
// SAFETY: as above; only raw pointers are handed out.
unsafe impl<D: Driver> Sync for PinnedHost<D> {}

// SAFETY: `ptr` is `len` bytes from `host_alloc` (page-aligned), zeroed in `host_allocate`,
// freed only in `drop`.
unsafe impl<D: Driver> HostBuffer for PinnedHost<D> {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl<D: Driver> Drop for PinnedHost<D> {
    fn drop(&mut self) {
        // SAFETY: ours; `HostMemory` leases keep it alive while copies use it.
        unsafe { self.drv.host_free(self.ptr) };
    }
}

impl<D: Driver> StreamExecutorInterface for GpuExecutor<D> {
    fn description(&self) -> &DeviceDescription {
        &self.description
    }

    fn allocate(&self, bytes: u64) -> Result<DeviceAddress> {
        self.reap();
        let ptr = self
            .drv
            .mem_alloc(bytes.max(1))
            .map_err(|e| self.oom(bytes, e))?;
        self.allocs.lock().insert(ptr, Allocation::Device);
        Ok(DeviceAddress::new(ptr))
    }

    fn allocate_unified(&self, bytes: u64) -> Result<(DeviceAddress, *mut u8)> {
        if !self.description.host_mapped_memory {
            return Err(Error::unsupported(
                D::PLATFORM,
                "allocate_unified",
                format!(
                    "{} cannot map page-locked host memory; use device memory and copies",
                    self.description.name
                ),
            ));
        }
        self.reap();
        let len = usize::try_from(bytes.max(1)).map_err(|_| {
            self.oom(
                bytes,
                Error::invalid("allocate_unified", "larger than the address space"),
            )
        })?;
        let host = self
            .drv
            .host_alloc(len, true)
            .map_err(|e| self.oom(bytes, e))?;
        // SAFETY: `len` fresh bytes of ours.
        unsafe { std::ptr::write_bytes(host, 0, len) };
        // SAFETY: `host` came from `host_alloc(_, true)`.
        let dev = match unsafe { self.drv.host_device_pointer(host) } {
            Ok(d) => d,
            Err(e) => {
                // SAFETY: never handed out.
                unsafe { self.drv.host_free(host) };
                return Err(e);
            }
        };
        self.allocs
            .lock()
            .insert(dev, Allocation::Mapped(host as usize));
        Ok((DeviceAddress::new(dev), host))
    }

    unsafe fn deallocate(&self, addr: DeviceAddress) {
        let Some(kind) = self.allocs.lock().remove(&addr.raw()) else {
            eprintln!(
                "streamexec: {}: deallocate of unknown address {addr}",
                D::PLATFORM
            );
            return;
        };
        let mut fences = Vec::new();
        for s in self.streams.live() {
            let fence = GpuEvent::new(self.drv.clone(), false)
                .map(Arc::new)
                .and_then(|ev| s.record(ev.clone()).map(|g| (ev, g)));
            match fence {
                Ok(f) => fences.push(f),
                // No fence: wait for the stream instead.
                Err(_) => drop(s.finish()),
            }
        }
        self.parked.lock().push(Parked {
            ptr: addr.raw(),
            kind,
            fences,
        });
        self.reap();
    }

    fn host_allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>> {
        let fallback = || {
            AlignedHostBuffer::new(bytes, 64)
                .map(|b| Box::new(b) as Box<dyn HostBuffer>)
                .ok_or_else(|| {
                    self.oom(
                        bytes as u64,
                        Error::invalid("allocate_host", "the host allocator refused"),
                    )
                })
        };
        if bytes == 0 {
            return fallback();
        }
        let ptr = self
            .drv
            .host_alloc(bytes, false)
            .map_err(|e| self.oom(bytes as u64, e))?;
        let pinned = PinnedHost {
            drv: self.drv.clone(),
            ptr,
            len: bytes,
        };
        if !(ptr as usize).is_multiple_of(64) {
            drop(pinned);
            return fallback();
        }
        // SAFETY: `bytes` fresh bytes of ours.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(Box::new(pinned))
    }

    fn memory_usage(&self) -> Result<MemoryUsage> {
        let (free, total) = self.drv.mem_info()?;
        Ok(MemoryUsage { free, total })
    }

    fn can_enable_peer_access(&self, other: &dyn StreamExecutorInterface) -> bool {
        other
            .as_any()
            .downcast_ref::<GpuExecutor<D>>()
            .is_some_and(|o| self.drv.can_access_peer(&o.drv).unwrap_or(false))
    }

    fn enable_peer_access(&self, other: &dyn StreamExecutorInterface) -> Result<()> {
        let o = other
            .as_any()
            .downcast_ref::<GpuExecutor<D>>()
            .ok_or_else(|| {
                Error::invalid("enable_peer_access_to", "not a device of this platform")
            })?;
        if !self.drv.can_access_peer(&o.drv)? {
            return Err(Error::unsupported(
                D::PLATFORM,
                "enable_peer_access_to",
                format!(
                    "device {} cannot reach device {} directly; stage copies through host memory",
                    self.description.ordinal, o.description.ordinal
                ),
            ));
        }
        self.drv.enable_peer_access(&o.drv)
    }

    fn load_kernel(&self, spec: &MultiKernelLoaderSpec) -> Result<Arc<dyn KernelInterface>> {
        let (module, name) = self.module(spec)?;
        let function = self.drv.module_function(module.raw, &name).map_err(|e| {
            let has = module.entries.as_ref().map_or(String::new(), |es| {
                let names: Vec<&str> = es.iter().map(|e| e.name.as_str()).collect();
                format!("; the module's entries are: {}", names.join(", "))
            });
            Error::KernelLoad {
                platform: D::PLATFORM.into(),
                kernel: name.clone(),
                detail: format!("no kernel named `{name}` in the module ({e}){has}"),
            }
        })?;
        Ok(Arc::new(GpuKernel::<D>::new(&name, function, module)))
    }

    fn create_stream(&self) -> Result<Box<dyn StreamInterface>> {
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| Error::invalid("create_stream", "the executor is shutting down"))?;
        let stream = GpuStream::new(me)?;
        self.streams.insert(stream.shared());
        Ok(Box::new(stream))
    }

    fn create_event(&self) -> Result<Arc<dyn EventInterface>> {
        Ok(Arc::new(GpuEvent::new(self.drv.clone(), true)?))
    }

    fn synchronize_all(&self) -> Result<()> {
        for s in self.streams.live() {
            let _ = s.finish(); // stream errors belong to their streams
        }
        self.reap();
        self.drv.synchronize_device()
    }

    unsafe fn memcpy_h2d_sync(&self, src: &[u8], dst: DeviceAddress) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller checked the device range.
        unsafe { self.drv.memcpy_htod(dst.raw(), src) }
    }

    unsafe fn memcpy_d2h_sync(&self, src: DeviceAddress, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller checked the device range.
        unsafe { self.drv.memcpy_dtoh(dst, src.raw()) }
    }

    unsafe fn memset_sync(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: the caller checked the device range.
        unsafe { self.drv.memset_d8(dst.raw(), value, bytes as usize) }
    }

    fn blas(&self) -> Option<&dyn crate::interface::BlasSupport> {
        D::HAS_BLAS.then_some(self as &dyn crate::interface::BlasSupport)
    }

    fn rng(&self) -> Option<&dyn crate::interface::RngSupport> {
        D::CANNED_PTX.map(|_| self as &dyn crate::interface::RngSupport)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn rpc_capability(&self) -> Option<crate::RpcCapability> {
        // LLVM GPU libc device code: one warp (wavefront) is one client, it finds the block
        // (mapped pinned memory) and keeps its locks through `__llvm_rpc_client`.
        Some(crate::RpcCapability {
            lane_size: self.description.warp_size as usize,
            block: crate::RpcBlockMemory::Unified,
            locks: crate::RpcLockPlacement::ClientSymbol,
        })
    }
}

impl<D: Driver> Drop for GpuExecutor<D> {
    fn drop(&mut self) {
        // Every stream (each holds this executor) is gone, but the driver may still run their
        // last work: wait for the device, then free what is parked and unload modules.
        let idle = self.drv.synchronize_device();
        if idle.is_ok() {
            for p in std::mem::take(&mut *self.parked.lock()) {
                self.free(p.ptr, p.kind);
            }
            let modules: Vec<RawModule> = self.modules.lock().values().map(|m| m.raw).collect();
            for m in modules {
                // SAFETY: the device is idle and no kernel outlives its executor's streams.
                unsafe { self.drv.module_unload(m) };
            }
        }
        // Live allocations still owned by `DeviceMemory` values cannot exist: they hold the
        // executor. If the device failed to go idle, parked memory leaks rather than being
        // freed under running work.
    }
}
