//! Decoding of loads, stores and atomics.

use super::ProgramBuilder;
use super::fns::*;
use super::half::half_kind;
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{AtomOp, Op, Space, Src, Ty};

impl ProgramBuilder<'_> {
    pub(super) fn ld_st(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        m.drop_ignorable();
        let space = self.space(i, &mut m)?;
        let n = match m.one_of(&["v2", "v4"]) {
            Some("v2") => 2,
            Some("v4") => 4,
            _ => 1,
        };
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
        if ty == Ty::Pred {
            return Err(unsupported("a predicate load/store"));
        }
        if ops.len() != 2 {
            return Err(self.err(i.line, format!("`{i}`: expected 2 operands")));
        }
        let store = i.opcode == "st";
        let (mem, val) = if store {
            (&ops[0], &ops[1])
        } else {
            (&ops[1], &ops[0])
        };
        let addr = self.addr(i, mem, space)?;
        let items: Vec<&Operand> = match val {
            Operand::Vector(v) if v.len() == n as usize => v.iter().collect(),
            Operand::Vector(_) => {
                return Err(unsupported(
                    "a vector operand whose length differs from .v2/.v4",
                ));
            }
            o if n == 1 => vec![o],
            _ => return Err(unsupported("a .v2/.v4 access without a vector operand")),
        };
        if store {
            let mut s = [Src::Imm(0); 4];
            for (k, o) in items.iter().enumerate() {
                s[k] = self.src(i, o, ty)?;
                if matches!(s[k], Src::Sreg(_)) {
                    return Err(unsupported(
                        "storing a special register directly (mov it first)",
                    ));
                }
            }
            Ok(Op::St {
                space,
                ty,
                n,
                s,
                addr,
            })
        } else {
            let mut d = [u32::MAX; 4];
            for (k, o) in items.iter().enumerate() {
                d[k] = match o {
                    Operand::Sink => u32::MAX,
                    o => self.reg(i, o)?,
                };
            }
            Ok(Op::Ld {
                space,
                ty,
                n,
                d,
                addr,
            })
        }
    }

    pub(super) fn atom(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        m.drop_ignorable();
        let space = self.space(i, &mut m)?;
        if space == Space::Local || space == Space::Param {
            return Err(unsupported("an atomic in this state space"));
        }
        let op = match m.one_of(&[
            "add", "min", "max", "exch", "cas", "inc", "dec", "and", "or", "xor",
        ]) {
            Some("add") => AtomOp::Add,
            Some("min") => AtomOp::Min,
            Some("max") => AtomOp::Max,
            Some("exch") => AtomOp::Exch,
            Some("cas") => AtomOp::Cas,
            Some("inc") => AtomOp::Inc,
            Some("dec") => AtomOp::Dec,
            Some("and") => AtomOp::And,
            Some("or") => AtomOp::Or,
            Some("xor") => AtomOp::Xor,
            _ => return Err(unsupported("this atomic operation")),
        };
        m.has("noftz");
        // `atom.add.noftz.{f16,bf16}{x2}`: a half (pair) added in place.
        let half = m.list.iter().find_map(|x| half_kind(x));
        m.list.retain(|x| half_kind(x).is_none());
        let (op, ty) = match half {
            Some((bf, x2)) if op == AtomOp::Add && m.types().is_empty() => (
                AtomOp::AddHalf { bf, x2 },
                if x2 { Ty::U32 } else { Ty::U16 },
            ),
            Some(_) => return Err(unsupported("this atomic on half-precision values")),
            None => (op, self.one_ty(i, &mut m)?),
        };
        self.done(i, m)?;
        let ok_ty = match op {
            AtomOp::AddHalf { .. } => true,
            AtomOp::Add => matches!(
                ty,
                Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64 | Ty::F32 | Ty::F64
            ),
            AtomOp::Min | AtomOp::Max => matches!(ty, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64),
            AtomOp::Inc | AtomOp::Dec => ty == Ty::U32,
            _ => matches!(ty, Ty::U32 | Ty::U64 | Ty::S32 | Ty::S64),
        };
        if !ok_ty {
            return Err(unsupported("this atomic type"));
        }
        let red = i.opcode == "red";
        let nsrc = if op == AtomOp::Cas { 2 } else { 1 };
        let base = if red { 1 } else { 2 };
        if ops.len() != base + nsrc {
            return Err(self.err(i.line, format!("`{i}`: expected {} operands", base + nsrc)));
        }
        let d = if red {
            None
        } else {
            Some(self.reg(i, &ops[0])?)
        };
        let addr = self.addr(i, &ops[base - 1], space)?;
        let b = match op {
            AtomOp::AddHalf { x2, .. } => self.half_src(i, &ops[base], x2)?,
            _ => self.src(i, &ops[base], ty)?,
        };
        let c = if op == AtomOp::Cas {
            self.src(i, &ops[base + 1], ty)?
        } else {
            Src::Imm(0)
        };
        Ok(Op::Atom {
            space,
            op,
            ty,
            d,
            addr,
            b,
            c,
        })
    }
}
