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

mod blas;
mod error;
mod event;
mod executor;
mod kernel;
mod loader_spec;
mod memory;
pub mod philox;
pub mod platform;
pub mod ptx;
mod rng;
pub mod rpc;
mod stream;

pub use blas::BlasScalar;
pub use error::{Error, Result};
pub use event::{Event, Timer};
pub use executor::StreamExecutor;
pub use kernel::{
    ArgList, BlockDim, Dim3, Kernel, KernelArgs, KernelParam, PackedArg, ParamKind, SharedMemory,
    ThreadDim, TypedKernel,
};
pub use loader_spec::{KernelFormat, KernelImage, KernelSource, MultiKernelLoaderSpec};
pub use memory::{
    AlignedHostBuffer, DeviceMemory, DevicePtr, DeviceSlice, HostMemory, HostReadGuard, HostRegion,
    HostWriteGuard, UnifiedMemory,
};
pub use platform::canned::Transpose;
pub use platform::host::ptx::warp_instructions_executed as ptx_warp_instructions_executed;
pub use platform::host::{AtomicElement, AtomicOp, Global, HostKernel, ThreadCtx};
pub use platform::interface::{DeviceAddress, EventStatus, MemoryUsage};
pub use platform::{DeviceDescription, Platform, PlatformInfo, PlatformManager};
pub use rng::{GaussianElement, MIN_SEED_BYTES, UniformElement};
pub use stream::{Stream, Waitable};
