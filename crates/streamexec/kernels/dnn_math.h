// The built-in DNN kernels' elementary functions, activations and blending: the first half of
// the kernel text, included before dnn_body.h (see there for the dialect macros and the
// conventions). It defines SE_NAME and K_, which dnn_body.h undefines at its end.
//
// No libdevice exists under clang's -nocudalib, so exp, log, erfc and tanh are written here
// (range reduction + polynomial; erfc by a Chebyshev series of erfcx fitted for this file) and
// used on both dialects, so CUDA and OpenCL compute the same functions. Their accuracy is
// tested against Rust's f64 functions (src/platform/dnn_builtin/tests.rs).
//
// No include guard: included twice.

#define SE_CAT2(a, b) a##_##b
#define SE_CAT(a, b) SE_CAT2(a, b)
#define SE_NAME(n) SE_CAT(se_dnn_##n, SE_SUF)
#define K_(v) ((SE_T)(v))

// ---- Elementary functions ------------------------------------------------------------------

#ifdef SE_FP64
#define SE_DNN_EXP_HI 709.782712893384
#define SE_DNN_EXP_LO (-745.1332191019412)
#define SE_DNN_LN2_HI 6.93147180369123816490e-01
#define SE_DNN_LN2_LO 1.90821492927058770002e-10
#define SE_DNN_ERFC_ZERO 27.3
#else
#define SE_DNN_EXP_HI 88.72283935546875
#define SE_DNN_EXP_LO (-103.97208404541016)
#define SE_DNN_LN2_HI 0.693359375
#define SE_DNN_LN2_LO (-2.12194440e-4)
#define SE_DNN_ERFC_ZERO 10.1
#endif

// 2^j for the j the functions below need (|j| ≤ 540 in f64, ≤ 76 in f32: a normal number).
SE_FN SE_T SE_NAME(pow2)(int j) {
#ifdef SE_FP64
    union {
        u64 u;
        double f;
    } b;
    b.u = (u64)(j + 1023) << 52;
#else
    union {
        u32 u;
        float f;
    } b;
    b.u = (u32)(j + 127) << 23;
#endif
    return b.f;
}

// e^x: x = k·ln2 + r (Cody–Waite), |r| ≤ ln2/2, e^r by its Taylor polynomial (degree 13 in
// f64, 7 in f32), scaled by 2^k in two steps so subnormal results come out right.
SE_FN_CALLED SE_T SE_NAME(exp)(SE_T x) {
    if (!(x == x)) return x;
    if (x > K_(SE_DNN_EXP_HI)) return SE_INF;
    if (x < K_(SE_DNN_EXP_LO)) return K_(0);
    SE_T t = x * K_(1.4426950408889634);
    int k = (int)(t + (t < K_(0) ? K_(-0.5) : K_(0.5)));
    SE_T kf = (SE_T)k;
    SE_T r = (x - kf * K_(SE_DNN_LN2_HI)) - kf * K_(SE_DNN_LN2_LO);
    SE_T p = K_(0);
#ifdef SE_FP64
    p = ((((((p + K_(1.6059043836821613e-10)) * r + K_(2.08767569878681e-09)) * r +
            K_(2.505210838544172e-08)) * r + K_(2.755731922398589e-07)) * r +
          K_(2.7557319223985893e-06)) * r + K_(2.48015873015873e-05)) * r;
#endif
    p = (((((((p + K_(1.984126984126984e-04)) * r + K_(1.388888888888889e-03)) * r +
             K_(8.333333333333333e-03)) * r + K_(4.1666666666666664e-02)) * r +
           K_(0.16666666666666666)) * r + K_(0.5)) * r + K_(1)) * r + K_(1);
    int k1 = k / 2;
    return p * SE_NAME(pow2)(k1) * SE_NAME(pow2)(k - k1);
}

