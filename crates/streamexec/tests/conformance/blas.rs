//! BLAS through the stream, against plain f64 loops on random inputs. Outputs start poisoned
//! (NaN), and every element outside the operation (gaps between strided elements or columns)
//! must still hold its poison bits afterwards. Every test runs once per BLAS plugin a platform
//! has ([`on_each_blas_plugin`]): the built-in implementation, and the vendor library where it
//! loads (CLBlast on OpenCL, cuBLAS on CUDA).

use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{BlasScalar, DeviceMemory, Error, PluginFamily, StreamExecutor, Transpose};

use crate::common::{POISON_F32_BITS, rng};
use crate::plugins::{executors_per_plugin, on_each};

/// Runs `test` on device 0 of every platform under test once per BLAS plugin it has:
/// `Plugin::Builtin`, and `Plugin::Vendor` where the vendor library loads (required where
/// `STREAMEXEC_REQUIRE_PLUGINS` names it, e.g. `clblast`). The executors are made once per
/// process and shared by the tests, so vendor kernels compile once.
pub fn on_each_blas_plugin(test: impl Fn(&StreamExecutor)) {
    static EXECUTORS: std::sync::OnceLock<Vec<StreamExecutor>> = std::sync::OnceLock::new();
    let executors = EXECUTORS.get_or_init(|| executors_per_plugin(PluginFamily::Blas));
    on_each(executors, PluginFamily::Blas, test);
}

