//! `cuInit` and what it sets up: the configuration and the host executor behind every device.
//!
//! Every CUDA device of this library is backed by the one host-platform executor of the
//! process (all device memory is host memory with unified addressing), so peer copies and
//! kernels reaching a peer's memory work as on GPUs with peer access. Configuration, read once
//! by `cuInit`:
//! - `STREAMEXEC_CUDA_DEVICES=N`: expose N devices (default 1, at most 64);
//! - `STREAMEXEC_CUDA_CC=M.m`: the compute capability devices report (default 7.0). PTX whose
//!   `.target` is above it is refused at load, as the JIT does;
//! - `STREAMEXEC_CUDA_MEMCHECK=1`: every out-of-bounds byte a kernel touches is a fault (as
//!   compute-sanitizer's memcheck reports it). Without it an allocation is a whole number of
//!   256-byte granules of real memory, so a kernel that reads or writes a few bytes past a
//!   small buffer behaves as on a GPU; past the granule is a fault in both modes.
//!
//! The objects made later live in their families' own tables (`context`, `stream`, `event`,
//! `module`, `memory`, `graph`); nothing here knows them.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::OnceLock;

use cudarc::driver::sys::{CUresult, CUuuid};
use streamexec::{PlatformManager, StreamExecutor};

use crate::entry::{CuErr, CuResult, invalid, non_null, put};

/// The driver API version this library reports (`cuDriverGetVersion`): CUDA 12.5, the newest
/// version any of its exports belongs to (`cuKernelGetLibrary`; a test checks it against the
/// declaration list). Entry points of 12.5 and before that it does not export are
/// `CUDA_ERROR_NOT_FOUND` from `cuGetProcAddress`, or refused with `CUDA_ERROR_NOT_SUPPORTED`.
pub(crate) const DRIVER_VERSION: i32 = 12050;

/// Everything `cuInit` sets up.
pub(crate) struct Driver {
    /// The host-platform executor behind every device.
    pub(crate) exec: StreamExecutor,
    /// Number of devices.
    pub(crate) device_count: usize,
    /// The compute capability every device reports.
    pub(crate) cc: (u32, u32),
    /// `STREAMEXEC_CUDA_MEMCHECK=1`: allocations are exactly the size asked for, so the engine
    /// reports every out-of-bounds byte (compute-sanitizer's memcheck); otherwise they are
    /// whole granules, and accesses in the slack behave as on a GPU.
    pub(crate) memcheck: bool,
}

/// The allocation granule of device memory: `cuMemAlloc` sizes are rounded up to it (real
/// memory, which kernels may read and write as on hardware) unless memcheck is on.
pub(crate) const GRANULE: usize = 256;

impl Driver {
    /// The bytes an allocation of `bytes` really gets: rounded up to [`GRANULE`], or exactly
    /// `bytes` in memcheck mode. `None` on overflow.
    pub(crate) fn backing_bytes(&self, bytes: usize) -> Option<usize> {
        if self.memcheck {
            Some(bytes)
        } else {
            bytes.checked_next_multiple_of(GRANULE)
        }
    }
}

static DRIVER: OnceLock<Driver> = OnceLock::new();

/// The driver, once `cuInit` succeeded; else `CUDA_ERROR_NOT_INITIALIZED`.
pub(crate) fn driver() -> CuResult<&'static Driver> {
    DRIVER.get().ok_or_else(|| {
        CuErr::new(
            CUresult::CUDA_ERROR_NOT_INITIALIZED,
            "cuInit(0) must succeed before any other driver call",
        )
    })
}

fn parse_config() -> CuResult<(usize, (u32, u32))> {
    let devices = match std::env::var("STREAMEXEC_CUDA_DEVICES") {
        Err(_) => 1,
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(0) => {
                return Err(CuErr::new(
                    CUresult::CUDA_ERROR_NO_DEVICE,
                    "STREAMEXEC_CUDA_DEVICES=0 exposes no device",
                ));
            }
            Ok(n) if n <= 64 => n,
            _ => {
                return Err(invalid(format!(
                    "STREAMEXEC_CUDA_DEVICES={v:?}: give a device count from 1 to 64"
                )));
            }
        },
    };
    let cc = match std::env::var("STREAMEXEC_CUDA_CC") {
        Err(_) => (7, 0),
        Ok(v) => {
            let parsed = v
                .trim()
                .split_once('.')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
            match parsed {
                Some((major, minor)) if (3..=12).contains(&major) && minor <= 9 => (major, minor),
                _ => {
                    return Err(invalid(format!(
                        "STREAMEXEC_CUDA_CC={v:?}: give a compute capability such as 7.0 or 8.6"
                    )));
                }
            }
        }
    };
    Ok((devices, cc))
}

