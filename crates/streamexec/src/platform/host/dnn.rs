//! DNN on the host platform: convolutions by im2col + the `gemm` crate (`dnn_conv.rs`), the
//! rest as loops (`dnn_ops.rs`). Each call runs in stream order on the stream's worker, its
//! parallel part on the executor's rayon pool.
//!
//! Device memory on the host is only touched through atomic or opaque copies (see blas.rs), so
//! every operation copies its inputs into private vectors, computes there and copies its
//! outputs back. In-place calls (activations, bias add) therefore need no special care. The
//! convolutions copy one image at a time (`conv::Images`), inside the task that computes it, so
//! the copy is still in cache when it is used; those copies and the im2col matrices are
//! per-thread scratch kept between calls (`dnn_ops::with_scratch`), since fresh multi-megabyte
//! vectors fault in every page.

use std::sync::Arc;

use rayon::prelude::*;

use super::device::HostExecutor;
use super::dnn_ops::Elem;
use super::{dnn_conv as conv, dnn_ops as ops};
use crate::error::Result;
use crate::interface::blas::Operand;
use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvProblem, DnnDataType, MatmulProblem, PoolProblem,
    SoftmaxAlgorithm, SoftmaxMode, TensorDesc,
};
use crate::interface::{DnnSupport, StreamInterface};
use crate::ptx::device_bytes;
use crate::ptx::memory::Pinned;

/// Bytes per parallel copy task.
const COPY_CHUNK: usize = 256 << 10;

/// The first `n` elements of a pinned operand, copied out.
fn read<T: Elem>(p: &Pinned, n: u64) -> Vec<T> {
    let mut out = vec![T::ZERO; n as usize];
    read_into(p, &mut out);
    out
}

/// Copies the first `out.len()` elements of a pinned operand into `out`.
fn read_into<T: Elem>(p: &Pinned, out: &mut [T]) {
    read_at(p, 0, out);
}

/// Copies elements `at..at + out.len()` of a pinned operand into `out`.
fn read_at<T: Elem>(p: &Pinned, at: usize, out: &mut [T]) {
    let base = p.as_ptr() as usize + at * std::mem::size_of::<T>();
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
    bytes
        .par_chunks_mut(COPY_CHUNK)
        .enumerate()
        .for_each(|(i, b)| {
            // SAFETY: the operand is pinned and holds at least `at + out.len()` elements (the
            // stream checked the tensor's size), so this chunk lies inside it.
            unsafe { device_bytes::load_bytes(b, (base + i * COPY_CHUNK) as *const u8) }
        });
}

/// Copies `v` into the first elements of a pinned operand.
fn write<T: Elem>(p: &Pinned, v: &[T]) {
    write_at(p, 0, v);
}

/// Copies `v` into elements `at..at + v.len()` of a pinned operand.
fn write_at<T: Elem>(p: &Pinned, at: usize, v: &[T]) {
    let base = p.as_ptr() as usize + at * std::mem::size_of::<T>();
    let bytes: &[u8] = bytemuck::cast_slice(v);
    bytes.par_chunks(COPY_CHUNK).enumerate().for_each(|(i, b)| {
        // SAFETY: the operand is pinned and holds at least `at + v.len()` elements.
        unsafe { device_bytes::store_bytes((base + i * COPY_CHUNK) as *mut u8, b) }
    });
}

impl HostExecutor {
    /// Pins `operands` and enqueues `f` on `stream`, on the executor's pool, with the pins in
    /// the order given, monomorphised for `dtype`.
    fn run_dnn(
        &self,
        stream: &dyn StreamInterface,
        op: &'static str,
        dtype: DnnDataType,
        operands: &[Operand],
        f: impl Fn(&[Pinned], Dispatch) + Send + Sync + 'static,
    ) -> Result<()> {
        let pins = operands
            .iter()
            .map(|o| self.pin(o.addr, o.len * dtype.size(), op))
            .collect::<Result<Vec<_>>>()?;
        let pool = Arc::clone(&self.pool);
        let which = match dtype {
            DnnDataType::F32 => Dispatch::F32,
            DnnDataType::F64 => Dispatch::F64,
        };
        stream.host_callback(Box::new(move || {
            pool.install(|| f(&pins, which));
            Ok(())
        }))
    }
}

