//! C parameter types as clang spells them, and their Rust counterparts.
//!
//! clang's JSON AST gives each parameter's type as text (`qualType`, and `desugaredQualType`
//! when a typedef is involved). [`parse`] turns that text into a [`CType`], resolving typedefs
//! and records through the [`TypeEnv`] built from the same AST, and refuses what has no
//! faithful Rust counterpart with the reason. Targets are 64-bit (NVPTX64, AMDGPU, SPIR and CPU
//! OpenCL devices): `long` and pointers are 8 bytes.
//!
//! | C | Rust argument |
//! |---|---|
//! | `float`, `double` | `f32`, `f64` |
//! | `char`, `signed char` / `unsigned char`, `uchar` | `i8` / `u8` |
//! | `short` / `unsigned short`, `ushort` | `i16` / `u16` |
//! | `int` / `unsigned`, `uint` | `i32` / `u32` |
//! | `long`, `long long`, `int64_t` / their unsigned forms, `ulong`, `uint64_t`, `size_t` | `i64` / `u64` |
//! | `bool` | `bool` in launchers, `u8` in the `Args` tuple (`bool` is not `Pod`) |
//! | `T *`, `const T *`, `__global T *`, `__constant T *` | `DevicePtr<T>` (`void *`: `DevicePtr<u8>`) |
//! | OpenCL `__local T *` | `SharedMemory<T>` |
//! | `struct S` by value | a generated `#[repr(C)]` `Pod` struct |

use std::collections::HashMap;

/// A scalar C type with an exact Rust counterpart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// `bool` / `_Bool` (one byte, 0 or 1).
    Bool,
    /// `char`, `signed char`.
    I8,
    /// `unsigned char`, `uchar`.
    U8,
    /// `short`.
    I16,
    /// `unsigned short`, `ushort`.
    U16,
    /// `int`.
    I32,
    /// `unsigned int`, `uint`.
    U32,
    /// `long`, `long long`, `int64_t`.
    I64,
    /// `unsigned long`, `unsigned long long`, `ulong`, `uint64_t`, `size_t`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
}

impl Scalar {
    /// Size and alignment in bytes (natural alignment on every supported target).
    pub fn size(self) -> usize {
        match self {
            Scalar::Bool | Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// The Rust type of a value of this type inside `Pod` data (the `Args` tuple, structs,
    /// pointees): `bool` is `u8` there.
    pub fn pod_rust(self) -> &'static str {
        match self {
            Scalar::Bool | Scalar::U8 => "u8",
            Scalar::I8 => "i8",
            Scalar::I16 => "i16",
            Scalar::U16 => "u16",
            Scalar::I32 => "i32",
            Scalar::U32 => "u32",
            Scalar::I64 => "i64",
            Scalar::U64 => "u64",
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
        }
    }
}

/// Where a pointer parameter points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Device memory: CUDA pointers, OpenCL `__global` and `__constant`.
    Device,
    /// OpenCL `__local`: dynamic shared memory, sized at launch.
    Local,
}

/// A C type a kernel parameter (or a field of a by-value struct) may have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CType {
    /// A scalar.
    Scalar(Scalar),
    /// A struct, by its id in the AST ([`TypeEnv::records`]).
    Record(String),
    /// `T[n]` (struct fields only; array parameters decay to pointers).
    Array(Box<CType>, usize),
    /// A pointer; `void *` has pointee `None`.
    Pointer(Option<Box<CType>>, Space),
}

/// A struct definition from the AST.
#[derive(Clone, Debug)]
pub struct Record {
    /// How C code names it (`Params`, `struct params`, or the typedef name of an anonymous
    /// struct), for the layout assertions.
    pub c_name: String,
    /// Its Rust name.
    pub rust_name: String,
    /// Fields in order: name and C type text.
    pub fields: Vec<(String, String)>,
}

/// Typedefs and records of one translation unit, for resolving type names.
#[derive(Clone, Debug, Default)]
pub struct TypeEnv {
    /// Records by AST id.
    pub records: HashMap<String, Record>,
    /// Record ids by the names C code uses (`Params`, `struct Params`).
    pub record_names: HashMap<String, String>,
    /// Typedef name → what it names: a record id or a type text.
    pub typedefs: HashMap<String, Typedef>,
}

/// What a typedef names.
#[derive(Clone, Debug)]
pub enum Typedef {
    /// A struct (possibly anonymous), by AST id.
    Record(String),
    /// Another type, as text.
    Type(String),
}

/// Words that qualify a type without changing its Rust counterpart.
const QUALIFIERS: &[&str] = &[
    "const",
    "volatile",
    "restrict",
    "__restrict",
    "__restrict__",
    "__private",
    "private",
    "__global",
    "global",
    "__constant",
    "constant",
    "__local",
    "local",
    "__generic",
    "generic",
];

