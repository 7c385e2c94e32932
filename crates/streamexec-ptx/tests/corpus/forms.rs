//! kernels/corpus_forms.cu: half precision, `bar.red`, `bar.arrive` with named barriers,
//! `match.sync`, `WARP_SZ`, recursion and launch bounds. Half results are checked against the
//! exact reference of `tests/common/half.rs`.

use super::*;
use common::half::{self as hr, Op2, V};

const POISON_U16: u16 = 0xBEEF;

/// Random halves: edge values and random bits.
fn halves(rng: &mut StdRng, n: usize, bf: bool) -> Vec<u16> {
    let edges: &[u16] = if bf {
        &[
            0, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x7F7F, 0x0001, 0x4380,
        ]
    } else {
        &[
            0, 0x8000, 0x3C00, 0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0x0001, 0x03FF, 0x3800,
        ]
    };
    (0..n)
        .map(|_| {
            if rng.random_bool(0.2) {
                edges[rng.random_range(0..edges.len())]
            } else if rng.random_bool(0.5) {
                rng.random()
            } else {
                // Exponents near 0: sums cancel, products stay normal.
                let e: u16 = if bf {
                    rng.random_range(120..134)
                } else {
                    rng.random_range(9..21)
                };
                let m: u16 = rng.random::<u16>() & if bf { 0x7F } else { 0x3FF };
                (rng.random::<u16>() & 0x8000) | e << if bf { 7 } else { 10 } | m
            }
        })
        .collect()
}

/// Equal bits, or both NaN.
fn same_half(got: u16, want: u16, bf: bool) -> bool {
    got == want || (hr::is_nan(got, bf) && hr::is_nan(want, bf))
}

fn hval(h: u16) -> f64 {
    hr::to_f64(hr::hv(h, false))
}

#[test]
fn half_scalar_arithmetic_and_conversions() {
    let exec = host();
    let mut rng = common::rng("half_scalar_arithmetic_and_conversions");
    for (opt, ptx) in FORMS {
        type A = (P<u16>, P<u16>, P<u16>, P<f32>, P<i32>, i32);
        let k = load::<A>(&exec, ptx, "half_ops");
        let n = 300usize;
        let (x, y) = (halves(&mut rng, n, false), halves(&mut rng, n, false));
        let (dx, dy) = (upload(&exec, &x), upload(&exec, &y));
        let out = poisoned(&exec, 8 * n, POISON_U16);
        let fout = poisoned(&exec, n, POISON_F32);
        let iout = poisoned(&exec, n, POISON_I32);
        let args = (
            dx.ptr(),
            dy.ptr(),
            out.ptr(),
            fout.ptr(),
            iout.ptr(),
            n as i32,
        );
        run(&exec, 64, blocks_for(n, 64), &k, args);
        let (got, gf, gi) = (
            download(&exec, &out),
            download(&exec, &fout),
            download(&exec, &iout),
        );
        for i in 0..n {
            let (a, b) = (x[i], y[i]);
            let s = hr::op2(Op2::Add, a, b, false, false, false);
            let lt = hval(a) < hval(b);
            let three = match hr::hv(a, false) {
                V::Fin(d, n) => V::Fin(hr::Dy { m: 3 * d.m, e: d.e }, n),
                v => v,
            };
            let want = [
                s,
                hr::op2(Op2::Sub, a, b, false, false, false),
                hr::op2(Op2::Mul, a, b, false, false, false),
                hr::fma1(a, b, s, false, false, false, false),
                if lt { a ^ 0x8000 } else { a },
                hr::round_v(three, false, Round::N),
                hr::round_v(
                    V::Fin(
                        hr::Dy {
                            m: i as i128 - 50,
                            e: 0,
                        },
                        false,
                    ),
                    false,
                    Round::N,
                ),
            ];
            for (k, w) in want.iter().enumerate() {
                assert!(
                    same_half(got[8 * i + k], *w, false),
                    "{opt} element {i} result {k}: x={a:#06x} y={b:#06x}: got {:#06x}, want {w:#06x}",
                    got[8 * i + k]
                );
            }
            assert_eq!(
                got[8 * i + 7],
                POISON_U16,
                "{opt} element {i}: slot 7 written"
            );
            assert!(
                same_f32(gf[i], hval(a) as f32),
                "{opt} element {i}: (float)x"
            );
            let v = hval(a);
            let wi = if v.is_nan() {
                0
            } else {
                v.trunc().clamp(i32::MIN as f64, i32::MAX as f64) as i32
            };
            assert_eq!(gi[i], wi, "{opt} element {i}: (int)x of {a:#06x}");
        }
    }
}

