// PTX corpus, part 3: control flow, device-function calls, 64-bit and double math, conversions.
// Compiled to kernels/ptx/corpus_math.{O0,O3}.ptx by scripts/gen-ptx.sh; see crates/streamexec-ptx/tests/corpus.rs.
//
// What the PTX exercises:
//   divergent_loops   nested loops with data-dependent trip counts, `ret` from inside both loops
//                     (lanes of one warp leave at different points and must reconverge);
//                     `% 5` is rem.s32 at -O0 and a mul.hi.s32 sequence at -O3
//   call_funcs        `.func` + `call` (both functions are __noinline__) with the .param ABI:
//                     st.param / ld.param around call, a loop inside the callee, a pointer
//                     argument, fma.rn.f64 via __nvvm_fma_rn_d
//   i64_math          mul.lo.s64, div.s64, div.u64, rem.s64 and rem.u64 (-O0; -O3 derives the
//                     remainders from the quotients), shl.b64, shr.s64, shr.u64,
//                     mul.hi.s64, mul.hi.u64, add/sub.s64, min/max.s64 (or setp+selp)
//   f64_math          mul/add/sub.rn.f64, div.rn.f64, sqrt.rn.f64, fma.rn.f64, min/max.f64, abs
//   conversions       cvt.rzi/rni/rmi/rpi.{s32,u32,s64,u64}.{f32,f64} (float->int, saturating,
//                     NaN -> 0), cvt.rn/rm/rp.{f32,f64}.{s32,u32,s64,u64} (int->float),
//                     cvt.rn/rz/rm/rp.f32.f64, cvt.f64.f32, cvt.s8/u16/s16 truncations and
//                     cvt.s64.s32 / cvt.u64.u32 extensions, cvt.sat.f32.f32 (saturate to [0,1])
//
// Note: clang-19 at -O3 rewrites __nvvm_i2f_rz into a plain (round-to-nearest) conversion, so
// int->float rounding is exercised with .rm/.rp only (the per-instruction tests cover .rz).
#include "prelude.h"

typedef long long i64;
typedef unsigned long long u64;

// Writes out[i] for every i < n: the sum of a triangle of j*k+1 over data-dependent bounds,
// stopped early (negated, or doubled) by data-dependent conditions.
extern "C" __global__ void divergent_loops(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = in[i];
    int acc = 0;
    for (int j = 0; j < (x & 15); j++) {
        for (int k = 0; k < ((x >> 4) & 7); k++) {
            acc += j * k + 1;
            if (acc > 40 + ((x >> 8) & 31)) {
                out[i] = -acc;
                return;
            }
        }
        if ((x >> 13) % 5 == j) {
            out[i] = acc * 2;
            return;
        }
    }
    out[i] = acc;
}

// Collatz steps from x, stopping at `limit`.
static __device__ __noinline__ int collatz_steps(unsigned x, int limit) {
    int s = 0;
    while (x != 1 && s < limit) {
        x = (x & 1) ? 3 * x + 1 : x / 2;
        s++;
    }
    return s;
}

// c[0] + c[1] x + ... + c[deg] x^deg by Horner with explicit fused multiply-adds.
static __device__ __noinline__ double horner(double x, const double* c, int deg) {
    double acc = c[deg];
    for (int k = deg - 1; k >= 0; k--) acc = __nvvm_fma_rn_d(acc, x, c[k]);
    return acc;
}

extern "C" __global__ void call_funcs(const unsigned* xs, const double* ds, const double* coef,
                                      int deg, int* steps, double* poly, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    steps[i] = collatz_steps(xs[i], 200);
    poly[i] = horner(ds[i], coef, deg);
}

#define I64_OUTS 14
// 64-bit integer math on a[i], b[i] (b[i] != 0 and not (INT64_MIN, -1)): see I64_OUTS slots.
extern "C" __global__ void i64_math(const i64* a, const i64* b, i64* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    i64 x = a[i], y = b[i];
    u64 ux = (u64)x, uy = (u64)y;
    int sh = (int)(y & 63);
    i64* o = out + (i64)i * I64_OUTS;
    o[0] = (i64)(ux * uy);
    o[1] = x / y;
    o[2] = x % y;
    o[3] = (i64)(ux / uy);
    o[4] = (i64)(ux % uy);
    o[5] = (i64)(ux << sh);
    o[6] = x >> sh;
    o[7] = (i64)(ux >> sh);
    o[8] = __nvvm_mulhi_ll(x, y);
    o[9] = (i64)__nvvm_mulhi_ull(ux, uy);
    o[10] = (i64)(ux + uy);
    o[11] = (i64)(ux - uy);
    o[12] = x < y ? x : y;
    o[13] = (i64)(ux > uy ? ux : uy);
}

