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
//!
//! How a module becomes something the host engine runs, in load order:
//!
//! - **Parse** (`ptx::parse_module`) gives the syntax tree of `ast.rs`. It is purely syntactic:
//!   an instruction is its opcode, its `.modifiers` as written and its operands, so one parser
//!   serves every consumer and what an opcode means is decided (and refused) in one place, the
//!   decoder. `.loc`/`.file`/`.pragma`/`.section` and performance directives are read and dropped.
//! - **Lay out data** (`data.rs`): module `.global`/`.const` variables go into one image with their
//!   initializers (address initializers become relocations); the host executor allocates it as
//!   device memory, so kernels reach it like any allocation and generic pointers to it work.
//! - **Decode** (`decode/`: `mod.rs` + `inst/arith/mem.rs`, `fns.rs`): every `.entry` becomes
//!   a `Program`: the entry's instructions followed by those of every `.func` it reaches. Registers
//!   are dense slots (a 64-bit slot per register per lane; names are scoped, so clang's
//!   `{ .reg .b32 tmp; ... }` blocks work), labels are instruction indices, `.shared` variables get
//!   static offsets (dynamic `.extern .shared` lives at shared-space offset `0x100_0000`), `.local`
//!   variables and call parameters get per-thread offsets. Each opcode/type/modifier combination
//!   becomes one `Op` holding a pointer to a monomorphized lane function of `alu.rs`
//!   (`fadd::<f32, RZ, FTZ, SAT>`, `cvt_fi::<f64, i32, RMI, false>`, ...), so the interpreter never
//!   looks at a string. Anything not understood is a `PtxError` (reported as `Error::KernelLoad`)
//!   naming the line and the instruction's text; nothing is left to fail at run time. Decoding
//!   happens once per module text per executor (`ModuleCache`).
//! - **Calls** use fixed per-thread parameter slots: `call` copies the caller's `.param` arguments
//!   into the callee's parameter slots and pushes the call site on the lane's stack; `ret` copies
//!   return values back. Recursion is rejected at load (the call graph must be acyclic).

pub(crate) mod alu;
pub mod ast;
mod data;
mod decode;
mod error;
pub(crate) mod ir;
mod params;
mod parse;

pub(crate) use data::module_data;
pub(crate) use decode::{DYNAMIC_SHARED_BASE, cvt_ii_to, decode_module};
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
