// The built-in FFT kernels' one body, shared by CUDA C (fft.cu → committed PTX) and OpenCL C
// (src/platform/opencl/fft.rs prepends its own prelude). Included once per precision with
// SE_T (float or double) and SE_SUF (f32 or f64) defined; the includer defines the dialect
// macros: SE_KERNEL (a kernel's return type and attributes), SE_FN (a helper function),
// SE_GLOBAL (the global address space), u64 / u32, SE_GID (this thread's index in the 1-D
// grid) and SE_GSIZE (threads in the grid).
//
// Complex data is interleaved (re, im) scalars. Every buffer is passed as a pointer plus an
// offset in scalars (OpenCL passes allocation bases; CUDA passes offset 0); the kernels'
// indices count complex numbers, except a real input's or output's.
// Every kernel loops over its work with grid strides, so any grid computes all of it.
// The plan (src/platform/fft_builtin.rs) documents the algorithm and the argument lists.
//
// No include guard: included twice.

#define SE_CAT2(a, b) a##_##b
#define SE_CAT(a, b) SE_CAT2(a, b)
#define SE_NAME(n) SE_CAT(se_fft_##n, SE_SUF)
#define CPX SE_NAME(cpx)

typedef struct {
    SE_T x;
    SE_T y;
} CPX;

SE_FN CPX SE_NAME(load)(SE_GLOBAL const SE_T* p, u64 i) {
    CPX c;
    c.x = p[2 * i];
    c.y = p[2 * i + 1];
    return c;
}

SE_FN void SE_NAME(store)(SE_GLOBAL SE_T* p, u64 i, CPX c) {
    p[2 * i] = c.x;
    p[2 * i + 1] = c.y;
}

SE_FN CPX SE_NAME(mul)(CPX a, CPX b) {
    CPX c;
    c.x = a.x * b.x - a.y * b.y;
    c.y = a.x * b.y + a.y * b.x;
    return c;
}

// Gathers `total` = batch·d0·d1·d2 complex values from the input layout (`stride`, `dist`,
// embeds e1, e2; rank padded to 3 at the front with sizes 1) into contiguous `w`, conjugated
// when `conj` (an inverse runs as conj ∘ forward ∘ conj). mode 0: complex input of shape
// d0×d1×d2; 1: real input (imaginary parts 0); 2: the n/2+1 half of a Hermitian spectrum
// (last input extent d2/2+1), the other half rebuilt as X[k] = conj(X[−k mod d]).
SE_KERNEL SE_NAME(gather)(SE_GLOBAL const SE_T* in, u64 in_off, SE_GLOBAL SE_T* w, u64 w_off,
                          u64 total, u64 d0, u64 d1, u64 d2, u64 e1, u64 e2, u64 stride,
                          u64 dist, u32 mode, u32 conj) {
    in += in_off;
    w += w_off;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 i2 = g % d2, t = g / d2;
        u64 i1 = t % d1;
        t /= d1;
        u64 i0 = t % d0, b = t / d0;
        int mirror = mode == 2 && i2 > d2 / 2;
        if (mirror) {
            i0 = (d0 - i0) % d0;
            i1 = (d1 - i1) % d1;
            i2 = d2 - i2;
        }
        u64 at = b * dist + stride * ((i0 * e1 + i1) * e2 + i2);
        CPX c;
        if (mode == 1) {
            c.x = in[at];
            c.y = (SE_T)0;
        } else {
            c = SE_NAME(load)(in, at);
        }
        if (mirror != (conj != 0)) c.y = -c.y;
        SE_NAME(store)(w, g, c);
    }
}

