//! Host pooling, activations, softmax, batch normalisation, bias add and the fused matmul, on
//! private copies of the operands (see `dnn.rs`). Reductions accumulate in `f64`; images (or
//! channels) run in parallel on the current rayon pool.

use rayon::prelude::*;

use crate::interface::dnn::{
    Activation, BatchNormProblem, MatmulProblem, PoolMode, PoolProblem, SoftmaxAlgorithm,
    SoftmaxMode, TensorDesc,
};

/// Scratch larger than this is not kept for the next call, so a pool thread keeps at most
/// 3 × 16 MiB (one per [`Scratch`] use) between calls.
const SCRATCH_KEPT: usize = 16 << 20;

/// Runs `f` on `len` elements of this thread's scratch, kept between calls: a fresh
/// multi-megabyte vector per image costs a page fault per 4 KiB on every call. The contents are
/// what the last user left, so `f` must write before it reads. When the scratch is in use (a
/// rayon task run nested inside another on this thread) or `len` is too large to keep, `f`
/// gets a fresh zeroed vector instead.
pub(super) fn with_scratch<T: Elem, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    with_scratch_in(Scratch::Work, len, f)
}

/// The uses of a thread's scratch that may be live at once.
#[derive(Clone, Copy)]
pub(super) enum Scratch {
    /// A task's working matrix (im2col).
    Work,
    /// A copy of an operand's image.
    A,
    /// A copy of another operand's image.
    B,
}

/// [`with_scratch`] in the scratch kept for `which`.
pub(super) fn with_scratch_in<T: Elem, R>(
    which: Scratch,
    len: usize,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    type Kept = std::cell::RefCell<Vec<f64>>;
    thread_local! {
        static SCRATCH: [Kept; 3] = const { [const { Kept::new(Vec::new()) }; 3] };
    }
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    if words * 8 > SCRATCH_KEPT {
        return f(&mut vec![T::ZERO; len]);
    }
    SCRATCH.with(|cells| match cells[which as usize].try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < words {
                v.resize(words, 0.0);
            }
            let all: &mut [T] = bytemuck::cast_slice_mut(&mut v[..words]);
            f(&mut all[..len])
        }
        Err(_) => f(&mut vec![T::ZERO; len]),
    })
}

/// The two element types, with the conversions the loops need (here, the leaf of the host
/// DNN files, so that they import without a cycle).
pub(super) trait Elem: bytemuck::Pod + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}
impl Elem for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}
impl Elem for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// The in-bounds input rows (or columns) of window `o` in dimension `d`.
fn window(p: &PoolProblem, d: usize, o: u64, size: u64) -> std::ops::Range<u64> {
    let start = (o * p.stride[d]) as i128 - p.pad[d] as i128;
    let end = start + p.window[d] as i128;
    (start.max(0) as u64)..(end.min(size as i128) as u64)
}

/// Calls `f(c, oh, ow, y index, in-bounds input indices in row-major window order)` for every
/// output element of one image.
fn windows(p: &PoolProblem, mut f: impl FnMut(u64, usize, &[usize])) {
    let (xs, ys) = (p.x.strides(), p.y.strides());
    let mut idx = Vec::new();
    for c in 0..p.x.c {
        for oh in 0..p.y.h {
            let rows = window(p, 0, oh, p.x.h);
            for ow in 0..p.y.w {
                idx.clear();
                for ih in rows.clone() {
                    for iw in window(p, 1, ow, p.x.w) {
                        idx.push((c * xs[1] + ih * xs[2] + iw * xs[3]) as usize);
                    }
                }
                f(c, (c * ys[1] + oh * ys[2] + ow * ys[3]) as usize, &idx);
            }
        }
    }
}

/// The position in `idx` of the first maximum of `x` (padding never counts).
fn first_max<T: Elem>(x: &[T], idx: &[usize]) -> usize {
    let mut best = 0;
    for (j, &i) in idx.iter().enumerate().skip(1) {
        if x[i].to_f64() > x[idx[best]].to_f64() {
            best = j;
        }
    }
    best
}

