//! What the tests of the CPU libcuda and NVRTC share (`mod support;` in each; the libnvrtc
//! crate's tests include this file by path): calling the driver through cudarc's raw
//! `driver::sys` (`cu!`, `expect!`, `ok!`), the library's extra text exports, whether a libcuda
//! loads at all and whether it is the one `STREAMEXEC_LIBCUDA_DIR` names; and the workspace's
//! seeded inputs and poison values (`streamexec-test-support`).
#![allow(dead_code, unused_imports, unused_macros)] // each test uses part of it

use std::ffi::c_char;
use std::path::{Path, PathBuf};
use std::ptr::null_mut;

use cudarc::driver::sys::{self, CUresult};
pub use streamexec_test_support::{POISON_F32_BITS, POISON_U32, random_f32s, random_u32s, rng};

/// Calls `sys::$f`.
macro_rules! cu {
    ($f:ident($($a:expr),* $(,)?)) => {{
        // SAFETY: every pointer the tests pass is valid for what the call does with it, or
        // deliberately NULL or a stale/forged handle, which the driver API turns into an error
        // code without dereferencing it.
        unsafe { sys::$f($($a),*) }
    }};
}

/// Calls `sys::$f` and asserts (with the `check` in scope) that it returned `CUresult::$want`.
macro_rules! expect {
    ($want:ident, $f:ident($($a:expr),* $(,)?)) => {{
        let got = cu!($f($($a),*));
        check(got, CUresult::$want, stringify!($f($($a),*)));
    }};
}

/// Calls `sys::$f` and asserts it succeeded.
macro_rules! ok {
    ($f:ident($($a:expr),* $(,)?)) => {
        expect!(CUDA_SUCCESS, $f($($a),*))
    };
}

/// Fails unless `got` is `want`, with the library's detail of the failure.
#[track_caller]
pub fn check(got: CUresult, want: CUresult, what: &str) {
    if got != want {
        let detail = match got {
            CUresult::CUDA_SUCCESS => String::new(),
            _ => format!(" ({})", last_error_detail()),
        };
        panic!("{what}: got {got:?}, want {want:?}{detail}");
    }
}

/// `unsafe extern "C" fn(buf, size) -> full length`: the library's extra text exports.
pub type TextExport = unsafe extern "C" fn(*mut c_char, usize) -> usize;

/// Extra export `name` (NUL-terminated) of the loaded libcuda, if it has it (NVIDIA's has not).
pub fn text_export(name: &[u8]) -> Option<TextExport> {
    // SAFETY: only called once the library loaded (`culib` panics otherwise); the symbol, where
    // it exists, has this signature (streamexec-libcuda's src/entry.rs).
    unsafe { sys::culib().get::<TextExport>(name).ok().map(|s| *s) }
}

/// The whole text an extra export has now.
pub fn read_text(f: TextExport) -> String {
    // SAFETY: NULL with size 0 asks for the length only.
    let n = unsafe { f(null_mut(), 0) };
    let mut buf = vec![0u8; n + 1];
    // SAFETY: `buf` has `buf.len()` bytes.
    let m = unsafe { f(buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(m, n, "the text changed between two reads");
    buf.truncate(n);
    String::from_utf8_lossy(&buf).into_owned()
}

/// What went wrong in this thread's last failed call (`streamexec_cuda_last_error_detail`);
/// empty on a libcuda without it.
pub fn last_error_detail() -> String {
    text_export(b"streamexec_cuda_last_error_detail\0").map_or_else(String::new, read_text)
}

/// The engine's report of the last kernel fault (`streamexec_cuda_last_fault`).
pub fn last_fault() -> String {
    read_text(text_export(b"streamexec_cuda_last_fault\0").expect("streamexec's libcuda"))
}

/// Fails where `STREAMEXEC_REQUIRE` (platforms that must be available, comma-separated) names
/// `cuda`, else prints why `test` is skipped.
pub fn skip(test: &str, why: &str) {
    let required = std::env::var("STREAMEXEC_REQUIRE").unwrap_or_default();
    assert!(
        !required
            .split(',')
            .any(|p| p.trim().eq_ignore_ascii_case("cuda")),
        "STREAMEXEC_REQUIRE names `cuda`, but {test} cannot run: {why} (build the libraries with \
         `bash scripts/build-libcuda.sh` and put the directory it prints on LD_LIBRARY_PATH)"
    );
    eprintln!("{test}: skipped: {why}");
}

/// True when a libcuda loads through cudarc's loader (`LD_LIBRARY_PATH`, as NVIDIA's driver
/// would); else [`skip`]s. The libraries of this repository that are loaded must be the
/// release builds of `STREAMEXEC_LIBCUDA_DIR` where that is set ([`check_loaded_from`]).
pub fn libcuda_loads(test: &str) -> bool {
    // SAFETY: only tries to dlopen the library names cudarc would use; nothing is called.
    if !unsafe { sys::is_culib_present() } {
        skip(test, "no libcuda.so loads");
        return false;
    }
    check_loaded_from();
    true
}

/// The directory `scripts/build-libcuda.sh` lays the libraries out in:
/// `STREAMEXEC_LIBCUDA_DIR`, else `target/libcuda` of the workspace.
pub fn libcuda_dir() -> PathBuf {
    std::env::var_os("STREAMEXEC_LIBCUDA_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/libcuda"),
        PathBuf::from,
    )
}

/// Where `STREAMEXEC_LIBCUDA_DIR` is set: every `libcuda.so*` and `libnvrtc.so*` this process
/// has mapped (`/proc/self/maps`) is that directory's. `cargo test` puts `target/<profile>`
/// and its `deps/` first on the library path, so a debug build of the libraries there would
/// be loaded instead (slower, and not what the test command asks for).
pub fn check_loaded_from() {
    let Some(dir) = std::env::var_os("STREAMEXEC_LIBCUDA_DIR") else {
        return;
    };
    let dir = std::fs::canonicalize(&dir).expect("STREAMEXEC_LIBCUDA_DIR exists");
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for path in maps.lines().filter_map(|l| l.split_whitespace().nth(5)) {
        let name = Path::new(path)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        if !(name.starts_with("libcuda.so") || name.starts_with("libnvrtc.so")) {
            continue;
        }
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
        assert_eq!(
            real.parent(),
            Some(dir.as_path()),
            "{path} is loaded, not the library of STREAMEXEC_LIBCUDA_DIR ({}): a debug build \
             shadows it (scripts/build-libcuda.sh removes them)",
            dir.display()
        );
    }
}
