//! FFT plans through the stream, against an f64 DFT written here (direct O(n²) per line, each
//! axis in turn) on random inputs. Outputs start poisoned (NaN bits), input gaps hold NaN too
//! (a backend that reads them spoils its results), and after an out-of-place transform every
//! output element the layout does not address must still hold its poison bits.
//!
//! Accuracy: the relative RMS error over all outputs of a call is at most
//! `C · max(1, log2 N) · ε`, N the product of the sizes, ε the type's machine epsilon, C = 5
//! (FFTs' error grows as O(ε·log N); Bluestein and Rader paths stay within that constant).
//!
//! A platform without FFT support (plan creation fails with `Unsupported`) is skipped with a
//! note; every other platform runs every case, once per FFT plugin it has
//! ([`on_each_fft_plugin`]: the built-in implementation, and cuFFT where it loads). The checks of plans and calls are in
//! fft_errors.rs.

use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{
    DeviceMemory, Error, FftDirection, FftElement, FftLayout, FftPair, FftPlan, FftPlanSpec,
    PluginFamily, StreamExecutor,
};

use crate::common::{POISON_F32_BITS, rng};
use crate::plugins::{executors_per_plugin, on_each};

use FftDirection::{Forward, Inverse};

/// The error constant C of the module docs.
const C: f64 = 5.0;

/// What the tests need of the four element types.
pub(crate) trait El: FftElement + std::fmt::Debug {
    const EPS: f64;
    fn of(re: f64, im: f64) -> Self;
    fn parts(self) -> (f64, f64);
    fn poison() -> Self;
    fn is_poison(self) -> bool;
}
macro_rules! real_el {
    ($t:ty, $poison:expr) => {
        impl El for $t {
            const EPS: f64 = <$t>::EPSILON as f64;
            fn of(re: f64, _: f64) -> Self {
                re as $t
            }
            fn parts(self) -> (f64, f64) {
                (self as f64, 0.0)
            }
            fn poison() -> Self {
                <$t>::from_bits($poison)
            }
            fn is_poison(self) -> bool {
                self.to_bits() == $poison
            }
        }
        impl El for [$t; 2] {
            const EPS: f64 = <$t>::EPSILON as f64;
            fn of(re: f64, im: f64) -> Self {
                [re as $t, im as $t]
            }
            fn parts(self) -> (f64, f64) {
                (self[0] as f64, self[1] as f64)
            }
            fn poison() -> Self {
                [<$t>::poison(), <$t>::poison()]
            }
            fn is_poison(self) -> bool {
                self[0].is_poison() && self[1].is_poison()
            }
        }
    };
}
real_el!(f32, POISON_F32_BITS);
real_el!(f64, 0x7FF4_DEAD_BEEF_DEAD);

type Cx = (f64, f64);

/// Every index of `shape`, the last varying fastest.
fn indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![vec![]];
    for &n in shape {
        out = out
            .into_iter()
            .flat_map(|p| (0..n).map(move |i| [p.clone(), vec![i]].concat()))
            .collect();
    }
    out
}

/// The f64 DFT of packed `x` (shape `shape`) along every axis; `sign` −1 forward, +1 inverse.
fn dft(x: &[Cx], shape: &[u64], sign: f64) -> Vec<Cx> {
    let mut a = x.to_vec();
    for d in 0..shape.len() {
        let n = shape[d] as usize;
        let inner: usize = shape[d + 1..].iter().product::<u64>() as usize;
        let tw: Vec<Cx> = (0..n)
            .map(|k| {
                let t = sign * 2.0 * std::f64::consts::PI * k as f64 / n as f64;
                (t.cos(), t.sin())
            })
            .collect();
        let mut line = vec![(0.0, 0.0); n];
        for block in a.chunks_mut(n * inner) {
            for j in 0..inner {
                for (k, out) in line.iter_mut().enumerate() {
                    let mut s = (0.0, 0.0);
                    for (m, v) in (0..n).map(|m| (m, block[m * inner + j])) {
                        let w = tw[(k * m) % n];
                        s.0 += v.0 * w.0 - v.1 * w.1;
                        s.1 += v.0 * w.1 + v.1 * w.0;
                    }
                    *out = s;
                }
                for (m, v) in line.iter().enumerate() {
                    block[m * inner + j] = *v;
                }
            }
        }
    }
    a
}

