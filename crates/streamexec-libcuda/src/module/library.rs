//! The `cuLibrary*` and `cuKernel*` entry points (CUDA 12's context-independent loading): a
//! library holds a PTX image and is loaded as a module into each context that uses it (at
//! `cuLibraryLoadData` into the current one, if any, so a load error is reported there); a
//! `CUkernel` is one of its kernels, the function of that context's module in each context, and
//! may be passed where a `CUfunction` is taken (`cuLaunchKernel`, `cuFuncGetAttribute`, ...).
//! Managed variables and unified functions are not offered.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

use cudarc::driver::sys::{
    CUdevice, CUdeviceptr, CUfunction, CUjit_option, CUkernel, CUlibrary, CUlibraryOption,
    CUmodule, CUresult,
};

use super::{
    cuFuncGetAttribute, cuFuncSetAttribute, cuFuncSetCacheConfig, kernel_function, lib_kernel,
    library, library_global, library_kernel, library_module, load_library, put_global,
    unload_library, write_logs,
};
use crate::context::current;
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid, non_null, put};

/// `CU_LIBRARY_HOST_UNIVERSAL_FUNCTION_AND_DATA_TABLE`, `CU_LIBRARY_BINARY_IS_PRESERVED`.
const LIBRARY_OPTIONS: u32 = 2;

/// Checks the library options: both known ones change nothing here (the image is copied).
///
/// # Safety
/// `options` is null or holds `n` entries.
unsafe fn check_library_options(n: c_uint, options: *mut CUlibraryOption) -> CuResult<()> {
    if n == 0 {
        return Ok(());
    }
    non_null(options, "libraryOptions")?;
    // SAFETY: `n` entries (the caller's contract), read as integers.
    let opts = unsafe { std::slice::from_raw_parts(options.cast::<u32>(), n as usize) };
    match opts.iter().find(|&&o| o >= LIBRARY_OPTIONS) {
        Some(o) => Err(invalid(format!("{o} is not a CUlibraryOption"))),
        None => Ok(()),
    }
}

/// Loads `image` as a library into `*library`; the JIT log options receive the engine's
/// message.
///
/// # Safety
/// The JIT option arrays hold `numJitOptions` entries, their buffers valid for their sizes.
unsafe fn load_into(
    out: *mut CUlibrary,
    image: &[u8],
    jitOptions: *mut CUjit_option,
    jitOptionsValues: *mut *mut c_void,
    numJitOptions: c_uint,
) -> CuResult<()> {
    match load_library(image) {
        Ok(lib) => {
            // SAFETY: the caller's contract.
            unsafe { write_logs(numJitOptions, jitOptions, jitOptionsValues, "") };
            // SAFETY: the caller's out-pointer (checked non-null by the callers).
            unsafe { put(out, lib.handle as CUlibrary, "library") }
        }
        Err(e) => {
            // SAFETY: the caller's contract.
            unsafe { write_logs(numJitOptions, jitOptions, jitOptionsValues, &e.detail) };
            Err(e)
        }
    }
}

/// The bytes of an in-memory image: PTX text up to its NUL, or a binary's first bytes (which
/// are refused).
///
/// # Safety
/// `code` points to NUL-terminated PTX text or to a binary image's header.
unsafe fn image_of<'a>(code: *const c_void) -> &'a [u8] {
    // SAFETY: the caller's contract; binary images start with 4 non-NUL magic bytes, read
    // before anything else.
    let head = unsafe { std::slice::from_raw_parts(code.cast::<u8>(), 4) };
    if head == b"\x7fELF"
        || head == 0xBA55_ED50u32.to_le_bytes()
        || head == 0x4662_43B1u32.to_le_bytes()
    {
        return head;
    }
    // SAFETY: the caller's contract: PTX text is NUL-terminated.
    unsafe { CStr::from_ptr(code.cast::<c_char>()) }.to_bytes()
}

/// `cuLibraryLoadData`: a library of an in-memory PTX image.
///
/// # Safety
/// `code` is NUL-terminated PTX (or a binary header); the option arrays hold their counts.
#[allow(clippy::too_many_arguments)] // the C signature
pub(crate) unsafe fn cuLibraryLoadData(
    library: *mut CUlibrary,
    code: *const c_void,
    jitOptions: *mut CUjit_option,
    jitOptionsValues: *mut *mut c_void,
    numJitOptions: c_uint,
    libraryOptions: *mut CUlibraryOption,
    libraryOptionValues: *mut *mut c_void,
    numLibraryOptions: c_uint,
) -> CuResult<()> {
    driver()?;
    non_null(library, "library")?;
    non_null(code, "code")?;
    let _ = libraryOptionValues;
    // SAFETY: the caller's contract.
    unsafe {
        check_library_options(numLibraryOptions, libraryOptions)?;
        let image = image_of(code);
        load_into(library, image, jitOptions, jitOptionsValues, numJitOptions)
    }
}

