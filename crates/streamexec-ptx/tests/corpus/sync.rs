//! kernels/corpus_sync.cu: barriers, shared memory, warp shuffles and votes, atomics, scan.

use super::*;

#[test]
fn block_reduce_static_and_dynamic_shared() {
    let exec = host();
    let mut rng = common::rng("block_reduce_static_and_dynamic_shared");
    for (opt, ptx) in SYNC {
        let k = load::<(P<i32>, P<i32>, i32)>(&exec, ptx, "block_reduce_sum");
        for n in [300usize, 128, 1] {
            let x = ints(&mut rng, n, -1_000_000, 1_000_000);
            let blocks = n.div_ceil(128);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, blocks, POISON_I32);
            run(
                &exec,
                128,
                blocks as u32,
                &k,
                (dx.ptr(), out.ptr(), n as i32),
            );
            let want: Vec<i32> = x.chunks(128).map(|c| c.iter().sum()).collect();
            assert_eq!(download(&exec, &out), want, "{opt} block_reduce_sum n={n}");
        }

        let kf =
            load::<(P<f32>, P<f32>, i32, SharedMemory<f32>)>(&exec, ptx, "block_reduce_f32_dyn");
        for (n, t) in [(200usize, 64u32), (3, 1), (100, 32)] {
            let x = floats(&mut rng, n, -100.0, 100.0);
            let blocks = n.div_ceil(t as usize);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, blocks, POISON_F32);
            let shared = SharedMemory::<f32>::new(t as usize);
            run(
                &exec,
                t,
                blocks as u32,
                &kf,
                (dx.ptr(), out.ptr(), n as i32, shared),
            );
            let got = download(&exec, &out);
            for (b, chunk) in x.chunks(t as usize).enumerate() {
                let want: f64 = chunk.iter().map(|&v| v as f64).sum();
                let mag: f64 = chunk.iter().map(|&v| v.abs() as f64).sum();
                // A tree of log2(t) f32 additions: each level adds at most one rounding.
                let tol = (t as f64).log2().ceil().max(1.0) * f32::EPSILON as f64 * mag;
                assert!(
                    (got[b] as f64 - want).abs() <= tol,
                    "{opt} block_reduce_f32_dyn n={n} t={t} block {b}: {} vs {want}",
                    got[b]
                );
            }
        }
    }
}

#[test]
fn warp_shuffle_reduction() {
    let exec = host();
    let mut rng = common::rng("warp_shuffle_reduction");
    for (opt, ptx) in SYNC {
        let k = load::<(P<i32>, P<i32>, i32)>(&exec, ptx, "warp_reduce_sum");
        for (n, t) in [(150usize, 64u32), (32, 32), (1, 32), (1000, 256)] {
            let x = ints(&mut rng, n, -1_000_000, 1_000_000);
            let blocks = blocks_for(n, t);
            let warps = (blocks * t / 32) as usize;
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, warps, POISON_I32);
            run(&exec, t, blocks, &k, (dx.ptr(), out.ptr(), n as i32));
            let mut want = vec![0i32; warps];
            for (i, v) in x.iter().enumerate() {
                want[i / 32] += v;
            }
            assert_eq!(download(&exec, &out), want, "{opt} n={n} t={t}");
        }
    }
}

#[test]
fn vote_any_all_ballot() {
    let exec = host();
    let mut rng = common::rng("vote_any_all_ballot");
    for (opt, ptx) in SYNC {
        let k = load::<(P<i32>, P<i32>, i32, i32)>(&exec, ptx, "vote_any_all");
        let n = 100usize;
        let mut x = ints(&mut rng, n, -50, 50);
        // Warp 1 votes all-true, warp 2 all-false (warp 3 is partly past n).
        x[32..64].iter_mut().for_each(|v| *v = 1000);
        x[64..96].iter_mut().for_each(|v| *v = -1000);
        let limit = rng.random_range(-10..10);
        let dx = upload(&exec, &x);
        let out = poisoned(&exec, 3 * 4, POISON_I32);
        run(&exec, 64, 2, &k, (dx.ptr(), out.ptr(), n as i32, limit));
        let got = download(&exec, &out);
        for w in 0..4 {
            let mut ballot = 0u32;
            for lane in 0..32 {
                let i = w * 32 + lane;
                if i < n && x[i] > limit {
                    ballot |= 1 << lane;
                }
            }
            assert_eq!(
                &got[3 * w..3 * w + 3],
                &[
                    (ballot != 0) as i32,
                    (ballot == u32::MAX) as i32,
                    ballot as i32
                ],
                "{opt} warp {w} (limit {limit})"
            );
        }
    }
}

