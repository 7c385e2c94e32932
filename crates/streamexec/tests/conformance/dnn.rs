//! DNN operations through the stream against the f64 references of `dnn_ref.rs` (whose
//! backward passes are proven there by finite differences), on random inputs with outputs
//! poisoned (NaN bits) first: odd sizes, padding larger than the filter, stride larger than
//! the filter, dilation, groups = 2 and groups = channels (depthwise), batch 1, NCHW and NHWC,
//! `f32` and `f64`.
//!
//! Accuracy: each output may differ from the reference by at most `4·ε·(L + 4)·mag`, where
//! `mag` is the sum of the magnitudes of the terms the reference added for that output, `L`
//! the number of terms of the operation's longest sum, and ε the element type's epsilon;
//! element-wise results by at most `64·ε·(1 + |value|)` (library `exp`, `erf`, `tanh` are within
//! a few ulp).
//!
//! A platform without DNN (its plugin report says `none`) is skipped with a note, so the same
//! tests cover every backend that implements DNN. The checks of descriptors and calls are in
//! dnn_errors.rs.

use streamexec::{
    Activation, BatchNormProblem, ConvDesc, ConvProblem, DeviceMemory, DnnElement, FilterDesc,
    MatmulProblem, PluginFamily, PoolMode, PoolProblem, SoftmaxAlgorithm, SoftmaxMode,
    StreamExecutor, TensorDesc, TensorLayout,
};

use crate::dnn_ref::{self as reference, Conv, Pool, Shape, random};
use crate::plugins::{executors_per_plugin, on_each};

/// Runs `test` on device 0 of every platform under test that has DNN, once per DNN plugin.
pub fn on_each_dnn_platform(test: impl Fn(&StreamExecutor)) {
    static EXECUTORS: std::sync::OnceLock<Vec<StreamExecutor>> = std::sync::OnceLock::new();
    let executors = EXECUTORS.get_or_init(|| executors_per_plugin(PluginFamily::Dnn));
    on_each(executors, PluginFamily::Dnn, |exec| {
        let report = exec.plugins();
        let dnn = report.get(PluginFamily::Dnn).unwrap();
        if dnn.implementation == "none" {
            eprintln!(
                "note: {} has no DNN ({}); skipped",
                exec.platform_name(),
                dnn.reason
            );
            return;
        }
        test(exec)
    });
}

/// What the tests need of `f32` / `f64`.
pub trait El: DnnElement + std::fmt::Debug {
    const EPS: f64;
    fn of(v: f64) -> Self;
    fn f(self) -> f64;
    fn poison() -> Self;
}
impl El for f32 {
    const EPS: f64 = f32::EPSILON as f64;
    fn of(v: f64) -> Self {
        v as f32
    }
    fn f(self) -> f64 {
        f64::from(self)
    }
    fn poison() -> Self {
        crate::common::POISON_F32
    }
}
impl El for f64 {
    const EPS: f64 = f64::EPSILON;
    fn of(v: f64) -> Self {
        v
    }
    fn f(self) -> f64 {
        self
    }
    fn poison() -> Self {
        crate::common::POISON_F64
    }
}

/// `v` rounded to `T` on the device, and the rounded values (the reference's input).
pub fn upload<T: El>(exec: &StreamExecutor, v: &[f64]) -> (DeviceMemory<T>, Vec<f64>) {
    let t: Vec<T> = v.iter().map(|&x| T::of(x)).collect();
    let rounded = t.iter().map(|x| x.f()).collect();
    (exec.copy_to_device(&t).unwrap(), rounded)
}

/// `n` poisoned elements on the device.
pub fn poisoned<T: El>(exec: &StreamExecutor, n: usize) -> DeviceMemory<T> {
    exec.copy_to_device(&vec![T::poison(); n]).unwrap()
}

fn download<T: El>(exec: &StreamExecutor, d: &DeviceMemory<T>) -> Vec<f64> {
    exec.copy_to_vec(d).unwrap().iter().map(|v| v.f()).collect()
}

