//! PTX front end, shared by the CUDA backend (load-time signature checks) and the host
//! platform's PTX engine.
//!
//! [`parse_entries`] reads only what a loader needs (the `.entry` parameter lists), so a
//! `TypedKernel`'s arguments can be checked before the first launch. [`parse_module`] reads the
//! whole module into the syntax tree of [`ast`].

pub mod alu;
pub mod ast;
mod decode;
mod decode_inst;
pub mod ir;
mod params;
mod parse;

pub use decode::{DYNAMIC_SHARED_BASE, decode_module, module_data};
pub use params::{PtxEntry, PtxParam, PtxScalar, check_signature, parse_entries};
pub use parse::parse_module;
