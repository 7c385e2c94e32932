//! CUDA without a GPU: the platform fails cleanly when the driver is missing or has no device
//! (a stub libcuda built here stands in for a driver), and the PTX signature check (run here by
//! the host platform's PTX loader, which shares it with the CUDA backend) reads the real PTX
//! that clang-19 produced from kernels/*.cu. On a GPU machine the conformance suite
//! (`STREAMEXEC_REQUIRE=cuda`) covers the rest.
#![cfg(feature = "cuda")]

#[path = "common/mod.rs"]
mod common;

use std::process::Command;

use streamexec::ptx::{PtxEntry, parse_entries};
use streamexec::{
    DevicePtr, Error, KernelArgs, MultiKernelLoaderSpec, PlatformManager, StreamExecutor,
};

/// The committed PTX, embedded so the test binary runs on a GPU machine without the tree.
const CORPUS: &[(&str, &str)] = &[
    (
        "conformance.O0.ptx",
        include_str!("../../../kernels/ptx/conformance.O0.ptx"),
    ),
    (
        "conformance.O3.ptx",
        include_str!("../../../kernels/ptx/conformance.O3.ptx"),
    ),
    (
        "params.O0.ptx",
        include_str!("../../../kernels/ptx/params.O0.ptx"),
    ),
    (
        "params.O3.ptx",
        include_str!("../../../kernels/ptx/params.O3.ptx"),
    ),
];

fn corpus(file: &str) -> Vec<PtxEntry> {
    let text = CORPUS.iter().find(|(f, _)| *f == file).unwrap().1;
    parse_entries(text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

#[test]
fn every_corpus_entry_parses_at_o0_and_o3() {
    for opt in ["O0", "O3"] {
        let conf = corpus(&format!("conformance.{opt}.ptx"));
        let names: Vec<&str> = conf.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "saxpy",
                "affine",
                "block_reduce",
                "block_reduce_dyn",
                "thread_ids",
                "spin",
                "grid_arrive"
            ],
            "{opt}"
        );
        let params = corpus(&format!("params.{opt}.ptx"));
        let names: Vec<&str> = params.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["widths", "floats", "structs", "no_params", "_Z7mangledPii"]
        );
    }
}

/// Loads entry `name` of corpus `file` as a `TypedKernel<A>` on the host platform's PTX engine:
/// loading checks `A` against the entry's PTX parameter list, with the check the CUDA backend
/// makes when it loads PTX.
fn load_as<A: KernelArgs>(exec: &StreamExecutor, file: &str, name: &str) -> streamexec::Result<()> {
    let text = CORPUS.iter().find(|(f, _)| *f == file).unwrap().1;
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(text, name);
    exec.get_kernel::<A>(&spec).map(drop)
}

#[test]
fn real_ptx_signatures_accept_the_right_types_and_refuse_others() {
    let exec = PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .unwrap();
    let exec = &exec;
    for opt in ["O0", "O3"] {
        let conf = &format!("conformance.{opt}.ptx");
        let p = &format!("params.{opt}.ptx");
        let good = [
            (
                "saxpy",
                load_as::<(u32, f32, DevicePtr<f32>, DevicePtr<f32>)>(exec, conf, "saxpy"),
            ),
            (
                "block_reduce_dyn",
                load_as::<(
                    DevicePtr<u32>,
                    DevicePtr<u32>,
                    u32,
                    streamexec::SharedMemory<u32>,
                )>(exec, conf, "block_reduce_dyn"),
            ),
            (
                "widths",
                load_as::<(i8, i16, i32, i64, u8, u16, u32, u64, DevicePtr<i32>)>(
                    exec, p, "widths",
                ),
            ),
            (
                "floats",
                load_as::<(f32, f64, DevicePtr<f32>)>(exec, p, "floats"),
            ),
            (
                "structs",
                load_as::<([u64; 2], [u8; 3], [f32; 4], DevicePtr<f64>)>(exec, p, "structs"),
            ),
            ("no_params", load_as::<()>(exec, p, "no_params")),
            (
                "_Z7mangledPii",
                load_as::<(DevicePtr<i32>, i32)>(exec, p, "_Z7mangledPii"),
            ),
        ];
        for (name, r) in good {
            r.unwrap_or_else(|err| panic!("{opt} {name}: {err}"));
        }
        let bad = [
            (
                "saxpy",
                load_as::<(u32, f64, DevicePtr<f32>, DevicePtr<f32>)>(exec, conf, "saxpy"),
                "parameter 1",
            ),
            (
                "saxpy",
                load_as::<(u32, f32, DevicePtr<f32>)>(exec, conf, "saxpy"),
                "takes 4 parameter(s)",
            ),
            (
                "widths",
                load_as::<(i8, i16, i32, i32, u8, u16, u32, u64, DevicePtr<i32>)>(
                    exec, p, "widths",
                ),
                "parameter 3",
            ),
            (
                "floats",
                load_as::<(f32, u64, DevicePtr<f32>)>(exec, p, "floats"),
                "parameter 1",
            ),
            (
                "structs",
                load_as::<([u64; 2], [u8; 4], [f32; 4], DevicePtr<f64>)>(exec, p, "structs"),
                "parameter 1",
            ),
        ];
        for (name, r, needle) in bad {
            let err = r.unwrap_err();
            assert!(
                matches!(&err, Error::SignatureMismatch { kernel, .. } if kernel == name)
                    && err.to_string().contains(needle),
                "{opt} {name}: {err}"
            );
        }
    }
}

