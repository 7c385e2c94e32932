//! The PTX JIT: a kernel's decoded IR compiled to native code with Cranelift.
//!
//! `analysis.rs` finds basic blocks, suspension points and the registers live across them;
//! `lower.rs` emits one function that runs a range of a block's threads, each as plain scalar
//! code until it exits or suspends; `native.rs` gives the common lane functions native code;
//! `run.rs` holds the runtime functions compiled code calls and the block driver. ARCHITECTURE.md
//! ("PTX JIT") has the design.

mod analysis;
mod lower;
mod native;
mod run;

use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Owns a module's machine code (freed when the kernel is dropped).
struct Code(Option<JITModule>);

// SAFETY: after `finalize_definitions` the module is only kept to free its memory on drop;
// the code is immutable and callable from any thread.
unsafe impl Send for Code {}
// SAFETY: as above; nothing is reached through a shared reference.
unsafe impl Sync for Code {}

impl Drop for Code {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the kernel that owned this code is being dropped, so no launch holds its
            // function pointer any more (launches keep the kernel alive).
            unsafe { m.free_memory() };
        }
    }
}

/// A compiled kernel.
pub(crate) struct JitKernel {
    func: KernelFn,
    /// For each resume index - 1: the suspending instruction and its kind.
    resumes: Vec<(u32, PointKind)>,
    spill_slots: usize,
    has_warp_points: bool,
    /// `Auto` interprets this kernel (it spin-waits with `nanosleep`).
    pub(crate) prefers_interpreter: bool,
    /// Lane functions compiled as calls rather than native code.
    pub(crate) called_ops: usize,
    /// Compile time.
    pub(crate) took: Duration,
    _code: Code,
    _prog: Arc<Program>,
}

impl JitKernel {
    /// Suspension points after inlining.
    pub(crate) fn resumes_len(&self) -> usize {
        self.resumes.len()
    }
}

/// Compiles `prog`, or says why the JIT leaves it to the interpreter.
pub(crate) fn compile(prog: &Arc<Program>) -> Result<JitKernel, Unsupported> {
    let start = Instant::now();
    // Cranelift reports bad input as errors, but a panic in it must not take the stream down.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compile_inner(prog)));
    let mut k = r.unwrap_or_else(|p| {
        Err(format!(
            "internal error of the PTX JIT: {}",
            crate::error::panic_message(p.as_ref())
        ))
    })?;
    k.took = start.elapsed();
    Ok(k)
}

fn compile_inner(prog: &Arc<Program>) -> Result<JitKernel, Unsupported> {
    let an = analysis::analyze(prog)?;
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v)
            .map_err(|e| format!("Cranelift setting {k}={v}: {e}"))
    };
    set(&mut flags, "opt_level", "speed")?;
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
    let isa = cranelift_native::builder()
        .map_err(|e| format!("Cranelift does not support this host: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| format!("Cranelift ISA: {e}"))?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    let mut ctx = module.make_context();
    let sig = &mut ctx.func.signature;
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(types::I32));
    sig.params.push(AbiParam::new(types::I32));
    sig.returns.push(AbiParam::new(types::I32));
    ctx.func.name = UserFuncName::user(0, 0);
    let target = module.target_config();
    let mut fbc = FunctionBuilderContext::new();
    let resumes = {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fbc);
        let r = lower::Lower::emit(&mut b, prog, &an)?;
        b.finalize(target);
        r
    };
    if std::env::var_os("STREAMEXEC_PTX_JIT_DUMP").is_some() {
        eprintln!(
            "streamexec PTX JIT: Cranelift IR of `{}`:\n{}",
            prog.name,
            ctx.func.display()
        );
    }
    let id = module
        .declare_function("kernel", Linkage::Local, &ctx.func.signature)
        .map_err(|e| format!("Cranelift: {e}"))?;
    module
        .define_function(id, &mut ctx)
        .map_err(|e| format!("Cranelift could not compile the kernel: {e:?}"))?;
    module.clear_context(&mut ctx);
    module
        .finalize_definitions()
        .map_err(|e| format!("Cranelift: {e}"))?;
    let code = module.get_finalized_function(id);
    // SAFETY: the function was built with exactly `KernelFn`'s signature (System V on this
    // host, which is what `extern "C"` is here).
    let func: KernelFn = unsafe { std::mem::transmute::<*const u8, KernelFn>(code) };
    let called_ops = prog
        .code
        .iter()
        .filter(|i| match &i.op {
            Op::Un { f, .. } => !native::known(*f as usize),
            Op::Bin { f, .. } | Op::Setp { f, .. } => !native::known(*f as usize),
            Op::Tern { f, .. } => !native::known(*f as usize),
            _ => false,
        })
        .count();
    let kinds = resumes
        .iter()
        .map(|r| {
            let k = an.point_at[&r.pc];
            (r.pc, an.points[k].kind)
        })
        .collect();
    Ok(JitKernel {
        func,
        resumes: kinds,
        spill_slots: an.spill_slots,
        has_warp_points: an.has_warp_points,
        prefers_interpreter: an.prefers_interpreter,
        called_ops,
        took: Duration::ZERO,
        _code: Code(Some(module)),
        _prog: prog.clone(),
    })
}

/// Records a compile for `jit_compile_times` and, with `STREAMEXEC_PTX_JIT_LOG` set, prints it.
pub(crate) fn log_compile(name: &str, prog: &Program, r: &Result<Arc<JitKernel>, Unsupported>) {
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
             called (no native code), {} suspension points",
            prog.code.len(),
            c.took,
            c.called_ops,
            c.resumes_len()
        ),
        Err(why) => eprintln!("streamexec PTX JIT: `{name}` is left to the interpreter: {why}"),
    }
}

/// Runs block `b` of a launch with `k`.
pub(crate) fn run_block(l: &Launch, k: &JitKernel, b: u64) -> Result<(), String> {
    run::run_block(l, k, b)
}
