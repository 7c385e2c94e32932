//! cuDNN for the CUDA platform's DNN (`gpu/dnn.rs` routes to it): one handle per device,
//! created on first use, bound to the calling stream for each call under a mutex, as `blas.rs`
//! binds cuBLAS. Every call builds its descriptors from the validated problem (tensors by
//! their strides, so NCHW and NHWC are one path; filters by format), runs one legacy cuDNN
//! function with alpha = 1 and beta = 0 (bias add: beta = 1) and frees the descriptors.
//!
//! What cuDNN does not serve with the contract's semantics runs the built-in kernels instead
//! ([`GpuDnn::supports`]): GELU (the legacy activations have none), max-pooling backward
//! (cuDNN does not promise the contract's first-maximum routing on ties), and problems whose
//! sizes do not fit cuDNN's 32-bit ints. Convolutions use `CUDNN_FMA_MATH` (no TF32 or
//! half-precision tensor cores, so f32 stays f32), the first algorithm cuDNN's heuristics
//! return that it can run, and a work area allocated and freed in stream order
//! (`cuMemAllocAsync`).
//!
//! This path is compiled everywhere but only runs where libcudnn is installed (a real GPU);
//! the CPU libcuda has none, so there the built-in kernels serve DNN.

use std::ffi::{c_int, c_void};

use cudarc::cudnn::sys as dn;
use cudarc::driver::{result, sys};
use parking_lot::Mutex;

use super::status::{PLATFORM, cu_error, cudnn_check as check};
use crate::error::{Error, Result};
use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvProblem, DnnDataType, FilterDesc, PoolMode, PoolProblem,
    SoftmaxAlgorithm, SoftmaxMode, TensorDesc, TensorLayout,
};
use crate::platform::gpu::{DnnCall, GpuDnn, RawStream};

/// A cuDNN handle of one device.
pub(crate) struct CudaDnn {
    handle: Mutex<usize>,
    ctx: usize,
}

// SAFETY: the handle is only used under its mutex, with its context made current first.
unsafe impl Send for CudaDnn {}
// SAFETY: as above.
unsafe impl Sync for CudaDnn {}

fn bind(ctx: usize) -> Result<()> {
    // SAFETY: `ctx` is the driver's retained primary context, alive while the driver (which
    // owns this handle) is.
    unsafe { result::ctx::set_current(ctx as sys::CUcontext) }
        .map_err(|e| cu_error("cuCtxSetCurrent", e))
}

/// `v` as cuDNN's `int`, if it fits.
fn fits(v: u64) -> Option<c_int> {
    c_int::try_from(v).ok()
}

/// `v` as cuDNN's `int` (the caller checked with [`supports`](GpuDnn::supports)).
fn int(v: u64) -> Result<c_int> {
    fits(v).ok_or_else(|| {
        Error::unsupported(
            PLATFORM,
            "cuDNN",
            format!("{v} does not fit cuDNN's 32-bit int; choose Plugin::Builtin for DNN"),
        )
    })
}

fn data_type(t: DnnDataType) -> dn::cudnnDataType_t {
    match t {
        DnnDataType::F32 => dn::cudnnDataType_t::CUDNN_DATA_FLOAT,
        DnnDataType::F64 => dn::cudnnDataType_t::CUDNN_DATA_DOUBLE,
    }
}

/// Alpha or beta for `t`'s data: cuDNN reads a `float` for float data, a `double` for double.
fn scalar(t: DnnDataType, one: bool) -> *const c_void {
    static F32: [f32; 2] = [0.0, 1.0];
    static F64: [f64; 2] = [0.0, 1.0];
    match t {
        DnnDataType::F32 => &F32[usize::from(one)] as *const f32 as *const c_void,
        DnnDataType::F64 => &F64[usize::from(one)] as *const f64 as *const c_void,
    }
}

/// Declares an owning descriptor type: created in `new`, destroyed on drop.
macro_rules! descriptor {
    ($name:ident, $raw:ty, $create:ident, $destroy:ident) => {
        struct $name($raw);
        impl $name {
            fn new() -> Result<Self> {
                let mut d: $raw = std::ptr::null_mut();
                // SAFETY: writes one descriptor handle.
                check(stringify!($create), unsafe { dn::$create(&mut d) })?;
                Ok($name(d))
            }
        }
        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: created by `new`, used only by calls that have returned.
                let _ = unsafe { dn::$destroy(self.0) };
            }
        }
    };
}

