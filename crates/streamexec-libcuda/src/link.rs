//! `cuLinkCreate`, `cuLinkAddData`, `cuLinkAddFile`, `cuLinkComplete`, `cuLinkDestroy`: several
//! PTX inputs linked into one image, which `cuModuleLoadData` and `cuLibraryLoadData` load.
//!
//! The PTX engine loads one module at a time, so linking is done on the text: the inputs
//! become one PTX module under one header (the highest `.version` and `.target` of the
//! inputs). `.extern` declarations of a function or variable that an input defines are dropped
//! (the engine resolves calls module-wide), so are repeated declarations of one that none
//! defines (`vprintf`); of several `.weak` definitions the `.visible` one, else the first, is
//! kept; two strong definitions of one name are a link error, as for `nvlink`; and names
//! internal to an input (no linkage directive) that another input also uses are renamed in the
//! later input (`$str` becomes `$str$se1`), so they stay apart. Each input is parsed when it
//! is added, so a PTX error is reported by `cuLinkAddData` with the engine's message in the
//! error log; the linked text is parsed again by `cuLinkComplete`.
//!
//! The "cubin" `cuLinkComplete` returns is that PTX text (NUL-terminated, the NUL counted in
//! its size): the images of this driver are PTX. Inputs of GPU machine code (cubin, fatbin,
//! object, library) are `CUDA_ERROR_NO_BINARY_FOR_GPU`, and LTO IR (`CU_JIT_INPUT_NVVM`)
//! `CUDA_ERROR_NOT_SUPPORTED`: both are for a GPU's linker.

use std::collections::{HashMap, HashSet};
use std::ffi::{CStr, c_char, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUjit_option, CUlinkState, CUresult};
use parking_lot::Mutex;
use streamexec::ptx::parse_module;

use crate::driver::driver;
use crate::entry::{CuErr, CuResult, bad_handle, invalid, non_null, put};
use crate::handles::Table;

/// Live link states.
static LINKS: Table<Link> = Table::new(0x9000_0000);

/// A log buffer the caller gave `cuLinkCreate` (address, bytes); it stays valid until
/// `cuLinkDestroy`, as the driver API requires.
#[derive(Clone, Copy, Default)]
struct LogBuffer(usize, usize);

impl LogBuffer {
    /// Writes `text` (truncated, NUL-terminated) into the buffer.
    fn write(self, text: &str) {
        let (buf, size) = (self.0 as *mut u8, self.1);
        if buf.is_null() || size == 0 {
            return;
        }
        let n = text.len().min(size - 1);
        // SAFETY: the caller's buffer of `size` > `n` bytes, valid until cuLinkDestroy.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf, n);
            buf.add(n).write(0);
        }
    }
}

/// One link in progress.
struct Link {
    handle: usize,
    info_log: LogBuffer,
    error_log: LogBuffer,
    /// `CU_JIT_MAX_REGISTERS` of `cuLinkCreate`, written into the image (`maxnreg.rs`).
    max_registers: Option<u32>,
    state: Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    /// `(name, PTX text)` of each input, in the order added.
    inputs: Vec<(String, String)>,
    /// The linked image (NUL-terminated), once complete: `cuLinkComplete` hands out its address.
    image: Option<Vec<u8>>,
}

/// `CU_JIT_INFO_LOG_BUFFER` .. `CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES`.
const INFO_LOG_BUFFER: u32 = 3;
const INFO_LOG_SIZE: u32 = 4;
const ERROR_LOG_BUFFER: u32 = 5;
const ERROR_LOG_SIZE: u32 = 6;

/// `CUjitInputType`.
const INPUT_CUBIN: u32 = 0;
const INPUT_PTX: u32 = 1;
const INPUT_NVVM: u32 = 5;

