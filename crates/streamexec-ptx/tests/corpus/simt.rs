//! kernels/corpus_simt.cu: lanes of a warp that loop, leave and meet again, partial member
//! masks, barriers in loops, shared-memory atomics, grid-stride loops and odd block shapes:
//! the control flow a vectorizing JIT must get right, against plain Rust that models each warp.

use super::*;

/// The lanes of warp `w` (32 threads from `32 w`) among `n` threads.
fn warp_of(w: usize, n: usize) -> std::ops::Range<usize> {
    32 * w..(32 * w + 32).min(n)
}

#[test]
fn divergent_trip_counts() {
    let exec = host();
    let mut rng = common::rng("divergent_trip_counts");
    for (opt, ptx) in SIMT {
        let k = load::<(P<u32>, P<u32>, P<u32>, i32)>(&exec, ptx, "divergent_trips");
        // (n, threads per block): a partial last warp's lanes past n loop 0 times.
        for (n, t) in [(150usize, 64u32), (32, 32), (5, 32)] {
            let cnt = random_u32s(&mut rng, n, 40);
            let x = random_u32s(&mut rng, n, u32::MAX);
            let (dc, dx) = (upload(&exec, &cnt), upload(&exec, &x));
            let out = poisoned(&exec, 2 * n + 1, POISON_U32);
            let blocks = blocks_for(n, t);
            run(
                &exec,
                t,
                blocks,
                &k,
                (dc.ptr(), dx.ptr(), out.ptr(), n as i32),
            );
            let got = download(&exec, &out);
            for w in 0..n.div_ceil(32) {
                let lanes = warp_of(w, n);
                let total = lanes.clone().map(|i| cnt[i]).fold(0u32, u32::wrapping_add);
                for i in lanes.clone() {
                    let mut acc = x[i];
                    for k in 0..cnt[i] {
                        acc = acc
                            .wrapping_mul(1664525)
                            .wrapping_add(1013904223)
                            .wrapping_add(k);
                        if acc & 1 == 1 {
                            acc ^= acc >> 7;
                        }
                        // The lanes still looping in round k execute activemask together.
                        acc =
                            acc.wrapping_add(lanes.clone().filter(|&j| cnt[j] > k).count() as u32);
                    }
                    assert_eq!(
                        got[2 * i..2 * i + 2],
                        [acc, total],
                        "{opt} n={n} t={t} i={i}"
                    );
                }
            }
            assert_eq!(got[2 * n], POISON_U32, "{opt} n={n}: wrote past n");
        }
    }
}

#[test]
fn early_exit_then_work_for_the_rest() {
    let exec = host();
    let mut rng = common::rng("early_exit_then_work_for_the_rest");
    for (opt, ptx) in SIMT {
        let k = load::<(P<i32>, P<i32>, i32)>(&exec, ptx, "early_exit");
        for (n, t) in [(200usize, 64u32), (37, 37), (70, 96)] {
            let x = ints(&mut rng, n, -1000, 1000);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, n + 1, POISON_I32);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (dx.ptr(), out.ptr(), n as i32),
            );
            let got = download(&exec, &out);
            // Warps are per block: the threads of block b are b*t.., each block's warps from 0.
            let mut want = vec![0i32; n];
            for b in 0..blocks_for(n, t) as usize {
                for w in 0..(t as usize).div_ceil(32) {
                    let lo = b * t as usize + 32 * w;
                    let hi = (lo + 32).min(b * t as usize + t as usize).min(n);
                    let sum: i32 = (lo..hi).map(|i| x[i]).filter(|&v| v >= 0).sum();
                    for i in lo..hi {
                        let v = x[i];
                        want[i] = if v < 0 {
                            -v
                        } else {
                            let r = (0..v % 8).fold(0, |r, k| r * 5 + k);
                            sum * 3 + v % 8 + r
                        };
                    }
                }
            }
            assert_eq!(got[..n], want, "{opt} n={n} t={t}");
            assert_eq!(got[n], POISON_I32, "{opt} n={n}: wrote past n");
        }
    }
}

