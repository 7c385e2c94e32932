//! The conformance suite: platform-independent behaviour, run on device 0 of every available
//! platform. `STREAMEXEC_REQUIRE=opencl` (comma-separated names) turns a missing platform into a
//! failure instead of a skip. The template backend `noop` (`--features noop`) supports nothing:
//! the positive tests skip it, and `unsupported.rs` checks it against what every platform must
//! do for an operation it does not support.

#[path = "../common/mod.rs"]
mod common;
mod kernels;

mod arity;
mod async_done;
mod blas;
mod command_buffer;
mod default_stream;
mod dnn;
mod dnn_errors;
mod dnn_ref;
mod errors;
mod fft;
mod fft_errors;
mod forged;
mod launch;
mod lifetime;
mod memory;
mod plugins;
mod rng;
mod streams;
mod unified;
mod unsupported;

use streamexec::StreamExecutor;

/// Runs `test` on every platform under test, naming the platform if it fails.
pub fn on_each_platform(test: impl Fn(&StreamExecutor)) {
    for exec in common::executors() {
        eprintln!("-- on platform {}", exec.platform_name());
        test(&exec);
    }
}

/// The committed generated kernels (`kernels::generated`, scripts/gen-typed.sh) match their
/// sources, checked without clang: the PTX is the committed PTX (which `scripts/gen-ptx.sh
/// --check` keeps current), the OpenCL C is kernels/cl/conformance.cl, and every input the
/// manifest names still has its FNV-1a 64 hash. (`scripts/gen-typed.sh --check` regenerates
/// with clang and compares byte for byte.)
#[test]
fn generated_kernels_match_their_sources() {
    let stale = "crates/streamexec/tests/conformance/generated is stale: run scripts/gen-typed.sh";
    for (_, ptx) in kernels::generated::saxpy::PTX {
        assert!(*ptx == kernels::PTX, "{stale} (its PTX differs)");
    }
    let cl = include_str!("../../../../kernels/cl/conformance.cl");
    assert!(kernels::opencl() == cl, "{stale} (its OpenCL C differs)");
    let fnv1a64 = |bytes: &[u8]| {
        bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = include_str!("generated/kernels.manifest");
    let mut files = 0;
    for line in manifest.lines().filter_map(|l| l.strip_prefix("file ")) {
        let (hash, path) = line.split_once(' ').expect("`file HASH PATH`");
        let bytes = std::fs::read(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(
            format!("{:016x}", fnv1a64(&bytes)),
            hash,
            "{stale} ({path} changed)"
        );
        files += 1;
    }
    assert!(files >= 2, "{stale} (its manifest names {files} inputs)");
}
