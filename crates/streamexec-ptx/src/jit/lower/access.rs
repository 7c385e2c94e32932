//! Memory accesses of the scalar code: the inline checks (alignment, the block's shared
//! memory, the thread's local memory, the cached device ranges) and the runtime's full
//! resolution behind them, which also words the faults.

use super::*;

impl<'b> Lower<'_, 'b> {
    /// The host pointer of an access of `total` bytes at `addr` in `space`: an inline check
    /// for the common cases, the runtime's full resolution otherwise (a fault leaves).
    pub(super) fn access(
        &mut self,
        space: Space,
        addr: &Addr,
        total: u64,
        write: bool,
        pc: u32,
    ) -> Value {
        let a = self.address(addr);
        let t = self.b.use_var(self.t);
        self.access_at(space, a, total, write, pc, t)
    }

    /// The inline checks of `total` bytes at `a` (aligned to `align`) in device memory (the
    /// cached ranges; also for generic addresses) or the block's shared memory (static, then
    /// dynamic): a jump to `done` with the host pointer, else to `miss`. Shared by the scalar
    /// code (one thread's access) and the vector code (a group's consecutive lanes), which
    /// passes its access site's cache: a device access tries the range the site found last
    /// before the cache's ways, and a range found in the ways is written there.
    pub(super) fn inline_range(
        &mut self,
        space: Space,
        a: Value,
        total: u64,
        align: u64,
        (done, miss): (Block, Block),
        site: Option<ir::StackSlot>,
    ) {
        let misaligned = self.b.ins().band_imm_s(a, (align - 1) as i64);
        let go = self.b.create_block();
        self.b.ins().brif(misaligned, miss, &[], go, &[]);
        self.b.switch_to_block(go);
        match space {
            Space::Global | Space::Generic => {
                if let Some(slot) = site {
                    // The range this site found last: one subtraction and compare.
                    let (fast, ways) = (self.b.create_block(), self.b.create_block());
                    let lo = self.b.ins().stack_load(I64, I64, slot, 0);
                    let lim = self.b.ins().stack_load(I64, I64, slot, 8);
                    let off = self.b.ins().isub(a, lo);
                    let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, off, lim);
                    self.b.ins().brif(inside, fast, &[], ways, &[]);
                    self.b.switch_to_block(fast);
                    let delta = self.b.ins().stack_load(I64, I64, slot, 16);
                    let p = self.b.ins().iadd(a, delta);
                    self.b.ins().jump(done, &[p.into()]);
                    self.b.switch_to_block(ways);
                }
                for way in 0..run::WAYS {
                    let o = off!(cache) + (way * 24) as i32;
                    let lo = self.b.ins().load(I64, fixed_flags(), self.u.ctx, o);
                    let hi = self.b.ins().load(I64, fixed_flags(), self.u.ctx, o + 8);
                    let c1 = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, a, lo);
                    let c2 = self.b.ins().icmp(IntCC::UnsignedLessThan, a, hi);
                    let room = self.b.ins().isub(hi, a);
                    let c3 = self.b.ins().icmp_imm_s(
                        IntCC::UnsignedGreaterThanOrEqual,
                        room,
                        total as i64,
                    );
                    let c = self.b.ins().band(c1, c2);
                    let c = self.b.ins().band(c, c3);
                    let hit = self.b.create_block();
                    let next = self.b.create_block();
                    self.b.ins().brif(c, hit, &[], next, &[]);
                    self.b.switch_to_block(hit);
                    let host = self.b.ins().load(I64, fixed_flags(), self.u.ctx, o + 16);
                    let off = self.b.ins().isub(a, lo);
                    let p = self.b.ins().iadd(host, off);
                    if let Some(slot) = site {
                        // `lo`, the offsets that leave room for `total` bytes (`hi - lo >=
                        // total` here), and host minus device address.
                        let span = self.b.ins().isub(hi, lo);
                        let lim = self.b.ins().iadd_imm_s(span, 1 - total as i64);
                        let delta = self.b.ins().isub(host, lo);
                        self.b.ins().stack_store(I64, lo, slot, 0);
                        self.b.ins().stack_store(I64, lim, slot, 8);
                        self.b.ins().stack_store(I64, delta, slot, 16);
                    }
                    self.b.ins().jump(done, &[p.into()]);
                    self.b.switch_to_block(next);
                }
                self.b.ins().jump(miss, &[]);
            }
            Space::Shared => {
                let st = self.prog.static_shared_bytes as u64;
                let dynamic = self.b.create_block();
                if total <= st {
                    let c = self.b.ins().icmp_imm_s(
                        IntCC::UnsignedLessThanOrEqual,
                        a,
                        (st - total) as i64,
                    );
                    let hit = self.b.create_block();
                    self.b.ins().brif(c, hit, &[], dynamic, &[]);
                    self.b.switch_to_block(hit);
                    let p = {
                        let shared = self.u.get(self.b, off!(shared));
                        self.b.ins().iadd(shared, a)
                    };
                    self.b.ins().jump(done, &[p.into()]);
                } else {
                    self.b.ins().jump(dynamic, &[]);
                }
                self.b.switch_to_block(dynamic);
                let len = self.ctx_u64(off!(dynamic_len));
                let o = self
                    .b
                    .ins()
                    .iadd_imm_s(a, (DYNAMIC_SHARED_BASE as i64).wrapping_neg());
                let c1 = self.b.ins().icmp(IntCC::UnsignedLessThan, o, len);
                let room = self.b.ins().isub(len, o);
                let c2 =
                    self.b
                        .ins()
                        .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, room, total as i64);
                let c = self.b.ins().band(c1, c2);
                let hit = self.b.create_block();
                self.b.ins().brif(c, hit, &[], miss, &[]);
                self.b.switch_to_block(hit);
                let at = self.ctx_u64(off!(dynamic_at));
                let p = {
                    let shared = self.u.get(self.b, off!(shared));
                    self.b.ins().iadd(shared, at)
                };
                let p = self.b.ins().iadd(p, o);
                self.b.ins().jump(done, &[p.into()]);
            }
            _ => {
                self.b.ins().jump(miss, &[]);
            }
        }
    }

    /// As [`Self::access`], for the address `a` and thread `t`.
    pub(super) fn access_at(
        &mut self,
        space: Space,
        a: Value,
        total: u64,
        write: bool,
        pc: u32,
        t: Value,
    ) -> Value {
        let done = self.b.create_block();
        let ptr = self.b.append_block_param(done, I64);
        let slow = self.b.create_block();
        match space {
            Space::Global | Space::Generic | Space::Shared => {
                self.inline_range(space, a, total, total, (done, slow), None);
            }
            Space::Local if total <= self.prog.local_bytes as u64 => {
                let aligned = self.b.ins().band_imm_s(a, (total - 1) as i64);
                let fast = self.b.create_block();
                self.b.ins().brif(aligned, slow, &[], fast, &[]);
                self.b.switch_to_block(fast);
                let lb = self.prog.local_bytes as u64;
                let c =
                    self.b
                        .ins()
                        .icmp_imm_s(IntCC::UnsignedLessThanOrEqual, a, (lb - total) as i64);
                let hit = self.b.create_block();
                self.b.ins().brif(c, hit, &[], slow, &[]);
                self.b.switch_to_block(hit);
                let r = self.b.ins().imul_imm_s(t, lb as i64);
                let p = {
                    let local = self.u.get(self.b, off!(local));
                    self.b.ins().iadd(local, r)
                };
                let p = self.b.ins().iadd(p, a);
                self.b.ins().jump(done, &[p.into()]);
            }
            _ => {
                self.b.ins().jump(slow, &[]);
            }
        }
        self.b.switch_to_block(slow);
        let sp = self.b.ins().iconst(I32, run::space_code(space) as i64);
        let tot = self.imm(total);
        let w = self.b.ins().iconst(I32, write as i64);
        let p = self.b.ins().iconst(I32, pc as i64);
        let f = self.imm(run::resolve as *const () as u64);
        let call =
            self.b
                .ins()
                .call_indirect(self.sigs.resolve, f, &[self.u.ctx, sp, a, tot, w, t, p]);
        let r = self.b.inst_results(call)[0];
        let ok = self.b.create_block();
        self.b.ins().brif(r, ok, &[], self.fault, &[]);
        self.b.switch_to_block(ok);
        self.b.ins().jump(done, &[r.into()]);
        self.b.switch_to_block(done);
        ptr
    }

    pub(super) fn address(&mut self, addr: &Addr) -> Value {
        match addr.base {
            Some(r) => {
                let b = self.get(r);
                self.b.ins().iadd_imm_s(b, addr.offset)
            }
            None => self.imm(addr.offset as u64),
        }
    }

    /// Loads a `ty` at `ptr + off` into a register slot value (extended as `ty` says).
    pub(super) fn load(&mut self, ty: Ty, ptr: Value, off: i32) -> Value {
        self.load_with(ty, ptr, off, flags())
    }

    /// As [`Self::load`] with the given memory flags.
    pub(super) fn load_with(&mut self, ty: Ty, ptr: Value, off: i32, f: MemFlagsData) -> Value {
        load_typed(self.b, ty, ptr, off, f)
    }

    /// Copies `len` bytes inside the current thread's call-parameter row (the caller checked
    /// that both ranges lie inside it).
    pub(super) fn param_copy(&mut self, from: u32, to: u32, len: u32) {
        let tb = self.prog.thread_param_bytes as i64;
        let t = self.b.use_var(self.t);
        let r = self.b.ins().imul_imm_s(t, tb);
        let base = {
            let tparam = self.u.get(self.b, off!(tparam));
            self.b.ins().iadd(tparam, r)
        };
        let mut o = 0u32;
        while o < len {
            let step = match len - o {
                n if n >= 8 => 8,
                n if n >= 4 => 4,
                n if n >= 2 => 2,
                _ => 1,
            };
            let ty = mem_ty(step);
            let v = self.b.ins().load(ty, flags(), base, (from + o) as i32);
            self.b.ins().store(flags(), v, base, (to + o) as i32);
            o += step;
        }
    }
}

/// Loads a `ty` at `ptr + off` into a register slot value (extended as `ty` says).
pub(super) fn load_typed(
    b: &mut FunctionBuilder<'_>,
    ty: Ty,
    ptr: Value,
    off: i32,
    f: MemFlagsData,
) -> Value {
    let size = ty.bytes();
    if size == 8 {
        return b.ins().load(I64, f, ptr, off);
    }
    let v = b.ins().load(mem_ty(size), f, ptr, off);
    match ty {
        Ty::S8 | Ty::S16 | Ty::S32 => b.ins().sextend(I64, v),
        Ty::Pred => {
            let nz = b.ins().icmp_imm_s(IntCC::NotEqual, v, 0);
            b.ins().uextend(I64, nz)
        }
        _ => b.ins().uextend(I64, v),
    }
}
