//! Modules and functions: PTX text loaded through the host platform's PTX engine; libraries
//! (`cuLibrary*`, CUDA 12's context-independent modules: the module of a context is loaded when
//! first asked for) and their kernels, whose entry points are in `library.rs`.
//!
//! Loading decodes every `.entry` of the module at once (as the JIT compiles the whole
//! module), so an instruction the engine does not run is a load error naming its PTX line,
//! written into the caller's `CU_JIT_ERROR_LOG_BUFFER`. Cubins and fatbins (ELF or fatbin
//! magic) are `CUDA_ERROR_NO_BINARY_FOR_GPU`: there is no GPU code to run here.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{
    CUdeviceptr, CUfunction, CUjit_option, CUmodule, CUmoduleLoadingMode, CUresult,
};
use parking_lot::Mutex;
use streamexec::ptx::{KernelAttributes, PtxEntry, kernel_attributes, parse_entries};
use streamexec::{Kernel, MultiKernelLoaderSpec};

use crate::context::{Context, current};
use crate::device::SHARED_PER_BLOCK;
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, bad_handle, invalid, non_null, put};
use crate::handles::Table;
use crate::memory;

pub(crate) mod library;

/// Loaded modules.
static MODULES: Table<Module> = Table::new(0x4000_0000);
/// Functions handed out by `cuModuleGetFunction` (a module's kernels by handle).
static FUNCTIONS: Table<Function> = Table::new(0x5000_0000);
/// Loaded libraries (`cuLibraryLoadData`).
static LIBRARIES: Table<Library> = Table::new(0xA000_0000);
/// Kernels of libraries (`cuLibraryGetKernel`).
static KERNELS: Table<LibKernel> = Table::new(0xB000_0000);

/// A library: a module image loaded into each context that uses it.
pub(crate) struct Library {
    pub(crate) handle: usize,
    /// The image (PTX text).
    image: Vec<u8>,
    /// Its kernels, in the order of the PTX.
    pub(crate) entries: Vec<PtxEntry>,
    /// The module of each context it was loaded in: context → module handle.
    modules: Mutex<HashMap<usize, usize>>,
    /// Kernel handles handed out, by name (one per name).
    kernels: Mutex<HashMap<String, usize>>,
}

/// A kernel of a library (`CUkernel`): in each context, the function of that context's module.
pub(crate) struct LibKernel {
    pub(crate) library: usize,
    pub(crate) name: CString,
}

/// A loaded module.
pub(crate) struct Module {
    pub(crate) handle: usize,
    pub(crate) ctx: usize,
    /// Kernels by entry name.
    kernels: HashMap<String, (Kernel, PtxEntry)>,
    /// Function handles handed out, by name (one handle per name, as CUDA does).
    functions: Mutex<HashMap<String, usize>>,
    /// The `.version` of the PTX (major * 10 + minor).
    ptx_version: i32,
    /// The PTX text and which live copy of it this module is (see [`LIVE_COPIES`]).
    copy: (String, usize),
    /// The library this module is the context's copy of (`cuLibraryGetModule`), if any.
    library: Option<usize>,
}

/// A kernel of a module.
pub(crate) struct Function {
    pub(crate) handle: usize,
    pub(crate) ctx: usize,
    pub(crate) module: usize,
    pub(crate) kernel: Kernel,
    pub(crate) entry: PtxEntry,
    /// The kernel's name, for `cuFuncGetName`.
    name: CString,
    ptx_version: i32,
    /// What `cuFuncGetAttribute` reports, computed from the PTX
    /// (`streamexec::ptx::kernel_attributes`).
    attrs: KernelAttributes,
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub(crate) max_dynamic_shared: Mutex<i32>,
}

/// For each PTX text loaded as live modules: which copies are in use. The host platform's
/// engine keeps one module (one set of `.global` variables) per distinct text, while every CUDA
/// module load has its own globals: a second live load of the same text (another context or
/// device, say) is given a distinct text (a comment after the PTX) so it gets its own globals.
/// Copies are reused once unloaded, so the engine's cache stays as large as the most copies
/// ever live at once.
static LIVE_COPIES: Mutex<Option<HashMap<String, Vec<usize>>>> = Mutex::new(None);

