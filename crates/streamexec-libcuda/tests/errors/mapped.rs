//! Mapped host memory: `cuMemHostRegister` with `CU_MEMHOSTREGISTER_DEVICEMAP` (and
//! `PORTABLE`) and `cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`; kernels write through the
//! device pointer `cuMemHostGetDevicePointer` gives, and the host sees the result in its own
//! memory.

use super::*;

const PORTABLE: c_uint = 0x1;
const DEVICEMAP: c_uint = 0x2;

fn device_pointer(p: *mut c_void) -> CUdeviceptr {
    let mut d = 0;
    ok!(cuMemHostGetDevicePointer_v2(&mut d, p, 0));
    d
}

#[test]
fn kernels_reach_registered_and_mapped_host_memory() {
    let Some(_drv) = setup("kernels_reach_registered_and_mapped_host_memory") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("kernels_reach_registered_and_mapped_host_memory");
    let m = load(PTX);
    let f = function(m, c"add_k");
    let s = stream();
    for round in 0..10 {
        let n = r.random_range(1..5000usize);
        let k = r.random::<u32>();
        let flags = if round % 2 == 0 {
            DEVICEMAP
        } else {
            DEVICEMAP | PORTABLE
        };
        // Registered host memory: input and a poisoned output.
        let input = random_u32s(&mut r, n, u32::MAX);
        let mut inbuf = input.clone();
        let mut out = vec![POISON_U32; n];
        let (pi, po) = (
            inbuf.as_mut_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
        );
        ok!(cuMemHostRegister_v2(pi, n * 4, flags));
        ok!(cuMemHostRegister_v2(po, n * 4, flags));
        let (di, dout) = (device_pointer(pi), device_pointer(po));
        assert_eq!((di, dout), (pi as CUdeviceptr, po as CUdeviceptr));
        let mut got = 0;
        ok!(cuMemHostGetFlags(&mut got, po));
        assert_eq!(got, flags);
        let mut mt = 0u32;
        ok!(cuPointerGetAttribute(
            (&raw mut mt).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            dout
        ));
        assert_eq!(mt, 1, "CU_MEMORYTYPE_HOST");
        launch_add(f, s, dout, di, k, n as u32);
        ok!(cuStreamSynchronize(s));
        let want: Vec<u32> = input.iter().map(|x| x.wrapping_add(k)).collect();
        // SAFETY: the kernel has finished (synchronized); read through the pointer.
        let seen = unsafe { std::slice::from_raw_parts(po.cast::<u32>(), n) }.to_vec();
        assert_eq!(seen, want, "round {round}: kernel into registered memory");
        // Copies to and from it, and memsets of it, as device memory.
        let d = alloc(n * 4);
        ok!(cuMemcpy(d, dout, n * 4));
        assert_eq!(download(d, n), want);
        ok!(cuMemsetD32_v2(dout, 7, n));
        // SAFETY: as above (synchronous memsets of host memory finish before returning).
        let seen = unsafe { std::slice::from_raw_parts(po.cast::<u32>(), n) }.to_vec();
        assert_eq!(seen, vec![7; n]);
        ok!(cuMemFree_v2(d));
        ok!(cuMemHostUnregister(pi));
        ok!(cuMemHostUnregister(po));
        // Unregistered: no device pointer, no kernel access, registering again works.
        let mut dp = 0;
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuMemHostGetDevicePointer_v2(&mut dp, po, 0)
        );
        expect!(
            CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
            cuMemHostUnregister(po)
        );
        drop((inbuf, out));
    }
    // Registered twice, or overlapping: refused.
    let mut buf = vec![0u32; 256];
    let pb = buf.as_mut_ptr().cast::<c_void>();
    ok!(cuMemHostRegister_v2(pb, 1024, DEVICEMAP));
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(pb.wrapping_byte_add(512), 8, DEVICEMAP)
    );
    expect!(
        CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
        cuMemHostRegister_v2(pb.wrapping_byte_add(1020), 8, 0)
    );
    ok!(cuMemHostUnregister(pb));
    drop(buf);
    // cuMemHostAlloc with DEVICEMAP: a kernel writes through its device pointer.
    let n = r.random_range(1..5000usize);
    let k = r.random::<u32>();
    let input = random_u32s(&mut r, n, u32::MAX);
    let mut h = null_mut();
    ok!(cuMemHostAlloc(&mut h, n * 4, DEVICEMAP | PORTABLE));
    // SAFETY: `h` has n u32s.
    unsafe { std::ptr::write_bytes(h.cast::<u32>(), 0xA5, n) };
    let din = alloc(n * 4);
    upload(din, &input);
    launch_add(f, s, device_pointer(h), din, k, n as u32);
    ok!(cuStreamSynchronize(s));
    // SAFETY: as above.
    let seen = unsafe { std::slice::from_raw_parts(h.cast::<u32>(), n) }.to_vec();
    let want: Vec<u32> = input.iter().map(|x| x.wrapping_add(k)).collect();
    assert_eq!(seen, want, "kernel into cuMemHostAlloc memory");
    ok!(cuMemFreeHost(h));
    ok!(cuMemFree_v2(din));
    ok!(cuModuleUnload(m));
    ok!(cuStreamDestroy_v2(s));
    assert_eq!(free_memory(), base);
}
