// Built-in kernels for canned operations on OpenCL: BLAS (column-major) and Philox4x32-10.
// Built twice by src/platform/opencl/builtins.rs: with -DSE_T=float, and with -DSE_T=double
// -DSE_FP64 (which also holds every kernel that needs double precision: uniform f64 and both
// gaussians). Matrices and vectors arrive as allocation base pointers plus element offsets.
//
// The Philox code is a line-by-line copy of src/philox.rs, which defines the results; with
// FP_CONTRACT off and only IEEE-exact + - * / sqrt in double precision, it gives the same bits.

#pragma OPENCL FP_CONTRACT OFF
#ifdef SE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

typedef SE_T T;

// ---------------------------------------------------------------- Philox4x32-10

uint4 se_philox(uint4 c, uint2 k) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k.x += 0x9E3779B9u;
            k.y += 0xBB67AE85u;
        }
        ulong p0 = (ulong)0xD2511F53u * (ulong)c.x;
        ulong p1 = (ulong)0xCD9E8D57u * (ulong)c.z;
        uint hi0 = (uint)(p0 >> 32), lo0 = (uint)p0;
        uint hi1 = (uint)(p1 >> 32), lo1 = (uint)p1;
        c = (uint4)(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

uint4 se_block(ulong offset, ulong b, uint k0, uint k1, uint c2, uint c3) {
    ulong c = offset + b;
    return se_philox((uint4)((uint)c, (uint)(c >> 32), c2, c3), (uint2)(k0, k1));
}

#define SE_PHILOX_ARGS ulong off, ulong n, uint k0, uint k1, uint c2, uint c3, ulong block0

kernel void se_philox_u32(global uint* dst, SE_PHILOX_ARGS) {
    ulong b = get_global_id(0), first = b * 4;
    if (first >= n) return;
    uint4 w = se_block(block0, b, k0, k1, c2, c3);
    uint v[4] = {w.x, w.y, w.z, w.w};
    for (int i = 0; i < 4 && first + i < n; i++) dst[off + first + i] = v[i];
}

kernel void se_philox_uniform_f32(global float* dst, SE_PHILOX_ARGS) {
    ulong b = get_global_id(0), first = b * 4;
    if (first >= n) return;
    uint4 w = se_block(block0, b, k0, k1, c2, c3);
    uint v[4] = {w.x, w.y, w.z, w.w};
    for (int i = 0; i < 4 && first + i < n; i++)
        dst[off + first + i] = (float)(v[i] >> 8) * (1.0f / 16777216.0f);
}

#ifdef SE_FP64
double se_uniform_f64(uint lo, uint hi) {
    return (double)((((ulong)hi << 32) | (ulong)lo) >> 11) * (1.0 / 9007199254740992.0);
}

double se_ln(double x) {
    ulong bits = as_ulong(x);
    long e = (long)((bits >> 52) & 0x7ff) - 1023;
    double m = as_double((bits & 0x000fffffffffffffUL) | 0x3ff0000000000000UL);
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

double2 se_sincos_turns(double t) {
    double q = floor(t * 4.0 + 0.5);
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
    switch ((uint)q & 3) {
        case 0: return (double2)(sn, cs);
        case 1: return (double2)(cs, -sn);
        case 2: return (double2)(-sn, -cs);
        default: return (double2)(-cs, sn);
    }
}

double2 se_box_muller(double u1, double t) {
    double r = sqrt(-2.0 * se_ln(u1));
    double2 sc = se_sincos_turns(t);
    return (double2)(r * sc.y, r * sc.x);
}

kernel void se_philox_uniform_f64(global double* dst, SE_PHILOX_ARGS) {
    ulong b = get_global_id(0), first = b * 2;
    if (first >= n) return;
    uint4 w = se_block(block0, b, k0, k1, c2, c3);
    dst[off + first] = se_uniform_f64(w.x, w.y);
    if (first + 1 < n) dst[off + first + 1] = se_uniform_f64(w.z, w.w);
}

kernel void se_philox_gaussian_f32(global float* dst, SE_PHILOX_ARGS, double mean, double sd) {
    ulong b = get_global_id(0), first = b * 4;
    if (first >= n) return;
    uint4 w = se_block(block0, b, k0, k1, c2, c3);
    uint v[4] = {w.x, w.y, w.z, w.w};
    for (int p = 0; p < 2; p++) {
        double u1 = (double)((v[2 * p] >> 8) + 1) * (1.0 / 16777216.0);
        double t = (double)(v[2 * p + 1] >> 8) * (1.0 / 16777216.0);
        double2 z = se_box_muller(u1, t);
        ulong i = first + 2 * p;
        if (i < n) dst[off + i] = (float)(mean + sd * z.x);
        if (i + 1 < n) dst[off + i + 1] = (float)(mean + sd * z.y);
    }
}

kernel void se_philox_gaussian_f64(global double* dst, SE_PHILOX_ARGS, double mean, double sd) {
    ulong b = get_global_id(0), first = b * 2;
    if (first >= n) return;
    uint4 w = se_block(block0, b, k0, k1, c2, c3);
    double u1 = se_uniform_f64(w.x, w.y) + 1.0 / 9007199254740992.0;
    double2 z = se_box_muller(u1, se_uniform_f64(w.z, w.w));
    dst[off + first] = mean + sd * z.x;
    if (first + 1 < n) dst[off + first + 1] = mean + sd * z.y;
}
#endif

// ---------------------------------------------------------------- BLAS (type T)

// GEMM: a work-group of RT x RT (8 x 8) work-items computes a TS x TS (64 x 64) tile of C, each
// work-item a WT x WT (8 x 8) block of it (rows lx + 8 r, columns ly + 8 c), so every value staged in
// local memory is reused 8 times from registers. K advances TK (32) at a time. Measured on
// PoCL 3.1 (2 cores): 16 x 16 tiles with 1 x 8 per work-item took ~1 s for 1024^3, this ~0.14 s.
#define TS 64
#define TK 32
#define RT 8
#define WT (TS / RT)
#define LOADS (TS * TK / (RT * RT))

kernel void se_gemm(ulong M, ulong N, ulong K, T alpha,
                    global const T* A, ulong offa, ulong lda, ulong sa, int ta,
                    global const T* B, ulong offb, ulong ldb, ulong sb, int tb,
                    T beta, global T* C, ulong offc, ulong ldc, ulong sc) {
    local T As[TK][TS];  // As[l][i] = op(A)(i0 + i, l0 + l)
    local T Bs[TK][TS];  // Bs[l][j] = op(B)(l0 + l, j0 + j)
    const int lx = get_local_id(0), ly = get_local_id(1);
    const int t = ly * RT + lx;
    const ulong i0 = get_group_id(0) * TS, j0 = get_group_id(1) * TS, z = get_group_id(2);
    A += offa + z * sa;
    B += offb + z * sb;
    C += offc + z * sc;
    T acc[WT][WT];
    for (int r = 0; r < WT; r++)
        for (int c = 0; c < WT; c++) acc[r][c] = (T)0;
    if (alpha != (T)0) {
        for (ulong l0 = 0; l0 < K; l0 += TK) {
            // The RT·RT work-items load the TS·TK elements of each tile, LOADS each.
            for (int q = 0; q < LOADS; q++) {
                int e = t + RT * RT * q;
                // A tile: i fastest for column-major A, l fastest for transposed A.
                int ai = ta ? e / TK : e % TS, al = ta ? e % TK : e / TS;
                ulong i = i0 + ai, l = l0 + al;
                As[al][ai] = (i < M && l < K) ? (ta ? A[l + i * lda] : A[i + l * lda]) : (T)0;
                int bl = tb ? e / TS : e % TK, bj = tb ? e % TS : e / TK;
                ulong lb = l0 + bl, j = j0 + bj;
                Bs[bl][bj] = (lb < K && j < N) ? (tb ? B[j + lb * ldb] : B[lb + j * ldb]) : (T)0;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int l = 0; l < TK; l++) {
                T a[WT], b[WT];
                for (int r = 0; r < WT; r++) a[r] = As[l][lx + RT * r];
                for (int c = 0; c < WT; c++) b[c] = Bs[l][ly + RT * c];
                for (int r = 0; r < WT; r++)
                    for (int c = 0; c < WT; c++) acc[r][c] += a[r] * b[c];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    for (int c = 0; c < WT; c++) {
        ulong j = j0 + ly + RT * c;
        if (j >= N) continue;
        for (int r = 0; r < WT; r++) {
            ulong i = i0 + lx + RT * r;
            if (i < M) {
                T old = beta != (T)0 ? beta * C[i + j * ldc] : (T)0;
                C[i + j * ldc] = alpha * acc[r][c] + old;
            }
        }
    }
}

// GEMV: one work-item per element of y; x and y are strided.
kernel void se_gemv(ulong M, ulong N, T alpha, global const T* A, ulong offa, ulong lda,
                    int trans, global const T* X, ulong offx, ulong incx, T beta,
                    global T* Y, ulong offy, ulong incy) {
    ulong r = get_global_id(0);
    ulong ly = trans ? N : M, lx = trans ? M : N;
    if (r >= ly) return;
    A += offa;
    X += offx;
    T acc = (T)0;
    if (alpha != (T)0) {
        if (trans)
            for (ulong l = 0; l < lx; l++) acc += A[l + r * lda] * X[l * incx];
        else
            for (ulong l = 0; l < lx; l++) acc += A[r + l * lda] * X[l * incx];
    }
    global T* y = Y + offy + r * incy;
    T old = beta != (T)0 ? beta * *y : (T)0;
    *y = alpha * acc + old;
}

// Element-wise level 1: op 0 axpy (y = alpha x + y), 1 scal (x = alpha x), 2 copy (y = x).
kernel void se_level1(int op, ulong n, T alpha, global T* X, ulong offx, ulong incx,
                      global T* Y, ulong offy, ulong incy) {
    ulong i = get_global_id(0);
    if (i >= n) return;
    global T* x = X + offx + i * incx;
    if (op == 1) {
        *x = alpha * *x;
        return;
    }
    global T* y = Y + offy + i * incy;
    *y = op == 0 ? alpha * *x + *y : *x;
}

// Reductions by one work-group of RED_WG items, in a fixed order (the same bits every run):
// op 0 dot, 1 nrm2, 2 asum.
#define RED_WG 256
kernel void se_reduce(int op, ulong n, global const T* X, ulong offx, ulong incx,
                      global const T* Y, ulong offy, ulong incy, global T* R, ulong offr) {
    local T part[RED_WG];
    const int t = get_local_id(0);
    T acc = (T)0;
    for (ulong i = t; i < n; i += RED_WG) {
        T x = X[offx + i * incx];
        acc += op == 0 ? x * Y[offy + i * incy] : op == 1 ? x * x : fabs(x);
    }
    part[t] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = RED_WG / 2; s > 0; s >>= 1) {
        if (t < s) part[t] += part[t + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) R[offr] = op == 1 ? sqrt(part[0]) : part[0];
}
