//! The DNN plugin trait and the validated problem descriptors it takes.
//!
//! A backend that runs DNN operations returns an implementation from
//! [`StreamExecutorInterface::dnn`](super::StreamExecutorInterface::dnn); the default is
//! `None`, and the stream then fails with `Error::Unsupported` naming the operation. As in
//! StreamExecutor, the support object belongs to the executor and every call names the stream.
//!
//! The descriptors are made only by the validating constructors of `src/dnn.rs`
//! (`#[non_exhaustive]`), and `Stream` validates them again at enqueue with the buffers: sizes
//! ≥ 1, element counts and byte sizes that fit in `u64` and `usize`, output shapes that follow
//! from the inputs, group rules, windows that see at least one input element, epsilon and
//! momentum in range, dtypes equal to the buffers' element types, buffers that hold their
//! tensors, and outputs that do not overlap inputs (except where a method says it may run in
//! place). A backend never sees an impossible problem; it fails only for its own reasons.
//!
//! Conventions are cuDNN's: convolution is cross-correlation (the filter is not flipped);
//! tensors are 4-D, addressed through [`TensorDesc::strides`] (element `(n, c, h, w)` is at
//! `n·s[0] + c·s[1] + h·s[2] + w·s[3]`); per-channel vectors (scale, bias, mean, variance) hold
//! `C` elements of the tensor's dtype; every operation overwrites its outputs (no alpha/beta)
//! except `bias_add`, which adds in place. Max pooling routes the gradient to the first maximum
//! of a window in row-major window order; padding never wins a max.

use super::StreamInterface;
use super::blas::Operand;
use crate::error::{Error, Result};

/// Element type of a DNN tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DnnDataType {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl DnnDataType {
    /// Bytes per element.
    pub const fn size(self) -> u64 {
        match self {
            DnnDataType::F32 => 4,
            DnnDataType::F64 => 8,
        }
    }
}

/// Memory order of a 4-D tensor (and of a filter: NCHW stores KCRS, NHWC stores KRSC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorLayout {
    /// Batch, channel, row, column; `w` varies fastest.
    Nchw,
    /// Batch, row, column, channel; `c` varies fastest.
    Nhwc,
}

/// Element strides of a packed 4-D array with extents `(d0, d1, d2, d3)` in logical order,
/// stored in `layout`.
const fn packed_strides(layout: TensorLayout, d1: u64, d2: u64, d3: u64) -> [u64; 4] {
    match layout {
        TensorLayout::Nchw => [d1 * d2 * d3, d2 * d3, d3, 1],
        TensorLayout::Nhwc => [d2 * d3 * d1, 1, d3 * d1, d1],
    }
}

/// A packed 4-D tensor: `n` images of `c` channels of `h × w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DnnDataType,
    /// Memory order.
    pub layout: TensorLayout,
    /// Batch size.
    pub n: u64,
    /// Channels.
    pub c: u64,
    /// Rows.
    pub h: u64,
    /// Columns.
    pub w: u64,
}

impl TensorDesc {
    /// Element strides in `(n, c, h, w)` order, from the layout.
    pub const fn strides(&self) -> [u64; 4] {
        packed_strides(self.layout, self.c, self.h, self.w)
    }

    /// Element count `n·c·h·w` (fits in `u64` and `usize` for a validated descriptor).
    pub const fn elements(&self) -> u64 {
        self.n * self.c * self.h * self.w
    }

    /// The element index of `(n, c, h, w)`.
    pub const fn offset(&self, n: u64, c: u64, h: u64, w: u64) -> u64 {
        let s = self.strides();
        n * s[0] + c * s[1] + h * s[2] + w * s[3]
    }
}

/// A packed convolution filter: `k` output channels, each over `c_per_group` input channels
/// of `r × s` taps. `Nchw` stores KCRS, `Nhwc` stores KRSC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FilterDesc {
    /// Element type.
    pub dtype: DnnDataType,
    /// Memory order.
    pub layout: TensorLayout,
    /// Output channels (all groups together).
    pub k: u64,
    /// Input channels each output channel sees (`C / groups`).
    pub c_per_group: u64,
    /// Filter rows.
    pub r: u64,
    /// Filter columns.
    pub s: u64,
}

impl FilterDesc {
    /// Element strides in `(k, c, r, s)` order, from the layout.
    pub const fn strides(&self) -> [u64; 4] {
        packed_strides(self.layout, self.c_per_group, self.r, self.s)
    }

    /// Element count `k·c_per_group·r·s`.
    pub const fn elements(&self) -> u64 {
        self.k * self.c_per_group * self.r * self.s
    }