/// The log buffers among `n` JIT options; every other option (optimization level, target,
/// line info, ...) changes nothing for the PTX engine and is accepted.
///
/// # Safety
/// `options`/`values` are null or hold `n` entries.
unsafe fn log_buffers(
    n: c_uint,
    options: *mut CUjit_option,
    values: *mut *mut c_void,
) -> CuResult<(LogBuffer, LogBuffer)> {
    let (mut info, mut error) = (LogBuffer::default(), LogBuffer::default());
    if n == 0 {
        return Ok((info, error));
    }
    if options.is_null() || values.is_null() {
        return Err(invalid(format!(
            "numOptions is {n} but options or optionValues is NULL"
        )));
    }
    // SAFETY: `n` entries each (the caller's contract); options read as integers, so a value
    // outside the enum is not undefined behaviour.
    let (opts, vals) = unsafe {
        (
            std::slice::from_raw_parts(options.cast::<u32>(), n as usize),
            std::slice::from_raw_parts(values, n as usize),
        )
    };
    for (&o, &v) in opts.iter().zip(vals) {
        match o {
            INFO_LOG_BUFFER => info.0 = v as usize,
            INFO_LOG_SIZE => info.1 = v as usize,
            ERROR_LOG_BUFFER => error.0 = v as usize,
            ERROR_LOG_SIZE => error.1 = v as usize,
            _ => {}
        }
    }
    Ok((info, error))
}

/// The link state of handle `h`.
fn link(h: CUlinkState) -> CuResult<Arc<Link>> {
    driver()?;
    LINKS
        .get(h as usize)
        .ok_or_else(|| bad_handle(format!("{:#x} is not a live link state", h as usize)))
}

/// `cuLinkCreate_v2`: a new link; the log buffers among the options receive the messages.
///
/// # Safety
/// The option arrays hold `numOptions` entries; log buffers stay valid until `cuLinkDestroy`;
/// `stateOut` is null or valid for a write.
pub(crate) unsafe fn cuLinkCreate_v2(
    numOptions: c_uint,
    options: *mut CUjit_option,
    optionValues: *mut *mut c_void,
    stateOut: *mut CUlinkState,
) -> CuResult<()> {
    crate::context::current()?;
    non_null(stateOut, "stateOut")?;
    // SAFETY: the caller's contract.
    let (info_log, error_log) = unsafe { log_buffers(numOptions, options, optionValues)? };
    // SAFETY: as above (the arrays were checked non-null where `numOptions` is not 0).
    let max_registers = unsafe { crate::maxnreg::max_registers(numOptions, options, optionValues) };
    let handle = LINKS.reserve();
    info_log.write("");
    error_log.write("");
    LINKS.insert(
        handle,
        Arc::new(Link {
            handle,
            info_log,
            error_log,
            max_registers,
            state: Mutex::new(LinkState::default()),
        }),
    );
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(stateOut, handle as CUlinkState, "stateOut") }
}

/// Adds one input of `kind` (`CUjitInputType`) named `name`; its failure goes to the error log.
fn add(l: &Link, kind: u32, bytes: &[u8], name: String) -> CuResult<()> {
    let r = input_text(kind, bytes, &name).and_then(|text| {
        parse_module(&text).map_err(|e| {
            CuErr::new(
                CUresult::CUDA_ERROR_INVALID_PTX,
                format!("PTX input `{name}`: {e}"),
            )
        })?;
        let mut st = l.state.lock();
        if st.image.is_some() {
            return Err(invalid("the link is complete already (cuLinkComplete)"));
        }
        st.inputs.push((name, text));
        Ok(())
    });
    if let Err(e) = &r {
        l.error_log.write(&e.detail);
    }
    r
}

/// The CPU device runtime (`devrt.ptx`): what is linked for NVIDIA's libcudadevrt.
const DEVRT_PTX: &str = include_str!("devrt.ptx");

/// The device runtime's grid barrier (`devrt.ptx`), which a cooperative launch of a module
/// that has it zeroes first (stream-ordered): a launch that failed while blocks waited leaves
/// it mid-count, and a module's globals outlive its launches.
pub(crate) const GRID_BARRIER: &str = "__streamexec_cg_grid_barrier";

/// Whether `bytes` are NVIDIA's device runtime library, whatever the file is called: an `ar`
/// archive whose member is `cuda_device_runtime.o` (its code is compressed GPU machine code).
fn is_cudadevrt(bytes: &[u8]) -> bool {
    const MEMBER: &[u8] = b"cuda_device_runtime.o";
    bytes.starts_with(b"!<arch>\n") && bytes.windows(MEMBER.len()).any(|w| w == MEMBER)
}