/// Claims the lowest free copy number of `text`.
fn claim_copy(text: &str) -> usize {
    let mut live = LIVE_COPIES.lock();
    let used = live
        .get_or_insert_with(HashMap::new)
        .entry(text.to_string())
        .or_default();
    let n = (0..).find(|n| !used.contains(n)).unwrap_or(0); // ok: the range is unbounded
    used.push(n);
    n
}

/// Gives copy `n` of `text` back.
fn release_copy(text: &str, n: usize) {
    let mut live = LIVE_COPIES.lock();
    if let Some(map) = live.as_mut()
        && let Some(used) = map.get_mut(text)
    {
        used.retain(|&c| c != n);
        if used.is_empty() {
            map.remove(text);
        }
    }
}

/// Removes `m`, its functions and its globals from the tables.
fn unload(m: &Module) {
    if MODULES.remove(m.handle).is_none() {
        return; // unloaded already (by another thread)
    }
    release_copy(&m.copy.0, m.copy.1);
    for (_, h) in m.functions.lock().drain() {
        FUNCTIONS.remove(h);
    }
    memory::remove_module(m.handle);
}

/// Unloads every module of context `ctx`, and drops its functions (the context is destroyed).
pub(crate) fn unload_context(ctx: usize) {
    for f in FUNCTIONS.filter(|f| f.ctx == ctx) {
        FUNCTIONS.remove(f.handle);
    }
    for m in MODULES.filter(|m| m.ctx == ctx) {
        unload(&m);
    }
}

/// Writes `text` into the caller's JIT log buffer options (error or info), and the length
/// written back into the size option, as the driver does.
///
/// # Safety
/// `options`/`values` are null or hold `n` entries; buffers are valid for their given sizes.
unsafe fn write_logs(n: c_uint, options: *mut CUjit_option, values: *mut *mut c_void, error: &str) {
    if n == 0 || options.is_null() || values.is_null() {
        return;
    }
    // SAFETY: `n` entries each (the caller's contract). Options are read as integers, so a
    // value outside the enum is ignored rather than undefined.
    let (opts, vals) = unsafe {
        (
            std::slice::from_raw_parts(options.cast::<u32>(), n as usize),
            std::slice::from_raw_parts_mut(values, n as usize),
        )
    };
    for (buf_opt, size_opt, text) in [(5u32, 6u32, error), (3, 4, "")] {
        let (Some(b), Some(s)) = (
            opts.iter().position(|&o| o == buf_opt),
            opts.iter().position(|&o| o == size_opt),
        ) else {
            continue;
        };
        let (buf, size) = (vals[b].cast::<u8>(), vals[s] as usize);
        if buf.is_null() || size == 0 {
            continue;
        }
        let k = text.len().min(size - 1);
        // SAFETY: the buffer has `size` > `k` bytes (the caller's contract).
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf, k);
            buf.add(k).write(0);
        }
        vals[s] = (k + 1) as *mut c_void;
    }
}

fn ptx_error(detail: String) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_INVALID_PTX, detail)
}

/// The `.target sm_NN` and `.version` of `text`.
fn header(text: &str) -> (Option<(u32, u32)>, i32) {
    let mut target = None;
    let mut version = 0;
    for line in text.lines().map(str::trim) {
        if let Some(t) = line.strip_prefix(".target") {
            let sm = t
                .split(|c: char| c == ',' || c.is_whitespace())
                .find_map(|w| w.strip_prefix("sm_"));
            if let Some(n) = sm.and_then(|s| {
                s.trim_end_matches(|c: char| c.is_alphabetic())
                    .parse::<u32>()
                    .ok()
            }) {
                target = Some((n / 10, n % 10));
            }
        } else if let Some((a, b)) = line
            .strip_prefix(".version")
            .and_then(|v| v.trim().split_once('.'))
        {
            version = a.parse::<i32>().unwrap_or(0) * 10 + b.parse::<i32>().unwrap_or(0);
        }
        if line.starts_with(".entry") || line.starts_with(".visible") {
            break;
        }
    }
    (target, version)
}

