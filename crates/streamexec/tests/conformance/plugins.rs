//! Plugin selection (`PluginConfig`): executors keyed by (ordinal, config), the `plugins()`
//! report, `Plugin::Vendor` failing at `executor_for_device_with` with the missing library's
//! name, and the BLAS plugins agreeing with each other on the same inputs. The BLAS tests
//! themselves run on every plugin (`blas::on_each_blas_plugin`).

use rand::RngExt;
use streamexec::{PlatformManager, Plugin, PluginConfig, PluginFamily, StreamExecutor, Transpose};

use crate::common::rng;
use crate::on_each_platform;

/// Vendor plugins that must load (`STREAMEXEC_REQUIRE_PLUGINS=clblast,cublas`): their
/// `Plugin::Vendor` failing fails the tests instead of skipping that plugin.
pub fn required_vendor_plugins() -> Vec<String> {
    std::env::var("STREAMEXEC_REQUIRE_PLUGINS")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Device 0 of every platform under test once per plugin of `family` it has:
/// `Plugin::Builtin`, and `Plugin::Vendor` where the vendor library loads (required where
/// `STREAMEXEC_REQUIRE_PLUGINS` names it, e.g. `clblast`, `cufft`).
pub fn executors_per_plugin(family: PluginFamily) -> Vec<StreamExecutor> {
    let required = required_vendor_plugins();
    let mut out = Vec::new();
    for exec in crate::common::executors() {
        let platform = PlatformManager::platform_with_name(exec.platform_name()).unwrap();
        for choice in [Plugin::Builtin, Plugin::Vendor] {
            match platform.executor_for_device_with(0, PluginConfig::default().with(family, choice))
            {
                Ok(e) => out.push(e),
                Err(e) if choice == Plugin::Vendor => {
                    let text = e.to_string().to_ascii_lowercase();
                    let named = required.iter().find(|r| text.contains(r.as_str()));
                    assert!(named.is_none(), "STREAMEXEC_REQUIRE_PLUGINS: {e}");
                    eprintln!("no vendor {family:?} on {}: {e}", exec.platform_name());
                }
                Err(e) => panic!(
                    "{}: Plugin::Builtin for {family:?}: {e}",
                    exec.platform_name()
                ),
            }
        }
    }
    out
}

/// Runs `test` on each of `executors` (made once per process by the caller, so vendor kernels
/// compile once), naming the platform and what serves `family`.
pub fn on_each(executors: &[StreamExecutor], family: PluginFamily, test: impl Fn(&StreamExecutor)) {
    for exec in executors {
        let report = exec.plugins();
        let served = report.get(family).unwrap();
        eprintln!(
            "-- on platform {} with {family:?} from {}",
            exec.platform_name(),
            served.implementation
        );
        test(exec);
    }
}

fn with(exec: &StreamExecutor, config: PluginConfig) -> streamexec::Result<StreamExecutor> {
    PlatformManager::platform_with_name(exec.platform_name())?.executor_for_device_with(0, config)
}

#[test]
fn executors_are_cached_per_ordinal_and_config() {
    on_each_platform(|exec| {
        let again = with(exec, PluginConfig::default()).unwrap();
        assert!(
            again.same_as(exec),
            "the default config is executor_for_device's"
        );
        assert_eq!(exec.plugin_config(), PluginConfig::default());
        let builtin = PluginConfig::default().blas(Plugin::Builtin);
        let b1 = with(exec, builtin).unwrap();
        let b2 = with(exec, builtin).unwrap();
        assert!(!b1.same_as(exec), "another config gets another executor");
        assert!(b1.same_as(&b2), "the same config gets the live executor");
        assert_eq!(b1.plugin_config(), builtin);
        // Memory of one executor is refused by the other (they are different executors).
        let x = b1.copy_to_device(&[1.0f32; 4]).unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_blas_scal(4, 2.0f32, &x, 1);
        assert!(s.block_host_until_done().is_err());
        // A config no other test keeps alive: a fresh executor once every handle dropped.
        let own = PluginConfig::default()
            .rng(Plugin::Builtin)
            .dnn(Plugin::Builtin);
        let first = with(exec, own).unwrap();
        let id = first.id();
        assert_eq!(with(exec, own).unwrap().id(), id);
        drop(first);
        let fresh = with(exec, own).unwrap();
        assert_ne!(
            fresh.id(),
            id,
            "a fresh executor after every handle dropped"
        );
    });
}

#[test]
fn the_report_has_one_line_per_family_saying_what_and_why() {
    on_each_platform(|exec| {
        let report = exec.plugins();
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        for (line, family) in lines.iter().zip(PluginFamily::ALL) {
            assert!(line.starts_with(&format!("{}: ", family.name())), "{text}");
            let entry = report.get(family).unwrap();
            assert_eq!(entry.choice, Plugin::Auto);
            assert!(
                !entry.implementation.is_empty() && !entry.reason.is_empty(),
                "{text}"
            );
        }
        let dnn = &report.get(PluginFamily::Dnn).unwrap().implementation;
        let want_dnn = match exec.platform_name() {
            "host" => "built-in (im2col + gemm crate)",
            "opencl" | "cuda" => "built-in kernels",
            _ => dnn,
        };
        assert_eq!(dnn, want_dnn, "{text}");
        let blas = &report.get(PluginFamily::Blas).unwrap().implementation;
        let want = match exec.platform_name() {
            "host" => "gemm crate",
            "cuda" => "built-in kernels", // the CPU libcuda has no cuBLAS
            "opencl" if blas.contains("CLBlast") => "CLBlast (libclblast.so.1)",
            "opencl" => "built-in kernels",
            _ => blas,
        };
        assert_eq!(blas, want, "{text}");

        let builtin = with(exec, PluginConfig::default().blas(Plugin::Builtin)).unwrap();
        let b = builtin.plugins();
        let b = b.get(PluginFamily::Blas).unwrap();
        assert_eq!(b.choice, Plugin::Builtin);
        assert_eq!(b.reason, "Plugin::Builtin chosen", "{b}");
        assert!(!b.implementation.contains("CLBlast"), "{b}");
    });
}

#[test]
fn vendor_without_its_library_fails_at_creation_naming_it() {
    on_each_platform(|exec| {
        let vendor = with(exec, PluginConfig::default().blas(Plugin::Vendor));
        match exec.platform_name() {
            "host" => {
                let e = vendor
                    .expect_err("the host platform has no vendor BLAS")
                    .to_string();
                assert!(
                    e.contains("gemm crate") && e.contains("Plugin::Builtin"),
                    "{e}"
                );
            }
            "cuda" => {
                let e = vendor
                    .expect_err("the CPU libcuda has no cuBLAS")
                    .to_string();
                assert!(e.contains("libcublas.so.12"), "{e}");
                let auto = exec.plugins();
                let blas = auto.get(PluginFamily::Blas).unwrap();
                assert!(
                    blas.reason.contains("cuBLAS not found")
                        && blas.reason.contains("using built-in kernels"),
                    "{blas}"
                );
            }
            "opencl" => match vendor {
                Ok(v) => {
                    let r = v.plugins();
                    let blas = r.get(PluginFamily::Blas).unwrap();
                    assert_eq!(blas.implementation, "CLBlast (libclblast.so.1)");
                    assert!(blas.reason.contains("Plugin::Vendor"), "{blas}");
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        !required_vendor_plugins().iter().any(|r| r == "clblast"),
                        "STREAMEXEC_REQUIRE_PLUGINS names clblast: {e}"
                    );
                    assert!(
                        e.contains("libclblast.so.1") && e.contains("libclblast-dev"),
                        "{e}"
                    );
                }
            },
            _ => {}
        }
        fft_vendor_auto_and_builtin(exec);
        dnn_vendor_auto_and_builtin(exec);
        // No platform has a vendor RNG plugin in this build.
        let e = with(exec, PluginConfig::default().rng(Plugin::Vendor))
            .expect_err("RNG: Plugin::Vendor accepted")
            .to_string();
        assert!(e.contains("no vendor RNG plugin"), "{e}");
    });
}

