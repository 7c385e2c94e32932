//! Cooperative launches and grid groups: a kernel shaped as numba-cuda's `this_grid().sync()`
//! compiles (calls to `cudaCGGetIntrinsicHandle`/`cudaCGSynchronize`), linked with
//! libcudadevrt (for which the CPU driver links its own device runtime), launched with
//! `cuLaunchCooperativeKernel` and with `cuLaunchKernelEx`'s cooperative attribute; a grid
//! too large to be resident; a block that fails while the others wait at the grid barrier.

use super::*;

/// `grid_sum(in, scratch, out, rounds)`: in each round every block's thread 0 puts its input
/// in `scratch[block]`, the grid synchronises, and thread 0 of each block writes the sum of
/// all of `scratch` to `out` (then the grid synchronises again before `scratch` is reused).
/// `grid_fault(out)`: block 1 stores 1 TiB past `out`, then every block waits at the barrier.
const GRID_PTX: &str = r#".version 7.0
.target sm_70
.address_size 64
.extern .func (.param .b64 h) cudaCGGetIntrinsicHandle(.param .b32 s);
.extern .func (.param .b32 r) cudaCGSynchronize(.param .b64 h, .param .b32 f);

.visible .entry grid_sum(.param .u64 pin, .param .u64 pscratch, .param .u64 pout, .param .u32 prounds)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pin];
    ld.param.u64 %rd2, [pscratch];
    ld.param.u64 %rd3, [pout];
    ld.param.u32 %r1, [prounds];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %nctaid.x;
    mov.u32 %r4, %tid.x;
    setp.eq.u32 %p1, %r4, 0;
    mov.u32 %r11, 1;
    {
    .param .b32 s0;
    .param .b64 h0;
    st.param.b32 [s0], %r11;
    call.uni (h0), cudaCGGetIntrinsicHandle, (s0);
    ld.param.b64 %rd4, [h0];
    }
    mov.u32 %r5, 0;
$L_round:
    setp.ge.u32 %p2, %r5, %r1;
    @%p2 bra $L_done;
    mad.lo.u32 %r6, %r5, %r3, %r2;
    mul.wide.u32 %rd5, %r6, 4;
    add.s64 %rd6, %rd1, %rd5;
    mul.wide.u32 %rd7, %r2, 4;
    add.s64 %rd8, %rd2, %rd7;
    @%p1 ld.global.u32 %r7, [%rd6];
    @%p1 st.global.u32 [%rd8], %r7;
    mov.u32 %r11, 0;
    {
    .param .b64 h1;
    .param .b32 f1;
    .param .b32 q1;
    st.param.b64 [h1], %rd4;
    st.param.b32 [f1], %r11;
    call.uni (q1), cudaCGSynchronize, (h1, f1);
    }
    mov.u32 %r8, 0;
    mov.u32 %r9, 0;
$L_sum:
    setp.ge.u32 %p3, %r9, %r3;
    @%p3 bra $L_summed;
    mul.wide.u32 %rd9, %r9, 4;
    add.s64 %rd10, %rd2, %rd9;
    ld.global.u32 %r10, [%rd10];
    add.u32 %r8, %r8, %r10;
    add.u32 %r9, %r9, 1;
    bra $L_sum;
$L_summed:
    add.s64 %rd11, %rd3, %rd5;
    @%p1 st.global.u32 [%rd11], %r8;
    {
    .param .b64 h2;
    .param .b32 f2;
    .param .b32 q2;
    st.param.b64 [h2], %rd4;
    st.param.b32 [f2], %r11;
    call.uni (q2), cudaCGSynchronize, (h2, f2);
    }
    add.u32 %r5, %r5, 1;
    bra $L_round;
$L_done:
    ret;
}

.visible .entry grid_fault(.param .u64 pout)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [pout];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, 1;
    setp.eq.u32 %p1, %r1, 1;
    add.s64 %rd2, %rd1, 1099511627776;
    @%p1 st.global.u32 [%rd2], %r1;
    {
    .param .b32 s0;
    .param .b64 h0;
    st.param.b32 [s0], %r2;
    call.uni (h0), cudaCGGetIntrinsicHandle, (s0);
    ld.param.b64 %rd3, [h0];
    }
    mov.u32 %r3, 0;
    {
    .param .b64 h1;
    .param .b32 f1;
    .param .b32 q1;
    st.param.b64 [h1], %rd3;
    st.param.b32 [f1], %r3;
    call.uni (q1), cudaCGSynchronize, (h1, f1);
    }
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

/// The kernels linked with a stand-in for NVIDIA's libcudadevrt.a: an `ar` archive of one
/// member, `cuda_device_runtime.o` (the driver recognises it by its contents).
fn link_with_cudadevrt() -> CUmodule {
    let mut state = null_mut();
    ok!(cuLinkCreate_v2(0, null_mut(), null_mut(), &mut state));
    let mut ptx = GRID_PTX.as_bytes().to_vec();
    ptx.push(0);
    ok!(cuLinkAddData_v2(
        state,
        sys::CUjitInputType::CU_JIT_INPUT_PTX,
        ptx.as_mut_ptr().cast(),
        ptx.len(),
        c"grid.ptx".as_ptr(),
        0,
        null_mut(),
        null_mut()
    ));
    let mut archive =
        b"!<arch>\ncuda_device_runtime.o/0           0     0     644     4         `\n\x7fELF"
            .to_vec();
    ok!(cuLinkAddData_v2(
        state,
        sys::CUjitInputType::CU_JIT_INPUT_LIBRARY,
        archive.as_mut_ptr().cast(),
        archive.len(),
        c"libcudadevrt.a".as_ptr(),
        0,
        null_mut(),
        null_mut()
    ));
    let (mut image, mut size) = (null_mut(), 0usize);
    ok!(cuLinkComplete(state, &mut image, &mut size));
    let mut m = null_mut();
    ok!(cuModuleLoadData(&mut m, image));
    ok!(cuLinkDestroy(state));
    m
}