/// Every `got[i]` within `4·ε·(terms + 4)·mag[i]` of `want[i]` (NaN fails).
fn check_sum<T: El>(what: &str, got: &[f64], want: &[f64], mag: &[f64], terms: usize) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..want.len() {
        let tol = 4.0 * T::EPS * (terms as f64 + 4.0) * mag[i];
        let diff = (got[i] - want[i]).abs();
        assert!(
            diff <= tol,
            "{what}: element {i}: got {}, want {} (tolerance {tol:e})",
            got[i],
            want[i]
        );
    }
}

/// Every `got[i]` within `64·ε·(1 + |want[i]|)·scale` of `want[i]` (NaN fails).
fn check_near<T: El>(what: &str, got: &[f64], want: &[f64], scale: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..want.len() {
        let tol = 64.0 * T::EPS * (1.0 + want[i].abs()) * scale;
        let diff = (got[i] - want[i]).abs();
        assert!(
            diff <= tol,
            "{what}: element {i}: got {}, want {} (tolerance {tol:e})",
            got[i],
            want[i]
        );
    }
}

pub fn layout(nhwc: bool) -> TensorLayout {
    if nhwc {
        TensorLayout::Nhwc
    } else {
        TensorLayout::Nchw
    }
}

pub fn tensor<T: El>(s: &Shape) -> TensorDesc {
    TensorDesc::new(
        T::DTYPE,
        layout(s.nhwc),
        s.n as u64,
        s.c as u64,
        s.h as u64,
        s.w as u64,
    )
    .unwrap()
}

/// One convolution case: input, filter (its `nhwc` is the filter's own layout), geometry.
type ConvCase = (Shape, Shape, Conv);

fn conv_cases(r: &mut rand::rngs::StdRng) -> Vec<ConvCase> {
    use rand::RngExt;
    let s = |n, c, h, w| Shape {
        nhwc: false,
        n,
        c,
        h,
        w,
    };
    let cv = |pad, stride, dil, groups| Conv {
        pad,
        stride,
        dil,
        groups,
    };
    let mut cases = vec![
        (s(2, 3, 7, 5), s(4, 3, 3, 3), cv([1, 1], [1, 1], [1, 1], 1)),
        // Padding larger than the filter, groups = 2, batch 1.
        (s(1, 4, 5, 6), s(4, 2, 3, 2), cv([4, 3], [1, 2], [1, 1], 2)),
        // Stride larger than the filter.
        (s(2, 3, 9, 8), s(2, 3, 2, 2), cv([0, 1], [3, 4], [1, 1], 1)),
        // Dilation, depthwise.
        (s(1, 4, 9, 9), s(4, 1, 3, 3), cv([2, 2], [1, 1], [2, 3], 4)),
        // Depthwise with multiplier 2, stride 2.
        (s(1, 3, 5, 5), s(6, 1, 3, 3), cv([1, 1], [2, 2], [1, 1], 3)),
        // 1×1 stride-1 unpadded (no im2col on the host), plain and grouped.
        (s(2, 5, 6, 7), s(3, 5, 1, 1), cv([0, 0], [1, 1], [1, 1], 1)),
        (s(3, 6, 4, 3), s(6, 2, 1, 1), cv([0, 0], [1, 1], [1, 1], 3)),
    ];
    for _ in 0..3 {
        let (g, cg, kg) = (
            r.random_range(1..3),
            r.random_range(1..4),
            r.random_range(1..4),
        );
        let (kh, kw) = (r.random_range(1..4), r.random_range(1..4));
        let (dil, pad) = (
            [r.random_range(1..3), r.random_range(1..3)],
            [r.random_range(0..4), r.random_range(0..4)],
        );
        let need = |k: usize, d: usize, p: usize| (d * (k - 1) + 1).saturating_sub(2 * p).max(1);
        let h = need(kh, dil[0], pad[0]).max(r.random_range(1..9));
        let w = need(kw, dil[1], pad[1]).max(r.random_range(1..9));
        let stride = [r.random_range(1..4), r.random_range(1..4)];
        cases.push((
            s(r.random_range(1..4), g * cg, h, w),
            s(g * kg, cg, kh, kw),
            cv(pad, stride, dil, g),
        ));
    }
    cases
}