// e^y − 1 for |y| ≤ 0.6 without cancellation: y·(1 + y/2·(1 + y/3·(…))), 16 terms in f64,
// 9 in f32.
SE_FN SE_T SE_NAME(expm1_small)(SE_T y) {
    SE_T q = K_(1);
#ifdef SE_FP64
    q = K_(1) + y * K_(1.0 / 16) * q;
    q = K_(1) + y * K_(1.0 / 15) * q;
    q = K_(1) + y * K_(1.0 / 14) * q;
    q = K_(1) + y * K_(1.0 / 13) * q;
    q = K_(1) + y * K_(1.0 / 12) * q;
    q = K_(1) + y * K_(1.0 / 11) * q;
    q = K_(1) + y * K_(1.0 / 10) * q;
#endif
    q = K_(1) + y * K_(1.0 / 9) * q;
    q = K_(1) + y * K_(1.0 / 8) * q;
    q = K_(1) + y * K_(1.0 / 7) * q;
    q = K_(1) + y * K_(1.0 / 6) * q;
    q = K_(1) + y * K_(1.0 / 5) * q;
    q = K_(1) + y * K_(1.0 / 4) * q;
    q = K_(1) + y * K_(1.0 / 3) * q;
    q = K_(1) + y * K_(0.5) * q;
    return y * q;
}