#[test]
fn stencil_passes_with_barriers_in_a_loop() {
    let exec = host();
    let mut rng = common::rng("stencil_passes_with_barriers_in_a_loop");
    for (opt, ptx) in SIMT {
        let k = load::<(P<u32>, P<u32>, i32, i32)>(&exec, ptx, "stencil_passes");
        for (n, t, passes) in [
            (300usize, 96u32, 5i32),
            (100, 37, 3),
            (7, 32, 0),
            (250, 256, 9),
        ] {
            let x = random_u32s(&mut rng, n, 1 << 20);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, n + 1, POISON_U32);
            run(
                &exec,
                t,
                blocks_for(n, t),
                &k,
                (dx.ptr(), out.ptr(), n as i32, passes),
            );
            let got = download(&exec, &out);
            let mut want = Vec::with_capacity(n);
            for base in (0..n).step_by(t as usize) {
                let len = (t as usize).min(n - base);
                // The tile with its zero halo, cells past n zero.
                let mut cells = vec![0u32; t as usize + 2];
                cells[1..=len].copy_from_slice(&x[base..base + len]);
                for _ in 0..passes {
                    let mut next = vec![0u32; t as usize + 2];
                    for c in 1..=len {
                        next[c] = (cells[c - 1] + 2 * cells[c] + cells[c + 1]) >> 2;
                    }
                    cells = next;
                }
                want.extend_from_slice(&cells[1..=len]);
            }
            assert_eq!(got[..n], want, "{opt} n={n} t={t} passes={passes}");
            assert_eq!(got[n], POISON_U32, "{opt} n={n}: wrote past n");
        }
    }
}

/// A warp's ballot of `pred` over the lanes of `mask`.
fn ballot(x: &[i32], mask: u32, pred: impl Fn(i32) -> bool) -> u32 {
    (0..x.len())
        .filter(|&l| mask >> l & 1 == 1 && pred(x[l]))
        .fold(0, |b, l| b | 1 << l)
}

#[test]
fn partial_masks_in_a_divergent_branch() {
    let exec = host();
    let mut rng = common::rng("partial_masks_in_a_divergent_branch");
    for (opt, ptx) in SIMT {
        let k = load::<(P<i32>, P<u32>)>(&exec, ptx, "partial_masks");
        for (blocks, t) in [(2u32, 64u32), (1, 32)] {
            let n = (blocks * t) as usize;
            let mut x = ints(&mut rng, n, -100, 100);
            // One warp all odd, one all even where there are several.
            if n >= 96 {
                x[32..64].iter_mut().for_each(|v| *v |= 1);
                x[64..96].iter_mut().for_each(|v| *v &= !1);
            }
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, 4 * n, POISON_U32);
            run(&exec, t, blocks, &k, (dx.ptr(), out.ptr()));
            let got = download(&exec, &out);
            for w in 0..n / 32 {
                let v = &x[32 * w..32 * w + 32];
                let odd = ballot(v, u32::MAX, |a| a & 1 != 0);
                for l in 0..32 {
                    let want = if odd >> l & 1 == 1 {
                        let next = if l < 31 && odd >> (l + 1) & 1 == 1 {
                            v[l + 1]
                        } else {
                            0
                        };
                        [
                            v[l].wrapping_add(next) as u32,
                            v[odd.trailing_zeros() as usize] as u32,
                            ballot(v, odd, |a| a > 0),
                            odd,
                        ]
                    } else {
                        [0, 0, ballot(v, !odd, |a| a > 0), 0]
                    };
                    let i = 32 * w + l;
                    assert_eq!(got[4 * i..4 * i + 4], want, "{opt} thread {i}");
                }
            }
        }
    }
}

#[test]
fn half_warps_with_their_own_member_masks() {
    let exec = host();
    let mut rng = common::rng("half_warps_with_their_own_member_masks");
    for (opt, ptx) in SIMT {
        let k = load::<(P<i32>, P<u32>)>(&exec, ptx, "half_warp_masks");
        let n = 128;
        let mut x = ints(&mut rng, n, -50, 150);
        // Halves that vote uniformly: all positive, none above 100.
        x[16..32].iter_mut().for_each(|v| *v = v.abs() % 100 + 1);
        x[64..80].iter_mut().for_each(|v| *v = -v.abs() - 1);
        let dx = upload(&exec, &x);
        let out = poisoned(&exec, 5 * n, POISON_U32);
        run(&exec, 64, 2, &k, (dx.ptr(), out.ptr()));
        let got = download(&exec, &out);
        for w in 0..n / 32 {
            let v = &x[32 * w..32 * w + 32];
            for l in 0..32 {
                let half: u32 = if l < 16 { 0x0000_ffff } else { 0xffff_0000 };
                let pos = ballot(v, half, |a| a > 0);
                let want = [
                    pos,
                    (pos == half) as u32,
                    (ballot(v, half, |a| a > 100) != 0) as u32,
                    v[l & 16] as u32,
                    ballot(v, half, |a| a & 3 == v[l] & 3),
                ];
                let i = 32 * w + l;
                assert_eq!(got[5 * i..5 * i + 5], want, "{opt} thread {i}");
            }
        }
    }
}

