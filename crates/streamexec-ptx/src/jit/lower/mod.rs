//! Lowering of a decoded program to one Cranelift function that runs a range of a block's
//! threads: `fn(ctx, begin, end) -> status`.
//!
//! The function loops over the threads of the range. Each thread starts where its state word
//! says (the kernel's first instruction, or the continuation of the suspension point it
//! stopped at) and runs its own scalar code until it exits or reaches a suspension point (a
//! block barrier or a warp collective). There it saves the registers live after the point,
//! records the point, and the loop goes on with the next thread. The block driver (`run.rs`)
//! resolves the points and calls the function again. `.func` calls are inlined (recursion is
//! left to the interpreter); PTX registers are Cranelift variables.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    self, AbiParam, Block, InstBuilder, JumpTableData, MemFlagsData, Signature, Value, types,
};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::analysis::{Analysis, PointKind};
use super::native;
use super::run::{self, EXITED, GROUP, WAIT};
use crate::DYNAMIC_SHARED_BASE;
use crate::ir::{
    Addr, BarKind, BoolOp, Inst, LOCAL_WINDOW, Op, PARAM_WINDOW, Program, SHARED_WINDOW, Space,
    Src, Sreg, THREAD_PARAM_BASE, Ty,
};

const I64: ir::Type = types::I64;
const I32: ir::Type = types::I32;

/// Inlined `.func` bodies deeper than this are left to the interpreter.
const MAX_INLINE_DEPTH: usize = 16;
/// Instructions lowered in all (inlining included) before the kernel is left to the interpreter.
const MAX_LOWERED: usize = 200_000;

/// Byte offset of a `Ctx` field, as compiled code addresses it.
macro_rules! off {
    ($f:ident) => {
        std::mem::offset_of!($crate::jit::run::Ctx, $f) as i32
    };
}

mod access;
mod ops;
mod sync;
pub(crate) mod vector;

/// One inlined body: where its `ret` continues and which call made it.
struct Instance {
    /// `(call instruction, caller instance)`; `None` for the kernel itself.
    caller: Option<(u32, usize)>,
    /// Call targets from the kernel down to this body (recursion check).
    chain: Vec<u32>,
}

/// A resume index's place: the instruction a thread continues after (a suspension point) or
/// at (an entry from the vector code), and which of the two it is.
#[derive(Clone, Copy)]
pub(crate) struct Resume {
    pub(crate) pc: u32,
    pub(crate) kind: PointKind,
}

/// The context's fields as the compiled code reads them: loaded from `ctx` where they are
/// used, once per Cranelift block. Loading them all in the entry block made them live across
/// the whole function, and register allocation of those long ranges was most of a kernel's
/// compile time; a load from the context (in L1) costs what reloading a spilled value does.
pub(super) struct Uniform {
    pub(super) ctx: Value,
    /// Fields already loaded in a block, by (block, offset).
    loaded: HashMap<(Block, i32), Value>,
    /// The driver's buffers (spill area, state words, operand rows) are loaded where they are
    /// used, never moved: in a loop whose invariants leave it (`Lower::thread_loop`), only
    /// the cold hand-over paths use them and hoisted they would take registers from the hot
    /// path.
    pub(super) pin_buffers: bool,
}

impl Uniform {
    fn new(ctx: Value) -> Uniform {
        Uniform {
            ctx,
            loaded: HashMap::new(),
            pin_buffers: false,
        }
    }

    /// Whether the field at `off` does not change while the function runs (so one load per
    /// block is enough): the pointers, the launch's dimensions and the dynamic shared memory.
    fn fixed(off: i32) -> bool {
        [
            off!(params),
            off!(shared),
            off!(local),
            off!(tparam),
            off!(spill),
            off!(state),
            off!(coll),
            off!(dynamic_at),
            off!(dynamic_len),
            off!(dynamic_requested),
            off!(nthreads),
            off!(nwarps),
            off!(nsm),
        ]
        .contains(&off)
            || (off!(ntid)..off!(ntid) + 9 * 8).contains(&off)
    }

