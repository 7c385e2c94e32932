//! `.entry` parameter lists of a PTX module: what a loader checks a kernel's arguments against.
//!
//! PTX passes kernel arguments in the `.param` state space; each parameter is a scalar
//! (`.param .f32 a`), an array of bytes for a struct passed by value
//! (`.param .align 8 .b8 s[24]`), or a pointer-sized integer, optionally annotated
//! (`.param .u64 .ptr .global .align 4 p`). What a kernel expects is therefore a list of
//! (size, alignment, kind) that the launch's packed arguments must match.

use crate::error::{PtxError, PtxResult as Result};

/// A PTX fundamental type, as it appears in a parameter declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxScalar {
    /// Untyped bits (`.b8` .. `.b64`), with the width in bytes.
    Bits(u8),
    /// Unsigned integer (`.u8` .. `.u64`).
    Unsigned(u8),
    /// Signed integer (`.s8` .. `.s64`).
    Signed(u8),
    /// Floating point (`.f16`, `.f32`, `.f64`).
    Float(u8),
    /// `.bf16`: bfloat16.
    BFloat16,
    /// `.f16x2`, or `.bf16x2` with `bf`: two halves packed in 32 bits.
    Half2 {
        /// bfloat16 halves.
        bf: bool,
    },
}

impl PtxScalar {
    /// Parses a type directive such as `.u64`.
    pub fn from_directive(s: &str) -> Option<PtxScalar> {
        match s {
            ".bf16" => return Some(PtxScalar::BFloat16),
            ".f16x2" => return Some(PtxScalar::Half2 { bf: false }),
            ".bf16x2" => return Some(PtxScalar::Half2 { bf: true }),
            _ => {}
        }
        let (kind, bits) = s.strip_prefix('.')?.split_at_checked(1)?;
        let bytes = match bits {
            "8" => 1,
            "16" => 2,
            "32" => 4,
            "64" => 8,
            _ => return None,
        };
        match kind {
            "b" => Some(PtxScalar::Bits(bytes)),
            "u" => Some(PtxScalar::Unsigned(bytes)),
            "s" => Some(PtxScalar::Signed(bytes)),
            "f" if bytes >= 2 => Some(PtxScalar::Float(bytes)),
            _ => None,
        }
    }

    /// Width in bytes.
    pub fn size(self) -> u64 {
        match self {
            PtxScalar::Bits(b)
            | PtxScalar::Unsigned(b)
            | PtxScalar::Signed(b)
            | PtxScalar::Float(b) => b as u64,
            PtxScalar::BFloat16 => 2,
            PtxScalar::Half2 { .. } => 4,
        }
    }
}

impl std::fmt::Display for PtxScalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (c, b) = match *self {
            PtxScalar::Bits(b) => ('b', b),
            PtxScalar::Unsigned(b) => ('u', b),
            PtxScalar::Signed(b) => ('s', b),
            PtxScalar::Float(b) => ('f', b),
            PtxScalar::BFloat16 => return f.write_str(".bf16"),
            PtxScalar::Half2 { bf } => return f.write_str(if bf { ".bf16x2" } else { ".f16x2" }),
        };
        write!(f, ".{c}{}", b as u32 * 8)
    }
}

/// One `.param` of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxParam {
    /// Parameter name.
    pub name: String,
    /// Element type.
    pub ty: PtxScalar,
    /// Element count for array parameters (`x[24]`), `None` for scalars.
    pub array: Option<u64>,
    /// Alignment in bytes: the `.align` given, else the element size.
    pub align: u64,
    /// The state space of a `.ptr` annotation (`global`, `shared`, ...), if any.
    pub pointer_space: Option<String>,
}

impl PtxParam {
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.ty.size() * self.array.unwrap_or(1)
    }
}

