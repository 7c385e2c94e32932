//! `DnnSupport` over the built-in kernels for any backend that implements [`DnnDevice`]: each
//! operation packs its validated problem into one kernel's parameter list (the order
//! `kernels/dnn_body.h` documents) and launches it on the user's stream.

use std::sync::Arc;

use super::kernel_name;
use crate::error::{Error, Result};
use crate::interface::blas::{BlasElem, GemmCall, Operand, Transpose};
use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvProblem, DnnDataType, MatmulProblem, PoolMode, PoolProblem,
    SoftmaxAlgorithm, SoftmaxMode, TensorDesc,
};
use crate::interface::{BlasSupport, DnnSupport, KernelInterface, StreamInterface};
use crate::types::{BlockDim, LaunchDims, Packable, PackedArg, ThreadDim};

/// What a backend lends the built-in DNN operations.
pub(crate) trait DnnDevice: Send + Sync {
    /// The platform's name, for errors.
    fn dnn_platform(&self) -> &'static str;
    /// Built-in kernel `name` (one of [`super::KERNELS`]' names), loaded once.
    fn dnn_kernel(&self, name: &'static str, fp64: bool) -> Result<Arc<dyn KernelInterface>>;
    /// The kernel arguments of operand `o` with `elem`-byte elements: a pointer to its
    /// allocation and `o`'s offset from it in elements.
    fn dnn_operand(&self, o: Operand, elem: u64, op: &str) -> Result<[PackedArg; 2]>;
    /// Threads per block of every launch, and the most blocks of one launch (the kernels loop
    /// with grid strides over the rest).
    fn dnn_grid(&self) -> (u32, u32);
    /// The BLAS that runs the fused matmul's product, if the executor has one.
    fn dnn_blas(&self) -> Option<&dyn BlasSupport>;
}

/// Activation mode numbers of the kernels (0 is none).
fn act_mode(a: Option<Activation>) -> u32 {
    match a {
        None => 0,
        Some(Activation::Relu) => 1,
        Some(Activation::Sigmoid) => 2,
        Some(Activation::Tanh) => 3,
        Some(Activation::Gelu) => 4,
    }
}

/// A geometry value as the kernels' signed 64-bit parameter.
fn signed(v: u64, what: &str, op: &str) -> Result<i64> {
    i64::try_from(v).map_err(|_| {
        Error::invalid(
            op,
            format!("{what} {v} exceeds the built-in kernels' 63-bit range; use smaller values"),
        )
    })
}

/// One launch being packed.
struct Call<'a, D: ?Sized> {
    dev: &'a D,
    op: &'static str,
    fp64: bool,
    args: Vec<PackedArg>,
}

impl<'a, D: DnnDevice + ?Sized> Call<'a, D> {
    fn new(dev: &'a D, op: &'static str, dtype: DnnDataType) -> Self {
        Call {
            dev,
            op,
            fp64: dtype == DnnDataType::F64,
            args: Vec::with_capacity(40),
        }
    }
    fn buf(&mut self, o: Operand) -> Result<&mut Self> {
        let elem = if self.fp64 { 8 } else { 4 };
        self.args.extend(self.dev.dnn_operand(o, elem, self.op)?);
        Ok(self)
    }
    fn bufs(&mut self, os: &[Operand]) -> Result<&mut Self> {
        for &o in os {
            self.buf(o)?;
        }
        Ok(self)
    }
    fn u(&mut self, vs: &[u64]) -> &mut Self {
        self.args.extend(vs.iter().map(|v| v.pack()));
        self
    }
    fn i(&mut self, vs: &[u64], what: &str) -> Result<&mut Self> {
        for &v in vs {
            self.args.push(signed(v, what, self.op)?.pack());
        }
        Ok(self)
    }
    fn w(&mut self, v: u32) -> &mut Self {
        self.args.push(v.pack());
        self
    }
    /// A scalar of the kernel's precision.
    fn f(&mut self, v: f64) -> &mut Self {
        self.args.push(if self.fp64 {
            v.pack()
        } else {
            (v as f32).pack()
        });
        self
    }
    /// A tensor's sizes, then its strides.
    fn tensor(&mut self, t: &TensorDesc) -> &mut Self {
        self.u(&[t.n, t.c, t.h, t.w]).u(&t.strides())
    }

