//! A running launch: what every block of the grid shares (the program, the packed parameters,
//! the geometry, the memory it may reach, the race checker's grid state), and the process-wide
//! counters benchmarks read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use crate::dim::Dim3;
use crate::interp::race::RaceGrid;
use crate::ir::Program;
use crate::memory::{AllocTable, Pinned};

/// Everything a running launch shares across its blocks.
pub(crate) struct Launch {
    pub(crate) prog: Arc<Program>,
    pub(crate) kernel: String,
    pub(crate) params: Vec<u8>,
    pub(crate) grid: Dim3,
    pub(crate) block: Dim3,
    /// Bytes of dynamic shared memory placed (each request rounded up to 16).
    pub(crate) dynamic_bytes: usize,
    /// Bytes of dynamic shared memory the launch asked for (`%dynamic_smem_size`).
    pub(crate) dynamic_requested: usize,
    /// The pointer arguments and the module's data, pinned for the launch.
    pub(crate) pins: Vec<Pinned>,
    pub(crate) table: Arc<AllocTable>,
    /// Allocations the kernel reached through pointers it computed, pinned on first use.
    pub(crate) extra: Mutex<Vec<Pinned>>,
    pub(crate) race: Option<RaceGrid>,
    pub(crate) start: Instant,
    /// Unique per launch in this process (the JIT's per-worker range cache is keyed by it).
    #[cfg_attr(not(feature = "jit"), allow(dead_code))]
    pub(crate) id: u64,
    /// `%nsmid`'s range: the pool's worker count.
    pub(crate) nsm: u32,
    /// What serves `vprintf`, `malloc` and `free` (`services.rs`).
    pub(crate) services: Option<Arc<dyn crate::services::DeviceServices>>,
    /// The first failed device-side assertion.
    pub(crate) assertion: Mutex<Option<crate::services::AssertFailure>>,
    /// Every block at once, each on its own thread ([`crate::LaunchConfig::cooperative`]).
    pub(crate) cooperative: bool,
    /// Set when a block of a cooperative launch failed: the others stop waiting for it.
    pub(crate) abandoned: std::sync::atomic::AtomicBool,
}

/// The next launch's `Launch::id`.
pub(crate) fn next_launch_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Added to by the engines once per finished block.
pub(crate) static WARP_INSTRUCTIONS: AtomicU64 = AtomicU64::new(0);

/// Appended to by the JIT once per compiled kernel.
pub(crate) static JIT_COMPILES: Mutex<Vec<(String, std::time::Duration)>> = Mutex::new(Vec::new());

/// Warp instructions the interpreter has executed in this process (one per instruction issued
/// for a group of lanes), for throughput figures in benchmarks.
pub fn warp_instructions_executed() -> u64 {
    WARP_INSTRUCTIONS.load(Ordering::Relaxed)
}

/// Each kernel the JIT has compiled in this process, with the time compiling it took (decoded
/// IR to native code), oldest first: for compile-time figures in benchmarks. A kernel's
/// optimized recompile (at its second launch, see `docs/ptx.md`) is listed as
/// `name (optimized)`.
pub fn jit_compile_times() -> Vec<(String, std::time::Duration)> {
    JIT_COMPILES.lock().clone()
}
