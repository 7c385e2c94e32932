//! Programs. A program handle given to the caller is an opaque number (cast to
//! `nvrtcProgram`), never the address of an object: the library looks it up, so a forged or
//! destroyed handle is `NVRTC_ERROR_INVALID_PROGRAM`, not a wild read. Values are never reused.

use std::collections::HashMap;
use std::ffi::{CString, c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use cudarc::nvrtc::sys::{nvrtcProgram, nvrtcResult};
use parking_lot::Mutex;

use crate::compile::{self, Input, check_include_name};
use crate::entry::{NvErr, NvResult, c_str, invalid, put};

/// A program: what `nvrtcCreateProgram` was given (copied), and its compilation.
struct Program {
    source: Vec<u8>,
    name: String,
    headers: Vec<(String, Vec<u8>)>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    name_expressions: Vec<String>,
    /// The PTX of the last successful compilation, NUL-terminated.
    ptx: Option<Vec<u8>>,
    /// The log of the last compilation, and notes of refused output queries after it.
    log: String,
    /// Lowered names by name expression, after a successful compilation.
    lowered: HashMap<String, CString>,
    /// Lowered names of earlier compilations: `nvrtcGetLoweredName` pointers stay valid until
    /// the program is destroyed, also across recompilation.
    retired: Vec<CString>,
    compiled: bool,
}

/// Live programs by handle value.
struct Table {
    next: AtomicUsize,
    map: Mutex<HashMap<usize, Arc<Program>>>,
}

fn table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| Table {
        next: AtomicUsize::new(0x7e57_0000),
        map: Mutex::new(HashMap::new()),
    })
}

/// The program of handle `prog`.
fn lookup(prog: nvrtcProgram) -> NvResult<Arc<Program>> {
    let h = prog as usize;
    table().map.lock().get(&h).cloned().ok_or_else(|| {
        NvErr::new(
            nvrtcResult::NVRTC_ERROR_INVALID_PROGRAM,
            format!("{h:#x} is not a live program (never created, or destroyed)"),
        )
    })
}

