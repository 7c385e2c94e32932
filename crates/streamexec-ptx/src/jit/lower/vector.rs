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

use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, Block, ConstantData, Endianness, InstBuilder, JumpTableData, MemFlagsData, Value, types,
};
use cranelift_frontend::{FunctionBuilder, Variable};

use super::{I32, I64, Lower, Slots, fixed_flags, flags, mem_ty};
use crate::DYNAMIC_SHARED_BASE;
use crate::ir::{BarKind, BoolOp, Inst, Op, Program, Space, Src, Sreg, THREAD_PARAM_BASE, Ty};
use crate::jit::analysis::Analysis;
use crate::jit::native::{self, N};
use crate::jit::run::{self, EXITED, WAIT};
use crate::jit::vector::{Class, LANES, Shape, per_thread, sreg_varying};

const I32X4: ir::Type = types::I32X4;
const I64X2: ir::Type = types::I64X2;
const F32X4: ir::Type = types::F32X4;
const F64X2: ir::Type = types::F64X2;

/// Byte offset of a `Ctx` field.
macro_rules! off {
    ($f:ident) => {
        std::mem::offset_of!(run::Ctx, $f) as i32
    };
}

/// Where a register lives in the vector code.
#[derive(Clone, Copy)]
enum VReg {
    /// The same in every lane: one 64-bit slot.
    U(Variable),
    /// Lanes of 32-bit values whose slots extend them (with sign when `true`).
    V32(Variable, bool),
    /// Lanes of 64-bit slots, two per vector.
    V64(Variable, Variable),
}

/// A value in the vector code.
#[derive(Clone, Copy)]
enum VVal {
    U(Value),
    V32(Value, bool),
    V64(Value, Value),
    /// One 64-bit slot per lane (from per-lane code).
    Lanes([Value; LANES]),
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
    /// `[0, 1, 2, 3]`.
    iota: Value,
    /// 0/1 predicate lanes made from a lane mask, and that mask (a guard on a fresh
    /// comparison uses the mask directly).
    masks: HashMap<Value, Value>,
    fma: bool,
}

fn vflags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(Endianness::Little)
}