#[test]
fn one_shuffle_reached_from_two_call_sites() {
    let exec = host();
    let mut rng = common::rng("one_shuffle_reached_from_two_call_sites");
    for (opt, ptx) in SIMT {
        let k = load::<(P<i32>, P<i32>)>(&exec, ptx, "call_site_shfl");
        let n = 96;
        let x = ints(&mut rng, n, -1_000_000, 1_000_000);
        let dx = upload(&exec, &x);
        let out = poisoned(&exec, n, POISON_I32);
        run(&exec, 96, 1, &k, (dx.ptr(), out.ptr()));
        let want: Vec<i32> = (0..n)
            .map(|i| x[i & !31] + 1 + if i & 1 == 1 { 1000 } else { 0 })
            .collect();
        assert_eq!(download(&exec, &out), want, "{opt}");
    }
}

#[test]
fn shared_histogram_with_2d_blocks() {
    let exec = host();
    let mut rng = common::rng("shared_histogram_with_2d_blocks");
    for (opt, ptx) in SIMT {
        let k = load::<(P<u32>, i32, i32, i32, P<u32>, P<u32>)>(&exec, ptx, "shared_hist_2d");
        // (rows, cols, block (x, y), bins): blockDim.x 7, 3 and 5, never a multiple of 4.
        for (rows, cols, bx, by, nbins) in [
            (23usize, 41usize, 7u32, 5u32, 13usize),
            (9, 10, 3, 11, 32),
            (1, 1, 5, 1, 1),
        ] {
            let m = random_u32s(&mut rng, rows * cols, 1000);
            // The outputs start at random values: the kernel must add and max into them.
            let c0 = random_u32s(&mut rng, nbins, 1000);
            let m0 = random_u32s(&mut rng, nbins, 1000);
            let (dm, dc, dmx) = (upload(&exec, &m), upload(&exec, &c0), upload(&exec, &m0));
            let grid = ((cols as u32).div_ceil(bx), (rows as u32).div_ceil(by));
            let args = (
                dm.ptr(),
                rows as i32,
                cols as i32,
                nbins as i32,
                dc.ptr(),
                dmx.ptr(),
            );
            run(&exec, (bx, by), grid, &k, args);
            let (mut counts, mut maxes) = (c0.clone(), m0.clone());
            for &v in &m {
                let b = v as usize % nbins;
                counts[b] += 1;
                maxes[b] = maxes[b].max(v);
            }
            let what = format!("{opt} {rows}x{cols} block {bx}x{by} bins={nbins}");
            assert_eq!(download(&exec, &dc), counts, "{what}: counts");
            assert_eq!(download(&exec, &dmx), maxes, "{what}: maxes");
        }
    }
}

#[test]
fn grid_stride_loop_with_few_blocks() {
    let exec = host();
    let mut rng = common::rng("grid_stride_loop_with_few_blocks");
    for (opt, ptx) in SIMT {
        let k = load::<(P<u32>, P<u32>, P<u32>, P<u32>, i32)>(&exec, ptx, "grid_stride_dot");
        // n: prime, odd, smaller than the grid, one.
        for (n, blocks) in [(10_007usize, 3u32), (4_001, 2), (50, 5), (1, 1)] {
            let x = random_u32s(&mut rng, n, u32::MAX);
            let w = random_u32s(&mut rng, n, u32::MAX);
            let d0 = rng.random::<u32>();
            let (dx, dw, dd) = (upload(&exec, &x), upload(&exec, &w), upload(&exec, &[d0]));
            let y = poisoned(&exec, n + 1, POISON_U32);
            run(
                &exec,
                96,
                blocks,
                &k,
                (dx.ptr(), dw.ptr(), y.ptr(), dd.ptr(), n as i32),
            );
            let want_y: Vec<u32> = (0..n)
                .map(|i| x[i].wrapping_mul(3).wrapping_add(i as u32 % 7))
                .chain([POISON_U32])
                .collect();
            let dot = (0..n).fold(d0, |s, i| s.wrapping_add(x[i].wrapping_mul(w[i])));
            assert_eq!(download(&exec, &y), want_y, "{opt} n={n} blocks={blocks}");
            assert_eq!(
                download(&exec, &dd),
                [dot],
                "{opt} n={n} blocks={blocks}: dot"
            );
        }
    }
}

