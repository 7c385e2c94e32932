//! Pooling, activations, softmax, batch normalisation, bias add and the matmul epilogue
//! against f64 references.

use streamexec_test_support::rand::RngExt;
use streamexec_test_support::rand::rngs::StdRng;

use super::conv::{indices, lay, read, round, strides};
use super::{A, El, Rig, close, host, on_every_platform, optional, uniform};

/// The tensor arguments (sizes, then strides) of `dims` with `s`.
fn shape<'a, T: El>(dims: [u64; 4]) -> Vec<A<'a, T>> {
    dims.iter().map(|&v| A::U(v)).collect()
}
fn st<'a, T: El>(s: [u64; 4]) -> Vec<A<'a, T>> {
    s.iter().map(|&v| A::U(v)).collect()
}

fn len(d: [u64; 4]) -> usize {
    d.iter().product::<u64>() as usize
}

// ---- Pooling -------------------------------------------------------------------------------

/// Pooling geometry: window, padding, stride (h, w), mode.
#[derive(Clone, Debug)]
struct Pool {
    x: [u64; 4],
    win: [i64; 2],
    pad: [i64; 2],
    stride: [i64; 2],
    mode: u32,
    nhwc: bool,
}

impl Pool {
    fn out(&self) -> [u64; 4] {
        let o = |a: usize| {
            ((self.x[2 + a] as i64 + 2 * self.pad[a] - self.win[a]) / self.stride[a] + 1) as u64
        };
        [self.x[0], self.x[1], o(0), o(1)]
    }
}

/// The f64 reference: forward y, backward dx (max routes to the window's first maximum).
fn pool_ref(g: &Pool, x: &[f64], dy: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let yd = g.out();
    let li =
        |d: [u64; 4], i: [u64; 4]| (((i[0] * d[1] + i[1]) * d[2] + i[2]) * d[3] + i[3]) as usize;
    let (mut y, mut dx) = (vec![0.0; len(yd)], vec![0.0; x.len()]);
    for o in indices(yd) {
        let [n, c, p, q] = o;
        let (h0, w0) = (
            p as i64 * g.stride[0] - g.pad[0],
            q as i64 * g.stride[1] - g.pad[1],
        );
        let mut inside = Vec::new();
        for ih in h0..h0 + g.win[0] {
            for iw in w0..w0 + g.win[1] {
                if ih >= 0 && iw >= 0 && ih < g.x[2] as i64 && iw < g.x[3] as i64 {
                    inside.push(li(g.x, [n, c, ih as u64, iw as u64]));
                }
            }
        }
        let d = dy[li(yd, o)];
        let yi = li(yd, o);
        match g.mode {
            0 => {
                let mut best = None::<usize>;
                for &i in &inside {
                    if best.is_none_or(|b| x[i] > x[b]) {
                        best = Some(i);
                    }
                }
                y[yi] = best.map_or(f64::NEG_INFINITY, |b| x[b]);
                if let Some(b) = best {
                    dx[b] += d;
                }
            }
            _ => {
                let div = if g.mode == 1 {
                    (g.win[0] * g.win[1]) as f64
                } else {
                    inside.len() as f64
                };
                y[yi] = if inside.is_empty() {
                    0.0
                } else {
                    inside.iter().map(|&i| x[i]).sum::<f64>() / div
                };
                for &i in &inside {
                    dx[i] += d / div;
                }
            }
        }
    }
    (y, dx)
}