fn conv_case<T: El>(exec: &StreamExecutor, r: &mut rand::rngs::StdRng, (xs, ws, cv): ConvCase) {
    let what = format!("{:?} {xs:?} {ws:?} {cv:?}", T::DTYPE);
    let x_desc = tensor::<T>(&xs);
    let w_desc = FilterDesc::new(
        T::DTYPE,
        layout(ws.nhwc),
        ws.n as u64,
        ws.c as u64,
        ws.h as u64,
        ws.w as u64,
    )
    .unwrap();
    let u = |v: [usize; 2]| v.map(|x| x as u64);
    let conv = ConvDesc::new(u(cv.pad), u(cv.stride), u(cv.dil), cv.groups as u64).unwrap();
    let p = ConvProblem::new(&x_desc, &w_desc, &conv).unwrap();
    let ys = reference::conv_out(&xs, &ws, &cv);
    assert_eq!(
        (p.y.n, p.y.c, p.y.h, p.y.w),
        (ys.n as u64, ys.c as u64, ys.h as u64, ys.w as u64),
        "{what}: output shape"
    );
    let (dx_in, x) = upload::<T>(exec, &random(r, xs.len()));
    let (dw_in, w) = upload::<T>(exec, &random(r, ws.len()));
    let (ddy, dy) = upload::<T>(exec, &random(r, ys.len()));
    let (y_out, dx_out, dw_out) = (
        poisoned::<T>(exec, ys.len()),
        poisoned::<T>(exec, xs.len()),
        poisoned::<T>(exec, ws.len()),
    );
    let mut s = exec.create_stream().unwrap();
    s.then_convolution_forward(&p, &dx_in, &dw_in, &y_out)
        .then_convolution_backward_data(&p, &dw_in, &ddy, &dx_out)
        .then_convolution_backward_filter(&p, &dx_in, &ddy, &dw_out);
    s.block_host_until_done()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let crs = ws.c * ws.h * ws.w;
    let (want, mag) = reference::conv_forward(&xs, &x, &ws, &w, &cv);
    check_sum::<T>(
        &format!("forward {what}"),
        &download(exec, &y_out),
        &want,
        &mag,
        crs,
    );
    let (want, mag) = reference::conv_backward_data(&xs, &ws, &w, &cv, &dy);
    check_sum::<T>(
        &format!("backward data {what}"),
        &download(exec, &dx_out),
        &want,
        &mag,
        ys.c / cv.groups * ws.h * ws.w,
    );
    let (want, mag) = reference::conv_backward_filter(&xs, &x, &ws, &cv, &dy);
    check_sum::<T>(
        &format!("backward filter {what}"),
        &download(exec, &dw_out),
        &want,
        &mag,
        ys.n * ys.h * ys.w,
    );
}

#[test]
fn convolutions_match_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn convolutions");
        for case in conv_cases(&mut r) {
            for (x_nhwc, w_nhwc) in [(false, false), (true, true), (true, false)] {
                let (mut xs, mut ws, cv) = case;
                (xs.nhwc, ws.nhwc) = (x_nhwc, w_nhwc);
                conv_case::<f32>(exec, &mut r, (xs, ws, cv));
                conv_case::<f64>(exec, &mut r, (xs, ws, cv));
            }
        }
    });
}

