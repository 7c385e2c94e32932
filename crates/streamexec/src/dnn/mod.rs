//! DNN on a stream: convolutions, pooling, activations, softmax, batch normalisation, bias add
//! and a fused matmul, with cuDNN's conventions (see `interface/dnn.rs`).
//!
//! Descriptors are validated when they are made, as cuDNN's are: [`TensorDesc::new`],
//! [`FilterDesc::new`], [`ConvDesc::new`], [`ConvProblem::new`], [`PoolProblem::new`],
//! [`BatchNormProblem::new`] and [`MatmulProblem::new`] return `Err(InvalidArgument)` naming
//! the argument and what to do for zero sizes, element counts or byte sizes that overflow
//! `u64` or `usize`, output sizes ≤ 0, group rules, windows that would cover only padding,
//! epsilon below 1e-5 (cuDNN's `CUDNN_BN_MIN_EPSILON`) or momentum outside `[0, 1]`. Problems
//! compute their output descriptor (in the input's layout) from their inputs.
//!
//! The `then_*` methods (`stream.rs`) check the rest at enqueue, in the sticky error model of
//! every stream operation: the problem again (its fields are public, so it may have been
//! changed since), then that the platform has DNN (`Unsupported` otherwise), each buffer's
//! element type against the descriptor's dtype, each buffer's
//! length against its tensor (naming the argument and both sizes), that every buffer belongs to
//! the stream's executor, and that outputs do not overlap inputs or each other. Only
//! activation forward (`y` = `x`), activation backward (`dx` = `dy`) and bias add (in place by
//! definition) may run in place.

mod stream;

use bytemuck::Pod;

use crate::error::{Error, Result};
pub use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvDesc, ConvProblem, DnnDataType, FilterDesc, MatmulProblem,
    PoolMode, PoolProblem, SoftmaxAlgorithm, SoftmaxMode, TensorDesc, TensorLayout,
};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Element types of DNN buffers: `f32` and `f64`. A buffer's element type must equal its
/// descriptor's [`DnnDataType`].
pub trait DnnElement: Pod + sealed::Sealed {
    /// The descriptor dtype of this element type.
    const DTYPE: DnnDataType;
}
impl DnnElement for f32 {
    const DTYPE: DnnDataType = DnnDataType::F32;
}
impl DnnElement for f64 {
    const DTYPE: DnnDataType = DnnDataType::F64;
}

/// cuDNN's `CUDNN_BN_MIN_EPSILON`: the smallest epsilon batch normalisation accepts.
pub const BATCH_NORM_MIN_EPSILON: f64 = 1e-5;

/// The product of `dims` (named `what` for messages) as an element count whose bytes in
/// `dtype` fit in `u64` and `usize`.
fn element_count(op: &str, what: &str, dims: &[u64], dtype: DnnDataType) -> Result<u64> {
    let too_big = || {
        Error::invalid(
            op,
            format!(
                "{what} {dims:?} has more elements (or bytes, at {} bytes each) than 64 bits or \
                 this machine's address space hold; use smaller sizes",
                dtype.size()
            ),
        )
    };
    let elements = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(too_big)?;
    let bytes = elements.checked_mul(dtype.size()).ok_or_else(too_big)?;
    if usize::try_from(bytes).is_err() {
        return Err(too_big());
    }
    Ok(elements)
}

/// `Err` naming `names[i]` when `values[i] == 0`.
fn nonzero(op: &str, names: &[&str], values: &[u64]) -> Result<()> {
    match names.iter().zip(values).find(|(_, v)| **v == 0) {
        Some((name, _)) => Err(Error::invalid(
            op,
            format!("{name} = 0; every size must be ≥ 1"),
        )),
        None => Ok(()),
    }
}

impl TensorDesc {
    /// A packed tensor of `n` images of `c` channels of `h × w`, stored in `layout`. Every size
    /// must be ≥ 1 and the tensor's bytes must fit in `u64` and `usize`.
    pub fn new(
        dtype: DnnDataType,
        layout: TensorLayout,
        n: u64,
        c: u64,
        h: u64,
        w: u64,
    ) -> Result<Self> {
        const OP: &str = "TensorDesc::new";
        nonzero(OP, &["n", "c", "h", "w"], &[n, c, h, w])?;
        element_count(OP, "tensor [n, c, h, w] =", &[n, c, h, w], dtype)?;
        Ok(TensorDesc {
            dtype,
            layout,
            n,
            c,
            h,
            w,
        })
    }

    /// Re-checks a descriptor at enqueue (its fields are public): `Err` naming `name`.
    pub(crate) fn revalidate(&self, op: &str, name: &str) -> Result<()> {
        let again = TensorDesc::new(self.dtype, self.layout, self.n, self.c, self.h, self.w);
        again.map(|_| ()).map_err(|e| {
            Error::invalid(op, format!("{name} is not a valid tensor descriptor: {e}"))
        })
    }
}

