//! The whole `DnnSupport` of OpenCL and CUDA (the built-in kernels through `ops.rs`), driven
//! through the public stream API, against the host platform's backend on the same seeded
//! inputs: every operation's every output, both layouts, f32 and f64. The kernels themselves
//! are checked against f64 references in the sibling files; this checks what `ops.rs` packs.

use streamexec_test_support::rand::SeedableRng;
use streamexec_test_support::rand::rngs::StdRng;

use super::{El, optional, uniform};
use crate::{
    Activation, BatchNormProblem, ConvDesc, ConvProblem, DeviceMemory, DnnDataType, DnnElement,
    FilterDesc, MatmulProblem, PlatformManager, PoolMode, PoolProblem, SoftmaxAlgorithm,
    SoftmaxMode, StreamExecutor, TensorDesc, TensorLayout,
};

/// The named outputs of every operation on `exec`, from inputs seeded by `seed`.
fn outputs<T: El + DnnElement>(exec: &StreamExecutor, seed: u64) -> Vec<(String, Vec<f64>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let dt = if T::F64 {
        DnnDataType::F64
    } else {
        DnnDataType::F32
    };
    let mut out = Vec::new();
    let mut s = exec.create_stream().unwrap();
    let up = |v: &[f64]| {
        exec.copy_to_device(&v.iter().map(|&e| T::of(e)).collect::<Vec<T>>())
            .unwrap()
    };
    let nan = |n: u64| exec.copy_to_device(&vec![T::poison(); n as usize]).unwrap();
    let down = |m: &DeviceMemory<T>| -> Vec<f64> {
        exec.copy_to_vec(m)
            .unwrap()
            .iter()
            .map(|v| v.get())
            .collect()
    };
    for layout in [TensorLayout::Nchw, TensorLayout::Nhwc] {
        let l = format!("{layout:?}");
        // Convolution: groups 2, padding, stride and dilation differing per axis.
        let xd = TensorDesc::new(dt, layout, 2, 4, 7, 6).unwrap();
        let wd = FilterDesc::new(dt, layout, 6, 2, 3, 3).unwrap();
        let cd = ConvDesc::new([2, 1], [2, 1], [1, 2], 2).unwrap();
        let p = ConvProblem::new(&xd, &wd, &cd).unwrap();
        let x = up(&uniform(&mut rng, xd.elements() as usize, -1.0, 1.0));
        let w = up(&uniform(&mut rng, wd.elements() as usize, -1.0, 1.0));
        let dy = up(&uniform(&mut rng, p.y.elements() as usize, -1.0, 1.0));
        let (y, dx, dw) = (nan(p.y.elements()), nan(xd.elements()), nan(wd.elements()));
        s.then_convolution_forward(&p, &x, &w, &y)
            .then_convolution_backward_data(&p, &w, &dy, &dx)
            .then_convolution_backward_filter(&p, &x, &dy, &dw);
        s.block_host_until_done().unwrap();
        out.push((format!("conv y {l}"), down(&y)));
        out.push((format!("conv dx {l}"), down(&dx)));
        out.push((format!("conv dw {l}"), down(&dw)));
        // Pooling.
        let xd = TensorDesc::new(dt, layout, 2, 3, 7, 6).unwrap();
        let x = up(&uniform(&mut rng, xd.elements() as usize, -1.0, 1.0));
        for mode in [
            PoolMode::Max,
            PoolMode::AverageIncludePadding,
            PoolMode::AverageExcludePadding,
        ] {
            let p = PoolProblem::new(&xd, mode, [3, 2], [1, 1], [2, 2]).unwrap();
            let dy = up(&uniform(&mut rng, p.y.elements() as usize, -1.0, 1.0));
            let (y, dx) = (nan(p.y.elements()), nan(xd.elements()));
            s.then_pooling_forward(&p, &x, &y)
                .then_pooling_backward(&p, &x, &y, &dy, &dx);
            s.block_host_until_done().unwrap();
            out.push((format!("pool {mode:?} y {l}"), down(&y)));
            out.push((format!("pool {mode:?} dx {l}"), down(&dx)));
        }
        // Activations.
        let x = up(&uniform(&mut rng, xd.elements() as usize, -6.0, 6.0));
        let dy = up(&uniform(&mut rng, xd.elements() as usize, -1.0, 1.0));
        for act in [
            Activation::Relu,
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::Gelu,
        ] {
            let (y, dx) = (nan(xd.elements()), nan(xd.elements()));
            s.then_activation_forward(act, &xd, &x, &y)
                .then_activation_backward(act, &xd, &x, &y, &dy, &dx);
            s.block_host_until_done().unwrap();
            out.push((format!("act {act:?} y {l}"), down(&y)));
            out.push((format!("act {act:?} dx {l}"), down(&dx)));
        }
        // Softmax.
        for (alg, mode) in [
            (SoftmaxAlgorithm::Accurate, SoftmaxMode::Channel),
            (SoftmaxAlgorithm::Log, SoftmaxMode::Instance),
            (SoftmaxAlgorithm::Log, SoftmaxMode::Channel),
        ] {
            let (y, dx) = (nan(xd.elements()), nan(xd.elements()));
            s.then_softmax_forward(alg, mode, &xd, &x, &y)
                .then_softmax_backward(alg, mode, &xd, &y, &dy, &dx);
            s.block_host_until_done().unwrap();
            out.push((format!("softmax {alg:?} {mode:?} y {l}"), down(&y)));
            out.push((format!("softmax {alg:?} {mode:?} dx {l}"), down(&dx)));
        }
        // Batch normalisation and bias add.
        let c = xd.c as usize;
        let p = BatchNormProblem::new(&xd, 1e-5, 0.1).unwrap();
        let scale = up(&uniform(&mut rng, c, 0.5, 2.0));
        let bias = up(&uniform(&mut rng, c, -1.0, 1.0));
        let (rm, rv) = (
            up(&uniform(&mut rng, c, -1.0, 1.0)),
            up(&uniform(&mut rng, c, 0.5, 2.0)),
        );
        let (y, sm, si) = (nan(xd.elements()), nan(xd.c), nan(xd.c));
        let (yi, dx, ds, db) = (nan(xd.elements()), nan(xd.elements()), nan(xd.c), nan(xd.c));
        s.then_batch_norm_forward_inference(&p, &x, &scale, &bias, &rm, &rv, &yi)
            .then_batch_norm_forward_training(&p, &x, &scale, &bias, &y, &rm, &rv, &sm, &si)
            .then_batch_norm_backward(&p, &x, &dy, &scale, &sm, &si, &dx, &ds, &db);
        s.block_host_until_done().unwrap();
        for (name, m) in [
            ("infer y", &yi),
            ("train y", &y),
            ("running mean", &rm),
            ("running var", &rv),
            ("save mean", &sm),
            ("save inv std", &si),
            ("dx", &dx),
            ("dscale", &ds),
            ("dbias", &db),
        ] {
            out.push((format!("batch norm {name} {l}"), down(m)));
        }
        let yb = up(&uniform(&mut rng, xd.elements() as usize, -1.0, 1.0));
        s.then_bias_add(&xd, &yb, &bias);
        s.block_host_until_done().unwrap();
        out.push((format!("bias add {l}"), down(&yb)));
    }
    // The fused matmul, with and without an activation.
    for act in [None, Some(Activation::Gelu), Some(Activation::Relu)] {
        let p = MatmulProblem::new(dt, 5, 3, 4, act).unwrap();
        let x = up(&uniform(&mut rng, 20, -1.0, 1.0));
        let w = up(&uniform(&mut rng, 12, -1.0, 1.0));
        let b = up(&uniform(&mut rng, 3, -1.0, 1.0));
        let y = nan(15);
        s.then_matmul_bias_activation(&p, &x, &w, &b, &y);
        s.block_host_until_done().unwrap();
        out.push((format!("matmul {act:?}"), down(&y)));
    }
    out
}

