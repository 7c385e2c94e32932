//! The host platform's PTX JIT against its interpreter: what compiles, that the JIT is the
//! default, what `PtxEngine::Jit` refuses and `Auto` interprets, and that faults read the same
//! on both engines. (Outputs of the whole corpus are compared bit for bit by
//! `scripts/ptx-engines-agree.sh`.)
#![cfg(feature = "jit")]

mod common;

use std::sync::Mutex;

use common::{Device, DevicePtr, Error, PtxEngine};
use rand::RngExt;

use common::*;

const POISON_U32: u32 = 0xDEAD_BEEF;

/// The bench kernels get a vector function (their groups of threads run in SIMD registers),
/// the warp reduction's `shfl.sync` included.
#[test]
fn the_bench_kernels_get_a_vector_function() {
    let path = common::committed_ptx()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with("bench.O3.ptx"))
        .expect("kernels/ptx/bench.O3.ptx");
    let ast = streamexec_ptx::parse_module(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let checks = streamexec_ptx::check_jit_vector(&ast, 0x1000).unwrap();
    assert!(checks.len() >= 6, "{checks:?}");
    for (name, r) in checks {
        assert_eq!(r, Ok(()), "`{name}`");
    }
}

/// The engine is a per-executor setting and the tests of this file share the host executor.
static ENGINE: Mutex<()> = Mutex::new(());

fn with_engine<R>(exec: &Device, e: PtxEngine, f: impl FnOnce() -> R) -> R {
    exec.set_ptx_engine(e).unwrap();
    let r = f();
    exec.set_ptx_engine(PtxEngine::Auto).unwrap();
    r
}

/// Every entry of the committed clang corpus compiles, except the few that use what the JIT
/// leaves to the interpreter, and none makes the compiler fail internally; the bench kernels
/// get native code for every ALU instruction.
#[test]
fn the_committed_corpus_compiles() {
    let (mut ok, mut refused) = (0, Vec::new());
    for path in common::committed_ptx() {
        let text = std::fs::read_to_string(&path).unwrap();
        let ast = streamexec_ptx::parse_module(&text).unwrap();
        for (name, r) in streamexec_ptx::check_jit_compiles(&ast, 0x1000).unwrap() {
            match r {
                Ok(called) => {
                    ok += 1;
                    // The bench kernels use only lane functions with native code.
                    if path.to_string_lossy().contains("bench.O3") {
                        assert_eq!(called, 0, "`{name}` calls {called} lane functions");
                    }
                }
                Err(why) => {
                    assert!(
                        why.contains("bar.warp.sync") || why.contains("recursive"),
                        "{} `{name}`: {why}",
                        path.display()
                    );
                    refused.push(format!("{} {name}", path.display()));
                }
            }
        }
    }
    eprintln!("compiled {ok}, left to the interpreter: {refused:?}");
    assert!(ok >= 40, "only {ok} kernels compiled");
}

const SCALE: &str = r#"
.visible .entry jit_scale_unique(.param .u64 p, .param .u32 n, .param .f32 a)
{
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<4>; .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [a];
    mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.rn.f32 %f3, %f2, %f1;
    st.global.f32 [%rd4], %f3;
DONE:
    ret;
}
"#;

