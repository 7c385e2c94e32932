// Philox4x32-10 fills for the CUDA platform's RngSupport: a line-by-line port of the
// se_philox_* kernels of src/platform/opencl/canned.cl, which follow src/philox.rs (the
// definition). Contraction is off and every double operation is IEEE-exact + - * / sqrt, so
// the results are bit-identical to the host's. `dst` points at the fill's first element.
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
