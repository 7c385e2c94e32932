//! The PTX JIT: a kernel's decoded IR compiled to native code with Cranelift.
//!
//! `analysis.rs` finds basic blocks, suspension points and the registers live across them;
//! `lower/` emits the scalar function that runs a range of a block's threads, each as plain
//! scalar code until it exits or suspends; `vector.rs` (uniform/varying registers and their
//! shapes) and `lower/vector/` emit the vector function that runs groups of 4 threads in
//! SIMD; `hoist.rs` finds the accesses whose range a block can check up front; `native.rs`
//! gives the common lane functions native code; `run.rs` holds the runtime functions
//! compiled code calls and the block driver.
//!
//! ## Design
//!
//! The decoded IR of a kernel is compiled with Cranelift (`cranelift-jit`/`-frontend`) into one
//! function `run(ctx, begin, end) -> status` that runs threads `begin..end` of a block. The
//! technique is the one of PoCL's work-group loops, CuPBoP and COX: a block's threads become a loop
//! around barrier-free code.
//!
//! - **Threads as a loop; barriers as suspension points.** Within the function each thread runs its
//!   own scalar code (PTX registers are Cranelift variables, branches are jumps, a guard is a
//!   conditional branch), so divergence needs no masks. Where a thread must wait for others
//!   (`bar.sync`, `bar.red`, and the warp collectives `shfl.sync`, `vote.sync`, `match.sync`,
//!   `redux.sync`, `activemask`), it stores the registers live after that instruction (a backward liveness
//!   analysis, `analysis.rs`) in the spill area (one slot per saved register, lane-major: slot `s` of thread `t` at `s * threads + t`), stores the instruction's operands, writes its resume index to its state word and
//!   the loop goes on with the next thread. A later call enters each thread through a jump table on
//!   its resume index, reloads its live registers and continues. Instead of splitting the kernel
//!   into regions at compile time (PoCL's region formation), the regions are the paths between
//!   suspension points, found at run time; this handles unstructured control flow and barriers
//!   inside loops or device functions without a CFG transformation.
//! - **Groups of lanes as vectors.** Kernels without calls, `nanosleep` or `bar.warp.sync`
//!   also get a vector function (`lower/vector/`) that runs 4 consecutive threads of a block
//!   row at once: registers the same in every lane (parameters, block ids and what is computed
//!   from them) are scalars, the others `i32x4` (32-bit values, zero- or sign-extended in their
//!   slots) or two `i64x2`. The group never diverges: a branch or guard taken by all or by none
//!   is one scalar branch; where lanes part, or at an instruction with no vector form
//!   (atomics, services, ...), the group stores its live registers lane by lane and each lane
//!   continues on the scalar function from that instruction (an *entry*, a resume index past
//!   the suspension points). Lane functions with a vector form (32-bit integer arithmetic,
//!   compares and shifts by a uniform amount, `mul.wide`, 64-bit add/sub/logic, f32 and f64
//!   arithmetic, `fma`, `selp`, `lop3`, predicate logic) are SIMD; others run per lane through
//!   the scalar code, so results are bit-identical by the same argument as below. An access
//!   whose lanes touch consecutive elements of a cached device range or of shared memory is one
//!   vector load or store; any other pattern goes lane by lane through the scalar check (exact
//!   faults). Registers whose lanes step by a constant known at compile time (`%tid.x`,
//!   `mul.wide` of it by 4, a pointer plus that; `stride.rs`, with a proof that 32-bit lanes
//!   neither wrap nor cross the sign bit) are kept as lane 0's scalar and computed by scalar
//!   code, and an access through one stepping by its element size is a vector access with no
//!   run-time test that its lanes are consecutive; a comparison of such a register with a
//!   constant no group can straddle (`%tid.x > 127`) is uniform, and a guard on its
//!   comparison with any uniform bound (`i < n`) tests lanes 0 and 3 with two scalar compares
//!   instead of the lanes' mask. Each vector device access
//!   first tries the range it found last (a per-site cache in the frame) before the context's
//!   ways. At the optimized tier a kernel whose vector accesses go through addresses affine
//!   in the thread and block index (`hoist.rs`: one unguarded definition per register, built
//!   from special registers, parameters and constants) gets a second vector function in which
//!   those accesses have no check at all (`address + delta`); the driver runs a block on it
//!   when the addresses of all its threads provably lie, aligned, in one pinned range or in
//!   shared memory (worked out once per launch as affine forms, then per block in a few
//!   integer operations), else on the checked one. Both share spill slots, states and
//!   hand-over entries. `bar.sync` suspends the group, storing only the registers the spill
//!   area does not already hold since the group's start or last resume (`Analysis::stored`),
//!   and marks its lanes' states `GROUP`; a group whose four lanes still carry that mark
//!   resumes as a group at once; otherwise, released together with agreeing uniform registers (and stepped ones
//!   that still step) it resumes as a group, else lane by lane on the scalar function.
//!   A warp collective (`shfl`, `vote`, `redux`, `match`, `activemask`) suspends the group the
//!   same way, with its operands per lane where the scalar code puts them; the resume reads
//!   each lane's results. The driver
//!   calls the vector function first on blocks whose `ntid.x` is a multiple of 4, then the
//!   scalar one only if a group handed threads over. Compiled code counts exits in the
//!   context, so a block whose threads all exited skips the barrier scan.
//!   `STREAMEXEC_PTX_JIT_VECTOR=0` compiles the scalar function alone.
//! - **The block driver** (`run.rs`) calls the function for the whole block, then releases barriers
//!   whose threads (or `bar.sync id, count`, counting the threads that went on from `bar.arrive`,
//!   a runtime call) have all arrived, with `bar.red`'s reduction, and calls again, until every
//!   thread has exited. Exited threads count as arrived at a whole-block barrier (as on the
//!   hardware); a barrier no thread set can release is the interpreter's "barrier divergence"
//!   error. When only the vector code ran a pass and every group ended it waiting at one
//!   `bar.sync 0`, the driver leaves the state words alone and names that barrier in the
//!   context: the next pass sends each group straight to its group resume (no state-word load,
//!   no release loop). A `bar.sync` with an immediate id and no count writes no operand row;
//!   the driver's barrier scan reads its id from the instruction. Kernels with warp
//!   collectives run one warp at a time (the vector function on the warp, then the scalar one on the lanes it handed over): after each call the lanes of the
//!   warp waiting at the same collective are resolved together (the lowest-PC group whose member
//!   masks are all satisfied first; the shuffle source, the ballot, the active mask: COX's
//!   warp-level treatment, with the warp as the unit instead of the block) and the warp goes on.
//!   All 32 lanes waiting in one suspension of a `shfl.sync` take a one-pass path. A
//!   `shfl.sync` with immediate operands, a `vote.sync` or a `redux.sync` (all with the whole
//!   warp as member mask) or an `activemask` never gets there when the whole warp reaches it
//!   as groups: the
//!   vector code stages its operands by lane, and the warp's last group resolves it and
//!   restarts the warp's groups, which resume there without reading their state words
//!   (`lower/vector/staged.rs`).
//!   Member masks act as in the interpreter (`interp/collective.rs`). Kernels with no
//!   suspension point and no vector function run in one pass with no state words at all.
//! - **Calls** to `.func`s are inlined (16 deep; recursion goes to the interpreter); arguments and
//!   return values move through the thread's call-parameter row as in the interpreter.
//! - **Lane semantics are the interpreter's.** An ALU instruction in the IR is a Rust function
//!   (`alu::ibin::<u32, 0>`). The common ones (integer add/sub/mul/min/max/logic/shift/compare,
//!   `mul.wide`, `mad.lo`, integer `cvt`, float add/sub/mul/div/fma `.rn`, float compares, `selp`,
//!   `mov`, predicate logic, `lop3`, carry chains) have native Cranelift code that computes the
//!   same 64-bit register slot (`native.rs`, recognised by the function's address, which is why
//!   those functions are `#[inline(never)]`); everything else (directed rounding, `.ftz`, `.sat`,
//!   transcendental functions, float conversions, ...) calls the Rust function through a C-ABI
//!   trampoline. So results are bit-identical by construction where a call is made, and by the
//!   native code's definition where it is not; `scripts/ptx-engines-agree.sh` checks it.
//! - **Memory checks.** Every access is checked as in the interpreter. The fast path is inline:
//!   alignment, then the block's static shared memory, dynamic shared memory, the thread's local
//!   memory, or one of four cached device ranges (first address, end, host pointer, filled by the
//!   slow path). Anything else calls the interpreter's resolver (`mem::locate`: generic windows,
//!   parameters, the allocation table), which also produces the fault text; a fault ends the launch
//!   with the same `KernelFault` (kernel, block, thread, PTX line, address). Atomics call the
//!   interpreter's atomic functions.
//! - **Engine choice** (`PtxEngine`, `StreamExecutor::set_ptx_engine`, `STREAMEXEC_PTX_ENGINE`):
//!   `Auto` (default) compiles a kernel at its first launch and caches the result (or the reason it
//!   was refused) in the loaded module, in two tiers ([`Tier`]): quick code at the first launch,
//!   optimized code compiled on a background thread from the second, which replaces it in the
//!   module for the launches after; it interprets kernels the JIT refuses (`bar.warp.sync`,
//!   recursion, more than 200 000 instructions after inlining) and kernels that spin-wait with
//!   `nanosleep` (device RPC clients), whose threads wait on each other or on the host outside
//!   barriers. `Jit` fails a launch it cannot compile with `Unsupported`; `Interpreter` never
//!   compiles. The race checker is interpreter-only, so `set_race_check(true)` interprets.
//!   `STREAMEXEC_PTX_JIT_LOG=1` prints each compile (instructions, time, calls left, points);
//!   `STREAMEXEC_PTX_JIT_DUMP=1` prints the Cranelift IR before code generation,
//!   `STREAMEXEC_PTX_JIT_ASM=1` the machine code after it.
//! - **Limits.** A thread that waits for another thread of its block outside a barrier (a spin lock
//!   on shared or global memory) would wait forever, since threads of a block run one after
//!   another; CUDA before Volta had the same rule. `Auto` interprets only the `nanosleep` and
//!   `bar.warp.sync` cases it can see.