/// The PTX text of an input, or why it is not one this driver links.
fn input_text(kind: u32, bytes: &[u8], name: &str) -> CuResult<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if is_cudadevrt(bytes) {
        return Ok(DEVRT_PTX.to_string());
    }
    let binary = bytes.starts_with(b"\x7fELF")
        || bytes.starts_with(&0xBA55_ED50u32.to_le_bytes())
        || bytes.starts_with(&0x4662_43B1u32.to_le_bytes())
        || bytes.starts_with(b"!<arch>");
    match kind {
        // A "cubin" of this driver is PTX text (what cuLinkComplete returns).
        INPUT_PTX | INPUT_CUBIN if !binary => {
            std::str::from_utf8(bytes).map(str::to_string).map_err(|_| {
                CuErr::new(
                    CUresult::CUDA_ERROR_INVALID_PTX,
                    format!("input `{name}` is not PTX text (not UTF-8)"),
                )
            })
        }
        INPUT_NVVM => Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_SUPPORTED,
            format!(
                "input `{name}` is LTO IR (CU_JIT_INPUT_NVVM): the CPU driver links PTX only \
                 (compile without LTO)"
            ),
        )),
        0..=4 => Err(CuErr::new(
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
            format!(
                "input `{name}` is GPU machine code (cubin, fatbin, object or library); the CPU \
                 driver links PTX only"
            ),
        )),
        k => Err(invalid(format!("{k} is not a CUjitInputType"))),
    }
}

/// `cuLinkAddData_v2`: adds a PTX input (the JIT options of the input change nothing).
///
/// # Safety
/// `data` holds `size` bytes; `name` is null or NUL-terminated.
#[allow(clippy::too_many_arguments)] // the C signature
pub(crate) unsafe fn cuLinkAddData_v2(
    state: CUlinkState,
    type_: u32,
    data: *mut c_void,
    size: usize,
    name: *const c_char,
    numOptions: c_uint,
    options: *mut CUjit_option,
    optionValues: *mut *mut c_void,
) -> CuResult<()> {
    let l = link(state)?;
    let _ = (numOptions, options, optionValues);
    non_null(data, "data")?;
    if size == 0 {
        return Err(invalid("size is 0"));
    }
    // SAFETY: the caller's contract: `data` holds `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
    let name = if name.is_null() {
        format!("input {}", l.state.lock().inputs.len())
    } else {
        // SAFETY: non-null and NUL-terminated (the caller's contract).
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned()
    };
    add(&l, type_, bytes, name)
}

/// `cuLinkAddFile_v2`: adds the PTX file at `path`.
///
/// # Safety
/// `path` is NUL-terminated.
pub(crate) unsafe fn cuLinkAddFile_v2(
    state: CUlinkState,
    type_: u32,
    path: *const c_char,
    numOptions: c_uint,
    options: *mut CUjit_option,
    optionValues: *mut *mut c_void,
) -> CuResult<()> {
    let l = link(state)?;
    let _ = (numOptions, options, optionValues);
    non_null(path, "path")?;
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let path = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let bytes = std::fs::read(&path).map_err(|e| {
        let e = CuErr::new(CUresult::CUDA_ERROR_FILE_NOT_FOUND, format!("{path}: {e}"));
        l.error_log.write(&e.detail);
        e
    })?;
    add(&l, type_, &bytes, path)
}

