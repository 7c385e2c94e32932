//! The host platform: device memory is host memory, kernels are Rust closures run with the CUDA
//! execution model (grids of blocks of threads, barriers, shared memory), streams are worker
//! threads. Always available; the default platform.

mod block;
mod canned;
mod event;
mod kernel;
pub(crate) mod memory;
pub(crate) mod ptx;
mod stream;
mod sysinfo;

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

pub use kernel::{AtomicElement, AtomicOp, Global, HostKernel, ThreadCtx};

use crate::device_bytes;
use crate::error::{Error, Result};
use crate::interface::{
    EventInterface, KernelInterface, PlatformInterface, StreamExecutorInterface, StreamInterface,
};
use crate::platform::work_queue::{StreamSet, WorkQueue};
use crate::types::AlignedHostBuffer;
use crate::types::DeviceDescription;
use crate::types::MultiKernelLoaderSpec;
use crate::types::{DeviceAddress, HostBuffer, MemoryUsage};
use event::HostEvent;
use memory::AllocTable;
use stream::HostStream;

/// Threads per block, as on CUDA devices.
pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
/// Shared memory per block, as CUDA's default (static and dynamic together).
pub const SHARED_MEMORY_PER_BLOCK: u64 = 48 * 1024;

/// The host platform: one device, the machine itself.
pub(crate) struct HostPlatform;

/// Opens the host platform (always available).
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    Ok(Arc::new(HostPlatform))
}

fn describe(ordinal: usize) -> DeviceDescription {
    let info = sysinfo::read();
    DeviceDescription {
        platform: "host".into(),
        ordinal,
        name: info.cpu_name,
        vendor: info.vendor,
        platform_version: format!("streamexec {}", env!("CARGO_PKG_VERSION")),
        driver_version: format!("streamexec host platform {}", env!("CARGO_PKG_VERSION")),
        total_memory: info.total_memory,
        compute_units: info.cores,
        max_threads_per_block: MAX_THREADS_PER_BLOCK,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [i32::MAX as u32, 65535, 65535],
        warp_size: ThreadCtx::WARP_SIZE,
        shared_memory_per_block: SHARED_MEMORY_PER_BLOCK,
        clock_rate_khz: info.clock_khz,
        compute_capability: None,
        isa: Some(std::env::consts::ARCH.to_string()),
        unified_memory: true,
        host_mapped_memory: true,
        max_allocation: info.total_memory,
    }
}

impl PlatformInterface for HostPlatform {
    fn name(&self) -> &'static str {
        "host"
    }
    fn device_count(&self) -> usize {
        1
    }
    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        Ok(describe(ordinal))
    }
    fn create_executor(&self, ordinal: usize) -> Result<Arc<dyn StreamExecutorInterface>> {
        Ok(HostExecutor::new(describe(ordinal))?)
    }
}

/// The host device.
pub(crate) struct HostExecutor {
    description: DeviceDescription,
    table: Arc<AllocTable>,
    pool: Arc<rayon::ThreadPool>,
    streams: StreamSet<WorkQueue>,
    me: Weak<HostExecutor>,
    next_stream: AtomicU64,
    /// PTX modules loaded by this executor.
    ptx_modules: ptx::ModuleCache,
    /// `set_race_check`: PTX launches record accesses and report data races.
    race_check: AtomicBool,
}

impl HostExecutor {
    fn new(description: DeviceDescription) -> Result<Arc<Self>> {
        let ordinal = description.ordinal;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(description.compute_units as usize)
            .thread_name(move |i| format!("streamexec-host{ordinal}-block-{i}"))
            .build()
            .map_err(|e| Error::Driver {
                platform: "host".into(),
                call: "rayon::ThreadPoolBuilder::build".into(),
                code: 0,
                detail: e.to_string(),
            })?;
        Ok(Arc::new_cyclic(|me| HostExecutor {
            description,
            table: Arc::new(AllocTable::default()),
            pool: Arc::new(pool),
            streams: StreamSet::default(),
            me: me.clone(),
            next_stream: AtomicU64::new(0),
            ptx_modules: Default::default(),
            race_check: AtomicBool::new(false),
        }))
    }

