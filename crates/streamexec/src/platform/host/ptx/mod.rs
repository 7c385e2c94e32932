//! The host platform's PTX engine: PTX loaded through a spec's `add_cuda_ptx_*` image runs on
//! the CPU with CUDA's execution model.
//!
//! Loading parses the module ([`crate::ptx::parse_module`]), lays out its `.global`/`.const`
//! data in a device allocation of the executor, and decodes every `.entry` into the IR of
//! [`crate::ptx::ir`]; the result is cached per executor by module text. A launch runs the grid's
//! blocks in parallel on the executor's pool; inside a block, warps of 32 lanes run in
//! lock-step (`warp.rs`, `exec.rs`), barriers park warps (`sched.rs`), every memory access is
//! checked (`mem.rs`), and an opt-in checker reports data races (`race.rs`).
//!
//! The host platform runs the PTX of a spec's `add_cuda_ptx_*` image when the spec has no native
//! `HostKernel` (a native kernel wins when both are there). By default a launch runs the kernel
//! compiled to native code by the JIT (`jit/`, ARCHITECTURE.md "PTX JIT"); what the JIT does not
//! compile, the race checker, and `PtxEngine::Interpreter` use the interpreter. The interpreter
//! executes as follows:
//!
//! - **Grid**: blocks run in parallel on the executor's rayon pool (`sched::run_grid`); the first
//!   failing block (lowest index) is the launch's error, as `Error::KernelFault { platform: "host" }`.
//! - **Block**: one host thread runs all warps of a block. Each warp runs until none of its lanes
//!   can (all exited or at a barrier); then the next warp runs. When no warp can run, barriers
//!   whose thread count has arrived release (`bar.sync id[, count]`; default: the whole block); if
//!   none can, the launch fails with "barrier divergence" naming a waiting thread, the barrier's
//!   instruction and an exited thread (never a hang). Warps and their buffers are pooled per worker
//!   thread (registers start with stale values, which PTX leaves undefined).
//! - **Warp** (`warp.rs`, `exec.rs`): 32 lanes, one PC each. The scheduler runs the group of
//!   runnable lanes with the lowest PC, one instruction for all of them (min-PC / sorted-stack
//!   reconvergence: no post-dominator analysis; lanes that diverged merge when the running group
//!   reaches their PC, which is the reconvergence point of the structured code compilers emit).
//!   `shfl.sync`, `vote.sync` and `activemask` act on the running group, so they are right after
//!   an if/else has reconverged. Fairness: a group that takes 4096 back-edges while other runnable
//!   lanes of its warp wait at higher PCs (an intra-warp spin lock) is set aside for 1024
//!   instructions, so the lock holder can finish. `bar.warp.sync mask` waits until every lane of
//!   the mask that has not exited is at it (the group is set aside meanwhile), so lanes that ran
//!   ahead of a spinning one meet it there; a missing lane waiting at `bar.sync` is a fault.
//!   `nanosleep.u32 t` gives the block's host thread's CPU away once per warp instruction (the
//!   longest `t` of the executing lanes, capped at PTX's 1 ms): `yield_now` below 50 µs, a real
//!   sleep from there on (`exec.rs` says why), so device-side RPC clients that spin with it leave
//!   the RPC server thread a core when they outnumber the cores.
//! - **Memory** (`mem.rs`): generic addresses are device addresses (host pointers, below 2^47),
//!   shared memory at `0xA000_0000_0000_0000 + offset`, local memory at `0xB000_...`; `cvta` adds
//!   or removes the window. Every access is checked: alignment (to the access size), bounds
//!   against the launch's pinned pointer arguments, then the executor's allocation table (pinned on
//!   first use), the block's static/dynamic shared memory, the thread's local memory, the
//!   parameter buffers. Device memory is touched only with relaxed atomics as everywhere on the
//!   host platform; `atom`/`red` on device memory are host CAS loops (through `crate::device_bytes`),
//!   covering add (int, f32, f64), min/max, exch, cas, inc/dec (PTX wrap), and/or/xor. Shared and
//!   local memory are plain bytes (one host thread per block). A fault names block, thread,
//!   kernel, PTX line and text, and the address.
//! - **Race checker** (`race.rs`, `StreamExecutor::set_race_check(true)`): each global and shared
//!   access is recorded per byte between barriers; a conflict (different threads, one a write, not
//!   both atomic, not ordered) ends the launch with a detail starting "data race" naming both
//!   threads, both instructions, read/write and the address. Ordering rule: the same thread, or two
//!   lanes of one warp at *different* warp instructions (lock-step); lanes of a warp at the same
//!   instruction are not ordered (two of them writing one byte race). Across blocks, any two
//!   non-atomic global accesses to one byte, one a write, race (fences are not taken as ordering).
//!   Off, it costs one branch per access.
//! - **Not done / limits**: f16/bf16 and packed types, textures/surfaces, `cp.async`, `mma`,
//!   `match`/`redux`, `bar.arrive`/`bar.red`, indirect calls and `vprintf`, recursion; `.approx`
//!   transcendental functions use Rust's `f64` functions (more accurate than the GPU); directed
//!   rounding of `fma` is exact only where the residue test decides it; 64 KiB local memory and
//!   16384 registers per thread.

