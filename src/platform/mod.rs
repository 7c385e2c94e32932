//! The backends, one folder each, and the helpers they share. Nothing here is user-facing: the
//! registry (`src/registry.rs`) opens a backend by name, and the handles talk to it through the
//! plugin traits (`src/interface/`).
//!
//! Every backend folder has the same shape: `mod.rs` (the platform, its `open` function, and the
//! design notes of that backend), `executor.rs`, `stream.rs`, `event.rs`, `kernel.rs`, `blas.rs`
//! and `rng.rs` where it has them, and a status/error mapping file. `gpu/` is the backend that
//! CUDA and HIP share; `cuda/` and `hip/` hold only their driver calls.

#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod downcast;
#[cfg(any(feature = "cuda", feature = "hip"))]
mod gpu;
#[cfg(feature = "hip")]
pub(crate) mod hip;
pub(crate) mod host;
#[cfg(feature = "opencl")]
pub(crate) mod opencl;
pub(crate) mod ptx_signature;
mod work_queue;