/// Loads a module image (PTX text, NUL-terminated) into `ctx`.
fn load(ctx: &Context, image: &[u8]) -> CuResult<Module> {
    let drv = driver()?;
    if image.starts_with(b"\x7fELF")
        || image.starts_with(&0xBA55_ED50u32.to_le_bytes())
        || image.starts_with(&0x4662_43B1u32.to_le_bytes())
    {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
            "the image is a cubin or fatbin (GPU machine code); the CPU driver runs PTX only: \
             load the PTX text (nvcc -ptx, clang --cuda-device-only -S)",
        ));
    }
    let text = std::str::from_utf8(image).map_err(|_| {
        CuErr::new(
            CUresult::CUDA_ERROR_INVALID_IMAGE,
            "the image is neither PTX text (UTF-8) nor a known binary format",
        )
    })?;
    let (target, ptx_version) = header(text);
    if let Some(t) = target
        && t > drv.cc
    {
        return Err(ptx_error(format!(
            "the PTX targets sm_{}{}, above this device's sm_{}{} (STREAMEXEC_CUDA_CC)",
            t.0, t.1, drv.cc.0, drv.cc.1
        )));
    }
    let entries = parse_entries(text).map_err(|e| ptx_error(e.to_string()))?;
    let copy = claim_copy(text);
    let source = match copy {
        0 => text.to_string(),
        n => format!("{text}\n// streamexec libcuda: live copy {n} of this module\n"),
    };
    let mut kernels = HashMap::new();
    for e in entries {
        // The cuda executor above this driver fills in `__llvm_rpc_client` and serves it; the
        // host executor below must not attach a server of its own.
        let spec = MultiKernelLoaderSpec::new(e.params.len())
            .add_cuda_ptx_in_memory(&source, &e.name)
            .with_foreign_rpc_client();
        let k = drv.exec.get_untyped_kernel(&spec).map_err(|err| {
            release_copy(text, copy);
            match err {
                // The engine's own words (PTX line, instruction), without the host's name.
                streamexec::Error::KernelLoad { kernel, detail, .. } => {
                    ptx_error(format!("kernel `{kernel}`: {detail}"))
                }
                other => ptx_error(other.to_string()),
            }
        })?;
        kernels.insert(e.name.clone(), (k, e));
    }
    Ok(Module {
        handle: MODULES.reserve(),
        ctx: ctx.handle,
        kernels,
        functions: Mutex::new(HashMap::new()),
        ptx_version,
        copy: (text.to_string(), copy),
        library: None,
    })
}

/// Reads a NUL-terminated image. A PTX image ends at its NUL; a binary is recognised by its
/// first bytes.
///
/// # Safety
/// `image` points to a NUL-terminated string or to a cubin/fatbin header.
unsafe fn image_bytes<'a>(image: *const c_void) -> &'a [u8] {
    // SAFETY: the caller's contract; binary images start with 4 non-NUL magic bytes, read
    // before anything else.
    let head = unsafe { std::slice::from_raw_parts(image.cast::<u8>(), 4) };
    if head == b"\x7fELF"
        || head == 0xBA55_ED50u32.to_le_bytes()
        || head == 0x4662_43B1u32.to_le_bytes()
    {
        return head;
    }
    // SAFETY: the caller's contract: PTX text is NUL-terminated.
    unsafe { CStr::from_ptr(image.cast::<c_char>()) }.to_bytes()
}

fn register(module: Module, out: *mut CUmodule) -> CuResult<()> {
    let h = module.handle;
    MODULES.insert(h, Arc::new(module));
    // SAFETY: the caller's out-pointer (checked non-null by the callers).
    unsafe { put(out, h as CUmodule, "module") }
}

/// `cuModuleLoadDataEx`: PTX text; the JIT log options receive the engine's message.
///
/// # Safety
/// `image` is NUL-terminated PTX (or a binary header); the option arrays hold `numOptions`
/// entries.
pub(crate) unsafe fn cuModuleLoadDataEx(
    module: *mut CUmodule,
    image: *const c_void,
    numOptions: c_uint,
    options: *mut CUjit_option,
    optionValues: *mut *mut c_void,
) -> CuResult<()> {
    let ctx = current()?;
    non_null(module, "module")?;
    non_null(image, "image")?;
    // SAFETY: the caller's contract.
    let bytes = unsafe { image_bytes(image) };
    // SAFETY: the caller's contract for the option arrays.
    let cap = unsafe { crate::maxnreg::max_registers(numOptions, options, optionValues) };
    let capped;
    let bytes = match (cap, std::str::from_utf8(bytes)) {
        (Some(n), Ok(text)) => {
            capped = crate::maxnreg::with_maxnreg(text, n);
            capped.as_bytes()
        }
        _ => bytes,
    };
    match load(&ctx, bytes) {
        Ok(m) => {
            // SAFETY: the caller's contract for the option arrays.
            unsafe { write_logs(numOptions, options, optionValues, "") };
            register(m, module)
        }
        Err(e) => {
            // SAFETY: as above.
            unsafe { write_logs(numOptions, options, optionValues, &e.detail) };
            Err(e)
        }
    }
}