/// What the tests need of `f32` / `f64`.
trait El: BlasScalar + PartialEq + std::fmt::Debug {
    const EPS: f64;
    fn poison() -> Self;
    fn of(v: f64) -> Self;
    fn f(self) -> f64;
    fn bits(self) -> u64;
}
impl El for f32 {
    const EPS: f64 = f32::EPSILON as f64;
    fn poison() -> Self {
        f32::from_bits(POISON_F32_BITS)
    }
    fn of(v: f64) -> Self {
        v as f32
    }
    fn f(self) -> f64 {
        f64::from(self)
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
}
impl El for f64 {
    const EPS: f64 = f64::EPSILON;
    fn poison() -> Self {
        f64::from_bits(0x7FF4_DEAD_BEEF_DEAD)
    }
    fn of(v: f64) -> Self {
        v
    }
    fn f(self) -> f64 {
        self
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

fn randoms<T: El>(r: &mut StdRng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::of(r.random_range(-1.0..1.0))).collect()
}

fn upload<T: El>(exec: &StreamExecutor, v: &[T]) -> DeviceMemory<T> {
    exec.copy_to_device(v).unwrap()
}

fn download<T: El>(exec: &StreamExecutor, d: &DeviceMemory<T>) -> Vec<T> {
    let mut out = vec![T::poison(); d.len()];
    exec.synchronous_memcpy_d2h(d, &mut out).unwrap();
    out
}

/// Sizes that include 1, odd and non-square ones.
fn dim(r: &mut StdRng) -> usize {
    [1, 2, 3, 7, 16, 31, 33, r.random_range(1..90)][r.random_range(0..8)]
}

/// Alpha/beta values, edges included.
fn scale(r: &mut StdRng) -> f64 {
    [0.0, 1.0, -1.0, 0.5, r.random_range(-2.0..2.0)][r.random_range(0..5)]
}

const TRANS: [Transpose; 3] = [
    Transpose::None,
    Transpose::Transpose,
    Transpose::ConjugateTranspose,
];

/// One (strided-batched) GEMM checked against the f64 model.
fn check_gemm<T: El>(exec: &StreamExecutor, r: &mut StdRng, ta: Transpose, tb: Transpose) {
    let (m, n, k) = (dim(r), dim(r), [0, dim(r), dim(r)][r.random_range(0..3)]);
    let batch = [1, 1, 3][r.random_range(0..3)];
    let (alpha, beta) = (T::of(scale(r)), T::of(scale(r)));
    let (ar, ac) = if ta == Transpose::None {
        (m, k)
    } else {
        (k, m)
    };
    let (br, bc) = if tb == Transpose::None {
        (k, n)
    } else {
        (n, k)
    };
    let (lda, ldb, ldc) = (
        ar.max(1) + r.random_range(0..3),
        br.max(1) + r.random_range(0..3),
        m + r.random_range(0..3),
    );
    let (sa, sb) = (lda * ac + r.random_range(0..2), ldb * bc);
    let sa = if batch > 1 && r.random_bool(0.3) {
        0
    } else {
        sa
    };
    let sc = ldc * n + 1;
    let a: Vec<T> = randoms(r, (sa * (batch - 1) + lda * ac).max(1));
    let b: Vec<T> = randoms(r, (sb * (batch - 1) + ldb * bc).max(1));
    let mut c: Vec<T> = randoms(r, sc * batch);
    let inside = |idx: usize| idx % sc < ldc * n && idx % sc % ldc < m;
    if beta.f() == 0.0 {
        // BLAS does not read C when beta is 0: a NaN there must not come out.
        for (i, v) in c.iter_mut().enumerate() {
            if inside(i) {
                *v = T::poison();
            }
        }
    }
    for (i, v) in c.iter_mut().enumerate() {
        if !inside(i) {
            *v = T::poison();
        }
    }
    let (da, db, dc) = (upload(exec, &a), upload(exec, &b), upload(exec, &c));
    let mut s = exec.create_stream().unwrap();
    if batch == 1 && r.random_bool(0.5) {
        s.then_blas_gemm(ta, tb, m, n, k, alpha, &da, lda, &db, ldb, beta, &dc, ldc);
    } else {
        s.then_blas_gemm_strided_batched(
            ta, tb, m, n, k, alpha, &da, lda, sa, &db, ldb, sb, beta, &dc, ldc, sc, batch,
        );
    }
    s.block_host_until_done().unwrap();
    let got = download(exec, &dc);
    let what = format!("{ta:?}/{tb:?} m={m} n={n} k={k} batch={batch} α={alpha:?} β={beta:?}");
    for z in 0..batch {
        let opa = |i: usize, l: usize| {
            let at = if ta == Transpose::None {
                i + l * lda
            } else {
                l + i * lda
            };
            a[z * sa + at].f()
        };
        let opb = |l: usize, j: usize| {
            let at = if tb == Transpose::None {
                l + j * ldb
            } else {
                j + l * ldb
            };
            b[z * sb + at].f()
        };
        for j in 0..n {
            for i in 0..m {
                let at = z * sc + i + j * ldc;
                let (mut dot, mut mag) = (0.0, 0.0);
                for l in 0..k {
                    dot += opa(i, l) * opb(l, j);
                    mag += (opa(i, l) * opb(l, j)).abs();
                }
                let old = if beta.f() == 0.0 {
                    0.0
                } else {
                    beta.f() * c[at].f()
                };
                let want = alpha.f() * dot + old;
                let tol = 4.0 * T::EPS * ((k as f64 + 2.0) * alpha.f().abs() * mag + old.abs());
                let g = got[at].f();
                assert!(
                    (g - want).abs() <= tol,
                    "{what}: C[{i},{j}] of batch {z} = {g}, want {want} (tol {tol})"
                );
            }
        }
    }
    for (i, (g, c)) in got.iter().zip(&c).enumerate() {
        if !inside(i) {
            assert_eq!(
                g.bits(),
                c.bits(),
                "{what}: element {i} outside C was written"
            );
        }
    }
}

fn gemm_all<T: El>(exec: &StreamExecutor, name: &str) {
    let mut r = rng(name);
    for ta in TRANS {
        for tb in TRANS {
            for _ in 0..3 {
                check_gemm::<T>(exec, &mut r, ta, tb);
            }
        }
    }
}

#[test]
fn sgemm_matches_f64_reference() {
    on_each_blas_plugin(|exec| gemm_all::<f32>(exec, "sgemm_matches_f64_reference"));
}

#[test]
fn dgemm_matches_f64_reference() {
    on_each_blas_plugin(|exec| gemm_all::<f64>(exec, "dgemm_matches_f64_reference"));
}

/// Poisoned vector of `n` elements `inc` apart, real values at the strided positions.
fn strided<T: El>(r: &mut StdRng, n: usize, inc: usize, real: bool) -> Vec<T> {
    let mut v = vec![T::poison(); ((n.max(1) - 1) * inc + 1) + r.random_range(0..2)];
    if real {
        for i in 0..n {
            v[i * inc] = T::of(r.random_range(-1.0..1.0));
        }
    }
    v
}

fn assert_gaps<T: El>(got: &[T], before: &[T], n: usize, inc: usize, what: &str) {
    for (i, (g, b)) in got.iter().zip(before).enumerate() {
        if i % inc != 0 || i / inc >= n {
            assert_eq!(
                g.bits(),
                b.bits(),
                "{what}: element {i} between strides written"
            );
        }
    }
}

fn gemv_all<T: El>(exec: &StreamExecutor, name: &str) {
    let mut r = rng(name);
    for trans in TRANS {
        for _ in 0..6 {
            let (m, n) = (dim(&mut r), dim(&mut r));
            let (alpha, beta) = (T::of(scale(&mut r)), T::of(scale(&mut r)));
            let lda = m + r.random_range(0..3);
            let (incx, incy) = (r.random_range(1..4), r.random_range(1..4));
            let (lx, ly) = if trans == Transpose::None {
                (n, m)
            } else {
                (m, n)
            };
            let a: Vec<T> = randoms(&mut r, lda * n);
            let x = strided::<T>(&mut r, lx, incx, true);
            let y = strided::<T>(&mut r, ly, incy, beta.f() != 0.0);
            let (da, dx, dy) = (upload(exec, &a), upload(exec, &x), upload(exec, &y));
            exec.create_stream()
                .unwrap()
                .then_blas_gemv(trans, m, n, alpha, &da, lda, &dx, incx, beta, &dy, incy)
                .block_host_until_done()
                .unwrap();
            let got = download(exec, &dy);
            let what = format!("gemv {trans:?} m={m} n={n} α={alpha:?} β={beta:?}");
            for i in 0..ly {
                let (mut dot, mut mag) = (0.0, 0.0);
                for l in 0..lx {
                    let av = if trans == Transpose::None {
                        a[i + l * lda]
                    } else {
                        a[l + i * lda]
                    };
                    dot += av.f() * x[l * incx].f();
                    mag += (av.f() * x[l * incx].f()).abs();
                }
                let old = if beta.f() == 0.0 {
                    0.0
                } else {
                    beta.f() * y[i * incy].f()
                };
                let want = alpha.f() * dot + old;
                let tol = 4.0 * T::EPS * ((lx as f64 + 2.0) * alpha.f().abs() * mag + old.abs());
                let g = got[i * incy].f();
                assert!((g - want).abs() <= tol, "{what}: y[{i}] = {g}, want {want}");
            }
            assert_gaps(&got, &y, ly, incy, &what);
        }
    }
}

#[test]
fn gemv_matches_f64_reference() {
    on_each_blas_plugin(|exec| {
        gemv_all::<f32>(exec, "sgemv_matches_f64_reference");
        gemv_all::<f64>(exec, "dgemv_matches_f64_reference");
    });
}

fn level1_all<T: El>(exec: &StreamExecutor, name: &str) {
    let mut r = rng(name);
    for _ in 0..6 {
        let n = [1, 2, 7, 255, r.random_range(1..5000)][r.random_range(0..5)];
        let (incx, incy) = (r.random_range(1..4), r.random_range(1..4));
        let alpha = T::of(scale(&mut r));
        let x = strided::<T>(&mut r, n, incx, true);
        let y = strided::<T>(&mut r, n, incy, true);
        let (xs, ys): (Vec<f64>, Vec<f64>) =
            (0..n).map(|i| (x[i * incx].f(), y[i * incy].f())).unzip();
        let sum_abs: f64 = xs.iter().map(|v| v.abs()).sum();
        let tol = |mag: f64| 4.0 * T::EPS * (n as f64 + 2.0) * mag;
        let what = format!("n={n} incx={incx} incy={incy} α={alpha:?}");

        // axpy
        let (dx, dy) = (upload(exec, &x), upload(exec, &y));
        let mut s = exec.create_stream().unwrap();
        s.then_blas_axpy(n, alpha, &dx, incx, &dy, incy);
        s.block_host_until_done().unwrap();
        let got = download(exec, &dy);
        for i in 0..n {
            let want = alpha.f() * xs[i] + ys[i];
            let g = got[i * incy].f();
            assert!(
                (g - want).abs() <= 4.0 * T::EPS * 3.0,
                "axpy {what}: [{i}] {g} vs {want}"
            );
        }
        assert_gaps(&got, &y, n, incy, &format!("axpy {what}"));

        // scal
        s.then_blas_scal(n, alpha, &dx, incx);
        s.block_host_until_done().unwrap();
        let got = download(exec, &dx);
        for i in 0..n {
            let want = alpha.f() * xs[i];
            let g = got[i * incx].f();
            assert!(
                (g - want).abs() <= 4.0 * T::EPS,
                "scal {what}: [{i}] {g} vs {want}"
            );
        }
        assert_gaps(&got, &x, n, incx, &format!("scal {what}"));

        // copy (from a fresh x into a poisoned y)
        let dx = upload(exec, &x);
        let dy = upload(exec, &vec![T::poison(); y.len()]);
        s.then_blas_copy(n, &dx, incx, &dy, incy);
        s.block_host_until_done().unwrap();
        let got = download(exec, &dy);
        for i in 0..n {
            assert_eq!(
                got[i * incy].bits(),
                x[i * incx].bits(),
                "copy {what}: [{i}]"
            );
        }
        assert_gaps(
            &got,
            &vec![T::poison(); y.len()],
            n,
            incy,
            &format!("copy {what}"),
        );

        // dot, nrm2, asum into poisoned results at an offset
        let dy = upload(exec, &y);
        let res = upload(exec, &[T::poison(); 4]);
        s.then_blas_dot(n, &dx, incx, &dy, incy, res.slice(1..2).unwrap())
            .then_blas_nrm2(n, &dx, incx, res.slice(2..3).unwrap())
            .then_blas_asum(n, &dx, incx, res.slice(3..4).unwrap());
        s.block_host_until_done().unwrap();
        let got = download(exec, &res);
        let dot: f64 = xs.iter().zip(&ys).map(|(a, b)| a * b).sum();
        let dmag: f64 = xs.iter().zip(&ys).map(|(a, b)| (a * b).abs()).sum();
        let sq: f64 = xs.iter().map(|a| a * a).sum();
        assert_eq!(
            got[0].bits(),
            T::poison().bits(),
            "{what}: result[0] written"
        );
        assert!(
            (got[1].f() - dot).abs() <= tol(dmag),
            "dot {what}: {:?} vs {dot}",
            got[1]
        );
        assert!(
            (got[2].f() - sq.sqrt()).abs() <= tol(sq.sqrt()),
            "nrm2 {what}: {:?} vs {}",
            got[2],
            sq.sqrt()
        );
        assert!(
            (got[3].f() - sum_abs).abs() <= tol(sum_abs),
            "asum {what}: {:?}",
            got[3]
        );
    }
}

#[test]
fn level1_matches_f64_reference() {
    on_each_blas_plugin(|exec| {
        level1_all::<f32>(exec, "level1_f32_matches_f64_reference");
        level1_all::<f64>(exec, "level1_f64_matches_f64_reference");
    });
}

#[test]
fn empty_reductions_write_zero_and_empty_calls_do_nothing() {
    on_each_blas_plugin(|exec| {
        let x = upload(exec, &[1.0f32; 4]);
        let res = upload(exec, &[f32::from_bits(POISON_F32_BITS); 3]);
        let c = upload(exec, &[f32::from_bits(POISON_F32_BITS); 4]);
        exec.create_stream()
            .unwrap()
            .then_blas_dot(0, &x, 1, &x, 1, res.slice(0..1).unwrap())
            .then_blas_nrm2(0, &x, 1, res.slice(1..2).unwrap())
            .then_blas_asum(0, &x, 1, res.slice(2..3).unwrap())
            .then_blas_gemm(
                Transpose::None,
                Transpose::None,
                0,
                4,
                4,
                1.0f32,
                &x,
                1,
                &x,
                4,
                0.0,
                &c,
                1,
            )
            .then_blas_axpy(0, 2.0f32, &x, 1, &c, 1)
            .block_host_until_done()
            .unwrap();
        assert_eq!(download(exec, &res), vec![0.0; 3]);
        assert!(
            download(exec, &c)
                .iter()
                .all(|v| v.to_bits() == POISON_F32_BITS)
        );
    });
}

/// One BLAS call on a stream.
type Call<'a> = dyn Fn(&mut streamexec::Stream) + 'a;

#[test]
fn bad_dimensions_fail_before_anything_runs() {
    on_each_blas_plugin(|exec| {
        let a = upload(exec, &[1.0f32; 12]);
        let c = upload(exec, &[7.0f32; 12]);
        let cases: Vec<(&str, Box<Call>)> = vec![
            (
                "lda < m",
                Box::new(|s| {
                    s.then_blas_gemm(
                        Transpose::None,
                        Transpose::None,
                        3,
                        2,
                        2,
                        1.0f32,
                        &a,
                        2,
                        &a,
                        2,
                        0.0,
                        &c,
                        3,
                    );
                }),
            ),
            (
                "ldb < n (transposed)",
                Box::new(|s| {
                    s.then_blas_gemm(
                        Transpose::None,
                        Transpose::Transpose,
                        2,
                        3,
                        2,
                        1.0f32,
                        &a,
                        2,
                        &a,
                        2,
                        0.0,
                        &c,
                        3,
                    );
                }),
            ),
            (
                "ldc < m",
                Box::new(|s| {
                    s.then_blas_gemm(
                        Transpose::None,
                        Transpose::None,
                        3,
                        2,
                        2,
                        1.0f32,
                        &a,
                        3,
                        &a,
                        2,
                        0.0,
                        &c,
                        2,
                    );
                }),
            ),
            (
                "A too small",
                Box::new(|s| {
                    s.then_blas_gemm(
                        Transpose::None,
                        Transpose::None,
                        4,
                        2,
                        4,
                        1.0f32,
                        &a,
                        4,
                        &a,
                        4,
                        0.0,
                        &c,
                        4,
                    );
                }),
            ),
            (
                "C too small",
                Box::new(|s| {
                    s.then_blas_gemm(
                        Transpose::None,
                        Transpose::None,
                        4,
                        4,
                        1,
                        1.0f32,
                        &a,
                        4,
                        &a,
                        1,
                        0.0,
                        &c,
                        4,
                    );
                }),
            ),
            (
                "overlapping batches",
                Box::new(|s| {
                    s.then_blas_gemm_strided_batched(
                        Transpose::None,
                        Transpose::None,
                        2,
                        2,
                        2,
                        1.0f32,
                        &a,
                        2,
                        0,
                        &a,
                        2,
                        0,
                        0.0,
                        &c,
                        2,
                        3,
                        2,
                    );
                }),
            ),
            (
                "gemv x too small",
                Box::new(|s| {
                    s.then_blas_gemv(
                        Transpose::None,
                        2,
                        6,
                        1.0f32,
                        &a,
                        2,
                        a.slice(0..5).unwrap(),
                        1,
                        0.0,
                        &c,
                        1,
                    );
                }),
            ),
            (
                "incx 0",
                Box::new(|s| {
                    s.then_blas_axpy(2, 1.0f32, &a, 0, &c, 1);
                }),
            ),
            (
                "y too small",
                Box::new(|s| {
                    s.then_blas_axpy(5, 1.0f32, &a, 1, &c, 3);
                }),
            ),
            (
                "empty result",
                Box::new(|s| {
                    s.then_blas_asum(5, &a, 1, c.slice(0..0).unwrap());
                }),
            ),
        ];
        for (what, call) in cases {
            let mut s = exec.create_stream().unwrap();
            call(&mut s);
            // Later work is skipped on a failed stream.
            s.then_memset(&c, 0);
            let err = s.block_host_until_done().unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidArgument { .. } | Error::OutOfBounds { .. }
                ),
                "{what}: {err}"
            );
            assert!(err.to_string().contains("then_blas_"), "{what}: {err}");
            assert_eq!(download(exec, &c), vec![7.0; 12], "{what}: C changed");
        }
    });
}
