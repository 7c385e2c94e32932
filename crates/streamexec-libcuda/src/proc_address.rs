//! `cuGetProcAddress` and `cuGetProcAddress_v2`: an entry point by its base name, for the CUDA
//! version the caller was built against, as NVIDIA's driver answers it.
//!
//! The table searched is made from the one declaration list (`exports.rs`, [`Procs`]): each
//! export says the CUDA version its ABI starts at (`cuMemAlloc_v2 @ 3020`, as `cudaTypedefs.h`
//! names it `PFN_cuMemAlloc_v3020`), the version a later variant replaced it at (`cuCtxCreate_v3
//! @ 11040..12050`: from 12.5 `cuCtxCreate` is `cuCtxCreate_v4`), and its per-thread
//! default-stream export (`cuLaunchKernel_ptsz`). A request names the base (`cuMemAlloc`) and
//! gets the export whose range holds `cudaVersion`; with `CU_GET_PROC_ADDRESS_PER_THREAD_
//! DEFAULT_STREAM` the `_ptds`/`_ptsz` one where it has one. A variant this library does not
//! export is `CUDA_ERROR_NOT_FOUND` with a NULL pointer, never another variant's ABI: a caller
//! asking for `cuCtxCreate` at 12.5 gets nothing rather than `cuCtxCreate_v3`, which takes other
//! arguments. `_v2`'s status says why: `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT` when the
//! function is newer than `cudaVersion`, else `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
//!
//! Both may be called before `cuInit` (NVIDIA's bindings resolve every entry point first).

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};

use cudarc::driver::sys::{CUdriverProcAddressQueryResult, CUresult, cuuint64_t};

use crate::entry::{CuErr, CuResult, invalid, non_null};

/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`, `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`
/// (`CU_GET_PROC_ADDRESS_DEFAULT` is 0: the legacy stream, as for a driver-API program).
const LEGACY_STREAM: cuuint64_t = 1 << 0;
const PER_THREAD_DEFAULT_STREAM: cuuint64_t = 1 << 1;

/// One export as `cuGetProcAddress` sees it.
pub(crate) struct Proc {
    /// The exported name (`cuMemAlloc_v2`).
    pub(crate) name: &'static str,
    /// The first CUDA version (`1000 * major + 10 * minor`) whose `cuMemAlloc` this is.
    pub(crate) since: u32,
    /// The version a later variant took over at (`u32::MAX`: none yet).
    pub(crate) until: u32,
    /// The export's address.
    pub(crate) addr: usize,
    /// The per-thread default-stream export (`cuLaunchKernel_ptsz`) and its address.
    pub(crate) per_thread: Option<(&'static str, usize)>,
}

/// Why a lookup found nothing (`CUdriverProcAddressQueryResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// No export answers for the name at that version.
    Symbol,
    /// The function appeared in a CUDA version later than the one asked for.
    Version,
}

/// Every export by base name (`cuMemAlloc` for `cuMemAlloc_v2`), oldest variant first.
pub(crate) struct Procs {
    by_base: HashMap<&'static str, Vec<Proc>>,
}

/// `name` without a `_vN` suffix: the name `cuGetProcAddress` is asked for.
fn base_of(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

impl Procs {
    pub(crate) fn new(rows: Vec<Proc>) -> Procs {
        let mut by_base: HashMap<&'static str, Vec<Proc>> = HashMap::new();
        for p in rows {
            by_base.entry(base_of(p.name)).or_default().push(p);
        }
        for v in by_base.values_mut() {
            v.sort_by_key(|p| p.since);
        }
        Procs { by_base }
    }

    /// The export answering `symbol` at `version` (its per-thread variant where asked for and
    /// there is one): `(name, address)`.
    pub(crate) fn find(
        &self,
        symbol: &str,
        version: u32,
        per_thread: bool,
    ) -> Result<(&'static str, usize), Missing> {
        let rows = self.by_base.get(symbol).ok_or(Missing::Symbol)?;
        let Some(p) = rows
            .iter()
            .find(|p| p.since <= version && version < p.until)
        else {
            // Older than every variant here: newer than `version` if the oldest is the
            // unsuffixed first one (else an older variant exists that is not exported).
            let first = &rows[0];
            return Err(if version < first.since && first.name == symbol {
                Missing::Version
            } else {
                Missing::Symbol
            });
        };
        Ok(match p.per_thread {
            Some(pt) if per_thread => pt,
            _ => (p.name, p.addr),
        })
    }

    /// Every exported name in the table (per-thread variants included).
    #[cfg(test)]
    fn names(&self) -> Vec<&'static str> {
        self.by_base
            .values()
            .flatten()
            .flat_map(|p| std::iter::once(p.name).chain(p.per_thread.map(|(n, _)| n)))
            .collect()
    }
}

