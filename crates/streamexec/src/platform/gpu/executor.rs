//! The shared backend's `StreamExecutorInterface`: allocations (freed behind per-stream
//! fences, see device.rs), pinned and mapped host memory, peer access, kernel loading,
//! streams, events and synchronous copies.

use std::any::Any;
use std::sync::Arc;

use super::Driver;
use super::command_buffer::GpuCommandBuffer;
use super::device::{Allocation, GpuExecutor};
use super::event::GpuEvent;
use super::kernel::GpuKernel;
use super::stream::GpuStream;
use crate::error::{Error, Result};
use crate::interface::{
    Command, CommandBufferInterface, EventInterface, KernelInterface, StreamExecutorInterface,
    StreamInterface,
};
use crate::platform::downcast::downcast;
use crate::types::{
    AlignedHostBuffer, DeviceAddress, DeviceDescription, HostBuffer, MemoryUsage,
    MultiKernelLoaderSpec,
};

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
        // Parked behind a fence on every live stream; freed once they have all completed.
        self.park(addr);
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
        // The handle layer asks only about devices of this platform.
        downcast::<GpuExecutor<D>>(other.as_any(), "the peer of can_enable_peer_access")
            .is_ok_and(|o| self.drv.can_access_peer(&o.drv).unwrap_or(false))
    }

    fn enable_peer_access(&self, other: &dyn StreamExecutorInterface) -> Result<()> {
        // The handle layer refused a peer of another platform.
        let o = downcast::<GpuExecutor<D>>(other.as_any(), "the peer of enable_peer_access_to")?;
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
                platform: D::PLATFORM,
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

    fn create_default_stream(&self) -> Result<Box<dyn StreamInterface>> {
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| Error::invalid("default_stream", "the executor is shutting down"))?;
        let stream = GpuStream::legacy(me);
        self.streams.insert(stream.shared());
        Ok(Box::new(stream))
    }

    fn create_command_buffer(
        &self,
        commands: &[Command],
    ) -> Result<Option<Box<dyn CommandBufferInterface>>> {
        let me = self.me.upgrade().ok_or_else(|| {
            Error::invalid("CommandBuffer::finalize", "the executor is shutting down")
        })?;
        // SAFETY: the handle layer validated every command and pins its memory while the
        // buffer lives.
        let cb = unsafe { GpuCommandBuffer::new(me, commands) }?;
        Ok(cb.map(|cb| Box::new(cb) as Box<dyn CommandBufferInterface>))
    }

    fn create_event(&self) -> Result<Arc<dyn EventInterface>> {
        Ok(Arc::new(GpuEvent::awaitable(
            self.drv.clone(),
            self.notifier.clone(),
        )?))
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
        // The vendor library or the built-in kernels, as decided at creation (blas.rs).
        (self.blas_served != crate::types::Served::Nothing)
            .then_some(self as &dyn crate::interface::BlasSupport)
    }

    fn plugin_status(
        &self,
        family: crate::types::PluginFamily,
    ) -> Option<crate::types::PluginStatus> {
        self.plugins.iter().find(|s| s.family == family).cloned()
    }

    fn rng(&self) -> Option<&dyn crate::interface::RngSupport> {
        D::CANNED_PTX.map(|_| self as &dyn crate::interface::RngSupport)
    }

    fn dnn(&self) -> Option<&dyn crate::interface::DnnSupport> {
        // The vendor library (falling back per operation) or the built-in kernels, as decided
        // at creation (dnn.rs).
        match &self.vendor_dnn {
            Some(v) => Some(v as &dyn crate::interface::DnnSupport),
            None => D::DNN_PTX.map(|_| self as &dyn crate::interface::DnnSupport),
        }
    }

    fn fft(&self) -> Option<&dyn crate::interface::FftSupport> {
        // The vendor library or the built-in kernels, as decided at creation (fft.rs).
        (self.fft_served != crate::types::Served::Nothing)
            .then_some(self as &dyn crate::interface::FftSupport)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn rpc_capability(&self) -> Option<crate::interface::RpcCapability> {
        // LLVM GPU libc device code: one warp (wavefront) is one client, it finds the block
        // (mapped pinned memory) and keeps its locks through `__llvm_rpc_client`.
        Some(crate::interface::RpcCapability {
            lane_size: self.description.warp_size as usize,
            block: crate::interface::RpcBlockMemory::Unified,
            locks: crate::interface::RpcLockPlacement::ClientSymbol,
        })
    }
}
