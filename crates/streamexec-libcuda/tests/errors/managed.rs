//! Managed memory: `cuMemAllocManaged` memory that the host reads and writes through the
//! pointer and kernels reach at the same address; `cuMemAdvise`, `cuMemPrefetchAsync`,
//! `cuStreamAttachMemAsync` and `cuMemRangeGetAttribute(s)`; the device attributes that
//! advertise it; and the errors.

use cudarc::driver::sys::{CUdevice_attribute, CUmem_advise, CUmem_range_attribute};

use super::*;

const ATTACH_GLOBAL: c_uint = 1;
const ATTACH_HOST: c_uint = 2;
const ATTACH_SINGLE: c_uint = 4;
const DEVICE_CPU: i32 = -1;
const DEVICE_INVALID: i32 = -2;

fn managed_alloc(bytes: usize, flags: c_uint) -> CUdeviceptr {
    let mut p = 0;
    ok!(cuMemAllocManaged(&mut p, bytes, flags));
    assert_ne!(p, 0);
    p
}

/// The `n` u32s at managed address `p`, read by the host through the pointer.
fn host_read(p: CUdeviceptr, n: usize) -> Vec<u32> {
    // SAFETY: `p` is a live managed allocation of at least `n` u32s, aligned to 256.
    unsafe { std::slice::from_raw_parts(p as *const u32, n) }.to_vec()
}

/// Writes `v` at managed address `p` through the pointer.
fn host_write(p: CUdeviceptr, v: &[u32]) {
    // SAFETY: as `host_read`.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p as *mut u32, v.len()) };
}

fn range_i32s(p: CUdeviceptr, bytes: usize, attr: CUmem_range_attribute, n: usize) -> Vec<i32> {
    let mut v = vec![i32::MIN; n];
    ok!(cuMemRangeGetAttribute(
        v.as_mut_ptr().cast(),
        n * 4,
        attr,
        p,
        bytes
    ));
    v
}

#[test]
fn managed_memory_is_shared_by_host_and_kernels() {
    let Some(_drv) = setup("managed_memory_is_shared_by_host_and_kernels") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("managed_memory_is_shared_by_host_and_kernels");
    for attr in [
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY,
        CUdevice_attribute::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
    ] {
        let mut v = -1;
        ok!(cuDeviceGetAttribute(&mut v, attr, 0));
        assert_eq!(v, 1, "{attr:?}");
    }
    let m = load(PTX);
    let f = function(m, c"add_k");
    let s = stream();
    for round in 0..10 {
        let n = r.random_range(1..5000usize);
        let k = r.random::<u32>();
        let flags = if round % 2 == 0 {
            ATTACH_GLOBAL
        } else {
            ATTACH_HOST
        };
        let (pin, pout) = (managed_alloc(n * 4, flags), managed_alloc(n * 4, flags));
        let input = random_u32s(&mut r, n, u32::MAX);
        host_write(pin, &input);
        host_write(pout, &vec![POISON_U32; n]);
        launch_add(f, s, pout, pin, k, n as u32);
        ok!(cuStreamSynchronize(s));
        let want: Vec<u32> = input.iter().map(|x| x.wrapping_add(k)).collect();
        assert_eq!(
            host_read(pout, n),
            want,
            "round {round}: kernel into managed memory"
        );
        // Copies and synchronous memsets see the same bytes, complete on return.
        assert_eq!(download(pout, n), want);
        let v = r.random::<u32>();
        ok!(cuMemsetD32_v2(pout, v, n));
        assert_eq!(host_read(pout, n), vec![v; n], "round {round}: memset");
        ok!(cuMemFree_v2(pin));
        ok!(cuMemFree_v2(pout));
    }
    assert_eq!(free_memory(), base);
    ok!(cuModuleUnload(m));
    ok!(cuStreamDestroy_v2(s));
}