// Scatters contiguous `w` (shape batch×d0×d1×d2) into the output layout: `total` =
// batch·d0·d1·o2 elements, the last extent o2 ≤ d2 (d2/2+1 for R2C). mode 0: complex output;
// 1: real output (the real part). Conjugated first when `conj`.
SE_KERNEL SE_NAME(scatter)(SE_GLOBAL const SE_T* w, u64 w_off, SE_GLOBAL SE_T* out,
                           u64 out_off, u64 total, u64 d0, u64 d1, u64 d2, u64 o2, u64 e1,
                           u64 e2, u64 stride, u64 dist, u32 mode, u32 conj) {
    w += w_off;
    out += out_off;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 i2 = g % o2, t = g / o2;
        u64 i1 = t % d1;
        t /= d1;
        u64 i0 = t % d0, b = t / d0;
        CPX c = SE_NAME(load)(w, ((b * d0 + i0) * d1 + i1) * d2 + i2);
        if (conj) c.y = -c.y;
        u64 at = b * dist + stride * ((i0 * e1 + i1) * e2 + i2);
        if (mode == 1) {
            out[at] = c.x;
        } else {
            SE_NAME(store)(out, at, c);
        }
    }
}

// The first element of line `line` of a contiguous array whose lines of `n` elements `s`
// apart run along one axis (s = the product of the inner extents).
SE_FN u64 SE_NAME(line_base)(u64 line, u64 n, u64 s) {
    return (line / s) * n * s + line % s;
}

// One forward radix-p Stockham pass (p ∈ {2, 3, 4, 5, 7}) over `lines` lines of length n
// (elements s apart), src → dst. m is the product of the earlier passes' radices; `tw` holds
// w_n^t = e^{−2πi·t/n} for t < n. Work item (line, i), i < n/p, k = i mod m: inputs
// x_j = src[i + j·n/p]·w^{jk·n/(mp)}, outputs y_q = Σ_j x_j·w^{(jq mod p)·n/p} at
// dst[(i − k)·p + k + q·m]. After the last pass (m·p = n) dst holds the DFT in natural order.
SE_KERNEL SE_NAME(pass)(SE_GLOBAL const SE_T* src, u64 src_off, SE_GLOBAL SE_T* dst,
                        u64 dst_off, SE_GLOBAL const SE_T* tw, u64 tw_off, u64 lines, u64 n,
                        u64 s, u32 p, u64 m) {
    src += src_off;
    dst += dst_off;
    tw += tw_off;
    u64 q_n = n / p, total = lines * q_n, tstep = n / (m * p);
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 line = g / q_n, i = g % q_n, k = i % m;
        u64 base = SE_NAME(line_base)(line, n, s);
        if (p == 4) {
            // Radix 4 without the generic loops (the common case): y0 = (x0+x2)+(x1+x3),
            // y2 = (x0+x2)−(x1+x3), y1 = (x0−x2) − i(x1−x3), y3 = (x0−x2) + i(x1−x3).
            CPX x0 = SE_NAME(load)(src, base + i * s);
            CPX x1 = SE_NAME(load)(src, base + (i + q_n) * s);
            CPX x2 = SE_NAME(load)(src, base + (i + 2 * q_n) * s);
            CPX x3 = SE_NAME(load)(src, base + (i + 3 * q_n) * s);
            if (k > 0) {
                x1 = SE_NAME(mul)(x1, SE_NAME(load)(tw, k * tstep));
                x2 = SE_NAME(mul)(x2, SE_NAME(load)(tw, 2 * k * tstep));
                x3 = SE_NAME(mul)(x3, SE_NAME(load)(tw, 3 * k * tstep));
            }
            CPX a, b, c, d, y;
            a.x = x0.x + x2.x;
            a.y = x0.y + x2.y;
            b.x = x1.x + x3.x;
            b.y = x1.y + x3.y;
            c.x = x0.x - x2.x;
            c.y = x0.y - x2.y;
            d.x = x1.x - x3.x;
            d.y = x1.y - x3.y;
            u64 o4 = (i - k) * 4 + k;
            y.x = a.x + b.x;
            y.y = a.y + b.y;
            SE_NAME(store)(dst, base + o4 * s, y);
            y.x = c.x + d.y;
            y.y = c.y - d.x;
            SE_NAME(store)(dst, base + (o4 + m) * s, y);
            y.x = a.x - b.x;
            y.y = a.y - b.y;
            SE_NAME(store)(dst, base + (o4 + 2 * m) * s, y);
            y.x = c.x - d.y;
            y.y = c.y + d.x;
            SE_NAME(store)(dst, base + (o4 + 3 * m) * s, y);
            continue;
        }
        CPX x[7];
        for (u32 j = 0; j < p; j++) {
            CPX v = SE_NAME(load)(src, base + (i + j * q_n) * s);
            if (j > 0 && k > 0) v = SE_NAME(mul)(v, SE_NAME(load)(tw, j * k * tstep));
            x[j] = v;
        }
        u64 o = (i - k) * p + k;
        if (p == 2) {
            CPX a = x[0], b = x[1];
            x[0].x = a.x + b.x;
            x[0].y = a.y + b.y;
            x[1].x = a.x - b.x;
            x[1].y = a.y - b.y;
            SE_NAME(store)(dst, base + o * s, x[0]);
            SE_NAME(store)(dst, base + (o + m) * s, x[1]);
        } else {
            for (u32 q = 0; q < p; q++) {
                CPX y = x[0];
                for (u32 j = 1; j < p; j++) {
                    CPX v = SE_NAME(mul)(x[j], SE_NAME(load)(tw, ((j * q) % p) * q_n));
                    y.x += v.x;
                    y.y += v.y;
                }
                SE_NAME(store)(dst, base + (o + q * m) * s, y);
            }
        }
    }
}

