//! NVRTC on the CPU: a `libnvrtc.so` whose `nvrtc*` entry points compile CUDA C++ to PTX with
//! clang, for the CPU libcuda (`crates/streamexec-libcuda`) to load and run. Building, loading and
//! testing it: `README.md` of this crate.
//!
//! Put its directory on `LD_LIBRARY_PATH` (with the CPU libcuda; `scripts/build-libcuda.sh`
//! lays both out in `target/libcuda/`), and programs that compile CUDA C++ at run time (cudarc's
//! `nvrtc::compile_ptx`, streamexec's `add_cuda_source_in_memory`, C programs linked with
//! `-lnvrtc`) run without the CUDA toolkit.
//!
//! `nvrtcCompileProgram` writes the source and its headers (under their include names) into a
//! temporary directory and runs `clang++ -x cuda --cuda-device-only -nocudainc -nocudalib -S`
//! with the CUDA prelude of `kernels/prelude.h` (execution spaces, built-in variables, warp,
//! vote and atomic functions) and `builtins.h` (what NVRTC predefines: `__constant__`,
//! `__launch_bounds__`, `size_t`, the math functions that have an exact PTX instruction and
//! CUDA's `__sinf`-style intrinsics). The clang binary is `$STREAMEXEC_NVRTC_CLANG`, else
//! `clang++-19`, else `clang++`. NVRTC's options are mapped to clang's (`compile.rs`); an
//! option this library does not know is `NVRTC_ERROR_INVALID_OPTION` with a log naming it.
//! Clang's diagnostics are the program log (`NVRTC_ERROR_COMPILATION`); when no clang can be
//! run the code is `NVRTC_ERROR_BUILTIN_OPERATION_FAILURE` (what NVIDIA's NVRTC returns when a
//! component it needs is missing) and the log says how to install one. Only PTX is produced:
//! the CUBIN, LTO-IR and OptiX-IR queries are refused (`NVRTC_ERROR_INVALID_INPUT`, with a
//! note in the log).
//!
//! # Internals
//!
//! The library depends on nothing of streamexec: it is a driver for clang.
//!
//! - **Compiling** (`compile.rs`): NVRTC's options are mapped to clang's; the source, the
//!   program's headers (under their include names, checked to stay inside the directory),
//!   `kernels/prelude.h` and `builtins.h` are written into a temporary directory and clang runs
//!   there, so diagnostics name the program (`default_program:2:12: error: ...`) and become the
//!   program log.
//! - **Name expressions** are appended to the source as `used` globals initialised with the
//!   expression's address; clang instantiates what they name and writes the mangled name as the
//!   global's PTX initialiser, which `nvrtcGetLoweredName` returns and which is then taken out of
//!   the PTX.
//! - **Programs** (`program.rs`) are opaque numbers looked up in a table, never dereferenced,
//!   never reused.
//! - **Errors.** Every entry point that returns a code runs in `entry::call`: a panic is
//!   `NVRTC_ERROR_INTERNAL_ERROR`, and the detail of each failure is kept per thread
//!   ([`streamexec_nvrtc_last_error_detail`]); `STREAMEXEC_NVRTC_LOG=1` prints every failed
//!   call with its detail. No panic crosses the C boundary.
//! - **Signatures, written once.** `exports.rs` holds the one declaration list of every entry
//!   point (as the CPU libcuda's does): each entry's C signature and the file whose ordinary
//!   Rust function of the same name implements it, or the output it refuses. The `extern "C"`
//!   shells are made from it, and `abi.rs` checks it against cudarc's `nvrtc::sys` (enums passed
//!   by value are received as `u32`).
//!
//! # Files
//!
//! No file imports another in a cycle (`tests/layering.rs` checks it).
//!
//! | file | holds |
//! |---|---|
//! | `entry.rs` | the wrapper every entry point runs in, `NvErr`, error strings, version and architecture queries, `streamexec_nvrtc_last_error_detail` |
//! | `exports.rs` | the one declaration list of every entry point, and the `extern "C"` shells it makes (refused outputs included) |
//! | `abi.rs` | the compile-time check of that list against cudarc's `nvrtc::sys` |
//! | `program.rs` | programs: the handle table, creation, compilation, PTX, log, name expressions |
//! | `compile.rs` | NVRTC options → clang arguments, the clang run, lowered names out of the PTX |
//! | `builtins.h` | what NVRTC predefines beyond `kernels/prelude.h` |

#![allow(non_snake_case)] // exported names are NVRTC's

mod abi;
mod compile;
mod entry;
mod exports;
mod program;

pub use entry::streamexec_nvrtc_last_error_detail;