/// A kernel runs quick code (single-pass register allocation) at its first launch; its second
/// launch starts an optimized compile on a thread of its own, whose code the launches after it
/// run. Every launch gives the same bits as the f32 product.
#[test]
fn a_kernel_launched_again_is_recompiled_optimized_with_the_same_results() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    if std::env::var_os("STREAMEXEC_PTX_JIT_TIER").is_some() {
        eprintln!("skipped: STREAMEXEC_PTX_JIT_TIER keeps one tier");
        return;
    }
    let exec = host();
    let src = SCALE.replace("jit_scale_unique", "jit_scale_tiers");
    let k = ptx_kernel::<(DevicePtr<f32>, u32, f32)>(&exec, &src, "jit_scale_tiers");
    let mut rng = common::rng("a_kernel_launched_again");
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0f32..10.0)).collect();
    let launch = || {
        let d = upload(&exec, &x);
        run(&exec, 8u32, 128u32, &k, (d.ptr(), n as u32, 3.0f32));
        let got = download(&exec, &d);
        for (i, (g, v)) in got.iter().zip(&x).enumerate() {
            assert_eq!(g.to_bits(), (v * 3.0).to_bits(), "element {i}");
        }
    };
    let compiled = |name: &str| {
        streamexec_ptx::jit_compile_times()
            .iter()
            .filter(|(k, _)| k == name)
            .count()
    };
    launch();
    assert_eq!(compiled("jit_scale_tiers"), 1);
    assert_eq!(
        compiled("jit_scale_tiers (optimized)"),
        0,
        "before the second launch"
    );
    launch();
    wait_for_optimized("jit_scale_tiers");
    launch();
    launch();
    assert_eq!(
        compiled("jit_scale_tiers"),
        1,
        "the quick compile runs once"
    );
    assert_eq!(
        compiled("jit_scale_tiers (optimized)"),
        1,
        "so does the optimized one"
    );
}

/// `Auto` compiles: the kernel shows in the compile times, and the result is right.
#[test]
fn the_jit_is_the_default_and_reports_compile_time() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<f32>, u32, f32)>(&exec, SCALE, "jit_scale_unique");
    let mut rng = common::rng("the_jit_is_the_default");
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0f32..10.0)).collect();
    let d = upload(&exec, &x);
    // One element past the data, poisoned: the kernel must leave it.
    let mut padded = x.clone();
    padded.push(f32::from_bits(0x7FA0_0001));
    let dp = upload(&exec, &padded);
    run(&exec, 8u32, 128u32, &k, (dp.ptr(), n as u32, 3.0));
    let got = download(&exec, &dp);
    for i in 0..n {
        assert_eq!(got[i].to_bits(), (x[i] * 3.0).to_bits(), "element {i}");
    }
    assert_eq!(got[n].to_bits(), 0x7FA0_0001);
    drop(d);
    let times = streamexec_ptx::jit_compile_times();
    assert!(
        times.iter().any(|(name, _)| name == "jit_scale_unique"),
        "{times:?}"
    );
}

const WARP_SYNC: &str = r#"
.visible .entry jit_warp_sync(.param .u64 p)
{
    .reg .b32 %r<3>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    bar.warp.sync -1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"#;

/// What the JIT does not compile is an `Unsupported` error under `Jit`, and `Auto` runs it
/// on the interpreter.
#[test]
fn forced_jit_refuses_what_auto_interprets() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>,)>(&exec, WARP_SYNC, "jit_warp_sync");
    let out = poisoned(&exec, 64, POISON_U32);
    let r = with_engine(&exec, PtxEngine::Jit, || {
        launch(&exec, 64u32, 1u32, &k, (out.ptr(),))
    });
    match r {
        Err(Error::JitUnsupported { detail: reason, .. }) => {
            assert!(reason.contains("bar.warp.sync"), "{reason}")
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert_eq!(download(&exec, &out), vec![POISON_U32; 64]);
    run(&exec, 64u32, 1u32, &k, (out.ptr(),));
    assert_eq!(download(&exec, &out), (0..64).collect::<Vec<u32>>());
}

const FAULTS: &str = r#"
.visible .entry jit_faults(.param .u64 p, .param .u32 mode)
{
    .reg .pred %p<4>; .reg .b32 %r<4>; .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [mode];
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 st.global.u32 [%rd3], %r2;
    setp.eq.u32 %p2, %r1, 1;
    @%p2 bra MISALIGNED;
    setp.eq.u32 %p3, %r1, 2;
    @%p3 bra BARRIER;
    ret;
MISALIGNED:
    add.s64 %rd4, %rd3, 2;
    ld.global.u32 %r3, [%rd4];
    ret;
BARRIER:
    setp.lt.u32 %p1, %r2, 40;
    @%p1 bra OTHER;
    bar.sync 0;
    ret;
OTHER:
    bar.sync 1;
    ret;
}
"#;

/// Out-of-bounds and misaligned accesses and barrier divergence end the launch with the same
/// `KernelFault` text on both engines, and the executor stays usable.
#[test]
fn faults_read_the_same_on_both_engines() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>, u32)>(&exec, FAULTS, "jit_faults");
    // 64 threads store into 48 elements: threads 48.. are out of bounds.
    let small = poisoned(&exec, 48, POISON_U32);
    for mode in 0..3u32 {
        let texts: Vec<String> = [PtxEngine::Jit, PtxEngine::Interpreter]
            .into_iter()
            .map(|e| {
                with_engine(&exec, e, || {
                    fault_text(launch(&exec, 64u32, 1u32, &k, (small.ptr(), mode)))
                })
            })
            .collect();
        assert_eq!(texts[0], texts[1], "mode {mode}");
        let want = ["out-of-bounds", "misaligned", "barrier divergence"][mode as usize];
        assert!(texts[0].contains(want), "mode {mode}: {}", texts[0]);
        assert!(texts[0].contains("jit_faults"), "{}", texts[0]);
    }
    let big = poisoned(&exec, 64, POISON_U32);
    run(&exec, 64u32, 1u32, &k, (big.ptr(), 0));
    assert_eq!(download(&exec, &big), (0..64).collect::<Vec<u32>>());
}

