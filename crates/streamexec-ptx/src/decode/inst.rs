//! Per-opcode decoding: each supported opcode/modifier/type combination becomes one
//! [`Op`](crate::ir::Op); anything else is a load-time error naming the line and the
//! instruction. Arithmetic is in `arith.rs`, memory and atomics in `mem.rs`.

use super::ProgramBuilder;
use super::fns::*;
use crate::alu::*;
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{
    Fn1, Fn2, Fn3, Inst, LOCAL_WINDOW, Op, PARAM_WINDOW, SHARED_WINDOW, ShflMode, Space, Src, Ty,
    VoteMode,
};

impl ProgramBuilder<'_> {
    /// Decodes one instruction (possibly into several ops).
    pub(super) fn inst(&mut self, i: &ast::Instruction) -> Result<()> {
        let guard = match &i.guard {
            Some(g) => Some((self.reg(i, &Operand::Reg(g.reg.clone()))?, g.negated)),
            None => None,
        };
        let ops = self.decode_op(i)?;
        let text = i.to_string();
        for op in ops {
            self.push(i.line, text.clone(), Inst { op, guard });
        }
        Ok(())
    }

    pub(super) fn decode_op(&mut self, i: &ast::Instruction) -> Result<Vec<Op>> {
        // Half types: their own decoder, but for `set`, `atom` and `red`, whose decoders
        // take every type.
        if !matches!(i.opcode.as_str(), "atom" | "red" | "set")
            && i.modifiers
                .iter()
                .any(|m| super::half::half_kind(m).is_some())
        {
            return self.half(i);
        }
        let mut m = Mods {
            list: i.modifiers.iter().map(String::as_str).collect(),
        };
        let ops = &i.operands;
        let line = i.line;
        let unsupported = |what: &str| {
            self.err(
                line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        let want = |n: usize| -> Result<()> {
            if ops.len() == n {
                Ok(())
            } else {
                Err(self.err(
                    line,
                    format!("`{i}`: expected {n} operands, found {}", ops.len()),
                ))
            }
        };
        let op: Op = match i.opcode.as_str() {
            "mov" => {
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(2)?;
                match (&ops[0], &ops[1]) {
                    (Operand::Vector(parts), src) => {
                        // Unpack: mov.b64 {lo, hi}, %rd.
                        if parts.len() != 2 || !matches!(ty, Ty::U64 | Ty::U32) {
                            return Err(unsupported("this vector mov"));
                        }
                        let a = self.src(i, src, ty)?;
                        let mut out = Vec::new();
                        for (k, p) in parts.iter().enumerate() {
                            if matches!(p, Operand::Sink) {
                                continue;
                            }
                            let d = self.reg(i, p)?;
                            let f: Fn1 = match (ty, k) {
                                (Ty::U64, 0) => unpack::<0, 32>,
                                (Ty::U64, _) => unpack::<32, 32>,
                                (_, 0) => unpack::<0, 16>,
                                _ => unpack::<16, 16>,
                            };
                            out.push(Op::Un { f, d, a });
                        }
                        return Ok(out);
                    }
                    (d, Operand::Vector(parts)) => {
                        if parts.len() != 2 || !matches!(ty, Ty::U64 | Ty::U32) {
                            return Err(unsupported("this vector mov"));
                        }
                        let half = if ty == Ty::U64 { Ty::U32 } else { Ty::U16 };
                        let (a, b) = (self.src(i, &parts[0], half)?, self.src(i, &parts[1], half)?);
                        let f: Fn2 = if ty == Ty::U64 {
                            pack2::<32>
                        } else {
                            pack2::<16>
                        };
                        Op::Bin {
                            f,
                            d: self.reg(i, d)?,
                            a,
                            b,
                        }
                    }
                    (d, a) => Op::Un {
                        f: mov,
                        d: self.reg(i, d)?,
                        a: self.src(i, a, ty)?,
                    },
                }
            }
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "copysign" | "mul24" => {
                return self.binary(i, m).map(|o| vec![o]);
            }
            "shl" | "shr" => {
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(3)?;
                let f: Option<Fn2> = if i.opcode == "shl" {
                    int_fn!(unsigned_of(ty), ishift, true)
                } else {
                    int_fn!(ty, ishift, false)
                };
                let f = f.ok_or_else(|| unsupported("this shift type"))?;
                Op::Bin {
                    f,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                    b: self.src(i, &ops[2], Ty::U32)?,
                }
            }
            "neg" | "abs" | "not" | "cnot" | "popc" | "clz" | "brev" | "bfind" | "sqrt" | "rcp"
            | "rsqrt" | "sin" | "cos" | "ex2" | "lg2" | "tanh" | "testp" => {
                return self.unary(i, m).map(|o| vec![o]);
            }
            "mad" | "fma" | "mad24" | "selp" | "bfe" | "prmt" | "sad" => {
                return self.ternary(i, m).map(|o| vec![o]);
            }
            "addc" | "subc" => {
                let cout = m.has("cc");
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(3)?;
                if !ty.int() || ty.bytes() < 4 {
                    return Err(unsupported("this carry type"));
                }
                Op::Carry {
                    sub: i.opcode == "subc",
                    wide: ty.bytes() == 8,
                    cin: true,
                    cout,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                    b: self.src(i, &ops[2], ty)?,
                }
            }
            "madc" => {
                let cout = m.has("cc");
                let hi = m.one_of(&["lo", "hi"]) == Some("hi");
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(4)?;
                if !ty.int() || ty.bytes() < 4 {
                    return Err(unsupported("this carry type"));
                }
                Op::MadCarry {
                    hi,
                    wide: ty.bytes() == 8,
                    signed: ty.signed(),
                    cin: true,
                    cout,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                    b: self.src(i, &ops[2], ty)?,
                    c: self.src(i, &ops[3], ty)?,
                }
            }
            "lop3" => {
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(5)?;
                let lut = match (&ops[4], ty) {
                    (Operand::Imm(ast::Imm::Int(v)), Ty::U32) if (0..256).contains(v) => *v as u8,
                    _ => {
                        return Err(unsupported(
                            "lop3 without a .b32 type and an immediate 8-bit LUT",
                        ));
                    }
                };
                Op::Lop3 {
                    lut,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                    b: self.src(i, &ops[2], ty)?,
                    c: self.src(i, &ops[3], ty)?,
                }
            }
            "shf" => {
                let dir = m.one_of(&["l", "r"]);
                let mode = m.one_of(&["wrap", "clamp"]);
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(4)?;
                let f: Fn3 = match (dir, mode, ty) {
                    (Some("l"), Some("wrap"), Ty::U32) => funnel::<true, true>,
                    (Some("l"), Some("clamp"), Ty::U32) => funnel::<true, false>,
                    (Some("r"), Some("wrap"), Ty::U32) => funnel::<false, true>,
                    (Some("r"), Some("clamp"), Ty::U32) => funnel::<false, false>,
                    _ => return Err(unsupported("this shf form")),
                };
                Op::Tern {
                    f,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                    b: self.src(i, &ops[2], ty)?,
                    c: self.src(i, &ops[3], Ty::U32)?,
                }
            }
            "bfi" => {
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(5)?;
                if !matches!(ty, Ty::U32 | Ty::U64) {
                    return Err(unsupported("this bfi type"));
                }
                Op::Bfi {
                    wide: ty == Ty::U64,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                    b: self.src(i, &ops[2], ty)?,
                    c: self.src(i, &ops[3], Ty::U32)?,
                    e: self.src(i, &ops[4], Ty::U32)?,
                }
            }
            "setp" => return self.setp(i, m).map(|o| vec![o]),
            "set" => return self.set(i),
            "cvt" => {
                let ftz = m.has("ftz");
                let sat = m.has("sat");
                let r = m.one_of(&["rn", "rz", "rm", "rp"]);
                let ir = m.one_of(&["rni", "rzi", "rmi", "rpi"]);
                let tys = m.types();
                self.done(i, m)?;
                want(2)?;
                let [d, s] = tys[..] else {
                    return Err(self.err(line, format!("`{i}`: cvt needs a destination and a source type (f16/bf16 are not supported)")));
                };
                let rc = match r {
                    Some("rz") => 1,
                    Some("rm") => 2,
                    Some("rp") => 3,
                    _ => 0,
                };
                let irc = match ir {
                    Some("rni") => 1,
                    Some("rzi") => 2,
                    Some("rmi") => 3,
                    Some("rpi") => 4,
                    _ => 0,
                };
                if ir.is_some() && !s.float() {
                    return Err(unsupported("integer rounding of an integer source"));
                }
                if irc != 0 && d.float() && s.float() && d != s {
                    return Err(unsupported("integer rounding with a width change"));
                }
                let f = cvt_fn(d, s, rc, irc, ftz, sat)
                    .ok_or_else(|| unsupported("this conversion"))?;
                Op::Un {
                    f,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], s)?,
                }
            }
            "cvta" => {
                let to = m.has("to");
                let space = self.space(i, &mut m)?;
                let ty = self.one_ty(i, &mut m)?;
                self.done(i, m)?;
                want(2)?;
                if space == Space::Generic || !matches!(ty, Ty::U64 | Ty::U32) {
                    return Err(unsupported("cvta for this space"));
                }
                Op::Cvta {
                    to,
                    space,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
                }
            }
            "isspacep" => {
                // Generic addresses of the shared, local and param windows fall in their
                // window; every other address is device memory, where `.const` data lives too.
                let space = self.space(i, &mut m)?;
                m.drop_ignorable();
                self.done(i, m)?;
                want(2)?;
                let f: Fn2 = match space {
                    Space::Shared => in_window::<SHARED_WINDOW>,
                    Space::Local => in_window::<LOCAL_WINDOW>,
                    Space::Param => in_window::<PARAM_WINDOW>,
                    Space::Global => in_device_memory,
                    Space::Generic => return Err(unsupported("isspacep without a state space")),
                };
                Op::Setp {
                    f,
                    p: self.reg(i, &ops[0])?,
                    q: None,
                    a: self.src(i, &ops[1], Ty::U64)?,
                    b: Src::Imm(0),
                    comb: None,
                    hi: None,
                }
            }
            "ld" | "ldu" | "st" => return self.ld_st(i, m).map(|o| vec![o]),
            "atom" | "red" => return self.atom(i, m).map(|o| vec![o]),
            "bra" => {
                m.drop_ignorable();
                self.done(i, m)?;
                want(1)?;
                let label = match &ops[0] {
                    Operand::Symbol { name, offset: 0 } | Operand::Reg(name) => name.clone(),
                    _ => return Err(unsupported("an indirect branch")),
                };
                self.branch_fixup(self.code.len(), &label, i);
                Op::Bra { target: 0 }
            }
            "ret" => {
                m.drop_ignorable();
                self.done(i, m)?;
                if self.in_entry { Op::Exit } else { Op::Ret }
            }
            "exit" => {
                self.done(i, m)?;
                Op::Exit
            }
            "trap" => Op::Trap,
            "call" => {
                m.drop_ignorable();
                self.done(i, m)?;
                let mut rets: &[Operand] = &[];
                let mut args: &[Operand] = &[];
                let mut callee = None;
                for o in ops {
                    match o {
                        Operand::List(l) if callee.is_none() => rets = l,
                        Operand::List(l) => args = l,
                        Operand::Symbol { name, offset: 0 } | Operand::Reg(name)
                            if callee.is_none() =>
                        {
                            callee = Some(name.clone())
                        }
                        _ => {
                            return Err(unsupported(
                                "this call form (indirect calls and prototypes)",
                            ));
                        }
                    }
                }
                let callee = callee.ok_or_else(|| unsupported("a call without a callee"))?;
                self.call(i, &callee, rets, args)?
            }
            "bar" | "barrier" => return self.barrier(i, m).map(|o| vec![o]),
            "match" => return self.match_sync(i, m).map(|o| vec![o]),
            "redux" => return self.redux(i, m).map(|o| vec![o]),
            "membar" | "fence" => {
                m.drop_ignorable();
                m.one_of(&["gl", "sys", "cta"]);
                m.has("sc");
                m.has("acq_rel");
                self.done(i, m)?;
                Op::Nop
            }
            "activemask" => {
                m.types();
                self.done(i, m)?;
                want(1)?;
                Op::Activemask {
                    d: self.reg(i, &ops[0])?,
                }
            }
            "shfl" => {
                m.has("sync");
                let mode = match m.one_of(&["up", "down", "bfly", "idx"]) {
                    Some("up") => ShflMode::Up,
                    Some("down") => ShflMode::Down,
                    Some("bfly") => ShflMode::Bfly,
                    Some(_) => ShflMode::Idx,
                    None => return Err(unsupported("shfl without a mode")),
                };
                let tys = m.types();
                self.done(i, m)?;
                if tys != [Ty::U32] || !(ops.len() == 5 || ops.len() == 4) {
                    return Err(unsupported(
                        "this shfl form (only shfl.sync.MODE.b32 d[|p], a, b, c, mask)",
                    ));
                }
                let (d, p) = match &ops[0] {
                    Operand::Pair(d, p) => (
                        self.reg(i, &Operand::Reg(d.clone()))?,
                        Some(self.reg(i, &Operand::Reg(p.clone()))?),
                    ),
                    o => (self.reg(i, o)?, None),
                };
                let mask = if ops.len() == 5 {
                    self.src(i, &ops[4], Ty::U32)?
                } else {
                    Src::Imm(u32::MAX as u64)
                };
                Op::Shfl {
                    mode,
                    d,
                    p,
                    a: self.src(i, &ops[1], Ty::U32)?,
                    b: self.src(i, &ops[2], Ty::U32)?,
                    c: self.src(i, &ops[3], Ty::U32)?,
                    mask,
                }
            }
            "vote" => {
                m.has("sync");
                let mode = match m.one_of(&["all", "any", "uni", "ballot"]) {
                    Some("all") => VoteMode::All,
                    Some("any") => VoteMode::Any,
                    Some("uni") => VoteMode::Uni,
                    Some(_) => VoteMode::Ballot,
                    None => return Err(unsupported("vote without a mode")),
                };
                m.types();
                self.done(i, m)?;
                if !(ops.len() == 3 || ops.len() == 2) {
                    return Err(unsupported("this vote operand list"));
                }
                let (a, neg) = match &ops[1] {
                    Operand::Not(p) => (self.src(i, &Operand::Reg(p.clone()), Ty::Pred)?, true),
                    o => (self.src(i, o, Ty::Pred)?, false),
                };
                let mask = match ops.get(2) {
                    Some(o) => self.src(i, o, Ty::U32)?,
                    None => Src::Imm(u32::MAX as u64),
                };
                Op::Vote {
                    mode,
                    d: self.reg(i, &ops[0])?,
                    a,
                    neg,
                    mask,
                }
            }
            "nanosleep" => {
                // `nanosleep.u32 t`: `t` nanoseconds in a register or a 32-bit immediate.
                let bad = || {
                    self.err(
                        line,
                        format!(
                            "`{i}`: nanosleep takes the type .u32 and one operand, a register \
                             or an unsigned 32-bit immediate"
                        ),
                    )
                };
                if m.list != ["u32"] || ops.len() != 1 {
                    return Err(bad());
                }
                let t = match &ops[0] {
                    Operand::Imm(ast::Imm::Int(v)) if (0..=u32::MAX as i64).contains(v) => {
                        Src::Imm(*v as u64)
                    }
                    o @ Operand::Reg(_) => match self.src(i, o, Ty::U32)? {
                        r @ Src::Reg(_) => r,
                        _ => return Err(bad()),
                    },
                    _ => return Err(bad()),
                };
                Op::Nanosleep { t }
            }
            "prefetch" | "prefetchu" | "pmevent" => Op::Nop,
            _ => {
                return Err(self.err(
                    line,
                    format!(
                        "`{i}`: opcode `{}` is not supported by the host platform's PTX engine",
                        i.opcode
                    ),
                ));
            }
        };
        Ok(vec![op])
    }

    pub(super) fn one_ty(&self, i: &ast::Instruction, m: &mut Mods<'_>) -> Result<Ty> {
        match m.types()[..] {
            [t] => Ok(t),
            _ => Err(self.err(i.line, format!("`{i}`: expected exactly one supported type modifier (f16, bf16 and packed types are not supported)"))),
        }
    }

    pub(super) fn done(&self, i: &ast::Instruction, m: Mods<'_>) -> Result<()> {
        match m.list.first() {
            None => Ok(()),
            Some(x) => Err(self.err(
                i.line,
                format!(
                    "`{i}`: modifier `.{x}` is not supported by the host platform's PTX engine"
                ),
            )),
        }
    }

    pub(super) fn space(&self, _i: &ast::Instruction, m: &mut Mods<'_>) -> Result<Space> {
        Ok(
            match m.one_of(&["global", "shared", "local", "const", "param"]) {
                Some("global") | Some("const") => Space::Global,
                Some("shared") => Space::Shared,
                Some("local") => Space::Local,
                Some("param") => Space::Param,
                _ => Space::Generic,
            },
        )
    }
}
