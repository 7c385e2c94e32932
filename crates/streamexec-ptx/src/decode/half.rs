//! Decoding of instructions on `.f16`, `.bf16`, `.f16x2` and `.bf16x2` values: arithmetic,
//! `setp` and `cvt` become lane functions of [`alu::half`](crate::alu::half); `mov`, `ld`,
//! `st` of halves are the same instructions on `.b16` / `.b32`.
//!
//! Halves live in the low 16 bits of a register slot and pairs in the low 32 (element 0 in
//! bits 0..16). Immediates of half instructions are their bits (`0x3C00`); a floating-point
//! literal is refused rather than guessed at.

use super::ProgramBuilder;
use super::fns::{Mods, parse_ty};
use crate::alu::half::{self as h, CvtSpec, Kind};
use crate::alu::{RM, RN, RP, RZ};
use crate::ast::{self, Operand};
use crate::error::PtxResult as Result;
use crate::ir::{Cmp, Fn1, Fn2, Fn3, Op, Src, Ty};

/// A half type modifier: (`bf16`, packed pair).
pub(super) fn half_kind(m: &str) -> Option<(bool, bool)> {
    Some(match m {
        "f16" => (false, false),
        "bf16" => (true, false),
        "f16x2" => (false, true),
        "bf16x2" => (true, true),
        _ => return None,
    })
}

/// Picks `$f::<BF, X2, $rest...>` for run-time `bf`, `x2`.
macro_rules! bx {
    ($bf:expr, $x2:expr, $f:ident $(, $c:tt)*) => {
        match ($bf, $x2) {
            (false, false) => $f::<false, false $(, $c)*> as _,
            (false, true) => $f::<false, true $(, $c)*> as _,
            (true, false) => $f::<true, false $(, $c)*> as _,
            (true, true) => $f::<true, true $(, $c)*> as _,
        }
    };
}

/// Picks `$f::<BF, X2, $k, FTZ, SAT>` for run-time `ftz`, `sat`.
macro_rules! bin_fn {
    ($bf:expr, $x2:expr, $k:tt, $ftz:expr, $sat:expr) => {
        match ($ftz, $sat) {
            (false, false) => bx!($bf, $x2, hbin, $k, false, false),
            (true, false) => bx!($bf, $x2, hbin, $k, true, false),
            (false, true) => bx!($bf, $x2, hbin, $k, false, true),
            (true, true) => bx!($bf, $x2, hbin, $k, true, true),
        }
    };
}

use h::{happrox, hbin, hcmp, hfma, hunary};