mod analysis;
mod hoist;
mod lower;
mod native;
mod run;
mod stride;
mod vector;

use std::sync::Arc;
use std::time::{Duration, Instant};

use cranelift_codegen::Context;
use cranelift_codegen::ir::{AbiParam, UserFuncName, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module, default_libcall_names};

use analysis::PointKind;
pub(crate) use analysis::Unsupported;

use crate::ir::{Op, Program};
use crate::launch::Launch;

/// The compiled function: runs threads `begin..end` of the block `ctx` describes; 0, or 1
/// after a fault recorded in `ctx`.
type KernelFn = unsafe extern "C" fn(*mut run::Ctx, u32, u32) -> u32;

/// Owns a kernel's machine code (freed when the kernel is dropped).
struct Code(Vec<JITModule>);

// SAFETY: after `finalize_definitions` the module is only kept to free its memory on drop;
// the code is immutable and callable from any thread.
unsafe impl Send for Code {}
// SAFETY: as above; nothing is reached through a shared reference.
unsafe impl Sync for Code {}

impl Drop for Code {
    fn drop(&mut self) {
        for m in self.0.drain(..) {
            // SAFETY: the kernel that owned this code is being dropped, so no launch holds its
            // function pointers any more (launches keep the kernel alive).
            unsafe { m.free_memory() };
        }
    }
}

