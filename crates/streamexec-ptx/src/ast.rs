//! The syntax tree of a PTX module: what [`parse_module`](super::parse_module) produces and the
//! host platform's PTX engine decodes.
//!
//! It is deliberately syntactic. Instructions keep their opcode and `.modifiers` as written
//! (`cvt.rzi.sat.s32.f32` is opcode `cvt`, modifiers `["rzi", "sat", "s32", "f32"]`), and
//! operands keep register and symbol names. Deciding what an opcode/modifier combination means,
//! and rejecting the ones we do not run, is the decoder's job, so one parser serves every
//! consumer and stays small enough to fuzz.

use std::fmt;

pub use super::params::PtxScalar;

/// A parsed module.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// `.version major.minor`.
    pub version: Option<(u32, u32)>,
    /// `.target` entries in order (`sm_70`, `texmode_independent`, ...).
    pub target: Vec<String>,
    /// `.address_size` (64 when absent, as `ptxas` assumes).
    pub address_size: u32,
    /// Module-scope variables (`.global`, `.const`, `.shared`, `.extern .shared`, ...).
    pub variables: Vec<Variable>,
    /// `.entry` and `.func` definitions and declarations, in source order.
    pub functions: Vec<Function>,
}

/// Linkage attributes of a module-scope name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Linkage {
    /// No attribute: visible in this module only.
    #[default]
    Internal,
    /// `.visible`.
    Visible,
    /// `.extern`: declared here, defined elsewhere (or dynamic shared memory).
    Extern,
    /// `.weak`.
    Weak,
    /// `.common`.
    Common,
}

/// A state space of a variable or a `.ptr` annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// `.reg`.
    Reg,
    /// `.param`.
    Param,
    /// `.global`.
    Global,
    /// `.shared`.
    Shared,
    /// `.const`.
    Const,
    /// `.local`.
    Local,
}

impl Space {
    /// The space a directive names (`.shared` → `Shared`).
    pub fn from_directive(s: &str) -> Option<Space> {
        Some(match s {
            ".reg" => Space::Reg,
            ".param" => Space::Param,
            ".global" => Space::Global,
            ".shared" => Space::Shared,
            ".const" => Space::Const,
            ".local" => Space::Local,
            _ => return None,
        })
    }

    /// The directive text (`.shared`).
    pub fn directive(self) -> &'static str {
        match self {
            Space::Reg => ".reg",
            Space::Param => ".param",
            Space::Global => ".global",
            Space::Shared => ".shared",
            Space::Const => ".const",
            Space::Local => ".local",
        }
    }
}

/// The type of a variable or register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarType {
    /// `.pred` (registers only).
    Pred,
    /// A fundamental type.
    Scalar(PtxScalar),
}

impl fmt::Display for VarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VarType::Pred => f.write_str(".pred"),
            VarType::Scalar(s) => write!(f, "{s}"),
        }
    }
}

/// One declared name: a register, a kernel or function parameter, or a variable in memory.
///
/// `.reg .b32 %r<4>;` is one `Variable` named `%r` with `range: Some(4)`, which declares
/// `%r0` .. `%r3`; `.reg .f32 %f1, %f2;` is two `Variable`s.
#[derive(Clone, Debug, PartialEq)]
pub struct Variable {
    /// 1-based source line of the declaration.
    pub line: u32,
    /// Linkage (module scope only; `Internal` elsewhere).
    pub linkage: Linkage,
    /// State space.
    pub space: Space,
    /// `.align N`, if given. (Otherwise the element size.)
    pub align: Option<u64>,
    /// `.v2` / `.v4` element vectors: 2 or 4; 1 for scalars.
    pub vector: u8,
    /// Element type.
    pub ty: VarType,
    /// `.ptr .global` (and so on) on a kernel parameter.
    pub ptr_space: Option<Space>,
    /// Name as written (`%r` for a register range).
    pub name: String,
    /// `<N>` register range count.
    pub range: Option<u32>,
    /// Array dimensions, outermost first; `None` for `[]` (size from the initializer, or
    /// dynamic shared memory with `.extern`).
    pub array: Vec<Option<u64>>,
    /// `= ...` initializer.
    pub init: Option<Init>,
}

