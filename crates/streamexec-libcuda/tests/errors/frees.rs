//! `cuMemFree` waits for the context's queued work, as CUDA's does: a kernel that reaches
//! memory through an address inside an integer parameter (numba passes arrays as structs of
//! integers, which no launch can pin) still reads it when the program frees the memory right
//! after the launch, without synchronising.

use super::*;

/// `copy_via_integers(src: u64, dst: u64, n: u32)`: `dst[i] = src[i]` for `i < n`, the
/// pointers passed as plain 64-bit integers.
const COPY_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64
.visible .entry copy_via_integers(.param .u64 psrc, .param .u64 pdst, .param .u32 pn)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [psrc];
    ld.param.u64 %rd2, [pdst];
    ld.param.u32 %r1, [pn];
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.u32 %r3, [%rd4];
    st.global.u32 [%rd5], %r3;
DONE:
    ret;
}
"#;

/// Holds its stream up for a while, so that the launch behind it is still queued when the
/// program frees the memory.
unsafe extern "C" fn stall(_: *mut c_void) {
    std::thread::sleep(std::time::Duration::from_millis(150));
}

#[test]
fn a_free_waits_for_the_kernels_that_use_the_memory() {
    let Some(_drv) = setup("a_free_waits_for_the_kernels_that_use_the_memory") else {
        return;
    };
    let base = free_memory();
    let m = load(COPY_PTX);
    let f = function(m, c"copy_via_integers");
    let s = stream();
    let mut r = rng("a_free_waits_for_the_kernels_that_use_the_memory");
    for round in 0..3 {
        let n = r.random_range(1..=256u32);
        let data = random_u32s(&mut r, n as usize, u32::MAX);
        let (src, dst) = (alloc(n as usize * 4), alloc(n as usize * 4));
        upload(src, &data);
        upload(dst, &vec![POISON_U32; n as usize]);
        ok!(cuLaunchHostFunc(s, Some(stall), null_mut()));
        let (mut a, mut b, mut k) = (src, dst, n);
        let mut params = [
            (&raw mut a).cast::<c_void>(),
            (&raw mut b).cast(),
            (&raw mut k).cast(),
        ];
        ok!(cuLaunchKernel(
            f,
            1,
            1,
            1,
            256,
            1,
            1,
            0,
            s,
            params.as_mut_ptr(),
            null_mut()
        ));
        // No synchronisation: the free must wait for the kernel, which reads `src`.
        ok!(cuMemFree_v2(src));
        assert_eq!(download(dst, n as usize), data, "round {round}");
        ok!(cuMemFree_v2(dst));
    }
    ok!(cuStreamSynchronize(s));
    ok!(cuStreamDestroy_v2(s));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}
