//! Every export's signature, checked by the compiler against cudarc's `driver::sys` (the
//! CUDA 12.0 bindings), from the one declaration list (`exports.rs`): same argument count, and
//! each argument of the same type, except that an enum passed by value is received as its
//! `u32` (a C caller can pass any value; receiving it as a Rust enum would make an unknown
//! value undefined behaviour). Names those bindings lack are checked against the local
//! declarations below (`in cuda11`, `in cuda12_1` in the list).

#![allow(dead_code)]

use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_ushort, c_void};

use cudarc::driver::sys::{self, *};

use crate::exports::entry_points;
use crate::managed::MemLocation;

/// How an argument travels through the C ABI.
trait Abi {
    type Repr;
}

macro_rules! abi_is_self {
    ($($t:ty),*) => { $(impl Abi for $t { type Repr = $t; })* };
}
abi_is_self!(i32, u32, u8, u16, u64, usize, f32);

impl<T> Abi for *mut T {
    type Repr = *mut T;
}
impl<T> Abi for *const T {
    type Repr = *const T;
}
impl<T> Abi for Option<T> {
    type Repr = Option<T>;
}

/// `CUmemLocation` by value: received with its type as an integer.
impl Abi for CUmemLocation {
    type Repr = MemLocation;
}
impl Abi for MemLocation {
    type Repr = MemLocation;
}

macro_rules! abi_enum_as_u32 {
    ($($t:ty),*) => { $(impl Abi for $t { type Repr = u32; })* };
}
abi_enum_as_u32!(
    CUresult,
    CUdevice_attribute,
    CUfunction_attribute,
    CUlimit,
    CUfunc_cache,
    CUmemPool_attribute,
    CUmem_advise,
    CUmem_range_attribute,
    CUstreamCaptureMode,
    CUjitInputType,
    CUpointer_attribute
);

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
sig_up_to!(A B C D E F G H I J K);

/// Compiles only if `Ours` and `Theirs` travel the same way through the C ABI.
fn same<Ours: Sig, Theirs: Sig<Repr = Ours::Repr>>(_: Theirs) {}

/// The CUDA 11 names of the kernel-node calls, which NVIDIA's CUDA 12 driver still exports for
/// programs built against CUDA 11: they take `CUDA_KERNEL_NODE_PARAMS_v1` (no `kern`, no
/// `ctx`), where the `_v2` names take the v2 struct. cudarc's 12.0 bindings have only the `_v2`
/// names; these are its CUDA 11.8 declarations (`CUDA_KERNEL_NODE_PARAMS` was the v1 struct
/// there). Never called.
#[allow(unused_variables)]
mod cuda11 {
    use cudarc::driver::sys::{
        CUDA_KERNEL_NODE_PARAMS_v1 as P, CUgraph, CUgraphExec, CUgraphNode, CUresult as R,
    };

    pub(super) unsafe fn cuGraphAddKernelNode(
        phGraphNode: *mut CUgraphNode,
        hGraph: CUgraph,
        dependencies: *const CUgraphNode,
        numDependencies: usize,
        nodeParams: *const P,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuGraphExecKernelNodeSetParams(
        hGraphExec: CUgraphExec,
        hNode: CUgraphNode,
        nodeParams: *const P,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuGraphKernelNodeGetParams(hNode: CUgraphNode, nodeParams: *mut P) -> R {
        unreachable!("a signature for abi.rs")
    }
    /// CUDA 11.3's `cuGetProcAddress` (no status out-parameter).
    pub(super) unsafe fn cuGetProcAddress(
        symbol: *const std::ffi::c_char,
        pfn: *mut *mut std::ffi::c_void,
        cudaVersion: std::ffi::c_int,
        flags: cudarc::driver::sys::cuuint64_t,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
}

/// CUDA 12.1's `cuCtxSetFlags`, as cudarc declares it for 12.1 and later. Never called.
#[allow(unused_variables)]
mod cuda12_1 {
    use std::ffi::c_uint;

    use cudarc::driver::sys::CUresult;

    pub(super) unsafe fn cuCtxSetFlags(flags: c_uint) -> CUresult {
        unreachable!("a signature for abi.rs")
    }
}

/// Entry points of CUDA 12.2 to 12.5, as cudarc declares them for those versions. Never called.
#[allow(unused_variables)]
mod cuda12_later {
    use std::ffi::{c_char, c_uint};

    use cudarc::driver::sys::{
        CUdeviceptr, CUfunction, CUkernel, CUlibrary, CUmem_advise, CUmemLocation, CUresult as R,
        CUstream,
    };

    pub(super) unsafe fn cuFuncGetName(name: *mut *const c_char, hfunc: CUfunction) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuKernelGetName(name: *mut *const c_char, hfunc: CUkernel) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuKernelGetLibrary(pLib: *mut CUlibrary, kernel: CUkernel) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuKernelGetParamInfo(
        kernel: CUkernel,
        paramIndex: usize,
        paramOffset: *mut usize,
        paramSize: *mut usize,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuMemAdvise_v2(
        devPtr: CUdeviceptr,
        count: usize,
        advice: CUmem_advise,
        location: CUmemLocation,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuMemPrefetchAsync_v2(
        devPtr: CUdeviceptr,
        count: usize,
        location: CUmemLocation,
        flags: c_uint,
        hStream: CUstream,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuLibraryGetKernelCount(count: *mut c_uint, lib: CUlibrary) -> R {
        unreachable!("a signature for abi.rs")
    }
    pub(super) unsafe fn cuLibraryEnumerateKernels(
        kernels: *mut CUkernel,
        numKernels: c_uint,
        lib: CUlibrary,
    ) -> R {
        unreachable!("a signature for abi.rs")
    }
}

/// The reference declaration of an entry point: cudarc's, or the local one named.
macro_rules! reference {
    ($name:ident) => {
        sys::$name
    };
    ($decl:ident $name:ident) => {
        $decl::$name
    };
}

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
                fn $name:ident($($arg:ident: $ty:ty),* $(,)?)
                    @ $since:literal $(.. $until:literal)? $(, $pt:ident $ptname:ident)?
                    $(in $decl:ident)?;
            )*}
        )*}
        lookup {$(
            fn $lname:ident($($larg:ident: $lty:ty),* $(,)?)
                @ $lsince:literal $(.. $luntil:literal)? $(in $ldecl:ident)?;
        )*}
        refused {$(
            fn $refused:ident($($rarg:ident: $rty:ty),* $(,)?)
                @ $rsince:literal $(.. $runtil:literal)? $(, $rpt:ident $rptname:ident)?
                => $what:literal;
        )*}
    ) => {
        /// Never called: it compiles only if every signature matches.
        fn signatures_match_cudarc() {
            $($(
                same::<unsafe fn($($ty),*) -> CUresult, unsafe fn($(infer!($arg)),*) -> _>(
                    reference!($($decl)? $name),
                );
            )*)*
            $(
                same::<unsafe fn($($lty),*) -> CUresult, unsafe fn($(infer!($larg)),*) -> _>(
                    reference!($($ldecl)? $lname),
                );
            )*
            $(
                same::<unsafe fn($($rty),*) -> CUresult, unsafe fn($(infer!($rarg)),*) -> _>(
                    sys::$refused,
                );
            )*
        }
    };
}

entry_points!(check);
