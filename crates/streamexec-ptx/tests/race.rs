//! The host platform's data-race checker (`Device::set_race_check`) on hand-written
//! PTX kernels. A test binary of its own: the switch belongs to the process-wide host executor,
//! so turning it on must not reach other tests' launches.

mod common;

use common::{Device, DevicePtr, TypedKernel};
use common::{fault_text, host, launch, ptx_kernel};

const POISON_U32: u32 = 0xDEAD_BEEF;

const RACY: &str = r#"
.visible .entry k(.param .u64 p, .param .u32 racy)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    .reg .pred %p<3>;
    .shared .align 4 .b32 sh[64];
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r5, [racy];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd2, sh;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.shared.u32 [%rd4], %r1;
    setp.ne.u32 %p1, %r5, 0;
    @%p1 bra NOBAR;
    bar.sync 0;
NOBAR:
    xor.b32 %r2, %r1, 63;
    mul.wide.u32 %rd3, %r2, 4;
    add.s64 %rd5, %rd2, %rd3;
    ld.shared.u32 %r3, [%rd5];
    add.s64 %rd5, %rd1, %rd3;
    st.global.u32 [%rd5], %r3;
    ret;
}"#;

/// With the race checker on, reading a neighbour's shared write without a barrier is
/// reported with both threads and instructions; the barrier version is clean.
#[test]
fn race_checker_flags_the_racy_kernel_only() {
    let exec = host();
    exec.set_race_check(true).unwrap();
    let k: TypedKernel<(DevicePtr<u32>, u32)> = ptx_kernel(&exec, RACY, "k");
    let out = exec.copy_to_device(&[POISON_U32; 64]).unwrap();
    launch(&exec, 64, 1, &k, (out.ptr(), 0)).unwrap();
    let want: Vec<u32> = (0..64).collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
    let e = fault_text(launch(&exec, 64, 1, &k, (out.ptr(), 1)));
    let detail = e.split("failed: ").nth(1).unwrap_or("");
    assert!(detail.starts_with("data race"), "{e}");
    assert!(
        e.contains("st.shared.u32") && e.contains("ld.shared.u32") && e.contains("shared memory"),
        "{e}"
    );
    same_instruction_and_cross_block(&exec);
    // The same kernel passes with the checker off (the race is timing-free on the host).
    exec.set_race_check(false).unwrap();
    launch(&exec, 64, 1, &k, (out.ptr(), 1)).unwrap();
}

/// Lanes of one warp writing one address in the same instruction race; two blocks writing
/// one global word race; atomics do not. (Called from the test above, so that no other test
/// of this binary sees the switch off.)
fn same_instruction_and_cross_block(exec: &Device) {
    let exec = exec.clone();
    let k: TypedKernel<(DevicePtr<u32>, u32)> = ptx_kernel(
        &exec,
        r#"
.visible .entry k(.param .u64 p, .param .u32 mode)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [mode];
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra ATOM;
    st.global.u32 [%rd1], %r2;
    ret;
ATOM:
    atom.global.add.u32 %r3, [%rd1], 1;
    ret;
}"#,
        "k",
    );
    let out = exec.copy_to_device(&[0u32]).unwrap();
    launch(&exec, 64, 4, &k, (out.ptr(), 0)).unwrap();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), vec![256]);
    let e = fault_text(launch(&exec, 2, 1, &k, (out.ptr(), 1)));
    assert!(
        e.contains("data race")
            && e.contains("thread (0, 0, 0) write")
            && e.contains("thread (1, 0, 0) write"),
        "{e}"
    );
    let e = fault_text(launch(&exec, 1, 2, &k, (out.ptr(), 1)));
    assert!(
        e.contains("data race") && e.contains("block (0, 0, 0)") && e.contains("block (1, 0, 0)"),
        "{e}"
    );
}
