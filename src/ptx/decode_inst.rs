//! Per-opcode decoding: each supported opcode/modifier/type combination becomes one
//! [`Op`](super::ir::Op); anything else is a load-time error naming the line and the
//! instruction.

use super::alu::*;
use super::ast::{self, Operand};
use super::decode::ProgramBuilder;
use super::ir::{
    AtomOp, BoolOp, Cmp, Fn1, Fn2, Fn3, Inst, Op, ShflMode, Space, Src, Sreg, Ty, VoteMode,
};
use crate::error::Result;

/// The special register `name` (`%tid.x`, `%laneid`, ...).
pub(super) fn sreg(name: &str) -> Option<Sreg> {
    let (base, comp) = match name.rsplit_once('.') {
        Some((b, c)) => (b, Some(c)),
        None => (name, None),
    };
    let axis = |c: Option<&str>| match c {
        Some("x") => Some(0u8),
        Some("y") => Some(1),
        Some("z") => Some(2),
        _ => None,
    };
    Some(match (base, comp) {
        ("%tid", c) => Sreg::Tid(axis(c)?),
        ("%ntid", c) => Sreg::Ntid(axis(c)?),
        ("%ctaid", c) => Sreg::Ctaid(axis(c)?),
        ("%nctaid", c) => Sreg::Nctaid(axis(c)?),
        ("%laneid", None) => Sreg::Laneid,
        ("%warpid", None) => Sreg::Warpid,
        ("%nwarpid", None) => Sreg::Nwarpid,
        ("%smid", None) => Sreg::Smid,
        ("%nsmid", None) => Sreg::Nsmid,
        ("%clock", None) => Sreg::Clock,
        ("%clock64", None) => Sreg::Clock64,
        ("%globaltimer", None) => Sreg::Globaltimer,
        ("%lanemask_eq", None) => Sreg::Lanemask(Cmp::Eq),
        ("%lanemask_lt", None) => Sreg::Lanemask(Cmp::Lt),
        ("%lanemask_le", None) => Sreg::Lanemask(Cmp::Le),
        ("%lanemask_gt", None) => Sreg::Lanemask(Cmp::Gt),
        ("%lanemask_ge", None) => Sreg::Lanemask(Cmp::Ge),
        ("%dynamic_smem_size", None) => Sreg::DynamicSmem,
        ("%total_smem_size", None) => Sreg::TotalSmem,
        ("%gridid", None) => Sreg::Gridid,
        _ => return None,
    })
}

fn parse_ty(s: &str) -> Option<Ty> {
    Some(match s {
        "u8" | "b8" => Ty::U8,
        "u16" | "b16" => Ty::U16,
        "u32" | "b32" => Ty::U32,
        "u64" | "b64" => Ty::U64,
        "s8" => Ty::S8,
        "s16" => Ty::S16,
        "s32" => Ty::S32,
        "s64" => Ty::S64,
        "f32" => Ty::F32,
        "f64" => Ty::F64,
        "pred" => Ty::Pred,
        _ => return None,
    })
}