/// What both calls do: the address for `symbol`, written to `pfn` (NULL when not found), and
/// why nothing was found.
///
/// # Safety
/// `symbol` is null or NUL-terminated; `pfn` is null or valid for a write.
unsafe fn lookup(
    procs: &Procs,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cudaVersion: c_int,
    flags: cuuint64_t,
) -> CuResult<Result<(), Missing>> {
    non_null(pfn, "pfn")?;
    // SAFETY: non-null, valid for a write (the caller's contract); cleared first, so a failed
    // lookup leaves NULL, as CUDA does.
    unsafe { pfn.write(std::ptr::null_mut()) };
    non_null(symbol, "symbol")?;
    if flags & !(LEGACY_STREAM | PER_THREAD_DEFAULT_STREAM) != 0
        || flags == LEGACY_STREAM | PER_THREAD_DEFAULT_STREAM
    {
        return Err(invalid(format!(
            "flags {flags:#x}: give CU_GET_PROC_ADDRESS_DEFAULT, _LEGACY_STREAM or \
             _PER_THREAD_DEFAULT_STREAM"
        )));
    }
    let version = u32::try_from(cudaVersion)
        .map_err(|_| invalid(format!("cudaVersion {cudaVersion} is negative")))?;
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let name = unsafe { CStr::from_ptr(symbol) }.to_string_lossy();
    match procs.find(&name, version, flags == PER_THREAD_DEFAULT_STREAM) {
        Ok((_, addr)) => {
            // SAFETY: checked non-null above.
            unsafe { pfn.write(addr as *mut c_void) };
            Ok(Ok(()))
        }
        Err(m) => Ok(Err(m)),
    }
}

fn not_found(symbol: *const c_char, version: c_int, why: Missing) -> CuErr {
    // SAFETY: `lookup` checked `symbol` non-null; the caller's contract makes it NUL-terminated.
    let name = unsafe { CStr::from_ptr(symbol) }.to_string_lossy();
    CuErr::new(
        CUresult::CUDA_ERROR_NOT_FOUND,
        match why {
            Missing::Version => {
                format!("`{name}` appeared in a CUDA version after the requested {version}")
            }
            Missing::Symbol => format!(
                "the CPU driver exports no `{name}` for CUDA version {version} (it may not \
                 offer that variant, or that function)"
            ),
        },
    )
}

/// `cuGetProcAddress` (CUDA 11.3): as `_v2` without the status.
///
/// # Safety
/// `symbol` is null or NUL-terminated; `pfn` is null or valid for a write.
pub(crate) unsafe fn cuGetProcAddress(
    procs: &Procs,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cudaVersion: c_int,
    flags: cuuint64_t,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    match unsafe { lookup(procs, symbol, pfn, cudaVersion, flags)? } {
        Ok(()) => Ok(()),
        Err(why) => Err(not_found(symbol, cudaVersion, why)),
    }
}

