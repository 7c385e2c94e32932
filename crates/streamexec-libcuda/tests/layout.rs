//! Where the library is: `scripts/build-libcuda.sh` lays it out as `target/libcuda/libcuda.so`
//! (and `.so.1`), and cargo's own folders hold it only as `libstreamexec_cuda.so`. `cargo run`,
//! `test` and `bench` put `target/<profile>` and its `deps/` on the library path of what they
//! run, so a `libcuda.so` there would answer in place of NVIDIA's driver.

mod support;

use std::path::Path;

#[test]
fn only_the_libcuda_folder_holds_the_driver_names() {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or(target, Into::into);
    for dir in ["debug", "debug/deps", "release", "release/deps"] {
        for entry in std::fs::read_dir(target.join(dir))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !(name.starts_with("libcuda.so") || name.starts_with("libnvrtc.so")),
                "{} is on the library path cargo gives the programs it runs (rerun \
                 scripts/build-libcuda.sh, which removes builds of the old layout)",
                entry.path().display()
            );
        }
    }
    let dir = support::libcuda_dir();
    if !dir.join("libcuda.so").exists() {
        support::skip("layout", "scripts/build-libcuda.sh has not run");
        return;
    }
    for name in [
        "libcuda.so",
        "libcuda.so.1",
        "libnvrtc.so",
        "libnvrtc.so.12",
    ] {
        assert!(dir.join(name).exists(), "{} has no {name}", dir.display());
    }
}
