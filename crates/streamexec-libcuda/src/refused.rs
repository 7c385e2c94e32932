//! Entry points that cudarc's safe layer can reach and that the CPU driver refuses with
//! `CUDA_ERROR_NOT_SUPPORTED` and a detail naming what is missing (memory pools, managed
//! memory, stream capture and whole-graph updates, external memory, cooperative launches,
//! clusters). The
//! device attributes that advertise these features are 0, so well-behaved programs never call
//! them. Generated from cudarc's `driver::sys` signatures (see `abi.rs`, which checks them).

#![allow(unused_variables)]

use std::ffi::{c_int, c_uint, c_void};

use cudarc::driver::sys::*;

use crate::entry::{CuErr, call};

fn refuse(what: &str) -> Result<(), CuErr> {
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        format!("the CPU driver (streamexec libcuda) does not offer {what}"),
    ))
}

/// `cuMemAllocAsync`: refused (stream-ordered allocation (memory pools)).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    hStream: CUstream,
) -> CUresult {
    call("cuMemAllocAsync", || {
        refuse("stream-ordered allocation (memory pools); use cuMemAlloc")
    })
}

/// `cuMemFreeAsync`: refused (stream-ordered allocation (memory pools)).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream) -> CUresult {
    call("cuMemFreeAsync", || {
        refuse("stream-ordered allocation (memory pools); use cuMemFree")
    })
}

/// `cuMemAllocFromPoolAsync`: refused (memory pools).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemAllocFromPoolAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    pool: CUmemoryPool,
    hStream: CUstream,
) -> CUresult {
    call("cuMemAllocFromPoolAsync", || {
        refuse("memory pools; use cuMemAlloc")
    })
}

/// `cuMemPoolCreate`: refused (memory pools).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemPoolCreate(
    pool: *mut CUmemoryPool,
    poolProps: *const CUmemPoolProps,
) -> CUresult {
    call("cuMemPoolCreate", || refuse("memory pools"))
}

/// `cuMemPoolDestroy`: refused (memory pools).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemPoolDestroy(pool: CUmemoryPool) -> CUresult {
    call("cuMemPoolDestroy", || refuse("memory pools"))
}

/// `cuMemPoolGetAttribute`: refused (memory pools).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemPoolGetAttribute(
    pool: CUmemoryPool,
    attr: u32,
    value: *mut c_void,
) -> CUresult {
    call("cuMemPoolGetAttribute", || refuse("memory pools"))
}

/// `cuMemPoolSetAttribute`: refused (memory pools).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemPoolSetAttribute(
    pool: CUmemoryPool,
    attr: u32,
    value: *mut c_void,
) -> CUresult {
    call("cuMemPoolSetAttribute", || refuse("memory pools"))
}

/// `cuMemPoolTrimTo`: refused (memory pools).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemPoolTrimTo(pool: CUmemoryPool, minBytesToKeep: usize) -> CUresult {
    call("cuMemPoolTrimTo", || refuse("memory pools"))
}

/// `cuDeviceGetDefaultMemPool`: refused (memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)).
#[unsafe(no_mangle)]
pub extern "C" fn cuDeviceGetDefaultMemPool(
    pool_out: *mut CUmemoryPool,
    dev: CUdevice,
) -> CUresult {
    call("cuDeviceGetDefaultMemPool", || {
        refuse("memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)")
    })
}

/// `cuDeviceGetMemPool`: refused (memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)).
#[unsafe(no_mangle)]
pub extern "C" fn cuDeviceGetMemPool(pool: *mut CUmemoryPool, dev: CUdevice) -> CUresult {
    call("cuDeviceGetMemPool", || {
        refuse("memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)")
    })
}

/// `cuDeviceSetMemPool`: refused (memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)).
#[unsafe(no_mangle)]
pub extern "C" fn cuDeviceSetMemPool(dev: CUdevice, pool: CUmemoryPool) -> CUresult {
    call("cuDeviceSetMemPool", || {
        refuse("memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)")
    })
}

/// `cuMemAllocManaged`: refused (managed memory (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0)).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    flags: c_uint,
) -> CUresult {
    call("cuMemAllocManaged", || {
        refuse(
            "managed memory (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0); use cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP for memory both sides reach",
        )
    })
}

/// `cuMemAdvise`: refused (managed memory).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemAdvise(
    devPtr: CUdeviceptr,
    count: usize,
    advice: u32,
    device: CUdevice,
) -> CUresult {
    call("cuMemAdvise", || refuse("managed memory"))
}