#[test]
fn half_pair_arithmetic() {
    let exec = host();
    let mut rng = common::rng("half_pair_arithmetic");
    for (opt, ptx) in FORMS {
        let k = load::<(P<u32>, P<u32>, P<u32>, i32)>(&exec, ptx, "half2_ops");
        let n = 200usize;
        let pack = |v: Vec<u16>| -> Vec<u32> {
            v.chunks(2)
                .map(|c| c[0] as u32 | (c[1] as u32) << 16)
                .collect()
        };
        let x = pack(halves(&mut rng, 2 * n, false));
        let y = pack(halves(&mut rng, 2 * n, false));
        let (dx, dy) = (upload(&exec, &x), upload(&exec, &y));
        let out = poisoned(&exec, 2 * n + 1, POISON_U32);
        run(
            &exec,
            96,
            blocks_for(n, 96),
            &k,
            (dx.ptr(), dy.ptr(), out.ptr(), n as i32),
        );
        let got = download(&exec, &out);
        for i in 0..n {
            for half in 0..2 {
                let sh = 16 * half;
                let (a, b) = ((x[i] >> sh) as u16, (y[i] >> sh) as u16);
                let fma = hr::fma1(a, b, a, false, false, false, false);
                let add = hr::op2(Op2::Add, a, b, false, false, false);
                for (k, w) in [fma, add].into_iter().enumerate() {
                    let g = (got[2 * i + k] >> sh) as u16;
                    assert!(
                        same_half(g, w, false),
                        "{opt} pair {i} half {half} result {k}: got {g:#06x}, want {w:#06x}"
                    );
                }
            }
        }
        assert_eq!(got[2 * n], POISON_U32, "{opt}: wrote past the pairs");
    }
}

#[test]
fn bf16_conversions() {
    let exec = host();
    let mut rng = common::rng("bf16_conversions");
    for (opt, ptx) in FORMS {
        let k = load::<(P<u16>, P<f32>, P<f32>, P<u16>, i32)>(&exec, ptx, "bf16_convert");
        let n = 250usize;
        let a = halves(&mut rng, n, true);
        let mut f = floats(&mut rng, n, -1e4, 1e4);
        for (i, v) in [f32::NAN, f32::INFINITY, -0.0, 1.0 + f32::EPSILON, f32::MAX]
            .into_iter()
            .enumerate()
        {
            f[i] = v;
        }
        f.iter_mut()
            .skip(5)
            .step_by(7)
            .for_each(|v| *v = f32::from_bits(rng.random()));
        let (da, df) = (upload(&exec, &a), upload(&exec, &f));
        let fout = poisoned(&exec, n, POISON_F32);
        let hout = poisoned(&exec, n, POISON_U16);
        let args = (da.ptr(), df.ptr(), fout.ptr(), hout.ptr(), n as i32);
        run(&exec, 64, blocks_for(n, 64), &k, args);
        let (gf, gh) = (download(&exec, &fout), download(&exec, &hout));
        for i in 0..n {
            // Widening keeps the bits (a NaN's payload too).
            assert_eq!(
                gf[i].to_bits(),
                (a[i] as u32) << 16,
                "{opt} element {i}: widen"
            );
            let v = hr::ieee(f[i].to_bits() as u64, 23, 8, 127);
            let want = hr::round_v(v, true, Round::N);
            assert!(
                same_half(gh[i], want, true),
                "{opt} element {i}: bf16 of {:e} ({:#x}): got {:#06x}, want {want:#06x}",
                f[i],
                f[i].to_bits(),
                gh[i]
            );
        }
    }
}

#[test]
fn block_reductions_at_a_barrier() {
    let exec = host();
    let mut rng = common::rng("block_reductions_at_a_barrier");
    for (opt, ptx) in FORMS {
        let k = load::<(P<i32>, P<i32>)>(&exec, ptx, "block_vote");
        for (t, blocks) in [(96u32, 3u32), (40, 2), (1, 1), (256, 2)] {
            let n = (t * blocks) as usize;
            let mut x = ints(&mut rng, n, -50, 150);
            // One block all positive, so `.and` is true somewhere.
            x[..t as usize].iter_mut().for_each(|v| *v = v.abs() + 1);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, 3 * n + 1, POISON_I32);
            run(&exec, t, blocks, &k, (dx.ptr(), out.ptr()));
            let got = download(&exec, &out);
            for (b, block) in x.chunks(t as usize).enumerate() {
                let want = [
                    block.iter().filter(|&&v| v > 0).count() as i32,
                    block.iter().all(|&v| v > 0) as i32,
                    block.iter().any(|&v| v > 100) as i32,
                ];
                for j in 0..t as usize {
                    let at = 3 * (b * t as usize + j);
                    assert_eq!(&got[at..at + 3], &want, "{opt} t={t} block {b} thread {j}");
                }
            }
            assert_eq!(got[3 * n], POISON_I32, "{opt} t={t}: wrote past the grid");
        }
    }
}