fn pool_case<T: El>(exec: &StreamExecutor, r: &mut rand::rngs::StdRng, xs: Shape, pool: Pool) {
    let what = format!("{:?} {xs:?} {pool:?}", T::DTYPE);
    let mode = [
        PoolMode::Max,
        PoolMode::AverageIncludePadding,
        PoolMode::AverageExcludePadding,
    ][pool.mode as usize];
    let u = |v: [usize; 2]| v.map(|x| x as u64);
    let p = PoolProblem::new(
        &tensor::<T>(&xs),
        mode,
        u(pool.window),
        u(pool.pad),
        u(pool.stride),
    )
    .unwrap();
    let ys = reference::pool_out(&xs, &pool);
    let (dx_in, x) = upload::<T>(exec, &random(r, xs.len()));
    let (ddy, dy) = upload::<T>(exec, &random(r, ys.len()));
    let (y_out, dx_out) = (poisoned::<T>(exec, ys.len()), poisoned::<T>(exec, xs.len()));
    let mut s = exec.create_stream().unwrap();
    s.then_pooling_forward(&p, &dx_in, &y_out)
        .then_pooling_backward(&p, &dx_in, &y_out, &ddy, &dx_out);
    s.block_host_until_done()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let area = pool.window[0] * pool.window[1];
    let (want, mag) = reference::pool_forward(&xs, &x, &pool);
    check_sum::<T>(
        &format!("forward {what}"),
        &download(exec, &y_out),
        &want,
        &mag,
        area,
    );
    let (want, mag) = reference::pool_backward(&xs, &x, &pool, &dy);
    check_sum::<T>(
        &format!("backward {what}"),
        &download(exec, &dx_out),
        &want,
        &mag,
        area * area,
    );
}

#[test]
fn pooling_matches_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn pooling");
        let s = |nhwc, n, c, h, w| Shape { nhwc, n, c, h, w };
        let pl = |window, pad, stride| Pool {
            mode: 0,
            window,
            pad,
            stride,
        };
        for nhwc in [false, true] {
            for (xs, pool) in [
                (s(nhwc, 2, 3, 7, 6), pl([2, 2], [0, 0], [2, 2])),
                (s(nhwc, 1, 2, 5, 7), pl([3, 3], [1, 2], [1, 2])),
                // Stride larger than the window; overlapping windows.
                (s(nhwc, 2, 1, 9, 8), pl([2, 3], [1, 0], [4, 3])),
                (s(nhwc, 1, 3, 4, 5), pl([3, 2], [2, 1], [1, 1])),
            ] {
                for mode in 0..3 {
                    pool_case::<f32>(exec, &mut r, xs, Pool { mode, ..pool });
                    pool_case::<f64>(exec, &mut r, xs, Pool { mode, ..pool });
                }
            }
        }
    });
}

fn activation_case<T: El>(exec: &StreamExecutor, r: &mut rand::rngs::StdRng, xs: Shape, a: usize) {
    let act = [
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Gelu,
    ][a];
    let what = format!("{:?} {act:?} {xs:?}", T::DTYPE);
    let d = tensor::<T>(&xs);
    let x3: Vec<f64> = random(r, xs.len()).iter().map(|v| 3.0 * v).collect();
    let (dx_in, x) = upload::<T>(exec, &x3);
    let (ddy, dy) = upload::<T>(exec, &random(r, xs.len()));
    let (y_out, dx_out) = (poisoned::<T>(exec, xs.len()), poisoned::<T>(exec, xs.len()));
    let (in_place, _) = upload::<T>(exec, &x);
    let (in_place_g, _) = upload::<T>(exec, &dy);
    let mut s = exec.create_stream().unwrap();
    s.then_activation_forward(act, &d, &dx_in, &y_out)
        .then_activation_backward(act, &d, &dx_in, &y_out, &ddy, &dx_out)
        .then_activation_forward(act, &d, &in_place, &in_place)
        .then_activation_backward(act, &d, &dx_in, &y_out, &in_place_g, &in_place_g);
    s.block_host_until_done()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let want: Vec<f64> = x.iter().map(|&v| reference::act(a, v)).collect();
    check_near::<T>(
        &format!("forward {what}"),
        &download(exec, &y_out),
        &want,
        1.0,
    );
    check_near::<T>(
        &format!("forward in place {what}"),
        &download(exec, &in_place),
        &want,
        1.0,
    );
    let want: Vec<f64> = x
        .iter()
        .zip(&dy)
        .map(|(&v, &g)| g * reference::act_deriv(a, v))
        .collect();
    check_near::<T>(
        &format!("backward {what}"),
        &download(exec, &dx_out),
        &want,
        2.0,
    );
    check_near::<T>(
        &format!("backward in place {what}"),
        &download(exec, &in_place_g),
        &want,
        2.0,
    );
}

