// The CUDA platform's built-in kernels (`Driver::CANNED_PTX`, launched by src/platform/gpu/).
//
// Philox4x32-10 fills for RngSupport: a line-by-line port of the se_philox_* kernels of
// src/platform/opencl/builtins.cl, which follow src/philox.rs (the definition). Contraction is
// off and every double operation is IEEE-exact + - * / sqrt, so the results are bit-identical
// to the host's. `dst` points at the fill's first element.
//
// BLAS for BlasSupport where cuBLAS is not installed: the se_blas_* kernels at the end of this
// file (their parameter lists are documented there and packed by src/platform/gpu/blas.rs).
// gen-ptx-flags: -ffp-contract=off
#include "prelude.h"

typedef unsigned int u32;
typedef unsigned long long u64;

struct u4 { u32 x, y, z, w; };

static __device__ u4 se_philox(u4 c, u32 k0, u32 k1) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        u64 p0 = (u64)0xD2511F53u * (u64)c.x;
        u64 p1 = (u64)0xCD9E8D57u * (u64)c.z;
        u32 hi0 = (u32)(p0 >> 32), lo0 = (u32)p0;
        u32 hi1 = (u32)(p1 >> 32), lo1 = (u32)p1;
        u4 n = {hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
        c = n;
    }
    return c;
}

static __device__ u4 se_block(u64 offset, u64 b, u32 k0, u32 k1, u32 c2, u32 c3) {
    u64 c = offset + b;
    u4 in = {(u32)c, (u32)(c >> 32), c2, c3};
    return se_philox(in, k0, k1);
}

static __device__ u64 se_gid() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }

#define SE_PHILOX_ARGS u64 n, u32 k0, u32 k1, u32 c2, u32 c3, u64 block0

extern "C" __global__ void se_philox_u32(u32* dst, SE_PHILOX_ARGS) {
    u64 b = se_gid(), first = b * 4;
    if (first >= n) return;
    u4 w = se_block(block0, b, k0, k1, c2, c3);
    u32 v[4] = {w.x, w.y, w.z, w.w};
    for (int i = 0; i < 4 && first + i < n; i++) dst[first + i] = v[i];
}

extern "C" __global__ void se_philox_uniform_f32(float* dst, SE_PHILOX_ARGS) {
    u64 b = se_gid(), first = b * 4;
    if (first >= n) return;
    u4 w = se_block(block0, b, k0, k1, c2, c3);
    u32 v[4] = {w.x, w.y, w.z, w.w};
    for (int i = 0; i < 4 && first + i < n; i++)
        dst[first + i] = (float)(v[i] >> 8) * (1.0f / 16777216.0f);
}

static __device__ double se_uniform_f64(u32 lo, u32 hi) {
    return (double)((((u64)hi << 32) | (u64)lo) >> 11) * (1.0 / 9007199254740992.0);
}

