//! Member masks of the warp collectives, on both engines in one run: what a lane waits for and
//! which lanes its result covers, including the cases PTX leaves undefined, where the engines
//! must still agree (the rules: `src/interp/collective.rs`). Each kernel is one warp unless
//! said otherwise; thread `t` stores its results at `out[K t..]`.

mod common;

use common::{DevicePtr, POISON_U32, TypedKernel, engines, host, launch_on, load, upload};
use streamexec_ptx::PtxEngine;

/// sm_80 and later for `redux.sync`.
const HEADER: &str = ".version 7.8\n.target sm_90\n.address_size 64\n";

/// Runs `entry` of `body` on every engine with a poisoned `words`-long buffer as its only
/// argument, `threads` threads in one block; the buffer per engine.
fn run_all(body: &str, entry: &str, threads: u32, words: usize) -> Vec<(PtxEngine, Vec<u32>)> {
    let exec = host();
    let k: TypedKernel<(DevicePtr<u32>,)> = load(&exec, &format!("{HEADER}{body}"), entry);
    engines()
        .into_iter()
        .map(|e| {
            let out = upload(&exec, &vec![POISON_U32; words]);
            launch_on(&exec, e, threads, 1, &k, (out.ptr(),))
                .unwrap_or_else(|err| panic!("{entry} on {e:?}: {err}"));
            (e, exec.copy_to_vec(&out).unwrap())
        })
        .collect()
}

/// Every lane executes collectives whose mask (lanes 0-15) leaves out lanes 16-31: each lane's
/// result covers the members that arrived, not itself; a shuffle from outside the members
/// gives the lane its own value. Then lanes 0-7 exit and the rest use a mask of exited lanes
/// only: nothing arrived, so ballot 0, `.all` true, a reduction 0, a shuffle the own value.
#[test]
fn own_lane_outside_the_mask_and_masks_of_exited_lanes() {
    let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<4>; .reg .b32 %r<16>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 48;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.u32 %r2, %r1, 3, 1;
    and.b32 %r3, %r1, 1;
    setp.ne.u32 %p1, %r3, 0;
    vote.sync.ballot.b32 %r4, %p1, 0xffff;
    redux.sync.add.u32 %r5, %r2, 0xffff;
    shfl.sync.down.b32 %r6|%p2, %r2, 1, 31, 0xffff;
    selp.u32 %r7, 1, 0, %p2;
    match.any.sync.b32 %r8, %r3, 0xffff;
    st.global.v4.u32 [%rd3], {%r4, %r5, %r6, %r7};
    st.global.u32 [%rd3+16], %r8;
    setp.lt.u32 %p3, %r1, 8;
    @%p3 bra DONE;
    vote.sync.ballot.b32 %r9, %p1, 0xff;
    vote.sync.all.pred %p2, %p1, 0xff;
    selp.u32 %r10, 1, 0, %p2;
    redux.sync.min.u32 %r11, %r2, 0xff;
    shfl.sync.idx.b32 %r12, %r2, 0, 31, 0xff;
    st.global.v4.u32 [%rd3+32], {%r9, %r10, %r11, %r12};
DONE:
    ret;
}"#;
    for (e, got) in run_all(body, "k", 32, 12 * 32) {
        for l in 0..32u32 {
            let v = |j: u32| 3 * j + 1;
            let (shfl, p) = match l {
                0..=14 => (v(l + 1), 1),
                15..=30 => (v(l), 1),
                _ => (v(l), 0),
            };
            let same = if l % 2 == 0 { 0x5555 } else { 0xaaaa };
            let second = if l < 8 {
                [POISON_U32; 4]
            } else {
                [0, 1, 0, v(l)]
            };
            let row = &got[12 * l as usize..12 * l as usize + 12];
            let want = [
                [0xaaaa, (0..16).map(v).sum(), shfl, p],
                [same, POISON_U32, POISON_U32, POISON_U32],
                second,
            ]
            .concat();
            assert_eq!(row, want, "{e:?} lane {l}");
        }
    }
}

/// A full mask in a partial warp (a 40-thread block): lanes that do not exist count as exited,
/// and a shuffle from one of them gives the own value with the index in range.
#[test]
fn full_masks_in_a_partial_warp() {
    let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<3>; .reg .b32 %r<10>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    vote.sync.ballot.b32 %r3, %p1, -1;
    shfl.sync.down.b32 %r4|%p2, %r1, 4, 31, -1;
    selp.u32 %r5, 1, 0, %p2;
    activemask.b32 %r6;
    st.global.v4.u32 [%rd3], {%r3, %r4, %r5, %r6};
    ret;
}"#;
    for (e, got) in run_all(body, "k", 40, 4 * 40) {
        for t in 0..40u32 {
            let (lane, live) = (t % 32, if t < 32 { u32::MAX } else { 0xff });
            let ballot = 0xaaaa_aaaa & live;
            let (down, p) = match lane + 4 {
                j if j > 31 => (t, 0),
                j if live >> j & 1 == 1 => (t + 4, 1),
                _ => (t, 1),
            };
            let row = &got[4 * t as usize..4 * t as usize + 4];
            assert_eq!(row, [ballot, down, p, live], "{e:?} thread {t}");
        }
    }
}

