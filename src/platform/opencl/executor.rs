//! The OpenCL device: context, allocations, program cache, synchronous copies.
//!
//! Device addresses are synthetic: `(allocation id << 40) | byte offset`, so sub-slices are
//! address arithmetic as on every platform; a launch turns a non-zero offset into a sub-buffer.

use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::memory::{
    Buffer, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE,
    CL_MEM_SVM_ATOMICS, CL_MEM_SVM_FINE_GRAIN_BUFFER, ClMem,
};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, cl_device_id, cl_mem};
use parking_lot::{Mutex, RwLock};

use super::event::OpenClEvent;
use super::kernel::OpenClKernel;
use super::memory::{ClAlloc, ClMemory, Reaper, reap};
use super::stream::{OpenClStream, StreamShared};
use super::{PLATFORM, cl_error};
use crate::error::{Error, Result};
use crate::interface::{EventInterface, KernelInterface, StreamExecutorInterface, StreamInterface};
use crate::platform::work_queue::StreamSet;
use crate::types::AlignedHostBuffer;
use crate::types::DeviceDescription;
use crate::types::MultiKernelLoaderSpec;
use crate::types::{DeviceAddress, HostBuffer, MemoryUsage};

/// Bits of a device address that hold the byte offset inside an allocation.
pub(crate) const OFFSET_BITS: u32 = 40;

type ProgramKey = (bool, Vec<u8>, String);

/// One OpenCL device.
pub(crate) struct OpenClExecutor {
    pub(crate) description: DeviceDescription,
    pub(crate) context: Context,
    sync_queue: Arc<Mutex<CommandQueue>>,
    allocs: RwLock<HashMap<u64, Arc<ClAlloc>>>,
    next_id: AtomicU64,
    programs: Mutex<HashMap<ProgramKey, Arc<Program>>>,
    streams: StreamSet<StreamShared>,
    reaper: Reaper,
    /// The device works on host memory directly (CPU drivers such as PoCL): page-locked
    /// staging buffers buy nothing there, so host allocations are ordinary memory.
    host_unified: bool,
    /// Built-in BLAS and Philox kernels (canned.rs), built on first use.
    pub(crate) canned: super::canned::CannedKernels,
    me: Weak<OpenClExecutor>,
}

// SAFETY: OpenCL contexts, devices and queues are thread-safe handles (OpenCL 1.1+); the
// queue used from several threads is behind a Mutex.
unsafe impl Send for OpenClExecutor {}
// SAFETY: as above.
unsafe impl Sync for OpenClExecutor {}

impl OpenClExecutor {
    pub(crate) fn new(device: cl_device_id, description: DeviceDescription) -> Result<Arc<Self>> {
        let context = Context::from_device(&Device::new(device))
            .map_err(|e| cl_error("clCreateContext", e.0))?;
        let queue =
            CommandQueue::create_default_with_properties(&context, CL_QUEUE_PROFILING_ENABLE, 0)
                .map_err(|e| cl_error("clCreateCommandQueueWithProperties", e.0))?;
        Ok(Arc::new_cyclic(|me| OpenClExecutor {
            description,
            context,
            sync_queue: Arc::new(Mutex::new(queue)),
            allocs: RwLock::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            programs: Mutex::new(HashMap::new()),
            streams: StreamSet::default(),
            reaper: Reaper::default(),
            host_unified: Device::new(device).host_unified_memory().unwrap_or(false),
            canned: Default::default(),
            me: me.clone(),
        }))
    }

    /// The allocation behind `[addr, addr + bytes)` and the byte offset of `addr` in it.
    pub(crate) fn resolve(
        &self,
        addr: DeviceAddress,
        bytes: u64,
        what: &str,
    ) -> Result<(Arc<ClAlloc>, usize)> {
        self.try_resolve(addr, bytes).ok_or_else(|| {
            Error::invalid(
                what,
                format!(
                    "{bytes} bytes at {addr} are not inside one live allocation of this device"
                ),
            )
        })
    }

    fn insert(&self, alloc: ClAlloc) -> DeviceAddress {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.allocs.write().insert(id, Arc::new(alloc));
        DeviceAddress::new(id << OFFSET_BITS)
    }

    /// As [`resolve`](Self::resolve), without building an error (hot paths build it lazily).
    pub(crate) fn try_resolve(
        &self,
        addr: DeviceAddress,
        bytes: u64,
    ) -> Option<(Arc<ClAlloc>, usize)> {
        let id = addr.raw() >> OFFSET_BITS;
        let offset = addr.raw() & ((1 << OFFSET_BITS) - 1);
        let map = self.allocs.read();
        let a = map.get(&id)?;
        offset.checked_add(bytes).filter(|&e| e <= a.bytes)?;
        Some((a.clone(), offset as usize))
    }