/// `cuLinkComplete`: links the inputs; `cubinOut` receives the image (PTX text, valid until
/// `cuLinkDestroy`) and `sizeOut` its size.
///
/// # Safety
/// The out pointers are null or valid for writes.
pub(crate) unsafe fn cuLinkComplete(
    state: CUlinkState,
    cubinOut: *mut *mut c_void,
    sizeOut: *mut usize,
) -> CuResult<()> {
    let l = link(state)?;
    non_null(cubinOut, "cubinOut")?;
    non_null(sizeOut, "sizeOut")?;
    let mut st = l.state.lock();
    if st.image.is_none() {
        let linked = link_ptx(&st.inputs)
            .map(|text| match l.max_registers {
                Some(n) => crate::maxnreg::with_maxnreg(&text, n),
                None => text,
            })
            .and_then(|text| match parse_module(&text) {
                Ok(_) => Ok(text),
                Err(e) => Err(format!("the linked PTX does not parse: {e}")),
            })
            .map_err(|e| {
                l.error_log.write(&format!("error: {e}"));
                CuErr::new(CUresult::CUDA_ERROR_INVALID_PTX, e)
            })?;
        l.info_log.write(&format!(
            "streamexec libcuda: linked {} PTX input(s) into one PTX module",
            st.inputs.len()
        ));
        let mut image = linked.into_bytes();
        image.push(0);
        st.image = Some(image);
    }
    let image = st
        .image
        .as_ref()
        .map_or((std::ptr::null(), 0), |i| (i.as_ptr(), i.len()));
    // SAFETY: the caller's out-pointers (checked non-null); the image lives in the link state
    // until cuLinkDestroy, and is never changed once made.
    unsafe {
        cubinOut.write(image.0.cast_mut().cast());
        sizeOut.write(image.1);
    }
    Ok(())
}

/// `cuLinkDestroy`: the image `cuLinkComplete` returned is freed.
pub(crate) fn cuLinkDestroy(state: CUlinkState) -> CuResult<()> {
    let l = link(state)?;
    LINKS.remove(l.handle);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Linking PTX text.

/// Linkage of a module-scope name, as the linker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Linkage {
    Internal,
    Visible,
    Extern,
    Weak,
}

/// What a top-level item of a module is.
#[derive(Debug, PartialEq, Eq)]
enum Item {
    /// `.version`, `.target`, `.address_size`: replaced by the linked module's header.
    Header,
    /// A function (`.entry`, `.func`) or module-scope variable: a definition, or a declaration
    /// (a function without a body, an `.extern` variable).
    Symbol {
        name: String,
        linkage: Linkage,
        defines: bool,
    },
    /// Anything else (`.file`, `.section`, `.pragma`, comments): kept as written.
    Other,
}

/// A token of PTX text: its text and byte range.
#[derive(Clone, Copy)]
struct Tok<'a> {
    text: &'a str,
    start: usize,
}

fn ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c == b'%'
}

fn ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

/// The tokens of `s`: identifiers (and `.directives`), numbers, strings, single punctuation;
/// comments skipped. A newline is a token (`"\n"`), since header directives end at one.
fn tokens(s: &str) -> Vec<Tok<'_>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c == b'\n' {
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
            continue;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i = (i + 2).min(b.len());
            continue;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                i += 1;
            }
            i = (i + 1).min(b.len());
        } else if ident_start(c) || c == b'.' || c.is_ascii_digit() {
            i += 1;
            while i < b.len() && (ident_char(b[i]) || b[i] == b'.') {
                i += 1;
            }
        } else {
            // One byte, or a whole UTF-8 character (not valid PTX, but never split).
            i += 1;
            while i < b.len() && !s.is_char_boundary(i) {
                i += 1;
            }
        }
        out.push(Tok {
            text: &s[start..i],
            start,
        });
    }
    out
}

/// The top-level items of module `s`: `(byte range, what it is)`. Text between items
/// (whitespace, comments) belongs to the item after it.
fn items(s: &str) -> Vec<(std::ops::Range<usize>, Item)> {
    let toks = tokens(s);
    let mut out = Vec::new();
    let (mut k, mut from) = (0, 0);
    while k < toks.len() {
        if toks[k].text == "\n" {
            k += 1;
            continue;
        }
        let first = k;
        let head = toks[k].text;
        let end_tok; // index of the item's last token
        if matches!(
            head,
            ".version" | ".target" | ".address_size" | ".file" | ".loc"
        ) {
            let mut j = k;
            while j + 1 < toks.len() && toks[j + 1].text != "\n" {
                j += 1;
            }
            end_tok = j;
        } else {
            // To the `;` at brace depth 0, or the `}` closing a body (not an initializer).
            let (mut depth, mut init, mut body, mut j) = (0usize, false, false, k);
            loop {
                match toks[j].text {
                    "=" if depth == 0 => init = true,
                    "{" => {
                        if depth == 0 && !init {
                            body = true;
                        }
                        depth += 1;
                    }
                    "}" => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 && body {
                            break;
                        }
                    }
                    ";" if depth == 0 => break,
                    _ => {}
                }
                if j + 1 == toks.len() {
                    break;
                }
                j += 1;
            }
            end_tok = j;
        }
        let t = &toks[first..=end_tok];
        let end = toks[end_tok].start + toks[end_tok].text.len();
        out.push((from..end, classify(t)));
        from = end;
        k = end_tok + 1;
    }
    if from < s.len() {
        out.push((from..s.len(), Item::Other));
    }
    out
}

