//! Register values in the vector code: where each register lives, and the conversions
//! between a value's shapes (uniform scalar, `i32x4`, two `i64x2`, one slot per lane), all
//! exact on the 64-bit slots the scalar code and the interpreter see.

use super::*;

impl<'b> VLower<'_, '_, 'b> {
    pub(super) fn get(&mut self, r: u32) -> VVal {
        match self.regs[r as usize] {
            VReg::U(v) => VVal::U(self.lw.b.use_var(v)),
            VReg::V32(v, s) => VVal::V32(self.lw.b.use_var(v), s),
            VReg::V64(a, b) => {
                let (a, b) = (self.lw.b.use_var(a), self.lw.b.use_var(b));
                VVal::V64(a, b)
            }
            VReg::A(v, s) => VVal::A(self.lw.b.use_var(v), s),
        }
    }

    pub(super) fn set(&mut self, r: u32, x: VVal) -> Result<(), String> {
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
            // The analysis proved the lanes step as the register's kind says: lane 0 holds
            // all there is to know.
            VReg::A(v, _) => {
                let x0 = self.lane(x, 0);
                self.lw.b.def_var(v, x0);
            }
        }
        Ok(())
    }

    /// Lane 0's slot of a source operand, without computing the other lanes; `None` for
    /// one the vector code does not compute.
    pub(super) fn lane0(&mut self, s: Src) -> Option<Value> {
        Some(match s {
            Src::Reg(r) => {
                let v = self.get(r);
                self.lane(v, 0)
            }
            Src::Imm(v) => self.lw.imm(v),
            Src::Sreg(Sreg::Tid(0)) => self.use_var(self.lw.tid[0]),
            Src::Sreg(Sreg::Laneid) => {
                let t = self.use_var(self.lw.t);
                self.b().ins().band_imm_s(t, 31)
            }
            Src::Sreg(s) if sreg_varying(s) => return None,
            Src::Sreg(s) => self.lw.sreg(s),
        })
    }

    /// The slots `x0 + j * step` of lanes 0, 1 and lanes 2, 3.
    pub(super) fn stepped(&mut self, x0: Value, step: i64) -> (Value, Value) {
        let s = self.b().ins().splat(I64X2, x0);
        if step == 0 {
            return (s, s);
        }
        let k = |me: &mut Self, v: [i64; 2]| {
            let c = me.lw.b.func.dfg.constants.insert(ConstantData::from(
                v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
            ));
            me.lw.b.ins().vconst(I64X2, c)
        };
        let (k0, k1) = (
            k(self, [0, step]),
            k(self, [2i64.wrapping_mul(step), 3i64.wrapping_mul(step)]),
        );
        (self.b().ins().iadd(s, k0), self.b().ins().iadd(s, k1))
    }

    /// A source operand; `None` for one the vector code does not compute (`%lanemask_*`).
    pub(super) fn val(&mut self, s: Src) -> Option<VVal> {
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

    pub(super) fn plus_iota(&mut self, x: Value) -> Value {
        let x = self.b().ins().ireduce(I32, x);
        let s = self.b().ins().splat(I32X4, x);
        let iota = self.iota;
        self.b().ins().iadd(s, iota)
    }

    /// The lanes' low 32 bits.
    pub(super) fn i32x4(&mut self, v: VVal) -> Value {
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
            VVal::A(x0, step) => {
                let x = self.b().ins().ireduce(I32, x0);
                let s = self.b().ins().splat(I32X4, x);
                if step == 0 {
                    return s;
                }
                let c = self.lw.b.func.dfg.constants.insert(ConstantData::from(
                    (0..LANES as i64)
                        .flat_map(|j| (j.wrapping_mul(step) as u32).to_le_bytes())
                        .collect::<Vec<u8>>(),
                ));
                let k = self.b().ins().vconst(I32X4, c);
                self.b().ins().iadd(s, k)
            }
        }
    }

    /// The lanes' 64-bit slots: lanes 0, 1 and lanes 2, 3.
    pub(super) fn u64x2(&mut self, v: VVal) -> (Value, Value) {
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
            VVal::A(x0, step) => self.stepped(x0, step),
        }
    }

    /// Lane `j`'s 64-bit slot.
    pub(super) fn lane(&mut self, v: VVal, j: usize) -> Value {
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
            VVal::A(x0, step) => {
                if j == 0 {
                    x0
                } else {
                    self.b().ins().iadd_imm_s(x0, (j as i64).wrapping_mul(step))
                }
            }
        }
    }

    /// A lane mask (all ones where the lane's slot is non-zero), as `i32x4`, for
    /// predicates (whose slots are 0 or 1).
    pub(super) fn pred_mask(&mut self, v: VVal, neg: bool) -> Value {
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
    pub(super) fn mask_pred(&mut self, m: Value) -> VVal {
        let one = self.b().ins().iconst(I32, 1);
        let one = self.b().ins().splat(I32X4, one);
        let p = self.b().ins().band(m, one);
        self.masks.insert(p, m);
        VVal::V32(p, false)
    }

    pub(super) fn f32x4(&mut self, v: VVal) -> Value {
        let x = self.i32x4(v);
        self.b().ins().bitcast(F32X4, vflags(), x)
    }

    pub(super) fn f64x2(&mut self, v: VVal) -> (Value, Value) {
        let (a, b) = self.u64x2(v);
        (
            self.b().ins().bitcast(F64X2, vflags(), a),
            self.b().ins().bitcast(F64X2, vflags(), b),
        )
    }
}
