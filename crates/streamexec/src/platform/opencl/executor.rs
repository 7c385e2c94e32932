//! The OpenCL device's `StreamExecutorInterface`: allocation (`cl_mem` buffers, with red zones
//! on CPU devices, and fine-grained SVM), pinned host memory (`CL_MEM_ALLOC_HOST_PTR` + map), synchronous copies on
//! the executor's own queue, kernel loading, streams and events.

use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

use opencl3::command_queue::CommandQueue;
use opencl3::memory::{
    Buffer, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE,
    CL_MEM_SVM_ATOMICS, CL_MEM_SVM_FINE_GRAIN_BUFFER, ClMem,
};
use opencl3::types::{CL_BLOCKING, cl_mem};
use parking_lot::Mutex;

use super::command_buffer::OpenClCommandBuffer;
use super::device::{OFFSET_BITS, OpenClExecutor};
use super::event::OpenClEvent;
use super::kernel::OpenClKernel;
use super::memory::{ClAlloc, ClMemory, reap};
use super::red_zone;
use super::status::{PLATFORM, cl_error, error_text};
use super::stream::OpenClStream;
use crate::error::{Error, Result};
use crate::interface::{
    Command, CommandBufferInterface, EventInterface, KernelInterface, StreamExecutorInterface,
    StreamInterface,
};
use crate::types::{
    AlignedHostBuffer, DeviceAddress, DeviceDescription, HostBuffer, MemoryUsage,
    MultiKernelLoaderSpec,
};

/// `STREAMEXEC_OPENCL_COMMAND_BUFFER=0` turns `cl_khr_command_buffer` off: finalized command
/// buffers replay plainly (for comparison, e.g. in benches).
pub(crate) const COMMAND_BUFFER_ENV: &str = "STREAMEXEC_OPENCL_COMMAND_BUFFER";

/// Page-locked host memory: a `CL_MEM_ALLOC_HOST_PTR` buffer, mapped for its whole life.
struct PinnedHost {
    buffer: Buffer<u8>,
    ptr: *mut u8,
    len: usize,
    queue: Arc<Mutex<CommandQueue>>,
}

// SAFETY: the mapping is plain host memory owned by this value until drop.
unsafe impl Send for PinnedHost {}
// SAFETY: as above; `PinnedHost` hands out only raw pointers.
unsafe impl Sync for PinnedHost {}

// SAFETY: `ptr` maps `len` bytes, zeroed in `host_allocate`, 64-byte aligned (checked there),
// valid until `drop` unmaps it.
unsafe impl HostBuffer for PinnedHost {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        let q = self.queue.lock();
        // SAFETY: `ptr` is the live mapping of `buffer`; nothing uses it after this.
        let r = unsafe {
            opencl3::command_queue::enqueue_unmap_mem_object(
                q.get(),
                self.buffer.get(),
                self.ptr as *mut c_void,
                0,
                std::ptr::null(),
            )
        };
        if let Ok(ev) = r {
            drop(opencl3::event::Event::new(ev));
        }
        let _ = q.finish();
    }
}

impl StreamExecutorInterface for OpenClExecutor {
    fn description(&self) -> &DeviceDescription {
        &self.description
    }