impl std::fmt::Display for PtxParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, ".param ")?;
        if self.array.is_some() || self.align != self.ty.size() {
            write!(f, ".align {} ", self.align)?;
        }
        write!(f, "{}", self.ty)?;
        if let Some(space) = &self.pointer_space {
            write!(f, " .ptr .{space}")?;
        }
        write!(f, " {}", self.name)?;
        if let Some(n) = self.array {
            write!(f, "[{n}]")?;
        }
        Ok(())
    }
}

/// A kernel entry point and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// Entry name (the mangled name for C++ kernels).
    pub name: String,
    /// Parameters in order.
    pub params: Vec<PtxParam>,
    /// 1-based line of the `.entry` directive.
    pub line: usize,
    /// The entry, or a function it calls, names dynamic shared memory (an `.extern .shared`
    /// variable or an unsized `.shared` array), which a launch sizes with `SharedMemory`
    /// arguments: those are launch attributes, not `.param`s.
    pub dynamic_shared: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Token<'a> {
    pub(super) text: &'a str,
    pub(super) line: usize,
}

/// Splits PTX into tokens, dropping comments and whitespace. Identifiers and directives are one
/// token each (PTX identifiers: letters, digits, `_`, `$`, `%`, and a leading `.`); every other
/// character is a token of its own; string literals are kept whole.
pub(super) fn tokenize(src: &str) -> std::result::Result<Vec<Token<'_>>, (usize, String)> {
    let bytes = src.as_bytes();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    let word = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'$' | b'%' | b'.');
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            let start = line;
            let end = src[i + 2..]
                .find("*/")
                .ok_or((start, "a `/*` comment is never closed".to_string()))?;
            line += src[i..i + 2 + end].matches('\n').count();
            i += end + 4;
        } else if c == b'"' {
            let end = src[i + 1..]
                .find(['"', '\n'])
                .filter(|&e| bytes[i + 1 + e] == b'"')
                .ok_or((
                    line,
                    "a string literal is not closed on its line".to_string(),
                ))?;
            out.push(Token {
                text: &src[i..i + end + 2],
                line,
            });
            i += end + 2;
        } else if word(c) {
            let start = i;
            while i < bytes.len() && word(bytes[i]) {
                i += 1;
                // A decimal exponent's sign belongs to the number (`1.5e-3`).
                let exp = matches!(bytes[i - 1], b'e' | b'E')
                    && bytes[start].is_ascii_digit()
                    && !matches!(
                        bytes.get(start + 1),
                        Some(b'x' | b'X' | b'f' | b'F' | b'd' | b'D')
                    );
                if exp
                    && matches!(bytes.get(i), Some(b'+' | b'-'))
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
                {
                    i += 1;
                }
            }
            let text = &src[start..i];
            if text.starts_with('.') && text[1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
                // Directives written together (`.reg.b16 %h;`, as NVRTC's inline PTX has
                // them) are separate tokens.
                let mut at = start;
                for part in text[1..].split('.') {
                    let len = part.len() + 1;
                    out.push(Token {
                        text: &src[at..at + len],
                        line,
                    });
                    at += len;
                }
            } else {
                out.push(Token { text, line });
            }
        } else {
            // One character (UTF-8 aware, so a stray multi-byte character is reported whole).
            let len = src[i..].chars().next().map_or(1, char::len_utf8);
            out.push(Token {
                text: &src[i..i + len],
                line,
            });
            i += len;
        }
    }
    Ok(out)
}

pub(super) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '$' | '%'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$'))
}

/// A front-end error at `line` in `function` (`None` at module scope).
pub(super) fn load_error(
    function: Option<&str>,
    line: usize,
    detail: impl std::fmt::Display,
) -> PtxError {
    PtxError::new(Some(line), function, detail)
}

struct Cursor<'t, 'a> {
    tokens: &'t [Token<'a>],
    pos: usize,
    kernel: Option<String>,
}