/// A compiled kernel.
pub(crate) struct JitKernel {
    func: KernelFn,
    /// The vector function (groups of `vector::LANES` threads), when the kernel has one.
    vfunc: Option<KernelFn>,
    /// The vector function without the checks of the plan's accesses, for blocks whose
    /// check passes (`hoist.rs`).
    hoisted: Option<(KernelFn, hoist::Plan)>,
    /// Why the kernel has no vector function.
    pub(crate) vector_refused: Option<String>,
    /// For each resume index - 1: the suspending instruction and its kind.
    resumes: Vec<(u32, PointKind)>,
    spill_slots: usize,
    has_warp_points: bool,
    /// The kernel has barriers or warp collectives.
    has_points: bool,
    /// `Auto` interprets this kernel (it spin-waits with `nanosleep`).
    pub(crate) prefers_interpreter: bool,
    /// Lane functions compiled as calls rather than native code.
    pub(crate) called_ops: usize,
    /// Compile time.
    pub(crate) took: Duration,
    /// How it was compiled.
    pub(crate) tier: Tier,
    /// Launches that chose this code (counted to upgrade a `Quick` kernel at its second).
    launches: std::sync::atomic::AtomicU32,
    _code: Code,
    _prog: Arc<Program>,
}

impl JitKernel {
    /// Counts a launch of this code; true at the second launch of a `Quick` kernel whose
    /// policy upgrades it (the caller then compiles it `Optimized` in the background).
    pub(crate) fn launched(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.tier == Tier::Quick && Tier::policy().1 && self.launches.fetch_add(1, Relaxed) == 1
    }

