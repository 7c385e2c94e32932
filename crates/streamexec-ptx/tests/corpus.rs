//! The CUDA C corpus (kernels/corpus_*.cu), compiled by clang-19 at -O0 and -O3
//! (kernels/ptx/, scripts/gen-ptx.sh), run on the host platform's PTX engine through the public
//! API and compared with plain Rust references on random inputs (`STREAMEXEC_TEST_SEED`
//! replays a run). Outputs start poisoned. Integer results are exact; float results are exact
//! where every operation is correctly rounded in both orders, and otherwise within the
//! tolerance stated at the comparison. Launch shapes include one thread, sizes that are not a
//! multiple of 32, several blocks, grids larger than the data and 2-D grids.
//!
//! Also the engine's checks: the race checker flags the racy kernels and passes their twins,
//! and an out-of-bounds store or a divergent barrier fails the launch with `KernelFault`.
//!
//! - The corpus (`kernels/corpus_*.cu`) is compiled by clang-19 with `-nocudainc -nocudalib`, so
//!   everything a kernel uses comes from `prelude.h`. Explicit rounding uses builtins
//!   (`__nvvm_f2i_rm`, `__nvvm_d2f_rz`, ...), not C casts, because out-of-range float→int casts are
//!   undefined in C but defined (saturating) in PTX. clang-19 at -O3 turns `__nvvm_i2f_rz` into a
//!   round-to-nearest conversion, so int→float rounding in the corpus uses `.rm`/`.rp`; the
//!   one-instruction cells cover `.rz`.
//! - Dynamic shared memory is a `SharedMemory<T>` argument: a launch attribute for PTX (not a
//!   `.param`), a trailing `__local` parameter for OpenCL C (`run_kernel --shared-bytes`).
//! - Float results are bit-exact where every operation is correctly rounded in any order; sums in a
//!   different order (reductions, fused or unfused `a*x+y`) are checked against an f64 reference
//!   within a stated bound; atomics on floats use integer-valued data so any order is exact.

mod common;

use std::collections::HashMap;

use common::{DevicePtr, Error, SharedMemory};
use rand::RngExt;
use rand::rngs::StdRng;

use common::*;

/// (build, PTX text) for both optimisation levels of one corpus file.
type Builds = [(&'static str, &'static str); 2];

const BASIC: Builds = [
    (
        "O0",
        include_str!("../../../kernels/ptx/corpus_basic.O0.ptx"),
    ),
    (
        "O3",
        include_str!("../../../kernels/ptx/corpus_basic.O3.ptx"),
    ),
];
const SYNC: Builds = [
    (
        "O0",
        include_str!("../../../kernels/ptx/corpus_sync.O0.ptx"),
    ),
    (
        "O3",
        include_str!("../../../kernels/ptx/corpus_sync.O3.ptx"),
    ),
];
const MATH: Builds = [
    (
        "O0",
        include_str!("../../../kernels/ptx/corpus_math.O0.ptx"),
    ),
    (
        "O3",
        include_str!("../../../kernels/ptx/corpus_math.O3.ptx"),
    ),
];
const FAULTS: Builds = [
    (
        "O0",
        include_str!("../../../kernels/ptx/corpus_faults.O0.ptx"),
    ),
    (
        "O3",
        include_str!("../../../kernels/ptx/corpus_faults.O3.ptx"),
    ),
];

const FORMS: Builds = [
    (
        "O0",
        include_str!("../../../kernels/ptx/corpus_forms.O0.ptx"),
    ),
    (
        "O3",
        include_str!("../../../kernels/ptx/corpus_forms.O3.ptx"),
    ),
];

const SIMT: Builds = [
    (
        "O0",
        include_str!("../../../kernels/ptx/corpus_simt.O0.ptx"),
    ),
    (
        "O3",
        include_str!("../../../kernels/ptx/corpus_simt.O3.ptx"),
    ),
];

type P<T> = DevicePtr<T>;

fn blocks_for(n: usize, threads: u32) -> u32 {
    (n as u32).div_ceil(threads).max(1)
}

fn ints(rng: &mut StdRng, n: usize, lo: i32, hi: i32) -> Vec<i32> {
    (0..n).map(|_| rng.random_range(lo..=hi)).collect()
}