static __device__ double se_ln(double x) {
    u64 bits = __builtin_bit_cast(u64, x);
    long long e = (long long)((bits >> 52) & 0x7ff) - 1023;
    double m = __builtin_bit_cast(double, (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e += 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double p = 1.0 / 23.0;
    p = p * s2 + 1.0 / 21.0;
    p = p * s2 + 1.0 / 19.0;
    p = p * s2 + 1.0 / 17.0;
    p = p * s2 + 1.0 / 15.0;
    p = p * s2 + 1.0 / 13.0;
    p = p * s2 + 1.0 / 11.0;
    p = p * s2 + 1.0 / 9.0;
    p = p * s2 + 1.0 / 7.0;
    p = p * s2 + 1.0 / 5.0;
    p = p * s2 + 1.0 / 3.0;
    p = p * s2 + 1.0 / 1.0;
    return 2.0 * s * p + (double)e * 0.6931471805599453;
}

struct d2 { double s, c; };

static __device__ d2 se_sincos_turns(double t) {
    double q = __builtin_floor(t * 4.0 + 0.5);
    double r = t - q * 0.25;
    double x = r * 6.283185307179586;
    double x2 = x * x;
    double s = -1.0 / 1307674368000.0;
    s = s * x2 + 1.0 / 6227020800.0;
    s = s * x2 + -1.0 / 39916800.0;
    s = s * x2 + 1.0 / 362880.0;
    s = s * x2 + -1.0 / 5040.0;
    s = s * x2 + 1.0 / 120.0;
    s = s * x2 + -1.0 / 6.0;
    double sn = x + x * x2 * s;
    double c = 1.0 / 20922789888000.0;
    c = c * x2 + -1.0 / 87178291200.0;
    c = c * x2 + 1.0 / 479001600.0;
    c = c * x2 + -1.0 / 3628800.0;
    c = c * x2 + 1.0 / 40320.0;
    c = c * x2 + -1.0 / 720.0;
    c = c * x2 + 1.0 / 24.0;
    c = c * x2 + -1.0 / 2.0;
    double cs = 1.0 + x2 * c;
    d2 o;
    switch ((u32)q & 3) {
        case 0: o.s = sn; o.c = cs; break;
        case 1: o.s = cs; o.c = -sn; break;
        case 2: o.s = -sn; o.c = -cs; break;
        default: o.s = -cs; o.c = sn; break;
    }
    return o;
}

static __device__ d2 se_box_muller(double u1, double t) {
    double r = __builtin_sqrt(-2.0 * se_ln(u1));
    d2 sc = se_sincos_turns(t);
    d2 z = {r * sc.c, r * sc.s};
    return z;
}

extern "C" __global__ void se_philox_uniform_f64(double* dst, SE_PHILOX_ARGS) {
    u64 b = se_gid(), first = b * 2;
    if (first >= n) return;
    u4 w = se_block(block0, b, k0, k1, c2, c3);
    dst[first] = se_uniform_f64(w.x, w.y);
    if (first + 1 < n) dst[first + 1] = se_uniform_f64(w.z, w.w);
}

extern "C" __global__ void se_philox_gaussian_f32(float* dst, SE_PHILOX_ARGS, double mean,
                                                  double sd) {
    u64 b = se_gid(), first = b * 4;
    if (first >= n) return;
    u4 w = se_block(block0, b, k0, k1, c2, c3);
    u32 v[4] = {w.x, w.y, w.z, w.w};
    for (int p = 0; p < 2; p++) {
        double u1 = (double)((v[2 * p] >> 8) + 1) * (1.0 / 16777216.0);
        double t = (double)(v[2 * p + 1] >> 8) * (1.0 / 16777216.0);
        d2 z = se_box_muller(u1, t);
        u64 i = first + 2 * p;
        if (i < n) dst[i] = (float)(mean + sd * z.s);
        if (i + 1 < n) dst[i + 1] = (float)(mean + sd * z.c);
    }
}

extern "C" __global__ void se_philox_gaussian_f64(double* dst, SE_PHILOX_ARGS, double mean,
                                                  double sd) {
    u64 b = se_gid(), first = b * 2;
    if (first >= n) return;
    u4 w = se_block(block0, b, k0, k1, c2, c3);
    double u1 = se_uniform_f64(w.x, w.y) + 1.0 / 9007199254740992.0;
    d2 z = se_box_muller(u1, se_uniform_f64(w.z, w.w));
    dst[first] = mean + sd * z.s;
    if (first + 1 < n) dst[first + 1] = mean + sd * z.c;
}

// ---------------------------------------------------------------------------------- BLAS
//
// Semantics are those of src/interface/blas.rs and the host platform (src/platform/host/blas.rs):
// column-major; beta == 0 means C / y is not read (a NaN there does not come out); alpha == 0
// or k == 0 means A and B are not read. Every kernel loops over its work with grid strides, so
// any grid of at least one block computes everything (the launcher caps grids at the device's
// limits). Scalars arrive as doubles (the stream widened them from the element type, so they
// are exact) and are narrowed where the host narrows them.
//
// Precision follows the host: GEMM accumulates in the element type (with fma), GEMV and the
// reductions accumulate in double. GEMV without transpose sums each row in column order, as the
// host does, so it gives the host's bits; axpy, scal and copy are bit-identical to the host's.
// The f32 nrm2 sums squares in double (no overflow or underflow for any f32); the f64 nrm2 keeps
// a (scale, sum of squares) pair as reference BLAS and cuBLAS do, so it neither overflows nor
// underflows (the host's plain sum of squares overflows beyond ~1e154).
//
// Launch shapes the kernels rely on (src/platform/gpu/blas.rs uses these constants):
//   GEMM:                  16 x 16 x 1 threads, grid (m tiles, n tiles, batch) or fewer
//   GEMV, level 1:         256 threads, any grid
//   dot / nrm2 / asum:     256 threads, exactly one block (a fixed summation order)

#define SE_TILE 16
#define SE_THREADS 256
#define SE_WARPS (SE_THREADS / 32)

static __device__ float se_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static __device__ double se_fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
static __device__ u64 se_gstride() { return (u64)gridDim.x * blockDim.x; }

// C[z] = alpha op(A[z]) op(B[z]) + beta C[z] for z < batch; A[z] = A + z * sa (likewise B, C).
// One 16 x 16 block computes a 16 x 16 tile of C, thread (x, y) its element (i0 + x, j0 + y),
// staging op(A) and op(B) through shared memory 16 columns of op(A) at a time. Loads follow
// the stored layout (x walks the contiguous index), so they are coalesced for every transpose.
template <typename T>
static __device__ void se_gemm(const T* A, const T* B, T* C, u64 m, u64 n, u64 k, u64 lda,
                               u64 ldb, u64 ldc, u64 sa, u64 sb, u64 sc, u64 batch, u32 ta,
                               u32 tb, double alpha_d, double beta_d) {
    __shared__ T As[SE_TILE][SE_TILE + 1];  // As[p][i] = op(A)(i0 + i, p0 + p)
    __shared__ T Bs[SE_TILE][SE_TILE + 1];  // Bs[p][j] = op(B)(p0 + p, j0 + j)
    const u32 tx = threadIdx.x, ty = threadIdx.y;
    const T alpha = (T)alpha_d, beta = (T)beta_d;
    const bool product = alpha != (T)0 && k != 0;
    const u64 mt = (m + SE_TILE - 1) / SE_TILE, nt = (n + SE_TILE - 1) / SE_TILE;
    for (u64 z = blockIdx.z; z < batch; z += gridDim.z) {
        for (u64 bj = blockIdx.y; bj < nt; bj += gridDim.y) {
            for (u64 bi = blockIdx.x; bi < mt; bi += gridDim.x) {
                const u64 i0 = bi * SE_TILE, j0 = bj * SE_TILE;
                T acc = (T)0;
                if (product) {
                    const T* a = A + z * sa;
                    const T* b = B + z * sb;
                    for (u64 p0 = 0; p0 < k; p0 += SE_TILE) {
                        // op(A)(i, p) is A[i + p lda], or A[p + i lda] transposed.
                        u32 ai = ta ? ty : tx, ap = ta ? tx : ty;
                        u64 i = i0 + ai, p = p0 + ap;
                        T v = (T)0;
                        if (i < m && p < k) v = ta ? a[p + i * lda] : a[i + p * lda];
                        As[ap][ai] = v;
                        // op(B)(p, j) is B[p + j ldb], or B[j + p ldb] transposed.
                        u32 bp = tb ? ty : tx, bjj = tb ? tx : ty;
                        u64 q = p0 + bp, j = j0 + bjj;
                        T w = (T)0;
                        if (q < k && j < n) w = tb ? b[j + q * ldb] : b[q + j * ldb];
                        Bs[bp][bjj] = w;
                        __syncthreads();
                        for (int r = 0; r < SE_TILE; r++) acc = se_fma(As[r][tx], Bs[r][ty], acc);
                        __syncthreads();
                    }
                }
                const u64 i = i0 + tx, j = j0 + ty;
                if (i < m && j < n) {
                    T* c = C + z * sc + i + j * ldc;
                    T old = beta != (T)0 ? beta * *c : (T)0;
                    *c = alpha * acc + old;
                }
            }
        }
    }
}

#define SE_GEMM(NAME, T)                                                                      \
    extern "C" __global__ void NAME(const T* a, const T* b, T* c, u64 m, u64 n, u64 k,        \
                                    u64 lda, u64 ldb, u64 ldc, u64 stride_a, u64 stride_b,    \
                                    u64 stride_c, u64 batch, u32 trans_a, u32 trans_b,        \
                                    double alpha, double beta) {                              \
        se_gemm<T>(a, b, c, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch,      \
                   trans_a, trans_b, alpha, beta);                                            \
    }
SE_GEMM(se_blas_gemm_f32, float)
SE_GEMM(se_blas_gemm_f64, double)

// y = alpha A x + beta y, A stored m x n: one thread per row i of y (m rows), summing in column
// order like the host.
template <typename T>
static __device__ void se_gemv_n(const T* a, const T* x, T* y, u64 m, u64 n, u64 lda,
                                 u64 incx, u64 incy, double alpha, double beta) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += se_gstride()) {
        double acc = 0.0;
        if (alpha != 0.0)
            for (u64 j = 0; j < n; j++) acc += (double)a[i + j * lda] * (double)x[j * incx];
        T* yi = y + i * incy;
        double old = beta != 0.0 ? beta * (double)*yi : 0.0;
        *yi = (T)(alpha * acc + old);
    }
}