/// `cuModuleLoadData`.
///
/// # Safety
/// `image` is NUL-terminated PTX (or a binary header).
pub(crate) unsafe fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) -> CuResult<()> {
    // SAFETY: same contract, no options.
    unsafe { cuModuleLoadDataEx(module, image, 0, std::ptr::null_mut(), std::ptr::null_mut()) }
}

/// `cuModuleLoad`: a PTX file.
///
/// # Safety
/// `fname` is a NUL-terminated path.
pub(crate) unsafe fn cuModuleLoad(module: *mut CUmodule, fname: *const c_char) -> CuResult<()> {
    let ctx = current()?;
    non_null(module, "module")?;
    non_null(fname, "fname")?;
    // SAFETY: the caller's contract.
    let path = unsafe { CStr::from_ptr(fname) }
        .to_string_lossy()
        .into_owned();
    let bytes = std::fs::read(&path)
        .map_err(|e| CuErr::new(CUresult::CUDA_ERROR_FILE_NOT_FOUND, format!("{path}: {e}")))?;
    register(load(&ctx, &bytes)?, module)
}

/// `cuModuleLoadFatBinary`: there is no GPU code to run here.
pub(crate) fn cuModuleLoadFatBinary(
    _module: *mut CUmodule,
    _fatCubin: *const c_void,
) -> CuResult<()> {
    current()?;
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
        "fatbins hold GPU machine code; the CPU driver runs PTX only",
    ))
}

/// The module of handle `h` in the current context.
fn module_of(h: CUmodule) -> CuResult<(Arc<Context>, Arc<Module>)> {
    let ctx = current()?;
    let m = MODULES
        .get(h as usize)
        .ok_or_else(|| bad_handle(format!("{:#x} is not a loaded module", h as usize)))?;
    if m.ctx != ctx.handle {
        return Err(bad_handle("the module was loaded in another context"));
    }
    Ok((ctx, m))
}

/// `cuModuleUnload` (not of a library's module: the library owns it).
pub(crate) fn cuModuleUnload(hmod: CUmodule) -> CuResult<()> {
    let (_, m) = module_of(hmod)?;
    if let Some(lib) = m.library {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_PERMITTED,
            format!("the module belongs to library {lib:#x}: unload that (cuLibraryUnload)"),
        ));
    }
    unload(&m);
    crate::driver::flush_printf();
    Ok(())
}

/// The handle of kernel `name` of module `m` (of context `ctx`): one per name, made on first
/// use.
fn function_of(ctx: &Context, m: &Module, name: &str) -> CuResult<usize> {
    let Some((kernel, entry)) = m.kernels.get(name) else {
        let mut have: Vec<&str> = m.kernels.keys().map(String::as_str).collect();
        have.sort_unstable();
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_FOUND,
            format!(
                "the module has no kernel `{name}` (it has: {})",
                have.join(", ")
            ),
        ));
    };
    let mut fns = m.functions.lock();
    if let Some(&h) = fns.get(name) {
        return Ok(h);
    }
    // The text loaded, so it parses; a failure here would be an engine bug.
    let attrs = kernel_attributes(&m.copy.0, name).map_err(|e| {
        CuErr::new(
            CUresult::CUDA_ERROR_UNKNOWN,
            format!("the attributes of `{name}`: {e}"),
        )
    })?;
    // CUDA's default: the device's shared memory per block less the kernel's static part.
    let dynamic = SHARED_PER_BLOCK.saturating_sub(attrs.shared_bytes.min(i32::MAX as u64) as i32);
    let h = FUNCTIONS.reserve();
    FUNCTIONS.insert(
        h,
        Arc::new(Function {
            handle: h,
            ctx: ctx.handle,
            module: m.handle,
            kernel: kernel.clone(),
            entry: entry.clone(),
            name: CString::new(name).unwrap_or_default(),
            ptx_version: m.ptx_version,
            attrs,
            max_dynamic_shared: Mutex::new(dynamic.max(0)),
        }),
    );
    fns.insert(name.to_string(), h);
    Ok(h)
}