/// The divisor of an average window with `covered` in-bounds elements.
fn divisor(p: &PoolProblem, covered: usize) -> f64 {
    match p.mode {
        PoolMode::AverageIncludePadding => (p.window[0] * p.window[1]) as f64,
        _ => covered as f64,
    }
}

/// `y = pool(x)`.
pub(super) fn pool_forward<T: Elem>(p: &PoolProblem, x: &[T], y: &mut [T]) {
    let (xi, yi) = (p.x.strides()[0] as usize, p.y.strides()[0] as usize);
    y.par_chunks_mut(yi)
        .zip(x.par_chunks(xi))
        .for_each(|(y, x)| {
            windows(p, |_, out, idx| {
                y[out] = match p.mode {
                    PoolMode::Max => x[idx[first_max(x, idx)]],
                    _ => {
                        let sum: f64 = idx.iter().map(|&i| x[i].to_f64()).sum();
                        T::from_f64(sum / divisor(p, idx.len()))
                    }
                };
            });
        });
}

/// `dx` from `x` and `dy` (max: to the first maximum of each window).
pub(super) fn pool_backward<T: Elem>(p: &PoolProblem, x: &[T], dy: &[T], dx: &mut [T]) {
    let (xi, yi) = (p.x.strides()[0] as usize, p.y.strides()[0] as usize);
    dx.par_chunks_mut(xi)
        .zip(x.par_chunks(xi).zip(dy.par_chunks(yi)))
        .for_each(|(dx, (x, dy))| {
            let mut acc = vec![0.0f64; dx.len()];
            windows(p, |_, out, idx| {
                let g = dy[out].to_f64();
                match p.mode {
                    PoolMode::Max => acc[idx[first_max(x, idx)]] += g,
                    _ => {
                        let share = g / divisor(p, idx.len());
                        for &i in idx {
                            acc[i] += share;
                        }
                    }
                }
            });
            for (d, a) in dx.iter_mut().zip(&acc) {
                *d = T::from_f64(*a);
            }
        });
}

const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// `act(x)` in `f64`.
fn act(a: Activation, x: f64) -> f64 {
    match a {
        Activation::Relu => x.max(0.0),
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Activation::Tanh => x.tanh(),
        Activation::Gelu => 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2)),
    }
}

/// `dy·act'(x)` from the forward's input `x` and output `y`.
fn act_grad(a: Activation, x: f64, y: f64, dy: f64) -> f64 {
    match a {
        Activation::Relu => {
            if x > 0.0 {
                dy
            } else {
                0.0
            }
        }
        Activation::Sigmoid => dy * y * (1.0 - y),
        Activation::Tanh => dy * (1.0 - y * y),
        Activation::Gelu => {
            let cdf = 0.5 * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
            dy * (cdf + x * FRAC_1_SQRT_2PI * (-0.5 * x * x).exp())
        }
    }
}

/// Elements per parallel task of the element-wise loops.
const CHUNK: usize = 1 << 14;

/// `y = act(x)` (`y` may be a copy of `x`: it is overwritten element by element).
pub(super) fn activation_forward<T: Elem>(a: Activation, x: &[T], y: &mut [T]) {
    y.par_chunks_mut(CHUNK)
        .zip(x.par_chunks(CHUNK))
        .for_each(|(y, x)| {
            for (y, x) in y.iter_mut().zip(x) {
                *y = T::from_f64(act(a, x.to_f64()));
            }
        });
}

/// `dx = dy·act'(x)`.
pub(super) fn activation_backward<T: Elem>(
    a: Activation,
    x: &[T],
    y: &[T],
    dy: &[T],
    dx: &mut [T],
) {
    dx.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, dx)| {
        let o = ci * CHUNK;
        for (j, d) in dx.iter_mut().enumerate() {
            let (x, y, g) = (x[o + j], y[o + j], dy[o + j]);
            *d = T::from_f64(act_grad(a, x.to_f64(), y.to_f64(), g.to_f64()));
        }
    });
}