fn floats(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

#[path = "corpus/basic.rs"]
mod basic;
#[path = "corpus/faults.rs"]
mod faults;
#[path = "corpus/forms.rs"]
mod forms;
#[path = "corpus/math.rs"]
mod math;
#[path = "corpus/simt.rs"]
mod simt;
#[path = "corpus/sync.rs"]
mod sync;

/// `opcode.mod1.mod2...` of every instruction in `body`, scopes included.
fn instruction_names(body: &[streamexec_ptx::ast::Statement], out: &mut Vec<String>) {
    use streamexec_ptx::ast::Statement;
    for s in body {
        match s {
            Statement::Inst(i) => out.push(
                std::iter::once(i.opcode.as_str())
                    .chain(i.modifiers.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join("."),
            ),
            Statement::Block(b) => instruction_names(b, out),
            _ => {}
        }
    }
}

/// Every corpus build parses with the PTX front end (no engine needed), declares the entries
/// the tests load, and holds the instructions its .cu header promises.
#[test]
fn corpus_parses_and_holds_the_promised_instructions() {
    let files: [(&str, &Builds, &[&str], &[&str]); 6] = [
        (
            "corpus_basic",
            &BASIC,
            &[
                "vadd_i32",
                "vadd_f32",
                "vadd_f64",
                "saxpy",
                "grid_stride_scale",
                "matmul_naive",
                "matmul_tiled",
                "transpose_shared",
            ],
            &[
                "bar.sync",
                "ld.param.u64",
                "cvta.to.global.u64",
                "setp.ge.s32",
            ],
        ),
        (
            "corpus_sync",
            &SYNC,
            &[
                "block_reduce_sum",
                "block_reduce_f32_dyn",
                "warp_reduce_sum",
                "vote_any_all",
                "ballot_compact",
                "histogram",
                "cas_max_f32",
                "atomics_misc",
                "scan_inclusive",
            ],
            &[
                "bar.sync",
                "shfl.sync.down.b32",
                "shfl.sync.idx.b32",
                "vote.sync.ballot.b32",
                "vote.sync.any.pred",
                "vote.sync.all.pred",
                "popc.b32",
                "atom",
                "rem.u32",
            ],
        ),
        (
            "corpus_math",
            &MATH,
            &[
                "divergent_loops",
                "call_funcs",
                "i64_math",
                "f64_math",
                "conversions",
            ],
            &[
                "call",
                "cvt.rzi.s32.f32",
                "cvt.rni.s32.f32",
                "cvt.rmi.s32.f32",
                "cvt.rpi.s32.f32",
                "cvt.rm.f32.s64",
                "cvt.rp.f64.s64",
                "cvt.rz.f32.f64",
                "cvt.sat.f32.f32",
                "div.s64",
                "div.u64",
                "mul.hi.u64",
                "sqrt.rn.f64",
                "fma.rn.f64",
                "div.rn.f64",
                "shr.s64",
            ],
        ),
        (
            "corpus_faults",
            &FAULTS,
            &[
                "racy_shared_sum",
                "atomic_shared_sum",
                "racy_neighbour",
                "synced_neighbour",
                "oob_store",
                "barrier_divergent",
                "barrier_deadlock",
            ],
            &["bar.sync", "barrier.sync"],
        ),
        (
            "corpus_forms",
            &FORMS,
            &[
                "half_ops",
                "half2_ops",
                "bf16_convert",
                "block_vote",
                "named_pipeline",
                "match_groups",
                "recursive",
            ],
            &[
                "fma.rn.f16",
                "neg.f16",
                "cvt.f32.f16",
                "cvt.rn.f16.s32",
                "cvt.rzi.s32.f16",
                "bar.red.popc.u32",
                "bar.red.and.pred",
                "bar.red.or.pred",
                "bar.arrive",
                "barrier.sync",
                "match.any.sync.b32",
                "match.all.sync.b64",
                "call",
            ],
        ),
        (
            "corpus_simt",
            &SIMT,
            &[
                "divergent_trips",
                "early_exit",
                "stencil_passes",
                "partial_masks",
                "half_warp_masks",
                "call_site_shfl",
                "shared_hist_2d",
                "grid_stride_dot",
                "block_shape_ids",
                "guarded_axpy",
            ],
            &[
                "activemask.b32",
                "shfl.sync.bfly.b32",
                "shfl.sync.down.b32",
                "shfl.sync.idx.b32",
                "vote.sync.ballot.b32",
                "vote.sync.all.pred",
                "vote.sync.any.pred",
                "match.any.sync.b32",
                "bar.sync",
                "atom",
                "call",
                "ret",
            ],
        ),
    ];
    for (file, builds, entries, wanted) in files {
        for (opt, ptx) in builds.iter() {
            let m =
                streamexec_ptx::parse_module(ptx).unwrap_or_else(|e| panic!("{file}.{opt}: {e}"));
            let names: Vec<&str> = m
                .functions
                .iter()
                .filter(|f| f.is_entry)
                .map(|f| f.name.as_str())
                .collect();
            for e in entries {
                assert!(
                    names.contains(e),
                    "{file}.{opt}: no entry `{e}` in {names:?}"
                );
            }
            let mut insts = Vec::new();
            for f in &m.functions {
                instruction_names(f.body.as_deref().unwrap_or_default(), &mut insts);
            }
            for w in wanted {
                assert!(
                    insts.iter().any(|i| i.starts_with(w)),
                    "{file}.{opt}: no `{w}` instruction"
                );
            }
            if file == "corpus_math" {
                assert!(
                    m.functions.iter().any(|f| !f.is_entry && f.body.is_some()),
                    "{file}.{opt}: no .func"
                );
            }
            if file == "corpus_sync" {
                let dynamic = m
                    .variables
                    .iter()
                    .any(|v| v.name == "sdata" && v.array == [None]);
                assert!(dynamic, "{file}.{opt}: no `.extern .shared` array");
            }
        }
    }
    // The optimised builds use the explicit state spaces, the -O0 builds generic addressing.
    let o3 = streamexec_ptx::parse_module(SYNC[1].1).unwrap();
    let o0 = streamexec_ptx::parse_module(SYNC[0].1).unwrap();
    let (mut i3, mut i0) = (Vec::new(), Vec::new());
    o3.functions
        .iter()
        .for_each(|f| instruction_names(f.body.as_deref().unwrap_or_default(), &mut i3));
    o0.functions
        .iter()
        .for_each(|f| instruction_names(f.body.as_deref().unwrap_or_default(), &mut i0));
    for w in [
        "ld.shared",
        "st.shared",
        "atom.shared.add",
        "atom.global.cas.b32",
    ] {
        assert!(
            i3.iter().any(|i| i.starts_with(w)),
            "corpus_sync.O3: no `{w}`"
        );
    }
    for w in [
        "cvta.shared.u64",
        "cvta.local.u64",
        "atom.add.u32",
        "ld.u32",
        "st.u32",
    ] {
        assert!(
            i0.iter().any(|i| i.starts_with(w)),
            "corpus_sync.O0: no `{w}`"
        );
    }
}
