//! Every export's signature, checked by the compiler against cudarc's `driver::sys` (the
//! CUDA 12.0 bindings): same argument count, and each argument of the same type, except that
//! an enum passed by value is received as its `u32` (a C caller can pass any value; receiving
//! it as a Rust enum would make an unknown value undefined behaviour). `cuCtxSetFlags` is
//! CUDA 12.1 and not in those bindings.

#![allow(dead_code)]

use std::ffi::c_void;

use cudarc::driver::sys;

/// How an argument travels through the C ABI.
trait Abi {
    type Repr;
}

macro_rules! abi_is_self {
    ($($t:ty),*) => { $(impl Abi for $t { type Repr = $t; })* };
}
abi_is_self!(i32, u32, u8, u16, u64, usize, f32);

impl<T> Abi for *mut T {
    type Repr = *mut T;
}
impl<T> Abi for *const T {
    type Repr = *const T;
}
impl<T> Abi for Option<T> {
    type Repr = Option<T>;
}

macro_rules! abi_enum_as_u32 {
    ($($t:ty),*) => { $(impl Abi for $t { type Repr = u32; })* };
}
abi_enum_as_u32!(
    sys::CUresult,
    sys::CUdevice_attribute,
    sys::CUfunction_attribute,
    sys::CUlimit,
    sys::CUfunc_cache,
    sys::CUmemPool_attribute,
    sys::CUmem_advise,
    sys::CUstreamCaptureMode
);

type R = sys::CUresult;

/// The CUDA 11 names of the kernel-node calls, which NVIDIA's CUDA 12 driver still exports for
/// programs built against CUDA 11: they take `CUDA_KERNEL_NODE_PARAMS_v1` (no `kern`, no
/// `ctx`), where the `_v2` names take the v2 struct. cudarc's 12.0 bindings have only the `_v2`
/// names; these are its CUDA 11.8 declarations (`CUDA_KERNEL_NODE_PARAMS` was the v1 struct
/// there), for the check below. Never called.
#[allow(unused_variables)]
mod cuda11 {
    use cudarc::driver::sys::{CUDA_KERNEL_NODE_PARAMS_v1 as P, CUgraph, CUgraphExec, CUgraphNode};

    use super::R;