    /// Accesses whose range checks the vector function has a variant without (`hoist.rs`).
    pub(crate) fn hoisted_sites(&self) -> usize {
        self.hoisted.as_ref().map_or(0, |(_, p)| p.sites.len())
    }

    /// Suspension points after inlining.
    pub(crate) fn resumes_len(&self) -> usize {
        self.resumes.len()
    }
}

/// How much a compile spends on code generation. A kernel is compiled `Quick` at its first
/// launch (Cranelift's single-pass register allocator: about 40% fewer instructions
/// compiling the bench kernels, code that spills more), and `Optimized` (the backtracking
/// allocator) on a background thread when it is launched again; later launches run the
/// optimized code. `STREAMEXEC_PTX_JIT_TIER=quick` or `optimized` keeps one tier only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    /// Single-pass register allocation.
    Quick,
    /// Backtracking register allocation.
    Optimized,
}

impl Tier {
    /// The tier of a kernel's first compile, and whether a second launch upgrades it (read
    /// once: it is asked at every launch).
    pub(crate) fn policy() -> (Tier, bool) {
        static POLICY: std::sync::OnceLock<(Tier, bool)> = std::sync::OnceLock::new();
        *POLICY.get_or_init(
            || match std::env::var("STREAMEXEC_PTX_JIT_TIER").as_deref() {
                Ok("quick") => (Tier::Quick, false),
                Ok("optimized") => (Tier::Optimized, false),
                _ => (Tier::Quick, true),
            },
        )
    }
}

/// Compiles `prog` at `tier`, or says why the JIT leaves it to the interpreter.
pub(crate) fn compile(prog: &Arc<Program>, tier: Tier) -> Result<JitKernel, Unsupported> {
    let start = Instant::now();
    // Cranelift reports bad input as errors, but a panic in it must not take the stream down.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile_inner(prog, tier)));
    let mut k = r.unwrap_or_else(|p| {
        Err(format!(
            "internal error of the PTX JIT: {}",
            crate::error::panic_message(p.as_ref())
        ))
    })?;
    k.took = start.elapsed();
    Ok(k)
}

fn isa(tier: Tier) -> Result<cranelift_codegen::isa::OwnedTargetIsa, Unsupported> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| format!("Cranelift setting {k}={v}: {e}"))
    };
    set(&mut flags, "opt_level", "speed")?;
    let regalloc = match tier {
        Tier::Quick => "single_pass",
        Tier::Optimized => "backtracking",
    };
    set(&mut flags, "regalloc_algorithm", regalloc)?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    set(
        &mut flags,
        "enable_verifier",
        if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        },
    )?;
    cranelift_native::builder()
        .map_err(|e| format!("Cranelift does not support this host: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| format!("Cranelift ISA: {e}"))
}

/// Emits one `(ctx, begin, end) -> status` function's Cranelift IR with `body`.
fn emit<T>(
    isa: &cranelift_codegen::isa::OwnedTargetIsa,
    prog: &Program,
    what: &str,
    body: impl FnOnce(&mut FunctionBuilder<'_>) -> Result<T, Unsupported>,
) -> Result<(Context, T), Unsupported> {
    let mut ctx = Context::new();
    let sig = &mut ctx.func.signature;
    sig.call_conv = isa.default_call_conv();
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I32));
    sig.params.push(AbiParam::new(types::I32));
    sig.returns.push(AbiParam::new(types::I32));
    ctx.func.name = UserFuncName::user(0, 0);
    let mut fbc = FunctionBuilderContext::new();
    let out = {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let r = body(&mut b)?;
        b.finalize(isa.frontend_config());
        r
    };
    if std::env::var_os("STREAMEXEC_PTX_JIT_DUMP").is_some() {
        eprintln!(
            "streamexec PTX JIT: Cranelift IR of `{}` ({what}):\n{}",
            prog.name,
            ctx.func.display()
        );
    }
    Ok((ctx, out))
}