#[test]
fn activations_match_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn activations");
        for nhwc in [false, true] {
            let xs = Shape {
                nhwc,
                n: 2,
                c: 3,
                h: 5,
                w: 7,
            };
            for a in 0..4 {
                activation_case::<f32>(exec, &mut r, xs, a);
                activation_case::<f64>(exec, &mut r, xs, a);
            }
        }
    });
}

fn softmax_case<T: El>(
    exec: &StreamExecutor,
    r: &mut rand::rngs::StdRng,
    xs: Shape,
    instance: bool,
    log: bool,
) {
    let what = format!("{:?} instance {instance} log {log} {xs:?}", T::DTYPE);
    let d = tensor::<T>(&xs);
    let (alg, mode) = (
        if log {
            SoftmaxAlgorithm::Log
        } else {
            SoftmaxAlgorithm::Accurate
        },
        if instance {
            SoftmaxMode::Instance
        } else {
            SoftmaxMode::Channel
        },
    );
    let x4: Vec<f64> = random(r, xs.len()).iter().map(|v| 4.0 * v).collect();
    let (dx_in, x) = upload::<T>(exec, &x4);
    let groups = reference::softmax_groups(&xs, instance);
    let want_y = reference::softmax_forward(&groups, log, &x);
    // Backward from the reference's y (rounded to T) so both sides start from the same values.
    let (dy_in, y) = upload::<T>(exec, &want_y);
    let (ddy, dy) = upload::<T>(exec, &random(r, xs.len()));
    let (y_out, dx_out) = (poisoned::<T>(exec, xs.len()), poisoned::<T>(exec, xs.len()));
    let mut s = exec.create_stream().unwrap();
    s.then_softmax_forward(alg, mode, &d, &dx_in, &y_out)
        .then_softmax_backward(alg, mode, &d, &dy_in, &ddy, &dx_out);
    s.block_host_until_done()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let len = groups[0].len() as f64;
    check_near::<T>(
        &format!("forward {what}"),
        &download(exec, &y_out),
        &want_y,
        1.0 + len / 8.0,
    );
    let want = reference::softmax_backward(&groups, log, &y, &dy);
    check_near::<T>(
        &format!("backward {what}"),
        &download(exec, &dx_out),
        &want,
        1.0 + len / 4.0,
    );
}

#[test]
fn softmax_matches_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn softmax");
        for nhwc in [false, true] {
            let xs = Shape {
                nhwc,
                n: 2,
                c: 5,
                h: 3,
                w: 4,
            };
            for (instance, log) in [(false, false), (false, true), (true, false), (true, true)] {
                softmax_case::<f32>(exec, &mut r, xs, instance, log);
                softmax_case::<f64>(exec, &mut r, xs, instance, log);
            }
        }
    });
}

#[test]
fn bias_add_matches_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn bias add");
        for nhwc in [false, true] {
            let xs = Shape {
                nhwc,
                n: 2,
                c: 5,
                h: 3,
                w: 7,
            };
            fn case<T: El>(exec: &StreamExecutor, r: &mut rand::rngs::StdRng, xs: Shape) {
                let (dy, y) = upload::<T>(exec, &random(r, xs.len()));
                let (dbias, bias) = upload::<T>(exec, &random(r, xs.c));
                let mut s = exec.create_stream().unwrap();
                s.then_bias_add(&tensor::<T>(&xs), &dy, &dbias);
                s.block_host_until_done().unwrap();
                let ch = reference::channels(&xs);
                let want: Vec<f64> = y.iter().zip(&ch).map(|(v, &c)| v + bias[c]).collect();
                let mag: Vec<f64> = y
                    .iter()
                    .zip(&ch)
                    .map(|(v, &c)| v.abs() + bias[c].abs())
                    .collect();
                check_sum::<T>(
                    &format!("bias add {xs:?}"),
                    &download(exec, &dy),
                    &want,
                    &mag,
                    1,
                );
            }
            case::<f32>(exec, &mut r, xs);
            case::<f64>(exec, &mut r, xs);
        }
    });
}

