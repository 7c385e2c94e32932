//! CLBlast, the tuned OpenCL BLAS library, as the OpenCL platform's vendor BLAS plugin.
//!
//! The library is loaded at run time (`libloading`), once per process, so the crate builds and
//! runs without it: `Plugin::Auto` then falls back to the built-in kernels (blas.rs) and
//! `Plugin::Vendor` fails at executor creation naming the library. Its C API (`clblast_c.h`,
//! 1.5) takes column-major operands as `cl_mem` + element offset, and enqueues on the
//! `cl_command_queue` it is given, returning the event of its last command. blas.rs calls it
//! from the stream's submitter, on the stream's own queue, and tracks that event as the stream
//! tracks its own commands, so ordering, deferred mode and the failure check at `finish` are
//! the same as for a built-in launch. CLBlast's kernels are trusted: its launches get no
//! red-zone check (blas.rs validated every extent before the call).
//!
//! The first call of each routine per context compiles CLBlast's OpenCL C (seconds on PoCL).

use std::ffi::c_int;
use std::sync::{Arc, OnceLock};

use opencl3::types::{cl_command_queue, cl_event, cl_mem};

use super::status::{PLATFORM, error_text};
use crate::error::{Error, Result};

/// The library's file name (Debian: `libclblast1`, headers in `libclblast-dev`).
pub(crate) const LIBRARY: &str = "libclblast.so.1";

/// What the plugin report calls it.
pub(crate) const NAME: &str = "CLBlast (libclblast.so.1)";

/// `CLBlastLayoutColMajor`.
pub(super) const COL_MAJOR: c_int = 102;
/// `CLBlastTransposeNo`.
pub(super) const NO_TRANS: c_int = 111;
/// `CLBlastTransposeYes` (also used for the conjugate transpose of real types).
pub(super) const TRANS: c_int = 112;

type Queue = *mut cl_command_queue;
type Ev = *mut cl_event;
type Gemm<T> = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    usize,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    cl_mem,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    Queue,
    Ev,
) -> c_int;
type GemmStrided<T> = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    usize,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    usize,
    cl_mem,
    usize,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    usize,
    usize,
    Queue,
    Ev,
) -> c_int;
type Gemv<T> = unsafe extern "C" fn(
    c_int,
    c_int,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    cl_mem,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    Queue,
    Ev,
) -> c_int;
/// axpy: `n, alpha, x, x_off, x_inc, y, y_off, y_inc`.
type Axpy<T> =
    unsafe extern "C" fn(usize, T, cl_mem, usize, usize, cl_mem, usize, usize, Queue, Ev) -> c_int;
/// scal: `n, alpha, x, x_off, x_inc`.
type Scal<T> = unsafe extern "C" fn(usize, T, cl_mem, usize, usize, Queue, Ev) -> c_int;
/// copy: `n, x, x_off, x_inc, y, y_off, y_inc`.
type Copy =
    unsafe extern "C" fn(usize, cl_mem, usize, usize, cl_mem, usize, usize, Queue, Ev) -> c_int;
/// dot: `n, result, r_off, x, x_off, x_inc, y, y_off, y_inc`.
type Dot = unsafe extern "C" fn(
    usize,
    cl_mem,
    usize,
    cl_mem,
    usize,
    usize,
    cl_mem,
    usize,
    usize,
    Queue,
    Ev,
) -> c_int;
/// nrm2 / asum: `n, result, r_off, x, x_off, x_inc`.
type Reduce = unsafe extern "C" fn(usize, cl_mem, usize, cl_mem, usize, usize, Queue, Ev) -> c_int;

/// The routines of one precision.
pub(super) struct Routines<T> {
    pub gemm: Gemm<T>,
    pub gemm_strided: GemmStrided<T>,
    pub gemv: Gemv<T>,
    pub axpy: Axpy<T>,
    pub scal: Scal<T>,
    pub copy: Copy,
    pub dot: Dot,
    pub nrm2: Reduce,
    pub asum: Reduce,
}

/// The loaded library and its routines (valid while `_lib` lives, i.e. for the process).
pub(crate) struct ClBlast {
    pub(super) s: Routines<f32>,
    pub(super) d: Routines<f64>,
    _lib: libloading::Library,
}