    fn allocate(&self, bytes: u64) -> Result<DeviceAddress> {
        let oom = |detail: String| Error::OutOfMemory {
            platform: PLATFORM,
            device: self.description.ordinal,
            bytes,
            detail,
        };
        if bytes >= 1 << OFFSET_BITS {
            return Err(oom(format!(
                "streamexec's OpenCL backend addresses at most 2^{OFFSET_BITS} bytes per allocation"
            )));
        }
        reap(self.context.get(), &self.reaper);
        if self.red_zones {
            let (buffer, red) = red_zone::create_buffer(&self.context, bytes as usize)
                .map_err(|e| oom(format!("a buffer with red zones: {e}")))?;
            return Ok(self.insert(ClAlloc {
                mem: ClMemory::Buffer(buffer),
                bytes,
                red: Some(red),
            }));
        }
        // SAFETY: no host pointer is passed; the size is non-zero.
        let buffer = unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                bytes.max(1) as usize,
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| oom(format!("clCreateBuffer: {}", error_text(e.0))))?;
        Ok(self.insert(ClAlloc {
            mem: ClMemory::Buffer(buffer),
            bytes,
            red: None,
        }))
    }

    fn allocate_unified(&self, bytes: u64) -> Result<(DeviceAddress, *mut u8)> {
        if !self.description.unified_memory {
            return Err(Error::unsupported(
                PLATFORM,
                "allocate_unified",
                format!(
                    "{} has no fine-grained SVM with atomics; use device memory and copies",
                    self.description.name
                ),
            ));
        }
        reap(self.context.get(), &self.reaper);
        // SAFETY: a fine-grained SVM allocation of a non-zero size.
        let ptr = unsafe {
            opencl3::memory::svm_alloc(
                self.context.get(),
                CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER | CL_MEM_SVM_ATOMICS,
                bytes.max(1) as usize,
                64,
            )
        }
        .map_err(|e| Error::OutOfMemory {
            platform: PLATFORM,
            device: self.description.ordinal,
            bytes,
            detail: format!("clSVMAlloc: {}", error_text(e)),
        })?;
        if ptr.is_null() {
            return Err(Error::OutOfMemory {
                platform: PLATFORM,
                device: self.description.ordinal,
                bytes,
                detail: "clSVMAlloc returned NULL".into(),
            });
        }
        // SAFETY: the new allocation is ours; fine-grained SVM is host-accessible.
        unsafe { std::ptr::write_bytes(ptr as *mut u8, 0, bytes.max(1) as usize) };
        let mem = ClMemory::Svm {
            ptr,
            reaper: self.reaper.clone(),
        };
        Ok((
            self.insert(ClAlloc {
                mem,
                bytes,
                red: None,
            }),
            ptr as *mut u8,
        ))
    }

    unsafe fn deallocate(&self, addr: DeviceAddress) {
        // clReleaseMemObject defers the release until queued commands that use it finish.
        self.allocs.write().remove(&(addr.raw() >> OFFSET_BITS));
    }

    fn host_allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>> {
        if bytes == 0 || self.host_unified {
            return AlignedHostBuffer::new(bytes, 64)
                .map(|b| Box::new(b) as Box<dyn HostBuffer>)
                .ok_or_else(|| Error::OutOfMemory {
                    platform: PLATFORM,
                    device: self.description.ordinal,
                    bytes: bytes as u64,
                    detail: "the host allocator refused".into(),
                });
        }
        // SAFETY: no host pointer is passed; the size is non-zero.
        let buffer = unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                bytes,
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| Error::OutOfMemory {
            platform: PLATFORM,
            device: self.description.ordinal,
            bytes: bytes as u64,
            detail: format!("clCreateBuffer(CL_MEM_ALLOC_HOST_PTR): {}", error_text(e.0)),
        })?;
        let ptr = self.with_sync_queue(|q| {
            let mut mapped: cl_mem = std::ptr::null_mut();
            // SAFETY: a blocking map of the whole new buffer.
            let ev = unsafe {
                opencl3::command_queue::enqueue_map_buffer(
                    q.get(),
                    buffer.get(),
                    CL_BLOCKING,
                    CL_MAP_READ | CL_MAP_WRITE,
                    0,
                    bytes,
                    &mut mapped,
                    0,
                    std::ptr::null(),
                )
            }
            .map_err(|e| cl_error("clEnqueueMapBuffer", e))?;
            drop(opencl3::event::Event::new(ev));
            Ok(mapped as *mut u8)
        })?;
        let pinned = PinnedHost {
            buffer,
            ptr,
            len: bytes,
            queue: self.sync_queue.clone(),
        };
        if ptr.is_null() || !(ptr as usize).is_multiple_of(64) {
            drop(pinned);
            // The driver's mapping does not meet HostBuffer's alignment: use ordinary memory.
            return AlignedHostBuffer::new(bytes, 64)
                .map(|b| Box::new(b) as Box<dyn HostBuffer>)
                .ok_or_else(|| Error::OutOfMemory {
                    platform: PLATFORM,
                    device: self.description.ordinal,
                    bytes: bytes as u64,
                    detail: "the host allocator refused".into(),
                });
        }
        // SAFETY: the mapping is `bytes` long and ours.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(Box::new(pinned))
    }

    fn memory_usage(&self) -> Result<MemoryUsage> {
        let used: u64 = self.allocs.read().values().map(|a| a.bytes).sum();
        let total = self.description.total_memory;
        // OpenCL has no free-memory query: total minus what this executor holds.
        Ok(MemoryUsage {
            free: total.saturating_sub(used),
            total,
        })
    }

    fn load_kernel(&self, spec: &MultiKernelLoaderSpec) -> Result<Arc<dyn KernelInterface>> {
        let (program, name) = self.program(spec)?;
        Ok(Arc::new(OpenClKernel::new(program, &name)?))
    }

    fn create_stream(&self) -> Result<Box<dyn StreamInterface>> {
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| Error::invalid("create_stream", "executor is shutting down"))?;
        let stream = OpenClStream::new(me)?;
        self.streams.insert(stream.shared());
        Ok(Box::new(stream))
    }

    fn create_command_buffer(
        &self,
        commands: &[Command],
    ) -> Result<Option<Box<dyn CommandBufferInterface>>> {
        let Ok(support) = &self.command_buffers else {
            return Ok(None);
        };
        if std::env::var_os(COMMAND_BUFFER_ENV).is_some_and(|v| v == "0") {
            return Ok(None);
        }
        let me = self.me.upgrade().ok_or_else(|| {
            Error::invalid("CommandBuffer::finalize", "executor is shutting down")
        })?;
        Ok(Some(Box::new(OpenClCommandBuffer::new(
            me,
            support.clone(),
            commands,
        )?)))
    }

    fn create_event(&self) -> Result<Arc<dyn EventInterface>> {
        Ok(Arc::new(OpenClEvent::default()))
    }

    fn synchronize_all(&self) -> Result<()> {
        for s in self.streams.live() {
            let _ = s.finish();
        }
        reap(self.context.get(), &self.reaper);
        self.with_sync_queue(|q| q.finish().map_err(|e| cl_error("clFinish", e.0)))
    }

    unsafe fn memcpy_h2d_sync(&self, src: &[u8], dst: DeviceAddress) -> Result<()> {
        let (alloc, off) = self.resolve(dst, src.len() as u64, "synchronous_memcpy_h2d")?;
        if src.is_empty() {
            return Ok(());
        }
        self.with_sync_queue(|q| {
            // SAFETY: blocking write of `src.len()` bytes into a live buffer range.
            let ev = unsafe {
                alloc.write(
                    q.get(),
                    CL_BLOCKING,
                    off,
                    src.as_ptr() as *const c_void,
                    src.len(),
                )
            }
            .map_err(|e| cl_error("clEnqueueWriteBuffer", e))?;
            drop(opencl3::event::Event::new(ev));
            Ok(())
        })
    }

    unsafe fn memcpy_d2h_sync(&self, src: DeviceAddress, dst: &mut [u8]) -> Result<()> {
        let (alloc, off) = self.resolve(src, dst.len() as u64, "synchronous_memcpy_d2h")?;
        if dst.is_empty() {
            return Ok(());
        }
        self.with_sync_queue(|q| {
            // SAFETY: blocking read of `dst.len()` bytes from a live buffer range.
            let ev = unsafe {
                alloc.read(
                    q.get(),
                    CL_BLOCKING,
                    off,
                    dst.as_mut_ptr() as *mut c_void,
                    dst.len(),
                )
            }
            .map_err(|e| cl_error("clEnqueueReadBuffer", e))?;
            drop(opencl3::event::Event::new(ev));
            Ok(())
        })
    }

    unsafe fn memset_sync(&self, dst: DeviceAddress, value: u8, bytes: u64) -> Result<()> {
        let (alloc, off) = self.resolve(dst, bytes, "memset")?;
        if bytes == 0 {
            return Ok(());
        }
        self.with_sync_queue(|q| {
            // SAFETY: fill of a live buffer range with a 1-byte pattern.
            let ev = unsafe { alloc.fill(q.get(), off, &[value], bytes as usize) }
                .map_err(|e| cl_error("clEnqueueFillBuffer", e))?;
            let ev = opencl3::event::Event::new(ev);
            ev.wait().map_err(|e| cl_error("clWaitForEvents", e.0))
        })
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

    fn dnn(&self) -> Option<&dyn crate::interface::DnnSupport> {
        Some(self)
    }

    fn fft(&self) -> Option<&dyn crate::interface::FftSupport> {
        Some(self)
    }

    fn rpc_capability(&self) -> Option<crate::interface::RpcCapability> {
        // The OpenCL C client (`opencl_prelude`): each work-item is a lane-size-1 client over
        // the executor's SVM block, with its port locks right after the protocol's bytes.
        Some(crate::interface::RpcCapability {
            lane_size: 1,
            block: crate::interface::RpcBlockMemory::Unified,
            locks: crate::interface::RpcLockPlacement::AfterBlock,
        })
    }
}
