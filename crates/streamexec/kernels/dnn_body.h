// The built-in DNN kernels' one body, shared by CUDA C (dnn.cu → committed PTX) and OpenCL C
// (src/platform/dnn_builtin/ prepends its own prelude), each time after dnn_math.h. Included
// once per precision with SE_T (float or double) and SE_SUF (f32 or f64) defined, and SE_FP64
// defined for double only; the includer defines the dialect macros: SE_KERNEL, SE_FN,
// SE_FN_CALLED (a helper better kept out of line), SE_GLOBAL, u64 / u32 / i64, SE_GID and
// SE_GSIZE (as for fft_body.h), SE_SQRT(x) (correctly rounded or close to it) and SE_INF (an
// infinity of type SE_T).
//
// Conventions:
// - Every buffer is a pointer plus an offset in elements (OpenCL passes allocation bases; CUDA
//   passes offset 0). Every 4-D tensor is its sizes plus its element strides (n, c, h, w), so
//   one kernel serves NCHW, NHWC and any other layout; filters are K × C/groups × R × S with
//   strides (k, c, r, s), so KCRS and KRSC alike.
// - Every kernel loops over its work with grid strides, so any grid computes all of it.
// - Outputs marked "blended" are written as out = alpha·result + beta·out, and out is not read
//   when beta == 0 (so it may hold NaN).
// - f32 kernels accumulate in f32 (sums in element order, as a GPU thread would), f64 in f64.
// - The elementary functions (exp, log, erfc, tanh), the activations and the blending are in
//   dnn_math.h, included just before this file.
//
// Activation modes (`mode`): 0 identity, 1 ReLU, 2 sigmoid, 3 tanh, 4 GELU (exact:
// 0.5·x·(1 + erf(x/√2)), computed as 0.5·x·erfc(−x/√2)).
// Pooling modes: 0 max, 1 average counting padding (divides by the window's size), 2 average
// excluding padding (divides by the in-range elements). Max backward routes each output's
// gradient to the FIRST maximum of its window in window order (row-major over the window, the
// first strictly greater value wins), the rule of the host backend too. A window with no
// element inside the input has max −∞ and average 0.
// Softmax modes: 0 channel (over C at each n, h, w), 1 instance (over C·H·W at each n).
//
// No include guard: included twice.

// ---- Convolution ---------------------------------------------------------------------------
//
// The three convolution kernels share one parameter list: three buffers (x, f, y), then
//   N, C, H, W, x strides (n, c, h, w)      the input x (or dx)
//   K, R, S, f strides (k, c, r, s)         the filter, K × C/groups × R × S
//   P, Q, y strides (n, k, p, q)            the output y (or dy), N × K × P × Q
//   pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, groups, alpha, beta
// Cross-correlation: y[n,k,p,q] = Σ x[n, g·C/G + c, p·sh − ph + r·dh, q·sw − pw + s·dw] ·
// f[k,c,r,s] over c < C/G, r < R, s < S, inputs outside the image being 0, g = k / (K/G).

#define SE_DNN_CONV_PARAMS                                                                    \
    u64 N, u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh, u64 xw, u64 K, u64 R, u64 S, u64 fk,  \
        u64 fc, u64 fr, u64 fs, u64 P, u64 Q, u64 yn, u64 yk, u64 yp, u64 yq, i64 pad_h,      \
        i64 pad_w, i64 str_h, i64 str_w, i64 dil_h, i64 dil_w, u64 groups, SE_T alpha,        \
        SE_T beta

// Forward: one thread per output element, looping over c, r, s of its group.
SE_KERNEL SE_NAME(conv_fwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL const SE_T* f,
                            u64 f_off, SE_GLOBAL SE_T* y, u64 y_off, SE_DNN_CONV_PARAMS) {
    x += x_off;
    f += f_off;
    y += y_off;
    u64 cg = C / groups, kg = K / groups, total = N * K * P * Q;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 q = g % Q, t = g / Q;
        u64 p = t % P;
        t /= P;
        u64 k = t % K, n = t / K;
        u64 c0 = (k / kg) * cg;
        i64 h0 = (i64)p * str_h - pad_h, w0 = (i64)q * str_w - pad_w;
        SE_T acc = K_(0);
        for (u64 c = 0; c < cg; c++) {
            for (u64 r = 0; r < R; r++) {
                i64 ih = h0 + (i64)r * dil_h;
                if (ih < 0 || ih >= (i64)H) continue;
                for (u64 s = 0; s < S; s++) {
                    i64 iw = w0 + (i64)s * dil_w;
                    if (iw < 0 || iw >= (i64)W) continue;
                    acc += x[n * xn + (c0 + c) * xc + (u64)ih * xh + (u64)iw * xw] *
                           f[k * fk + c * fc + r * fr + s * fs];
                }
            }
        }
        SE_NAME(blend)(&y[n * yn + k * yk + p * yp + q * yq], acc, alpha, beta);
    }
}