/// DNN under each choice: cuDNN on CUDA where libcudnn loads (never on the CPU libcuda, where
/// `Plugin::Vendor` fails naming libcudnn and `Auto` says why it uses the built-in kernels);
/// no vendor DNN elsewhere in this build; `Plugin::Builtin` honoured.
fn dnn_vendor_auto_and_builtin(exec: &StreamExecutor) {
    let report = exec.plugins();
    let auto = report.get(PluginFamily::Dnn).unwrap();
    let vendor = with(exec, PluginConfig::default().dnn(Plugin::Vendor));
    match (exec.platform_name(), vendor) {
        ("cuda", Ok(v)) => {
            let r = v.plugins();
            let dnn = r.get(PluginFamily::Dnn).unwrap();
            assert_eq!(dnn.implementation, "cuDNN", "{dnn}");
            assert_eq!(auto.implementation, "cuDNN", "{auto}");
        }
        ("cuda", Err(e)) => {
            let e = e.to_string();
            assert!(
                !required_vendor_plugins().iter().any(|r| r == "cudnn"),
                "STREAMEXEC_REQUIRE_PLUGINS names cudnn: {e}"
            );
            assert!(
                e.contains("libcudnn.so") && e.contains("Plugin::Builtin"),
                "{e}"
            );
            assert!(
                auto.reason.contains("cuDNN not found")
                    && auto.reason.contains("using built-in kernels"),
                "{auto}"
            );
            let builtin = with(exec, PluginConfig::default().dnn(Plugin::Builtin)).unwrap();
            let b = builtin.plugins();
            let b = b.get(PluginFamily::Dnn).unwrap().clone();
            assert_eq!(
                (b.implementation.as_str(), b.reason.as_str()),
                ("built-in kernels", "Plugin::Builtin chosen"),
                "{b}"
            );
        }
        (_, Ok(_)) => panic!("{}: DNN Plugin::Vendor accepted", exec.platform_name()),
        (_, Err(e)) => {
            let e = e.to_string();
            assert!(e.contains("no vendor DNN plugin"), "{e}");
        }
    }
}