/// `cuLibraryLoadFromFile`: a library of a PTX file.
///
/// # Safety
/// `fileName` is NUL-terminated; the option arrays hold their counts.
#[allow(clippy::too_many_arguments)] // the C signature
pub(crate) unsafe fn cuLibraryLoadFromFile(
    library: *mut CUlibrary,
    fileName: *const c_char,
    jitOptions: *mut CUjit_option,
    jitOptionsValues: *mut *mut c_void,
    numJitOptions: c_uint,
    libraryOptions: *mut CUlibraryOption,
    libraryOptionValues: *mut *mut c_void,
    numLibraryOptions: c_uint,
) -> CuResult<()> {
    driver()?;
    non_null(library, "library")?;
    non_null(fileName, "fileName")?;
    let _ = libraryOptionValues;
    // SAFETY: the caller's contract.
    unsafe { check_library_options(numLibraryOptions, libraryOptions)? };
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let path = unsafe { CStr::from_ptr(fileName) }
        .to_string_lossy()
        .into_owned();
    let mut bytes = std::fs::read(&path)
        .map_err(|e| CuErr::new(CUresult::CUDA_ERROR_FILE_NOT_FOUND, format!("{path}: {e}")))?;
    if let Some(nul) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(nul.max(4));
    }
    // SAFETY: the caller's contract for the option arrays.
    unsafe { load_into(library, &bytes, jitOptions, jitOptionsValues, numJitOptions) }
}

/// `cuLibraryUnload`: its module in every context is unloaded, its kernels are gone.
pub(crate) fn cuLibraryUnload(library_: CUlibrary) -> CuResult<()> {
    let lib = library(library_ as usize)?;
    unload_library(&lib);
    crate::driver::flush_printf();
    Ok(())
}

/// `cuLibraryGetKernel`.
///
/// # Safety
/// `name` is NUL-terminated; `pKernel` is null or valid for a write.
pub(crate) unsafe fn cuLibraryGetKernel(
    pKernel: *mut CUkernel,
    library_: CUlibrary,
    name: *const c_char,
) -> CuResult<()> {
    let lib = library(library_ as usize)?;
    non_null(pKernel, "pKernel")?;
    non_null(name, "name")?;
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let h = library_kernel(&lib, &name)?;
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pKernel, h as CUkernel, "pKernel") }
}

/// `cuLibraryGetKernelCount`.
///
/// # Safety
/// `count` is null or valid for a write.
pub(crate) unsafe fn cuLibraryGetKernelCount(count: *mut c_uint, lib: CUlibrary) -> CuResult<()> {
    let lib = library(lib as usize)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(count, lib.entries.len() as c_uint, "count") }
}

/// `cuLibraryEnumerateKernels`: the first `numKernels` kernels, in the order of the PTX.
///
/// # Safety
/// `kernels` is valid for writes of `numKernels` handles.
pub(crate) unsafe fn cuLibraryEnumerateKernels(
    kernels: *mut CUkernel,
    numKernels: c_uint,
    lib: CUlibrary,
) -> CuResult<()> {
    let lib = library(lib as usize)?;
    non_null(kernels, "kernels")?;
    if numKernels as usize > lib.entries.len() {
        return Err(invalid(format!(
            "numKernels {numKernels} is more than the library's {} kernels",
            lib.entries.len()
        )));
    }
    for (i, e) in lib.entries.iter().take(numKernels as usize).enumerate() {
        let h = library_kernel(&lib, &e.name)?;
        // SAFETY: `i` < `numKernels` (the caller's contract).
        unsafe { kernels.add(i).write(h as CUkernel) };
    }
    Ok(())
}

/// `cuLibraryGetModule`: the library's module in the current context.
///
/// # Safety
/// `pMod` is null or valid for a write.
pub(crate) unsafe fn cuLibraryGetModule(pMod: *mut CUmodule, library_: CUlibrary) -> CuResult<()> {
    let lib = library(library_ as usize)?;
    non_null(pMod, "pMod")?;
    let m = library_module(&lib, &*current()?)?;
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pMod, m.handle as CUmodule, "pMod") }
}

/// `cuLibraryGetGlobal`: a `.global`/`.const` variable of the current context's module.
///
/// # Safety
/// `name` is NUL-terminated; the out pointers are null or valid for writes.
pub(crate) unsafe fn cuLibraryGetGlobal(
    dptr: *mut CUdeviceptr,
    bytes: *mut usize,
    library_: CUlibrary,
    name: *const c_char,
) -> CuResult<()> {
    let lib = library(library_ as usize)?;
    non_null(name, "name")?;
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    let g = library_global(&lib, &*current()?, &name)?;
    // SAFETY: the caller's out-pointers.
    unsafe { put_global(dptr, bytes, g) };
    Ok(())
}

/// `cuLibraryGetManaged`: there is no managed memory.
pub(crate) fn cuLibraryGetManaged(
    _dptr: *mut CUdeviceptr,
    _bytes: *mut usize,
    library_: CUlibrary,
    _name: *const c_char,
) -> CuResult<()> {
    library(library_ as usize)?;
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        "managed variables (`.attribute(.managed)`): the CPU driver has no managed memory \
         (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY is 0)",
    ))
}

