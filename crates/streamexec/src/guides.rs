//! The README and the guides of `docs/` as doc tests: `cargo test -p streamexec --doc` compiles
//! and runs every `rust` block in them (`no_run` blocks are compiled only). Pages whose examples
//! need an optional feature are included only with it.
#![cfg(doctest)]

/// README.md.
#[doc = include_str!("../../../README.md")]
pub struct Readme;

/// docs/README.md.
#[doc = include_str!("../../../docs/README.md")]
pub struct GuidesIndex;

/// docs/streams.md.
#[doc = include_str!("../../../docs/streams.md")]
pub struct Streams;

/// docs/kernels.md.
#[doc = include_str!("../../../docs/kernels.md")]
pub struct Kernels;

/// docs/memory.md.
#[doc = include_str!("../../../docs/memory.md")]
pub struct Memory;

/// docs/canned-ops.md.
#[doc = include_str!("../../../docs/canned-ops.md")]
pub struct CannedOps;

/// docs/plugins.md.
#[doc = include_str!("../../../docs/plugins.md")]
pub struct Plugins;

/// docs/fft.md.
#[doc = include_str!("../../../docs/fft.md")]
pub struct Fft;

/// docs/dnn.md.
#[doc = include_str!("../../../docs/dnn.md")]
pub struct Dnn;

/// docs/command-buffers.md.
#[doc = include_str!("../../../docs/command-buffers.md")]
pub struct CommandBuffers;

/// docs/async.md.
#[doc = include_str!("../../../docs/async.md")]
pub struct Async;

/// docs/rpc.md.
#[doc = include_str!("../../../docs/rpc.md")]
pub struct Rpc;

/// docs/mpi.md (its examples use `streamexec::mpi`: feature `mpi`).
#[cfg(feature = "mpi")]
#[doc = include_str!("../../../docs/mpi.md")]
pub struct Mpi;

/// docs/cuda-without-gpu.md (its example uses cudarc: feature `cuda`).
#[cfg(feature = "cuda")]
#[doc = include_str!("../../../docs/cuda-without-gpu.md")]
pub struct CudaWithoutGpu;

/// docs/ptx.md.
#[doc = include_str!("../../../docs/ptx.md")]
pub struct Ptx;

/// docs/testing.md.
#[doc = include_str!("../../../docs/testing.md")]
pub struct Testing;

/// benches/README.md.
#[doc = include_str!("../../../benches/README.md")]
pub struct Benches;