#[test]
fn managed_memory_attributes_and_advice() {
    let Some(_drv) = setup("managed_memory_attributes_and_advice") else {
        return;
    };
    let base = free_memory();
    let bytes = 4096;
    let p = managed_alloc(bytes, ATTACH_GLOBAL);
    let d = alloc(bytes);
    let s = stream();
    // Pointer attributes.
    let mut managed = false;
    ok!(cuPointerGetAttribute(
        (&raw mut managed).cast(),
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        p + 100
    ));
    assert!(managed);
    ok!(cuPointerGetAttribute(
        (&raw mut managed).cast(),
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        d
    ));
    assert!(!managed);
    let mut host: *mut c_void = null_mut();
    ok!(cuPointerGetAttribute(
        (&raw mut host).cast(),
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_HOST_POINTER,
        p
    ));
    assert_eq!(host as CUdeviceptr, p);
    // Nothing advised yet.
    use CUmem_range_attribute::*;
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, 1),
        [0]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, 1),
        [DEVICE_INVALID]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, 1),
        [DEVICE_INVALID]
    );
    // Advice and prefetches are recorded.
    use CUmem_advise::*;
    ok!(cuMemAdvise(p, bytes, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
    ok!(cuMemAdvise(
        p,
        64,
        CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
        DEVICE_CPU
    ));
    ok!(cuMemAdvise(p, bytes, CU_MEM_ADVISE_SET_ACCESSED_BY, 0));
    ok!(cuMemAdvise(
        p,
        bytes,
        CU_MEM_ADVISE_SET_ACCESSED_BY,
        DEVICE_CPU
    ));
    ok!(cuMemPrefetchAsync(p, bytes, 0, s));
    ok!(cuStreamSynchronize(s));
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, 1),
        [1]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, 1),
        [DEVICE_CPU]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, 3),
        [0, DEVICE_CPU, DEVICE_INVALID]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, 1),
        [0]
    );
    ok!(cuMemAdvise(p, bytes, CU_MEM_ADVISE_UNSET_READ_MOSTLY, 0));
    ok!(cuMemAdvise(p, bytes, CU_MEM_ADVISE_UNSET_ACCESSED_BY, 0));
    ok!(cuMemPrefetchAsync(p, bytes, DEVICE_CPU, null_mut()));
    // Several at once.
    let (mut a, mut b) = (i32::MIN, [i32::MIN; 2]);
    let mut data = [(&raw mut a).cast::<c_void>(), b.as_mut_ptr().cast()];
    let mut sizes = [4usize, 8];
    let mut attrs = [
        CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
        CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
    ];
    ok!(cuMemRangeGetAttributes(
        data.as_mut_ptr(),
        sizes.as_mut_ptr(),
        attrs.as_mut_ptr(),
        2,
        p,
        bytes
    ));
    assert_eq!((a, b), (0, [DEVICE_CPU, DEVICE_INVALID]));
    // Attaching.
    ok!(cuStreamAttachMemAsync(s, p, 0, ATTACH_SINGLE));
    ok!(cuStreamAttachMemAsync(s, p, bytes, ATTACH_HOST));
    ok!(cuStreamAttachMemAsync(null_mut(), p, 0, ATTACH_GLOBAL));
    // Errors.
    let mut q = 0;
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&mut q, 64, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&mut q, 0, 1));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemAllocManaged(null_mut(), 64, 1)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemAdvise(d, bytes, CU_MEM_ADVISE_SET_READ_MOSTLY, 0)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemAdvise(p, bytes + 1, CU_MEM_ADVISE_SET_READ_MOSTLY, 0)
    );
    expect!(
        CUDA_ERROR_INVALID_DEVICE,
        cuMemAdvise(p, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 7)
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(d, bytes, 0, s));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchAsync(p, 0, 0, s));
    expect!(
        CUDA_ERROR_INVALID_DEVICE,
        cuMemPrefetchAsync(p, bytes, 9, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuStreamAttachMemAsync(null_mut(), p, 0, ATTACH_SINGLE)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuStreamAttachMemAsync(s, p + 4, 0, ATTACH_HOST)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuStreamAttachMemAsync(s, p, 100, ATTACH_HOST)
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(s, p, 0, 3));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemRangeGetAttribute(
            (&raw mut a).cast(),
            4,
            CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
            d,
            bytes
        )
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemRangeGetAttribute(
            (&raw mut a).cast(),
            8,
            CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
            p,
            bytes
        )
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(p as *mut c_void));
    ok!(cuMemFree_v2(p));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(p));
    ok!(cuMemFree_v2(d));
    ok!(cuStreamDestroy_v2(s));
    assert_eq!(free_memory(), base);
}