#[test]
fn producer_consumer_with_bar_arrive() {
    let exec = host();
    let mut rng = common::rng("producer_consumer_with_bar_arrive");
    for (opt, ptx) in FORMS {
        let k = load::<(P<i32>, i32, i32)>(&exec, ptx, "named_pipeline");
        for rounds in [1usize, 7] {
            let seed = rng.random_range(-1000..1000);
            let out = poisoned(&exec, 32 * rounds + 1, POISON_I32);
            run(&exec, 64, 1, &k, (out.ptr(), rounds as i32, seed));
            let got = download(&exec, &out);
            for r in 0..rounds {
                for lane in 0..32 {
                    assert_eq!(
                        got[32 * r + lane],
                        2 * (1000 * r as i32 + lane as i32 + seed),
                        "{opt} round {r} lane {lane}"
                    );
                }
            }
            assert_eq!(got[32 * rounds], POISON_I32);
        }
    }
}

#[test]
fn match_any_and_all() {
    let exec = host();
    let mut rng = common::rng("match_any_and_all");
    for (opt, ptx) in FORMS {
        let k = load::<(P<i32>, P<i64>, P<u32>)>(&exec, ptx, "match_groups");
        for (t, blocks) in [(64u32, 2u32), (96, 1)] {
            let n = (t * blocks) as usize;
            let x = ints(&mut rng, n, 0, 4);
            // Per warp: one 64-bit value everywhere, or values that differ only in their
            // upper 32 bits (a 32-bit comparison would call them equal).
            let base: i64 = rng.random_range(0..1000);
            let x64: Vec<i64> = (0..n)
                .map(|i| {
                    if (i / 32) % 2 == 0 || i % 32 != 5 {
                        base
                    } else {
                        base + (1 << 40)
                    }
                })
                .collect();
            let (dx, d64) = (upload(&exec, &x), upload(&exec, &x64));
            let out = poisoned(&exec, 4 * n + 1, POISON_U32);
            run(&exec, t, blocks, &k, (dx.ptr(), d64.ptr(), out.ptr()));
            let got = download(&exec, &out);
            for w in 0..n / 32 {
                let lanes = w * 32..w * 32 + 32;
                let all = x64[lanes.clone()].iter().all(|&v| v == x64[w * 32]);
                for l in lanes.clone() {
                    let any = lanes
                        .clone()
                        .filter(|&j| x[j] == x[l])
                        .fold(0u32, |m, j| m | 1 << (j % 32));
                    let odd = if x[l] & 1 == 1 { any } else { 0 };
                    let want = [any, if all { u32::MAX } else { 0 }, all as u32 + 32, odd];
                    assert_eq!(&got[4 * l..4 * l + 4], &want, "{opt} t={t} thread {l}");
                }
            }
            assert_eq!(got[4 * n], POISON_U32);
        }
    }
}

fn fib(n: i32) -> i32 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

/// Recursion runs on the interpreter (`Auto` picks it; a forced JIT refuses the kernel), and
/// `.maxntid 64, 1, 1` refuses a larger block on every engine.
#[test]
fn recursion_and_launch_bounds() {
    let exec = host();
    let mut rng = common::rng("recursion_and_launch_bounds");
    let forced_jit = PtxEngine::from_env().ok() == Some(PtxEngine::Jit);
    for (opt, ptx) in FORMS {
        let k = load::<(P<i32>, P<i32>, i32)>(&exec, ptx, "recursive");
        let n = 100usize;
        let x = ints(&mut rng, n, 0, 14);
        let dx = upload(&exec, &x);
        let out = poisoned(&exec, 2 * n + 1, POISON_I32);
        let r = launch(
            &exec,
            64,
            blocks_for(n, 64),
            &k,
            (dx.ptr(), out.ptr(), n as i32),
        );
        // The outputs are read without the engines' digest: a forced JIT writes none.
        let got = exec.copy_to_vec(&out).unwrap();
        if forced_jit {
            match r {
                Err(Error::JitUnsupported { detail, .. }) => {
                    assert!(detail.contains("recursi"), "{opt}: {detail}")
                }
                other => panic!("{opt}: a forced JIT must refuse recursion, got {other:?}"),
            }
            assert!(got.iter().all(|&v| v == POISON_I32));
        } else {
            r.unwrap_or_else(|e| panic!("{opt}: {e}"));
            for i in 0..n {
                assert_eq!(
                    [got[2 * i], got[2 * i + 1]],
                    [fib(x[i]), (x[i] % 2 == 0) as i32],
                    "{opt} thread {i}: n = {}",
                    x[i]
                );
            }
            assert_eq!(got[2 * n], POISON_I32);
        }
        match launch(&exec, 128, 1, &k, (dx.ptr(), out.ptr(), n as i32)) {
            Err(e @ Error::Launch { .. }) => {
                let s = e.to_string();
                assert!(s.contains(".maxntid 64, 1, 1") && s.contains("128"), "{s}");
            }
            other => panic!("{opt}: a block past .maxntid launched: {other:?}"),
        }
    }
}