/// Emits the vector function of `prog` into `b`.
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    prog: &Program,
    an: &Analysis,
    shape: &Shape,
) -> Result<VectorOut, String> {
    let (mut lw, _, end64) = Lower::start(b, prog, an, Slots::default(), true);
    let regs = (0..prog.regs as usize)
        .map(|r| {
            let b = &mut *lw.b;
            if !shape.varying[r] {
                return VReg::U(b.declare_var(I64));
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
    let ntx = lw.u.fixed[&off!(ntid)];
    let nty = lw.u.fixed[&(off!(ntid) + 8)];
    let (t, tid, next, fault) = (lw.t, lw.tid, lw.next, lw.fault);
    let head = lw.b.create_block();
    let body = lw.b.create_block();
    let dispatch = lw.b.create_block();
    let done = lw.b.create_block();
    {
        let b = &mut *lw.b;
        b.ins().jump(head, &[]);
        b.switch_to_block(head);
        let tv = b.use_var(t);
        let last = b.ins().iadd_imm_s(tv, LANES as i64);
        let more = b.ins().icmp(IntCC::UnsignedLessThanOrEqual, last, end64);
        b.ins().brif(more, body, &[], done, &[]);

        b.switch_to_block(done);
        let ok = b.ins().iconst(I32, 0);
        b.ins().return_(&[ok]);

        b.switch_to_block(fault);
        let one = b.ins().iconst(I32, 1);
        b.ins().return_(&[one]);

        // The next group: `tid.x` steps by LANES, which divides `ntid.x`.
        b.switch_to_block(next);
        let tv = b.use_var(t);
        let t1 = b.ins().iadd_imm_s(tv, LANES as i64);
        b.def_var(t, t1);
        let (x, y, z) = (b.use_var(tid[0]), b.use_var(tid[1]), b.use_var(tid[2]));
        let x1 = b.ins().iadd_imm_s(x, LANES as i64);
        let wrap_x = b.ins().icmp(IntCC::Equal, x1, ntx);
        let zero = b.ins().iconst(I64, 0);
        let x2 = b.ins().select(wrap_x, zero, x1);
        let wx = b.ins().uextend(I64, wrap_x);
        let y1 = b.ins().iadd(y, wx);
        let wrap_y = b.ins().icmp(IntCC::Equal, y1, nty);
        let wrap_y = b.ins().band(wrap_y, wrap_x);
        let y2 = b.ins().select(wrap_y, zero, y1);
        let wy = b.ins().uextend(I64, wrap_y);
        let z1 = b.ins().iadd(z, wy);
        b.def_var(tid[0], x2);
        b.def_var(tid[1], y2);
        b.def_var(tid[2], z1);
        b.ins().jump(head, &[]);
    }
    lw.b.switch_to_block(body);
    // Without suspension points every group starts at the top (the driver marks the state
    // words exited, so the scalar code runs only what groups hand over).
    let stateless = an.points.is_empty();
    let check = if stateless {
        lw.b.ins().jump(dispatch, &[]);
        None
    } else {
        // A group runs when its lanes' state words agree.
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
        Some((s0, skip))
    };

    let mut v = VLower {
        lw: &mut lw,
        regs,
        entries: Vec::new(),
        entry_index: HashMap::new(),
        resumes: HashMap::new(),
        iota,
        masks: HashMap::new(),
        fma: cfg!(target_arch = "x86_64") && std::is_x86_feature_detected!("fma")
            || cfg!(target_arch = "aarch64"),
    };
    let start = v.lw.block_for(0, 0);
    while let Some((_, pc)) = v.lw.work.pop() {
        v.lower_block(pc)?;
    }
    let resumes = std::mem::take(&mut v.resumes);
    let entries = std::mem::take(&mut v.entries);
    lw.b.switch_to_block(dispatch);
    match check {
        None => {
            lw.b.ins().jump(start, &[]);
        }
        Some((s0, skip)) => {
            let max = resumes.keys().copied().max().unwrap_or(0);
            let targets: Vec<Block> = (0..=max)
                .map(|i| match i {
                    0 => start,
                    i => resumes.get(&i).copied().unwrap_or(skip),
                })
                .collect();
            let pool = &mut lw.b.func.dfg.value_lists;
            let calls: Vec<_> = targets
                .iter()
                .map(|blk| ir::BlockCall::new(*blk, [], pool))
                .collect();
            let def = ir::BlockCall::new(skip, [], pool);
            let jt = lw.b.create_jump_table(JumpTableData::new(def, &calls));
            lw.b.ins().br_table(s0, jt);
        }
    }
    lw.b.seal_all_blocks();
    Ok(VectorOut {
        entries,
        slots: std::mem::take(&mut lw.slots),
    })
}

impl Lower<'_, '_> {
    /// The address of the current thread's (group's first lane's) state word.
    fn state_ptr(&mut self) -> Value {
        let tv = self.b.use_var(self.t);
        let at = self.b.ins().ishl_imm_s(tv, 2);
        self.b.ins().iadd(self.u.state, at)
    }
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
                self.hand_over(pc.saturating_sub(1));
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

    /// Hands the group to the scalar code at `pc`: live registers stored per lane, each
    /// lane's state the entry's resume index.
    fn hand_over(&mut self, pc: u32) {
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
            self.store_lanes(r);
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

    // ---- values ----

    fn get(&mut self, r: u32) -> VVal {
        match self.regs[r as usize] {
            VReg::U(v) => VVal::U(self.lw.b.use_var(v)),
            VReg::V32(v, s) => VVal::V32(self.lw.b.use_var(v), s),
            VReg::V64(a, b) => {
                let (a, b) = (self.lw.b.use_var(a), self.lw.b.use_var(b));
                VVal::V64(a, b)
            }
        }
    }

    fn set(&mut self, r: u32, x: VVal) -> Result<(), String> {
        match self.regs[r as usize] {
            VReg::U(v) => match x {
                VVal::U(x) => self.lw.b.def_var(v, x),
                _ => return Err(format!("internal error: a varying value for uniform %{r}")),
            },
            VReg::V32(v, _) => {
                let x = self.i32x4(x);
                self.lw.b.def_var(v, x);
            }
            VReg::V64(a, b) => {
                let (x, y) = self.u64x2(x);
                self.lw.b.def_var(a, x);
                self.lw.b.def_var(b, y);
            }
        }
        Ok(())
    }

    /// A source operand; `None` for one the vector code does not compute (`%lanemask_*`).
    fn val(&mut self, s: Src) -> Option<VVal> {
        Some(match s {
            Src::Reg(r) => self.get(r),
            Src::Imm(v) => VVal::U(self.lw.imm(v)),
            Src::Sreg(Sreg::Tid(0)) => {
                let x = self.use_var(self.lw.tid[0]);
                VVal::V32(self.plus_iota(x), false)
            }
            Src::Sreg(Sreg::Laneid) => {
                let t = self.use_var(self.lw.t);
                let l = self.b().ins().band_imm_s(t, 31);
                VVal::V32(self.plus_iota(l), false)
            }
            Src::Sreg(s) if sreg_varying(s) => return None,
            Src::Sreg(s) => VVal::U(self.lw.sreg(s)),
        })
    }

    fn plus_iota(&mut self, x: Value) -> Value {
        let x = self.b().ins().ireduce(I32, x);
        let s = self.b().ins().splat(I32X4, x);
        let iota = self.iota;
        self.b().ins().iadd(s, iota)
    }

    /// The lanes' low 32 bits.
    fn i32x4(&mut self, v: VVal) -> Value {
        match v {
            VVal::U(x) => {
                let x = self.b().ins().ireduce(I32, x);
                self.b().ins().splat(I32X4, x)
            }
            VVal::V32(x, _) => x,
            VVal::V64(a, b) => {
                let a = self.b().ins().bitcast(I32X4, vflags(), a);
                let b = self.b().ins().bitcast(I32X4, vflags(), b);
                let mask: Vec<u8> =
                    [0u8, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27].to_vec();
                let imm = self.b().func.dfg.immediates.push(ConstantData::from(mask));
                let a8 = self.b().ins().bitcast(types::I8X16, vflags(), a);
                let b8 = self.b().ins().bitcast(types::I8X16, vflags(), b);
                let r = self.b().ins().shuffle(a8, b8, imm);
                self.b().ins().bitcast(I32X4, vflags(), r)
            }
            VVal::Lanes(l) => {
                let x0 = self.b().ins().ireduce(I32, l[0]);
                let mut v = self.b().ins().splat(I32X4, x0);
                for (j, x) in l.iter().enumerate().skip(1) {
                    let x = self.b().ins().ireduce(I32, *x);
                    v = self.b().ins().insertlane(v, x, j as u8);
                }
                v
            }
        }
    }

    /// The lanes' 64-bit slots: lanes 0, 1 and lanes 2, 3.
    fn u64x2(&mut self, v: VVal) -> (Value, Value) {
        match v {
            VVal::U(x) => {
                let s = self.b().ins().splat(I64X2, x);
                (s, s)
            }
            VVal::V32(x, signed) => {
                if signed {
                    (self.b().ins().swiden_low(x), self.b().ins().swiden_high(x))
                } else {
                    (self.b().ins().uwiden_low(x), self.b().ins().uwiden_high(x))
                }
            }
            VVal::V64(a, b) => (a, b),
            VVal::Lanes(l) => {
                let a = self.b().ins().splat(I64X2, l[0]);
                let a = self.b().ins().insertlane(a, l[1], 1);
                let b = self.b().ins().splat(I64X2, l[2]);
                let b = self.b().ins().insertlane(b, l[3], 1);
                (a, b)
            }
        }
    }

    /// Lane `j`'s 64-bit slot.
    fn lane(&mut self, v: VVal, j: usize) -> Value {
        match v {
            VVal::U(x) => x,
            VVal::V32(x, signed) => {
                let e = self.b().ins().extractlane(x, j as u8);
                if signed {
                    self.b().ins().sextend(I64, e)
                } else {
                    self.b().ins().uextend(I64, e)
                }
            }
            VVal::V64(a, b) => {
                let v = if j < 2 { a } else { b };
                self.b().ins().extractlane(v, (j % 2) as u8)
            }
            VVal::Lanes(l) => l[j],
        }
    }

    /// A lane mask (all ones where the lane's slot is non-zero), as `i32x4`, for
    /// predicates (whose slots are 0 or 1).
    fn pred_mask(&mut self, v: VVal, neg: bool) -> Value {
        let x = self.i32x4(v);
        if let Some(m) = self.masks.get(&x).copied() {
            return if neg { self.b().ins().bnot(m) } else { m };
        }
        let z = self.b().ins().iconst(I32, 0);
        let z = self.b().ins().splat(I32X4, z);
        let cc = if neg { IntCC::Equal } else { IntCC::NotEqual };
        self.b().ins().icmp(cc, x, z)
    }

    /// 0/1 predicate lanes from a lane mask.
    fn mask_pred(&mut self, m: Value) -> VVal {
        let one = self.b().ins().iconst(I32, 1);
        let one = self.b().ins().splat(I32X4, one);
        let p = self.b().ins().band(m, one);
        self.masks.insert(p, m);
        VVal::V32(p, false)
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
        let m = self.pred_mask(gv, neg);
        let all = self.b().ins().vall_true(m);
        let any = self.b().ins().vany_true(m);
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
                a,
                b,
                comb,
                hi,
            } => {
                let (Some(a), Some(b)) = (self.val(*a), self.val(*b)) else {
                    return self.over(pc);
                };
                let comb = match comb {
                    Some((op, s, neg)) => match self.val(*s) {
                        Some(v) => Some((*op, v, *neg)),
                        None => return self.over(pc),
                    },
                    None => None,
                };
                let (x, y) = self.setp(*f as usize, hi.map(|h| h as usize), a, b, comb);
                self.set(*p, x)?;
                if let Some(q) = q {
                    self.set(*q, y)?;
                }
            }
            Op::Cvta { to, space, d, a } => {
                let window = match space {
                    Space::Shared => crate::ir::SHARED_WINDOW,
                    Space::Local => crate::ir::LOCAL_WINDOW,
                    Space::Param => crate::ir::PARAM_WINDOW,
                    _ => 0,
                };
                let w = if *to { window.wrapping_neg() } else { window };
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
                self.suspend(pc, id, count);
                return Ok(true);
            }
            _ => return self.over(pc),
        }
        Ok(false)
    }

    /// `bar.sync` for the whole group: live registers and the barrier's operands stored per
    /// lane, as the scalar code stores them, and a group resume block.
    fn suspend(&mut self, pc: u32, id: Value, count: Value) {
        let k = self.lw.an.point_at[&pc];
        let live = self.lw.an.points[k].live.clone();
        let index = k as u32 + 1;
        for r in &live {
            self.store_lanes(*r);
        }
        let t0 = self.use_var(self.lw.t);
        let coll = self.lw.u.coll;
        for j in 0..LANES {
            let row = self.b().ins().iadd_imm_s(t0, j as i64);
            let row = self.b().ins().imul_imm_s(row, (run::COLL_WIDTH * 8) as i64);
            let p = self.b().ins().iadd(coll, row);
            self.b().ins().store(flags(), id, p, 0);
            self.b().ins().store(flags(), count, p, 8);
        }
        self.set_states(index | WAIT);
        let plain = self.b().ins().bor(id, count);
        self.lw.count_wait(LANES as i64, Some(plain));
        let next = self.lw.next;
        self.b().ins().jump(next, &[]);
        // The group resume block: uniform registers must still agree (lanes may have run on
        // the scalar code since), else the lanes resume there.
        let rb = self.b().create_block();
        self.resumes.insert(index, rb);
        self.b().switch_to_block(rb);
        let f = vflags().with_notrap();
        let mut agree: Option<Value> = None;
        for r in &live {
            if let VReg::U(_) = self.regs[*r as usize] {
                let p = self.lw.spill_at(*r);
                let a = self.b().ins().load(I64X2, f, p, 0);
                let b = self.b().ins().load(I64X2, f, p, 16);
                let x0 = self.b().ins().extractlane(a, 0);
                let s = self.b().ins().splat(I64X2, x0);
                let ea = self.b().ins().icmp(IntCC::Equal, a, s);
                let eb = self.b().ins().icmp(IntCC::Equal, b, s);
                let e = self.b().ins().band(ea, eb);
                agree = Some(match agree {
                    Some(x) => self.b().ins().band(x, e),
                    None => e,
                });
            }
        }
        if let Some(e) = agree {
            let ok = self.b().ins().vall_true(e);
            let go = self.b().create_block();
            let hand = self.b().create_block();
            self.b().ins().brif(ok, go, &[], hand, &[]);
            self.b().switch_to_block(hand);
            self.lw.mark_handed();
            let next = self.lw.next;
            self.b().ins().jump(next, &[]);
            self.b().switch_to_block(go);
        }
        for r in &live {
            let p = self.lw.spill_at(*r);
            let v = match self.regs[*r as usize] {
                VReg::U(_) => VVal::U(self.b().ins().load(I64, flags(), p, 0)),
                _ => {
                    let a = self.b().ins().load(I64X2, f, p, 0);
                    let b = self.b().ins().load(I64X2, f, p, 16);
                    VVal::V64(a, b)
                }
            };
            self.set(*r, v)
                .expect("a uniform register gets a uniform value");
        }
        let after = self.lw.block_for(0, pc + 1);
        self.b().ins().jump(after, &[]);
    }

    // ---- arithmetic ----

    /// `f` over the lanes: one scalar computation when every operand is uniform, vector
    /// code where there is a vector form, else the scalar code per lane.
    fn apply(&mut self, f: usize, args: &[VVal]) -> VVal {
        if args.iter().all(|a| matches!(a, VVal::U(_))) {
            let s: Vec<Value> = args
                .iter()
                .map(|a| match a {
                    VVal::U(x) => *x,
                    _ => unreachable!(),
                })
                .collect();
            return VVal::U(self.lw.apply(f, &s));
        }
        if let Some(n) = native::kind(f)
            && let Some(v) = self.vector_op(n, args)
        {
            return v;
        }
        let mut out = [None; LANES];
        for (j, o) in out.iter_mut().enumerate() {
            let s: Vec<Value> = args.iter().map(|a| self.lane(*a, j)).collect();
            *o = Some(self.lw.apply(f, &s));
        }
        VVal::Lanes(out.map(|v| v.expect("every lane computed")))
    }

    fn f32x4(&mut self, v: VVal) -> Value {
        let x = self.i32x4(v);
        self.b().ins().bitcast(F32X4, vflags(), x)
    }

    fn f64x2(&mut self, v: VVal) -> (Value, Value) {
        let (a, b) = self.u64x2(v);
        (
            self.b().ins().bitcast(F64X2, vflags(), a),
            self.b().ins().bitcast(F64X2, vflags(), b),
        )
    }

    /// The vector form of a recognised lane function, if it has one here.
    fn vector_op(&mut self, n: N, args: &[VVal]) -> Option<VVal> {
        Some(match n {
            N::Mov => args[0],
            N::Bin {
                k,
                bits: 32,
                signed,
            } => {
                let (x, y) = (self.i32x4(args[0]), self.i32x4(args[1]));
                let b = self.b();
                let r = match (k, signed) {
                    (0, _) => b.ins().iadd(x, y),
                    (1, _) => b.ins().isub(x, y),
                    (2, _) => b.ins().imul(x, y),
                    (6, true) => b.ins().smin(x, y),
                    (6, false) => b.ins().umin(x, y),
                    (7, true) => b.ins().smax(x, y),
                    (7, false) => b.ins().umax(x, y),
                    (8, _) => b.ins().band(x, y),
                    (9, _) => b.ins().bor(x, y),
                    _ => b.ins().bxor(x, y),
                };
                VVal::V32(r, signed)
            }
            N::Bin { k, bits: 64, .. } if matches!(k, 0 | 1 | 8 | 9 | 10) => {
                let (x0, x1) = self.u64x2(args[0]);
                let (y0, y1) = self.u64x2(args[1]);
                let op = |b: &mut FunctionBuilder<'_>, x, y| match k {
                    0 => b.ins().iadd(x, y),
                    1 => b.ins().isub(x, y),
                    8 => b.ins().band(x, y),
                    9 => b.ins().bor(x, y),
                    _ => b.ins().bxor(x, y),
                };
                let r0 = op(self.lw.b, x0, y0);
                let r1 = op(self.lw.b, x1, y1);
                VVal::V64(r0, r1)
            }
            N::MadLo { bits: 32, signed } => {
                let (x, y, z) = (
                    self.i32x4(args[0]),
                    self.i32x4(args[1]),
                    self.i32x4(args[2]),
                );
                let p = self.b().ins().imul(x, y);
                VVal::V32(self.b().ins().iadd(p, z), signed)
            }
            N::Cmp {
                c,
                bits: 32,
                signed,
            } => {
                let (x, y) = (self.i32x4(args[0]), self.i32x4(args[1]));
                let m = self.b().ins().icmp(int_cc(c, signed), x, y);
                self.mask_pred(m)
            }
            N::Shift {
                left,
                bits: 32,
                signed,
            } => {
                // A shift by a uniform amount (PTX clamps amounts past the width).
                let VVal::U(amt) = args[1] else {
                    return None;
                };
                let x = self.i32x4(args[0]);
                let b = self.b();
                let amt = b.ins().band_imm_s(amt, 0xFFFF_FFFF);
                let big = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, amt, 32);
                let a32 = b.ins().ireduce(I32, amt);
                let r = if left {
                    b.ins().ishl(x, a32)
                } else if signed {
                    b.ins().sshr(x, a32)
                } else {
                    b.ins().ushr(x, a32)
                };
                let fill = if signed && !left {
                    b.ins().sshr_imm_s(x, 31)
                } else {
                    let z = b.ins().iconst(I32, 0);
                    b.ins().splat(I32X4, z)
                };
                VVal::V32(b.ins().select(big, fill, r), signed)
            }
            N::MulWide { bits: 32, signed } | N::MadWide { bits: 32, signed } => {
                let x = self.i32x4(args[0]);
                let widen = |b: &mut FunctionBuilder<'_>, v: Value| {
                    if signed {
                        (b.ins().swiden_low(v), b.ins().swiden_high(v))
                    } else {
                        (b.ins().uwiden_low(v), b.ins().uwiden_high(v))
                    }
                };
                let (x0, x1) = widen(self.lw.b, x);
                // By a constant power of two (`mul.wide.u32 %rd, %r, 4`): a shift, not SSE's
                // long 64-bit multiply.
                let (r0, r1) = match self.constant(args[1]) {
                    Some(c) if (c as u32).is_power_of_two() && (c as u32) < 1 << 31 => {
                        let k = (c as u32).trailing_zeros() as i64;
                        (
                            self.b().ins().ishl_imm_s(x0, k),
                            self.b().ins().ishl_imm_s(x1, k),
                        )
                    }
                    _ => {
                        let y = self.i32x4(args[1]);
                        let (y0, y1) = widen(self.lw.b, y);
                        (self.b().ins().imul(x0, y0), self.b().ins().imul(x1, y1))
                    }
                };
                if let N::MadWide { .. } = n {
                    let (z0, z1) = self.u64x2(args[2]);
                    VVal::V64(self.b().ins().iadd(r0, z0), self.b().ins().iadd(r1, z1))
                } else {
                    VVal::V64(r0, r1)
                }
            }
            N::CvtII {
                sbits,
                ssigned,
                dbits,
                dsigned,
            } => match (sbits, dbits) {
                (32, 32) => VVal::V32(self.i32x4(args[0]), dsigned),
                (32, 64) => {
                    let x = self.i32x4(args[0]);
                    VVal::V32(x, ssigned).widen_to_64(self)
                }
                (64, 32) => VVal::V32(self.i32x4(args[0]), dsigned),
                (64, 64) => {
                    let (a, b) = self.u64x2(args[0]);
                    VVal::V64(a, b)
                }
                _ => return None,
            },
            N::FArith { op, f64: false } => {
                let (x, y) = (self.f32x4(args[0]), self.f32x4(args[1]));
                let b = self.b();
                let r = match op {
                    0 => b.ins().fadd(x, y),
                    1 => {
                        let ny = b.ins().fneg(y);
                        b.ins().fadd(x, ny)
                    }
                    2 => b.ins().fmul(x, y),
                    _ => b.ins().fdiv(x, y),
                };
                VVal::V32(b.ins().bitcast(I32X4, vflags(), r), false)
            }
            N::FArith { op, f64: true } => {
                let (x0, x1) = self.f64x2(args[0]);
                let (y0, y1) = self.f64x2(args[1]);
                let op = |b: &mut FunctionBuilder<'_>, x, y| {
                    let r = match op {
                        0 => b.ins().fadd(x, y),
                        1 => {
                            let ny = b.ins().fneg(y);
                            b.ins().fadd(x, ny)
                        }
                        2 => b.ins().fmul(x, y),
                        _ => b.ins().fdiv(x, y),
                    };
                    b.ins().bitcast(I64X2, vflags(), r)
                };
                let r0 = op(self.lw.b, x0, y0);
                let r1 = op(self.lw.b, x1, y1);
                VVal::V64(r0, r1)
            }
            N::Fma { f64: false } if self.fma => {
                let (x, y, z) = (
                    self.f32x4(args[0]),
                    self.f32x4(args[1]),
                    self.f32x4(args[2]),
                );
                let r = self.b().ins().fma(x, y, z);
                VVal::V32(self.b().ins().bitcast(I32X4, vflags(), r), false)
            }
            N::Sqrt { f64: false } => {
                let x = self.f32x4(args[0]);
                let r = self.b().ins().sqrt(x);
                VVal::V32(self.b().ins().bitcast(I32X4, vflags(), r), false)
            }
            N::Rcp { f64: false } => {
                let x = self.f32x4(args[0]);
                let one = self.b().ins().f32const(1.0);
                let one = self.b().ins().splat(F32X4, one);
                let r = self.b().ins().fdiv(one, x);
                VVal::V32(self.b().ins().bitcast(I32X4, vflags(), r), false)
            }
            N::CvtIF { signed, f64: false } => {
                let x = self.i32x4(args[0]);
                let r = if signed {
                    self.b().ins().fcvt_from_sint(F32X4, x)
                } else {
                    self.b().ins().fcvt_from_uint(F32X4, x)
                };
                VVal::V32(self.b().ins().bitcast(I32X4, vflags(), r), false)
            }
            N::FCmp { c, f64: false } if matches!(c, 0 | 2 | 3 | 4 | 5 | 7 | 12 | 13) => {
                let (x, y) = (self.f32x4(args[0]), self.f32x4(args[1]));
                let cc = match c {
                    0 => FloatCC::Equal,
                    2 => FloatCC::LessThan,
                    3 => FloatCC::LessThanOrEqual,
                    4 => FloatCC::GreaterThan,
                    5 => FloatCC::GreaterThanOrEqual,
                    7 => FloatCC::NotEqual,
                    12 => FloatCC::Ordered,
                    _ => FloatCC::Unordered,
                };
                let m = self.b().ins().fcmp(cc, x, y);
                let m = self.b().ins().bitcast(I32X4, vflags(), m);
                self.mask_pred(m)
            }
            N::Selp => {
                let m = self.pred_mask(args[2], false);
                let (a, b) = (args[0], args[1]);
                let narrow = matches!(a, VVal::V32(..)) || matches!(b, VVal::V32(..));
                if narrow && self.same_ext(a, b) {
                    // Both 32-bit shaped alike (a uniform one a constant that fits).
                    let signed = matches!(a, VVal::V32(_, true)) || matches!(b, VVal::V32(_, true));
                    let (x, y) = (self.i32x4(a), self.i32x4(b));
                    VVal::V32(self.b().ins().bitselect(m, x, y), signed)
                } else {
                    let (x0, x1) = self.u64x2(a);
                    let (y0, y1) = self.u64x2(b);
                    let m0 = self.b().ins().swiden_low(m);
                    let m1 = self.b().ins().swiden_high(m);
                    VVal::V64(
                        self.b().ins().bitselect(m0, x0, y0),
                        self.b().ins().bitselect(m1, x1, y1),
                    )
                }
            }
            N::PBin { k } => {
                let (x, y) = (
                    self.pred_mask(args[0], false),
                    self.pred_mask(args[1], false),
                );
                let b = self.b();
                let m = match k {
                    0 => b.ins().band(x, y),
                    1 => b.ins().bor(x, y),
                    _ => b.ins().bxor(x, y),
                };
                self.mask_pred(m)
            }
            _ => return None,
        })
    }

    /// Whether two values' slots extend their low 32 bits the same way (so a lane-wise
    /// choice between them in `i32x4` form is exact); uniform values must fit both.
    fn same_ext(&mut self, a: VVal, b: VVal) -> bool {
        let ext = |v: VVal| match v {
            VVal::V32(_, s) => Some(s),
            _ => None,
        };
        match (ext(a), ext(b)) {
            (Some(x), Some(y)) if x != y => false,
            (Some(s), None) | (None, Some(s)) => {
                let u = if ext(a).is_none() { a } else { b };
                self.uniform_fits(u, s)
            }
            _ => true,
        }
    }

    /// The value of a uniform compile-time constant.
    fn constant(&mut self, v: VVal) -> Option<u64> {
        let VVal::U(x) = v else { return None };
        let inst = self.lw.b.func.dfg.value_def(x).inst()?;
        match self.lw.b.func.dfg.insts[inst] {
            ir::InstructionData::UnaryImm {
                opcode: ir::Opcode::Iconst,
                imm,
            } => Some(imm.bits() as u64),
            _ => None,
        }
    }

    /// Whether uniform `v` is a compile-time constant whose slot is its low 32 bits
    /// extended as `signed` says.
    fn uniform_fits(&mut self, v: VVal, signed: bool) -> bool {
        let Some(c) = self.constant(v) else {
            return false;
        };
        match Class::of_imm(c) {
            Class::Small => true,
            Class::Z32 => !signed,
            Class::S32 => signed,
            _ => false,
        }
    }

    /// `setp` over the lanes.
    fn setp(
        &mut self,
        f: usize,
        hi: Option<usize>,
        a: VVal,
        b: VVal,
        comb: Option<(BoolOp, VVal, bool)>,
    ) -> (VVal, VVal) {
        let all_u = matches!((a, b), (VVal::U(_), VVal::U(_)))
            && comb.is_none_or(|(_, s, _)| matches!(s, VVal::U(_)));
        if all_u {
            let (VVal::U(a), VVal::U(b)) = (a, b) else {
                unreachable!()
            };
            let comb = comb.map(|(op, s, neg)| match s {
                VVal::U(s) => (op, s, neg),
                _ => unreachable!(),
            });
            let (x, y) = self.lw.setp(f, hi, a, b, comb);
            return (VVal::U(x), VVal::U(y));
        }
        if hi.is_none()
            && let Some(VVal::V32(r, _)) = native::kind(f).and_then(|n| self.vector_op(n, &[a, b]))
        {
            // `r` is 0/1 per lane.
            let c = self.pred_mask(VVal::V32(r, false), false);
            let nc = self.b().ins().bnot(c);
            let (c, nc) = match comb {
                None => (c, nc),
                Some((op, s, neg)) => {
                    let pv = self.pred_mask(s, neg);
                    let b = self.b();
                    let f = |b: &mut FunctionBuilder<'_>, v| match op {
                        BoolOp::And => b.ins().band(v, pv),
                        BoolOp::Or => b.ins().bor(v, pv),
                        BoolOp::Xor => b.ins().bxor(v, pv),
                    };
                    (f(b, c), f(b, nc))
                }
            };
            return (self.mask_pred(c), self.mask_pred(nc));
        }
        let (mut xs, mut ys) = ([None; LANES], [None; LANES]);
        for j in 0..LANES {
            let (aj, bj) = (self.lane(a, j), self.lane(b, j));
            let cj = comb.map(|(op, s, neg)| (op, self.lane(s, j), neg));
            let (x, y) = self.lw.setp(f, hi, aj, bj, cj);
            xs[j] = Some(x);
            ys[j] = Some(y);
        }
        let done = |v: [Option<Value>; LANES]| VVal::Lanes(v.map(|x| x.expect("lane")));
        (done(xs), done(ys))
    }

    // ---- memory ----

    /// The lanes' addresses `[base + offset]` as two `i64x2`.
    fn addresses(&mut self, base: VVal, offset: i64) -> (Value, Value) {
        let (a, b) = self.u64x2(base);
        if offset == 0 {
            return (a, b);
        }
        let o = self.lw.imm(offset as u64);
        let o = self.b().ins().splat(I64X2, o);
        (self.b().ins().iadd(a, o), self.b().ins().iadd(b, o))
    }

    /// Whether lane `j`'s address is the first lane's plus `j * size`: `(first, test)`.
    fn consecutive(&mut self, (a, b): (Value, Value), size: u64) -> (Value, Value) {
        let a0 = self.b().ins().extractlane(a, 0);
        let s = self.b().ins().splat(I64X2, a0);
        let steps = |v: [u64; 2], b: &mut FunctionBuilder<'_>| {
            let c = b.func.dfg.constants.insert(ConstantData::from(
                v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
            ));
            b.ins().vconst(I64X2, c)
        };
        let s0 = steps([0, size], self.lw.b);
        let s1 = steps([2 * size, 3 * size], self.lw.b);
        let e0 = self.b().ins().iadd(s, s0);
        let e1 = self.b().ins().iadd(s, s1);
        let c0 = self.b().ins().icmp(IntCC::Equal, a, e0);
        let c1 = self.b().ins().icmp(IntCC::Equal, b, e1);
        let c = self.b().ins().band(c0, c1);
        (a0, self.b().ins().vall_true(c))
    }

    /// The host address of `total` bytes at `a` when an inline check covers them (aligned
    /// to `size`; one cached device range, or the block's shared memory): jumps to the
    /// returned block with it, otherwise to `miss`.
    fn range(&mut self, space: Space, a: Value, total: u64, size: u64, miss: Block) -> Block {
        let hit = self.b().create_block();
        self.b().append_block_param(hit, I64);
        let misaligned = self.b().ins().band_imm_s(a, (size - 1) as i64);
        let go = self.b().create_block();
        self.b().ins().brif(misaligned, miss, &[], go, &[]);
        self.b().switch_to_block(go);
        match space {
            Space::Global => {
                for way in 0..run::WAYS {
                    let o = off!(cache) + (way * 24) as i32;
                    let ctx = self.lw.u.ctx;
                    let b = self.b();
                    let lo = b.ins().load(I64, fixed_flags(), ctx, o);
                    let hi = b.ins().load(I64, fixed_flags(), ctx, o + 8);
                    let c1 = b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, a, lo);
                    let c2 = b.ins().icmp(IntCC::UnsignedLessThan, a, hi);
                    let room = b.ins().isub(hi, a);
                    let c3 =
                        b.ins()
                            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, room, total as i64);
                    let c = b.ins().band(c1, c2);
                    let c = b.ins().band(c, c3);
                    let yes = b.create_block();
                    let no = b.create_block();
                    b.ins().brif(c, yes, &[], no, &[]);
                    b.switch_to_block(yes);
                    let host = b.ins().load(I64, fixed_flags(), ctx, o + 16);
                    let off = b.ins().isub(a, lo);
                    let p = b.ins().iadd(host, off);
                    b.ins().jump(hit, &[p.into()]);
                    b.switch_to_block(no);
                }
                self.b().ins().jump(miss, &[]);
            }
            _ => {
                let st = self.lw.prog.static_shared_bytes as u64;
                let shared = self.lw.u.shared;
                let len = self.lw.u.fixed[&off!(dynamic_len)];
                let dyn_at = self.lw.u.fixed[&off!(dynamic_at)];
                let b = self.b();
                let dynamic = b.create_block();
                if total <= st {
                    let c =
                        b.ins()
                            .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, a, (st - total) as i64);
                    let yes = b.create_block();
                    b.ins().brif(c, yes, &[], dynamic, &[]);
                    b.switch_to_block(yes);
                    let p = b.ins().iadd(shared, a);
                    b.ins().jump(hit, &[p.into()]);
                } else {
                    b.ins().jump(dynamic, &[]);
                }
                b.switch_to_block(dynamic);
                let o = b
                    .ins()
                    .iadd_imm_s(a, (DYNAMIC_SHARED_BASE as i64).wrapping_neg());
                let c1 = b.ins().icmp(IntCC::UnsignedLessThan, o, len);
                let room = b.ins().isub(len, o);
                let c2 = b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, room, total as i64);
                let c = b.ins().band(c1, c2);
                let yes = b.create_block();
                b.ins().brif(c, yes, &[], miss, &[]);
                b.switch_to_block(yes);
                let p = b.ins().iadd(shared, dyn_at);
                let p = b.ins().iadd(p, o);
                b.ins().jump(hit, &[p.into()]);
            }
        }
        hit
    }

    /// The host pointers of the lanes' accesses at `addrs` (lane order, the scalar code's
    /// checks and faults, through `run::group_access`): four values, and the status (non-zero after
    /// a fault at the lane whose pointer is null).
    fn lane_pointers(
        &mut self,
        space: Space,
        (a, b): (Value, Value),
        total: u64,
        write: bool,
        pc: u32,
    ) -> ([Value; LANES], Value) {
        let slot = |me: &mut Self| {
            me.b().create_sized_stack_slot(ir::StackSlotData::new(
                ir::StackSlotKind::ExplicitSlot,
                (LANES * 8) as u32,
                4,
            ))
        };
        let (sa, so) = (slot(self), slot(self));
        let pa = self.b().ins().stack_addr(I64, sa, 0);
        let po = self.b().ins().stack_addr(I64, so, 0);
        let f = vflags().with_notrap();
        self.b().ins().store(f, a, pa, 0);
        self.b().ins().store(f, b, pa, 16);
        let ctx = self.lw.u.ctx;
        let sp = self.b().ins().iconst(I32, run::space_code(space) as i64);
        let tot = self.lw.imm(total);
        let w = self.b().ins().iconst(I32, write as i64);
        let t0 = self.use_var(self.lw.t);
        let p = self.b().ins().iconst(I32, pc as i64);
        let fnp = self.lw.imm(run::group_access as *const () as u64);
        let sig = self.lw.sigs.lanes;
        let call = self
            .b()
            .ins()
            .call_indirect(sig, fnp, &[ctx, sp, pa, tot, w, t0, p, po]);
        let status = self.b().inst_results(call)[0];
        let ptrs = std::array::from_fn(|j| self.lw.b.ins().load(I64, flags(), po, (j * 8) as i32));
        (ptrs, status)
    }

    fn lower_ld(
        &mut self,
        pc: u32,
        space: Space,
        ty: Ty,
        n: usize,
        d: &[u32],
        addr: &crate::ir::Addr,
    ) -> Result<bool, String> {
        let size = ty.bytes();
        let total = size as u64 * n as u64;
        if space == Space::Param && addr.base.is_none() && (addr.offset as u64) < THREAD_PARAM_BASE
        {
            // Kernel parameters: uniform.
            let at = addr.offset as u64;
            if at.saturating_add(total) > self.lw.prog.param_bytes as u64 {
                return self.over(pc);
            }
            let params = self.lw.u.params;
            let ptr = self.b().ins().iadd_imm_s(params, at as i64);
            for (k, dk) in d.iter().enumerate().take(n) {
                if *dk != u32::MAX {
                    let off = k as u32 * size;
                    let v = match self.lw.param(at as u32 + off, ty) {
                        Some(v) => v,
                        None => self.lw.load(ty, ptr, off as i32),
                    };
                    self.set(*dk, VVal::U(v))?;
                }
            }
            return Ok(false);
        }
        let base = match addr.base {
            Some(r) => self.get(r),
            None => VVal::U(self.lw.imm(0)),
        };
        if let (VVal::U(bv), false) = (base, per_thread(space, addr)) {
            let a = self.b().ins().iadd_imm_s(bv, addr.offset);
            let t = self.use_var(self.lw.t);
            let ptr = self.lw.access_at(space, a, total, false, pc, t);
            for (k, dk) in d.iter().enumerate().take(n) {
                if *dk != u32::MAX {
                    let v = self.lw.load(ty, ptr, (k as u32 * size) as i32);
                    self.set(*dk, VVal::U(v))?;
                }
            }
            return Ok(false);
        }
        let addrs = self.addresses(base, addr.offset);
        let per_lane = |me: &mut Self| -> Vec<VVal> {
            // Every lane's pointer first (a fault leaves), then the loads.
            let (ptrs, status) = me.lane_pointers(space, addrs, total, false, pc);
            let ok = me.b().create_block();
            let fault = me.lw.fault;
            me.b().ins().brif(status, fault, &[], ok, &[]);
            me.b().switch_to_block(ok);
            (0..n)
                .map(|k| {
                    VVal::Lanes(std::array::from_fn(|j| {
                        me.lw.load(ty, ptrs[j], (k as u32 * size) as i32)
                    }))
                })
                .collect()
        };
        let vector = n == 1
            && matches!(space, Space::Global | Space::Shared)
            && matches!(
                ty,
                Ty::U32 | Ty::S32 | Ty::F32 | Ty::U64 | Ty::S64 | Ty::F64
            );
        if !vector {
            for (dk, v) in d.iter().zip(per_lane(self)) {
                if *dk != u32::MAX {
                    self.set(*dk, v)?;
                }
            }
            return Ok(false);
        }
        // Consecutive elements in one known range: one vector load; else per lane.
        let merge = self.b().create_block();
        let lanes_blk = self.b().create_block();
        let (a0, ok) = self.consecutive(addrs, size as u64);
        let try_blk = self.b().create_block();
        self.b().ins().brif(ok, try_blk, &[], lanes_blk, &[]);
        self.b().switch_to_block(try_blk);
        let hit = self.range(
            space,
            a0,
            size as u64 * LANES as u64,
            size as u64,
            lanes_blk,
        );
        self.b().switch_to_block(hit);
        let p = self.b().block_params(hit)[0];
        let f = vflags().with_notrap();
        let signed = ty == Ty::S32;
        if size == 4 {
            let v = self.b().ins().load(I32X4, f, p, 0);
            self.b().ins().jump(merge, &[v.into()]);
            self.b().switch_to_block(lanes_blk);
            let l = per_lane(self)[0];
            let v = self.i32x4(l);
            self.b().ins().jump(merge, &[v.into()]);
            let v = self.b().append_block_param(merge, I32X4);
            self.b().switch_to_block(merge);
            if d[0] != u32::MAX {
                self.set(d[0], VVal::V32(v, signed))?;
            }
        } else {
            let x = self.b().ins().load(I64X2, f, p, 0);
            let y = self.b().ins().load(I64X2, f, p, 16);
            self.b().ins().jump(merge, &[x.into(), y.into()]);
            self.b().switch_to_block(lanes_blk);
            let l = per_lane(self)[0];
            let (x, y) = self.u64x2(l);
            self.b().ins().jump(merge, &[x.into(), y.into()]);
            let x = self.b().append_block_param(merge, I64X2);
            let y = self.b().append_block_param(merge, I64X2);
            self.b().switch_to_block(merge);
            if d[0] != u32::MAX {
                self.set(d[0], VVal::V64(x, y))?;
            }
        }
        Ok(false)
    }

    fn lower_st(
        &mut self,
        pc: u32,
        space: Space,
        ty: Ty,
        n: usize,
        s: &[Src],
        addr: &crate::ir::Addr,
    ) -> Result<bool, String> {
        let size = ty.bytes();
        let total = size as u64 * n as u64;
        let mut vals = Vec::new();
        for x in s.iter().take(n) {
            match *x {
                Src::Sreg(_) => vals.push(VVal::U(self.lw.imm(0))),
                x => match self.val(x) {
                    Some(v) => vals.push(v),
                    None => return self.over(pc),
                },
            }
        }
        let base = match addr.base {
            Some(r) => self.get(r),
            None => VVal::U(self.lw.imm(0)),
        };
        let store_lane = |me: &mut Self, ptr: Value, j: usize, vals: &[VVal]| {
            for (k, v) in vals.iter().enumerate() {
                let x = me.lane(*v, j);
                let x = if size == 8 {
                    x
                } else {
                    me.b().ins().ireduce(mem_ty(size), x)
                };
                me.b()
                    .ins()
                    .store(flags(), x, ptr, (k as u32 * size) as i32);
            }
        };
        if let (VVal::U(bv), false) = (base, per_thread(space, addr)) {
            // Every lane stores to the same place, in lane order: the last lane's value stays.
            let a = self.b().ins().iadd_imm_s(bv, addr.offset);
            let t = self.use_var(self.lw.t);
            let ptr = self.lw.access_at(space, a, total, true, pc, t);
            store_lane(self, ptr, LANES - 1, &vals);
            return Ok(false);
        }
        let addrs = self.addresses(base, addr.offset);
        let vector = n == 1
            && matches!(space, Space::Global | Space::Shared)
            && matches!(
                ty,
                Ty::U32 | Ty::S32 | Ty::F32 | Ty::U64 | Ty::S64 | Ty::F64
            );
        let merge = self.b().create_block();
        let lanes_blk = self.b().create_block();
        if vector {
            let (a0, ok) = self.consecutive(addrs, size as u64);
            let try_blk = self.b().create_block();
            self.b().ins().brif(ok, try_blk, &[], lanes_blk, &[]);
            self.b().switch_to_block(try_blk);
            let hit = self.range(
                space,
                a0,
                size as u64 * LANES as u64,
                size as u64,
                lanes_blk,
            );
            self.b().switch_to_block(hit);
            let p = self.b().block_params(hit)[0];
            let f = vflags().with_notrap();
            if size == 4 {
                let v = self.i32x4(vals[0]);
                self.b().ins().store(f, v, p, 0);
            } else {
                let (x, y) = self.u64x2(vals[0]);
                self.b().ins().store(f, x, p, 0);
                self.b().ins().store(f, y, p, 16);
            }
            self.b().ins().jump(merge, &[]);
        } else {
            self.b().ins().jump(lanes_blk, &[]);
        }
        self.b().switch_to_block(lanes_blk);
        // In lane order: the lanes before a faulting one store, as on the scalar code.
        let (ptrs, _) = self.lane_pointers(space, addrs, total, true, pc);
        for (j, ptr) in ptrs.into_iter().enumerate() {
            let go = self.b().create_block();
            let fault = self.lw.fault;
            self.b().ins().brif(ptr, go, &[], fault, &[]);
            self.b().switch_to_block(go);
            store_lane(self, ptr, j, &vals);
        }
        self.b().ins().jump(merge, &[]);
        self.b().switch_to_block(merge);
        Ok(false)
    }
}

