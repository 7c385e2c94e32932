//! The OpenCL platform, on `opencl3` with the OpenCL library loaded at run time.
//!
//! No OpenCL library, no platform or no device: the platform is listed as unavailable with the
//! reason; nothing panics and the build never needs OpenCL. Every device of every OpenCL
//! platform is one streamexec device, in the order the ICD loader reports them.
//!
//! # Files
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the platform (device enumeration across ICD platforms, `DeviceDescription` from `clGetDeviceInfo`), `open`, these notes |
//! | `device.rs` | `OpenClExecutor`: the context, the allocation table behind synthetic addresses, the program cache, the stream registry; what streams and built-in kernels share |
//! | `executor.rs` | the `StreamExecutorInterface` impl: allocation (buffers and SVM), pinned host memory (`CL_MEM_ALLOC_HOST_PTR` + map), synchronous copies, kernel loading |
//! | `queue.rs` | `StreamShared`: one stream's in-order profiling queue and its direct/deferred submitter, which the executor also synchronises |
//! | `stream.rs` | `OpenClStream`: the `StreamInterface` impl, kernel argument setting |
//! | `event.rs` | `OpenClEvent`: the marker of the latest record, or a deferred record |
//! | `kernel.rs` | `OpenClKernel` and the `clGetKernelArgInfo` signature check |
//! | `red_zone.rs` | red zones around buffers on CPU devices: the mappings, the canary, comparing and restoring it |
//! | `red_zone_check.rs` | the red-zone check after each launch (a completion callback the stream's `finish` waits for) and command-buffer replay (a native kernel), the `KernelFault` it reports |
//! | `memory.rs` | `ClAlloc`: `cl_mem` buffers and fine-grained SVM behind one type, the enqueue helpers for each, keeping memory alive until a command completes, and the SVM reaper |
//! | `command_buffer.rs` | `OpenClCommandBuffer`: command buffers on `cl_khr_command_buffer` (segments, submit, update by re-recording) |
//! | `khr_command_buffer.rs` | the extension as the driver provides it: detection, entry points, an owned `cl_command_buffer_khr` |
//! | `builtins.rs`, `builtins.cl` | the built-in kernels of BLAS and Philox: source, per-executor cache, launch |
//! | `blas.rs`, `rng.rs` | `BlasSupport` and `RngSupport` over the built-in kernels |
//! | `dnn.rs` | `DnnDevice` for the shared built-in DNN operations (`platform/dnn_builtin`): the DNN kernel text as OpenCL C, the fused matmul's product through the executor's BLAS |
//! | `fft.rs` | `FftSupport`: the FFT kernels of `kernels/fft_body.h` (the CUDA platform's text) behind an OpenCL C prelude, planned by `platform/fft_builtin` |
//! | `status.rs` | OpenCL status codes as `Error`s |
//!
//! # Device addresses
//!
//! Device addresses are synthetic: `(allocation id << 40) | byte offset` (`device::OFFSET_BITS`),
//! so sub-slices are address arithmetic as on every platform. A kernel argument at a non-zero
//! offset becomes a sub-buffer, so sub-slices passed to user kernels must respect the device's
//! base-address alignment (built-in kernels take base buffer + element offset instead, and have
//! no such limit). Freed buffers are released with `clReleaseMemObject`, which OpenCL defers
//! until queued commands that use them finish.
//!
//! # Submission: direct and deferred
//!
//! Each stream is one in-order, profiling command queue. A stream starts in *direct* mode: each
//! `then_*` enqueues its command at once. Its first host callback (or a wait on a deferred
//! record) switches it to *deferred* mode, where a per-stream worker thread enqueues in order,
//! waits for the earlier commands before each callback, and skips the rest after a failure, so
//! a failed callback really stops the chain and callbacks may call blocking OpenCL functions.
//! Failing a user event instead (the usual OpenCL trick) crashes PoCL 3.1
//! (`pocl_update_event_failed`). An event recorded in deferred mode is a `DeferredRecord` that
//! waiters resolve on their own worker. Host memory lent to an async copy (the `HostRegion` and
//! its lock guard) is kept until an event callback fires on the copy's completion.
//!
//! # Programs and signatures
//!
//! Programs are cached per executor by (format, bytes, options) and built with
//! `-cl-kernel-arg-info`, so `get_kernel` checks the count, the pointer/local/scalar kind and
//! the scalar type of every argument. A binary whose driver keeps no argument info is refused
//! at load (`KernelLoad`): without it a scalar passed for a buffer parameter would reach the
//! driver as a memory-object handle. A spec with RPC gets the OpenCL C RPC client prepended.
//!
//! # Red zones on CPU devices
//!
//! On a CPU (or host-unified) device whose driver uses `CL_MEM_USE_HOST_PTR` memory in place,
//! buffers are the executor's own `mmap`s with a canary-filled red zone before and after; a
//! check in the stream's order after each launch turns a kernel's write past the end (or before
//! the start) of a buffer argument into `Error::KernelFault` instead of heap corruption.
//! Details and limits (how far out a write is caught) in `red_zone.rs`; discrete GPUs keep
//! driver buffers, and `STREAMEXEC_OPENCL_RED_ZONES=0` turns red zones off.
//!
//! # Unified memory (SVM) and the reaper
//!
//! `allocate_unified` is fine-grained SVM with atomics (the device reports it as
//! `unified_memory`); it is where RPC mailboxes go. `clSVMFree` is immediate, not deferred like
//! `clReleaseMemObject`, so commands that touch SVM keep their `Arc<ClAlloc>` until their
//! completion callback; the last drop parks the pointer in the executor's reaper, which frees it
//! on an ordinary thread at the next allocation or `synchronize_all` (never inside an OpenCL
//! callback). SVM still held by a queued command when the executor drops leaks rather than
//! being freed under it.
//!
//! # Command buffers
//!
//! Where the device reports `cl_khr_command_buffer` 0.9.0-0.9.4 (PoCL 3.1: 0.9.0), a finalized
//! `CommandBuffer` records each run of device commands (launches, copies and fills of `cl_mem`
//! buffers) into one cl command buffer and replays the rest (host callbacks, event waits, SVM
//! copies and fills) through the stream between them; its `replay_kind` is
//! `"cl_khr_command_buffer"`. Each replay is enqueued on the submitting stream's queue through
//! its submission path and kept alive until it completes; an update re-records the run holding
//! the launch. PoCL 3.1 reads a recorded launch's arguments from the kernel at every enqueue
//! instead of capturing them, so every recorded launch gets a private clone of the kernel. Other
//! devices, and other versions of the provisional extension (whose signatures differ), replay
//! plainly. `STREAMEXEC_OPENCL_COMMAND_BUFFER=0` in the environment (read at each `finalize`)
//! forces plain replay, to compare the two. Details in `command_buffer.rs`.
//!
//! # BLAS and random numbers
//!
//! Built-in kernels (`builtins.cl`: tiled local-memory GEMM, GEMV, level 1, one-work-group
//! reductions, Philox) are built on first use per executor and precision, and launched through
//! the stream's ordinary `launch`, so ordering, the error state and deferred mode are shared
//! with user kernels. Double precision (and every gaussian, computed in `f64`) is a second
//! build of the same source with `-DSE_T=double -DSE_FP64`; a device that cannot build it
//! reports `Unsupported`.
//!
//! # FFT
//!
//! FFT plans run the built-in kernels the CUDA platform compiles to PTX, from the same text
//! (`crates/streamexec/kernels/fft_body.h`, built here with `-DSE_T=… -DSE_SUF=…` after a prelude
//! of OpenCL spellings), through the plan `platform/fft_builtin` shares with the CUDA-like
//! backend (its notes give the algorithm, memory and stream rules). The kernels share the
//! BLAS/Philox cache (their names differ).
//!
//! # DNN
//!
//! DNN operations run the kernel text the CUDA platform compiles to PTX
//! (`kernels/dnn_math.h` + `dnn_body.h`, prelude in `platform/dnn_builtin`), built on first use
//! per precision into the same cache, through the operations `platform/dnn_builtin` shares with
//! the CUDA-like backend; the fused matmul's product runs on this executor's BLAS.