// Bluestein, step 1: u[line·M + j] = x_j·a_j for j < n, 0 for n ≤ j < M, where x is line
// `line` of `src` (length n, elements s apart) and a_j = e^{−πi·j²/n} (`chirp`).
SE_KERNEL SE_NAME(chirp_in)(SE_GLOBAL const SE_T* src, u64 src_off, SE_GLOBAL SE_T* u,
                            u64 u_off, SE_GLOBAL const SE_T* chirp, u64 chirp_off, u64 lines,
                            u64 n, u64 s, u64 M) {
    src += src_off;
    u += u_off;
    chirp += chirp_off;
    u64 total = lines * M;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 line = g / M, j = g % M;
        CPX v;
        v.x = (SE_T)0;
        v.y = (SE_T)0;
        if (j < n) {
            CPX x = SE_NAME(load)(src, SE_NAME(line_base)(line, n, s) + j * s);
            v = SE_NAME(mul)(x, SE_NAME(load)(chirp, j));
        }
        SE_NAME(store)(u, g, v);
    }
}

// Bluestein, step 2 (between two forward FFTs of length M): dst = conj(src · H), `total`
// elements, where H repeats every M elements (the transform of the chirp filter, already
// scaled by 1/M); the conjugation turns the second forward FFT into the inverse one.
SE_KERNEL SE_NAME(chirp_mul)(SE_GLOBAL const SE_T* src, u64 src_off, SE_GLOBAL SE_T* dst,
                             u64 dst_off, SE_GLOBAL const SE_T* h, u64 h_off, u64 total,
                             u64 M) {
    src += src_off;
    dst += dst_off;
    h += h_off;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        CPX v = SE_NAME(mul)(SE_NAME(load)(src, g), SE_NAME(load)(h, g % M));
        v.y = -v.y;
        SE_NAME(store)(dst, g, v);
    }
}

// Bluestein, step 3: X_k = a_k · conj(u[line·M + k]) for k < n, written to line `line` of
// `dst` (length n, elements s apart).
SE_KERNEL SE_NAME(chirp_out)(SE_GLOBAL const SE_T* u, u64 u_off, SE_GLOBAL SE_T* dst,
                             u64 dst_off, SE_GLOBAL const SE_T* chirp, u64 chirp_off,
                             u64 lines, u64 n, u64 s, u64 M) {
    u += u_off;
    dst += dst_off;
    chirp += chirp_off;
    u64 total = lines * n;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 line = g / n, k = g % n;
        CPX v = SE_NAME(load)(u, line * M + k);
        v.y = -v.y;
        v = SE_NAME(mul)(v, SE_NAME(load)(chirp, k));
        SE_NAME(store)(dst, SE_NAME(line_base)(line, n, s) + k * s, v);
    }
}

#undef CPX
#undef SE_NAME
#undef SE_CAT
#undef SE_CAT2
