// The built-in DNN kernels of the CUDA platform (`Driver::DNN_PTX`, launched through
// src/platform/dnn_builtin/): the text in dnn_math.h and dnn_body.h, shared with OpenCL C,
// built here once per precision as se_dnn_<kernel>_{f32,f64}. Contraction is off so the
// functions' range reductions round as written.
// Only -O3 is built: the drivers load it, and an -O0 build of this much code would take the
// PTX crate's corpus tests minutes to compile.
// gen-ptx-flags: -ffp-contract=off
// gen-ptx-levels: O3
#include "prelude.h"

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define SE_KERNEL extern "C" __global__ void
#define SE_FN static __device__ __forceinline__
// The larger functions stay calls, so the PTX (which the engines compile per kernel) stays
// small.
#define SE_FN_CALLED static __device__ __noinline__
#define SE_GLOBAL
#define SE_GID ((u64)blockIdx.x * blockDim.x + threadIdx.x)
#define SE_GSIZE ((u64)gridDim.x * blockDim.x)

static __device__ __forceinline__ float se_sqrt(float x) { return __builtin_sqrtf(x); }
static __device__ __forceinline__ double se_sqrt(double x) { return __builtin_sqrt(x); }
#define SE_SQRT(x) se_sqrt(x)

#define SE_T float
#define SE_SUF f32
#define SE_INF __builtin_huge_valf()
#include "dnn_math.h"
#include "dnn_body.h"
#undef SE_T
#undef SE_SUF
#undef SE_INF

#define SE_T double
#define SE_SUF f64
#define SE_FP64
#define SE_INF __builtin_huge_val()
#include "dnn_math.h"
#include "dnn_body.h"
#undef SE_T
#undef SE_SUF
#undef SE_FP64
#undef SE_INF