mod blas;
mod blas_vendor;
mod builtins;
mod clblast;
mod command_buffer;
mod device;
mod dnn;
mod event;
mod executor;
mod fft;
mod kernel;
mod khr_command_buffer;
mod memory;
mod queue;
mod red_zone;
mod red_zone_check;
mod rng;
mod status;
mod stream;

use std::sync::Arc;

use opencl3::device::{
    CL_DEVICE_SVM_ATOMICS, CL_DEVICE_SVM_FINE_GRAIN_BUFFER, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU,
    Device,
};
use opencl3::types::cl_device_id;

use crate::error::Result;
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;
use device::OpenClExecutor;
use status::{PLATFORM, cl_error, error_text};

/// The OpenCL platform: every device the ICD loader reports.
pub(crate) struct OpenClPlatform {
    devices: Vec<cl_device_id>,
}

// SAFETY: device ids are process-wide handles that OpenCL allows on any thread.
unsafe impl Send for OpenClPlatform {}
// SAFETY: as above; the list never changes after `open`.
unsafe impl Sync for OpenClPlatform {}

/// Opens the platform, or says why it cannot be used here.
pub(crate) fn open() -> std::result::Result<Arc<dyn PlatformInterface>, String> {
    let platforms = opencl3::platform::get_platforms().map_err(|e| {
        format!(
            "no OpenCL library or platform ({}); install an ICD loader and a driver, e.g. Debian's \
             `ocl-icd-libopencl1` and `pocl-opencl-icd`",
            error_text(e.0)
        )
    })?;
    let mut devices = Vec::new();
    for p in &platforms {
        // A platform with no device answers CL_DEVICE_NOT_FOUND: skip it.
        devices.extend(p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default());
    }
    if devices.is_empty() {
        return Err(format!(
            "{} OpenCL platform(s) found but no device; check the driver with `clinfo`",
            platforms.len()
        ));
    }
    Ok(Arc::new(OpenClPlatform { devices }))
}

