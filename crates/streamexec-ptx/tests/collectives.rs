//! Warp collectives on the host platform's PTX JIT against its interpreter and against the
//! PTX ISA's rules written in plain Rust: shuffles with per-lane operands (which the driver
//! resolves), and shuffles with immediate operands, votes and `activemask` over the whole
//! warp (which the vector code resolves itself, `jit/lower/vector/staged.rs`), also where
//! lanes part before them or the last warp is partial, so that the driver takes over.
#![cfg(feature = "jit")]

mod common;

use common::*;
use rand::RngExt;

const POISON_U32: u32 = 0xDEAD_BEEF;

/// `shfl.sync` in each mode with per-lane `b`, `c` (clamp and segment mask) and member masks,
/// on whole warps (the driver's one-pass case) and on a last partial warp (the general rule):
/// the JIT matches the interpreter bit for bit (values and predicates), and both match plain
/// Rust where every lane names the whole warp.
#[test]
fn whole_warp_shuffles_match_the_interpreter_in_every_mode() {
    const SHFL: &str = r#"
.visible .entry jit_shfl(.param .u64 in, .param .u64 out, .param .u32 n)
{
    .reg .pred %p<5>; .reg .b32 %r<20>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mad.lo.u32 %r5, %r4, %r3, %r2;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    mul.wide.u32 %rd5, %r1, 4;
    ld.global.u32 %r6, [%rd4];
    add.s64 %rd4, %rd4, %rd5;
    ld.global.u32 %r7, [%rd4];
    add.s64 %rd4, %rd4, %rd5;
    ld.global.u32 %r8, [%rd4];
    add.s64 %rd4, %rd4, %rd5;
    ld.global.u32 %r9, [%rd4];
    shfl.sync.up.b32 %r10|%p1, %r6, %r7, %r8, %r9;
    shfl.sync.down.b32 %r11|%p2, %r6, %r7, %r8, %r9;
    shfl.sync.bfly.b32 %r12|%p3, %r6, %r7, %r8, %r9;
    shfl.sync.idx.b32 %r13|%p4, %r6, %r7, %r8, %r9;
    selp.u32 %r14, 1, 0, %p1;
    selp.u32 %r15, 2, 0, %p2;
    or.b32 %r14, %r14, %r15;
    selp.u32 %r15, 4, 0, %p3;
    or.b32 %r14, %r14, %r15;
    selp.u32 %r15, 8, 0, %p4;
    or.b32 %r14, %r14, %r15;
    add.s64 %rd6, %rd2, %rd3;
    st.global.u32 [%rd6], %r10;
    add.s64 %rd6, %rd6, %rd5;
    st.global.u32 [%rd6], %r11;
    add.s64 %rd6, %rd6, %rd5;
    st.global.u32 [%rd6], %r12;
    add.s64 %rd6, %rd6, %rd5;
    st.global.u32 [%rd6], %r13;
    add.s64 %rd6, %rd6, %rd5;
    st.global.u32 [%rd6], %r14;
    ret;
}
"#;
    let exec = host();
    let k = ptx_kernel::<(DevicePtr<u32>, DevicePtr<u32>, u32)>(&exec, SHFL, "jit_shfl");
    let mut rng = rand::rng();
    for round in 0..12 {
        // Block sizes of whole warps, then one with a partial last warp.
        let threads = if round % 3 == 2 {
            48
        } else {
            32 * rng.random_range(1..=4u32)
        };
        let blocks = rng.random_range(1..=3u32);
        let n = (threads * blocks) as usize;
        // Even rounds: every lane names the whole warp with `c = 31` (the plain-Rust check).
        let simple = round % 2 == 0;
        let mut input = vec![0u32; 4 * n];
        for t in 0..n {
            let lane = (t % threads as usize % 32) as u32;
            input[t] = rng.random();
            input[n + t] = rng.random_range(0..40);
            input[2 * n + t] = if simple {
                31
            } else {
                [31, 0, 0x1f | (0x18 << 8), 0x10 | (0x10 << 8), rng.random()]
                    [rng.random_range(0..5)]
            };
            input[3 * n + t] = if simple || rng.random_bool(0.5) {
                u32::MAX
            } else {
                rng.random::<u32>() | 1 << lane
            };
        }
        let src = upload(&exec, &input);
        let mut outs = Vec::new();
        for e in [PtxEngine::Jit, PtxEngine::Interpreter] {
            let out = poisoned(&exec, 5 * n, POISON_U32);
            launch_on(
                &exec,
                e,
                threads,
                blocks,
                &k,
                (src.ptr(), out.ptr(), n as u32),
            )
            .unwrap();
            outs.push(download(&exec, &out));
        }
        assert_eq!(
            outs[0], outs[1],
            "round {round}: {threads} threads × {blocks} blocks"
        );
        if simple && threads % 32 == 0 {
            for t in 0..n {
                let (warp, lane) = (t - t % 32, (t % 32) as i64);
                let b = input[n + t] as i64 & 31;
                let from = |j: i64, ok: bool| {
                    if ok {
                        input[warp + j as usize]
                    } else {
                        input[t]
                    }
                };
                // With `c = 31` (no segments) the bound is lane 31: `up` takes a lane only
                // when `lane - b >= 31`, as PTX's rule says.
                let (up, down) = (lane - b, lane + b);
                let want = [
                    from(up, up >= 31),
                    from(down, down <= 31),
                    from(lane ^ b, true),
                    from(b, true),
                    u32::from(up >= 31) | u32::from(down <= 31) << 1 | 4 | 8,
                ];
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
}

/// `shfl.sync.<mode>.b32 d|p, a, b, c, 0xffffffff` for lane `lane` of a whole warp `a`, by
/// the PTX ISA's pseudocode: the value and the predicate.
fn isa_shfl(mode: usize, a: &[u32], lane: u32, b: u32, c: u32) -> (u32, bool) {
    let (bval, cval, seg) = (b & 31, c & 31, (c >> 8) & 31);
    let max_lane = ((lane & seg) | (cval & !seg)) as i64;
    let min_lane = (lane & seg) as i64;
    let l = lane as i64;
    let (j, p) = match mode {
        0 => (l - bval as i64, l - bval as i64 >= max_lane),
        1 => (l + bval as i64, l + bval as i64 <= max_lane),
        2 => (l ^ bval as i64, (l ^ bval as i64) <= max_lane),
        _ => {
            let j = min_lane | (bval & !seg) as i64;
            (j, j <= max_lane)
        }
    };
    (if p { a[j as usize] } else { a[lane as usize] }, p)
}

/// Chains of four `shfl.sync` with immediate `b`, `c` and the full member mask, in random
/// modes, offsets and segment widths: each result feeds the next shuffle, each predicate one
/// bit of a flag word. On whole warps with no divergence the vector code resolves them in
/// place; rounds with odd inputs part lanes at a branch first (groups hand lanes to the scalar
/// code, and the driver resolves the shuffle with the rows of the groups that still wait),
/// and 48-thread blocks end in a partial warp. The JIT matches the interpreter bit for bit and
/// both match the ISA's rule.
#[test]
fn staged_shuffle_chains_match_the_isa_rule() {
    let exec = host();
    let mut rng = rand::rng();
    const MODES: [&str; 4] = ["up", "down", "bfly", "idx"];
    for round in 0..16 {
        let chain: Vec<(usize, u32, u32)> = (0..4)
            .map(|_| {
                let mode = rng.random_range(0..4);
                let width = [32u32, 16, 8, 4][rng.random_range(0..4)];
                let seg = (32 - width) << 8;
                let c = match rng.random_range(0..3) {
                    0 if mode == 0 => seg,
                    0 => seg | 31,
                    1 => rng.random_range(0..32) | seg,
                    _ => rng.random::<u32>() & 0x1f1f,
                };
                (mode, rng.random_range(0..40), c)
            })
            .collect();
        let mut body = String::new();
        for (k, (mode, b, c)) in chain.iter().enumerate() {
            body += &format!(
                "    shfl.sync.{}.b32 %r10|%p1, %r6, {b}, {c}, -1;\n\
                 \x20   add.u32 %r6, %r6, %r10;\n\
                 \x20   mul.lo.u32 %r6, %r6, 3;\n\
                 \x20   selp.u32 %r11, {}, 0, %p1;\n\
                 \x20   or.b32 %r12, %r12, %r11;\n",
                MODES[*mode],
                1 << k
            );
        }
        let body = format!(
            "    mov.u32 %r12, 0;\n{body}    mul.wide.u32 %rd5, %r5, 8;\n\
             \x20   add.s64 %rd6, %rd2, %rd5;\n\
             \x20   st.global.v2.u32 [%rd6], {{%r6, %r12}};\n"
        );
        let name = format!("staged_{round}");
        let k = ptx_kernel::<Args>(&exec, &staged_kernel(&name, &body), &name);
        let threads = [32u32, 64, 128, 48][round % 4];
        let blocks = rng.random_range(1..=3u32);
        let n = (threads * blocks) as usize;
        // The first four rounds of every eight: even inputs (no lane takes the odd branch).
        let even = round % 8 < 4;
        let input: Vec<u32> = (0..n)
            .map(|_| rng.random::<u32>() & if even { !1 } else { !0 })
            .collect();
        let what = format!("round {round}: {chain:?}, {threads} threads × {blocks} blocks");
        let out = on_both_engines(&exec, &k, (threads, blocks), &input, 2, &what);
        if !threads.is_multiple_of(32) {
            continue;
        }
        for warp in input.chunks(32) {
            let mut v: Vec<u32> = warp.iter().map(|x| after(*x)).collect();
            let mut flags = [0u32; 32];
            for (k, (mode, b, c)) in chain.iter().enumerate() {
                let r: Vec<(u32, bool)> = (0..32).map(|l| isa_shfl(*mode, &v, l, *b, *c)).collect();
                for l in 0..32 {
                    v[l] = v[l].wrapping_add(r[l].0).wrapping_mul(3);
                    flags[l] |= u32::from(r[l].1) << k;
                }
            }
            let base = (warp.as_ptr() as usize - input.as_ptr() as usize) / 4;
            for l in 0..32 {
                let got = (out[2 * (base + l)], out[2 * (base + l) + 1]);
                assert_eq!(got, (v[l], flags[l]), "{what}, thread {}", base + l);
            }
        }
    }
}

/// `vote.sync` in every mode, on a predicate and on its negation, `redux.sync` with every
/// operation, and `activemask`, with the whole warp as member mask: predicates all true, all
/// false or mixed per warp. Whole warps
/// without divergence resolve in the vector code; odd inputs part lanes at a branch first and
/// 48-thread blocks end in a partial warp (the driver resolves those). The JIT matches the
/// interpreter bit for bit and both match plain Rust (on whole warps).
#[test]
fn staged_votes_reductions_and_activemask_match_plain_rust() {
    const VOTES: &str = r#"
    and.b32 %r8, %r6, 2;
    setp.ne.u32 %p1, %r8, 0;
    vote.sync.ballot.b32 %r10, %p1, -1;
    vote.sync.ballot.b32 %r11, !%p1, -1;
    vote.sync.all.pred %p3, %p1, -1;
    vote.sync.any.pred %p4, !%p1, -1;
    vote.sync.uni.pred %p5, %p1, -1;
    activemask.b32 %r12;
    selp.u32 %r13, 1, 0, %p3;
    selp.u32 %r14, 2, 0, %p4;
    or.b32 %r13, %r13, %r14;
    selp.u32 %r14, 4, 0, %p5;
    or.b32 %r13, %r13, %r14;
    redux.sync.add.u32 %r14, %r6, -1;
    redux.sync.min.s32 %r15, %r6, -1;
    redux.sync.max.u32 %r16, %r6, -1;
    redux.sync.xor.b32 %r17, %r6, -1;
    mul.wide.u32 %rd5, %r5, 48;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v4.u32 [%rd6], {%r10, %r11, %r12, %r13};
    st.global.v4.u32 [%rd6+16], {%r14, %r15, %r16, %r17};
    redux.sync.min.u32 %r14, %r6, -1;
    redux.sync.max.s32 %r15, %r6, -1;
    redux.sync.and.b32 %r16, %r6, -1;
    redux.sync.or.b32 %r17, %r6, -1;
    st.global.v4.u32 [%rd6+32], {%r14, %r15, %r16, %r17};
"#;
    let exec = host();
    let k = ptx_kernel::<Args>(&exec, &staged_kernel("votes", VOTES), "votes");
    let mut rng = rand::rng();
    for round in 0..16 {
        let threads = [32u32, 64, 128, 48][round % 4];
        let blocks = rng.random_range(1..=3u32);
        let n = (threads * blocks) as usize;
        let even = round % 8 < 4;
        // Per warp: bit 1 of every value after the branch set, clear, or random.
        let input: Vec<u32> = (0..n)
            .map(|t| {
                let want = [Some(2), Some(0), None][(t / 32 + round) % 3];
                loop {
                    let v = rng.random::<u32>() & if even { !1 } else { !0 };
                    if want.is_none_or(|w| after(v) & 2 == w) {
                        break v;
                    }
                }
            })
            .collect();
        let what = format!("round {round}: {threads} threads × {blocks} blocks");
        let out = on_both_engines(&exec, &k, (threads, blocks), &input, 12, &what);
        if !threads.is_multiple_of(32) {
            continue;
        }
        for (w, warp) in input.chunks(32).enumerate() {
            let ballot = warp
                .iter()
                .enumerate()
                .fold(0u32, |b, (l, x)| b | u32::from(after(*x) & 2 != 0) << l);
            let all = ballot == u32::MAX;
            let any_not = ballot != u32::MAX;
            let uni = all || ballot == 0;
            let flags = u32::from(all) | u32::from(any_not) << 1 | u32::from(uni) << 2;
            let v: Vec<u32> = warp.iter().map(|x| after(*x)).collect();
            let fold = |f: fn(u32, u32) -> u32| v.iter().copied().reduce(f).unwrap();
            let want = [
                ballot,
                !ballot,
                u32::MAX,
                flags,
                fold(u32::wrapping_add),
                fold(|x, y| (x as i32).min(y as i32) as u32),
                fold(u32::max),
                fold(|x, y| x ^ y),
                fold(u32::min),
                fold(|x, y| (x as i32).max(y as i32) as u32),
                fold(|x, y| x & y),
                fold(|x, y| x | y),
            ];
            for l in 0..32 {
                let t = 32 * w + l;
                assert_eq!(out[12 * t..12 * t + 12], want, "{what}, thread {t}");
            }
        }
    }
}

/// The arguments of the staged kernels: input, output.
type Args = (DevicePtr<u32>, DevicePtr<u32>);

/// A kernel `name(in, out)` that runs `body` after the common start: `%r5` the thread's index,
/// `%r6` its input after a branch on the input's bit 0 ([`after`]), which parts the lanes of
/// a group where bits 0 differ; `%rd2` the output.
fn staged_kernel(name: &str, body: &str) -> String {
    format!(
        r#"
.visible .entry {name}(.param .u64 in, .param .u64 out)
{{
    .reg .pred %p<8>; .reg .b32 %r<20>; .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [in];
    ld.param.u64 %rd2, [out];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %ctaid.x;
    mad.lo.u32 %r5, %r4, %r3, %r2;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r6, [%rd4];
    and.b32 %r7, %r6, 1;
    setp.ne.u32 %p2, %r7, 0;
    @%p2 bra ODD;
    add.u32 %r6, %r6, 2;
    bra.uni JOIN;
ODD:
    mul.lo.u32 %r6, %r6, 5;
JOIN:
{body}    ret;
}}
"#
    )
}

/// `input` through `k` on `(threads, blocks)`, `per_thread` output words each, on the JIT and
/// on the interpreter (outputs poisoned first): the two must agree bit for bit. The output.
fn on_both_engines(
    exec: &Device,
    k: &TypedKernel<Args>,
    (threads, blocks): (u32, u32),
    input: &[u32],
    per_thread: usize,
    what: &str,
) -> Vec<u32> {
    let src = upload(exec, input);
    let mut outs = Vec::new();
    for e in [PtxEngine::Jit, PtxEngine::Interpreter] {
        let out = poisoned(exec, per_thread * input.len(), POISON_U32);
        launch_on(exec, e, threads, blocks, k, (src.ptr(), out.ptr())).unwrap();
        outs.push(download(exec, &out));
    }
    assert_eq!(outs[0], outs[1], "{what}");
    outs.swap_remove(0)
}

/// A staged kernel's `%r6`: its input after the branch on bit 0.
fn after(x: u32) -> u32 {
    if x & 1 == 0 {
        x.wrapping_add(2)
    } else {
        x.wrapping_mul(5)
    }
}