#[test]
fn odd_block_shapes() {
    let exec = host();
    let mut rng = common::rng("odd_block_shapes");
    for (opt, ptx) in SIMT {
        let k = load::<(P<u32>, P<u32>)>(&exec, ptx, "block_shape_ids");
        // (block, grid): 3-D 5x3x2 (30 threads), 1-D 37 (a 5-lane second warp), 2-D 7x9.
        for (block, grid) in [
            ((5u32, 3u32, 2u32), (2u32, 1u32, 2u32)),
            ((37, 1, 1), (3, 1, 1)),
            ((7, 9, 1), (1, 2, 1)),
        ] {
            let nt = (block.0 * block.1 * block.2) as usize;
            let nb = (grid.0 * grid.1 * grid.2) as usize;
            let x = random_u32s(&mut rng, nt * nb, 1 << 24);
            let dx = upload(&exec, &x);
            let out = poisoned(&exec, 5 * nt * nb, POISON_U32);
            run(&exec, block, grid, &k, (dx.ptr(), out.ptr()));
            let got = download(&exec, &out);
            for b in 0..nb {
                let xs = &x[b * nt..b * nt + nt];
                let sum = xs.iter().fold(0u32, |s, v| s.wrapping_add(*v));
                for t in 0..nt {
                    let lanes = warp_of(t / 32, nt);
                    let live = u32::MAX >> (32 - lanes.len());
                    let odd = lanes
                        .clone()
                        .filter(|&j| xs[j] & 1 == 1)
                        .fold(0u32, |m, j| m | 1 << (j % 32));
                    let (tx, ty, tz) = (
                        t as u32 % block.0,
                        t as u32 / block.0 % block.1,
                        t as u32 / (block.0 * block.1),
                    );
                    let g = b * nt + t;
                    assert_eq!(
                        got[5 * g..5 * g + 5],
                        [tx | ty << 8 | tz << 16, t as u32, odd, live, sum],
                        "{opt} block {block:?} grid {grid:?}: block {b} thread {t}"
                    );
                }
            }
        }
    }
}

#[test]
fn guarded_elementwise_with_odd_n() {
    let exec = host();
    let mut rng = common::rng("guarded_elementwise_with_odd_n");
    for (opt, ptx) in SIMT {
        let k = load::<(P<f32>, P<f32>, P<u32>, f32, i32)>(&exec, ptx, "guarded_axpy");
        for (n, t) in [(1usize, 32u32), (333, 64), (1001, 128), (45, 4)] {
            let x = floats(&mut rng, n, -1e3, 1e3);
            let a = rng.random_range(-4.0f32..4.0);
            let dx = upload(&exec, &x);
            let (y, z) = (
                poisoned(&exec, n + 1, POISON_F32),
                poisoned(&exec, n + 1, POISON_U32),
            );
            // A spare block past the data: every thread of it fails the guard.
            run(
                &exec,
                t,
                blocks_for(n, t) + 1,
                &k,
                (dx.ptr(), y.ptr(), z.ptr(), a, n as i32),
            );
            let (gy, gz) = (download(&exec, &y), download(&exec, &z));
            for i in 0..n {
                // One f32 multiply, rounded once from the exact product: exact.
                let want = (a as f64 * x[i] as f64) as f32;
                assert!(
                    same_f32(gy[i], want),
                    "{opt} n={n} i={i}: {} vs {want}",
                    gy[i]
                );
                assert_eq!(
                    gz[i],
                    x[i].to_bits().wrapping_add(i as u32),
                    "{opt} n={n} i={i}"
                );
            }
            assert_eq!(
                gy[n].to_bits(),
                POISON_F32.to_bits(),
                "{opt} n={n}: y past n"
            );
            assert_eq!(gz[n], POISON_U32, "{opt} n={n}: z past n");
        }
    }
}