fn check_pool<T: El>(rig: &Rig, g: &Pool, rng: &mut StdRng, ties: bool) {
    let what = format!("{g:?} {}", T::SUF);
    let yd = g.out();
    let (xs, ys) = (strides(g.x, g.nhwc), strides(yd, g.nhwc));
    let x: Vec<f64> = if ties {
        (0..len(g.x))
            .map(|_| rng.random_range(0..3) as f64)
            .collect()
    } else {
        round::<T>(&uniform(rng, len(g.x), -1.0, 1.0))
    };
    let dy = round::<T>(&uniform(rng, len(yd), -1.0, 1.0));
    let (y, dx) = pool_ref(g, &x, &dy);
    let geo = |a: &mut Vec<A<'_, T>>| {
        a.extend(
            [g.win, g.pad, g.stride]
                .iter()
                .flat_map(|p| p.iter().map(|&v| A::I(v))),
        );
        a.extend([A::W(g.mode), A::F(1.0), A::F(0.0)]);
    };
    let dxm = rig.up(&lay::<T>(&x, g.x, xs));
    let dym = rig.up(&vec![T::poison(); len(yd)]);
    let mut a = vec![A::B(&dxm), A::B(&dym)];
    a.extend(shape(g.x).into_iter().chain(st(xs)));
    a.extend([A::U(yd[2]), A::U(yd[3])].into_iter().chain(st(ys)));
    geo(&mut a);
    rig.run::<T>("pool_fwd", len(yd) as u64, &a);
    let got = read(&rig.down(&dym), yd, ys);
    let count = (g.win[0] * g.win[1]) as f64;
    for (i, (&gv, &w)) in got.iter().zip(&y).enumerate() {
        let tol = if w.is_infinite() {
            0.0
        } else {
            (count + 2.0) * T::EPS * 2.0
        };
        if w.is_infinite() {
            assert_eq!(gv, w, "pool_fwd {what}[{i}]");
        } else {
            close(&format!("pool_fwd {what}"), i, gv, w, tol);
        }
    }
    let dym = rig.up(&lay::<T>(&dy, yd, ys));
    let out = rig.up(&vec![T::poison(); len(g.x)]);
    let mut a = vec![A::B(&dxm), A::B(&dym), A::B(&out)];
    a.extend(shape(g.x).into_iter().chain(st(xs)).chain(st(xs)));
    a.extend([A::U(yd[2]), A::U(yd[3])].into_iter().chain(st(ys)));
    geo(&mut a);
    rig.run::<T>("pool_bwd", len(g.x) as u64, &a);
    let got = read(&rig.down(&out), g.x, xs);
    let windows = (g.win[0] * g.win[1]) as f64;
    for (i, (&gv, &w)) in got.iter().zip(&dx).enumerate() {
        close(
            &format!("pool_bwd {what}"),
            i,
            gv,
            w,
            (windows + 2.0) * T::EPS * 2.0,
        );
    }
}

fn pooling(rig: &Rig) {
    let mut rng = streamexec_test_support::rng("dnn pooling kernels");
    let p = |x, win, pad, stride, nhwc| Pool {
        x,
        win,
        pad,
        stride,
        mode: 0,
        nhwc,
    };
    let mut cases = vec![
        p([2, 3, 7, 6], [3, 3], [1, 1], [2, 2], false),
        p([1, 2, 9, 8], [2, 3], [0, 1], [3, 4], true),
        p([2, 1, 5, 7], [3, 2], [2, 1], [1, 1], false),
        p([1, 3, 4, 5], [4, 5], [0, 0], [1, 1], true),
    ];
    for _ in 0..3 {
        let win = [rng.random_range(1..4), rng.random_range(1..4)];
        cases.push(p(
            [
                rng.random_range(1..3),
                rng.random_range(1..4),
                rng.random_range(3..9),
                rng.random_range(3..9),
            ],
            win,
            [rng.random_range(0..win[0]), rng.random_range(0..win[1])],
            [rng.random_range(1..4), rng.random_range(1..4)],
            rng.random_bool(0.5),
        ));
    }
    for (i, g) in cases.iter().enumerate() {
        for mode in 0..3 {
            let g = Pool { mode, ..g.clone() };
            check_pool::<f32>(rig, &g, &mut rng, false);
            check_pool::<f64>(rig, &g, &mut rng, mode == 0 && i < 2);
        }
    }
    // Ties in f32 too: the first maximum takes the gradient.
    check_pool::<f32>(
        rig,
        &Pool {
            mode: 0,
            ..cases[0].clone()
        },
        &mut rng,
        true,
    );
}

on_every_platform!(pooling: pooling_on_the_host_ptx_engine, pooling_on_opencl, pooling_on_cuda);

// ---- Activations ---------------------------------------------------------------------------