#[test]
fn the_cuda_platform_is_unavailable_without_a_driver_and_never_panics() {
    let required = common::required_platforms();
    let info = PlatformManager::platforms()
        .into_iter()
        .find(|i| i.name == "cuda")
        .unwrap();
    if required.iter().any(|r| r == "cuda") {
        assert!(info.is_available(), "{:?}", info.availability);
        return;
    }
    let Err(reason) = &info.availability else {
        eprintln!("a CUDA driver is present here; nothing to check");
        return;
    };
    match PlatformManager::platform_with_name("cuda") {
        Err(Error::PlatformUnavailable {
            platform,
            reason: r,
        }) => {
            assert_eq!(platform, "cuda");
            assert_eq!(&r, reason);
            assert!(r.contains("libcuda") || r.contains("CUDA_ERROR"), "{r}");
        }
        other => panic!("{other:?}"),
    }
    // A spec with only PTX is refused on host (until the PTX engine) with a clear error.
    let exec = PlatformManager::default_platform()
        .unwrap()
        .executor_for_device(0)
        .unwrap();
    let spec = MultiKernelLoaderSpec::new(0).add_cuda_source_in_memory("", "k");
    let err = exec.get_untyped_kernel(&spec).unwrap_err().to_string();
    assert!(err.contains("CUDA C++ source"), "{err}");
}