fn batch_norm_case<T: El>(exec: &StreamExecutor, r: &mut rand::rngs::StdRng, xs: Shape) {
    let what = format!("{:?} {xs:?}", T::DTYPE);
    let (eps, momentum) = (1e-3, 0.25);
    let p = BatchNormProblem::new(&tensor::<T>(&xs), eps, momentum).unwrap();
    let c = xs.c;
    // Inputs with a per-channel offset, so the mean matters.
    let xv: Vec<f64> = random(r, xs.len())
        .iter()
        .zip(reference::channels(&xs))
        .map(|(v, c)| v + c as f64 * 0.5)
        .collect();
    let (dx_in, x) = upload::<T>(exec, &xv);
    let (dscale, scale) = upload::<T>(exec, &random(r, c));
    let (dbias, bias) = upload::<T>(exec, &random(r, c));
    let rm0: Vec<f64> = random(r, c);
    let rv0: Vec<f64> = random(r, c).iter().map(|v| 1.0 + v.abs()).collect();
    let (drm, rm) = upload::<T>(exec, &rm0);
    let (drv, rv) = upload::<T>(exec, &rv0);
    let (ddy, dy) = upload::<T>(exec, &random(r, xs.len()));
    let (y, y_inf, dx) = (
        poisoned::<T>(exec, xs.len()),
        poisoned::<T>(exec, xs.len()),
        poisoned::<T>(exec, xs.len()),
    );
    let (sm, si, dsc, dbi) = (
        poisoned::<T>(exec, c),
        poisoned::<T>(exec, c),
        poisoned::<T>(exec, c),
        poisoned::<T>(exec, c),
    );
    let mut s = exec.create_stream().unwrap();
    s.then_batch_norm_forward_training(&p, &dx_in, &dscale, &dbias, &y, &drm, &drv, &sm, &si)
        .then_batch_norm_forward_inference(&p, &dx_in, &dscale, &dbias, &sm, &drv, &y_inf)
        .then_batch_norm_backward(&p, &dx_in, &ddy, &dscale, &sm, &si, &dx, &dsc, &dbi);
    s.block_host_until_done()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let m = xs.n * xs.h * xs.w;
    let scale_l = 1.0 + m as f64 / 4.0;
    let st = reference::channel_stats(&xs, &x);
    let want_y = reference::bn_forward(&xs, &x, &scale, &bias, eps);
    check_near::<T>(
        &format!("training y {what}"),
        &download(exec, &y),
        &want_y,
        4.0 * scale_l,
    );
    let means: Vec<f64> = st.iter().map(|s| s.0).collect();
    let inv: Vec<f64> = st.iter().map(|s| 1.0 / (s.1 + eps).sqrt()).collect();
    check_near::<T>(
        &format!("save_mean {what}"),
        &download(exec, &sm),
        &means,
        4.0 * scale_l,
    );
    check_near::<T>(
        &format!("save_inv_std {what}"),
        &download(exec, &si),
        &inv,
        scale_l,
    );
    let run_mean: Vec<f64> = (0..c)
        .map(|i| (1.0 - momentum) * rm[i] + momentum * st[i].0)
        .collect();
    let unbiased = |i: usize| st[i].1 * m as f64 / (m as f64 - 1.0);
    let run_var: Vec<f64> = (0..c)
        .map(|i| (1.0 - momentum) * rv[i] + momentum * unbiased(i))
        .collect();
    check_near::<T>(
        &format!("running_mean {what}"),
        &download(exec, &drm),
        &run_mean,
        4.0 * scale_l,
    );
    check_near::<T>(
        &format!("running_var {what}"),
        &download(exec, &drv),
        &run_var,
        scale_l,
    );
    // Inference from the saved mean (as stored) and the updated running variance.
    let (mean_t, var_t) = (download(exec, &sm), download(exec, &drv));
    let ch = reference::channels(&xs);
    let want_inf: Vec<f64> = x
        .iter()
        .zip(&ch)
        .map(|(&v, &c)| scale[c] * (v - mean_t[c]) / (var_t[c] + eps).sqrt() + bias[c])
        .collect();
    check_near::<T>(
        &format!("inference y {what}"),
        &download(exec, &y_inf),
        &want_inf,
        4.0,
    );
    let (want_dx, want_ds, want_db) = reference::bn_backward(&xs, &x, &dy, &scale, eps);
    check_near::<T>(
        &format!("dx {what}"),
        &download(exec, &dx),
        &want_dx,
        8.0 * scale_l,
    );
    check_near::<T>(
        &format!("dscale {what}"),
        &download(exec, &dsc),
        &want_ds,
        4.0 * scale_l,
    );
    check_near::<T>(
        &format!("dbias {what}"),
        &download(exec, &dbi),
        &want_db,
        4.0 * scale_l,
    );
}