#[test]
fn ballot_compaction() {
    let exec = host();
    let mut rng = common::rng("ballot_compaction");
    for (opt, ptx) in SYNC {
        let k = load::<(P<i32>, P<i32>, P<u32>, i32)>(&exec, ptx, "ballot_compact");
        for (n, t) in [(300usize, 96u32), (31, 32), (64, 64)] {
            // Unique values: kept ones are i+1, dropped ones -(i+1).
            let x: Vec<i32> = (0..n)
                .map(|i| {
                    if rng.random_bool(0.4) {
                        i as i32 + 1
                    } else {
                        -(i as i32) - 1
                    }
                })
                .collect();
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, n, POISON_I32);
            let count = upload(&exec, &[0u32]);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (dx.ptr(), out.ptr(), count.ptr(), n as i32),
            );
            let got = download(&exec, &out);
            let kept: Vec<i32> = x.iter().copied().filter(|&v| v > 0).collect();
            let c = download(&exec, &count)[0] as usize;
            assert_eq!(c, kept.len(), "{opt} n={n}: count");
            assert!(
                got[c..].iter().all(|&v| v == POISON_I32),
                "{opt} n={n}: wrote past count"
            );
            let mut sorted = got[..c].to_vec();
            sorted.sort();
            assert_eq!(
                sorted, kept,
                "{opt} n={n}: not a permutation of the kept values"
            );
            // Inside a warp the order is kept: each warp's values form one contiguous run.
            let pos: HashMap<i32, usize> =
                got[..c].iter().enumerate().map(|(p, &v)| (v, p)).collect();
            for warp in kept.chunk_by(|a, b| (a - 1) / 32 == (b - 1) / 32) {
                let start = pos[&warp[0]];
                assert_eq!(
                    &got[start..start + warp.len()],
                    warp,
                    "{opt} n={n}: warp order"
                );
            }
        }
    }
}

#[test]
fn histogram_shared_and_global_atomics() {
    let exec = host();
    let mut rng = common::rng("histogram_shared_and_global_atomics");
    for (opt, ptx) in SYNC {
        let k = load::<(P<u32>, P<u32>, i32, i32)>(&exec, ptx, "histogram");
        for (n, nbins, t, b) in [
            (1000usize, 37usize, 64u32, 3u32),
            (500, 64, 32, 1),
            (7, 5, 96, 2),
        ] {
            let x = common::random_u32s(&mut rng, n, u32::MAX);
            let dx = upload(&exec, &x);
            let bins = upload(&exec, &vec![0u32; nbins]);
            run(
                &exec,
                t,
                b,
                &k,
                (dx.ptr(), bins.ptr(), n as i32, nbins as i32),
            );
            let mut want = vec![0u32; nbins];
            x.iter()
                .for_each(|&v| want[(v % nbins as u32) as usize] += 1);
            assert_eq!(download(&exec, &bins), want, "{opt} n={n} nbins={nbins}");
        }
    }
}

#[test]
fn cas_loop_float_max() {
    let exec = host();
    let mut rng = common::rng("cas_loop_float_max");
    for (opt, ptx) in SYNC {
        let k = load::<(P<f32>, P<f32>, i32)>(&exec, ptx, "cas_max_f32");
        for (n, t) in [(500usize, 128u32), (1, 1), (33, 32)] {
            let x = floats(&mut rng, n, -1e6, 1e6);
            let dx = upload(&exec, &x);
            let out = upload(&exec, &[f32::NEG_INFINITY]);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (dx.ptr(), out.ptr(), n as i32),
            );
            let want = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            assert_eq!(download(&exec, &out)[0], want, "{opt} n={n}");
        }
    }
}

