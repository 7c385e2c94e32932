//! DNN descriptors and calls that cannot be valid: each is an `Err` naming the argument, when
//! the descriptor is made or (failing the stream, which then skips later work) at enqueue. A
//! platform without DNN fails a call with a valid problem with `Unsupported` before it checks
//! the buffers, so there only that is checked.

use streamexec::{
    Activation, BatchNormProblem, ConvDesc, ConvProblem, DnnDataType, Error, FilterDesc,
    MatmulProblem, PlatformManager, Plugin, PluginConfig, PluginFamily, PoolMode, PoolProblem,
    SoftmaxAlgorithm, SoftmaxMode, TensorDesc, TensorLayout,
};

use crate::on_each_platform;

use DnnDataType::{F32, F64};
use TensorLayout::{Nchw, Nhwc};

/// `result` is an `InvalidArgument` or `OutOfBounds` whose message names every one of `args`.
#[track_caller]
fn names<T: std::fmt::Debug>(result: streamexec::Result<T>, args: &[&str]) {
    match result {
        Ok(v) => panic!("expected an error naming {args:?}, got Ok({v:?})"),
        Err(e) => {
            let msg = e.to_string();
            for arg in args {
                assert!(msg.contains(arg), "the error does not name `{arg}`: {msg}");
            }
            assert!(
                matches!(e, Error::InvalidArgument { .. } | Error::OutOfBounds { .. }),
                "{msg}"
            );
        }
    }
}

fn t(dtype: DnnDataType, layout: TensorLayout, [n, c, h, w]: [u64; 4]) -> TensorDesc {
    TensorDesc::new(dtype, layout, n, c, h, w).unwrap()
}

fn f(k: u64, c: u64, r: u64, s: u64) -> FilterDesc {
    FilterDesc::new(F32, Nchw, k, c, r, s).unwrap()
}

fn conv(pad: [u64; 2], stride: [u64; 2], groups: u64) -> ConvDesc {
    ConvDesc::new(pad, stride, [1, 1], groups).unwrap()
}

