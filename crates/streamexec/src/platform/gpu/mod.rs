//! The backend CUDA and HIP share. Both drivers have the same shape (contexts, streams, events,
//! modules, async copies), so one platform/executor/stream/event/kernel implementation runs on
//! a small [`Driver`] trait, and `cuda/` and `hip/` hold only their driver calls, kernel-image
//! choice, device description and `open` — the result → safe layering of cudarc, with this
//! folder as the safe layer.
//!
//! # Files
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the platform (`GpuPlatform<D>`, one per driver), these notes |
//! | `driver.rs` | the `Driver` trait (the CUDA-like driver surface), raw handle types, `GpuBlas` |
//! | `device.rs` | `GpuExecutor<D>`'s state and `StreamShared<D>` (a stream's driver half): one file because each refers to the other (frees fence every live stream, queued work keeps the executor alive) |
//! | `executor.rs` | the `StreamExecutorInterface` impl: allocations, pinned and mapped host memory, peer access, kernel loading |
//! | `stream.rs` | `GpuStream<D>`: the `StreamInterface` impl: async copies that hold host memory until a driver host function releases it, launches |
//! | `event.rs` | `GpuEvent<D>`: record generations |
//! | `kernel.rs` | cached modules and kernels with their PTX entry (when the image was PTX) |
//! | `dnn.rs` | `DnnDevice` for the shared built-in DNN operations (`platform/dnn_builtin`): the kernels of `kernels/dnn.cu` (`Driver::DNN_PTX`), the fused matmul's product through the executor's BLAS |
//! | `fft.rs` | `FftSupport`: the driver's vendor FFT plans (`Driver::fft_plan`, cuFFT) in stream order, or the built-in kernels of `kernels/fft.cu` (`Driver::FFT_PTX`), planned and enqueued by `platform/fft_builtin` (shared with OpenCL) |
//! | `blas.rs`, `rng.rs` | BLAS through the driver's vendor library (cuBLAS), or built-in PTX kernels where it is not installed; Philox fills from built-in PTX kernels |
//! | `status.rs` | how driver failures get a better kind (allocation → `OutOfMemory`, launch → `LaunchConfig`) |
//! | `mock.rs`, `tests.rs`, `rpc_tests.rs` | a simulated CUDA-like driver (a thread per engine queue, freed-memory detection) and the backend's tests over it, so fences, deferred streams and event generations are tested without a GPU |
//! | `canned_blas_tests.rs` | the built-in BLAS launches run on the host platform's PTX engine against f64 loops; the fallback's choice and stream order over the mock |
//!
//! # One backend, two drivers
//!
//! `Driver` is the cudarc `result`-level surface the backend needs (alloc, host alloc/map,
//! streams, events, async copies, modules, launch, peer). Each call makes the device current on
//! the calling thread itself (`cuCtxSetCurrent` of the retained primary context,
//! `hipSetDevice`), so user threads and stream workers need no setup. Every driver failure is an
//! `Err`, never a panic (see `cuda/` for how cudarc's panics are avoided).
//!
//! # Freeing under queued work
//!
//! `deallocate` records a fence event on every live stream of the executor (in stream order,
//! through the worker in deferred mode) and parks the allocation; it is freed when all fences
//! have completed (checked on allocate/free/synchronize, and after a device synchronize when the
//! executor drops). A peer copy adds its stream to the source executor's fence set. Modules live
//! until the executor drops; streams (and the work queued on them) hold the executor.
//!
//! # Host callbacks: direct and deferred streams
//!
//! A stream submits directly to its driver stream until its first host callback, which switches
//! it to deferred mode (as on OpenCL): a worker thread submits in order, synchronizes the driver
//! stream before running a callback on its own thread, so a failed callback skips the rest of
//! the chain and callbacks may call the driver. Async copies from/to `HostMemory` hold the
//! region's lease and lock guard until a driver host function (`cuLaunchHostFunc` /
//! `hipStreamAddCallback`) enqueued after the copy drops them.
//!
//! # Events with generations
//!
//! A record queued behind a deferred stream's worker gets its generation when it is enqueued and
//! publishes it when the driver record happens; a waiter that arrives first waits on the host
//! for that generation (its stream goes deferred). A record skipped because its stream failed
//! publishes the failure instead, so waiters fail rather than hang.
//!
//! # Signatures
//!
//! PTX images keep their parsed `.entry` lists; `verify_signature` checks the count
//! (`SharedMemory` arguments are launch attributes, not parameters), sizes and int/float family.
//! Cubin and HSACO carry no parameter list we read; they are not checked.
//!
//! # BLAS and random numbers
//!
//! `GpuExecutor` implements `BlasSupport` through the driver's `GpuBlas` (cuBLAS on CUDA, none on
//! HIP); the calls go through the stream's submitter, so they keep stream order in deferred mode
//! too. Where the library is not installed (`Driver::blas` is `Ok(None)`: on CUDA,
//! `cudarc::cublas::sys::is_culib_present()` found no libcublas), BLAS runs the `se_blas_*`
//! kernels of `kernels/canned.cu` instead, launched on the user's stream like the Philox fills
//! (16×16-tiled GEMM, GEMV, level 1, one-block reductions; semantics and precision of the host
//! platform's, see the kernels' notes), so the executor reports BLAS wherever it has
//! `CANNED_PTX`. The choice is made per call when it is enqueued (the library is probed once per
//! device); a library that is installed but fails to start is an error, not a fallback, so a
//! broken cuBLAS is not hidden behind slower kernels. `RngSupport` launches the `se_philox_*` kernels of `kernels/canned.cu` (a port of
//! OpenCL's `builtins.cl`, built with `-ffp-contract=off` so every double operation is `.rn` and
//! ptxas cannot fuse) on the user's stream, where the driver loads PTX. cuRAND's own Philox uses
//! a different mapping and is not used.
//!
//! # FFT
//!
//! FFT is decided at executor creation from the `PluginConfig`, like BLAS: the driver's vendor
//! library (`Driver::fft_library` / `fft_plan`: cuFFT on CUDA where libcufft is installed) or
//! the built-in kernels where the driver has `FFT_PTX` (CUDA, including the CPU libcuda; HIP
//! has neither and reports no FFT). Vendor plans execute through the stream's submitter on its
//! driver stream, executions of one plan ordered by an event (one work area per plan), and a
//! dropped plan waits for its last execution. The built-in path runs the `se_fft_*` kernels of
//! `kernels/fft.cu`, whose body (`kernels/fft_body.h`) OpenCL builds too, through the plan in
//! `platform/fft_builtin` (Stockham and Bluestein passes, layouts by gather/scatter, scratch per
//! plan, executions of one plan ordered by an event).
//!
//! # DNN
//!
//! DNN is decided at executor creation from the `PluginConfig`, like FFT: the driver's vendor
//! library (`Driver::dnn`: cuDNN on CUDA where libcudnn is installed and the driver is
//! NVIDIA's), called through the stream's submitter for each operation it `supports`, the
//! others falling back to the built-in kernels per call; or the `se_dnn_*` kernels of
//! `kernels/dnn.cu` where the driver has `DNN_PTX` (CUDA, including the CPU libcuda; HIP has
//! none and reports no DNN). `dnn.rs` lends the shared operations of `platform/dnn_builtin`
//! its kernels, pointers and BLAS; each built-in operation is one launch on the user's stream
//! (the fused matmul: the executor's GEMM, then an epilogue kernel), with no scratch and no
//! state.