/// e^(−x²/2) with x² split exactly (rounding x² first would cost x²/2 ulps).
fn exp_neg_half_sq(x: f64) -> f64 {
    let hi = x * x;
    let lo = x.mul_add(x, -hi);
    (-0.5 * hi).exp() * (1.0 - 0.5 * lo)
}

/// Φ(x) = ½·erfc(−x/√2), corrected for the rounding of −x/√2 (which erfc would amplify by
/// 2z² ulps): δ = −x/√2 − fl(−x/√2) from √2 as a double-double, erfc(z + δ) ≈ erfc(z) −
/// δ·2/√π·e^(−z²).
fn ncdf(x: f64) -> f64 {
    let (s_hi, s_lo) = (std::f64::consts::SQRT_2, -9.667_293_313_452_913e-17);
    let z = -x / s_hi;
    let delta = ((-z).mul_add(s_hi, -x) - z * s_lo) / s_hi;
    0.5 * (libm::erfc(z) - delta * std::f64::consts::FRAC_2_SQRT_PI * exp_neg_half_sq(x))
}

/// act(x) and act'(x) in f64.
fn act_ref(mode: u32, x: f64) -> (f64, f64) {
    match mode {
        1 => (x.max(0.0), if x > 0.0 { 1.0 } else { 0.0 }),
        2 => {
            let s = 1.0 / (1.0 + (-x).exp());
            (s, s * (1.0 - s))
        }
        3 => (x.tanh(), 1.0 - x.tanh().powi(2)),
        4 => {
            let cdf = ncdf(x);
            let pdf = exp_neg_half_sq(x) / (2.0 * std::f64::consts::PI).sqrt();
            (x * cdf, cdf + x * pdf)
        }
        _ => (x, 1.0),
    }
}

fn check_act<T: El>(rig: &Rig, mode: u32, dims: [u64; 4], rng: &mut StdRng) {
    let what = format!("mode {mode} {dims:?} {}", T::SUF);
    let (s_in, s_out) = (strides(dims, false), strides(dims, true));
    let mut xv = uniform(rng, len(dims), -9.0, 9.0);
    xv[0] = 0.0;
    if xv.len() > 3 {
        xv[1] = 40.0;
        xv[2] = -40.0;
        xv[3] = 1e-3;
    }
    let x = round::<T>(&xv);
    let dy = round::<T>(&uniform(rng, len(dims), -1.0, 1.0));
    let xm = rig.up(&lay::<T>(&x, dims, s_in));
    // Forward, NCHW in and NHWC out.
    let ym = rig.up(&vec![T::poison(); len(dims)]);
    let mut a = vec![A::B(&xm), A::B(&ym)];
    a.extend(shape(dims).into_iter().chain(st(s_in)).chain(st(s_out)));
    a.extend([A::W(mode), A::F(1.0), A::F(0.0)]);
    rig.run::<T>("act_fwd", len(dims) as u64, &a);
    let got = read(&rig.down(&ym), dims, s_out);
    for (i, (&g, &xi)) in got.iter().zip(&x).enumerate() {
        let w = act_ref(mode, xi).0;
        close(
            &format!("act_fwd {what} x={xi}"),
            i,
            g,
            w,
            16.0 * T::EPS * w.abs() + 1e-300,
        );
    }
    // Backward from x and the reference y.
    let y = round::<T>(&x.iter().map(|&v| act_ref(mode, v).0).collect::<Vec<_>>());
    let ym = rig.up(&lay::<T>(&y, dims, s_out));
    let dym = rig.up(&lay::<T>(&dy, dims, s_in));
    let dxm = rig.up(&vec![T::poison(); len(dims)]);
    let mut a = vec![A::B(&xm), A::B(&ym), A::B(&dym), A::B(&dxm)];
    a.extend(shape(dims).into_iter().chain(st(s_in)).chain(st(s_out)));
    a.extend(st(s_in).into_iter().chain(st(s_out)));
    a.extend([A::W(mode), A::F(1.0), A::F(0.0)]);
    rig.run::<T>("act_bwd", len(dims) as u64, &a);
    let got = read(&rig.down(&dxm), dims, s_out);
    for (i, &g) in got.iter().enumerate() {
        let (yi, d) = (y[i], dy[i]);
        // sigmoid and tanh use the given y; the others x.
        let w = match mode {
            2 => d * yi * (1.0 - yi),
            3 => d * (1.0 - yi * yi),
            _ => d * act_ref(mode, x[i]).1,
        };
        close(
            &format!("act_bwd {what} x={}", x[i]),
            i,
            g,
            w,
            16.0 * T::EPS * (w.abs() + d.abs()) + 1e-300,
        );
    }
}