/// `cuLibraryGetUnifiedFunction`: there are no unified (host and device) functions.
pub(crate) fn cuLibraryGetUnifiedFunction(
    _fptr: *mut *mut c_void,
    library_: CUlibrary,
    _symbol: *const c_char,
) -> CuResult<()> {
    library(library_ as usize)?;
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        "unified functions: the CPU driver runs PTX kernels only",
    ))
}

/// `cuKernelGetFunction`: the kernel's function in the current context.
///
/// # Safety
/// `pFunc` is null or valid for a write.
pub(crate) unsafe fn cuKernelGetFunction(pFunc: *mut CUfunction, kernel: CUkernel) -> CuResult<()> {
    let k = lib_kernel(kernel as usize)?;
    non_null(pFunc, "pFunc")?;
    let f = kernel_function(&k, &*current()?)?;
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pFunc, f as CUfunction, "pFunc") }
}

/// `cuKernelGetLibrary`.
///
/// # Safety
/// `pLib` is null or valid for a write.
pub(crate) unsafe fn cuKernelGetLibrary(pLib: *mut CUlibrary, kernel: CUkernel) -> CuResult<()> {
    let k = lib_kernel(kernel as usize)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(pLib, k.library as CUlibrary, "pLib") }
}

/// `cuKernelGetName`: the kernel's name (valid while the library is loaded).
///
/// # Safety
/// `name` is null or valid for a write.
pub(crate) unsafe fn cuKernelGetName(name: *mut *const c_char, hfunc: CUkernel) -> CuResult<()> {
    let k = lib_kernel(hfunc as usize)?;
    // SAFETY: the caller's out-pointer; the name lives in the kernel, kept by its library.
    unsafe { put(name, k.name.as_ptr(), "name") }
}

/// `cuKernelGetParamInfo`: the offset and size of parameter `paramIndex` in the kernel's
/// parameter buffer (each parameter at its alignment, as `cuLaunchKernel`'s `extra` lays
/// them out).
///
/// # Safety
/// The out pointers are null or valid for writes.
pub(crate) unsafe fn cuKernelGetParamInfo(
    kernel: CUkernel,
    paramIndex: usize,
    paramOffset: *mut usize,
    paramSize: *mut usize,
) -> CuResult<()> {
    let k = lib_kernel(kernel as usize)?;
    let lib = library(k.library)?;
    let name = k.name.to_string_lossy();
    let entry = lib
        .entries
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| invalid("the kernel's entry vanished"))?;
    if paramIndex >= entry.params.len() {
        return Err(invalid(format!(
            "paramIndex {paramIndex}: kernel `{name}` has {} parameters",
            entry.params.len()
        )));
    }
    let mut at = 0usize;
    for (i, p) in entry.params.iter().enumerate() {
        let (size, align) = (p.size() as usize, (p.align as usize).max(1));
        at = at.next_multiple_of(align);
        if i == paramIndex {
            // SAFETY: the caller's out-pointers.
            unsafe {
                put(paramOffset, at, "paramOffset")?;
                put(paramSize, size, "paramSize")?;
            }
            break;
        }
        at += size;
    }
    Ok(())
}

/// The kernel's function in the current context, whose device must be `dev`.
fn function_on(kernel: CUkernel, dev: CUdevice) -> CuResult<CUfunction> {
    let k = lib_kernel(kernel as usize)?;
    let d = driver()?.device(dev)?;
    let ctx = current()?;
    if ctx.device != d {
        return Err(invalid(format!(
            "device {dev}: the current context is of device {}; make a context of that device \
             current",
            ctx.device
        )));
    }
    Ok(kernel_function(&k, &ctx)? as CUfunction)
}

/// `cuKernelGetAttribute`: the attribute of the kernel's function on `dev`.
///
/// # Safety
/// `pi` is null or valid for a write.
pub(crate) unsafe fn cuKernelGetAttribute(
    pi: *mut c_int,
    attrib: u32,
    kernel: CUkernel,
    dev: CUdevice,
) -> CuResult<()> {
    let f = function_on(kernel, dev)?;
    // SAFETY: the caller's out-pointer.
    unsafe { cuFuncGetAttribute(pi, attrib, f) }
}

/// `cuKernelSetAttribute`: as `cuFuncSetAttribute` on the kernel's function on `dev`.
pub(crate) fn cuKernelSetAttribute(
    attrib: u32,
    val: c_int,
    kernel: CUkernel,
    dev: CUdevice,
) -> CuResult<()> {
    cuFuncSetAttribute(function_on(kernel, dev)?, attrib, val)
}

/// `cuKernelSetCacheConfig`: accepted (no cache split on the CPU).
pub(crate) fn cuKernelSetCacheConfig(kernel: CUkernel, config: u32, dev: CUdevice) -> CuResult<()> {
    cuFuncSetCacheConfig(function_on(kernel, dev)?, config)
}