/// Loads the routines of one precision (`prefix` `S` or `D`) from `lib`.
///
/// # Safety
/// `lib` is CLBlast 1.x, whose symbols of these names have these C signatures.
unsafe fn routines<T>(
    lib: &libloading::Library,
    prefix: char,
) -> std::result::Result<Routines<T>, String> {
    macro_rules! sym {
        ($name:literal) => {{
            let name = format!("CLBlast{prefix}{}\0", $name);
            // SAFETY: the caller vouches for the signature; the pointer is used only while
            // the library stays loaded (it is kept in `ClBlast` for the process).
            *unsafe { lib.get(name.as_bytes()) }
                .map_err(|e| format!("{LIBRARY} lacks {}: {e}", name.trim_end_matches('\0')))?
        }};
    }
    Ok(Routines {
        gemm: sym!("gemm"),
        gemm_strided: sym!("gemmStridedBatched"),
        gemv: sym!("gemv"),
        axpy: sym!("axpy"),
        scal: sym!("scal"),
        copy: sym!("copy"),
        dot: sym!("dot"),
        nrm2: sym!("nrm2"),
        asum: sym!("asum"),
    })
}

impl ClBlast {
    /// Loads `file` (a name the dynamic loader searches for, or a path).
    pub(crate) fn load(file: &str) -> std::result::Result<ClBlast, String> {
        let missing = |e: &dyn std::fmt::Display| {
            format!(
                "CLBlast ({file}) not found: {e}; install libclblast-dev (Debian/Ubuntu: \
                 apt-get install libclblast-dev)"
            )
        };
        // SAFETY: CLBlast's initialisers only register its C++ statics; it links the same
        // OpenCL ICD loader as opencl3, so handles pass between them.
        let lib = unsafe { libloading::Library::new(file) }.map_err(|e| missing(&e))?;
        // SAFETY: a CLBlast library: its S/D routines have the signatures of `clblast_c.h`.
        let (s, d) = unsafe { (routines(&lib, 'S')?, routines(&lib, 'D')?) };
        Ok(ClBlast { s, d, _lib: lib })
    }

    /// The process's CLBlast ([`LIBRARY`]), loaded on first use; `Err` says why it is absent.
    pub(crate) fn get() -> std::result::Result<Arc<ClBlast>, String> {
        static LOADED: OnceLock<std::result::Result<Arc<ClBlast>, String>> = OnceLock::new();
        LOADED
            .get_or_init(|| ClBlast::load(LIBRARY).map(Arc::new))
            .clone()
    }
}

/// `Ok` for `CLBlastSuccess`, else an `Error::Driver` naming `routine` and the status.
pub(super) fn check(routine: &str, status: c_int) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    let name = match status {
        -1024 => "CLBlastNotImplemented",
        -1017 => "CLBlastInvalidDimension",
        -1016..=-1014 => "CLBlastInvalidLeadDim (A, B or C)",
        -1013 | -1012 => "CLBlastInvalidIncrement",
        -1011..=-1007 => "CLBlastInsufficientMemory (an operand's buffer is too small)",
        -2049 => "CLBlastInvalidBatchCount",
        -2046 => "CLBlastInvalidLocalMemUsage",
        -2044 => "CLBlastNoDoublePrecision (the device has no fp64)",
        -2041 => "CLBlastDatabaseError",
        -2040 | -2039 => "CLBlastUnknownError",
        s if s > -100 => error_text(s),
        _ => "an unlisted CLBlastStatusCode",
    };
    Err(Error::Driver {
        platform: PLATFORM,
        call: routine.to_string(),
        code: i64::from(status),
        detail: format!(
            "{name} ({status}); see clblast_c.h, or choose Plugin::Builtin for BLAS to run the \
             built-in kernels instead"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "dlopen is foreign code")]
    fn a_missing_library_is_named_with_how_to_install_it() {
        let e = ClBlast::load("libclblast-streamexec-missing.so.1")
            .err()
            .expect("no such library");
        assert!(
            e.contains("libclblast-streamexec-missing.so.1") && e.contains("libclblast-dev"),
            "{e}"
        );
    }

    #[test]
    fn failures_name_the_routine_and_the_status() {
        let e = check("CLBlastSgemm", -1017).unwrap_err().to_string();
        assert!(
            e.contains("CLBlastSgemm") && e.contains("InvalidDimension"),
            "{e}"
        );
        assert!(check("CLBlastSgemm", 0).is_ok());
    }
}