// y = alpha Aᵀ x + beta y, A stored m x n: each warp computes one element j of y (n of them),
// its lanes summing rows lane, lane + 32, ... of column j, then a shared-memory tree.
template <typename T>
static __device__ void se_gemv_t(const T* a, const T* x, T* y, u64 m, u64 n, u64 lda,
                                 u64 incx, u64 incy, double alpha, double beta) {
    __shared__ double part[SE_THREADS];
    const u32 t = threadIdx.x, lane = t % 32, warp = t / 32;
    for (u64 j0 = (u64)blockIdx.x * SE_WARPS; j0 < n; j0 += (u64)gridDim.x * SE_WARPS) {
        const u64 j = j0 + warp;
        double acc = 0.0;
        if (j < n && alpha != 0.0)
            for (u64 i = lane; i < m; i += 32)
                acc += (double)a[i + j * lda] * (double)x[i * incx];
        part[t] = acc;
        __syncthreads();
        for (u32 s = 16; s > 0; s /= 2) {
            if (lane < s) part[t] += part[t + s];
            __syncthreads();
        }
        if (j < n && lane == 0) {
            T* yj = y + j * incy;
            double old = beta != 0.0 ? beta * (double)*yj : 0.0;
            *yj = (T)(alpha * part[t] + old);
        }
        // No barrier needed before the next group writes part[]: the tree's last barrier
        // ordered every other thread's access, and part[t] here is lane 0's own slot.
    }
}

