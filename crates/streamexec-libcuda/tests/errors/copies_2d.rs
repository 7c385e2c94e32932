//! `cuMemcpy2D*` and `cuMemcpy3D*`: pitched copies between pageable, pinned and device memory
//! on random shapes with poisoned destinations, against a plain-Rust reference; synchronous
//! forms are complete when they return.

use cudarc::driver::sys::{CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUmemorytype};

use super::*;

/// One end of a copy: memory type, host or device address, x offset (bytes), y, z, pitch and
/// slice height.
#[derive(Clone, Copy)]
struct End {
    kind: CUmemorytype,
    addr: u64,
    x: usize,
    y: usize,
    z: usize,
    pitch: usize,
    height: usize,
}

fn host_end(p: *const u8, x: usize, y: usize, z: usize, pitch: usize, height: usize) -> End {
    End {
        kind: CUmemorytype::CU_MEMORYTYPE_HOST,
        addr: p as u64,
        x,
        y,
        z,
        pitch,
        height,
    }
}

fn device_end(d: CUdeviceptr, x: usize, y: usize, z: usize, pitch: usize, height: usize) -> End {
    End {
        kind: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        ..host_end(d as *const u8, x, y, z, pitch, height)
    }
}

fn params_2d(dst: End, src: End, width: usize, height: usize) -> CUDA_MEMCPY2D {
    let host = |e: &End| (e.kind == CUmemorytype::CU_MEMORYTYPE_HOST).then_some(e.addr);
    CUDA_MEMCPY2D {
        srcXInBytes: src.x,
        srcY: src.y,
        srcMemoryType: src.kind,
        srcHost: host(&src).unwrap_or(0) as *const c_void,
        srcDevice: if host(&src).is_some() { 0 } else { src.addr },
        srcArray: null_mut(),
        srcPitch: src.pitch,
        dstXInBytes: dst.x,
        dstY: dst.y,
        dstMemoryType: dst.kind,
        dstHost: host(&dst).unwrap_or(0) as *mut c_void,
        dstDevice: if host(&dst).is_some() { 0 } else { dst.addr },
        dstArray: null_mut(),
        dstPitch: dst.pitch,
        WidthInBytes: width,
        Height: height,
    }
}

fn params_3d(dst: End, src: End, width: usize, height: usize, depth: usize) -> CUDA_MEMCPY3D {
    let p = params_2d(dst, src, width, height);
    CUDA_MEMCPY3D {
        srcXInBytes: p.srcXInBytes,
        srcY: p.srcY,
        srcZ: src.z,
        srcLOD: 0,
        srcMemoryType: p.srcMemoryType,
        srcHost: p.srcHost,
        srcDevice: p.srcDevice,
        srcArray: null_mut(),
        reserved0: null_mut(),
        srcPitch: p.srcPitch,
        srcHeight: src.height,
        dstXInBytes: p.dstXInBytes,
        dstY: p.dstY,
        dstZ: dst.z,
        dstLOD: 0,
        dstMemoryType: p.dstMemoryType,
        dstHost: p.dstHost,
        dstDevice: p.dstDevice,
        dstArray: null_mut(),
        reserved1: null_mut(),
        dstPitch: p.dstPitch,
        dstHeight: dst.height,
        WidthInBytes: width,
        Height: height,
        Depth: depth,
    }
}

/// The reference: `dst` after copying `width` x `height` x `depth` bytes from `src`.
fn reference(dst: &mut [u8], d: End, src: &[u8], s: End, w: usize, h: usize, depth: usize) {
    for z in 0..depth {
        for y in 0..h {
            let so = ((s.z + z) * s.height + s.y + y) * s.pitch + s.x;
            let doff = ((d.z + z) * d.height + d.y + y) * d.pitch + d.x;
            dst[doff..doff + w].copy_from_slice(&src[so..so + w]);
        }
    }
}