    pub(super) unsafe fn cuGraphAddKernelNode(
        phGraphNode: *mut CUgraphNode,
        hGraph: CUgraph,
        dependencies: *const CUgraphNode,
        numDependencies: usize,
        nodeParams: *const P,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuGraphExecKernelNodeSetParams(
        hGraphExec: CUgraphExec,
        hNode: CUgraphNode,
        nodeParams: *const P,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuGraphKernelNodeGetParams(hNode: CUgraphNode, nodeParams: *mut P) -> R {
        unreachable!("a signature for abi.rs")
    }
}

macro_rules! sig_fns {
    ($($name:ident($($a:ident $b:ident),*);)*) => {$(
        fn $name<$($a: Abi,)* $($b: Abi<Repr = $a::Repr>,)*>(
            _: unsafe fn($($a),*) -> R,
            _: unsafe extern "C" fn($($b),*) -> R,
        ) {}
    )*};
}
sig_fns! {
    sig0();
    sig1(A1 B1);
    sig2(A1 B1, A2 B2);
    sig3(A1 B1, A2 B2, A3 B3);
    sig4(A1 B1, A2 B2, A3 B3, A4 B4);
    sig5(A1 B1, A2 B2, A3 B3, A4 B4, A5 B5);
    sig6(A1 B1, A2 B2, A3 B3, A4 B4, A5 B5, A6 B6);
    sig7(A1 B1, A2 B2, A3 B3, A4 B4, A5 B5, A6 B6, A7 B7);
    sig10(A1 B1, A2 B2, A3 B3, A4 B4, A5 B5, A6 B6, A7 B7, A8 B8, A9 B9, A10 B10);
    sig11(A1 B1, A2 B2, A3 B3, A4 B4, A5 B5, A6 B6, A7 B7, A8 B8, A9 B9, A10 B10, A11 B11);
}

/// Never called: it compiles only if every signature matches.
fn signatures_match_cudarc() {
    let _: Option<*mut c_void> = None;
    sig3(sys::cuCtxCreate_v2, crate::context::cuCtxCreate_v2);
    sig5(sys::cuCtxCreate_v3, crate::context::cuCtxCreate_v3);
    sig1(sys::cuCtxDestroy_v2, crate::context::cuCtxDestroy_v2);
    sig1(
        sys::cuCtxDisablePeerAccess,
        crate::context::cuCtxDisablePeerAccess,
    );
    sig2(
        sys::cuCtxEnablePeerAccess,
        crate::context::cuCtxEnablePeerAccess,
    );
    sig2(sys::cuCtxGetApiVersion, crate::context::cuCtxGetApiVersion);
    sig1(
        sys::cuCtxGetCacheConfig,
        crate::context::cuCtxGetCacheConfig,
    );
    sig1(sys::cuCtxGetCurrent, crate::context::cuCtxGetCurrent);
    sig1(sys::cuCtxGetDevice, crate::context::cuCtxGetDevice);
    sig1(sys::cuCtxGetFlags, crate::context::cuCtxGetFlags);
    sig2(sys::cuCtxGetLimit, crate::context::cuCtxGetLimit);
    sig2(
        sys::cuCtxGetStreamPriorityRange,
        crate::context::cuCtxGetStreamPriorityRange,
    );
    sig1(sys::cuCtxPopCurrent_v2, crate::context::cuCtxPopCurrent_v2);
    sig1(
        sys::cuCtxPushCurrent_v2,
        crate::context::cuCtxPushCurrent_v2,
    );
    sig1(
        sys::cuCtxSetCacheConfig,
        crate::context::cuCtxSetCacheConfig,
    );
    sig1(sys::cuCtxSetCurrent, crate::context::cuCtxSetCurrent);
    sig2(sys::cuCtxSetLimit, crate::context::cuCtxSetLimit);
    sig0(sys::cuCtxSynchronize, crate::context::cuCtxSynchronize);
    sig1(
        sys::cuDestroyExternalMemory,
        crate::refused::cuDestroyExternalMemory,
    );
    sig3(
        sys::cuDeviceCanAccessPeer,
        crate::device::cuDeviceCanAccessPeer,
    );
    sig2(sys::cuDeviceGet, crate::device::cuDeviceGet);
    sig3(
        sys::cuDeviceGetAttribute,
        crate::device::cuDeviceGetAttribute,
    );
    sig1(sys::cuDeviceGetCount, crate::device::cuDeviceGetCount);
    sig2(
        sys::cuDeviceGetDefaultMemPool,
        crate::refused::cuDeviceGetDefaultMemPool,
    );
    sig2(sys::cuDeviceGetMemPool, crate::refused::cuDeviceGetMemPool);
    sig3(sys::cuDeviceGetName, crate::device::cuDeviceGetName);
    sig2(sys::cuDeviceGetUuid, crate::device::cuDeviceGetUuid);
    sig2(sys::cuDeviceGetUuid_v2, crate::device::cuDeviceGetUuid_v2);
    sig3(
        sys::cuDevicePrimaryCtxGetState,
        crate::context::cuDevicePrimaryCtxGetState,
    );
    sig1(
        sys::cuDevicePrimaryCtxRelease_v2,
        crate::context::cuDevicePrimaryCtxRelease_v2,
    );
    sig1(
        sys::cuDevicePrimaryCtxReset_v2,
        crate::context::cuDevicePrimaryCtxReset_v2,
    );
    sig2(
        sys::cuDevicePrimaryCtxRetain,
        crate::context::cuDevicePrimaryCtxRetain,
    );
    sig2(
        sys::cuDevicePrimaryCtxSetFlags_v2,
        crate::context::cuDevicePrimaryCtxSetFlags_v2,
    );
    sig2(sys::cuDeviceSetMemPool, crate::refused::cuDeviceSetMemPool);
    sig2(sys::cuDeviceTotalMem_v2, crate::device::cuDeviceTotalMem_v2);
    sig1(sys::cuDriverGetVersion, crate::state::cuDriverGetVersion);
    sig2(sys::cuEventCreate, crate::event::cuEventCreate);
    sig1(sys::cuEventDestroy_v2, crate::event::cuEventDestroy_v2);
    sig3(sys::cuEventElapsedTime, crate::event::cuEventElapsedTime);
    sig1(sys::cuEventQuery, crate::event::cuEventQuery);
    sig2(sys::cuEventRecord, crate::event::cuEventRecord);
    sig3(
        sys::cuEventRecordWithFlags,
        crate::event::cuEventRecordWithFlags,
    );
    sig1(sys::cuEventSynchronize, crate::event::cuEventSynchronize);
    sig3(
        sys::cuExternalMemoryGetMappedBuffer,
        crate::refused::cuExternalMemoryGetMappedBuffer,
    );
    sig3(sys::cuFuncGetAttribute, crate::module::cuFuncGetAttribute);
    sig2(sys::cuFuncGetModule, crate::module::cuFuncGetModule);
    sig3(sys::cuFuncSetAttribute, crate::module::cuFuncSetAttribute);
    sig2(
        sys::cuFuncSetCacheConfig,
        crate::module::cuFuncSetCacheConfig,
    );
    sig2(sys::cuGetErrorName, crate::entry::cuGetErrorName);
    sig2(sys::cuGetErrorString, crate::entry::cuGetErrorString);
    sig5(
        sys::cuGraphAddChildGraphNode,
        crate::graph::cuGraphAddChildGraphNode,
    );
    sig4(sys::cuGraphAddEmptyNode, crate::graph::cuGraphAddEmptyNode);
    sig5(
        sys::cuGraphAddEventRecordNode,
        crate::graph::cuGraphAddEventRecordNode,
    );
    sig5(
        sys::cuGraphAddEventWaitNode,
        crate::graph::cuGraphAddEventWaitNode,
    );
    sig5(sys::cuGraphAddHostNode, crate::graph::cuGraphAddHostNode);
    sig5(
        cuda11::cuGraphAddKernelNode,
        crate::graph::cuGraphAddKernelNode,
    );
    sig5(
        sys::cuGraphAddKernelNode_v2,
        crate::graph::cuGraphAddKernelNode_v2,
    );
    sig6(
        sys::cuGraphAddMemcpyNode,
        crate::graph::cuGraphAddMemcpyNode,
    );
    sig6(
        sys::cuGraphAddMemsetNode,
        crate::graph::cuGraphAddMemsetNode,
    );
    sig2(sys::cuGraphCreate, crate::graph::cuGraphCreate);
    sig1(sys::cuGraphDestroy, crate::graph::cuGraphDestroy);
    sig1(sys::cuGraphExecDestroy, crate::graph::cuGraphExecDestroy);
    sig3(
        cuda11::cuGraphExecKernelNodeSetParams,
        crate::graph::cuGraphExecKernelNodeSetParams,
    );
    sig3(
        sys::cuGraphExecKernelNodeSetParams_v2,
        crate::graph::cuGraphExecKernelNodeSetParams_v2,
    );
    sig4(
        sys::cuGraphExecMemcpyNodeSetParams,
        crate::graph::cuGraphExecMemcpyNodeSetParams,
    );
    sig4(
        sys::cuGraphExecMemsetNodeSetParams,
        crate::graph::cuGraphExecMemsetNodeSetParams,
    );
    sig3(
        sys::cuGraphExecUpdate_v2,
        crate::refused::cuGraphExecUpdate_v2,
    );
    sig3(sys::cuGraphGetNodes, crate::graph::cuGraphGetNodes);
    sig3(sys::cuGraphGetRootNodes, crate::graph::cuGraphGetRootNodes);
    sig3(
        sys::cuGraphInstantiateWithFlags,
        crate::graph::cuGraphInstantiateWithFlags,
    );
    sig3(
        sys::cuGraphInstantiateWithParams,
        crate::graph::cuGraphInstantiateWithParams,
    );
    sig2(
        cuda11::cuGraphKernelNodeGetParams,
        crate::graph::cuGraphKernelNodeGetParams,
    );
    sig2(
        sys::cuGraphKernelNodeGetParams_v2,
        crate::graph::cuGraphKernelNodeGetParams_v2,
    );
    sig2(sys::cuGraphLaunch, crate::graph::cuGraphLaunch);
    sig3(
        sys::cuGraphNodeGetDependencies,
        crate::graph::cuGraphNodeGetDependencies,
    );
    sig2(sys::cuGraphNodeGetType, crate::graph::cuGraphNodeGetType);
    sig2(sys::cuGraphUpload, crate::graph::cuGraphUpload);
    sig2(
        sys::cuImportExternalMemory,
        crate::refused::cuImportExternalMemory,
    );
    sig1(sys::cuInit, crate::state::cuInit);
    sig10(
        sys::cuLaunchCooperativeKernel,
        crate::refused::cuLaunchCooperativeKernel,
    );
    sig3(sys::cuLaunchHostFunc, crate::stream::cuLaunchHostFunc);
    sig11(sys::cuLaunchKernel, crate::launch::cuLaunchKernel);
    sig4(sys::cuMemAdvise, crate::refused::cuMemAdvise);
    sig3(sys::cuMemAllocAsync, crate::refused::cuMemAllocAsync);
    sig4(
        sys::cuMemAllocFromPoolAsync,
        crate::refused::cuMemAllocFromPoolAsync,
    );
    sig2(sys::cuMemAllocHost_v2, crate::memory::cuMemAllocHost_v2);
    sig3(sys::cuMemAllocManaged, crate::refused::cuMemAllocManaged);
    sig2(sys::cuMemAlloc_v2, crate::memory::cuMemAlloc_v2);
    sig2(sys::cuMemFreeAsync, crate::refused::cuMemFreeAsync);
    sig1(sys::cuMemFreeHost, crate::memory::cuMemFreeHost);
    sig1(sys::cuMemFree_v2, crate::memory::cuMemFree_v2);
    sig3(
        sys::cuMemGetAddressRange_v2,
        crate::memory::cuMemGetAddressRange_v2,
    );
    sig2(sys::cuMemGetInfo_v2, crate::memory::cuMemGetInfo_v2);
    sig3(sys::cuMemHostAlloc, crate::memory::cuMemHostAlloc);
    sig3(
        sys::cuMemHostGetDevicePointer_v2,
        crate::memory::cuMemHostGetDevicePointer_v2,
    );
    sig2(sys::cuMemHostGetFlags, crate::memory::cuMemHostGetFlags);
    sig3(
        sys::cuMemHostRegister_v2,
        crate::memory::cuMemHostRegister_v2,
    );
    sig1(sys::cuMemHostUnregister, crate::memory::cuMemHostUnregister);
    sig2(sys::cuMemPoolCreate, crate::refused::cuMemPoolCreate);
    sig1(sys::cuMemPoolDestroy, crate::refused::cuMemPoolDestroy);
    sig3(
        sys::cuMemPoolGetAttribute,
        crate::refused::cuMemPoolGetAttribute,
    );
    sig3(
        sys::cuMemPoolSetAttribute,
        crate::refused::cuMemPoolSetAttribute,
    );
    sig2(sys::cuMemPoolTrimTo, crate::refused::cuMemPoolTrimTo);
    sig4(sys::cuMemPrefetchAsync, crate::refused::cuMemPrefetchAsync);
    sig3(sys::cuMemcpy, crate::copy::cuMemcpy);
    sig4(sys::cuMemcpyAsync, crate::copy::cuMemcpyAsync);
    sig4(sys::cuMemcpyDtoDAsync_v2, crate::copy::cuMemcpyDtoDAsync_v2);
    sig3(sys::cuMemcpyDtoD_v2, crate::copy::cuMemcpyDtoD_v2);
    sig4(sys::cuMemcpyDtoHAsync_v2, crate::copy::cuMemcpyDtoHAsync_v2);
    sig3(sys::cuMemcpyDtoH_v2, crate::copy::cuMemcpyDtoH_v2);
    sig4(sys::cuMemcpyHtoDAsync_v2, crate::copy::cuMemcpyHtoDAsync_v2);
    sig3(sys::cuMemcpyHtoD_v2, crate::copy::cuMemcpyHtoD_v2);
    sig5(sys::cuMemcpyPeer, crate::copy::cuMemcpyPeer);
    sig6(sys::cuMemcpyPeerAsync, crate::copy::cuMemcpyPeerAsync);
    sig4(sys::cuMemsetD16Async, crate::copy::cuMemsetD16Async);
    sig3(sys::cuMemsetD16_v2, crate::copy::cuMemsetD16_v2);
    sig4(sys::cuMemsetD32Async, crate::copy::cuMemsetD32Async);
    sig3(sys::cuMemsetD32_v2, crate::copy::cuMemsetD32_v2);
    sig4(sys::cuMemsetD8Async, crate::copy::cuMemsetD8Async);
    sig3(sys::cuMemsetD8_v2, crate::copy::cuMemsetD8_v2);
    sig3(sys::cuModuleGetFunction, crate::module::cuModuleGetFunction);
    sig4(
        sys::cuModuleGetGlobal_v2,
        crate::module::cuModuleGetGlobal_v2,
    );
    sig2(sys::cuModuleLoad, crate::module::cuModuleLoad);
    sig2(sys::cuModuleLoadData, crate::module::cuModuleLoadData);
    sig5(sys::cuModuleLoadDataEx, crate::module::cuModuleLoadDataEx);
    sig2(
        sys::cuModuleLoadFatBinary,
        crate::module::cuModuleLoadFatBinary,
    );
    sig1(sys::cuModuleUnload, crate::module::cuModuleUnload);
    sig4(
        sys::cuOccupancyAvailableDynamicSMemPerBlock,
        crate::launch::cuOccupancyAvailableDynamicSMemPerBlock,
    );
    sig4(
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor,
        crate::launch::cuOccupancyMaxActiveBlocksPerMultiprocessor,
    );
    sig5(
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
        crate::launch::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
    );
    sig3(
        sys::cuOccupancyMaxActiveClusters,
        crate::refused::cuOccupancyMaxActiveClusters,
    );
    sig6(
        sys::cuOccupancyMaxPotentialBlockSize,
        crate::launch::cuOccupancyMaxPotentialBlockSize,
    );
    sig7(
        sys::cuOccupancyMaxPotentialBlockSizeWithFlags,
        crate::launch::cuOccupancyMaxPotentialBlockSizeWithFlags,
    );
    sig3(
        sys::cuOccupancyMaxPotentialClusterSize,
        crate::refused::cuOccupancyMaxPotentialClusterSize,
    );
    sig0(sys::cuProfilerStart, crate::refused::cuProfilerStart);
    sig0(sys::cuProfilerStop, crate::refused::cuProfilerStop);
    sig4(
        sys::cuStreamAttachMemAsync,
        crate::refused::cuStreamAttachMemAsync,
    );
    sig2(
        sys::cuStreamBeginCapture_v2,
        crate::refused::cuStreamBeginCapture_v2,
    );
    sig2(sys::cuStreamCreate, crate::stream::cuStreamCreate);
    sig3(
        sys::cuStreamCreateWithPriority,
        crate::stream::cuStreamCreateWithPriority,
    );
    sig1(sys::cuStreamDestroy_v2, crate::stream::cuStreamDestroy_v2);
    sig2(sys::cuStreamEndCapture, crate::refused::cuStreamEndCapture);
    sig2(sys::cuStreamGetCtx, crate::stream::cuStreamGetCtx);
    sig2(sys::cuStreamGetFlags, crate::stream::cuStreamGetFlags);
    sig2(sys::cuStreamGetPriority, crate::stream::cuStreamGetPriority);
    sig2(sys::cuStreamIsCapturing, crate::stream::cuStreamIsCapturing);
    sig1(sys::cuStreamQuery, crate::stream::cuStreamQuery);
    sig1(sys::cuStreamSynchronize, crate::stream::cuStreamSynchronize);
    sig3(sys::cuStreamWaitEvent, crate::stream::cuStreamWaitEvent);
}