#define SE_GEMV(NAME, FN, T)                                                                  \
    extern "C" __global__ void NAME(const T* a, const T* x, T* y, u64 m, u64 n, u64 lda,      \
                                    u64 incx, u64 incy, double alpha, double beta) {          \
        FN<T>(a, x, y, m, n, lda, incx, incy, alpha, beta);                                   \
    }
SE_GEMV(se_blas_gemv_n_f32, se_gemv_n, float)
SE_GEMV(se_blas_gemv_n_f64, se_gemv_n, double)
SE_GEMV(se_blas_gemv_t_f32, se_gemv_t, float)
SE_GEMV(se_blas_gemv_t_f64, se_gemv_t, double)

// Level 1, element-wise, as the host computes them: axpy in double with alpha narrowed to T
// first, scal in double with alpha as given.
#define SE_LEVEL1(T, SUFFIX)                                                                  \
    extern "C" __global__ void se_blas_axpy_##SUFFIX(const T* x, T* y, u64 n, u64 incx,       \
                                                     u64 incy, double alpha) {                \
        const double a = (double)(T)alpha;                                                    \
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += se_gstride())    \
            y[i * incy] = (T)(a * (double)x[i * incx] + (double)y[i * incy]);                 \
    }                                                                                         \
    extern "C" __global__ void se_blas_scal_##SUFFIX(T* x, u64 n, u64 incx, double alpha) {   \
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += se_gstride())    \
            x[i * incx] = (T)(alpha * (double)x[i * incx]);                                   \
    }                                                                                         \
    extern "C" __global__ void se_blas_copy_##SUFFIX(const T* x, T* y, u64 n, u64 incx,       \
                                                     u64 incy) {                              \
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += se_gstride())    \
            y[i * incy] = x[i * incx];                                                        \
    }
SE_LEVEL1(float, f32)
SE_LEVEL1(double, f64)

