//! `cuGetProcAddress(_v2)` as NVIDIA's Python bindings use it (every entry point by base name
//! and CUDA version, before `cuInit`), the per-thread default-stream exports it hands out, and
//! `cuGetExportTable`.

use super::*;
use sys::CUdriverProcAddressQueryResult as Status;

/// `CU_GET_PROC_ADDRESS_*` flags.
const DEFAULT: u64 = 0;
const LEGACY: u64 = 1;
const PER_THREAD: u64 = 2;

/// `cuGetProcAddress_v2(name, version, flags)`: the code, the address and the status.
fn proc_address(name: &str, version: c_int, flags: u64) -> (CUresult, usize, Status) {
    let name = CString::new(name).expect("no NUL");
    let mut p = std::ptr::dangling_mut::<c_void>();
    let mut status = Status::CU_GET_PROC_ADDRESS_SUCCESS;
    let r = cu!(cuGetProcAddress_v2(
        name.as_ptr(),
        &mut p,
        version,
        flags,
        &mut status
    ));
    (r, p as usize, status)
}

/// The address of export `name` (`dlsym`).
fn symbol(name: &str) -> usize {
    let name = CString::new(name).expect("no NUL");
    // SAFETY: only the symbol's address is taken.
    unsafe {
        *sys::culib()
            .get::<*mut c_void>(name.as_bytes_with_nul())
            .unwrap_or_else(|e| panic!("{name:?} is not exported: {e}"))
    }
    .addr()
}

/// Asserts that `name` at `version` (with `flags`) is export `want`.
#[track_caller]
fn resolves(name: &str, version: c_int, flags: u64, want: &str) {
    let (r, p, status) = proc_address(name, version, flags);
    check(r, CUresult::CUDA_SUCCESS, &format!("{name} @ {version}"));
    assert_eq!(status, Status::CU_GET_PROC_ADDRESS_SUCCESS);
    assert_eq!(
        p,
        symbol(want),
        "{name} @ {version} (flags {flags}) is not {want}"
    );
}

/// Asserts that `name` at `version` is not found, for `why`, with a NULL pointer.
#[track_caller]
fn missing(name: &str, version: c_int, why: Status) {
    let (r, p, status) = proc_address(name, version, DEFAULT);
    check(
        r,
        CUresult::CUDA_ERROR_NOT_FOUND,
        &format!("{name} @ {version}"),
    );
    assert_eq!(p, 0, "{name} @ {version}: pfn must be NULL");
    assert_eq!(status, why, "{name} @ {version}");
}

/// In a fresh process: resolving needs no `cuInit` (cuda-bindings resolves everything first).
#[test]
fn proc_address_before_init() {
    if !lib_available("proc_address_before_init")
        || !in_child("lookup::proc_address_before_init", &[])
    {
        return;
    }
    resolves("cuInit", 2000, DEFAULT, "cuInit");
    resolves("cuDriverGetVersion", 12000, DEFAULT, "cuDriverGetVersion");
    // Got through the lookup, cuDriverGetVersion reports the version of the newest export.
    let (_, p, _) = proc_address("cuDriverGetVersion", 2020, DEFAULT);
    // SAFETY: the address of cuDriverGetVersion, whose C signature this is.
    let get: unsafe extern "C" fn(*mut c_int) -> CUresult = unsafe { std::mem::transmute(p) };
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { get(&mut v) }, CUresult::CUDA_SUCCESS);
    assert_eq!(v, 12050);
}

#[test]
fn proc_address_picks_the_variant_of_the_version() {
    let Some(_drv) = setup("proc_address_picks_the_variant_of_the_version") else {
        return;
    };
    // The base name and the CUDA version pick the ABI: cuMemAlloc is cuMemAlloc_v2 from 3.2.
    resolves("cuMemAlloc", 3020, DEFAULT, "cuMemAlloc_v2");
    resolves("cuMemAlloc", 12050, DEFAULT, "cuMemAlloc_v2");
    resolves("cuDeviceGetUuid", 9020, DEFAULT, "cuDeviceGetUuid");
    resolves("cuDeviceGetUuid", 11040, DEFAULT, "cuDeviceGetUuid_v2");
    resolves("cuCtxCreate", 3020, DEFAULT, "cuCtxCreate_v2");
    resolves("cuCtxCreate", 12040, DEFAULT, "cuCtxCreate_v3");
    resolves("cuGetProcAddress", 11030, DEFAULT, "cuGetProcAddress");
    resolves("cuGetProcAddress", 12000, DEFAULT, "cuGetProcAddress_v2");
    resolves(
        "cuGraphAddKernelNode",
        11000,
        DEFAULT,
        "cuGraphAddKernelNode",
    );
    resolves(
        "cuGraphAddKernelNode",
        12000,
        DEFAULT,
        "cuGraphAddKernelNode_v2",
    );
    resolves("cuLibraryLoadData", 12000, LEGACY, "cuLibraryLoadData");
    // A refused entry point resolves to its refusal.
    resolves("cuMemAllocAsync", 11020, DEFAULT, "cuMemAllocAsync");
    // Variants not exported are not found, never another variant's ABI: cuCtxCreate from 12.5
    // is cuCtxCreate_v4, cuMemAlloc before 3.2 the 32-bit cuMemAlloc.
    missing(
        "cuCtxCreate",
        12050,
        Status::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
    );
    missing(
        "cuMemAlloc",
        2000,
        Status::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
    );
    missing(
        "cuEventElapsedTime",
        12080,
        Status::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
    );
    // Newer than the version asked for.
    missing(
        "cuLibraryLoadData",
        11080,
        Status::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
    );
    missing(
        "cuDeviceGetUuid",
        9000,
        Status::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
    );
    // Unknown names, and a versioned name (the lookup takes base names).
    missing(
        "cuNoSuchFunction",
        12000,
        Status::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
    );
    missing(
        "cuMemAlloc_v2",
        12000,
        Status::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
    );
    missing("", 12000, Status::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    // The first cuGetProcAddress has no status.
    let mut p = std::ptr::dangling_mut::<c_void>();
    let name = c"cuMemFree";
    expect!(
        CUDA_SUCCESS,
        cuGetProcAddress_v2(name.as_ptr(), &mut p, 12000, DEFAULT, null_mut())
    );
    assert_eq!(p.addr(), symbol("cuMemFree_v2"));
    // Bad arguments.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGetProcAddress_v2(null(), &mut p, 12000, DEFAULT, null_mut())
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGetProcAddress_v2(name.as_ptr(), null_mut(), 12000, DEFAULT, null_mut())
    );
    for flags in [LEGACY | PER_THREAD, 4, u64::MAX] {
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuGetProcAddress_v2(name.as_ptr(), &mut p, 12000, flags, null_mut())
        );
    }
}