#[test]
fn batch_norm_matches_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn batch norm");
        for nhwc in [false, true] {
            for xs in [
                Shape {
                    nhwc,
                    n: 3,
                    c: 4,
                    h: 5,
                    w: 3,
                },
                Shape {
                    nhwc,
                    n: 1,
                    c: 3,
                    h: 1,
                    w: 2,
                },
            ] {
                batch_norm_case::<f32>(exec, &mut r, xs);
                batch_norm_case::<f64>(exec, &mut r, xs);
            }
        }
    });
}

fn matmul_case<T: El>(
    exec: &StreamExecutor,
    r: &mut rand::rngs::StdRng,
    [m, n, k]: [usize; 3],
    a: Option<usize>,
) {
    let act = a.map(|a| {
        [
            Activation::Relu,
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::Gelu,
        ][a]
    });
    let what = format!("{:?} {m}×{n}×{k} {act:?}", T::DTYPE);
    let p = MatmulProblem::new(T::DTYPE, m as u64, n as u64, k as u64, act).unwrap();
    let (dx, x) = upload::<T>(exec, &random(r, m * k));
    let (dw, w) = upload::<T>(exec, &random(r, k * n));
    let (db, bias) = upload::<T>(exec, &random(r, n));
    let y = poisoned::<T>(exec, m * n);
    let mut s = exec.create_stream().unwrap();
    s.then_matmul_bias_activation(&p, &dx, &dw, &db, &y);
    s.block_host_until_done()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = download(exec, &y);
    for i in 0..m {
        for j in 0..n {
            let z: f64 = (0..k).map(|l| x[i * k + l] * w[l * n + j]).sum::<f64>() + bias[j];
            let mag: f64 = (0..k)
                .map(|l| (x[i * k + l] * w[l * n + j]).abs())
                .sum::<f64>()
                + bias[j].abs();
            let want = a.map_or(z, |a| reference::act(a, z));
            // The activations' slopes are at most 1.13 (GELU), so the sum's error carries over.
            let tol =
                4.0 * T::EPS * (k as f64 + 4.0) * mag * 1.2 + 64.0 * T::EPS * (1.0 + want.abs());
            let g = got[i * n + j];
            assert!(
                (g - want).abs() <= tol,
                "{what}: y[{i}, {j}] = {g}, want {want} (tolerance {tol:e})"
            );
        }
    }
}

#[test]
fn fused_matmul_matches_the_reference() {
    on_each_dnn_platform(|exec| {
        let mut r = crate::common::rng("dnn matmul");
        for dims in [[1, 1, 1], [5, 7, 3], [17, 9, 33]] {
            for a in [None, Some(0), Some(1), Some(2), Some(3)] {
                matmul_case::<f32>(exec, &mut r, dims, a);
                matmul_case::<f64>(exec, &mut r, dims, a);
            }
        }
    });
}