descriptor!(
    Tensor,
    dn::cudnnTensorDescriptor_t,
    cudnnCreateTensorDescriptor,
    cudnnDestroyTensorDescriptor
);
descriptor!(
    Filter,
    dn::cudnnFilterDescriptor_t,
    cudnnCreateFilterDescriptor,
    cudnnDestroyFilterDescriptor
);
descriptor!(
    Conv,
    dn::cudnnConvolutionDescriptor_t,
    cudnnCreateConvolutionDescriptor,
    cudnnDestroyConvolutionDescriptor
);
descriptor!(
    Pool,
    dn::cudnnPoolingDescriptor_t,
    cudnnCreatePoolingDescriptor,
    cudnnDestroyPoolingDescriptor
);
descriptor!(
    Act,
    dn::cudnnActivationDescriptor_t,
    cudnnCreateActivationDescriptor,
    cudnnDestroyActivationDescriptor
);

/// A tensor descriptor of `t`, by its strides.
fn tensor(t: &TensorDesc) -> Result<Tensor> {
    let d = Tensor::new()?;
    let s = t.strides();
    // SAFETY: a fresh descriptor; plain values.
    check("cudnnSetTensor4dDescriptorEx", unsafe {
        dn::cudnnSetTensor4dDescriptorEx(
            d.0,
            data_type(t.dtype),
            int(t.n)?,
            int(t.c)?,
            int(t.h)?,
            int(t.w)?,
            int(s[0])?,
            int(s[1])?,
            int(s[2])?,
            int(s[3])?,
        )
    })?;
    Ok(d)
}

/// A `1 × C × 1 × 1` tensor of `t`'s channels (bias add's bias).
fn channels(t: &TensorDesc) -> Result<Tensor> {
    let d = Tensor::new()?;
    let c = int(t.c)?;
    // SAFETY: a fresh descriptor; plain values.
    check("cudnnSetTensor4dDescriptorEx", unsafe {
        dn::cudnnSetTensor4dDescriptorEx(d.0, data_type(t.dtype), 1, c, 1, 1, c, 1, 1, 1)
    })?;
    Ok(d)
}

fn filter(f: &FilterDesc) -> Result<Filter> {
    let d = Filter::new()?;
    let format = match f.layout {
        TensorLayout::Nchw => dn::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
        TensorLayout::Nhwc => dn::cudnnTensorFormat_t::CUDNN_TENSOR_NHWC,
    };
    // SAFETY: a fresh descriptor; plain values.
    check("cudnnSetFilter4dDescriptor", unsafe {
        dn::cudnnSetFilter4dDescriptor(
            d.0,
            data_type(f.dtype),
            format,
            int(f.k)?,
            int(f.c_per_group)?,
            int(f.r)?,
            int(f.s)?,
        )
    })?;
    Ok(d)
}

/// The three descriptors of a convolution and its own.
struct ConvDescs {
    x: Tensor,
    w: Filter,
    y: Tensor,
    conv: Conv,
}

fn conv(p: &ConvProblem) -> Result<ConvDescs> {
    let d = Conv::new()?;
    let c = &p.conv;
    // SAFETY: a fresh descriptor; plain values.
    check("cudnnSetConvolution2dDescriptor", unsafe {
        dn::cudnnSetConvolution2dDescriptor(
            d.0,
            int(c.pad[0])?,
            int(c.pad[1])?,
            int(c.stride[0])?,
            int(c.stride[1])?,
            int(c.dilation[0])?,
            int(c.dilation[1])?,
            dn::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
            data_type(p.x.dtype),
        )
    })?;
    // SAFETY: as above.
    check("cudnnSetConvolutionGroupCount", unsafe {
        dn::cudnnSetConvolutionGroupCount(d.0, int(c.groups)?)
    })?;
    // SAFETY: as above.
    check("cudnnSetConvolutionMathType", unsafe {
        dn::cudnnSetConvolutionMathType(d.0, dn::cudnnMathType_t::CUDNN_FMA_MATH)
    })?;
    Ok(ConvDescs {
        x: tensor(&p.x)?,
        w: filter(&p.w)?,
        y: tensor(&p.y)?,
        conv: d,
    })
}

