//! The built-in kernels of kernels/canned.cu on the host platform's PTX engine, through the
//! public API, at -O0 and -O3: the Philox kernels bit for bit against `streamexec::philox`, and
//! the BLAS kernels (`se_blas_*`, what the CUDA backend runs where cuBLAS is not installed).
//!
//! BLAS: Each kernel gets the arguments src/platform/gpu/blas.rs packs (same order,
//! types and block shapes), on random inputs: sizes that are not multiples of the 16×16 GEMM
//! tile or of the 256-thread blocks, leading dimensions and increments with gaps, every
//! transpose, batches (a shared A included), alpha/beta edge values, and grids both full and
//! capped (the kernels loop with grid strides, as they must where a device limit caps a grid).
//!
//! Results are compared with plain f64 loops. Every element a call must not write (gaps between
//! columns, between batch matrices, between strided elements, around a reduction's result)
//! starts as a NaN with a payload and must keep its bits; every element it must write starts
//! poisoned too when the call does not read it (beta = 0), so an unwritten or leaked element
//! fails. Gaps of the inputs are NaN as well, so reading outside the operation shows. A and B
//! are one-element NaN buffers when alpha = 0 or k = 0 (not read, and the engine faults on any
//! access outside an allocation). The engine's race checker is on for the whole binary.
#![allow(clippy::too_many_arguments)]

mod common;

use std::collections::HashMap;
use std::fmt::Debug;

use bytemuck::Pod;
use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{ArgList, DeviceMemory, Kernel, MultiKernelLoaderSpec, StreamExecutor};

use common::{POISON_F32, POISON_F64, POISON_U32, host, rng};

const CANNED: [(&str, &str); 2] = [
    ("O0", include_str!("../kernels/ptx/canned.O0.ptx")),
    ("O3", include_str!("../kernels/ptx/canned.O3.ptx")),
];

/// The Philox kernels clang compiled from kernels/canned.cu, at -O0 (device-function calls with
/// `.param` arrays, a local-memory depot, generic addressing) and -O3 (64-bit math, f64 sqrt,
/// div, conversions): bit-identical to the Rust definition in `streamexec::philox`.
#[test]
fn philox_kernels_match_the_rust_definition_bit_for_bit() {
    use streamexec::RandDistribution;
    use streamexec::philox::{PhiloxStream, generate};
    let exec = host();
    let stream = PhiloxStream {
        key: [0x1234_5678, 0x9ABC_DEF0],
        counter_hi: [7, 0xFFFF_FFFF],
        offset: u64::MAX - 3,
    };
    type Args = (
        streamexec::DevicePtr<f64>,
        u64,
        u32,
        u32,
        u32,
        u32,
        u64,
        f64,
        f64,
    );
    type ArgsU = (streamexec::DevicePtr<u32>, u64, u32, u32, u32, u32, u64);
    let n = 1001usize;
    for (_, ptx) in CANNED {
        let k: streamexec::TypedKernel<Args> = canned_kernel(&exec, ptx, "se_philox_gaussian_f64");
        let out = exec.copy_to_device(&vec![f64::NAN; n]).unwrap();
        let (mean, sd) = (1.5, 0.25);
        let blocks = (n as u32).div_ceil(2).div_ceil(64);
        let s = &stream;
        launch(
            &exec,
            blocks,
            &k,
            (
                out.ptr(),
                n as u64,
                s.key[0],
                s.key[1],
                s.counter_hi[0],
                s.counter_hi[1],
                s.offset,
                mean,
                sd,
            ),
        )
        .unwrap();
        let mut want = vec![0u8; n.next_multiple_of(2) * 8];
        generate(
            s,
            RandDistribution::GaussianF64 { mean, stddev: sd },
            0,
            &mut want,
        );
        let want: Vec<u64> = want
            .chunks(8)
            .take(n)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        let got: Vec<u64> = exec
            .copy_to_vec(&out)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(got, want);
        let k: streamexec::TypedKernel<ArgsU> = canned_kernel(&exec, ptx, "se_philox_u32");
        let out = exec.copy_to_device(&vec![POISON_U32; n]).unwrap();
        launch(
            &exec,
            (n as u32).div_ceil(4).div_ceil(64),
            &k,
            (
                out.ptr(),
                n as u64,
                s.key[0],
                s.key[1],
                s.counter_hi[0],
                s.counter_hi[1],
                s.offset,
            ),
        )
        .unwrap();
        let mut want = vec![0u8; n.next_multiple_of(4) * 4];
        generate(s, RandDistribution::U32, 0, &mut want);
        let want: Vec<u32> = want
            .chunks(4)
            .take(n)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(exec.copy_to_vec(&out).unwrap(), want);
    }
}

