//! The examples do what the README says: the seed example prints `result = 165.5` on the host
//! platform, fails cleanly on a platform that is not there, and device_query lists all four.

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    // Test binaries live in target/<profile>/deps; examples in target/<profile>/examples.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--example", name]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        assert!(cmd.status().unwrap().success(), "building example {name}");
    }
    path
}

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