fn pool(p: &PoolProblem) -> Result<Pool> {
    let d = Pool::new()?;
    let mode = match p.mode {
        PoolMode::Max => dn::cudnnPoolingMode_t::CUDNN_POOLING_MAX_DETERMINISTIC,
        PoolMode::AverageIncludePadding => {
            dn::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
        }
        PoolMode::AverageExcludePadding => {
            dn::cudnnPoolingMode_t::CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
        }
    };
    // SAFETY: a fresh descriptor; plain values.
    check("cudnnSetPooling2dDescriptor", unsafe {
        dn::cudnnSetPooling2dDescriptor(
            d.0,
            mode,
            dn::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
            int(p.window[0])?,
            int(p.window[1])?,
            int(p.pad[0])?,
            int(p.pad[1])?,
            int(p.stride[0])?,
            int(p.stride[1])?,
        )
    })?;
    Ok(d)
}

fn activation(a: Activation) -> Result<Act> {
    let mode = match a {
        Activation::Relu => dn::cudnnActivationMode_t::CUDNN_ACTIVATION_RELU,
        Activation::Sigmoid => dn::cudnnActivationMode_t::CUDNN_ACTIVATION_SIGMOID,
        Activation::Tanh => dn::cudnnActivationMode_t::CUDNN_ACTIVATION_TANH,
        Activation::Gelu => {
            return Err(Error::internal("GELU was routed to cuDNN, which has none"));
        }
    };
    let d = Act::new()?;
    // SAFETY: a fresh descriptor; plain values.
    check("cudnnSetActivationDescriptor", unsafe {
        dn::cudnnSetActivationDescriptor(
            d.0,
            mode,
            dn::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
            0.0,
        )
    })?;
    Ok(d)
}

fn softmax(
    alg: SoftmaxAlgorithm,
    mode: SoftmaxMode,
) -> (dn::cudnnSoftmaxAlgorithm_t, dn::cudnnSoftmaxMode_t) {
    (
        match alg {
            SoftmaxAlgorithm::Accurate => dn::cudnnSoftmaxAlgorithm_t::CUDNN_SOFTMAX_ACCURATE,
            SoftmaxAlgorithm::Log => dn::cudnnSoftmaxAlgorithm_t::CUDNN_SOFTMAX_LOG,
        },
        match mode {
            SoftmaxMode::Channel => dn::cudnnSoftmaxMode_t::CUDNN_SOFTMAX_MODE_CHANNEL,
            SoftmaxMode::Instance => dn::cudnnSoftmaxMode_t::CUDNN_SOFTMAX_MODE_INSTANCE,
        },
    )
}

/// The per-channel statistics descriptor of batch norm over `x` (SPATIAL mode).
fn bn(x: &Tensor) -> Result<Tensor> {
    let d = Tensor::new()?;
    // SAFETY: a fresh descriptor derived from a set one.
    check("cudnnDeriveBNTensorDescriptor", unsafe {
        dn::cudnnDeriveBNTensorDescriptor(
            d.0,
            x.0,
            dn::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
        )
    })?;
    Ok(d)
}

/// A work area of a convolution, allocated in stream order and freed after the call.
struct Work {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    stream: sys::CUstream,
}

impl Work {
    fn new(stream: sys::CUstream, bytes: usize) -> Result<Self> {
        let ptr = if bytes == 0 {
            0
        } else {
            // SAFETY: a live stream of the bound context.
            unsafe { result::malloc_async(stream, bytes) }
                .map_err(|e| cu_error("cuMemAllocAsync (cuDNN work area)", e))?
        };
        Ok(Work { ptr, bytes, stream })
    }

    fn ptr(&self) -> *mut c_void {
        self.ptr as usize as *mut c_void
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // SAFETY: allocated on this stream; freed after the work enqueued before it.
            let _ = unsafe { result::free_async(self.ptr, self.stream) };
        }
    }
}