/// `cuInit`: reads the configuration and opens the host platform; `Flags` must be 0.
pub(crate) fn cuInit(Flags: c_uint) -> CuResult<()> {
    if Flags != 0 {
        return Err(invalid(format!("Flags must be 0, got {Flags}")));
    }
    if DRIVER.get().is_some() {
        return Ok(());
    }
    let (device_count, cc) = parse_config()?;
    let exec = PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .map_err(|e| {
            CuErr::new(
                CUresult::CUDA_ERROR_NO_DEVICE,
                format!("the host platform did not open: {e}"),
            )
        })?;
    let memcheck =
        std::env::var("STREAMEXEC_CUDA_MEMCHECK").is_ok_and(|v| !v.is_empty() && v != "0");
    // Kernels' printf text waits in a buffer until a synchronisation point, as on CUDA.
    if let Ok(s) = exec.ptx_services() {
        s.set_printf_output(streamexec::PrintfOutput::Buffered);
    }
    let _ = DRIVER.set(Driver {
        exec,
        device_count,
        cc,
        memcheck,
    });
    crate::entry::note_forks();
    Ok(())
}

/// Writes the kernels' buffered `printf` text to stdout: at every synchronisation point
/// (context, stream and event synchronisation, synchronous copies, a failed launch's report,
/// module unload), as CUDA's driver does. One buffer for the library (its devices share one
/// executor), so any context's synchronisation flushes every context's text, in call order.
pub(crate) fn flush_printf() {
    if let Ok(d) = driver()
        && let Ok(s) = d.exec.ptx_services()
    {
        s.flush_printf();
    }
}

/// `cuDriverGetVersion` (allowed before `cuInit`).
///
/// # Safety
/// `driverVersion` is null or valid for a write.
pub(crate) unsafe fn cuDriverGetVersion(driverVersion: *mut c_int) -> CuResult<()> {
    // SAFETY: the caller's out-pointer.
    unsafe { put(driverVersion, DRIVER_VERSION, "driverVersion") }
}

/// `cuProfilerStart`: nothing to profile; succeeds, as with no profiler attached.
pub(crate) fn cuProfilerStart() -> CuResult<()> {
    Ok(())
}

/// `cuProfilerStop`: as `cuProfilerStart`.
pub(crate) fn cuProfilerStop() -> CuResult<()> {
    Ok(())
}

/// `cuGetExportTable`: NVIDIA's private interfaces between its driver and its runtime and
/// libraries (NVRTC asks for one) are not offered: `CUDA_ERROR_NOT_SUPPORTED`, with the table
/// pointer set to NULL, so a caller that checks the result falls back and one that does not
/// fails on NULL rather than on a stale value.
///
/// # Safety
/// `ppExportTable` is null or valid for a write; `pExportTableId` is null or valid for a read.
pub(crate) unsafe fn cuGetExportTable(
    ppExportTable: *mut *const c_void,
    pExportTableId: *const CUuuid,
) -> CuResult<()> {
    // SAFETY: the caller's out-pointer.
    unsafe { put(ppExportTable, std::ptr::null(), "ppExportTable")? };
    non_null(pExportTableId, "pExportTableId")?;
    // SAFETY: non-null, valid for a read (the caller's contract).
    let id = unsafe { pExportTableId.read() };
    let hex: String = id
        .bytes
        .iter()
        .map(|b| format!("{:02x}", *b as u8))
        .collect();
    Err(CuErr::new(
        CUresult::CUDA_ERROR_NOT_SUPPORTED,
        format!(
            "export table {hex}: NVIDIA's private driver interfaces are not offered by the CPU \
             driver"
        ),
    ))
}