/// The complex side's shape of a real transform of `dims`.
fn half(dims: &[u64]) -> Vec<u64> {
    let mut s = dims.to_vec();
    *s.last_mut().unwrap() = s.last().unwrap() / 2 + 1;
    s
}

/// `x`'s R2C (f64): the full DFT, cut to `n/2 + 1` along the last axis.
fn r2c_ref(x: &[Cx], dims: &[u64]) -> Vec<Cx> {
    let full = dft(x, dims, -1.0);
    let (n, h) = (
        *dims.last().unwrap() as usize,
        half(dims)[dims.len() - 1] as usize,
    );
    full.chunks(n).flat_map(|row| row[..h].to_vec()).collect()
}

/// One case: sizes, batch, layouts (packed when `None`), direction, in place or not.
#[derive(Clone, Debug)]
struct Case {
    dims: Vec<u64>,
    batch: u64,
    input: Option<FftLayout>,
    output: Option<FftLayout>,
    direction: FftDirection,
    in_place: bool,
}

fn case(dims: &[u64], batch: u64, direction: FftDirection) -> Case {
    Case {
        dims: dims.to_vec(),
        batch,
        input: None,
        output: None,
        direction,
        in_place: false,
    }
}

fn spec(c: &Case) -> FftPlanSpec {
    let dims: Vec<usize> = c.dims.iter().map(|&d| d as usize).collect();
    let mut s = FftPlanSpec::new(&dims).batch(c.batch as usize);
    if let Some(l) = &c.input {
        s = s.input_layout(l.clone());
    }
    if let Some(l) = &c.output {
        s = s.output_layout(l.clone());
    }
    if c.in_place {
        s = s.padded_real();
    }
    s
}

/// Runs `test` on device 0 of every platform under test once per FFT plugin it has:
/// `Plugin::Builtin`, and `Plugin::Vendor` where the vendor library loads (cuFFT on a CUDA
/// machine that has it; required where `STREAMEXEC_REQUIRE_PLUGINS` names it, e.g. `cufft`),
/// as `blas::on_each_blas_plugin` does for BLAS.
pub fn on_each_fft_plugin(test: impl Fn(&StreamExecutor)) {
    static EXECUTORS: std::sync::OnceLock<Vec<StreamExecutor>> = std::sync::OnceLock::new();
    let executors = EXECUTORS.get_or_init(|| executors_per_plugin(PluginFamily::Fft));
    on_each(executors, PluginFamily::Fft, test);
}

/// Whether `exec` plans FFTs at all (a platform without FFT support is skipped, with a note).
pub(crate) fn has_fft(exec: &StreamExecutor) -> bool {
    match exec.create_fft_plan::<[f32; 2], [f32; 2]>(&FftPlanSpec::new(&[8])) {
        Err(Error::Unsupported { reason, .. }) => {
            eprintln!(
                "note: {} has no FFT ({reason}); skipped",
                exec.platform_name()
            );
            false
        }
        other => {
            other.unwrap();
            true
        }
    }
}

