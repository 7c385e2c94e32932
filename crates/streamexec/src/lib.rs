//! streamexec: one fluent API to drive any accelerator, in the line of Google's StreamExecutor.
//!
//! ```
//! use streamexec::*;
//!
//! # fn main() -> streamexec::Result<()> {
//! let platform = PlatformManager::platform_with_name("host")?;
//! let executor = platform.executor_for_device(0)?;
//! let spec = MultiKernelLoaderSpec::new(2).add_host_kernel(HostKernel::new(
//!     "add_mystery_value",
//!     |ctx, (x, out): (f32, DevicePtr<f32>)| {
//!         if ctx.global_id_x() == 0 {
//!             ctx.global(out).set(0, x + 123.0);
//!         }
//!     },
//! ));
//! let kernel: TypedKernel<(f32, DevicePtr<f32>)> = executor.get_kernel(&spec)?;
//! let result = executor.allocate_scalar::<f32>()?;
//! let mut stream = executor.create_stream()?;
//! stream
//!     .then_launch(ThreadDim::default(), BlockDim::default(), &kernel, (42.5, result.ptr()))
//!     .block_host_until_done()?;
//! assert_eq!(executor.synchronous_copy_scalar_to_host(&result)?, 165.5);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

// The floor: plain types (device bytes are touched only through `ptx::device_bytes`).
mod error;
mod types;

// The crates below: PTX on the CPU (front end, engines, device memory on the host) and the RPC
// protocol (knows no platform).
pub use streamexec_ptx as ptx;
pub use streamexec_rpc as rpc;

// The plugin interface, the backends behind it, and the registry above them.
pub mod interface;
mod platform;
mod registry;

/// Counters for benchmarks and profiling: what the host platform's PTX engines have done in
/// this process.
pub mod diagnostics {
    pub use streamexec_ptx::jit_compile_times as ptx_jit_compile_times;
    pub use streamexec_ptx::warp_instructions_executed as ptx_warp_instructions_executed;
}

// The user-facing handles.
mod allocations;
mod blas;
mod command_buffer;
mod dnn;
mod event;
mod executor;
mod executor_rpc;
mod fft;
mod kernel;
mod memory;
#[cfg(feature = "mpi")]
pub mod mpi;
mod rng;
mod stream;
mod stream_order;

// The README and the guides of docs/, compiled and run as doc tests.
#[cfg(doctest)]
mod guides;

pub use blas::BlasScalar;
pub use command_buffer::{CommandBuffer, LaunchCommand};
pub use dnn::{
    Activation, BATCH_NORM_MIN_EPSILON, BatchNormProblem, ConvDesc, ConvProblem, DnnDataType,
    DnnElement, FilterDesc, MatmulProblem, PoolMode, PoolProblem, SoftmaxAlgorithm, SoftmaxMode,
    TensorDesc, TensorLayout,
};
pub use error::{Error, IoError, Result};
pub use event::{Event, EventReady, Timer};
pub use executor::StreamExecutor;
pub use executor_rpc::ExecutorRpc;
pub use fft::{FftElement, FftPair, FftPlan, FftPlanSpec};
pub use interface::EventStatus;
pub use interface::blas::Transpose;
pub use interface::fft::{FftDirection, FftLayout, FftPlanDesc, FftPrecision, FftType};
pub use kernel::{Kernel, TypedKernel};
pub use memory::{DeviceMemory, DeviceSlice, UnifiedMemory};
pub use platform::host::{AtomicElement, AtomicOp, Global, HostKernel, ThreadCtx};
pub use registry::{Platform, PlatformInfo, PlatformManager};
pub use rng::{GaussianElement, MIN_SEED_BYTES, UniformElement};
pub use stream::{Stream, StreamDone, Waitable};
pub use types::philox;
pub use types::{
    AllocatorStats, ArgList, BlockDim, DeviceAddress, DeviceDescription, DevicePtr, Dim3,
    HostMemory, KernelArgs, KernelParam, MemoryUsage, MultiKernelLoaderSpec, PrintfOutput,
    PtxEngine, PtxServices, RandDistribution, SharedMemory, ThreadDim,
};
pub use types::{Plugin, PluginConfig, PluginFamily, PluginReport, PluginStatus};