/// `cuModuleGetFunction`.
///
/// # Safety
/// `name` is NUL-terminated; `hfunc` is null or valid for a write.
pub(crate) unsafe fn cuModuleGetFunction(
    hfunc: *mut CUfunction,
    hmod: CUmodule,
    name: *const c_char,
) -> CuResult<()> {
    let (ctx, m) = module_of(hmod)?;
    non_null(hfunc, "hfunc")?;
    non_null(name, "name")?;
    // SAFETY: the caller's contract.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let h = function_of(&ctx, &m, &name)?;
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(hfunc, h as CUfunction, "hfunc") }
}

/// Address and size of module `m`'s `.global`/`.const` variable `name` (in context `ctx`);
/// the range becomes valid for copies.
fn global_of(ctx: &Context, m: &Module, name: &str) -> CuResult<(u64, u64)> {
    let found = m.kernels.values().find_map(|(k, _)| {
        let s = k.module_global(name)?;
        Some((k.clone(), s.address().raw(), s.size_bytes()))
    });
    let Some((kernel, addr, size)) = found else {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_FOUND,
            format!("the module has no global variable `{name}`"),
        ));
    };
    memory::add_global(addr, size, ctx.handle, ctx.device, kernel, name, m.handle);
    Ok((addr, size))
}

/// Writes a global's address and size through the optional out-pointers.
///
/// # Safety
/// The out pointers are null or valid for writes.
unsafe fn put_global(dptr: *mut CUdeviceptr, bytes: *mut usize, (addr, size): (u64, u64)) {
    // SAFETY: the caller's out-pointers, each written only when non-null.
    unsafe {
        if !dptr.is_null() {
            dptr.write(addr);
        }
        if !bytes.is_null() {
            bytes.write(size as usize);
        }
    }
}

/// `cuModuleGetGlobal_v2`: address and size of a `.global`/`.const` variable (either out
/// pointer may be NULL). The range becomes valid for copies.
///
/// # Safety
/// `name` is NUL-terminated; the out pointers are null or valid for writes.
pub(crate) unsafe fn cuModuleGetGlobal_v2(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    hmod: CUmodule,
    name: *const c_char,
) -> CuResult<()> {
    let (ctx, m) = module_of(hmod)?;
    non_null(name, "name")?;
    // SAFETY: the caller's contract.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let g = global_of(&ctx, &m, &name)?;
    // SAFETY: the caller's contract.
    unsafe { put_global(dptr, bytes, g) };
    Ok(())
}

/// The live function of handle `h`, of any context.
/// A `CUkernel` (`cuLibraryGetKernel`) may be passed where a `CUfunction` is taken: it is the
/// function of the current context's module of its library.
pub(crate) fn function_any(h: CUfunction) -> CuResult<Arc<Function>> {
    driver()?;
    if let Some(f) = FUNCTIONS.get(h as usize) {
        return Ok(f);
    }
    if let Some(k) = KERNELS.get(h as usize) {
        let f = kernel_function(&k, &*current()?)?;
        return FUNCTIONS
            .get(f)
            .ok_or_else(|| bad_handle("the kernel's function vanished"));
    }
    Err(bad_handle(format!(
        "{:#x} is not a live function (or library kernel)",
        h as usize
    )))
}

/// Whether `f` is still live (its module not unloaded, its context not destroyed).
pub(crate) fn is_live(f: &Function) -> bool {
    FUNCTIONS.get(f.handle).is_some()
}

/// The function of handle `h` in the current context.
pub(crate) fn function(h: CUfunction) -> CuResult<(Arc<Context>, Arc<Function>)> {
    let ctx = current()?;
    let f = function_any(h)?;
    if f.ctx != ctx.handle {
        return Err(bad_handle("the function belongs to another context"));
    }
    Ok((ctx, f))
}