#[test]
fn cooperative_launches_synchronise_the_grid() {
    let Some(_drv) = setup("cooperative_launches_synchronise_the_grid") else {
        return;
    };
    let base = free_memory();
    let mut attr = 0;
    ok!(cuDeviceGetAttribute(
        &mut attr,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
        0
    ));
    assert_eq!(attr, 1, "CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH");
    let m = link_with_cudadevrt();
    let f = function(m, c"grid_sum");
    let s = stream();
    let mut r = rng("cooperative_launches_synchronise_the_grid");
    let (blocks, threads, mut rounds) = (8u32, 64u32, 3u32);
    let n = (blocks * rounds) as usize;
    let input = random_u32s(&mut r, n, u32::MAX);
    let want: Vec<u32> = input
        .chunks(blocks as usize)
        .flat_map(|round| {
            let sum = round.iter().fold(0u32, |a, &v| a.wrapping_add(v));
            vec![sum; round.len()]
        })
        .collect();
    let (din, dscratch, dout) = (alloc(n * 4), alloc(blocks as usize * 4), alloc(n * 4));
    upload(din, &input);
    for ex in [false, true] {
        upload(dscratch, &vec![POISON_U32; blocks as usize]);
        upload(dout, &vec![POISON_U32; n]);
        let (mut a, mut b, mut c) = (din, dscratch, dout);
        let mut params = [
            (&raw mut a).cast::<c_void>(),
            (&raw mut b).cast(),
            (&raw mut c).cast(),
            (&raw mut rounds).cast(),
        ];
        if ex {
            let mut value = [0u8; 64];
            value[..4].copy_from_slice(&1u32.to_ne_bytes());
            // SAFETY: CUlaunchAttribute is plain data; id and value are set below.
            let mut at: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            at.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            // SAFETY: the value union is 64 bytes.
            unsafe {
                std::ptr::addr_of_mut!(at.value)
                    .cast::<[u8; 64]>()
                    .write(value)
            };
            // SAFETY: as above, plain data.
            let mut config: sys::CUlaunchConfig = unsafe { std::mem::zeroed() };
            (config.gridDimX, config.gridDimY, config.gridDimZ) = (blocks, 1, 1);
            (config.blockDimX, config.blockDimY, config.blockDimZ) = (threads, 1, 1);
            config.hStream = s;
            config.attrs = &mut at;
            config.numAttrs = 1;
            ok!(cuLaunchKernelEx(
                &config,
                f,
                params.as_mut_ptr(),
                null_mut()
            ));
        } else {
            ok!(cuLaunchCooperativeKernel(
                f,
                blocks,
                1,
                1,
                threads,
                1,
                1,
                0,
                s,
                params.as_mut_ptr()
            ));
        }
        ok!(cuStreamSynchronize(s));
        assert_eq!(download(dout, n), want, "cuLaunchKernelEx: {ex}");
    }
    // A grid that cannot be resident at once.
    let (mut a, mut b, mut c) = (din, dscratch, dout);
    let mut params = [
        (&raw mut a).cast::<c_void>(),
        (&raw mut b).cast(),
        (&raw mut c).cast(),
        (&raw mut rounds).cast(),
    ];
    expect!(
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
        cuLaunchCooperativeKernel(f, 100_000, 1, 1, 1024, 1, 1, 0, s, params.as_mut_ptr())
    );
    ok!(cuStreamSynchronize(s));
    for p in [din, dscratch, dout] {
        ok!(cuMemFree_v2(p));
    }
    ok!(cuStreamDestroy_v2(s));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}

/// A block that faults before the grid barrier ends the launch with its fault; the blocks
/// waiting at the barrier stop waiting (no hang). The fault is sticky in its (created) context.
#[test]
fn a_fault_in_a_cooperative_grid_ends_the_wait() {
    let Some(drv) = setup("a_fault_in_a_cooperative_grid_ends_the_wait") else {
        return;
    };
    let c = created_context();
    let m = link_with_cudadevrt();
    let f = function(m, c"grid_fault");
    let p = alloc(4);
    let mut o = p;
    let mut params = [(&raw mut o).cast::<c_void>()];
    let start = std::time::Instant::now();
    ok!(cuLaunchCooperativeKernel(
        f,
        4,
        1,
        1,
        32,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr()
    ));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    assert!(start.elapsed() < std::time::Duration::from_secs(60));
    let fault = last_fault();
    assert!(fault.contains("grid_fault"), "{fault}");
    assert!(
        fault.contains("block (1, 0, 0)"),
        "the failing block is named: {fault}"
    );
    ok!(cuCtxDestroy_v2(c));
    ok!(cuCtxSetCurrent(drv.primary));
}
