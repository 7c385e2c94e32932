//! Compiling a program: NVRTC's options mapped to clang's ([`parse_options`]), the source and
//! headers written into a temporary directory, clang run on them ([`compile`]), and the lowered
//! names of the name expressions read out of the PTX.
//!
//! Name expressions (`nvrtcAddNameExpression`) become, after the source,
//! `__device__ __attribute__((used)) void* __streamexec_ne_<i> = (void*)(<expression>);`: the
//! expression denotes an address (NVRTC's contract), clang instantiates what it names and emits
//! the global as `.global .u64 __streamexec_ne_<i> = <mangled name>;` (`generic(<name>)` for a
//! variable). The names are read from there and those globals taken out of the PTX.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::nvrtc::sys::nvrtcResult;

/// CUDA's execution spaces, built-in variables, warp/vote/atomic functions (shared with the
/// committed kernels, see `scripts/gen-ptx.sh`).
const PRELUDE: &str = include_str!("../../../kernels/prelude.h");
/// What NVRTC predefines beyond the prelude.
const BUILTINS: &str = include_str!("builtins.h");
/// `-default-device`: every declaration without an execution space is `__host__ __device__`.
const DEFAULT_DEVICE: &str = "#pragma clang force_cuda_host_device begin\n";
/// Where the library's own headers and the output go, inside the temporary directory.
const OWN_DIR: &str = ".streamexec";
/// The prefix of the name-expression globals.
const NAME_EXPR_VAR: &str = "__streamexec_ne_";
/// The architecture compiled for when no `--gpu-architecture` is given and
/// `STREAMEXEC_CUDA_CC` does not name one: the CPU libcuda's default compute capability.
const DEFAULT_ARCH: &str = "sm_70";

/// How to install clang, for the log when it is missing.
const INSTALL_HINT: &str = "this NVRTC (streamexec's, for the CPU libcuda) compiles CUDA C++ \
    with clang: install clang 19 (Debian/Ubuntu: `apt-get install clang-19`), or name a \
    clang++ with NVPTX support in STREAMEXEC_NVRTC_CLANG";

/// What the options ask for, in clang's terms.
#[derive(Debug, PartialEq)]
pub(crate) struct Plan {
    /// `sm_NN` (with a suffix letter when one was given).
    pub(crate) arch: String,
    /// `c++17` etc.
    pub(crate) std: String,
    /// `-default-device`.
    pub(crate) default_device: bool,
    /// Further clang arguments, in the order given (`-D`, `-U`, `-I`, `-include`, fp flags).
    pub(crate) flags: Vec<String>,
}

/// The options NVRTC documents that change nothing here, with whether they take a value.
/// Debug info, register limits, ptxas options and diagnostics numbering have no meaning for
/// the CPU engine; `--prec-div=false`/`--prec-sqrt=false` allow, but do not require,
/// approximation, so IEEE results are kept; relocatable code is compiled whole-program.
const IGNORED: &[(&str, &str, Value)] = &[
    ("--maxrregcount", "-maxrregcount", Value::Number),
    ("--device-debug", "-G", Value::None),
    ("--generate-line-info", "-lineinfo", Value::None),
    ("--dopt", "-dopt", Value::Any),
    ("--ptxas-options", "-Xptxas", Value::Any),
    ("--prec-sqrt", "-prec-sqrt", Value::Bool),
    ("--prec-div", "-prec-div", Value::Bool),
    (
        "--extra-device-vectorization",
        "-extra-device-vectorization",
        Value::None,
    ),
    ("--modify-stack-limit", "-modify-stack-limit", Value::Bool),
    ("--relocatable-device-code", "-rdc", Value::Bool),
    ("--device-c", "-dc", Value::None),
    ("--device-w", "-dw", Value::None),
    (
        "--builtin-move-forward",
        "-builtin-move-forward",
        Value::Bool,
    ),
    (
        "--builtin-initializer-list",
        "-builtin-initializer-list",
        Value::Bool,
    ),
    ("--restrict", "-restrict", Value::None),
    ("--device-int128", "-device-int128", Value::None),
    ("--optimization-info", "-opt-info", Value::Any),
    ("--display-error-number", "-err-no", Value::None),
    ("--no-display-error-number", "-no-err-no", Value::None),
    ("--diag-error", "-diag-error", Value::Any),
    ("--diag-suppress", "-diag-suppress", Value::Any),
    ("--diag-warn", "-diag-warn", Value::Any),
    ("--brief-diagnostics", "-brief-diag", Value::Bool),
    ("--time", "-time", Value::Any),
    ("--split-compile", "-split-compile", Value::Number),
    ("--no-source-include", "-no-source-include", Value::None),
    ("--jump-table-density", "-jtd", Value::Number),
    ("--minimal", "-minimal", Value::None),
    (
        "--device-stack-protector",
        "-device-stack-protector",
        Value::Bool,
    ),
    ("--fdevice-time-trace", "-fdevice-time-trace", Value::Any),
];

