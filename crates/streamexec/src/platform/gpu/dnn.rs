//! DNN on CUDA-like devices, from one of two sources decided when the executor is created
//! (`GpuExecutor::vendor_dnn`, from the executor's `PluginConfig`):
//!
//! - the driver's vendor library (`Driver::dnn`, cuDNN on CUDA), through [`VendorDnn`]: each
//!   operation the library serves with the contract's semantics (`GpuDnn::supports`) runs in
//!   stream order through the stream's submitter, as blas.rs calls cuBLAS; the others (GELU,
//!   max-pooling backward, the fused matmul) run the built-in kernels;
//! - the built-in kernels of kernels/dnn.cu (PTX committed under kernels/ptx/,
//!   `Driver::DNN_PTX`), so they run on NVIDIA's driver and on the CPU libcuda alike; the
//!   operations themselves are the ones `platform/dnn_builtin` shares with OpenCL. The fused
//!   matmul's product goes through this executor's BLAS (cuBLAS or the built-in GEMM, as
//!   decided at creation).

use std::sync::Arc;

use super::blas::gpu_stream;
use super::device::VendorDnn;
use super::{DnnCall, Driver, GpuDnn, GpuExecutor};
use crate::error::{Error, Result};
use crate::interface::blas::Operand;
use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvProblem, MatmulProblem, PoolProblem, SoftmaxAlgorithm,
    SoftmaxMode, TensorDesc,
};
use crate::interface::{
    BlasSupport, DnnSupport, KernelInterface, StreamExecutorInterface, StreamInterface,
};
use crate::platform::dnn_builtin::DnnDevice;
use crate::types::{Packable, PackedArg};

/// Threads per block of the DNN kernels.
const THREADS: u32 = 256;
/// Blocks per launch at most: the kernels loop with grid strides, and the CPU libcuda runs a
/// grid's blocks on a few cores, where more blocks only add scheduling.
const MAX_BLOCKS: u32 = 1024;

impl<D: Driver> DnnDevice for GpuExecutor<D> {
    fn dnn_platform(&self) -> &'static str {
        D::PLATFORM
    }

    fn dnn_kernel(&self, name: &'static str, _fp64: bool) -> Result<Arc<dyn KernelInterface>> {
        let ptx = D::DNN_PTX.ok_or_else(|| {
            Error::unsupported(
                D::PLATFORM,
                "dnn",
                "this platform has no built-in DNN kernels; use the host platform",
            )
        })?;
        self.builtin_kernel(ptx, name)
    }

    fn dnn_operand(&self, o: Operand, elem: u64, op: &str) -> Result<[PackedArg; 2]> {
        let bytes = o.len.checked_mul(elem).ok_or_else(|| {
            Error::invalid(
                op,
                format!("an operand of {} elements overflows 64 bits", o.len),
            )
        })?;
        Ok([
            PackedArg::backend_pointer(o.addr, bytes, elem as usize, "dnn operand"),
            0u64.pack(),
        ])
    }

    fn dnn_grid(&self) -> (u32, u32) {
        (THREADS, self.description().max_grid_dims[0].min(MAX_BLOCKS))
    }

    fn dnn_blas(&self) -> Option<&dyn BlasSupport> {
        self.blas()
    }
}

impl<D: Driver> VendorDnn<D> {
    /// Enqueues `call` on `stream` through the vendor library where it serves it, else runs
    /// `builtin` with the executor (the built-in kernels).
    fn route(
        &self,
        stream: &dyn StreamInterface,
        op: &'static str,
        call: DnnCall,
        builtin: impl FnOnce(&GpuExecutor<D>) -> Result<()>,
    ) -> Result<()> {
        let exec = self
            .exec
            .upgrade()
            .ok_or_else(|| Error::internal(format!("{op} enqueued while its executor drops")))?;
        if !library(&*exec.drv)?.supports(&call) {
            return builtin(&exec);
        }
        gpu_stream::<D>(stream, op)?.submit_driver(move |drv, s| library(drv)?.run(s, &call))
    }
}