fn activations(rig: &Rig) {
    let mut rng = streamexec_test_support::rng("dnn activation kernels");
    for mode in 0..5 {
        check_act::<f32>(rig, mode, [2, 3, 5, 7], &mut rng);
        check_act::<f64>(rig, mode, [1, 4, 3, 9], &mut rng);
    }
}

on_every_platform!(activations: activations_on_the_host_ptx_engine, activations_on_opencl,
    activations_on_cuda);

// ---- Softmax -------------------------------------------------------------------------------

fn check_softmax<T: El>(rig: &Rig, dims: [u64; 4], mode: u32, log: bool, rng: &mut StdRng) {
    let what = format!("mode {mode} log {log} {dims:?} {}", T::SUF);
    let (s_in, s_out) = (strides(dims, true), strides(dims, false));
    let mut xv = uniform(rng, len(dims), -5.0, 5.0);
    xv[0] = 300.0; // e^300 overflows f32: the maximum must be subtracted first
    let x = round::<T>(&xv);
    let [n, c, h, w] = dims;
    let li = |i: [u64; 4]| (((i[0] * c + i[1]) * h + i[2]) * w + i[3]) as usize;
    // Rows of logical indices.
    let rows: Vec<Vec<usize>> = if mode == 0 {
        indices([n, 1, h, w])
            .map(|[a, _, b, d]| (0..c).map(|k| li([a, k, b, d])).collect())
            .collect()
    } else {
        (0..n)
            .map(|a| {
                indices([1, c, h, w])
                    .map(|[_, k, b, d]| li([a, k, b, d]))
                    .collect()
            })
            .collect()
    };
    let mut y = vec![0.0; x.len()];
    for row in &rows {
        let m = row.iter().map(|&i| x[i]).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|&i| (x[i] - m).exp()).sum();
        for &i in row {
            y[i] = if log {
                x[i] - m - sum.ln()
            } else {
                (x[i] - m).exp() / sum
            };
        }
    }
    let xm = rig.up(&lay::<T>(&x, dims, s_in));
    let ym = rig.up(&vec![T::poison(); x.len()]);
    let mut a = vec![A::B(&xm), A::B(&ym)];
    a.extend(shape(dims).into_iter().chain(st(s_in)).chain(st(s_out)));
    a.extend([A::W(mode), A::W(log.into()), A::F(1.0), A::F(0.0)]);
    rig.run::<T>("softmax_fwd", rows.len() as u64, &a);
    let got = read(&rig.down(&ym), dims, s_out);
    for row in &rows {
        let scale = row.iter().map(|&i| y[i].abs()).fold(0.0, f64::max);
        for &i in row {
            let tol = 4.0 * (row.len() as f64 + 8.0) * T::EPS * scale.max(y[i].abs());
            close(&format!("softmax_fwd {what}"), i, got[i], y[i], tol);
        }
    }
    // Backward from the reference y.
    let yr = round::<T>(&y);
    let dy = round::<T>(&uniform(rng, x.len(), -1.0, 1.0));
    let mut dx = vec![0.0; x.len()];
    let mut mag = vec![0.0; x.len()];
    for row in &rows {
        let s: f64 = row
            .iter()
            .map(|&i| if log { dy[i] } else { dy[i] * yr[i] })
            .sum();
        let sa: f64 = row
            .iter()
            .map(|&i| {
                if log {
                    dy[i].abs()
                } else {
                    (dy[i] * yr[i]).abs()
                }
            })
            .sum();
        for &i in row {
            dx[i] = if log {
                dy[i] - yr[i].exp() * s
            } else {
                yr[i] * (dy[i] - s)
            };
            mag[i] = if log {
                dy[i].abs() + yr[i].exp() * sa
            } else {
                yr[i].abs() * (dy[i].abs() + sa)
            };
        }
    }
    let ym = rig.up(&lay::<T>(&yr, dims, s_out));
    let dym = rig.up(&lay::<T>(&dy, dims, s_in));
    let dxm = rig.up(&vec![T::poison(); x.len()]);
    let mut a = vec![A::B(&ym), A::B(&dym), A::B(&dxm)];
    a.extend(
        shape(dims)
            .into_iter()
            .chain(st(s_out))
            .chain(st(s_in))
            .chain(st(s_out)),
    );
    a.extend([A::W(mode), A::W(log.into()), A::F(1.0), A::F(0.0)]);
    rig.run::<T>("softmax_bwd", rows.len() as u64, &a);
    let got = read(&rig.down(&dxm), dims, s_out);
    for row in &rows {
        for &i in row {
            let tol = 4.0 * (row.len() as f64 + 8.0) * T::EPS * mag[i] + 1e-300;
            close(&format!("softmax_bwd {what}"), i, got[i], dx[i], tol);
        }
    }
}