#[test]
fn per_thread_default_stream_exports() {
    let Some(_drv) = setup("per_thread_default_stream_exports") else {
        return;
    };
    resolves("cuLaunchKernel", 12000, PER_THREAD, "cuLaunchKernel_ptsz");
    resolves("cuLaunchKernel", 12000, LEGACY, "cuLaunchKernel");
    resolves("cuLaunchKernel", 12000, DEFAULT, "cuLaunchKernel");
    resolves("cuMemcpyHtoD", 12000, PER_THREAD, "cuMemcpyHtoD_v2_ptds");
    resolves(
        "cuStreamSynchronize",
        12000,
        PER_THREAD,
        "cuStreamSynchronize_ptsz",
    );
    resolves(
        "cuLaunchKernelEx",
        12000,
        PER_THREAD,
        "cuLaunchKernelEx_ptsz",
    );
    // Functions without a stream have no per-thread variant: the same export.
    resolves("cuMemAlloc", 12000, PER_THREAD, "cuMemAlloc_v2");

    // In a `_ptsz`/`_ptds` export the NULL stream is this thread's default stream
    // (`CU_STREAM_PER_THREAD`), not the legacy one.
    type Sync = unsafe extern "C" fn(CUstream) -> CUresult;
    type GetId = unsafe extern "C" fn(CUstream, *mut u64) -> CUresult;
    let at = |name: &str| proc_address(name, 12000, PER_THREAD).1;
    // SAFETY: the addresses of those exports, whose C signatures these are.
    let (sync_ptsz, id_ptsz): (Sync, GetId) = unsafe {
        (
            std::mem::transmute::<usize, Sync>(at("cuStreamSynchronize")),
            std::mem::transmute::<usize, GetId>(at("cuStreamGetId")),
        )
    };
    let (mut legacy, mut per_thread, mut null_ptsz) = (0u64, 0u64, 0u64);
    ok!(cuStreamGetId(null_mut(), &mut legacy));
    ok!(cuStreamGetId(2 as CUstream, &mut per_thread)); // CU_STREAM_PER_THREAD
    // SAFETY: valid arguments.
    let r = unsafe { id_ptsz(null_mut(), &mut null_ptsz) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    assert_ne!(legacy, per_thread);
    assert_eq!(
        null_ptsz, per_thread,
        "NULL in a _ptsz export is CU_STREAM_PER_THREAD"
    );
    // A _ptds copy runs on the per-thread stream: correct data after it.
    let data: Vec<u32> = (0..64).map(|i| i * 3 + 1).collect();
    let d = alloc(256);
    let copy = at("cuMemcpyHtoD");
    // SAFETY: cuMemcpyHtoD_v2_ptds's C signature.
    let htod: unsafe extern "C" fn(CUdeviceptr, *const c_void, usize) -> CUresult =
        unsafe { std::mem::transmute(copy) };
    // SAFETY: `data` holds 256 bytes, `d` is a 256-byte allocation.
    let r = unsafe { htod(d, data.as_ptr().cast(), 256) };
    assert_eq!(r, CUresult::CUDA_SUCCESS);
    // SAFETY: a valid stream handle (NULL).
    assert_eq!(unsafe { sync_ptsz(null_mut()) }, CUresult::CUDA_SUCCESS);
    assert_eq!(download(d, 64), data);
    ok!(cuMemFree_v2(d));
}

#[test]
fn export_tables_are_not_offered() {
    let Some(_drv) = setup("export_tables_are_not_offered") else {
        return;
    };
    // NVIDIA's NVRTC asks for this table; a NULL table with success would crash it.
    let id = sys::CUuuid {
        bytes: [
            0xda, 0x91, 0x51, 0xd3, 0x3a, 0xe6, 0xcc, 0x41, 0xa5, 0xc0, 0x4f, 0x26, 0xd5, 0x33,
            0xe3, 0x28,
        ]
        .map(|b: u8| b as c_char),
    };
    let mut table = std::ptr::dangling::<c_void>();
    expect!(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&mut table, &id));
    assert!(table.is_null(), "the table is set to NULL");
    expect!(CUDA_ERROR_INVALID_VALUE, cuGetExportTable(null_mut(), &id));
}
