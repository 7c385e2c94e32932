//! The host platform's PTX adapter: PTX loaded through a spec's `add_cuda_ptx_*` image runs on
//! the CPU on the engines of `streamexec-ptx` (`crate::ptx`), against this executor's
//! allocation table and on its pool.
//!
//! What is the host platform's here: the per-executor module cache (by text, in the device
//! state), the launch's
//! arguments (`PackedArg` views: pointers pinned through the executor, which names a stale
//! pointer's argument), the limits and switches of the executor (shared memory per block,
//! `set_ptx_engine`, `set_race_check`), and the engine's errors as this crate's. The host
//! platform runs a spec's PTX only when the spec has no native `HostKernel`.

use std::sync::Arc;

use super::HostExecutor;
use crate::error::{Error, Result};
use crate::interface::{KernelInterface, ParamCount};
use crate::platform::ptx_signature::{check_signature, kernel_load_error, param_count};
use crate::platform::work_queue::RunFn;
use crate::ptx::{Arg, LaunchConfig, Module};
use crate::types::{ArgView, DeviceAddress, LaunchDims, PackedArg, ParamKind};
use crate::types::{KernelImage, MultiKernelLoaderSpec};

/// A kernel of a loaded PTX module.
pub(crate) struct PtxKernel {
    kernel: crate::ptx::Kernel,
}

impl KernelInterface for PtxKernel {
    fn name(&self) -> &str {
        self.kernel.name()
    }
    fn param_count(&self) -> Option<ParamCount> {
        self.kernel.entry().map(param_count)
    }
    fn verify_signature(&self, expected: &[ParamKind]) -> Result<()> {
        match self.kernel.entry() {
            Some(e) => check_signature(e, expected),
            None => Ok(()),
        }
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn module_global(&self, name: &str) -> Option<(DeviceAddress, u64)> {
        let (addr, bytes) = self.kernel.module().global(name)?;
        Some((DeviceAddress::new(addr), bytes))
    }
    fn rpc_client_symbol(&self) -> Option<(DeviceAddress, usize)> {
        // A module built against LLVM's GPU libc: the executor writes its server's client
        // image here (the module's data lives, and stays pinned, as long as the module).
        self.module_global(crate::rpc::CLIENT_SYMBOL)
            .map(|(addr, bytes)| (addr, bytes as usize))
    }
}

/// The engine's error for `kernel` as this crate's.
fn engine_error(exec: &HostExecutor, kernel: &str, e: crate::ptx::Error) -> Error {
    match e {
        crate::ptx::Error::Ptx(e) => kernel_load_error("host", kernel, e),
        crate::ptx::Error::OutOfMemory { bytes } => super::status::out_of_memory(
            exec.description.ordinal,
            bytes,
            "the system allocator refused",
        ),
        other => other.into(),
    }
}

fn load_module(exec: &HostExecutor, text: &str, kernel: &str) -> Result<Arc<Module>> {
    let mut cache = exec.ptx_modules.lock();
    if let Some(m) = cache.iter().find(|m| m.text() == text) {
        return Ok(m.clone());
    }
    let m = Module::load(text, &exec.table).map_err(|e| engine_error(exec, kernel, e))?;
    cache.push(m.clone());
    Ok(m)
}

/// Loads `img`'s entry as a host-platform PTX kernel.
pub(crate) fn load(
    exec: &HostExecutor,
    spec: &MultiKernelLoaderSpec,
    img: &KernelImage,
) -> Result<Arc<dyn KernelInterface>> {
    let name = &img.kernel_name;
    let text = img.source.text().map_err(|e| Error::KernelLoad {
        platform: "host",
        kernel: name.clone(),
        detail: format!(
            "cannot read the PTX image ({}); the spec holds: {}; add a readable PTX image or a \
             native Rust kernel (add_host_kernel)",
            crate::error::with_sources(&e),
            spec.describe()
        ),
    })?;
    let module = load_module(exec, &text, name)?;
    let kernel = module
        .kernel(name)
        .map_err(|e| engine_error(exec, name, e))?;
    Ok(Arc::new(PtxKernel { kernel }))
}

/// Checks and packs a launch of `k`; the returned closure runs it on the executor's pool.
pub(crate) fn prepare(
    exec: &HostExecutor,
    k: &PtxKernel,
    dims: &LaunchDims,
    args: &[PackedArg],
) -> Result<RunFn> {
    let name = k.kernel.name();
    let mut engine_args = Vec::with_capacity(args.len());
    for (i, a) in args.iter().enumerate() {
        engine_args.push(match a.view() {
            ArgView::Scalar(bytes) => Arg::Scalar(bytes),
            ArgView::Pointer { addr, bytes } => Arg::Pointer(exec.pin_arg(addr, bytes, name, i)?),
            ArgView::SharedMemory { bytes, .. } => Arg::SharedMemory(bytes),
        });
    }
    let config = LaunchConfig {
        grid: dims.blocks.0,
        block: dims.threads.0,
        engine: exec.ptx_engine(),
        race_check: exec.race_check(),
        shared_memory_limit: exec.description.shared_memory_per_block,
        cooperative: dims.cooperative,
    };
    let prepared = k
        .kernel
        .prepare(&config, &engine_args)
        .map_err(|e| engine_error(exec, name, e))?;
    let prepared = prepared.with_services(exec.ptx_services.clone());
    let pool = exec.pool.clone();
    Ok(Box::new(move || Ok(prepared.run(&pool)?)))
}
