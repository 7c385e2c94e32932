//! The host device's `StreamExecutorInterface`: allocation (the system allocator, 256-byte
//! aligned), synchronous copies, kernel loading (a native `HostKernel`, else the spec's PTX
//! through the PTX engine), streams and events.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::command_buffer::HostCommandBuffer;
use super::device::HostExecutor;
use super::event::HostEvent;
use super::kernel::HostKernel;
use super::status::{self, PLATFORM};
use super::stream::HostStream;
use super::{ptx, sysinfo};
use crate::error::{Error, Result};
use crate::interface::{
    Command, CommandBufferInterface, EventInterface, KernelInterface, StreamExecutorInterface,
    StreamInterface,
};
use crate::ptx::device_bytes;
use crate::types::{
    AlignedHostBuffer, DeviceAddress, DeviceDescription, HostBuffer, MemoryUsage,
    MultiKernelLoaderSpec,
};

impl StreamExecutorInterface for HostExecutor {
    fn description(&self) -> &DeviceDescription {
        &self.description
    }

    fn allocate(&self, bytes: u64) -> Result<DeviceAddress> {
        self.allocate_bytes(bytes)
    }

    fn allocate_unified(&self, bytes: u64) -> Result<(DeviceAddress, *mut u8)> {
        // Device memory on the host platform is host memory already.
        let addr = self.allocate(bytes)?;
        let ptr = self.pin(addr, bytes, "allocate_unified")?.as_ptr();
        Ok((addr, ptr))
    }

    unsafe fn register_host(&self, host: *mut u8, bytes: u64) -> Result<DeviceAddress> {
        // Device memory is host memory: the table takes the range at its own address.
        // SAFETY: the caller's contract is the table's.
        unsafe { self.table.register(host, bytes) }
            .map(DeviceAddress::new)
            .ok_or_else(|| {
                Error::invalid(
                    "register_host",
                    format!(
                        "{bytes} bytes at {host:p}: empty, NULL, or overlapping memory the \
                         device already reaches"
                    ),
                )
            })
    }

    fn host_view(
        &self,
        addr: DeviceAddress,
        bytes: u64,
    ) -> Option<(*mut u8, Box<dyn Send + Sync>)> {
        // Device memory is host memory; the pin keeps the allocation alive.
        let p = self.table.resolve(addr.raw(), bytes)?;
        Some((p.as_ptr(), Box::new(p)))
    }

    unsafe fn deallocate(&self, addr: DeviceAddress) {
        // Operations that pinned the allocation keep it alive until they finish.
        self.table.free(addr.raw());
    }

    fn host_allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>> {
        match AlignedHostBuffer::new(bytes, 64) {
            Some(b) => Ok(Box::new(b)),
            None => Err(status::out_of_memory(
                self.description.ordinal,
                bytes as u64,
                "the system allocator refused host memory",
            )),
        }
    }

    fn memory_usage(&self) -> Result<MemoryUsage> {
        let total = self.description.total_memory;
        let free = sysinfo::read()
            .available_memory
            .unwrap_or(total.saturating_sub(self.table.bytes_in_use()));
        Ok(MemoryUsage { free, total })
    }

    fn set_race_check(&self, on: bool) -> Result<()> {
        self.race_check.store(on, Ordering::Relaxed);
        Ok(())
    }

    fn set_ptx_engine(&self, engine: crate::types::PtxEngine) -> Result<()> {
        *self.ptx_engine.lock() = engine;
        Ok(())
    }

    fn ptx_services(&self) -> Result<Arc<crate::types::PtxServices>> {
        Ok(self.ptx_services.clone())
    }