/// FFT under each choice: what serves it per platform (host: rustfft; opencl: the built-in
/// kernels, no VkFFT in this build; cuda: cuFFT where libcufft loads, else the built-in
/// kernels, which is always the CPU libcuda; hip: none), `Plugin::Vendor` failing at creation
/// naming libcufft where it is absent, and `Plugin::Builtin` honoured.
fn fft_vendor_auto_and_builtin(exec: &StreamExecutor) {
    let report = exec.plugins();
    let auto = report.get(PluginFamily::Fft).unwrap();
    let vendor = with(exec, PluginConfig::default().fft(Plugin::Vendor));
    let builtin = with(exec, PluginConfig::default().fft(Plugin::Builtin)).unwrap();
    let b = builtin.plugins();
    let b = b.get(PluginFamily::Fft).unwrap().clone();
    assert_eq!(b.choice, Plugin::Builtin, "{b}");
    match exec.platform_name() {
        "cuda" => {
            assert_eq!(b.implementation, "built-in kernels", "{b}");
            assert_eq!(b.reason, "Plugin::Builtin chosen", "{b}");
            match vendor {
                // A GPU machine with libcufft.
                Ok(v) => {
                    let r = v.plugins();
                    let fft = r.get(PluginFamily::Fft).unwrap();
                    assert_eq!(fft.implementation, "cuFFT", "{fft}");
                    assert_eq!(auto.implementation, "cuFFT", "{auto}");
                }
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        !required_vendor_plugins().iter().any(|r| r == "cufft"),
                        "STREAMEXEC_REQUIRE_PLUGINS names cufft: {e}"
                    );
                    assert!(
                        e.contains("libcufft") && e.contains("Plugin::Builtin"),
                        "{e}"
                    );
                    assert_eq!(auto.implementation, "built-in kernels", "{auto}");
                    assert!(
                        auto.reason.contains("cuFFT not found")
                            && auto.reason.contains("libcufft")
                            && auto.reason.contains("using built-in kernels"),
                        "{auto}"
                    );
                }
            }
        }
        "host" | "opencl" => {
            let want = if exec.platform_name() == "host" {
                "rustfft"
            } else {
                "built-in kernels"
            };
            assert_eq!(auto.implementation, want, "{auto}");
            assert_eq!(b.implementation, want, "{b}");
            let e = vendor.expect_err("no vendor FFT plugin").to_string();
            assert!(e.contains("no vendor FFT plugin"), "{e}");
        }
        _ => {}
    }
}

