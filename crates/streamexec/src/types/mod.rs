//! The floor: plain types every layer above shares, depending on nothing of the crate but
//! `error`. Launch geometry, kernel parameters and packed arguments, device addresses, host
//! memory and the region-lending protocol, the loader spec, device descriptions, the Philox
//! generator, and what a backend reports about device RPC clients. Nothing here knows a
//! platform, an executor or a stream.

mod address;
mod args;
mod description;
mod geometry;
mod host_memory;
mod loader_spec;
pub mod philox;
mod plugins;
mod ptx_services;

mod rpc_caps;

pub use address::{AllocatorStats, DeviceAddress, MemoryUsage};
#[cfg(any(feature = "cuda", feature = "hip", feature = "opencl"))]
pub(crate) use args::Packable;
pub(crate) use args::Token;
pub use args::{
    ArgList, ArgView, DevicePtr, KernelArgs, KernelParam, PackedArg, ParamKind, SharedMemory,
};
pub use description::DeviceDescription;
pub use geometry::{BlockDim, Dim3, LaunchDims, ThreadDim};
pub use host_memory::{
    AlignedHostBuffer, HostBuffer, HostMemory, HostReadGuard, HostRegion, HostWriteGuard,
};
pub use loader_spec::{
    InProcessKernel, KernelFormat, KernelImage, KernelSource, MultiKernelLoaderSpec,
};
pub use philox::RandDistribution;
#[cfg(any(feature = "cuda", feature = "hip", feature = "opencl"))]
pub(crate) use plugins::Served;
pub use plugins::{Plugin, PluginConfig, PluginFamily, PluginReport, PluginStatus};
pub(crate) use plugins::{decide, refuse_vendor};
pub use ptx_services::{PrintfOutput, PtxServices};
pub use rpc_caps::{RpcBlockMemory, RpcCapability, RpcLockPlacement};
pub use streamexec_ptx::PtxEngine;
