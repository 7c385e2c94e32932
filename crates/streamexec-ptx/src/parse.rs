//! PTX text → [`ast::Module`](super::ast::Module): a recursive-descent parser over the
//! tokens of `params::tokenize` (comments dropped, identifiers and directives whole).
//!
//! It checks syntax only. Every malformed construct is a [`PtxError`](super::PtxError) that names the line
//! (and the function, inside one) and what was expected; nesting is bounded so hostile input cannot exhaust the stack.

use super::ast::{
    Address, AddressBase, Function, Guard, Imm, Init, Instruction, Linkage, Module, Operand, Space,
    Statement, VarType, Variable,
};
use super::params::{PtxScalar, Token, is_identifier, load_error, tokenize};
use super::unsupported;
use crate::error::PtxResult as Result;

/// Deepest `{ }` / `( )` nesting accepted (scopes, initializers, vectors).
const MAX_DEPTH: usize = 64;

/// Parses a whole PTX module. Malformed text is an error naming the line.
pub fn parse_module(ptx: &str) -> Result<Module> {
    let tokens = tokenize(ptx).map_err(|(line, d)| load_error(None, line, d))?;
    let mut p = Parser {
        t: &tokens,
        pos: 0,
        scope: None,
        depth: 0,
    };
    p.module()
}

struct Parser<'t, 'a> {
    t: &'t [Token<'a>],
    pos: usize,
    /// The function being parsed (`None` at module scope), for error messages.
    scope: Option<String>,
    depth: usize,
}

/// Linkage and performance directives skipped at module scope.
fn linkage(s: &str) -> Option<Linkage> {
    Some(match s {
        ".visible" => Linkage::Visible,
        ".extern" => Linkage::Extern,
        ".weak" => Linkage::Weak,
        ".common" => Linkage::Common,
        _ => return None,
    })
}

/// Directives that may follow a function's signature, with numeric arguments.
const PERF_DIRECTIVES: &[&str] = &[
    ".maxntid",
    ".reqntid",
    ".minnctapersm",
    ".maxnctapersm",
    ".maxnreg",
    ".noreturn",
    ".maxclusterrank",
    ".reqnctapercluster",
    ".explicitcluster",
    ".blocksareclusters",
];

/// Directives that carry no meaning for execution and end at the end of their line
/// (`.loc 1 4 2`, `.file 1 "a.cu"`).
const LINE_DIRECTIVES: &[&str] = &[".loc", ".file"];