/// The vendor and built-in BLAS of one platform compute the same GEMM, GEMV and dot on the
/// same random inputs (up to rounding), and both keep stream order around host callbacks
/// (deferred submission) where a later call reads an earlier one's output.
#[test]
fn vendor_and_builtin_blas_agree_in_stream_order() {
    on_each_platform(|exec| {
        let Ok(vendor) = with(exec, PluginConfig::default().blas(Plugin::Vendor)) else {
            return;
        };
        let builtin = with(exec, PluginConfig::default().blas(Plugin::Builtin)).unwrap();
        let mut r = rng("vendor_and_builtin_blas_agree_in_stream_order");
        let (m, n, k) = (37, 29, 41);
        let a: Vec<f32> = (0..m * k).map(|_| r.random_range(-1.0..1.0)).collect();
        let b: Vec<f32> = (0..k * n).map(|_| r.random_range(-1.0..1.0)).collect();
        let x: Vec<f32> = (0..n).map(|_| r.random_range(-1.0..1.0)).collect();
        let run = |e: &StreamExecutor| -> (Vec<f32>, Vec<f32>, f32) {
            let (da, db, dx) = (
                e.copy_to_device(&a).unwrap(),
                e.copy_to_device(&b).unwrap(),
                e.copy_to_device(&x).unwrap(),
            );
            let dc = e.copy_to_device(&vec![f32::NAN; m * n]).unwrap();
            let dy = e.copy_to_device(&vec![f32::NAN; m]).unwrap();
            let dot = e.copy_to_device(&[f32::NAN]).unwrap();
            let mut s = e.create_stream().unwrap();
            s.then_host_callback(|| std::thread::sleep(std::time::Duration::from_millis(20)))
                .then_blas_gemm(
                    Transpose::None,
                    Transpose::None,
                    m,
                    n,
                    k,
                    1.0f32,
                    &da,
                    m,
                    &db,
                    k,
                    0.0,
                    &dc,
                    m,
                )
                // y = C·x reads the GEMM's output.
                .then_blas_gemv(Transpose::None, m, n, 1.0f32, &dc, m, &dx, 1, 0.0, &dy, 1)
                .then_blas_dot(m, &dy, 1, &dy, 1, &dot)
                .then_host_callback(|| {})
                .block_host_until_done()
                .unwrap();
            (
                e.copy_to_vec(&dc).unwrap(),
                e.copy_to_vec(&dy).unwrap(),
                e.copy_to_vec(&dot).unwrap()[0],
            )
        };
        let (cv, yv, dv) = run(&vendor);
        let (cb, yb, db) = run(&builtin);
        // The f64 reference of y = (A·B)·x.
        let mut y64 = vec![0.0f64; m];
        for i in 0..m {
            for j in 0..n {
                let cij: f64 = (0..k)
                    .map(|l| f64::from(a[i + l * m]) * f64::from(b[l + j * k]))
                    .sum();
                assert!(
                    (f64::from(cv[i + j * m]) - cij).abs() < 1e-4,
                    "vendor C[{i},{j}]"
                );
                assert!(
                    (f64::from(cb[i + j * m]) - cij).abs() < 1e-4,
                    "built-in C[{i},{j}]"
                );
                y64[i] += cij * f64::from(x[j]);
            }
        }
        for i in 0..m {
            assert!(
                (f64::from(yv[i]) - y64[i]).abs() < 1e-3,
                "vendor y[{i}] = {}",
                yv[i]
            );
            assert!(
                (f64::from(yb[i]) - y64[i]).abs() < 1e-3,
                "built-in y[{i}] = {}",
                yb[i]
            );
        }
        let d64: f64 = y64.iter().map(|v| v * v).sum();
        assert!(
            (f64::from(dv) - d64).abs() < 1e-3 * d64.max(1.0),
            "vendor dot {dv} vs {d64}"
        );
        assert!(
            (f64::from(db) - d64).abs() < 1e-3 * d64.max(1.0),
            "built-in dot {db} vs {d64}"
        );
    });
}

/// Operands in unified memory (SVM on OpenCL, which CLBlast cannot take) still compute
/// correctly under `Plugin::Vendor` (the call runs the built-in kernels).
#[test]
fn vendor_blas_on_unified_memory_still_computes() {
    on_each_platform(|exec| {
        let Ok(vendor) = with(exec, PluginConfig::default().blas(Plugin::Vendor)) else {
            return;
        };
        let Ok(x) = vendor.allocate_unified::<f32>(8) else {
            return;
        };
        let y = vendor.copy_to_device(&[f32::NAN; 8]).unwrap();
        for i in 0..8 {
            x.store(i, i as f32);
        }
        let mut s = vendor.create_stream().unwrap();
        s.then_blas_copy(8, x.as_device(), 1, &y, 1)
            .then_blas_scal(8, 3.0f32, &y, 1)
            .block_host_until_done()
            .unwrap();
        let want: Vec<f32> = (0..8).map(|i| 3.0 * i as f32).collect();
        assert_eq!(vendor.copy_to_vec(&y).unwrap(), want);
    });
}