impl Variable {
    /// Alignment in bytes: `.align` if given, else the element size (times the vector width).
    pub fn alignment(&self) -> u64 {
        self.align.unwrap_or_else(|| self.element_size())
    }

    /// Bytes of one element (a `.v4 .f32` element is 16). Predicates count as 1.
    pub fn element_size(&self) -> u64 {
        let s = match self.ty {
            VarType::Pred => 1,
            VarType::Scalar(s) => s.size(),
        };
        s * self.vector as u64
    }

    /// Element count over all array dimensions (1 for a scalar); `None` when a dimension is
    /// unsized or the product overflows.
    pub fn elements(&self) -> Option<u64> {
        self.array
            .iter()
            .try_fold(1u64, |n, d| d.and_then(|d| n.checked_mul(d)))
    }
}

/// A variable's initializer.
#[derive(Clone, Debug, PartialEq)]
pub enum Init {
    /// A scalar constant.
    Imm(Imm),
    /// The address of a symbol plus a byte offset (`sym`, `sym+8`); `generic(sym)` sets
    /// `generic`.
    Address {
        /// Variable or function name.
        symbol: String,
        /// Byte offset.
        offset: i64,
        /// Written as `generic(sym)`.
        generic: bool,
    },
    /// `{ a, b, ... }`, possibly nested for multi-dimensional arrays.
    List(Vec<Init>),
}

/// A numeric literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Imm {
    /// An integer literal, as 64 two's-complement bits (`-1` and `0xFFFFFFFFFFFFFFFF` are the
    /// same bits; the instruction's type says how to read them).
    Int(i64),
    /// `0fXXXXXXXX`: the bits of an f32.
    F32(u32),
    /// `0dXXXXXXXXXXXXXXXX`: the bits of an f64.
    F64(u64),
    /// A decimal floating-point literal (`1.5`, `2e-3`). PTX reads these as f64 and converts
    /// them to the instruction's type.
    Float(f64),
}

/// An `.entry` or `.func`.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// 1-based line of `.entry` / `.func`.
    pub line: u32,
    /// Linkage.
    pub linkage: Linkage,
    /// `.entry` (a kernel) rather than `.func`.
    pub is_entry: bool,
    /// Name.
    pub name: String,
    /// Return parameters of a `.func` (`.func (.param .b32 r) f(...)`).
    pub returns: Vec<Variable>,
    /// Parameters in order.
    pub params: Vec<Variable>,
    /// Performance directives (`.maxntid 256, 1, 1`, `.reqntid`, `.minnctapersm`, `.maxnreg`,
    /// `.noreturn`, `.pragma` before the body), with their numbers; they do not change results.
    pub directives: Vec<(String, Vec<u64>)>,
    /// The body; `None` for a declaration (`.extern .func vprintf(...);`).
    pub body: Option<Vec<Statement>>,
}

/// One statement of a function body.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// `name:`.
    Label {
        /// Label name.
        name: String,
        /// 1-based line.
        line: u32,
    },
    /// A declaration in the body (`.reg`, `.local`, `.shared`, `.param`, `.const`).
    Var(Variable),
    /// An instruction.
    Inst(Instruction),
    /// A `{ ... }` scope: names declared in it are visible only inside (call sequences and
    /// inline assembly use these).
    Block(Vec<Statement>),
}

/// `@%p` or `@!%p` in front of an instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guard {
    /// Predicate register.
    pub reg: String,
    /// `@!%p`.
    pub negated: bool,
}

