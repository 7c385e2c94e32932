//! Helpers shared by the integration tests: the crate-independent ones of
//! `streamexec-test-support`, and executors of every available platform and the examples.
#![allow(dead_code, unused_imports)]

use streamexec::{PlatformManager, StreamExecutor};
pub use streamexec_test_support::*;

/// Platforms named in `STREAMEXEC_REQUIRE` (comma-separated) must be available: a missing one
/// fails the test instead of being skipped.
pub fn required_platforms() -> Vec<String> {
    std::env::var("STREAMEXEC_REQUIRE")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Template backends (cargo feature `noop`): available when compiled in, but they support no
/// operation, so the suite's positive tests skip them; `tests/conformance/unsupported.rs` runs
/// on them ([`executors_with_templates`]).
pub const TEMPLATE_PLATFORMS: &[&str] = &["noop"];

/// Device 0 of every available platform (the conformance suite runs on each), template
/// backends excepted.
pub fn executors() -> Vec<StreamExecutor> {
    executors_with_templates()
        .into_iter()
        .filter(|e| !TEMPLATE_PLATFORMS.contains(&e.platform_name()))
        .collect()
}

/// Device 0 of every available platform, template backends (`noop`) included.
pub fn executors_with_templates() -> Vec<StreamExecutor> {
    let required = required_platforms();
    let mut out = Vec::new();
    for info in PlatformManager::platforms() {
        match &info.availability {
            Ok(_) => {
                let p =
                    PlatformManager::platform_with_name(info.name).expect("listed as available");
                out.push(
                    p.executor_for_device(0)
                        .expect("device 0 of an available platform"),
                );
            }
            Err(reason) => {
                assert!(
                    !required.iter().any(|r| r == info.name),
                    "STREAMEXEC_REQUIRE names `{}` but it is unavailable: {reason}",
                    info.name
                );
                eprintln!("skipping platform {}: {reason}", info.name);
            }
        }
    }
    for r in &required {
        assert!(
            out.iter().any(|e| e.platform_name() == r),
            "STREAMEXEC_REQUIRE names `{r}`, which is not a known platform"
        );
    }
    out
}

/// The repository's root (the workspace), where `kernels/` and `include/` are.
pub const REPO_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A command running the example `name` (package `streamexec-examples`) in the repository's
/// root, so that it finds `kernels/`. The example is built now with this test binary's profile
/// and features (`cargo build` is a no-op when it is current; building every time keeps a stale
/// binary from running).
pub fn example(name: &str) -> std::process::Command {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    // Test binaries live in target/<profile>/deps; examples in target/<profile>/examples.
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(name);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == name) {
        let features: Vec<&str> = [
            ("opencl", cfg!(feature = "opencl")),
            ("cuda", cfg!(feature = "cuda")),
            ("hip", cfg!(feature = "hip")),
            ("noop", cfg!(feature = "noop")),
        ]
        .into_iter()
        .filter_map(|(f, on)| on.then_some(f))
        .collect();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "streamexec-examples",
            "--example",
            name,
            "--no-default-features",
        ]);
        if !features.is_empty() {
            cmd.args(["--features", &features.join(",")]);
        }
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        assert!(cmd.status().unwrap().success(), "building example {name}");
        built.push(name.to_string());
    }
    let mut cmd = std::process::Command::new(path);
    cmd.current_dir(REPO_ROOT);
    cmd
}
