//! NVRTC on the CPU: a `libnvrtc.so` whose `nvrtc*` entry points compile CUDA C++ to PTX with
//! clang, for the CPU libcuda (`libcuda/`) to load and run.
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
//! component it needs is missing) and the log says how to install one. Only PTX is produced: the CUBIN, LTO-IR and
//! OptiX-IR queries are refused (`NVRTC_ERROR_INVALID_INPUT`, with a note in the log).
//!
//! Program handles are opaque numbers looked up in a table, never dereferenced; no panic
//! crosses the C boundary; `STREAMEXEC_NVRTC_LOG=1` prints every failed call with its detail.
//!
//! # Files
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
