//! Synchronous copies and memsets are complete when they return, whatever memory their sides
//! are: pinned host memory (`cuMemHostAlloc`) is in the driver's address map, and a copy into
//! it used to be only enqueued, so the host read stale bytes right after `cuMemcpyDtoH`.

use super::*;

/// Pinned host memory from `cuMemHostAlloc` (`flags`), `n` bytes.
fn host_alloc(n: usize, flags: c_uint) -> *mut u8 {
    let mut p = null_mut();
    ok!(cuMemHostAlloc(&mut p, n, flags));
    assert!(!p.is_null());
    p.cast()
}

/// The `n` bytes at `p` as the host reads them now.
fn host_bytes(p: *const u8, n: usize) -> Vec<u8> {
    // SAFETY: `p` is a live allocation of at least `n` bytes (the caller's).
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

/// Fills `n` bytes at `p` with `byte` through a plain host write.
fn host_fill(p: *mut u8, n: usize, byte: u8) {
    // SAFETY: as `host_bytes`.
    unsafe { std::ptr::write_bytes(p, byte, n) };
}

#[test]
fn synchronous_copies_to_pinned_memory_are_complete_on_return() {
    let Some(_drv) = setup("synchronous_copies_to_pinned_memory_are_complete_on_return") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("synchronous_copies_to_pinned_memory_are_complete_on_return");
    const MAX: usize = 1 << 16;
    let (d, d2) = (alloc(MAX), alloc(MAX));
    let (h, h2) = (host_alloc(MAX, 0), host_alloc(MAX, 0x2));
    let mut pageable = vec![0u8; MAX];
    for i in 0..300 {
        let n = r.random_range(1..=MAX);
        let value: u8 = r.random();
        let poison = !value;
        let want = vec![value; n];
        // The program: memset of device memory, then DtoH into pinned memory.
        host_fill(h, MAX, poison);
        ok!(cuMemsetD8_v2(d, value, n));
        ok!(cuMemcpyDtoH_v2(h.cast(), d, n));
        assert_eq!(
            host_bytes(h, n),
            want,
            "iteration {i}: cuMemcpyDtoH ({n} bytes)"
        );
        assert_eq!(
            host_bytes(h.wrapping_add(n), MAX - n),
            vec![poison; MAX - n]
        );
        // cuMemcpy (unified addressing) pinned → pinned, and device → pinned.
        let data: Vec<u8> = (0..n).map(|_| r.random()).collect();
        // SAFETY: `h` has MAX >= n bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), h, n) };
        host_fill(h2, MAX, poison);
        ok!(cuMemcpy(h2 as CUdeviceptr, h as CUdeviceptr, n));
        assert_eq!(
            host_bytes(h2, n),
            data,
            "iteration {i}: cuMemcpy pinned to pinned"
        );
        // HtoD from pinned memory, DtoD, then back into pinned memory with cuMemcpy.
        ok!(cuMemsetD8_v2(d2, poison, n));
        ok!(cuMemcpyHtoD_v2(d, h.cast(), n));
        ok!(cuMemcpyDtoD_v2(d2, d, n));
        host_fill(h2, MAX, poison);
        ok!(cuMemcpy(h2 as CUdeviceptr, d2, n));
        assert_eq!(
            host_bytes(h2, n),
            data,
            "iteration {i}: HtoD, DtoD, cuMemcpy"
        );
        // DtoH of pinned memory (its own device address) into pageable memory.
        pageable.fill(poison);
        ok!(cuMemcpyDtoH_v2(
            pageable.as_mut_ptr().cast(),
            h2 as CUdeviceptr,
            n
        ));
        assert_eq!(
            &pageable[..n],
            &data[..],
            "iteration {i}: pinned to pageable"
        );
        // Synchronous memsets of pinned memory, 8, 16 and 32 bits wide.
        let words = n / 4;
        let (v16, v32): (u16, u32) = (r.random(), r.random());
        host_fill(h2, MAX, poison);
        ok!(cuMemsetD16_v2(h2 as CUdeviceptr, v16, words * 2));
        let want16: Vec<u8> = (0..words * 2).flat_map(|_| v16.to_ne_bytes()).collect();
        assert_eq!(
            host_bytes(h2, words * 4),
            want16,
            "iteration {i}: cuMemsetD16"
        );
        ok!(cuMemsetD32_v2(h2 as CUdeviceptr, v32, words));
        let want32: Vec<u8> = (0..words).flat_map(|_| v32.to_ne_bytes()).collect();
        assert_eq!(
            host_bytes(h2, words * 4),
            want32,
            "iteration {i}: cuMemsetD32"
        );
        ok!(cuMemsetD8_v2(h2 as CUdeviceptr, value, n));
        assert_eq!(host_bytes(h2, n), want, "iteration {i}: cuMemsetD8");
    }
    ok!(cuMemFreeHost(h.cast()));
    ok!(cuMemFreeHost(h2.cast()));
    ok!(cuMemFree_v2(d));
    ok!(cuMemFree_v2(d2));
    assert_eq!(free_memory(), base);
}