fn describe(id: cl_device_id, ordinal: usize) -> Result<DeviceDescription> {
    let d = Device::new(id);
    let info = |call: &str, e: opencl3::error_codes::ClError| cl_error(call, e.0);
    let name = d
        .name()
        .map_err(|e| info("clGetDeviceInfo(CL_DEVICE_NAME)", e))?;
    let vendor = d
        .vendor()
        .map_err(|e| info("clGetDeviceInfo(CL_DEVICE_VENDOR)", e))?;
    let sizes = d
        .max_work_item_sizes()
        .map_err(|e| info("clGetDeviceInfo(MAX_WORK_ITEM_SIZES)", e))?;
    let dim = |i: usize| sizes.get(i).map_or(1, |&s| s.min(u32::MAX as usize) as u32);
    let svm = d.svm_mem_capability();
    let fine_svm = svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER != 0 && svm & CL_DEVICE_SVM_ATOMICS != 0;
    // SIMD width of one hardware thread: none on CPUs; NVIDIA warps and AMD wavefronts.
    let lower = vendor.to_ascii_lowercase();
    let cpu = d.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0);
    let warp = if cpu {
        1
    } else if lower.contains("nvidia") {
        32
    } else if lower.contains("advanced micro devices") || lower.contains("amd") {
        64
    } else {
        1
    };
    Ok(DeviceDescription {
        platform: PLATFORM,
        ordinal,
        name,
        vendor,
        platform_version: d.version().unwrap_or_default(),
        driver_version: d.driver_version().unwrap_or_default(),
        driver: "the OpenCL ICD loader (libOpenCL.so.1) and the platform's ICD".into(),
        total_memory: d
            .global_mem_size()
            .map_err(|e| info("clGetDeviceInfo(GLOBAL_MEM_SIZE)", e))?,
        compute_units: d.max_compute_units().unwrap_or(1),
        max_threads_per_block: d
            .max_work_group_size()
            .map_or(1, |s| s.min(u32::MAX as usize) as u32),
        max_block_dims: [dim(0), dim(1), dim(2)],
        max_grid_dims: [u32::MAX, u32::MAX, u32::MAX],
        warp_size: warp,
        shared_memory_per_block: d.local_mem_size().unwrap_or(0),
        clock_rate_khz: d
            .max_clock_frequency()
            .ok()
            .map(|mhz| mhz.saturating_mul(1000)),
        compute_capability: None,
        isa: None,
        unified_memory: fine_svm || d.host_unified_memory().unwrap_or(false),
        host_mapped_memory: true,
        max_allocation: d
            .max_mem_alloc_size()
            .map_err(|e| info("clGetDeviceInfo(MAX_MEM_ALLOC_SIZE)", e))?,
        // OpenCL has no grid-wide barrier.
        max_cooperative_blocks: 0,
    })
}

impl PlatformInterface for OpenClPlatform {
    fn name(&self) -> &'static str {
        PLATFORM
    }
    fn device_count(&self) -> usize {
        self.devices.len()
    }
    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        describe(self.devices[ordinal], ordinal)
    }
    fn create_executor(
        &self,
        ordinal: usize,
        plugins: &crate::types::PluginConfig,
    ) -> Result<Arc<dyn StreamExecutorInterface>> {
        let desc = describe(self.devices[ordinal], ordinal)?;
        Ok(OpenClExecutor::new(self.devices[ordinal], desc, plugins)?)
    }
}
