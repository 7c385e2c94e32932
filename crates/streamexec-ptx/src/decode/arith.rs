//! Decoding of arithmetic, logic, comparison and select instructions.

use super::ProgramBuilder;
use super::fns::*;
use crate::alu::*;
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{BoolOp, Cmp, Fn1, Fn2, Fn3, Op, Src, Ty};

impl ProgramBuilder<'_> {
    pub(super) fn binary(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        let cc = m.has("cc");
        let sat = m.has("sat");
        let ftz = m.has("ftz");
        let approx = m.one_of(&["approx", "full"]).is_some();
        let r = m.one_of(&["rn", "rz", "rm", "rp"]);
        let shape = m.one_of(&["lo", "hi", "wide"]);
        let nan = m.has("NaN");
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
        if nan && !(ty.float() && matches!(i.opcode.as_str(), "min" | "max")) {
            return Err(unsupported(".NaN here"));
        }
        if ops.len() != 3 {
            return Err(self.err(i.line, format!("`{i}`: expected 3 operands")));
        }
        let rc = match r {
            Some("rz") => 1,
            Some("rm") => 2,
            Some("rp") => 3,
            _ => 0,
        };
        let op = i.opcode.as_str();
        let d = self.reg(i, &ops[0])?;
        if cc {
            if !matches!(op, "add" | "sub") || !ty.int() || ty.bytes() < 4 {
                return Err(unsupported("this carry-out form"));
            }
            return Ok(Op::Carry {
                sub: op == "sub",
                wide: ty.bytes() == 8,
                cin: false,
                cout: true,
                d,
                a: self.src(i, &ops[1], ty)?,
                b: self.src(i, &ops[2], ty)?,
            });
        }
        let a = self.src(i, &ops[1], ty)?;
        let b = self.src(i, &ops[2], ty)?;
        let f: Option<Fn2> = if ty == Ty::Pred {
            match op {
                "and" => Some(pbin::<0>),
                "or" => Some(pbin::<1>),
                "xor" => Some(pbin::<2>),
                _ => None,
            }
        } else if ty.float() {
            if sat && !matches!(op, "add" | "sub" | "mul") {
                return Err(unsupported(".sat here"));
            }
            let _ = approx;
            match op {
                "add" => rfs!(ty, fadd, rc, ftz, sat),
                "sub" => rfs!(ty, fsub, rc, ftz, sat),
                "mul" => rfs!(ty, fmul, rc, ftz, sat),
                "div" => rf!(ty, fdiv, rc, ftz),
                "min" if nan => kf!(ty, fminmax_nan, false, ftz),
                "max" if nan => kf!(ty, fminmax_nan, true, ftz),
                "min" => kf!(ty, fminmax, false, ftz),
                "max" => kf!(ty, fminmax, true, ftz),
                "copysign" => flt_fn!(ty, fcopysign),
                _ => None,
            }
        } else {
            if sat && !(ty == Ty::S32 && matches!(op, "add" | "sub")) {
                return Err(unsupported(".sat here"));
            }
            match (op, shape) {
                ("add", _) if sat => int_fn!(ty, ibin, 11),
                ("sub", _) if sat => int_fn!(ty, ibin, 12),
                ("add", None) => int_fn!(ty, ibin, 0),
                ("sub", None) => int_fn!(ty, ibin, 1),
                ("mul", Some("lo")) => int_fn!(ty, ibin, 2),
                ("mul", Some("hi")) => int_fn!(ty, ibin, 3),
                ("mul", Some("wide")) => mul_wide(ty),
                ("mul24", Some("lo")) if ty.bytes() == 4 => int_fn!(ty, ibin, 13),
                ("mul24", Some("hi")) if ty.bytes() == 4 => int_fn!(ty, ibin, 14),
                ("div", None) => int_fn!(ty, ibin, 4),
                ("rem", None) => int_fn!(ty, ibin, 5),
                ("min", None) => int_fn!(ty, ibin, 6),
                ("max", None) => int_fn!(ty, ibin, 7),
                ("and", None) => int_fn!(unsigned_of(ty), ibin, 8),
                ("or", None) => int_fn!(unsigned_of(ty), ibin, 9),
                ("xor", None) => int_fn!(unsigned_of(ty), ibin, 10),
                _ => None,
            }
        };
        let f = f.ok_or_else(|| unsupported("this opcode/type/modifier combination"))?;
        Ok(Op::Bin { f, d, a, b })
    }

    pub(super) fn unary(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        let ftz = m.has("ftz");
        let approx = m.one_of(&["approx", "full"]).is_some();
        let r = m.one_of(&["rn", "rz", "rm", "rp"]);
        let shift = m.has("shiftamt");
        let test = if i.opcode == "testp" {
            m.one_of(&[
                "finite",
                "infinite",
                "number",
                "notanumber",
                "normal",
                "subnormal",
            ])
        } else {
            None
        };
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
        if ops.len() != 2 {
            return Err(self.err(i.line, format!("`{i}`: expected 2 operands")));
        }
        let rc = match r {
            Some("rz") => 1,
            Some("rm") => 2,
            Some("rp") => 3,
            _ => 0,
        };
        let _ = approx;
        let op = i.opcode.as_str();
        let f: Option<Fn1> = if ty == Ty::Pred {
            match op {
                "not" => Some(|a| (a == 0) as u64),
                _ => None,
            }
        } else if ty.float() {
            match op {
                "neg" => kf!(ty, funary, 0, ftz),
                "abs" => kf!(ty, funary, 1, ftz),
                "sqrt" => rf!(ty, fsqrt, rc, ftz),
                "rcp" => rf!(ty, frcp, rc, ftz),
                "rsqrt" => kf!(ty, fapprox, 0, ftz),
                "sin" => kf!(ty, fapprox, 1, ftz),
                "cos" => kf!(ty, fapprox, 2, ftz),
                "ex2" => kf!(ty, fapprox, 3, ftz),
                "lg2" => kf!(ty, fapprox, 4, ftz),
                "tanh" => kf!(ty, fapprox, 5, ftz),
                "testp" => match test {
                    Some("finite") => flt_fn!(ty, ftestp, 0),
                    Some("infinite") => flt_fn!(ty, ftestp, 1),
                    Some("number") => flt_fn!(ty, ftestp, 2),
                    Some("notanumber") => flt_fn!(ty, ftestp, 3),
                    Some("normal") => flt_fn!(ty, ftestp, 4),
                    Some(_) => flt_fn!(ty, ftestp, 5),
                    None => None,
                },
                _ => None,
            }
        } else {
            match op {
                "neg" => int_fn!(ty, iunary, 0),
                "abs" => int_fn!(ty, iunary, 1),
                "not" => int_fn!(unsigned_of(ty), iunary, 2),
                "cnot" => int_fn!(ty, iunary, 3),
                "popc" => int_fn!(ty, iunary, 4),
                "clz" => int_fn!(ty, iunary, 5),
                "brev" => int_fn!(ty, iunary, 6),
                "bfind" if shift => int_fn!(ty, iunary, 8),
                "bfind" => int_fn!(ty, iunary, 7),
                _ => None,
            }
        };
        let f = f.ok_or_else(|| unsupported("this opcode/type/modifier combination"))?;
        Ok(Op::Un {
            f,
            d: self.reg(i, &ops[0])?,
            a: self.src(i, &ops[1], ty)?,
        })
    }

    pub(super) fn ternary(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        if i.opcode == "mad" && m.list.contains(&"cc") {
            m.has("cc");
            let hi = m.one_of(&["lo", "hi"]) == Some("hi");
            let ty = self.one_ty(i, &mut m)?;
            self.done(i, m)?;
            if ops.len() != 4 || !ty.int() || ty.bytes() < 4 {
                return Err(unsupported("this mad.cc form"));
            }
            return Ok(Op::MadCarry {
                hi,
                wide: ty.bytes() == 8,
                signed: ty.signed(),
                cin: false,
                cout: true,
                d: self.reg(i, &ops[0])?,
                a: self.src(i, &ops[1], ty)?,
                b: self.src(i, &ops[2], ty)?,
                c: self.src(i, &ops[3], ty)?,
            });
        }
        let sat = m.has("sat");
        let ftz = m.has("ftz");
        let r = m.one_of(&["rn", "rz", "rm", "rp"]);
        let shape = m.one_of(&["lo", "hi", "wide"]);
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
        if ops.len() != 4 {
            return Err(self.err(i.line, format!("`{i}`: expected 4 operands")));
        }
        let rc = match r {
            Some("rz") => 1,
            Some("rm") => 2,
            Some("rp") => 3,
            _ => 0,
        };
        let op = i.opcode.as_str();
        let (cty, bty) = match op {
            "selp" => (Ty::Pred, ty),
            "bfe" => (Ty::U32, Ty::U32),
            "mad" if shape == Some("wide") => (
                wide_of(ty).ok_or_else(|| unsupported("mad.wide of this type"))?,
                ty,
            ),
            _ => (ty, ty),
        };
        let f: Option<Fn3> = match op {
            "selp" => Some(selp),
            "prmt" if ty == Ty::U32 => Some(prmt),
            "bfe" => int_fn!(ty, bfe),
            "fma" | "mad" if ty.float() => rfs!(ty, ffma, rc, ftz, sat),
            "mad" if sat => None,
            "mad" => match shape {
                Some("lo") => int_fn!(ty, imad, 0),
                Some("hi") => int_fn!(ty, imad, 1),
                Some("wide") => mad_wide(ty),
                _ => None,
            },
            "mad24" if ty.bytes() == 4 => match shape {
                Some("lo") => int_fn!(ty, imad, 2),
                Some("hi") => int_fn!(ty, imad, 3),
                _ => None,
            },
            "sad" => int_fn!(ty, isad),
            _ => None,
        };
        let f = f.ok_or_else(|| unsupported("this opcode/type/modifier combination"))?;
        Ok(Op::Tern {
            f,
            d: self.reg(i, &ops[0])?,
            a: self.src(i, &ops[1], ty)?,
            b: self.src(i, &ops[2], bty)?,
            c: self.src(i, &ops[3], cty)?,
        })
    }

    /// The modifiers `setp` and `set` share, taken from `m`: the comparison (and whether it
    /// forces unsigned: `lo ls hi hs`), the boolean combination, `.ftz`.
    pub(super) fn cmp_mods(
        &self,
        i: &ast::Instruction,
        m: &mut Mods<'_>,
    ) -> Result<(Cmp, Option<bool>, Option<BoolOp>, bool)> {
        let ftz = m.has("ftz");
        let bop = match m.one_of(&["and", "or", "xor"]) {
            Some("and") => Some(BoolOp::And),
            Some("or") => Some(BoolOp::Or),
            Some("xor") => Some(BoolOp::Xor),
            _ => None,
        };
        let (cmp, unsigned) = m
            .list
            .iter()
            .position(|x| parse_cmp(x).is_some())
            .map(|p| m.list.remove(p))
            .and_then(parse_cmp)
            .ok_or_else(|| self.unsupported(i, "a comparison without its operator"))?;
        Ok((cmp, unsigned, bop, ftz))
    }

    /// The operand count of a comparison (three, four with a boolean combination) and its
    /// combination `{!}c`.
    pub(super) fn cmp_comb(
        &self,
        i: &ast::Instruction,
        bop: Option<BoolOp>,
    ) -> Result<Option<(BoolOp, Src, bool)>> {
        let ops = &i.operands;
        let need = if bop.is_some() { 4 } else { 3 };
        if ops.len() != need {
            return Err(self.err(i.line, format!("`{i}`: expected {need} operands")));
        }
        Ok(match bop {
            Some(b) => Some(match &ops[3] {
                Operand::Not(c) => (b, self.src(i, &Operand::Reg(c.clone()), Ty::Pred)?, true),
                o => (b, self.src(i, o, Ty::Pred)?, false),
            }),
            None => None,
        })
    }

    /// `setp`'s destinations `p[|q]`.
    pub(super) fn pred_dests(&self, i: &ast::Instruction) -> Result<(u32, Option<u32>)> {
        Ok(match i.operands.first() {
            Some(Operand::Pair(p, q)) => (
                self.reg(i, &Operand::Reg(p.clone()))?,
                Some(self.reg(i, &Operand::Reg(q.clone()))?),
            ),
            Some(o) => (self.reg(i, o)?, None),
            None => return Err(self.unsupported(i, "setp without operands")),
        })
    }

    pub(super) fn setp(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let (cmp, force_unsigned, bop, ftz) = self.cmp_mods(i, &mut m)?;
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
        let cty = if force_unsigned == Some(true) {
            unsigned_of(ty)
        } else {
            ty
        };
        let f = if ty.float() {
            flt_cmp(cmp, ty, ftz)
        } else {
            int_cmp(cmp, cty)
        };
        let f = f.ok_or_else(|| self.unsupported(i, "this comparison/type"))?;
        let (p, q) = self.pred_dests(i)?;
        let comb = self.cmp_comb(i, bop)?;
        Ok(Op::Setp {
            f,
            p,
            q,
            a: self.src(i, &ops[1], ty)?,
            b: self.src(i, &ops[2], ty)?,
            comb,
            hi: None,
        })
    }
}