/// Modifiers not yet consumed.
struct Mods<'a> {
    list: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    fn has(&mut self, m: &str) -> bool {
        match self.list.iter().position(|x| *x == m) {
            Some(p) => {
                self.list.remove(p);
                true
            }
            None => false,
        }
    }
    fn one_of(&mut self, opts: &[&'a str]) -> Option<&'a str> {
        let p = self.list.iter().position(|x| opts.contains(x))?;
        Some(self.list.remove(p))
    }
    /// Removes and returns every type modifier, in order.
    fn types(&mut self) -> Vec<Ty> {
        let mut out = Vec::new();
        self.list.retain(|m| match parse_ty(m) {
            Some(t) => {
                out.push(t);
                false
            }
            None => true,
        });
        out
    }
    /// Drops modifiers that do not change results on the host (caching, ordering scopes).
    fn drop_ignorable(&mut self) {
        const IGN: &[&str] = &[
            "volatile", "relaxed", "acquire", "release", "acq_rel", "weak", "sys", "gpu", "cta",
            "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "uni", "aligned", "sc", "mmio",
        ];
        self.list
            .retain(|m| !IGN.contains(m) && !m.starts_with("L1::") && !m.starts_with("L2::"));
    }
}

macro_rules! int_fn {
    ($ty:expr, $f:ident $(, $c:tt)*) => {
        match $ty {
            Ty::U8 => Some($f::<u8 $(, $c)*> as _),
            Ty::U16 => Some($f::<u16 $(, $c)*> as _),
            Ty::U32 => Some($f::<u32 $(, $c)*> as _),
            Ty::U64 => Some($f::<u64 $(, $c)*> as _),
            Ty::S8 => Some($f::<i8 $(, $c)*> as _),
            Ty::S16 => Some($f::<i16 $(, $c)*> as _),
            Ty::S32 => Some($f::<i32 $(, $c)*> as _),
            Ty::S64 => Some($f::<i64 $(, $c)*> as _),
            _ => None,
        }
    };
}

macro_rules! flt_fn {
    ($ty:expr, $f:ident $(, $c:tt)*) => {
        match $ty {
            Ty::F32 => Some($f::<f32 $(, $c)*> as _),
            Ty::F64 => Some($f::<f64 $(, $c)*> as _),
            _ => None,
        }
    };
}

/// Picks `$f::<F, R, FTZ, SAT>` for run-time `r`, `ftz`, `sat`.
macro_rules! rfs {
    ($ty:expr, $f:ident, $r:expr, $ftz:expr, $sat:expr) => {
        match ($r, $ftz, $sat) {
            (0, false, false) => flt_fn!($ty, $f, 0, false, false),
            (1, false, false) => flt_fn!($ty, $f, 1, false, false),
            (2, false, false) => flt_fn!($ty, $f, 2, false, false),
            (3, false, false) => flt_fn!($ty, $f, 3, false, false),
            (0, true, false) => flt_fn!($ty, $f, 0, true, false),
            (1, true, false) => flt_fn!($ty, $f, 1, true, false),
            (2, true, false) => flt_fn!($ty, $f, 2, true, false),
            (3, true, false) => flt_fn!($ty, $f, 3, true, false),
            (0, false, true) => flt_fn!($ty, $f, 0, false, true),
            (1, false, true) => flt_fn!($ty, $f, 1, false, true),
            (2, false, true) => flt_fn!($ty, $f, 2, false, true),
            (3, false, true) => flt_fn!($ty, $f, 3, false, true),
            (0, true, true) => flt_fn!($ty, $f, 0, true, true),
            (1, true, true) => flt_fn!($ty, $f, 1, true, true),
            (2, true, true) => flt_fn!($ty, $f, 2, true, true),
            _ => flt_fn!($ty, $f, 3, true, true),
        }
    };
}

/// Picks `$f::<F, R, FTZ>`.
macro_rules! rf {
    ($ty:expr, $f:ident, $r:expr, $ftz:expr) => {
        match ($r, $ftz) {
            (0, false) => flt_fn!($ty, $f, 0, false),
            (1, false) => flt_fn!($ty, $f, 1, false),
            (2, false) => flt_fn!($ty, $f, 2, false),
            (3, false) => flt_fn!($ty, $f, 3, false),
            (0, true) => flt_fn!($ty, $f, 0, true),
            (1, true) => flt_fn!($ty, $f, 1, true),
            (2, true) => flt_fn!($ty, $f, 2, true),
            _ => flt_fn!($ty, $f, 3, true),
        }
    };
}

/// Picks `$f::<F, K, FTZ>` for a const `K`.
macro_rules! kf {
    ($ty:expr, $f:ident, $k:expr, $ftz:expr) => {
        if $ftz {
            flt_fn!($ty, $f, $k, true)
        } else {
            flt_fn!($ty, $f, $k, false)
        }
    };
}

fn int_cmp(c: Cmp, ty: Ty) -> Option<Fn2> {
    match c {
        Cmp::Eq => int_fn!(ty, icmp, 0),
        Cmp::Ne => int_fn!(ty, icmp, 1),
        Cmp::Lt => int_fn!(ty, icmp, 2),
        Cmp::Le => int_fn!(ty, icmp, 3),
        Cmp::Gt => int_fn!(ty, icmp, 4),
        Cmp::Ge => int_fn!(ty, icmp, 5),
        _ => None,
    }
}

fn flt_cmp(c: Cmp, ty: Ty, ftz: bool) -> Option<Fn2> {
    macro_rules! c {
        ($k:expr) => {
            kf!(ty, fcmp, $k, ftz)
        };
    }
    match c {
        Cmp::Eq => c!(0),
        Cmp::Ne => c!(1),
        Cmp::Lt => c!(2),
        Cmp::Le => c!(3),
        Cmp::Gt => c!(4),
        Cmp::Ge => c!(5),
        Cmp::Equ => c!(6),
        Cmp::Neu => c!(7),
        Cmp::Ltu => c!(8),
        Cmp::Leu => c!(9),
        Cmp::Gtu => c!(10),
        Cmp::Geu => c!(11),
        Cmp::Num => c!(12),
        Cmp::Nan => c!(13),
    }
}

fn parse_cmp(s: &str) -> Option<(Cmp, Option<bool>)> {
    // The bool says the comparison forces unsigned (lo/ls/hi/hs).
    Some(match s {
        "eq" => (Cmp::Eq, None),
        "ne" => (Cmp::Ne, None),
        "lt" => (Cmp::Lt, None),
        "le" => (Cmp::Le, None),
        "gt" => (Cmp::Gt, None),
        "ge" => (Cmp::Ge, None),
        "lo" => (Cmp::Lt, Some(true)),
        "ls" => (Cmp::Le, Some(true)),
        "hi" => (Cmp::Gt, Some(true)),
        "hs" => (Cmp::Ge, Some(true)),
        "equ" => (Cmp::Equ, None),
        "neu" => (Cmp::Neu, None),
        "ltu" => (Cmp::Ltu, None),
        "leu" => (Cmp::Leu, None),
        "gtu" => (Cmp::Gtu, None),
        "geu" => (Cmp::Geu, None),
        "num" => (Cmp::Num, None),
        "nan" => (Cmp::Nan, None),
        _ => return None,
    })
}

fn unsigned_of(t: Ty) -> Ty {
    match t {
        Ty::S8 => Ty::U8,
        Ty::S16 => Ty::U16,
        Ty::S32 => Ty::U32,
        Ty::S64 => Ty::U64,
        t => t,
    }
}

fn wide_of(t: Ty) -> Option<Ty> {
    Some(match t {
        Ty::U16 => Ty::U32,
        Ty::U32 => Ty::U64,
        Ty::S16 => Ty::S32,
        Ty::S32 => Ty::S64,
        _ => return None,
    })
}

fn mul_wide(t: Ty) -> Option<Fn2> {
    Some(match t {
        Ty::U16 => imul_wide::<u16, u32>,
        Ty::U32 => imul_wide::<u32, u64>,
        Ty::S16 => imul_wide::<i16, i32>,
        Ty::S32 => imul_wide::<i32, i64>,
        _ => return None,
    })
}

fn mad_wide(t: Ty) -> Option<Fn3> {
    Some(match t {
        Ty::U16 => imad_wide::<u16, u32>,
        Ty::U32 => imad_wide::<u32, u64>,
        Ty::S16 => imad_wide::<i16, i32>,
        Ty::S32 => imad_wide::<i32, i64>,
        _ => return None,
    })
}

fn cvt_fn(d: Ty, s: Ty, r: u8, ir: u8, ftz: bool, sat: bool) -> Option<Fn1> {
    macro_rules! ii {
        ($S:ty) => {
            if sat {
                int_fn!(d, cvt_ii_to, $S, true)
            } else {
                int_fn!(d, cvt_ii_to, $S, false)
            }
        };
    }
    macro_rules! fi {
        ($S:ty) => {
            match (ir, ftz) {
                (1, false) => int_fn!(d, cvt_fi_to, $S, 1, false),
                (3, false) => int_fn!(d, cvt_fi_to, $S, 3, false),
                (4, false) => int_fn!(d, cvt_fi_to, $S, 4, false),
                (_, false) => int_fn!(d, cvt_fi_to, $S, 2, false),
                (1, true) => int_fn!(d, cvt_fi_to, $S, 1, true),
                (3, true) => int_fn!(d, cvt_fi_to, $S, 3, true),
                (4, true) => int_fn!(d, cvt_fi_to, $S, 4, true),
                (_, true) => int_fn!(d, cvt_fi_to, $S, 2, true),
            }
        };
    }
    macro_rules! iff {
        ($S:ty) => {
            match (r, sat) {
                (0, false) => flt_fn!(d, cvt_if_to, $S, 0, false),
                (1, false) => flt_fn!(d, cvt_if_to, $S, 1, false),
                (2, false) => flt_fn!(d, cvt_if_to, $S, 2, false),
                (3, false) => flt_fn!(d, cvt_if_to, $S, 3, false),
                (0, true) => flt_fn!(d, cvt_if_to, $S, 0, true),
                (1, true) => flt_fn!(d, cvt_if_to, $S, 1, true),
                (2, true) => flt_fn!(d, cvt_if_to, $S, 2, true),
                _ => flt_fn!(d, cvt_if_to, $S, 3, true),
            }
        };
    }
    macro_rules! ff {
        ($S:ty) => {{
            let key = (r, ir, ftz, sat);
            macro_rules! one {
                ($r:expr, $ir:expr) => {
                    match (ftz, sat) {
                        (false, false) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, false, false),
                        (true, false) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, true, false),
                        (false, true) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, false, true),
                        (true, true) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, true, true),
                    }
                };
            }
            match (key.0, key.1) {
                (_, 1) => one!(0, 1),
                (_, 2) => one!(0, 2),
                (_, 3) => one!(0, 3),
                (_, 4) => one!(0, 4),
                (1, _) => one!(1, 0),
                (2, _) => one!(2, 0),
                (3, _) => one!(3, 0),
                _ => one!(0, 0),
            }
        }};
    }
    match s {
        Ty::U8 if d.int() => ii!(u8),
        Ty::U16 if d.int() => ii!(u16),
        Ty::U32 if d.int() => ii!(u32),
        Ty::U64 if d.int() => ii!(u64),
        Ty::S8 if d.int() => ii!(i8),
        Ty::S16 if d.int() => ii!(i16),
        Ty::S32 if d.int() => ii!(i32),
        Ty::S64 if d.int() => ii!(i64),
        Ty::F32 if d.int() => fi!(f32),
        Ty::F64 if d.int() => fi!(f64),
        Ty::U8 => iff!(u8),
        Ty::U16 => iff!(u16),
        Ty::U32 => iff!(u32),
        Ty::U64 => iff!(u64),
        Ty::S8 => iff!(i8),
        Ty::S16 => iff!(i16),
        Ty::S32 => iff!(i32),
        Ty::S64 => iff!(i64),
        Ty::F32 => ff!(f32),
        Ty::F64 => ff!(f64),
        Ty::Pred => None,
    }
}

