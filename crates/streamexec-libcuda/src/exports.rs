//! Every `cu*` entry point of the library, declared once in [`entry_points!`]: its name, its
//! C signature, and where it goes (the family file that implements it, or a refusal). The list
//! hands its entries to a macro of the caller's choice, as ZLUDA's `cuda_function_declarations!`
//! does: [`shells!`] below makes the `extern "C"` exports, and `abi.rs` the compile-time check
//! of every signature against cudarc's `driver::sys`.
//!
//! An implemented entry point's shell runs `crate::<family>::<name>` (an ordinary Rust function
//! returning `CuResult<()>`) in [`call`]: panics become `CUDA_ERROR_UNKNOWN`, calls from a host
//! function `CUDA_ERROR_NOT_PERMITTED`, failures keep their detail for
//! `streamexec_cuda_last_error_detail`. A refused entry point is one cudarc's safe layer can
//! reach that this library does not offer: `CUDA_ERROR_NOT_SUPPORTED` with a detail naming
//! what is missing (the device attributes that advertise these features are 0, so
//! well-behaved programs never call them).
//!
//! `fn name(..) in cuda11;` checks the signature against a local declaration (`abi.rs`)
//! instead of cudarc's 12.0 bindings, which lack the name. Enums passed by value are received
//! as `u32`: a C caller may pass any value.

use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_ushort, c_void};

use cudarc::driver::sys::*;

use crate::entry::{CuErr, CuResult, call};

