//! Every `cu*` entry point of the library, declared once in [`entry_points!`]: its name, its
//! C signature, and where it goes (the family file that implements it, or a refusal). The list
//! hands its entries to a macro of the caller's choice, as ZLUDA's `cuda_function_declarations!`
//! does: `shells!` (`shells.rs`) makes the `extern "C"` exports and the table `cuGetProcAddress`
//! searches, and `abi.rs` the compile-time check of every signature against cudarc's
//! `driver::sys`.
//!
//! An implemented entry point's shell runs `crate::<family>::<name>` (an ordinary Rust function
//! returning `CuResult<()>`) in `entry::call`: panics become `CUDA_ERROR_UNKNOWN`, calls from a host
//! function `CUDA_ERROR_NOT_PERMITTED`, failures keep their detail for
//! `streamexec_cuda_last_error_detail`. A refused entry point is one cudarc's safe layer can
//! reach that this library does not offer: `CUDA_ERROR_NOT_SUPPORTED` with a detail naming
//! what is missing (the device attributes that advertise these features are 0, so
//! well-behaved programs never call them).
//!
//! Each entry says, after its signature, the CUDA version its ABI starts at and, where CUDA
//! replaced it by a later variant, that variant's version (`@ 11040..12050`), as `cudaTypedefs.h`
//! numbers them (`PFN_cuCtxCreate_v11040`); and its per-thread default-stream export where CUDA
//! has one (`, ptsz cuLaunchKernel_ptsz`), which `shells!` makes too. `procs!` makes the
//! table `cuGetProcAddress` searches from the same entries (`proc_address.rs`); the `lookup`
//! section holds `cuGetProcAddress` itself, whose shells hand that table to it.
//!
//! `fn name(..) @ v in cuda11;` checks the signature against a local declaration (`abi.rs`)
//! instead of cudarc's 12.0 bindings, which lack the name. Enums passed by value are received
//! as `u32`: a C caller may pass any value.