impl<'a> Parser<'_, 'a> {
    fn peek(&self) -> Option<&'a str> {
        self.t.get(self.pos).map(|t| t.text)
    }

    fn peek_at(&self, k: usize) -> Option<&'a str> {
        self.t.get(self.pos + k).map(|t| t.text)
    }

    fn line(&self) -> usize {
        self.t.get(self.pos).or(self.t.last()).map_or(1, |t| t.line)
    }

    fn err<T>(&self, line: usize, detail: impl std::fmt::Display) -> Result<T> {
        Err(load_error(self.scope.as_deref(), line, detail))
    }

    fn next(&mut self, wanted: &str) -> Result<&'a str> {
        match self.t.get(self.pos) {
            Some(t) => {
                self.pos += 1;
                Ok(t.text)
            }
            None => self.err(
                self.line(),
                format!("the module ends where {wanted} was expected"),
            ),
        }
    }

    fn eat(&mut self, text: &str) -> bool {
        let hit = self.peek() == Some(text);
        self.pos += hit as usize;
        hit
    }

    fn require(&mut self, text: &str, wanted: &str) -> Result<()> {
        let line = self.line();
        let got = self.next(wanted)?;
        if got != text {
            return self.err(line, format!("expected {wanted}, found `{got}`"));
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(
                self.line(),
                format!("nesting deeper than {MAX_DEPTH} levels"),
            );
        }
        Ok(())
    }

    fn identifier(&mut self, wanted: &str) -> Result<&'a str> {
        let line = self.line();
        let t = self.next(wanted)?;
        if !is_identifier(t) {
            return self.err(line, format!("expected {wanted}, found `{t}`"));
        }
        Ok(t)
    }

    fn number(&mut self, wanted: &str) -> Result<u64> {
        let line = self.line();
        let t = self.next(wanted)?;
        match int_literal(t) {
            Some(v) if v >= 0 => Ok(v as u64),
            _ => self.err(line, format!("expected {wanted}, found `{t}`")),
        }
    }

    /// Skips the rest of the current line (for `.loc` / `.file`).
    fn skip_line(&mut self, line: usize) {
        while self.t.get(self.pos).is_some_and(|t| t.line == line) {
            self.pos += 1;
        }
    }

    /// Skips tokens through the next `;` at this nesting level.
    fn skip_statement(&mut self) -> Result<()> {
        let line = self.line();
        loop {
            match self.peek() {
                Some(";") => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(_) => self.pos += 1,
                None => return self.err(line, "a directive is not ended by `;`"),
            }
        }
    }

    /// Skips a `{ ... }` group with balanced braces (`.section` contents).
    fn skip_braces(&mut self) -> Result<()> {
        let line = self.line();
        self.require("{", "`{`")?;
        let mut depth = 1usize;
        while depth > 0 {
            match self.next("`}`") {
                Ok("{") => depth += 1,
                Ok("}") => depth -= 1,
                Ok(_) => {}
                Err(_) => return self.err(line, "a `{` is never closed"),
            }
        }
        Ok(())
    }

    fn module(&mut self) -> Result<Module> {
        let mut m = Module {
            address_size: 64,
            ..Module::default()
        };
        while let Some(t) = self.peek() {
            let line = self.line();
            match t {
                ".version" => {
                    self.pos += 1;
                    let v = self.next("a version number")?;
                    let parsed = v
                        .split_once('.')
                        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
                    match parsed {
                        Some(v) => m.version = Some(v),
                        None => {
                            return self.err(line, format!("`.version {v}` is not major.minor"));
                        }
                    }
                }
                ".target" => {
                    self.pos += 1;
                    loop {
                        m.target.push(self.identifier("a target name")?.to_string());
                        if !self.eat(",") {
                            break;
                        }
                    }
                }
                ".address_size" => {
                    self.pos += 1;
                    let n = self.number("an address size")?;
                    if n != 32 && n != 64 {
                        return self.err(line, format!("`.address_size {n}` must be 32 or 64"));
                    }
                    m.address_size = n as u32;
                }
                _ if LINE_DIRECTIVES.contains(&t) => {
                    self.pos += 1;
                    self.skip_line(line);
                }
                ".section" => {
                    self.pos += 1;
                    self.next("a section name")?;
                    self.skip_braces()?;
                }
                ".pragma" => {
                    self.pos += 1;
                    self.skip_statement()?;
                }
                _ => {
                    let mut link = Linkage::Internal;
                    while let Some(l) = self.peek().and_then(linkage) {
                        self.pos += 1;
                        link = l;
                    }
                    match self.peek() {
                        Some(".entry") | Some(".func") => {
                            let f = self.function(link)?;
                            self.scope = None;
                            m.functions.push(f);
                        }
                        Some(s) if Space::from_directive(s).is_some() => {
                            let vars = self.declaration(link)?;
                            m.variables.extend(vars);
                        }
                        Some(other) => {
                            if let Some(refusal) = unsupported::declaration(other) {
                                return self.err(self.line(), refusal);
                            }
                            return self.err(
                                self.line(),
                                format!(
                                    "unexpected `{other}` at module scope (expected a directive, \
                                     a variable, `.entry` or `.func`)"
                                ),
                            );
                        }
                        None => return self.err(line, "the module ends after a linkage directive"),
                    }
                }
            }
        }
        Ok(m)
    }

    /// `.entry name (params) directives { body }` or `.func (rets) name (params) ...`.
    fn function(&mut self, linkage: Linkage) -> Result<Function> {
        let line = self.line();
        let is_entry = self.next("`.entry` or `.func`")? == ".entry";
        let mut returns = Vec::new();
        if !is_entry && self.peek() == Some("(") {
            returns = self.param_list()?;
        }
        let name = self.identifier("a function name")?.to_string();
        self.scope = Some(name.clone());
        let params = if self.peek() == Some("(") {
            self.param_list()?
        } else {
            Vec::new()
        };
        let mut directives = Vec::new();
        loop {
            let dline = self.line();
            match self.peek() {
                Some(d) if PERF_DIRECTIVES.contains(&d) => {
                    self.pos += 1;
                    let mut nums = Vec::new();
                    while self.peek().is_some_and(|t| int_literal(t).is_some()) {
                        nums.push(self.number("a number")?);
                        if !self.eat(",") {
                            break;
                        }
                    }
                    directives.push((d.to_string(), nums));
                }
                Some(".pragma") => {
                    self.pos += 1;
                    self.skip_statement()?;
                }
                Some(d) if LINE_DIRECTIVES.contains(&d) => {
                    self.pos += 1;
                    self.skip_line(dline);
                }
                _ => break,
            }
        }
        let body = if self.eat(";") {
            None
        } else {
            let open = self.line();
            self.require("{", "`{` or `;` after the function's signature")?;
            Some(self.statements(open)?)
        };
        Ok(Function {
            line: line as u32,
            linkage,
            is_entry,
            name,
            returns,
            params,
            directives,
            body,
        })
    }

    /// `( .param .u32 a, .reg .b64 b )`.
    fn param_list(&mut self) -> Result<Vec<Variable>> {
        self.require("(", "`(`")?;
        let mut out = Vec::new();
        if self.eat(")") {
            return Ok(out);
        }
        loop {
            out.extend(self.variable(Linkage::Internal, false)?);
            if self.eat(")") {
                return Ok(out);
            }
            self.require(",", "`,` or `)` in a parameter list")?;
        }
    }

    /// A declaration statement ending in `;`, possibly declaring several names.
    fn declaration(&mut self, linkage: Linkage) -> Result<Vec<Variable>> {
        let mut vars = self.variable(linkage, true)?;
        while self.eat(",") {
            // Further names share the first one's space, type and alignment.
            let line = self.line();
            let first = vars[0].clone();
            let mut v = self.variable_tail(first, line)?;
            v.init = None;
            if self.eat("=") {
                v.init = Some(self.initializer()?);
            }
            vars.push(v);
        }
        self.require(";", "`;` after a declaration")?;
        Ok(vars)
    }

    /// One `space [.align N] [.vN] type [.ptr .space [.align N]] name[<N>][dims] [= init]`.
    /// `with_init` allows an initializer (not in parameter lists).
    fn variable(&mut self, linkage: Linkage, with_init: bool) -> Result<Vec<Variable>> {
        let line = self.line();
        let s = self.next("a state space")?;
        let Some(space) = Space::from_directive(s) else {
            return self.err(
                line,
                format!("expected a state space (.reg, .param, ...), found `{s}`"),
            );
        };
        let mut align = None;
        let mut vector = 1u8;
        let mut ty = None;
        let mut ptr_space = None;
        loop {
            let tline = self.line();
            match self.peek() {
                Some(".align") => {
                    self.pos += 1;
                    let a = self.number("an alignment after `.align`")?;
                    if !a.is_power_of_two() {
                        return self.err(tline, format!("`.align {a}` is not a power of two"));
                    }
                    align = Some(a);
                }
                Some(".v2") | Some(".v4") | Some(".v8") => {
                    let t = self.next("a vector width")?;
                    vector = t[2..].parse().unwrap_or(1);
                }
                Some(".ptr") => {
                    self.pos += 1;
                    let sp = self.next("a state space after `.ptr`")?;
                    match Space::from_directive(sp) {
                        Some(s @ (Space::Global | Space::Shared | Space::Const | Space::Local)) => {
                            ptr_space = Some(s)
                        }
                        _ => {
                            return self.err(
                                tline,
                                format!("`.ptr` must name a memory state space, found `{sp}`"),
                            );
                        }
                    }
                }
                Some(".pred") => {
                    self.pos += 1;
                    ty = Some(VarType::Pred);
                }
                Some(t) if t.starts_with('.') => {
                    let Some(s) = PtxScalar::from_directive(t) else {
                        if let Some(refusal) = unsupported::declaration(t) {
                            return self.err(tline, refusal);
                        }
                        return self.err(tline, format!("`{t}` is not a type (.pred, .b8-.b64, .u8-.u64, .s8-.s64, .f16-.f64)"));
                    };
                    if ty.replace(VarType::Scalar(s)).is_some() {
                        return self.err(tline, "two types in one declaration");
                    }
                    self.pos += 1;
                }
                _ => break,
            }
        }
        let Some(ty) = ty else {
            return self.err(line, "a declaration without a type");
        };
        let proto = Variable {
            line: line as u32,
            linkage,
            space,
            align,
            vector,
            ty,
            ptr_space,
            name: String::new(),
            range: None,
            array: Vec::new(),
            init: None,
        };
        let mut v = self.variable_tail(proto, line)?;
        if with_init && self.eat("=") {
            v.init = Some(self.initializer()?);
        }
        Ok(vec![v])
    }

    /// The name part of a declaration: `name`, `name<N>`, `name[dims]`.
    fn variable_tail(&mut self, mut v: Variable, line: usize) -> Result<Variable> {
        v.line = line as u32;
        v.name = self.identifier("a name in a declaration")?.to_string();
        v.range = None;
        v.array = Vec::new();
        if self.eat("<") {
            let n = self.number("a register count")?;
            if n == 0 || n > u32::MAX as u64 {
                return self.err(line, format!("register range `<{n}>` is out of range"));
            }
            v.range = Some(n as u32);
            self.require(">", "`>`")?;
        }
        while self.eat("[") {
            if self.eat("]") {
                v.array.push(None);
            } else {
                v.array.push(Some(self.number("an array length")?));
                self.require("]", "`]`")?;
            }
        }
        Ok(v)
    }

    fn initializer(&mut self) -> Result<Init> {
        let line = self.line();
        if self.eat("{") {
            self.enter()?;
            let mut items = Vec::new();
            if !self.eat("}") {
                loop {
                    items.push(self.initializer()?);
                    if self.eat("}") {
                        break;
                    }
                    self.require(",", "`,` or `}` in an initializer")?;
                }
            }
            self.depth -= 1;
            return Ok(Init::List(items));
        }
        if self.peek() == Some("generic") && self.peek_at(1) == Some("(") {
            self.pos += 2;
            let symbol = self.identifier("a symbol in `generic(...)`")?.to_string();
            let offset = self.offset()?;
            self.require(")", "`)`")?;
            return Ok(Init::Address {
                symbol,
                offset,
                generic: true,
            });
        }
        match self.operand_atom()? {
            Operand::Imm(i) => Ok(Init::Imm(i)),
            Operand::Symbol { name, offset } => Ok(Init::Address {
                symbol: name,
                offset,
                generic: false,
            }),
            other => self.err(line, format!("`{other}` cannot initialize a variable")),
        }
    }

    /// `+N`, `-N`, `+-N` after a base, or nothing.
    fn offset(&mut self) -> Result<i64> {
        let line = self.line();
        let negative = match self.peek() {
            Some("+") => {
                self.pos += 1;
                self.eat("-")
            }
            Some("-") => {
                self.pos += 1;
                true
            }
            _ => return Ok(0),
        };
        let t = self.next("an offset")?;
        let Some(v) = int_literal(t) else {
            return self.err(line, format!("expected an integer offset, found `{t}`"));
        };
        Ok(if negative { v.wrapping_neg() } else { v })
    }

    /// Statements up to the `}` that closes a body or scope (whose `{` was on `open`).
    fn statements(&mut self, open: usize) -> Result<Vec<Statement>> {
        self.enter()?;
        let mut out = Vec::new();
        loop {
            let line = self.line();
            let Some(t) = self.peek() else {
                return self.err(open, "a `{` is never closed");
            };
            match t {
                "}" => {
                    self.pos += 1;
                    break;
                }
                "{" => {
                    self.pos += 1;
                    out.push(Statement::Block(self.statements(line)?));
                }
                _ if LINE_DIRECTIVES.contains(&t) => {
                    self.pos += 1;
                    self.skip_line(line);
                }
                ".pragma" => {
                    self.pos += 1;
                    self.skip_statement()?;
                }
                _ if Space::from_directive(t).is_some() => {
                    out.extend(
                        self.declaration(Linkage::Internal)?
                            .into_iter()
                            .map(Statement::Var),
                    );
                }
                _ if self.peek_at(1) == Some(":") && is_identifier(t) => {
                    self.pos += 2;
                    if self.peek() == Some(".callprototype") {
                        // An indirect call's prototype: a declaration, not a jump target.
                        self.skip_statement()?;
                    } else {
                        out.push(Statement::Label {
                            name: t.to_string(),
                            line: line as u32,
                        });
                    }
                }
                _ => out.push(Statement::Inst(self.instruction()?)),
            }
        }
        self.depth -= 1;
        Ok(out)
    }

    fn instruction(&mut self) -> Result<Instruction> {
        let line = self.line();
        let guard = if self.eat("@") {
            let negated = self.eat("!");
            let reg = self
                .identifier("a predicate register after `@`")?
                .to_string();
            Some(Guard { reg, negated })
        } else {
            None
        };
        let word = self.next("an instruction")?;
        if let Some(refusal) = unsupported::declaration(word) {
            return self.err(line, refusal);
        }
        let mut parts = word.split('.');
        let opcode = parts.next().unwrap_or_default();
        if opcode.is_empty()
            || !opcode
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            || !opcode.as_bytes()[0].is_ascii_alphabetic()
        {
            return self.err(line, format!("expected an instruction, found `{word}`"));
        }
        let modifiers: Vec<String> = parts.map(str::to_string).collect();
        if modifiers.iter().any(String::is_empty) {
            return self.err(line, format!("`{word}` has an empty modifier"));
        }
        // Refused by name before its operands, whose forms the parser may not read.
        let following = |k| self.peek_at(k);
        if let Some(refusal) = unsupported::instruction(word, opcode, &modifiers, following) {
            return self.err(line, refusal);
        }
        let mut operands = Vec::new();
        if !self.eat(";") {
            loop {
                operands.push(self.operand()?);
                if self.eat(";") {
                    break;
                }
                let l = self.line();
                let got = self.next("`,` or `;` after an operand")?;
                if got != "," {
                    return self.err(
                        l,
                        format!("expected `,` or `;` after an operand of `{word}`, found `{got}`"),
                    );
                }
            }
        }
        Ok(Instruction {
            line: line as u32,
            guard,
            opcode: opcode.to_string(),
            modifiers,
            operands,
        })
    }

    fn operand(&mut self) -> Result<Operand> {
        let line = self.line();
        match self.peek() {
            Some("[") => {
                self.pos += 1;
                let base = match self.peek() {
                    Some(t) if t.starts_with('%') || is_identifier(t) => {
                        self.pos += 1;
                        if t.starts_with('%') {
                            AddressBase::Reg(t.to_string())
                        } else {
                            AddressBase::Symbol(t.to_string())
                        }
                    }
                    _ => AddressBase::Absolute,
                };
                let offset =
                    if base == AddressBase::Absolute {
                        let neg = self.eat("-");
                        let t = self.next("an address")?;
                        match int_literal(t) {
                            Some(v) if neg => v.wrapping_neg(),
                            Some(v) => v,
                            None => return self.err(
                                line,
                                format!(
                                    "expected a register, symbol or number in `[...]`, found `{t}`"
                                ),
                            ),
                        }
                    } else {
                        self.offset()?
                    };
                self.require("]", "`]` closing an address")?;
                Ok(Operand::Address(Address { base, offset }))
            }
            Some("{") => {
                self.pos += 1;
                Ok(Operand::Vector(self.operand_list("}")?))
            }
            Some("(") => {
                self.pos += 1;
                Ok(Operand::List(self.operand_list(")")?))
            }
            Some("!") => {
                self.pos += 1;
                Ok(Operand::Not(
                    self.identifier("a predicate after `!`")?.to_string(),
                ))
            }
            _ => {
                let a = self.operand_atom()?;
                if let Operand::Reg(r) = &a
                    && self.eat("|")
                {
                    let b = self.identifier("a predicate after `|`")?;
                    return Ok(Operand::Pair(r.clone(), b.to_string()));
                }
                Ok(a)
            }
        }
    }

    fn operand_list(&mut self, close: &str) -> Result<Vec<Operand>> {
        self.enter()?;
        let mut items = Vec::new();
        if !self.eat(close) {
            loop {
                items.push(self.operand()?);
                if self.eat(close) {
                    break;
                }
                self.require(",", &format!("`,` or `{close}` in an operand list"))?;
            }
        }
        self.depth -= 1;
        Ok(items)
    }

    /// A register, `_`, a literal (with a leading `-`), or a symbol with an optional offset.
    fn operand_atom(&mut self) -> Result<Operand> {
        let line = self.line();
        let negative = self.eat("-");
        let t = self.next("an operand")?;
        if let Some(imm) = literal(t) {
            return Ok(Operand::Imm(if negative { negate(imm) } else { imm }));
        }
        if negative {
            return self.err(line, format!("`-` must precede a number, found `{t}`"));
        }
        if t == "_" {
            return Ok(Operand::Sink);
        }
        if let Some(name) = t.strip_prefix('%') {
            let ok = !name.is_empty()
                && name.split('.').all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$'))
                });
            if !ok {
                return self.err(line, format!("`{t}` is not a register name"));
            }
            return Ok(Operand::Reg(t.to_string()));
        }
        if is_identifier(t) {
            let offset = self.offset()?;
            return Ok(Operand::Symbol {
                name: t.to_string(),
                offset,
            });
        }
        self.err(line, format!("expected an operand, found `{t}`"))
    }
}

