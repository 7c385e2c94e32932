//! The `then_*` DNN methods of [`Stream`]: the enqueue-time checks (module docs of `dnn`), then
//! one call of the executor's [`DnnSupport`].

use super::DnnElement;
use crate::error::{Error, Result};
use crate::interface::DnnSupport;
use crate::interface::blas::Operand;
use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvProblem, DnnDataType, MatmulProblem, PoolProblem,
    SoftmaxAlgorithm, SoftmaxMode, TensorDesc,
};
use crate::memory::DeviceSlice;
use crate::stream::Stream;

/// The buffers of one call as they are checked: each one's byte range, to find overlaps.
struct Buffers<'s> {
    stream: &'s Stream,
    dnn: &'s dyn DnnSupport,
    op: &'static str,
    dtype: DnnDataType,
    /// `(name, first byte, bytes, written)`.
    ranges: Vec<(&'static str, u64, u64, bool)>,
}

impl<'s> Buffers<'s> {
    /// The checks of a call on `stream` whose problem is valid: `Unsupported` first where the
    /// platform has no DNN.
    fn new(stream: &'s Stream, op: &'static str, dtype: DnnDataType) -> Result<Self> {
        let exec = stream.executor();
        let dnn = exec.interface().dnn().ok_or_else(|| {
            Error::unsupported(
                exec.platform_name(),
                op,
                format!(
                    "{} has no DNN support in this build; run DNN operations on a platform \
                     that has it (host)",
                    exec.description().name
                ),
            )
        })?;
        Ok(Buffers {
            stream,
            dnn,
            op,
            dtype,
            ranges: Vec::new(),
        })
    }

    /// Checks `slice` (argument `name`) holds `need` elements of the call's dtype on this
    /// stream's executor, and records its range.
    fn add<T: DnnElement>(
        &mut self,
        name: &'static str,
        slice: &DeviceSlice<'_, T>,
        need: u64,
        written: bool,
    ) -> Result<Operand> {
        let op = self.op;
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(
                op,
                format!(
                    "{name} holds {:?} elements but the descriptor's dtype is {:?}; pass a \
                     buffer of the descriptor's element type",
                    T::DTYPE,
                    self.dtype
                ),
            ));
        }
        self.stream.check_slice(slice, &format!("{op} ({name})"))?;
        let len = slice.len() as u64;
        if len < need {
            return Err(Error::bounds(
                op,
                format!(
                    "{name} has {len} elements but its tensor needs {need}; pass a larger buffer"
                ),
            ));
        }
        let bytes = need * self.dtype.size();
        self.ranges
            .push((name, slice.address().raw(), bytes, written));
        Ok(Operand {
            addr: slice.address(),
            len,
        })
    }

    fn input<T: DnnElement>(
        &mut self,
        name: &'static str,
        slice: &DeviceSlice<'_, T>,
        need: u64,
    ) -> Result<Operand> {
        self.add(name, slice, need, false)
    }

    fn output<T: DnnElement>(
        &mut self,
        name: &'static str,
        slice: &DeviceSlice<'_, T>,
        need: u64,
    ) -> Result<Operand> {
        self.add(name, slice, need, true)
    }

    /// Every written range is apart from every other range, except the `(output, input)`
    /// pairs of `in_place`, which may also be the very same range. Returns the support object.
    fn finish(&self, in_place: &[(&str, &str)]) -> Result<&'s dyn DnnSupport> {
        for (i, a) in self.ranges.iter().enumerate() {
            for b in &self.ranges[i + 1..] {
                if !(a.3 || b.3) || !overlaps((a.1, a.2), (b.1, b.2)) {
                    continue;
                }
                let allowed = in_place
                    .iter()
                    .any(|&(o, x)| (o, x) == (a.0, b.0) || (o, x) == (b.0, a.0));
                if allowed && a.1 == b.1 && a.2 == b.2 {
                    continue;
                }
                let how = if allowed {
                    format!(
                        "; {} may run in place only on exactly the same buffer",
                        self.op
                    )
                } else {
                    String::new()
                };
                return Err(Error::invalid(
                    self.op,
                    format!(
                        "{} overlaps {}{how}; pass separate buffers",
                        if a.3 { a.0 } else { b.0 },
                        if a.3 { b.0 } else { a.0 }
                    ),
                ));
            }
        }
        Ok(self.dnn)
    }
}

