//! Host convolutions on private copies of the operands: im2col + the `gemm` crate per image
//! and group (col2im for backward data), images in parallel on the current rayon pool.
//!
//! Tensors and filters are addressed through their strides, so NCHW and NHWC run the same
//! code: the gemm crate takes any row and column strides, the output of an image's group is a
//! `K/G × P·Q` matrix with row stride `y.strides[1]` and column stride `y.strides[3]` (`P·Q`
//! positions are evenly spaced in both packed layouts). The filter is packed into KCRS first
//! (small), so the im2col matrix has rows in `(c, r, s)` order. A 1×1 stride-1 unpadded
//! convolution skips im2col: the input image is already the `C/G × H·W` matrix. Images run in
//! parallel, and each gemm too while there are fewer images than threads.

use gemm::Parallelism;
use rayon::prelude::*;

use super::dnn_ops::{Elem, Scratch, with_scratch, with_scratch_in};
use crate::interface::dnn::ConvProblem;

/// Sizes and strides of a validated problem, as `usize`.
struct Geo {
    groups: usize,
    cg: usize,
    kg: usize,
    r: usize,
    s: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    crs: usize,
    pq: usize,
    pad: [isize; 2],
    stride: [usize; 2],
    dil: [usize; 2],
    /// `x` strides of `(c, h, w)`.
    xs: [usize; 3],
    /// `y` strides of `(k, p, q)`.
    ys: [usize; 3],
    x_img: usize,
    y_img: usize,
    pointwise: bool,
}

fn geo(p: &ConvProblem) -> Geo {
    let (xs, ys) = (p.x.strides(), p.y.strides());
    let u = |v: u64| v as usize;
    let (cg, r, s) = (u(p.w.c_per_group), u(p.w.r), u(p.w.s));
    let c = &p.conv;
    Geo {
        groups: u(c.groups),
        cg,
        kg: u(p.k_per_group()),
        r,
        s,
        h: u(p.x.h),
        w: u(p.x.w),
        oh: u(p.y.h),
        ow: u(p.y.w),
        crs: cg * r * s,
        pq: u(p.y.h * p.y.w),
        pad: [c.pad[0] as isize, c.pad[1] as isize],
        stride: [u(c.stride[0]), u(c.stride[1])],
        dil: [u(c.dilation[0]), u(c.dilation[1])],
        xs: [u(xs[1]), u(xs[2]), u(xs[3])],
        ys: [u(ys[1]), u(ys[2]), u(ys[3])],
        x_img: u(xs[0]),
        y_img: u(ys[0]),
        pointwise: r == 1 && s == 1 && c.stride == [1, 1] && c.pad == [0, 0],
    }
}

/// The filter as a packed `K × (C/G·R·S)` matrix in KCRS order.
fn pack_filter<T: Elem>(p: &ConvProblem, w: &[T]) -> Vec<T> {
    let f = &p.w;
    let mut out = Vec::with_capacity(f.elements() as usize);
    for k in 0..f.k {
        for c in 0..f.c_per_group {
            for r in 0..f.r {
                for s in 0..f.s {
                    out.push(w[f.offset(k, c, r, s) as usize]);
                }
            }
        }
    }
    out
}

/// [`pack_filter`]'s inverse: writes packed KCRS `packed` into `w` in the filter's layout.
fn unpack_filter<T: Elem>(p: &ConvProblem, packed: &[T], w: &mut [T]) {
    let f = &p.w;
    let mut i = 0;
    for k in 0..f.k {
        for c in 0..f.c_per_group {
            for r in 0..f.r {
                for s in 0..f.s {
                    w[f.offset(k, c, r, s) as usize] = packed[i];
                    i += 1;
                }
            }
        }
    }
}

/// The input row (or column) that output position `o` reads with tap `t` in dimension `d`,
/// if it lies inside the input of size `size`.
fn source(g: &Geo, d: usize, o: usize, t: usize, size: usize) -> Option<usize> {
    let i = (o * g.stride[d] + t * g.dil[d]) as isize - g.pad[d];
    (0..size as isize).contains(&i).then_some(i as usize)
}

/// The output columns `lo..hi` whose tap `s` reads inside the input's width (the others read
/// padding): computed once per tap, so the copy below has no per-element test.
fn valid_columns(g: &Geo, s: usize) -> (usize, usize) {
    let (stride, off) = (g.stride[1] as isize, (s * g.dil[1]) as isize - g.pad[1]);
    // iw = ow·stride + off must satisfy 0 <= iw < w.
    let lo = if off >= 0 {
        0
    } else {
        ((-off + stride - 1) / stride) as usize
    };
    let last = g.w as isize - 1 - off;
    let hi = if last < 0 {
        0
    } else {
        ((last / stride) as usize + 1).min(g.ow)
    };
    (lo.min(hi), hi)
}