/// The declaration list: `$callback! { implemented { <family path> { fn ..; }* }*
/// refused { fn .. => "what is missing"; }* }`.
macro_rules! entry_points {
    ($callback:ident) => {
        $callback! {
            implemented {
                crate::driver {
                    fn cuInit(Flags: c_uint);
                    fn cuDriverGetVersion(driverVersion: *mut c_int);
                    fn cuProfilerStart();
                    fn cuProfilerStop();
                }
                crate::entry {
                    fn cuGetErrorName(error: u32, pStr: *mut *const c_char);
                    fn cuGetErrorString(error: u32, pStr: *mut *const c_char);
                }
                crate::device {
                    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int);
                    fn cuDeviceGetCount(count: *mut c_int);
                    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice);
                    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice);
                    fn cuDeviceGetAttribute(pi: *mut c_int, attrib: u32, dev: CUdevice);
                    fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice);
                    fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice);
                    fn cuDeviceCanAccessPeer(
                        canAccessPeer: *mut c_int,
                        dev: CUdevice,
                        peerDev: CUdevice,
                    );
                }
                crate::context::api {
                    fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice);
                    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice);
                    fn cuDevicePrimaryCtxReset_v2(dev: CUdevice);
                    fn cuDevicePrimaryCtxGetState(
                        dev: CUdevice,
                        flags: *mut c_uint,
                        active: *mut c_int,
                    );
                    fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint);
                    fn cuCtxCreate_v2(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice);
                    fn cuCtxCreate_v3(
                        pctx: *mut CUcontext,
                        paramsArray: *mut CUexecAffinityParam,
                        numParams: c_int,
                        flags: c_uint,
                        dev: CUdevice,
                    );
                    fn cuCtxDestroy_v2(ctx: CUcontext);
                    fn cuCtxSetCurrent(ctx: CUcontext);
                    fn cuCtxGetCurrent(pctx: *mut CUcontext);
                    fn cuCtxPushCurrent_v2(ctx: CUcontext);
                    fn cuCtxPopCurrent_v2(pctx: *mut CUcontext);
                    fn cuCtxGetDevice(device: *mut CUdevice);
                    fn cuCtxSynchronize();
                    fn cuCtxEnablePeerAccess(peerContext: CUcontext, Flags: c_uint);
                    fn cuCtxDisablePeerAccess(peerContext: CUcontext);
                    fn cuCtxGetLimit(pvalue: *mut usize, limit: u32);
                    fn cuCtxSetLimit(limit: u32, value: usize);
                    fn cuCtxGetCacheConfig(pconfig: *mut CUfunc_cache);
                    fn cuCtxSetCacheConfig(config: u32);
                    fn cuCtxGetFlags(flags: *mut c_uint);
                    fn cuCtxSetFlags(flags: c_uint) in cuda12_1;
                    fn cuCtxGetStreamPriorityRange(
                        leastPriority: *mut c_int,
                        greatestPriority: *mut c_int,
                    );
                    fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint);
                }
                crate::stream::api {
                    fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint);
                    fn cuStreamCreateWithPriority(
                        phStream: *mut CUstream,
                        flags: c_uint,
                        priority: c_int,
                    );
                    fn cuStreamDestroy_v2(hStream: CUstream);
                    fn cuStreamSynchronize(hStream: CUstream);
                    fn cuStreamQuery(hStream: CUstream);
                    fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, Flags: c_uint);
                    fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void);
                    fn cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint);
                    fn cuStreamGetPriority(hStream: CUstream, priority: *mut c_int);
                    fn cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext);
                    fn cuStreamIsCapturing(
                        hStream: CUstream,
                        captureStatus: *mut CUstreamCaptureStatus,
                    );
                }
                crate::event {
                    fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint);
                    fn cuEventDestroy_v2(hEvent: CUevent);
                    fn cuEventRecord(hEvent: CUevent, hStream: CUstream);
                    fn cuEventRecordWithFlags(hEvent: CUevent, hStream: CUstream, flags: c_uint);
                    fn cuEventQuery(hEvent: CUevent);
                    fn cuEventSynchronize(hEvent: CUevent);
                    fn cuEventElapsedTime(pMilliseconds: *mut f32, hStart: CUevent, hEnd: CUevent);
                }
                crate::memory {
                    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize);
                    fn cuMemFree_v2(dptr: CUdeviceptr);
                    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize);
                    fn cuMemGetAddressRange_v2(
                        pbase: *mut CUdeviceptr,
                        psize: *mut usize,
                        dptr: CUdeviceptr,
                    );
                    fn cuMemHostAlloc(pp: *mut *mut c_void, bytesize: usize, Flags: c_uint);
                    fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize);
                    fn cuMemFreeHost(p: *mut c_void);
                    fn cuMemHostGetDevicePointer_v2(
                        pdptr: *mut CUdeviceptr,
                        p: *mut c_void,
                        Flags: c_uint,
                    );
                    fn cuMemHostGetFlags(pFlags: *mut c_uint, p: *mut c_void);
                    fn cuMemHostRegister_v2(p: *mut c_void, bytesize: usize, Flags: c_uint);
                    fn cuMemHostUnregister(p: *mut c_void);
                }
                crate::copy {
                    fn cuMemcpyHtoD_v2(
                        dstDevice: CUdeviceptr,
                        srcHost: *const c_void,
                        ByteCount: usize,
                    );
                    fn cuMemcpyDtoH_v2(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize);
                    fn cuMemcpyDtoD_v2(
                        dstDevice: CUdeviceptr,
                        srcDevice: CUdeviceptr,
                        ByteCount: usize,
                    );
                    fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize);
                    fn cuMemcpyAsync(
                        dst: CUdeviceptr,
                        src: CUdeviceptr,
                        ByteCount: usize,
                        hStream: CUstream,
                    );
                    fn cuMemcpyHtoDAsync_v2(
                        dstDevice: CUdeviceptr,
                        srcHost: *const c_void,
                        ByteCount: usize,
                        hStream: CUstream,
                    );
                    fn cuMemcpyDtoHAsync_v2(
                        dstHost: *mut c_void,
                        srcDevice: CUdeviceptr,
                        ByteCount: usize,
                        hStream: CUstream,
                    );
                    fn cuMemcpyDtoDAsync_v2(
                        dstDevice: CUdeviceptr,
                        srcDevice: CUdeviceptr,
                        ByteCount: usize,
                        hStream: CUstream,
                    );
                    fn cuMemcpyPeer(
                        dstDevice: CUdeviceptr,
                        dstContext: CUcontext,
                        srcDevice: CUdeviceptr,
                        srcContext: CUcontext,
                        ByteCount: usize,
                    );
                    fn cuMemcpyPeerAsync(
                        dstDevice: CUdeviceptr,
                        dstContext: CUcontext,
                        srcDevice: CUdeviceptr,
                        srcContext: CUcontext,
                        ByteCount: usize,
                        hStream: CUstream,
                    );
                    fn cuMemsetD8_v2(dstDevice: CUdeviceptr, uc: c_uchar, N: usize);
                    fn cuMemsetD16_v2(dstDevice: CUdeviceptr, us: c_ushort, N: usize);
                    fn cuMemsetD32_v2(dstDevice: CUdeviceptr, ui: c_uint, N: usize);
                    fn cuMemsetD8Async(
                        dstDevice: CUdeviceptr,
                        uc: c_uchar,
                        N: usize,
                        hStream: CUstream,
                    );
                    fn cuMemsetD16Async(
                        dstDevice: CUdeviceptr,
                        us: c_ushort,
                        N: usize,
                        hStream: CUstream,
                    );
                    fn cuMemsetD32Async(
                        dstDevice: CUdeviceptr,
                        ui: c_uint,
                        N: usize,
                        hStream: CUstream,
                    );
                }
                crate::module {
                    fn cuModuleLoadDataEx(
                        module: *mut CUmodule,
                        image: *const c_void,
                        numOptions: c_uint,
                        options: *mut CUjit_option,
                        optionValues: *mut *mut c_void,
                    );
                    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void);
                    fn cuModuleLoad(module: *mut CUmodule, fname: *const c_char);
                    fn cuModuleLoadFatBinary(module: *mut CUmodule, fatCubin: *const c_void);
                    fn cuModuleUnload(hmod: CUmodule);
                    fn cuModuleGetFunction(
                        hfunc: *mut CUfunction,
                        hmod: CUmodule,
                        name: *const c_char,
                    );
                    fn cuModuleGetGlobal_v2(
                        dptr: *mut CUdeviceptr,
                        bytes: *mut usize,
                        hmod: CUmodule,
                        name: *const c_char,
                    );
                    fn cuFuncGetAttribute(pi: *mut c_int, attrib: u32, hfunc: CUfunction);
                    fn cuFuncSetAttribute(hfunc: CUfunction, attrib: u32, value: c_int);
                    fn cuFuncSetCacheConfig(hfunc: CUfunction, config: u32);
                    fn cuFuncGetModule(hmod: *mut CUmodule, hfunc: CUfunction);
                }
                crate::launch {
                    fn cuLaunchKernel(
                        f: CUfunction,
                        gridDimX: c_uint,
                        gridDimY: c_uint,
                        gridDimZ: c_uint,
                        blockDimX: c_uint,
                        blockDimY: c_uint,
                        blockDimZ: c_uint,
                        sharedMemBytes: c_uint,
                        hStream: CUstream,
                        kernelParams: *mut *mut c_void,
                        extra: *mut *mut c_void,
                    );
                    fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        numBlocks: *mut c_int,
                        func: CUfunction,
                        blockSize: c_int,
                        dynamicSMemSize: usize,
                    );
                    fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                        numBlocks: *mut c_int,
                        func: CUfunction,
                        blockSize: c_int,
                        dynamicSMemSize: usize,
                        flags: c_uint,
                    );
                    fn cuOccupancyMaxPotentialBlockSize(
                        minGridSize: *mut c_int,
                        blockSize: *mut c_int,
                        func: CUfunction,
                        blockSizeToDynamicSMemSize: CUoccupancyB2DSize,
                        dynamicSMemSize: usize,
                        blockSizeLimit: c_int,
                    );
                    fn cuOccupancyMaxPotentialBlockSizeWithFlags(
                        minGridSize: *mut c_int,
                        blockSize: *mut c_int,
                        func: CUfunction,
                        blockSizeToDynamicSMemSize: CUoccupancyB2DSize,
                        dynamicSMemSize: usize,
                        blockSizeLimit: c_int,
                        flags: c_uint,
                    );
                    fn cuOccupancyAvailableDynamicSMemPerBlock(
                        dynamicSmemSize: *mut usize,
                        func: CUfunction,
                        numBlocks: c_int,
                        blockSize: c_int,
                    );
                }
                crate::graph::build {
                    fn cuGraphCreate(phGraph: *mut CUgraph, flags: c_uint);
                    fn cuGraphDestroy(hGraph: CUgraph);
                    fn cuGraphAddKernelNode_v2(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
                    );
                    fn cuGraphAddKernelNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
                    ) in cuda11;
                    fn cuGraphAddMemsetNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
                        ctx: CUcontext,
                    );
                    fn cuGraphAddMemcpyNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        copyParams: *const CUDA_MEMCPY3D,
                        ctx: CUcontext,
                    );
                    fn cuGraphAddHostNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        nodeParams: *const CUDA_HOST_NODE_PARAMS,
                    );
                    fn cuGraphAddEmptyNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                    );
                    fn cuGraphAddEventRecordNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        event: CUevent,
                    );
                    fn cuGraphAddEventWaitNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        event: CUevent,
                    );
                    fn cuGraphAddChildGraphNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        childGraph: CUgraph,
                    );
                    fn cuGraphGetNodes(
                        hGraph: CUgraph,
                        nodes: *mut CUgraphNode,
                        numNodes: *mut usize,
                    );
                    fn cuGraphGetRootNodes(
                        hGraph: CUgraph,
                        rootNodes: *mut CUgraphNode,
                        numRootNodes: *mut usize,
                    );
                    fn cuGraphNodeGetDependencies(
                        hNode: CUgraphNode,
                        dependencies: *mut CUgraphNode,
                        numDependencies: *mut usize,
                    );
                    fn cuGraphNodeGetType(hNode: CUgraphNode, type_: *mut CUgraphNodeType);
                    fn cuGraphKernelNodeGetParams_v2(
                        hNode: CUgraphNode,
                        nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v2,
                    );
                    fn cuGraphKernelNodeGetParams(
                        hNode: CUgraphNode,
                        nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v1,
                    ) in cuda11;
                }
                crate::graph::instantiate {
                    fn cuGraphInstantiateWithFlags(
                        phGraphExec: *mut CUgraphExec,
                        hGraph: CUgraph,
                        flags: c_ulonglong,
                    );
                    fn cuGraphInstantiateWithParams(
                        phGraphExec: *mut CUgraphExec,
                        hGraph: CUgraph,
                        instantiateParams: *mut CUDA_GRAPH_INSTANTIATE_PARAMS,
                    );
                    fn cuGraphExecDestroy(hGraphExec: CUgraphExec);
                    fn cuGraphExecKernelNodeSetParams_v2(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
                    );
                    fn cuGraphExecKernelNodeSetParams(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
                    ) in cuda11;
                    fn cuGraphExecMemsetNodeSetParams(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
                        ctx: CUcontext,
                    );
                    fn cuGraphExecMemcpyNodeSetParams(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        copyParams: *const CUDA_MEMCPY3D,
                        ctx: CUcontext,
                    );
                }
                crate::graph::launch {
                    fn cuGraphUpload(hGraphExec: CUgraphExec, hStream: CUstream);
                    fn cuGraphLaunch(hGraphExec: CUgraphExec, hStream: CUstream);
                }
            }
            refused {
                fn cuMemAllocAsync(dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream)
                    => "stream-ordered allocation (memory pools); use cuMemAlloc";
                fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream)
                    => "stream-ordered allocation (memory pools); use cuMemFree";
                fn cuMemAllocFromPoolAsync(
                    dptr: *mut CUdeviceptr,
                    bytesize: usize,
                    pool: CUmemoryPool,
                    hStream: CUstream,
                ) => "memory pools; use cuMemAlloc";
                fn cuMemPoolCreate(pool: *mut CUmemoryPool, poolProps: *const CUmemPoolProps)
                    => "memory pools";
                fn cuMemPoolDestroy(pool: CUmemoryPool) => "memory pools";
                fn cuMemPoolGetAttribute(pool: CUmemoryPool, attr: u32, value: *mut c_void)
                    => "memory pools";
                fn cuMemPoolSetAttribute(pool: CUmemoryPool, attr: u32, value: *mut c_void)
                    => "memory pools";
                fn cuMemPoolTrimTo(pool: CUmemoryPool, minBytesToKeep: usize) => "memory pools";
                fn cuDeviceGetDefaultMemPool(pool_out: *mut CUmemoryPool, dev: CUdevice)
                    => "memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)";
                fn cuDeviceGetMemPool(pool: *mut CUmemoryPool, dev: CUdevice)
                    => "memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)";
                fn cuDeviceSetMemPool(dev: CUdevice, pool: CUmemoryPool)
                    => "memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)";
                fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint)
                    => "managed memory (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0); use \
                        cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP for memory both sides \
                        reach";
                fn cuMemAdvise(devPtr: CUdeviceptr, count: usize, advice: u32, device: CUdevice)
                    => "managed memory";
                fn cuMemPrefetchAsync(
                    devPtr: CUdeviceptr,
                    count: usize,
                    dstDevice: CUdevice,
                    hStream: CUstream,
                ) => "managed memory";
                fn cuStreamAttachMemAsync(
                    hStream: CUstream,
                    dptr: CUdeviceptr,
                    length: usize,
                    flags: c_uint,
                ) => "managed memory";
                fn cuGraphExecUpdate_v2(
                    hGraphExec: CUgraphExec,
                    hGraph: CUgraph,
                    resultInfo: *mut CUgraphExecUpdateResultInfo,
                ) => "whole-graph updates of an executable graph (cuGraphExecUpdate); update its \
                      nodes (cuGraphExecKernelNodeSetParams, ...) or instantiate the graph again";
                fn cuStreamBeginCapture_v2(hStream: CUstream, mode: u32)
                    => "stream capture (CUDA graphs)";
                fn cuStreamEndCapture(hStream: CUstream, phGraph: *mut CUgraph)
                    => "stream capture (CUDA graphs)";
                fn cuImportExternalMemory(
                    extMem_out: *mut CUexternalMemory,
                    memHandleDesc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
                ) => "external memory interop";
                fn cuExternalMemoryGetMappedBuffer(
                    devPtr: *mut CUdeviceptr,
                    extMem: CUexternalMemory,
                    bufferDesc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC,
                ) => "external memory interop";
                fn cuDestroyExternalMemory(extMem: CUexternalMemory) => "external memory interop";
                fn cuLaunchCooperativeKernel(
                    f: CUfunction,
                    gridDimX: c_uint,
                    gridDimY: c_uint,
                    gridDimZ: c_uint,
                    blockDimX: c_uint,
                    blockDimY: c_uint,
                    blockDimZ: c_uint,
                    sharedMemBytes: c_uint,
                    hStream: CUstream,
                    kernelParams: *mut *mut c_void,
                ) => "cooperative launches (grid-wide sync; CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH \
                      is 0)";
                fn cuOccupancyMaxActiveClusters(
                    numClusters: *mut c_int,
                    func: CUfunction,
                    config: *const CUlaunchConfig,
                ) => "thread-block clusters (sm_90)";
                fn cuOccupancyMaxPotentialClusterSize(
                    clusterSize: *mut c_int,
                    func: CUfunction,
                    config: *const CUlaunchConfig,
                ) => "thread-block clusters (sm_90)";
            }
        }
    };
}
pub(crate) use entry_points;