/// The softmax groups of one image: `(first element, stride, length)` within the image.
fn softmax_groups(d: &TensorDesc, mode: SoftmaxMode) -> Vec<(usize, usize, usize)> {
    let s = d.strides().map(|v| v as usize);
    match mode {
        SoftmaxMode::Instance => vec![(0, 1, (d.c * d.h * d.w) as usize)],
        SoftmaxMode::Channel => (0..d.h as usize)
            .flat_map(|h| (0..d.w as usize).map(move |w| (h * s[2] + w * s[3], s[1], d.c as usize)))
            .collect(),
    }
}

/// Runs `f(group's indices within the image, image index)` over every group of every image,
/// images in parallel, writing `out` image by image.
fn per_group<T: Elem>(
    d: &TensorDesc,
    mode: SoftmaxMode,
    out: &mut [T],
    f: impl Fn(usize, &[usize], &mut [T]) + Sync,
) {
    let groups = softmax_groups(d, mode);
    let img = d.strides()[0] as usize;
    out.par_chunks_mut(img).enumerate().for_each(|(n, o)| {
        let mut idx = Vec::new();
        for &(first, stride, len) in &groups {
            idx.clear();
            idx.extend((0..len).map(|i| first + i * stride));
            f(n * img, &idx, o);
        }
    });
}

/// `y = softmax(x)` or log-softmax, max-subtracted, sums in `f64`.
pub(super) fn softmax_forward<T: Elem>(
    alg: SoftmaxAlgorithm,
    mode: SoftmaxMode,
    d: &TensorDesc,
    x: &[T],
    y: &mut [T],
) {
    per_group(d, mode, y, |base, idx, y| {
        let v = |i: usize| x[base + i].to_f64();
        let max = idx.iter().map(|&i| v(i)).fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = idx.iter().map(|&i| (v(i) - max).exp()).sum();
        for &i in idx {
            y[i] = T::from_f64(match alg {
                SoftmaxAlgorithm::Accurate => (v(i) - max).exp() / sum,
                SoftmaxAlgorithm::Log => v(i) - max - sum.ln(),
            });
        }
    });
}

/// `dx` from the forward's output `y` and `dy`.
pub(super) fn softmax_backward<T: Elem>(
    alg: SoftmaxAlgorithm,
    mode: SoftmaxMode,
    d: &TensorDesc,
    y: &[T],
    dy: &[T],
    dx: &mut [T],
) {
    per_group(d, mode, dx, |base, idx, dx| {
        let (y, dy) = (
            |i: usize| y[base + i].to_f64(),
            |i: usize| dy[base + i].to_f64(),
        );
        match alg {
            SoftmaxAlgorithm::Accurate => {
                let dot: f64 = idx.iter().map(|&i| dy(i) * y(i)).sum();
                for &i in idx {
                    dx[i] = T::from_f64(y(i) * (dy(i) - dot));
                }
            }
            SoftmaxAlgorithm::Log => {
                let sum: f64 = idx.iter().map(|&i| dy(i)).sum();
                for &i in idx {
                    dx[i] = T::from_f64(dy(i) - y(i).exp() * sum);
                }
            }
        }
    });
}

/// The channel of the element at index `i` within one image of `d`.
fn channel_of(d: &TensorDesc) -> impl Fn(usize) -> usize {
    let (layout_nchw, c, hw) = (
        d.layout == crate::interface::dnn::TensorLayout::Nchw,
        d.c as usize,
        (d.h * d.w) as usize,
    );
    move |i| {
        if layout_nchw { (i / hw) % c } else { i % c }
    }
}

