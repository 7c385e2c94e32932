//! `cuInit` and what it sets up: the configuration, the devices, and the handle tables.
//!
//! Every CUDA device of this library is backed by the one host-platform executor of the
//! process (all device memory is host memory with unified addressing), so peer copies and
//! kernels reaching a peer's memory work as on GPUs with peer access. Configuration, read once
//! by `cuInit`:
//! - `STREAMEXEC_CUDA_DEVICES=N`: expose N devices (default 1, at most 64);
//! - `STREAMEXEC_CUDA_CC=M.m`: the compute capability devices report (default 7.0). PTX whose
//!   `.target` is above it is refused at load, as the JIT does.

use std::sync::OnceLock;

use cudarc::driver::sys::CUresult;
use parking_lot::Mutex;
use streamexec::{PlatformManager, StreamExecutor};

use crate::context::{Context, Primary};
use crate::entry::{CuErr, CuResult, call, invalid};
use crate::event::CuEvent;
use crate::graph::{Exec, Graph, Node};
use crate::handles::Table;
use crate::module::{Function, Module};
use crate::stream::CuStream;

/// The driver API version this library implements (`cuDriverGetVersion`): CUDA 12.0.
pub(crate) const DRIVER_VERSION: i32 = 12000;

/// Everything `cuInit` sets up.
pub(crate) struct Driver {
    /// The host-platform executor behind every device.
    pub(crate) exec: StreamExecutor,
    /// Number of devices.
    pub(crate) device_count: usize,
    /// The compute capability every device reports.
    pub(crate) cc: (u32, u32),
    /// Primary context state per device.
    pub(crate) primary: Vec<Mutex<Primary>>,
    pub(crate) contexts: Table<Context>,
    pub(crate) streams: Table<CuStream>,
    pub(crate) events: Table<CuEvent>,
    pub(crate) modules: Table<Module>,
    pub(crate) functions: Table<Function>,
    pub(crate) graphs: Table<Graph>,
    pub(crate) nodes: Table<Node>,
    pub(crate) execs: Table<Exec>,
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

fn init() -> CuResult<()> {
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
    let _ = DRIVER.set(Driver {
        exec,
        device_count,
        cc,
        primary: (0..device_count)
            .map(|_| Mutex::new(Primary::default()))
            .collect(),
        contexts: Table::new(0x1000_0000),
        streams: Table::new(0x2000_0000),
        events: Table::new(0x3000_0000),
        modules: Table::new(0x4000_0000),
        functions: Table::new(0x5000_0000),
        graphs: Table::new(0x6000_0000),
        nodes: Table::new(0x7000_0000),
        execs: Table::new(0x8000_0000),
    });
    Ok(())
}

/// `cuInit`: reads the configuration and opens the host platform; `Flags` must be 0.
#[unsafe(no_mangle)]
pub extern "C" fn cuInit(Flags: std::ffi::c_uint) -> CUresult {
    call("cuInit", || {
        if Flags != 0 {
            return Err(invalid(format!("Flags must be 0, got {Flags}")));
        }
        init()
    })
}

/// `cuDriverGetVersion` (allowed before `cuInit`).
///
/// # Safety
/// `driverVersion` is null or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(driverVersion: *mut std::ffi::c_int) -> CUresult {
    // SAFETY: the caller's out-pointer.
    call("cuDriverGetVersion", || unsafe {
        crate::entry::put(driverVersion, DRIVER_VERSION, "driverVersion")
    })
}