#[test]
fn pitched_copies_are_exact_and_complete_on_return() {
    let Some(_drv) = setup("pitched_copies_are_exact_and_complete_on_return") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("pitched_copies_are_exact_and_complete_on_return");
    let s = stream();
    for round in 0..40 {
        let w = r.random_range(1..64usize);
        let h = r.random_range(1..16usize);
        let depth = if round % 2 == 0 {
            1
        } else {
            r.random_range(1..5usize)
        };
        // Each end: an offset inside a larger pitched volume.
        let shape = |r: &mut rand::rngs::StdRng| {
            let x = r.random_range(0..8usize);
            let pitch = x + w + r.random_range(0..16usize);
            let y = r.random_range(0..4usize);
            let height = y + h + r.random_range(0..4usize);
            let z = r.random_range(0..2usize);
            (x, y, z, pitch, height, pitch * height * (z + depth))
        };
        let (sx, sy, sz, sp, sh, sbytes) = shape(&mut r);
        let (dx, dy, dz, dp, dh, dbytes) = shape(&mut r);
        let (ex, ey, ez, ep, eh, ebytes) = shape(&mut r);
        let src: Vec<u8> = (0..sbytes).map(|_| r.random()).collect();
        // Host (pageable) -> device, then device -> pinned host (as 3-D or 2-D).
        let d = alloc(dbytes);
        ok!(cuMemsetD8_v2(d, 0x5A, dbytes));
        let mut pinned = null_mut();
        ok!(cuMemHostAlloc(&mut pinned, ebytes, 0));
        // SAFETY: `pinned` has `ebytes` bytes.
        unsafe { std::ptr::write_bytes(pinned.cast::<u8>(), 0xC3, ebytes) };
        let se = host_end(src.as_ptr(), sx, sy, sz, sp, sh);
        let de = device_end(d, dx, dy, dz, dp, dh);
        let pe = host_end(pinned.cast::<u8>(), ex, ey, ez, ep, eh);
        if depth == 1 && sz == 0 && dz == 0 && ez == 0 {
            let up = params_2d(de, se, w, h);
            ok!(cuMemcpy2D_v2(&up));
            let down = params_2d(pe, de, w, h);
            ok!(cuMemcpy2DUnaligned_v2(&down));
        } else {
            let up = params_3d(de, se, w, h, depth);
            ok!(cuMemcpy3D_v2(&up));
            let down = params_3d(pe, de, w, h, depth);
            ok!(cuMemcpy3D_v2(&down));
        }
        let mut want_d = vec![0x5Au8; dbytes];
        reference(&mut want_d, de, &src, se, w, h, depth);
        let mut want = vec![0xC3u8; ebytes];
        reference(&mut want, pe, &want_d, de, w, h, depth);
        // SAFETY: `pinned` has `ebytes` bytes; the synchronous copy is complete.
        let got = unsafe { std::slice::from_raw_parts(pinned.cast::<u8>(), ebytes) }.to_vec();
        assert_eq!(got, want, "round {round}: {w}x{h}x{depth}");
        // Asynchronous, device to device, then back to pageable memory.
        let d2 = alloc(dbytes);
        ok!(cuMemsetD8_v2(d2, 0x11, dbytes));
        let de2 = device_end(d2, dx, dy, dz, dp, dh);
        if depth == 1 && dz == 0 {
            ok!(cuMemcpy2DAsync_v2(&params_2d(de2, de, w, h), s));
        } else {
            ok!(cuMemcpy3DAsync_v2(&params_3d(de2, de, w, h, depth), s));
        }
        ok!(cuStreamSynchronize(s));
        let mut back = vec![0u8; dbytes];
        ok!(cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), d2, dbytes));
        let mut want2 = vec![0x11u8; dbytes];
        reference(&mut want2, de2, &want_d, de, w, h, depth);
        assert_eq!(back, want2, "round {round}: async device to device");
        ok!(cuMemFree_v2(d));
        ok!(cuMemFree_v2(d2));
        ok!(cuMemFreeHost(pinned));
    }
    // Errors: a row past the allocation, Depth 0, a slice height too small, arrays.
    let d = alloc(256);
    let buf = [0u8; 1024];
    let hb = host_end(buf.as_ptr(), 0, 0, 0, 32, 8);
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpy2D_v2(&params_2d(device_end(d, 0, 0, 0, 32, 8), hb, 32, 9))
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpy3D_v2(&params_3d(device_end(d, 0, 0, 0, 32, 8), hb, 32, 4, 0))
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuMemcpy3D_v2(&params_3d(device_end(d, 0, 0, 0, 16, 2), hb, 8, 4, 2))
    );
    let mut arr = params_2d(device_end(d, 0, 0, 0, 32, 8), hb, 32, 1);
    arr.dstMemoryType = CUmemorytype::CU_MEMORYTYPE_ARRAY;
    expect!(CUDA_ERROR_NOT_SUPPORTED, cuMemcpy2D_v2(&arr));
    expect!(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D_v2(null()));
    ok!(cuMemFree_v2(d));
    ok!(cuStreamDestroy_v2(s));
    assert_eq!(free_memory(), base);
}