fn scalar_named(name: &str) -> Option<Scalar> {
    Some(match name {
        "bool" | "_Bool" => Scalar::Bool,
        "char" | "signed char" => Scalar::I8,
        "unsigned char" | "uchar" | "uint8_t" => Scalar::U8,
        "short" | "short int" | "signed short" | "signed short int" | "int16_t" => Scalar::I16,
        "unsigned short" | "unsigned short int" | "ushort" | "uint16_t" => Scalar::U16,
        "int" | "signed" | "signed int" | "int32_t" => Scalar::I32,
        "unsigned" | "unsigned int" | "uint" | "uint32_t" => Scalar::U32,
        "long" | "long int" | "signed long" | "long long" | "long long int"
        | "signed long long" | "int64_t" | "ptrdiff_t" => Scalar::I64,
        "unsigned long"
        | "unsigned long int"
        | "unsigned long long"
        | "unsigned long long int"
        | "ulong"
        | "uint64_t"
        | "size_t" => Scalar::U64,
        "float" => Scalar::F32,
        "double" => Scalar::F64,
        _ => return None,
    })
}

/// Why a named type is refused, for the types that exist but have no Rust counterpart.
fn refused(name: &str) -> Option<&'static str> {
    Some(match name {
        "long double" => "no Rust type has the size and precision of `long double`",
        "half" | "__half" | "_Float16" | "__fp16" | "__bf16" | "__nv_bfloat16" => {
            "half-precision floats have no stable Rust type; pass the bits as `unsigned short`"
        }
        "__int128" | "unsigned __int128" | "__int128_t" | "__uint128_t" => {
            "128-bit integers have a different alignment in Rust and in the device ABIs"
        }
        "void" => "a `void` parameter",
        _ => return None,
    })
}

/// Removes qualifier words and attribute clutter; collapses spaces.
fn strip_qualifiers(text: &str) -> (String, Option<Space>) {
    let mut space = None;
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|w| {
            match *w {
                "__local" | "local" => space = Some(Space::Local),
                "__global" | "global" | "__constant" | "constant" => {
                    space = space.or(Some(Space::Device))
                }
                _ => {}
            }
            !QUALIFIERS.contains(w)
        })
        .collect();
    (words.join(" "), space)
}

/// Parses a C type text (clang's spelling) into a [`CType`]; `Err` says why it has no
/// faithful Rust counterpart. `opencl` selects OpenCL's rules (pointers need an address space).
pub fn parse(text: &str, env: &TypeEnv, opencl: bool) -> Result<CType, String> {
    parse_depth(text, env, opencl, 0)
}

fn parse_depth(text: &str, env: &TypeEnv, opencl: bool, depth: usize) -> Result<CType, String> {
    if depth > 32 {
        return Err("typedefs nest too deeply".into());
    }
    let text = text.trim();
    if text.contains("(unnamed") || text.contains("(anonymous") {
        return Err("an anonymous struct: name it or give it a typedef".into());
    }
    if text.contains("(*)")
        || text.contains("(^)")
        || (text.contains('(') && !text.contains("__attribute__"))
    {
        return Err("function pointers cannot be kernel arguments from Rust".into());
    }
    if text.contains("ext_vector_type") || text.contains("vector_size") {
        return Err(
            "vector types have a larger alignment than Rust arrays; pass a struct or pointer"
                .into(),
        );
    }
    if text.ends_with('&') || text.ends_with("&&") {
        return Err("references have no Rust kernel-argument counterpart; pass a pointer".into());
    }
    if let Some(star) = text.rfind('*') {
        let (pointee, _) = text.split_at(star);
        let (pointee_name, space) = strip_qualifiers(pointee);
        if pointee_name.contains('*') {
            return Err("pointers to pointers: a DevicePtr's element must be plain data".into());
        }
        let space = match space {
            Some(space) => space,
            None if opencl => {
                return Err(
                    "an OpenCL pointer parameter needs `__global`, `__constant` or `__local`"
                        .into(),
                );
            }
            None => Space::Device,
        };
        if pointee_name == "void" {
            return Ok(CType::Pointer(None, space));
        }
        let elem = parse_depth(&pointee_name, env, opencl, depth + 1)
            .map_err(|why| format!("its element type `{pointee_name}`: {why}"))?;
        return Ok(CType::Pointer(Some(Box::new(elem)), space));
    }
    if let Some(open) = text.rfind('[') {
        let count = text[open + 1..].trim_end_matches(']').trim();
        let n: usize = count
            .parse()
            .map_err(|_| format!("an array of unknown length `{count}`"))?;
        let elem = parse_depth(&text[..open], env, opencl, depth + 1)?;
        return Ok(CType::Array(Box::new(elem), n));
    }
    let (name, _) = strip_qualifiers(text);
    if let Some(s) = scalar_named(&name) {
        return Ok(CType::Scalar(s));
    }
    if let Some(why) = refused(&name) {
        return Err(why.into());
    }
    if name.starts_with("enum ") {
        return Err("enums: pass the value as its underlying integer type".into());
    }
    if name.starts_with("union ") {
        return Err("unions have no faithful Pod counterpart".into());
    }
    if let Some(id) = env.record_names.get(&name) {
        return Ok(CType::Record(id.clone()));
    }
    match env.typedefs.get(&name) {
        Some(Typedef::Record(id)) => Ok(CType::Record(id.clone())),
        Some(Typedef::Type(t)) => parse_depth(t, env, opencl, depth + 1),
        None => Err(format!("`{name}` is not a type streamexec-build knows")),
    }
}

