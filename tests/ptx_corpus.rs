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

#[path = "common/mod.rs"]
mod common;
#[path = "ptx_common/mod.rs"]
mod ptx_common;

use std::collections::HashMap;

use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{DevicePtr, Error, SharedMemory};

use ptx_common::*;

/// (build, PTX text) for both optimisation levels of one corpus file.
type Builds = [(&'static str, &'static str); 2];

const BASIC: Builds = [
    ("O0", include_str!("../kernels/ptx/corpus_basic.O0.ptx")),
    ("O3", include_str!("../kernels/ptx/corpus_basic.O3.ptx")),
];
const SYNC: Builds = [
    ("O0", include_str!("../kernels/ptx/corpus_sync.O0.ptx")),
    ("O3", include_str!("../kernels/ptx/corpus_sync.O3.ptx")),
];
const MATH: Builds = [
    ("O0", include_str!("../kernels/ptx/corpus_math.O0.ptx")),
    ("O3", include_str!("../kernels/ptx/corpus_math.O3.ptx")),
];
const FAULTS: Builds = [
    ("O0", include_str!("../kernels/ptx/corpus_faults.O0.ptx")),
    ("O3", include_str!("../kernels/ptx/corpus_faults.O3.ptx")),
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

#[path = "ptx_corpus/basic.rs"]
mod basic;
#[path = "ptx_corpus/faults.rs"]
mod faults;
#[path = "ptx_corpus/math.rs"]
mod math;
#[path = "ptx_corpus/sync.rs"]
mod sync;