/// The vendor library inside a call (it was found when the executor was created).
fn library<D: Driver>(drv: &D) -> Result<&dyn GpuDnn> {
    drv.dnn()?.ok_or_else(|| {
        Error::internal("the DNN library was found at executor creation but not at run")
    })
}

/// An operand's device address.
fn a(o: Operand) -> u64 {
    o.addr.raw()
}

// SAFETY (every method): the caller's contract is `DnnSupport`'s; the vendor library and the
// built-in kernels both rely on it alone.
impl<D: Driver> DnnSupport for VendorDnn<D> {
    fn implementation(&self) -> &'static str {
        self.name
    }

    fn platform(&self) -> &'static str {
        D::PLATFORM
    }

    unsafe fn convolution_forward(
        &self,
        s: &dyn StreamInterface,
        p: &ConvProblem,
        x: Operand,
        w: Operand,
        y: Operand,
    ) -> Result<()> {
        let call = DnnCall::ConvForward {
            p: *p,
            x: a(x),
            w: a(w),
            y: a(y),
        };
        // SAFETY: see the impl.
        self.route(s, "then_convolution_forward", call, |e| unsafe {
            e.convolution_forward(s, p, x, w, y)
        })
    }

    unsafe fn convolution_backward_data(
        &self,
        s: &dyn StreamInterface,
        p: &ConvProblem,
        w: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let call = DnnCall::ConvBackwardData {
            p: *p,
            w: a(w),
            dy: a(dy),
            dx: a(dx),
        };
        // SAFETY: see the impl.
        self.route(s, "then_convolution_backward_data", call, |e| unsafe {
            e.convolution_backward_data(s, p, w, dy, dx)
        })
    }

    unsafe fn convolution_backward_filter(
        &self,
        s: &dyn StreamInterface,
        p: &ConvProblem,
        x: Operand,
        dy: Operand,
        dw: Operand,
    ) -> Result<()> {
        let call = DnnCall::ConvBackwardFilter {
            p: *p,
            x: a(x),
            dy: a(dy),
            dw: a(dw),
        };
        // SAFETY: see the impl.
        self.route(s, "then_convolution_backward_filter", call, |e| unsafe {
            e.convolution_backward_filter(s, p, x, dy, dw)
        })
    }

    unsafe fn pooling_forward(
        &self,
        s: &dyn StreamInterface,
        p: &PoolProblem,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let call = DnnCall::PoolForward {
            p: *p,
            x: a(x),
            y: a(y),
        };
        // SAFETY: see the impl.
        self.route(s, "then_pooling_forward", call, |e| unsafe {
            e.pooling_forward(s, p, x, y)
        })
    }

    unsafe fn pooling_backward(
        &self,
        s: &dyn StreamInterface,
        p: &PoolProblem,
        x: Operand,
        y: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let call = DnnCall::PoolBackward {
            p: *p,
            x: a(x),
            y: a(y),
            dy: a(dy),
            dx: a(dx),
        };
        // SAFETY: see the impl.
        self.route(s, "then_pooling_backward", call, |e| unsafe {
            e.pooling_backward(s, p, x, y, dy, dx)
        })
    }

    unsafe fn activation_forward(
        &self,
        s: &dyn StreamInterface,
        act: Activation,
        t: &TensorDesc,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let call = DnnCall::ActivationForward {
            act,
            t: *t,
            x: a(x),
            y: a(y),
        };
        // SAFETY: see the impl.
        self.route(s, "then_activation_forward", call, |e| unsafe {
            e.activation_forward(s, act, t, x, y)
        })
    }

    unsafe fn activation_backward(
        &self,
        s: &dyn StreamInterface,
        act: Activation,
        t: &TensorDesc,
        x: Operand,
        y: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let call = DnnCall::ActivationBackward {
            act,
            t: *t,
            x: a(x),
            y: a(y),
            dy: a(dy),
            dx: a(dx),
        };
        // SAFETY: see the impl.
        self.route(s, "then_activation_backward", call, |e| unsafe {
            e.activation_backward(s, act, t, x, y, dy, dx)
        })
    }

    unsafe fn softmax_forward(
        &self,
        s: &dyn StreamInterface,
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        t: &TensorDesc,
        x: Operand,
        y: Operand,
    ) -> Result<()> {
        let call = DnnCall::SoftmaxForward {
            alg,
            mode,
            t: *t,
            x: a(x),
            y: a(y),
        };
        // SAFETY: see the impl.
        self.route(s, "then_softmax_forward", call, |e| unsafe {
            e.softmax_forward(s, alg, mode, t, x, y)
        })
    }

    unsafe fn softmax_backward(
        &self,
        s: &dyn StreamInterface,
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        t: &TensorDesc,
        y: Operand,
        dy: Operand,
        dx: Operand,
    ) -> Result<()> {
        let call = DnnCall::SoftmaxBackward {
            alg,
            mode,
            t: *t,
            y: a(y),
            dy: a(dy),
            dx: a(dx),
        };
        // SAFETY: see the impl.
        self.route(s, "then_softmax_backward", call, |e| unsafe {
            e.softmax_backward(s, alg, mode, t, y, dy, dx)
        })
    }

    unsafe fn batch_norm_forward_training(
        &self,
        s: &dyn StreamInterface,
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
        let call = DnnCall::BatchNormTraining {
            p: *p,
            x: a(x),
            scale: a(scale),
            bias: a(bias),
            y: a(y),
            running_mean: a(running_mean),
            running_var: a(running_var),
            save_mean: a(save_mean),
            save_inv_std: a(save_inv_std),
        };
        // SAFETY: see the impl.
        self.route(s, "then_batch_norm_forward_training", call, |e| unsafe {
            e.batch_norm_forward_training(
                s,
                p,
                x,
                scale,
                bias,
                y,
                running_mean,
                running_var,
                save_mean,
                save_inv_std,
            )
        })
    }

    unsafe fn batch_norm_forward_inference(
        &self,
        s: &dyn StreamInterface,
        p: &BatchNormProblem,
        x: Operand,
        scale: Operand,
        bias: Operand,
        mean: Operand,
        var: Operand,
        y: Operand,
    ) -> Result<()> {
        let call = DnnCall::BatchNormInference {
            p: *p,
            x: a(x),
            scale: a(scale),
            bias: a(bias),
            mean: a(mean),
            var: a(var),
            y: a(y),
        };
        // SAFETY: see the impl.
        self.route(s, "then_batch_norm_forward_inference", call, |e| unsafe {
            e.batch_norm_forward_inference(s, p, x, scale, bias, mean, var, y)
        })
    }

    unsafe fn batch_norm_backward(
        &self,
        s: &dyn StreamInterface,
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
        let call = DnnCall::BatchNormBackward {
            p: *p,
            x: a(x),
            dy: a(dy),
            scale: a(scale),
            save_mean: a(save_mean),
            save_inv_std: a(save_inv_std),
            dx: a(dx),
            dscale: a(dscale),
            dbias: a(dbias),
        };
        // SAFETY: see the impl.
        self.route(s, "then_batch_norm_backward", call, |e| unsafe {
            e.batch_norm_backward(
                s,
                p,
                x,
                dy,
                scale,
                save_mean,
                save_inv_std,
                dx,
                dscale,
                dbias,
            )
        })
    }

    unsafe fn bias_add(
        &self,
        s: &dyn StreamInterface,
        t: &TensorDesc,
        y: Operand,
        bias: Operand,
    ) -> Result<()> {
        let call = DnnCall::BiasAdd {
            t: *t,
            y: a(y),
            bias: a(bias),
        };
        // SAFETY: see the impl.
        self.route(s, "then_bias_add", call, |e| unsafe {
            e.bias_add(s, t, y, bias)
        })
    }

    unsafe fn matmul_bias_activation(
        &self,
        s: &dyn StreamInterface,
        p: &MatmulProblem,
        x: Operand,
        w: Operand,
        bias: Operand,
        y: Operand,
    ) -> Result<()> {
        // The executor's GEMM (the vendor BLAS where it serves BLAS) and the epilogue kernel.
        let exec = self.exec.upgrade().ok_or_else(|| {
            Error::internal("then_matmul_bias_activation enqueued while its executor drops")
        })?;
        // SAFETY: see the impl.
        unsafe { exec.matmul_bias_activation(s, p, x, w, bias, y) }
    }
}