mod exec;
mod jit;
mod mem;
mod module;
mod race;
mod sched;
mod warp;

use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::HostExecutor;
use super::memory::{AllocTable, Pinned};
use crate::device_bytes;
use crate::error::{Error, Result};
use crate::interface::KernelInterface;
use crate::platform::ptx_signature::{check_signature, kernel_load_error};
use crate::platform::work_queue::RunFn;
use crate::ptx::ir::Program;
use crate::ptx::{PtxEntry, parse_entries};
use crate::types::{ArgView, Dim3, PackedArg, ParamKind};
use crate::types::{DeviceAddress, LaunchDims};
use crate::types::{KernelImage, MultiKernelLoaderSpec, PtxEngine};
use module::LoadedModule;
pub(crate) use module::ModuleCache;

/// Warp instructions the host platform's PTX engine has executed in this process (one per
/// instruction issued for a group of lanes), for throughput figures in benchmarks.
pub fn warp_instructions_executed() -> u64 {
    WARP_INSTRUCTIONS.load(std::sync::atomic::Ordering::Relaxed)
}

/// An entry's name and whether the JIT compiled it: the number of lane functions it calls
/// instead of emitting native code for them, or why it did not compile.
#[doc(hidden)]
pub type JitCheck = (String, std::result::Result<usize, String>);