/// Lanes 16-31 vote with a full mask while lanes 0-15 wait at `bar.sync` (on the hardware a
/// deadlock): with nothing else able to run, the vote resolves with the lanes that arrived;
/// they exit, the barrier completes with them counted as arrived, and lanes 0-15 vote at
/// their own instruction. Also lanes split by an if/else between two votes with a full mask:
/// each instruction resolves with its own lanes, as the hardware runs each with the lanes
/// that execute it.
#[test]
fn members_that_never_arrive() {
    let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<4>; .reg .b32 %r<10>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd3, %rd1, %rd2;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    and.b32 %r3, %r1, 2;
    setp.ne.u32 %p2, %r3, 0;
    @%p1 bra ODD;
    vote.sync.ballot.b32 %r4, %p2, -1;
    bra.uni SPLIT;
ODD:
    vote.sync.ballot.b32 %r4, %p2, -1;
SPLIT:
    setp.lt.u32 %p3, %r1, 16;
    @%p3 bra LOW;
    vote.sync.ballot.b32 %r5, %p1, -1;
    bra.uni END;
LOW:
    bar.sync 0;
    vote.sync.ballot.b32 %r5, %p1, -1;
END:
    st.global.v2.u32 [%rd3], {%r4, %r5};
    ret;
}"#;
    for (e, got) in run_all(body, "k", 32, 2 * 32) {
        for l in 0..32u32 {
            let parity = if l % 2 == 0 { 0x5555_5555 } else { 0xaaaa_aaaa };
            let half = if l < 16 { 0x0000_ffff } else { 0xffff_0000 };
            let want = [0xcccc_cccc & parity, 0xaaaa_aaaa & half];
            assert_eq!(
                got[2 * l as usize..2 * l as usize + 2],
                want,
                "{e:?} lane {l}"
            );
        }
    }
}

/// Lanes 0-15 wait at a shuffle with a full mask; lanes 16-31 first take a vote of their own
/// half at a later instruction, then come back to the shuffle. The complete vote resolves
/// first (not the lower, incomplete shuffle), so the shuffle sees the whole warp and every
/// lane gets lane 31's value. A shuffle source that arrived but is outside the reading lane's
/// mask (lane 0 for the others at the second shuffle) gives the own value.
#[test]
fn complete_groups_resolve_first_and_sources_must_be_members() {
    let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    mad.lo.u32 %r2, %r1, 7, 5;
    mov.u32 %r4, 0;
    setp.ge.u32 %p1, %r1, 16;
    @%p1 bra HIGH;
LOW:
    shfl.sync.idx.b32 %r3, %r2, 31, 31, -1;
    bra.uni NEXT;
HIGH:
    setp.ne.u32 %p2, %r4, 0;
    @%p2 bra LOW;
    vote.sync.ballot.b32 %r4, %p1, 0xffff0000;
    bra.uni LOW;
NEXT:
    setp.eq.u32 %p2, %r1, 0;
    selp.u32 %r5, 1, 0xfffffffe, %p2;
    shfl.sync.idx.b32 %r6, %r2, 0, 31, %r5;
    st.global.v4.u32 [%rd3], {%r3, %r4, %r6, %r5};
    ret;
}"#;
    for (e, got) in run_all(body, "k", 32, 4 * 32) {
        for l in 0..32u32 {
            let v = |j: u32| 7 * j + 5;
            let vote = if l >= 16 { 0xffff_0000 } else { 0 };
            let mask = if l == 0 { 1 } else { 0xffff_fffe };
            let want = [v(31), vote, v(l), mask];
            assert_eq!(
                got[4 * l as usize..4 * l as usize + 4],
                want,
                "{e:?} lane {l}"
            );
        }
    }
}

/// The interpreter's spin escape: lane 0 spins on a shared flag that the other lanes set after
/// a vote whose mask leaves lane 0 out. The warp is never quiescent while lane 0 spins, so the
/// complete vote resolves early and the program finishes as on the hardware. (The JIT runs a
/// thread until it waits, so it would spin forever: interpreter only.)
#[test]
fn a_lane_spinning_outside_the_mask_lets_the_members_go_on() {
    let exec = host();
    let body = r#"
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<3>; .reg .b32 %r<8>; .reg .b64 %rd<4>;
    .shared .align 4 .u32 flag;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra SPIN;
    vote.sync.ballot.b32 %r4, %p1, 0xfffffffe;
    st.volatile.shared.u32 [flag], 7;
    bra.uni END;
SPIN:
    ld.volatile.shared.u32 %r4, [flag];
    setp.eq.u32 %p2, %r4, 0;
    @%p2 bra SPIN;
END:
    st.global.u32 [%rd3], %r4;
    ret;
}"#;
    let k: TypedKernel<(DevicePtr<u32>,)> = load(&exec, &format!("{HEADER}{body}"), "k");
    let out = upload(&exec, &[POISON_U32; 32]);
    launch_on(&exec, PtxEngine::Interpreter, 32, 1, &k, (out.ptr(),)).unwrap();
    let want: Vec<u32> = (0..32).map(|l| if l == 0 { 7 } else { 0 }).collect();
    assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
}