/// With the race checker on, `Auto` interprets (the checker lives there) and still flags a
/// race; with it off, the same kernel runs compiled.
#[test]
fn the_race_checker_uses_the_interpreter() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    let _race = RACE_CHECK.write().unwrap_or_else(|p| p.into_inner());
    let exec = host();
    const RACY: &str = r#"
.visible .entry jit_racy(.param .u64 p)
{
    .reg .b32 %r<2>; .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;
    let k = ptx_kernel::<(DevicePtr<u32>,)>(&exec, RACY, "jit_racy");
    let out = poisoned(&exec, 1, POISON_U32);
    exec.set_race_check(true).unwrap();
    let mut s = exec.create_stream().unwrap();
    let r = s
        .then_launch(64u32, 1u32, &k, (out.ptr(),))
        .block_host_until_done();
    exec.set_race_check(false).unwrap();
    let text = match r {
        Err(e @ Error::Fault { .. }) => e.to_string(),
        other => panic!("expected a race, got {other:?}"),
    };
    assert!(text.contains("data race"), "{text}");
    let mut s = exec.create_stream().unwrap();
    s.then_launch(64u32, 1u32, &k, (out.ptr(),))
        .block_host_until_done()
        .unwrap();
    assert!(download(&exec, &out)[0] < 64);
}

/// A register whose every definition steps by 1 between lanes (`%tid.x + 4`, `%tid.x + 8`)
/// is kept as lane 0's value alone in the vector code. Here the lanes of each group take
/// different definitions (on the scalar code) before a barrier, so after it the group must
/// not trust the step: the stores land where each thread's own value says, on both engines,
/// for random block sizes (multiples of 4, so groups form) and a random stride of the
/// odd/even split.
#[test]
fn stepped_registers_are_checked_when_lanes_come_back_from_the_scalar_code() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    const STEPPED: &str = r#"
.visible .entry jit_stepped(.param .u64 out, .param .u32 split)
{
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r5, [split];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, %r5;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    add.u32 %r3, %r1, 4;
    bra.uni JOIN;
EVEN:
    add.u32 %r3, %r1, 8;
JOIN:
    bar.sync 0;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"#;
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>, u32)>(&exec, STEPPED, "jit_stepped");
    let mut rng = rand::rng();
    for _ in 0..8 {
        let threads = 4 * rng.random_range(1..=64u32);
        let split = 1u32 << rng.random_range(0..3);
        let n = threads as usize + 8;
        let mut want = vec![POISON_U32; n];
        for t in 0..threads {
            let i = if t & split == 0 { t + 8 } else { t + 4 };
            want[i as usize] = i;
        }
        for e in [PtxEngine::Jit, PtxEngine::Interpreter] {
            let out = poisoned(&exec, n, POISON_U32);
            with_engine(&exec, e, || {
                run(&exec, threads, 1u32, &k, (out.ptr(), split))
            });
            assert_eq!(
                download(&exec, &out),
                want,
                "{e:?}, {threads} threads, split {split}"
            );
        }
    }
}