// Reductions run as one block of SE_THREADS threads: thread t sums elements t, t + 256, ...,
// then a shared-memory tree adds the partial sums in a fixed order (the same bits every run).
static __device__ double se_block_sum(double v) {
    __shared__ double part[SE_THREADS];
    const u32 t = threadIdx.x;
    part[t] = v;
    __syncthreads();
    for (u32 s = SE_THREADS / 2; s > 0; s /= 2) {
        if (t < s) part[t] += part[t + s];
        __syncthreads();
    }
    return part[0];
}

#define SE_REDUCE(T, SUFFIX)                                                                  \
    extern "C" __global__ void se_blas_dot_##SUFFIX(const T* x, const T* y, T* result, u64 n, \
                                                    u64 incx, u64 incy) {                     \
        double acc = 0.0;                                                                     \
        for (u64 i = threadIdx.x; i < n; i += SE_THREADS)                                     \
            acc += (double)x[i * incx] * (double)y[i * incy];                                 \
        double sum = se_block_sum(acc);                                                       \
        if (threadIdx.x == 0) *result = (T)sum;                                               \
    }                                                                                         \
    extern "C" __global__ void se_blas_asum_##SUFFIX(const T* x, T* result, u64 n,            \
                                                     u64 incx) {                              \
        double acc = 0.0;                                                                     \
        for (u64 i = threadIdx.x; i < n; i += SE_THREADS)                                     \
            acc += __builtin_fabs((double)x[i * incx]);                                       \
        double sum = se_block_sum(acc);                                                       \
        if (threadIdx.x == 0) *result = (T)sum;                                               \
    }
SE_REDUCE(float, f32)
SE_REDUCE(double, f64)

// f32 nrm2: squares of floats are exact in double and a double sum of them cannot overflow.
extern "C" __global__ void se_blas_nrm2_f32(const float* x, float* result, u64 n, u64 incx) {
    double acc = 0.0;
    for (u64 i = threadIdx.x; i < n; i += SE_THREADS) {
        double v = (double)x[i * incx];
        acc += v * v;
    }
    double sum = se_block_sum(acc);
    if (threadIdx.x == 0) *result = (float)__builtin_sqrt(sum);
}

// f64 nrm2 as scale · √ssq with every |x| ≤ scale (reference BLAS's dnrm2 update, combined
// pairwise in the tree). Zeros are skipped; a NaN makes ssq NaN; infinities make the scale
// infinite and ssq count them, so the result is NaN if any x is, else ∞ if any x is, as the
// plain formula gives.
static __device__ void se_ssq_add(double& scale, double& ssq, double ax) {
    if (ax == 0.0) return;
    if (ax > scale) {
        double r = scale / ax;
        ssq = 1.0 + ssq * r * r;
        scale = ax;
    } else if (ax == scale) {
        ssq += 1.0;
    } else {
        double r = ax / scale;  // NaN for a NaN ax
        ssq += r * r;
    }
}

extern "C" __global__ void se_blas_nrm2_f64(const double* x, double* result, u64 n, u64 incx) {
    __shared__ double scales[SE_THREADS], ssqs[SE_THREADS];
    const u32 t = threadIdx.x;
    double scale = 0.0, ssq = 0.0;
    for (u64 i = t; i < n; i += SE_THREADS) se_ssq_add(scale, ssq, __builtin_fabs(x[i * incx]));
    scales[t] = scale;
    ssqs[t] = ssq;
    __syncthreads();
    for (u32 s = SE_THREADS / 2; s > 0; s /= 2) {
        if (t < s) {
            double s1 = scales[t], q1 = ssqs[t], s2 = scales[t + s], q2 = ssqs[t + s];
            if (s2 > s1) {
                double u = s1, v = q1;
                s1 = s2, q1 = q2, s2 = u, q2 = v;
            }
            // s1 ≥ s2 ≥ 0 now; a pair with scale 0 holds only zeros (ssq 0, or NaN).
            if (s2 == s1) {
                q1 += q2;
            } else if (s2 > 0.0) {
                double r = s2 / s1;
                q1 += q2 * r * r;
            } else {
                q1 += q2;  // 0, or NaN to keep
            }
            scales[t] = s1;
            ssqs[t] = q1;
        }
        __syncthreads();
    }
    if (t == 0) *result = scales[0] * __builtin_sqrt(ssqs[0]);
}