impl VVal {
    /// A 32-bit value widened to 64-bit lanes by its own extension.
    fn widen_to_64(self, v: &mut VLower<'_, '_, '_>) -> VVal {
        let (a, b) = v.u64x2(self);
        VVal::V64(a, b)
    }
}

fn int_cc(c: u8, signed: bool) -> IntCC {
    match (c, signed) {
        (0, _) => IntCC::Equal,
        (1, _) => IntCC::NotEqual,
        (2, true) => IntCC::SignedLessThan,
        (3, true) => IntCC::SignedLessThanOrEqual,
        (4, true) => IntCC::SignedGreaterThan,
        (_, true) => IntCC::SignedGreaterThanOrEqual,
        (2, false) => IntCC::UnsignedLessThan,
        (3, false) => IntCC::UnsignedLessThanOrEqual,
        (4, false) => IntCC::UnsignedGreaterThan,
        _ => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// `lop3.b32` on `i32x4` lanes: the sum of the minterms the table selects.
fn lop3(b: &mut FunctionBuilder<'_>, lut: u8, a: Value, x: Value, c: Value) -> Value {
    let (na, nx, nc) = (b.ins().bnot(a), b.ins().bnot(x), b.ins().bnot(c));
    let z = b.ins().iconst(I32, 0);
    let mut acc = b.ins().splat(I32X4, z);
    for idx in 0..8u8 {
        if lut >> idx & 1 == 0 {
            continue;
        }
        let p = if idx & 4 != 0 { a } else { na };
        let q = if idx & 2 != 0 { x } else { nx };
        let r = if idx & 1 != 0 { c } else { nc };
        let t = b.ins().band(p, q);
        let t = b.ins().band(t, r);
        acc = b.ins().bor(acc, t);
    }
    acc
}
