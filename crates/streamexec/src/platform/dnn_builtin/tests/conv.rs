//! Convolution forward, backward data and backward filter against one f64 loop over every tap,
//! and the tensor-layout helpers the other operation checks share.

use streamexec_test_support::rand::RngExt;
use streamexec_test_support::rand::rngs::StdRng;

use super::{A, El, Rig, close, host, on_every_platform, optional, uniform};

/// Element strides (n, c, h, w) of a dense tensor of `dims` (n, c, h, w), NCHW or NHWC.
pub(super) fn strides(dims: [u64; 4], nhwc: bool) -> [u64; 4] {
    let [_, c, h, w] = dims;
    if nhwc {
        [h * w * c, 1, w * c, c]
    } else {
        [c * h * w, h * w, w, 1]
    }
}

/// Every (n, c, h, w) of `dims`, row-major.
pub(super) fn indices(dims: [u64; 4]) -> impl Iterator<Item = [u64; 4]> {
    let [n, c, h, w] = dims;
    (0..n).flat_map(move |a| {
        (0..c).flat_map(move |b| (0..h).flat_map(move |d| (0..w).map(move |e| [a, b, d, e])))
    })
}

/// The offset of `i` for `s`.
pub(super) fn at(i: [u64; 4], s: [u64; 4]) -> usize {
    (i[0] * s[0] + i[1] * s[1] + i[2] * s[2] + i[3] * s[3]) as usize
}

/// The logical (row-major) tensor `v` of `dims` laid out with strides `s` (no gaps for dense
/// strides).
pub(super) fn lay<T: El>(v: &[f64], dims: [u64; 4], s: [u64; 4]) -> Vec<T> {
    let mut out = vec![T::poison(); v.len()];
    for (k, i) in indices(dims).enumerate() {
        out[at(i, s)] = T::of(v[k]);
    }
    out
}

/// The logical tensor of `dims` read from `buf` with strides `s`.
pub(super) fn read<T: El>(buf: &[T], dims: [u64; 4], s: [u64; 4]) -> Vec<f64> {
    indices(dims).map(|i| buf[at(i, s)].get()).collect()
}

/// `v` rounded to `T` and back (what the kernels see of an f64 input).
pub(super) fn round<T: El>(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| T::of(x).get()).collect()
}

/// One convolution's geometry and layouts.
#[derive(Clone, Debug)]
struct Conv {
    x: [u64; 4],
    k: u64,
    r: u64,
    s: u64,
    pad: [i64; 2],
    stride: [i64; 2],
    dil: [i64; 2],
    groups: u64,
    nhwc: bool,
    krsc: bool,
}

impl Conv {
    fn out(&self) -> [u64; 4] {
        let o = |i: u64, f: u64, a: usize| {
            (i as i64 + 2 * self.pad[a] - self.dil[a] * (f as i64 - 1) - 1) / self.stride[a] + 1
        };
        [
            self.x[0],
            self.k,
            o(self.x[2], self.r, 0) as u64,
            o(self.x[3], self.s, 1) as u64,
        ]
    }
    fn cg(&self) -> u64 {
        self.x[1] / self.groups
    }
    fn fdims(&self) -> [u64; 4] {
        [self.k, self.cg(), self.r, self.s]
    }
    fn fstrides(&self) -> [u64; 4] {
        let [_, c, r, s] = self.fdims();
        if self.krsc {
            [r * s * c, 1, s * c, c]
        } else {
            [c * r * s, r * s, s, 1]
        }
    }
}

/// A random geometry with a valid output.
fn random_conv(rng: &mut StdRng) -> Conv {
    loop {
        let groups = rng.random_range(1..4u64);
        let c = Conv {
            x: [
                rng.random_range(1..3),
                groups * rng.random_range(1..4),
                rng.random_range(1..10),
                rng.random_range(1..10),
            ],
            k: groups * rng.random_range(1..4),
            r: rng.random_range(1..5),
            s: rng.random_range(1..5),
            pad: [rng.random_range(0..4), rng.random_range(0..4)],
            stride: [rng.random_range(1..4), rng.random_range(1..4)],
            dil: [rng.random_range(1..3), rng.random_range(1..3)],
            groups,
            nhwc: rng.random_bool(0.5),
            krsc: rng.random_bool(0.5),
        };
        let o = |i: u64, f: u64, a: usize| i as i64 + 2 * c.pad[a] - c.dil[a] * (f as i64 - 1) > 0;
        if o(c.x[2], c.r, 0) && o(c.x[3], c.s, 1) {
            return c;
        }
    }
}

