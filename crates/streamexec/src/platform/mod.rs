//! The backends, one folder each, and the helpers they share. Nothing here is user-facing: the
//! registry (`src/registry.rs`) opens a backend by name, and the handles talk to it through the
//! plugin traits (`src/interface/`).
//!
//! Every backend folder has the same shape: `mod.rs` (the platform, its `open` function, and the
//! design notes of that backend), `executor.rs`, `stream.rs`, `event.rs`, `kernel.rs`, `blas.rs`
//! and `rng.rs` where it has them, and `status.rs` (the driver's status codes, or the backend's
//! own failures, as `Error`s). State that both the executor and its streams use is in a
//! `device.rs`, so neither file imports the other. `gpu/` is the backend that CUDA and HIP
//! share (its `mod.rs` holds the platform, generic over the driver); `cuda/` and `hip/` hold
//! only `open`, their driver calls and status mapping. `noop/` (test-only feature `noop`) is
//! the template for a new backend: every trait implemented, every operation `Unsupported`.
//!
//! Shared helpers: `downcast.rs` (a backend's object back from an interface object; a mismatch
//! is an internal error), `work_queue.rs` (the in-order worker queue, first failure sticks),
//! `ptx_signature.rs` (PTX entries against `TypedKernel` signatures), `fft_builtin/` (the FFT
//! plan of the built-in kernels that `gpu/` and `opencl/` share: factoring, tables, scratch,
//! the launches).

#[cfg(feature = "cuda")]
pub(crate) mod cuda;
#[cfg(any(feature = "cuda", feature = "hip", feature = "opencl"))]
pub(crate) mod dnn_builtin;
pub(crate) mod downcast;
#[cfg(any(feature = "cuda", feature = "hip", feature = "opencl"))]
pub(crate) mod fft_builtin;
#[cfg(any(feature = "cuda", feature = "hip"))]
mod gpu;
#[cfg(feature = "hip")]
pub(crate) mod hip;
pub(crate) mod host;
#[cfg(feature = "noop")]
pub(crate) mod noop;
#[cfg(feature = "opencl")]
pub(crate) mod opencl;
pub(crate) mod ptx_signature;
mod work_queue;