/// The `C/G·R·S × P·Q` im2col matrix (row-major) of channels `c0..c0 + C/G` of one image.
/// Each output row is a zero run, a copy (contiguous when the input's width stride and the
/// convolution's stride are 1) and a zero run.
fn im2col<T: Elem>(g: &Geo, x: &[T], c0: usize, col: &mut [T]) {
    for c in 0..g.cg {
        let xc = (c0 + c) * g.xs[0];
        for r in 0..g.r {
            for s in 0..g.s {
                let row = &mut col[((c * g.r + r) * g.s + s) * g.pq..][..g.pq];
                let (lo, hi) = valid_columns(g, s);
                let first = (lo * g.stride[1] + s * g.dil[1]) as isize - g.pad[1];
                for oh in 0..g.oh {
                    let out = &mut row[oh * g.ow..][..g.ow];
                    let Some(ih) = source(g, 0, oh, r, g.h) else {
                        out.fill(T::ZERO);
                        continue;
                    };
                    out[..lo].fill(T::ZERO);
                    out[hi..].fill(T::ZERO);
                    if lo == hi {
                        continue;
                    }
                    // `first` is inside the row when the range is not empty.
                    let base = xc + ih * g.xs[1] + first as usize * g.xs[2];
                    let step = g.stride[1] * g.xs[2];
                    if step == 1 {
                        out[lo..hi].copy_from_slice(&x[base..base + (hi - lo)]);
                    } else {
                        for (j, v) in out[lo..hi].iter_mut().enumerate() {
                            *v = x[base + j * step];
                        }
                    }
                }
            }
        }
    }
}

/// Adds the im2col matrix `col` back into channels `c0..c0 + C/G` of one image (im2col's
/// adjoint).
fn col2im<T: Elem>(g: &Geo, col: &[T], c0: usize, dx: &mut [T]) {
    for c in 0..g.cg {
        let xc = (c0 + c) * g.xs[0];
        for r in 0..g.r {
            for s in 0..g.s {
                let row = &col[((c * g.r + r) * g.s + s) * g.pq..][..g.pq];
                for oh in 0..g.oh {
                    let Some(ih) = source(g, 0, oh, r, g.h) else {
                        continue;
                    };
                    for (ow, v) in row[oh * g.ow..][..g.ow].iter().enumerate() {
                        if let Some(iw) = source(g, 1, ow, s, g.w) {
                            let d = &mut dx[xc + ih * g.xs[1] + iw * g.xs[2]];
                            *d = T::from_f64(d.to_f64() + v.to_f64());
                        }
                    }
                }
            }
        }
    }
}

/// A strided matrix view for [`gemm`]: first element, row stride, column stride.
type View<T> = (*const T, usize, usize);

/// `dst (m×n) = [dst +] lhs (m×k) · rhs (k×n)`.
///
/// # Safety
/// Every element `(i, j)` of each view, `ptr + i·rs + j·cs`, lies inside one live slice, and
/// `dst`'s elements are distinct and touched by nobody else during the call.
#[allow(clippy::too_many_arguments)] // three views and their sizes, as GEMM has.
unsafe fn gemm<T: Elem>(
    [m, n, k]: [usize; 3],
    dst: (*mut T, usize, usize),
    accumulate: bool,
    lhs: View<T>,
    rhs: View<T>,
    par: Parallelism,
) {
    // SAFETY: the caller's contract; gemm computes dst = 1·dst + 1·lhs·rhs and reads dst only
    // when `accumulate`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.0,
            dst.2 as isize,
            dst.1 as isize,
            accumulate,
            lhs.0,
            lhs.2 as isize,
            lhs.1 as isize,
            rhs.0,
            rhs.2 as isize,
            rhs.1 as isize,
            T::ONE,
            T::ONE,
            false,
            false,
            false,
            par,
        )
    }
}

/// Runs `body(image, inner parallelism)` over `n` images in parallel; each gemm is parallel
/// too while there are fewer images than threads.
fn images(n: usize, body: impl Fn(usize, Parallelism) + Sync) {
    let par = inner(n);
    (0..n).into_par_iter().for_each(|i| body(i, par));
}

/// The gemm parallelism when `tasks` tasks already run in parallel.
fn inner(tasks: usize) -> Parallelism {
    if tasks >= rayon::current_num_threads() {
        Parallelism::None
    } else {
        Parallelism::Rayon(0)
    }
}