/// The fixed cases: odd sizes, padding larger than the filter, stride larger than the filter,
/// dilation, depthwise (groups = channels, with and without a channel multiplier), groups = 2,
/// batch 1, both layouts.
fn conv_cases() -> Vec<Conv> {
    let c = |x, k, r, s, pad, stride, dil, groups, nhwc, krsc| Conv {
        x,
        k,
        r,
        s,
        pad,
        stride,
        dil,
        groups,
        nhwc,
        krsc,
    };
    vec![
        c(
            [2, 3, 7, 6],
            4,
            3,
            3,
            [1, 1],
            [1, 1],
            [1, 1],
            1,
            false,
            false,
        ),
        c([1, 4, 5, 5], 6, 2, 3, [3, 4], [1, 2], [1, 1], 2, true, true),
        c(
            [2, 3, 9, 8],
            3,
            3,
            3,
            [1, 0],
            [4, 3],
            [2, 1],
            3,
            false,
            true,
        ),
        c(
            [1, 4, 6, 7],
            8,
            3,
            2,
            [1, 1],
            [1, 1],
            [1, 2],
            4,
            true,
            false,
        ),
        c(
            [1, 2, 6, 7],
            2,
            1,
            1,
            [0, 0],
            [2, 2],
            [1, 1],
            1,
            true,
            false,
        ),
        c(
            [3, 1, 1, 1],
            2,
            1,
            1,
            [0, 0],
            [1, 1],
            [1, 1],
            1,
            false,
            false,
        ),
    ]
}