/// Which instantiation a callback runs.
#[derive(Clone, Copy)]
enum Dispatch {
    F32,
    F64,
}

/// Calls the generic function `$f::<T>(args)` for the dispatch's element type.
macro_rules! dispatch {
    ($which:expr, $f:ident ( $($arg:expr),* )) => {
        match $which {
            Dispatch::F32 => $f::<f32>($($arg),*),
            Dispatch::F64 => $f::<f64>($($arg),*),
        }
    };
}

/// One image after another of a pinned operand, `img` elements each (see `conv::Images`).
struct PinnedImages<'a> {
    pin: &'a Pinned,
    img: usize,
}

impl<T: Elem> conv::Images<T> for PinnedImages<'_> {
    fn load(&self, n: usize, out: &mut [T]) {
        read_at(self.pin, n * self.img, out);
    }
    fn store(&self, n: usize, v: &[T]) {
        write_at(self.pin, n * self.img, v);
    }
}

/// The images of operand `o`, a tensor of `t`'s shape.
fn images<'a>(o: &'a Pinned, t: &TensorDesc) -> PinnedImages<'a> {
    PinnedImages {
        pin: o,
        img: t.strides()[0] as usize,
    }
}

fn conv_forward<T: Elem>(p: &ConvProblem, o: &[Pinned]) {
    let w = read::<T>(&o[1], p.w.elements());
    conv::forward(p, &w, &images(&o[0], &p.x), &images(&o[2], &p.y));
}

fn conv_backward_data<T: Elem>(p: &ConvProblem, o: &[Pinned]) {
    let w = read::<T>(&o[0], p.w.elements());
    conv::backward_data(p, &w, &images(&o[1], &p.y), &images(&o[2], &p.x));
}

fn conv_backward_filter<T: Elem>(p: &ConvProblem, o: &[Pinned]) {
    let mut dw = vec![T::ZERO; p.w.elements() as usize];
    conv::backward_filter(p, &images(&o[0], &p.x), &images(&o[1], &p.y), &mut dw);
    write(&o[2], &dw);
}

fn pool_forward<T: Elem>(p: &PoolProblem, o: &[Pinned]) {
    let x = read::<T>(&o[0], p.x.elements());
    let mut y = vec![T::ZERO; p.y.elements() as usize];
    ops::pool_forward(p, &x, &mut y);
    write(&o[1], &y);
}

fn pool_backward<T: Elem>(p: &PoolProblem, o: &[Pinned]) {
    // o = [x, dy, dx]: the forward output is not needed (max pooling finds its argmax in x).
    let (x, dy) = (
        read::<T>(&o[0], p.x.elements()),
        read(&o[1], p.y.elements()),
    );
    let mut dx = vec![T::ZERO; p.x.elements() as usize];
    ops::pool_backward(p, &x, &dy, &mut dx);
    write(&o[2], &dx);
}

fn act_forward<T: Elem>(a: Activation, d: &TensorDesc, o: &[Pinned]) {
    let mut v = read::<T>(&o[0], d.elements());
    let x = v.clone();
    ops::activation_forward(a, &x, &mut v);
    write(&o[1], &v);
}

fn act_backward<T: Elem>(a: Activation, d: &TensorDesc, o: &[Pinned]) {
    let n = d.elements();
    let (x, y, dy) = (read::<T>(&o[0], n), read(&o[1], n), read(&o[2], n));
    let mut dx = vec![T::ZERO; n as usize];
    ops::activation_backward(a, &x, &y, &dy, &mut dx);
    write(&o[3], &dx);
}

fn softmax_fwd<T: Elem>(alg: SoftmaxAlgorithm, mode: SoftmaxMode, d: &TensorDesc, o: &[Pinned]) {
    let x = read::<T>(&o[0], d.elements());
    let mut y = vec![T::ZERO; x.len()];
    ops::softmax_forward(alg, mode, d, &x, &mut y);
    write(&o[1], &y);
}