// Backward data (into x = dx, from y = dy): one thread per dx element, looping over the
// (k, r, s) of its group whose output position p = (h + ph − r·dh)/sh (and q alike) is
// integral and in range. No atomics.
SE_KERNEL SE_NAME(conv_bwd_data)(SE_GLOBAL SE_T* x, u64 x_off, SE_GLOBAL const SE_T* f,
                                 u64 f_off, SE_GLOBAL const SE_T* y, u64 y_off,
                                 SE_DNN_CONV_PARAMS) {
    x += x_off;
    f += f_off;
    y += y_off;
    u64 cg = C / groups, kg = K / groups, total = N * C * H * W;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 w = g % W, t = g / W;
        u64 h = t % H;
        t /= H;
        u64 c = t % C, n = t / C;
        u64 k0 = (c / cg) * kg, cc = c % cg;
        SE_T acc = K_(0);
        for (u64 k = k0; k < k0 + kg; k++) {
            for (u64 r = 0; r < R; r++) {
                i64 th = (i64)h + pad_h - (i64)r * dil_h;
                if (th < 0) break;
                if (th % str_h != 0 || th / str_h >= (i64)P) continue;
                u64 p = (u64)(th / str_h);
                for (u64 s = 0; s < S; s++) {
                    i64 tw = (i64)w + pad_w - (i64)s * dil_w;
                    if (tw < 0) break;
                    if (tw % str_w != 0 || tw / str_w >= (i64)Q) continue;
                    u64 q = (u64)(tw / str_w);
                    acc += y[n * yn + k * yk + p * yp + q * yq] *
                           f[k * fk + cc * fc + r * fr + s * fs];
                }
            }
        }
        SE_NAME(blend)(&x[n * xn + c * xc + h * xh + w * xw], acc, alpha, beta);
    }
}

// Backward filter (into f = df, from x and y = dy): one thread per df element, looping over
// n, p, q.
SE_KERNEL SE_NAME(conv_bwd_filter)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* f,
                                   u64 f_off, SE_GLOBAL const SE_T* y, u64 y_off,
                                   SE_DNN_CONV_PARAMS) {
    x += x_off;
    f += f_off;
    y += y_off;
    u64 cg = C / groups, kg = K / groups, total = K * cg * R * S;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 s = g % S, t = g / S;
        u64 r = t % R;
        t /= R;
        u64 cc = t % cg, k = t / cg;
        u64 c = (k / kg) * cg + cc;
        SE_T acc = K_(0);
        for (u64 n = 0; n < N; n++) {
            for (u64 p = 0; p < P; p++) {
                i64 ih = (i64)p * str_h - pad_h + (i64)r * dil_h;
                if (ih < 0 || ih >= (i64)H) continue;
                for (u64 q = 0; q < Q; q++) {
                    i64 iw = (i64)q * str_w - pad_w + (i64)s * dil_w;
                    if (iw < 0 || iw >= (i64)W) continue;
                    acc += x[n * xn + c * xc + (u64)ih * xh + (u64)iw * xw] *
                           y[n * yn + k * yk + p * yp + q * yq];
                }
            }
        }
        SE_NAME(blend)(&f[k * fk + cc * fc + r * fr + s * fs], acc, alpha, beta);
    }
}
#undef SE_DNN_CONV_PARAMS

// ---- Pooling -------------------------------------------------------------------------------
//
// Window geometry after the tensors: win_h, win_w, pad_h, pad_w, stride_h, stride_w, mode,
// alpha, beta. Output (p, q) covers rows p·sh − ph … + win_h − 1 (columns alike).

