//! The built-in DNN kernels launched directly (no planner): the committed PTX on the host
//! platform's PTX engine and on the CUDA platform (the CPU libcuda), and the same text as OpenCL
//! C on OpenCL (PoCL), where those platforms are available (required when named in
//! `STREAMEXEC_REQUIRE`). Every result is checked against a plain f64 reference written here,
//! on random inputs, with outputs poisoned with NaN first. The elementary functions are checked
//! against Rust's (and `libm`'s erfc) over wide ranges and their special values.
//!
//! The operation checks are in `tests/conv.rs` (convolution), `tests/layers.rs` (the rest)
//! and `tests/agreement.rs` (the whole `DnnSupport` of OpenCL and CUDA against the host backend).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use streamexec_test_support::rand::RngExt;
use streamexec_test_support::rand::rngs::StdRng;

use super::arity;
use crate::interface::KernelInterface;
use crate::types::{BlockDim, LaunchDims, Packable, PackedArg, ThreadDim};
use crate::{DeviceMemory, MultiKernelLoaderSpec, PlatformManager, StreamExecutor};

mod agreement;
mod conv;
mod layers;

const DNN_PTX: &str = include_str!("../../../kernels/ptx/dnn.O3.ptx");

/// What the checks need of `f32` / `f64`.
pub(super) trait El: bytemuck::Pod + Send + Sync + std::fmt::Debug {
    const EPS: f64;
    const F64: bool;
    const SUF: &'static str;
    fn of(v: f64) -> Self;
    fn get(self) -> f64;
    fn poison() -> Self;
}
impl El for f32 {
    const EPS: f64 = f32::EPSILON as f64;
    const F64: bool = false;
    const SUF: &'static str = "f32";
    fn of(v: f64) -> Self {
        v as f32
    }
    fn get(self) -> f64 {
        self.into()
    }
    fn poison() -> Self {
        streamexec_test_support::POISON_F32
    }
}
impl El for f64 {
    const EPS: f64 = f64::EPSILON;
    const F64: bool = true;
    const SUF: &'static str = "f64";
    fn of(v: f64) -> Self {
        v
    }
    fn get(self) -> f64 {
        self
    }
    fn poison() -> Self {
        streamexec_test_support::POISON_F64
    }
}

/// One kernel argument: a buffer (pointer and offset 0), or a scalar.
pub(super) enum A<'a, T: bytemuck::Pod> {
    B(&'a DeviceMemory<T>),
    U(u64),
    I(i64),
    W(u32),
    /// A scalar of the kernel's precision.
    F(f64),
}

/// A platform the kernels run on, with its loaded kernels.
pub(super) struct Rig {
    pub exec: StreamExecutor,
    opencl: bool,
    kernels: Mutex<HashMap<String, Arc<dyn KernelInterface>>>,
}

impl Rig {
    fn new(exec: StreamExecutor, opencl: bool) -> Rig {
        Rig {
            exec,
            opencl,
            kernels: Mutex::new(HashMap::new()),
        }
    }

    fn kernel(&self, name: &str, fp64: bool) -> Arc<dyn KernelInterface> {
        if let Some(k) = self.kernels.lock().get(name) {
            return k.clone();
        }
        let spec = if self.opencl {
            #[cfg(feature = "opencl")]
            {
                MultiKernelLoaderSpec::new(arity(name))
                    .add_opencl_text_in_memory(super::OPENCL_SOURCE, name)
                    .with_opencl_build_options(super::opencl_options(fp64))
            }
            #[cfg(not(feature = "opencl"))]
            unreachable!("no OpenCL rig without the feature {fp64}")
        } else {
            MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory(DNN_PTX, name)
        };
        let k = self
            .exec
            .interface()
            .load_kernel(&spec)
            .unwrap_or_else(|e| panic!("loading {name}: {e}"));
        self.kernels.lock().insert(name.to_string(), k.clone());
        k
    }

