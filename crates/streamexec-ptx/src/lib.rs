#![doc = include_str!("../README.md")]
//!
//! ## The front end
//!
//! [`parse_entries`] reads only what a loader needs (the `.entry` parameter lists), so a typed
//! kernel's arguments can be checked before the first launch (streamexec's CUDA backend does).
//! [`parse_module`] reads the whole module into the syntax tree of [`ast`]. What is wrong with a
//! text is a [`PtxError`] naming the line and, where known, the function.
//!
//! How a module becomes something the engines run, in load order ([`Module::load`]):
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
//!   looks at a string. Anything not understood is a `PtxError`
//!   naming the line and the instruction's text; nothing is left to fail at run time.
//! - **Calls** use fixed per-thread parameter slots: `call` copies the caller's `.param` arguments
//!   into the callee's parameter slots and pushes the call site on the lane's stack; `ret` copies
//!   return values back. A call made from a function on a cycle of the call graph (recursion)
//!   also saves that function's frame (its registers, local memory and parameter slots) and its
//!   return restores it (`decode/frames.rs`); the interpreter runs such programs, the JIT leaves
//!   them to it.
//! - **Served functions** (`services.rs`, `service_call.rs`, `decode/service.rs`): a call of
//!   `vprintf`, `malloc`, `free` or `__assertfail` declared without a body decodes to one
//!   `Op::Service` reading the caller's `.param` arguments in place; both engines run it through
//!   `service_call::run` and the launcher's [`DeviceServices`].
//! - **Kernel attributes** (`attributes.rs`): [`kernel_attributes`] from the syntax tree.
//! - **Half precision** (`alu/half.rs`): `.f16`/`.bf16` live in the low 16 bits of a register slot,
//!   pairs in the low 32; results are rounded once from the exact value (rounded to odd in `f64`
//!   first). `cvt` with a half side is one lane function whose options travel in an immediate
//!   operand.

//!
//! ## The engines
//!
//! A launch ([`Kernel::launch`], or [`Kernel::prepare`] then [`PreparedLaunch::run`]) runs the
//! grid's blocks in parallel on the caller's rayon pool with CUDA's execution model: blocks of
//! threads that meet at barriers and share block memory, warps of 32 lanes for the warp
//! collectives, every memory access checked against the launch's pinned arguments and the
//! [`AllocTable`]. [`PtxEngine`] chooses who runs it:
//!
//! - the **interpreter** (`interp/`): the reference, with the opt-in data-race checker;
//! - the **JIT** (`jit/`, feature `jit`, on by default): the same IR compiled to native code
//!   with Cranelift, a block's threads run as loops between barriers. Lane semantics are the
//!   interpreter's (shared functions, or native code that computes the same bits), and a fault
//!   reads the same on both (`fault.rs`).
//!
//! `Auto` compiles a kernel at its first launch and keeps the result in its [`Module`]; it
//! interprets what the JIT refuses (`bar.warp.sync`, recursion, more than 200 000 instructions
//! after inlining) and kernels that spin-wait with `nanosleep`.
//!
//! Device bytes the host can address are only touched through [`device_bytes`] (relaxed
//! atomics and opaque copies), so kernels, their host and other threads may race on them as on
//! a GPU without undefined behaviour in Rust.
#![warn(missing_docs)]

pub(crate) mod alu;
pub mod ast;
mod attributes;
mod data;
mod decode;
pub mod device_bytes;
mod dim;
mod engine;
mod error;
mod fault;
mod grid;
mod interp;
pub(crate) mod ir;
#[cfg(feature = "jit")]
mod jit;
mod launch;
pub mod memory;
mod module;
mod params;
mod parse;
mod prepare;
mod service_call;
pub mod services;
mod unsupported;

pub use attributes::{KernelAttributes, kernel_attributes};
pub(crate) use data::module_data;
pub(crate) use decode::{DYNAMIC_SHARED_BASE, decode_module};
pub use dim::Dim3;
pub use engine::PtxEngine;
pub use error::{Error, PtxError, Result};
pub use launch::{jit_compile_times, warp_instructions_executed};
pub use memory::{AllocTable, Pinned};
pub use module::{Kernel, Module};
pub use params::{PtxEntry, PtxParam, PtxScalar, parse_entries};
pub use parse::parse_module;
pub use prepare::{Arg, LaunchConfig, PreparedLaunch};
pub use services::{AssertFailure, DeviceHeap, DeviceServices, DeviceView, ThreadPlace};