// ln x: x = m·2^e with m in [√½, √2), ln m = 2·atanh(u), u = (m − 1)/(m + 1), by its series
// (to u^23 in f64, u^11 in f32). ln 0 = −∞, ln ∞ = ∞, NaN for x < 0 or NaN.
SE_FN_CALLED SE_T SE_NAME(log)(SE_T x) {
    if (!(x > K_(0))) return x == K_(0) ? -SE_INF : (x - x) / (x - x);
    if (x == SE_INF) return x;
    int e = 0;
#ifdef SE_FP64
    if (x < K_(2.2250738585072014e-308)) {
        x *= K_(18014398509481984.0); // 2^54
        e = -54;
    }
    union {
        u64 u;
        double f;
    } b;
    b.f = x;
    e += (int)((b.u >> 52) & 0x7ff) - 1023;
    b.u = (b.u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
#else
    if (x < K_(1.1754943508222875e-38)) {
        x *= K_(16777216.0); // 2^24
        e = -24;
    }
    union {
        u32 u;
        float f;
    } b;
    b.f = x;
    e += (int)((b.u >> 23) & 0xff) - 127;
    b.u = (b.u & 0x007fffffu) | 0x3f800000u;
#endif
    SE_T m = b.f;
    if (m > K_(1.4142135623730951)) {
        m *= K_(0.5);
        e += 1;
    }
    SE_T u = (m - K_(1)) / (m + K_(1));
    SE_T u2 = u * u;
    SE_T s = K_(0);
#ifdef SE_FP64
    s = (((((K_(1.0 / 23) * u2 + K_(1.0 / 21)) * u2 + K_(1.0 / 19)) * u2 + K_(1.0 / 17)) * u2 +
          K_(1.0 / 15)) * u2 + K_(1.0 / 13)) * u2;
#endif
    s = (((((s + K_(1.0 / 11)) * u2 + K_(1.0 / 9)) * u2 + K_(1.0 / 7)) * u2 + K_(1.0 / 5)) * u2 +
         K_(1.0 / 3)) * u2;
    SE_T ef = (SE_T)e;
    return ef * K_(SE_DNN_LN2_HI) + ((u + u) + ((u + u) * s + ef * K_(SE_DNN_LN2_LO)));
}

// e^(−m·a²) for a ≥ 0 and m = 1 or ½, with a² split exactly: a = h + l, h with half the
// significand bits, so m·h² is exact and e^(−m·a²) = e^(−m·h²)·e^(−m·(a − h)(a + h)). (An
// argument rounded before squaring would cost up to 2a² ulps.)
SE_FN SE_T SE_NAME(exp_neg_sq)(SE_T a, SE_T m) {
#ifdef SE_FP64
    union {
        u64 u;
        double f;
    } b;
    b.f = a;
    b.u &= 0xfffffffff8000000ULL;
#else
    union {
        u32 u;
        float f;
    } b;
    b.f = a;
    b.u &= 0xfffff000u;
#endif
    SE_T h = b.f;
    return SE_NAME(exp)(-(m * (h * h))) * SE_NAME(exp)(-(m * ((a - h) * (a + h))));
}

// erf x for |x| < 0.5: 2/√π · Σ (−1)^n x^(2n+1) / (n!·(2n + 1)), to n = 12 in f64, 7 in f32.
SE_FN SE_T SE_NAME(erf_small)(SE_T x) {
    SE_T z = x * x, s = K_(0);
#ifdef SE_FP64
    s = (((((s + K_(8.35070279514724e-11)) * z - K_(1.0892221037148573e-09)) * z +
           K_(1.3122532963802806e-08)) * z - K_(1.4503852223150468e-07)) * z +
         K_(1.4589169000933706e-06)) * z;
#endif
    s = (((((((s - K_(1.3227513227513228e-05)) * z + K_(1.0683760683760684e-04)) * z -
             K_(7.575757575757576e-04)) * z + K_(4.629629629629629e-03)) * z -
           K_(2.3809523809523808e-02)) * z + K_(0.1)) * z - K_(0.3333333333333333)) * z + K_(1);
    return x * s * K_(1.1283791670955126);
}

// Chebyshev series (Clenshaw) in t = (x − 3.5)/(x + 3.5) of erfcx(x)·(1 + 2x)/2 for x ≥ 0,
// erfcx(x) = e^(x²)·erfc(x): 24 terms in f64 (relative error < 1e-15), 14 in f32 (< 4e-10).
// Fitted at 60 Chebyshev nodes against a 90-digit erfcx.
#define SE_DNN_CLENSHAW(c)          \
    b = K_(c) + t2 * b1 - b2;       \
    b2 = b1;                        \
    b1 = b
SE_FN SE_T SE_NAME(erfcx_series)(SE_T t) {
    SE_T t2 = t + t, b1 = K_(0), b2 = K_(0), b;
#ifdef SE_FP64
    SE_DNN_CLENSHAW(-1.5580477977849095e-16);
    SE_DNN_CLENSHAW(-1.4852636916638778e-17);
    SE_DNN_CLENSHAW(3.282914661066485e-15);
    SE_DNN_CLENSHAW(9.758473478871325e-16);
    SE_DNN_CLENSHAW(-8.263623476224626e-14);
    SE_DNN_CLENSHAW(-1.686769445219635e-14);
    SE_DNN_CLENSHAW(2.213581653345378e-12);
    SE_DNN_CLENSHAW(-1.1062028683105358e-12);
    SE_DNN_CLENSHAW(-6.241411334536379e-11);
    SE_DNN_CLENSHAW(1.2733077909465713e-10);
#endif
    SE_DNN_CLENSHAW(1.6956800739227254e-09);
    SE_DNN_CLENSHAW(-8.558332386625965e-09);
    SE_DNN_CLENSHAW(-3.052851321103377e-08);
    SE_DNN_CLENSHAW(4.3828800786981905e-07);
    SE_DNN_CLENSHAW(-1.0558833491051475e-06);
    SE_DNN_CLENSHAW(-1.159245580566667e-05);
    SE_DNN_CLENSHAW(0.0001413491490827514);
    SE_DNN_CLENSHAW(-0.0008719408788556553);
    SE_DNN_CLENSHAW(0.0037647418578177373);
    SE_DNN_CLENSHAW(-0.012170057698091177);
    SE_DNN_CLENSHAW(0.029004874185146606);
    SE_DNN_CLENSHAW(-0.04366841286731574);
    SE_DNN_CLENSHAW(-0.0008150886417072939);
    return K_(0.588816365818062) + t * b1 - b2;
}
#undef SE_DNN_CLENSHAW

// erfc z where z² = m·b² (b ≥ 0, m = 1 or ½; b and m give e^(−z²) exactly, see
// exp_neg_sq): 1 − erf z for |z| < 0.5, else e^(−z²)·2/(1 + 2|z|)·series, reflected for z < 0
// (erfc(−z) = 2 − erfc z); 0 (or 2) past the point where erfc underflows.
SE_FN_CALLED SE_T SE_NAME(erfc_sq)(SE_T z, SE_T b, SE_T m) {
    if (!(z == z)) return z;
    SE_T a = z < K_(0) ? -z : z;
    if (a < K_(0.5)) return K_(1) - SE_NAME(erf_small)(z);
    SE_T r = K_(0);
    if (a < K_(SE_DNN_ERFC_ZERO)) {
        SE_T t = (a - K_(3.5)) / (a + K_(3.5));
        r = SE_NAME(exp_neg_sq)(b, m) * (K_(2) / (K_(1) + a + a)) * SE_NAME(erfcx_series)(t);
    }
    return z < K_(0) ? K_(2) - r : r;
}

// erfc x.
SE_FN SE_T SE_NAME(erfc)(SE_T x) {
    return SE_NAME(erfc_sq)(x, x < K_(0) ? -x : x, K_(1));
}

// Φ(x) = ½·erfc(−x/√2), the standard normal CDF, with e^(−x²/2) from x itself.
SE_FN SE_T SE_NAME(ncdf)(SE_T x) {
    return K_(0.5) * SE_NAME(erfc_sq)(x * K_(-0.7071067811865476), x < K_(0) ? -x : x, K_(0.5));
}

// tanh x: expm1(2|x|)/(expm1(2|x|) + 2) for |x| < 0.3, else 1 − 2/(e^(2|x|) + 1) (which
// saturates to 1 when the exponential overflows); odd.
SE_FN_CALLED SE_T SE_NAME(tanh)(SE_T x) {
    SE_T a = x < K_(0) ? -x : x, t;
    if (a < K_(0.3)) {
        SE_T e = SE_NAME(expm1_small)(a + a);
        t = e / (e + K_(2));
    } else {
        t = K_(1) - K_(2) / (SE_NAME(exp)(a + a) + K_(1));
    }
    return x < K_(0) ? -t : t;
}

// 1/(1 + e^(−x)): 0 at −∞, 1 at +∞.
SE_FN SE_T SE_NAME(sigmoid)(SE_T x) {
    return K_(1) / (K_(1) + SE_NAME(exp)(-x));
}

// Activation `mode` (see the header) of x.
SE_FN_CALLED SE_T SE_NAME(act)(u32 mode, SE_T x) {
    switch (mode) {
    case 1: return x > K_(0) ? x : K_(0);
    case 2: return SE_NAME(sigmoid)(x);
    case 3: return SE_NAME(tanh)(x);
    case 4: return x * SE_NAME(ncdf)(x);
    default: return x;
    }
}

// dy · act'(x), given x and y = act(x): ReLU uses x > 0, sigmoid y·(1 − y), tanh 1 − y²,
// GELU Φ(x) + x·φ(x).
SE_FN_CALLED SE_T SE_NAME(act_grad)(u32 mode, SE_T x, SE_T y, SE_T dy) {
    switch (mode) {
    case 1: return x > K_(0) ? dy : K_(0);
    case 2: return dy * y * (K_(1) - y);
    case 3: return dy * (K_(1) - y * y);
    case 4: {
        SE_T cdf = SE_NAME(ncdf)(x);
        SE_T pdf = SE_NAME(exp_neg_sq)(x < K_(0) ? -x : x, K_(0.5)) * K_(0.3989422804014327);
        return dy * (cdf + x * pdf);
    }
    default: return dy;
    }
}

// out = alpha·v + beta·out, not reading out when beta == 0.
SE_FN void SE_NAME(blend)(SE_GLOBAL SE_T* out, SE_T v, SE_T alpha, SE_T beta) {
    *out = beta == K_(0) ? alpha * v : alpha * v + beta * *out;
}

// Applies math function `fn` to `total` elements: 0 exp, 1 log, 2 erfc, 3 tanh, 4 sigmoid,
// 5 expm1 (|x| ≤ 0.6 only). The accuracy tests call it; nothing else does.
SE_KERNEL SE_NAME(math)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* y, u64 y_off,
                        u64 total, u32 fn) {
    x += x_off;
    y += y_off;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        SE_T v = x[g], r;
        switch (fn) {
        case 0: r = SE_NAME(exp)(v); break;
        case 1: r = SE_NAME(log)(v); break;
        case 2: r = SE_NAME(erfc)(v); break;
        case 3: r = SE_NAME(tanh)(v); break;
        case 4: r = SE_NAME(sigmoid)(v); break;
        default: r = SE_NAME(expm1_small)(v); break;
        }
        y[g] = r;
    }
}