    /// The fixed field at `off`, as a 64-bit value (`nwarps` and `nsm` are `u32`s, zero
    /// extended; `nthreads` is returned in bytes of one spill row: the distance between two
    /// spill slots of a thread).
    pub(super) fn get(&mut self, b: &mut FunctionBuilder<'_>, off: i32) -> Value {
        debug_assert!(
            Self::fixed(off),
            "context field {off} changes during a call"
        );
        let block = b.current_block().expect("code is emitted into a block");
        if let Some(v) = self.loaded.get(&(block, off)) {
            return *v;
        }
        let buffer = [off!(spill), off!(state), off!(coll), off!(nthreads)].contains(&off);
        let f = if buffer && self.pin_buffers {
            MemFlagsData::new().with_notrap().with_readonly()
        } else {
            fixed_flags()
        };
        let v = if off == off!(nwarps) || off == off!(nsm) {
            let v = b.ins().load(I32, f, self.ctx, off);
            b.ins().uextend(I64, v)
        } else if off == off!(nthreads) {
            let n = b.ins().load(I64, f, self.ctx, off);
            b.ins().ishl_imm_s(n, 3)
        } else {
            b.ins().load(I64, f, self.ctx, off)
        };
        self.loaded.insert((block, off), v);
        v
    }
}

/// Spill slots shared by both functions of a kernel: a register saved at any suspension
/// point or entry has one slot, and the spill area holds slot `s` of thread `t` at
/// `s * threads + t` (lane-major, so the vector code moves a group of lanes in one access).
#[derive(Default, Clone, PartialEq)]
pub(crate) struct Slots {
    of: HashMap<u32, u32>,
}

impl Slots {
    pub(super) fn slot(&mut self, r: u32) -> u32 {
        let n = self.of.len() as u32;
        *self.of.entry(r).or_insert(n)
    }
    /// Slots in use (at least one, so the spill area is never empty).
    pub(crate) fn len(&self) -> usize {
        self.of.len().max(1)
    }
}

/// What the scalar function needs to know about the vector function of the same kernel.
pub(crate) struct Handoff<'a> {
    /// Instructions where the vector code hands threads over (resume index `points + 1 + j`
    /// for `entries[j]`).
    pub(crate) entries: &'a [u32],
    /// Threads carry state words even without suspension points (the vector code marks
    /// the ones it finished).
    pub(crate) states: bool,
}

/// The lowering of one program.
pub(crate) struct Lower<'a, 'b> {
    pub(super) b: &'a mut FunctionBuilder<'b>,
    pub(super) prog: &'a Program,
    pub(super) an: &'a Analysis,
    pub(super) u: Uniform,
    regs: Vec<Option<Variable>>,
    /// Current thread index and its coordinates (in the vector function: the group's
    /// first thread).
    pub(super) t: Variable,
    pub(super) tid: [Variable; 3],
    instances: Vec<Instance>,
    blocks: HashMap<(usize, u32), Block>,
    work: Vec<(usize, u32)>,
    /// Resume blocks by resume index.
    resume_blocks: HashMap<u32, Block>,
    /// Resume index - 1 → its place (`None`: never lowered).
    pub(crate) resumes: Vec<Option<Resume>>,
    pub(super) next: Block,
    pub(super) fault: Block,
    lowered: usize,
    pub(super) sigs: Sigs,
    pub(super) slots: Slots,
    /// Whether threads keep state words.
    states: bool,
}

/// Signatures of the runtime helpers and trampolines.
pub(super) struct Sigs {
    call1: ir::SigRef,
    call2: ir::SigRef,
    call3: ir::SigRef,
    pub(super) bfi: ir::SigRef,
    resolve: ir::SigRef,
    atom: ir::SigRef,
    sreg: ir::SigRef,
    fault: ir::SigRef,
    sleep: ir::SigRef,
    arrive: ir::SigRef,
    service: ir::SigRef,
    pub(super) lanes: ir::SigRef,
}

impl Sigs {
    fn import(b: &mut FunctionBuilder<'_>) -> Sigs {
        Sigs {
            call1: b.import_signature(sig(&[I64, I64], Some(I64))),
            call2: b.import_signature(sig(&[I64, I64, I64], Some(I64))),
            call3: b.import_signature(sig(&[I64, I64, I64, I64], Some(I64))),
            bfi: b.import_signature(sig(&[I64, I64, I64, I64, I64], Some(I64))),
            resolve: b.import_signature(sig(&[I64, I32, I64, I64, I32, I64, I32], Some(I64))),
            atom: b.import_signature(sig(&[I64, I64, I64, I64, I64, I64, I32], Some(I64))),
            sreg: b.import_signature(sig(&[I64, I32, I64], Some(I64))),
            fault: b.import_signature(sig(&[I64, I32, I64, I32, I64], None)),
            sleep: b.import_signature(sig(&[I64], None)),
            arrive: b.import_signature(sig(&[I64, I64, I64, I64, I32], None)),
            service: b.import_signature(sig(&[I64, I64, I64, I32], None)),
            lanes: b.import_signature(sig(&[I64, I32, I64, I64, I32, I64, I32, I64], Some(I32))),
        }
    }
}