/// Options NVRTC documents that ask for an output this library does not produce.
const REFUSED: &[(&str, &str, &str)] = &[
    ("--dlink-time-opt", "-dlto", "LTO-IR"),
    ("--gen-opt-lto", "-gen-opt-lto", "LTO-IR"),
    ("--optix-ir", "-optix-ir", "OptiX-IR"),
    (
        "--fdevice-syntax-only",
        "-fdevice-syntax-only",
        "a syntax check without PTX",
    ),
];

/// What an option's value must be.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Value {
    None,
    Bool,
    Number,
    Any,
}

/// The `sm_NN` for the default architecture: `STREAMEXEC_CUDA_CC=M.m` (the CPU libcuda's
/// setting) when it is given and valid, else [`DEFAULT_ARCH`].
pub(crate) fn default_arch(cc: Option<&str>) -> String {
    cc.and_then(|v| {
        let (a, b) = v.trim().split_once('.')?;
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        ((3..=12).contains(&a) && b <= 9).then(|| format!("sm_{a}{b}"))
    })
    .unwrap_or_else(|| DEFAULT_ARCH.into())
}

/// `compute_NN`/`sm_NN` (with an optional `a`/`f` suffix) as `sm_NN`.
fn arch(v: &str) -> Result<String, String> {
    if v.starts_with("lto_") {
        return Err(format!(
            "`{v}` asks for LTO-IR; this NVRTC produces PTX only: give compute_NN"
        ));
    }
    let n = v
        .strip_prefix("compute_")
        .or_else(|| v.strip_prefix("sm_"))
        .ok_or_else(|| format!("`{v}` is not an architecture (compute_NN or sm_NN)"))?;
    let digits = n.trim_end_matches(['a', 'f']);
    if digits.len() < 2 || n.len() - digits.len() > 1 || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!(
            "`{v}` is not an architecture (compute_NN or sm_NN)"
        ));
    }
    Ok(format!("sm_{n}"))
}