/// One instruction, as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// 1-based source line.
    pub line: u32,
    /// Guard predicate.
    pub guard: Option<Guard>,
    /// Opcode without modifiers (`ld`, `setp`, `bar`).
    pub opcode: String,
    /// Modifiers in source order, without their dots (`["global", "nc", "v4", "f32"]`).
    pub modifiers: Vec<String>,
    /// Operands in source order.
    pub operands: Vec<Operand>,
}

/// An instruction operand.
#[derive(Clone, Debug, PartialEq)]
pub enum Operand {
    /// A register, including special registers with their component (`%r1`, `%tid.x`,
    /// `%laneid`, `%clock64`).
    Reg(String),
    /// A literal.
    Imm(Imm),
    /// A label, variable or function name, with an optional byte offset (`sym`, `sym+4`).
    Symbol {
        /// Name.
        name: String,
        /// Byte offset.
        offset: i64,
    },
    /// `[base+offset]`.
    Address(Address),
    /// `{a, b, c, d}`.
    Vector(Vec<Operand>),
    /// `(a, b)`: the return and argument lists of `call`.
    List(Vec<Operand>),
    /// `!%p`: a negated predicate source.
    Not(String),
    /// `%p|%q`: the two predicate destinations of `setp` (and friends).
    Pair(String, String),
    /// `_`: a destination that is discarded.
    Sink,
}

/// A memory operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Address {
    /// What the offset is added to.
    pub base: AddressBase,
    /// Byte offset.
    pub offset: i64,
}

/// The base of a memory operand.
#[derive(Clone, Debug, PartialEq)]
pub enum AddressBase {
    /// `[%rd1+8]`.
    Reg(String),
    /// `[param_0]`, `[shared_array+16]`.
    Symbol(String),
    /// `[0x1000]`: an absolute address (the offset is the whole address).
    Absolute,
}

impl fmt::Display for Imm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Imm::Int(v) => write!(f, "{v}"),
            Imm::F32(b) => write!(f, "0f{b:08X}"),
            Imm::F64(b) => write!(f, "0d{b:016X}"),
            Imm::Float(v) => write!(f, "{v:?}"),
        }
    }
}

fn signed_offset(f: &mut fmt::Formatter<'_>, offset: i64) -> fmt::Result {
    match offset {
        0 => Ok(()),
        o if o > 0 => write!(f, "+{o}"),
        o => write!(f, "{o}"),
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, items: &[Operand], open, close| {
            f.write_str(open)?;
            for (i, o) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{o}")?;
            }
            f.write_str(close)
        };
        match self {
            Operand::Reg(r) => f.write_str(r),
            Operand::Imm(i) => write!(f, "{i}"),
            Operand::Symbol { name, offset } => {
                f.write_str(name)?;
                signed_offset(f, *offset)
            }
            Operand::Address(a) => {
                f.write_str("[")?;
                match &a.base {
                    AddressBase::Reg(r) | AddressBase::Symbol(r) => {
                        f.write_str(r)?;
                        signed_offset(f, a.offset)?;
                    }
                    AddressBase::Absolute => write!(f, "{}", a.offset)?,
                }
                f.write_str("]")
            }
            Operand::Vector(v) => list(f, v, "{", "}"),
            Operand::List(v) => list(f, v, "(", ")"),
            Operand::Not(p) => write!(f, "!{p}"),
            Operand::Pair(a, b) => write!(f, "{a}|{b}"),
            Operand::Sink => f.write_str("_"),
        }
    }
}

/// The instruction as PTX text (`@!%p1 add.s32 %r1, %r2, 4;`), for error messages.
impl fmt::Display for Instruction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(g) = &self.guard {
            write!(f, "@{}{} ", if g.negated { "!" } else { "" }, g.reg)?;
        }
        f.write_str(&self.opcode)?;
        for m in &self.modifiers {
            write!(f, ".{m}")?;
        }
        for (i, o) in self.operands.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { ", " })?;
            write!(f, "{o}")?;
        }
        f.write_str(";")
    }
}