/// The first algorithm of cuDNN's heuristics that it reports it can run.
macro_rules! first_algorithm {
    ($get:ident, $perf:ty, $count:expr, $h:expr, $($d:expr),*) => {{
        // SAFETY: plain-old-data structs, all-zero is a valid value.
        let mut perf: [$perf; $count] = unsafe { std::mem::zeroed() };
        let mut returned: c_int = 0;
        // SAFETY: `perf` holds `$count` results; the descriptors are set.
        check(stringify!($get), unsafe {
            dn::$get($h, $($d),*, $count as c_int, &mut returned, perf.as_mut_ptr())
        })?;
        perf[..returned.max(0) as usize]
            .iter()
            .find(|p| p.status == dn::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
            .map(|p| p.algo)
            .ok_or_else(|| {
                Error::unsupported(
                    PLATFORM,
                    concat!("cuDNN ", stringify!($get)),
                    "cuDNN has no algorithm for this convolution; choose Plugin::Builtin for DNN",
                )
            })?
    }};
}

impl CudaDnn {
    /// A cuDNN handle in context `ctx`. Only called where libcudnn is installed
    /// (`cudnn::sys::is_culib_present`); cudarc panics on a missing library.
    pub(crate) fn new(ctx: sys::CUcontext) -> Result<Self> {
        let ctx = ctx as usize;
        bind(ctx)?;
        let mut h: dn::cudnnHandle_t = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check("cudnnCreate", unsafe { dn::cudnnCreate(&mut h) })?;
        Ok(CudaDnn {
            handle: Mutex::new(h as usize),
            ctx,
        })
    }

    fn conv_forward(&self, h: dn::cudnnHandle_t, s: sys::CUstream, call: &DnnCall) -> Result<()> {
        let DnnCall::ConvForward { p, x, w, y } = *call else {
            return Err(Error::internal("conv_forward of another call"));
        };
        let d = conv(&p)?;
        let algo = first_algorithm!(
            cudnnGetConvolutionForwardAlgorithm_v7,
            dn::cudnnConvolutionFwdAlgoPerf_t,
            8,
            h,
            d.x.0,
            d.w.0,
            d.conv.0,
            d.y.0
        );
        let mut bytes = 0usize;
        // SAFETY: set descriptors; writes one size.
        check("cudnnGetConvolutionForwardWorkspaceSize", unsafe {
            dn::cudnnGetConvolutionForwardWorkspaceSize(
                h, d.x.0, d.w.0, d.conv.0, d.y.0, algo, &mut bytes,
            )
        })?;
        let work = Work::new(s, bytes)?;
        let t = p.x.dtype;
        // SAFETY: the operands hold their tensors (the contract); the work area is `bytes`.
        check("cudnnConvolutionForward", unsafe {
            dn::cudnnConvolutionForward(
                h,
                scalar(t, true),
                d.x.0,
                ptr(x),
                d.w.0,
                ptr(w),
                d.conv.0,
                algo,
                work.ptr(),
                work.bytes,
                scalar(t, false),
                d.y.0,
                ptr(y),
            )
        })
    }

    fn conv_backward_data(
        &self,
        h: dn::cudnnHandle_t,
        s: sys::CUstream,
        call: &DnnCall,
    ) -> Result<()> {
        let DnnCall::ConvBackwardData { p, w, dy, dx } = *call else {
            return Err(Error::internal("conv_backward_data of another call"));
        };
        let d = conv(&p)?;
        let algo = first_algorithm!(
            cudnnGetConvolutionBackwardDataAlgorithm_v7,
            dn::cudnnConvolutionBwdDataAlgoPerf_t,
            6,
            h,
            d.w.0,
            d.y.0,
            d.conv.0,
            d.x.0
        );
        let mut bytes = 0usize;
        // SAFETY: set descriptors; writes one size.
        check("cudnnGetConvolutionBackwardDataWorkspaceSize", unsafe {
            dn::cudnnGetConvolutionBackwardDataWorkspaceSize(
                h, d.w.0, d.y.0, d.conv.0, d.x.0, algo, &mut bytes,
            )
        })?;
        let work = Work::new(s, bytes)?;
        let t = p.x.dtype;
        // SAFETY: the operands hold their tensors (the contract); the work area is `bytes`.
        check("cudnnConvolutionBackwardData", unsafe {
            dn::cudnnConvolutionBackwardData(
                h,
                scalar(t, true),
                d.w.0,
                ptr(w),
                d.y.0,
                ptr(dy),
                d.conv.0,
                algo,
                work.ptr(),
                work.bytes,
                scalar(t, false),
                d.x.0,
                ptr(dx),
            )
        })
    }

    fn conv_backward_filter(
        &self,
        h: dn::cudnnHandle_t,
        s: sys::CUstream,
        call: &DnnCall,
    ) -> Result<()> {
        let DnnCall::ConvBackwardFilter { p, x, dy, dw } = *call else {
            return Err(Error::internal("conv_backward_filter of another call"));
        };
        let d = conv(&p)?;
        let algo = first_algorithm!(
            cudnnGetConvolutionBackwardFilterAlgorithm_v7,
            dn::cudnnConvolutionBwdFilterAlgoPerf_t,
            7,
            h,
            d.x.0,
            d.y.0,
            d.conv.0,
            d.w.0
        );
        let mut bytes = 0usize;
        // SAFETY: set descriptors; writes one size.
        check("cudnnGetConvolutionBackwardFilterWorkspaceSize", unsafe {
            dn::cudnnGetConvolutionBackwardFilterWorkspaceSize(
                h, d.x.0, d.y.0, d.conv.0, d.w.0, algo, &mut bytes,
            )
        })?;
        let work = Work::new(s, bytes)?;
        let t = p.x.dtype;
        // SAFETY: the operands hold their tensors (the contract); the work area is `bytes`.
        check("cudnnConvolutionBackwardFilter", unsafe {
            dn::cudnnConvolutionBackwardFilter(
                h,
                scalar(t, true),
                d.x.0,
                ptr(x),
                d.y.0,
                ptr(dy),
                d.conv.0,
                algo,
                work.ptr(),
                work.bytes,
                scalar(t, false),
                d.w.0,
                ptr(dw),
            )
        })
    }

    /// Everything but the convolutions: one descriptor set and one call each.
    fn other(&self, h: dn::cudnnHandle_t, call: &DnnCall) -> Result<()> {
        match *call {
            DnnCall::PoolForward { p, x, y } => {
                let (pd, xd, yd, t) = (pool(&p)?, tensor(&p.x)?, tensor(&p.y)?, p.x.dtype);
                // SAFETY: set descriptors; the operands hold their tensors (the contract).
                check("cudnnPoolingForward", unsafe {
                    dn::cudnnPoolingForward(
                        h,
                        pd.0,
                        scalar(t, true),
                        xd.0,
                        ptr(x),
                        scalar(t, false),
                        yd.0,
                        ptr(y),
                    )
                })
            }
            DnnCall::PoolBackward { p, x, y, dy, dx } => {
                let (pd, xd, yd, t) = (pool(&p)?, tensor(&p.x)?, tensor(&p.y)?, p.x.dtype);
                // SAFETY: as above.
                check("cudnnPoolingBackward", unsafe {
                    dn::cudnnPoolingBackward(
                        h,
                        pd.0,
                        scalar(t, true),
                        yd.0,
                        ptr(y),
                        yd.0,
                        ptr(dy),
                        xd.0,
                        ptr(x),
                        scalar(t, false),
                        xd.0,
                        ptr(dx),
                    )
                })
            }
            DnnCall::ActivationForward { act, t, x, y } => {
                let (ad, td) = (activation(act)?, tensor(&t)?);
                // SAFETY: as above (in place allowed: cuDNN documents x == y).
                check("cudnnActivationForward", unsafe {
                    dn::cudnnActivationForward(
                        h,
                        ad.0,
                        scalar(t.dtype, true),
                        td.0,
                        ptr(x),
                        scalar(t.dtype, false),
                        td.0,
                        ptr(y),
                    )
                })
            }
            DnnCall::ActivationBackward {
                act,
                t,
                x,
                y,
                dy,
                dx,
            } => {
                let (ad, td) = (activation(act)?, tensor(&t)?);
                // SAFETY: as above.
                check("cudnnActivationBackward", unsafe {
                    dn::cudnnActivationBackward(
                        h,
                        ad.0,
                        scalar(t.dtype, true),
                        td.0,
                        ptr(y),
                        td.0,
                        ptr(dy),
                        td.0,
                        ptr(x),
                        scalar(t.dtype, false),
                        td.0,
                        ptr(dx),
                    )
                })
            }
            DnnCall::SoftmaxForward { alg, mode, t, x, y } => {
                let ((a, m), td) = (softmax(alg, mode), tensor(&t)?);
                // SAFETY: as above.
                check("cudnnSoftmaxForward", unsafe {
                    dn::cudnnSoftmaxForward(
                        h,
                        a,
                        m,
                        scalar(t.dtype, true),
                        td.0,
                        ptr(x),
                        scalar(t.dtype, false),
                        td.0,
                        ptr(y),
                    )
                })
            }
            DnnCall::SoftmaxBackward {
                alg,
                mode,
                t,
                y,
                dy,
                dx,
            } => {
                let ((a, m), td) = (softmax(alg, mode), tensor(&t)?);
                // SAFETY: as above.
                check("cudnnSoftmaxBackward", unsafe {
                    dn::cudnnSoftmaxBackward(
                        h,
                        a,
                        m,
                        scalar(t.dtype, true),
                        td.0,
                        ptr(y),
                        td.0,
                        ptr(dy),
                        scalar(t.dtype, false),
                        td.0,
                        ptr(dx),
                    )
                })
            }
            DnnCall::BatchNormTraining {
                p,
                x,
                scale,
                bias,
                y,
                running_mean,
                running_var,
                save_mean,
                save_inv_std,
            } => {
                let (xd, t) = (tensor(&p.x)?, p.x.dtype);
                let bd = bn(&xd)?;
                // SAFETY: as above; the vectors hold `C` elements of the data's type.
                check("cudnnBatchNormalizationForwardTraining", unsafe {
                    dn::cudnnBatchNormalizationForwardTraining(
                        h,
                        dn::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
                        scalar(t, true),
                        scalar(t, false),
                        xd.0,
                        ptr(x),
                        xd.0,
                        ptr(y),
                        bd.0,
                        ptr(scale),
                        ptr(bias),
                        p.momentum,
                        ptr(running_mean),
                        ptr(running_var),
                        p.epsilon,
                        ptr(save_mean),
                        ptr(save_inv_std),
                    )
                })
            }
            DnnCall::BatchNormInference {
                p,
                x,
                scale,
                bias,
                mean,
                var,
                y,
            } => {
                let (xd, t) = (tensor(&p.x)?, p.x.dtype);
                let bd = bn(&xd)?;
                // SAFETY: as above.
                check("cudnnBatchNormalizationForwardInference", unsafe {
                    dn::cudnnBatchNormalizationForwardInference(
                        h,
                        dn::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
                        scalar(t, true),
                        scalar(t, false),
                        xd.0,
                        ptr(x),
                        xd.0,
                        ptr(y),
                        bd.0,
                        ptr(scale),
                        ptr(bias),
                        ptr(mean),
                        ptr(var),
                        p.epsilon,
                    )
                })
            }
            DnnCall::BatchNormBackward {
                p,
                x,
                dy,
                scale,
                save_mean,
                save_inv_std,
                dx,
                dscale,
                dbias,
            } => {
                let (xd, t) = (tensor(&p.x)?, p.x.dtype);
                let bd = bn(&xd)?;
                // SAFETY: as above.
                check("cudnnBatchNormalizationBackward", unsafe {
                    dn::cudnnBatchNormalizationBackward(
                        h,
                        dn::cudnnBatchNormMode_t::CUDNN_BATCHNORM_SPATIAL,
                        scalar(t, true),
                        scalar(t, false),
                        scalar(t, true),
                        scalar(t, false),
                        xd.0,
                        ptr(x),
                        xd.0,
                        ptr(dy),
                        xd.0,
                        ptr(dx),
                        bd.0,
                        ptr(scale),
                        ptr(dscale),
                        ptr(dbias),
                        p.epsilon,
                        ptr(save_mean),
                        ptr(save_inv_std),
                    )
                })
            }
            DnnCall::BiasAdd { t, y, bias } => {
                let (td, bd) = (tensor(&t)?, channels(&t)?);
                // SAFETY: as above; beta = 1 adds into `y`.
                check("cudnnAddTensor", unsafe {
                    dn::cudnnAddTensor(
                        h,
                        scalar(t.dtype, true),
                        bd.0,
                        ptr(bias),
                        scalar(t.dtype, true),
                        td.0,
                        ptr(y),
                    )
                })
            }
            DnnCall::ConvForward { .. }
            | DnnCall::ConvBackwardData { .. }
            | DnnCall::ConvBackwardFilter { .. } => Err(Error::internal(
                "a convolution reached cuDNN's other operations",
            )),
        }
    }
}

/// A device address as cuDNN's pointer (CUDA device addresses are real pointers).
fn ptr(addr: u64) -> *mut c_void {
    addr as usize as *mut c_void
}

/// Whether every size of `t` fits cuDNN's ints.
fn tensor_fits(t: &TensorDesc) -> bool {
    let s = t.strides();
    [t.n, t.c, t.h, t.w, s[0], s[1], s[2], s[3]]
        .iter()
        .all(|&v| fits(v).is_some())
}

fn conv_fits(p: &ConvProblem) -> bool {
    let c = &p.conv;
    tensor_fits(&p.x)
        && tensor_fits(&p.y)
        && [p.w.k, p.w.c_per_group, p.w.r, p.w.s, c.groups]
            .iter()
            .chain(&c.pad)
            .chain(&c.stride)
            .chain(&c.dilation)
            .all(|&v| fits(v).is_some())
}

fn pool_fits(p: &PoolProblem) -> bool {
    tensor_fits(&p.x)
        && tensor_fits(&p.y)
        && p.window
            .iter()
            .chain(&p.pad)
            .chain(&p.stride)
            .all(|&v| fits(v).is_some())
}

fn bn_fits(p: &BatchNormProblem) -> bool {
    tensor_fits(&p.x)
}

impl GpuDnn for CudaDnn {
    fn supports(&self, call: &DnnCall) -> bool {
        match call {
            DnnCall::ConvForward { p, .. }
            | DnnCall::ConvBackwardData { p, .. }
            | DnnCall::ConvBackwardFilter { p, .. } => conv_fits(p),
            DnnCall::PoolForward { p, .. } => pool_fits(p),
            // cuDNN does not promise the contract's first-maximum routing on ties.
            DnnCall::PoolBackward { p, .. } => p.mode != PoolMode::Max && pool_fits(p),
            DnnCall::ActivationForward { act, t, .. }
            | DnnCall::ActivationBackward { act, t, .. } => {
                *act != Activation::Gelu && tensor_fits(t)
            }
            DnnCall::SoftmaxForward { t, .. }
            | DnnCall::SoftmaxBackward { t, .. }
            | DnnCall::BiasAdd { t, .. } => tensor_fits(t),
            DnnCall::BatchNormTraining { p, .. }
            | DnnCall::BatchNormInference { p, .. }
            | DnnCall::BatchNormBackward { p, .. } => bn_fits(p),
        }
    }

    fn run(&self, s: RawStream, call: &DnnCall) -> Result<()> {
        let guard = self.handle.lock();
        let h = *guard as dn::cudnnHandle_t;
        bind(self.ctx)?;
        let stream = s.0 as sys::CUstream;
        // SAFETY: a live handle and stream of the bound context.
        check("cudnnSetStream", unsafe {
            dn::cudnnSetStream(h, s.0 as dn::cudaStream_t)
        })?;
        match call {
            DnnCall::ConvForward { .. } => self.conv_forward(h, stream, call),
            DnnCall::ConvBackwardData { .. } => self.conv_backward_data(h, stream, call),
            DnnCall::ConvBackwardFilter { .. } => self.conv_backward_filter(h, stream, call),
            _ => self.other(h, call),
        }
    }
}

impl Drop for CudaDnn {
    fn drop(&mut self) {
        // The driver drops this before it releases its context (cuda/driver.rs); the calls
        // were enqueued through streams the executor synchronised before dropping.
        if bind(self.ctx).is_ok() {
            // SAFETY: the handle is ours and no call is in flight (we hold `&mut self`).
            let _ = unsafe { dn::cudnnDestroy(*self.handle.get_mut() as dn::cudnnHandle_t) };
        }
    }
}