/// Runs `c` for a transform of `I` into `O` on `exec` and checks it against the reference.
fn check<I: FftPair<O> + El, O: El>(exec: &StreamExecutor, r: &mut StdRng, c: &Case) {
    let plan: FftPlan<I, O> = exec
        .create_fft_plan(&spec(c))
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let d = plan.desc().clone();
    let (in_shape, out_shape) = (d.input_shape(), d.output_shape());
    let n_total: u64 = c.dims.iter().product();
    // Input: NaN everywhere, then each batch's logical values at their layout's places.
    let in_len = if c.in_place {
        let out_bytes = plan.output_len() * size_of::<O>();
        plan.input_len()
            .max(out_bytes.div_ceil(size_of::<I>()))
            .next_multiple_of(2)
    } else {
        plan.input_len()
    };
    let mut host_in = vec![I::poison(); in_len];
    let mut expected: Vec<Vec<Cx>> = Vec::new();
    for b in 0..c.batch {
        let (values, want): (Vec<Cx>, Vec<Cx>) = if I::COMPLEX && O::COMPLEX {
            let x: Vec<Cx> = (0..in_shape.iter().product::<u64>())
                .map(|_| I::of(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0)).parts())
                .collect();
            let sign = if c.direction == Forward { -1.0 } else { 1.0 };
            let y = dft(&x, &c.dims, sign);
            (x, y)
        } else {
            // Reals rounded to the type; C2R's input is their (Hermitian) spectrum and its
            // expected output the reals scaled by N.
            let x: Vec<Cx> = (0..c.dims.iter().product::<u64>())
                .map(|_| (O::of(r.random_range(-1.0..1.0), 0.0).parts().0, 0.0))
                .collect();
            if I::COMPLEX {
                let n = n_total as f64;
                (
                    r2c_ref(&x, &c.dims),
                    x.iter().map(|v| (v.0 * n, 0.0)).collect(),
                )
            } else {
                (x.clone(), r2c_ref(&x, &c.dims))
            }
        };
        for (idx, v) in indices(&in_shape).iter().zip(&values) {
            host_in[d.input.offset(b, idx) as usize] = I::of(v.0, v.1);
        }
        expected.push(want);
    }
    let got: Vec<O> = if c.in_place {
        let data = exec.copy_to_device(&host_in).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_fft_inplace(&plan, c.direction, &data);
        s.block_host_until_done()
            .unwrap_or_else(|e| panic!("{c:?}: {e}"));
        bytemuck::pod_collect_to_vec(&exec.copy_to_vec(&data).unwrap())
    } else {
        let din = exec.copy_to_device(&host_in).unwrap();
        let dout: DeviceMemory<O> = exec
            .copy_to_device(&vec![O::poison(); plan.output_len()])
            .unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_fft(&plan, c.direction, &din, &dout);
        s.block_host_until_done()
            .unwrap_or_else(|e| panic!("{c:?}: {e}"));
        exec.copy_to_vec(&dout).unwrap()
    };
    let (mut err, mut norm) = (0.0f64, 0.0f64);
    let mut written = vec![false; got.len()];
    for (b, want) in expected.iter().enumerate() {
        for (idx, w) in indices(&out_shape).iter().zip(want) {
            let at = d.output.offset(b as u64, idx) as usize;
            written[at] = true;
            let g = got[at].parts();
            err += (g.0 - w.0).powi(2) + (g.1 - w.1).powi(2);
            norm += w.0 * w.0 + w.1 * w.1;
        }
    }
    let rel = (err / norm.max(f64::MIN_POSITIVE)).sqrt();
    let bound = C * (n_total as f64).log2().max(1.0) * O::EPS;
    eprintln!("   {c:?}: relative RMS error {rel:.2e} (bound {bound:.2e})");
    assert!(
        rel <= bound,
        "{c:?}: relative RMS error {rel:.3e} > {bound:.3e}"
    );
    if !c.in_place {
        for (i, (v, w)) in got.iter().zip(&written).enumerate() {
            assert!(
                *w || v.is_poison(),
                "{c:?}: output[{i}] = {v:?} is outside the layout"
            );
        }
    }
}

/// Runs `cases` as C2C in both precisions.
fn c2c(exec: &StreamExecutor, r: &mut StdRng, cases: &[Case]) {
    for c in cases {
        check::<[f32; 2], [f32; 2]>(exec, r, c);
        check::<[f64; 2], [f64; 2]>(exec, r, c);
    }
}

/// Runs `cases` as R2C (forward) and C2R (inverse) in both precisions; layouts given in a case
/// are the R2C's (real input, complex output) and swap sides for the C2R.
fn real(exec: &StreamExecutor, r: &mut StdRng, cases: &[Case]) {
    for c in cases {
        let fwd = Case {
            direction: Forward,
            ..c.clone()
        };
        let inv = Case {
            direction: Inverse,
            input: c.output.clone(),
            output: c.input.clone(),
            ..c.clone()
        };
        check::<f32, [f32; 2]>(exec, r, &fwd);
        check::<f64, [f64; 2]>(exec, r, &fwd);
        check::<[f32; 2], f32>(exec, r, &inv);
        check::<[f64; 2], f64>(exec, r, &inv);
    }
}

/// 1-D sizes: powers of 2, products of 3, 5 and 7, primes (Rader/Bluestein paths).
const SIZES_1D: &[u64] = &[1, 2, 3, 8, 64, 1024, 15, 105, 210, 17, 97, 1009];