/// Compiles an emitted function into a module of its own (the most expensive step: register
/// allocation and code generation).
fn finish(
    isa: &cranelift_codegen::isa::OwnedTargetIsa,
    prog: &Program,
    what: &str,
    mut ctx: Context,
) -> Result<(JITModule, KernelFn), Unsupported> {
    let mut module = JITModule::new(JITBuilder::with_isa(isa.clone(), default_libcall_names()));
    let asm = std::env::var_os("STREAMEXEC_PTX_JIT_ASM").is_some();
    ctx.set_disasm(asm);
    let id = module
        .declare_function("kernel", Linkage::Local, &ctx.func.signature)
        .map_err(|e| format!("Cranelift: {e}"))?;
    module
        .define_function(id, &mut ctx)
        .map_err(|e| format!("Cranelift could not compile the {what}: {e:?}"))?;
    if let Some(code) = ctx
        .compiled_code()
        .and_then(|c| c.vcode.as_ref())
        .filter(|_| asm)
    {
        eprintln!(
            "streamexec PTX JIT: machine code of `{}` ({what}):\n{code}",
            prog.name
        );
    }
    module.clear_context(&mut ctx);
    module
        .finalize_definitions()
        .map_err(|e| format!("Cranelift: {e}"))?;
    let code = module.get_finalized_function(id);
    // SAFETY: the function was built with exactly `KernelFn`'s signature (System V on this
    // host, which is what `extern "C"` is here).
    let func: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
    Ok((module, func))
}

/// What emitting the scalar function tells the kernel: its resume points and spill slots.
type ScalarOut = (Vec<Option<lower::Resume>>, lower::Slots);

/// The scalar function, emitted for `handoff` and compiled.
fn scalar(
    isa: &cranelift_codegen::isa::OwnedTargetIsa,
    prog: &Program,
    an: &analysis::Analysis,
    slots: lower::Slots,
    handoff: &lower::Handoff<'_>,
) -> Result<(JITModule, KernelFn, ScalarOut), Unsupported> {
    let (ctx, out) = emit(isa, prog, "kernel", |b| {
        lower::Lower::emit(b, prog, an, slots, handoff)
    })?;
    let (module, func) = finish(isa, prog, "kernel", ctx)?;
    Ok((module, func, out))
}

/// What the vector function without the hoisted checks is called in logs and dumps.
const HOISTED: &str = "vector function, hoisted checks";

/// The vector function emitted again with the hoisted accesses of `prog` unchecked, and its
/// plan: at the `Optimized` tier (its compile runs in the background), when the kernel has
/// such accesses (`STREAMEXEC_PTX_JIT_HOIST=0`: never). `out` is the checked function's: the
/// two must agree on spill slots and hand-over entries, or the variant is dropped.
fn hoisted_vector(
    isa: &cranelift_codegen::isa::OwnedTargetIsa,
    prog: &Program,
    an: &analysis::Analysis,
    shape: &vector::Shape,
    live: &[u32],
    out: &lower::vector::VectorOut,
    tier: Tier,
) -> Option<(Context, hoist::Plan)> {
    let off = std::env::var("STREAMEXEC_PTX_JIT_HOIST").is_ok_and(|v| v == "0");
    if tier != Tier::Optimized || off {
        return None;
    }
    let plan = hoist::Plan::of(prog, &shape.steps, live);
    if plan.sites.is_empty() {
        return None;
    }
    let (ctx, o) = emit(isa, prog, HOISTED, |b| {
        lower::vector::emit(b, prog, an, shape, out.slots.clone(), Some(&plan))
    })
    .ok()?;
    (o.entries == out.entries && o.slots == out.slots).then_some((ctx, plan))
}