impl ProgramBuilder<'_> {
    /// An instruction with a half type modifier.
    pub(super) fn half(&mut self, i: &ast::Instruction) -> Result<Vec<Op>> {
        let unsupported = |what: &str| self.unsupported(i, what);
        match i.opcode.as_str() {
            "mov" | "ld" | "ldu" | "st" => {
                // The bits move as they are.
                let mut j = i.clone();
                for m in &mut j.modifiers {
                    if let Some((_, x2)) = half_kind(m) {
                        *m = if x2 { "b32" } else { "b16" }.into();
                    }
                }
                self.decode_op(&j)
            }
            "cvt" => self.half_cvt(i).map(|o| vec![o]),
            "setp" => self.half_setp(i).map(|o| vec![o]),
            "add" | "sub" | "mul" | "min" | "max" | "fma" | "neg" | "abs" | "tanh" | "ex2" => {
                self.half_arith(i).map(|o| vec![o])
            }
            _ => Err(unsupported("this instruction on f16/bf16 values")),
        }
    }

    /// A source operand holding a half (`x2`: a pair): a register, or an integer immediate
    /// taken as the bits.
    pub(super) fn half_src(&self, i: &ast::Instruction, o: &Operand, x2: bool) -> Result<Src> {
        if let Operand::Imm(imm) = o
            && !matches!(imm, ast::Imm::Int(_))
        {
            return Err(self.err(
                i.line,
                format!(
                    "`{i}`: the floating-point immediate {imm} of a half-precision instruction \
                     (write the value's bits, as `0x3C00` for 1.0)"
                ),
            ));
        }
        self.src(i, o, if x2 { Ty::U32 } else { Ty::U16 })
    }

    /// The one half type of `m` (removed), with the instruction's other modifiers left.
    fn one_half(&self, i: &ast::Instruction, m: &mut Mods<'_>) -> Result<(bool, bool)> {
        let found: Vec<(bool, bool)> = m.list.iter().filter_map(|x| half_kind(x)).collect();
        m.list.retain(|x| half_kind(x).is_none());
        match found[..] {
            [k] if m.types().is_empty() => Ok(k),
            _ => Err(self.err(
                i.line,
                format!("`{i}`: expected exactly one type (.f16, .bf16, .f16x2 or .bf16x2)"),
            )),
        }
    }

    fn half_arith(&mut self, i: &ast::Instruction) -> Result<Op> {
        let ops = &i.operands;
        let mut m = Mods {
            list: i.modifiers.iter().map(String::as_str).collect(),
        };
        let (bf, x2) = self.one_half(i, &mut m)?;
        let rn = m.has("rn");
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let relu = m.has("relu");
        let nan = m.has("NaN");
        let approx = m.has("approx");
        let op = i.opcode.as_str();
        let bad = |what: &str| {
            self.err(
                i.line,
                format!("`{i}`: {what} is not a form of {op} on half-precision values"),
            )
        };
        if let Some(x) = m.list.first() {
            return Err(self.err(
                i.line,
                format!("`{i}`: modifier `.{x}` is not supported on half-precision values"),
            ));
        }
        // bfloat16 arithmetic has no .ftz or .sat (PTX ISA, half precision instructions).
        if bf && (sat || (ftz && op != "ex2")) {
            return Err(bad(".ftz or .sat"));
        }
        if (relu && (op != "fma" || sat)) || (nan && !matches!(op, "min" | "max")) {
            return Err(bad("this modifier combination"));
        }
        if rn && !matches!(op, "add" | "sub" | "mul" | "fma") {
            return Err(bad(".rn"));
        }
        if sat && !matches!(op, "add" | "sub" | "mul" | "fma") {
            return Err(bad(".sat"));
        }
        // tanh.approx.type; ex2.approx.{f16,f16x2}; ex2.approx.ftz.{bf16,bf16x2}.
        let transcendental = matches!(op, "tanh" | "ex2");
        if approx != transcendental || (transcendental && ftz != (op == "ex2" && bf)) {
            return Err(bad("this modifier combination"));
        }
        let want = match op {
            "neg" | "abs" | "tanh" | "ex2" => 2,
            "fma" => 4,
            _ => 3,
        };
        if ops.len() != want {
            return Err(self.err(i.line, format!("`{i}`: expected {want} operands")));
        }
        if op == "fma" && !rn {
            return Err(self.err(
                i.line,
                format!("`{i}`: fma on half-precision values needs the rounding modifier .rn"),
            ));
        }
        let d = self.reg(i, &ops[0])?;
        let a = self.half_src(i, &ops[1], x2)?;
        Ok(match op {
            "neg" | "abs" => {
                let f: Fn1 = match (op == "abs", ftz) {
                    (false, false) => bx!(bf, x2, hunary, false, false),
                    (false, true) => bx!(bf, x2, hunary, false, true),
                    (true, false) => bx!(bf, x2, hunary, true, false),
                    (true, true) => bx!(bf, x2, hunary, true, true),
                };
                Op::Un { f, d, a }
            }
            "tanh" | "ex2" => {
                let f: Fn1 = match (op == "ex2", ftz) {
                    (false, _) => bx!(bf, x2, happrox, 0, false),
                    (true, false) => bx!(bf, x2, happrox, 1, false),
                    (true, true) => bx!(bf, x2, happrox, 1, true),
                };
                Op::Un { f, d, a }
            }
            "fma" => {
                let f: Fn3 = match (ftz, sat, relu) {
                    (false, false, false) => bx!(bf, x2, hfma, false, false, false),
                    (true, false, false) => bx!(bf, x2, hfma, true, false, false),
                    (false, true, false) => bx!(bf, x2, hfma, false, true, false),
                    (true, true, false) => bx!(bf, x2, hfma, true, true, false),
                    (false, _, true) => bx!(bf, x2, hfma, false, false, true),
                    (true, _, true) => bx!(bf, x2, hfma, true, false, true),
                };
                Op::Tern {
                    f,
                    d,
                    a,
                    b: self.half_src(i, &ops[2], x2)?,
                    c: self.half_src(i, &ops[3], x2)?,
                }
            }
            _ => {
                let k = match (op, nan) {
                    ("add", _) => h::ADD,
                    ("sub", _) => h::SUB,
                    ("mul", _) => h::MUL,
                    ("min", false) => h::MIN,
                    ("max", false) => h::MAX,
                    ("min", true) => h::MIN_NAN,
                    _ => h::MAX_NAN,
                };
                let f: Fn2 = match k {
                    h::ADD => bin_fn!(bf, x2, { h::ADD }, ftz, sat),
                    h::SUB => bin_fn!(bf, x2, { h::SUB }, ftz, sat),
                    h::MUL => bin_fn!(bf, x2, { h::MUL }, ftz, sat),
                    h::MIN => bin_fn!(bf, x2, { h::MIN }, ftz, false),
                    h::MAX => bin_fn!(bf, x2, { h::MAX }, ftz, false),
                    h::MIN_NAN => bin_fn!(bf, x2, { h::MIN_NAN }, ftz, false),
                    _ => bin_fn!(bf, x2, { h::MAX_NAN }, ftz, false),
                };
                Op::Bin {
                    f,
                    d,
                    a,
                    b: self.half_src(i, &ops[2], x2)?,
                }
            }
        })
    }

    /// `setp.CmpOp{.BoolOp}{.ftz}.{f16,bf16} p[|q], a, b{, {!}c}`; with `.f16x2`/`.bf16x2`,
    /// `p` compares the lower halves and `q` the upper ones.
    fn half_setp(&mut self, i: &ast::Instruction) -> Result<Op> {
        let ops = &i.operands;
        let mut m = Mods {
            list: i.modifiers.iter().map(String::as_str).collect(),
        };
        let (bf, x2) = self.one_half(i, &mut m)?;
        let (cmp, unsigned, bop, ftz) = self.cmp_mods(i, &mut m)?;
        self.done(i, m)?;
        if unsigned.is_some() || (bf && ftz) {
            return Err(self.unsupported(i, "this comparison of halves"));
        }
        let (p, q) = self.pred_dests(i)?;
        let comb = self.cmp_comb(i, bop)?;
        Ok(Op::Setp {
            f: half_cmp(cmp, bf, ftz, false),
            p,
            q,
            a: self.half_src(i, &ops[1], x2)?,
            b: self.half_src(i, &ops[2], x2)?,
            comb,
            hi: x2.then(|| half_cmp(cmp, bf, ftz, true)),
        })
    }

    /// `cvt` with an f16/bf16 side (the pair form: `cvt.frnd.{f16,bf16}x2.f32 d, a, b`).
    fn half_cvt(&mut self, i: &ast::Instruction) -> Result<Op> {
        let ops = &i.operands;
        let unsupported = |what: &str| self.unsupported(i, what);
        let mut kinds = Vec::new();
        let mut x2 = false;
        let mut rest = Vec::new();
        for m in &i.modifiers {
            if let Some((bf, pair)) = half_kind(m) {
                x2 |= pair;
                kinds.push(if bf { Kind::Bf16 } else { Kind::F16 });
            } else if let Some(t) = parse_ty(m) {
                kinds.push(match t {
                    Ty::F32 => Kind::F32,
                    Ty::F64 => Kind::F64,
                    Ty::Pred => return Err(unsupported("a conversion of a predicate")),
                    t => Kind::Int {
                        bytes: t.bytes() as u8,
                        signed: t.signed(),
                    },
                });
            } else {
                rest.push(m.as_str());
            }
        }
        let mut m = Mods { list: rest };
        let ftz = m.has("ftz");
        let sat = m.has("sat");
        let relu = m.has("relu");
        let satfinite = m.has("satfinite");
        let fr = m.one_of(&["rn", "rz", "rm", "rp"]);
        let ir = m.one_of(&["rni", "rzi", "rmi", "rpi"]);
        self.done(i, m)?;
        let [dst, src] = kinds[..] else {
            return Err(self.err(
                i.line,
                format!("`{i}`: cvt needs a destination and a source type"),
            ));
        };
        let float = |k: Kind| !matches!(k, Kind::Int { .. });
        let half = |k: Kind| matches!(k, Kind::F16 | Kind::Bf16);
        if (fr.is_some() && (ir.is_some() || !float(dst)))
            || (ir.is_some() && (!float(src) || (float(dst) && dst != src)))
            || (!float(src) && !float(dst))
            || (x2 && (src != Kind::F32 || !half(dst) || ir.is_some() || ops.len() != 3))
            || (!x2 && ops.len() != 2)
            || ((relu || satfinite) && !(half(dst) && src == Kind::F32))
            || (sat && (relu || satfinite))
        {
            return Err(unsupported("this conversion form"));
        }
        let r = match fr.or(ir) {
            Some("rz" | "rzi") => RZ,
            Some("rm" | "rmi") => RM,
            Some("rp" | "rpi") => RP,
            _ => RN,
        };
        // Float to integer truncates unless told otherwise, as the other conversions do.
        let int_round = ir.is_some() || !float(dst);
        let r = if !float(dst) && ir.is_none() { RZ } else { r };
        let spec = CvtSpec {
            dst,
            src,
            round: r,
            int_round,
            ftz,
            sat,
            relu,
            satfinite,
        }
        .encode();
        let kind_src = |k: Kind, o: &Operand| -> Result<Src> {
            match k {
                Kind::F16 | Kind::Bf16 => self.half_src(i, o, false),
                Kind::F32 => self.src(i, o, Ty::F32),
                Kind::F64 => self.src(i, o, Ty::F64),
                Kind::Int { bytes, signed } => {
                    let t = match (bytes, signed) {
                        (1, false) => Ty::U8,
                        (2, false) => Ty::U16,
                        (4, false) => Ty::U32,
                        (8, false) => Ty::U64,
                        (1, true) => Ty::S8,
                        (2, true) => Ty::S16,
                        (4, true) => Ty::S32,
                        _ => Ty::S64,
                    };
                    self.src(i, o, t)
                }
            }
        };
        let d = self.reg(i, &ops[0])?;
        if x2 {
            return Ok(Op::Tern {
                f: h::cvt16x2,
                d,
                a: kind_src(src, &ops[1])?,
                b: kind_src(src, &ops[2])?,
                c: Src::Imm(spec),
            });
        }
        Ok(Op::Bin {
            f: h::cvt16,
            d,
            a: kind_src(src, &ops[1])?,
            b: Src::Imm(spec),
        })
    }
}