/// Runs the three kernels on `g` and checks them against the f64 reference.
fn check_conv<T: El>(rig: &Rig, g: &Conv, rng: &mut StdRng, blend: bool) {
    let what = format!("{g:?} {}", T::SUF);
    let (xd, fd, yd) = (g.x, g.fdims(), g.out());
    let (xs, fs, ys) = (strides(xd, g.nhwc), g.fstrides(), strides(yd, g.nhwc));
    let len = |d: [u64; 4]| d.iter().product::<u64>() as usize;
    let x = round::<T>(&uniform(rng, len(xd), -1.0, 1.0));
    let f = round::<T>(&uniform(rng, len(fd), -1.0, 1.0));
    let dy = round::<T>(&uniform(rng, len(yd), -1.0, 1.0));
    // The reference: every valid tap once, with |terms| and counts for the tolerances.
    let (mut y, mut dx, mut df) = (vec![0.0; dy.len()], vec![0.0; x.len()], vec![0.0; f.len()]);
    let (mut ya, mut dxa, mut dfa) = (y.clone(), dx.clone(), df.clone());
    let (kg, cg) = (g.k / g.groups, g.cg());
    let li =
        |d: [u64; 4], i: [u64; 4]| (((i[0] * d[1] + i[1]) * d[2] + i[2]) * d[3] + i[3]) as usize;
    for o in super::conv::indices(yd) {
        let [n, k, p, q] = o;
        for c in 0..cg {
            for r in 0..g.r {
                for s in 0..g.s {
                    let ih = p as i64 * g.stride[0] - g.pad[0] + r as i64 * g.dil[0];
                    let iw = q as i64 * g.stride[1] - g.pad[1] + s as i64 * g.dil[1];
                    if ih < 0 || iw < 0 || ih >= xd[2] as i64 || iw >= xd[3] as i64 {
                        continue;
                    }
                    let xi = li(xd, [n, (k / kg) * cg + c, ih as u64, iw as u64]);
                    let fi = li(fd, [k, c, r, s]);
                    let yi = li(yd, o);
                    y[yi] += x[xi] * f[fi];
                    ya[yi] += (x[xi] * f[fi]).abs();
                    dx[xi] += dy[yi] * f[fi];
                    dxa[xi] += (dy[yi] * f[fi]).abs();
                    df[fi] += x[xi] * dy[yi];
                    dfa[fi] += (x[xi] * dy[yi]).abs();
                }
            }
        }
    }
    let (alpha, beta) = if blend { (0.5, -2.0) } else { (1.0, 0.0) };
    fn geometry<'a, T: El>(
        g: &Conv,
        bufs: [A<'a, T>; 3],
        dims: [[u64; 4]; 3],
        st: [[u64; 4]; 3],
        (alpha, beta): (f64, f64),
    ) -> Vec<A<'a, T>> {
        let [xd, _, yd] = dims;
        let [xs, fs, ys] = st;
        let mut a: Vec<A<'a, T>> = bufs.into_iter().collect();
        a.extend(xd.iter().chain(&xs).map(|&v| A::U(v)));
        a.extend([g.k, g.r, g.s].iter().chain(&fs).map(|&v| A::U(v)));
        a.extend([yd[2], yd[3]].iter().chain(&ys).map(|&v| A::U(v)));
        a.extend(
            [g.pad, g.stride, g.dil]
                .iter()
                .flat_map(|p| p.iter().map(|&v| A::I(v))),
        );
        a.extend([A::U(g.groups), A::F(alpha), A::F(beta)]);
        a
    }
    // The prior output: NaN (never read) when beta is 0.
    let prior = |n: usize| -> Vec<f64> {
        if blend {
            round::<T>(
                &(0..n)
                    .map(|i| (i % 7) as f64 * 0.25 - 0.5)
                    .collect::<Vec<_>>(),
            )
        } else {
            vec![f64::NAN; n]
        }
    };
    let run = |kernel: &str, out: usize, dims: [u64; 4], s: [u64; 4], want: &[f64], abs: &[f64]| {
        let before = prior(want.len());
        let bufs: Vec<Vec<T>> = [(xd, xs, &x), (fd, fs, &f), (yd, ys, &dy)]
            .iter()
            .enumerate()
            .map(|(i, &(d, st, v))| {
                if i == out {
                    lay::<T>(&before, d, st)
                } else {
                    lay::<T>(v, d, st)
                }
            })
            .collect();
        let dev: Vec<_> = bufs.iter().map(|b| rig.up(b)).collect();
        rig.run::<T>(
            kernel,
            want.len() as u64,
            &geometry(
                g,
                [A::B(&dev[0]), A::B(&dev[1]), A::B(&dev[2])],
                [xd, fd, yd],
                [xs, fs, ys],
                (alpha, beta),
            ),
        );
        let got = read(&rig.down(&dev[out]), dims, s);
        let taps = (cg * g.r * g.s)
            .max(kg * g.r * g.s)
            .max(yd[0] * yd[2] * yd[3]) as f64;
        for i in 0..want.len() {
            let prev = if blend { before[i] } else { 0.0 };
            let w = alpha * want[i] + beta * prev;
            let tol = (taps + 4.0) * T::EPS * (abs[i] + (beta * prev).abs()) + 1e-300;
            close(&format!("{kernel} {what}"), i, got[i], w, tol);
        }
    };
    run("conv_fwd", 2, yd, ys, &y, &ya);
    run("conv_bwd_data", 0, xd, xs, &dx, &dxa);
    run("conv_bwd_filter", 1, fd, fs, &df, &dfa);
}

fn convolutions(rig: &Rig) {
    let mut rng = streamexec_test_support::rng("dnn convolution kernels");
    let mut cases = conv_cases();
    cases.extend((0..8).map(|_| random_conv(&mut rng)));
    for (i, g) in cases.iter().enumerate() {
        check_conv::<f32>(rig, g, &mut rng, i == 1);
        check_conv::<f64>(rig, g, &mut rng, i == 2);
    }
}

on_every_platform!(convolutions: convolutions_on_the_host_ptx_engine, convolutions_on_opencl,
    convolutions_on_cuda);
