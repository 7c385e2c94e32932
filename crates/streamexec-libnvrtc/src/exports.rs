//! Every `nvrtc*` entry point of the library, declared once in [`entry_points!`] (as the CPU
//! libcuda declares its `cu*` ones): its name, its C signature, and where it goes. The list
//! hands its entries to a macro: [`shells!`] below makes the `extern "C"` exports, `abi.rs` the
//! compile-time check of every signature against cudarc's `nvrtc::sys`.
//!
//! - `implemented`: the shell runs `crate::<file>::<name>` (an ordinary Rust function
//!   returning `NvResult<()>`) in [`call`]: a panic is `NVRTC_ERROR_INTERNAL_ERROR`, a failure
//!   keeps its detail for `streamexec_nvrtc_last_error_detail`.
//! - `plain`: returns something else than a code, so the implementation is called as it is
//!   (`nvrtcGetErrorString` catches its own panics).
//! - `refused`: outputs this NVRTC does not produce (CUBIN, LTO-IR, OptiX-IR):
//!   `NVRTC_ERROR_INVALID_INPUT`, with a note in the program log (`program::refuse_output`).
//!
//! Enums passed by value are received as `u32`: a C caller may pass any value.

use std::ffi::{c_char, c_int};

use cudarc::nvrtc::sys::{nvrtcProgram, nvrtcResult};

use crate::entry::call;
use crate::program::refuse_output;

/// The declaration list: `$callback! { implemented { <file path> { fn ..; }* }* plain { .. }
/// refused { fn .. => "output"; }* }`.
macro_rules! entry_points {
    ($callback:ident) => {
        $callback! {
            implemented {
                crate::entry {
                    fn nvrtcVersion(major: *mut c_int, minor: *mut c_int);
                    fn nvrtcGetNumSupportedArchs(numArchs: *mut c_int);
                    fn nvrtcGetSupportedArchs(supportedArchs: *mut c_int);
                }
                crate::program {
                    fn nvrtcCreateProgram(
                        prog: *mut nvrtcProgram,
                        src: *const c_char,
                        name: *const c_char,
                        numHeaders: c_int,
                        headers: *const *const c_char,
                        includeNames: *const *const c_char,
                    );
                    fn nvrtcDestroyProgram(prog: *mut nvrtcProgram);
                    fn nvrtcCompileProgram(
                        prog: nvrtcProgram,
                        numOptions: c_int,
                        options: *const *const c_char,
                    );
                    fn nvrtcGetPTXSize(prog: nvrtcProgram, ptxSizeRet: *mut usize);
                    fn nvrtcGetPTX(prog: nvrtcProgram, ptx: *mut c_char);
                    fn nvrtcGetProgramLogSize(prog: nvrtcProgram, logSizeRet: *mut usize);
                    fn nvrtcGetProgramLog(prog: nvrtcProgram, log: *mut c_char);
                    fn nvrtcAddNameExpression(prog: nvrtcProgram, name_expression: *const c_char);
                    fn nvrtcGetLoweredName(
                        prog: nvrtcProgram,
                        name_expression: *const c_char,
                        lowered_name: *mut *const c_char,
                    );
                }
            }
            plain {
                crate::entry {
                    fn nvrtcGetErrorString(result: u32) -> *const c_char;
                }
            }
            refused {
                fn nvrtcGetCUBINSize(prog: nvrtcProgram, cubinSizeRet: *mut usize) => "CUBIN";
                fn nvrtcGetCUBIN(prog: nvrtcProgram, cubin: *mut c_char) => "CUBIN";
                fn nvrtcGetLTOIRSize(prog: nvrtcProgram, LTOIRSizeRet: *mut usize) => "LTO-IR";
                fn nvrtcGetLTOIR(prog: nvrtcProgram, LTOIR: *mut c_char) => "LTO-IR";
                fn nvrtcGetOptiXIRSize(prog: nvrtcProgram, optixirSizeRet: *mut usize)
                    => "OptiX-IR";
                fn nvrtcGetOptiXIR(prog: nvrtcProgram, optixir: *mut c_char) => "OptiX-IR";
            }
        }
    };
}
pub(crate) use entry_points;

/// Makes the `extern "C"` export of every entry of [`entry_points!`].
macro_rules! shells {
    (
        implemented {$(
            crate $(:: $family:ident)+ { $($entries:tt)* }
        )*}
        plain {$(
            crate $(:: $pfamily:ident)+ { $($pentries:tt)* }
        )*}
        refused {$(
            fn $refused:ident($prog:ident: $progty:ty, $out:ident: $outty:ty) => $what:literal;
        )*}
    ) => {
        $(shells!(@family crate $(:: $family)+; $($entries)*);)*
        $(shells!(@plain crate $(:: $pfamily)+; $($pentries)*);)*
        $(
            #[doc = concat!(
                "`", stringify!($refused), "`: `NVRTC_ERROR_INVALID_INPUT` (", $what,
                " is not produced), with a note in the program log.",
            )]
            #[unsafe(no_mangle)]
            pub extern "C" fn $refused($prog: $progty, $out: $outty) -> nvrtcResult {
                let _ = $out;
                call(stringify!($refused), || refuse_output($prog, $what))
            }
        )*
    };
    (@plain $family:path; $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(
        #[doc = concat!(
            "`", stringify!($name), "`: runs `", stringify!($family), "::", stringify!($name), "`.",
        )]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: $ty),*) -> $ret {
            use $family as family;
            family::$name($($arg),*)
        }
    )*};
    (@family $family:path; $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        #[doc = concat!(
            "`", stringify!($name), "`: runs `", stringify!($family), "::", stringify!($name),
            "` in [`call`].",
        )]
        ///
        /// # Safety
        /// As NVRTC documents for this call (the implementation's `# Safety` says what it
        /// relies on).
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> nvrtcResult {
            use $family as family;
            // SAFETY: the caller keeps NVRTC's contract for this call, which is the
            // implementation's (its `# Safety`).
            call(stringify!($name), || unsafe { family::$name($($arg),*) })
        }
    )*};
}

entry_points!(shells);
