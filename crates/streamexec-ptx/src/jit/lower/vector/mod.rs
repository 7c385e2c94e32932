//! The vector function of a kernel: `fn(ctx, begin, end) -> status` like the scalar one,
//! but it runs groups of [`LANES`] consecutive threads of a block row together, uniform
//! registers as scalars and the others as SIMD vectors (`vector.rs` says which).
//!
//! A group runs while its lanes agree: a branch or guard taken by all or by none is one
//! scalar branch; where they part, or at an instruction with no vector form (atomics, calls of
//! device services, ...), the group stores its live registers lane by lane in the spill area,
//! marks each lane with the resume index of that instruction, and the scalar function (called
//! next by the driver) continues each thread on its own. A memory access whose lanes touch
//! consecutive elements of one known range is one vector load or store; any other address
//! pattern (or a range the inline checks do not cover) takes the per-lane path, which is the
//! scalar code's exact check and fault. Block barriers suspend the whole group; when its lanes
//! are released together and their uniform registers still agree it resumes as a group,
//! otherwise on the scalar code.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::{CondCode, FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, Block, ConstantData, Endianness, InstBuilder, MemFlagsData, Value, types,
};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::{I32, I64, Lower, Slots, flags, mem_ty};
use crate::ir::{BarKind, BoolOp, Inst, Op, Program, Space, Src, Sreg, THREAD_PARAM_BASE, Ty};
use crate::jit::analysis::{Analysis, Bits, PointKind};
use crate::jit::native::{self, N};
use crate::jit::run::{self, EXITED, GROUP, WAIT};
use crate::jit::vector::{Class, LANES, Shape, per_thread, sreg_varying, vector_access};

const I32X4: ir::Type = types::I32X4;
const I64X2: ir::Type = types::I64X2;
const F32X4: ir::Type = types::F32X4;
const F64X2: ir::Type = types::F64X2;

mod arith;
mod mem;
mod staged;
mod values;

use arith::lop3;

/// Where a register lives in the vector code.
#[derive(Clone, Copy)]
enum VReg {
    /// The same in every lane: one 64-bit slot.
    U(Variable),
    /// Lanes of 32-bit values whose slots extend them (with sign when `true`).
    V32(Variable, bool),
    /// Lanes of 64-bit slots, two per vector.
    V64(Variable, Variable),
    /// Lanes that step by a constant (`jit/stride.rs`): lane 0's slot alone; lane `j` is it
    /// plus `j` times the step.
    A(Variable, i64),
}

/// A value in the vector code.
#[derive(Clone, Copy)]
enum VVal {
    U(Value),
    V32(Value, bool),
    V64(Value, Value),
    /// One 64-bit slot per lane (from per-lane code).
    Lanes([Value; LANES]),
    /// Lane 0's slot and the step between lanes.
    A(Value, i64),
}

/// `x cc y` with `y` uniform and `x`'s lanes strictly increasing through the group with no
/// wrap in the compared width: lanes 0 and 3 of `x` (reduced to that width), and `y`.
#[derive(Clone, Copy)]
struct StepCmp {
    first: Value,
    last: Value,
    y: Value,
    cc: IntCC,
}

/// What the vector lowering leaves for the scalar function.
pub(crate) struct VectorOut {
    /// Instructions where groups hand their threads to the scalar code.
    pub(crate) entries: Vec<u32>,
    pub(crate) slots: Slots,
}

/// Lowering state of the vector function.
struct VLower<'l, 'a, 'b> {
    lw: &'l mut Lower<'a, 'b>,
    regs: Vec<VReg>,
    entries: Vec<u32>,
    entry_index: HashMap<u32, u32>,
    /// Group resume blocks by resume index (barriers).
    resumes: HashMap<u32, Block>,
    /// Where each of them goes on for a group suspended whole (`GROUP`), which is what the
    /// driver's direct resume (`run::Ctx::resume`) enters.
    resumes_whole: HashMap<u32, Block>,
    /// `[0, 1, 2, 3]`.
    iota: Value,
    /// 0/1 predicate lanes made from a lane mask, and that mask (a guard on a fresh
    /// comparison uses the mask directly).
    masks: HashMap<Value, Value>,
    /// 0/1 predicate lanes of a comparison whose lanes increase through the group
    /// (`StepCmp`), so a guard on it tests lanes 0 and 3 with scalar compares.
    step_cmps: HashMap<Value, StepCmp>,
    /// Per register: its lanes' step and lane 0's trailing zero bits (`Shape::steps`).
    steps: Vec<Option<(i64, u32)>>,
    /// Per instruction, the registers the spill area already holds (`Analysis::stored`).
    stored: Vec<Bits>,
    /// Per instruction, the registers read before a write or a suspension
    /// (`Analysis::needed`): what a resume before it reloads.
    needed: Vec<Bits>,
    /// The dispatched group's `GROUP` bit (see `run::GROUP`).
    group: Variable,
    /// Per device access (by PC): the range it found last (`mem.rs`).
    sites: HashMap<u32, ir::StackSlot>,
    /// Per hoisted access (by PC): its index in the context's `hoist` array, in the
    /// function the driver runs once the block's check passed (`crate::jit::hoist`).
    hoisted: HashMap<u32, usize>,
    fma: bool,
    /// The call's first and end thread, and the first thread's coordinates (the entry's).
    begin: Value,
    end: Value,
    tid0: [Value; 3],
    /// The group loop's body (past the bound test): where a warp restarts (`staged.rs`).
    body: Block,
    /// Non-zero for a group resumed by a warp restart: its collective was resolved here and
    /// its result is in the stage (`staged.rs`).
    fast: Variable,
    /// In kernels with warp collectives: 0, or the resume index of the collective the warp's
    /// last group resolved (`staged.rs`), at which every group of the pass it restarted
    /// resumes.
    restart: Option<Variable>,
}

fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// Emits the vector function of `prog` into `b`, starting from the spill slots `slots`. With
/// a `hoist` plan, its sites access memory unchecked (`crate::jit::hoist`).
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    prog: &Program,
    an: &Analysis,
    shape: &Shape,
    slots: Slots,
    hoist: Option<&crate::jit::hoist::Plan>,
) -> Result<VectorOut, String> {
    let (mut lw, begin64, end64) = Lower::start(b, prog, an, slots, true);
    let tid0 = lw.tid.map(|v| lw.b.use_var(v));
    let regs = (0..prog.regs as usize)
        .map(|r| {
            let b = &mut *lw.b;
            if !shape.varying[r] {
                return VReg::U(b.declare_var(I64));
            }
            if let Some((s, _)) = shape.steps[r] {
                return VReg::A(b.declare_var(I64), s);
            }
            match shape.class[r] {
                Class::W64 => VReg::V64(b.declare_var(I64X2), b.declare_var(I64X2)),
                Class::S32 => VReg::V32(b.declare_var(I32X4), true),
                _ => VReg::V32(b.declare_var(I32X4), false),
            }
        })
        .collect();
    let iota = {
        let c = lw.b.func.dfg.constants.insert(ConstantData::from(
            [0u32, 1, 2, 3]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
        ));
        lw.b.ins().vconst(I32X4, c)
    };
    // Each device access's range cache, empty (no offset is below 0) for each call.
    let mut sites = HashMap::new();
    for (pc, i) in prog.code.iter().enumerate() {
        if let Op::Ld { space, .. } | Op::St { space, .. } = i.op
            && matches!(space, Space::Global | Space::Generic)
        {
            let slot = lw.b.create_sized_stack_slot(ir::StackSlotData::new(
                ir::StackSlotKind::ExplicitSlot,
                24,
                3,
            ));
            let zero = lw.b.ins().iconst(I64, 0);
            lw.b.ins().stack_store(I64, zero, slot, 8);
            sites.insert(pc as u32, slot);
        }
    }
    let restart = an.has_warp_points.then(|| {
        let v = lw.b.declare_var(I32);
        let zero = lw.b.ins().iconst(I32, 0);
        lw.b.def_var(v, zero);
        v
    });
    let next = lw.next;
    let (body, dispatch) = lw.thread_loop(LANES as u32, end64, an.points.is_empty());
    lw.b.switch_to_block(body);
    // Without suspension points every group starts at the top (the driver marks the state
    // words exited, so the scalar code runs only what groups hand over).
    let stateless = an.points.is_empty();
    let check = if stateless {
        lw.b.ins().jump(dispatch, &[]);
        None
    } else {
        // A pass the driver started at one barrier for every group (`run::Ctx::resume`, in
        // kernels with barriers and no warp collectives): straight to its group resume.
        // Else a group runs when its lanes' state words agree.
        let barriers = an.points.iter().any(|p| p.kind == PointKind::Barrier);
        // In kernels with warp collectives, the restart of a warp whose collective the
        // vector code resolved (`staged.rs`) does the same.
        let direct = (barriers || restart.is_some()).then(|| {
            let resume = match restart {
                Some(v) => lw.b.use_var(v),
                None => {
                    let ctx = lw.u.ctx;
                    lw.b.ins().load(I32, flags(), ctx, off!(resume))
                }
            };
            let (direct, by_state) = (lw.b.create_block(), lw.b.create_block());
            lw.b.ins().brif(resume, direct, &[], by_state, &[]);
            lw.b.switch_to_block(by_state);
            (resume, direct)
        });
        let sp = lw.state_ptr();
        let st = lw.b.ins().load(I32X4, vflags().with_notrap(), sp, 0);
        let s0 = lw.b.ins().extractlane(st, 0);
        let all = lw.b.ins().splat(I32X4, s0);
        let eq = lw.b.ins().icmp(IntCC::Equal, st, all);
        let same = lw.b.ins().vall_true(eq);
        let mixed = lw.b.create_block();
        lw.b.ins().brif(same, dispatch, &[], mixed, &[]);
        // Lanes in different states: the scalar code sorts them out.
        lw.b.switch_to_block(mixed);
        lw.mark_handed();
        lw.b.ins().jump(next, &[]);
        // A state the vector code does not resume: unless waiting or exited, the scalar
        // code's.
        let skip = lw.b.create_block();
        lw.b.switch_to_block(skip);
        let waits = lw.b.ins().band_imm_s(s0, WAIT as i64);
        let hand = lw.b.create_block();
        lw.b.ins().brif(waits, next, &[], hand, &[]);
        lw.b.switch_to_block(hand);
        lw.mark_handed();
        lw.b.ins().jump(next, &[]);
        Some((s0, skip, direct))
    };

    // Non-zero while the group being dispatched was suspended as a whole (`GROUP`).
    let group = lw.b.declare_var(I32);
    let fast = lw.b.declare_var(I32);
    let stored = an.stored(prog);
    let mut v = VLower {
        needed: an.needed(prog, &stored),
        stored,
        group,
        lw: &mut lw,
        regs,
        entries: Vec::new(),
        entry_index: HashMap::new(),
        resumes: HashMap::new(),
        resumes_whole: HashMap::new(),
        iota,
        masks: HashMap::new(),
        step_cmps: HashMap::new(),
        steps: shape.steps.clone(),
        sites,
        hoisted: hoist.map_or_else(HashMap::new, |p| {
            p.sites.iter().enumerate().map(|(k, s)| (s.pc, k)).collect()
        }),
        fma: cfg!(target_arch = "x86_64") && std::is_x86_feature_detected!("fma")
            || cfg!(target_arch = "aarch64"),
        begin: begin64,
        end: end64,
        tid0,
        body,
        fast,
        restart,
    };
    let start = v.lw.block_for(0, 0);
    while let Some((_, pc)) = v.lw.work.pop() {
        v.lower_block(pc)?;
    }
    let resumes = std::mem::take(&mut v.resumes);
    let resumes_whole = std::mem::take(&mut v.resumes_whole);
    let entries = std::mem::take(&mut v.entries);
    lw.b.switch_to_block(dispatch);
    match check {
        None => {
            lw.b.ins().jump(start, &[]);
        }
        Some((s0, skip, direct)) => {
            let g = lw.b.ins().band_imm_s(s0, GROUP as i64);
            lw.b.def_var(group, g);
            // A state word never says a collective was resolved here: only a restart does.
            let f = lw.b.ins().iconst(I32, 0);
            lw.b.def_var(fast, f);
            let index = lw.b.ins().band_imm_s(s0, !(GROUP as i32) as i64);
            lw.dispatch_on(index, start, &resumes, skip);
            if let Some((resume, direct)) = direct {
                // Straight to the whole-group path, past the `GROUP` test.
                lw.b.switch_to_block(direct);
                let f = lw.b.ins().iconst(I32, restart.is_some() as i64);
                lw.b.def_var(fast, f);
                // Only points whole groups were suspended at are named (a barrier by the
                // driver, a staged collective by a restart); any other index would leave the
                // group to the scalar code.
                let hand = lw.b.create_block();
                lw.dispatch_on(resume, hand, &resumes_whole, hand);
                lw.b.switch_to_block(hand);
                lw.mark_handed();
                let next = lw.next;
                lw.b.ins().jump(next, &[]);
            }
        }
    }
    lw.b.seal_all_blocks();
    Ok(VectorOut {
        entries,
        slots: std::mem::take(&mut lw.slots),
    })
}