/// Shuffles after lanes of one group took different paths (the group goes to the scalar code
/// while the warp's other groups wait in the vector code), and a guarded shuffle among the
/// even lanes only: the JIT matches the interpreter and plain Rust.
#[test]
fn shuffles_after_divergence_match_plain_rust() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    const DIVERGE: &str = r#"
.visible .entry jit_shfl_diverge(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mad.lo.u32 %r5, %r4, %r3, %r2;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    and.b32 %r7, %r2, 6;
    setp.eq.u32 %p1, %r7, 2;
    @%p1 bra ODD;
    add.u32 %r8, %r6, 100;
    bra.uni JOIN;
ODD:
    mul.lo.u32 %r8, %r6, 3;
JOIN:
    shfl.sync.bfly.b32 %r9, %r8, 1, 31, -1;
    shfl.sync.down.b32 %r10, %r9, 4, 31, -1;
    and.b32 %r7, %r2, 1;
    setp.eq.u32 %p2, %r7, 0;
    mov.u32 %r11, 0;
    @%p2 shfl.sync.idx.b32 %r11, %r10, 2, 31, 0x55555555;
    add.u32 %r10, %r10, %r11;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r10;
    ret;
}
"#;
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>, DevicePtr<u32>, u32)>(&exec, DIVERGE, "jit_shfl_diverge");
    let mut rng = rand::rng();
    for _ in 0..6 {
        let threads = 32 * rng.random_range(1..=4u32);
        let blocks = rng.random_range(1..=3u32);
        let n = (threads * blocks) as usize;
        let input: Vec<u32> = (0..n).map(|_| rng.random_range(0..1 << 20)).collect();
        let src = upload(&exec, &input);
        // Plain Rust, warp by warp.
        let mut want = vec![0u32; n];
        for w in (0..n).step_by(32) {
            let x: Vec<u32> = (0..32)
                .map(|l| {
                    let v = input[w + l];
                    if l & 6 == 2 { v * 3 } else { v + 100 }
                })
                .collect();
            let bfly: Vec<u32> = (0..32).map(|l| x[l ^ 1]).collect();
            let down: Vec<u32> = (0..32)
                .map(|l| bfly[if l + 4 <= 31 { l + 4 } else { l }])
                .collect();
            for l in 0..32 {
                // Even lanes read lane 2 (even, a member); odd lanes add 0.
                let idx = if l % 2 == 0 { down[2] } else { 0 };
                want[w + l] = down[l].wrapping_add(idx);
            }
        }
        for e in [PtxEngine::Jit, PtxEngine::Interpreter] {
            let out = poisoned(&exec, n, POISON_U32);
            with_engine(&exec, e, || {
                run(&exec, threads, blocks, &k, (src.ptr(), out.ptr(), n as u32))
            });
            assert_eq!(
                download(&exec, &out),
                want,
                "{e:?}, {threads} threads × {blocks} blocks"
            );
        }
    }
}