/// A convolution operand moved one image at a time: `dnn.rs` implements it on pinned device
/// memory, so that each image's copy is still in cache when the image is used (a 1×1
/// convolution does little arithmetic per element, and copying whole tensors first cost it a
/// fifth of its time).
pub(super) trait Images<T>: Sync {
    /// Copies image `n` (`out.len()` elements from element `n·out.len()`) into `out`.
    fn load(&self, n: usize, out: &mut [T]);
    /// Copies `v` into image `n`.
    fn store(&self, n: usize, v: &[T]);
}

/// `y = conv(x, w)`.
pub(super) fn forward<T: Elem>(p: &ConvProblem, w: &[T], x: &impl Images<T>, y: &impl Images<T>) {
    let g = geo(p);
    let wk = pack_filter(p, w);
    images(p.x.n as usize, |n, par| {
        with_scratch_in(Scratch::A, g.x_img, |xi: &mut [T]| {
            x.load(n, xi);
            with_scratch_in(Scratch::B, g.y_img, |yi: &mut [T]| {
                let cols = if g.pointwise { 0 } else { g.crs * g.pq };
                with_scratch(cols, |col: &mut [T]| {
                    for gi in 0..g.groups {
                        let rhs: View<T> = if g.pointwise {
                            (xi[gi * g.cg * g.xs[0]..].as_ptr(), g.xs[0], g.xs[2])
                        } else {
                            im2col(&g, xi, gi * g.cg, col);
                            (col.as_ptr(), g.pq, 1)
                        };
                        let dst = yi[gi * g.kg * g.ys[0]..].as_mut_ptr();
                        let lhs = (wk[gi * g.kg * g.crs..].as_ptr(), g.crs, 1);
                        // SAFETY: the views stay inside `wk`, `col` / this image of `x`, and
                        // this image of `y` (its group's channels, each element once).
                        unsafe {
                            gemm(
                                [g.kg, g.pq, g.crs],
                                (dst, g.ys[0], g.ys[2]),
                                false,
                                lhs,
                                rhs,
                                par,
                            )
                        };
                    }
                });
                y.store(n, yi);
            })
        })
    });
}

/// `dx` from `w` and `dy`.
pub(super) fn backward_data<T: Elem>(
    p: &ConvProblem,
    w: &[T],
    dy: &impl Images<T>,
    dx: &impl Images<T>,
) {
    let g = geo(p);
    let wk = pack_filter(p, w);
    images(p.x.n as usize, |n, par| {
        with_scratch_in(Scratch::A, g.y_img, |dyi: &mut [T]| {
            dy.load(n, dyi);
            with_scratch_in(Scratch::B, g.x_img, |dxi: &mut [T]| {
                let cols = if g.pointwise { 0 } else { g.crs * g.pq };
                if !g.pointwise {
                    dxi.fill(T::ZERO);
                }
                with_scratch(cols, |col: &mut [T]| {
                    for gi in 0..g.groups {
                        // Wᵀ of the group: element (crs, k) at k·crs + crs.
                        let lhs = (wk[gi * g.kg * g.crs..].as_ptr(), 1, g.crs);
                        let rhs = (dyi[gi * g.kg * g.ys[0]..].as_ptr(), g.ys[0], g.ys[2]);
                        if g.pointwise {
                            let dst = dxi[gi * g.cg * g.xs[0]..].as_mut_ptr();
                            // SAFETY: the views stay inside `wk`, this image of `dy` and this
                            // image of `dx` (its group's channels, each element once).
                            unsafe {
                                gemm(
                                    [g.cg, g.pq, g.kg],
                                    (dst, g.xs[0], g.xs[2]),
                                    false,
                                    lhs,
                                    rhs,
                                    par,
                                )
                            };
                        } else {
                            // SAFETY: `col` is this task's, `crs × pq`; the inputs as above.
                            unsafe {
                                gemm(
                                    [g.crs, g.pq, g.kg],
                                    (col.as_mut_ptr(), g.pq, 1),
                                    false,
                                    lhs,
                                    rhs,
                                    par,
                                )
                            };
                            col2im(&g, col, gi * g.cg, dxi);
                        }
                    }
                });
                dx.store(n, dxi);
            })
        })
    });
}