fn softmax_bwd<T: Elem>(alg: SoftmaxAlgorithm, mode: SoftmaxMode, d: &TensorDesc, o: &[Pinned]) {
    let (y, dy) = (read::<T>(&o[0], d.elements()), read(&o[1], d.elements()));
    let mut dx = vec![T::ZERO; y.len()];
    ops::softmax_backward(alg, mode, d, &y, &dy, &mut dx);
    write(&o[2], &dx);
}

fn bn_training<T: Elem>(p: &BatchNormProblem, o: &[Pinned]) {
    let (n, c) = (p.x.elements(), p.x.c);
    let x = read::<T>(&o[0], n);
    let [scale, bias, rm, rv] = [1, 2, 4, 5].map(|i| read::<T>(&o[i], c));
    let mut y = vec![T::ZERO; n as usize];
    let s = ops::batch_norm_training(p, &x, &scale, &bias, &rm, &rv, &mut y);
    write(&o[3], &y);
    write(&o[4], &s.running_mean);
    write(&o[5], &s.running_var);
    write(&o[6], &s.save_mean);
    write(&o[7], &s.save_inv_std);
}

fn bn_inference<T: Elem>(p: &BatchNormProblem, o: &[Pinned]) {
    let x = read::<T>(&o[0], p.x.elements());
    let [scale, bias, mean, var] = [1, 2, 3, 4].map(|i| read::<T>(&o[i], p.x.c));
    let mut y = vec![T::ZERO; x.len()];
    ops::batch_norm_inference(p, &x, [&scale, &bias, &mean, &var], &mut y);
    write(&o[5], &y);
}

fn bn_backward<T: Elem>(p: &BatchNormProblem, o: &[Pinned]) {
    let n = p.x.elements();
    let (x, dy) = (read::<T>(&o[0], n), read(&o[1], n));
    let [scale, mean, inv] = [2, 3, 4].map(|i| read::<T>(&o[i], p.x.c));
    let mut dx = vec![T::ZERO; n as usize];
    let (dscale, dbias) = ops::batch_norm_backward(p, &x, &dy, [&scale, &mean, &inv], &mut dx);
    write(&o[5], &dx);
    write(&o[6], &dscale);
    write(&o[7], &dbias);
}

fn bias_add_on<T: Elem>(d: &TensorDesc, o: &[Pinned]) {
    let mut y = read::<T>(&o[0], d.elements());
    let bias = read::<T>(&o[1], d.c);
    ops::bias_add(d, &mut y, &bias);
    write(&o[0], &y);
}

fn matmul_on<T: Elem>(p: &MatmulProblem, o: &[Pinned]) {
    let (x, w) = (read::<T>(&o[0], p.m * p.k), read(&o[1], p.k * p.n));
    let bias = read::<T>(&o[2], p.n);
    let mut y = vec![T::ZERO; (p.m * p.n) as usize];
    ops::matmul_bias_activation(p, &x, &w, &bias, &mut y);
    write(&o[3], &y);
}