    /// The element index of tap `(k, c, r, s)` (`c` counted inside the group).
    pub const fn offset(&self, k: u64, c: u64, r: u64, s: u64) -> u64 {
        let st = self.strides();
        k * st[0] + c * st[1] + r * st[2] + s * st[3]
    }
}

/// Geometry of a 2-D convolution; `[rows, columns]` in each pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ConvDesc {
    /// Implicit zero padding on both sides.
    pub pad: [u64; 2],
    /// Step between output positions, ≥ 1.
    pub stride: [u64; 2],
    /// Step between filter taps, ≥ 1.
    pub dilation: [u64; 2],
    /// Channel groups, ≥ 1 (`groups = C` is depthwise).
    pub groups: u64,
}

/// A validated convolution: `y[n, k, p, q] = Σ_{c, r, s} x[n, g·C/G + c, p·stride − pad +
/// r·dilation, …] · w[k, c, r, s]` over the `C/G` channels of `k`'s group `g = k / (K/G)`
/// (cross-correlation). `y.h = (x.h + 2·pad − dilation·(r − 1) − 1) / stride + 1`, likewise
/// `y.w`; `y.c = w.k`, `y.n = x.n`. All three share one dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ConvProblem {
    /// Input (or, backward, the input gradient's shape).
    pub x: TensorDesc,
    /// Filter.
    pub w: FilterDesc,
    /// Geometry.
    pub conv: ConvDesc,
    /// Output (or, backward, the output gradient's shape).
    pub y: TensorDesc,
}

impl ConvProblem {
    /// Output channels per group, `K / groups`.
    pub const fn k_per_group(&self) -> u64 {
        self.w.k / self.conv.groups
    }
}

/// What a pooling window computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolMode {
    /// The largest element the window covers (padding never counts); the gradient goes to the
    /// first maximum in row-major window order.
    Max,
    /// The sum of the covered elements (padding as zeros) divided by the window's area.
    AverageIncludePadding,
    /// The mean of the covered elements that lie inside the input.
    AverageExcludePadding,
}

/// A validated 2-D pooling; `[rows, columns]` in each pair. `y.h = (x.h + 2·pad − window) /
/// stride + 1`, likewise `y.w`; `y.n = x.n`, `y.c = x.c`. `pad < window` in each dimension,
/// so every window covers at least one input element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PoolProblem {
    /// Input.
    pub x: TensorDesc,
    /// Output.
    pub y: TensorDesc,
    /// What a window computes.
    pub mode: PoolMode,
    /// Window size.
    pub window: [u64; 2],
    /// Implicit padding on both sides.
    pub pad: [u64; 2],
    /// Step between windows.
    pub stride: [u64; 2],
}

/// An element-wise activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `max(x, 0)`; its gradient is `dy` where `x > 0`, else 0.
    Relu,
    /// `1 / (1 + e^{−x})`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// The exact GELU, `0.5·x·(1 + erf(x/√2))`.
    Gelu,
}

/// What a softmax normalises over (cuDNN's modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftmaxMode {
    /// Over `C` at each `(n, h, w)`.
    Channel,
    /// Over `C·H·W` of each image `n`.
    Instance,
}

/// Which softmax (cuDNN's algorithms; both subtract the maximum first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftmaxAlgorithm {
    /// `y = e^{x − max} / Σ e^{x − max}`.
    Accurate,
    /// Log-softmax, `y = x − max − ln Σ e^{x − max}`.
    Log,
}

/// A validated batch normalisation in cuDNN's SPATIAL mode: statistics per channel over
/// `N·H·W`. Training forward writes `y = scale·(x − mean)·inv_std + bias` with the batch's
/// mean and biased variance, saves `mean` and `inv_std = 1/√(var_biased + epsilon)` for
/// backward, and updates `running = (1 − momentum)·running + momentum·batch`, the running
/// variance from the unbiased batch variance (`var_biased·M/(M − 1)`, `M = N·H·W ≥ 2`).
/// Inference writes `y = scale·(x − mean)/√(var + epsilon) + bias` from given statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BatchNormProblem {
    /// The data tensor (`y`, `dy` and `dx` have the same descriptor).
    pub x: TensorDesc,
    /// Added to the variance, ≥ 1e-5 (cuDNN's `CUDNN_BN_MIN_EPSILON`), finite.
    pub epsilon: f64,
    /// Weight of the batch statistics in the running update, in `[0, 1]`.
    pub momentum: f64,
}