impl FilterDesc {
    /// A packed filter of `k` output channels over `c_per_group` input channels of `r × s`
    /// taps (`Nchw` stores KCRS, `Nhwc` KRSC). Every size must be ≥ 1 and the filter's bytes
    /// must fit in `u64` and `usize`.
    pub fn new(
        dtype: DnnDataType,
        layout: TensorLayout,
        k: u64,
        c_per_group: u64,
        r: u64,
        s: u64,
    ) -> Result<Self> {
        const OP: &str = "FilterDesc::new";
        nonzero(OP, &["k", "c_per_group", "r", "s"], &[k, c_per_group, r, s])?;
        element_count(OP, "filter [k, c, r, s] =", &[k, c_per_group, r, s], dtype)?;
        Ok(FilterDesc {
            dtype,
            layout,
            k,
            c_per_group,
            r,
            s,
        })
    }
}

impl ConvDesc {
    /// Convolution geometry (`[rows, columns]` pairs): zero padding on both sides, stride and
    /// dilation ≥ 1, and `groups ≥ 1` channel groups.
    pub fn new(pad: [u64; 2], stride: [u64; 2], dilation: [u64; 2], groups: u64) -> Result<Self> {
        const OP: &str = "ConvDesc::new";
        nonzero(
            OP,
            &[
                "stride[0]",
                "stride[1]",
                "dilation[0]",
                "dilation[1]",
                "groups",
            ],
            &[stride[0], stride[1], dilation[0], dilation[1], groups],
        )?;
        Ok(ConvDesc {
            pad,
            stride,
            dilation,
            groups,
        })
    }
}

/// One output size of a window sweep: `(input + 2·pad − extent) / stride + 1`, or `Err` when it
/// would be ≤ 0 (`dim` names the dimension for messages).
fn swept(op: &str, dim: &str, input: u64, pad: u64, extent: u64, stride: u64) -> Result<u64> {
    let padded = pad
        .checked_mul(2)
        .and_then(|p| p.checked_add(input))
        .ok_or_else(|| Error::invalid(op, format!("{dim}: input + 2·pad overflows 64 bits")))?;
    if padded < extent {
        return Err(Error::invalid(
            op,
            format!(
                "{dim}: the window spans {extent} but the padded input only {padded} \
                 ({input} + 2·{pad}), so the output size would be ≤ 0; pad more or use a \
                 smaller window (or dilation)"
            ),
        ));
    }
    Ok((padded - extent) / stride + 1)
}

impl ConvProblem {
    /// The convolution of `x` by `w` with `conv`'s geometry; the output descriptor `y` is
    /// computed (in `x`'s layout). `x.c` and `w.k` must be divisible by `conv.groups`,
    /// `w.c_per_group` must be `x.c / groups`, the dtypes must agree, and the dilated filter
    /// must fit in the padded input.
    pub fn new(x: &TensorDesc, w: &FilterDesc, conv: &ConvDesc) -> Result<Self> {
        const OP: &str = "ConvProblem::new";
        let g = conv.groups;
        if x.dtype != w.dtype {
            return Err(Error::invalid(
                OP,
                format!(
                    "x is {:?} but w is {:?}; a convolution takes one dtype",
                    x.dtype, w.dtype
                ),
            ));
        }
        if g == 0 || conv.stride.contains(&0) || conv.dilation.contains(&0) {
            return Err(Error::invalid(
                OP,
                "conv has a zero stride, dilation or groups; make it with ConvDesc::new",
            ));
        }
        if !x.c.is_multiple_of(g) {
            return Err(Error::invalid(
                OP,
                format!(
                    "x.c = {} is not divisible by groups = {g}; use a channel count that is a \
                     multiple of the group count",
                    x.c
                ),
            ));
        }
        if !w.k.is_multiple_of(g) {
            return Err(Error::invalid(
                OP,
                format!(
                    "w.k = {} output channels are not divisible by groups = {g}; use a multiple \
                     of the group count",
                    w.k
                ),
            ));
        }
        if w.c_per_group != x.c / g {
            return Err(Error::invalid(
                OP,
                format!(
                    "w.c_per_group = {} but x.c / groups = {} / {g} = {}; the filter must see \
                     exactly one group's channels",
                    w.c_per_group,
                    x.c,
                    x.c / g
                ),
            ));
        }
        let mut out = [0u64; 2];
        for (d, (name, input, taps)) in [("h (rows)", x.h, w.r), ("w (columns)", x.w, w.s)]
            .into_iter()
            .enumerate()
        {
            let extent = (taps - 1)
                .checked_mul(conv.dilation[d])
                .and_then(|e| e.checked_add(1))
                .ok_or_else(|| {
                    Error::invalid(OP, format!("{name}: dilation·(taps − 1) overflows 64 bits"))
                })?;
            out[d] = swept(OP, name, input, conv.pad[d], extent, conv.stride[d])?;
        }
        let y = TensorDesc::new(x.dtype, x.layout, x.n, w.k, out[0], out[1])
            .map_err(|e| Error::invalid(OP, format!("the output y: {e}")))?;
        Ok(ConvProblem {
            x: *x,
            w: *w,
            conv: *conv,
            y,
        })
    }

