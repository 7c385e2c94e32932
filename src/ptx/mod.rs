//! PTX front end, shared by the CUDA backend (load-time signature checks) and the host
//! platform's PTX engine.
//!
//! [`parse_entries`] reads only what a loader needs (the `.entry` parameter lists), so a
//! `TypedKernel`'s arguments can be checked before the first launch. [`parse_module`] reads the
//! whole module into the syntax tree of [`ast`].

pub mod alu;
pub mod ast;
mod data;
mod decode;
pub mod ir;
mod params;
mod parse;

pub use data::module_data;
pub use decode::{DYNAMIC_SHARED_BASE, decode_module};
pub use params::{PtxEntry, PtxParam, PtxScalar, check_signature, parse_entries};
pub use parse::parse_module;

/// Warp instructions the host platform's PTX engine has executed in this process (one per
/// instruction issued for a group of lanes), for throughput figures in benchmarks.
pub fn warp_instructions_executed() -> u64 {
    WARP_INSTRUCTIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Added to by the engine once per finished block.
pub(crate) static WARP_INSTRUCTIONS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);
