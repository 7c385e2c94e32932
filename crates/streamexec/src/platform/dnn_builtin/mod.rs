//! The built-in DNN kernels that the CUDA-like backend (`gpu/`) and OpenCL (`opencl/`) share:
//! one kernel text, `kernels/dnn_math.h` + `kernels/dnn_body.h`, compiled as CUDA C to the
//! committed PTX `kernels/ptx/dnn.O3.ptx` (`kernels/dnn.cu`, `scripts/gen-ptx.sh`) and as
//! OpenCL C behind [`OPENCL_SOURCE`]'s prelude. Each kernel exists in f32 and f64 as
//! `se_dnn_<base>_<f32|f64>`; the header comments of the two files document every parameter
//! list, the layouts (sizes plus element strides per tensor, so NCHW, NHWC, KCRS and KRSC are
//! one kernel) and the numerical rules (f32 accumulates in f32; max-pooling backward routes to
//! a window's first maximum; the elementary functions are written in the text, since no
//! libdevice exists without the CUDA SDK).
//!
//! A backend implements [`DnnDevice`] (its platform name, how it loads a kernel, how it passes
//! an operand, its grid, its BLAS) and gets the whole `DnnSupport` from `ops.rs`: each
//! operation is one launch on the user's stream (the fused matmul: the executor's own GEMM,
//! then the epilogue kernel), with alpha = 1 and beta = 0 (the contract overwrites outputs)
//! except bias add (beta = 1, in place). No scratch memory and no state: operations on
//! different streams are independent.

mod ops;
#[cfg(test)]
mod tests;

pub(crate) use ops::DnnDevice;

/// The kernel text as OpenCL C: the dialect macros, then the body. Built with
/// `-DSE_T=float -DSE_SUF=f32` or `-DSE_T=double -DSE_SUF=f64 -DSE_FP64`.
#[cfg(feature = "opencl")]
pub(crate) const OPENCL_SOURCE: &str = concat!(
    "#ifdef SE_FP64\n",
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    "#define SE_INF ((double)INFINITY)\n",
    "#else\n",
    "#define SE_INF INFINITY\n",
    "#endif\n",
    "typedef ulong u64;\n",
    "typedef uint u32;\n",
    "typedef long i64;\n",
    "#define SE_KERNEL kernel void\n",
    "#define SE_FN\n",
    "#define SE_FN_CALLED\n",
    "#define SE_GLOBAL global\n",
    "#define SE_GID ((u64)get_global_id(0))\n",
    "#define SE_GSIZE ((u64)get_global_size(0))\n",
    "#define SE_SQRT(x) sqrt(x)\n",
    include_str!("../../../kernels/dnn_math.h"),
    include_str!("../../../kernels/dnn_body.h"),
);

/// The OpenCL build options of one precision.
#[cfg(feature = "opencl")]
pub(crate) fn opencl_options(fp64: bool) -> &'static str {
    if fp64 {
        "-DSE_T=double -DSE_SUF=f64 -DSE_FP64"
    } else {
        "-DSE_T=float -DSE_SUF=f32"
    }
}

/// Declares [`KERNELS`]: each kernel's base name, parameter count (a buffer counts twice:
/// pointer and offset) and its two names, as `kernels/dnn_math.h` and `dnn_body.h` declare them.
macro_rules! kernel_table {
    ($($base:ident: $arity:expr),* $(,)?) => {
        /// Base name, parameter count, and the f32 and f64 kernel names of every kernel.
        pub(crate) const KERNELS: &[(&str, usize, [&str; 2])] = &[$((
            stringify!($base),
            $arity,
            [
                concat!("se_dnn_", stringify!($base), "_f32"),
                concat!("se_dnn_", stringify!($base), "_f64"),
            ],
        )),*];
    };
}

kernel_table! {
    math: 6,
    conv_fwd: 36,
    conv_bwd_data: 36,
    conv_bwd_filter: 36,
    pool_fwd: 27,
    pool_bwd: 33,
    act_fwd: 19,
    act_bwd: 31,
    softmax_fwd: 20,
    softmax_bwd: 26,
    bn_fwd_train: 31,
    bn_fwd_infer: 25,
    bn_bwd: 34,
    bias_add: 14,
    epilogue: 10,
}

/// The kernel `se_dnn_<base>_<f32|f64>`.
pub(crate) fn kernel_name(base: &str, fp64: bool) -> crate::error::Result<&'static str> {
    KERNELS
        .iter()
        .find(|(b, _, _)| *b == base)
        .map(|(_, _, names)| names[usize::from(fp64)])
        .ok_or_else(|| crate::error::Error::internal(format!("no built-in DNN kernel `{base}`")))
}

/// Parameters of kernel `name` (for loaders that need the count up front, as OpenCL's), 0 for
/// a name that is not one.
#[cfg_attr(not(any(feature = "opencl", test)), allow(dead_code))]
pub(crate) fn arity(name: &str) -> usize {
    KERNELS
        .iter()
        .find(|(_, _, names)| names.contains(&name))
        .map_or(0, |&(_, n, _)| n)
}