/// The lane function of `setp.cmp` on halves (`hi`: the upper halves of pairs).
pub(super) fn half_cmp(c: Cmp, bf: bool, ftz: bool, hi: bool) -> Fn2 {
    macro_rules! one {
        ($c:expr) => {
            match (bf, ftz, hi) {
                (false, false, false) => hcmp::<false, $c, false, 0> as Fn2,
                (false, true, false) => hcmp::<false, $c, true, 0>,
                (true, false, false) => hcmp::<true, $c, false, 0>,
                (true, true, false) => hcmp::<true, $c, true, 0>,
                (false, false, true) => hcmp::<false, $c, false, 16>,
                (false, true, true) => hcmp::<false, $c, true, 16>,
                (true, false, true) => hcmp::<true, $c, false, 16>,
                (true, true, true) => hcmp::<true, $c, true, 16>,
            }
        };
    }
    match c {
        Cmp::Eq => one!(0),
        Cmp::Ne => one!(1),
        Cmp::Lt => one!(2),
        Cmp::Le => one!(3),
        Cmp::Gt => one!(4),
        Cmp::Ge => one!(5),
        Cmp::Equ => one!(6),
        Cmp::Neu => one!(7),
        Cmp::Ltu => one!(8),
        Cmp::Leu => one!(9),
        Cmp::Gtu => one!(10),
        Cmp::Geu => one!(11),
        Cmp::Num => one!(12),
        Cmp::Nan => one!(13),
    }
}