/// Decodes every entry of `module` and compiles it with the PTX JIT: per entry (sorted by
/// name), [`JitCheck`]. The compiled code is dropped.
///
/// For the fuzz target and tests, which check that anything that decodes compiles or is
/// refused without a panic; not part of the supported API.
#[doc(hidden)]
pub fn check_jit_compiles(
    module: &crate::ptx::ast::Module,
    data_base: u64,
) -> std::result::Result<Vec<JitCheck>, crate::ptx::PtxError> {
    let data = crate::ptx::module_data(module)?;
    let decoded = crate::ptx::decode_module(module, &data, data_base)?;
    let mut out: Vec<_> = decoded
        .programs
        .values()
        .map(|p| (p.name.clone(), jit::compile(p).map(|k| k.called_ops)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Each kernel the PTX JIT has compiled in this process, with the time compiling it took
/// (decoded IR to native code), oldest first: for compile-time figures in benchmarks.
pub fn jit_compile_times() -> Vec<(String, std::time::Duration)> {
    JIT_COMPILES.lock().clone()
}

/// Appended to by the JIT once per compiled kernel.
static JIT_COMPILES: Mutex<Vec<(String, std::time::Duration)>> = Mutex::new(Vec::new());

/// The next launch's `Launch::id`.
static NEXT_LAUNCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Added to by the engine once per finished block.
static WARP_INSTRUCTIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A kernel of a loaded PTX module.
pub(crate) struct PtxKernel {
    name: String,
    module: Arc<LoadedModule>,
    prog: Arc<Program>,
    entry: Option<PtxEntry>,
}

impl KernelInterface for PtxKernel {
    fn name(&self) -> &str {
        &self.name
    }
    fn verify_signature(&self, expected: &[ParamKind]) -> Result<()> {
        match &self.entry {
            Some(e) => check_signature(e, expected),
            None => Ok(()),
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn module_global(&self, name: &str) -> Option<(DeviceAddress, u64)> {
        let (base, _) = self.module.data.as_ref()?;
        let &(off, bytes) = self.module.symbols.get(name)?;
        Some((base.offset(off), bytes))
    }
    fn rpc_client_symbol(&self) -> Option<(DeviceAddress, usize)> {
        // A module built against LLVM's GPU libc: the executor writes its server's client
        // image here (the module's data lives, and stays pinned, as long as the module).
        self.module_global(crate::rpc::CLIENT_SYMBOL)
            .map(|(addr, bytes)| (addr, bytes as usize))
    }
}

fn load_module(exec: &HostExecutor, text: &str, kernel: &str) -> Result<Arc<LoadedModule>> {
    let mut cache = exec.ptx_modules.modules.lock();
    if let Some(m) = cache.iter().find(|m| &*m.text == text) {
        return Ok(m.clone());
    }
    let ptx_error = |e| kernel_load_error("host", kernel, e);
    let ast = crate::ptx::parse_module(text).map_err(ptx_error)?;
    let data = crate::ptx::module_data(&ast).map_err(ptx_error)?;
    let placed = if data.image.is_empty() {
        None
    } else {
        let len = data.image.len() as u64;
        let addr = exec.allocate_for_module(len)?;
        let pinned = exec.pin(addr, len, "PTX module data")?;
        let mut image = data.image.clone();
        for &at in &data.relocs {
            let v = u64::from_le_bytes(image[at..at + 8].try_into().unwrap_or([0; 8])); // ok: 8 bytes
            image[at..at + 8].copy_from_slice(&v.wrapping_add(addr.raw()).to_le_bytes());
        }
        // SAFETY: pinned for `len` bytes of live device memory.
        unsafe { device_bytes::store_bytes(pinned.as_ptr(), &image) };
        Some((addr, pinned))
    };
    let base = placed.as_ref().map_or(0, |(a, _)| a.raw());
    let decoded = match crate::ptx::decode_module(&ast, &data, base) {
        Ok(d) => d,
        Err(e) => {
            if let Some((a, _)) = &placed {
                exec.table.free(*a);
            }
            return Err(ptx_error(e));
        }
    };
    let m = Arc::new(LoadedModule {
        text: text.into(),
        decoded,
        entries: parse_entries(text).unwrap_or_default(),
        symbols: data
            .symbols
            .iter()
            .map(|(n, &off)| (n.clone(), (off, data.sizes.get(n).copied().unwrap_or(0))))
            .collect(),
        data: placed,
        table: exec.table.clone(),
        jit: Default::default(),
    });
    cache.push(m.clone());
    Ok(m)
}

/// Loads `img`'s entry as a host-platform PTX kernel.
pub(crate) fn load(
    exec: &HostExecutor,
    spec: &MultiKernelLoaderSpec,
    img: &KernelImage,
) -> Result<Arc<dyn KernelInterface>> {
    let name = &img.kernel_name;
    let text = img.source.text().map_err(|e| Error::KernelLoad {
        platform: "host".into(),
        kernel: name.clone(),
        detail: format!(
            "cannot read the PTX image ({e}); the spec holds: {}; add a readable PTX image or a \
             native Rust kernel (add_host_kernel)",
            spec.describe()
        ),
    })?;
    let module = load_module(exec, &text, name)?;
    let Some(prog) = module.decoded.programs.get(name).cloned() else {
        let mut have: Vec<&str> = module.decoded.programs.keys().map(String::as_str).collect();
        have.sort_unstable();
        return Err(Error::KernelLoad {
            platform: "host".into(),
            kernel: name.clone(),
            detail: format!(
                "the PTX module has no .entry named `{name}` (it has: {})",
                have.join(", ")
            ),
        });
    };
    let entry = module.entries.iter().find(|e| &e.name == name).cloned();
    Ok(Arc::new(PtxKernel {
        name: name.clone(),
        module,
        prog,
        entry,
    }))
}

/// Everything a running launch shares across its blocks.
pub(crate) struct Launch {
    prog: Arc<Program>,
    kernel: String,
    params: Vec<u8>,
    grid: Dim3,
    block: Dim3,
    dynamic_bytes: usize,
    pins: Vec<Pinned>,
    table: Arc<AllocTable>,
    extra: Mutex<Vec<Pinned>>,
    race: Option<race::RaceGrid>,
    start: Instant,
    /// Unique per launch in this process (the JIT's per-worker range cache is keyed by it).
    id: u64,
    nsm: u32,
    /// The compiled kernel, when the JIT runs this launch (else the interpreter does).
    jit: Option<Arc<jit::JitKernel>>,
    _module: Arc<LoadedModule>,
}

/// Records a compile for `jit_compile_times` and, with `STREAMEXEC_PTX_JIT_LOG` set, prints it.
fn log_compile(k: &PtxKernel, r: &std::result::Result<Arc<jit::JitKernel>, jit::Unsupported>) {
    if let Ok(c) = r {
        JIT_COMPILES.lock().push((k.name.clone(), c.took));
    }
    if std::env::var_os("STREAMEXEC_PTX_JIT_LOG").is_none() {
        return;
    }
    match r {
        Ok(c) => eprintln!(
            "streamexec PTX JIT: `{}`: {} instructions compiled in {:.2?}, {} lane functions \
             called (no native code), {} suspension points",
            k.name,
            k.prog.code.len(),
            c.took,
            c.called_ops,
            c.resumes_len()
        ),
        Err(why) => eprintln!(
            "streamexec PTX JIT: `{}` is left to the interpreter: {why}",
            k.name
        ),
    }
}

/// The engine for a launch of `k`: the compiled kernel, or `None` for the interpreter.
/// Compiles on first use and keeps the result in the module.
fn choose_engine(exec: &HostExecutor, k: &PtxKernel) -> Result<Option<Arc<jit::JitKernel>>> {
    let engine = exec.ptx_engine();
    if engine == PtxEngine::Interpreter || exec.race_check() || cfg!(miri) {
        // The race checker lives in the interpreter; Miri cannot run generated code.
        return Ok(None);
    }
    type Outcome = std::result::Result<Arc<jit::JitKernel>, jit::Unsupported>;
    let outcome: Outcome = {
        let mut cache = k.module.jit.lock();
        let entry = cache.entry(k.name.clone()).or_insert_with(|| {
            let r: Outcome = jit::compile(&k.prog).map(Arc::new);
            log_compile(k, &r);
            Arc::new(r)
        });
        match entry.downcast_ref::<Outcome>() {
            Some(r) => r.clone(),
            None => Err("internal error: a foreign entry in the JIT cache".into()),
        }
    };
    match (outcome, engine) {
        (Ok(c), PtxEngine::Jit) => Ok(Some(c)),
        (Ok(c), _) if !c.prefers_interpreter => Ok(Some(c)),
        (Ok(_), _) => Ok(None),
        (Err(why), PtxEngine::Jit) => Err(Error::unsupported(
            "host",
            "PTX JIT",
            format!(
                "kernel `{}`: {why}; the interpreter runs it (PtxEngine::Auto or Interpreter)",
                k.name
            ),
        )),
        (Err(_), _) => Ok(None),
    }
}

/// Checks and packs a launch of `k`; the returned closure runs it on `pool`.
pub(crate) fn prepare(
    exec: &HostExecutor,
    k: &PtxKernel,
    dims: &LaunchDims,
    args: &[PackedArg],
) -> Result<RunFn> {
    let name = k.name.clone();
    let prog = k.prog.clone();
    let mismatch = |detail: String| Error::SignatureMismatch {
        kernel: name.clone(),
        detail,
    };
    let mut params = vec![0u8; prog.param_bytes as usize];
    let mut pins = Vec::new();
    let mut dynamic = 0u64;
    let mut slot = 0;
    for (i, a) in args.iter().enumerate() {
        let p = match a.view() {
            ArgView::SharedMemory { bytes, .. } => {
                dynamic += bytes.next_multiple_of(16);
                continue;
            }
            _ => prog.params.get(slot).ok_or_else(|| {
                mismatch(format!(
                    "the launch passes more than the {} parameter(s) the PTX entry declares",
                    prog.params.len()
                ))
            })?,
        };
        slot += 1;
        let at = p.offset as usize;
        match a.view() {
            ArgView::Scalar(bytes) => {
                if bytes.len() != p.size as usize {
                    return Err(mismatch(format!(
                        "argument {i}: {} bytes passed for PTX parameter `{}` of {} bytes",
                        bytes.len(),
                        p.name,
                        p.size
                    )));
                }
                params[at..at + bytes.len()].copy_from_slice(bytes);
            }
            ArgView::Pointer { addr, bytes } => {
                if p.size != 8 {
                    return Err(mismatch(format!(
                        "argument {i}: a pointer passed for PTX parameter `{}` of {} bytes",
                        p.name, p.size
                    )));
                }
                pins.push(exec.pin_arg(addr, bytes, &name, i)?);
                params[at..at + 8].copy_from_slice(&addr.raw().to_le_bytes());
            }
            ArgView::SharedMemory { .. } => {}
        }
    }
    if slot != prog.params.len() {
        return Err(mismatch(format!(
            "the launch passes {slot} parameter(s), the PTX entry declares {}",
            prog.params.len()
        )));
    }
    let limit = exec.description.shared_memory_per_block;
    let total_shared = prog.static_shared_bytes as u64 + dynamic;
    if total_shared > limit {
        return Err(Error::LaunchConfig {
            platform: "host".into(),
            kernel: name,
            detail: format!(
                "{} bytes of static and {dynamic} bytes of dynamic shared memory exceed the \
                 {limit} bytes per block",
                prog.static_shared_bytes
            ),
        });
    }
    if let Some((_, p)) = &k.module.data {
        pins.push(p.clone());
    }
    let jit = choose_engine(exec, k)?;
    let launch = Launch {
        prog,
        kernel: name.clone(),
        params,
        grid: dims.blocks.0,
        block: dims.threads.0,
        dynamic_bytes: dynamic as usize,
        pins,
        table: exec.table.clone(),
        extra: Mutex::new(Vec::new()),
        race: exec.race_check().then(race::RaceGrid::default),
        start: Instant::now(),
        id: NEXT_LAUNCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        nsm: exec.pool.current_num_threads() as u32,
        jit,
        _module: k.module.clone(),
    };
    let pool = exec.pool.clone();
    Ok(Box::new(move || {
        let mut launch = launch;
        launch.start = Instant::now();
        sched::run_grid(&pool, &launch).map_err(|detail| Error::KernelFault {
            platform: "host".into(),
            kernel: name,
            detail,
        })
    }))
}