/// `CUmemLocation`: a `CUmemLocationType` and an id.
#[repr(C)]
#[derive(Clone, Copy)]
struct Location {
    kind: u32,
    id: c_int,
}

type AdviseV2 = unsafe extern "C" fn(CUdeviceptr, usize, u32, Location) -> CUresult;
type PrefetchV2 = unsafe extern "C" fn(CUdeviceptr, usize, Location, c_uint, CUstream) -> CUresult;

/// What a CUDA 12.5 client gets from `cuGetProcAddress_v2(name, 12050)`.
fn entry_12050(name: &CStr) -> *mut c_void {
    let mut p = null_mut();
    ok!(cuGetProcAddress_v2(
        name.as_ptr(),
        &mut p,
        12050,
        0,
        null_mut()
    ));
    assert!(!p.is_null());
    p
}

#[test]
fn location_based_managed_calls_of_cuda_12_2() {
    let Some(_drv) = setup("location_based_managed_calls_of_cuda_12_2") else {
        return;
    };
    let base = free_memory();
    let bytes = 1024;
    let p = managed_alloc(bytes, ATTACH_GLOBAL);
    let s = stream();
    // A CUDA 12.5 client asking for cuMemAdvise / cuMemPrefetchAsync gets the _v2 ABI.
    let advise = entry_12050(c"cuMemAdvise");
    let prefetch = entry_12050(c"cuMemPrefetchAsync");
    // SAFETY: the library's cuMemAdvise_v2 / cuMemPrefetchAsync_v2 have these signatures.
    let (advise, prefetch) = unsafe {
        (
            std::mem::transmute::<*mut c_void, AdviseV2>(advise),
            std::mem::transmute::<*mut c_void, PrefetchV2>(prefetch),
        )
    };
    let (device0, host) = (Location { kind: 1, id: 0 }, Location { kind: 2, id: 0 });
    use CUmem_range_attribute::*;
    // SAFETY: valid arguments; bad values are error codes.
    let codes = unsafe {
        [
            advise(p, bytes, 3, device0), // SET_PREFERRED_LOCATION
            prefetch(p, bytes, host, 0, s),
            advise(p, bytes, 3, Location { kind: 1, id: 9 }),
            advise(p, bytes, 3, Location { kind: 7, id: 0 }),
            prefetch(p, bytes, host, 1, s),
        ]
    };
    assert_eq!(
        codes,
        [
            CUresult::CUDA_SUCCESS,
            CUresult::CUDA_SUCCESS,
            CUresult::CUDA_ERROR_INVALID_DEVICE,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            CUresult::CUDA_ERROR_INVALID_VALUE,
        ]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, 1),
        [0]
    );
    assert_eq!(
        range_i32s(p, bytes, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, 1),
        [DEVICE_CPU]
    );
    // The 12.2 _TYPE/_ID range attributes (5..8): DEVICE 0, then HOST.
    for (attr, want) in [(5u32, 1), (6, 0), (7, 2), (8, 0)] {
        let mut v = i32::MIN;
        // SAFETY: the attribute is passed as its integer value, as a C caller may.
        let code = unsafe {
            std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void, usize, u32, CUdeviceptr, usize) -> CUresult,
            >(entry_12050(c"cuMemRangeGetAttribute"))(
                (&raw mut v).cast(), 4, attr, p, bytes
            )
        };
        assert_eq!(
            (code, v),
            (CUresult::CUDA_SUCCESS, want),
            "range attribute {attr}"
        );
    }
    ok!(cuStreamSynchronize(s));
    ok!(cuMemFree_v2(p));
    ok!(cuStreamDestroy_v2(s));
    assert_eq!(free_memory(), base);
}