impl<'b> VLower<'_, '_, 'b> {
    fn b(&mut self) -> &mut FunctionBuilder<'b> {
        self.lw.b
    }

    fn use_var(&mut self, v: Variable) -> Value {
        self.lw.b.use_var(v)
    }

    fn lower_block(&mut self, start: u32) -> Result<(), String> {
        let blk = self.lw.blocks[&(0, start)];
        self.lw.b.switch_to_block(blk);
        let mut pc = start;
        loop {
            let Some(i) = self.lw.prog.code.get(pc as usize) else {
                // Running off the end faults: the scalar code reports it.
                self.hand_over_storing(pc.saturating_sub(1), true);
                return Ok(());
            };
            if self.lower_inst(pc, i)? {
                return Ok(());
            }
            let next = pc + 1;
            if self
                .lw
                .an
                .leader
                .get(next as usize)
                .copied()
                .unwrap_or(true)
            {
                let nb = self.lw.block_for(0, next);
                self.b().ins().jump(nb, &[]);
                return Ok(());
            }
            pc = next;
        }
    }

    /// Hands the group to the scalar code at `pc`: live registers stored per lane (but those
    /// the spill area already holds), each lane's state the entry's resume index.
    fn hand_over(&mut self, pc: u32) {
        self.hand_over_storing(pc, false);
    }

    /// As [`Self::hand_over`]; `all`: store every live register.
    fn hand_over_storing(&mut self, pc: u32, all: bool) {
        let npoints = self.lw.an.points.len() as u32;
        let index = match self.entry_index.get(&pc) {
            Some(i) => *i,
            None => {
                let i = npoints + 1 + self.entries.len() as u32;
                self.entries.push(pc);
                self.entry_index.insert(pc, i);
                i
            }
        };
        for r in self.lw.an.live_at(pc) {
            if all || !self.stored[pc as usize].has(r) {
                self.store_lanes(r);
            }
        }
        self.set_states(index);
        self.lw.mark_handed();
        let next = self.lw.next;
        self.b().ins().jump(next, &[]);
    }

    fn set_states(&mut self, v: u32) {
        let sp = self.lw.state_ptr();
        let c = self.b().ins().iconst(I32, v as i64);
        let s = self.b().ins().splat(I32X4, c);
        self.b().ins().store(vflags().with_notrap(), s, sp, 0);
    }

    /// Register `r`'s slots of the group's lanes in the spill area.
    fn store_lanes(&mut self, r: u32) {
        let p = self.lw.spill_at(r);
        let v = self.get(r);
        let (a, b) = self.u64x2(v);
        let f = vflags().with_notrap();
        self.b().ins().store(f, a, p, 0);
        self.b().ins().store(f, b, p, 16);
    }

    // ---- instructions ----

    /// Lowers one instruction; true when it ended the block.
    fn lower_inst(&mut self, pc: u32, i: &Inst) -> Result<bool, String> {
        let Some((g, neg)) = i.guard else {
            return self.lower_op(pc, i);
        };
        let gv = self.get(g);
        if let VVal::U(gv) = gv {
            // A uniform guard: one scalar branch, as in the scalar code.
            if let Op::Bra { target } = i.op {
                let tb = self.lw.block_for(0, target);
                let fb = self.lw.block_for(0, pc + 1);
                if neg {
                    self.b().ins().brif(gv, fb, &[], tb, &[]);
                } else {
                    self.b().ins().brif(gv, tb, &[], fb, &[]);
                }
                return Ok(true);
            }
            let (yes, no) = (self.b().create_block(), self.b().create_block());
            if neg {
                self.b().ins().brif(gv, no, &[], yes, &[]);
            } else {
                self.b().ins().brif(gv, yes, &[], no, &[]);
            }
            self.b().switch_to_block(yes);
            if !self.lower_op(pc, i)? {
                self.b().ins().jump(no, &[]);
            }
            self.b().switch_to_block(no);
            return Ok(false);
        }
        // A guard that may differ between lanes: all, none, or hand over.
        let (all, any) = match self.step_guard(gv, neg) {
            Some(t) => t,
            None => {
                let m = self.pred_mask(gv, neg);
                (self.b().ins().vall_true(m), self.b().ins().vany_true(m))
            }
        };
        let (yes, not_all, mixed) = (
            self.b().create_block(),
            self.b().create_block(),
            self.b().create_block(),
        );
        self.b().ins().brif(all, yes, &[], not_all, &[]);
        self.b().switch_to_block(mixed);
        self.hand_over(pc);
        if let Op::Bra { target } = i.op {
            let tb = self.lw.block_for(0, target);
            let fb = self.lw.block_for(0, pc + 1);
            self.b().switch_to_block(yes);
            self.b().ins().jump(tb, &[]);
            self.b().switch_to_block(not_all);
            self.b().ins().brif(any, mixed, &[], fb, &[]);
            return Ok(true);
        }
        let no = self.b().create_block();
        self.b().switch_to_block(not_all);
        self.b().ins().brif(any, mixed, &[], no, &[]);
        self.b().switch_to_block(yes);
        if !self.lower_op(pc, i)? {
            self.b().ins().jump(no, &[]);
        }
        self.b().switch_to_block(no);
        Ok(false)
    }

    /// Hands over at `pc` and ends the block.
    fn over(&mut self, pc: u32) -> Result<bool, String> {
        self.hand_over(pc);
        Ok(true)
    }

    fn lower_op(&mut self, pc: u32, i: &Inst) -> Result<bool, String> {
        if let Some(done) = self.lower_stepped(i) {
            return done.map(|()| false);
        }
        match &i.op {
            Op::Un { f, d, a } => {
                let Some(a) = self.val(*a) else {
                    return self.over(pc);
                };
                let r = self.apply(*f as usize, &[a]);
                self.set(*d, r)?;
            }
            Op::Bin { f, d, a, b } => {
                let (Some(a), Some(b)) = (self.val(*a), self.val(*b)) else {
                    return self.over(pc);
                };
                let r = self.apply(*f as usize, &[a, b]);
                self.set(*d, r)?;
            }
            Op::Tern { f, d, a, b, c } => {
                let (Some(a), Some(b), Some(c)) = (self.val(*a), self.val(*b), self.val(*c)) else {
                    return self.over(pc);
                };
                let r = self.apply(*f as usize, &[a, b, c]);
                self.set(*d, r)?;
            }
            Op::Lop3 { lut, d, a, b, c } => {
                let (Some(a), Some(b), Some(c)) = (self.val(*a), self.val(*b), self.val(*c)) else {
                    return self.over(pc);
                };
                let r = match (a, b, c) {
                    (VVal::U(a), VVal::U(b), VVal::U(c)) => {
                        VVal::U(native::lop3(self.lw.b, *lut, a, b, c))
                    }
                    _ => {
                        let (a, b, c) = (self.i32x4(a), self.i32x4(b), self.i32x4(c));
                        VVal::V32(lop3(self.lw.b, *lut, a, b, c), false)
                    }
                };
                self.set(*d, r)?;
            }
            Op::Setp {
                f,
                p,
                q,
                a: sa,
                b: sb,
                comb,
                hi,
            } => {
                let (Some(mut a), Some(mut b)) = (self.val(*sa), self.val(*sb)) else {
                    return self.over(pc);
                };
                if let VReg::U(_) = self.regs[*p as usize] {
                    // The same answer in every lane (`vector::same_in_group`): lane 0's.
                    a = VVal::U(self.lane(a, 0));
                    b = VVal::U(self.lane(b, 0));
                }
                let comb = match comb {
                    Some((op, s, neg)) => match self.val(*s) {
                        Some(v) => Some((*op, v, *neg)),
                        None => return self.over(pc),
                    },
                    None => None,
                };
                let (x, y) = self.setp(*f as usize, hi.map(|h| h as usize), a, b, comb);
                if let (VVal::V32(v, false), None, None) = (x, comb, hi) {
                    self.note_step_cmp(*f as usize, (*sa, a), (*sb, b), v);
                }
                self.set(*p, x)?;
                if let Some(q) = q {
                    self.set(*q, y)?;
                }
            }
            Op::Cvta { to, space, d, a } => {
                let w = cvta_window(*to, *space);
                let Some(a) = self.val(*a) else {
                    return self.over(pc);
                };
                let r = match a {
                    VVal::U(a) => VVal::U(self.b().ins().iadd_imm_s(a, w as i64)),
                    a => {
                        let (x, y) = self.u64x2(a);
                        let wv = self.lw.imm(w);
                        let wv = self.b().ins().splat(I64X2, wv);
                        VVal::V64(self.b().ins().iadd(x, wv), self.b().ins().iadd(y, wv))
                    }
                };
                self.set(*d, r)?;
            }
            Op::Ld {
                space,
                ty,
                n,
                d,
                addr,
            } => return self.lower_ld(pc, *space, *ty, *n as usize, d, addr),
            Op::St {
                space,
                ty,
                n,
                s,
                addr,
            } => return self.lower_st(pc, *space, *ty, *n as usize, s, addr),
            Op::Bra { target } => {
                let tb = self.lw.block_for(0, *target);
                self.b().ins().jump(tb, &[]);
                return Ok(true);
            }
            Op::Exit => {
                if !self.lw.an.points.is_empty() {
                    self.set_states(EXITED);
                    self.lw.count_exits(LANES as i64);
                }
                let next = self.lw.next;
                self.b().ins().jump(next, &[]);
                return Ok(true);
            }
            Op::Nop => {
                self.b().ins().fence();
            }
            Op::Bar {
                id,
                count,
                kind: BarKind::Sync,
            } => {
                let id = self.val(*id);
                let count = match count {
                    Some(c) => self.val(*c),
                    None => Some(VVal::U(self.lw.imm(0))),
                };
                let (Some(VVal::U(id)), Some(VVal::U(count))) = (id, count) else {
                    return self.over(pc);
                };
                let plain = self.b().ins().bor(id, count);
                self.suspend(pc, &[VVal::U(id), VVal::U(count)], &[], Some(plain), None);
                return Ok(true);
            }
            // Warp collectives: the group waits for the driver, which resolves the warp's
            // lanes together (in one pass when all 32 wait at one `shfl`), as for the scalar
            // code's lanes, whose operand rows (`lower/ops.rs`) these match.
            Op::Shfl {
                d,
                p,
                a,
                b,
                c,
                mask,
                ..
            } => {
                let fast = staged::Staged::of(&i.op);
                return Ok(self.collective(pc, &[*a, *b, *c, *mask], *d, *p, fast));
            }
            Op::Vote { d, a, mask, .. } | Op::Redux { d, a, mask, .. } => {
                let fast = staged::Staged::of(&i.op);
                return Ok(self.collective(pc, &[*a, *mask], *d, None, fast));
            }
            Op::Match { d, p, a, mask, .. } => {
                return Ok(self.collective(pc, &[*a, *mask], *d, *p, None));
            }
            Op::Activemask { d } => {
                let fast = staged::Staged::of(&i.op);
                return Ok(self.collective(pc, &[], *d, None, fast));
            }
            _ => return self.over(pc),
        }
        Ok(false)
    }

    /// An instruction whose result steps by a constant (`VReg::A`): lane 0 alone, by the
    /// scalar code's lowering of the same lane function. `None` for any other instruction
    /// (or an operand only the vector path computes).
    fn lower_stepped(&mut self, i: &Inst) -> Option<Result<(), String>> {
        let (d, args, f) = match &i.op {
            Op::Un { f, d, a } => (*d, vec![*a], Some(*f as usize)),
            Op::Bin { f, d, a, b } => (*d, vec![*a, *b], Some(*f as usize)),
            Op::Tern { f, d, a, b, c } => (*d, vec![*a, *b, *c], Some(*f as usize)),
            Op::Cvta { d, a, .. } => (*d, vec![*a], None),
            _ => return None,
        };
        let VReg::A(v, _) = *self.regs.get(d as usize)? else {
            return None;
        };
        let mut xs = Vec::with_capacity(args.len());
        for a in args {
            xs.push(self.lane0(a)?);
        }
        let r = match (f, &i.op) {
            (Some(f), _) => self.lw.apply(f, &xs),
            (None, Op::Cvta { to, space, .. }) => {
                let w = cvta_window(*to, *space);
                self.b().ins().iadd_imm_s(xs[0], w as i64)
            }
            _ => return None,
        };
        self.lw.b.def_var(v, r);
        Some(Ok(()))
    }

    /// A warp collective at `pc` with `operands`, writing `d` (and `p`): the group suspends;
    /// true (the block ended). `fast`: one the warp's last group may resolve itself.
    fn collective(
        &mut self,
        pc: u32,
        operands: &[Src],
        d: u32,
        p: Option<u32>,
        fast: Option<staged::Staged>,
    ) -> bool {
        let mut vals = Vec::with_capacity(operands.len());
        for s in operands {
            match self.val(*s) {
                Some(v) => vals.push(v),
                None => {
                    self.hand_over(pc);
                    return true;
                }
            }
        }
        let results: Vec<u32> = std::iter::once(d).chain(p).collect();
        self.suspend(pc, &vals, &results, None, fast);
        true
    }

    /// The whole group waits at the suspension point `pc` (`bar.sync`, or a warp collective):
    /// live registers (but `results`) and `operands` stored per lane, as the scalar code
    /// stores them, and a group resume block, which takes `results[j]` from each lane's
    /// operand row, word `j`, where the driver wrote it. `plain`: a barrier's `id | count`,
    /// which the driver's fast release counts.
    fn suspend(
        &mut self,
        pc: u32,
        operands: &[VVal],
        results: &[u32],
        plain: Option<Value>,
        fast: Option<staged::Staged>,
    ) {
        let k = self.lw.an.point_at[&pc];
        let live: Vec<u32> = self.lw.an.points[k]
            .live
            .iter()
            .copied()
            .filter(|r| !results.contains(r))
            .collect();
        let index = k as u32 + 1;
        for r in &live {
            if !self.stored[pc as usize].has(*r) {
                self.store_lanes(*r);
            }
        }
        let row = (run::COLL_WIDTH * 8) as i32;
        let rows = self.rows();
        // A collective resolved here keeps its operands in the stage alone; the driver
        // writes the rows from there if it resolves the collective instead (`run.rs`). A
        // fixed barrier's operands are the instruction's.
        let fixed = run::fixed_barrier(&self.lw.prog.code[pc as usize].op).is_some();
        for (j, v) in operands
            .iter()
            .enumerate()
            .filter(|_| fast.is_none() && !fixed)
        {
            for lane in 0..LANES {
                let x = self.lane(*v, lane);
                let at = lane as i32 * row + 8 * j as i32;
                self.b().ins().store(flags(), x, rows, at);
            }
        }
        self.set_states(index | WAIT | GROUP);
        if let Some(plain) = plain {
            self.lw.count_wait(LANES as i64, pc, Some(plain));
        }
        if plain.is_some() && self.restart.is_none() {
            // Which barriers whole groups wait at: one alone lets the driver resume them all
            // there directly (`run::Ctx::resume`; not in kernels with warp collectives).
            let ctx = self.lw.u.ctx;
            let p = self.b().ins().load(I64, flags(), ctx, off!(bar_points));
            let p = self.b().ins().bor_imm_s(p, 1i64 << index.min(63));
            self.b().ins().store(flags(), p, ctx, off!(bar_points));
        }
        if let Some(s) = fast {
            self.stage(s, operands, index | WAIT | GROUP);
        } else {
            let next = self.lw.next;
            self.b().ins().jump(next, &[]);
        }
        // The group resume block: uniform registers must still agree and stepped ones still
        // step (lanes may have run on the scalar code since), else the lanes resume there.
        let rb = self.b().create_block();
        self.resumes.insert(index, rb);
        self.b().switch_to_block(rb);
        let f = vflags().with_notrap();
        // A group that was suspended whole skips the checks.
        let (go, check) = (self.b().create_block(), self.b().create_block());
        self.resumes_whole.insert(index, go);
        let g = self.use_var(self.group);
        self.b().ins().brif(g, go, &[], check, &[]);
        self.b().switch_to_block(check);
        let mut agree: Option<Value> = None;
        for r in &live {
            let step = match self.regs[*r as usize] {
                VReg::U(_) => 0,
                VReg::A(_, s) => s,
                _ => continue,
            };
            {
                // Uniform registers: every lane the same; stepped ones: lane 0 plus the steps.
                let p = self.lw.spill_at(*r);
                let a = self.b().ins().load(I64X2, f, p, 0);
                let b = self.b().ins().load(I64X2, f, p, 16);
                let x0 = self.b().ins().extractlane(a, 0);
                let (sa, sb) = self.stepped(x0, step);
                let ea = self.b().ins().icmp(IntCC::Equal, a, sa);
                let eb = self.b().ins().icmp(IntCC::Equal, b, sb);
                let e = self.b().ins().band(ea, eb);
                agree = Some(match agree {
                    Some(x) => self.b().ins().band(x, e),
                    None => e,
                });
            }
        }
        if let Some(e) = agree {
            let ok = self.b().ins().vall_true(e);
            let hand = self.b().create_block();
            self.b().ins().brif(ok, go, &[], hand, &[]);
            self.b().switch_to_block(hand);
            self.lw.mark_handed();
            let next = self.lw.next;
            self.b().ins().jump(next, &[]);
        } else {
            self.b().ins().jump(go, &[]);
        }
        self.b().switch_to_block(go);
        // Registers read before the next suspension; the others stay in the spill area.
        let needed = |r: u32| self.needed.get(pc as usize + 1).is_some_and(|n| n.has(r));
        let reload: Vec<u32> = live.iter().copied().filter(|r| needed(*r)).collect();
        for r in &reload {
            let p = self.lw.spill_at(*r);
            let v = match self.regs[*r as usize] {
                // Uniform and stepped registers: lane 0's slot is all there is to load.
                VReg::U(_) => VVal::U(self.b().ins().load(I64, flags(), p, 0)),
                VReg::A(_, s) => VVal::A(self.b().ins().load(I64, flags(), p, 0), s),
                _ => {
                    let a = self.b().ins().load(I64X2, f, p, 0);
                    let b = self.b().ins().load(I64X2, f, p, 16);
                    VVal::V64(a, b)
                }
            };
            self.set(*r, v)
                .expect("a uniform register gets a uniform value");
        }
        if let Some(s) = fast {
            // Resolved here (a restart) or by the driver, into the operand rows.
            let (here, driver) = (self.b().create_block(), self.b().create_block());
            let join = self.b().create_block();
            for _ in 0..2 {
                self.b().append_block_param(join, I32X4);
            }
            let fv = self.use_var(self.fast);
            self.b().ins().brif(fv, here, &[], driver, &[]);
            self.b().switch_to_block(here);
            let (x, pred) = self.staged_result(s);
            self.b().ins().jump(join, &[x.into(), pred.into()]);
            self.b().switch_to_block(driver);
            let rows = self.rows();
            let [x, pred] = std::array::from_fn(|j| {
                let lanes = std::array::from_fn(|lane| {
                    let at = lane as i32 * row + 8 * j as i32;
                    self.b().ins().load(I64, flags(), rows, at)
                });
                self.i32x4(VVal::Lanes(lanes))
            });
            self.b().ins().jump(join, &[x.into(), pred.into()]);
            self.b().switch_to_block(join);
            let ps = self.b().func.dfg.block_params(join).to_vec();
            for (r, v) in results.iter().zip(ps) {
                self.set(*r, VVal::V32(v, false))
                    .expect("a collective's result is varying");
            }
        } else if !results.is_empty() {
            let rows = self.rows();
            for (j, r) in results.iter().enumerate() {
                let lanes = std::array::from_fn(|lane| {
                    let at = lane as i32 * row + 8 * j as i32;
                    self.b().ins().load(I64, flags(), rows, at)
                });
                self.set(*r, VVal::Lanes(lanes))
                    .expect("a collective's result is varying");
            }
        }
        let after = self.lw.block_for(0, pc + 1);
        self.b().ins().jump(after, &[]);
    }

    /// Records the predicate lanes `p` of comparison `f` of `a` and `b` as a [`StepCmp`] when
    /// one side is uniform and the other a register whose lanes step upward without wrapping
    /// or crossing the sign bit in the compared width (`stride.rs`'s proof: lanes `x0 ..
    /// x0 + 3s` lie in one aligned block of `2^tz` values).
    fn note_step_cmp(&mut self, f: usize, a: (Src, VVal), b: (Src, VVal), p: Value) {
        let Some(N::Cmp { c, bits, signed }) = native::kind(f) else {
            return;
        };
        if !(2..=5).contains(&c) {
            return;
        }
        let cc = native::int_cc(c, signed);
        let (x, y, cc) = match (a, b) {
            ((Src::Reg(r), VVal::A(x0, _)), (_, VVal::U(y))) => ((r, x0), y, cc),
            ((_, VVal::U(y)), (Src::Reg(r), VVal::A(x0, _))) => ((r, x0), y, cc.swap_args()),
            _ => return,
        };
        let Some((s, tz)) = self.steps.get(x.0 as usize).copied().flatten() else {
            return;
        };
        let m = tz.min(bits as u32 - 1);
        if s <= 0 || (LANES as u64 - 1) * s as u64 >= 1 << m {
            return;
        }
        let last = self.b().ins().iadd_imm_s(x.1, (LANES as i64 - 1) * s);
        let narrow = |me: &mut Self, v: Value| {
            if bits == 32 {
                me.b().ins().ireduce(I32, v)
            } else {
                v
            }
        };
        let (first, last, y) = (narrow(self, x.1), narrow(self, last), narrow(self, y));
        self.step_cmps.insert(p, StepCmp { first, last, y, cc });
    }

    /// `(all, any)` lanes pass a guard on `gv` (negated with `neg`) by scalar compares of
    /// lanes 0 and 3, when `gv` is a [`StepCmp`]'s predicate: with increasing lanes, `<` and
    /// `<=` pass on a prefix of the group, `>` and `>=` on a suffix.
    fn step_guard(&mut self, gv: VVal, neg: bool) -> Option<(Value, Value)> {
        let VVal::V32(p, _) = gv else {
            return None;
        };
        let sc = self.step_cmps.get(&p).copied()?;
        let cc = if neg { sc.cc.complement() } else { sc.cc };
        let prefix = matches!(
            cc,
            IntCC::SignedLessThan
                | IntCC::SignedLessThanOrEqual
                | IntCC::UnsignedLessThan
                | IntCC::UnsignedLessThanOrEqual
        );
        let (for_all, for_any) = if prefix {
            (sc.last, sc.first)
        } else {
            (sc.first, sc.last)
        };
        let all = self.b().ins().icmp(cc, for_all, sc.y);
        let any = self.b().ins().icmp(cc, for_any, sc.y);
        Some((all, any))
    }

    /// The current group's first operand row (`run::COLL_WIDTH` words per thread).
    fn rows(&mut self) -> Value {
        let t0 = self.use_var(self.lw.t);
        let coll = self.lw.u.get(self.lw.b, off!(coll));
        let at = self.b().ins().imul_imm_s(t0, (run::COLL_WIDTH * 8) as i64);
        self.b().ins().iadd(coll, at)
    }

    // ---- arithmetic ----

    // ---- memory ----
}

/// What `cvta` adds: the space's window in the generic address space, or its negation.
fn cvta_window(to: bool, space: Space) -> u64 {
    let window = match space {
        Space::Shared => crate::ir::SHARED_WINDOW,
        Space::Local => crate::ir::LOCAL_WINDOW,
        Space::Param => crate::ir::PARAM_WINDOW,
        _ => 0,
    };
    if to { window.wrapping_neg() } else { window }
}

impl VVal {
    /// A 32-bit value widened to 64-bit lanes by its own extension.
    fn widen_to_64(self, v: &mut VLower<'_, '_, '_>) -> VVal {
        let (a, b) = v.u64x2(self);
        VVal::V64(a, b)
    }
}