// Forward (blended into y): one thread per output element.
SE_KERNEL SE_NAME(pool_fwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* y, u64 y_off,
                            u64 N, u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh, u64 xw,
                            u64 P, u64 Q, u64 yn, u64 yc, u64 yp, u64 yq, i64 win_h,
                            i64 win_w, i64 pad_h, i64 pad_w, i64 str_h, i64 str_w, u32 mode,
                            SE_T alpha, SE_T beta) {
    x += x_off;
    y += y_off;
    u64 total = N * C * P * Q;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 q = g % Q, t = g / Q;
        u64 p = t % P;
        t /= P;
        u64 c = t % C, n = t / C;
        i64 h0 = (i64)p * str_h - pad_h, w0 = (i64)q * str_w - pad_w;
        SE_T acc = mode == 0 ? -SE_INF : K_(0);
        u64 count = 0;
        for (i64 ih = h0; ih < h0 + win_h; ih++) {
            if (ih < 0 || ih >= (i64)H) continue;
            for (i64 iw = w0; iw < w0 + win_w; iw++) {
                if (iw < 0 || iw >= (i64)W) continue;
                SE_T v = x[n * xn + c * xc + (u64)ih * xh + (u64)iw * xw];
                if (mode == 0) {
                    if (count == 0 || v > acc) acc = v;
                } else {
                    acc += v;
                }
                count++;
            }
        }
        if (mode == 1) acc /= (SE_T)(win_h * win_w);
        if (mode == 2) acc = count == 0 ? K_(0) : acc / (SE_T)count;
        SE_NAME(blend)(&y[n * yn + c * yc + p * yp + q * yq], acc, alpha, beta);
    }
}

// Backward (blended into dx), a gather: one thread per dx element over the windows that
// contain it; max mode re-finds each window's first maximum in x.
SE_KERNEL SE_NAME(pool_bwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL const SE_T* dy,
                            u64 dy_off, SE_GLOBAL SE_T* dx, u64 dx_off, u64 N, u64 C, u64 H,
                            u64 W, u64 xn, u64 xc, u64 xh, u64 xw, u64 dxn, u64 dxc, u64 dxh,
                            u64 dxw, u64 P, u64 Q, u64 yn, u64 yc, u64 yp, u64 yq, i64 win_h,
                            i64 win_w, i64 pad_h, i64 pad_w, i64 str_h, i64 str_w, u32 mode,
                            SE_T alpha, SE_T beta) {
    x += x_off;
    dy += dy_off;
    dx += dx_off;
    u64 total = N * C * H * W;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 w = g % W, t = g / W;
        u64 h = t % H;
        t /= H;
        u64 c = t % C, n = t / C;
        SE_GLOBAL const SE_T* xp = x + n * xn + c * xc;
        // Windows p with p·sh − ph ≤ h < p·sh − ph + win_h (columns alike).
        i64 hp = (i64)h + pad_h, wp = (i64)w + pad_w;
        i64 p_lo = hp - win_h + 1 < 0 ? 0 : (hp - win_h + str_h) / str_h;
        i64 q_lo = wp - win_w + 1 < 0 ? 0 : (wp - win_w + str_w) / str_w;
        i64 p_hi = hp / str_h, q_hi = wp / str_w;
        if (p_hi >= (i64)P) p_hi = (i64)P - 1;
        if (q_hi >= (i64)Q) q_hi = (i64)Q - 1;
        SE_T acc = K_(0);
        for (i64 p = p_lo; p <= p_hi; p++) {
            i64 h0 = p * str_h - pad_h;
            for (i64 q = q_lo; q <= q_hi; q++) {
                i64 w0 = q * str_w - pad_w;
                SE_T d = dy[n * yn + c * yc + (u64)p * yp + (u64)q * yq];
                if (mode == 0) {
                    // Is (h, w) the window's first maximum?
                    i64 bh = -1, bw = -1;
                    SE_T best = K_(0);
                    for (i64 ih = h0; ih < h0 + win_h; ih++) {
                        if (ih < 0 || ih >= (i64)H) continue;
                        for (i64 iw = w0; iw < w0 + win_w; iw++) {
                            if (iw < 0 || iw >= (i64)W) continue;
                            SE_T v = xp[(u64)ih * xh + (u64)iw * xw];
                            if (bh < 0 || v > best) {
                                best = v;
                                bh = ih;
                                bw = iw;
                            }
                        }
                    }
                    if (bh == (i64)h && bw == (i64)w) acc += d;
                } else if (mode == 1) {
                    acc += d / (SE_T)(win_h * win_w);
                } else {
                    i64 ch = (h0 + win_h < (i64)H ? h0 + win_h : (i64)H) - (h0 < 0 ? 0 : h0);
                    i64 cw = (w0 + win_w < (i64)W ? w0 + win_w : (i64)W) - (w0 < 0 ? 0 : w0);
                    acc += d / (SE_T)(ch * cw);
                }
            }
        }
        SE_NAME(blend)(&dx[n * dxn + c * dxc + h * dxh + w * dxw], acc, alpha, beta);
    }
}