/// Bytes `[start, start + len)` of two ranges intersect.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.1 > 0 && b.1 > 0 && a.0 < b.0.saturating_add(b.1) && b.0 < a.0.saturating_add(a.1)
}

/// A descriptor's problem error at enqueue names the argument.
fn problem(op: &str, arg: &str, r: Result<()>) -> Result<()> {
    r.map_err(|e| Error::invalid(op, format!("{arg}: {e}")))
}

impl Stream {
    /// `y = conv(x, w)` as `p` describes (cross-correlation, overwrites `y`).
    pub fn then_convolution_forward<'a, 'b, 'c, T: DnnElement>(
        &mut self,
        p: &ConvProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        w: impl Into<DeviceSlice<'b, T>>,
        y: impl Into<DeviceSlice<'c, T>>,
    ) -> &mut Self {
        const OP: &str = "then_convolution_forward";
        let (x, w, y) = (x.into(), w.into(), y.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, p.x.elements())?;
            let w = b.input("w", &w, p.w.elements())?;
            let y = b.output("y", &y, p.y.elements())?;
            let dnn = b.finish(&[])?;
            // SAFETY: the problem is valid, every operand is this executor's live memory
            // (borrowed for the call) holding its tensor in the problem's dtype, and the
            // output overlaps no input.
            unsafe { dnn.convolution_forward(s.iface(), p, x, w, y) }
        })
    }

    /// `dx`, the gradient of the convolution's input, from `w` and the output gradient `dy`
    /// (overwrites `dx`).
    pub fn then_convolution_backward_data<'a, 'b, 'c, T: DnnElement>(
        &mut self,
        p: &ConvProblem,
        w: impl Into<DeviceSlice<'a, T>>,
        dy: impl Into<DeviceSlice<'b, T>>,
        dx: impl Into<DeviceSlice<'c, T>>,
    ) -> &mut Self {
        const OP: &str = "then_convolution_backward_data";
        let (w, dy, dx) = (w.into(), dy.into(), dx.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let w = b.input("w", &w, p.w.elements())?;
            let dy = b.input("dy", &dy, p.y.elements())?;
            let dx = b.output("dx", &dx, p.x.elements())?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.convolution_backward_data(s.iface(), p, w, dy, dx) }
        })
    }

    /// `dw`, the gradient of the filter, from the input `x` and the output gradient `dy`
    /// (overwrites `dw`).
    pub fn then_convolution_backward_filter<'a, 'b, 'c, T: DnnElement>(
        &mut self,
        p: &ConvProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        dy: impl Into<DeviceSlice<'b, T>>,
        dw: impl Into<DeviceSlice<'c, T>>,
    ) -> &mut Self {
        const OP: &str = "then_convolution_backward_filter";
        let (x, dy, dw) = (x.into(), dy.into(), dw.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, p.x.elements())?;
            let dy = b.input("dy", &dy, p.y.elements())?;
            let dw = b.output("dw", &dw, p.w.elements())?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.convolution_backward_filter(s.iface(), p, x, dy, dw) }
        })
    }

    /// `y = pool(x)` as `p` describes.
    pub fn then_pooling_forward<'a, 'b, T: DnnElement>(
        &mut self,
        p: &PoolProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        y: impl Into<DeviceSlice<'b, T>>,
    ) -> &mut Self {
        const OP: &str = "then_pooling_forward";
        let (x, y) = (x.into(), y.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, p.x.elements())?;
            let y = b.output("y", &y, p.y.elements())?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.pooling_forward(s.iface(), p, x, y) }
        })
    }

    /// `dx` from the forward's input `x`, output `y` and the output gradient `dy` (max pooling
    /// routes each gradient to the first maximum of its window; overwrites `dx`).
    pub fn then_pooling_backward<'a, 'b, 'c, 'd, T: DnnElement>(
        &mut self,
        p: &PoolProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        y: impl Into<DeviceSlice<'b, T>>,
        dy: impl Into<DeviceSlice<'c, T>>,
        dx: impl Into<DeviceSlice<'d, T>>,
    ) -> &mut Self {
        const OP: &str = "then_pooling_backward";
        let (x, y, dy, dx) = (x.into(), y.into(), dy.into(), dx.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, p.x.elements())?;
            let y = b.input("y", &y, p.y.elements())?;
            let dy = b.input("dy", &dy, p.y.elements())?;
            let dx = b.output("dx", &dx, p.x.elements())?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.pooling_backward(s.iface(), p, x, y, dy, dx) }
        })
    }

    /// `y = act(x)` element-wise over `desc`'s tensor. May run in place: pass the same buffer
    /// as `x` and `y`.
    pub fn then_activation_forward<'a, 'b, T: DnnElement>(
        &mut self,
        act: Activation,
        desc: &TensorDesc,
        x: impl Into<DeviceSlice<'a, T>>,
        y: impl Into<DeviceSlice<'b, T>>,
    ) -> &mut Self {
        const OP: &str = "then_activation_forward";
        let (x, y) = (x.into(), y.into());
        self.enqueue(|s| {
            desc.revalidate(OP, "desc")?;
            let mut b = Buffers::new(s, OP, desc.dtype)?;
            let x = b.input("x", &x, desc.elements())?;
            let y = b.output("y", &y, desc.elements())?;
            let dnn = b.finish(&[("y", "x")])?;
            // SAFETY: as in then_convolution_forward; `y` is `x` or apart from it.
            unsafe { dnn.activation_forward(s.iface(), act, desc, x, y) }
        })
    }

    /// `dx = dy·act'(x)` from the forward's input `x` and output `y`. May run in place: pass
    /// the same buffer as `dy` and `dx`.
    pub fn then_activation_backward<'a, 'b, 'c, 'd, T: DnnElement>(
        &mut self,
        act: Activation,
        desc: &TensorDesc,
        x: impl Into<DeviceSlice<'a, T>>,
        y: impl Into<DeviceSlice<'b, T>>,
        dy: impl Into<DeviceSlice<'c, T>>,
        dx: impl Into<DeviceSlice<'d, T>>,
    ) -> &mut Self {
        const OP: &str = "then_activation_backward";
        let (x, y, dy, dx) = (x.into(), y.into(), dy.into(), dx.into());
        self.enqueue(|s| {
            desc.revalidate(OP, "desc")?;
            let n = desc.elements();
            let mut b = Buffers::new(s, OP, desc.dtype)?;
            let x = b.input("x", &x, n)?;
            let y = b.input("y", &y, n)?;
            let dy = b.input("dy", &dy, n)?;
            let dx = b.output("dx", &dx, n)?;
            let dnn = b.finish(&[("dx", "dy")])?;
            // SAFETY: as in then_convolution_forward; `dx` is `dy` or apart from it.
            unsafe { dnn.activation_backward(s.iface(), act, desc, x, y, dy, dx) }
        })
    }

    /// `y = softmax(x)` (`Accurate`) or log-softmax (`Log`) over `mode`'s groups.
    pub fn then_softmax_forward<'a, 'b, T: DnnElement>(
        &mut self,
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        desc: &TensorDesc,
        x: impl Into<DeviceSlice<'a, T>>,
        y: impl Into<DeviceSlice<'b, T>>,
    ) -> &mut Self {
        const OP: &str = "then_softmax_forward";
        let (x, y) = (x.into(), y.into());
        self.enqueue(|s| {
            desc.revalidate(OP, "desc")?;
            let mut b = Buffers::new(s, OP, desc.dtype)?;
            let x = b.input("x", &x, desc.elements())?;
            let y = b.output("y", &y, desc.elements())?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.softmax_forward(s.iface(), alg, mode, desc, x, y) }
        })
    }

    /// `dx` from the forward's output `y` and the output gradient `dy`.
    pub fn then_softmax_backward<'a, 'b, 'c, T: DnnElement>(
        &mut self,
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        desc: &TensorDesc,
        y: impl Into<DeviceSlice<'a, T>>,
        dy: impl Into<DeviceSlice<'b, T>>,
        dx: impl Into<DeviceSlice<'c, T>>,
    ) -> &mut Self {
        const OP: &str = "then_softmax_backward";
        let (y, dy, dx) = (y.into(), dy.into(), dx.into());
        self.enqueue(|s| {
            desc.revalidate(OP, "desc")?;
            let n = desc.elements();
            let mut b = Buffers::new(s, OP, desc.dtype)?;
            let y = b.input("y", &y, n)?;
            let dy = b.input("dy", &dy, n)?;
            let dx = b.output("dx", &dx, n)?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.softmax_backward(s.iface(), alg, mode, desc, y, dy, dx) }
        })
    }

    /// Training forward of batch normalisation: writes `y`, the batch's `save_mean` and
    /// `save_inv_std` (for backward) and updates `running_mean` / `running_var` in place.
    /// `scale`, `bias` and the four statistics hold `C` elements; `N·H·W` must be ≥ 2 (the
    /// running variance is the unbiased one).
    #[allow(clippy::too_many_arguments)] // cuDNN's operands, one buffer each.
    pub fn then_batch_norm_forward_training<'a, 'b, 'c, 'd, 'e, 'f, 'g, 'h, T: DnnElement>(
        &mut self,
        p: &BatchNormProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        scale: impl Into<DeviceSlice<'b, T>>,
        bias: impl Into<DeviceSlice<'c, T>>,
        y: impl Into<DeviceSlice<'d, T>>,
        running_mean: impl Into<DeviceSlice<'e, T>>,
        running_var: impl Into<DeviceSlice<'f, T>>,
        save_mean: impl Into<DeviceSlice<'g, T>>,
        save_inv_std: impl Into<DeviceSlice<'h, T>>,
    ) -> &mut Self {
        const OP: &str = "then_batch_norm_forward_training";
        let (x, scale, bias, y) = (x.into(), scale.into(), bias.into(), y.into());
        let (rm, rv) = (running_mean.into(), running_var.into());
        let (sm, si) = (save_mean.into(), save_inv_std.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let spatial = p.x.n * p.x.h * p.x.w;
            if spatial < 2 {
                return Err(Error::invalid(
                    OP,
                    "p.x has N·H·W = 1 value per channel, so its unbiased variance (for the \
                     running variance) is undefined; train on at least 2 values per channel",
                ));
            }
            let (n, c) = (p.x.elements(), p.x.c);
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, n)?;
            let scale = b.input("scale", &scale, c)?;
            let bias = b.input("bias", &bias, c)?;
            let y = b.output("y", &y, n)?;
            let rm = b.output("running_mean", &rm, c)?;
            let rv = b.output("running_var", &rv, c)?;
            let sm = b.output("save_mean", &sm, c)?;
            let si = b.output("save_inv_std", &si, c)?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward; no two outputs overlap.
            unsafe {
                dnn.batch_norm_forward_training(s.iface(), p, x, scale, bias, y, rm, rv, sm, si)
            }
        })
    }

    /// Inference forward of batch normalisation from given statistics `mean` and `var`
    /// (`C` elements each, like `scale` and `bias`).
    #[allow(clippy::too_many_arguments)] // cuDNN's operands, one buffer each.
    pub fn then_batch_norm_forward_inference<'a, 'b, 'c, 'd, 'e, 'f, T: DnnElement>(
        &mut self,
        p: &BatchNormProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        scale: impl Into<DeviceSlice<'b, T>>,
        bias: impl Into<DeviceSlice<'c, T>>,
        mean: impl Into<DeviceSlice<'d, T>>,
        var: impl Into<DeviceSlice<'e, T>>,
        y: impl Into<DeviceSlice<'f, T>>,
    ) -> &mut Self {
        const OP: &str = "then_batch_norm_forward_inference";
        let (x, scale, bias) = (x.into(), scale.into(), bias.into());
        let (mean, var, y) = (mean.into(), var.into(), y.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let (n, c) = (p.x.elements(), p.x.c);
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, n)?;
            let scale = b.input("scale", &scale, c)?;
            let bias = b.input("bias", &bias, c)?;
            let mean = b.input("mean", &mean, c)?;
            let var = b.input("var", &var, c)?;
            let y = b.output("y", &y, n)?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.batch_norm_forward_inference(s.iface(), p, x, scale, bias, mean, var, y) }
        })
    }

    /// Backward of batch normalisation from training forward's saved statistics: writes `dx`,
    /// `dscale = Σ dy·x̂` and `dbias = Σ dy` per channel.
    #[allow(clippy::too_many_arguments)] // cuDNN's operands, one buffer each.
    pub fn then_batch_norm_backward<'a, 'b, 'c, 'd, 'e, 'f, 'g, 'h, T: DnnElement>(
        &mut self,
        p: &BatchNormProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        dy: impl Into<DeviceSlice<'b, T>>,
        scale: impl Into<DeviceSlice<'c, T>>,
        save_mean: impl Into<DeviceSlice<'d, T>>,
        save_inv_std: impl Into<DeviceSlice<'e, T>>,
        dx: impl Into<DeviceSlice<'f, T>>,
        dscale: impl Into<DeviceSlice<'g, T>>,
        dbias: impl Into<DeviceSlice<'h, T>>,
    ) -> &mut Self {
        const OP: &str = "then_batch_norm_backward";
        let (x, dy, scale) = (x.into(), dy.into(), scale.into());
        let (sm, si) = (save_mean.into(), save_inv_std.into());
        let (dx, dscale, dbias) = (dx.into(), dscale.into(), dbias.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let (n, c) = (p.x.elements(), p.x.c);
            let mut b = Buffers::new(s, OP, p.x.dtype)?;
            let x = b.input("x", &x, n)?;
            let dy = b.input("dy", &dy, n)?;
            let scale = b.input("scale", &scale, c)?;
            let sm = b.input("save_mean", &sm, c)?;
            let si = b.input("save_inv_std", &si, c)?;
            let dx = b.output("dx", &dx, n)?;
            let dscale = b.output("dscale", &dscale, c)?;
            let dbias = b.output("dbias", &dbias, c)?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward; no two outputs overlap.
            unsafe {
                dnn.batch_norm_backward(s.iface(), p, x, dy, scale, sm, si, dx, dscale, dbias)
            }
        })
    }

    /// `y[n, c, h, w] += bias[c]`, in place (`bias` holds `C` elements and must not overlap
    /// `y`).
    pub fn then_bias_add<'a, 'b, T: DnnElement>(
        &mut self,
        desc: &TensorDesc,
        y: impl Into<DeviceSlice<'a, T>>,
        bias: impl Into<DeviceSlice<'b, T>>,
    ) -> &mut Self {
        const OP: &str = "then_bias_add";
        let (y, bias) = (y.into(), bias.into());
        self.enqueue(|s| {
            desc.revalidate(OP, "desc")?;
            let mut b = Buffers::new(s, OP, desc.dtype)?;
            let y = b.output("y", &y, desc.elements())?;
            let bias = b.input("bias", &bias, desc.c)?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.bias_add(s.iface(), desc, y, bias) }
        })
    }

    /// `y = act(x·w + bias)`, row-major (`x` is `m×k`, `w` `k×n`, `bias` `n`, `y` `m×n`).
    pub fn then_matmul_bias_activation<'a, 'b, 'c, 'd, T: DnnElement>(
        &mut self,
        p: &MatmulProblem,
        x: impl Into<DeviceSlice<'a, T>>,
        w: impl Into<DeviceSlice<'b, T>>,
        bias: impl Into<DeviceSlice<'c, T>>,
        y: impl Into<DeviceSlice<'d, T>>,
    ) -> &mut Self {
        const OP: &str = "then_matmul_bias_activation";
        let (x, w, bias, y) = (x.into(), w.into(), bias.into(), y.into());
        self.enqueue(|s| {
            problem(OP, "p", p.revalidate(OP))?;
            let mut b = Buffers::new(s, OP, p.dtype)?;
            let x = b.input("x", &x, p.m * p.k)?;
            let w = b.input("w", &w, p.k * p.n)?;
            let bias = b.input("bias", &bias, p.n)?;
            let y = b.output("y", &y, p.m * p.n)?;
            let dnn = b.finish(&[])?;
            // SAFETY: as in then_convolution_forward.
            unsafe { dnn.matmul_bias_activation(s.iface(), p, x, w, bias, y) }
        })
    }
}
