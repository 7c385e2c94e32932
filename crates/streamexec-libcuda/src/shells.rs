//! What the declaration list (`exports.rs`) makes: the `extern "C"` shell of every entry point
//! (`shells!`: the implementation run in `entry::call`, the per-thread default-stream variants,
//! the refusals) and the table `cuGetProcAddress` searches (`procs!`, [`procs`]).

use std::ffi::{c_char, c_int, c_uchar, c_uint, c_ulonglong, c_ushort, c_void};
use std::sync::OnceLock;

use cudarc::driver::sys::*;

use crate::entry::{CuErr, CuResult, call, call_per_thread};
use crate::exports::entry_points;
use crate::managed::MemLocation;
use crate::proc_address::{Proc, Procs};

/// Makes the `extern "C"` export of every entry of `entry_points!`, and the per-thread
/// default-stream variant (`_ptds`/`_ptsz`) of those that have one.
macro_rules! shells {
    (
        implemented {$(
            crate $(:: $family:ident)+ { $($entries:tt)* }
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
        $(shells!(@family crate $(:: $family)+; $($entries)*);)*
        $(
            #[doc = concat!(
                "`", stringify!($lname), "`: runs `crate::proc_address::", stringify!($lname),
                "` in [`call`] on the table of every export ([`procs`]).",
            )]
            ///
            /// # Safety
            /// As the driver API documents for this call.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $lname($($larg: $lty),*) -> CUresult {
                // SAFETY: the caller keeps the driver API's contract for this call.
                call(stringify!($lname), || unsafe {
                    crate::proc_address::$lname(procs(), $($larg),*)
                })
            }
        )*
        $(
            shells!(@refused [$refused]; [$($rarg: $rty),*]; $what);
            shells!(@refused [$($rptname)?]; [$($rarg: $rty),*]; $what);
        )*
    };
    (@family $family:path; $(
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?)
            @ $since:literal $(.. $until:literal)? $(, $pt:ident $ptname:ident)?
            $(in $decl:ident)?;
    )*) => {$(
        #[doc = concat!(
            "`", stringify!($name), "`: runs `", stringify!($family), "::", stringify!($name),
            "` in [`call`].",
        )]
        ///
        /// # Safety
        /// As the driver API documents for this call (the implementation's `# Safety` says
        /// what it relies on).
        #[unsafe(no_mangle)]
        #[allow(unused_unsafe)] // implementations without a safety contract
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            use $family as family;
            // SAFETY: the caller keeps the driver API's contract for this call, which is the
            // implementation's (its `# Safety`, where it has one).
            call(stringify!($name), || unsafe { family::$name($($arg),*) })
        }
        shells!(@per_thread $family; $name; [$($arg: $ty),*]; [$($ptname)?]);
    )*};
    (@per_thread $family:path; $name:ident; $args:tt; []) => {};
    (@per_thread $family:path; $name:ident; [$($arg:ident: $ty:ty),*]; [$ptname:ident]) => {
        #[doc = concat!(
            "`", stringify!($ptname), "`: `", stringify!($name), "` with the per-thread default \
             stream as the NULL stream.",
        )]
        ///
        /// # Safety
        /// As the driver API documents for this call.
        #[unsafe(no_mangle)]
        #[allow(unused_unsafe)] // implementations without a safety contract
        pub unsafe extern "C" fn $ptname($($arg: $ty),*) -> CUresult {
            use $family as family;
            // SAFETY: as for the legacy-stream export.
            call_per_thread(stringify!($ptname), || unsafe { family::$name($($arg),*) })
        }
    };
    (@refused []; $args:tt; $what:literal) => {};
    (@refused [$name:ident]; [$($arg:ident: $ty:ty),*]; $what:literal) => {
        #[doc = concat!(
            "`", stringify!($name), "`: `CUDA_ERROR_NOT_SUPPORTED`, the CPU driver does \
             not offer ", $what, ".",
        )]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: $ty),*) -> CUresult {
            let _ = ($($arg,)*);
            call(stringify!($name), || refuse($what))
        }
    };
}

entry_points!(shells);

/// Makes [`procs`], the table `cuGetProcAddress` searches: one row per export of
/// `entry_points!` with the CUDA versions it answers for and its per-thread variant.
macro_rules! procs {
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
        /// Every export as a row of `cuGetProcAddress`'s table (made once).
        pub(crate) fn procs() -> &'static Procs {
            static PROCS: OnceLock<Procs> = OnceLock::new();
            PROCS.get_or_init(|| {
                Procs::new(vec![
                    $($(Proc {
                        name: stringify!($name),
                        since: $since,
                        until: [$($until,)? u32::MAX][0],
                        addr: $name as *const () as usize,
                        per_thread: [$(Some((stringify!($ptname), $ptname as *const () as usize)),)? None][0],
                    },)*)*
                    $(Proc {
                        name: stringify!($lname),
                        since: $lsince,
                        until: [$($luntil,)? u32::MAX][0],
                        addr: $lname as *const () as usize,
                        per_thread: None,
                    },)*
                    $(Proc {
                        name: stringify!($refused),
                        since: $rsince,
                        until: [$($runtil,)? u32::MAX][0],
                        addr: $refused as *const () as usize,
                        per_thread: [$(Some((stringify!($rptname), $rptname as *const () as usize)),)? None][0],
                    },)*
                ])
            })
        }
    };
}

entry_points!(procs);

fn refuse(what: &str) -> CuResult<()> {
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        format!("the CPU driver (streamexec libcuda) does not offer {what}"),
    ))
}
