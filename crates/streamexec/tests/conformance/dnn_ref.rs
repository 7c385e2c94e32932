//! The f64 references of the DNN tests, written plainly (direct loops, their own index
//! arithmetic, their own erf), and the proof that their backward passes are right: each is
//! checked here against central finite differences of its forward on small random shapes.
//!
//! Every reference returns, beside each value, the sum of the magnitudes of the terms that
//! make it (`mag`): the tests' tolerance is relative to it, so cancellation is allowed for.

use rand::RngExt;
use rand::rngs::StdRng;

/// A 4-D shape and its memory order (`nhwc` false: NCHW; for a filter KCRS / KRSC).
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub nhwc: bool,
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Shape {
    pub fn len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }
    /// The index of `(n, c, h, w)`.
    pub fn at(&self, n: usize, c: usize, h: usize, w: usize) -> usize {
        if self.nhwc {
            ((n * self.h + h) * self.w + w) * self.c + c
        } else {
            ((n * self.c + c) * self.h + h) * self.w + w
        }
    }
}

/// Convolution geometry, `[rows, columns]`.
#[derive(Clone, Copy, Debug)]
pub struct Conv {
    pub pad: [usize; 2],
    pub stride: [usize; 2],
    pub dil: [usize; 2],
    pub groups: usize,
}

/// The input position tap `t` of output `o` reads in one dimension, if inside `0..size`.
fn src(o: usize, t: usize, stride: usize, dil: usize, pad: usize, size: usize) -> Option<usize> {
    let i = (o * stride + t * dil) as i64 - pad as i64;
    (i >= 0 && (i as usize) < size).then_some(i as usize)
}