#[test]
fn impossible_descriptors_are_errors_naming_the_argument() {
    for (i, name) in ["n = 0", "c = 0", "h = 0", "w = 0"].iter().enumerate() {
        let mut d = [2u64, 3, 4, 5];
        d[i] = 0;
        names(TensorDesc::new(F32, Nchw, d[0], d[1], d[2], d[3]), &[name]);
    }
    names(
        TensorDesc::new(F32, Nhwc, u64::MAX / 2, 4, 1, 1),
        &["tensor", "elements"],
    );
    // Elements that fit in 64 bits but whose f64 bytes do not.
    names(
        TensorDesc::new(F64, Nchw, 1 << 61, 1, 1, 1),
        &["tensor", "bytes"],
    );
    names(FilterDesc::new(F32, Nhwc, 4, 2, 0, 3), &["r = 0"]);
    names(FilterDesc::new(F32, Nchw, 0, 2, 3, 3), &["k = 0"]);
    names(ConvDesc::new([0, 0], [1, 0], [1, 1], 1), &["stride[1] = 0"]);
    names(
        ConvDesc::new([0, 0], [1, 1], [0, 1], 1),
        &["dilation[0] = 0"],
    );
    names(ConvDesc::new([0, 0], [1, 1], [1, 1], 0), &["groups = 0"]);

    let x = t(F32, Nchw, [2, 6, 8, 8]);
    names(
        ConvProblem::new(&x, &f(4, 6, 3, 3), &conv([0, 0], [1, 1], 4)),
        &["x.c = 6", "groups = 4"],
    );
    names(
        ConvProblem::new(&x, &f(3, 3, 3, 3), &conv([0, 0], [1, 1], 2)),
        &["w.k = 3", "groups = 2"],
    );
    names(
        ConvProblem::new(&x, &f(4, 2, 3, 3), &conv([0, 0], [1, 1], 2)),
        &["w.c_per_group = 2"],
    );
    // Output size ≤ 0: a 9-row filter on 8 rows; then dilation makes a 3-tap filter span 9.
    names(
        ConvProblem::new(&x, &f(4, 6, 9, 3), &conv([0, 0], [1, 1], 1)),
        &["h (rows)", "≤ 0"],
    );
    let dilated = ConvDesc::new([0, 0], [1, 1], [1, 4], 1).unwrap();
    names(
        ConvProblem::new(&x, &f(4, 6, 3, 3), &dilated),
        &["w (columns)", "≤ 0"],
    );
    let w64 = FilterDesc::new(F64, Nchw, 4, 6, 3, 3).unwrap();
    names(
        ConvProblem::new(&x, &w64, &conv([1, 1], [1, 1], 1)),
        &["x is F32", "w is F64"],
    );
    assert!(ConvProblem::new(&x, &f(4, 6, 9, 3), &conv([1, 0], [1, 1], 1)).is_ok());

    let pool = |window, pad, stride| PoolProblem::new(&x, PoolMode::Max, window, pad, stride);
    names(pool([2, 0], [0, 0], [1, 1]), &["window[1] = 0"]);
    names(pool([2, 2], [0, 0], [0, 1]), &["stride[0] = 0"]);
    // A window that would cover only padding.
    names(
        pool([2, 3], [1, 3], [1, 1]),
        &["pad[1] = 3", "window[1] = 3"],
    );
    names(pool([9, 2], [0, 0], [1, 1]), &["h (rows)", "≤ 0"]);

    for eps in [1e-6, f64::NAN, f64::INFINITY, -1.0] {
        names(BatchNormProblem::new(&x, eps, 0.1), &["epsilon"]);
    }
    for momentum in [-0.1, 1.5, f64::NAN] {
        names(BatchNormProblem::new(&x, 1e-5, momentum), &["momentum"]);
    }
    assert!(BatchNormProblem::new(&x, 1e-5, 1.0).is_ok());
    names(MatmulProblem::new(F32, 0, 2, 3, None), &["m = 0"]);
    names(MatmulProblem::new(F32, 2, 3, 0, None), &["k = 0"]);
    names(
        MatmulProblem::new(F64, 1 << 40, 3, 1 << 30, None),
        &["x [m, k]"],
    );
}

/// A stream's first failed DNN enqueue fails it: the error names `args`, later work is
/// skipped, and `block_host_until_done` returns that error.
#[track_caller]
fn fails(s: &mut streamexec::Stream, args: &[&str]) {
    assert!(!s.ok(), "the stream should have failed");
    names(s.block_host_until_done(), args);
}