    /// Device memory for a PTX module's `.global`/`.const` data.
    pub(crate) fn allocate_for_module(&self, bytes: u64) -> Result<DeviceAddress> {
        self.allocate(bytes)
    }

    /// Whether PTX launches run the data-race checker.
    pub(crate) fn race_check(&self) -> bool {
        self.race_check.load(Ordering::Relaxed)
    }

    /// Pins `[addr, addr + bytes)` for an operation, or says why it is not live memory.
    pub(crate) fn pin(
        &self,
        addr: DeviceAddress,
        bytes: u64,
        what: &str,
    ) -> Result<memory::Pinned> {
        self.table.resolve(addr, bytes).ok_or_else(|| {
            Error::invalid(
                what,
                format!(
                    "{bytes} bytes at {addr} are not inside one live allocation of this executor"
                ),
            )
        })
    }
}

impl StreamExecutorInterface for HostExecutor {
    fn description(&self) -> &DeviceDescription {
        &self.description
    }

    fn allocate(&self, bytes: u64) -> Result<DeviceAddress> {
        self.table
            .allocate(bytes)
            .ok_or_else(|| Error::OutOfMemory {
                platform: "host".into(),
                device: self.description.ordinal,
                bytes,
                detail: "the system allocator refused".into(),
            })
    }

    fn allocate_unified(&self, bytes: u64) -> Result<(DeviceAddress, *mut u8)> {
        // Device memory on the host platform is host memory already.
        let addr = self.allocate(bytes)?;
        let ptr = self.pin(addr, bytes, "allocate_unified")?.as_ptr();
        Ok((addr, ptr))
    }

    unsafe fn deallocate(&self, addr: DeviceAddress) {
        // Operations that pinned the allocation keep it alive until they finish.
        self.table.free(addr);
    }

    fn host_allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>> {
        match AlignedHostBuffer::new(bytes, 64) {
            Some(b) => Ok(Box::new(b)),
            None => Err(Error::OutOfMemory {
                platform: "host".into(),
                device: self.description.ordinal,
                bytes: bytes as u64,
                detail: "the system allocator refused host memory".into(),
            }),
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

    fn load_kernel(&self, spec: &MultiKernelLoaderSpec) -> Result<Arc<dyn KernelInterface>> {
        // A native kernel wins; otherwise the PTX engine runs the spec's PTX.
        let Some(entry) = spec.host_kernel() else {
            if let Some(img) = spec.select_cuda_ptx(None) {
                return ptx::load(self, spec, img);
            }
            return Err(spec.no_suitable_format(
                "host",
                "a native Rust kernel (add_host_kernel) or CUDA PTX (add_cuda_ptx_in_memory), \
                 which the host platform's PTX engine runs",
            ));
        };
        let k = entry.as_any().downcast_ref::<HostKernel>().ok_or_else(|| {
            spec.no_suitable_format(
                "host",
                "a HostKernel (the spec's in-process kernel is of a type the host platform does \
                 not run)",
            )
        })?;
        if k.signature().len() != spec.arity() {
            return Err(Error::SignatureMismatch {
                kernel: k.name().to_string(),
                detail: format!(
                    "the loader spec declares {} parameter(s) but the host kernel takes {}",
                    spec.arity(),
                    k.signature().len()
                ),
            });
        }
        Ok(Arc::new(k.clone()))
    }

    fn create_stream(&self) -> Result<Box<dyn StreamInterface>> {
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| Error::invalid("create_stream", "executor is shutting down"))?;
        let n = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let name = format!("streamexec-host{}-stream-{n}", self.description.ordinal);
        Ok(Box::new(HostStream::new(me, name)?))
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

    fn rpc_capability(&self) -> Option<crate::RpcCapability> {
        // Host kernels are in-process clients, one per thread, calling through the server's
        // own client half (plain memory; they wake the server).
        Some(crate::RpcCapability {
            lane_size: 1,
            block: crate::RpcBlockMemory::InProcess,
            locks: crate::RpcLockPlacement::InServer,
        })
    }
}
