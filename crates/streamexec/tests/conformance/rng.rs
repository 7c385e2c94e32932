//! Philox fills: Random123 known answers on every platform, elements against an independent
//! model (the KAT-checked block function plus std's f64 math), bit-identical output across
//! platforms, and distribution tests (moments, chi-square) with fixed seeds.

use bytemuck::Pod;
use rand::RngExt;
use streamexec::philox::{self, PhiloxStream};
use streamexec::{DeviceMemory, Error, PlatformManager, StreamExecutor};

use crate::common::{POISON_U32, executors, rng};
use crate::on_each_platform;

fn seed_of(key: [u32; 2], hi: [u32; 2]) -> Vec<u8> {
    [key[0], key[1], hi[0], hi[1]]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

fn poisoned<T: Pod>(exec: &StreamExecutor, n: usize) -> DeviceMemory<T> {
    let d = exec.allocate_array::<T>(n).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_memset32(&d, POISON_U32)
        .block_host_until_done()
        .unwrap();
    d
}

fn download<T: Pod>(exec: &StreamExecutor, d: &DeviceMemory<T>) -> Vec<T> {
    let mut out = vec![T::zeroed(); d.len()];
    exec.synchronous_memcpy_d2h(d, &mut out).unwrap();
    out
}

#[test]
fn random123_known_answers_on_every_platform() {
    let kats = [
        (
            [0u32; 2],
            [0u32; 2],
            0u64,
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            [u32::MAX; 2],
            [u32::MAX; 2],
            u64::MAX,
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        (
            [0xa4093822, 0x299f31d0],
            [0x13198a2e, 0x03707344],
            0x85a308d3_243f6a88,
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
        ),
    ];
    on_each_platform(|exec| {
        for (key, hi, counter, want) in kats {
            let out = poisoned::<u32>(exec, 4);
            exec.create_stream()
                .unwrap()
                .then_set_rng_seed(&seed_of(key, hi))
                .then_set_rng_offset(counter)
                .then_populate_rand_uniform(&out)
                .block_host_until_done()
                .unwrap();
            assert_eq!(
                download(exec, &out),
                want,
                "key {key:08x?} counter {counter:#x}"
            );
        }
    });
}

/// One fill of a sequence, as the tests describe it.
#[derive(Clone, Copy, Debug)]
enum Fill {
    U32(usize),
    F32(usize),
    F64(usize),
    G32(usize, f32, f32),
    G64(usize, f64, f64),
}

fn random_fills(r: &mut rand::rngs::StdRng) -> Vec<Fill> {
    (0..12)
        .map(|_| {
            // Long fills span several of the host's parallel chunks (4096 elements).
            let n = [
                1,
                2,
                3,
                5,
                r.random_range(1..3000),
                r.random_range(4000..20000),
            ][r.random_range(0..6)];
            match r.random_range(0..5) {
                0 => Fill::U32(n),
                1 => Fill::F32(n),
                2 => Fill::F64(n),
                3 => Fill::G32(n, r.random_range(-5.0..5.0), r.random_range(0.0..3.0)),
                _ => Fill::G64(n, r.random_range(-5.0..5.0), r.random_range(0.0..3.0)),
            }
        })
        .collect()
}

/// Runs `fills` after seeding with `seed`; each fill's bytes.
fn run_fills(exec: &StreamExecutor, seed: &[u8], fills: &[Fill]) -> Vec<Vec<u8>> {
    let mut s = exec.create_stream().unwrap();
    s.then_set_rng_seed(seed);
    enum Buf {
        U(DeviceMemory<u32>),
        F(DeviceMemory<f32>),
        D(DeviceMemory<f64>),
    }
    let bufs: Vec<Buf> = fills
        .iter()
        .map(|f| match *f {
            Fill::U32(n) => {
                let d = poisoned::<u32>(exec, n);
                s.then_populate_rand_uniform(&d);
                Buf::U(d)
            }
            Fill::F32(n) => {
                let d = poisoned::<f32>(exec, n);
                s.then_populate_rand_uniform(&d);
                Buf::F(d)
            }
            Fill::F64(n) => {
                let d = poisoned::<f64>(exec, n);
                s.then_populate_rand_uniform(&d);
                Buf::D(d)
            }
            Fill::G32(n, m, sd) => {
                let d = poisoned::<f32>(exec, n);
                s.then_populate_rand_gaussian(m, sd, &d);
                Buf::F(d)
            }
            Fill::G64(n, m, sd) => {
                let d = poisoned::<f64>(exec, n);
                s.then_populate_rand_gaussian(m, sd, &d);
                Buf::D(d)
            }
        })
        .collect();
    s.block_host_until_done().unwrap();
    bufs.iter()
        .map(|b| match b {
            Buf::U(d) => bytemuck::cast_slice(&download(exec, d)).to_vec(),
            Buf::F(d) => bytemuck::cast_slice(&download(exec, d)).to_vec(),
            Buf::D(d) => bytemuck::cast_slice(&download(exec, d)).to_vec(),
        })
        .collect()
}

/// Word `j` of the stream from block `offset` on, from the KAT-checked block function.
fn word(key: [u32; 2], hi: [u32; 2], offset: u64, j: u64) -> u32 {
    let c = offset.wrapping_add(j / 4);
    philox::philox4x32_10([c as u32, (c >> 32) as u32, hi[0], hi[1]], key)[(j % 4) as usize]
}

fn u53(lo: u32, hi: u32) -> f64 {
    (((u64::from(hi) << 32) | u64::from(lo)) >> 11) as f64 / 2f64.powi(53)
}

/// Checks one fill's bytes against the model: exact for raw and uniform values, std's
/// ln/cos/sin within a few units in the last place for gaussians.
fn check_fill(bytes: &[u8], f: Fill, key: [u32; 2], hi: [u32; 2], offset: u64) {
    let w = |j: usize| word(key, hi, offset, j as u64);
    let normal = |u1: f64, t: f64| {
        let r = (-2.0 * u1.ln()).sqrt();
        let a = 2.0 * std::f64::consts::PI * t;
        (r * a.cos(), r * a.sin())
    };
    match f {
        Fill::U32(n) => {
            let v: &[u32] = bytemuck::cast_slice(bytes);
            assert_eq!(v.len(), n);
            for (i, x) in v.iter().enumerate() {
                assert_eq!(*x, w(i), "u32 element {i} of {f:?}");
            }
        }
        Fill::F32(_) => {
            for (i, x) in bytemuck::cast_slice::<u8, f32>(bytes).iter().enumerate() {
                let want = (w(i) >> 8) as f32 / 16_777_216.0;
                assert_eq!(x.to_bits(), want.to_bits(), "f32 element {i} of {f:?}");
                assert!((0.0..1.0).contains(x));
            }
        }
        Fill::F64(_) => {
            for (i, x) in bytemuck::cast_slice::<u8, f64>(bytes).iter().enumerate() {
                let want = u53(w(2 * i), w(2 * i + 1));
                assert_eq!(x.to_bits(), want.to_bits(), "f64 element {i} of {f:?}");
            }
        }
        Fill::G32(_, m, sd) => {
            for (i, x) in bytemuck::cast_slice::<u8, f32>(bytes).iter().enumerate() {
                let p = i / 2;
                let u1 = f64::from((w(2 * p) >> 8) + 1) / 16_777_216.0;
                let t = f64::from(w(2 * p + 1) >> 8) / 16_777_216.0;
                let z = normal(u1, t);
                let want = f64::from(m) + f64::from(sd) * if i % 2 == 0 { z.0 } else { z.1 };
                let tol = 1.5 * f64::from(f32::EPSILON) * want.abs().max(1e-30) + 1e-12;
                assert!(
                    (f64::from(*x) - want).abs() <= tol,
                    "gaussian f32 {i} of {f:?}"
                );
            }
        }
        Fill::G64(_, m, sd) => {
            for (i, x) in bytemuck::cast_slice::<u8, f64>(bytes).iter().enumerate() {
                let p = i / 2;
                let u1 = u53(w(4 * p), w(4 * p + 1)) + 1.0 / 2f64.powi(53);
                let z = normal(u1, u53(w(4 * p + 2), w(4 * p + 3)));
                let want = m + sd * if i % 2 == 0 { z.0 } else { z.1 };
                assert!(
                    (x - want).abs() <= 1e-13 * (1.0 + m.abs() + sd * 10.0),
                    "{i} of {f:?}"
                );
            }
        }
    }
}

fn per_block(f: Fill) -> (usize, u64) {
    match f {
        Fill::U32(n) | Fill::F32(n) | Fill::G32(n, ..) => (n, 4),
        Fill::F64(n) | Fill::G64(n, ..) => (n, 2),
    }
}

#[test]
fn fills_match_the_model_and_advance_the_offset() {
    on_each_platform(|exec| {
        let mut r = rng("fills_match_the_model_and_advance_the_offset");
        let seed: Vec<u8> = (0..r.random_range(16..40)).map(|_| r.random()).collect();
        let (key, hi) = philox::seed_words(&seed);
        let fills = random_fills(&mut r);
        let got = run_fills(exec, &seed, &fills);
        let mut offset = 0u64;
        for (bytes, f) in got.iter().zip(&fills) {
            check_fill(bytes, *f, key, hi, offset);
            let (n, per) = per_block(*f);
            offset += (n as u64).div_ceil(per);
        }
    });
}

#[test]
fn every_platform_produces_the_same_bits() {
    let mut r = rng("every_platform_produces_the_same_bits");
    let seed: Vec<u8> = (0..16).map(|_| r.random()).collect();
    let fills = random_fills(&mut r);
    // The pure-Rust definition, computed without any platform.
    let mut offset = 0;
    let reference: Vec<Vec<u8>> = fills
        .iter()
        .map(|f| {
            let (key, counter_hi) = philox::seed_words(&seed);
            let ps = PhiloxStream {
                key,
                counter_hi,
                offset,
            };
            let (dist, size) = match *f {
                Fill::U32(_) => (streamexec::RandDistribution::U32, 4),
                Fill::F32(_) => (streamexec::RandDistribution::UniformF32, 4),
                Fill::F64(_) => (streamexec::RandDistribution::UniformF64, 8),
                Fill::G32(_, m, sd) => (
                    streamexec::RandDistribution::GaussianF32 {
                        mean: m.into(),
                        stddev: sd.into(),
                    },
                    4,
                ),
                Fill::G64(_, mean, stddev) => (
                    streamexec::RandDistribution::GaussianF64 { mean, stddev },
                    8,
                ),
            };
            let (n, per) = per_block(*f);
            let mut out = vec![0u8; n * size];
            philox::generate(&ps, dist, 0, &mut out);
            offset += (n as u64).div_ceil(per);
            out
        })
        .collect();
    let execs = executors();
    for exec in &execs {
        let got = run_fills(exec, &seed, &fills);
        for (i, (g, want)) in got.iter().zip(&reference).enumerate() {
            assert!(
                g == want,
                "{}: fill {i} ({:?}) differs from the reference bits",
                exec.platform_name(),
                fills[i]
            );
        }
    }
    if PlatformManager::platform_with_name("opencl").is_ok() {
        assert!(execs.iter().any(|e| e.platform_name() == "opencl"));
    }
}

/// Chi-square statistic of `counts` against `expected` probabilities.
fn chi_square(counts: &[u64], expected: &[f64]) -> f64 {
    let total: u64 = counts.iter().sum();
    counts
        .iter()
        .zip(expected)
        .map(|(&c, &p)| {
            let e = p * total as f64;
            (c as f64 - e).powi(2) / e
        })
        .sum()
}

fn normal_probability(a: f64, b: f64) -> f64 {
    // Simpson's rule on the density; exact to ~1e-12 on these bins.
    let pdf = |x: f64| (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let n = 64;
    let h = (b - a) / n as f64;
    let inner: f64 = (1..n)
        .map(|i| pdf(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    (pdf(a) + pdf(b) + inner) * h / 3.0
}

#[test]
fn distributions_pass_moment_and_chi_square_tests() {
    const N: usize = 1 << 20;
    on_each_platform(|exec| {
        let u = exec.allocate_array::<f32>(N).unwrap();
        let w = exec.allocate_array::<u32>(N).unwrap();
        let g = exec.allocate_array::<f32>(N).unwrap();
        let ud = exec.allocate_array::<f64>(N).unwrap();
        let gd = exec.allocate_array::<f64>(N).unwrap();
        exec.create_stream()
            .unwrap()
            .then_set_rng_seed(b"streamexec fixed seed for stats")
            .then_populate_rand_uniform(&u)
            .then_populate_rand_uniform(&w)
            .then_populate_rand_gaussian(0.0f32, 1.0, &g)
            .then_populate_rand_uniform(&ud)
            .then_populate_rand_gaussian(3.0f64, 2.0, &gd)
            .block_host_until_done()
            .unwrap();
        let moments = |v: Vec<f64>| {
            let n = v.len() as f64;
            let mean = v.iter().sum::<f64>() / n;
            (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
        };
        let (u, g) = (download(exec, &u), download(exec, &g));
        // Bounds are about five standard errors for 2²⁰ samples.
        let (m, v) = moments(u.iter().map(|&x| f64::from(x)).collect());
        assert!(
            (m - 0.5).abs() < 1.5e-3 && (v - 1.0 / 12.0).abs() < 1e-3,
            "{m} {v}"
        );
        let (m, v) = moments(download(exec, &ud));
        assert!(
            (m - 0.5).abs() < 1.5e-3 && (v - 1.0 / 12.0).abs() < 1e-3,
            "{m} {v}"
        );
        let (m, v) = moments(g.iter().map(|&x| f64::from(x)).collect());
        assert!(
            m.abs() < 5e-3 && (v - 1.0).abs() < 7e-3,
            "gaussian f32 {m} {v}"
        );
        let (m, v) = moments(download(exec, &gd));
        assert!(
            (m - 3.0).abs() < 1e-2 && (v - 4.0).abs() < 2.8e-2,
            "gaussian f64 {m} {v}"
        );

        // Uniform f32 in 100 bins: 99 degrees of freedom, 148.2 is the 0.999 quantile.
        let mut bins = vec![0u64; 100];
        u.iter().for_each(|&x| bins[(x * 100.0) as usize] += 1);
        let chi = chi_square(&bins, &[0.01; 100]);
        assert!(chi < 148.2, "uniform f32 chi-square {chi}");
        // Top byte of u32 words: 255 degrees of freedom, 0.999 quantile 330.5.
        let mut bins = vec![0u64; 256];
        download(exec, &w)
            .iter()
            .for_each(|&x| bins[(x >> 24) as usize] += 1);
        let chi = chi_square(&bins, &[1.0 / 256.0; 256]);
        assert!(chi < 330.5, "u32 chi-square {chi}");
        // Gaussian in 32 bins of 0.25 over [-4, 4) plus two tails: 33 dof, quantile 63.9.
        let mut bins = vec![0u64; 34];
        for &x in &g {
            let b = ((f64::from(x) + 4.0) / 0.25).floor();
            bins[(b.clamp(-1.0, 32.0) + 1.0) as usize] += 1;
        }
        let tail = 0.5 - normal_probability(0.0, 4.0);
        let mut p = vec![tail];
        p.extend((0..32).map(|i| {
            let a = -4.0 + 0.25 * i as f64;
            normal_probability(a, a + 0.25)
        }));
        p.push(tail);
        let chi = chi_square(&bins, &p);
        assert!(chi < 63.9, "gaussian chi-square {chi}");
    });
}

#[test]
fn rng_misuse_is_an_error_not_a_panic() {
    on_each_platform(|exec| {
        let d = exec.allocate_array::<f32>(8).unwrap();
        let mut s = exec.create_stream().unwrap();
        let err = s
            .then_set_rng_seed(&[1; 15])
            .block_host_until_done()
            .unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { detail, .. } if detail.contains("16")),
            "{err}"
        );
        let mut s = exec.create_stream().unwrap();
        let err = s
            .then_populate_rand_uniform(&d)
            .block_host_until_done()
            .unwrap_err();
        assert!(err.to_string().contains("then_set_rng_seed first"), "{err}");
        for (m, sd) in [(0.0, -1.0), (f32::NAN, 1.0), (0.0, f32::INFINITY)] {
            let mut s = exec.create_stream().unwrap();
            let err = s
                .then_set_rng_seed(&[7; 16])
                .then_populate_rand_gaussian(m, sd, &d)
                .block_host_until_done()
                .unwrap_err();
            assert!(err.to_string().contains("stddev"), "{err}");
        }
        // An empty fill is fine and uses no blocks: the next fill is the stream's first block.
        let w = exec.allocate_array::<u32>(4).unwrap();
        exec.create_stream()
            .unwrap()
            .then_set_rng_seed(&[0; 16])
            .then_populate_rand_uniform(w.slice(0..0).unwrap())
            .then_populate_rand_uniform(&w)
            .block_host_until_done()
            .unwrap();
        assert_eq!(download(exec, &w)[0], 0x6627e8d5);
    });
}