    /// Launches `se_dnn_<base>` over `work` items on `stream`.
    ///
    /// # Safety
    /// The arguments are that kernel's list, and its pointers cover what it touches.
    unsafe fn launch(&self, stream: &dyn StreamInterface, base: &str, work: u64) -> Result<()> {
        let name = kernel_name(base, self.fp64)?;
        debug_assert_eq!(self.args.len(), super::arity(name), "{name}'s arguments");
        let kernel = self.dev.dnn_kernel(name, self.fp64)?;
        let (threads, max_blocks) = self.dev.dnn_grid();
        let blocks = work
            .div_ceil(u64::from(threads))
            .clamp(1, u64::from(max_blocks.max(1))) as u32;
        let dims = LaunchDims {
            threads: ThreadDim::new(threads, 1, 1),
            blocks: BlockDim::new(blocks, 1, 1),
            dynamic_shared_bytes: 0,
            cooperative: false,
        };
        // SAFETY: this function's contract.
        unsafe { stream.launch(&kernel, &dims, &self.args) }
    }
}

/// The convolution kernels' shared parameter list after their three buffers.
fn conv_geometry<D: DnnDevice + ?Sized>(c: &mut Call<'_, D>, p: &ConvProblem) -> Result<()> {
    c.tensor(&p.x)
        .u(&[p.w.k, p.w.r, p.w.s])
        .u(&p.w.strides())
        .u(&[p.y.h, p.y.w])
        .u(&p.y.strides())
        .i(&p.conv.pad, "padding")?
        .i(&p.conv.stride, "stride")?
        .i(&p.conv.dilation, "dilation")?
        .u(&[p.conv.groups])
        .f(1.0)
        .f(0.0);
    Ok(())
}

/// The pooling kernels' window parameters (after the tensors).
fn pool_window<D: DnnDevice + ?Sized>(c: &mut Call<'_, D>, p: &PoolProblem) -> Result<()> {
    let mode = match p.mode {
        PoolMode::Max => 0,
        PoolMode::AverageIncludePadding => 1,
        PoolMode::AverageExcludePadding => 2,
    };
    c.i(&p.window, "window")?
        .i(&p.pad, "padding")?
        .i(&p.stride, "stride")?
        .w(mode)
        .f(1.0)
        .f(0.0);
    Ok(())
}

/// Rows a softmax reduces (one thread each).
fn softmax_rows(mode: SoftmaxMode, t: &TensorDesc) -> (u32, u64) {
    match mode {
        SoftmaxMode::Channel => (0, t.n * t.h * t.w),
        SoftmaxMode::Instance => (1, t.n),
    }
}