/// `vote` (ballot, all, any), `redux.sync.add`, `match.any` and `activemask` on whole warps
/// run by the vector code, and on a block whose last warp is partial: the JIT matches the
/// interpreter and plain Rust.
#[test]
fn votes_reductions_and_matches_match_plain_rust() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    const VOTES: &str = r#"
.visible .entry jit_votes(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .pred %p<5>; .reg .b32 %r<16>; .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mad.lo.u32 %r5, %r4, %r3, %r2;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    and.b32 %r7, %r6, 1;
    setp.ne.u32 %p1, %r7, 0;
    vote.sync.ballot.b32 %r8, %p1, -1;
    vote.sync.all.pred %p2, %p1, -1;
    vote.sync.any.pred %p3, %p1, -1;
    redux.sync.add.u32 %r9, %r6, -1;
    and.b32 %r10, %r6, 3;
    match.any.sync.b32 %r11, %r10, -1;
    activemask.b32 %r12;
    selp.u32 %r13, 1, 0, %p2;
    selp.u32 %r14, 2, 0, %p3;
    or.b32 %r13, %r13, %r14;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r8;
    add.s64 %rd4, %rd4, %rd5;
    st.global.u32 [%rd4], %r13;
    add.s64 %rd4, %rd4, %rd5;
    st.global.u32 [%rd4], %r9;
    add.s64 %rd4, %rd4, %rd5;
    st.global.u32 [%rd4], %r11;
    add.s64 %rd4, %rd4, %rd5;
    st.global.u32 [%rd4], %r12;
    ret;
}
"#;
    // The kernel gets a vector function (its collectives run in SIMD groups).
    let ast = streamexec_ptx::parse_module(VOTES).unwrap();
    let checks = streamexec_ptx::check_jit_vector(&ast, 0x1000).unwrap();
    assert_eq!(checks, vec![("jit_votes".to_string(), Ok(()))]);
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>, DevicePtr<u32>, u32)>(&exec, VOTES, "jit_votes");
    let mut rng = rand::rng();
    for round in 0..6 {
        let threads = if round == 5 {
            48
        } else {
            32 * rng.random_range(1..=4u32)
        };
        let blocks = rng.random_range(1..=3u32);
        let n = (threads * blocks) as usize;
        // Some rounds all odd or all even, so `all` is true somewhere.
        let input: Vec<u32> = (0..n)
            .map(|_| match round {
                0 => rng.random_range(0..1000) * 2 + 1,
                1 => rng.random_range(0..1000) * 2,
                _ => rng.random_range(0..1000),
            })
            .collect();
        let src = upload(&exec, &input);
        let mut outs = Vec::new();
        for e in [PtxEngine::Jit, PtxEngine::Interpreter] {
            let out = poisoned(&exec, 5 * n, POISON_U32);
            with_engine(&exec, e, || {
                run(&exec, threads, blocks, &k, (src.ptr(), out.ptr(), n as u32))
            });
            outs.push(download(&exec, &out));
        }
        assert_eq!(
            outs[0], outs[1],
            "round {round}: {threads} threads × {blocks} blocks"
        );
        // Plain Rust, warp by warp of each block.
        for t in 0..n {
            let in_block = t % threads as usize;
            let w0 = t - in_block % 32;
            let w1 = (w0 + 32).min(t - in_block + threads as usize);
            let warp = &input[w0..w1];
            let ballot = warp
                .iter()
                .enumerate()
                .fold(0u32, |m, (l, v)| m | (v & 1) << l);
            let lanes = if warp.len() == 32 {
                u32::MAX
            } else {
                (1 << warp.len()) - 1
            };
            let flags = u32::from(ballot == lanes) | u32::from(ballot != 0) << 1;
            let sum = warp.iter().fold(0u32, |s, v| s.wrapping_add(*v));
            let same = warp
                .iter()
                .enumerate()
                .filter(|(_, v)| *v & 3 == input[t] & 3)
                .fold(0u32, |m, (l, _)| m | 1 << l);
            let want = [ballot, flags, sum, same, lanes];
            for (m, w) in want.iter().enumerate() {
                assert_eq!(
                    outs[0][m * n + t],
                    *w,
                    "round {round}, thread {t}, output {m}"
                );
            }
        }
    }
}