#[test]
fn atomic_min_max_inc_dec_exch_bitwise_and_wide_adds() {
    let exec = host();
    let mut rng = common::rng("atomic_min_max_inc_dec_exch_bitwise_and_wide_adds");
    for (opt, ptx) in SYNC {
        type A = (P<i32>, i32, P<i32>, P<i32>, P<u64>, P<f32>, P<f64>);
        let k = load::<A>(&exec, ptx, "atomics_misc");
        for (n, t) in [(200usize, 64u32), (1, 1), (45, 32)] {
            // |v| < 2^29 keeps v * 2^33 inside i64.
            let x = ints(&mut rng, n, -(1 << 29), 1 << 29);
            let init = [i32::MIN, i32::MAX, 0, 0, 12345, -1, 0, 0, 0, -1];
            let r = upload(&exec, &init);
            let dx = upload(&exec, &x);
            let olds = poisoned(&exec, n, POISON_I32);
            let r64 = upload(&exec, &[0u64, i64::MIN as u64, i64::MAX as u64]);
            let rf = upload(&exec, &[0.0f32]);
            let rd = upload(&exec, &[0.0f64]);
            let blocks = blocks_for(n, t) + 1; // a block entirely past n
            run(
                &exec,
                t,
                blocks,
                &k,
                (
                    dx.ptr(),
                    n as i32,
                    r.ptr(),
                    olds.ptr(),
                    r64.ptr(),
                    rf.ptr(),
                    rd.ptr(),
                ),
            );
            let got = download(&exec, &r);
            let (mut inc, mut dec) = (0u32, 0u32);
            for _ in 0..n {
                inc = if inc >= 17 { 0 } else { inc + 1 };
                dec = if dec == 0 || dec > 17 { 17 } else { dec - 1 };
            }
            let want = [
                *x.iter().max().unwrap(),
                *x.iter().min().unwrap(),
                inc as i32,
                dec as i32,
                got[4], // checked below
                x.iter().fold(-1, |a, &v| a & v),
                x.iter().fold(0, |a, &v| a | v),
                x.iter().fold(0, |a, &v| a ^ v),
                x.iter().map(|&v| v as u32).max().unwrap() as i32,
                x.iter().map(|&v| v as u32).min().unwrap() as i32,
            ];
            assert_eq!(
                got, want,
                "{opt} n={n}: [max min inc dec exch and or xor umax umin]"
            );
            // exch: the old values handed out plus the final value are the initial value
            // plus every input, as multisets.
            let mut seen = download(&exec, &olds);
            seen.push(got[4]);
            seen.sort();
            let mut all = x.clone();
            all.push(12345);
            all.sort();
            assert_eq!(
                seen, all,
                "{opt} n={n}: atomicExch lost or duplicated a value"
            );
            let got64 = download(&exec, &r64);
            let sum = x
                .iter()
                .fold(0u64, |a, &v| a.wrapping_add(((v as u32) as u64) << 20));
            let max = x.iter().map(|&v| v as i64 * (1 << 33)).max().unwrap();
            let min = x.iter().map(|&v| v as i64 * (1 << 33)).min().unwrap();
            assert_eq!(
                got64,
                [sum, max as u64, min as u64],
                "{opt} n={n}: u64 add, s64 max/min"
            );
            // Every partial sum is an integer below 2^24 (f32) / 2^53 (f64): exact in any order.
            let fsum: i64 = x.iter().map(|&v| (v & 1023) as i64).sum();
            assert_eq!(
                download(&exec, &rf)[0],
                fsum as f32,
                "{opt} n={n}: f32 atomic add"
            );
            let dsum: i64 = x.iter().map(|&v| v as i64).sum();
            assert_eq!(
                download(&exec, &rd)[0],
                dsum as f64,
                "{opt} n={n}: f64 atomic add"
            );
        }
    }
}

#[test]
fn block_prefix_scan() {
    let exec = host();
    let mut rng = common::rng("block_prefix_scan");
    for (opt, ptx) in SYNC {
        let k = load::<(P<i32>, P<i32>, i32)>(&exec, ptx, "scan_inclusive");
        for (n, t) in [(600usize, 256u32), (250, 100), (3, 1), (40, 64)] {
            let x = ints(&mut rng, n, -1000, 1000);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, n, POISON_I32);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (dx.ptr(), out.ptr(), n as i32),
            );
            let mut want = Vec::with_capacity(n);
            for chunk in x.chunks(t as usize) {
                let mut acc = 0;
                for v in chunk {
                    acc += v;
                    want.push(acc);
                }
            }
            assert_eq!(download(&exec, &out), want, "{opt} n={n} t={t}");
        }
    }
}