fn softmax(rig: &Rig) {
    let mut rng = streamexec_test_support::rng("dnn softmax kernels");
    for (dims, mode) in [
        ([2, 5, 3, 2], 0),
        ([3, 4, 2, 3], 1),
        ([1, 7, 1, 1], 0),
        ([2, 1, 3, 5], 1),
    ] {
        for log in [false, true] {
            check_softmax::<f32>(rig, dims, mode, log, &mut rng);
            check_softmax::<f64>(rig, dims, mode, log, &mut rng);
        }
    }
}

on_every_platform!(softmax: softmax_on_the_host_ptx_engine, softmax_on_opencl, softmax_on_cuda);

// ---- Batch normalisation, bias add, epilogue -----------------------------------------------

fn check_batch_norm<T: El>(rig: &Rig, dims: [u64; 4], nhwc: bool, rng: &mut StdRng) {
    let what = format!("{dims:?} nhwc {nhwc} {}", T::SUF);
    let s = strides(dims, nhwc);
    let [n, c, h, w] = dims;
    let m = (n * h * w) as usize;
    let cu = c as usize;
    let x = round::<T>(&uniform(rng, len(dims), -2.0, 4.0));
    let dy = round::<T>(&uniform(rng, len(dims), -1.0, 1.0));
    let scale = round::<T>(&uniform(rng, cu, 0.5, 2.0));
    let bias = round::<T>(&uniform(rng, cu, -1.0, 1.0));
    let rmean = round::<T>(&uniform(rng, cu, -1.0, 1.0));
    let rvar = round::<T>(&uniform(rng, cu, 0.5, 2.0));
    let (eps, mom) = (1e-5, 0.1);
    // The reference, per channel.
    let ch = |k: usize| -> Vec<usize> {
        indices(dims)
            .enumerate()
            .filter(|(_, i)| i[1] as usize == k)
            .map(|(j, _)| j)
            .collect()
    };
    let (mut y, mut dx) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    let (mut mean, mut inv, mut var) = (vec![0.0; cu], vec![0.0; cu], vec![0.0; cu]);
    let (mut dscale, mut dbias) = (vec![0.0; cu], vec![0.0; cu]);
    for k in 0..cu {
        let idx = ch(k);
        let mu = idx.iter().map(|&i| x[i]).sum::<f64>() / m as f64;
        let v = idx.iter().map(|&i| (x[i] - mu).powi(2)).sum::<f64>() / m as f64;
        (mean[k], var[k], inv[k]) = (mu, v, 1.0 / (v + eps).sqrt());
        let xh = |i: usize| (x[i] - mu) * inv[k];
        for &i in &idx {
            y[i] = scale[k] * xh(i) + bias[k];
        }
        dbias[k] = idx.iter().map(|&i| dy[i]).sum();
        dscale[k] = idx.iter().map(|&i| dy[i] * xh(i)).sum();
        for &i in &idx {
            dx[i] =
                scale[k] * inv[k] * (dy[i] - dbias[k] / m as f64 - xh(i) * dscale[k] / m as f64);
        }
    }
    let tol = |v: f64| 8.0 * (m as f64 + 8.0) * T::EPS * (v.abs() + 1.0);
    let check = |name: &str, got: &[f64], want: &[f64]| {
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            close(&format!("{name} {what}"), i, g, w, tol(w));
        }
    };
    let poison = |k: usize| rig.up(&vec![T::poison(); k]);
    let vec_of = |v: &[f64]| rig.up(&v.iter().map(|&e| T::of(e)).collect::<Vec<T>>());
    let xm = rig.up(&lay::<T>(&x, dims, s));
    let geo = |a: &mut Vec<A<'_, T>>, tensors: usize| {
        a.extend(shape(dims));
        for _ in 0..tensors {
            a.extend(st(s));
        }
    };
    // Training forward.
    let (ym, sm, si) = (poison(x.len()), poison(cu), poison(cu));
    let (scm, bim, rmm, rvm) = (vec_of(&scale), vec_of(&bias), vec_of(&rmean), vec_of(&rvar));
    let mut a = vec![
        A::B(&xm),
        A::B(&ym),
        A::B(&scm),
        A::B(&bim),
        A::B(&rmm),
        A::B(&rvm),
        A::B(&sm),
        A::B(&si),
    ];
    geo(&mut a, 2);
    a.extend([A::F(eps), A::F(mom), A::W(3)]);
    rig.run::<T>("bn_fwd_train", c, &a);
    check("bn_fwd_train y", &read(&rig.down(&ym), dims, s), &y);
    let got = |d: &crate::DeviceMemory<T>| rig.down(d).iter().map(|v| v.get()).collect::<Vec<_>>();
    check("bn_fwd_train save_mean", &got(&sm), &mean);
    check("bn_fwd_train save_inv_std", &got(&si), &inv);
    let mf = m as f64;
    let want_rm: Vec<f64> = (0..cu)
        .map(|k| (1.0 - mom) * rmean[k] + mom * mean[k])
        .collect();
    let want_rv: Vec<f64> = (0..cu)
        .map(|k| (1.0 - mom) * rvar[k] + mom * var[k] * mf / (mf - 1.0))
        .collect();
    check("bn_fwd_train running_mean", &got(&rmm), &want_rm);
    check("bn_fwd_train running_var", &got(&rvm), &want_rv);
    // Inference from the original running statistics.
    let (rmm, rvm) = (vec_of(&rmean), vec_of(&rvar));
    let ym = poison(x.len());
    let mut a = vec![
        A::B(&xm),
        A::B(&ym),
        A::B(&scm),
        A::B(&bim),
        A::B(&rmm),
        A::B(&rvm),
    ];
    geo(&mut a, 2);
    a.push(A::F(eps));
    rig.run::<T>("bn_fwd_infer", x.len() as u64, &a);
    let want: Vec<f64> = indices(dims)
        .zip(&x)
        .map(|(i, &v)| {
            let k = i[1] as usize;
            scale[k] * (v - rmean[k]) / (rvar[k] + eps).sqrt() + bias[k]
        })
        .collect();
    check("bn_fwd_infer", &read(&rig.down(&ym), dims, s), &want);
    // Backward, from the saved statistics and recomputing them.
    for use_saved in [1u32, 0] {
        let dym = rig.up(&lay::<T>(&dy, dims, s));
        let (dxm, dsm, dbm) = (poison(x.len()), poison(cu), poison(cu));
        let (sm, si) = (vec_of(&mean), vec_of(&inv));
        let mut a = vec![
            A::B(&xm),
            A::B(&dym),
            A::B(&dxm),
            A::B(&scm),
            A::B(&dsm),
            A::B(&dbm),
            A::B(&sm),
            A::B(&si),
        ];
        geo(&mut a, 3);
        a.extend([A::F(eps), A::W(use_saved)]);
        rig.run::<T>("bn_bwd", c, &a);
        check("bn_bwd dx", &read(&rig.down(&dxm), dims, s), &dx);
        check("bn_bwd dscale", &got(&dsm), &dscale);
        check("bn_bwd dbias", &got(&dbm), &dbias);
    }
}

