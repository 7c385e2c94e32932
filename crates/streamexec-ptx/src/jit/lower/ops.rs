//! One instruction of the scalar code: ALU operations (native code or a call of the lane
//! function), loads and stores, control flow with `.func` calls inlined, suspensions.

use super::*;

impl<'b> Lower<'_, 'b> {
    pub(super) fn lower_op(&mut self, inst: usize, pc: u32, i: &Inst) -> Result<bool, String> {
        match &i.op {
            Op::Un { f, d, a } => {
                let a = self.val(*a);
                let r = self.apply(*f as usize, &[a]);
                self.set(*d, r);
            }
            Op::Bin { f, d, a, b } => {
                let (a, b) = (self.val(*a), self.val(*b));
                let r = self.apply(*f as usize, &[a, b]);
                self.set(*d, r);
            }
            Op::Tern { f, d, a, b, c } => {
                let (a, b, c) = (self.val(*a), self.val(*b), self.val(*c));
                let r = self.apply(*f as usize, &[a, b, c]);
                self.set(*d, r);
            }
            Op::Bfi {
                wide,
                d,
                a,
                b,
                c,
                e,
            } => {
                let w = self.imm(*wide as u64);
                let (a, b, c, e) = (self.val(*a), self.val(*b), self.val(*c), self.val(*e));
                let f = self.imm(run::bfi as *const () as u64);
                let call = self
                    .b
                    .ins()
                    .call_indirect(self.sigs.bfi, f, &[w, a, b, c, e]);
                let r = self.b.inst_results(call)[0];
                self.set(*d, r);
            }
            Op::Lop3 { lut, d, a, b, c } => {
                let (a, b, c) = (self.val(*a), self.val(*b), self.val(*c));
                let r = native::lop3(self.b, *lut, a, b, c);
                self.set(*d, r);
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
                let (a, b) = (self.val(*a), self.val(*b));
                let comb = comb.map(|(op, s, neg)| (op, self.val(s), neg));
                let (x, y) = self.setp(*f as usize, hi.map(|h| h as usize), a, b, comb);
                self.set(*p, x);
                if let Some(q) = q {
                    self.set(*q, y);
                }
            }
            Op::Cvta { to, space, d, a } => {
                let window = match space {
                    Space::Shared => SHARED_WINDOW,
                    Space::Local => LOCAL_WINDOW,
                    Space::Param => PARAM_WINDOW,
                    _ => 0,
                };
                let a = self.val(*a);
                let w = if *to { window.wrapping_neg() } else { window };
                let r = self.b.ins().iadd_imm_s(a, w as i64);
                self.set(*d, r);
            }
            Op::Ld {
                space,
                ty,
                n,
                d,
                addr,
            } => {
                let (size, n) = (ty.bytes(), *n as usize);
                let total = size as u64 * n as u64;
                // Kernel parameters are read-only for the launch: their loads may move.
                let param = *space == Space::Param
                    && addr.base.is_none()
                    && (addr.offset as u64) < THREAD_PARAM_BASE;
                let ptr = if param {
                    let at = addr.offset as u64;
                    if at.saturating_add(total) > self.prog.param_bytes as u64 {
                        self.fault_here(run::FAULT_PARAM, pc, at);
                        return Ok(true);
                    }
                    {
                        let params = self.u.get(self.b, off!(params));
                        self.b.ins().iadd_imm_s(params, at as i64)
                    }
                } else {
                    self.access(*space, addr, total, false, pc)
                };
                for (k, dk) in d.iter().enumerate().take(n) {
                    if *dk == u32::MAX {
                        continue;
                    }
                    let v = if param {
                        self.load_with(*ty, ptr, (k as u32 * size) as i32, fixed_flags())
                    } else {
                        self.load(*ty, ptr, (k as u32 * size) as i32)
                    };
                    self.set(*dk, v);
                }
            }
            Op::St {
                space,
                ty,
                n,
                s,
                addr,
            } => {
                let (size, n) = (ty.bytes(), *n as usize);
                let total = size as u64 * n as u64;
                let vals: Vec<Value> = s
                    .iter()
                    .take(n)
                    .map(|x| match *x {
                        Src::Sreg(_) => self.imm(0),
                        x => self.val(x),
                    })
                    .collect();
                let ptr = self.access(*space, addr, total, true, pc);
                for (k, v) in vals.into_iter().enumerate() {
                    let v = if size == 8 {
                        v
                    } else {
                        self.b.ins().ireduce(mem_ty(size), v)
                    };
                    self.b
                        .ins()
                        .store(flags(), v, ptr, (k as u32 * size) as i32);
                }
            }
            Op::Atom { d, addr, b, c, .. } => {
                let a = self.address(addr);
                let (bv, cv) = (self.val(*b), self.val(*c));
                let t = self.b.use_var(self.t);
                let ip = self.imm(i as *const Inst as u64);
                let p = self.b.ins().iconst(I32, pc as i64);
                let f = self.imm(run::atom as *const () as u64);
                let call = self.b.ins().call_indirect(
                    self.sigs.atom,
                    f,
                    &[self.u.ctx, ip, a, bv, cv, t, p],
                );
                let old = self.b.inst_results(call)[0];
                self.check_faulted();
                if let Some(d) = d {
                    self.set(*d, old);
                }
            }
            Op::Bra { target } => {
                let tb = self.block_for(inst, *target);
                self.b.ins().jump(tb, &[]);
                return Ok(true);
            }
            Op::Call(site) => {
                let chain = &self.instances[inst].chain;
                if chain.contains(&site.target) {
                    return Err(format!("{}: a recursive call", self.line(pc)));
                }
                if chain.len() >= MAX_INLINE_DEPTH {
                    return Err(format!(
                        "{}: calls nested deeper than {MAX_INLINE_DEPTH}",
                        self.line(pc)
                    ));
                }
                let tb = self.prog.thread_param_bytes as u64;
                let inside = |c: &crate::ir::ParamCopy| {
                    c.from as u64 + c.len as u64 <= tb && c.to as u64 + c.len as u64 <= tb
                };
                if !site.args.iter().chain(&site.rets).all(inside) {
                    return Err(format!(
                        "{}: a parameter copy outside the call-parameter space",
                        self.line(pc)
                    ));
                }
                let mut chain = chain.clone();
                chain.push(site.target);
                for c in &site.args {
                    self.param_copy(c.from, c.to, c.len);
                }
                self.instances.push(Instance {
                    caller: Some((pc, inst)),
                    chain,
                });
                let callee = self.block_for(self.instances.len() - 1, site.target);
                self.b.ins().jump(callee, &[]);
                return Ok(true);
            }
            Op::Ret => {
                let Some((call_pc, caller)) = self.instances[inst].caller else {
                    self.fault_here(run::FAULT_RET, pc, 0);
                    return Ok(true);
                };
                if let Some(Op::Call(site)) = self.prog.code.get(call_pc as usize).map(|i| &i.op) {
                    for c in &site.rets {
                        self.param_copy(c.from, c.to, c.len);
                    }
                }
                let back = self.block_for(caller, call_pc + 1);
                self.b.ins().jump(back, &[]);
                return Ok(true);
            }
            Op::Exit => {
                if self.states {
                    self.set_state(EXITED);
                    self.count_exits(1);
                }
                self.b.ins().jump(self.next, &[]);
                return Ok(true);
            }
            Op::Trap => {
                self.fault_here(run::FAULT_TRAP, pc, 0);
                return Ok(true);
            }
            Op::CallIndirect { .. } => {
                return Err("an indirect call (the analysis refuses it first)".into());
            }
            Op::Service(_) => {
                let ip = self.imm(i as *const Inst as u64);
                let t = self.b.use_var(self.t);
                let p = self.b.ins().iconst(I32, pc as i64);
                let f = self.imm(run::service as *const () as u64);
                self.b
                    .ins()
                    .call_indirect(self.sigs.service, f, &[self.u.ctx, ip, t, p]);
                self.check_faulted();
            }
            Op::Nop => {
                self.b.ins().fence();
            }
            Op::Nanosleep { t } => {
                let v = self.val(*t);
                let f = self.imm(run::nanosleep as *const () as u64);
                self.b.ins().call_indirect(self.sigs.sleep, f, &[v]);
            }
            Op::Bar { id, count, kind } => return Ok(self.lower_bar(inst, pc, *id, *count, *kind)),
            Op::Match { a, mask, .. } | Op::Redux { a, mask, .. } => {
                let v = [self.val(*a), self.val(*mask)];
                self.suspend(inst, pc, &v);
                return Ok(true);
            }
            Op::Shfl { a, b, c, mask, .. } => {
                let v: Vec<Value> = [*a, *b, *c, *mask].iter().map(|s| self.val(*s)).collect();
                self.suspend(inst, pc, &v);
                return Ok(true);
            }
            Op::Vote { a, mask, .. } => {
                let v = [self.val(*a), self.val(*mask)];
                self.suspend(inst, pc, &v);
                return Ok(true);
            }
            Op::Activemask { .. } => {
                self.suspend(inst, pc, &[]);
                return Ok(true);
            }
            Op::Carry {
                sub,
                wide,
                cin,
                cout,
                d,
                a,
                b,
            } => {
                let (x, y) = (self.val(*a), self.val(*b));
                let (r, c) = self.carry(*sub, *wide, *cin, x, y);
                self.set(*d, r);
                if *cout {
                    self.set(self.prog.carry_reg, c);
                }
            }
            Op::MadCarry {
                hi,
                wide,
                signed,
                cin,
                cout,
                d,
                a,
                b,
                c,
            } => {
                let (x, y, z) = (self.val(*a), self.val(*b), self.val(*c));
                let part = if *wide {
                    match (*hi, *signed) {
                        (false, _) => self.b.ins().imul(x, y),
                        (true, true) => self.b.ins().smulhi(x, y),
                        (true, false) => self.b.ins().umulhi(x, y),
                    }
                } else {
                    let (x, y) = if *signed {
                        let x = self.b.ins().ireduce(I32, x);
                        let y = self.b.ins().ireduce(I32, y);
                        (self.b.ins().sextend(I64, x), self.b.ins().sextend(I64, y))
                    } else {
                        let x = self.b.ins().ireduce(I32, x);
                        let y = self.b.ins().ireduce(I32, y);
                        (self.b.ins().uextend(I64, x), self.b.ins().uextend(I64, y))
                    };
                    let p = self.b.ins().imul(x, y);
                    let p = if *hi {
                        self.b.ins().sshr_imm_s(p, 32)
                    } else {
                        p
                    };
                    self.b.ins().band_imm_s(p, 0xFFFF_FFFF)
                };
                let (r, cy) = self.carry(false, *wide, *cin, part, z);
                self.set(*d, r);
                if *cout {
                    self.set(self.prog.carry_reg, cy);
                }
            }
            Op::WarpSync { .. } => {
                return Err(format!("{}: not compiled", self.line(pc)));
            }
        }
        Ok(false)
    }

    /// `x ± y (± carry-in)` at 32 or 64 bits: the result and the carry (or borrow) out, as
    /// the interpreter computes them in 128-bit arithmetic.
    pub(super) fn carry(
        &mut self,
        sub: bool,
        wide: bool,
        cin: bool,
        x: Value,
        y: Value,
    ) -> (Value, Value) {
        let cc = if cin {
            let c = self.get(self.prog.carry_reg);
            self.b.ins().band_imm_s(c, 1)
        } else {
            self.imm(0)
        };
        if wide {
            if sub {
                let (t, o) = self.b.ins().uadd_overflow(y, cc);
                let lt = self.b.ins().icmp(IntCC::UnsignedLessThan, x, t);
                let c = self.b.ins().bor(lt, o);
                let r = self.b.ins().isub(x, t);
                (r, self.b.ins().uextend(I64, c))
            } else {
                let (s1, o1) = self.b.ins().uadd_overflow(x, y);
                let (s2, o2) = self.b.ins().uadd_overflow(s1, cc);
                let c = self.b.ins().bor(o1, o2);
                (s2, self.b.ins().uextend(I64, c))
            }
        } else {
            let x = self.b.ins().band_imm_s(x, 0xFFFF_FFFF);
            let y = self.b.ins().band_imm_s(y, 0xFFFF_FFFF);
            let t = self.b.ins().iadd(y, cc);
            if sub {
                let lt = self.b.ins().icmp(IntCC::UnsignedLessThan, x, t);
                let r = self.b.ins().isub(x, t);
                let r = self.b.ins().band_imm_s(r, 0xFFFF_FFFF);
                (r, self.b.ins().uextend(I64, lt))
            } else {
                let s = self.b.ins().iadd(x, t);
                let c = self.b.ins().ushr_imm_s(s, 32);
                let r = self.b.ins().band_imm_s(s, 0xFFFF_FFFF);
                (r, c)
            }
        }
    }

    /// `setp`'s two predicates (0 or 1) from the comparison `f` (and `hi`, the negated
    /// comparison for float types with unordered operands) combined with `comb`'s operand.
    pub(super) fn setp(
        &mut self,
        f: usize,
        hi: Option<usize>,
        a: Value,
        b: Value,
        comb: Option<(BoolOp, Value, bool)>,
    ) -> (Value, Value) {
        let r = self.apply(f, &[a, b]);
        let c = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        let nc = match hi {
            Some(h) => {
                let r = self.apply(h, &[a, b]);
                self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0)
            }
            None => self.b.ins().icmp_imm_s(IntCC::Equal, r, 0),
        };
        let (x, y) = match comb {
            None => (c, nc),
            Some((op, sv, neg)) => {
                let pv = self.b.ins().icmp_imm_s(
                    if neg { IntCC::Equal } else { IntCC::NotEqual },
                    sv,
                    0,
                );
                let f = |b: &mut FunctionBuilder<'b>, v: Value| match op {
                    BoolOp::And => b.ins().band(v, pv),
                    BoolOp::Or => b.ins().bor(v, pv),
                    BoolOp::Xor => b.ins().bxor(v, pv),
                };
                (f(self.b, c), f(self.b, nc))
            }
        };
        (self.b.ins().uextend(I64, x), self.b.ins().uextend(I64, y))
    }
}
