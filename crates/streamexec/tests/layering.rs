//! What the crate split cannot express about this crate's layering, checked on its file-level
//! import graph (`streamexec_test_support::imports`): the handles reach backends only through
//! the plugin interface, a backend folder never imports another's (except `cuda`/`hip` →
//! `gpu` and `gpu`/`opencl` → `fft_builtin` and `dnn_builtin`), the floor and the interface import nothing above them, and the only import cycle is
//! the documented one (ARCHITECTURE.md, `## Import cycles`). What the crates express (the PTX
//! engines and the RPC protocol know nothing of this crate) the compiler checks.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;

use streamexec_test_support::imports::{
    Graph, Layer, cycle_problems, cycles, graph, layer_violations,
};

/// `(layer, files, may import)`: the first row whose files match a file applies; files no row
/// matches (`registry`, `lib`) may import anything.
#[rustfmt::skip]
const LAYERS: &[Layer] = &[
    ("floor-0",   &["error"],        &[]),
    ("types",     &["types::*"],     &["error", "types::*"]),
    ("interface", &["interface::*"], &["error", "types::*", "interface::*"]),
    ("platform",  &["platform::*"],  &["error", "types::*", "interface::*", "platform::*"]),
    // The handles reach backends only through the plugin interface.
    ("handles",   &["executor", "allocations", "stream", "stream_order", "command_buffer", "event", "kernel", "memory", "blas", "rng", "fft", "dnn", "dnn::*", "executor_rpc::*"],
                  &["error", "types::*", "interface::*", "executor", "allocations", "stream", "stream_order", "command_buffer", "event", "kernel", "memory", "blas", "rng", "fft", "dnn", "dnn::*", "executor_rpc::*"]),
    // MPI (feature `mpi`): built on the handles and the RPC protocol (its Emissary API), never
    // on a backend.
    ("mpi",       &["mpi::*"],       &["error", "types::*", "executor", "stream", "memory", "mpi::*"]),
];

/// The backends are the folders under `src/platform/`; these crossings between them are allowed
/// (`gpu` is the CUDA/HIP backend both drivers share; `fft_builtin` the built-in FFT planner
/// and `dnn_builtin` the built-in DNN operations the CUDA-like and OpenCL backends share).
const BACKEND_CROSSINGS: &[(&str, &str)] = &[
    ("cuda", "gpu"),
    ("hip", "gpu"),
    ("gpu", "fft_builtin"),
    ("opencl", "fft_builtin"),
    ("gpu", "dnn_builtin"),
    ("opencl", "dnn_builtin"),
];

/// This crate's graph, built once for the tests that share it.
fn this_crate() -> &'static Graph {
    static GRAPH: OnceLock<Graph> = OnceLock::new();
    GRAPH.get_or_init(|| graph(Path::new(env!("CARGO_MANIFEST_DIR"))))
}

#[test]
fn import_cycles_are_the_documented_ones() {
    let g = this_crate();
    let md = concat!(env!("CARGO_MANIFEST_DIR"), "/../../ARCHITECTURE.md");
    let md = std::fs::read_to_string(md).unwrap();
    let problems = cycle_problems(g, &md);
    let sizes: Vec<usize> = cycles(g).iter().map(BTreeSet::len).collect();
    let (files, edges, n) = (g.files.len(), g.edges.len(), problems.len());
    let summary =
        format!("{files} files, {edges} imports; cycles of sizes {sizes:?}; {n} problem(s)");
    assert!(
        problems.is_empty(),
        "\n{}\n\n{summary}\n",
        problems.join("\n\n")
    );
}

#[test]
fn layer_rules_hold() {
    let v = layer_violations(this_crate(), LAYERS, "platform", BACKEND_CROSSINGS);
    let n = v.len();
    assert!(
        v.is_empty(),
        "\n{}\n\n{n} layer violation(s) (rules: LAYERS in tests/layering.rs)\n",
        v.join("\n")
    );
}