// ---- Activations ---------------------------------------------------------------------------

// y = act(x), blended; one thread per element (x == y in place is fine).
SE_KERNEL SE_NAME(act_fwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* y, u64 y_off,
                           u64 N, u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh, u64 xw, u64 yn,
                           u64 yc, u64 yh, u64 yw, u32 mode, SE_T alpha, SE_T beta) {
    x += x_off;
    y += y_off;
    u64 total = N * C * H * W;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 w = g % W, t = g / W;
        u64 h = t % H;
        t /= H;
        u64 c = t % C, n = t / C;
        SE_T v = SE_NAME(act)(mode, x[n * xn + c * xc + h * xh + w * xw]);
        SE_NAME(blend)(&y[n * yn + c * yc + h * yh + w * yw], v, alpha, beta);
    }
}

// dx = dy·act'(x) (from x and y = act(x)), blended; one thread per element.
SE_KERNEL SE_NAME(act_bwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL const SE_T* y,
                           u64 y_off, SE_GLOBAL const SE_T* dy, u64 dy_off, SE_GLOBAL SE_T* dx,
                           u64 dx_off, u64 N, u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh,
                           u64 xw, u64 yn, u64 yc, u64 yh, u64 yw, u64 dyn, u64 dyc, u64 dyh,
                           u64 dyw, u64 dxn, u64 dxc, u64 dxh, u64 dxw, u32 mode, SE_T alpha,
                           SE_T beta) {
    x += x_off;
    y += y_off;
    dy += dy_off;
    dx += dx_off;
    u64 total = N * C * H * W;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 w = g % W, t = g / W;
        u64 h = t % H;
        t /= H;
        u64 c = t % C, n = t / C;
        SE_T v = SE_NAME(act_grad)(mode, x[n * xn + c * xc + h * xh + w * xw],
                                   y[n * yn + c * yc + h * yh + w * yw],
                                   dy[n * dyn + c * dyc + h * dyh + w * dyw]);
        SE_NAME(blend)(&dx[n * dxn + c * dxc + h * dxh + w * dxw], v, alpha, beta);
    }
}

// ---- Softmax -------------------------------------------------------------------------------
//
// One thread per reduced row: `rows` = N·H·W rows of C elements (channel mode) or N rows of
// C·H·W elements (instance mode).

// The offset of row `row`'s element `i` for strides (sn, sc, sh, sw).
SE_FN u64 SE_NAME(sm_at)(u32 mode, u64 row, u64 i, u64 C, u64 H, u64 W, u64 sn, u64 sc, u64 sh,
                         u64 sw) {
    if (mode == 0) {
        u64 w = row % W, t = row / W;
        u64 h = t % H, n = t / H;
        return n * sn + h * sh + w * sw + i * sc;
    }
    u64 w = i % W, t = i / W;
    u64 h = t % H, c = t / H;
    return row * sn + c * sc + h * sh + w * sw;
}

// y = softmax(x) or log-softmax(x) (`use_log`), blended; the row's maximum is subtracted first.
SE_KERNEL SE_NAME(softmax_fwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* y, u64 y_off,
                               u64 N, u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh, u64 xw,
                               u64 yn, u64 yc, u64 yh, u64 yw, u32 mode, u32 use_log, SE_T alpha,
                               SE_T beta) {
    x += x_off;
    y += y_off;
    u64 rows = mode == 0 ? N * H * W : N, len = mode == 0 ? C : C * H * W;
    for (u64 row = SE_GID; row < rows; row += SE_GSIZE) {
        SE_T m = -SE_INF;
        for (u64 i = 0; i < len; i++) {
            SE_T v = x[SE_NAME(sm_at)(mode, row, i, C, H, W, xn, xc, xh, xw)];
            if (v > m) m = v;
        }
        SE_T sum = K_(0);
        for (u64 i = 0; i < len; i++) {
            sum += SE_NAME(exp)(x[SE_NAME(sm_at)(mode, row, i, C, H, W, xn, xc, xh, xw)] - m);
        }
        SE_T ls = SE_NAME(log)(sum), inv = K_(1) / sum;
        for (u64 i = 0; i < len; i++) {
            SE_T d = x[SE_NAME(sm_at)(mode, row, i, C, H, W, xn, xc, xh, xw)] - m;
            SE_T v = use_log ? d - ls : SE_NAME(exp)(d) * inv;
            SE_NAME(blend)(&y[SE_NAME(sm_at)(mode, row, i, C, H, W, yn, yc, yh, yw)], v, alpha,
                           beta);
        }
    }
}