    /// Re-checks a problem at enqueue (its fields are public).
    pub(crate) fn revalidate(&self, op: &str) -> Result<()> {
        self.x.revalidate(op, "p.x")?;
        FilterDesc::new(
            self.w.dtype,
            self.w.layout,
            self.w.k,
            self.w.c_per_group,
            self.w.r,
            self.w.s,
        )?;
        let again = ConvProblem::new(&self.x, &self.w, &self.conv)?;
        if again.y != self.y {
            return Err(changed(op, "ConvProblem", "ConvProblem::new"));
        }
        Ok(())
    }
}

/// The error for a problem whose fields were changed after validation.
fn changed(op: &str, what: &str, make: &str) -> Error {
    Error::invalid(
        op,
        format!(
            "the {what}'s fields were changed after it was made and no longer agree; make it \
             again with {make}"
        ),
    )
}

impl PoolProblem {
    /// Pooling of `x` (`[rows, columns]` pairs): `window ≥ 1`, `stride ≥ 1`, `pad < window`
    /// (so no window covers only padding) and a window that fits in the padded input. The
    /// output descriptor `y` is computed (in `x`'s layout).
    pub fn new(
        x: &TensorDesc,
        mode: PoolMode,
        window: [u64; 2],
        pad: [u64; 2],
        stride: [u64; 2],
    ) -> Result<Self> {
        const OP: &str = "PoolProblem::new";
        nonzero(
            OP,
            &["window[0]", "window[1]", "stride[0]", "stride[1]"],
            &[window[0], window[1], stride[0], stride[1]],
        )?;
        for d in 0..2 {
            if pad[d] >= window[d] {
                return Err(Error::invalid(
                    OP,
                    format!(
                        "pad[{d}] = {} is not less than window[{d}] = {}, so the first window \
                         would cover only padding; use pad < window",
                        pad[d], window[d]
                    ),
                ));
            }
        }
        let h = swept(OP, "h (rows)", x.h, pad[0], window[0], stride[0])?;
        let w = swept(OP, "w (columns)", x.w, pad[1], window[1], stride[1])?;
        let y = TensorDesc::new(x.dtype, x.layout, x.n, x.c, h, w)?;
        Ok(PoolProblem {
            x: *x,
            y,
            mode,
            window,
            pad,
            stride,
        })
    }

    /// Re-checks a problem at enqueue (its fields are public).
    pub(crate) fn revalidate(&self, op: &str) -> Result<()> {
        self.x.revalidate(op, "p.x")?;
        let again = PoolProblem::new(&self.x, self.mode, self.window, self.pad, self.stride)?;
        if again != *self {
            return Err(changed(op, "PoolProblem", "PoolProblem::new"));
        }
        Ok(())
    }
}

impl BatchNormProblem {
    /// Spatial batch normalisation of tensors shaped as `x`: `epsilon` finite and ≥
    /// [`BATCH_NORM_MIN_EPSILON`], `momentum` in `[0, 1]` (the batch's weight in the running
    /// statistics).
    pub fn new(x: &TensorDesc, epsilon: f64, momentum: f64) -> Result<Self> {
        const OP: &str = "BatchNormProblem::new";
        if !epsilon.is_finite() || epsilon < BATCH_NORM_MIN_EPSILON {
            return Err(Error::invalid(
                OP,
                format!(
                    "epsilon = {epsilon}; it must be finite and ≥ {BATCH_NORM_MIN_EPSILON} \
                     (cuDNN's CUDNN_BN_MIN_EPSILON)"
                ),
            ));
        }
        if !(0.0..=1.0).contains(&momentum) {
            return Err(Error::invalid(
                OP,
                format!(
                    "momentum = {momentum}; it is the batch's weight in the running average \
                     and must lie in [0, 1]"
                ),
            ));
        }
        Ok(BatchNormProblem {
            x: *x,
            epsilon,
            momentum,
        })
    }

    /// Re-checks a problem at enqueue (its fields are public).
    pub(crate) fn revalidate(&self, op: &str) -> Result<()> {
        self.x.revalidate(op, "p.x")?;
        BatchNormProblem::new(&self.x, self.epsilon, self.momentum).map(|_| ())
    }
}

impl MatmulProblem {
    /// `y[m×n] = act(x[m×k]·w[k×n] + bias[n])`, row-major; `m, n, k ≥ 1` and every operand's
    /// bytes must fit in `u64` and `usize`.
    pub fn new(
        dtype: DnnDataType,
        m: u64,
        n: u64,
        k: u64,
        activation: Option<Activation>,
    ) -> Result<Self> {
        const OP: &str = "MatmulProblem::new";
        nonzero(OP, &["m", "n", "k"], &[m, n, k])?;
        element_count(OP, "x [m, k] =", &[m, k], dtype)?;
        element_count(OP, "w [k, n] =", &[k, n], dtype)?;
        element_count(OP, "y [m, n] =", &[m, n], dtype)?;
        Ok(MatmulProblem {
            m,
            n,
            k,
            dtype,
            activation,
        })
    }

    /// Re-checks a problem at enqueue (its fields are public).
    pub(crate) fn revalidate(&self, _op: &str) -> Result<()> {
        MatmulProblem::new(self.dtype, self.m, self.n, self.k, self.activation).map(|_| ())
    }
}
