//! Every export's signature, checked by the compiler against cudarc's `nvrtc::sys` (the
//! CUDA 12.0 bindings): same argument count, each argument of the same type, and the same
//! return type, except that an enum passed by value is received as its `u32` (a C caller can
//! pass any value; receiving it as a Rust enum would make an unknown value undefined
//! behaviour).

#![allow(dead_code)]

use std::ffi::{c_char, c_int};

use cudarc::nvrtc::sys;

/// How an argument travels through the C ABI.
trait Abi {
    type Repr;
}

macro_rules! abi_is_self {
    ($($t:ty),*) => { $(impl Abi for $t { type Repr = $t; })* };
}
abi_is_self!(c_int, u32, usize);

impl<T> Abi for *mut T {
    type Repr = *mut T;
}
impl<T> Abi for *const T {
    type Repr = *const T;
}
impl Abi for sys::nvrtcResult {
    type Repr = u32;
}

macro_rules! sig_fns {
    ($($name:ident($($a:ident $b:ident),*);)*) => {$(
        fn $name<R, $($a: Abi,)* $($b: Abi<Repr = $a::Repr>,)*>(
            _: unsafe fn($($a),*) -> R,
            _: unsafe extern "C" fn($($b),*) -> R,
        ) {}
    )*};
}
sig_fns! {
    sig1(A1 B1);
    sig2(A1 B1, A2 B2);
    sig3(A1 B1, A2 B2, A3 B3);
    sig6(A1 B1, A2 B2, A3 B3, A4 B4, A5 B5, A6 B6);
}

/// Never called: it compiles only if every signature matches.
fn signatures_match_cudarc() {
    use crate::entry as e;
    use crate::program as p;
    let _: Option<*const c_char> = None;
    sig2(sys::nvrtcAddNameExpression, p::nvrtcAddNameExpression);
    sig3(sys::nvrtcCompileProgram, p::nvrtcCompileProgram);
    sig6(sys::nvrtcCreateProgram, p::nvrtcCreateProgram);
    sig1(sys::nvrtcDestroyProgram, p::nvrtcDestroyProgram);
    sig2(sys::nvrtcGetCUBIN, p::nvrtcGetCUBIN);
    sig2(sys::nvrtcGetCUBINSize, p::nvrtcGetCUBINSize);
    // `nvrtcGetErrorString` is a safe `extern "C" fn` (it reads no pointer), which coerces to
    // the `unsafe` function pointer type.
    sig1(sys::nvrtcGetErrorString, e::nvrtcGetErrorString);
    sig2(sys::nvrtcGetLTOIR, p::nvrtcGetLTOIR);
    sig2(sys::nvrtcGetLTOIRSize, p::nvrtcGetLTOIRSize);
    sig3(sys::nvrtcGetLoweredName, p::nvrtcGetLoweredName);
    sig1(sys::nvrtcGetNumSupportedArchs, e::nvrtcGetNumSupportedArchs);
    sig2(sys::nvrtcGetOptiXIR, p::nvrtcGetOptiXIR);
    sig2(sys::nvrtcGetOptiXIRSize, p::nvrtcGetOptiXIRSize);
    sig2(sys::nvrtcGetPTX, p::nvrtcGetPTX);
    sig2(sys::nvrtcGetPTXSize, p::nvrtcGetPTXSize);
    sig2(sys::nvrtcGetProgramLog, p::nvrtcGetProgramLog);
    sig2(sys::nvrtcGetProgramLogSize, p::nvrtcGetProgramLogSize);
    sig1(sys::nvrtcGetSupportedArchs, e::nvrtcGetSupportedArchs);
    sig2(sys::nvrtcVersion, e::nvrtcVersion);
}
