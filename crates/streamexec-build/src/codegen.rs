//! The Rust text of `kernels.rs`: one module per kernel, the structs kernels take by value.
//!
//! The output depends only on its inputs (no paths of the build machine, no clang version
//! line), so committed prebuilt outputs compare byte for byte.

use std::fmt::Write as _;

/// One parameter of a generated launcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// The Rust identifier.
    pub name: String,
    /// The C type as clang spells it (for docs).
    pub c_type: String,
    /// Its type in the `Args` tuple.
    pub pod: String,
    /// Its type in the launcher (`bool` for C `bool`).
    pub launcher: String,
}

/// One kernel, in every format that was built. Code is named by [`Blob`] (one per source
/// and target, shared by the kernels of that source).
#[derive(Clone, Debug, Default)]
pub struct KernelModel {
    /// The Rust module name.
    pub module: String,
    /// The kernel as the user names it (`add_mystery_value`, `scale<float>`).
    pub c_name: String,
    /// Parameters, in order (a CUDA kernel's dynamic shared memory last).
    pub params: Vec<Param>,
    /// The PTX / HSACO symbol.
    pub symbol: Option<String>,
    /// PTX per architecture (`sm_70`, blob name).
    pub ptx: Vec<(String, String)>,
    /// HSACO per architecture (`gfx90a`, blob name).
    pub hsaco: Vec<(String, String)>,
    /// OpenCL kernel name and the blob of its program text.
    pub opencl: Option<(String, String)>,
    /// The sources it comes from (relative paths).
    pub sources: Vec<String>,
}

/// Device code embedded once in `kernels.rs`, named by the kernels that use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// The constant's name (`__STREAMEXEC_PTX_0_SM_70`).
    pub name: String,
    /// What it holds and where it came from, for its doc line.
    pub what: String,
    /// Text (PTX, OpenCL C) or bytes (HSACO).
    pub data: BlobData,
}

/// A [`Blob`]'s contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlobData {
    /// PTX or OpenCL C.
    Text(String),
    /// A code object.
    Bytes(Vec<u8>),
}

/// A struct a kernel takes by value, laid out as clang lays it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StructModel {
    /// The Rust name.
    pub rust_name: String,
    /// How C names it.
    pub c_name: String,
    /// Fields: Rust name, Rust type, offset, size.
    pub fields: Vec<(String, String, usize, usize)>,
    /// Size in bytes.
    pub size: usize,
    /// Alignment in bytes.
    pub align: usize,
}

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false",
    "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "static", "struct", "trait", "true", "type", "unsafe", "use", "where",
    "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv", "try",
    "typeof", "unsized", "virtual", "yield",
];

/// A Rust identifier for a C name: other characters become `_`, keywords are raw identifiers
/// (`r#in`), and the few that cannot be raw get a `_` appended.
pub fn ident(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while s.contains("__") && !s.starts_with("__") {
        s = s.replace("__", "_");
    }
    let s = s.trim_end_matches('_').to_string();
    let s = if s.is_empty() { "_k".to_string() } else { s };
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        return format!("_{s}");
    }
    if ["self", "Self", "super", "crate", "_"].contains(&s.as_str()) {
        return format!("{s}_");
    }
    if KEYWORDS.contains(&s.as_str()) {
        return format!("r#{s}");
    }
    s
}