/// Maps NVRTC's `options` to a [`Plan`]; `Err` is the log (one line per bad option).
pub(crate) fn parse_options(options: &[String], default_arch: &str) -> Result<Plan, String> {
    let mut plan = Plan {
        arch: default_arch.into(),
        std: "c++17".into(),
        default_device: false,
        flags: Vec::new(),
    };
    let mut errors = Vec::new();
    let mut it = options.iter();
    while let Some(opt) = it.next() {
        let opt = opt.as_str();
        // -DNAME, -UNAME, -Idir (but not -include or -default-device: lower case).
        if let Some(flag) = ["-D", "-U", "-I"].iter().find_map(|short| {
            let rest = opt.strip_prefix(short)?;
            (!rest.is_empty() && !rest.starts_with('=')).then(|| include_path_or(short, rest))
        }) {
            plan.flags.push(flag);
            continue;
        }
        let (key, inline) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let is = |long: &str, short: &str| key == long || key == short;
        // The value of an option that takes one: `--opt=value` or `--opt value`.
        let mut value = |errors: &mut Vec<String>| -> Option<String> {
            match inline {
                Some(v) => Some(v.to_string()),
                None => match it.next() {
                    Some(v) => Some(v.clone()),
                    None => {
                        errors.push(format!("nvrtc: error: option {opt} expects a value"));
                        None
                    }
                },
            }
        };
        let boolean = |errors: &mut Vec<String>| -> Option<bool> {
            match inline {
                Some("true") => Some(true),
                Some("false") => Some(false),
                _ => {
                    errors.push(format!(
                        "nvrtc: error: option {opt} expects =true or =false"
                    ));
                    None
                }
            }
        };
        if is("--gpu-architecture", "-arch") {
            if let Some(v) = value(&mut errors) {
                match arch(&v) {
                    Ok(a) => plan.arch = a,
                    Err(e) => errors.push(format!("nvrtc: error: {opt}: {e}")),
                }
            }
        } else if is("--define-macro", "-D") {
            if let Some(v) = value(&mut errors) {
                plan.flags.push(format!("-D{v}"));
            }
        } else if is("--undefine-macro", "-U") {
            if let Some(v) = value(&mut errors) {
                plan.flags.push(format!("-U{v}"));
            }
        } else if is("--include-path", "-I") {
            if let Some(v) = value(&mut errors) {
                plan.flags.push(include_path_or("-I", &v));
            }
        } else if is("--pre-include", "-include") {
            if let Some(v) = value(&mut errors) {
                plan.flags.push("-include".into());
                plan.flags.push(v);
            }
        } else if is("--std", "-std") {
            if let Some(v) = value(&mut errors) {
                match v.as_str() {
                    "c++03" | "c++11" | "c++14" | "c++17" | "c++20" => plan.std = v,
                    _ => errors.push(format!(
                        "nvrtc: error: {opt}: the dialect must be one of c++03, c++11, c++14, \
                         c++17, c++20"
                    )),
                }
            }
        } else if is("--device-as-default-execution-space", "-default-device") && inline.is_none() {
            plan.default_device = true;
        } else if is("--ftz", "-ftz") {
            if let Some(b) = boolean(&mut errors) {
                plan.flags.push(if b {
                    "-fgpu-flush-denormals-to-zero".into()
                } else {
                    "-fno-gpu-flush-denormals-to-zero".into()
                });
            }
        } else if is("--fmad", "-fmad") {
            if let Some(b) = boolean(&mut errors) {
                plan.flags.push(if b {
                    "-ffp-contract=fast".into()
                } else {
                    "-ffp-contract=off".into()
                });
            }
        } else if is("--use_fast_math", "-use_fast_math") && inline.is_none() {
            // NVRTC: --ftz=true --prec-div=false --prec-sqrt=false --fmad=true.
            plan.flags.push("-fgpu-flush-denormals-to-zero".into());
            plan.flags.push("-ffp-contract=fast".into());
        } else if is("--disable-warnings", "-w") && inline.is_none() {
            plan.flags.push("-w".into());
        } else if let Some((_, _, what)) = REFUSED.iter().find(|(l, s, _)| is(l, s)) {
            errors.push(format!(
                "nvrtc: error: option {opt} asks for {what}; this NVRTC (streamexec's, backed \
                 by clang) produces PTX only"
            ));
        } else if let Some((_, _, kind)) = IGNORED.iter().find(|(l, s, _)| is(l, s)) {
            match kind {
                Value::None if inline.is_some() => {
                    errors.push(format!("nvrtc: error: option {opt} takes no value"))
                }
                Value::None => {}
                Value::Bool => {
                    boolean(&mut errors);
                }
                Value::Number => {
                    if let Some(v) = value(&mut errors)
                        && v.parse::<u64>().is_err()
                    {
                        errors.push(format!("nvrtc: error: option {opt} expects a number"));
                    }
                }
                Value::Any => {
                    value(&mut errors);
                }
            }
        } else {
            errors.push(format!("nvrtc: error: unrecognized option {opt}"));
        }
    }
    if errors.is_empty() {
        Ok(plan)
    } else {
        errors.push(
            "(this NVRTC is streamexec's, backed by clang; it knows the options NVRTC 12.0 \
             documents)"
                .into(),
        );
        Err(errors.join("\n") + "\n")
    }
}

/// `-I<dir>` with a relative `dir` made absolute (clang runs in the temporary directory);
/// other flags as given.
fn include_path_or(flag: &str, v: &str) -> String {
    if flag == "-I"
        && Path::new(v).is_relative()
        && let Ok(cwd) = std::env::current_dir()
    {
        return format!("-I{}", cwd.join(v).display());
    }
    format!("{flag}{v}")
}

/// A program to compile.
pub(crate) struct Input<'a> {
    pub(crate) source: &'a [u8],
    /// The program's name (NVRTC's `name`, `default_program` when none was given).
    pub(crate) name: &'a str,
    /// `(include name, contents)`; names are checked by [`check_include_name`].
    pub(crate) headers: &'a [(String, Vec<u8>)],
    pub(crate) name_expressions: &'a [String],
}