impl<'a> Cursor<'_, 'a> {
    fn peek(&self) -> Option<&Token<'a>> {
        self.tokens.get(self.pos)
    }

    fn line(&self) -> usize {
        self.peek().or(self.tokens.last()).map_or(1, |t| t.line)
    }

    fn next(&mut self, wanted: &str) -> Result<&'a str> {
        let t = self.tokens.get(self.pos).ok_or_else(|| {
            load_error(
                self.kernel.as_deref(),
                self.line(),
                format!("the module ends where {wanted} was expected"),
            )
        })?;
        self.pos += 1;
        Ok(t.text)
    }

    fn require(&mut self, text: &str, wanted: &str) -> Result<()> {
        let line = self.line();
        let got = self.next(wanted)?;
        if got != text {
            return Err(load_error(
                self.kernel.as_deref(),
                line,
                format!("expected {wanted}, found `{got}`"),
            ));
        }
        Ok(())
    }

    fn eat(&mut self, text: &str) -> bool {
        let hit = self.peek().is_some_and(|t| t.text == text);
        self.pos += hit as usize;
        hit
    }

    fn number(&mut self, wanted: &str) -> Result<u64> {
        let line = self.line();
        let t = self.next(wanted)?;
        t.parse::<u64>().map_err(|_| {
            load_error(
                self.kernel.as_deref(),
                line,
                format!("expected {wanted} (a decimal number), found `{t}`"),
            )
        })
    }

    /// One `.param` declaration, after its `.param`.
    fn param(&mut self) -> Result<PtxParam> {
        let mut align = None;
        let mut ty = None;
        let mut pointer_space = None;
        let name = loop {
            let line = self.line();
            let t = self.next("a parameter type or name")?;
            match t {
                ".align" => {
                    let a = self.number("an alignment after `.align`")?;
                    if !a.is_power_of_two() {
                        return Err(load_error(
                            self.kernel.as_deref(),
                            line,
                            format!("`.align {a}` is not a power of two"),
                        ));
                    }
                    align = Some(a);
                }
                ".ptr" => {
                    let line = self.line();
                    let space = self.next("a state space after `.ptr`")?;
                    match space {
                        ".global" | ".shared" | ".const" | ".local" => {
                            pointer_space = Some(space[1..].to_string())
                        }
                        other => {
                            return Err(load_error(
                                self.kernel.as_deref(),
                                line,
                                format!("`.ptr` must name a state space, found `{other}`"),
                            ));
                        }
                    }
                }
                _ if t.starts_with('.') => {
                    let s = PtxScalar::from_directive(t).ok_or_else(|| {
                        let detail = crate::unsupported::declaration(t).unwrap_or_else(|| {
                            format!(
                                "`{t}` is not a parameter type (.b8-.b64, .u8-.u64, .s8-.s64, \
                                 .f16-.f64)"
                            )
                        });
                        load_error(self.kernel.as_deref(), line, detail)
                    })?;
                    if ty.replace(s).is_some() {
                        return Err(load_error(
                            self.kernel.as_deref(),
                            line,
                            "two types for one parameter",
                        ));
                    }
                }
                _ if is_identifier(t) => break t,
                _ => {
                    return Err(load_error(
                        self.kernel.as_deref(),
                        line,
                        format!("expected a parameter name, found `{t}`"),
                    ));
                }
            }
        };
        let line = self.line();
        let ty = ty.ok_or_else(|| {
            load_error(
                self.kernel.as_deref(),
                line,
                format!("parameter `{name}` has no type"),
            )
        })?;
        let array = if self.eat("[") {
            let n = self.number("an array length")?;
            self.require("]", "`]`")?;
            Some(n)
        } else {
            None
        };
        Ok(PtxParam {
            name: name.to_string(),
            ty,
            array,
            align: align.unwrap_or(ty.size()),
            pointer_space,
        })
    }
}