/// Size and alignment of `ty` by the C rules every supported target follows (natural
/// alignment, fields in order, size rounded up to the alignment). clang checks the result
/// (`_Static_assert`s the generator adds), so a `packed` or `aligned` struct is an error, not a
/// silent mismatch.
pub fn layout(ty: &CType, env: &TypeEnv) -> Result<(usize, usize), String> {
    layout_depth(ty, env, 0)
}

fn layout_depth(ty: &CType, env: &TypeEnv, depth: usize) -> Result<(usize, usize), String> {
    if depth > 32 {
        return Err("structs nest too deeply".into());
    }
    match ty {
        CType::Scalar(s) => Ok((s.size(), s.size())),
        CType::Pointer(..) => Ok((8, 8)),
        CType::Array(elem, n) => {
            let (size, align) = layout_depth(elem, env, depth + 1)?;
            Ok((size * n, align))
        }
        CType::Record(id) => {
            let fields = record_fields(id, env)?;
            let (mut size, mut align) = (0usize, 1usize);
            for (_, field) in &fields {
                let (s, a) = layout_depth(field, env, depth + 1)?;
                size = size.next_multiple_of(a) + s;
                align = align.max(a);
            }
            Ok((size.next_multiple_of(align), align))
        }
    }
}

/// A record's fields as parsed types. Pointers and `bool`s inside structs are refused: a
/// struct argument is `Pod` bytes, and a device pointer there could not be checked.
pub fn record_fields(id: &str, env: &TypeEnv) -> Result<Vec<(String, CType)>, String> {
    let record = env
        .records
        .get(id)
        .ok_or_else(|| "a struct whose definition clang did not show".to_string())?;
    if record.fields.is_empty() {
        return Err(format!(
            "struct `{}` has no fields (C and Rust sizes differ)",
            record.c_name
        ));
    }
    record
        .fields
        .iter()
        .map(|(name, text)| {
            let ty = parse(text, env, false)
                .map_err(|why| format!("field `{name}` of `{}`: {why}", record.c_name))?;
            match &ty {
                CType::Pointer(..) => Err(format!(
                    "field `{name}` of `{}` is a pointer: pass device pointers as separate \
                     parameters (DevicePtr), not inside structs",
                    record.c_name
                )),
                _ => Ok((name.clone(), ty)),
            }
        })
        .collect()
}

/// The Rust type of a value of `ty` inside `Pod` data (tuple element, field, pointee);
/// generated structs are named with `prefix` (`"super::"` inside a kernel's module).
pub fn pod_rust(ty: &CType, env: &TypeEnv, prefix: &str) -> String {
    let elem = |e: &Option<Box<CType>>| {
        e.as_deref()
            .map_or_else(|| "u8".into(), |e| pod_rust(e, env, prefix))
    };
    match ty {
        CType::Scalar(s) => s.pod_rust().into(),
        CType::Record(id) => env
            .records
            .get(id)
            .map_or_else(|| "u8".into(), |r| format!("{prefix}{}", r.rust_name)),
        CType::Array(e, n) => format!("[{}; {n}]", pod_rust(e, env, prefix)),
        CType::Pointer(e, Space::Device) => format!("::streamexec::DevicePtr<{}>", elem(e)),
        CType::Pointer(e, Space::Local) => format!("::streamexec::SharedMemory<{}>", elem(e)),
    }
}

/// The Rust type a generated launcher takes for `ty` (as [`pod_rust`], but `bool` is `bool`).
pub fn launcher_rust(ty: &CType, env: &TypeEnv, prefix: &str) -> String {
    match ty {
        CType::Scalar(Scalar::Bool) => "bool".into(),
        _ => pod_rust(ty, env, prefix),
    }
}

#[cfg(test)]
#[path = "ctype_tests.rs"]
mod tests;
