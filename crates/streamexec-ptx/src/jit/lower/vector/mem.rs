//! Memory accesses of a group: uniform addresses once, consecutive lanes in one known range
//! as one vector load or store, anything else lane by lane through the scalar code's checks
//! (`run::group_access`), with its exact faults.

use super::*;

impl<'b> VLower<'_, '_, 'b> {
    /// The base register of an address (zero without one); lanes that all hold the same
    /// value are one uniform value.
    fn base(&mut self, addr: &crate::ir::Addr) -> VVal {
        match addr.base.map(|r| self.get(r)) {
            Some(VVal::A(x, 0)) => VVal::U(x),
            Some(v) => v,
            None => VVal::U(self.lw.imm(0)),
        }
    }

    /// The lanes' addresses `[base + offset]` as two `i64x2`.
    pub(super) fn addresses(&mut self, base: VVal, offset: i64) -> (Value, Value) {
        let (a, b) = self.u64x2(base);
        if offset == 0 {
            return (a, b);
        }
        let o = self.lw.imm(offset as u64);
        let o = self.b().ins().splat(I64X2, o);
        (self.b().ins().iadd(a, o), self.b().ins().iadd(b, o))
    }

    /// Whether lane `j`'s address is the first lane's plus `j * size`: `(first, test)`.
    pub(super) fn consecutive(&mut self, (a, b): (Value, Value), size: u64) -> (Value, Value) {
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

    /// The host address of `total` bytes at `a` when the inline checks cover them (aligned
    /// to `size`; one cached device range, or the block's shared memory): jumps to the
    /// returned block with it, otherwise to `miss`. A device access first tries the range
    /// its site (`pc`) found last: one subtraction and compare instead of the cache's ways.
    pub(super) fn range(
        &mut self,
        space: Space,
        a: Value,
        total: u64,
        size: u64,
        miss: Block,
        pc: u32,
    ) -> Block {
        let hit = self.b().create_block();
        self.b().append_block_param(hit, I64);
        let site = self.sites.get(&pc).copied();
        self.lw
            .inline_range(space, a, total, size, (hit, miss), site);
        hit
    }

    /// The host pointer of a vector access of `size`-byte elements at `addrs`, when the lanes
    /// are consecutive in one range the inline checks cover (the code goes on there), else
    /// a jump to `lanes` (the per-lane path).
    pub(super) fn vector_pointer(
        &mut self,
        space: Space,
        addrs: (Value, Value),
        size: u64,
        lanes: Block,
        pc: u32,
    ) -> Value {
        let (a0, ok) = self.consecutive(addrs, size);
        let try_blk = self.b().create_block();
        self.b().ins().brif(ok, try_blk, &[], lanes, &[]);
        self.b().switch_to_block(try_blk);
        let hit = self.range(space, a0, size * LANES as u64, size, lanes, pc);
        self.b().switch_to_block(hit);
        self.b().block_params(hit)[0]
    }

    /// As [`Self::vector_pointer`] for the lanes of `base + offset`: a register whose lanes
    /// step by the element size needs no run-time test that they are consecutive.
    fn group_pointer(
        &mut self,
        space: Space,
        base: VVal,
        offset: i64,
        size: u64,
        lanes: Block,
        pc: u32,
    ) -> Value {
        if let VVal::A(x0, s) = base
            && s == size as i64
        {
            let a0 = self.b().ins().iadd_imm_s(x0, offset);
            let hit = self.range(space, a0, size * LANES as u64, size, lanes, pc);
            self.b().switch_to_block(hit);
            return self.b().block_params(hit)[0];
        }
        let addrs = self.addresses(base, offset);
        self.vector_pointer(space, addrs, size, lanes, pc)
    }

    /// The host pointer of a hoisted site's group access, with no check (the driver proved
    /// the block's accesses there in range: `crate::jit::hoist`), when `base` steps by the
    /// element size.
    fn hoisted_pointer(&mut self, pc: u32, base: VVal, offset: i64, size: u64) -> Option<Value> {
        let k = *self.hoisted.get(&pc)?;
        let VVal::A(x0, s) = base else {
            return None;
        };
        if s != size as i64 {
            return None;
        }
        let a0 = self.b().ins().iadd_imm_s(x0, offset);
        let ctx = self.lw.u.ctx;
        let at = off!(hoist) + 8 * k as i32;
        let delta = (self.b().ins()).load(I64, crate::jit::lower::fixed_flags(), ctx, at);
        Some(self.b().ins().iadd(a0, delta))
    }

    /// The host pointers of the lanes' accesses at `addrs` (lane order, the scalar code's
    /// checks and faults, through `run::group_access`): four values, and the status
    /// (non-zero after a fault at the lane whose pointer is null).
    pub(super) fn lane_pointers(
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

    pub(super) fn lower_ld(
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
            let params = self.lw.u.get(self.lw.b, off!(params));
            let ptr = self.b().ins().iadd_imm_s(params, at as i64);
            for (k, dk) in d.iter().enumerate().take(n) {
                if *dk != u32::MAX {
                    let v = self.lw.load_with(
                        ty,
                        ptr,
                        (k * size as usize) as i32,
                        crate::jit::lower::fixed_flags(),
                    );
                    self.set(*dk, VVal::U(v))?;
                }
            }
            return Ok(false);
        }
        let base = self.base(addr);
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
        let offset = addr.offset;
        let per_lane = |me: &mut Self| -> Vec<VVal> {
            // Every lane's pointer first (a fault leaves), then the loads.
            let addrs = me.addresses(base, offset);
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
        let vector = vector_access(space, ty, n);
        if !vector {
            for (dk, v) in d.iter().zip(per_lane(self)) {
                if *dk != u32::MAX {
                    self.set(*dk, v)?;
                }
            }
            return Ok(false);
        }
        if let Some(p) = self.hoisted_pointer(pc, base, offset, size as u64) {
            let f = vflags().with_notrap();
            let v = if size == 4 {
                VVal::V32(self.b().ins().load(I32X4, f, p, 0), ty == Ty::S32)
            } else {
                let x = self.b().ins().load(I64X2, f, p, 0);
                VVal::V64(x, self.b().ins().load(I64X2, f, p, 16))
            };
            if d[0] != u32::MAX {
                self.set(d[0], v)?;
            }
            return Ok(false);
        }
        // Consecutive elements in one known range: one vector load; else per lane.
        let merge = self.b().create_block();
        let lanes_blk = self.b().create_block();
        let p = self.group_pointer(space, base, offset, size as u64, lanes_blk, pc);
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

    /// Stores the group's `size`-byte elements `v` (4 or 8 bytes) at `p`, lane by lane.
    fn store_group(&mut self, p: Value, v: VVal, size: u32) {
        let f = vflags().with_notrap();
        if size == 4 {
            let v = self.i32x4(v);
            self.b().ins().store(f, v, p, 0);
        } else {
            let (x, y) = self.u64x2(v);
            self.b().ins().store(f, x, p, 0);
            self.b().ins().store(f, y, p, 16);
        }
    }

    pub(super) fn lower_st(
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
        let base = self.base(addr);
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
        let vector = vector_access(space, ty, n);
        let hoisted = match vector {
            true => self.hoisted_pointer(pc, base, addr.offset, size as u64),
            false => None,
        };
        if let Some(p) = hoisted {
            self.store_group(p, vals[0], size);
            return Ok(false);
        }
        let merge = self.b().create_block();
        let lanes_blk = self.b().create_block();
        if vector {
            let p = self.group_pointer(space, base, addr.offset, size as u64, lanes_blk, pc);
            self.store_group(p, vals[0], size);
            self.b().ins().jump(merge, &[]);
        } else {
            self.b().ins().jump(lanes_blk, &[]);
        }
        self.b().switch_to_block(lanes_blk);
        // In lane order: the lanes before a faulting one store, as on the scalar code.
        let addrs = self.addresses(base, addr.offset);
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
