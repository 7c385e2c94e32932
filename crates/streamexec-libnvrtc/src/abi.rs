//! Every export's signature, checked by the compiler against cudarc's `nvrtc::sys` (the
//! CUDA 12.0 bindings), from the one declaration list (`exports.rs`): same argument count, each
//! argument of the same type, and the same return type, except that an enum passed by value is
//! received as its `u32` (a C caller can pass any value; receiving it as a Rust enum would make
//! an unknown value undefined behaviour).

#![allow(dead_code)]

use std::ffi::{c_char, c_int};

use cudarc::nvrtc::sys::{self, nvrtcProgram, nvrtcResult};

use crate::exports::entry_points;

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
impl Abi for nvrtcResult {
    type Repr = u32;
}

/// A function pointer type as its return type and the ABI of each argument.
trait Sig {
    type Repr;
}

macro_rules! sig_up_to {
    () => {
        impl<R> Sig for unsafe fn() -> R {
            type Repr = (R,);
        }
    };
    ($first:ident $($rest:ident)*) => {
        impl<R, $first: Abi, $($rest: Abi),*> Sig for unsafe fn($first, $($rest),*) -> R {
            type Repr = (R, $first::Repr, $($rest::Repr,)*);
        }
        sig_up_to!($($rest)*);
    };
}
sig_up_to!(A B C D E F);

/// Compiles only if `Ours` and `Theirs` travel the same way through the C ABI.
fn same<Ours: Sig, Theirs: Sig<Repr = Ours::Repr>>(_: Theirs) {}

/// `_`, one per argument: cudarc's argument types, inferred.
macro_rules! infer {
    ($arg:ident) => {
        _
    };
}

/// Makes [`signatures_match_cudarc`] from the declaration list.
macro_rules! check {
    (
        implemented {$(
            crate $(:: $family:ident)+ {$(
                fn $name:ident($($arg:ident: $ty:ty),* $(,)?);
            )*}
        )*}
        plain {$(
            crate $(:: $pfamily:ident)+ {$(
                fn $plain:ident($($parg:ident: $pty:ty),* $(,)?) -> $ret:ty;
            )*}
        )*}
        refused {$(
            fn $refused:ident($($rarg:ident: $rty:ty),*) => $what:literal;
        )*}
    ) => {
        /// Never called: it compiles only if every signature matches.
        fn signatures_match_cudarc() {
            $($(
                same::<unsafe fn($($ty),*) -> nvrtcResult, unsafe fn($(infer!($arg)),*) -> _>(
                    sys::$name,
                );
            )*)*
            $($(
                same::<unsafe fn($($pty),*) -> $ret, unsafe fn($(infer!($parg)),*) -> _>(
                    sys::$plain,
                );
            )*)*
            $(
                same::<unsafe fn($($rty),*) -> nvrtcResult, unsafe fn($(infer!($rarg)),*) -> _>(
                    sys::$refused,
                );
            )*
        }
    };
}

entry_points!(check);
