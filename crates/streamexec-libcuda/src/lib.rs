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
//! Building, loading and testing it: `README.md` of this crate.
//!
//! # Internals
//!
//! The library is a client of streamexec's **public** API like any other: the host platform's
//! executor, `DeviceMemory`/`UnifiedMemory`, `Stream`, `Event` and PTX loaded through
//! `MultiKernelLoaderSpec`, so everything it does is checked again by the handle layer. It adds
//! only what the C API needs from streamexec: `ArgList::arg_bytes` (a by-value parameter as raw
//! bytes with its alignment), `Kernel::module_global` (a module variable's bytes, for
//! `cuModuleGetGlobal`) and `DeviceSlice::cast`.
//!
//! - **One address space.** Every CUDA device of the library is the one host executor
//!   (`STREAMEXEC_CUDA_DEVICES=N` makes N of them); a process-wide map from address to region
//!   (device memory, mapped pinned memory, named module globals) checks every device range a
//!   call names (`memory.rs`), so a range outside a live allocation is
//!   `CUDA_ERROR_INVALID_VALUE`. Kernel parameters are raw bytes, so a kernel's pointers are
//!   checked by the engine at each access (a fault), not at launch.
//! - **Handles** are opaque numbers looked up in per-kind tables, never dereferenced, never
//!   reused (`handles.rs`); each family's table is a `static` in its own file.
//! - **Streams** (`stream/`) wrap host `Stream`s. CUDA's legacy default stream is modelled with
//!   `then_wait_for` between streams of a context at enqueue (`context/mod.rs` says which);
//!   nothing blocks while a stream's lock is held (synchronizing records an event and waits
//!   outside), so a thread serving a running kernel's RPC can call the driver.
//! - **Graphs** (`graph/`, the explicit API; stream capture stays refused). A kernel node is the
//!   same checked `launch::KernelLaunch` that `cuLaunchKernel` enqueues (argument bytes copied
//!   when the node is added), a memset node a list of `copy::Memset` rows, a memcpy node (1-D/2-D,
//!   host/device/unified) a list of `copy::issue_copy` rows; a child-graph node holds a flattened
//!   clone of the child. Instantiation takes the nodes in a topological order (Kahn's algorithm,
//!   ties in the order they were added, a cycle refused although the API cannot build one) with
//!   child graphs flattened in place, so later edits of the graph do not reach it.
//!   `cuGraphLaunch` checks every node again (ranges inside live allocations, events and modules
//!   alive), then enqueues them all in one `CuStream::enqueue`, after a wait for the previous
//!   launch of the same executable graph (an event per launch, under a lock, so launches on
//!   different streams are ordered as CUDA documents), and records that launch's event.
//!   Sequential order is a valid schedule of the graph; kernel arguments are packed at enqueue,
//!   so `cuGraphExecKernelNodeSetParams` reaches only later launches. All nodes that run in a
//!   context must share one, and the launching stream must belong to it (else
//!   `CUDA_ERROR_NOT_SUPPORTED`). Graph, node and executable-graph handles are table handles; a
//!   bad one is `CUDA_ERROR_INVALID_VALUE`, as the graph API documents.
//! - **Errors.** Every entry point runs in `entry::call`: panics become `CUDA_ERROR_UNKNOWN`,
//!   calls from a host function `CUDA_ERROR_NOT_PERMITTED`, calls in a `fork()` child of a
//!   process that initialised the driver `CUDA_ERROR_NOT_INITIALIZED` (a `pthread_atfork`
//!   handler sets a flag, checked first), and the detail of each failure is
//!   kept per thread ([`streamexec_cuda_last_error_detail`]). A kernel fault (any failure of a
//!   context's asynchronous work) becomes the context's sticky error, mapped from the engine's
//!   report (`ILLEGAL_ADDRESS`, `MISALIGNED_ADDRESS`, `LAUNCH_FAILED`; a device `assert` is
//!   `ASSERT`, with CUDA's message on stderr), printed and kept for
//!   [`streamexec_cuda_last_fault`].
//! - **Kernels' printf and malloc** go to the executor's `PtxServices`: `cuInit` makes its
//!   printf output buffered, and every synchronisation point writes the buffer to stdout
//!   (`driver::flush_printf`); `CU_LIMIT_MALLOC_HEAP_SIZE` is its heap's limit.
//! - **Signatures, written once.** `exports.rs` holds the one declaration list of every entry
//!   point (`entry_points!`, a macro that hands the list to another, as ZLUDA's
//!   `cuda_function_declarations!` does): each entry's C signature, the CUDA version its ABI
//!   starts at (`fn cuMemAlloc_v2(..) @ 3020`, as `cudaTypedefs.h` names it
//!   `PFN_cuMemAlloc_v3020`), the version a later variant replaced it at where CUDA has one
//!   (`cuCtxCreate_v3 @ 11040..12050`), its per-thread default-stream export where it has one
//!   (`ptsz cuLaunchKernel_ptsz`), and the family file whose ordinary Rust function of the same
//!   name implements it (returning `CuResult<()>`), or the reason it is refused. From it come
//!   the `extern "C"` shells (the implementation in `entry::call`; a `_ptds`/`_ptsz` shell runs
//!   the same function with the NULL stream meaning the per-thread stream, `entry::
//!   call_per_thread`; a refusal is `CUDA_ERROR_NOT_SUPPORTED` naming what is missing), the
//!   table `cuGetProcAddress` searches by base name and version (`proc_address.rs`; a variant
//!   not exported is `CUDA_ERROR_NOT_FOUND`, never another variant's ABI), and, in `abi.rs`,
//!   the compile-time check of every signature against cudarc's `driver::sys` (enums passed by
//!   value are received as `u32`: a C caller may pass any value; `CUDA_MEMCPY3D`'s memory types
//!   are read the same way). The CUDA 11 names of the kernel-node calls (`cuGraphAddKernelNode`,
//!   ...), which take `CUDA_KERNEL_NODE_PARAMS_v1`, CUDA 11.3's `cuGetProcAddress`, 12.1's
//!   `cuCtxSetFlags` and the 12.3 to 12.5 entry points are checked against local declarations of
//!   cudarc's signatures for those versions. `cuDriverGetVersion` reports the newest version of
//!   the list (12.5; a unit test keeps them equal). A new entry point is a line in the list and
//!   a function in its family's file.
//! - **Loading.** `scripts/build-libcuda.sh` builds it in release mode into `target/libcuda`; the
//!   test script puts that directory first on `LD_LIBRARY_PATH` and requires `cuda`, so the CUDA
//!   backend of streamexec runs the conformance suite on it in every test run. `cargo test` puts
//!   `target/debug` first on the library path, so the script removes any debug build of the
//!   library there, and the tests check (`/proc/self/maps`) that they loaded the release one.
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
//! | `event.rs`, `memory.rs` | events; the process-wide address map (unified addressing), allocation, host memory, pointer attributes |
//! | `pointer.rs` | pointer attributes (`cuPointerGetAttribute(s)`) |
//! | `managed.rs` | managed memory (`cuMemAllocManaged`, `cuMemAdvise`, `cuMemPrefetchAsync`, `cuStreamAttachMemAsync`, `cuMemRangeGetAttribute(s)`) |
//! | `module/` | modules, functions, globals, and CUDA 12's libraries and their kernels (`mod.rs`: objects, tables, loading; `library.rs`: the `cuLibrary*`/`cuKernel*` entry points) |
//! | `link.rs` | `cuLink*`: PTX inputs linked on the text into one PTX image |
//! | `maxnreg.rs` | `CU_JIT_MAX_REGISTERS` written into the PTX as `.maxnreg` on every entry |
//! | `stream/api.rs`, `context/api.rs` | the `cuStream*` and `cuCtx*`/`cuDevicePrimaryCtx*` entry points (destroying a context frees what it owns in every family) |
//! | `copy.rs`, `launch.rs` | copies and memsets; `cuLaunchKernel`, `cuLaunchKernelEx` and its attributes, occupancy |
//! | `copy_2d.rs` | `cuMemcpy2D*`, `cuMemcpy3D*`: pitched copies checked and issued as graph memcpy nodes are |
//! | `graph/` | CUDA graphs (the explicit API): tables and order (`mod.rs`), node operations (`nodes.rs`), building (`build.rs`), executable graphs (`instantiate.rs`), `cuGraphLaunch` (`launch.rs`) |
//! | `exports.rs` | the one declaration list of every entry point |
//! | `shells.rs` | the `extern "C"` shells the list makes (per-thread variants and refusals included), and the table `cuGetProcAddress` searches |
//! | `proc_address.rs` | `cuGetProcAddress(_v2)`: the lookup by base name, CUDA version and stream mode |
//! | `abi.rs` | the compile-time check of that list against cudarc's `driver::sys` |

#![allow(non_snake_case)] // exported names are CUDA's

mod abi;
mod context;
mod copy;
mod copy_2d;
mod device;
mod driver;
mod entry;
mod event;
mod exports;
mod graph;
mod handles;
mod launch;
mod link;
mod managed;
mod maxnreg;
mod memory;
mod module;
mod pointer;
mod proc_address;
mod shells;
mod stream;

pub use entry::{
    streamexec_cpu_libcuda_version, streamexec_cuda_last_error_detail, streamexec_cuda_last_fault,
};