/// `cuMemPrefetchAsync`: refused (managed memory).
#[unsafe(no_mangle)]
pub extern "C" fn cuMemPrefetchAsync(
    devPtr: CUdeviceptr,
    count: usize,
    dstDevice: CUdevice,
    hStream: CUstream,
) -> CUresult {
    call("cuMemPrefetchAsync", || refuse("managed memory"))
}

/// `cuStreamAttachMemAsync`: refused (managed memory).
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamAttachMemAsync(
    hStream: CUstream,
    dptr: CUdeviceptr,
    length: usize,
    flags: c_uint,
) -> CUresult {
    call("cuStreamAttachMemAsync", || refuse("managed memory"))
}

/// `cuGraphExecUpdate_v2`: refused (updating an executable graph from a graph).
#[unsafe(no_mangle)]
pub extern "C" fn cuGraphExecUpdate_v2(
    hGraphExec: CUgraphExec,
    hGraph: CUgraph,
    resultInfo: *mut CUgraphExecUpdateResultInfo,
) -> CUresult {
    call("cuGraphExecUpdate_v2", || {
        refuse(
            "whole-graph updates of an executable graph (cuGraphExecUpdate); update its nodes \
             (cuGraphExecKernelNodeSetParams, ...) or instantiate the graph again",
        )
    })
}

/// `cuStreamBeginCapture_v2`: refused (stream capture (CUDA graphs)).
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamBeginCapture_v2(hStream: CUstream, mode: u32) -> CUresult {
    call("cuStreamBeginCapture_v2", || {
        refuse("stream capture (CUDA graphs)")
    })
}

/// `cuStreamEndCapture`: refused (stream capture (CUDA graphs)).
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamEndCapture(hStream: CUstream, phGraph: *mut CUgraph) -> CUresult {
    call("cuStreamEndCapture", || {
        refuse("stream capture (CUDA graphs)")
    })
}

/// `cuImportExternalMemory`: refused (external memory interop).
#[unsafe(no_mangle)]
pub extern "C" fn cuImportExternalMemory(
    extMem_out: *mut CUexternalMemory,
    memHandleDesc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
) -> CUresult {
    call("cuImportExternalMemory", || {
        refuse("external memory interop")
    })
}

/// `cuExternalMemoryGetMappedBuffer`: refused (external memory interop).
#[unsafe(no_mangle)]
pub extern "C" fn cuExternalMemoryGetMappedBuffer(
    devPtr: *mut CUdeviceptr,
    extMem: CUexternalMemory,
    bufferDesc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC,
) -> CUresult {
    call("cuExternalMemoryGetMappedBuffer", || {
        refuse("external memory interop")
    })
}

/// `cuDestroyExternalMemory`: refused (external memory interop).
#[unsafe(no_mangle)]
pub extern "C" fn cuDestroyExternalMemory(extMem: CUexternalMemory) -> CUresult {
    call("cuDestroyExternalMemory", || {
        refuse("external memory interop")
    })
}

/// `cuLaunchCooperativeKernel`: refused (cooperative launches (grid-wide sync).
#[unsafe(no_mangle)]
pub extern "C" fn cuLaunchCooperativeKernel(
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
) -> CUresult {
    call("cuLaunchCooperativeKernel", || {
        refuse("cooperative launches (grid-wide sync; CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH is 0)")
    })
}

/// `cuOccupancyMaxActiveClusters`: refused (thread-block clusters (sm_90)).
#[unsafe(no_mangle)]
pub extern "C" fn cuOccupancyMaxActiveClusters(
    numClusters: *mut c_int,
    func: CUfunction,
    config: *const CUlaunchConfig,
) -> CUresult {
    call("cuOccupancyMaxActiveClusters", || {
        refuse("thread-block clusters (sm_90)")
    })
}

/// `cuOccupancyMaxPotentialClusterSize`: refused (thread-block clusters (sm_90)).
#[unsafe(no_mangle)]
pub extern "C" fn cuOccupancyMaxPotentialClusterSize(
    clusterSize: *mut c_int,
    func: CUfunction,
    config: *const CUlaunchConfig,
) -> CUresult {
    call("cuOccupancyMaxPotentialClusterSize", || {
        refuse("thread-block clusters (sm_90)")
    })
}

/// `cuProfilerStart`: nothing to profile; succeeds, as with no profiler attached.
#[unsafe(no_mangle)]
pub extern "C" fn cuProfilerStart() -> CUresult {
    call("cuProfilerStart", || Ok(()))
}

/// `cuProfilerStop`: as `cuProfilerStart`.
#[unsafe(no_mangle)]
pub extern "C" fn cuProfilerStop() -> CUresult {
    call("cuProfilerStop", || Ok(()))
}