/// `dw` from `x` and `dy`: per chunk of images a partial `K × C/G·R·S` sum, then the partials
/// added in chunk order.
pub(super) fn backward_filter<T: Elem>(
    p: &ConvProblem,
    x: &impl Images<T>,
    dy: &impl Images<T>,
    dw: &mut [T],
) {
    let g = geo(p);
    let n = p.x.n as usize;
    let chunks = n.min(rayon::current_num_threads()).max(1);
    let per = n.div_ceil(chunks);
    let par = inner(chunks);
    let k = p.w.k as usize;
    let partials: Vec<Vec<T>> = (0..chunks)
        .into_par_iter()
        .map(|ci| {
            let mut acc = vec![T::ZERO; k * g.crs];
            let cols = if g.pointwise { 0 } else { g.crs * g.pq };
            with_scratch_in(Scratch::A, g.x_img, |xi: &mut [T]| {
                with_scratch_in(Scratch::B, g.y_img, |dyi: &mut [T]| {
                    with_scratch(cols, |col: &mut [T]| {
                        for img in ci * per..((ci + 1) * per).min(n) {
                            x.load(img, xi);
                            dy.load(img, dyi);
                            for gi in 0..g.groups {
                                // colᵀ (pq × crs).
                                let rhs: View<T> = if g.pointwise {
                                    (xi[gi * g.cg * g.xs[0]..].as_ptr(), g.xs[2], g.xs[0])
                                } else {
                                    im2col(&g, xi, gi * g.cg, col);
                                    (col.as_ptr(), 1, g.pq)
                                };
                                let lhs = (dyi[gi * g.kg * g.ys[0]..].as_ptr(), g.ys[0], g.ys[2]);
                                let dst = acc[gi * g.kg * g.crs..].as_mut_ptr();
                                // SAFETY: the views stay inside this image of `dy`, `col` /
                                // this image of `x`, and this task's `acc` (the group's rows).
                                unsafe {
                                    gemm([g.kg, g.crs, g.pq], (dst, g.crs, 1), true, lhs, rhs, par)
                                };
                            }
                        }
                    })
                })
            });
            acc
        })
        .collect();
    let mut sum = vec![T::ZERO; k * g.crs];
    for part in &partials {
        for (s, v) in sum.iter_mut().zip(part) {
            *s = T::from_f64(s.to_f64() + v.to_f64());
        }
    }
    unpack_filter(p, &sum, dw);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnn::{ConvDesc, DnnDataType, FilterDesc, TensorDesc, TensorLayout};

    /// im2col's row runs against the per-element definition (`source` for both dimensions),
    /// over paddings larger than the filter, strides larger than it, dilations, widths of 1 and
    /// both layouts; the matrix starts poisoned.
    #[test]
    fn im2col_matches_the_per_element_definition() {
        let mut cases = 0;
        for layout in [TensorLayout::Nchw, TensorLayout::Nhwc] {
            for (w, s, pad, stride, dil) in [
                (7, 3, 1, 1, 1),
                (7, 3, 4, 1, 1),
                (9, 2, 0, 3, 1),
                (9, 3, 2, 2, 2),
                (1, 1, 0, 1, 1),
                (1, 3, 3, 4, 1),
                (5, 5, 0, 1, 1),
                (6, 1, 2, 5, 3),
            ] {
                let x = TensorDesc::new(DnnDataType::F32, layout, 1, 3, 4, w).unwrap();
                let f = FilterDesc::new(DnnDataType::F32, layout, 2, 3, 2, s).unwrap();
                let conv = ConvDesc::new([1, pad], [1, stride], [1, dil], 1).unwrap();
                let Ok(p) = ConvProblem::new(&x, &f, &conv) else {
                    continue;
                };
                let g = geo(&p);
                let input: Vec<f32> = (0..x.elements()).map(|i| i as f32 + 1.0).collect();
                let mut col = vec![f32::NAN; g.crs * g.pq];
                im2col(&g, &input, 0, &mut col);
                for c in 0..g.cg {
                    for r in 0..g.r {
                        for t in 0..g.s {
                            for oh in 0..g.oh {
                                for ow in 0..g.ow {
                                    let want = match (
                                        source(&g, 0, oh, r, g.h),
                                        source(&g, 1, ow, t, g.w),
                                    ) {
                                        (Some(ih), Some(iw)) => {
                                            input[c * g.xs[0] + ih * g.xs[1] + iw * g.xs[2]]
                                        }
                                        _ => 0.0,
                                    };
                                    let got =
                                        col[((c * g.r + r) * g.s + t) * g.pq + oh * g.ow + ow];
                                    assert_eq!(
                                        got.to_bits(),
                                        want.to_bits(),
                                        "{layout:?} w {w} s {s} pad {pad} stride {stride} dil \
                                         {dil}: c {c} r {r} s {t} oh {oh} ow {ow}"
                                    );
                                }
                            }
                        }
                    }
                }
                cases += 1;
            }
        }
        assert!(cases >= 12, "only {cases} geometries were valid");
    }
}