/// Every output of `exec` against the host platform's, within `tol` of each output's largest
/// magnitude.
fn agree<T: El + DnnElement>(exec: &StreamExecutor, tol: f64) {
    let host = PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .unwrap();
    let want = outputs::<T>(&host, 7);
    let got = outputs::<T>(exec, 7);
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
        for (i, (&a, &b)) in g.iter().zip(w).enumerate() {
            assert!(
                (a - b).abs() <= tol * scale,
                "{} {name}[{i}] {}: got {a:e}, host {b:e}",
                exec.platform_name(),
                T::SUF
            );
        }
    }
}

#[cfg(feature = "opencl")]
#[test]
#[cfg_attr(miri, ignore = "OpenCL is foreign code")]
fn every_dnn_operation_on_opencl_agrees_with_the_host() {
    if let Some(rig) = optional("opencl") {
        agree::<f32>(&rig.exec, 1e-5);
        agree::<f64>(&rig.exec, 1e-12);
    }
}

#[cfg(feature = "cuda")]
#[test]
#[cfg_attr(miri, ignore = "the CUDA driver is foreign code")]
fn every_dnn_operation_on_cuda_agrees_with_the_host() {
    if let Some(rig) = optional("cuda") {
        agree::<f32>(&rig.exec, 1e-5);
        agree::<f64>(&rig.exec, 1e-12);
    }
}
