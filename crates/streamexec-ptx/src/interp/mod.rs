//! The interpreter: the reference engine, and the only one with the data-race checker.
//!
//! - **Grid**: blocks run in parallel on the caller's rayon pool (`grid.rs`); the first failing
//!   block (lowest index) is the launch's error, as [`Error::Fault`](crate::Error::Fault).
//! - **Block**: one host thread runs all warps of a block. Each warp runs until none of its lanes
//!   can (all exited or at a barrier); then the next warp runs. A barrier completes when its
//!   thread count has arrived (`bar.sync id[, count]`, `bar.arrive id, count` which does not wait,
//!   `bar.red`; default count: the whole block): its generation moves on and `bar.red`'s
//!   reduction is kept (`sync.rs`). When no warp can run, the lanes waiting at a completed
//!   generation are released (with the reduction); if none can, the launch fails with "barrier
//!   divergence" naming a waiting thread, the barrier's instruction and an exited thread (never a
//!   hang). Warps and their buffers are pooled per worker
//!   thread (registers start with stale values, which PTX leaves undefined).
//! - **Warp** (`warp.rs`, `exec.rs`): 32 lanes, one PC each. The scheduler runs the group of
//!   runnable lanes with the lowest PC, one instruction for all of them (min-PC / sorted-stack
//!   reconvergence: no post-dominator analysis; lanes that diverged merge when the running group
//!   reaches their PC, which is the reconvergence point of the structured code compilers emit).
//!   Fairness: a group that takes 4096 back-edges while other runnable lanes of its warp wait at
//!   higher PCs (an intra-warp spin lock) is set aside for 1024 instructions, so the lock holder
//!   can finish. `nanosleep.u32 t` gives the block's host thread's CPU away once per warp
//!   instruction (the longest `t` of the executing lanes, capped at PTX's 1 ms): `yield_now`
//!   below 50 µs, a real sleep from there on (`exec.rs` says why), so device-side RPC clients
//!   that spin with it leave the RPC server thread a core when they outnumber the cores.
//! - **Warp collectives** (`collective.rs`): the lanes that execute `shfl.sync`, `vote.sync`,
//!   `match.sync`, `redux.sync`, `activemask` or `bar.warp.sync` wait there; when no lane of the
//!   warp can run, the lowest-PC group whose member masks are satisfied (every non-exited member
//!   waits in it) resolves, its result computed over each lane's members that arrived. The JIT's
//!   block driver resolves by the same rules in the same state, so the engines agree.
//!   `bar.warp.sync` whose missing lane waits at `bar.sync` is a fault.
//! - **Memory** (`mem.rs`): generic addresses are device addresses (host pointers, below 2^47),
//!   shared memory at `0xA000_0000_0000_0000 + offset`, local memory at `0xB000_...`; `cvta` adds
//!   or removes the window. Every access is checked: alignment (to the access size), bounds
//!   against the launch's pinned pointer arguments, then the allocation table (pinned on first
//!   use), the block's static/dynamic shared memory, the thread's local memory, the parameter
//!   buffers. Device memory is touched only with relaxed atomics; `atom`/`red` on device memory
//!   are host CAS loops (through [`crate::device_bytes`]), covering add (int, f32, f64), min/max, exch, cas, inc/dec (PTX wrap), and/or/xor. Shared and
//!   local memory are plain bytes (one host thread per block). A fault names block, thread,
//!   kernel, PTX line and text, and the address.
//! - **Race checker** (`race.rs`, [`LaunchConfig::race_check`](crate::LaunchConfig::race_check)):
//!   each global and shared access is recorded per byte between barriers; a conflict (different threads, one a write, not
//!   both atomic, not ordered) ends the launch with a detail starting "data race" naming both
//!   threads, both instructions, read/write and the address. Ordering rule: the same thread, or two
//!   lanes of one warp at *different* warp instructions (lock-step); lanes of a warp at the same
//!   instruction are not ordered (two of them writing one byte race). Across blocks, any two
//!   non-atomic global accesses to one byte, one a write, race (fences are not taken as ordering).
//!   Off, it costs one branch per access.
//! - **Calls** (`call.rs`): a per-lane return stack (1024 calls deep at most); a call made from
//!   a recursive function saves the function's frame on a per-lane byte stack (64 KiB at most)
//!   and its return restores it. Past either limit the launch ends with a fault naming the
//!   thread.
//! - **Served calls** (`vprintf`, `malloc`, `free`, `__assertfail`): one `Op::Service` per
//!   call, run lane by lane through `service_call.rs` (the JIT runs the same function).
//! - **Not done / limits**: textures/surfaces, `cp.async`, `mma`, indirect calls and other
//!   external functions; `.approx`
//!   transcendental functions use Rust's `f64` functions (more accurate than the GPU); directed
//!   rounding of `fma` is exact only where the residue test decides it; 64 KiB local memory and
//!   16384 registers per thread.

pub(crate) mod block;
pub(crate) mod call;
pub(crate) mod collective;
pub(crate) mod exec;
pub(crate) mod mem;
pub(crate) mod race;
pub(crate) mod sync;
pub(crate) mod warp;
