//! PTX front end, shared by the CUDA/HIP backend (load-time signature checks) and the host
//! platform's PTX engine.
//!
//! [`parse_entries`] reads only what a loader needs (the `.entry` parameter lists), so a
//! `TypedKernel`'s arguments can be checked before the first launch. [`parse_module`] reads the
//! whole module into the syntax tree of [`ast`]. What is wrong with a text is a [`PtxError`]
//! naming the line and, where known, the function; a loader reports it as its platform's
//! kernel-load error.
//!
//! The module is a leaf: it depends on nothing else of the crate. The host engine's decoder
//! (syntax tree → executable IR) lives here too but is the engine's business, not public.

pub(crate) mod alu;
pub mod ast;
mod data;
mod decode;
mod error;
pub(crate) mod ir;
mod params;
mod parse;

pub(crate) use data::module_data;
pub(crate) use decode::{DYNAMIC_SHARED_BASE, decode_module};
pub use error::PtxError;
pub use params::{PtxEntry, PtxParam, PtxScalar, parse_entries};
pub use parse::parse_module;

/// Lays out `module`'s `.global`/`.const` data at device address `data_base` and decodes every
/// `.entry` for the host platform's PTX engine, as its loader does; returns the names of the
/// decoded entries, sorted. A layout error names no function; a decoding error names the
/// entry being decoded.
///
/// For the fuzz target and the integration tests, which check that any text decodes or is
/// refused without a panic; not part of the supported API.
#[doc(hidden)]
pub fn check_decodes(module: &ast::Module, data_base: u64) -> Result<Vec<String>, PtxError> {
    let data = module_data(module)?;
    let decoded = decode_module(module, &data, data_base)?;
    let mut names: Vec<String> = decoded.programs.values().map(|p| p.name.clone()).collect();
    names.sort_unstable();
    Ok(names)
}