#define F64_OUTS 9
// IEEE double math on a[i], b[i], c[i]; every operation is correctly rounded.
extern "C" __global__ void f64_math(const double* a, const double* b, const double* c,
                                    double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a[i], y = b[i], z = c[i];
    double* o = out + (i64)i * F64_OUTS;
    o[0] = __nvvm_mul_rn_d(x, y);
    o[1] = __nvvm_add_rn_d(x, y);
    o[2] = __nvvm_add_rn_d(x, -y);
    o[3] = __nvvm_div_rn_d(x, y);
    o[4] = __nvvm_sqrt_rn_d(__builtin_fabs(x));
    o[5] = __nvvm_fma_rn_d(x, y, z);
    o[6] = __builtin_fmin(x, y);
    o[7] = __builtin_fmax(x, y);
    o[8] = __nvvm_div_rn_d(1.0, z);
}

#define CVT_I32_OUTS 11
#define CVT_I64_OUTS 9
#define CVT_F32_OUTS 11
#define CVT_F64_OUTS 7
// Conversions of f[i] (f32), d[i] (f64), iv[i] (i32), lv[i] (i64) in every direction.
extern "C" __global__ void conversions(const float* f, const double* d, const int* iv,
                                       const i64* lv, int* oi, i64* ol, float* of, double* od,
                                       int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = f[i];
    double y = d[i];
    int k = iv[i];
    i64 l = lv[i];
    int* o32 = oi + (i64)i * CVT_I32_OUTS;
    o32[0] = __nvvm_f2i_rz(x);
    o32[1] = __nvvm_f2i_rn(x);
    o32[2] = __nvvm_f2i_rm(x);
    o32[3] = __nvvm_f2i_rp(x);
    o32[4] = __nvvm_d2i_rz(y);
    o32[5] = __nvvm_d2i_rn(y);
    o32[6] = (int)__nvvm_f2ui_rz(x);
    o32[7] = (int)__nvvm_d2ui_rp(y);
    o32[8] = (signed char)k;
    o32[9] = (unsigned short)k;
    o32[10] = (short)l;
    i64* o64 = ol + (i64)i * CVT_I64_OUTS;
    o64[0] = __nvvm_f2ll_rz(x);
    o64[1] = __nvvm_d2ll_rz(y);
    o64[2] = (i64)__nvvm_d2ull_rz(y);
    o64[3] = __nvvm_f2ll_rn(x);
    o64[4] = (i64)__nvvm_f2ull_rm(x);
    o64[5] = __nvvm_d2ll_rm(y);
    o64[6] = __nvvm_d2ll_rp(y);
    o64[7] = (i64)k;
    o64[8] = (i64)(u64)(unsigned)k;
    float* of32 = of + (i64)i * CVT_F32_OUTS;
    of32[0] = (float)k;
    of32[1] = __nvvm_ui2f_rm((unsigned)k);
    of32[2] = __nvvm_i2f_rp(k);
    of32[3] = (float)l;
    of32[4] = __nvvm_ll2f_rm(l);
    of32[5] = (float)y;
    of32[6] = __nvvm_d2f_rz(y);
    of32[7] = __nvvm_d2f_rm(y);
    of32[8] = __nvvm_d2f_rp(y);
    of32[9] = (float)(u64)l;
    of32[10] = __nvvm_saturate_f(x);
    double* o64f = od + (i64)i * CVT_F64_OUTS;
    o64f[0] = (double)x;
    o64f[1] = (double)k;
    o64f[2] = (double)l;
    o64f[3] = __nvvm_ll2d_rm(l);
    o64f[4] = __nvvm_ll2d_rp(l);
    o64f[5] = (double)(u64)l;
    o64f[6] = __nvvm_ull2d_rp((u64)l);
}