/// Every `.entry` of a PTX module with its parameter list. A malformed declaration is an
/// error naming the line (and the entry, once its name is read); the bodies are not read.
pub fn parse_entries(ptx: &str) -> Result<Vec<PtxEntry>> {
    let tokens = tokenize(ptx).map_err(|(line, d)| load_error(None, line, d))?;
    let mut entries = Vec::new();
    let mut c = Cursor {
        tokens: &tokens,
        pos: 0,
        kernel: None,
    };
    while let Some(t) = c.peek().cloned() {
        c.pos += 1;
        if t.text != ".entry" {
            continue;
        }
        let line = t.line;
        let name = c.next("an entry name after `.entry`")?;
        if !is_identifier(name) {
            return Err(load_error(
                None,
                line,
                format!("`{name}` is not a valid entry name"),
            ));
        }
        c.kernel = Some(name.to_string());
        let mut params = Vec::new();
        if c.eat("(") && !c.eat(")") {
            loop {
                c.require(".param", "`.param`")?;
                params.push(c.param()?);
                if c.eat(")") {
                    break;
                }
                c.require(",", "`,` or `)` after a parameter")?;
            }
        }
        entries.push(PtxEntry {
            name: name.to_string(),
            params,
            line,
            dynamic_shared: false,
        });
    }
    if !entries.is_empty() {
        let users = dynamic_shared_users(&tokens);
        for e in &mut entries {
            e.dynamic_shared = users.contains(e.name.as_str());
        }
    }
    Ok(entries)
}