/// `cuFuncGetAttribute`.
///
/// # Safety
/// `pi` is null or valid for a write.
pub(crate) unsafe fn cuFuncGetAttribute(
    pi: *mut c_int,
    attrib: u32,
    hfunc: CUfunction,
) -> CuResult<()> {
    let (_, f) = function(hfunc)?;
    let cc = driver()?.cc;
    let a = &f.attrs;
    let int = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    let v = match attrib {
        0 => int(a.max_threads_per_block), // .maxntid / .reqntid, else 1024
        1 => int(a.shared_bytes),          // static .shared of the kernel and its callees
        2 => int(a.const_bytes),           // the module's .const
        3 => int(a.local_bytes),           // .local per thread
        4 => a.registers as i32,           // declared registers, 1..=255
        5 => f.ptx_version,                // .version
        // .target sm_XY (the device's compute capability for a module without one).
        6 if a.target != 0 => a.target as i32,
        6 => (cc.0 * 10 + cc.1) as i32,
        7 => 0,                            // cache mode CA
        8 => *f.max_dynamic_shared.lock(), // max dynamic shared
        9 => -1,                           // preferred carveout
        10..=15 => 0,                      // cluster attributes
        a => return Err(invalid(format!("{a} is not a CUfunction_attribute"))),
    };
    // SAFETY: the caller's out-pointer.
    unsafe { put(pi, v, "pi") }
}

/// `cuFuncSetAttribute`: the dynamic shared memory limit (with the kernel's static shared
/// memory, up to the device's 48 KiB) and the carveout hint.
pub(crate) fn cuFuncSetAttribute(hfunc: CUfunction, attrib: u32, value: c_int) -> CuResult<()> {
    let (_, f) = function(hfunc)?;
    let most = SHARED_PER_BLOCK.saturating_sub(f.attrs.shared_bytes.min(i32::MAX as u64) as i32);
    match attrib {
        8 if (0..=most).contains(&value) => {
            *f.max_dynamic_shared.lock() = value;
            Ok(())
        }
        8 => Err(invalid(format!(
            "{value} bytes of dynamic shared memory: this device has {SHARED_PER_BLOCK} per \
             block, {} of them the kernel's static shared memory",
            f.attrs.shared_bytes
        ))),
        9 if (-1..=100).contains(&value) => Ok(()),
        a => Err(invalid(format!("attribute {a} = {value} cannot be set"))),
    }
}

/// `cuFuncSetCacheConfig`: accepted (no cache split on the CPU).
pub(crate) fn cuFuncSetCacheConfig(hfunc: CUfunction, config: u32) -> CuResult<()> {
    function(hfunc)?;
    if config > 3 {
        return Err(invalid(format!("{config} is not a CUfunc_cache")));
    }
    Ok(())
}

/// `cuFuncGetModule`.
///
/// # Safety
/// `hmod` is null or valid for a write.
pub(crate) unsafe fn cuFuncGetModule(hmod: *mut CUmodule, hfunc: CUfunction) -> CuResult<()> {
    let (_, f) = function(hfunc)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(hmod, f.module as CUmodule, "hmod") }
}

/// The library of handle `h`.
pub(crate) fn library(h: usize) -> CuResult<Arc<Library>> {
    driver()?;
    LIBRARIES
        .get(h)
        .ok_or_else(|| bad_handle(format!("{h:#x} is not a loaded library")))
}

/// The library kernel of handle `h`.
pub(crate) fn lib_kernel(h: usize) -> CuResult<Arc<LibKernel>> {
    driver()?;
    KERNELS
        .get(h)
        .ok_or_else(|| bad_handle(format!("{h:#x} is not a kernel of a loaded library")))
}

/// Checks a library image (PTX, or a binary refused) and lists its kernels, without loading
/// it in a context.
fn library_entries(image: &[u8]) -> CuResult<Vec<PtxEntry>> {
    if image.starts_with(b"\x7fELF")
        || image.starts_with(&0xBA55_ED50u32.to_le_bytes())
        || image.starts_with(&0x4662_43B1u32.to_le_bytes())
    {
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
            "the image is a cubin or fatbin (GPU machine code); the CPU driver runs PTX only",
        ));
    }
    let text = std::str::from_utf8(image).map_err(|_| {
        CuErr::new(
            CUresult::CUDA_ERROR_INVALID_IMAGE,
            "the image is neither PTX text (UTF-8) nor a known binary format",
        )
    })?;
    parse_entries(text).map_err(|e| ptx_error(e.to_string()))
}