#[allow(clippy::too_many_arguments)] // The trait's.
impl<D: DnnDevice> DnnSupport for D {
    fn implementation(&self) -> &'static str {
        "built-in kernels"
    }

    fn platform(&self) -> &'static str {
        self.dnn_platform()
    }

    unsafe fn convolution_forward(
        &self,
        stream: &dyn StreamInterface,
        p: &ConvProblem,
        x: Operand,
        w: Operand,
        y: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_convolution_forward", p.x.dtype);
        c.bufs(&[x, w, y])?;
        conv_geometry(&mut c, p)?;
        // SAFETY: the trait's contract: the operands hold their tensors.
        unsafe { c.launch(stream, "conv_fwd", p.y.elements()) }
    }

    unsafe fn convolution_backward_data(
        &self,
        stream: &dyn StreamInterface,
        p: &ConvProblem,
        w: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_convolution_backward_data", p.x.dtype);
        c.bufs(&[dx, w, dy])?;
        conv_geometry(&mut c, p)?;
        // SAFETY: as above.
        unsafe { c.launch(stream, "conv_bwd_data", p.x.elements()) }
    }

    unsafe fn convolution_backward_filter(
        &self,
        stream: &dyn StreamInterface,
        p: &ConvProblem,
        x: Operand,
        dy: Operand,
        dw: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_convolution_backward_filter", p.x.dtype);
        c.bufs(&[x, dw, dy])?;
        conv_geometry(&mut c, p)?;
        // SAFETY: as above.
        unsafe { c.launch(stream, "conv_bwd_filter", p.w.elements()) }
    }

    unsafe fn pooling_forward(
        &self,
        stream: &dyn StreamInterface,
        p: &PoolProblem,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_pooling_forward", p.x.dtype);
        c.bufs(&[x, y])?
            .tensor(&p.x)
            .u(&[p.y.h, p.y.w])
            .u(&p.y.strides());
        pool_window(&mut c, p)?;
        // SAFETY: as above.
        unsafe { c.launch(stream, "pool_fwd", p.y.elements()) }
    }

    unsafe fn pooling_backward(
        &self,
        stream: &dyn StreamInterface,
        p: &PoolProblem,
        x: Operand,
        _y: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        // The kernel re-finds each window's first maximum in x; it does not need y.
        let mut c = Call::new(self, "then_pooling_backward", p.x.dtype);
        c.bufs(&[x, dy, dx])?
            .tensor(&p.x)
            .u(&p.x.strides())
            .u(&[p.y.h, p.y.w])
            .u(&p.y.strides());
        pool_window(&mut c, p)?;
        // SAFETY: as above.
        unsafe { c.launch(stream, "pool_bwd", p.x.elements()) }
    }

    unsafe fn activation_forward(
        &self,
        stream: &dyn StreamInterface,
        act: Activation,
        x_desc: &TensorDesc,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_activation_forward", x_desc.dtype);
        c.bufs(&[x, y])?
            .tensor(x_desc)
            .u(&x_desc.strides())
            .w(act_mode(Some(act)))
            .f(1.0)
            .f(0.0);
        // SAFETY: as above; each thread reads its element before writing it (in place).
        unsafe { c.launch(stream, "act_fwd", x_desc.elements()) }
    }

    unsafe fn activation_backward(
        &self,
        stream: &dyn StreamInterface,
        act: Activation,
        x_desc: &TensorDesc,
        x: Operand,
        y: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let s = x_desc.strides();
        let mut c = Call::new(self, "then_activation_backward", x_desc.dtype);
        c.bufs(&[x, y, dy, dx])?
            .tensor(x_desc)
            .u(&s)
            .u(&s)
            .u(&s)
            .w(act_mode(Some(act)))
            .f(1.0)
            .f(0.0);
        // SAFETY: as above; each thread reads its elements before writing (dx == dy).
        unsafe { c.launch(stream, "act_bwd", x_desc.elements()) }
    }

    unsafe fn softmax_forward(
        &self,
        stream: &dyn StreamInterface,
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        x_desc: &TensorDesc,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let (m, rows) = softmax_rows(mode, x_desc);
        let mut c = Call::new(self, "then_softmax_forward", x_desc.dtype);
        c.bufs(&[x, y])?
            .tensor(x_desc)
            .u(&x_desc.strides())
            .w(m)
            .w(u32::from(alg == SoftmaxAlgorithm::Log))
            .f(1.0)
            .f(0.0);
        // SAFETY: as above.
        unsafe { c.launch(stream, "softmax_fwd", rows) }
    }

    unsafe fn softmax_backward(
        &self,
        stream: &dyn StreamInterface,
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        y_desc: &TensorDesc,
        y: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let (m, rows) = softmax_rows(mode, y_desc);
        let s = y_desc.strides();
        let mut c = Call::new(self, "then_softmax_backward", y_desc.dtype);
        c.bufs(&[y, dy, dx])?
            .tensor(y_desc)
            .u(&s)
            .u(&s)
            .w(m)
            .w(u32::from(alg == SoftmaxAlgorithm::Log))
            .f(1.0)
            .f(0.0);
        // SAFETY: as above.
        unsafe { c.launch(stream, "softmax_bwd", rows) }
    }

    unsafe fn batch_norm_forward_training(
        &self,
        stream: &dyn StreamInterface,
        p: &BatchNormProblem,
        x: Operand,
        scale: Operand,
        bias: Operand,
        y: Operand,
        running_mean: Operand,
        running_var: Operand,
        save_mean: Operand,
        save_inv_std: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_batch_norm_forward_training", p.x.dtype);
        c.bufs(&[
            x,
            y,
            scale,
            bias,
            running_mean,
            running_var,
            save_mean,
            save_inv_std,
        ])?
        .tensor(&p.x)
        .u(&p.x.strides())
        .f(p.epsilon)
        .f(p.momentum)
        .w(3); // update the running statistics and save the batch's
        // SAFETY: as above.
        unsafe { c.launch(stream, "bn_fwd_train", p.x.c) }
    }

    unsafe fn batch_norm_forward_inference(
        &self,
        stream: &dyn StreamInterface,
        p: &BatchNormProblem,
        x: Operand,
        scale: Operand,
        bias: Operand,
        mean: Operand,
        var: Operand,
        y: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_batch_norm_forward_inference", p.x.dtype);
        c.bufs(&[x, y, scale, bias, mean, var])?
            .tensor(&p.x)
            .u(&p.x.strides())
            .f(p.epsilon);
        // SAFETY: as above.
        unsafe { c.launch(stream, "bn_fwd_infer", p.x.elements()) }
    }

    unsafe fn batch_norm_backward(
        &self,
        stream: &dyn StreamInterface,
        p: &BatchNormProblem,
        x: Operand,
        dy: Operand,
        scale: Operand,
        save_mean: Operand,
        save_inv_std: Operand,
        dx: Operand,
        dscale: Operand,
        dbias: Operand,
    ) -> Result<()> {
        let s = p.x.strides();
        let mut c = Call::new(self, "then_batch_norm_backward", p.x.dtype);
        c.bufs(&[x, dy, dx, scale, dscale, dbias, save_mean, save_inv_std])?
            .tensor(&p.x)
            .u(&s)
            .u(&s)
            .f(p.epsilon)
            .w(1); // from the saved statistics
        // SAFETY: as above.
        unsafe { c.launch(stream, "bn_bwd", p.x.c) }
    }

    unsafe fn bias_add(
        &self,
        stream: &dyn StreamInterface,
        y_desc: &TensorDesc,
        y: Operand,
        bias: Operand,
    ) -> Result<()> {
        let mut c = Call::new(self, "then_bias_add", y_desc.dtype);
        c.bufs(&[y, bias])?.tensor(y_desc).f(1.0).f(1.0);
        // SAFETY: as above; each thread updates its own element.
        unsafe { c.launch(stream, "bias_add", y_desc.elements()) }
    }

    unsafe fn matmul_bias_activation(
        &self,
        stream: &dyn StreamInterface,
        p: &MatmulProblem,
        x: Operand,
        w: Operand,
        bias: Operand,
        y: Operand,
    ) -> Result<()> {
        const OP: &str = "then_matmul_bias_activation";
        let blas = self.dnn_blas().ok_or_else(|| {
            Error::unsupported(
                self.dnn_platform(),
                OP,
                "this executor has no BLAS for the product; use the host platform",
            )
        })?;
        // Row-major y (m×n) = x (m×k)·w (k×n) is column-major yᵀ (n×m) = wᵀ (n×k)·xᵀ (k×m),
        // and a row-major matrix is its transpose column-major: no transposes needed.
        let call = GemmCall {
            elem: match p.dtype {
                DnnDataType::F32 => BlasElem::F32,
                DnnDataType::F64 => BlasElem::F64,
            },
            trans_a: Transpose::None,
            trans_b: Transpose::None,
            m: p.n,
            n: p.m,
            k: p.k,
            alpha: 1.0,
            a: w,
            lda: p.n,
            b: x,
            ldb: p.k,
            beta: 0.0,
            c: y,
            ldc: p.n,
            batch: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
        };
        // SAFETY: the trait's contract: x holds m·k, w k·n and y m·n elements.
        unsafe { blas.gemm(stream, &call)? };
        let mut c = Call::new(self, OP, p.dtype);
        c.bufs(&[y, bias])?
            .u(&[p.m, p.n, p.n, 1])
            .w(1)
            .w(act_mode(p.activation));
        // SAFETY: as above: y holds m·n elements, bias n.
        unsafe { c.launch(stream, "epilogue", p.m * p.n) }
    }
}