/// `n` pointers from the caller's array `p` (`NVRTC_ERROR_INVALID_INPUT` when null and `n` > 0).
///
/// # Safety
/// `p` is null or valid for reads of `n` pointers.
unsafe fn ptr_array<'a>(
    p: *const *const c_char,
    n: c_int,
    what: &str,
) -> NvResult<&'a [*const c_char]> {
    if n < 0 {
        return Err(invalid(format!("the number of {what} is negative ({n})")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL with a count of {n}")));
    }
    // SAFETY: non-null and valid for `n` reads (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// `nvrtcCreateProgram`: the source, name and headers are copied.
///
/// # Safety
/// Pointers are null or valid as NVRTC's contract says: `src`, `name` and every entry of
/// `headers`/`includeNames` NUL-terminated, the arrays `numHeaders` long.
pub(crate) unsafe fn nvrtcCreateProgram(
    prog: *mut nvrtcProgram,
    src: *const c_char,
    name: *const c_char,
    numHeaders: c_int,
    headers: *const *const c_char,
    includeNames: *const *const c_char,
) -> NvResult<()> {
    if prog.is_null() {
        return Err(NvErr::new(
            nvrtcResult::NVRTC_ERROR_INVALID_PROGRAM,
            "prog is NULL",
        ));
    }
    // SAFETY: the caller's contract (NUL-terminated or null).
    let source = unsafe { c_str(src, "src")? }.to_bytes().to_vec();
    let name = if name.is_null() {
        "default_program".to_string()
    } else {
        // SAFETY: non-null, NUL-terminated (the caller's contract).
        unsafe { c_str(name, "name")? }
            .to_string_lossy()
            .into_owned()
    };
    // SAFETY: the caller's contract (arrays of `numHeaders` entries).
    let (texts, names) = unsafe {
        (
            ptr_array(headers, numHeaders, "headers")?,
            ptr_array(includeNames, numHeaders, "includeNames")?,
        )
    };
    let mut hs = Vec::with_capacity(texts.len());
    for (i, (&t, &n)) in texts.iter().zip(names).enumerate() {
        // SAFETY: each entry is NUL-terminated (the caller's contract).
        let (t, n) = unsafe {
            (
                c_str(t, &format!("headers[{i}]"))?,
                c_str(n, &format!("includeNames[{i}]"))?,
            )
        };
        let n = n
            .to_str()
            .map_err(|_| invalid(format!("includeNames[{i}] is not UTF-8")))?;
        check_include_name(n).map_err(invalid)?;
        hs.push((n.to_string(), t.to_bytes().to_vec()));
    }
    let t = table();
    let h = t.next.fetch_add(16, Ordering::Relaxed);
    let p = Program {
        source,
        name,
        headers: hs,
        state: Mutex::new(State::default()),
    };
    t.map.lock().insert(h, Arc::new(p));
    // SAFETY: checked non-null; the caller's out-pointer.
    unsafe { put(prog, h as nvrtcProgram, "prog") }
}

/// `nvrtcDestroyProgram`: `*prog` is destroyed and set to NULL.
///
/// # Safety
/// `prog` is null or valid for a read and a write.
pub(crate) unsafe fn nvrtcDestroyProgram(prog: *mut nvrtcProgram) -> NvResult<()> {
    if prog.is_null() {
        return Err(NvErr::new(
            nvrtcResult::NVRTC_ERROR_INVALID_PROGRAM,
            "prog is NULL",
        ));
    }
    // SAFETY: non-null, valid for reads (the caller's contract).
    let h = unsafe { prog.read() };
    if table().map.lock().remove(&(h as usize)).is_none() {
        lookup(h)?; // the error
    }
    // SAFETY: as above, valid for writes.
    unsafe { prog.write(std::ptr::null_mut()) };
    Ok(())
}

/// `nvrtcCompileProgram`: runs clang (see `compile.rs`); the log has its diagnostics.
///
/// # Safety
/// `options` is null or holds `numOptions` NUL-terminated strings.
pub(crate) unsafe fn nvrtcCompileProgram(
    prog: nvrtcProgram,
    numOptions: c_int,
    options: *const *const c_char,
) -> NvResult<()> {
    let p = lookup(prog)?;
    // SAFETY: the caller's contract.
    let raw = unsafe { ptr_array(options, numOptions, "options")? };
    let mut opts = Vec::with_capacity(raw.len());
    for (i, &o) in raw.iter().enumerate() {
        // SAFETY: each entry is NUL-terminated (the caller's contract).
        let o = unsafe { c_str(o, &format!("options[{i}]"))? };
        opts.push(o.to_string_lossy().into_owned());
    }
    let mut st = p.state.lock();
    let input = Input {
        source: &p.source,
        name: &p.name,
        headers: &p.headers,
        name_expressions: &st.name_expressions,
    };
    let result = compile::compile(&input, &opts);
    let old = std::mem::take(&mut st.lowered);
    st.retired.extend(old.into_values());
    st.compiled = true;
    match result {
        Ok(c) => {
            let mut ptx = c.ptx.into_bytes();
            ptx.retain(|&b| b != 0);
            ptx.push(0);
            st.ptx = Some(ptx);
            st.log = c.log;
            st.lowered = c
                .lowered
                .into_iter()
                .map(|(e, n)| (e, CString::new(n).unwrap_or_default()))
                .collect();
            Ok(())
        }
        Err(f) => {
            st.ptx = None;
            st.log = f.log;
            let first = st.log.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(NvErr::new(f.code, format!("see the program log ({first})")))
        }
    }
}

/// Writes `bytes` to the caller's buffer.
///
/// # Safety
/// `out` is null or valid for `bytes.len()` writes.
unsafe fn copy_to(out: *mut c_char, bytes: &[u8], what: &str) -> NvResult<()> {
    if out.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null and valid for `bytes.len()` writes (the caller's contract: the size
    // query told it how many).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), bytes.len()) };
    Ok(())
}

/// The PTX of `p`'s last compilation.
fn ptx_of(st: &State) -> NvResult<&[u8]> {
    st.ptx.as_deref().ok_or_else(|| {
        invalid(if st.compiled {
            "the program's last compilation failed: it has no PTX (see the program log)"
        } else {
            "the program has not been compiled (nvrtcCompileProgram)"
        })
    })
}

/// `nvrtcGetPTXSize`: the PTX's size with its NUL.
///
/// # Safety
/// `ptxSizeRet` is null or valid for a write.
pub(crate) unsafe fn nvrtcGetPTXSize(prog: nvrtcProgram, ptxSizeRet: *mut usize) -> NvResult<()> {
    let p = lookup(prog)?;
    let st = p.state.lock();
    let n = ptx_of(&st)?.len();
    // SAFETY: the caller's out-pointer.
    unsafe { put(ptxSizeRet, n, "ptxSizeRet") }
}

/// `nvrtcGetPTX`: the PTX, NUL-terminated.
///
/// # Safety
/// `ptx` is null or valid for as many bytes as `nvrtcGetPTXSize` gave.
pub(crate) unsafe fn nvrtcGetPTX(prog: nvrtcProgram, ptx: *mut c_char) -> NvResult<()> {
    let p = lookup(prog)?;
    let st = p.state.lock();
    // SAFETY: the caller's buffer, as large as the size query said.
    unsafe { copy_to(ptx, ptx_of(&st)?, "ptx") }
}

/// `nvrtcGetProgramLogSize`: the log's size with its NUL (1 for an empty log).
///
/// # Safety
/// `logSizeRet` is null or valid for a write.
pub(crate) unsafe fn nvrtcGetProgramLogSize(
    prog: nvrtcProgram,
    logSizeRet: *mut usize,
) -> NvResult<()> {
    let p = lookup(prog)?;
    let n = log_bytes(&p.state.lock()).len();
    // SAFETY: the caller's out-pointer.
    unsafe { put(logSizeRet, n, "logSizeRet") }
}

/// The log as NVRTC hands it out: without NULs inside, NUL-terminated.
fn log_bytes(st: &State) -> Vec<u8> {
    let mut v: Vec<u8> = st.log.bytes().filter(|&b| b != 0).collect();
    v.push(0);
    v
}

/// `nvrtcGetProgramLog`.
///
/// # Safety
/// `log` is null or valid for as many bytes as `nvrtcGetProgramLogSize` gave.
pub(crate) unsafe fn nvrtcGetProgramLog(prog: nvrtcProgram, log: *mut c_char) -> NvResult<()> {
    let p = lookup(prog)?;
    let bytes = log_bytes(&p.state.lock());
    // SAFETY: the caller's buffer, as large as the size query said.
    unsafe { copy_to(log, &bytes, "log") }
}

/// `nvrtcAddNameExpression`: before compilation.
///
/// # Safety
/// `name_expression` is null or NUL-terminated.
pub(crate) unsafe fn nvrtcAddNameExpression(
    prog: nvrtcProgram,
    name_expression: *const c_char,
) -> NvResult<()> {
    let p = lookup(prog)?;
    // SAFETY: the caller's contract.
    let e = unsafe { c_str(name_expression, "name_expression")? };
    let e = e
        .to_str()
        .map_err(|_| invalid("name_expression is not UTF-8"))?;
    if e.trim().is_empty() {
        return Err(invalid("name_expression is empty"));
    }
    let mut st = p.state.lock();
    if st.compiled {
        return Err(NvErr::new(
            nvrtcResult::NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION,
            "name expressions are added before nvrtcCompileProgram",
        ));
    }
    if !st.name_expressions.iter().any(|x| x == e) {
        st.name_expressions.push(e.to_string());
    }
    Ok(())
}

/// `nvrtcGetLoweredName`: the mangled name of a name expression after compilation; the string
/// lives until the program is destroyed.
///
/// # Safety
/// `name_expression` is null or NUL-terminated; `lowered_name` null or valid for a write.
pub(crate) unsafe fn nvrtcGetLoweredName(
    prog: nvrtcProgram,
    name_expression: *const c_char,
    lowered_name: *mut *const c_char,
) -> NvResult<()> {
    let p = lookup(prog)?;
    // SAFETY: the caller's contract.
    let e = unsafe { c_str(name_expression, "name_expression")? }.to_string_lossy();
    let st = p.state.lock();
    if st.ptx.is_none() {
        return Err(NvErr::new(
            nvrtcResult::NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION,
            "lowered names exist after a successful nvrtcCompileProgram",
        ));
    }
    let name = st.lowered.get(e.as_ref()).ok_or_else(|| {
        NvErr::new(
            nvrtcResult::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
            format!("{e:?} was not added with nvrtcAddNameExpression"),
        )
    })?;
    // SAFETY: the caller's out-pointer. The string is owned by the program and kept
    // (`retired` on recompilation) until the program is destroyed.
    unsafe { put(lowered_name, name.as_ptr(), "lowered_name") }
}

/// Refuses an output this library does not produce (`NVRTC_ERROR_INVALID_INPUT`), with a note
/// in the program's log.
pub(crate) fn refuse_output(prog: nvrtcProgram, what: &str) -> NvResult<()> {
    let p = lookup(prog)?;
    let note = format!(
        "nvrtc (streamexec): {what} is not produced: this NVRTC compiles CUDA C++ to PTX only \
         (load the PTX from nvrtcGetPTX; the CPU libcuda runs PTX)"
    );
    let mut st = p.state.lock();
    if !st.log.contains(&note) {
        if !st.log.is_empty() && !st.log.ends_with('\n') {
            st.log.push('\n');
        }
        st.log.push_str(&note);
        st.log.push('\n');
    }
    Err(invalid(note))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exports::{
        nvrtcAddNameExpression, nvrtcCompileProgram, nvrtcCreateProgram, nvrtcDestroyProgram,
        nvrtcGetCUBIN, nvrtcGetCUBINSize, nvrtcGetLTOIRSize, nvrtcGetLoweredName, nvrtcGetOptiXIR,
        nvrtcGetPTX, nvrtcGetPTXSize, nvrtcGetProgramLog, nvrtcGetProgramLogSize,
    };
    use nvrtcResult as R;
    use std::ffi::CStr;
    use std::ptr::{null, null_mut};

    fn create(src: &CStr, headers: &[(&CStr, &CStr)]) -> nvrtcProgram {
        let texts: Vec<*const c_char> = headers.iter().map(|h| h.1.as_ptr()).collect();
        let names: Vec<*const c_char> = headers.iter().map(|h| h.0.as_ptr()).collect();
        let mut prog = null_mut();
        // SAFETY: valid strings and arrays of `headers.len()` entries.
        let r = unsafe {
            nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                null(),
                headers.len() as c_int,
                texts.as_ptr(),
                names.as_ptr(),
            )
        };
        assert_eq!(r, R::NVRTC_SUCCESS);
        prog
    }

    fn log(prog: nvrtcProgram) -> String {
        let mut n = 0;
        // SAFETY: a live program and valid out-pointers/buffers.
        unsafe {
            assert_eq!(nvrtcGetProgramLogSize(prog, &mut n), R::NVRTC_SUCCESS);
            let mut buf = vec![0 as c_char; n];
            assert_eq!(nvrtcGetProgramLog(prog, buf.as_mut_ptr()), R::NVRTC_SUCCESS);
            CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
        }
    }

    #[test]
    fn handles_are_looked_up_and_destroyed_ones_are_invalid() {
        let mut prog = create(c"", &[]);
        let stale = prog;
        // SAFETY: `prog` is a local handle variable.
        unsafe {
            assert_eq!(nvrtcDestroyProgram(&mut prog), R::NVRTC_SUCCESS);
            assert!(prog.is_null());
            let mut copy = stale;
            assert_eq!(
                nvrtcDestroyProgram(&mut copy),
                R::NVRTC_ERROR_INVALID_PROGRAM
            );
            let mut n = 0;
            assert_eq!(
                nvrtcGetPTXSize(stale, &mut n),
                R::NVRTC_ERROR_INVALID_PROGRAM
            );
            // A forged handle is looked up, never dereferenced.
            assert_eq!(
                nvrtcGetPTXSize(0xdead_beef as nvrtcProgram, &mut n),
                R::NVRTC_ERROR_INVALID_PROGRAM
            );
            assert_eq!(
                nvrtcDestroyProgram(null_mut()),
                R::NVRTC_ERROR_INVALID_PROGRAM
            );
        }
    }

    #[test]
    fn creation_checks_its_inputs() {
        let mut prog = null_mut();
        let names = [c"../evil.h".as_ptr()];
        let texts = [c"".as_ptr()];
        // SAFETY: valid pointers or nulls the function must refuse.
        unsafe {
            assert_eq!(
                nvrtcCreateProgram(&mut prog, null(), null(), 0, null(), null()),
                R::NVRTC_ERROR_INVALID_INPUT
            );
            assert_eq!(
                nvrtcCreateProgram(null_mut(), c"".as_ptr(), null(), 0, null(), null()),
                R::NVRTC_ERROR_INVALID_PROGRAM
            );
            assert_eq!(
                nvrtcCreateProgram(&mut prog, c"".as_ptr(), null(), 1, null(), null()),
                R::NVRTC_ERROR_INVALID_INPUT
            );
            assert_eq!(
                nvrtcCreateProgram(&mut prog, c"".as_ptr(), null(), -1, null(), null()),
                R::NVRTC_ERROR_INVALID_INPUT
            );
            assert_eq!(
                nvrtcCreateProgram(
                    &mut prog,
                    c"".as_ptr(),
                    null(),
                    1,
                    texts.as_ptr(),
                    names.as_ptr()
                ),
                R::NVRTC_ERROR_INVALID_INPUT
            );
        }
    }

    #[test]
    fn outputs_other_than_ptx_are_refused_with_a_note_in_the_log() {
        let mut prog = create(c"", &[]);
        let mut n = 7;
        let mut b = [0 as c_char; 4];
        // The refused calls are safe: they write nothing.
        assert_eq!(
            nvrtcGetCUBINSize(prog, &mut n),
            R::NVRTC_ERROR_INVALID_INPUT
        );
        assert_eq!(
            nvrtcGetCUBIN(prog, b.as_mut_ptr()),
            R::NVRTC_ERROR_INVALID_INPUT
        );
        assert_eq!(
            nvrtcGetLTOIRSize(prog, &mut n),
            R::NVRTC_ERROR_INVALID_INPUT
        );
        assert_eq!(
            nvrtcGetOptiXIR(prog, b.as_mut_ptr()),
            R::NVRTC_ERROR_INVALID_INPUT
        );
        assert_eq!(n, 7);
        let l = log(prog);
        assert!(
            l.contains("CUBIN is not produced") && l.contains("PTX only"),
            "{l}"
        );
        assert_eq!(l.matches("CUBIN").count(), 1, "one note per kind: {l}");
        // Before compilation: no PTX, no lowered names.
        let mut name = null();
        // SAFETY: a live program, valid out-pointers.
        unsafe {
            assert_eq!(nvrtcGetPTXSize(prog, &mut n), R::NVRTC_ERROR_INVALID_INPUT);
            assert_eq!(
                nvrtcGetLoweredName(prog, c"k".as_ptr(), &mut name),
                R::NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION
            );
            assert_eq!(nvrtcDestroyProgram(&mut prog), R::NVRTC_SUCCESS);
        }
    }

    /// Whether the clang this library would run is installed (the compiling tests skip without).
    fn have_clang() -> bool {
        let c = std::env::var("STREAMEXEC_NVRTC_CLANG").unwrap_or_else(|_| "clang++-19".into());
        let ok = std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok();
        if !ok {
            eprintln!("clang++-19 not installed; skipping a compiling test");
        }
        ok
    }

    #[test]
    fn compiles_with_headers_and_name_expressions() {
        if !have_clang() {
            return;
        }
        let mut prog = create(
            c"#include \"scale.h\"\n\
              template <typename T> __global__ void scale(T* p) { p[threadIdx.x] *= T(FACTOR); }\n\
              __device__ int counter;\n\
              extern \"C\" __global__ void plain(int* p) { p[0] = counter; }\n",
            &[(c"scale.h", c"#define FACTOR 3\n")],
        );
        let mut name = null();
        let opts = [
            c"--gpu-architecture=compute_75".as_ptr(),
            c"-default-device".as_ptr(),
        ];
        // SAFETY: a live program, valid strings and out-pointers.
        unsafe {
            assert_eq!(
                nvrtcAddNameExpression(prog, c"scale<float>".as_ptr()),
                R::NVRTC_SUCCESS
            );
            assert_eq!(
                nvrtcAddNameExpression(prog, c"&counter".as_ptr()),
                R::NVRTC_SUCCESS
            );
            assert_eq!(
                nvrtcCompileProgram(prog, 2, opts.as_ptr()),
                R::NVRTC_SUCCESS,
                "{}",
                log(prog)
            );
            assert_eq!(
                nvrtcAddNameExpression(prog, c"scale<int>".as_ptr()),
                R::NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION
            );
            assert_eq!(
                nvrtcGetLoweredName(prog, c"scale<float>".as_ptr(), &mut name),
                R::NVRTC_SUCCESS
            );
            assert_eq!(CStr::from_ptr(name), c"_Z5scaleIfEvPT_");
            assert_eq!(
                nvrtcGetLoweredName(prog, c"&counter".as_ptr(), &mut name),
                R::NVRTC_SUCCESS
            );
            assert_eq!(CStr::from_ptr(name), c"counter");
            assert_eq!(
                nvrtcGetLoweredName(prog, c"scale<int>".as_ptr(), &mut name),
                R::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID
            );
        }
        let mut n = 0;
        // SAFETY: a live, compiled program.
        let ptx = unsafe {
            assert_eq!(nvrtcGetPTXSize(prog, &mut n), R::NVRTC_SUCCESS);
            let mut buf = vec![1 as c_char; n];
            assert_eq!(nvrtcGetPTX(prog, buf.as_mut_ptr()), R::NVRTC_SUCCESS);
            assert_eq!(buf[n - 1], 0);
            CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
        };
        assert_eq!(ptx.len() + 1, n);
        assert!(ptx.contains(".target sm_75"), "{ptx}");
        assert!(
            ptx.contains(".entry _Z5scaleIfEvPT_") && ptx.contains(".entry plain"),
            "{ptx}"
        );
        assert!(!ptx.contains("__streamexec_ne_"), "{ptx}");
        // SAFETY: a live program.
        unsafe { assert_eq!(nvrtcDestroyProgram(&mut prog), R::NVRTC_SUCCESS) };
    }

    #[test]
    fn a_compile_error_is_in_the_log_and_leaves_no_ptx() {
        if !have_clang() {
            return;
        }
        let prog = create(
            c"__global__ void k(int* p) { p[0] = undeclared_thing; }\n",
            &[],
        );
        let bad = [c"--frobnicate".as_ptr()];
        let mut n = 0;
        // SAFETY: a live program, valid options.
        unsafe {
            assert_eq!(
                nvrtcCompileProgram(prog, 1, bad.as_ptr()),
                R::NVRTC_ERROR_INVALID_OPTION
            );
            assert!(
                log(prog).contains("unrecognized option --frobnicate"),
                "{}",
                log(prog)
            );
            assert_eq!(
                nvrtcCompileProgram(prog, 0, null()),
                R::NVRTC_ERROR_COMPILATION
            );
            assert_eq!(nvrtcGetPTXSize(prog, &mut n), R::NVRTC_ERROR_INVALID_INPUT);
        }
        let l = log(prog);
        assert!(
            l.contains("default_program:1:")
                && l.contains("undeclared_thing")
                && l.contains("error"),
            "{l}"
        );
    }
}