/// The declaration list: `$callback! { implemented { <family path> { fn .. @ v; }* }*
/// lookup { fn .. @ v; }* refused { fn .. @ v => "what is missing"; }* }`.
macro_rules! entry_points {
    ($callback:ident) => {
        $callback! {
            implemented {
                crate::driver {
                    fn cuInit(Flags: c_uint) @ 2000;
                    fn cuDriverGetVersion(driverVersion: *mut c_int) @ 2020;
                    fn cuProfilerStart() @ 4000;
                    fn cuProfilerStop() @ 4000;
                    fn cuGetExportTable(
                        ppExportTable: *mut *const c_void,
                        pExportTableId: *const CUuuid,
                    ) @ 3000;
                }
                crate::entry {
                    fn cuGetErrorName(error: u32, pStr: *mut *const c_char) @ 6000;
                    fn cuGetErrorString(error: u32, pStr: *mut *const c_char) @ 6000;
                }
                crate::device {
                    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) @ 2000;
                    fn cuDeviceGetCount(count: *mut c_int) @ 2000;
                    fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) @ 2000;
                    fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) @ 3020;
                    fn cuDeviceGetAttribute(pi: *mut c_int, attrib: u32, dev: CUdevice) @ 2000;
                    fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) @ 9020..11040;
                    fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) @ 11040;
                    fn cuDeviceComputeCapability(
                        major: *mut c_int,
                        minor: *mut c_int,
                        dev: CUdevice,
                    ) @ 2000;
                    fn cuDeviceGetPCIBusId(pciBusId: *mut c_char, len: c_int, dev: CUdevice) @ 4010;
                    fn cuDeviceGetByPCIBusId(dev: *mut CUdevice, pciBusId: *const c_char) @ 4010;
                    fn cuDeviceCanAccessPeer(
                        canAccessPeer: *mut c_int,
                        dev: CUdevice,
                        peerDev: CUdevice,
                    ) @ 4000;
                }
                crate::context::api {
                    fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) @ 7000;
                    fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) @ 11000;
                    fn cuDevicePrimaryCtxReset_v2(dev: CUdevice) @ 11000;
                    fn cuDevicePrimaryCtxGetState(
                        dev: CUdevice,
                        flags: *mut c_uint,
                        active: *mut c_int,
                    ) @ 7000;
                    fn cuDevicePrimaryCtxSetFlags_v2(dev: CUdevice, flags: c_uint) @ 11000;
                    fn cuCtxCreate_v2(pctx: *mut CUcontext, flags: c_uint, dev: CUdevice) @ 3020..11040;
                    fn cuCtxCreate_v3(
                        pctx: *mut CUcontext,
                        paramsArray: *mut CUexecAffinityParam,
                        numParams: c_int,
                        flags: c_uint,
                        dev: CUdevice,
                    ) @ 11040..12050;
                    fn cuCtxDestroy_v2(ctx: CUcontext) @ 4000;
                    fn cuCtxSetCurrent(ctx: CUcontext) @ 4000;
                    fn cuCtxGetCurrent(pctx: *mut CUcontext) @ 4000;
                    fn cuCtxPushCurrent_v2(ctx: CUcontext) @ 4000;
                    fn cuCtxPopCurrent_v2(pctx: *mut CUcontext) @ 4000;
                    fn cuCtxGetDevice(device: *mut CUdevice) @ 2000;
                    fn cuCtxSynchronize() @ 2000;
                    fn cuCtxEnablePeerAccess(peerContext: CUcontext, Flags: c_uint) @ 4000;
                    fn cuCtxDisablePeerAccess(peerContext: CUcontext) @ 4000;
                    fn cuCtxGetLimit(pvalue: *mut usize, limit: u32) @ 3010;
                    fn cuCtxSetLimit(limit: u32, value: usize) @ 3010;
                    fn cuCtxGetCacheConfig(pconfig: *mut CUfunc_cache) @ 3020;
                    fn cuCtxSetCacheConfig(config: u32) @ 3020;
                    fn cuCtxGetFlags(flags: *mut c_uint) @ 7000;
                    fn cuCtxSetFlags(flags: c_uint) @ 12010 in cuda12_1;
                    fn cuCtxGetStreamPriorityRange(
                        leastPriority: *mut c_int,
                        greatestPriority: *mut c_int,
                    ) @ 5050;
                    fn cuCtxGetApiVersion(ctx: CUcontext, version: *mut c_uint) @ 3020;
                    fn cuCtxGetId(ctx: CUcontext, ctxId: *mut c_ulonglong) @ 12000;
                }
                crate::stream::api {
                    fn cuStreamCreate(phStream: *mut CUstream, Flags: c_uint) @ 2000;
                    fn cuStreamCreateWithPriority(
                        phStream: *mut CUstream,
                        flags: c_uint,
                        priority: c_int,
                    ) @ 5050;
                    fn cuStreamDestroy_v2(hStream: CUstream) @ 4000;
                    fn cuStreamSynchronize(hStream: CUstream) @ 2000, ptsz cuStreamSynchronize_ptsz;
                    fn cuStreamQuery(hStream: CUstream) @ 2000, ptsz cuStreamQuery_ptsz;
                    fn cuStreamWaitEvent(hStream: CUstream, hEvent: CUevent, Flags: c_uint) @ 3020, ptsz cuStreamWaitEvent_ptsz;
                    fn cuLaunchHostFunc(hStream: CUstream, fn_: CUhostFn, userData: *mut c_void) @ 10000, ptsz cuLaunchHostFunc_ptsz;
                    fn cuStreamGetFlags(hStream: CUstream, flags: *mut c_uint) @ 5050, ptsz cuStreamGetFlags_ptsz;
                    fn cuStreamGetPriority(hStream: CUstream, priority: *mut c_int) @ 5050, ptsz cuStreamGetPriority_ptsz;
                    fn cuStreamGetCtx(hStream: CUstream, pctx: *mut CUcontext) @ 9020..12050, ptsz cuStreamGetCtx_ptsz;
                    fn cuStreamGetId(hStream: CUstream, streamId: *mut c_ulonglong)
                        @ 12000, ptsz cuStreamGetId_ptsz;
                    fn cuStreamAddCallback(
                        hStream: CUstream,
                        callback: CUstreamCallback,
                        userData: *mut c_void,
                        flags: c_uint,
                    ) @ 5000, ptsz cuStreamAddCallback_ptsz;
                    fn cuStreamIsCapturing(
                        hStream: CUstream,
                        captureStatus: *mut CUstreamCaptureStatus,
                    ) @ 10000, ptsz cuStreamIsCapturing_ptsz;
                }
                crate::event {
                    fn cuEventCreate(phEvent: *mut CUevent, Flags: c_uint) @ 2000;
                    fn cuEventDestroy_v2(hEvent: CUevent) @ 4000;
                    fn cuEventRecord(hEvent: CUevent, hStream: CUstream) @ 2000, ptsz cuEventRecord_ptsz;
                    fn cuEventRecordWithFlags(hEvent: CUevent, hStream: CUstream, flags: c_uint) @ 11010, ptsz cuEventRecordWithFlags_ptsz;
                    fn cuEventQuery(hEvent: CUevent) @ 2000;
                    fn cuEventSynchronize(hEvent: CUevent) @ 2000;
                    fn cuEventElapsedTime(pMilliseconds: *mut f32, hStart: CUevent, hEnd: CUevent) @ 2000..12080;
                }
                crate::memory {
                    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) @ 3020;
                    fn cuMemFree_v2(dptr: CUdeviceptr) @ 3020;
                    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) @ 3020;
                    fn cuMemGetAddressRange_v2(
                        pbase: *mut CUdeviceptr,
                        psize: *mut usize,
                        dptr: CUdeviceptr,
                    ) @ 3020;
                    fn cuMemHostAlloc(pp: *mut *mut c_void, bytesize: usize, Flags: c_uint) @ 2020;
                    fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) @ 3020;
                    fn cuMemFreeHost(p: *mut c_void) @ 2000;
                    fn cuMemHostGetDevicePointer_v2(
                        pdptr: *mut CUdeviceptr,
                        p: *mut c_void,
                        Flags: c_uint,
                    ) @ 3020;
                    fn cuMemHostGetFlags(pFlags: *mut c_uint, p: *mut c_void) @ 2030;
                    fn cuMemHostRegister_v2(p: *mut c_void, bytesize: usize, Flags: c_uint) @ 6050;
                    fn cuMemHostUnregister(p: *mut c_void) @ 4000;
                }
                crate::pointer {
                    fn cuPointerGetAttribute(data: *mut c_void, attribute: u32, ptr: CUdeviceptr)
                        @ 4000;
                    fn cuPointerGetAttributes(
                        numAttributes: c_uint,
                        attributes: *mut CUpointer_attribute,
                        data: *mut *mut c_void,
                        ptr: CUdeviceptr,
                    ) @ 7000;
                }
                crate::copy_2d {
                    fn cuMemcpy2D_v2(pCopy: *const CUDA_MEMCPY2D) @ 3020, ptds cuMemcpy2D_v2_ptds;
                    fn cuMemcpy2DUnaligned_v2(pCopy: *const CUDA_MEMCPY2D) @ 3020, ptds cuMemcpy2DUnaligned_v2_ptds;
                    fn cuMemcpy2DAsync_v2(pCopy: *const CUDA_MEMCPY2D, hStream: CUstream) @ 3020, ptsz cuMemcpy2DAsync_v2_ptsz;
                    fn cuMemcpy3D_v2(pCopy: *const CUDA_MEMCPY3D) @ 3020, ptds cuMemcpy3D_v2_ptds;
                    fn cuMemcpy3DAsync_v2(pCopy: *const CUDA_MEMCPY3D, hStream: CUstream) @ 3020, ptsz cuMemcpy3DAsync_v2_ptsz;
                }
                crate::managed {
                    fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytesize: usize, flags: c_uint) @ 6000;
                    fn cuMemAdvise(devPtr: CUdeviceptr, count: usize, advice: u32, device: CUdevice) @ 8000..12020;
                    fn cuMemAdvise_v2(devPtr: CUdeviceptr, count: usize, advice: u32, location: MemLocation)
                        @ 12020 in cuda12_later;
                    fn cuMemPrefetchAsync(
                        devPtr: CUdeviceptr,
                        count: usize,
                        dstDevice: CUdevice,
                        hStream: CUstream,
                    ) @ 8000..12020, ptsz cuMemPrefetchAsync_ptsz;
                    fn cuMemPrefetchAsync_v2(
                        devPtr: CUdeviceptr,
                        count: usize,
                        location: MemLocation,
                        flags: c_uint,
                        hStream: CUstream,
                    ) @ 12020, ptsz cuMemPrefetchAsync_v2_ptsz in cuda12_later;
                    fn cuStreamAttachMemAsync(
                        hStream: CUstream,
                        dptr: CUdeviceptr,
                        length: usize,
                        flags: c_uint,
                    ) @ 6000, ptsz cuStreamAttachMemAsync_ptsz;
                    fn cuMemRangeGetAttribute(
                        data: *mut c_void,
                        dataSize: usize,
                        attribute: u32,
                        devPtr: CUdeviceptr,
                        count: usize,
                    ) @ 8000;
                    fn cuMemRangeGetAttributes(
                        data: *mut *mut c_void,
                        dataSizes: *mut usize,
                        attributes: *mut CUmem_range_attribute,
                        numAttributes: usize,
                        devPtr: CUdeviceptr,
                        count: usize,
                    ) @ 8000;
                }
                crate::copy {
                    fn cuMemcpyHtoD_v2(
                        dstDevice: CUdeviceptr,
                        srcHost: *const c_void,
                        ByteCount: usize,
                    ) @ 3020, ptds cuMemcpyHtoD_v2_ptds;
                    fn cuMemcpyDtoH_v2(dstHost: *mut c_void, srcDevice: CUdeviceptr, ByteCount: usize) @ 3020, ptds cuMemcpyDtoH_v2_ptds;
                    fn cuMemcpyDtoD_v2(
                        dstDevice: CUdeviceptr,
                        srcDevice: CUdeviceptr,
                        ByteCount: usize,
                    ) @ 3020, ptds cuMemcpyDtoD_v2_ptds;
                    fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, ByteCount: usize) @ 4000, ptds cuMemcpy_ptds;
                    fn cuMemcpyAsync(
                        dst: CUdeviceptr,
                        src: CUdeviceptr,
                        ByteCount: usize,
                        hStream: CUstream,
                    ) @ 4000, ptsz cuMemcpyAsync_ptsz;
                    fn cuMemcpyHtoDAsync_v2(
                        dstDevice: CUdeviceptr,
                        srcHost: *const c_void,
                        ByteCount: usize,
                        hStream: CUstream,
                    ) @ 3020, ptsz cuMemcpyHtoDAsync_v2_ptsz;
                    fn cuMemcpyDtoHAsync_v2(
                        dstHost: *mut c_void,
                        srcDevice: CUdeviceptr,
                        ByteCount: usize,
                        hStream: CUstream,
                    ) @ 3020, ptsz cuMemcpyDtoHAsync_v2_ptsz;
                    fn cuMemcpyDtoDAsync_v2(
                        dstDevice: CUdeviceptr,
                        srcDevice: CUdeviceptr,
                        ByteCount: usize,
                        hStream: CUstream,
                    ) @ 3020, ptsz cuMemcpyDtoDAsync_v2_ptsz;
                    fn cuMemcpyPeer(
                        dstDevice: CUdeviceptr,
                        dstContext: CUcontext,
                        srcDevice: CUdeviceptr,
                        srcContext: CUcontext,
                        ByteCount: usize,
                    ) @ 4000, ptds cuMemcpyPeer_ptds;
                    fn cuMemcpyPeerAsync(
                        dstDevice: CUdeviceptr,
                        dstContext: CUcontext,
                        srcDevice: CUdeviceptr,
                        srcContext: CUcontext,
                        ByteCount: usize,
                        hStream: CUstream,
                    ) @ 4000, ptsz cuMemcpyPeerAsync_ptsz;
                    fn cuMemsetD8_v2(dstDevice: CUdeviceptr, uc: c_uchar, N: usize) @ 3020, ptds cuMemsetD8_v2_ptds;
                    fn cuMemsetD16_v2(dstDevice: CUdeviceptr, us: c_ushort, N: usize) @ 3020, ptds cuMemsetD16_v2_ptds;
                    fn cuMemsetD32_v2(dstDevice: CUdeviceptr, ui: c_uint, N: usize) @ 3020, ptds cuMemsetD32_v2_ptds;
                    fn cuMemsetD8Async(
                        dstDevice: CUdeviceptr,
                        uc: c_uchar,
                        N: usize,
                        hStream: CUstream,
                    ) @ 3020, ptsz cuMemsetD8Async_ptsz;
                    fn cuMemsetD16Async(
                        dstDevice: CUdeviceptr,
                        us: c_ushort,
                        N: usize,
                        hStream: CUstream,
                    ) @ 3020, ptsz cuMemsetD16Async_ptsz;
                    fn cuMemsetD32Async(
                        dstDevice: CUdeviceptr,
                        ui: c_uint,
                        N: usize,
                        hStream: CUstream,
                    ) @ 3020, ptsz cuMemsetD32Async_ptsz;
                }
                crate::module {
                    fn cuModuleLoadDataEx(
                        module: *mut CUmodule,
                        image: *const c_void,
                        numOptions: c_uint,
                        options: *mut CUjit_option,
                        optionValues: *mut *mut c_void,
                    ) @ 2010;
                    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) @ 2000;
                    fn cuModuleLoad(module: *mut CUmodule, fname: *const c_char) @ 2000;
                    fn cuModuleLoadFatBinary(module: *mut CUmodule, fatCubin: *const c_void) @ 2000;
                    fn cuModuleUnload(hmod: CUmodule) @ 2000;
                    fn cuModuleGetFunction(
                        hfunc: *mut CUfunction,
                        hmod: CUmodule,
                        name: *const c_char,
                    ) @ 2000;
                    fn cuModuleGetGlobal_v2(
                        dptr: *mut CUdeviceptr,
                        bytes: *mut usize,
                        hmod: CUmodule,
                        name: *const c_char,
                    ) @ 3020;
                    fn cuFuncGetAttribute(pi: *mut c_int, attrib: u32, hfunc: CUfunction) @ 2020;
                    fn cuFuncSetAttribute(hfunc: CUfunction, attrib: u32, value: c_int) @ 9000;
                    fn cuFuncSetCacheConfig(hfunc: CUfunction, config: u32) @ 3000;
                    fn cuFuncGetModule(hmod: *mut CUmodule, hfunc: CUfunction) @ 11000;
                    fn cuFuncGetName(name: *mut *const c_char, hfunc: CUfunction)
                        @ 12030 in cuda12_later;
                    fn cuModuleGetLoadingMode(mode: *mut CUmoduleLoadingMode) @ 11070;
                }
                crate::module::library {
                    fn cuLibraryLoadData(
                        library: *mut CUlibrary,
                        code: *const c_void,
                        jitOptions: *mut CUjit_option,
                        jitOptionsValues: *mut *mut c_void,
                        numJitOptions: c_uint,
                        libraryOptions: *mut CUlibraryOption,
                        libraryOptionValues: *mut *mut c_void,
                        numLibraryOptions: c_uint,
                    ) @ 12000;
                    fn cuLibraryLoadFromFile(
                        library: *mut CUlibrary,
                        fileName: *const c_char,
                        jitOptions: *mut CUjit_option,
                        jitOptionsValues: *mut *mut c_void,
                        numJitOptions: c_uint,
                        libraryOptions: *mut CUlibraryOption,
                        libraryOptionValues: *mut *mut c_void,
                        numLibraryOptions: c_uint,
                    ) @ 12000;
                    fn cuLibraryUnload(library: CUlibrary) @ 12000;
                    fn cuLibraryGetKernel(
                        pKernel: *mut CUkernel,
                        library: CUlibrary,
                        name: *const c_char,
                    ) @ 12000;
                    fn cuLibraryGetKernelCount(count: *mut c_uint, lib: CUlibrary)
                        @ 12040 in cuda12_later;
                    fn cuLibraryEnumerateKernels(
                        kernels: *mut CUkernel,
                        numKernels: c_uint,
                        lib: CUlibrary,
                    ) @ 12040 in cuda12_later;
                    fn cuLibraryGetModule(pMod: *mut CUmodule, library: CUlibrary) @ 12000;
                    fn cuLibraryGetGlobal(
                        dptr: *mut CUdeviceptr,
                        bytes: *mut usize,
                        library: CUlibrary,
                        name: *const c_char,
                    ) @ 12000;
                    fn cuLibraryGetManaged(
                        dptr: *mut CUdeviceptr,
                        bytes: *mut usize,
                        library: CUlibrary,
                        name: *const c_char,
                    ) @ 12000;
                    fn cuLibraryGetUnifiedFunction(
                        fptr: *mut *mut c_void,
                        library: CUlibrary,
                        symbol: *const c_char,
                    ) @ 12000;
                    fn cuKernelGetFunction(pFunc: *mut CUfunction, kernel: CUkernel) @ 12000;
                    fn cuKernelGetLibrary(pLib: *mut CUlibrary, kernel: CUkernel)
                        @ 12050 in cuda12_later;
                    fn cuKernelGetName(name: *mut *const c_char, hfunc: CUkernel)
                        @ 12030 in cuda12_later;
                    fn cuKernelGetParamInfo(
                        kernel: CUkernel,
                        paramIndex: usize,
                        paramOffset: *mut usize,
                        paramSize: *mut usize,
                    ) @ 12040 in cuda12_later;
                    fn cuKernelGetAttribute(
                        pi: *mut c_int,
                        attrib: u32,
                        kernel: CUkernel,
                        dev: CUdevice,
                    ) @ 12000;
                    fn cuKernelSetAttribute(
                        attrib: u32,
                        val: c_int,
                        kernel: CUkernel,
                        dev: CUdevice,
                    ) @ 12000;
                    fn cuKernelSetCacheConfig(kernel: CUkernel, config: u32, dev: CUdevice) @ 12000;
                }
                crate::link {
                    fn cuLinkCreate_v2(
                        numOptions: c_uint,
                        options: *mut CUjit_option,
                        optionValues: *mut *mut c_void,
                        stateOut: *mut CUlinkState,
                    ) @ 6050;
                    fn cuLinkAddData_v2(
                        state: CUlinkState,
                        type_: u32,
                        data: *mut c_void,
                        size: usize,
                        name: *const c_char,
                        numOptions: c_uint,
                        options: *mut CUjit_option,
                        optionValues: *mut *mut c_void,
                    ) @ 6050;
                    fn cuLinkAddFile_v2(
                        state: CUlinkState,
                        type_: u32,
                        path: *const c_char,
                        numOptions: c_uint,
                        options: *mut CUjit_option,
                        optionValues: *mut *mut c_void,
                    ) @ 6050;
                    fn cuLinkComplete(
                        state: CUlinkState,
                        cubinOut: *mut *mut c_void,
                        sizeOut: *mut usize,
                    ) @ 5050;
                    fn cuLinkDestroy(state: CUlinkState) @ 5050;
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
                    ) @ 4000, ptsz cuLaunchKernel_ptsz;
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
                    ) @ 9000, ptsz cuLaunchCooperativeKernel_ptsz;
                    fn cuLaunchKernelEx(
                        config: *const CUlaunchConfig,
                        f: CUfunction,
                        kernelParams: *mut *mut c_void,
                        extra: *mut *mut c_void,
                    ) @ 11060, ptsz cuLaunchKernelEx_ptsz;
                    fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
                        numBlocks: *mut c_int,
                        func: CUfunction,
                        blockSize: c_int,
                        dynamicSMemSize: usize,
                    ) @ 6050;
                    fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                        numBlocks: *mut c_int,
                        func: CUfunction,
                        blockSize: c_int,
                        dynamicSMemSize: usize,
                        flags: c_uint,
                    ) @ 7000;
                    fn cuOccupancyMaxPotentialBlockSize(
                        minGridSize: *mut c_int,
                        blockSize: *mut c_int,
                        func: CUfunction,
                        blockSizeToDynamicSMemSize: CUoccupancyB2DSize,
                        dynamicSMemSize: usize,
                        blockSizeLimit: c_int,
                    ) @ 6050;
                    fn cuOccupancyMaxPotentialBlockSizeWithFlags(
                        minGridSize: *mut c_int,
                        blockSize: *mut c_int,
                        func: CUfunction,
                        blockSizeToDynamicSMemSize: CUoccupancyB2DSize,
                        dynamicSMemSize: usize,
                        blockSizeLimit: c_int,
                        flags: c_uint,
                    ) @ 7000;
                    fn cuOccupancyAvailableDynamicSMemPerBlock(
                        dynamicSmemSize: *mut usize,
                        func: CUfunction,
                        numBlocks: c_int,
                        blockSize: c_int,
                    ) @ 10020;
                }
                crate::graph::build {
                    fn cuGraphCreate(phGraph: *mut CUgraph, flags: c_uint) @ 10000;
                    fn cuGraphDestroy(hGraph: CUgraph) @ 10000;
                    fn cuGraphAddKernelNode_v2(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
                    ) @ 12000;
                    fn cuGraphAddKernelNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
                    ) @ 10000..12000 in cuda11;
                    fn cuGraphAddMemsetNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
                        ctx: CUcontext,
                    ) @ 10000;
                    fn cuGraphAddMemcpyNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        copyParams: *const CUDA_MEMCPY3D,
                        ctx: CUcontext,
                    ) @ 10000;
                    fn cuGraphAddHostNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        nodeParams: *const CUDA_HOST_NODE_PARAMS,
                    ) @ 10000;
                    fn cuGraphAddEmptyNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                    ) @ 10000;
                    fn cuGraphAddEventRecordNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        event: CUevent,
                    ) @ 11010;
                    fn cuGraphAddEventWaitNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        event: CUevent,
                    ) @ 11010;
                    fn cuGraphAddChildGraphNode(
                        phGraphNode: *mut CUgraphNode,
                        hGraph: CUgraph,
                        dependencies: *const CUgraphNode,
                        numDependencies: usize,
                        childGraph: CUgraph,
                    ) @ 10000;
                    fn cuGraphGetNodes(
                        hGraph: CUgraph,
                        nodes: *mut CUgraphNode,
                        numNodes: *mut usize,
                    ) @ 10000;
                    fn cuGraphGetRootNodes(
                        hGraph: CUgraph,
                        rootNodes: *mut CUgraphNode,
                        numRootNodes: *mut usize,
                    ) @ 10000;
                    fn cuGraphNodeGetDependencies(
                        hNode: CUgraphNode,
                        dependencies: *mut CUgraphNode,
                        numDependencies: *mut usize,
                    ) @ 10000..12030;
                    fn cuGraphNodeGetType(hNode: CUgraphNode, type_: *mut CUgraphNodeType) @ 10000;
                    fn cuGraphKernelNodeGetParams_v2(
                        hNode: CUgraphNode,
                        nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v2,
                    ) @ 12000;
                    fn cuGraphKernelNodeGetParams(
                        hNode: CUgraphNode,
                        nodeParams: *mut CUDA_KERNEL_NODE_PARAMS_v1,
                    ) @ 10000..12000 in cuda11;
                }
                crate::graph::instantiate {
                    fn cuGraphInstantiateWithFlags(
                        phGraphExec: *mut CUgraphExec,
                        hGraph: CUgraph,
                        flags: c_ulonglong,
                    ) @ 11040;
                    fn cuGraphInstantiateWithParams(
                        phGraphExec: *mut CUgraphExec,
                        hGraph: CUgraph,
                        instantiateParams: *mut CUDA_GRAPH_INSTANTIATE_PARAMS,
                    ) @ 12000, ptsz cuGraphInstantiateWithParams_ptsz;
                    fn cuGraphExecDestroy(hGraphExec: CUgraphExec) @ 10000;
                    fn cuGraphExecKernelNodeSetParams_v2(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v2,
                    ) @ 12000;
                    fn cuGraphExecKernelNodeSetParams(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        nodeParams: *const CUDA_KERNEL_NODE_PARAMS_v1,
                    ) @ 10010..12000 in cuda11;
                    fn cuGraphExecMemsetNodeSetParams(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        memsetParams: *const CUDA_MEMSET_NODE_PARAMS,
                        ctx: CUcontext,
                    ) @ 10020;
                    fn cuGraphExecMemcpyNodeSetParams(
                        hGraphExec: CUgraphExec,
                        hNode: CUgraphNode,
                        copyParams: *const CUDA_MEMCPY3D,
                        ctx: CUcontext,
                    ) @ 10020;
                }
                crate::graph::launch {
                    fn cuGraphUpload(hGraphExec: CUgraphExec, hStream: CUstream) @ 11010, ptsz cuGraphUpload_ptsz;
                    fn cuGraphLaunch(hGraphExec: CUgraphExec, hStream: CUstream) @ 10000, ptsz cuGraphLaunch_ptsz;
                }
            }
            lookup {
                fn cuGetProcAddress(
                    symbol: *const c_char,
                    pfn: *mut *mut c_void,
                    cudaVersion: c_int,
                    flags: cuuint64_t,
                ) @ 11030..12000 in cuda11;
                fn cuGetProcAddress_v2(
                    symbol: *const c_char,
                    pfn: *mut *mut c_void,
                    cudaVersion: c_int,
                    flags: cuuint64_t,
                    symbolStatus: *mut CUdriverProcAddressQueryResult,
                ) @ 12000;
            }
            refused {
                fn cuMemAllocAsync(dptr: *mut CUdeviceptr, bytesize: usize, hStream: CUstream) @ 11020, ptsz cuMemAllocAsync_ptsz
                    => "stream-ordered allocation (memory pools); use cuMemAlloc";
                fn cuMemFreeAsync(dptr: CUdeviceptr, hStream: CUstream) @ 11020, ptsz cuMemFreeAsync_ptsz
                    => "stream-ordered allocation (memory pools); use cuMemFree";
                fn cuMemAllocFromPoolAsync(
                    dptr: *mut CUdeviceptr,
                    bytesize: usize,
                    pool: CUmemoryPool,
                    hStream: CUstream,
                ) @ 11020, ptsz cuMemAllocFromPoolAsync_ptsz => "memory pools; use cuMemAlloc";
                fn cuMemPoolCreate(pool: *mut CUmemoryPool, poolProps: *const CUmemPoolProps) @ 11020
                    => "memory pools";
                fn cuMemPoolDestroy(pool: CUmemoryPool) @ 11020 => "memory pools";
                fn cuMemPoolGetAttribute(pool: CUmemoryPool, attr: u32, value: *mut c_void) @ 11020
                    => "memory pools";
                fn cuMemPoolSetAttribute(pool: CUmemoryPool, attr: u32, value: *mut c_void) @ 11020
                    => "memory pools";
                fn cuMemPoolTrimTo(pool: CUmemoryPool, minBytesToKeep: usize) @ 11020 => "memory pools";
                fn cuDeviceGetDefaultMemPool(pool_out: *mut CUmemoryPool, dev: CUdevice) @ 11020
                    => "memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)";
                fn cuDeviceGetMemPool(pool: *mut CUmemoryPool, dev: CUdevice) @ 11020
                    => "memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)";
                fn cuDeviceSetMemPool(dev: CUdevice, pool: CUmemoryPool) @ 11020
                    => "memory pools (CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)";
                fn cuGraphExecUpdate_v2(
                    hGraphExec: CUgraphExec,
                    hGraph: CUgraph,
                    resultInfo: *mut CUgraphExecUpdateResultInfo,
                ) @ 12000 => "whole-graph updates of an executable graph (cuGraphExecUpdate); update its \
                      nodes (cuGraphExecKernelNodeSetParams, ...) or instantiate the graph again";
                fn cuStreamBeginCapture_v2(hStream: CUstream, mode: u32) @ 10010, ptsz cuStreamBeginCapture_v2_ptsz
                    => "stream capture (CUDA graphs)";
                fn cuStreamEndCapture(hStream: CUstream, phGraph: *mut CUgraph) @ 10000, ptsz cuStreamEndCapture_ptsz
                    => "stream capture (CUDA graphs)";
                fn cuImportExternalMemory(
                    extMem_out: *mut CUexternalMemory,
                    memHandleDesc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
                ) @ 10000 => "external memory interop";
                fn cuExternalMemoryGetMappedBuffer(
                    devPtr: *mut CUdeviceptr,
                    extMem: CUexternalMemory,
                    bufferDesc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC,
                ) @ 10000 => "external memory interop";
                fn cuDestroyExternalMemory(extMem: CUexternalMemory) @ 10000 => "external memory interop";
                fn cuOccupancyMaxActiveClusters(
                    numClusters: *mut c_int,
                    func: CUfunction,
                    config: *const CUlaunchConfig,
                ) @ 11070 => "thread-block clusters (sm_90)";
                fn cuOccupancyMaxPotentialClusterSize(
                    clusterSize: *mut c_int,
                    func: CUfunction,
                    config: *const CUlaunchConfig,
                ) @ 11070 => "thread-block clusters (sm_90)";
            }
        }
    };
}
pub(crate) use entry_points;
