//! The backend's built-in BLAS (blas.rs, for drivers without a BLAS library): the launches
//! [`Canned`] makes (kernel choice, argument packing, grids, transposes mapped to flags) run on
//! the host platform's PTX engine against f64 loops, with full grids and grids capped to one
//! block; and over the simulated driver without a library, the fallback is chosen and its
//! kernels are launched in stream order. tests/canned_ptx_blas.rs covers the kernels
//! themselves on many more shapes.

use std::time::Duration;

use super::GpuExecutor;
use super::blas::Canned;
use super::mock::{CannedLaunch, MockDriver};
use crate::interface::StreamInterface;
use crate::interface::blas::{GemmCall, GemvCall, Level1Call, Level1Op, Operand};
use crate::{
    BlasScalar, DeviceMemory, MultiKernelLoaderSpec, PlatformManager, StreamExecutor, Transpose,
};

const CANNED: &str = include_str!("../../../kernels/ptx/canned.O3.ptx");

/// What the checks need of `f32` / `f64`.
trait El: BlasScalar + Send + Sync + std::fmt::Debug {
    const EPS: f64;
    fn of(v: f64) -> Self;
    fn poison() -> Self;
    fn bits(self) -> u64;
}
impl El for f32 {
    const EPS: f64 = f32::EPSILON as f64;
    fn of(v: f64) -> Self {
        v as f32
    }
    fn poison() -> Self {
        f32::from_bits(0x7FBA_DBAD)
    }
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
}
impl El for f64 {
    const EPS: f64 = f64::EPSILON;
    fn of(v: f64) -> Self {
        v
    }
    fn poison() -> Self {
        f64::from_bits(0x7FF7_BADB_ADBA_DBAD)
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .unwrap()
}

/// `n` values in [-1, 1) (xorshift, seeded).
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn operand<T: bytemuck::Pod>(m: &DeviceMemory<T>) -> Operand {
    Operand {
        addr: m.address(),
        len: m.len() as u64,
    }
}

/// Runs `launch` with the built-in kernels loaded on the host executor and grids capped at
/// `max_grid`, on a fresh stream, and waits for it.
fn on_host(
    exec: &StreamExecutor,
    max_grid: [u32; 3],
    launch: impl FnOnce(&Canned<'_>, &dyn StreamInterface) -> crate::Result<()>,
) {
    let iface = exec.interface().clone();
    let load = move |name: &'static str| {
        iface.load_kernel(&MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory(CANNED, name))
    };
    let canned = Canned {
        kernel: &load,
        max_grid,
    };
    let mut s = exec.create_stream().unwrap();
    launch(&canned, s.iface()).unwrap();
    s.block_host_until_done().unwrap();
}

/// Grids as the device allows, and capped to one block (the kernels loop over the rest).
const GRIDS: [[u32; 3]; 2] = [[u32::MAX, 65535, 65535], [1, 1, 1]];

/// `v` as `T`, with the positions `keep` rejects set to the poison NaN.
fn poisoned<T: El>(v: &[f64], keep: impl Fn(usize) -> bool) -> Vec<T> {
    (0..v.len())
        .map(|i| if keep(i) { T::of(v[i]) } else { T::poison() })
        .collect()
}

fn gemm_case<T: El>(exec: &StreamExecutor, ta: Transpose, tb: Transpose, beta: f64) {
    let (m, n, k, batch) = (19usize, 21usize, 17usize, 2usize);
    let (ar, ac) = if ta.is_transposed() { (k, m) } else { (m, k) };
    let (br, bc) = if tb.is_transposed() { (n, k) } else { (k, n) };
    let (lda, ldb, ldc) = (ar + 2, br + 1, m + 3);
    let (sa, sb, sc) = (lda * ac + 1, ldb * bc, ldc * n + 2);
    let alpha = -0.75;
    let a = poisoned::<T>(&values(1, sa * batch), |i| {
        i % sa % lda < ar && i % sa < lda * ac
    });
    let b = poisoned::<T>(&values(2, sb * batch), |i| i % ldb < br);
    let inside = |i: usize| i % sc < ldc * n && i % sc % ldc < m;
    let c = poisoned::<T>(&values(3, sc * batch), |i| inside(i) && beta != 0.0);
    let at = |v: &[T], i: usize| -> f64 { v[i].into() };
    for max_grid in GRIDS {
        let (da, db) = (
            exec.copy_to_device(&a).unwrap(),
            exec.copy_to_device(&b).unwrap(),
        );
        let dc = exec.copy_to_device(&c).unwrap();
        let call = GemmCall {
            elem: T::ELEM,
            trans_a: ta,
            trans_b: tb,
            m: m as u64,
            n: n as u64,
            k: k as u64,
            alpha,
            a: operand(&da),
            lda: lda as u64,
            b: operand(&db),
            ldb: ldb as u64,
            beta,
            c: operand(&dc),
            ldc: ldc as u64,
            batch: batch as u64,
            stride_a: sa as u64,
            stride_b: sb as u64,
            stride_c: sc as u64,
        };
        // SAFETY: every operand is a whole allocation of this executor that covers the extent
        // the call touches (the strides and leading dimensions above).
        on_host(exec, max_grid, |k, s| unsafe { k.gemm(s, &call) });
        let got = exec.copy_to_vec(&dc).unwrap();
        let what = format!(
            "{:?} gemm {ta:?} {tb:?} β={beta} grid≤{max_grid:?}",
            T::ELEM
        );
        for (i, (g, old)) in got.iter().zip(&c).enumerate() {
            if !inside(i) {
                assert_eq!(g.bits(), old.bits(), "{what}: gap {i} written");
                continue;
            }
            let (z, i_, j) = (i / sc, i % sc % ldc, i % sc / ldc);
            let (mut dot, mut mag) = (0.0, 0.0);
            for p in 0..k {
                let ai = if ta.is_transposed() {
                    p + i_ * lda
                } else {
                    i_ + p * lda
                };
                let bi = if tb.is_transposed() {
                    j + p * ldb
                } else {
                    p + j * ldb
                };
                let v = at(&a, z * sa + ai) * at(&b, z * sb + bi);
                dot += v;
                mag += v.abs();
            }
            let prev = if beta != 0.0 { beta * at(&c, i) } else { 0.0 };
            let want = alpha * dot + prev;
            let g: f64 = (*g).into();
            let tol = 4.0 * T::EPS * (k as f64 + 3.0) * (mag + prev.abs());
            assert!(
                (g - want).abs() <= tol,
                "{what}: C[{z}]({i_},{j}) {g} vs {want}"
            );
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the host platform reads /proc; the PTX engine is too slow under Miri"
)]
fn built_in_gemm_launches_match_f64_loops_on_the_host_ptx_engine() {
    let exec = host();
    let pairs = [
        (Transpose::None, Transpose::ConjugateTranspose),
        (Transpose::Transpose, Transpose::None),
        (Transpose::ConjugateTranspose, Transpose::Transpose),
    ];
    for (ta, tb) in pairs {
        for beta in [0.0, 0.5] {
            gemm_case::<f32>(&exec, ta, tb, beta);
            gemm_case::<f64>(&exec, ta, tb, beta);
        }
    }
}

fn gemv_case<T: El>(exec: &StreamExecutor, trans: Transpose, beta: f64) {
    let (m, n, lda, incx, incy) = (300usize, 13usize, 302usize, 2usize, 3usize);
    let (lx, ly) = if trans.is_transposed() {
        (m, n)
    } else {
        (n, m)
    };
    let alpha = 1.5;
    let a = poisoned::<T>(&values(4, lda * n), |i| i % lda < m);
    let x = poisoned::<T>(&values(5, (lx - 1) * incx + 1), |i| i.is_multiple_of(incx));
    let y = poisoned::<T>(&values(6, (ly - 1) * incy + 1), |i| {
        i.is_multiple_of(incy) && beta != 0.0
    });
    for max_grid in GRIDS {
        let (da, dx) = (
            exec.copy_to_device(&a).unwrap(),
            exec.copy_to_device(&x).unwrap(),
        );
        let dy = exec.copy_to_device(&y).unwrap();
        let call = GemvCall {
            elem: T::ELEM,
            trans,
            m: m as u64,
            n: n as u64,
            alpha,
            a: operand(&da),
            lda: lda as u64,
            x: operand(&dx),
            incx: incx as u64,
            beta,
            y: operand(&dy),
            incy: incy as u64,
        };
        // SAFETY: every operand is a whole allocation covering the extent of the call.
        on_host(exec, max_grid, |k, s| unsafe { k.gemv(s, &call) });
        let got = exec.copy_to_vec(&dy).unwrap();
        let what = format!("{:?} gemv {trans:?} β={beta} grid≤{max_grid:?}", T::ELEM);
        for (i, (g, old)) in got.iter().zip(&y).enumerate() {
            if !i.is_multiple_of(incy) {
                assert_eq!(g.bits(), old.bits(), "{what}: gap {i} written");
                continue;
            }
            let o = i / incy;
            let (mut dot, mut mag) = (0.0, 0.0);
            for l in 0..lx {
                let ai = if trans.is_transposed() {
                    l + o * lda
                } else {
                    o + l * lda
                };
                let v = Into::<f64>::into(a[ai]) * Into::<f64>::into(x[l * incx]);
                dot += v;
                mag += v.abs();
            }
            let prev = if beta != 0.0 {
                beta * Into::<f64>::into(*old)
            } else {
                0.0
            };
            let want = alpha * dot + prev;
            let g: f64 = (*g).into();
            let tol = 4.0 * T::EPS * (mag + prev.abs() + 1.0);
            assert!((g - want).abs() <= tol, "{what}: y[{o}] {g} vs {want}");
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the host platform reads /proc; the PTX engine is too slow under Miri"
)]
fn built_in_gemv_launches_match_f64_loops_on_the_host_ptx_engine() {
    let exec = host();
    for trans in [
        Transpose::None,
        Transpose::Transpose,
        Transpose::ConjugateTranspose,
    ] {
        for beta in [0.0, -2.0] {
            gemv_case::<f32>(&exec, trans, beta);
            gemv_case::<f64>(&exec, trans, beta);
        }
    }
}

fn level1_case<T: El>(exec: &StreamExecutor, op: Level1Op) {
    let (n, incx, incy) = (300usize, 2usize, 3usize);
    let x = poisoned::<T>(&values(7, (n - 1) * incx + 1), |i| i.is_multiple_of(incx));
    let y = poisoned::<T>(&values(8, (n - 1) * incy + 1), |i| i.is_multiple_of(incy));
    let (xs, ys): (Vec<f64>, Vec<f64>) = (0..n)
        .map(|i| (x[i * incx].into(), y[i * incy].into()))
        .unzip();
    for max_grid in GRIDS {
        let (dx, dy) = (
            exec.copy_to_device(&x).unwrap(),
            exec.copy_to_device(&y).unwrap(),
        );
        let dr = exec.copy_to_device(&[T::poison(); 3]).unwrap();
        let reduction = matches!(op, Level1Op::Dot | Level1Op::Nrm2 | Level1Op::Asum);
        let call = Level1Call {
            elem: T::ELEM,
            op,
            n: n as u64,
            x: operand(&dx),
            incx: incx as u64,
            y: (!matches!(op, Level1Op::Scal { .. } | Level1Op::Nrm2 | Level1Op::Asum))
                .then(|| operand(&dy)),
            incy: incy as u64,
            result: reduction.then(|| Operand {
                addr: dr.slice(1..2).unwrap().address(),
                len: 1,
            }),
        };
        // SAFETY: x and y are whole allocations covering n elements at their increments; the
        // result is one element inside `dr`.
        on_host(exec, max_grid, |k, s| unsafe { k.level1(s, &call) });
        let what = format!("{:?} {op:?} grid≤{max_grid:?}", T::ELEM);
        let (gx, gy, gr) = (
            exec.copy_to_vec(&dx).unwrap(),
            exec.copy_to_vec(&dy).unwrap(),
            exec.copy_to_vec(&dr).unwrap(),
        );
        // Each output against its model; everything else keeps its bits.
        let (mut want_x, mut want_y) = (x.clone(), y.clone());
        let mut want_r = None;
        match op {
            Level1Op::Axpy { alpha } => (0..n).for_each(|i| {
                want_y[i * incy] = T::of(T::of(alpha).into() * xs[i] + ys[i]);
            }),
            Level1Op::Scal { alpha } => {
                (0..n).for_each(|i| want_x[i * incx] = T::of(alpha * xs[i]))
            }
            Level1Op::Copy => (0..n).for_each(|i| want_y[i * incy] = x[i * incx]),
            Level1Op::Dot => want_r = Some(xs.iter().zip(&ys).map(|(a, b)| a * b).sum::<f64>()),
            Level1Op::Nrm2 => want_r = Some(xs.iter().map(|a| a * a).sum::<f64>().sqrt()),
            Level1Op::Asum => want_r = Some(xs.iter().map(|a| a.abs()).sum::<f64>()),
        }
        let bits = |v: &[T]| v.iter().map(|e| e.bits()).collect::<Vec<_>>();
        assert_eq!(bits(&gx), bits(&want_x), "{what}: x");
        assert_eq!(bits(&gy), bits(&want_y), "{what}: y");
        assert_eq!(gr[0].bits(), T::poison().bits(), "{what}: result[-1]");
        assert_eq!(gr[2].bits(), T::poison().bits(), "{what}: result[+1]");
        match want_r {
            Some(want) => {
                let g: f64 = gr[1].into();
                let tol = 4.0 * T::EPS * (n as f64) * want.abs().max(1.0);
                assert!((g - want).abs() <= tol, "{what}: {g} vs {want}");
            }
            None => assert_eq!(gr[1].bits(), T::poison().bits(), "{what}: result"),
        }
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the host platform reads /proc; the PTX engine is too slow under Miri"
)]
fn built_in_level1_launches_match_f64_loops_on_the_host_ptx_engine() {
    let exec = host();
    for op in [
        Level1Op::Axpy { alpha: -0.5 },
        Level1Op::Scal { alpha: 3.0 },
        Level1Op::Copy,
        Level1Op::Dot,
        Level1Op::Nrm2,
        Level1Op::Asum,
    ] {
        level1_case::<f32>(&exec, op);
        level1_case::<f64>(&exec, op);
    }
}

/// Without a BLAS library the executor still reports BLAS, and each call launches its built-in
/// kernel on the user's stream in order (after a callback that put the stream in deferred
/// mode), with the block shapes the kernels assume. The mock records the launches; the host
/// engine tests above check what they compute.
#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri (the simulated driver's stream threads)"
)]
fn without_a_blas_library_blas_launches_the_built_in_kernels_in_stream_order() {
    let drv = MockDriver::without_blas_library();
    let (mem, log) = (drv.mem.clone(), drv.canned_blas.clone());
    let exec = StreamExecutor::new("mock", 0, GpuExecutor::new(drv).unwrap());
    assert!(exec.interface().blas().is_some());
    let a = exec.copy_to_device(&[1.0f32; 3 * 40]).unwrap();
    let b = exec.copy_to_device(&[1.0f32; 3 * 20]).unwrap();
    let c = exec.copy_to_device(&[0.0f32; 40 * 20]).unwrap();
    let x = exec.copy_to_device(&[1.0f64; 600]).unwrap();
    let y = exec.copy_to_device(&[1.0f64; 600]).unwrap();
    let z = exec.copy_to_device(&[0.0f64; 300]).unwrap();
    let r = exec.copy_to_device(&[0.0f64; 1]).unwrap();
    let (t, ct) = (Transpose::Transpose, Transpose::ConjugateTranspose);
    let mut s = exec.create_stream().unwrap();
    s.then_host_callback(|| std::thread::sleep(Duration::from_millis(20)))
        // C = 0·AB + 1·C leaves C as it is: nothing to launch.
        .then_blas_gemm(t, t, 40, 20, 3, 0.0f32, &a, 3, &b, 20, 1.0, &c, 40)
        .then_blas_gemm(
            ct,
            Transpose::None,
            40,
            20,
            3,
            1.0f32,
            &a,
            3,
            &b,
            3,
            0.0,
            &c,
            40,
        )
        .then_blas_gemv(t, 20, 30, 1.0f64, &x, 20, &y, 1, 0.0, &z, 1)
        .then_blas_gemv(Transpose::None, 300, 2, 1.0f64, &x, 300, &y, 1, 0.0, &z, 1)
        .then_blas_axpy(600, 2.0f64, &x, 1, &y, 1)
        .then_blas_scal(600, 2.0f64, &x, 1)
        .then_blas_copy(600, &x, 1, &y, 1)
        .then_blas_dot(600, &x, 1, &y, 1, &r)
        .then_blas_nrm2(600, &x, 1, &r)
        .then_blas_asum(600, &x, 1, &r)
        .block_host_until_done()
        .unwrap();
    let (tile, block) = ([16, 16, 1], [256, 1, 1]);
    let want: Vec<CannedLaunch> = [
        ("se_blas_gemm_f32", [3, 2, 1], tile),
        ("se_blas_gemv_t_f64", [4, 1, 1], block),
        ("se_blas_gemv_n_f64", [2, 1, 1], block),
        ("se_blas_axpy_f64", [3, 1, 1], block),
        ("se_blas_scal_f64", [3, 1, 1], block),
        ("se_blas_copy_f64", [3, 1, 1], block),
        ("se_blas_dot_f64", [1, 1, 1], block),
        ("se_blas_nrm2_f64", [1, 1, 1], block),
        ("se_blas_asum_f64", [1, 1, 1], block),
    ]
    .into_iter()
    .map(|(n, g, b)| (n.to_string(), g, b))
    .collect();
    assert_eq!(*log.lock(), want);
    assert!(mem.violations.lock().is_empty());
    // f32 level 1 picks the f32 kernels.
    let xf = exec.copy_to_device(&[1.0f32; 4]).unwrap();
    s.then_blas_asum(4, &xf, 1, xf.slice(0..1).unwrap())
        .block_host_until_done()
        .unwrap();
    assert_eq!(log.lock().last().unwrap().0, "se_blas_asum_f32");
}

/// `Plugin::Builtin` runs the built-in kernels even where the driver's vendor library is
/// installed (the mock's is), and `Plugin::Vendor` where it is not is an error naming it.
#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri (the simulated driver's stream threads)"
)]
fn plugin_builtin_forces_the_built_in_kernels_and_vendor_needs_the_library() {
    use crate::interface::StreamExecutorInterface;
    use crate::types::{Plugin, PluginConfig, PluginFamily};
    let builtin = PluginConfig::default().blas(Plugin::Builtin);
    let drv = MockDriver::new();
    let log = drv.canned_blas.clone();
    let iface = GpuExecutor::with_plugins(drv, &builtin).unwrap();
    let exec = StreamExecutor::new("mock", 0, iface);
    let x = exec.copy_to_device(&[1.0f32; 8]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_blas_scal(8, 2.0f32, &x, 1)
        .block_host_until_done()
        .unwrap();
    assert_eq!(log.lock().last().unwrap().0, "se_blas_scal_f32");
    let status = exec.interface().plugin_status(PluginFamily::Blas).unwrap();
    assert_eq!(status.reason, "Plugin::Builtin chosen");

    let vendor = PluginConfig::default().blas(Plugin::Vendor);
    let err = GpuExecutor::with_plugins(MockDriver::without_blas_library(), &vendor)
        .err()
        .expect("no vendor library")
        .to_string();
    assert!(err.contains("mock BLAS not installed"), "{err}");
    let with_library = GpuExecutor::with_plugins(MockDriver::new(), &vendor).unwrap();
    let status = with_library.plugin_status(PluginFamily::Blas).unwrap();
    assert_eq!(status.implementation, "mock BLAS");
}
