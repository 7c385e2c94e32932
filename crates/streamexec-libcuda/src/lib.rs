//! The CUDA driver API on the CPU: a `libcuda.so` whose `cu*` entry points run on streamexec's
//! host platform and its PTX engine.
//!
//! Point a driver-API program at it with `LD_LIBRARY_PATH` (cudarc, streamexec's own CUDA
//! backend and C programs linked with `-lcuda` all load `libcuda.so`/`libcuda.so.1` by name).
//! PTX modules are decoded by the engine and their kernels run on the CPU with CUDA's execution
//! model; cubins and fatbins are refused (`CUDA_ERROR_NO_BINARY_FOR_GPU`). CUDA graphs built
//! with the explicit API (`cuGraphCreate`, `cuGraphAdd*Node`, `cuGraphInstantiateWithFlags`,
//! `cuGraphLaunch`, ...) run in stream order like any other work; stream capture is refused.
//!
//! Semantics follow the driver API documentation and are strict where CUDA leaves behaviour
//! undefined, so bugs in the calling code show up as error codes instead of silent corruption:
//! every device range must lie inside one live allocation, handles are checked (a destroyed
//! handle is `CUDA_ERROR_INVALID_HANDLE`, never reused), a kernel fault is a sticky error of its
//! context with the engine's report (kernel, block, thread, PTX line, address) on stderr and
//! from [`streamexec_cuda_last_fault`], and driver calls from inside a host function are
//! `CUDA_ERROR_NOT_PERMITTED`. No panic crosses the C boundary.
//!
//! # Files
//!
//! Each object family keeps its handle table in its own file; the files import each other
//! without a cycle (`tests/layering.rs` checks it), lower layers first:
//!
//! | file | holds |
//! |---|---|
//! | `entry.rs` | the wrapper every entry point runs in (panics, host-function check), `CuErr`, error names and strings, the extra `streamexec_cuda_*` exports |
//! | `handles.rs` | handle tables: opaque never-reused values, looked up before use |
//! | `driver.rs` | `cuInit`, configuration (`STREAMEXEC_CUDA_DEVICES`, `STREAMEXEC_CUDA_CC`), the host executor |
//! | `device.rs` | device queries and attributes |
//! | `stream/mod.rs` | the stream object and its table: a host-platform stream, the lock-ordered enqueue |
//! | `context/mod.rs` | contexts (primary and created) and their table, the per-thread current-context stack, sticky errors, stream order within a context, stream handles |
//! | `event.rs`, `memory.rs`, `module.rs` | events; the process-wide address map (unified addressing), allocation, host memory; modules, functions, globals |
//! | `stream/api.rs`, `context/api.rs` | the `cuStream*` and `cuCtx*`/`cuDevicePrimaryCtx*` entry points (destroying a context frees what it owns in every family) |
//! | `copy.rs`, `launch.rs` | copies and memsets; `cuLaunchKernel` and occupancy |
//! | `graph/` | CUDA graphs (the explicit API): tables and order (`mod.rs`), node operations (`nodes.rs`), building (`build.rs`), executable graphs (`instantiate.rs`), `cuGraphLaunch` (`launch.rs`) |
//! | `exports.rs` | the one declaration list of every entry point, and the `extern "C"` shells it makes (refusals included) |
//! | `abi.rs` | the compile-time check of that list against cudarc's `driver::sys` |

#![allow(non_snake_case)] // exported names are CUDA's

mod abi;
mod context;
mod copy;
mod device;
mod driver;
mod entry;
mod event;
mod exports;
mod graph;
mod handles;
mod launch;
mod memory;
mod module;
mod stream;

pub use entry::{streamexec_cuda_last_error_detail, streamexec_cuda_last_fault};
