//! Decoding of `set.CmpOp{.BoolOp}{.ftz}.dtype.stype d, a, b{, {!}c}`: a comparison written
//! as a value (all ones for an integer destination, 1.0 for a float one, else 0). It becomes
//! a `setp` into a fresh register and a select of the value; with `.f16x2`/`.bf16x2` sources
//! each half gives its own result in its half of `d`.

use super::ProgramBuilder;
use super::fns::{Mods, flt_cmp, int_cmp, parse_ty, set_pair, set_value, unsigned_of};
use super::half::{half_cmp, half_kind};
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{Fn1, Fn2, Op, Src, Ty};

/// A `set` type: an IR type, or a half format (`bf16`) and whether it is a pair.
#[derive(Clone, Copy, PartialEq)]
enum SetTy {
    Plain(Ty),
    Half { bf: bool, x2: bool },
}

impl ProgramBuilder<'_> {
    /// A register slot no PTX name refers to.
    fn scratch(&mut self) -> u32 {
        self.regs += 1;
        self.regs - 1
    }

    pub(super) fn set(&mut self, i: &ast::Instruction) -> Result<Vec<Op>> {
        let ops = &i.operands;
        let unsupported = |what: &str| self.unsupported(i, what);
        let mut tys = Vec::new();
        let mut rest = Vec::new();
        for m in &i.modifiers {
            if let Some((bf, x2)) = half_kind(m) {
                tys.push(SetTy::Half { bf, x2 });
            } else if let Some(t) = parse_ty(m) {
                tys.push(SetTy::Plain(t));
            } else {
                rest.push(m.as_str());
            }
        }
        let mut m = Mods { list: rest };
        let (cmp, force_unsigned, bop, ftz) = self.cmp_mods(i, &mut m)?;
        self.done(i, m)?;
        let [dst, src] = tys[..] else {
            return Err(unsupported("set without a destination and a source type"));
        };
        // The compare function(s) and how the operands are read.
        let (f, hi, x2): (Fn2, Option<Fn2>, bool) = match src {
            SetTy::Plain(Ty::Pred) => return Err(unsupported("set on predicates")),
            SetTy::Plain(t) if t.float() && force_unsigned.is_none() => (
                flt_cmp(cmp, t, ftz).ok_or_else(|| unsupported("this comparison"))?,
                None,
                false,
            ),
            SetTy::Plain(t) if !t.float() => {
                let t = if force_unsigned == Some(true) {
                    unsigned_of(t)
                } else {
                    t
                };
                (
                    int_cmp(cmp, t).ok_or_else(|| unsupported("this comparison/type"))?,
                    None,
                    false,
                )
            }
            SetTy::Half { bf, x2 } if force_unsigned.is_none() && !(bf && ftz) => (
                half_cmp(cmp, bf, ftz, false),
                x2.then(|| half_cmp(cmp, bf, ftz, true)),
                x2,
            ),
            _ => return Err(unsupported("this comparison/type")),
        };
        // The value of a true result (per half for pairs).
        let one: u64 = match (dst, src) {
            (SetTy::Plain(Ty::U32 | Ty::S32), SetTy::Half { x2: true, .. }) => 0xFFFF,
            (SetTy::Half { bf, x2: true }, SetTy::Half { bf: sbf, x2: true }) if bf == sbf => {
                if bf { 0x3F80 } else { 0x3C00 }
            }
            (_, SetTy::Half { x2: true, .. }) | (SetTy::Half { x2: true, .. }, _) => {
                return Err(unsupported("this set destination type"));
            }
            (SetTy::Plain(Ty::U32 | Ty::S32), _) => 0xFFFF_FFFF,
            (SetTy::Plain(Ty::F32), _) => 0x3F80_0000,
            (SetTy::Plain(Ty::U16 | Ty::S16), SetTy::Half { .. }) => 0xFFFF,
            (SetTy::Half { bf: false, .. }, SetTy::Half { .. }) => 0x3C00,
            (SetTy::Half { bf: true, .. }, SetTy::Half { .. }) => 0x3F80,
            _ => return Err(unsupported("this set destination type")),
        };
        let comb = self.cmp_comb(i, bop)?;
        let d = self.reg(i, &ops[0])?;
        let operand = |s: &Self, o: &Operand| match src {
            SetTy::Plain(t) => s.src(i, o, t),
            SetTy::Half { x2, .. } => s.half_src(i, o, x2),
        };
        let (a, b) = (operand(self, &ops[1])?, operand(self, &ops[2])?);
        let p = self.scratch();
        let q = x2.then(|| self.scratch());
        let select: Op = if let Some(q) = q {
            let f: Fn2 = match one {
                0x3C00 => set_pair::<0x3C00>,
                0x3F80 => set_pair::<0x3F80>,
                _ => set_pair::<0xFFFF>,
            };
            Op::Bin {
                f,
                d,
                a: Src::Reg(p),
                b: Src::Reg(q),
            }
        } else {
            let f: Fn1 = match one {
                0x3C00 => set_value::<0x3C00>,
                0x3F80 => set_value::<0x3F80>,
                0xFFFF => set_value::<0xFFFF>,
                0x3F80_0000 => set_value::<0x3F80_0000>,
                _ => set_value::<0xFFFF_FFFF>,
            };
            Op::Un {
                f,
                d,
                a: Src::Reg(p),
            }
        };
        Ok(vec![
            Op::Setp {
                f,
                p,
                q,
                a,
                b,
                comb,
                hi,
            },
            select,
        ])
    }
}