    fn load_kernel(&self, spec: &MultiKernelLoaderSpec) -> Result<Arc<dyn KernelInterface>> {
        // A native kernel wins; otherwise the PTX engine runs the spec's PTX.
        let Some(entry) = spec.host_kernel() else {
            if let Some(img) = spec.select_cuda_ptx(None) {
                return ptx::load(self, spec, img);
            }
            return Err(spec.no_suitable_format(
                PLATFORM,
                "a native Rust kernel (add_host_kernel) or CUDA PTX (add_cuda_ptx_in_memory), \
                 which the host platform's PTX engine runs",
            ));
        };
        // Any type can be a spec's `InProcessKernel`, so this one is the user's to get wrong:
        // not an internal error (platform::downcast) but `NoSuitableFormat`.
        let k = entry.as_any().downcast_ref::<HostKernel>().ok_or_else(|| {
            spec.no_suitable_format(
                PLATFORM,
                "a HostKernel (the spec's in-process kernel is of a type the host platform does \
                 not run)",
            )
        })?;
        Ok(Arc::new(k.clone()))
    }

    fn create_stream(&self) -> Result<Box<dyn StreamInterface>> {
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| Error::invalid("create_stream", "executor is shutting down"))?;
        let n = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "streamexec-{PLATFORM}{}-stream-{n}",
            self.description.ordinal
        );
        Ok(Box::new(HostStream::new(me, name)?))
    }

    fn create_command_buffer(
        &self,
        commands: &[Command],
    ) -> Result<Option<Box<dyn CommandBufferInterface>>> {
        let me = self.me.upgrade().ok_or_else(|| {
            Error::invalid("CommandBuffer::finalize", "executor is shutting down")
        })?;
        // SAFETY: the handle layer validated every command and pins its memory while the
        // buffer lives.
        let cb = unsafe { HostCommandBuffer::new(me, commands) }?;
        Ok(Some(Box::new(cb)))
    }

    fn create_event(&self) -> Result<Arc<dyn EventInterface>> {
        Ok(Arc::new(HostEvent::default()))
    }

    fn synchronize_all(&self) -> Result<()> {
        for s in self.streams.live() {
            // Stream failures are reported by their streams, not here.
            let _ = s.wait_idle();
        }
        Ok(())
    }

    unsafe fn memcpy_h2d_sync(&self, src: &[u8], dst: DeviceAddress) -> Result<()> {
        let dst = self.pin(dst, src.len() as u64, "synchronous_memcpy_h2d")?;
        // SAFETY: pinned for `src.len()` bytes.
        unsafe { device_bytes::store_bytes(dst.as_ptr(), src) };
        Ok(())
    }

    unsafe fn memcpy_d2h_sync(&self, src: DeviceAddress, dst: &mut [u8]) -> Result<()> {
        let src = self.pin(src, dst.len() as u64, "synchronous_memcpy_d2h")?;
        // SAFETY: pinned for `dst.len()` bytes.
        unsafe { device_bytes::load_bytes(dst, src.as_ptr()) };
        Ok(())
    }

    unsafe fn memset_sync(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()> {
        let dst = self.pin(dst, bytes, "memset")?;
        // SAFETY: pinned for `bytes` bytes.
        unsafe { device_bytes::fill_u8(dst.as_ptr(), value, bytes as usize) };
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn blas(&self) -> Option<&dyn crate::interface::BlasSupport> {
        Some(self)
    }

    fn rng(&self) -> Option<&dyn crate::interface::RngSupport> {
        Some(self)
    }

    fn plugin_status(
        &self,
        family: crate::types::PluginFamily,
    ) -> Option<crate::types::PluginStatus> {
        self.plugins.iter().find(|s| s.family == family).cloned()
    }

    fn fft(&self) -> Option<&dyn crate::interface::FftSupport> {
        Some(self)
    }

    fn dnn(&self) -> Option<&dyn crate::interface::DnnSupport> {
        Some(self)
    }

    fn rpc_capability(&self) -> Option<crate::interface::RpcCapability> {
        // One server serves both kinds of client: PTX modules built against LLVM's GPU libc
        // (a warp of the engine is one client; the module's `__llvm_rpc_client` holds its
        // locks) and Rust host kernels (`ExecutorRpc::client`, one lane of a port). The block
        // is a live allocation of this executor, so the PTX engine reaches it like any device
        // memory; device memory is host memory here, so in-process clients use it directly.
        Some(crate::interface::RpcCapability {
            lane_size: self.description.warp_size as usize,
            block: crate::interface::RpcBlockMemory::Unified,
            locks: crate::interface::RpcLockPlacement::ClientSymbol,
        })
    }
}
