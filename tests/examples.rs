//! The examples do what the README says: the seed example prints `result = 165.5` on the host
//! platform, fails cleanly on a platform that is not there, and device_query lists all four.

use std::process::Command;

#[path = "common/mod.rs"]
mod common;
use common::example;

#[test]
fn seed_example_prints_the_result_on_host() {
    let out = Command::new(example("add_mystery_value")).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
    let out = Command::new(example("add_mystery_value"))
        .args(["--platform", "Host"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
    // The host platform runs the PTX by default; `--native` swaps in the Rust kernel.
    let out = Command::new(example("add_mystery_value"))
        .args(["--native"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
}

#[test]
fn seed_example_fails_cleanly_where_a_platform_is_missing() {
    for info in streamexec::PlatformManager::platforms()
        .into_iter()
        .filter(|i| !i.is_available())
    {
        let out = Command::new(example("add_mystery_value"))
            .args(["--platform", info.name])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", info.name);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("unavailable") && !err.contains("panicked"),
            "{err}"
        );
    }
    let out = Command::new(example("add_mystery_value"))
        .args(["--platform", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no platform named `nope`"));
}

#[test]
fn device_query_lists_every_platform() {
    let out = Command::new(example("device_query")).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["host", "opencl", "cuda", "hip"] {
        assert!(
            text.contains(&format!("Platform {name}")),
            "{name} missing from:\n{text}"
        );
    }
    assert!(
        text.contains("Platform host: available, 1 device(s)"),
        "{text}"
    );
    assert!(text.contains("max threads per block:   1024"), "{text}");
}

#[test]
fn a_missing_opencl_driver_is_reported_not_a_crash() {
    // An ICD loader with no vendor files finds no OpenCL platform.
    let out = Command::new(example("add_mystery_value"))
        .args(["--platform", "opencl"])
        .env("OCL_ICD_VENDORS", "/nonexistent-streamexec-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("platform `opencl` is unavailable") && !err.contains("panicked"),
        "{err}"
    );
    let out = Command::new(example("device_query"))
        .env("OCL_ICD_VENDORS", "/nonexistent-streamexec-test")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("Platform opencl (cargo feature `opencl`): unavailable")
    );
}

#[test]
fn seed_example_runs_on_every_available_platform() {
    for info in streamexec::PlatformManager::platforms()
        .into_iter()
        .filter(|i| i.is_available())
    {
        let out = Command::new(example("add_mystery_value"))
            .args(["--platform", info.name])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "result = 165.5\n",
            "{}",
            info.name
        );
    }
}

#[test]
fn canned_ops_agrees_across_platforms() {
    let mut philox_lines = Vec::new();
    for info in streamexec::PlatformManager::platforms()
        .into_iter()
        .filter(|i| i.is_available() && (i.name == "host" || i.name == "opencl"))
    {
        let out = Command::new(example("canned_ops"))
            .args(["--platform", info.name])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{}: {text}{}",
            info.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{}: {text}", info.name);
        let err: f64 = lines[0]
            .strip_prefix("gemm_max_rel_err=")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{}: {}", info.name, lines[0]));
        assert!(err < 1e-4 && err > 0.0, "{}: {err}", info.name);
        // Random123's Philox4x32-10 with key = LE words of bytes 0..8, counter words 2-3 = LE
        // words of bytes 8..16, counter words 0-1 = 0, 1.
        let words = |c: u32| {
            streamexec::philox::philox4x32_10(
                [c, 0, 0x0b0a_0908, 0x0f0e_0d0c],
                [0x0302_0100, 0x0706_0504],
            )
        };
        let want: Vec<String> = [words(0), words(1)]
            .concat()
            .iter()
            .map(|w| format!("{w:08x}"))
            .collect();
        assert_eq!(lines[1], format!("philox_u32={}", want.join(",")));
        assert!(lines[2].starts_with("uniform_mean=0.50"), "{}", lines[2]);
        assert!(lines[3].starts_with("gaussian_mean="), "{}", lines[3]);
        philox_lines.push(lines[1].to_string());
    }
    assert!(!philox_lines.is_empty());
}

#[test]
fn rpc_hello_prints_through_the_server_on_host() {
    let out = Command::new(example("rpc_hello"))
        .args(["--platform", "host"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello world!\nanswer=42 x=2.50\n"
    );
}

#[test]
fn rpc_hello_prints_through_the_server_on_opencl() {
    let required = common::required_platforms().iter().any(|p| p == "opencl");
    let available = streamexec::PlatformManager::platforms()
        .into_iter()
        .any(|i| i.name == "opencl" && i.is_available());
    if !available {
        assert!(
            !required,
            "STREAMEXEC_REQUIRE names `opencl` but it is unavailable"
        );
        eprintln!("rpc_hello on opencl: skipping, the opencl platform is unavailable");
        return;
    }
    let out = Command::new(example("rpc_hello"))
        .args(["--platform", "opencl"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello world!\nanswer=42 x=2.50\n"
    );
}