/// Makes the `extern "C"` export of every entry of [`entry_points!`].
macro_rules! shells {
    (
        implemented {$(
            crate $(:: $family:ident)+ { $($entries:tt)* }
        )*}
        refused {$(
            fn $refused:ident($($rarg:ident: $rty:ty),* $(,)?) => $what:literal;
        )*}
    ) => {
        $(shells!(@family crate $(:: $family)+; $($entries)*);)*
        $(
            #[doc = concat!(
                "`", stringify!($refused), "`: `CUDA_ERROR_NOT_SUPPORTED`, the CPU driver does \
                 not offer ", $what, ".",
            )]
            #[unsafe(no_mangle)]
            pub extern "C" fn $refused($($rarg: $rty),*) -> CUresult {
                let _ = ($($rarg,)*);
                call(stringify!($refused), || refuse($what))
            }
        )*
    };
    (@family $family:path; $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(in $decl:ident)?;)*) => {$(
        #[doc = concat!(
            "`", stringify!($name), "`: runs `", stringify!($family), "::", stringify!($name),
            "` in [`call`].",
        )]
        ///
        /// # Safety
        /// As the driver API documents for this call (the implementation's `# Safety` says
        /// what it relies on).
        #[unsafe(no_mangle)]
        #[allow(unused_unsafe)] // implementations without a safety contract
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            use $family as family;
            // SAFETY: the caller keeps the driver API's contract for this call, which is the
            // implementation's (its `# Safety`, where it has one).
            call(stringify!($name), || unsafe { family::$name($($arg),*) })
        }
    )*};
}

entry_points!(shells);

fn refuse(what: &str) -> CuResult<()> {
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        format!("the CPU driver (streamexec libcuda) does not offer {what}"),
    ))
}