/// The statement around token `at`: from after the previous `;`, `{` or `}` to its `;` (or
/// the next brace).
fn statement_around(tokens: &[Token<'_>], at: usize) -> (usize, usize) {
    let bound = |t: &Token<'_>| matches!(t.text, ";" | "{" | "}");
    let start = tokens[..at].iter().rposition(bound).map_or(0, |p| p + 1);
    let end = tokens[at..]
        .iter()
        .position(bound)
        .map_or(tokens.len(), |p| at + p);
    (start, end)
}

/// Names of the functions (`.entry` and `.func`) that name dynamic shared memory, directly or
/// through the functions they call. A scan of tokens, not a parse: a name that merely occurs
/// in a body counts as a use.
fn dynamic_shared_users<'a>(tokens: &[Token<'a>]) -> std::collections::HashSet<&'a str> {
    use std::collections::{HashMap, HashSet};
    // Dynamic shared variables: `.extern .shared ... name[]` or `.shared ... name[]`.
    let mut dynamic: HashSet<&str> = HashSet::new();
    for (at, t) in tokens.iter().enumerate() {
        if t.text != ".shared" {
            continue;
        }
        let (start, end) = statement_around(tokens, at);
        let stmt = &tokens[start..end];
        let unsized_array = stmt
            .windows(2)
            .any(|w| w[0].text == "[" && w[1].text == "]");
        if !unsized_array && !stmt.iter().any(|t| t.text == ".extern") {
            continue;
        }
        if let Some(name) = tokens[at + 1..end]
            .iter()
            .find(|t| !t.text.starts_with('.') && is_identifier(t.text))
        {
            dynamic.insert(name.text);
        }
    }
    if dynamic.is_empty() {
        return HashSet::new();
    }
    // Each function's body: the identifiers it names.
    let mut bodies: HashMap<&str, HashSet<&str>> = HashMap::new();
    let mut at = 0;
    while at < tokens.len() {
        if !matches!(tokens[at].text, ".entry" | ".func") {
            at += 1;
            continue;
        }
        at += 1;
        // `.func (.param .b32 r) name (...)`: the name is the first identifier outside
        // parentheses.
        let mut depth = 0usize;
        let mut name = None;
        while let Some(t) = tokens.get(at) {
            match t.text {
                "(" => depth += 1,
                ")" => depth = depth.saturating_sub(1),
                "{" | ";" if depth == 0 => break,
                s if depth == 0 && name.is_none() && is_identifier(s) => name = Some(s),
                _ => {}
            }
            at += 1;
        }
        if tokens.get(at).map(|t| t.text) != Some("{") {
            continue; // a declaration without a body
        }
        let mut named = HashSet::new();
        let mut depth = 0usize;
        while let Some(t) = tokens.get(at) {
            match t.text {
                "{" => depth += 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                s if is_identifier(s) => {
                    named.insert(s);
                }
                _ => {}
            }
            at += 1;
        }
        if let Some(name) = name {
            bodies.entry(name).or_default().extend(named);
        }
    }
    // A function uses dynamic shared memory if it names it or calls one that does.
    let mut users: HashSet<&str> = HashSet::new();
    loop {
        let before = users.len();
        for (f, named) in &bodies {
            if !users.contains(f)
                && named
                    .iter()
                    .any(|n| dynamic.contains(n) || (users.contains(n) && n != f))
            {
                users.insert(f);
            }
        }
        if users.len() == before {
            return users;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scalars_arrays_pointers_and_comments() {
        let ptx = "
            .version 7.0 // comment .entry fake(
            .target sm_70
            /* .entry hidden( .param .u32 x ) */
            .visible .entry k(
                .param .u64 .ptr .global .align 4 k_param_0,
                .param .f32 k_param_1,
                .param .align 8 .b8 k_param_2[24],
                .param .s8 k_param_3
            )
            { ret; }
            .entry empty() { ret; }
            .entry bare { ret; }";
        let e = parse_entries(ptx).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].name, "k");
        assert_eq!(e[0].line, 5);
        let p = &e[0].params;
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].ty, PtxScalar::Unsigned(8));
        assert_eq!(p[0].pointer_space.as_deref(), Some("global"));
        assert_eq!(p[0].align, 4);
        assert_eq!(
            (p[1].ty, p[1].size(), p[1].align),
            (PtxScalar::Float(4), 4, 4)
        );
        assert_eq!((p[2].size(), p[2].align, p[2].array), (24, 8, Some(24)));
        assert_eq!(p[3].ty, PtxScalar::Signed(1));
        assert_eq!(p[2].to_string(), ".param .align 8 .b8 k_param_2[24]");
        assert!(e[1].params.is_empty() && e[2].params.is_empty());
    }

    #[test]
    fn entries_naming_dynamic_shared_memory_are_marked() {
        let ptx = "
            .extern .shared .align 4 .b8 dyn[];
            .shared .align 4 .b8 fixed[16];
            .func (.param .b32 r) helper(.param .b32 x) { mov.u64 %rd1, dyn; ret; }
            .func indirect() { call (%r1), helper, (%r2); ret; }
            .entry direct() { mov.u64 %rd1, dyn; ret; }
            .entry through_calls() { call.uni indirect, (); ret; }
            .entry static_only() { mov.u64 %rd1, fixed; ret; }
            .entry local_unsized() { .shared .b8 mine[]; mov.u64 %rd1, mine; ret; }";
        let e = parse_entries(ptx).unwrap();
        let marked: Vec<(&str, bool)> = e
            .iter()
            .map(|e| (e.name.as_str(), e.dynamic_shared))
            .collect();
        assert_eq!(
            marked,
            [
                ("direct", true),
                ("through_calls", true),
                ("static_only", false),
                ("local_unsized", true)
            ]
        );
    }

    #[test]
    fn malformed_declarations_name_the_line() {
        for (src, line, needle) in [
            (".entry k(\n.param .u33 x)", 2, ".u33"),
            (".entry k(\n.param .u32 x,\n)", 3, "`.param`"),
            (".entry k(.param .align 3 .b8 x[4])", 1, "power of two"),
            (".entry k(.param .u32)", 1, "parameter name"),
            (".entry k(\n.param x)", 2, "no type"),
            (".entry k(.param .u32 x", 1, "module ends"),
            ("/* open", 1, "never closed"),
            (".entry 9k()", 1, "not a valid entry name"),
            (".entry k(.param .b8 x[)", 1, "array length"),
        ] {
            let err = parse_entries(src).unwrap_err().to_string();
            assert!(
                err.contains(&format!("line {line}:")) && err.contains(needle),
                "{src:?}: {err}"
            );
        }
    }
}