mod blas;
mod command_buffer;
mod device;
mod dnn;
mod driver;
mod event;
mod executor;
mod fft;
mod kernel;
mod rng;
mod status;
mod stream;

use std::marker::PhantomData;
use std::sync::Arc;

pub(crate) use device::GpuExecutor;
pub(crate) use driver::{
    DnnCall, Driver, GpuBlas, GpuDnn, GpuFftPlan, GraphNode, HostFn, KernelNode, ModuleImage,
    RawEvent, RawFunction, RawGraph, RawGraphExec, RawGraphNode, RawModule, RawStream,
};

use crate::error::Result;
use crate::interface::{PlatformInterface, StreamExecutorInterface};
use crate::types::DeviceDescription;

/// The platform of driver `D`: its devices, described and opened through the driver.
pub(crate) struct GpuPlatform<D: Driver> {
    count: usize,
    _driver: PhantomData<fn() -> D>,
}

impl<D: Driver> GpuPlatform<D> {
    /// The platform of a driver that reports `count` devices (`open` of `cuda/` or `hip/` has
    /// initialised the driver and counted them).
    pub(crate) fn with_devices(count: usize) -> Arc<dyn PlatformInterface> {
        Arc::new(GpuPlatform::<D> {
            count,
            _driver: PhantomData,
        })
    }
}

impl<D: Driver> PlatformInterface for GpuPlatform<D> {
    fn name(&self) -> &'static str {
        D::PLATFORM
    }

    fn device_count(&self) -> usize {
        self.count
    }

    fn description(&self, ordinal: usize) -> Result<DeviceDescription> {
        D::describe_device(ordinal)
    }

    fn create_executor(
        &self,
        ordinal: usize,
        plugins: &crate::types::PluginConfig,
    ) -> Result<Arc<dyn StreamExecutorInterface>> {
        Ok(GpuExecutor::with_plugins(D::open(ordinal)?, plugins)?)
    }
}

#[cfg(test)]
mod canned_blas_tests;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod rpc_tests;
#[cfg(test)]
mod tests;