/// A successful compilation.
#[derive(Debug)]
pub(crate) struct Compiled {
    /// The PTX text (no NUL).
    pub(crate) ptx: String,
    /// Clang's warnings (empty when there are none).
    pub(crate) log: String,
    /// The lowered name of each name expression.
    pub(crate) lowered: HashMap<String, String>,
}

/// A failed compilation: the code and the log.
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) code: nvrtcResult,
    pub(crate) log: String,
}

fn failed(code: nvrtcResult, log: impl Into<String>) -> Failed {
    Failed {
        code,
        log: log.into(),
    }
}

/// `Err` when `name` cannot be written under the temporary directory as given: it must be a
/// relative path without `..` (headers are written under their include names).
pub(crate) fn check_include_name(name: &str) -> Result<(), String> {
    let p = Path::new(name);
    if name.is_empty()
        || p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        || p.components()
            .next()
            .is_some_and(|c| c.as_os_str() == OWN_DIR)
    {
        return Err(format!(
            "include name {name:?}: this NVRTC writes headers to a temporary directory under \
             their include names, so a name must be a relative path without `.`/`..` \
             components (and not under `{OWN_DIR}`)"
        ));
    }
    Ok(())
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("streamexec-nvrtc-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(TempDir(dir)),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The clang binaries to try: `$STREAMEXEC_NVRTC_CLANG` alone when it is set, else
/// `clang++-19` then `clang++`.
fn clang_candidates() -> Vec<String> {
    match std::env::var("STREAMEXEC_NVRTC_CLANG") {
        Ok(c) if !c.is_empty() => vec![c],
        _ => vec!["clang++-19".into(), "clang++".into()],
    }
}

/// The file name the source is written to: the program name made safe for a file name, and
/// distinct from the first component of every include name.
fn source_file_name(name: &str, headers: &[(String, Vec<u8>)]) -> String {
    let mut file: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if file.is_empty() || file.starts_with('.') {
        file.insert(0, '_');
    }
    let taken = |f: &str| {
        headers.iter().any(|(h, _)| {
            Path::new(h)
                .components()
                .next()
                .is_some_and(|c| c.as_os_str() == f)
        })
    };
    while taken(&file) {
        file.push_str(".cu");
    }
    file
}

/// The source clang compiles: the program's, then one global per name expression.
fn full_source(source: &[u8], name_expressions: &[String]) -> Vec<u8> {
    let mut s = source.to_vec();
    for (i, e) in name_expressions.iter().enumerate() {
        let label = e.replace(['"', '\\', '\n'], "_");
        s.extend_from_slice(
            format!(
                "\n#line 1 \"name expression {label}\"\n__device__ __attribute__((used)) void* \
                 {NAME_EXPR_VAR}{i} = (void*)({e});\n"
            )
            .as_bytes(),
        );
    }
    s
}

/// Takes the name-expression globals out of `ptx`; returns the PTX without them and the lowered
/// name of each (by index).
fn take_name_expressions(ptx: &str, count: usize) -> Result<(String, Vec<String>), String> {
    let mut names = vec![None; count];
    let mut out = String::with_capacity(ptx.len());
    for line in ptx.split_inclusive('\n') {
        let Some(at) = line.find(NAME_EXPR_VAR) else {
            out.push_str(line);
            continue;
        };
        let rest = &line[at + NAME_EXPR_VAR.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let init = rest.split_once('=').map(|(_, v)| {
            let v = v.trim().trim_end_matches(';').trim();
            v.strip_prefix("generic(")
                .and_then(|v| v.strip_suffix(')'))
                .unwrap_or(v)
                .to_string()
        });
        if let (Ok(i), Some(name)) = (digits.parse::<usize>(), init)
            && i < count
        {
            names[i] = Some(name);
        }
        // Declarations and comments that mention the global go with it.
    }
    let names = names
        .into_iter()
        .enumerate()
        .map(|(i, n)| n.ok_or_else(|| format!("name expression {i} has no address in the PTX")))
        .collect::<Result<_, _>>()?;
    Ok((out, names))
}

/// Compiles `input` with NVRTC's `options`.
pub(crate) fn compile(input: &Input<'_>, options: &[String]) -> Result<Compiled, Failed> {
    let cc = std::env::var("STREAMEXEC_CUDA_CC").ok();
    let plan = parse_options(options, &default_arch(cc.as_deref()))
        .map_err(|log| failed(nvrtcResult::NVRTC_ERROR_INVALID_OPTION, log))?;
    let internal = |what: &str, e: std::io::Error| {
        failed(
            nvrtcResult::NVRTC_ERROR_INTERNAL_ERROR,
            format!("nvrtc (streamexec): {what}: {e}\n"),
        )
    };
    let tmp = TempDir::new().map_err(|e| internal("cannot create a temporary directory", e))?;
    let dir = &tmp.0;
    let own = dir.join(OWN_DIR);
    std::fs::create_dir(&own)
        .map_err(|e| internal("cannot write to the temporary directory", e))?;
    let write = |rel: &Path, bytes: &[u8]| -> Result<(), Failed> {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| internal("cannot write to the temporary directory", e))?;
        }
        std::fs::write(&path, bytes)
            .map_err(|e| internal("cannot write to the temporary directory", e))
    };
    write(&Path::new(OWN_DIR).join("prelude.h"), PRELUDE.as_bytes())?;
    write(&Path::new(OWN_DIR).join("nvrtc.h"), BUILTINS.as_bytes())?;
    write(
        &Path::new(OWN_DIR).join("default_device.h"),
        DEFAULT_DEVICE.as_bytes(),
    )?;
    for (name, text) in input.headers {
        write(Path::new(name), text)?;
    }
    let file = source_file_name(input.name, input.headers);
    write(
        Path::new(&file),
        &full_source(input.source, input.name_expressions),
    )?;
    let out = Path::new(OWN_DIR).join("out.ptx");

    let mut args: Vec<String> = [
        "-x",
        "cuda",
        "--cuda-device-only",
        "-nocudainc",
        "-nocudalib",
        "-Xclang",
        "-target-feature",
        "-Xclang",
        "+ptx70",
        "-O3",
        "-S",
        "-fno-color-diagnostics",
    ]
    .map(String::from)
    .into();
    args.push(format!("--cuda-gpu-arch={}", plan.arch));
    args.push(format!("-std={}", plan.std));
    args.push("-I.".into());
    for h in ["prelude.h", "nvrtc.h"] {
        args.push("-include".into());
        args.push(format!("{OWN_DIR}/{h}"));
    }
    if plan.default_device {
        args.push("-include".into());
        args.push(format!("{OWN_DIR}/default_device.h"));
    }
    args.extend(plan.flags.iter().cloned());
    args.push(file);
    args.push("-o".into());
    args.push(out.display().to_string());

    let mut tried = Vec::new();
    let mut result = None;
    for clang in clang_candidates() {
        match Command::new(&clang).args(&args).current_dir(dir).output() {
            Ok(o) => {
                result = Some((clang, o));
                break;
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                tried.push(format!("`{clang}` (not found)"))
            }
            Err(e) => tried.push(format!("`{clang}` ({e})")),
        }
    }
    let Some((clang, output)) = result else {
        return Err(failed(
            nvrtcResult::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE,
            format!(
                "nvrtc (streamexec): error: no clang to compile with: tried {}; {INSTALL_HINT}\n",
                tried.join(", ")
            ),
        ));
    };
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        let log = if log.trim().is_empty() {
            format!(
                "nvrtc (streamexec): error: `{clang}` failed ({}) without a message\n",
                output.status
            )
        } else {
            log
        };
        return Err(failed(nvrtcResult::NVRTC_ERROR_COMPILATION, log));
    }
    let ptx = std::fs::read_to_string(dir.join(&out))
        .map_err(|e| internal(&format!("cannot read the PTX `{clang}` wrote"), e))?;
    let (ptx, names) = take_name_expressions(&ptx, input.name_expressions.len()).map_err(|e| {
        failed(
            nvrtcResult::NVRTC_ERROR_INTERNAL_ERROR,
            format!("nvrtc (streamexec): {e}\n"),
        )
    })?;
    Ok(Compiled {
        ptx,
        log,
        lowered: input.name_expressions.iter().cloned().zip(names).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(v: &[&str]) -> Result<Plan, String> {
        let v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        parse_options(&v, "sm_70")
    }

    #[test]
    fn architectures_map_to_sm() {
        for (given, sm) in [
            (&["--gpu-architecture=compute_80"][..], "sm_80"),
            (&["-arch=sm_75"], "sm_75"),
            (&["-arch", "compute_90a"], "sm_90a"),
            (&[], "sm_70"),
        ] {
            assert_eq!(opts(given).unwrap().arch, sm, "{given:?}");
        }
        for bad in ["compute_", "sm_7", "lto_80", "gfx90a", "compute_80ab"] {
            let log = opts(&[&format!("-arch={bad}")]).unwrap_err();
            assert!(log.contains(bad), "{log}");
        }
        assert_eq!(default_arch(Some("8.6")), "sm_86");
        assert_eq!(default_arch(Some("junk")), "sm_70");
        assert_eq!(default_arch(None), "sm_70");
    }

    #[test]
    fn macros_paths_dialect_and_fp_options() {
        let p = opts(&[
            "-DN=4",
            "--define-macro=M",
            "-D",
            "K",
            "-UX",
            "-I/inc",
            "--include-path=/inc2",
            "--std=c++20",
            "-default-device",
            "--ftz=true",
            "--fmad=false",
            "--use_fast_math",
            "-include",
            "h.h",
            "-w",
        ])
        .unwrap();
        assert_eq!(p.std, "c++20");
        assert!(p.default_device);
        assert_eq!(
            p.flags,
            [
                "-DN=4",
                "-DM",
                "-DK",
                "-UX",
                "-I/inc",
                "-I/inc2",
                "-fgpu-flush-denormals-to-zero",
                "-ffp-contract=off",
                "-fgpu-flush-denormals-to-zero",
                "-ffp-contract=fast",
                "-include",
                "h.h",
                "-w"
            ]
        );
        let rel = opts(&["-Isub"]).unwrap();
        let want = std::env::current_dir().unwrap().join("sub");
        assert_eq!(rel.flags, [format!("-I{}", want.display())]);
    }

    #[test]
    fn ignored_options_are_checked_and_unknown_ones_named() {
        let p = opts(&[
            "--maxrregcount=32",
            "-lineinfo",
            "--prec-div=false",
            "-rdc=true",
            "-dopt",
            "on",
        ])
        .unwrap();
        assert!(p.flags.is_empty());
        let log = opts(&[
            "--frobnicate",
            "--ftz",
            "--maxrregcount=x",
            "-dlto",
            "-std=c++98",
        ])
        .unwrap_err();
        for needle in [
            "unrecognized option --frobnicate",
            "--ftz expects =true or =false",
            "--maxrregcount=x expects a number",
            "-dlto asks for LTO-IR",
            "-std=c++98",
        ] {
            assert!(log.contains(needle), "`{needle}` not in:\n{log}");
        }
    }

    #[test]
    fn include_names_must_stay_inside_the_directory() {
        for ok in ["a.h", "dir/b.cuh", "x/y/z.h"] {
            check_include_name(ok).unwrap();
        }
        for bad in [
            "",
            "/etc/passwd",
            "../up.h",
            "a/../../b.h",
            "./a.h",
            ".streamexec/prelude.h",
        ] {
            assert!(check_include_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn source_names_avoid_headers_and_odd_characters() {
        let h = |n: &str| (n.to_string(), Vec::new());
        assert_eq!(source_file_name("default_program", &[]), "default_program");
        assert_eq!(source_file_name("my kernel/x.cu", &[]), "my_kernel_x.cu");
        assert_eq!(source_file_name(".hidden", &[]), "_.hidden");
        assert_eq!(source_file_name("k.h", &[h("k.h")]), "k.h.cu");
        assert_eq!(source_file_name("inc", &[h("inc/a.h")]), "inc.cu");
    }

    #[test]
    fn name_expression_globals_give_lowered_names_and_leave_the_ptx() {
        let ptx = ".version 7.0\n.target sm_70\n.visible .global .align 4 .u32 gv;\n\
                   .visible .global .align 8 .u64 __streamexec_ne_0 = _Z2tkIfEvPT_;\n\
                   .visible .global .align 8 .u64 __streamexec_ne_1 = generic(gv);\n\
                   .visible .entry _Z2tkIfEvPT_()\n{\n\tret;\n}\n";
        let (out, names) = take_name_expressions(ptx, 2).unwrap();
        assert_eq!(names, ["_Z2tkIfEvPT_", "gv"]);
        assert!(!out.contains("__streamexec_ne_"), "{out}");
        assert!(out.contains(".u32 gv;") && out.contains(".entry _Z2tkIfEvPT_"));
        assert!(take_name_expressions(ptx, 3).is_err());
        let src = full_source(b"int x;", &["&x".into()]);
        assert!(
            String::from_utf8(src)
                .unwrap()
                .ends_with("__streamexec_ne_0 = (void*)(&x);\n")
        );
    }
}