/// Guards on comparisons of a thread index with a uniform bound (`i < n`, which the vector
/// code tests on lanes 0 and 3 alone, its lanes stepping by one): every comparison, signed
/// and unsigned, 32- and 64-bit, negated, with the bound on either side, and as a branch.
/// Bounds fall anywhere, inside groups of four included; the JIT matches the interpreter and
/// plain Rust.
#[test]
fn guards_on_stepped_comparisons_match_plain_rust() {
    const GUARDS: &str = r#"
.visible .entry stepped_guards(.param .u64 out, .param .u32 n, .param .u64 m)
{
    .reg .pred %p<3>; .reg .b32 %r<12>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r2, [n];
    ld.param.u64 %rd2, [m];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    mov.u32 %r10, 0;
    setp.lt.u32 %p1, %r1, %r2;
    @%p1 add.u32 %r10, %r10, 1;
    setp.le.u32 %p1, %r1, %r2;
    @!%p1 add.u32 %r10, %r10, 2;
    setp.gt.s32 %p1, %r1, %r2;
    @%p1 add.u32 %r10, %r10, 4;
    setp.ge.s32 %p1, %r2, %r1;
    @%p1 add.u32 %r10, %r10, 8;
    mul.wide.u32 %rd3, %r1, 4;
    setp.lt.u64 %p1, %rd3, %rd2;
    @%p1 add.u32 %r10, %r10, 16;
    setp.gt.u32 %p2, %r2, %r1;
    @!%p2 bra SKIP;
    add.u32 %r10, %r10, 32;
SKIP:
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], %r10;
    ret;
}
"#;
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>, u32, u64)>(&exec, GUARDS, "stepped_guards");
    let mut rng = rand::rng();
    for _ in 0..12 {
        let threads = 4 * rng.random_range(1..=64u32);
        let blocks = rng.random_range(1..=4u32);
        let total = threads * blocks;
        let n = rng.random_range(0..total + 8);
        let m = rng.random_range(0..4 * total as u64 + 32);
        let mut outs = Vec::new();
        for e in [PtxEngine::Jit, PtxEngine::Interpreter] {
            let out = poisoned(&exec, total as usize, POISON_U32);
            launch_on(&exec, e, threads, blocks, &k, (out.ptr(), n, m)).unwrap();
            outs.push(download(&exec, &out));
        }
        let want: Vec<u32> = (0..total)
            .map(|i| {
                u32::from(i < n)
                    | u32::from(i > n) << 1
                    | u32::from(i as i32 > n as i32) << 2
                    | u32::from(n as i32 >= i as i32) << 3
                    | u32::from((4 * i as u64) < m) << 4
                    | u32::from(n > i) << 5
            })
            .collect();
        let what = format!("{threads} threads × {blocks} blocks, n {n}, m {m}");
        assert_eq!(outs[1], want, "interpreter, {what}");
        assert_eq!(outs[0], want, "JIT, {what}");
    }
}

/// The optimized code of the bench kernels checks the range of their accesses through
/// addresses affine in the thread index once per block (`jit/hoist.rs`); an address with two
/// different definitions, a guarded one, or one loaded from memory keeps its check at every
/// access.
#[test]
fn affine_accesses_get_their_range_checked_once_per_block() {
    if std::env::var_os("STREAMEXEC_PTX_JIT_HOIST").is_some() {
        eprintln!("skipped: STREAMEXEC_PTX_JIT_HOIST is set");
        return;
    }
    let sites = |text: &str| -> Vec<(String, usize)> {
        let ast = streamexec_ptx::parse_module(text).unwrap();
        let checks = streamexec_ptx::check_jit_hoisted(&ast, 0x1000).unwrap();
        checks.into_iter().map(|(n, r)| (n, r.unwrap())).collect()
    };
    let path = common::committed_ptx()
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with("bench.O3.ptx"))
        .expect("kernels/ptx/bench.O3.ptx");
    let bench = sites(&std::fs::read_to_string(&path).unwrap());
    let of = |name: &str| bench.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
    // `x[i]`, `y[i]` and the store to `y[i]`.
    assert_eq!(of("bench_saxpy"), Some(3), "{bench:?}");
    assert!(of("bench_matmul").unwrap() >= 2, "{bench:?}");
    assert!(of("bench_block_reduce").unwrap() >= 2, "{bench:?}");
    const KINDS: &str = r#"