/// A validated fused matmul, row-major: `y[m×n] = act(x[m×k]·w[k×n] + bias[n])`, no
/// activation when `activation` is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct MatmulProblem {
    /// Rows of `x` and `y`.
    pub m: u64,
    /// Columns of `w` and `y`, length of `bias`.
    pub n: u64,
    /// Columns of `x`, rows of `w`.
    pub k: u64,
    /// Element type of all four operands.
    pub dtype: DnnDataType,
    /// Applied after the bias.
    pub activation: Option<Activation>,
}

/// The error of an operation a backend does not implement.
fn not_implemented(support: &(impl DnnSupport + ?Sized), op: &str) -> Error {
    Error::unsupported(
        support.platform(),
        op,
        format!(
            "the DNN backend '{}' does not implement {op}; run it on a platform that does \
             (host)",
            support.implementation()
        ),
    )
}

/// DNN on one executor. Each call enqueues on `stream` and returns at once; a run-time
/// failure fails the stream. Every operation has a default body that returns
/// `Error::Unsupported` naming it, so a backend may implement a subset.
///
/// # Safety (every method)
/// `stream` belongs to this executor; every [`Operand`] lies inside one live allocation of this
/// executor and holds at least the elements of the tensor (or vector) it stands for, of the
/// problem's dtype; the problem was validated by `src/dnn.rs`; outputs do not overlap inputs
/// except where a method allows it (then they are equal, not partly overlapping).
#[allow(clippy::too_many_arguments)] // The operands are the operation's, as cuDNN's are.
pub trait DnnSupport: Send + Sync {
    /// What serves the operations, for the executor's plugin report (e.g. "built-in (gemm)").
    fn implementation(&self) -> &'static str;

    /// The platform's name (`"host"`, `"opencl"`, `"cuda"`, ...), for `Unsupported` errors.
    fn platform(&self) -> &'static str;