/// `cuGetProcAddress_v2`: the address of `symbol`'s export for `cudaVersion`, and in
/// `symbolStatus` (optional) whether it was found.
///
/// # Safety
/// `symbol` is null or NUL-terminated; `pfn` is null or valid for a write; `symbolStatus` is
/// null or valid for a write.
pub(crate) unsafe fn cuGetProcAddress_v2(
    procs: &Procs,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    cudaVersion: c_int,
    flags: cuuint64_t,
    symbolStatus: *mut CUdriverProcAddressQueryResult,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    let found = unsafe { lookup(procs, symbol, pfn, cudaVersion, flags)? };
    let status = match found {
        Ok(()) => CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SUCCESS,
        Err(Missing::Symbol) => {
            CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
        }
        Err(Missing::Version) => {
            CUdriverProcAddressQueryResult::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
        }
    };
    if !symbolStatus.is_null() {
        // SAFETY: non-null, valid for a write (the caller's contract).
        unsafe { symbolStatus.write(status) };
    }
    found.map_err(|why| not_found(symbol, cudaVersion, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &'static str, since: u32, until: u32, pt: Option<&'static str>) -> Proc {
        Proc {
            name,
            since,
            until,
            addr: name.len() * 100 + since as usize,
            per_thread: pt.map(|n| (n, 1)),
        }
    }

    fn table() -> Procs {
        Procs::new(vec![
            row("cuMemAlloc_v2", 3020, u32::MAX, None),
            row("cuCtxCreate_v3", 11040, 12050, None),
            row("cuCtxCreate_v2", 3020, 11040, None),
            row("cuDeviceGetUuid", 9020, 11040, None),
            row("cuDeviceGetUuid_v2", 11040, u32::MAX, None),
            row(
                "cuLaunchKernel",
                4000,
                u32::MAX,
                Some("cuLaunchKernel_ptsz"),
            ),
        ])
    }

    #[test]
    fn the_version_picks_the_variant_and_unoffered_ones_are_not_found() {
        let t = table();
        assert_eq!(
            t.find("cuMemAlloc", 12000, false).unwrap().0,
            "cuMemAlloc_v2"
        );
        assert_eq!(
            t.find("cuMemAlloc", 3020, false).unwrap().0,
            "cuMemAlloc_v2"
        );
        // cuMemAlloc (v1, CUDA 2.0) is not exported: not found, not the v2 ABI.
        assert_eq!(t.find("cuMemAlloc", 2000, false), Err(Missing::Symbol));
        assert_eq!(
            t.find("cuCtxCreate", 3020, false).unwrap().0,
            "cuCtxCreate_v2"
        );
        assert_eq!(
            t.find("cuCtxCreate", 11040, false).unwrap().0,
            "cuCtxCreate_v3"
        );
        assert_eq!(
            t.find("cuCtxCreate", 12040, false).unwrap().0,
            "cuCtxCreate_v3"
        );
        assert_eq!(t.find("cuCtxCreate", 12050, false), Err(Missing::Symbol));
        assert_eq!(
            t.find("cuDeviceGetUuid", 9020, false).unwrap().0,
            "cuDeviceGetUuid"
        );
        assert_eq!(
            t.find("cuDeviceGetUuid", 12000, false).unwrap().0,
            "cuDeviceGetUuid_v2"
        );
        assert_eq!(
            t.find("cuDeviceGetUuid", 9000, false),
            Err(Missing::Version)
        );
        assert_eq!(t.find("cuMemAlloc_v2", 12000, false), Err(Missing::Symbol));
        assert_eq!(t.find("cuNoSuchThing", 12000, false), Err(Missing::Symbol));
    }

    #[test]
    fn per_thread_variants_are_given_only_when_asked_for() {
        let t = table();
        assert_eq!(
            t.find("cuLaunchKernel", 12000, false).unwrap().0,
            "cuLaunchKernel"
        );
        assert_eq!(
            t.find("cuLaunchKernel", 12000, true).unwrap().0,
            "cuLaunchKernel_ptsz"
        );
        assert_eq!(
            t.find("cuMemAlloc", 12000, true).unwrap().0,
            "cuMemAlloc_v2"
        );
    }

    #[test]
    fn the_real_table_is_consistent() {
        let t = crate::shells::procs();
        let mut names = t.names();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "an export listed twice");
        for rows in t.by_base.values() {
            for w in rows.windows(2) {
                assert!(
                    w[0].until <= w[1].since,
                    "{} and {} answer for overlapping versions",
                    w[0].name,
                    w[1].name
                );
            }
            for p in rows {
                assert!(p.since < p.until && p.since >= 2000, "{}", p.name);
            }
        }
        assert_eq!(
            t.find("cuGetProcAddress", 12000, false).unwrap().0,
            "cuGetProcAddress_v2"
        );
        let newest = t.by_base.values().flatten().map(|p| p.since).max();
        assert_eq!(
            newest,
            Some(crate::driver::DRIVER_VERSION as u32),
            "cuDriverGetVersion must report the newest CUDA version of the exports"
        );
        assert_eq!(
            t.find("cuMemcpyHtoD", 12000, true).unwrap().0,
            "cuMemcpyHtoD_v2_ptds"
        );
    }
}