/// Lays out `module`'s `.global`/`.const` data at device address `data_base` and decodes every
/// `.entry` for the engines, as [`Module::load`] does; returns the names of the decoded
/// entries, sorted. A layout error names no function; a decoding error names the entry being
/// decoded.
///
/// For the fuzz target and the tests, which check that any text decodes or is refused without
/// a panic; not part of the supported API.
#[doc(hidden)]
pub fn check_decodes(module: &ast::Module, data_base: u64) -> Result<Vec<String>, PtxError> {
    let data = module_data(module)?;
    let decoded = decode_module(module, &data, data_base)?;
    let mut names: Vec<String> = decoded.programs.values().map(|p| p.name.clone()).collect();
    names.sort_unstable();
    Ok(names)
}

/// An entry's name and whether the JIT compiled it: the number of lane functions it calls
/// instead of emitting native code for them, or why it did not compile.
#[doc(hidden)]
pub type JitCheck = (String, std::result::Result<usize, String>);

/// Decodes every entry of `module` and compiles it with the JIT: per entry (sorted by name),
/// [`JitCheck`]. The compiled code is dropped.
///
/// For the fuzz target and tests, which check that anything that decodes compiles or is
/// refused without a panic; not part of the supported API.
#[cfg(feature = "jit")]
#[doc(hidden)]
pub fn check_jit_compiles(module: &ast::Module, data_base: u64) -> Result<Vec<JitCheck>, PtxError> {
    each_entry(module, data_base, |p| {
        jit::compile(p, jit::Tier::policy().0).map(|k| k.called_ops)
    })
}

/// Decodes every entry of `module`: per entry (sorted by name), `f` of its program.
#[cfg(feature = "jit")]
fn each_entry<T>(
    module: &ast::Module,
    data_base: u64,
    f: impl Fn(&std::sync::Arc<ir::Program>) -> T,
) -> Result<Vec<(String, T)>, PtxError> {
    let data = module_data(module)?;
    let decoded = decode_module(module, &data, data_base)?;
    let mut out: Vec<_> = (decoded.programs.values())
        .map(|p| (p.name.clone(), f(p)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Decodes every entry of `module` and compiles it at the optimized tier: per entry (sorted
/// by name), the accesses whose range checks its optimized code hoists out of the group loop
/// (`jit/hoist.rs`; 0 without a vector function). For tests; not part of the supported API.
#[cfg(feature = "jit")]
#[doc(hidden)]
pub fn check_jit_hoisted(
    module: &ast::Module,
    data_base: u64,
) -> Result<Vec<JitHoistCheck>, PtxError> {
    each_entry(module, data_base, |p| {
        jit::compile(p, jit::Tier::Optimized).map(|k| k.hoisted_sites())
    })
}

/// An entry's name and its accesses with hoisted range checks (else why it did not compile).
#[doc(hidden)]
pub type JitHoistCheck = (String, std::result::Result<usize, String>);

/// An entry's name and whether the JIT gave it a vector function (else why not).
#[doc(hidden)]
pub type JitVectorCheck = (String, std::result::Result<(), String>);

/// Decodes and compiles every entry of `module` as [`check_jit_compiles`] does: per entry
/// (sorted by name), `Ok` when the JIT gave it a vector function (groups of threads in SIMD
/// registers), else why not. For tests; not part of the supported API.
#[cfg(feature = "jit")]
#[doc(hidden)]
pub fn check_jit_vector(
    module: &ast::Module,
    data_base: u64,
) -> Result<Vec<JitVectorCheck>, PtxError> {
    each_entry(module, data_base, |p| {
        jit::compile(p, jit::Tier::policy().0)
            .and_then(|k| k.vector_refused.clone().map_or(Ok(()), Err))
    })
}