// Destination-first adaptors so the type dispatch macros can fix the source type.
fn cvt_ii_to<D: Int, S: Int, const SAT: bool>(a: u64) -> u64 {
    cvt_ii::<S, D, SAT>(a)
}
fn cvt_fi_to<D: Int, S: Float, const IR: u8, const FTZ: bool>(a: u64) -> u64 {
    cvt_fi::<S, D, IR, FTZ>(a)
}
fn cvt_if_to<D: Float, S: Int, const R: u8, const SAT: bool>(a: u64) -> u64 {
    cvt_if::<S, D, R, SAT>(a)
}
fn cvt_ff_to<D: Float, S: Float, const R: u8, const IR: u8, const FTZ: bool, const SAT: bool>(
    a: u64,
) -> u64 {
    cvt_ff::<S, D, R, IR, FTZ, SAT>(a)
}

fn pack2<const W: u32>(a: u64, b: u64) -> u64 {
    let m = (1u64 << W) - 1;
    (a & m) | ((b & m) << W)
}
fn unpack<const SHIFT: u32, const W: u32>(a: u64) -> u64 {
    (a >> SHIFT) & ((1u64 << W) - 1)
}

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

    fn decode_op(&mut self, i: &ast::Instruction) -> Result<Vec<Op>> {
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
                if !matches!(space, Space::Global | Space::Shared | Space::Local)
                    || !matches!(ty, Ty::U64 | Ty::U32)
                {
                    return Err(unsupported("cvta for this space"));
                }
                Op::Cvta {
                    to,
                    space,
                    d: self.reg(i, &ops[0])?,
                    a: self.src(i, &ops[1], ty)?,
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
            "bar" | "barrier" => {
                if m.has("warp") {
                    m.has("sync");
                    self.done(i, m)?;
                    Op::Nop
                } else {
                    m.drop_ignorable();
                    if !m.has("sync") {
                        m.has("cta");
                        return Err(unsupported(
                            "this barrier form (only bar.sync / barrier.sync)",
                        ));
                    }
                    self.done(i, m)?;
                    if ops.is_empty() || ops.len() > 2 {
                        return Err(unsupported("this barrier operand list"));
                    }
                    let id = self.src(i, &ops[0], Ty::U32)?;
                    let count = match ops.get(1) {
                        Some(o) => Some(self.src(i, o, Ty::U32)?),
                        None => None,
                    };
                    Op::Bar { id, count }
                }
            }
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
            "prefetch" | "prefetchu" | "pmevent" | "nanosleep" => Op::Nop,
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

    fn one_ty(&self, i: &ast::Instruction, m: &mut Mods<'_>) -> Result<Ty> {
        match m.types()[..] {
            [t] => Ok(t),
            _ => Err(self.err(i.line, format!("`{i}`: expected exactly one supported type modifier (f16, bf16 and packed types are not supported)"))),
        }
    }

    fn done(&self, i: &ast::Instruction, m: Mods<'_>) -> Result<()> {
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

    fn space(&self, _i: &ast::Instruction, m: &mut Mods<'_>) -> Result<Space> {
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

    fn binary(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
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
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
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

    fn unary(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
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

    fn ternary(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
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

    fn setp(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not supported by the host platform's PTX engine"),
            )
        };
        let ftz = m.has("ftz");
        let bop = match m.one_of(&["and", "or", "xor"]) {
            Some("and") => Some(BoolOp::And),
            Some("or") => Some(BoolOp::Or),
            Some("xor") => Some(BoolOp::Xor),
            _ => None,
        };
        let cmp = m
            .list
            .iter()
            .position(|x| parse_cmp(x).is_some())
            .map(|p| m.list.remove(p));
        let (cmp, force_unsigned) = cmp
            .and_then(parse_cmp)
            .ok_or_else(|| unsupported("setp without a comparison"))?;
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
        let f = f.ok_or_else(|| unsupported("this comparison/type"))?;
        let (p, q) = match &ops.first() {
            Some(Operand::Pair(p, q)) => (
                self.reg(i, &Operand::Reg(p.clone()))?,
                Some(self.reg(i, &Operand::Reg(q.clone()))?),
            ),
            Some(o) => (self.reg(i, o)?, None),
            None => return Err(unsupported("setp without operands")),
        };
        let need = if bop.is_some() { 4 } else { 3 };
        if ops.len() != need {
            return Err(self.err(i.line, format!("`{i}`: expected {need} operands")));
        }
        let comb = match bop {
            Some(b) => Some(match &ops[3] {
                Operand::Not(c) => (b, self.src(i, &Operand::Reg(c.clone()), Ty::Pred)?, true),
                o => (b, self.src(i, o, Ty::Pred)?, false),
            }),
            None => None,
        };
        Ok(Op::Setp {
            f,
            p,
            q,
            a: self.src(i, &ops[1], ty)?,
            b: self.src(i, &ops[2], ty)?,
            comb,
        })
    }

    fn ld_st(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
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

    fn atom(&mut self, i: &ast::Instruction, mut m: Mods<'_>) -> Result<Op> {
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
        let ty = self.one_ty(i, &mut m)?;
        self.done(i, m)?;
        let ok_ty = match op {
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
        let b = self.src(i, &ops[base], ty)?;
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

/// `shf.{l,r}.{wrap,clamp}.b32 d, a, b, c`: funnel shift of the 64-bit `b:a` by `c`.
fn funnel<const LEFT: bool, const WRAP: bool>(a: u64, b: u64, c: u64) -> u64 {
    let n = if WRAP {
        (c as u32) & 31
    } else {
        (c as u32).min(32)
    };
    let v = ((b as u32 as u64) << 32) | (a as u32 as u64);
    if LEFT {
        ((v << n) >> 32) as u32 as u64
    } else {
        (v >> n) as u32 as u64
    }
}

fn isad<I: Int>(a: u64, b: u64, c: u64) -> u64 {
    let (x, y) = (I::from_bits(a).wide(), I::from_bits(b).wide());
    I::from_wide((x - y).abs() + I::from_bits(c).wide()).to_bits()
}
