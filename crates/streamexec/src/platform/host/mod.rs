//! The host platform: device memory is host memory, kernels are Rust closures (or PTX, through
//! the engines of `streamexec-ptx`) run with the CUDA execution model (grids of blocks of threads,
//! barriers, shared memory), streams are worker threads. Always available; the default
//! platform.
//!
//! # Files
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the platform (one device: the machine), `open`, these notes |
//! | `device.rs` | `HostExecutor`: the device state that the executor, its streams, BLAS/RNG and the PTX engine share (allocation table, rayon pool, stream registry, PTX module cache) |
//! | `executor.rs` | the `StreamExecutorInterface` impl: allocation, synchronous copies, kernel loading |
//! | `stream.rs` | `HostStream`: a worker thread per stream, operations with a skip path |
//! | `event.rs` | `HostEvent`: generation counters and a condition variable |
//! | `kernel.rs` | `HostKernel`, `ThreadCtx`, `Global`, device atomics: what a running thread sees |
//! | `launch.rs` | one launch as its threads see it: geometry, pinned arguments, a block's shared memory and barrier, how a thread faults |
//! | `block.rs` | the grid/block scheduler: rayon across blocks; inside a block a plain loop, or corosensei coroutines once thread 0 reaches a barrier |
//! | `blas.rs`, `rng.rs`, `fft.rs` | BLAS (the `gemm` crate, rayon loops), Philox fills, FFT (rustfft) |
//! | `status.rs` | the host's own failures as `Error`s (it has no driver status codes) |
//! | `sysinfo.rs` | CPU and memory facts for the `DeviceDescription` |
//! | `ptx.rs` | PTX images of a spec run on the CPU: the adapter to `streamexec-ptx` (module cache, arguments, limits, errors) |
//!
//! # Execution model
//!
//! Each stream is a worker thread running its operations in order (`WorkQueue`); the first
//! failure sticks and later operations are skipped (skipped event records mark their event
//! failed). A launch runs its blocks in parallel on the executor's rayon pool. Inside a block the
//! scheduler runs thread 0 on a coroutine; if it exits without a barrier, the other threads run
//! in plain-loop mode (plain calls on the worker's stack, a later `sync_threads` is divergence);
//! if it reaches `sync_threads`, the block switches to one coroutine per thread, and each barrier
//! releases once every thread has arrived. A barrier that not every thread reaches is "barrier
//! divergence": the launch fails naming a waiting and an exited thread, and never hangs.
//!
//! Kernel panics and runtime faults (out-of-bounds `Global` indices, pointers to no live memory,
//! shared memory beyond the block's limit) are caught per thread and become
//! `Error::KernelFault` naming the kernel, block and thread; the other blocks stop early, the
//! stream fails, the process lives. Runtime faults unwind with their own payload, so they print
//! nothing through the panic hook.
//!
//! # Memory and soundness
//!
//! Device memory is the allocation table of `streamexec-ptx` (`ptx::memory`), which the PTX
//! engines run against too. Every queued operation pins the allocations it touches when it is
//! enqueued (an `Arc` to the allocation, `ptx::memory::Pinned`), so freeing (or forgetting) a `DeviceMemory` cannot free memory
//! under a queued copy or kernel: `deallocate` only takes the allocation out of the table.
//! Device bytes are only touched through `ptx::device_bytes` (relaxed atomics, opaque copies):
//! kernels, stream workers and the host may race on them as on a GPU, and a race is a wrong
//! answer, never undefined behaviour. Shared memory is `&[Cell<T>]`: every thread of a block runs
//! on one OS thread, and `ThreadCtx` is neither `Send` nor `Sync`.
//!
//! BLAS and Philox keep that rule: they copy operands (in parallel) into private buffers,
//! packing away leading-dimension gaps (GEMM reuses per-pool-thread scratch, so repeated calls
//! fault in no pages), compute there with the `gemm` crate (`Parallelism::Rayon` inside the
//! executor's pool) or rayon loops, and write results back column by column, touching only the
//! output's own elements. The work runs in stream order as a `host_callback`, every operand
//! pinned at enqueue.
//!
//! Unified memory is ordinary device memory here (it is host memory already).

mod blas;
mod block;
mod command_buffer;
mod device;
mod dnn;
mod dnn_conv;
mod dnn_ops;
mod event;
mod executor;
mod fft;
mod kernel;
mod launch;

pub(crate) mod ptx;
mod rng;
// PTX kernels and a server thread: real threads and the machine's core count, not for Miri.
#[cfg(all(test, not(miri)))]
mod rpc_tests;
mod status;
mod stream;
mod sysinfo;

use std::sync::Arc;

pub use kernel::{AtomicElement, AtomicOp, Global, HostKernel, ThreadCtx};

// The PTX adapter (`ptx.rs`) reaches the device state as `super::HostExecutor`.
use device::HostExecutor;
use status::PLATFORM;

use crate::error::Result;
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;

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

/// Most blocks of a cooperative launch: each runs on an OS thread of its own.
const MAX_COOPERATIVE_BLOCKS: u32 = 1024;

fn describe(ordinal: usize) -> DeviceDescription {
    let info = sysinfo::read();
    DeviceDescription {
        platform: PLATFORM,
        ordinal,
        name: info.cpu_name,
        vendor: info.vendor,
        platform_version: format!("streamexec {}", env!("CARGO_PKG_VERSION")),
        driver_version: format!("streamexec host platform {}", env!("CARGO_PKG_VERSION")),
        driver: "none: the host platform is built in".into(),
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
        // A cooperative PTX launch runs each block on a thread of its own.
        max_cooperative_blocks: MAX_COOPERATIVE_BLOCKS,
    }
}

impl PlatformInterface for HostPlatform {
    fn name(&self) -> &'static str {
        PLATFORM
    }
    fn device_count(&self) -> usize {
        1
    }
    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        Ok(describe(ordinal))
    }
    fn create_executor(
        &self,
        ordinal: usize,
        plugins: &crate::types::PluginConfig,
    ) -> Result<Arc<dyn StreamExecutorInterface>> {
        Ok(HostExecutor::new(describe(ordinal), plugins)?)
    }
}