.visible .entry one_def(.param .u64 p)
{
    .reg .b32 %r<2>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry two_defs(.param .u64 p)
{
    .reg .b32 %r<2>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    add.s64 %rd3, %rd3, 1024;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry same_defs(.param .u64 p)
{
    .reg .pred %p<2>; .reg .b32 %r<3>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    mov.u32 %r2, 0;
AGAIN:
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    add.s32 %r2, %r2, 1;
    setp.lt.u32 %p1, %r2, 3;
    @%p1 bra AGAIN;
    ret;
}
.visible .entry guarded_def(.param .u64 p)
{
    .reg .pred %p<2>; .reg .b32 %r<2>; .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 64;
    mul.wide.u32 %rd2, %r1, 4;
    @%p1 add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
.visible .entry loaded_base(.param .u64 p)
{
    .reg .b32 %r<2>; .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [p];
    ld.global.u64 %rd4, [%rd1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd4, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"#;
    let kinds = sites(&format!("{HEADER}{KINDS}"));
    let expect = [
        ("guarded_def", 0),
        ("loaded_base", 0),
        ("one_def", 1),
        ("same_defs", 2),
        ("two_defs", 0),
    ];
    let expect: Vec<(String, usize)> = expect.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    assert_eq!(kinds, expect);
}

const HOIST: &str = r#"
.visible .entry jit_hoist(.param .u64 x, .param .u64 y, .param .u32 n, .param .f32 a)
{
    .reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<6>; .reg .b64 %rd<8>;
    .shared .align 4 .b8 s[512];
    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [a];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    mul.wide.u32 %rd6, %r4, 4;
    mov.u64 %rd7, s;
    add.s64 %rd7, %rd7, %rd6;
    setp.ge.u32 %p1, %r5, %r1;
    mov.f32 %f2, 0f00000000;
    @%p1 bra STAGED;
    ld.global.f32 %f2, [%rd4];
STAGED:
    st.shared.f32 [%rd7], %f2;
    bar.sync 0;
    @%p1 bra DONE;
    ld.shared.f32 %f3, [%rd7];
    ld.global.f32 %f4, [%rd5];
    fma.rn.f32 %f5, %f3, %f1, %f4;
    st.global.f32 [%rd5], %f5;
DONE:
    ret;
}
"#;

/// With its accesses range-checked once per block (the optimized code, `jit/hoist.rs`), a
/// kernel gives plain Rust's results, leaves the elements past its data alone (the last,
/// partial block fails the block's check and runs checked), and a block that runs past its
/// buffer faults with the interpreter's text.
#[test]
fn accesses_checked_once_per_block_give_exact_results_and_faults() {
    let _one = ENGINE.lock().unwrap_or_else(|p| p.into_inner());
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<f32>, DevicePtr<f32>, u32, f32)>(&exec, HOIST, "jit_hoist");
    let mut rng = common::rng("accesses_checked_once_per_block");
    let partial = 128 * rng.random_range(20..40) + rng.random_range(1..128);
    let m = 128 * 9 + rng.random_range(1..127);
    let poison = f32::from_bits(0x7FA0_0001);
    let mut saxpy = |n: usize, launches: usize| {
        let a = rng.random_range(-4.0f32..4.0);
        let x: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0f32..10.0)).collect();
        let y: Vec<f32> = (0..n).map(|_| rng.random_range(-10.0f32..10.0)).collect();
        let mut padded = y.clone();
        padded.push(poison);
        for _ in 0..launches {
            let (dx, dy) = (upload(&exec, &x), upload(&exec, &padded));
            let blocks = n.div_ceil(128) as u32;
            run(&exec, 128u32, blocks, &k, (dx.ptr(), dy.ptr(), n as u32, a));
            let got = download(&exec, &dy);
            for i in 0..n {
                assert_eq!(
                    got[i].to_bits(),
                    x[i].mul_add(a, y[i]).to_bits(),
                    "element {i}"
                );
            }
            assert_eq!(got[n].to_bits(), poison.to_bits(), "past the data");
        }
    };
    // The first launch compiles quick code, the second the optimized code in the background.
    saxpy(300, 2);
    if std::env::var_os("STREAMEXEC_PTX_JIT_TIER").is_none() {
        wait_for_optimized("jit_hoist");
    }
    // Whole blocks only, then a partial last block, on the optimized code.
    saxpy(128 * 37, 1);
    saxpy(partial, 1);
    // `n` says more than `y` holds: the block holding `y`'s end faults where the interpreter
    // does (`x` is long enough).
    let x = upload(&exec, &vec![1.0f32; 128 * 12]);
    let y = upload(&exec, &vec![2.0f32; m]);
    let texts: Vec<String> = [PtxEngine::Jit, PtxEngine::Interpreter]
        .into_iter()
        .map(|e| {
            let args = (x.ptr(), y.ptr(), 128 * 12, 0.5f32);
            fault_text(launch_on(&exec, e, 128u32, 12u32, &k, args))
        })
        .collect();
    assert_eq!(texts[0], texts[1]);
    assert!(texts[0].contains("block (9, 0, 0)"), "{}", texts[0]);
}