/// `(major, minor)` of `sm_XY` / `sm_XYa`: `sm_70` → (7, 0), `sm_86` → (8, 6).
pub fn compute_capability(arch: &str) -> Option<(u32, u32)> {
    let digits: String = arch
        .strip_prefix("sm_")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    if digits.len() < 2 {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// A raw string literal holding `text`.
fn raw_str(text: &str) -> String {
    let mut hashes = 1;
    while text.contains(&format!("\"{}", "#".repeat(hashes))) {
        hashes += 1;
    }
    let h = "#".repeat(hashes);
    format!("r{h}\"{text}\"{h}")
}

/// A byte string literal holding `bytes`.
fn byte_str(bytes: &[u8]) -> String {
    let mut s = String::from("b\"");
    for (i, b) in bytes.iter().enumerate() {
        if i % 32 == 31 {
            s.push_str("\\\n");
        }
        let _ = write!(s, "\\x{b:02x}");
    }
    s.push('"');
    s
}

/// The whole `kernels.rs`.
pub fn generate(kernels: &[KernelModel], structs: &[StructModel], blobs: &[Blob]) -> String {
    let mut out = String::new();
    out.push_str(
        "// @generated by streamexec-build from the kernel sources named below; do not edit.\n\
         // Include it with `include!(concat!(env!(\"OUT_DIR\"), \"/kernels.rs\"));`.\n\n",
    );
    for b in blobs {
        let value = match &b.data {
            BlobData::Text(t) => format!("&str = {}", raw_str(t)),
            BlobData::Bytes(bytes) => format!("&[u8] = {}", byte_str(bytes)),
        };
        let _ = writeln!(
            out,
            "/// {}\n#[allow(dead_code)]\nconst {}: {value};\n",
            b.what, b.name
        );
    }
    for s in structs {
        write_struct(&mut out, s);
    }
    for k in kernels {
        write_kernel(&mut out, k);
    }
    out
}

fn write_struct(out: &mut String, s: &StructModel) {
    let name = &s.rust_name;
    let _ = writeln!(
        out,
        "/// `{}` of the kernel sources ({} bytes, aligned to {}), laid out as clang lays it \
         out;\n/// the `__pad*` fields are the padding C leaves implicit.\n\
         #[repr(C)]\n#[derive(Clone, Copy, Debug, PartialEq, ::bytemuck::Pod, ::bytemuck::Zeroable)]\n\
         #[allow(non_camel_case_types, dead_code)]\npub struct {name} {{",
        s.c_name, s.size, s.align
    );
    for (field, ty, offset, _) in &s.fields {
        let _ = writeln!(out, "    /// At byte {offset}.\n    pub {field}: {ty},");
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(
        out,
        "const _: () = assert!(\n    ::core::mem::size_of::<{name}>() == {} && \
         ::core::mem::align_of::<{name}>() == {},\n    \"{name}: clang's layout differs\"\n);",
        s.size, s.align
    );
    for (field, _, offset, _) in s.fields.iter().filter(|f| !f.0.starts_with("__pad")) {
        let _ = writeln!(
            out,
            "const _: () = assert!(::core::mem::offset_of!({name}, {field}) == {offset});"
        );
    }
    let named: Vec<_> = s
        .fields
        .iter()
        .filter(|f| !f.0.starts_with("__pad"))
        .collect();
    let params: Vec<String> = named.iter().map(|(f, t, ..)| format!("{f}: {t}")).collect();
    let inits: Vec<String> = s
        .fields
        .iter()
        .map(|(f, _, _, size)| {
            if f.starts_with("__pad") {
                format!("{f}: [0; {size}]")
            } else {
                f.clone()
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "\n#[allow(dead_code)]\nimpl {name} {{\n    /// A value with these fields and zeroed padding.\n    \
         #[allow(clippy::too_many_arguments)]\n    pub const fn new({}) -> Self {{\n        \
         {name} {{ {} }}\n    }}\n}}\n",
        params.join(", "),
        inits.join(", ")
    );
}

fn write_kernel(out: &mut String, k: &KernelModel) {
    let m = &k.module;
    let tuple = match k.params.len() {
        1 => format!("({},)", k.params[0].pod),
        _ => format!(
            "({})",
            k.params
                .iter()
                .map(|p| p.pod.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let signature: Vec<String> = k
        .params
        .iter()
        .map(|p| format!("`{}: {}`", p.name.trim_start_matches("r#"), p.c_type))
        .collect();
    let _ = writeln!(
        out,
        "/// Kernel `{}` ({}), built by streamexec-build.\n#[allow(dead_code)]\npub mod {m} {{\n    \
         /// The kernel's parameters as a `TypedKernel` argument tuple: {}.\n    \
         pub type Args = {tuple};\n    /// The loaded kernel.\n    \
         pub type Kernel = ::streamexec::TypedKernel<Args>;\n    \
         /// The parameter count (the loader spec's arity).\n    pub const ARITY: usize = {};",
        k.c_name,
        k.sources.join(", "),
        if signature.is_empty() {
            "none".into()
        } else {
            signature.join(", ")
        },
        k.params.len()
    );
    let symbol = k.symbol.as_deref().unwrap_or("");
    let _ = writeln!(
        out,
        "    /// The PTX entry and HSACO symbol (the mangled name of a C++ kernel).\n    \
         pub const SYMBOL: &str = {symbol:?};"
    );
    let _ = writeln!(
        out,
        "    /// PTX per architecture.\n    pub const PTX: &[(&str, &str)] = &["
    );
    for (arch, blob) in &k.ptx {
        let _ = writeln!(out, "        ({arch:?}, super::{blob}),");
    }
    let _ = writeln!(
        out,
        "    ];\n    /// HSACO per architecture.\n    pub const HSACO: &[(&str, &[u8])] = &["
    );
    for (arch, blob) in &k.hsaco {
        let _ = writeln!(out, "        ({arch:?}, super::{blob}),");
    }
    let _ = writeln!(
        out,
        "    ];\n    /// The OpenCL C program text, if an OpenCL source defines the kernel."
    );
    let _ = match &k.opencl {
        Some((_, blob)) => writeln!(
            out,
            "    pub const OPENCL: Option<&str> = Some(super::{blob});"
        ),
        None => writeln!(out, "    pub const OPENCL: Option<&str> = None;"),
    };
    let mut spec = String::from("::streamexec::MultiKernelLoaderSpec::new(ARITY)");
    for (arch, blob) in &k.ptx {
        let (major, minor) = compute_capability(arch).unwrap_or((0, 0));
        let _ = write!(
            spec,
            "\n            .add_cuda_ptx_in_memory_for(super::{blob}, SYMBOL, ({major}, {minor}))"
        );
    }
    if let Some((name, blob)) = &k.opencl {
        let _ = write!(
            spec,
            "\n            .add_opencl_text_in_memory(super::{blob}, {name:?})"
        );
    }
    if let Some((_, blob)) = k.hsaco.first() {
        let _ = write!(
            spec,
            "\n            .add_hsaco_in_memory(super::{blob}, SYMBOL)"
        );
    }
    let _ = writeln!(
        out,
        "    /// The loader spec: PTX for each architecture (keyed by compute capability), the\n    \
         /// OpenCL C text and the first HSACO, with the kernel's name and arity.\n    \
         pub fn spec() -> ::streamexec::MultiKernelLoaderSpec {{\n        {spec}\n    }}\n"
    );
    let _ = writeln!(
        out,
        "    /// Loads the kernel on `executor`, once per executor (later calls return the same\n    \
         /// kernel): the spec's formats are checked against [`Args`] as `get_kernel` checks them.\n    \
         pub fn load(executor: &::streamexec::StreamExecutor) -> ::streamexec::Result<Kernel> {{\n        \
         executor.get_kernel_cached(concat!(module_path!(), \"::{m}\"), spec)\n    }}\n"
    );
    let launcher_params: String = k
        .params
        .iter()
        .map(|p| format!(",\n        {}: {}", p.name, p.launcher))
        .collect();
    let args: Vec<String> = k
        .params
        .iter()
        .map(|p| {
            if p.launcher == "bool" {
                format!("u8::from({})", p.name)
            } else {
                p.name.clone()
            }
        })
        .collect();
    let args = match args.len() {
        1 => format!("({},)", args[0]),
        _ => format!("({})", args.join(", ")),
    };
    let _ = writeln!(
        out,
        "    /// Launches the kernel on `stream` with `blocks` of `threads` (the order of\n    \
         /// `Stream::then_launch`), loading it first on the stream's executor (once, see\n    \
         /// [`load`]). A failed load fails the stream, like a failed launch.\n    \
         #[allow(clippy::too_many_arguments)]\n    pub fn launch(\n        \
         stream: &mut ::streamexec::Stream,\n        \
         threads: impl Into<::streamexec::ThreadDim>,\n        \
         blocks: impl Into<::streamexec::BlockDim>{launcher_params},\n    \
         ) -> &mut ::streamexec::Stream {{\n        \
         stream.then_launch_with(threads, blocks, load, {args})\n    }}\n}}\n"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_valid_rust() {
        assert_eq!(ident("in"), "r#in");
        assert_eq!(ident("self"), "self_");
        assert_eq!(ident("scale<float>"), "scale_float");
        assert_eq!(ident("scale<unsigned int, 3>"), "scale_unsigned_int_3");
        assert_eq!(ident("3d"), "_3d");
        assert_eq!(ident("x"), "x");
    }

    #[test]
    fn compute_capabilities_follow_the_arch_names() {
        assert_eq!(compute_capability("sm_70"), Some((7, 0)));
        assert_eq!(compute_capability("sm_86"), Some((8, 6)));
        assert_eq!(compute_capability("sm_90a"), Some((9, 0)));
        assert_eq!(compute_capability("sm_100"), Some((10, 0)));
        assert_eq!(compute_capability("gfx90a"), None);
    }

    #[test]
    fn raw_strings_survive_quotes_and_hashes() {
        assert_eq!(raw_str("a\"#b"), "r##\"a\"#b\"##");
        assert_eq!(raw_str("plain"), "r#\"plain\"#");
    }
}