#[test]
fn fft_c2c_1d_matches_the_f64_dft() {
    on_each_fft_plugin(|exec| {
        if !has_fft(exec) {
            return;
        }
        let mut r = rng("fft_c2c_1d_matches_the_f64_dft");
        let cases: Vec<Case> = SIZES_1D
            .iter()
            .flat_map(|&n| {
                let batch = if n <= 105 { 3 } else { 1 };
                [case(&[n], batch, Forward), case(&[n], batch, Inverse)]
            })
            // Enough rows that a backend splits them across threads.
            .chain([case(&[64], 600, Forward)])
            .collect();
        c2c(exec, &mut r, &cases);
    });
}

#[test]
fn fft_real_1d_matches_the_f64_dft() {
    on_each_fft_plugin(|exec| {
        if !has_fft(exec) {
            return;
        }
        let mut r = rng("fft_real_1d_matches_the_f64_dft");
        let cases: Vec<Case> = [1, 2, 3, 16, 15, 105, 128, 17, 97, 1009, 1024]
            .iter()
            .map(|&n| case(&[n], if n <= 128 { 2 } else { 1 }, Forward))
            .chain([case(&[64], 600, Forward)])
            .collect();
        real(exec, &mut r, &cases);
    });
}

#[test]
fn fft_2d_and_3d_batched_match_the_f64_dft() {
    on_each_fft_plugin(|exec| {
        if !has_fft(exec) {
            return;
        }
        let mut r = rng("fft_2d_and_3d_batched_match_the_f64_dft");
        let shapes: &[&[u64]] = &[
            &[8, 16],
            &[12, 20],
            &[17, 6],
            &[1, 9],
            &[4, 6, 10],
            &[3, 5, 7],
            &[2, 1, 8],
        ];
        for dims in shapes {
            c2c(
                exec,
                &mut r,
                &[case(dims, 2, Forward), case(dims, 1, Inverse)],
            );
            real(exec, &mut r, &[case(dims, 2, Forward)]);
        }
        // Enough rows that a backend splits them across threads.
        c2c(exec, &mut r, &[case(&[128, 160], 1, Forward)]);
        real(exec, &mut r, &[case(&[128, 160], 1, Forward)]);
    });
}

#[test]
fn fft_strided_and_embedded_layouts() {
    on_each_fft_plugin(|exec| {
        if !has_fft(exec) {
            return;
        }
        let mut r = rng("fft_strided_and_embedded_layouts");
        let l = FftLayout::new;
        let with = |dims: &[u64], batch, i: FftLayout, o: FftLayout| Case {
            input: Some(i),
            output: Some(o),
            ..case(dims, batch, Forward)
        };
        c2c(
            exec,
            &mut r,
            &[
                // Strided elements, gaps between batches.
                with(&[24], 3, l(&[24], 2, 53), l(&[24], 3, 75)),
                // Interleaved batches: element j of batch b at j·4 + b.
                with(&[16], 4, l(&[16], 4, 1), l(&[16], 4, 1)),
                // Rows inside wider storage, strided output.
                with(&[6, 10], 2, l(&[7, 13], 1, 100), l(&[6, 12], 2, 150)),
                with(&[3, 4, 5], 2, l(&[3, 5, 6], 1, 95), l(&[9, 4, 7], 3, 300)),
            ],
        );
        real(
            exec,
            &mut r,
            &[
                with(&[30], 3, l(&[30], 2, 61), l(&[16], 1, 17)),
                with(&[6, 9], 2, l(&[6, 11], 1, 70), l(&[6, 7], 1, 45)),
                with(&[3, 4, 6], 2, l(&[3, 4, 8], 1, 100), l(&[3, 5, 4], 2, 130)),
                with(&[8], 3, l(&[8], 3, 1), l(&[5], 3, 1)),
            ],
        );
    });
}

