//! Generates the typed kernels of streamexec's conformance suite (the project's own kernels):
//! PTX from `kernels/conformance.cu` (built exactly as `scripts/gen-ptx.sh` builds it), OpenCL
//! C from `kernels/cl/conformance.cl`, one module per kernel. `streamexec` itself cannot depend
//! on this crate or on clang, so the output is committed, in prebuilt form (`kernels.rs` and
//! `kernels.manifest`), in `crates/streamexec/tests/conformance/generated/`, and the suite
//! `include!`s it.
//!
//! `cargo run -p streamexec-build --example conformance_kernels [-- OUT_DIR]` writes it there
//! (or into `OUT_DIR`); `scripts/gen-typed.sh` runs it, and `scripts/gen-typed.sh --check`
//! fails when the committed folder is stale.

use std::path::PathBuf;

/// The committed folder, relative to the workspace root.
const COMMITTED: &str = "crates/streamexec/tests/conformance/generated";

fn main() {
    let root = match std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("the workspace root: {e}");
            std::process::exit(1);
        }
    };
    let dest = match std::env::args_os().nth(1) {
        Some(d) => std::env::current_dir().map_or(PathBuf::from(&d), |cwd| cwd.join(d)),
        None => root.join(COMMITTED),
    };
    let work = match tempfile::tempdir() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("a temporary folder: {e}");
            std::process::exit(1);
        }
    };
    let result = streamexec_build::Kernels::new()
        .root(&root)
        .out_dir(work.path())
        .cargo_metadata(false)
        // kernels/prelude.h brings the CUDA prelude; the flags are scripts/gen-ptx.sh's (-O3 is
        // the builder's own), so the PTX is kernels/ptx/conformance.O3.ptx.
        .cuda_prelude(false)
        .include_dir("kernels")
        .flag("-Xclang")
        .flag("-target-feature")
        .flag("-Xclang")
        .flag("+ptx70")
        .cuda_archs(["sm_70"])
        .cuda("kernels/conformance.cu")
        .opencl("kernels/cl/conformance.cl")
        .prebuilt(&dest)
        .update_prebuilt(true)
        .compile();
    match result {
        Ok(generated) => eprintln!(
            "{}: {} kernels ({})",
            dest.display(),
            generated.modules.len(),
            generated.modules.join(", ")
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