/// What the item of tokens `t` is.
fn classify(t: &[Tok<'_>]) -> Item {
    let words: Vec<&str> = t.iter().map(|t| t.text).filter(|w| *w != "\n").collect();
    if matches!(words[0], ".version" | ".target" | ".address_size") {
        return Item::Header;
    }
    let mut linkage = Linkage::Internal;
    let mut k = 0;
    while let Some(l) = words.get(k).and_then(|w| match *w {
        ".visible" => Some(Linkage::Visible),
        ".extern" => Some(Linkage::Extern),
        ".weak" | ".common" => Some(Linkage::Weak),
        _ => None,
    }) {
        linkage = l;
        k += 1;
    }
    let name_after = |mut k: usize| {
        while k < words.len() {
            let w = words[k];
            if w == "(" {
                // Skip a parenthesised group (a `.func`'s return parameters).
                let mut depth = 0;
                while k < words.len() {
                    match words[k] {
                        "(" => depth += 1,
                        ")" => depth -= 1,
                        _ => {}
                    }
                    k += 1;
                    if depth == 0 {
                        break;
                    }
                }
                continue;
            }
            if ident_start(w.as_bytes()[0]) {
                return Some(w.to_string());
            }
            k += 1;
        }
        None
    };
    match words.get(k).copied() {
        Some(".entry" | ".func") => {
            let Some(name) = name_after(k + 1) else {
                return Item::Other;
            };
            let defines = words.contains(&"{");
            // A kernel is visible to the host whatever its linkage directive.
            let linkage = if words[k] == ".entry" && linkage == Linkage::Internal {
                Linkage::Visible
            } else {
                linkage
            };
            Item::Symbol {
                name,
                linkage,
                defines,
            }
        }
        Some(".global" | ".const" | ".shared" | ".local" | ".tex" | ".surf" | ".sampler") => {
            match name_after(k + 1) {
                Some(name) => Item::Symbol {
                    name,
                    linkage,
                    defines: linkage != Linkage::Extern,
                },
                None => Item::Other,
            }
        }
        _ => Item::Other,
    }
}

/// `text` with every identifier token that `renames` names replaced.
fn rename(text: &str, renames: &HashMap<String, String>) -> String {
    if renames.is_empty() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut at = 0;
    for t in tokens(text) {
        if let Some(new) = renames.get(t.text) {
            out.push_str(&text[at..t.start]);
            out.push_str(new);
            at = t.start + t.text.len();
        }
    }
    out.push_str(&text[at..]);
    out
}

/// The `.version` (major, minor) and `sm_NN` of a module's header, and its `.target` line.
fn header(text: &str, items: &[(std::ops::Range<usize>, Item)]) -> ((u32, u32), u32, String) {
    let (mut version, mut sm, mut target) = ((0, 0), 0, String::new());
    for (r, it) in items {
        if *it != Item::Header {
            continue;
        }
        let words: Vec<&str> = tokens(&text[r.clone()])
            .iter()
            .map(|t| t.text)
            .filter(|w| *w != "\n")
            .collect();
        match words.first().copied() {
            Some(".version") => {
                if let Some((a, b)) = words.get(1).and_then(|v| v.split_once('.')) {
                    version = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
                }
            }
            Some(".target") => {
                target = words[1..].join(" ").replace(" ,", ",");
                sm = words
                    .iter()
                    .filter_map(|w| w.strip_prefix("sm_"))
                    .filter_map(|s| s.trim_end_matches(|c: char| c.is_alphabetic()).parse().ok())
                    .max()
                    .unwrap_or(0);
            }
            _ => {}
        }
    }
    (version, sm, target)
}

/// Function names the GPU's own runtime provides (system calls): declared, never defined.
const SYSTEM_CALLS: &[&str] = &["vprintf", "malloc", "free", "__assertfail"];

/// Links PTX modules `(name, text)` into one module's text.
fn link_ptx(inputs: &[(String, String)]) -> Result<String, String> {
    if inputs.is_empty() {
        return Err("nothing to link: no input was added (cuLinkAddData)".into());
    }
    let parts: Vec<_> = inputs.iter().map(|(_, t)| items(t)).collect();
    // Every non-internal definition: name -> (input, linkage).
    let mut strong: HashMap<&str, usize> = HashMap::new();
    let mut weak: HashMap<&str, usize> = HashMap::new();
    let mut external: HashSet<&str> = HashSet::new();
    for (i, items) in parts.iter().enumerate() {
        for (_, it) in items {
            let Item::Symbol {
                name,
                linkage,
                defines,
            } = it
            else {
                continue;
            };
            if *linkage != Linkage::Internal {
                external.insert(name);
            }
            match (linkage, defines) {
                (Linkage::Visible, true) => {
                    if let Some(&j) = strong.get(name.as_str())
                        && j != i
                    {
                        return Err(format!(
                            "multiple definitions of `{name}`: in `{}` and in `{}`",
                            inputs[j].0, inputs[i].0
                        ));
                    }
                    strong.insert(name, i);
                }
                (Linkage::Weak, true) => {
                    weak.entry(name).or_insert(i);
                }
                _ => {}
            }
        }
    }
    // The definition kept for each external name.
    let mut chosen: HashMap<&str, usize> = weak;
    chosen.extend(strong);
    // Internal names of each input, and who owns each (the first input using it internally,
    // unless another input uses it externally).
    let mut owner: HashMap<&str, usize> = HashMap::new();
    let mut renames: Vec<HashMap<String, String>> = vec![HashMap::new(); inputs.len()];
    for (i, items) in parts.iter().enumerate() {
        for (_, it) in items {
            if let Item::Symbol {
                name,
                linkage: Linkage::Internal,
                ..
            } = it
            {
                let taken = external.contains(name.as_str())
                    || owner.get(name.as_str()).is_some_and(|&o| o != i);
                if taken {
                    renames[i].insert(name.clone(), format!("{name}$se{i}"));
                } else {
                    owner.insert(name, i);
                }
            }
        }
    }
    // The header: the highest version and target of the inputs.
    let mut version = (0, 0);
    let (mut sm, mut target) = (0, String::new());
    for ((_, text), items) in inputs.iter().zip(&parts) {
        let (v, s, t) = header(text, items);
        version = version.max(v);
        if s > sm || target.is_empty() {
            (sm, target) = (s, t);
        }
    }
    let mut out = String::new();
    if version != (0, 0) {
        out.push_str(&format!(".version {}.{}\n", version.0, version.1));
    }
    if !target.is_empty() {
        out.push_str(&format!(".target {target}\n"));
    }
    out.push_str(".address_size 64\n");
    let mut declared: HashSet<&str> = HashSet::new();
    for (i, ((name, text), items)) in inputs.iter().zip(&parts).enumerate() {
        out.push_str(&format!("\n// ---- streamexec cuLink input {i}: {name}\n"));
        for (r, it) in items {
            let keep = match it {
                Item::Header => false,
                Item::Other => true,
                Item::Symbol {
                    name,
                    linkage,
                    defines,
                } => match (linkage, defines) {
                    (Linkage::Internal, _) => true,
                    // The definition kept; other weak ones are dropped.
                    (_, true) => chosen.get(name.as_str()) == Some(&i),
                    // A declaration: dropped where an input defines the name, kept once else.
                    (_, false) => !chosen.contains_key(name.as_str()) && declared.insert(name),
                },
            };
            if keep {
                out.push_str(&rename(&text[r.clone()], &renames[i]));
            }
        }
        out.push('\n');
    }
    // A function declared by some input and defined by none (other than a system call the
    // GPU runtime provides) is an undefined reference, as for nvlink.
    for (i, items) in parts.iter().enumerate() {
        for (_, it) in items {
            if let Item::Symbol {
                name,
                linkage: Linkage::Extern,
                defines: false,
            } = it
                && !chosen.contains_key(name.as_str())
                && !SYSTEM_CALLS.contains(&name.as_str())
                && text_declares_function(&inputs[i].1, name)
            {
                return Err(format!(
                    "undefined reference to `{name}` in `{}`",
                    inputs[i].0
                ));
            }
        }
    }
    Ok(out)
}

/// Whether `text` declares `name` as an `.extern .func` (not a variable).
fn text_declares_function(text: &str, name: &str) -> bool {
    items(text).iter().any(|(r, it)| {
        matches!(it, Item::Symbol { name: n, linkage: Linkage::Extern, .. } if n == name)
            && tokens(&text[r.clone()]).iter().any(|t| t.text == ".func")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.extern .func (.param .b32 r) helper (.param .b32 x);
.extern .global .align 4 .u32 counter;
.extern .func (.param .b32 r) vprintf (.param .b64 f, .param .b64 a);
.global .align 1 .b8 $str[3] = {104, 105, 0};

.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 20;
    {
    .param .b32 p0;
    .param .b32 r0;
    st.param.b32 [p0], %r1;
    call.uni (r0), helper, (p0);
    ld.param.b32 %r2, [r0];
    }
    ld.global.u32 %r1, [counter];
    add.u32 %r2, %r2, %r1;
    st.global.u32 [%rd1], %r2;
    ret;
}
"#;

    const B: &str = r#"
.version 7.8
.target sm_75
.address_size 64
.extern .func (.param .b32 r) vprintf (.param .b64 f, .param .b64 a);
.global .align 1 .b8 $str[3] = {104, 105, 0};
.visible .global .align 4 .u32 counter = 22;
.weak .func (.param .b32 r) helper (.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    add.u32 %r2, %r1, 100;
    st.param.b32 [r], %r2;
    ret;
}
"#;

    #[test]
    fn items_split_functions_declarations_and_initializers() {
        let it: Vec<Item> = items(B).into_iter().map(|(_, i)| i).collect();
        let syms: Vec<(&str, Linkage, bool)> = it
            .iter()
            .filter_map(|i| match i {
                Item::Symbol {
                    name,
                    linkage,
                    defines,
                } => Some((name.as_str(), *linkage, *defines)),
                _ => None,
            })
            .collect();
        assert_eq!(
            syms,
            [
                ("vprintf", Linkage::Extern, false),
                ("$str", Linkage::Internal, true),
                ("counter", Linkage::Visible, true),
                ("helper", Linkage::Weak, true),
            ]
        );
        assert_eq!(it.iter().filter(|i| **i == Item::Header).count(), 3);
    }

    #[test]
    fn externs_resolve_across_inputs_and_internal_names_stay_apart() {
        let linked = link_ptx(&[("a".into(), A.into()), ("b".into(), B.into())]).unwrap();
        let m = parse_module(&linked).unwrap_or_else(|e| panic!("{e}\n{linked}"));
        assert_eq!(m.version, Some((7, 8)));
        assert_eq!(m.target, ["sm_75"]);
        let names: Vec<&str> = m.variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["$str", "$str$se1", "counter"]);
        let funcs: Vec<(&str, bool)> = m
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.body.is_some()))
            .collect();
        assert_eq!(funcs, [("vprintf", false), ("k", true), ("helper", true)]);
    }

    #[test]
    fn duplicate_strong_definitions_and_undefined_references_are_errors() {
        let e = link_ptx(&[("a".into(), B.into()), ("b".into(), B.into())]).unwrap_err();
        assert!(e.contains("multiple definitions of `counter`"), "{e}");
        let e = link_ptx(&[("a".into(), A.into())]).unwrap_err();
        assert!(e.contains("undefined reference to `helper`"), "{e}");
    }
}