/// Calls `f(x index, w index, y index)` for every multiply of the convolution.
pub fn conv_taps(
    x: &Shape,
    w: &Shape,
    cv: &Conv,
    y: &Shape,
    mut f: impl FnMut(usize, usize, usize),
) {
    let (cg, kg) = (x.c / cv.groups, y.c / cv.groups);
    for n in 0..y.n {
        for k in 0..y.c {
            let g = k / kg;
            for p in 0..y.h {
                for q in 0..y.w {
                    for c in 0..cg {
                        for r in 0..w.h {
                            let Some(ih) = src(p, r, cv.stride[0], cv.dil[0], cv.pad[0], x.h)
                            else {
                                continue;
                            };
                            for s in 0..w.w {
                                if let Some(iw) = src(q, s, cv.stride[1], cv.dil[1], cv.pad[1], x.w)
                                {
                                    f(
                                        x.at(n, g * cg + c, ih, iw),
                                        w.at(k, c, r, s),
                                        y.at(n, k, p, q),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The output shape of a convolution (in `x`'s order).
pub fn conv_out(x: &Shape, w: &Shape, cv: &Conv) -> Shape {
    let o = |size: usize, taps: usize, d: usize| {
        (size + 2 * cv.pad[d] - cv.dil[d] * (taps - 1) - 1) / cv.stride[d] + 1
    };
    Shape {
        nhwc: x.nhwc,
        n: x.n,
        c: w.n,
        h: o(x.h, w.h, 0),
        w: o(x.w, w.w, 1),
    }
}

/// `(values, mags)` of `out`, accumulated from products `a·b` by `taps`.
fn accumulate(
    len: usize,
    taps: impl FnOnce(&mut dyn FnMut(usize, f64, f64)),
) -> (Vec<f64>, Vec<f64>) {
    let (mut v, mut m) = (vec![0.0; len], vec![0.0; len]);
    taps(&mut |o, a, b| {
        v[o] += a * b;
        m[o] += (a * b).abs();
    });
    (v, m)
}

pub fn conv_forward(
    xs: &Shape,
    x: &[f64],
    ws: &Shape,
    w: &[f64],
    cv: &Conv,
) -> (Vec<f64>, Vec<f64>) {
    let ys = conv_out(xs, ws, cv);
    accumulate(ys.len(), |acc| {
        conv_taps(xs, ws, cv, &ys, |xi, wi, yi| acc(yi, x[xi], w[wi]))
    })
}

pub fn conv_backward_data(
    xs: &Shape,
    ws: &Shape,
    w: &[f64],
    cv: &Conv,
    dy: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let ys = conv_out(xs, ws, cv);
    accumulate(xs.len(), |acc| {
        conv_taps(xs, ws, cv, &ys, |xi, wi, yi| acc(xi, w[wi], dy[yi]))
    })
}

pub fn conv_backward_filter(
    xs: &Shape,
    x: &[f64],
    ws: &Shape,
    cv: &Conv,
    dy: &[f64],
) -> (Vec<f64>, Vec<f64>) {
    let ys = conv_out(xs, ws, cv);
    accumulate(ws.len(), |acc| {
        conv_taps(xs, ws, cv, &ys, |xi, wi, yi| acc(wi, x[xi], dy[yi]))
    })
}

/// Pooling: `mode` 0 max, 1 average including padding, 2 average excluding it.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    pub mode: u8,
    pub window: [usize; 2],
    pub pad: [usize; 2],
    pub stride: [usize; 2],
}

pub fn pool_out(x: &Shape, p: &Pool) -> Shape {
    let o = |size: usize, d: usize| (size + 2 * p.pad[d] - p.window[d]) / p.stride[d] + 1;
    Shape {
        h: o(x.h, 0),
        w: o(x.w, 1),
        ..*x
    }
}

/// Calls `f(y index, in-bounds x indices in row-major window order)` per output.
fn pool_windows(x: &Shape, p: &Pool, mut f: impl FnMut(usize, &[usize])) {
    let y = pool_out(x, p);
    for n in 0..y.n {
        for c in 0..y.c {
            for oh in 0..y.h {
                for ow in 0..y.w {
                    let mut idx = vec![];
                    for i in 0..p.window[0] {
                        for j in 0..p.window[1] {
                            let h = (oh * p.stride[0] + i) as i64 - p.pad[0] as i64;
                            let w = (ow * p.stride[1] + j) as i64 - p.pad[1] as i64;
                            if h >= 0 && w >= 0 && (h as usize) < x.h && (w as usize) < x.w {
                                idx.push(x.at(n, c, h as usize, w as usize));
                            }
                        }
                    }
                    f(y.at(n, c, oh, ow), &idx);
                }
            }
        }
    }
}

fn first_max(x: &[f64], idx: &[usize]) -> usize {
    let mut best = idx[0];
    for &i in idx {
        if x[i] > x[best] {
            best = i;
        }
    }
    best
}

pub fn pool_forward(xs: &Shape, x: &[f64], p: &Pool) -> (Vec<f64>, Vec<f64>) {
    let len = pool_out(xs, p).len();
    let (mut v, mut m) = (vec![0.0; len], vec![0.0; len]);
    pool_windows(xs, p, |o, idx| {
        let div = if p.mode == 1 {
            (p.window[0] * p.window[1]) as f64
        } else {
            idx.len() as f64
        };
        (v[o], m[o]) = match p.mode {
            0 => (x[first_max(x, idx)], x[first_max(x, idx)].abs()),
            _ => (
                idx.iter().map(|&i| x[i]).sum::<f64>() / div,
                idx.iter().map(|&i| x[i].abs()).sum::<f64>() / div,
            ),
        };
    });
    (v, m)
}

pub fn pool_backward(xs: &Shape, x: &[f64], p: &Pool, dy: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (mut v, mut m) = (vec![0.0; xs.len()], vec![0.0; xs.len()]);
    pool_windows(xs, p, |o, idx| {
        let div = if p.mode == 1 {
            (p.window[0] * p.window[1]) as f64
        } else {
            idx.len() as f64
        };
        let targets: Vec<(usize, f64)> = match p.mode {
            0 => vec![(first_max(x, idx), dy[o])],
            _ => idx.iter().map(|&i| (i, dy[o] / div)).collect(),
        };
        for (i, g) in targets {
            v[i] += g;
            m[i] += g.abs();
        }
    });
    (v, m)
}

/// erf by its Maclaurin series for |x| < 2.5 and by the continued fraction of erfc beyond
/// (`erfc x = e^{−x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`): an erf independent of
/// the library the host backend uses.
pub fn erf(x: f64) -> f64 {
    if x.abs() >= 2.5 {
        let a = x.abs();
        let mut t = a;
        for n in (1..200).rev() {
            t = a + f64::from(n) / 2.0 / t;
        }
        let erfc = (-a * a).exp() / std::f64::consts::PI.sqrt() / t;
        return x.signum() * (1.0 - erfc);
    }
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

/// Activations by index: 0 ReLU, 1 sigmoid, 2 tanh, 3 GELU.
pub fn act(a: usize, x: f64) -> f64 {
    match a {
        0 => x.max(0.0),
        1 => 1.0 / (1.0 + (-x).exp()),
        2 => x.tanh(),
        _ => 0.5 * x * (1.0 + erf(x / 2f64.sqrt())),
    }
}

/// `act'(x)`, by hand.
pub fn act_deriv(a: usize, x: f64) -> f64 {
    match a {
        0 => f64::from(u8::from(x > 0.0)),
        1 => act(1, x) * (1.0 - act(1, x)),
        2 => 1.0 - x.tanh().powi(2),
        _ => {
            0.5 * (1.0 + erf(x / 2f64.sqrt()))
                + x * (-x * x / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt()
        }
    }
}

/// The softmax groups of `s`: Channel (`instance` false) over C at each (n, h, w), Instance
/// over C·H·W per n; each a list of indices.
pub fn softmax_groups(s: &Shape, instance: bool) -> Vec<Vec<usize>> {
    let mut out = vec![];
    for n in 0..s.n {
        if instance {
            out.push(
                (0..s.c)
                    .flat_map(|c| (0..s.h).flat_map(move |h| (0..s.w).map(move |w| (c, h, w))))
                    .map(|(c, h, w)| s.at(n, c, h, w))
                    .collect(),
            );
        } else {
            for h in 0..s.h {
                for w in 0..s.w {
                    out.push((0..s.c).map(|c| s.at(n, c, h, w)).collect());
                }
            }
        }
    }
    out
}

pub fn softmax_forward(groups: &[Vec<usize>], log: bool, x: &[f64]) -> Vec<f64> {
    let mut y = vec![0.0; x.len()];
    for g in groups {
        let sum: f64 = g.iter().map(|&i| x[i].exp()).sum();
        for &i in g {
            y[i] = if log {
                x[i] - sum.ln()
            } else {
                x[i].exp() / sum
            };
        }
    }
    y
}

/// `dx` from the forward output `y` and `dy`, by the chain rule written out: Σⱼ dyⱼ ∂yⱼ/∂xᵢ.
pub fn softmax_backward(groups: &[Vec<usize>], log: bool, y: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; y.len()];
    for g in groups {
        for &i in g {
            dx[i] = g
                .iter()
                .map(|&j| {
                    let delta = f64::from(u8::from(i == j));
                    if log {
                        dy[j] * (delta - y[i].exp())
                    } else {
                        dy[j] * y[j] * (delta - y[i])
                    }
                })
                .sum();
        }
    }
    dx
}

/// Per channel `(mean, biased variance)`.
pub fn channel_stats(s: &Shape, x: &[f64]) -> Vec<(f64, f64)> {
    let m = (s.n * s.h * s.w) as f64;
    (0..s.c)
        .map(|c| {
            let idx: Vec<usize> = (0..s.n)
                .flat_map(|n| (0..s.h).flat_map(move |h| (0..s.w).map(move |w| (n, h, w))))
                .map(|(n, h, w)| s.at(n, c, h, w))
                .collect();
            let mean = idx.iter().map(|&i| x[i]).sum::<f64>() / m;
            let var = idx.iter().map(|&i| (x[i] - mean).powi(2)).sum::<f64>() / m;
            (mean, var)
        })
        .collect()
}

/// The channel of every index of `s`.
pub fn channels(s: &Shape) -> Vec<usize> {
    let mut out = vec![0; s.len()];
    for n in 0..s.n {
        for c in 0..s.c {
            for h in 0..s.h {
                for w in 0..s.w {
                    out[s.at(n, c, h, w)] = c;
                }
            }
        }
    }
    out
}

/// Training forward's `y` from the batch statistics.
pub fn bn_forward(s: &Shape, x: &[f64], scale: &[f64], bias: &[f64], eps: f64) -> Vec<f64> {
    let st = channel_stats(s, x);
    let ch = channels(s);
    x.iter()
        .zip(&ch)
        .map(|(&v, &c)| scale[c] * (v - st[c].0) / (st[c].1 + eps).sqrt() + bias[c])
        .collect()
}

/// Training backward: `(dx, dscale, dbias)` by the textbook formulas, per channel.
pub fn bn_backward(
    s: &Shape,
    x: &[f64],
    dy: &[f64],
    scale: &[f64],
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let st = channel_stats(s, x);
    let ch = channels(s);
    let m = (s.n * s.h * s.w) as f64;
    let (mut dscale, mut dbias) = (vec![0.0; s.c], vec![0.0; s.c]);
    let xhat: Vec<f64> = x
        .iter()
        .zip(&ch)
        .map(|(&v, &c)| (v - st[c].0) / (st[c].1 + eps).sqrt())
        .collect();
    for i in 0..x.len() {
        dbias[ch[i]] += dy[i];
        dscale[ch[i]] += dy[i] * xhat[i];
    }
    let dx = (0..x.len())
        .map(|i| {
            let c = ch[i];
            scale[c] / (st[c].1 + eps).sqrt() / m * (m * dy[i] - dbias[c] - xhat[i] * dscale[c])
        })
        .collect();
    (dx, dscale, dbias)
}

/// Random values in `[-1, 1)`.
pub fn random(r: &mut StdRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| r.random_range(-1.0..1.0)).collect()
}

/// `n` values in `[-1, 1)`, at least `1 / n` apart, in random order.
fn spaced(r: &mut StdRng, n: usize) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n)
        .map(|k| -1.0 + 2.0 * (k as f64 + r.random_range(0.0..0.5)) / n as f64)
        .collect();
    for i in (1..n).rev() {
        v.swap(i, r.random_range(0..=i));
    }
    v
}

/// Checks `grad` (the reference backward of `loss(x) = Σ dy·forward(x)`) against central
/// differences of `loss` at every element of `x`.
fn check_gradient(what: &str, x: &[f64], grad: &[f64], loss: impl Fn(&[f64]) -> f64) {
    let h = 1e-5;
    for i in 0..x.len() {
        let (mut plus, mut minus) = (x.to_vec(), x.to_vec());
        plus[i] += h;
        minus[i] -= h;
        let fd = (loss(&plus) - loss(&minus)) / (2.0 * h);
        assert!(
            (fd - grad[i]).abs() <= 1e-6 * (1.0 + fd.abs()),
            "{what}: element {i}: finite difference {fd}, reference {}",
            grad[i]
        );
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

#[test]
fn reference_backward_passes_match_finite_differences() {
    let mut r = crate::common::rng("dnn reference gradients");
    for nhwc in [false, true] {
        let xs = Shape {
            nhwc,
            n: 2,
            c: 4,
            h: 5,
            w: 4,
        };
        let ws = Shape {
            nhwc,
            n: 4,
            c: 2,
            h: 3,
            w: 2,
        };
        let cv = Conv {
            pad: [1, 2],
            stride: [2, 1],
            dil: [1, 2],
            groups: 2,
        };
        let ys = conv_out(&xs, &ws, &cv);
        let (x, w, dy) = (
            random(&mut r, xs.len()),
            random(&mut r, ws.len()),
            random(&mut r, ys.len()),
        );
        let dx = conv_backward_data(&xs, &ws, &w, &cv, &dy).0;
        check_gradient("conv backward data", &x, &dx, |x| {
            dot(&dy, &conv_forward(&xs, x, &ws, &w, &cv).0)
        });
        let dw = conv_backward_filter(&xs, &x, &ws, &cv, &dy).0;
        check_gradient("conv backward filter", &w, &dw, |w| {
            dot(&dy, &conv_forward(&xs, &x, &ws, w, &cv).0)
        });

        for mode in 0..3 {
            let p = Pool {
                mode,
                window: [3, 2],
                pad: [1, 1],
                stride: [2, 1],
            };
            let py = pool_out(&xs, &p);
            let dy = random(&mut r, py.len());
            // Max pooling's gradient jumps where two elements of a window tie: its input
            // keeps every two values further apart than the differences' step.
            let x = if mode == 0 {
                spaced(&mut r, xs.len())
            } else {
                x.clone()
            };
            let dx = pool_backward(&xs, &x, &p, &dy).0;
            check_gradient("pooling backward", &x, &dx, |x| {
                dot(&dy, &pool_forward(&xs, x, &p).0)
            });
        }

        let dy = random(&mut r, xs.len());
        for a in 0..4 {
            let dx: Vec<f64> = x
                .iter()
                .zip(&dy)
                .map(|(&x, &g)| g * act_deriv(a, x))
                .collect();
            check_gradient("activation backward", &x, &dx, |x| {
                dot(&dy, &x.iter().map(|&v| act(a, v)).collect::<Vec<_>>())
            });
        }
        for (instance, log) in [(false, false), (false, true), (true, false), (true, true)] {
            let g = softmax_groups(&xs, instance);
            let y = softmax_forward(&g, log, &x);
            let dx = softmax_backward(&g, log, &y, &dy);
            check_gradient("softmax backward", &x, &dx, |x| {
                dot(&dy, &softmax_forward(&g, log, x))
            });
        }
        let (scale, bias) = (random(&mut r, xs.c), random(&mut r, xs.c));
        let (dx, dscale, dbias) = bn_backward(&xs, &x, &dy, &scale, 1e-5);
        check_gradient("batch norm dx", &x, &dx, |x| {
            dot(&dy, &bn_forward(&xs, x, &scale, &bias, 1e-5))
        });
        check_gradient("batch norm dscale", &scale, &dscale, |s| {
            dot(&dy, &bn_forward(&xs, &x, s, &bias, 1e-5))
        });
        check_gradient("batch norm dbias", &bias, &dbias, |b| {
            dot(&dy, &bn_forward(&xs, &x, &scale, b, 1e-5))
        });
    }
    // The reference erf against values known to 16 digits.
    for (x, want) in [
        (0.5, 0.520_499_877_813_046_5),
        (1.0, 0.842_700_792_949_714_9),
        (2.4, 0.999_311_486_103_355),
        (2.5, 0.999_593_047_982_555),
        (3.0, 0.999_977_909_503_001_4),
        (4.0, 0.999_999_984_582_742_1),
    ] {
        assert!(
            (erf(x) - want).abs() < 1e-14 && (erf(-x) + want).abs() < 1e-14,
            "erf({x}) = {}",
            erf(x)
        );
    }
}