#[test]
fn impossible_calls_fail_the_stream_naming_the_argument() {
    on_each_platform(|exec| {
        let x_desc = t(F32, Nchw, [1, 2, 4, 4]);
        let w_desc = FilterDesc::new(F32, Nchw, 3, 2, 3, 3).unwrap();
        let p = ConvProblem::new(&x_desc, &w_desc, &conv([1, 1], [1, 1], 1)).unwrap();
        let x = exec.copy_to_device(&[0.5f32; 32]).unwrap();
        let w = exec.copy_to_device(&[0.5f32; 54]).unwrap();
        let y = exec.copy_to_device(&[0f32; 48]).unwrap();
        let y64 = exec.copy_to_device(&[0f64; 48]).unwrap();

        // A platform without DNN answers a valid problem with Unsupported, naming the
        // operation, before it looks at the buffers.
        let report = exec.plugins();
        if report.get(PluginFamily::Dnn).unwrap().implementation == "none" {
            let mut s = exec.create_stream().unwrap();
            s.then_convolution_forward(&p, &y64, &y64, &y64);
            let e = s.block_host_until_done().unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            assert!(e.to_string().contains("then_convolution_forward"), "{e}");
            eprintln!(
                "note: {} has no DNN; its buffer checks are skipped",
                exec.platform_name()
            );
            return;
        }

        // The buffer's element type against the descriptor's dtype.
        let mut s = exec.create_stream().unwrap();
        s.then_convolution_forward(&p, &y64, &y64, &y64);
        fails(&mut s, &["x holds F64", "F32"]);

        // A buffer smaller than its tensor, named with both sizes; the next call is skipped.
        let mut s = exec.create_stream().unwrap();
        s.then_convolution_forward(&p, &x, &w, y.slice(..47).unwrap());
        let later = exec.copy_to_device(&[7f32; 48]).unwrap();
        s.then_activation_forward(Activation::Relu, &p.y, &y, &later);
        fails(&mut s, &["y has 47 elements", "48"]);
        assert_eq!(
            exec.copy_to_vec(&later).unwrap(),
            vec![7f32; 48],
            "later work must be skipped"
        );
        let mut s = exec.create_stream().unwrap();
        s.then_convolution_backward_filter(&p, &x, &y, w.slice(1..).unwrap());
        fails(&mut s, &["dw has 53 elements", "54"]);

        // Memory of another executor.
        let platform = PlatformManager::platform_with_name(exec.platform_name()).unwrap();
        let config = PluginConfig::default()
            .with(PluginFamily::Dnn, Plugin::Builtin)
            .rng(Plugin::Builtin);
        let other = platform.executor_for_device_with(0, config).unwrap();
        let foreign = other.copy_to_device(&[0f32; 32]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_convolution_forward(&p, &foreign, &w, &y);
        fails(
            &mut s,
            &["then_convolution_forward (x)", "belongs to executor"],
        );

        // Outputs overlapping inputs; in-place activations only on exactly the same buffer.
        let mut s = exec.create_stream().unwrap();
        s.then_softmax_forward(
            SoftmaxAlgorithm::Accurate,
            SoftmaxMode::Channel,
            &p.y,
            &y,
            &y,
        );
        fails(&mut s, &["y overlaps x"]);
        let big = exec.copy_to_device(&[0.5f32; 96]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_convolution_forward(&p, big.slice(..32).unwrap(), &w, big.slice(16..).unwrap());
        fails(&mut s, &["y overlaps x"]);
        let mut s = exec.create_stream().unwrap();
        s.then_activation_forward(
            Activation::Tanh,
            &p.y,
            big.slice(..48).unwrap(),
            big.slice(1..49).unwrap(),
        );
        fails(&mut s, &["y overlaps x", "exactly the same buffer"]);
        let mut s = exec.create_stream().unwrap();
        s.then_bias_add(&p.y, big.slice(..48).unwrap(), big.slice(40..43).unwrap());
        fails(&mut s, &["y overlaps bias"]);
        let bn = BatchNormProblem::new(&p.y, 1e-5, 0.1).unwrap();
        let c3 = || exec.copy_to_device(&[1f32; 3]).unwrap();
        let (scale, bias, rm, rv, stats) = (c3(), c3(), c3(), c3(), c3());
        let out = exec.copy_to_device(&[0f32; 48]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_batch_norm_forward_training(&bn, &y, &scale, &bias, &out, &rm, &rv, &stats, &stats);
        fails(&mut s, &["save_mean overlaps save_inv_std"]);

        // Training statistics of a single value per channel.
        let one = BatchNormProblem::new(&t(F32, Nchw, [1, 3, 1, 1]), 1e-5, 0.1).unwrap();
        let mut s = exec.create_stream().unwrap();
        let (a, b) = (c3(), c3());
        s.then_batch_norm_forward_training(&one, &a, &scale, &bias, &b, &rm, &rv, &c3(), &c3());
        fails(&mut s, &["N·H·W = 1"]);

        // A problem whose public fields were changed after it was made.
        let mut changed = p;
        changed.y.h += 1;
        let mut s = exec.create_stream().unwrap();
        s.then_convolution_forward(&changed, &x, &w, &y);
        fails(&mut s, &["changed after"]);
        let mut bad = bn;
        bad.epsilon = 0.0;
        let mut s = exec.create_stream().unwrap();
        s.then_batch_norm_forward_inference(&bad, &y, &scale, &bias, &rm, &rv, &out);
        fails(&mut s, &["p:", "epsilon"]);
        let mut zero = p.y;
        zero.c = 0;
        let mut s = exec.create_stream().unwrap();
        s.then_bias_add(&zero, &y, &scale);
        fails(&mut s, &["desc", "c = 0"]);
    });
}