#[test]
fn fft_in_place() {
    on_each_fft_plugin(|exec| {
        if !has_fft(exec) {
            return;
        }
        let mut r = rng("fft_in_place");
        let inplace = |dims: &[u64], batch, dir| Case {
            in_place: true,
            ..case(dims, batch, dir)
        };
        c2c(
            exec,
            &mut r,
            &[
                inplace(&[64], 2, Forward),
                inplace(&[97], 1, Inverse),
                inplace(&[8, 12], 2, Inverse),
                Case {
                    input: Some(FftLayout::new(&[16], 4, 1)),
                    output: Some(FftLayout::new(&[16], 4, 1)),
                    ..inplace(&[16], 4, Forward)
                },
            ],
        );
        real(
            exec,
            &mut r,
            &[
                inplace(&[30], 3, Forward),
                inplace(&[31], 2, Forward),
                inplace(&[6, 10], 2, Forward),
                inplace(&[4, 4, 7], 1, Forward),
            ],
        );
    });
}

#[test]
fn fft_forward_then_inverse_scales_by_n() {
    on_each_fft_plugin(|exec| {
        if !has_fft(exec) {
            return;
        }
        let mut r = rng("fft_forward_then_inverse_scales_by_n");
        for dims in [
            &[1usize << 14][..],
            &[3 * 5 * 7 * 11],
            &[32, 48],
            &[128, 256],
            &[6, 10, 14],
        ] {
            let n: usize = dims.iter().product();
            let x: Vec<[f32; 2]> = (0..2 * n)
                .map(|_| [r.random_range(-1.0..1.0), r.random_range(-1.0..1.0)])
                .collect();
            let reals: Vec<f64> = (0..2 * n).map(|_| r.random_range(-1.0..1.0)).collect();
            let cplan = exec
                .create_fft_plan::<[f32; 2], [f32; 2]>(&FftPlanSpec::new(dims).batch(2))
                .unwrap();
            let fwd = exec
                .create_fft_plan::<f64, [f64; 2]>(&FftPlanSpec::new(dims).batch(2))
                .unwrap();
            let inv = exec
                .create_fft_plan::<[f64; 2], f64>(&FftPlanSpec::new(dims).batch(2))
                .unwrap();
            let dx = exec.copy_to_device(&x).unwrap();
            let dy = exec
                .copy_to_device(&vec![<[f32; 2]>::poison(); 2 * n])
                .unwrap();
            let dz = exec
                .copy_to_device(&vec![<[f32; 2]>::poison(); 2 * n])
                .unwrap();
            let dr = exec.copy_to_device(&reals).unwrap();
            let dh = exec
                .copy_to_device(&vec![<[f64; 2]>::poison(); fwd.output_len()])
                .unwrap();
            let dq = exec.copy_to_device(&vec![f64::poison(); 2 * n]).unwrap();
            let mut s = exec.create_stream().unwrap();
            s.then_fft(&cplan, Forward, &dx, &dy)
                .then_fft(&cplan, Inverse, &dy, &dz)
                .then_fft(&fwd, Forward, &dr, &dh)
                .then_fft(&inv, Inverse, &dh, &dq)
                .block_host_until_done()
                .unwrap();
            let rel = |got: Vec<Cx>, want: Vec<Cx>| {
                let e: f64 = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| (g.0 - w.0).powi(2) + (g.1 - w.1).powi(2))
                    .sum();
                let s: f64 = want.iter().map(|w| w.0 * w.0 + w.1 * w.1).sum();
                (e / s).sqrt()
            };
            let nf = n as f64;
            let z = exec.copy_to_vec(&dz).unwrap();
            let ec = rel(
                z.iter().map(|v| v.parts()).collect(),
                x.iter()
                    .map(|v| (v.parts().0 * nf, v.parts().1 * nf))
                    .collect(),
            );
            let q = exec.copy_to_vec(&dq).unwrap();
            let er = rel(
                q.iter().map(|v| (*v, 0.0)).collect(),
                reals.iter().map(|v| (v * nf, 0.0)).collect(),
            );
            let log = nf.log2();
            eprintln!("   {dims:?}: round trip errors {ec:.2e} (f32 C2C), {er:.2e} (f64 real)");
            assert!(
                ec <= 2.0 * C * log * f64::from(f32::EPSILON),
                "{dims:?} C2C: {ec:.3e}"
            );
            assert!(
                er <= 2.0 * C * log * f64::EPSILON,
                "{dims:?} R2C/C2R: {er:.3e}"
            );
        }
    });
}