fn sig(params: &[ir::Type], ret: Option<ir::Type>) -> Signature {
    let mut s = Signature::new(cranelift_codegen::isa::CallConv::SystemV);
    s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
    s.returns.extend(ret.map(AbiParam::new));
    s
}

pub(super) fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Loads Cranelift may hoist out of the thread loop: kernel parameters, and the cached device
/// ranges (a range, once cached, stays valid until the launch ends, so a stale copy only
/// costs a trip through the slow path).
pub(super) fn fixed_flags() -> MemFlagsData {
    MemFlagsData::new()
        .with_notrap()
        .with_readonly()
        .with_can_move()
}

pub(super) fn mem_ty(bytes: u32) -> ir::Type {
    match bytes {
        1 => types::I8,
        2 => types::I16,
        4 => I32,
        _ => I64,
    }
}

impl<'a, 'b> Lower<'a, 'b> {
    /// The parts both functions share: the entry block (its parameters `(ctx, begin,
    /// end)`), the thread variables set to `begin`'s coordinates, and
    /// the `next`/`fault` blocks (created, not filled). Returns the lowering and `(begin,
    /// end)` as i64.
    pub(super) fn start(
        b: &'a mut FunctionBuilder<'b>,
        prog: &'a Program,
        an: &'a Analysis,
        slots: Slots,
        states: bool,
    ) -> (Self, Value, Value) {
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ctx = b.block_params(entry)[0];
        let begin = b.block_params(entry)[1];
        let end = b.block_params(entry)[2];
        let mut u = Uniform::new(ctx);
        let t = b.declare_var(I64);
        let tid = [b.declare_var(I64), b.declare_var(I64), b.declare_var(I64)];
        let begin64 = b.ins().uextend(I64, begin);
        let end64 = b.ins().uextend(I64, end);
        b.def_var(t, begin64);
        let ntx = u.get(b, off!(ntid));
        let nty = u.get(b, off!(ntid) + 8);
        let x = b.ins().urem(begin64, ntx);
        let q = b.ins().udiv(begin64, ntx);
        let y = b.ins().urem(q, nty);
        let z = b.ins().udiv(q, nty);
        b.def_var(tid[0], x);
        b.def_var(tid[1], y);
        b.def_var(tid[2], z);
        let next = b.create_block();
        let fault = b.create_block();
        let sigs = Sigs::import(b);
        let lw = Lower {
            b,
            prog,
            an,
            u,
            regs: vec![None; prog.regs as usize],
            t,
            tid,
            instances: vec![Instance {
                caller: None,
                chain: Vec::new(),
            }],
            blocks: HashMap::new(),
            work: Vec::new(),
            resume_blocks: HashMap::new(),
            resumes: Vec::new(),
            next,
            fault,
            lowered: 0,
            sigs,
            slots,
            states,
        };
        (lw, begin64, end64)
    }

    /// The loop over threads (`step` at a time: 1, or a vector group) from the entry block:
    /// the head (`t + step <= end`), the `done` and `fault` returns, and `next`, which steps
    /// `t` and its coordinates (`step` divides `ntid.x`). Returns the body (the loop's work
    /// starts there) and a fresh dispatch block. `hoist`: let Cranelift move loop-invariant
    /// values out of the loop (measured: it pays in the vector code of kernels without
    /// suspension points, saxpy -13% instructions; where groups suspend, the values held
    /// across the loop cost more in spills than their loads, block reduction +15%).
    pub(super) fn thread_loop(&mut self, step: u32, end64: Value, hoist: bool) -> (Block, Block) {
        self.u.pin_buffers = hoist;
        let ntx = self.u.get(self.b, off!(ntid));
        let nty = self.u.get(self.b, off!(ntid) + 8);
        let (t, tid, next, fault) = (self.t, self.tid, self.next, self.fault);
        let b = &mut *self.b;
        let head = b.create_block();
        let body = b.create_block();
        let dispatch = b.create_block();
        let done = b.create_block();
        b.ins().jump(head, &[]);

        b.switch_to_block(head);
        let tv = b.use_var(t);
        let last = b.ins().iadd_imm_s(tv, step as i64);
        if hoist {
            // The exit as the branch's first target: Cranelift's elaboration visits a loop
            // header's dominator-tree children in reverse post-order and forgets the loop at
            // the first child outside it, so the body must come first for loop-invariant
            // values (the context's fixed fields, parameters) to leave the loop.
            let past = b.ins().icmp(IntCC::UnsignedGreaterThan, last, end64);
            b.ins().brif(past, done, &[], body, &[]);
        } else {
            let more = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, last, end64);
            b.ins().brif(more, body, &[], done, &[]);
        }

