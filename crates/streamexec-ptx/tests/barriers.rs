//! Block barriers on the JIT's paths against plain Rust: groups of threads that all wait at one
//! `bar.sync 0` are resumed there directly by the driver (`jit/run.rs`, `Ctx::resume`); groups
//! that wait at two different `bar.sync 0`, or lanes the scalar code suspended, are released
//! by their state words instead.
#![cfg(feature = "jit")]

mod common;

use common::*;
use rand::RngExt;

/// Three rounds of `v = v * 0.5 + s[t + 1]` (each between two barriers every group reaches
/// together), then a path per thread: `mode` 0 picks it by `t & 64` (whole groups of four
/// lanes, each path with its own `bar.sync 0`), `mode` 1 by `(t & 7) == 5` (one lane of every
/// other group, which the vector code hands to the scalar code). Path A stores `v + 1` and
/// writes `s[t + 1] * 3 + v`, path B stores `v + v` and writes `s[t + 1] * 5 + v`.
const BARS: &str = r#"
.visible .entry jit_bars(.param .u64 out, .param .u64 in, .param .u32 mode)
{
    .reg .pred %p<4>; .reg .b32 %r<14>; .reg .f32 %f<8>; .reg .b64 %rd<11>;
    .shared .align 4 .b8 s[1024];
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    ld.param.u32 %r9, [mode];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    shl.b32 %r3, %r2, 8;
    add.s32 %r4, %r3, %r1;
    mul.wide.u32 %rd3, %r4, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.s64 %rd5, %rd1, %rd3;
    mul.wide.u32 %rd6, %r1, 4;
    mov.u64 %rd7, s;
    add.s64 %rd8, %rd7, %rd6;
    add.s32 %r5, %r1, 1;
    and.b32 %r6, %r5, 255;
    mul.wide.u32 %rd9, %r6, 4;
    add.s64 %rd10, %rd7, %rd9;
    mov.u32 %r12, 0;
ROUND:
    st.shared.f32 [%rd8], %f1;
    bar.sync 0;
    ld.shared.f32 %f2, [%rd10];
    fma.rn.f32 %f1, %f1, 0f3F000000, %f2;
    bar.sync 0;
    add.s32 %r12, %r12, 1;
    setp.lt.u32 %p3, %r12, 3;
    @%p3 bra ROUND;
    and.b32 %r7, %r1, 64;
    and.b32 %r8, %r1, 7;
    setp.eq.u32 %p1, %r8, 5;
    setp.ne.u32 %p2, %r7, 0;
    selp.u32 %r10, 1, 0, %p1;
    selp.u32 %r11, 1, 0, %p2;
    setp.eq.u32 %p3, %r9, 0;
    selp.u32 %r13, %r11, %r10, %p3;
    setp.ne.u32 %p1, %r13, 0;
    @%p1 bra B;
    add.f32 %f3, %f1, 0f3F800000;
    st.shared.f32 [%rd8], %f3;
    bar.sync 0;
    ld.shared.f32 %f4, [%rd10];
    mul.f32 %f5, %f4, 0f40400000;
    add.f32 %f5, %f5, %f1;
    st.global.f32 [%rd5], %f5;
    ret;
B:
    add.f32 %f3, %f1, %f1;
    st.shared.f32 [%rd8], %f3;
    bar.sync 0;
    ld.shared.f32 %f4, [%rd10];
    mul.f32 %f5, %f4, 0f40A00000;
    add.f32 %f5, %f5, %f1;
    st.global.f32 [%rd5], %f5;
    ret;
}
"#;

/// `jit_bars` in plain Rust, one block of 256 threads.
fn bars_block(input: &[f32], mode: u32) -> Vec<f32> {
    let next = |t: usize| (t + 1) & 255;
    let mut v = input.to_vec();
    for _ in 0..3 {
        let s = v.clone();
        for t in 0..256 {
            v[t] = v[t].mul_add(0.5, s[next(t)]);
        }
    }
    let b = |t: usize| if mode == 0 { t & 64 != 0 } else { t & 7 == 5 };
    let s: Vec<f32> = (0..256)
        .map(|t| if b(t) { v[t] + v[t] } else { v[t] + 1.0 })
        .collect();
    (0..256)
        .map(|t| s[next(t)] * if b(t) { 5.0 } else { 3.0 } + v[t])
        .collect()
}

/// Every group waits at the same barrier (resumed directly), at two different ones (mode 0),
/// or with lanes the scalar code runs (mode 1): the JIT's quick and optimized code and the
/// interpreter give plain Rust's bits, and nothing past the output.
#[test]
fn barriers_resume_each_thread_where_it_waits() {
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<f32>, DevicePtr<f32>, u32)>(&exec, BARS, "jit_bars");
    let mut rng = rng("barriers_resume_each_thread_where_it_waits");
    let blocks = 3;
    let poison = f32::from_bits(0x7FA0_0002);
    let mut check = |engine: PtxEngine, mode: u32| {
        let input: Vec<f32> = (0..256 * blocks)
            .map(|_| rng.random_range(-10.0f32..10.0))
            .collect();
        let out = poisoned(&exec, 256 * blocks + 1, poison);
        let din = upload(&exec, &input);
        launch_on(
            &exec,
            engine,
            256u32,
            blocks as u32,
            &k,
            (out.ptr(), din.ptr(), mode),
        )
        .unwrap_or_else(|e| panic!("{engine:?} mode {mode}: {e}"));
        let got = download(&exec, &out);
        for (b, chunk) in input.chunks(256).enumerate() {
            let want = bars_block(chunk, mode);
            for t in 0..256 {
                assert_eq!(
                    got[256 * b + t].to_bits(),
                    want[t].to_bits(),
                    "{engine:?} mode {mode} block {b} thread {t}"
                );
            }
        }
        assert_eq!(
            got[256 * blocks].to_bits(),
            poison.to_bits(),
            "past the data"
        );
    };
    for mode in [0, 1] {
        check(PtxEngine::Interpreter, mode);
        // The first launch runs quick code, the second starts the optimized compile.
        check(PtxEngine::Jit, mode);
    }
    if std::env::var_os("STREAMEXEC_PTX_JIT_TIER").is_none() {
        wait_for_optimized("jit_bars");
    }
    for mode in [0, 1, 0] {
        check(PtxEngine::Jit, mode);
    }
}