    /// Runs `se_dnn_<base>_<T>` over `work` items (at most 16 blocks of 64 threads, so the
    /// grid-stride loops run) and waits for it.
    pub fn run<T: El>(&self, base: &str, work: u64, args: &[A<T>]) {
        let name = format!("se_dnn_{base}_{}", T::SUF);
        let kernel = self.kernel(&name, T::F64);
        let mut packed: Vec<PackedArg> = Vec::new();
        for a in args {
            match a {
                A::B(m) => {
                    let size = std::mem::size_of::<T>();
                    packed.push(PackedArg::backend_pointer(
                        m.address(),
                        (m.len() * size) as u64,
                        size,
                        "dnn operand",
                    ));
                    packed.push(0u64.pack());
                }
                A::U(v) => packed.push(v.pack()),
                A::I(v) => packed.push(v.pack()),
                A::W(v) => packed.push(v.pack()),
                A::F(v) => packed.push(T::of(*v).pack()),
            }
        }
        assert_eq!(packed.len(), arity(&name), "{name}'s argument count");
        let dims = LaunchDims {
            threads: ThreadDim::new(64, 1, 1),
            blocks: BlockDim::new(work.div_ceil(64).clamp(1, 16) as u32, 1, 1),
            dynamic_shared_bytes: 0,
            cooperative: false,
        };
        let mut s = self.exec.create_stream().unwrap();
        // SAFETY: every pointer is a whole allocation of this executor, and the tests size
        // each for the elements its tensor's sizes and strides address.
        unsafe { s.iface().launch(&kernel, &dims, &packed) }.unwrap();
        s.block_host_until_done()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    /// `data` on the device.
    pub fn up<T: El>(&self, data: &[T]) -> DeviceMemory<T> {
        self.exec.copy_to_device(data).unwrap()
    }

    /// `m` back on the host.
    pub fn down<T: El>(&self, m: &DeviceMemory<T>) -> Vec<T> {
        self.exec.copy_to_vec(m).unwrap()
    }
}

/// The host platform, running the committed PTX on its engine.
pub(super) fn host() -> Rig {
    let exec = PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .unwrap();
    Rig::new(exec, false)
}

/// Platform `name` (`cuda` runs the PTX, `opencl` the OpenCL C), or `None` (with a note)
/// where it is unavailable and not required by `STREAMEXEC_REQUIRE`.
#[allow(dead_code)]
pub(super) fn optional(name: &str) -> Option<Rig> {
    match PlatformManager::platform_with_name(name).and_then(|p| p.executor_for_device(0)) {
        Ok(e) => Some(Rig::new(e, name == "opencl")),
        Err(e) => {
            let required = std::env::var("STREAMEXEC_REQUIRE")
                .is_ok_and(|v| v.split(',').any(|p| p.trim() == name));
            assert!(!required, "{name} is required but unavailable: {e}");
            eprintln!("skipping the {name} DNN kernel checks: {e}");
            None
        }
    }
}

/// `n` values uniform in `[lo, hi)`.
pub(super) fn uniform(rng: &mut StdRng, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// Asserts `|got − want| ≤ tol` with a message naming `what` and the index.
#[track_caller]
pub(super) fn close(what: &str, i: usize, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol || (got.is_nan() && want.is_nan()),
        "{what}[{i}]: got {got:e}, want {want:e} (tolerance {tol:e})"
    );
}

/// Runs `check` on every platform: a test per platform.
macro_rules! on_every_platform {
    ($check:ident: $host:ident, $opencl:ident, $cuda:ident) => {
        #[test]
        #[cfg_attr(miri, ignore = "the PTX engine is too slow under Miri")]
        fn $host() {
            $check(&host());
        }
        #[cfg(feature = "opencl")]
        #[test]
        #[cfg_attr(miri, ignore = "OpenCL is foreign code")]
        fn $opencl() {
            if let Some(rig) = optional("opencl") {
                $check(&rig);
            }
        }
        #[cfg(feature = "cuda")]
        #[test]
        #[cfg_attr(miri, ignore = "the CUDA driver is foreign code")]
        fn $cuda() {
            if let Some(rig) = optional("cuda") {
                $check(&rig);
            }
        }
    };
}
pub(super) use on_every_platform;

// ---- The elementary functions --------------------------------------------------------------

/// The arguments the function checks run: a grid over [lo, hi], random points, and `extra`.
fn points(rng: &mut StdRng, lo: f64, hi: f64, extra: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = (0..=400)
        .map(|i| lo + (hi - lo) * i as f64 / 400.0)
        .collect();
    v.extend(uniform(rng, 400, lo, hi));
    v.extend_from_slice(extra);
    v
}

/// Runs math function `fn_` of the `math` kernel on `xs` (rounded to `T`) and checks each
/// result against `want` (of the rounded argument) to `ulps` relative error, or `abs` absolute.
fn check_fn<T: El>(
    rig: &Rig,
    name: &str,
    fn_: u32,
    xs: &[f64],
    want: fn(f64) -> f64,
    ulps: f64,
    abs: f64,
) {
    let x: Vec<T> = xs.iter().map(|&v| T::of(v)).collect();
    let dx = rig.up(&x);
    let dy = rig.up(&vec![T::poison(); x.len()]);
    rig.run::<T>(
        "math",
        x.len() as u64,
        &[A::B(&dx), A::B(&dy), A::U(x.len() as u64), A::W(fn_)],
    );
    let got = rig.down(&dy);
    let mut worst = 0.0f64;
    for (i, (&xi, &g)) in x.iter().zip(&got).enumerate() {
        let (xi, g) = (xi.get(), g.get());
        let w = T::of(want(xi)).get();
        let what = format!("{name}_{}({xi:e})", T::SUF);
        if w.is_nan() {
            assert!(g.is_nan(), "{what}: got {g:e}, want NaN");
            continue;
        }
        assert!(!g.is_nan(), "{what}: got NaN, want {w:e}");
        if w.is_infinite() || g.is_infinite() {
            assert_eq!(g, w, "{what}");
            continue;
        }
        if w.abs() >= abs {
            worst = worst.max((g - w).abs() / w.abs());
        }
        close(&what, i, g, w, ulps * T::EPS * w.abs() + abs);
    }
    eprintln!(
        "{name}_{}: worst relative error {worst:e} (outside the absolute floor)",
        T::SUF
    );
}

fn math_functions<T: El>(rig: &Rig) {
    let mut rng = streamexec_test_support::rng("dnn math functions");
    let inf = f64::INFINITY;
    let tiny = if T::F64 { 1e-300 } else { 1e-30 };
    // Subnormal results lose relative precision; allow one unit of the smallest normal.
    let sub = if T::F64 {
        f64::MIN_POSITIVE
    } else {
        f32::MIN_POSITIVE.into()
    };
    let (exp_lo, exp_hi) = if T::F64 {
        (-745.0, 709.7)
    } else {
        (-103.0, 88.7)
    };
    let xs = points(
        &mut rng,
        exp_lo,
        exp_hi,
        &[
            0.0,
            -0.0,
            tiny,
            -tiny,
            1e-8,
            -1e-8,
            inf,
            -inf,
            f64::NAN,
            1000.0,
            -1000.0,
        ],
    );
    check_fn::<T>(rig, "exp", 0, &xs, f64::exp, 4.0, sub);
    let mut xs = points(&mut rng, 0.0, 1e4, &[inf, -1.0, -inf, 0.0, f64::NAN, 1.0]);
    xs.extend((0..300).map(|i| 10f64.powf(-300.0 + 2.0 * i as f64 / 300.0 * 300.0)));
    xs.extend(uniform(&mut rng, 200, 0.5, 2.0));
    let ln_tiny = if T::F64 { 5e-324 } else { 1.4e-45 };
    xs.extend([
        ln_tiny,
        1e-310,
        1e-40,
        2.0f64.powi(-1030),
        2.0f64.powi(-140),
    ]);
    // log near 1 is small: its error is relative to |ln x| + ε.
    check_fn::<T>(rig, "log", 1, &xs, f64::ln, 4.0, 2.0 * T::EPS);
    let xs = points(
        &mut rng,
        -30.0,
        30.0,
        &[
            0.0,
            tiny,
            -tiny,
            0.49,
            0.5,
            0.51,
            3.5,
            9.9,
            10.2,
            26.0,
            27.5,
            inf,
            -inf,
            f64::NAN,
        ],
    );
    check_fn::<T>(rig, "erfc", 2, &xs, libm::erfc, 16.0, sub);
    let mut xs = points(
        &mut rng,
        -25.0,
        25.0,
        &[
            0.0,
            tiny,
            -tiny,
            1e-8,
            0.29,
            0.3,
            0.31,
            400.0,
            -400.0,
            inf,
            -inf,
            f64::NAN,
        ],
    );
    xs.extend(uniform(&mut rng, 200, -1.0, 1.0));
    check_fn::<T>(rig, "tanh", 3, &xs, f64::tanh, 6.0, 0.0);
    let xs = points(
        &mut rng,
        -800.0,
        800.0,
        &[
            0.0,
            tiny,
            -tiny,
            30.0,
            -30.0,
            -100.0,
            -700.0,
            inf,
            -inf,
            f64::NAN,
        ],
    );
    check_fn::<T>(
        rig,
        "sigmoid",
        4,
        &xs,
        |x| 1.0 / (1.0 + (-x).exp()),
        6.0,
        sub,
    );
    let xs = points(&mut rng, -0.6, 0.6, &[0.0, tiny, -tiny, 1e-9]);
    check_fn::<T>(rig, "expm1", 5, &xs, f64::exp_m1, 4.0, 0.0);
}

fn math_both(rig: &Rig) {
    math_functions::<f32>(rig);
    math_functions::<f64>(rig);
}

on_every_platform!(math_both: math_functions_on_the_host_ptx_engine, math_functions_on_opencl,
    math_functions_on_cuda);