fn check_bias_and_epilogue<T: El>(rig: &Rig, rng: &mut StdRng) {
    let dims = [2, 3, 4, 5];
    let s = strides(dims, true);
    let y0 = round::<T>(&uniform(rng, len(dims), -1.0, 1.0));
    let bias = round::<T>(&uniform(rng, 3, -1.0, 1.0));
    let bm = rig.up(&bias.iter().map(|&v| T::of(v)).collect::<Vec<T>>());
    for (alpha, beta) in [(1.0, 1.0), (2.0, 0.0)] {
        let prior = if beta == 0.0 {
            vec![f64::NAN; y0.len()]
        } else {
            y0.clone()
        };
        let ym = rig.up(&lay::<T>(&prior, dims, s));
        let mut a = vec![A::B(&ym), A::B(&bm)];
        a.extend(shape(dims).into_iter().chain(st(s)));
        a.extend([A::F(alpha), A::F(beta)]);
        rig.run::<T>("bias_add", y0.len() as u64, &a);
        let got = read(&rig.down(&ym), dims, s);
        for (j, i) in indices(dims).enumerate() {
            let want = alpha * bias[i[1] as usize] + if beta == 0.0 { 0.0 } else { beta * y0[j] };
            close(
                &format!("bias_add {alpha} {beta} {}", T::SUF),
                j,
                got[j],
                want,
                2.0 * T::EPS * 4.0,
            );
        }
    }
    // Epilogue over a 5 × 3 matrix in a column-major array with leading dimension 7: the gap
    // rows keep their poison.
    let (rows, cols, ld) = (5u64, 3u64, 7u64);
    let vals = round::<T>(&uniform(rng, (ld * cols) as usize, -3.0, 3.0));
    for mode in 0..5u32 {
        for has_bias in [0u32, 1] {
            let mut buf: Vec<T> = vals.iter().map(|&v| T::of(v)).collect();
            for j in 0..cols {
                for i in rows..ld {
                    buf[(j * ld + i) as usize] = T::poison();
                }
            }
            let ym = rig.up(&buf);
            let a = [
                A::B(&ym),
                A::B(&bm),
                A::U(rows),
                A::U(cols),
                A::U(1),
                A::U(ld),
                A::W(has_bias),
                A::W(mode),
            ];
            rig.run::<T>("epilogue", rows * cols, &a);
            let got = rig.down(&ym);
            for (k, g) in got.iter().enumerate() {
                let (i, j) = (k as u64 % ld, k as u64 / ld);
                if i >= rows {
                    assert_eq!(
                        g.get().to_bits(),
                        T::poison().get().to_bits(),
                        "epilogue gap {k}"
                    );
                    continue;
                }
                let v = T::of(vals[k] + if has_bias == 1 { bias[j as usize] } else { 0.0 }).get();
                let want = act_ref(mode, v).0;
                close(
                    &format!("epilogue mode {mode} bias {has_bias} {}", T::SUF),
                    k,
                    g.get(),
                    want,
                    16.0 * T::EPS * (want.abs() + 1e-30),
                );
            }
        }
    }
}

fn normalisation_bias_epilogue(rig: &Rig) {
    let mut rng = streamexec_test_support::rng("dnn batch norm, bias and epilogue kernels");
    check_batch_norm::<f32>(rig, [2, 3, 4, 5], false, &mut rng);
    check_batch_norm::<f64>(rig, [3, 2, 3, 1], true, &mut rng);
    check_batch_norm::<f32>(rig, [1, 4, 1, 2], true, &mut rng);
    check_bias_and_epilogue::<f32>(rig, &mut rng);
    check_bias_and_epilogue::<f64>(rig, &mut rng);
}

on_every_platform!(normalisation_bias_epilogue: normalisation_bias_epilogue_on_the_host_ptx_engine,
    normalisation_bias_epilogue_on_opencl, normalisation_bias_epilogue_on_cuda);