fn compile_inner(prog: &Arc<Program>, tier: Tier) -> Result<JitKernel, Unsupported> {
    let an = analysis::analyze(prog)?;
    let isa = isa(tier)?;
    let mut modules = Vec::new();
    // The vector function is emitted first: it decides where the scalar code takes threads
    // over. Its code generation then runs on a second thread while this one emits and compiles
    // the scalar function (the two are independent from there), so a kernel's compile time is
    // about the longer of the two, not their sum.
    let enabled = std::env::var("STREAMEXEC_PTX_JIT_VECTOR").map_or(true, |v| v != "0");
    let refused = if enabled {
        vector::refuse(prog).map(str::to_string)
    } else {
        Some("STREAMEXEC_PTX_JIT_VECTOR=0".to_string())
    };
    let mut hoisted = None;
    let emitted = match refused {
        Some(why) => Err(why),
        None => {
            let live = an.live_at(0);
            let shape = vector::shape(prog, &live);
            let first = emit(&isa, prog, "vector function", |b| {
                lower::vector::emit(b, prog, &an, &shape, lower::Slots::default(), None)
            });
            if let Ok((_, out)) = &first {
                hoisted = hoisted_vector(&isa, prog, &an, &shape, &live, out, tier);
            }
            first
        }
    };
    // The vector function's module and code with the scalar function built for its hand-over
    // entries, or why there is no vector function.
    let built = match emitted {
        Err(why) => Err(why),
        Ok((ctx, out)) => std::thread::scope(|s| {
            let job = s.spawn(|| {
                let v = finish(&isa, prog, "vector function", ctx)?;
                // Without its checks, the same function: a failure only loses the variant.
                let h = hoisted.and_then(|(ctx, plan)| {
                    finish(&isa, prog, HOISTED, ctx)
                        .ok()
                        .map(|(m, f)| (m, f, plan))
                });
                Ok::<_, Unsupported>((v, h))
            });
            let handoff = lower::Handoff {
                entries: &out.entries,
                states: true,
            };
            let sc = scalar(&isa, prog, &an, out.slots, &handoff);
            let v = job.join().unwrap_or_else(|p| {
                Err(format!(
                    "internal error of the PTX JIT: {}",
                    crate::error::panic_message(p.as_ref())
                ))
            });
            v.map(|(v, h)| (v, h, sc))
        }),
    };
    let mut hoisted_fn = None;
    let (vfunc, refused, scalar_fn) = match built {
        Ok(((m, f), h, sc)) => {
            modules.push(m);
            if let Some((m, f, plan)) = h {
                modules.push(m);
                hoisted_fn = Some((f, plan));
            }
            (Some(f), None, sc)
        }
        // Without a vector function the scalar one needs no hand-over entries: emit it alone.
        Err(why) => {
            let handoff = lower::Handoff {
                entries: &[],
                states: false,
            };
            let sc = scalar(&isa, prog, &an, lower::Slots::default(), &handoff);
            (None, Some(why), sc)
        }
    };
    let (module, func, (resumes, slots)) = scalar_fn?;
    modules.push(module);
    let called_ops = prog
        .code
        .iter()
        .filter(|i| match &i.op {
            Op::Un { f, .. } => !native::known(*f as usize),
            Op::Bin { f, .. } | Op::Setp { f, hi: None, .. } => !native::known(*f as usize),
            Op::Setp { .. } => true,
            Op::Tern { f, .. } => !native::known(*f as usize),
            _ => false,
        })
        .count();
    let kinds = resumes
        .iter()
        .map(|r| r.map_or((0, PointKind::Entry), |r| (r.pc, r.kind)))
        .collect();
    Ok(JitKernel {
        func,
        vfunc,
        hoisted: hoisted_fn,
        vector_refused: refused,
        resumes: kinds,
        spill_slots: slots.len(),
        has_warp_points: an.has_warp_points,
        has_points: !an.points.is_empty(),
        prefers_interpreter: an.prefers_interpreter,
        called_ops,
        took: Duration::ZERO,
        tier,
        launches: std::sync::atomic::AtomicU32::new(0),
        _code: Code(modules),
        _prog: prog.clone(),
    })
}

/// Records a compile for `jit_compile_times` (an optimized recompile as `name (optimized)`)
/// and, with `STREAMEXEC_PTX_JIT_LOG` set, prints it.
pub(crate) fn log_compile(name: &str, prog: &Program, r: &Result<Arc<JitKernel>, Unsupported>) {
    let name = match r {
        Ok(c) if c.tier == Tier::Optimized && Tier::policy().1 => format!("{name} (optimized)"),
        _ => name.to_string(),
    };
    let name = name.as_str();
    if let Ok(c) = r {
        crate::launch::JIT_COMPILES
            .lock()
            .push((name.to_string(), c.took));
    }
    if std::env::var_os("STREAMEXEC_PTX_JIT_LOG").is_none() {
        return;
    }
    match r {
        Ok(c) => eprintln!(
            "streamexec PTX JIT: `{name}`: {} instructions compiled in {:.2?}, {} lane functions \
             called (no native code), {} suspension points and entries, vector function: {}, \
             accesses with hoisted checks: {}",
            prog.code.len(),
            c.took,
            c.called_ops,
            c.resumes_len(),
            c.vector_refused.as_deref().unwrap_or("yes"),
            c.hoisted_sites()
        ),
        Err(why) => eprintln!("streamexec PTX JIT: `{name}` is left to the interpreter: {why}"),
    }
}

/// Runs block `b` of a launch with `k`.
pub(crate) fn run_block(l: &Launch, k: &JitKernel, b: u64) -> Result<(), String> {
    run::run_block(l, k, b)
}