/// A visitor of one channel's element indices (over the whole tensor).
type Each<'a> = &'a dyn Fn(&mut dyn FnMut(usize));

/// `f(c, each)` for every channel `c` in parallel, `each` visiting its elements: two sums per
/// channel.
fn per_channel(d: &TensorDesc, f: impl Fn(usize, Each<'_>) -> [f64; 2] + Sync) -> Vec<[f64; 2]> {
    let s = d.strides().map(|v| v as usize);
    let (n, h, w) = (d.n as usize, d.h as usize, d.w as usize);
    (0..d.c as usize)
        .into_par_iter()
        .map(|c| {
            let each = |g: &mut dyn FnMut(usize)| {
                for ni in 0..n {
                    for hi in 0..h {
                        for wi in 0..w {
                            g(ni * s[0] + c * s[1] + hi * s[2] + wi * s[3]);
                        }
                    }
                }
            };
            f(c, &each)
        })
        .collect()
}

/// `(mean, biased variance)` of every channel of `x` (two passes in `f64`).
fn batch_stats<T: Elem>(d: &TensorDesc, x: &[T]) -> Vec<[f64; 2]> {
    let m = (d.n * d.h * d.w) as f64;
    per_channel(d, |_, each| {
        let mut sum = 0.0;
        each(&mut |i| sum += x[i].to_f64());
        let mean = sum / m;
        let mut sq = 0.0;
        each(&mut |i| sq += (x[i].to_f64() - mean).powi(2));
        [mean, sq / m]
    })
}

/// `y = scale·(x − mean)·inv_std + bias` per channel, images in parallel.
fn normalise<T: Elem>(d: &TensorDesc, x: &[T], y: &mut [T], coef: &[[f64; 2]]) {
    let ch = channel_of(d);
    let img = d.strides()[0] as usize;
    y.par_chunks_mut(img).enumerate().for_each(|(n, y)| {
        for (j, v) in y.iter_mut().enumerate() {
            let [a, b] = coef[ch(j)];
            *v = T::from_f64(a * x[n * img + j].to_f64() + b);
        }
    });
}

/// The statistics training forward writes: `[save_mean, save_inv_std, running_mean,
/// running_var]`, each `C` long.
pub(super) struct TrainingStats<T> {
    pub(super) save_mean: Vec<T>,
    pub(super) save_inv_std: Vec<T>,
    pub(super) running_mean: Vec<T>,
    pub(super) running_var: Vec<T>,
}

/// Training forward: writes `y` and returns the statistics (the running ones updated from
/// `running_mean` / `running_var`).
#[allow(clippy::too_many_arguments)] // cuDNN's operands.
pub(super) fn batch_norm_training<T: Elem>(
    p: &BatchNormProblem,
    x: &[T],
    scale: &[T],
    bias: &[T],
    running_mean: &[T],
    running_var: &[T],
    y: &mut [T],
) -> TrainingStats<T> {
    let d = &p.x;
    let stats = batch_stats(d, x);
    let m = (d.n * d.h * d.w) as f64;
    let mom = p.momentum;
    let inv: Vec<f64> = stats
        .iter()
        .map(|s| 1.0 / (s[1] + p.epsilon).sqrt())
        .collect();
    let coef: Vec<[f64; 2]> = (0..stats.len())
        .map(|c| {
            let a = scale[c].to_f64() * inv[c];
            [a, bias[c].to_f64() - a * stats[c][0]]
        })
        .collect();
    normalise(d, x, y, &coef);
    let c = stats.len();
    TrainingStats {
        save_mean: stats.iter().map(|s| T::from_f64(s[0])).collect(),
        save_inv_std: inv.iter().map(|&v| T::from_f64(v)).collect(),
        running_mean: (0..c)
            .map(|i| T::from_f64((1.0 - mom) * running_mean[i].to_f64() + mom * stats[i][0]))
            .collect(),
        running_var: (0..c)
            .map(|i| {
                let unbiased = stats[i][1] * m / (m - 1.0);
                T::from_f64((1.0 - mom) * running_var[i].to_f64() + mom * unbiased)
            })
            .collect(),
    }
}

/// Inference forward from given statistics.
pub(super) fn batch_norm_inference<T: Elem>(
    p: &BatchNormProblem,
    x: &[T],
    [scale, bias, mean, var]: [&[T]; 4],
    y: &mut [T],
) {
    let coef: Vec<[f64; 2]> = (0..p.x.c as usize)
        .map(|c| {
            let a = scale[c].to_f64() / (var[c].to_f64() + p.epsilon).sqrt();
            [a, bias[c].to_f64() - a * mean[c].to_f64()]
        })
        .collect();
    normalise(&p.x, x, y, &coef);
}

/// Backward: writes `dx` and returns `(dscale, dbias)`.
pub(super) fn batch_norm_backward<T: Elem>(
    p: &BatchNormProblem,
    x: &[T],
    dy: &[T],
    [scale, mean, inv_std]: [&[T]; 3],
    dx: &mut [T],
) -> (Vec<T>, Vec<T>) {
    let d = &p.x;
    let m = (d.n * d.h * d.w) as f64;
    let sums = per_channel(d, |c, each| {
        let mut sg = 0.0;
        let mut sgx = 0.0;
        each(&mut |i| {
            let xhat = (x[i].to_f64() - mean[c].to_f64()) * inv_std[c].to_f64();
            sg += dy[i].to_f64();
            sgx += dy[i].to_f64() * xhat;
        });
        [sgx, sg]
    });
    let ch = channel_of(d);
    let img = d.strides()[0] as usize;
    dx.par_chunks_mut(img).enumerate().for_each(|(n, dx)| {
        for (j, v) in dx.iter_mut().enumerate() {
            let (i, c) = (n * img + j, ch(j));
            let inv = inv_std[c].to_f64();
            let xhat = (x[i].to_f64() - mean[c].to_f64()) * inv;
            let [dscale, dbias] = sums[c];
            let g = m * dy[i].to_f64() - dbias - xhat * dscale;
            *v = T::from_f64(scale[c].to_f64() * inv / m * g);
        }
    });
    (
        sums.iter().map(|s| T::from_f64(s[0])).collect(),
        sums.iter().map(|s| T::from_f64(s[1])).collect(),
    )
}

/// `y[i] += bias[channel(i)]`.
pub(super) fn bias_add<T: Elem>(d: &TensorDesc, y: &mut [T], bias: &[T]) {
    let ch = channel_of(d);
    let img = d.strides()[0] as usize;
    y.par_chunks_mut(img).for_each(|y| {
        for (j, v) in y.iter_mut().enumerate() {
            *v = T::from_f64(v.to_f64() + bias[ch(j)].to_f64());
        }
    });
}

/// `y = act(x·w + bias)`, row-major, the product by the `gemm` crate.
pub(super) fn matmul_bias_activation<T: Elem>(
    p: &MatmulProblem,
    x: &[T],
    w: &[T],
    bias: &[T],
    y: &mut [T],
) {
    let (m, n, k) = (p.m as usize, p.n as usize, p.k as usize);
    // SAFETY: `x` holds m·k, `w` k·n and `y` m·n elements, row-major (row stride = columns,
    // column stride 1); `y` is exclusively borrowed and not read (read_dst false).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            y.as_mut_ptr(),
            1,
            n as isize,
            false,
            x.as_ptr(),
            1,
            k as isize,
            w.as_ptr(),
            1,
            n as isize,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        )
    };
    y.par_chunks_mut(n).for_each(|row| {
        for (v, b) in row.iter_mut().zip(bias) {
            let z = v.to_f64() + b.to_f64();
            *v = T::from_f64(match p.activation {
                Some(a) => act(a, z),
                None => z,
            });
        }
    });
}