// SAFETY (every method): the stream validated the problem and the operands (DnnSupport's
// contract); `run_dnn` pins each operand's whole slice before the callback is queued.
#[allow(clippy::too_many_arguments)] // the trait's signatures.
impl DnnSupport for HostExecutor {
    fn implementation(&self) -> &'static str {
        "built-in (im2col + gemm crate)"
    }

    fn platform(&self) -> &'static str {
        super::status::PLATFORM
    }

    unsafe fn convolution_forward(
        &self,
        stream: &dyn StreamInterface,
        p: &ConvProblem,
        x: Operand,
        w: Operand,
        y: Operand,
    ) -> Result<()> {
        let p = *p;
        self.run_dnn(
            stream,
            "convolution_forward",
            p.x.dtype,
            &[x, w, y],
            move |o, t| dispatch!(t, conv_forward(&p, o)),
        )
    }

    unsafe fn convolution_backward_data(
        &self,
        stream: &dyn StreamInterface,
        p: &ConvProblem,
        w: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let p = *p;
        self.run_dnn(
            stream,
            "convolution_backward_data",
            p.x.dtype,
            &[w, dy, dx],
            move |o, t| dispatch!(t, conv_backward_data(&p, o)),
        )
    }

    unsafe fn convolution_backward_filter(
        &self,
        stream: &dyn StreamInterface,
        p: &ConvProblem,
        x: Operand,
        dy: Operand,
        dw: Operand,
    ) -> Result<()> {
        let p = *p;
        self.run_dnn(
            stream,
            "convolution_backward_filter",
            p.x.dtype,
            &[x, dy, dw],
            move |o, t| dispatch!(t, conv_backward_filter(&p, o)),
        )
    }

    unsafe fn pooling_forward(
        &self,
        stream: &dyn StreamInterface,
        p: &PoolProblem,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let p = *p;
        self.run_dnn(
            stream,
            "pooling_forward",
            p.x.dtype,
            &[x, y],
            move |o, t| dispatch!(t, pool_forward(&p, o)),
        )
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
        let p = *p;
        self.run_dnn(
            stream,
            "pooling_backward",
            p.x.dtype,
            &[x, dy, dx],
            move |o, t| dispatch!(t, pool_backward(&p, o)),
        )
    }

    unsafe fn activation_forward(
        &self,
        stream: &dyn StreamInterface,
        act: Activation,
        x_desc: &TensorDesc,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let d = *x_desc;
        self.run_dnn(
            stream,
            "activation_forward",
            d.dtype,
            &[x, y],
            move |o, t| dispatch!(t, act_forward(act, &d, o)),
        )
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
        let d = *x_desc;
        self.run_dnn(
            stream,
            "activation_backward",
            d.dtype,
            &[x, y, dy, dx],
            move |o, t| dispatch!(t, act_backward(act, &d, o)),
        )
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
        let d = *x_desc;
        self.run_dnn(stream, "softmax_forward", d.dtype, &[x, y], move |o, t| {
            dispatch!(t, softmax_fwd(alg, mode, &d, o))
        })
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
        let d = *y_desc;
        self.run_dnn(
            stream,
            "softmax_backward",
            d.dtype,
            &[y, dy, dx],
            move |o, t| dispatch!(t, softmax_bwd(alg, mode, &d, o)),
        )
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
        let p = *p;
        let operands = [
            x,
            scale,
            bias,
            y,
            running_mean,
            running_var,
            save_mean,
            save_inv_std,
        ];
        self.run_dnn(
            stream,
            "batch_norm_forward_training",
            p.x.dtype,
            &operands,
            move |o, t| dispatch!(t, bn_training(&p, o)),
        )
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
        let p = *p;
        self.run_dnn(
            stream,
            "batch_norm_forward_inference",
            p.x.dtype,
            &[x, scale, bias, mean, var, y],
            move |o, t| dispatch!(t, bn_inference(&p, o)),
        )
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
        let p = *p;
        let operands = [x, dy, scale, save_mean, save_inv_std, dx, dscale, dbias];
        self.run_dnn(
            stream,
            "batch_norm_backward",
            p.x.dtype,
            &operands,
            move |o, t| dispatch!(t, bn_backward(&p, o)),
        )
    }

    unsafe fn bias_add(
        &self,
        stream: &dyn StreamInterface,
        y_desc: &TensorDesc,
        y: Operand,
        bias: Operand,
    ) -> Result<()> {
        let d = *y_desc;
        self.run_dnn(stream, "bias_add", d.dtype, &[y, bias], move |o, t| {
            dispatch!(t, bias_add_on(&d, o))
        })
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
        let p = *p;
        self.run_dnn(
            stream,
            "matmul_bias_activation",
            p.dtype,
            &[x, w, bias, y],
            move |o, t| dispatch!(t, matmul_on(&p, o)),
        )
    }
}