fn negate(i: Imm) -> Imm {
    match i {
        Imm::Int(v) => Imm::Int(v.wrapping_neg()),
        Imm::F32(b) => Imm::F32(b ^ 0x8000_0000),
        Imm::F64(b) => Imm::F64(b ^ (1 << 63)),
        Imm::Float(v) => Imm::Float(-v),
    }
}

/// An integer literal: decimal, `0x` hex, `0b` binary, `0` octal, optional `U` suffix; the
/// value as 64 two's-complement bits. `None` when it is not one or does not fit 64 bits.
fn int_literal(t: &str) -> Option<i64> {
    let t = t.strip_suffix(['U', 'u']).unwrap_or(t);
    let (digits, radix) = if let Some(h) = t.strip_prefix("0x").or(t.strip_prefix("0X")) {
        (h, 16)
    } else if let Some(b) = t.strip_prefix("0b").or(t.strip_prefix("0B")) {
        (b, 2)
    } else if t.len() > 1 && t.starts_with('0') {
        (&t[1..], 8)
    } else {
        (t, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok().map(|v| v as i64)
}

/// Any numeric literal.
fn literal(t: &str) -> Option<Imm> {
    if !t.as_bytes().first()?.is_ascii_digit() {
        return None;
    }
    if let Some(v) = int_literal(t) {
        return Some(Imm::Int(v));
    }
    let hex = |s: &str, n: usize| {
        (s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    if let Some(h) = t.strip_prefix("0f").or(t.strip_prefix("0F")) {
        return hex(h, 8).map(|b| Imm::F32(b as u32));
    }
    if let Some(h) = t.strip_prefix("0d").or(t.strip_prefix("0D")) {
        return hex(h, 16).map(Imm::F64);
    }
    let decimal = t
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if decimal && t.contains(['.', 'e', 'E']) {
        return t.parse::<f64>().ok().map(Imm::Float);
    }
    None
}

#[cfg(test)]
mod tests;
