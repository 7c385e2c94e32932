//! Device ranges outside live allocations; host memory registration.

use super::*;

#[test]
fn bad_memory_ranges_are_invalid_value() {
    let Some(_drv) = setup("bad_memory_ranges_are_invalid_value") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("bad_memory_ranges_are_invalid_value");
    let s = stream();
    let n = 64usize; // u32 elements of each allocation
    let (p, q) = (alloc(n * 4), alloc(n * 4));
    assert_eq!(free_memory(), base - 2 * n * 4);
    let data = random_u32s(&mut r, n, u32::MAX);
    upload(q, &data);
    let host = vec![0u32; 2 * n];
    let mut back = vec![0u32; 2 * n];
    let (hp, bp) = (
        host.as_ptr().cast::<c_void>(),
        back.as_mut_ptr().cast::<c_void>(),
    );
    // Past the end of q: copies in and out, device to device, memsets (sync and async).
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(q, hp, n * 4 + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(q + 200, hp, 100));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(bp, q, n * 4 + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD_v2(p, q, n * 4 + 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD_v2(q + 4, p, n * 4));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyHtoDAsync_v2(q, hp, n * 4 + 1, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoHAsync_v2(bp, q + 8, n * 4, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpyDtoDAsync_v2(p, q, n * 4 + 1, s)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemsetD8_v2(q + n as u64 * 4 - 1, 0, 2)
    );
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD16_v2(q, 0, 2 * n + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(q, 0, n + 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32Async(q + 4, 0, n, s));
    // An address range that wraps around.
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD8_v2(q, 0, usize::MAX));
    // Misaligned memsets.
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(q + 2, 0, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32Async(q + 1, 0, 4, s));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD16_v2(q + 1, 0, 4));
    // Nothing was partly written.
    ok!(cuStreamSynchronize(s));
    assert_eq!(download(q, n), data, "a refused copy or memset wrote");
    // Freed memory, double free, an offset pointer, host memory.
    ok!(cuMemFree_v2(p));
    assert_eq!(free_memory(), base - n * 4);
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD_v2(p, hp, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(bp, p, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD_v2(q, p, 4));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoDAsync_v2(p, q, 4, s));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemsetD32_v2(p, 0, 1));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(p));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(q + 16));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(hp as CUdeviceptr));
    let (mut pb, mut ps) = (0, 0);
    expect!(
        CUDA_ERROR_NOT_FOUND,
        cuMemGetAddressRange_v2(&mut pb, &mut ps, p)
    );
    ok!(cuMemGetAddressRange_v2(&mut pb, &mut ps, q + 16));
    assert_eq!((pb, ps), (q, n * 4));
    assert_eq!(free_memory(), base - n * 4, "refused frees freed nothing");
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemFreeHost(host.as_ptr().cast_mut().cast())
    );
    // q is intact and the stream still works.
    assert_eq!(download(q, n), data);
    let more = random_u32s(&mut r, n, u32::MAX);
    ok!(cuMemcpyHtoDAsync_v2(q, more.as_ptr().cast(), n * 4, s));
    ok!(cuMemcpyDtoHAsync_v2(bp, q, n * 4, s));
    ok!(cuStreamSynchronize(s));
    assert_eq!(&back[..n], &more[..]);
    ok!(cuMemFree_v2(q));
    ok!(cuStreamDestroy_v2(s));
    assert_eq!(free_memory(), base);
}

#[test]
fn host_registration_errors() {
    let Some(_drv) = setup("host_registration_errors") else {
        return;
    };
    let base = free_memory();
    const DEVICEMAP: c_uint = 0x2;
    let mut r = rng("host_registration_errors");
    let mut buf = random_u32s(&mut r, 1024, u32::MAX);
    let bytes = size_of_val(&buf[..]);
    let hb = buf.as_mut_ptr().cast::<c_void>();
    let other = [0u32; 16];
    // Registering with DEVICEMAP and without over the same range.
    ok!(cuMemHostRegister_v2(hb, bytes, DEVICEMAP));
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(hb, bytes, 0)
    );
    ok!(cuMemHostUnregister(hb));
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(hb)
    );
    ok!(cuMemHostRegister_v2(hb, bytes, 0));
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(hb, bytes, 0)
    );
    // SAFETY: inside `buf`.
    let inner = unsafe { hb.byte_add(400) };
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(inner, 100, 0)
    );
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(inner)
    );
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(other.as_ptr().cast_mut().cast())
    );
    let mut flags = 99;
    ok!(cuMemHostGetFlags(&mut flags, hb));
    assert_eq!(flags, 0);
    let mut dptr = 0;
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemHostGetDevicePointer_v2(&mut dptr, hb, 0)
    );
    // Copies through the registration still work.
    let d = alloc(bytes);
    ok!(cuMemcpyHtoD_v2(d, hb, bytes));
    assert_eq!(download(d, buf.len()), buf);
    ok!(cuMemHostUnregister(hb));
    expect!(
        CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        cuMemHostUnregister(hb)
    );
    // Registering again after unregistering works.
    ok!(cuMemHostRegister_v2(hb, bytes, 0));
    ok!(cuMemHostUnregister(hb));
    ok!(cuMemFree_v2(d));
    assert_eq!(free_memory(), base);
}

// ---------------------------------------------------------------------------------------------
// Modules.