/// Makes a library of `image`; with a current context it is loaded there at once (so what the
/// engine refuses is reported now), else in each context on first use.
pub(crate) fn load_library(image: &[u8]) -> CuResult<Arc<Library>> {
    driver()?;
    let entries = library_entries(image)?;
    let lib = Arc::new(Library {
        handle: LIBRARIES.reserve(),
        image: image.to_vec(),
        entries,
        modules: Mutex::new(HashMap::new()),
        kernels: Mutex::new(HashMap::new()),
    });
    if let Ok(ctx) = current() {
        library_module(&lib, &ctx)?;
    }
    LIBRARIES.insert(lib.handle, lib.clone());
    Ok(lib)
}

/// Library `lib`'s module in context `ctx`, loaded now if it is not yet (or was unloaded with
/// a destroyed context).
pub(crate) fn library_module(lib: &Library, ctx: &Context) -> CuResult<Arc<Module>> {
    let mut mods = lib.modules.lock();
    if let Some(m) = mods.get(&ctx.handle).and_then(|&h| MODULES.get(h)) {
        return Ok(m);
    }
    let mut m = load(ctx, &lib.image)?;
    m.library = Some(lib.handle);
    let m = Arc::new(m);
    MODULES.insert(m.handle, m.clone());
    mods.insert(ctx.handle, m.handle);
    Ok(m)
}

/// Unloads library `lib`: its module in every context, its kernels.
pub(crate) fn unload_library(lib: &Library) {
    if LIBRARIES.remove(lib.handle).is_none() {
        return;
    }
    for (_, h) in lib.modules.lock().drain() {
        if let Some(m) = MODULES.get(h) {
            unload(&m);
        }
    }
    for (_, h) in lib.kernels.lock().drain() {
        KERNELS.remove(h);
    }
}

/// The handle of library `lib`'s kernel `name` (one per name).
pub(crate) fn library_kernel(lib: &Library, name: &str) -> CuResult<usize> {
    if !lib.entries.iter().any(|e| e.name == name) {
        let have: Vec<&str> = lib.entries.iter().map(|e| e.name.as_str()).collect();
        return Err(CuErr::new(
            CUresult::CUDA_ERROR_NOT_FOUND,
            format!(
                "the library has no kernel `{name}` (it has: {})",
                have.join(", ")
            ),
        ));
    }
    let mut ks = lib.kernels.lock();
    if let Some(&h) = ks.get(name) {
        return Ok(h);
    }
    let h = KERNELS.reserve();
    KERNELS.insert(
        h,
        Arc::new(LibKernel {
            library: lib.handle,
            name: CString::new(name).unwrap_or_default(),
        }),
    );
    ks.insert(name.to_string(), h);
    Ok(h)
}

/// The function handle of library kernel `k` in context `ctx`.
pub(crate) fn kernel_function(k: &LibKernel, ctx: &Context) -> CuResult<usize> {
    let lib = library(k.library)?;
    let m = library_module(&lib, ctx)?;
    function_of(ctx, &m, &k.name.to_string_lossy())
}

/// The address and size of library `lib`'s global `name` in context `ctx`.
pub(crate) fn library_global(lib: &Library, ctx: &Context, name: &str) -> CuResult<(u64, u64)> {
    let m = library_module(lib, ctx)?;
    global_of(ctx, &m, name)
}

/// `cuFuncGetName`: the kernel's name (valid while the function is).
///
/// # Safety
/// `name` is null or valid for a write.
pub(crate) unsafe fn cuFuncGetName(name: *mut *const c_char, hfunc: CUfunction) -> CuResult<()> {
    let f = function_any(hfunc)?;
    // SAFETY: the caller's out-pointer; the name lives in the function (kept by its module).
    unsafe { put(name, f.name.as_ptr(), "name") }
}

/// `cuModuleGetLoadingMode`: modules are loaded eagerly (every kernel decoded at load).
///
/// # Safety
/// `mode` is null or valid for a write.
pub(crate) unsafe fn cuModuleGetLoadingMode(mode: *mut CUmoduleLoadingMode) -> CuResult<()> {
    driver()?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(mode, CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING, "mode") }
}