// dx from y and dy, blended: softmax dx = y·(dy − Σ dy·y); log-softmax dx = dy − e^y·Σ dy.
SE_KERNEL SE_NAME(softmax_bwd)(SE_GLOBAL const SE_T* y, u64 y_off, SE_GLOBAL const SE_T* dy,
                               u64 dy_off, SE_GLOBAL SE_T* dx, u64 dx_off, u64 N, u64 C, u64 H,
                               u64 W, u64 yn, u64 yc, u64 yh, u64 yw, u64 dyn, u64 dyc, u64 dyh,
                               u64 dyw, u64 dxn, u64 dxc, u64 dxh, u64 dxw, u32 mode, u32 use_log,
                               SE_T alpha, SE_T beta) {
    y += y_off;
    dy += dy_off;
    dx += dx_off;
    u64 rows = mode == 0 ? N * H * W : N, len = mode == 0 ? C : C * H * W;
    for (u64 row = SE_GID; row < rows; row += SE_GSIZE) {
        SE_T s = K_(0);
        for (u64 i = 0; i < len; i++) {
            SE_T d = dy[SE_NAME(sm_at)(mode, row, i, C, H, W, dyn, dyc, dyh, dyw)];
            s += use_log ? d : d * y[SE_NAME(sm_at)(mode, row, i, C, H, W, yn, yc, yh, yw)];
        }
        for (u64 i = 0; i < len; i++) {
            SE_T d = dy[SE_NAME(sm_at)(mode, row, i, C, H, W, dyn, dyc, dyh, dyw)];
            SE_T v = y[SE_NAME(sm_at)(mode, row, i, C, H, W, yn, yc, yh, yw)];
            SE_T r = use_log ? d - SE_NAME(exp)(v) * s : v * (d - s);
            SE_NAME(blend)(&dx[SE_NAME(sm_at)(mode, row, i, C, H, W, dxn, dxc, dxh, dxw)], r,
                           alpha, beta);
        }
    }
}

// ---- Batch normalisation (spatial: per channel over N·H·W) ---------------------------------
//
// The per-channel vectors (scale, bias, means, variances, inverse deviations) are contiguous
// arrays of C elements. The statistics kernels run one thread per channel, two passes (mean,
// then Σ(x − mean)²).

// The offset of element (n, c, h, w) for strides (sn, sc, sh, sw).
#define SE_DNN_AT(n, c, h, w, s) ((n) * s##n + (c) * s##c + (h) * s##h + (w) * s##w)

