//! Lane functions over a group: one scalar computation for uniform operands, SIMD where the
//! function has a vector form, else the scalar code once per lane (so every result is the
//! scalar code's, bit for bit).

use super::*;

impl<'b> VLower<'_, '_, 'b> {
    /// `f` over the lanes: one scalar computation when every operand is uniform, vector
    /// code where there is a vector form, else the scalar code per lane.
    pub(super) fn apply(&mut self, f: usize, args: &[VVal]) -> VVal {
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

    /// The vector form of a recognised lane function, if it has one here.
    pub(super) fn vector_op(&mut self, n: N, args: &[VVal]) -> Option<VVal> {
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
                let m = self.b().ins().icmp(native::int_cc(c, signed), x, y);
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
                let r = native::farith(b, op, x, y);
                VVal::V32(b.ins().bitcast(I32X4, vflags(), r), false)
            }
            N::FArith { op, f64: true } => {
                let (x0, x1) = self.f64x2(args[0]);
                let (y0, y1) = self.f64x2(args[1]);
                let op = |b: &mut FunctionBuilder<'_>, x, y| {
                    let r = native::farith(b, op, x, y);
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
    pub(super) fn same_ext(&mut self, a: VVal, b: VVal) -> bool {
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
    pub(super) fn constant(&mut self, v: VVal) -> Option<u64> {
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
    pub(super) fn uniform_fits(&mut self, v: VVal, signed: bool) -> bool {
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
    pub(super) fn setp(
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
}

/// `lop3.b32` on `i32x4` lanes.
pub(super) fn lop3(b: &mut FunctionBuilder<'_>, lut: u8, a: Value, x: Value, c: Value) -> Value {
    let z = b.ins().iconst(I32, 0);
    let zero = b.ins().splat(I32X4, z);
    native::minterms(b, lut, a, x, c, zero)
}
