// The CUDA platform's built-in FFT kernels (`Driver::FFT_PTX`, launched by
// src/platform/fft_builtin.rs through src/platform/gpu/fft.rs): the body in fft_body.h, shared
// with OpenCL C (src/platform/opencl/fft.rs), built here once per precision:
// se_fft_{gather,scatter,pass,chirp_in,chirp_mul,chirp_out}_{f32,f64}.
#include "prelude.h"

typedef unsigned int u32;
typedef unsigned long long u64;

#define SE_KERNEL extern "C" __global__ void
#define SE_FN static __device__ __forceinline__
#define SE_GLOBAL
#define SE_GID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define SE_GSIZE ((u64)gridDim.x * blockDim.x)

#define SE_T float
#define SE_SUF f32
#include "fft_body.h"
#undef SE_T
#undef SE_SUF

#define SE_T double
#define SE_SUF f64
#include "fft_body.h"
#undef SE_T
#undef SE_SUF