// Training forward: per channel, mean and biased variance over N·H·W;
// y = scale·(x − mean)/√(var + eps) + bias. When flags & 1 the running statistics are updated,
// running = (1 − momentum)·running + momentum·batch, with the unbiased variance (the biased one
// when N·H·W = 1); when flags & 2 the mean and 1/√(var + eps) are saved.
SE_KERNEL SE_NAME(bn_fwd_train)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* y, u64 y_off,
                                SE_GLOBAL const SE_T* scale, u64 scale_off,
                                SE_GLOBAL const SE_T* bias, u64 bias_off,
                                SE_GLOBAL SE_T* run_mean, u64 run_mean_off,
                                SE_GLOBAL SE_T* run_var, u64 run_var_off,
                                SE_GLOBAL SE_T* save_mean, u64 save_mean_off,
                                SE_GLOBAL SE_T* save_inv_std, u64 save_inv_std_off, u64 N,
                                u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh, u64 xw, u64 yn,
                                u64 yc, u64 yh, u64 yw, SE_T eps, SE_T momentum, u32 flags) {
    x += x_off;
    y += y_off;
    scale += scale_off;
    bias += bias_off;
    run_mean += run_mean_off;
    run_var += run_var_off;
    save_mean += save_mean_off;
    save_inv_std += save_inv_std_off;
    u64 m = N * H * W;
    for (u64 c = SE_GID; c < C; c += SE_GSIZE) {
        SE_T sum = K_(0);
        for (u64 n = 0; n < N; n++)
            for (u64 h = 0; h < H; h++)
                for (u64 w = 0; w < W; w++) sum += x[SE_DNN_AT(n, c, h, w, x)];
        SE_T mean = sum / (SE_T)m, sq = K_(0);
        for (u64 n = 0; n < N; n++)
            for (u64 h = 0; h < H; h++)
                for (u64 w = 0; w < W; w++) {
                    SE_T d = x[SE_DNN_AT(n, c, h, w, x)] - mean;
                    sq += d * d;
                }
        SE_T var = sq / (SE_T)m;
        SE_T inv = K_(1) / SE_SQRT(var + eps);
        SE_T a = scale[c] * inv, b = bias[c];
        for (u64 n = 0; n < N; n++)
            for (u64 h = 0; h < H; h++)
                for (u64 w = 0; w < W; w++)
                    y[SE_DNN_AT(n, c, h, w, y)] = (x[SE_DNN_AT(n, c, h, w, x)] - mean) * a + b;
        if (flags & 1) {
            SE_T unbiased = m > 1 ? sq / (SE_T)(m - 1) : var;
            run_mean[c] = (K_(1) - momentum) * run_mean[c] + momentum * mean;
            run_var[c] = (K_(1) - momentum) * run_var[c] + momentum * unbiased;
        }
        if (flags & 2) {
            save_mean[c] = mean;
            save_inv_std[c] = inv;
        }
    }
}

// Inference: y = scale·(x − mean)/√(var + eps) + bias with the given statistics; one thread
// per element.
SE_KERNEL SE_NAME(bn_fwd_infer)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL SE_T* y, u64 y_off,
                                SE_GLOBAL const SE_T* scale, u64 scale_off,
                                SE_GLOBAL const SE_T* bias, u64 bias_off,
                                SE_GLOBAL const SE_T* mean, u64 mean_off,
                                SE_GLOBAL const SE_T* var, u64 var_off, u64 N, u64 C, u64 H,
                                u64 W, u64 xn, u64 xc, u64 xh, u64 xw, u64 yn, u64 yc, u64 yh,
                                u64 yw, SE_T eps) {
    x += x_off;
    y += y_off;
    scale += scale_off;
    bias += bias_off;
    mean += mean_off;
    var += var_off;
    u64 total = N * C * H * W;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 w = g % W, t = g / W;
        u64 h = t % H;
        t /= H;
        u64 c = t % C, n = t / C;
        SE_T inv = K_(1) / SE_SQRT(var[c] + eps);
        y[SE_DNN_AT(n, c, h, w, y)] =
            (x[SE_DNN_AT(n, c, h, w, x)] - mean[c]) * (scale[c] * inv) + bias[c];
    }
}