/// A stand-in libcuda.so: `cuInit` returns `$STUB_CUINIT`, `cuDeviceGetCount` reports 0.
const STUB_LIBCUDA: &str = r#"
#include <stdlib.h>
int cuInit(unsigned flags) { (void)flags; const char* c = getenv("STUB_CUINIT"); return c ? atoi(c) : 0; }
int cuDeviceGetCount(int* n) { *n = 0; return 0; }
int cuGetErrorName(int e, const char** s) { *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN"; return 0; }
int cuGetErrorString(int e, const char** s) { *s = e == 100 ? "no CUDA-capable device is detected" : "unknown error"; return 0; }
"#;

#[test]
fn a_driver_that_reports_no_device_gives_a_clean_error() {
    if common::required_platforms().iter().any(|r| r == "cuda") {
        return; // a real driver is installed; the stub would shadow it
    }
    let dir = std::env::temp_dir().join(format!("streamexec-stub-cuda-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("stub.c");
    std::fs::write(&src, STUB_LIBCUDA).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.join("libcuda.so"))
        .arg(&src)
        .status();
    match built {
        Ok(s) if s.success() => {}
        other => {
            eprintln!("no C compiler ({cc}: {other:?}); skipping the stub-driver check");
            return;
        }
    }
    for (code, needle) in [
        ("100", "CUDA_ERROR_NO_DEVICE"),
        ("999", "cuInit failed"),
        ("0", "reports no device"),
    ] {
        let out = common::example("add_mystery_value")
            .args(["--platform", "cuda"])
            .env("LD_LIBRARY_PATH", &dir)
            .env("STUB_CUINIT", code)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "cuInit={code}: {err}");
        assert!(
            err.contains("unavailable") && err.contains(needle) && !err.contains("panicked"),
            "cuInit={code}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel fault on the CPU libcuda (sticky for the context) must not leave
/// `Event::ready` or `Stream::done` waiting forever: both resolve, to the fault. CUDA never
/// calls a host function on a faulted context, so `ready`'s host-function path alone would
/// hang here; the executor's notifier thread resolves it.
#[test]
fn futures_resolve_after_a_kernel_fault() {
    let Ok(exec) =
        PlatformManager::platform_with_name("cuda").and_then(|p| p.executor_for_device(0))
    else {
        eprintln!("skipped: no cuda platform");
        return;
    };
    // Spins a while, then stores through address 8: the fault comes after `ready` was polled
    // and its driver host function queued.
    const PTX: &str = ".version 7.0\n.target sm_70\n.address_size 64\n\
        .visible .entry poke(.param .u64 p) {\n.reg .b64 %rd<2>;\n.reg .b32 %r<2>;\n\
        .reg .pred %p<2>;\nmov.u32 %r1, 0;\nLOOP:\nadd.u32 %r1, %r1, 1;\n\
        setp.lt.u32 %p1, %r1, 3000000;\n@%p1 bra LOOP;\n\
        ld.param.u64 %rd1, [p];\nst.global.u32 [%rd1], 1;\nret;\n}\n";
    let spec = MultiKernelLoaderSpec::new(1).add_cuda_ptx_in_memory(PTX, "poke");
    let k: streamexec::TypedKernel<(u64,)> = exec.get_kernel(&spec).unwrap();
    let ev = exec.create_event().unwrap();
    let mut s = exec.create_stream_non_blocking().unwrap();
    s.then_launch(1, 1, &k, (8u64,)).then_record_event(&ev);
    let (tx, rx) = std::sync::mpsc::channel();
    let started = std::time::Instant::now();
    std::thread::spawn(move || {
        let ready = futures::executor::block_on(ev.ready());
        let _ = tx.send(ready);
    });
    let ready = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("Event::ready never resolved after a kernel fault");
    eprintln!("ready after the fault, {:?}: {ready:?}", started.elapsed());
    assert!(ready.is_err(), "the record never completed: {ready:?}");
    let done = futures::executor::block_on(s.done());
    assert!(done.is_err(), "the stream reports the fault: {done:?}");
}

/// The file a CUDA description's `driver` names: the text in its last parentheses.
fn driver_file(driver: &str) -> std::path::PathBuf {
    let start = driver.rfind('(').map_or(0, |i| i + 1);
    let end = driver.rfind(')').unwrap_or(driver.len());
    std::path::PathBuf::from(&driver[start..end])
}

#[test]
fn the_description_says_which_driver_answers() {
    let Ok(platform) = PlatformManager::platform_with_name("cuda") else {
        eprintln!("no CUDA driver here; nothing to describe");
        return;
    };
    let d = platform.description(0).unwrap();
    eprintln!("cuda device 0: driver {}", d.driver);
    let Some(dir) = std::env::var_os("STREAMEXEC_LIBCUDA_DIR") else {
        // A driver found some other way: whichever it is, the description names its file.
        assert!(
            driver_file(&d.driver).is_absolute()
                && (d.driver.starts_with("NVIDIA's driver")
                    || d.driver.starts_with("streamexec's CPU libcuda")),
            "{}",
            d.driver
        );
        return;
    };
    // The test run put the CPU libcuda first on the library path: the description says so,
    // and names the file in STREAMEXEC_LIBCUDA_DIR it was loaded from.
    assert!(
        d.driver.starts_with(&format!(
            "streamexec's CPU libcuda {} (",
            env!("CARGO_PKG_VERSION")
        )),
        "{}",
        d.driver
    );
    let file = std::fs::canonicalize(driver_file(&d.driver)).unwrap();
    assert_eq!(
        file.parent(),
        Some(std::fs::canonicalize(dir).unwrap().as_path()),
        "{}",
        d.driver
    );
    // device_query prints it.
    let out = common::example("device_query").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("    driver:                  streamexec's CPU libcuda"),
        "{text}"
    );
}

/// `cargo run`, `cargo test` and `cargo bench` put `target/<profile>` and its `deps/` on the
/// library path of what they run: neither the CPU libcuda nor the CPU NVRTC may be found
/// there, or a program run by cargo on a GPU machine would get them in place of NVIDIA's.
#[test]
fn cargos_library_path_does_not_reach_the_cpu_libcuda() {
    // This binary is target/<profile>/deps/<name>.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap();
    let cargo_dirs: Vec<std::path::PathBuf> = ["debug", "debug/deps", "release", "release/deps"]
        .iter()
        .map(|d| target.join(d))
        .collect();
    for dir in &cargo_dirs {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !(name.starts_with("libcuda.so") || name.starts_with("libnvrtc.so")),
                "{} is on the library path cargo gives what it runs (rerun \
                 scripts/build-libcuda.sh, which removes builds of the old layout)",
                entry.path().display()
            );
        }
    }
    // What a program run by cargo sees with nothing else on its library path: NVIDIA's driver
    // or none, never the CPU libcuda.
    let path = std::env::join_paths(&cargo_dirs).unwrap();
    let out = common::example("device_query")
        .env("LD_LIBRARY_PATH", path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let cuda = text
        .split("\nPlatform ")
        .find(|p| p.starts_with("cuda"))
        .unwrap_or_default();
    assert!(
        out.status.success()
            && cuda.starts_with("cuda")
            && (cuda
                .lines()
                .next()
                .unwrap_or_default()
                .contains(": unavailable")
                || cuda.contains("driver:                  NVIDIA's driver")),
        "{text}"
    );
}