        b.switch_to_block(done);
        let ok = b.ins().iconst(I32, 0);
        b.ins().return_(&[ok]);

        b.switch_to_block(fault);
        let one = b.ins().iconst(I32, 1);
        b.ins().return_(&[one]);

        // The next thread (group): `tid.x` steps; only at the end of a row do `tid.y` and
        // `tid.z` move, off the common path.
        b.switch_to_block(next);
        let tv = b.use_var(t);
        let t1 = b.ins().iadd_imm_s(tv, step as i64);
        b.def_var(t, t1);
        let x = b.use_var(tid[0]);
        let x1 = b.ins().iadd_imm_s(x, step as i64);
        b.def_var(tid[0], x1);
        let row_end = b.ins().icmp(IntCC::Equal, x1, ntx);
        let wrap = b.create_block();
        b.ins().brif(row_end, wrap, &[], head, &[]);
        b.switch_to_block(wrap);
        let (y, z) = (b.use_var(tid[1]), b.use_var(tid[2]));
        let zero = b.ins().iconst(I64, 0);
        b.def_var(tid[0], zero);
        let y1 = b.ins().iadd_imm_s(y, 1);
        let wrap_y = b.ins().icmp(IntCC::Equal, y1, nty);
        let y2 = b.ins().select(wrap_y, zero, y1);
        let wy = b.ins().uextend(I64, wrap_y);
        let z1 = b.ins().iadd(z, wy);
        b.def_var(tid[1], y2);
        b.def_var(tid[2], z1);
        b.ins().jump(head, &[]);
        (body, dispatch)
    }

    /// Emits the scalar function into `b` (whose signature is `(i64, i32, i32) -> i32`):
    /// threads `begin..end` one after another. Returns the resume places and the spill
    /// slots (those the vector code assigned, `slots`, and more).
    pub(crate) fn emit(
        b: &'a mut FunctionBuilder<'b>,
        prog: &'a Program,
        an: &'a Analysis,
        slots: Slots,
        handoff: &Handoff<'_>,
    ) -> Result<(Vec<Option<Resume>>, Slots), String> {
        let states = !an.points.is_empty() || handoff.states || !handoff.entries.is_empty();
        let (mut lw, _, end64) = Lower::start(b, prog, an, slots, states);
        let (body, dispatch) = lw.thread_loop(1, end64, false);
        let (t, next) = (lw.t, lw.next);
        let b = &mut *lw.b;
        b.switch_to_block(body);
        // Without suspension points or a vector function every thread runs once from the
        // start: no state words.
        let st = if !states {
            b.ins().jump(dispatch, &[]);
            None
        } else {
            let tv = b.use_var(t);
            let at = b.ins().ishl_imm_s(tv, 2);
            let state = lw.u.get(b, off!(state));
            let sp = b.ins().iadd(state, at);
            let st = b.ins().load(I32, flags(), sp, 0);
            let waiting = b.ins().band_imm_s(st, WAIT as i64);
            b.ins().brif(waiting, next, &[], dispatch, &[]);
            Some(st)
        };
        let npoints = an.points.len();
        lw.resumes = vec![None; npoints + handoff.entries.len()];
        let start = lw.block_for(0, 0);
        // Entries from the vector code: restore the registers live there and go on.
        for (j, &pc) in handoff.entries.iter().enumerate() {
            let rb = lw.b.create_block();
            let index = (npoints + 1 + j) as u32;
            lw.resume_blocks.insert(index, rb);
            lw.resumes[index as usize - 1] = Some(Resume {
                pc,
                kind: PointKind::Entry,
            });
            lw.b.switch_to_block(rb);
            for r in an.live_at(pc) {
                let p = lw.spill_at(r);
                let v = lw.b.ins().load(I64, flags(), p, 0);
                lw.set(r, v);
            }
            let at = lw.block_for(0, pc);
            lw.b.ins().jump(at, &[]);
        }
        while let Some((inst, pc)) = lw.work.pop() {
            lw.lower_block(inst, pc)?;
        }
        // The dispatch on the thread's resume index, now that every resume block exists.
        lw.b.switch_to_block(dispatch);
        match st {
            Some(st) if !lw.resume_blocks.is_empty() => {
                let blocks = std::mem::take(&mut lw.resume_blocks);
                let index = lw.b.ins().band_imm_s(st, !(GROUP as i32) as i64);
                lw.dispatch_on(index, start, &blocks, start);
            }
            _ => {
                lw.b.ins().jump(start, &[]);
            }
        }
        lw.b.seal_all_blocks();
        Ok((lw.resumes, lw.slots))
    }

    pub(super) fn block_for(&mut self, inst: usize, pc: u32) -> Block {
        if let Some(b) = self.blocks.get(&(inst, pc)) {
            return *b;
        }
        let b = self.b.create_block();
        self.blocks.insert((inst, pc), b);
        self.work.push((inst, pc));
        b
    }

    fn var(&mut self, r: u32) -> Variable {
        if let Some(v) = self.regs[r as usize] {
            return v;
        }
        let v = self.b.declare_var(I64);
        self.regs[r as usize] = Some(v);
        v
    }

    fn get(&mut self, r: u32) -> Value {
        let v = self.var(r);
        self.b.use_var(v)
    }

    fn set(&mut self, r: u32, x: Value) {
        let v = self.var(r);
        self.b.def_var(v, x);
    }

    pub(super) fn imm(&mut self, v: u64) -> Value {
        self.b.ins().iconst(I64, v as i64)
    }

    pub(super) fn val(&mut self, s: Src) -> Value {
        match s {
            Src::Reg(r) => self.get(r),
            Src::Imm(v) => self.imm(v),
            Src::Sreg(sr) => self.sreg(sr),
        }
    }

    /// A `u32` field of the context that is fixed for the call (loaded where it is used).
    fn ctx_u32(&mut self, off: i32) -> Value {
        self.u.get(self.b, off)
    }

    /// A `u64` field: fixed ones from the entry, others (the range cache, the fault flag)
    /// loaded now.
    fn ctx_u64(&mut self, off: i32) -> Value {
        if Uniform::fixed(off) {
            self.u.get(self.b, off)
        } else {
            self.b.ins().load(I64, flags(), self.u.ctx, off)
        }
    }

    pub(super) fn sreg(&mut self, s: Sreg) -> Value {
        let t = self.b.use_var(self.t);
        let comp = |c: u8| c.min(2) as i32 * 8;
        match s {
            Sreg::Tid(c) => self.b.use_var(self.tid[c.min(2) as usize]),
            Sreg::Ntid(c) => self.ctx_u64(off!(ntid) + comp(c)),
            Sreg::Ctaid(c) => self.ctx_u64(off!(ctaid) + comp(c)),
            Sreg::Nctaid(c) => self.ctx_u64(off!(nctaid) + comp(c)),
            Sreg::Laneid => self.b.ins().band_imm_s(t, 31),
            Sreg::Warpid => self.b.ins().ushr_imm_s(t, 5),
            Sreg::Nwarpid => self.ctx_u32(off!(nwarps)),
            Sreg::Nsmid => self.ctx_u32(off!(nsm)),
            Sreg::DynamicSmem => self.ctx_u64(off!(dynamic_requested)),
            Sreg::TotalSmem => {
                let d = self.ctx_u64(off!(dynamic_len));
                self.b
                    .ins()
                    .iadd_imm_s(d, self.prog.static_shared_bytes as i64)
            }
            Sreg::Gridid => self.imm(0),
            Sreg::Const(v) => self.imm(v as u64),
            // Programs with recursion run on the interpreter: one activation, frame base 0.
            Sreg::LocalAddr(a) => self.imm(a),
            Sreg::Lanemask(c) => {
                use crate::ir::Cmp;
                let lane = self.b.ins().band_imm_s(t, 31);
                let one = self.imm(1);
                let bit = self.b.ins().ishl(one, lane);
                let m = match c {
                    Cmp::Eq => bit,
                    Cmp::Lt => self.b.ins().iadd_imm_s(bit, -1),
                    Cmp::Le => {
                        let b2 = self.b.ins().ishl_imm_s(bit, 1);
                        self.b.ins().iadd_imm_s(b2, -1)
                    }
                    Cmp::Gt => {
                        let b2 = self.b.ins().ishl_imm_s(bit, 1);
                        let m = self.b.ins().iadd_imm_s(b2, -1);
                        self.b.ins().bnot(m)
                    }
                    _ => {
                        let m = self.b.ins().iadd_imm_s(bit, -1);
                        self.b.ins().bnot(m)
                    }
                };
                self.b.ins().band_imm_s(m, 0xFFFF_FFFF)
            }
            Sreg::Smid | Sreg::Clock | Sreg::Clock64 | Sreg::Globaltimer => {
                let code = match s {
                    Sreg::Smid => run::SREG_SMID,
                    Sreg::Clock => run::SREG_CLOCK,
                    Sreg::Clock64 => run::SREG_CLOCK64,
                    _ => run::SREG_GLOBALTIMER,
                };
                let code = self.b.ins().iconst(I32, code as i64);
                let f = self.imm(run::sreg as *const () as u64);
                let call = self
                    .b
                    .ins()
                    .call_indirect(self.sigs.sreg, f, &[self.u.ctx, code, t]);
                self.b.inst_results(call)[0]
            }
        }
    }

    /// Calls `f(args)` through the C-ABI trampoline for its arity.
    fn call_fn(&mut self, f: usize, args: &[Value]) -> Value {
        let (tramp, sig) = match args.len() {
            1 => (run::call1 as *const () as u64, self.sigs.call1),
            2 => (run::call2 as *const () as u64, self.sigs.call2),
            _ => (run::call3 as *const () as u64, self.sigs.call3),
        };
        let tramp = self.imm(tramp);
        let fv = self.imm(f as u64);
        let mut all = vec![fv];
        all.extend_from_slice(args);
        let call = self.b.ins().call_indirect(sig, tramp, &all);
        self.b.inst_results(call)[0]
    }

    /// `f` applied to `args`: native code where `native` knows `f`, else a call.
    pub(super) fn apply(&mut self, f: usize, args: &[Value]) -> Value {
        match native::emit(self.b, f, args) {
            Some(v) => v,
            None => self.call_fn(f, args),
        }
    }

    /// Records a fault (`code`, `extra`) for the current thread at `pc` and leaves.
    pub(super) fn fault_here(&mut self, code: u32, pc: u32, extra: u64) {
        let t = self.b.use_var(self.t);
        let c = self.b.ins().iconst(I32, code as i64);
        let p = self.b.ins().iconst(I32, pc as i64);
        let e = self.imm(extra);
        let f = self.imm(run::fault as *const () as u64);
        self.b
            .ins()
            .call_indirect(self.sigs.fault, f, &[self.u.ctx, c, t, p, e]);
        self.b.ins().jump(self.fault, &[]);
    }

    /// Leaves for the fault exit when the runtime flagged a fault.
    pub(super) fn check_faulted(&mut self) {
        let f = self.ctx_u64(off!(faulted));
        let ok = self.b.create_block();
        self.b.ins().brif(f, self.fault, &[], ok, &[]);
        self.b.switch_to_block(ok);
    }

    pub(super) fn set_state(&mut self, v: u32) {
        let p = self.state_ptr();
        let v = self.b.ins().iconst(I32, v as i64);
        self.b.ins().store(flags(), v, p, 0);
    }

    /// The address of the current thread's (in the vector code: the group's first lane's)
    /// state word.
    pub(super) fn state_ptr(&mut self) -> Value {
        let tv = self.b.use_var(self.t);
        let at = self.b.ins().ishl_imm_s(tv, 2);
        let state = self.u.get(self.b, off!(state));
        self.b.ins().iadd(state, at)
    }

    /// A jump on the resume index `index`: 0 to `start`, index `i` to `resumes[i]`, any
    /// other to `other`.
    pub(super) fn dispatch_on(
        &mut self,
        index: Value,
        start: Block,
        resumes: &HashMap<u32, Block>,
        other: Block,
    ) {
        let max = resumes.keys().copied().max().unwrap_or(0);
        let pool = &mut self.b.func.dfg.value_lists;
        let calls: Vec<_> = (0..=max)
            .map(|i| match i {
                0 => start,
                i => resumes.get(&i).copied().unwrap_or(other),
            })
            .map(|blk| ir::BlockCall::new(blk, [], pool))
            .collect();
        let def = ir::BlockCall::new(other, [], pool);
        let jt = self.b.create_jump_table(JumpTableData::new(def, &calls));
        self.b.ins().br_table(index, jt);
    }

    /// The address of slot `i` of the current thread's row of `width` u64s at `base`.
    pub(super) fn row(&mut self, base: Value, width: usize, i: usize) -> Value {
        let t = self.b.use_var(self.t);
        let r = self.b.ins().imul_imm_s(t, (width * 8) as i64);
        let p = self.b.ins().iadd(base, r);
        self.b.ins().iadd_imm_s(p, (i * 8) as i64)
    }

    fn lower_block(&mut self, inst: usize, start: u32) -> Result<(), String> {
        let blk = self.blocks[&(inst, start)];
        self.b.switch_to_block(blk);
        let mut pc = start;
        loop {
            self.lowered += 1;
            if self.lowered > MAX_LOWERED {
                return Err(format!(
                    "more than {MAX_LOWERED} instructions after inlining calls"
                ));
            }
            let Some(i) = self.prog.code.get(pc as usize) else {
                // Ran off the end: the interpreter's fault.
                self.fault_here(run::FAULT_END, pc.saturating_sub(1), 0);
                return Ok(());
            };
            let ends = self.lower_inst(inst, pc, i)?;
            let next = pc + 1;
            if ends {
                return Ok(());
            }
            if self.an.leader.get(next as usize).copied().unwrap_or(true) {
                let nb = self.block_for(inst, next);
                self.b.ins().jump(nb, &[]);
                return Ok(());
            }
            pc = next;
        }
    }

    /// Lowers one instruction; true when it ended the block (a jump or return was emitted).
    fn lower_inst(&mut self, inst: usize, pc: u32, i: &Inst) -> Result<bool, String> {
        let Some((g, neg)) = i.guard else {
            return self.lower_op(inst, pc, i);
        };
        let gv = self.get(g);
        let (yes, no) = (self.b.create_block(), self.b.create_block());
        if let Op::Bra { target } = i.op {
            let tb = self.block_for(inst, target);
            let fb = self.block_for(inst, pc + 1);
            if neg {
                self.b.ins().brif(gv, fb, &[], tb, &[]);
            } else {
                self.b.ins().brif(gv, tb, &[], fb, &[]);
            }
            return Ok(true);
        }
        if neg {
            self.b.ins().brif(gv, no, &[], yes, &[]);
        } else {
            self.b.ins().brif(gv, yes, &[], no, &[]);
        }
        self.b.switch_to_block(yes);
        if !self.lower_op(inst, pc, i)? {
            self.b.ins().jump(no, &[]);
        }
        self.b.switch_to_block(no);
        Ok(false)
    }

    pub(super) fn line(&self, pc: u32) -> String {
        match self.prog.source.get(pc as usize) {
            Some((l, t)) => format!("line {l} `{t}`"),
            None => format!("instruction {pc}"),
        }
    }

    /// Adds `k` to the context's count of exited threads.
    pub(super) fn count_exits(&mut self, k: i64) {
        let ctx = self.u.ctx;
        let e = self.b.ins().load(I64, flags(), ctx, off!(exits));
        let e = self.b.ins().iadd_imm_s(e, k);
        self.b.ins().store(flags(), e, ctx, off!(exits));
    }

    /// Counts `k` threads waiting at the block barrier at `pc` for the driver. `id | count`
    /// non-zero (a `bar.red`: always) marks the pass as needing the full barrier scan; a
    /// `bar.sync 0` written so (`run::fixed_barrier`) marks nothing.
    pub(super) fn count_wait(&mut self, k: i64, pc: u32, id_or_count: Option<Value>) {
        let ctx = self.u.ctx;
        let w = self.b.ins().load(I64, flags(), ctx, off!(waits));
        let w = self.b.ins().iadd_imm_s(w, k);
        self.b.ins().store(flags(), w, ctx, off!(waits));
        let odd = match (
            run::fixed_barrier(&self.prog.code[pc as usize].op),
            id_or_count,
        ) {
            (Some(0), _) => return,
            (_, Some(v)) => v,
            (_, None) => self.b.ins().iconst(I64, 1),
        };
        let o = self.b.ins().load(I64, flags(), ctx, off!(odd_waits));
        let o = self.b.ins().bor(o, odd);
        self.b.ins().store(flags(), o, ctx, off!(odd_waits));
    }

    /// Tells the driver that threads `t..t + LANES` (the current group) need the scalar code.
    pub(super) fn mark_handed(&mut self) {
        let ctx = self.u.ctx;
        let t = self.b.use_var(self.t);
        let lo = self.b.ins().load(I64, flags(), ctx, off!(handed_lo));
        let lo = self.b.ins().umin(lo, t);
        self.b.ins().store(flags(), lo, ctx, off!(handed_lo));
        let end = self.b.ins().iadd_imm_s(t, crate::jit::vector::LANES as i64);
        let hi = self.b.ins().load(I64, flags(), ctx, off!(handed_hi));
        let hi = self.b.ins().umax(hi, end);
        self.b.ins().store(flags(), hi, ctx, off!(handed_hi));
    }

    /// The resume index of the point at `pc` in instance `inst`: the analysis's numbering
    /// in the kernel body (which the vector code shares), new ones past the entries for
    /// inlined bodies.
    fn resume_index(&mut self, inst: usize, pc: u32) -> u32 {
        if inst == 0 {
            return self.an.point_at[&pc] as u32 + 1;
        }
        self.resumes.push(None);
        self.resumes.len() as u32
    }

    /// The address of the spill slot of register `r` for the current thread.
    pub(super) fn spill_at(&mut self, r: u32) -> Value {
        let s = self.slots.slot(r) as i64;
        // The thread's first slot (the same value for every slot the block touches, so
        // Cranelift computes it once there), then the slot's row: a multiply and an add.
        let t = self.b.use_var(self.t);
        let t = self.b.ins().ishl_imm_s(t, 3);
        let spill = self.u.get(self.b, off!(spill));
        let first = self.b.ins().iadd(spill, t);
        if s == 0 {
            return first;
        }
        let stride = self.u.get(self.b, off!(nthreads));
        let row = self.b.ins().imul_imm_s(stride, s);
        self.b.ins().iadd(first, row)
    }

    /// Saves the live registers and the operands, marks the thread waiting at a new resume
    /// index, and emits the resume block that restores them and goes on after `pc`.
    fn suspend(&mut self, inst: usize, pc: u32, operands: &[Value]) {
        let k = self.an.point_at[&pc];
        let point = &self.an.points[k];
        let (live, kind) = (point.live.clone(), point.kind);
        for r in &live {
            let v = self.get(*r);
            let p = self.spill_at(*r);
            self.b.ins().store(flags(), v, p, 0);
        }
        let fixed = run::fixed_barrier(&self.prog.code[pc as usize].op).is_some();
        for (j, v) in operands.iter().enumerate().filter(|_| !fixed) {
            let coll = self.u.get(self.b, off!(coll));
            let p = self.row(coll, run::COLL_WIDTH, j);
            self.b.ins().store(flags(), *v, p, 0);
        }
        let index = self.resume_index(inst, pc);
        self.resumes[index as usize - 1] = Some(Resume { pc, kind });
        self.set_state(index | WAIT);
        if kind == PointKind::Barrier {
            // `bar.sync 0` with no count is the driver's fast case; `bar.red` never is.
            let plain = match operands {
                [id, count] => Some(self.b.ins().bor(*id, *count)),
                _ => None,
            };
            self.count_wait(1, pc, plain);
        }
        self.b.ins().jump(self.next, &[]);
        // The resume block.
        let rb = self.b.create_block();
        self.resume_blocks.insert(index, rb);
        self.b.switch_to_block(rb);
        for r in &live {
            let p = self.spill_at(*r);
            let v = self.b.ins().load(I64, flags(), p, 0);
            self.set(*r, v);
        }
        // The driver wrote the collective's or `bar.red`'s results (d, then p) in the operand
        // row.
        let (d, p) = match &self.prog.code[pc as usize].op {
            Op::Shfl { d, p, .. } | Op::Match { d, p, .. } => (Some(*d), *p),
            Op::Vote { d, .. } | Op::Redux { d, .. } | Op::Activemask { d } => (Some(*d), None),
            Op::Bar {
                kind: BarKind::Red { d, .. },
                ..
            } => (Some(*d), None),
            _ => (None, None),
        };
        for (j, r) in [d, p].into_iter().enumerate() {
            if let Some(r) = r {
                let coll = self.u.get(self.b, off!(coll));
                let at = self.row(coll, run::COLL_WIDTH, j);
                let v = self.b.ins().load(I64, flags(), at, 0);
                self.set(r, v);
            }
        }
        let after = self.block_for(inst, pc + 1);
        self.b.ins().jump(after, &[]);
    }
}