// Backward: per channel, dbias = Σ dy, dscale = Σ dy·x̂ (x̂ = (x − mean)·inv),
// dx = scale·inv·(dy − dbias/M − x̂·dscale/M), M = N·H·W. The mean and inv are the saved ones
// when use_saved, else recomputed from x with eps.
SE_KERNEL SE_NAME(bn_bwd)(SE_GLOBAL const SE_T* x, u64 x_off, SE_GLOBAL const SE_T* dy,
                          u64 dy_off, SE_GLOBAL SE_T* dx, u64 dx_off,
                          SE_GLOBAL const SE_T* scale, u64 scale_off, SE_GLOBAL SE_T* dscale,
                          u64 dscale_off, SE_GLOBAL SE_T* dbias, u64 dbias_off,
                          SE_GLOBAL const SE_T* save_mean, u64 save_mean_off,
                          SE_GLOBAL const SE_T* save_inv_std, u64 save_inv_std_off, u64 N,
                          u64 C, u64 H, u64 W, u64 xn, u64 xc, u64 xh, u64 xw, u64 dyn, u64 dyc,
                          u64 dyh, u64 dyw, u64 dxn, u64 dxc, u64 dxh, u64 dxw, SE_T eps,
                          u32 use_saved) {
    x += x_off;
    dy += dy_off;
    dx += dx_off;
    scale += scale_off;
    dscale += dscale_off;
    dbias += dbias_off;
    save_mean += save_mean_off;
    save_inv_std += save_inv_std_off;
    u64 m = N * H * W;
    SE_T mf = (SE_T)m;
    for (u64 c = SE_GID; c < C; c += SE_GSIZE) {
        SE_T mean, inv;
        if (use_saved) {
            mean = save_mean[c];
            inv = save_inv_std[c];
        } else {
            SE_T sum = K_(0), sq = K_(0);
            for (u64 n = 0; n < N; n++)
                for (u64 h = 0; h < H; h++)
                    for (u64 w = 0; w < W; w++) sum += x[SE_DNN_AT(n, c, h, w, x)];
            mean = sum / mf;
            for (u64 n = 0; n < N; n++)
                for (u64 h = 0; h < H; h++)
                    for (u64 w = 0; w < W; w++) {
                        SE_T d = x[SE_DNN_AT(n, c, h, w, x)] - mean;
                        sq += d * d;
                    }
            inv = K_(1) / SE_SQRT(sq / mf + eps);
        }
        SE_T db = K_(0), ds = K_(0);
        for (u64 n = 0; n < N; n++)
            for (u64 h = 0; h < H; h++)
                for (u64 w = 0; w < W; w++) {
                    SE_T d = dy[SE_DNN_AT(n, c, h, w, dy)];
                    db += d;
                    ds += d * (x[SE_DNN_AT(n, c, h, w, x)] - mean) * inv;
                }
        SE_T a = scale[c] * inv, mb = db / mf, ms = ds / mf;
        for (u64 n = 0; n < N; n++)
            for (u64 h = 0; h < H; h++)
                for (u64 w = 0; w < W; w++) {
                    SE_T xhat = (x[SE_DNN_AT(n, c, h, w, x)] - mean) * inv;
                    dx[SE_DNN_AT(n, c, h, w, dx)] =
                        a * (dy[SE_DNN_AT(n, c, h, w, dy)] - mb - xhat * ms);
                }
        dscale[c] = ds;
        dbias[c] = db;
    }
}
#undef SE_DNN_AT

// ---- Bias and the fused matmul's epilogue --------------------------------------------------

// y = alpha·bias[c] + beta·y (cuDNN's AddTensor with a per-channel bias; alpha = beta = 1 is
// an in-place bias add); one thread per element. `bias` holds C contiguous elements.
SE_KERNEL SE_NAME(bias_add)(SE_GLOBAL SE_T* y, u64 y_off, SE_GLOBAL const SE_T* bias,
                            u64 bias_off, u64 N, u64 C, u64 H, u64 W, u64 yn, u64 yc, u64 yh,
                            u64 yw, SE_T alpha, SE_T beta) {
    y += y_off;
    bias += bias_off;
    u64 total = N * C * H * W;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 w = g % W, t = g / W;
        u64 h = t % H;
        t /= H;
        u64 c = t % C, n = t / C;
        SE_NAME(blend)(&y[n * yn + c * yc + h * yh + w * yw], bias[c], alpha, beta);
    }
}

// After a GEMM: y[i, j] = act(y[i, j] + bias[j]) over rows × cols, element (i, j) at
// i·row_stride + j·col_stride (row- or column-major alike); no bias when has_bias == 0.
SE_KERNEL SE_NAME(epilogue)(SE_GLOBAL SE_T* y, u64 y_off, SE_GLOBAL const SE_T* bias,
                            u64 bias_off, u64 rows, u64 cols, u64 row_stride, u64 col_stride,
                            u32 has_bias, u32 mode) {
    y += y_off;
    bias += bias_off;
    u64 total = rows * cols;
    for (u64 g = SE_GID; g < total; g += SE_GSIZE) {
        u64 j = g % cols, i = g / cols;
        SE_GLOBAL SE_T* at = &y[i * row_stride + j * col_stride];
        SE_T v = *at;
        if (has_bias) v += bias[j];
        *at = SE_NAME(act)(mode, v);
    }
}

#undef K_
#undef SE_NAME
#undef SE_CAT
#undef SE_CAT2
#undef SE_DNN_EXP_HI
#undef SE_DNN_EXP_LO
#undef SE_DNN_LN2_HI
#undef SE_DNN_LN2_LO
#undef SE_DNN_ERFC_ZERO