    /// `y = conv(x, w)` (overwrites `y`).
    ///
    /// # Safety
    /// See the trait; `x: p.x`, `w: p.w`, `y: p.y`.
    unsafe fn convolution_forward(
        &self,
        _stream: &dyn StreamInterface,
        _p: &ConvProblem,
        _x: Operand,
        _w: Operand,
        _y: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "convolution_forward"))
    }

    /// `dx = ∂(Σ dy·conv(x, w))/∂x` (overwrites `dx`).
    ///
    /// # Safety
    /// See the trait; `w: p.w`, `dy: p.y`, `dx: p.x`.
    unsafe fn convolution_backward_data(
        &self,
        _stream: &dyn StreamInterface,
        _p: &ConvProblem,
        _w: Operand,
        _dy: Operand,
        _dx: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "convolution_backward_data"))
    }

    /// `dw = ∂(Σ dy·conv(x, w))/∂w` (overwrites `dw`).
    ///
    /// # Safety
    /// See the trait; `x: p.x`, `dy: p.y`, `dw: p.w`.
    unsafe fn convolution_backward_filter(
        &self,
        _stream: &dyn StreamInterface,
        _p: &ConvProblem,
        _x: Operand,
        _dy: Operand,
        _dw: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "convolution_backward_filter"))
    }

    /// `y = pool(x)`.
    ///
    /// # Safety
    /// See the trait; `x: p.x`, `y: p.y`.
    unsafe fn pooling_forward(
        &self,
        _stream: &dyn StreamInterface,
        _p: &PoolProblem,
        _x: Operand,
        _y: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "pooling_forward"))
    }

    /// `dx` from `dy` (`x` and `y` are the forward's input and output; max pooling finds the
    /// first maximum of each window in `x`). Overwrites `dx`.
    ///
    /// # Safety
    /// See the trait; `x, dx: p.x`, `y, dy: p.y`.
    unsafe fn pooling_backward(
        &self,
        _stream: &dyn StreamInterface,
        _p: &PoolProblem,
        _x: Operand,
        _y: Operand,
        _dy: Operand,
        _dx: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "pooling_backward"))
    }

    /// `y = act(x)` element-wise; may run in place (`y == x`).
    ///
    /// # Safety
    /// See the trait; `x` and `y` hold `x_desc`'s elements (same layout).
    unsafe fn activation_forward(
        &self,
        _stream: &dyn StreamInterface,
        _act: Activation,
        _x_desc: &TensorDesc,
        _x: Operand,
        _y: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "activation_forward"))
    }

    /// `dx = dy · act'(x)` element-wise, from the forward's input `x` and output `y` (each
    /// activation reads the one it needs: ReLU and GELU `x`, sigmoid and tanh `y`); may run in
    /// place (`dx == dy`).
    ///
    /// # Safety
    /// See the trait; all four hold `x_desc`'s elements.
    unsafe fn activation_backward(
        &self,
        _stream: &dyn StreamInterface,
        _act: Activation,
        _x_desc: &TensorDesc,
        _x: Operand,
        _y: Operand,
        _dy: Operand,
        _dx: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "activation_backward"))
    }

    /// `y = softmax(x)` (or log-softmax) over `mode`'s groups. Not in place.
    ///
    /// # Safety
    /// See the trait; `x` and `y` hold `x_desc`'s elements.
    unsafe fn softmax_forward(
        &self,
        _stream: &dyn StreamInterface,
        _alg: SoftmaxAlgorithm,
        _mode: SoftmaxMode,
        _x_desc: &TensorDesc,
        _x: Operand,
        _y: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "softmax_forward"))
    }

    /// `dx` from the forward's output `y` and `dy`: `Accurate`: `dx = y·(dy − Σ dy·y)`;
    /// `Log`: `dx = dy − e^{y}·Σ dy`, sums over `mode`'s groups. Not in place.
    ///
    /// # Safety
    /// See the trait; all three hold `y_desc`'s elements.
    unsafe fn softmax_backward(
        &self,
        _stream: &dyn StreamInterface,
        _alg: SoftmaxAlgorithm,
        _mode: SoftmaxMode,
        _y_desc: &TensorDesc,
        _y: Operand,
        _dy: Operand,
        _dx: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "softmax_backward"))
    }

    /// Training forward (see [`BatchNormProblem`]): writes `y`, `save_mean`, `save_inv_std`
    /// and updates `running_mean` and `running_var` in place. Not in place (`y ≠ x`).
    ///
    /// # Safety
    /// See the trait; `x, y: p.x`; the other six hold `C` elements each.
    unsafe fn batch_norm_forward_training(
        &self,
        _stream: &dyn StreamInterface,
        _p: &BatchNormProblem,
        _x: Operand,
        _scale: Operand,
        _bias: Operand,
        _y: Operand,
        _running_mean: Operand,
        _running_var: Operand,
        _save_mean: Operand,
        _save_inv_std: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "batch_norm_forward_training"))
    }

    /// Inference forward from given statistics (see [`BatchNormProblem`]). Not in place.
    ///
    /// # Safety
    /// See the trait; `x, y: p.x`; `scale, bias, mean, var` hold `C` elements each.
    unsafe fn batch_norm_forward_inference(
        &self,
        _stream: &dyn StreamInterface,
        _p: &BatchNormProblem,
        _x: Operand,
        _scale: Operand,
        _bias: Operand,
        _mean: Operand,
        _var: Operand,
        _y: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "batch_norm_forward_inference"))
    }

    /// Backward of training forward, from its saved statistics: writes `dx`, `dscale =
    /// Σ dy·x̂` and `dbias = Σ dy` (per channel, `x̂ = (x − mean)·inv_std`). Not in place.
    ///
    /// # Safety
    /// See the trait; `x, dy, dx: p.x`; the five vectors hold `C` elements each.
    unsafe fn batch_norm_backward(
        &self,
        _stream: &dyn StreamInterface,
        _p: &BatchNormProblem,
        _x: Operand,
        _dy: Operand,
        _scale: Operand,
        _save_mean: Operand,
        _save_inv_std: Operand,
        _dx: Operand,
        _dscale: Operand,
        _dbias: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "batch_norm_backward"))
    }

    /// `y[n, c, h, w] += bias[c]`, in place.
    ///
    /// # Safety
    /// See the trait; `y` holds `y_desc`'s elements, `bias` `C`.
    unsafe fn bias_add(
        &self,
        _stream: &dyn StreamInterface,
        _y_desc: &TensorDesc,
        _y: Operand,
        _bias: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "bias_add"))
    }

    /// `y = act(x·w + bias)` (see [`MatmulProblem`]). Not in place.
    ///
    /// # Safety
    /// See the trait; `x` holds `m·k`, `w` `k·n`, `bias` `n`, `y` `m·n` elements.
    unsafe fn matmul_bias_activation(
        &self,
        _stream: &dyn StreamInterface,
        _p: &MatmulProblem,
        _x: Operand,
        _w: Operand,
        _bias: Operand,
        _y: Operand,
    ) -> Result<()> {
        Err(not_implemented(self, "matmul_bias_activation"))
    }
}