    /// The built program for the spec's OpenCL image (cached), and that image's kernel name.
    fn program(&self, spec: &MultiKernelLoaderSpec) -> Result<(Arc<Program>, String)> {
        let (image, binary) = match (spec.opencl_text(), spec.opencl_binary()) {
            (Some(t), _) => (t, false),
            (None, Some(b)) => (b, true),
            (None, None) => {
                return Err(spec.no_suitable_format(
                    PLATFORM,
                    "OpenCL C text or an OpenCL binary (add_opencl_text_in_memory / _on_disk, \
                     add_opencl_binary_in_memory / _on_disk)",
                ));
            }
        };
        let load_err = |detail: String| Error::KernelLoad {
            platform: PLATFORM.into(),
            kernel: image.kernel_name.clone(),
            detail,
        };
        let options = format!("-cl-kernel-arg-info {}", spec.opencl_build_options());
        if options.contains('\0') {
            return Err(load_err("the build options contain a NUL byte".into()));
        }
        let mut bytes = image.source.bytes()?.into_owned();
        if spec.rpc() {
            if binary {
                return Err(load_err(
                    "the spec asks for RPC, which needs OpenCL C text to put the client in front \
                     of; add_opencl_text_* instead of a binary"
                        .into(),
                ));
            }
            bytes.splice(0..0, crate::rpc::opencl_prelude().into_bytes());
        }
        let key = (binary, bytes, options);
        if let Some(p) = self.programs.lock().get(&key) {
            return Ok((p.clone(), image.kernel_name.clone()));
        }
        let (binary, bytes, options) = &key;
        let program = if *binary {
            Program::create_and_build_from_binary(&self.context, &[bytes], options).map_err(
                |e| {
                    load_err(format!(
                        "the OpenCL binary did not load or build: {} ({})",
                        opencl3::error_codes::error_text(e.0),
                        e.0
                    ))
                },
            )?
        } else {
            let text = std::str::from_utf8(bytes)
                .map_err(|e| load_err(format!("the OpenCL C source is not UTF-8: {e}")))?;
            if text.contains('\0') {
                return Err(load_err("the OpenCL C source contains a NUL byte".into()));
            }
            Program::create_and_build_from_source(&self.context, text, options)
                .map_err(|log| load_err(format!("the OpenCL C compiler failed: {log}")))?
        };
        let program = Arc::new(program);
        self.programs.lock().insert(key, program.clone());
        Ok((program, image.kernel_name.clone()))
    }

    fn with_sync_queue<T>(&self, f: impl FnOnce(&CommandQueue) -> Result<T>) -> Result<T> {
        let q = self.sync_queue.lock();
        f(&q)
    }
}

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
            platform: PLATFORM.into(),
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
        // SAFETY: no host pointer is passed; the size is non-zero.
        let buffer = unsafe {
            Buffer::<u8>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                bytes.max(1) as usize,
                std::ptr::null_mut(),
            )
        }
        .map_err(|e| {
            oom(format!(
                "clCreateBuffer: {}",
                opencl3::error_codes::error_text(e.0)
            ))
        })?;
        Ok(self.insert(ClAlloc {
            mem: ClMemory::Buffer(buffer),
            bytes,
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
            platform: PLATFORM.into(),
            device: self.description.ordinal,
            bytes,
            detail: format!("clSVMAlloc: {}", opencl3::error_codes::error_text(e)),
        })?;
        if ptr.is_null() {
            return Err(Error::OutOfMemory {
                platform: PLATFORM.into(),
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
        Ok((self.insert(ClAlloc { mem, bytes }), ptr as *mut u8))
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
                    platform: PLATFORM.into(),
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
            platform: PLATFORM.into(),
            device: self.description.ordinal,
            bytes: bytes as u64,
            detail: format!(
                "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR): {}",
                opencl3::error_codes::error_text(e.0)
            ),
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
                    platform: PLATFORM.into(),
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
        Ok(Arc::new(OpenClKernel::new(program, &name, spec.arity())?))
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

    fn rpc_capability(&self) -> Option<crate::RpcCapability> {
        // The OpenCL C client (`opencl_prelude`): each work-item is a lane-size-1 client over
        // the executor's SVM block, with its port locks right after the protocol's bytes.
        Some(crate::RpcCapability {
            lane_size: 1,
            block: crate::RpcBlockMemory::Unified,
            locks: crate::RpcLockPlacement::AfterBlock,
        })
    }
}

impl Drop for OpenClExecutor {
    fn drop(&mut self) {
        // Every stream (each holds this executor) is gone; SVM still held by a queued command
        // stays parked, and leaks rather than being freed under that command.
        let _ = self.sync_queue.lock().finish();
        reap(self.context.get(), &self.reaper);
    }
}
