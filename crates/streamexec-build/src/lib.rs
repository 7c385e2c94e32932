//! Typed kernels from CUDA C and OpenCL C sources at build time: StreamExecutor's "gpucc"
//! idea for streamexec. Used from a `build.rs`, in the style of `cc` and `prost-build`:
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), streamexec_build::Error> {
//!     streamexec_build::Kernels::new()
//!         .cuda("kernels/add_mystery_value.cu") // -> PTX for each requested sm_XX
//!         .opencl("kernels/add_mystery_value.cl") // -> OpenCL C text, checked now
//!         .cuda_archs(["sm_70", "sm_80"])
//!         .prebuilt("kernels/prebuilt") // for machines without clang (optional)
//!         .compile()?; // writes $OUT_DIR/kernels.rs
//!     Ok(())
//! }
//! ```
//!
//! and in the crate: `mod kernels { include!(concat!(env!("OUT_DIR"), "/kernels.rs")); }`,
//! then `kernels::add_mystery_value::launch(&mut stream, threads, blocks, 42.5, out.ptr())`.
//!
//! Each kernel gets a module named after it with `Args` (the `TypedKernel` argument tuple, in
//! the C parameter order), `Kernel`, `spec()` (every built format embedded, arity and name
//! filled in), `load(&StreamExecutor)` (cached per executor) and `launch(stream, threads,
//! blocks, <the kernel's parameters>)`. The parameter list comes from clang's own AST
//! (`-Xclang -ast-dump=json`), never from PTX, which loses signedness and pointee types; the
//! C → Rust mapping is in [`ctype`]. A CUDA kernel that reaches an `extern __shared__` array
//! takes a last `dynamic_shared: SharedMemory<T>`. Structs passed by value become `#[repr(C)]`
//! `bytemuck::Pod` structs (explicit padding fields, size/alignment/offsets asserted in Rust and
//! checked by clang; the using crate depends on `bytemuck` with `derive`). Templates are
//! built for the instantiations listed with [`Kernels::instantiate`]. A kernel defined in a
//! CUDA and an OpenCL source under one name is one module with both formats; their Rust
//! signatures must agree.
//!
//! clang is `clang++-19` (or `STREAMEXEC_CLANG`); CUDA needs no CUDA SDK (`-nocudainc
//! -nocudalib`, with a built-in prelude defining `__global__`, `__shared__`, `threadIdx` and
//! the like; turn it off with [`Kernels::cuda_prelude`]). Every source and included header is
//! printed as `cargo:rerun-if-changed` (from clang's depfiles), so editing one `.cu` reruns the
//! build script. HSACO ([`Kernels::hip_archs`]) compiles the CUDA sources as HIP and needs LLVM's
//! `lld` (`apt install lld-19`); without it the build fails with clang's message and that hint.
//! Prebuilt mode is described in [`prebuilt`].

#![warn(missing_docs)]

mod ast;
mod builder;
pub mod clang;
pub mod codegen;
mod config;
pub mod ctype;
mod error;
mod pipeline;
pub mod prebuilt;

pub use builder::{Generated, Kernels};
pub use error::{Error, Result};

/// docs/typed-kernels.md, whose `build.rs` example is compiled as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/typed-kernels.md")]
pub struct TypedKernelsGuide;