/// Entry `name` of `ptx` as a typed kernel.
fn canned_kernel<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    ptx: &str,
    name: &str,
) -> streamexec::TypedKernel<A> {
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(ptx, name);
    exec.get_kernel(&spec).unwrap_or_else(|e| panic!("{e}"))
}

/// One launch of 64-thread blocks on a fresh stream, waited for.
fn launch<A: streamexec::KernelArgs>(
    exec: &StreamExecutor,
    blocks: u32,
    k: &streamexec::TypedKernel<A>,
    args: A,
) -> streamexec::Result<()> {
    exec.create_stream()?
        .then_launch(64, blocks, k, args)
        .block_host_until_done()
}

/// Block shapes of the kernels (canned.cu's `SE_TILE`, `SE_THREADS`, `SE_WARPS`).
const TILE: u64 = 16;
const THREADS: u32 = 256;
const GEMV_T_PER_BLOCK: u64 = 8;

/// What the tests need of `f32` / `f64`.
trait El: Pod + Debug + PartialEq + Send + Sync + 'static {
    const SUFFIX: &'static str;
    const EPS: f64;
    fn poison() -> Self;
    fn of(v: f64) -> Self;
    fn f(self) -> f64;
    fn bits(self) -> u64;
}
impl El for f32 {
    const SUFFIX: &'static str = "f32";
    const EPS: f64 = f32::EPSILON as f64;
    fn poison() -> Self {
        POISON_F32
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
    const SUFFIX: &'static str = "f64";
    const EPS: f64 = f64::EPSILON;
    fn poison() -> Self {
        POISON_F64
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

/// The host executor and one PTX build of canned.cu, with its kernels loaded once.
struct Canned {
    exec: StreamExecutor,
    ptx: &'static str,
    opt: &'static str,
    kernels: HashMap<String, Kernel>,
}

impl Canned {
    fn new(opt: &'static str, ptx: &'static str) -> Self {
        let exec = host();
        // Every launch of this binary runs under the race checker: the kernels' shared-memory
        // tiles and trees must be ordered by their barriers, and blocks must not overlap.
        exec.set_race_check(true).unwrap();
        Canned {
            exec,
            ptx,
            opt,
            kernels: HashMap::new(),
        }
    }

    /// Launches `name` on a fresh stream and waits; panics with the stream's error.
    fn run(&mut self, name: &str, threads: [u32; 3], blocks: [u32; 3], args: ArgList) {
        let (exec, ptx, opt) = (&self.exec, self.ptx, self.opt);
        let kernel = self.kernels.entry(name.to_string()).or_insert_with(|| {
            let spec =
                MultiKernelLoaderSpec::new(args.as_slice().len()).add_cuda_ptx_in_memory(ptx, name);
            exec.get_untyped_kernel(&spec)
                .unwrap_or_else(|e| panic!("{opt}: loading `{name}` on the host: {e}"))
        });
        let mut s = self.exec.create_stream().unwrap();
        let ([tx, ty, tz], [bx, by, bz]) = (threads, blocks);
        s.then_launch_untyped((tx, ty, tz), (bx, by, bz), kernel, &args)
            .block_host_until_done()
            .unwrap_or_else(|e| panic!("{opt}: `{name}` {threads:?} x {blocks:?}: {e}"));
    }

    fn upload<T: El>(&self, v: &[T]) -> DeviceMemory<T> {
        self.exec.copy_to_device(v).unwrap()
    }

    fn download<T: El>(&self, d: &DeviceMemory<T>) -> Vec<T> {
        self.exec.copy_to_vec(d).unwrap()
    }
}

fn random<T: El>(r: &mut StdRng) -> T {
    T::of(r.random_range(-1.0..1.0))
}

/// `n` elements `inc` apart, NaN-poisoned in between.
fn strided<T: El>(r: &mut StdRng, n: usize, inc: usize) -> Vec<T> {
    let mut v = vec![T::poison(); ((n.max(1) - 1) * inc + 1).max(1)];
    for i in 0..n {
        v[i * inc] = random(r);
    }
    v
}

/// Sizes around the tile and block edges.
fn dim(r: &mut StdRng) -> usize {
    [1, 2, 15, 16, 17, 33, r.random_range(1..60)][r.random_range(0..7)]
}

/// Alpha/beta values, edges included.
fn scale(r: &mut StdRng) -> f64 {
    [0.0, 1.0, -1.0, 0.5, r.random_range(-2.0..2.0)][r.random_range(0..5)]
}

/// `full` blocks, or (a third of the time) fewer, down to 1.
fn blocks(r: &mut StdRng, full: u64) -> u32 {
    let full = full.max(1) as u32;
    if r.random_bool(0.33) {
        r.random_range(1..=full)
    } else {
        full
    }
}

/// Bits equal, or within `tol` of `want`; a NaN is never within.
fn close(got: f64, want: f64, tol: f64) -> bool {
    got == want || (got - want).abs() <= tol
}

/// Every element of `got` outside `inside` keeps the bits of `before`.
fn untouched<T: El>(got: &[T], before: &[T], inside: impl Fn(usize) -> bool, what: &str) {
    for (i, (g, b)) in got.iter().zip(before).enumerate() {
        if !inside(i) {
            assert_eq!(
                g.bits(),
                b.bits(),
                "{what}: element {i} (not an output) was written"
            );
        }
    }
}

/// One (strided-batched) GEMM with transposes `ta`, `tb` against the f64 model.
fn gemm_case<T: El>(cx: &mut Canned, r: &mut StdRng, ta: bool, tb: bool) {
    let (m, n) = (dim(r), dim(r));
    let k = [0, 1, dim(r), dim(r), dim(r)][r.random_range(0..5)];
    let batch = [1, 1, 2, 3][r.random_range(0..4)];
    let (alpha, beta) = (T::of(scale(r)), T::of(scale(r)));
    let (ar, ac) = if ta { (k, m) } else { (m, k) };
    let (br, bc) = if tb { (n, k) } else { (k, n) };
    let (lda, ldb, ldc) = (
        ar.max(1) + r.random_range(0..3),
        br.max(1) + r.random_range(0..3),
        m + r.random_range(0..3),
    );
    let sa = if batch > 1 && r.random_bool(0.3) {
        0
    } else {
        lda * ac + r.random_range(0..3)
    };
    let sb = ldb * bc + r.random_range(0..2);
    let sc = ldc * n + r.random_range(0..3);
    let reads_ab = alpha.f() != 0.0 && k > 0;
    // A and B hold their matrices with NaN gaps, or one NaN when they must not be read.
    let matrix = |r: &mut StdRng, rows: usize, cols: usize, ld: usize, stride: usize| {
        let len = if reads_ab {
            stride * (batch - 1) + ld * cols
        } else {
            1
        };
        let mut v = vec![T::poison(); len.max(1)];
        if reads_ab {
            for z in 0..batch {
                for j in 0..cols {
                    for i in 0..rows {
                        v[z * stride + i + j * ld] = random(r);
                    }
                }
            }
        }
        v
    };
    let a = matrix(r, ar, ac, lda, sa);
    let b = matrix(r, br, bc, ldb, sb);
    let inside = |idx: usize| idx / sc < batch && idx % sc < ldc * n && idx % sc % ldc < m;
    let c: Vec<T> = (0..sc * batch)
        .map(|idx| {
            if inside(idx) && beta.f() != 0.0 {
                random(r)
            } else {
                T::poison()
            }
        })
        .collect();
    let (da, db, dc) = (cx.upload(&a), cx.upload(&b), cx.upload(&c));
    let grid = [
        blocks(r, (m as u64).div_ceil(TILE)),
        blocks(r, (n as u64).div_ceil(TILE)),
        blocks(r, batch as u64),
    ];
    let what = format!(
        "{} gemm_{} ta={ta} tb={tb} m={m} n={n} k={k} batch={batch} α={alpha:?} β={beta:?} \
         ld=({lda},{ldb},{ldc}) strides=({sa},{sb},{sc}) grid={grid:?}",
        cx.opt,
        T::SUFFIX
    );
    let args = ArgList::new()
        .arg(da.ptr())
        .arg(db.ptr())
        .arg(dc.ptr())
        .arg(m as u64)
        .arg(n as u64)
        .arg(k as u64)
        .arg(lda as u64)
        .arg(ldb as u64)
        .arg(ldc as u64)
        .arg(sa as u64)
        .arg(sb as u64)
        .arg(sc as u64)
        .arg(batch as u64)
        .arg(u32::from(ta))
        .arg(u32::from(tb))
        .arg(alpha.f())
        .arg(beta.f());
    let name = format!("se_blas_gemm_{}", T::SUFFIX);
    cx.run(&name, [TILE as u32, TILE as u32, 1], grid, args);
    let got = cx.download(&dc);
    untouched(&got, &c, inside, &what);
    let op_a = |z: usize, i: usize, p: usize| {
        let at = if ta { p + i * lda } else { i + p * lda };
        a[z * sa + at].f()
    };
    let op_b = |z: usize, p: usize, j: usize| {
        let at = if tb { j + p * ldb } else { p + j * ldb };
        b[z * sb + at].f()
    };
    for z in 0..batch {
        for j in 0..n {
            for i in 0..m {
                let at = z * sc + i + j * ldc;
                let (mut dot, mut mag) = (0.0, 0.0);
                if reads_ab {
                    for p in 0..k {
                        let v = op_a(z, i, p) * op_b(z, p, j);
                        dot += v;
                        mag += v.abs();
                    }
                }
                let old = if beta.f() != 0.0 {
                    beta.f() * c[at].f()
                } else {
                    0.0
                };
                let want = alpha.f() * dot + old;
                let tol = 4.0 * T::EPS * (k as f64 + 3.0) * (alpha.f().abs() * mag + old.abs());
                let g = got[at].f();
                assert!(
                    close(g, want, tol),
                    "{what}: C[{z}]({i},{j}) = {g} vs {want}"
                );
            }
        }
    }
}

fn gemm_all<T: El>(cx: &mut Canned, r: &mut StdRng) {
    for ta in [false, true] {
        for tb in [false, true] {
            for _ in 0..4 {
                gemm_case::<T>(cx, r, ta, tb);
            }
        }
    }
}

#[test]
fn gemm_kernels_match_f64_loops() {
    for (opt, ptx) in CANNED {
        let mut r = rng(&format!("gemm_kernels_match_f64_loops_{opt}"));
        let mut cx = Canned::new(opt, ptx);
        gemm_all::<f32>(&mut cx, &mut r);
        gemm_all::<f64>(&mut cx, &mut r);
    }
}

/// One GEMV (`trans`: `y = alpha·Aᵀ·x + beta·y`) against the f64 model. Without transpose the
/// kernel sums each row in column order in f64, as the model does, so the bits must agree.
fn gemv_case<T: El>(cx: &mut Canned, r: &mut StdRng, trans: bool) {
    let (m, n) = (dim(r) + r.random_range(0..300), dim(r));
    let (m, n) = if r.random_bool(0.5) { (m, n) } else { (n, m) };
    let (alpha, beta) = (T::of(scale(r)), T::of(scale(r)));
    let lda = m + r.random_range(0..3);
    let (incx, incy) = (r.random_range(1..4), r.random_range(1..4));
    let (lx, ly) = if trans { (m, n) } else { (n, m) };
    let reads = alpha.f() != 0.0;
    let a: Vec<T> = if reads {
        (0..lda * n)
            .map(|i| if i % lda < m { random(r) } else { T::poison() })
            .collect()
    } else {
        vec![T::poison()]
    };
    let x = if reads {
        strided(r, lx, incx)
    } else {
        vec![T::poison()]
    };
    let mut y = strided::<T>(r, ly, incy);
    if beta.f() == 0.0 {
        y.fill(T::poison());
    }
    let (da, dx, dy) = (cx.upload(&a), cx.upload(&x), cx.upload(&y));
    let (name, full) = if trans {
        ("gemv_t", (n as u64).div_ceil(GEMV_T_PER_BLOCK))
    } else {
        ("gemv_n", (m as u64).div_ceil(u64::from(THREADS)))
    };
    let grid = [blocks(r, full), 1, 1];
    let what = format!(
        "{} {name}_{} m={m} n={n} lda={lda} incx={incx} incy={incy} α={alpha:?} β={beta:?} \
         grid={grid:?}",
        cx.opt,
        T::SUFFIX
    );
    let args = ArgList::new()
        .arg(da.ptr())
        .arg(dx.ptr())
        .arg(dy.ptr())
        .arg(m as u64)
        .arg(n as u64)
        .arg(lda as u64)
        .arg(incx as u64)
        .arg(incy as u64)
        .arg(alpha.f())
        .arg(beta.f());
    cx.run(
        &format!("se_blas_{name}_{}", T::SUFFIX),
        [THREADS, 1, 1],
        grid,
        args,
    );
    let got = cx.download(&dy);
    untouched(&got, &y, |i| i.is_multiple_of(incy) && i / incy < ly, &what);
    for o in 0..ly {
        let (mut acc, mut mag) = (0.0f64, 0.0f64);
        if reads {
            for l in 0..lx {
                let av = if trans {
                    a[l + o * lda]
                } else {
                    a[o + l * lda]
                };
                let v = av.f() * x[l * incx].f();
                acc += v;
                mag += v.abs();
            }
        }
        let old = if beta.f() != 0.0 {
            beta.f() * y[o * incy].f()
        } else {
            0.0
        };
        let want = T::of(alpha.f() * acc + old);
        let g = got[o * incy];
        if trans {
            let tol = 4.0 * T::EPS * (alpha.f().abs() * mag + old.abs()) + 4.0 * T::EPS;
            assert!(
                close(g.f(), want.f(), tol),
                "{what}: y[{o}] = {g:?} vs {want:?}"
            );
        } else {
            assert_eq!(g.bits(), want.bits(), "{what}: y[{o}] = {g:?} vs {want:?}");
        }
    }
}

#[test]
fn gemv_kernels_match_f64_loops() {
    for (opt, ptx) in CANNED {
        let mut r = rng(&format!("gemv_kernels_match_f64_loops_{opt}"));
        let mut cx = Canned::new(opt, ptx);
        for trans in [false, true] {
            for _ in 0..6 {
                gemv_case::<f32>(&mut cx, &mut r, trans);
                gemv_case::<f64>(&mut cx, &mut r, trans);
            }
        }
    }
}

/// axpy, scal, copy (bit-exact: the kernels compute what the host's loops compute), then dot,
/// nrm2 and asum (one block, f64 sums in another order: within a bound) into a result
/// surrounded by poison.
fn level1_case<T: El>(cx: &mut Canned, r: &mut StdRng) {
    let n = [1, 2, 255, 256, 257, 1000, r.random_range(1..3000)][r.random_range(0..7)];
    let (incx, incy) = (r.random_range(1..4), r.random_range(1..4));
    let alpha = T::of(scale(r));
    let x = strided::<T>(r, n, incx);
    let y = strided::<T>(r, n, incy);
    let grid = [blocks(r, (n as u64).div_ceil(u64::from(THREADS))), 1, 1];
    let what = format!(
        "{} {} n={n} incx={incx} incy={incy} α={alpha:?} grid={grid:?}",
        cx.opt,
        T::SUFFIX
    );
    let sfx = T::SUFFIX;
    let on_x = |i: usize| i.is_multiple_of(incx) && i / incx < n;
    let on_y = |i: usize| i.is_multiple_of(incy) && i / incy < n;

    // axpy: y = (T)((double)(T)alpha * x + y)
    let (dx, dy) = (cx.upload(&x), cx.upload(&y));
    let args = ArgList::new()
        .arg(dx.ptr())
        .arg(dy.ptr())
        .arg(n as u64)
        .arg(incx as u64)
        .arg(incy as u64)
        .arg(alpha.f());
    cx.run(&format!("se_blas_axpy_{sfx}"), [THREADS, 1, 1], grid, args);
    let got = cx.download(&dy);
    untouched(&got, &y, on_y, &format!("axpy {what}"));
    for i in 0..n {
        let want = T::of(alpha.f() * x[i * incx].f() + y[i * incy].f());
        assert_eq!(got[i * incy].bits(), want.bits(), "axpy {what}: [{i}]");
    }
    untouched(&cx.download(&dx), &x, |_| false, &format!("axpy {what}: x"));

    // scal: x = (T)(alpha * x)
    let args = ArgList::new()
        .arg(dx.ptr())
        .arg(n as u64)
        .arg(incx as u64)
        .arg(alpha.f());
    cx.run(&format!("se_blas_scal_{sfx}"), [THREADS, 1, 1], grid, args);
    let got = cx.download(&dx);
    untouched(&got, &x, on_x, &format!("scal {what}"));
    for i in 0..n {
        let want = T::of(alpha.f() * x[i * incx].f());
        assert_eq!(got[i * incx].bits(), want.bits(), "scal {what}: [{i}]");
    }

    // copy into a poisoned y
    let dx = cx.upload(&x);
    let poisoned = vec![T::poison(); y.len()];
    let dy = cx.upload(&poisoned);
    let args = ArgList::new()
        .arg(dx.ptr())
        .arg(dy.ptr())
        .arg(n as u64)
        .arg(incx as u64)
        .arg(incy as u64);
    cx.run(&format!("se_blas_copy_{sfx}"), [THREADS, 1, 1], grid, args);
    let got = cx.download(&dy);
    untouched(&got, &poisoned, on_y, &format!("copy {what}"));
    for i in 0..n {
        assert_eq!(
            got[i * incy].bits(),
            x[i * incx].bits(),
            "copy {what}: [{i}]"
        );
    }

    // dot, nrm2, asum, each into element 1 of a poisoned triple
    let xs: Vec<f64> = (0..n).map(|i| x[i * incx].f()).collect();
    let ys: Vec<f64> = (0..n).map(|i| y[i * incy].f()).collect();
    let dy = cx.upload(&y);
    let bound = |mag: f64| 4.0 * T::EPS * (n as f64 + 2.0) * mag;
    let reduce = |cx: &mut Canned, op: &str, args: ArgList, res: &DeviceMemory<T>| {
        cx.run(
            &format!("se_blas_{op}_{sfx}"),
            [THREADS, 1, 1],
            [1, 1, 1],
            args,
        );
        let got = cx.download(res);
        untouched(&got, &[T::poison(); 3], |i| i == 1, &format!("{op} {what}"));
        got[1].f()
    };
    let res = cx.upload(&[T::poison(); 3]);
    let r1 = res.slice(1..2).unwrap().ptr();
    let args = ArgList::new()
        .arg(dx.ptr())
        .arg(dy.ptr())
        .arg(r1)
        .arg(n as u64)
        .arg(incx as u64)
        .arg(incy as u64);
    let g = reduce(cx, "dot", args, &res);
    let want: f64 = xs.iter().zip(&ys).map(|(a, b)| a * b).sum();
    let mag: f64 = xs.iter().zip(&ys).map(|(a, b)| (a * b).abs()).sum();
    assert!(close(g, want, bound(mag)), "dot {what}: {g} vs {want}");
    for op in ["nrm2", "asum"] {
        let res = cx.upload(&[T::poison(); 3]);
        let r1 = res.slice(1..2).unwrap().ptr();
        let args = ArgList::new()
            .arg(dx.ptr())
            .arg(r1)
            .arg(n as u64)
            .arg(incx as u64);
        let g = reduce(cx, op, args, &res);
        let want = if op == "nrm2" {
            xs.iter().map(|a| a * a).sum::<f64>().sqrt()
        } else {
            xs.iter().map(|a| a.abs()).sum()
        };
        assert!(close(g, want, bound(want)), "{op} {what}: {g} vs {want}");
    }
}

#[test]
fn level1_kernels_match_f64_loops() {
    for (opt, ptx) in CANNED {
        let mut r = rng(&format!("level1_kernels_match_f64_loops_{opt}"));
        let mut cx = Canned::new(opt, ptx);
        for _ in 0..5 {
            level1_case::<f32>(&mut cx, &mut r);
            level1_case::<f64>(&mut cx, &mut r);
        }
    }
}

/// nrm2 of `xs` (stride 1) by the kernel.
fn nrm2<T: El>(cx: &mut Canned, xs: &[T]) -> T {
    let dx = cx.upload(xs);
    let res = cx.upload(&[T::poison()]);
    let args = ArgList::new()
        .arg(dx.ptr())
        .arg(res.ptr())
        .arg(xs.len() as u64)
        .arg(1u64);
    let name = format!("se_blas_nrm2_{}", T::SUFFIX);
    cx.run(&name, [THREADS, 1, 1], [1, 1, 1], args);
    cx.download(&res)[0]
}

/// √(Σ x²) without overflow or underflow: scaled by the largest |x|.
fn scaled_norm(xs: &[f64]) -> f64 {
    let s = xs.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    if s == 0.0 {
        return 0.0;
    }
    s * xs.iter().map(|x| (x / s) * (x / s)).sum::<f64>().sqrt()
}

/// nrm2 neither overflows nor underflows where the plain formula would (f32: squares in
/// double; f64: a running scale), and gives NaN for any NaN, else ∞ for any ∞.
#[test]
fn nrm2_kernels_survive_extreme_magnitudes() {
    for (opt, ptx) in CANNED {
        let mut r = rng(&format!("nrm2_kernels_survive_extreme_magnitudes_{opt}"));
        let mut cx = Canned::new(opt, ptx);
        for (mag, n) in [
            (1e200, 700),
            (1e-200, 700),
            (1e300, 3),
            (1e-310, 5),
            (1.0, 513),
        ] {
            let xs: Vec<f64> = (0..n).map(|_| r.random_range(-1.0..1.0) * mag).collect();
            let (got, want) = (nrm2(&mut cx, &xs), scaled_norm(&xs));
            let tol = 8.0 * f64::EPSILON * n as f64 * want;
            assert!(close(got, want, tol), "{opt} dnrm2 ~{mag}: {got} vs {want}");
        }
        for (mag, n) in [(1e30f32, 600), (1e-30, 600), (1e38, 4), (1e-44, 4)] {
            let xs: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0) * mag).collect();
            let wide: Vec<f64> = xs.iter().map(|&x| f64::from(x)).collect();
            let (got, want) = (nrm2(&mut cx, &xs), scaled_norm(&wide) as f32);
            let tol = 4.0 * f64::from(f32::EPSILON) * f64::from(want);
            assert!(
                close(f64::from(got), f64::from(want), tol),
                "{opt} snrm2 ~{mag}: {got} vs {want}"
            );
        }
        // Zeros, and the non-finite cases, wherever they sit among the threads' elements.
        assert_eq!(nrm2(&mut cx, &[0.0f64; 300]).to_bits(), 0);
        for at in [0, 1, 255, 256, 299] {
            let mut xs = vec![1e200f64; 300];
            xs[at] = f64::INFINITY;
            assert_eq!(nrm2(&mut cx, &xs), f64::INFINITY, "{opt} ∞ at {at}");
            xs[(at + 7) % 300] = -f64::INFINITY;
            assert_eq!(nrm2(&mut cx, &xs), f64::INFINITY, "{opt} ±∞ at {at}");
            xs[(at + 100) % 300] = f64::NAN;
            assert!(nrm2(&mut cx, &xs).is_nan(), "{opt} NaN with ∞ at {at}");
            let mut xs = vec![0.0f64; 300];
            xs[at] = f64::NAN;
            assert!(nrm2(&mut cx, &xs).is_nan(), "{opt} NaN among zeros at {at}");
            let mut xs = vec![1.0f32; 300];
            xs[at] = f32::INFINITY;
            assert_eq!(nrm2(&mut cx, &xs), f32::INFINITY, "{opt} f32 ∞ at {at}");
            xs[(at + 100) % 300] = f32::NAN;
            assert!(nrm2(&mut cx, &xs).is_nan(), "{opt} f32 NaN at {at}");
        }
    }
}
