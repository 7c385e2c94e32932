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
//! | file | holds |
//! |---|---|
//! | `entry.rs` | the wrapper every entry point runs in (panics, host-function check), `CuErr`, error names and strings, the extra `streamexec_cuda_*` exports |
//! | `abi.rs` | the compile-time check of every export's signature against cudarc's `driver::sys` |
//! | `handles.rs` | handle tables: opaque never-reused values, looked up before use |
//! | `state.rs` | `cuInit`, configuration (`STREAMEXEC_CUDA_DEVICES`, `STREAMEXEC_CUDA_CC`) and devices |
//! | `device.rs` | device queries and attributes |
//! | `context.rs` | contexts (primary and created), the per-thread current-context stack, sticky errors |
//! | `memory.rs` | the process-wide address map (unified addressing), allocation, host memory |
//! | `copy.rs` | copies and memsets |
//! | `stream.rs` | streams: the legacy and per-thread default streams, ordering, host functions |
//! | `event.rs` | events |
//! | `module.rs` | modules, functions, globals |
//! | `launch.rs` | `cuLaunchKernel` |
//! | `graph.rs` | CUDA graphs (the explicit API): graphs, nodes, executable graphs, `cuGraphLaunch` |
//! | `refused.rs` | entry points cudarc can reach that this library refuses (`CUDA_ERROR_NOT_SUPPORTED`) |

#![allow(non_snake_case)] // exported names are CUDA's

mod abi;
mod context;
mod copy;
mod device;
mod entry;
mod event;
mod graph;
mod handles;
mod launch;
mod memory;
mod module;
mod refused;
mod state;
mod stream;

pub use entry::{streamexec_cuda_last_error_detail, streamexec_cuda_last_fault};
