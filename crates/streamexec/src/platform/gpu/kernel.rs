//! Kernels on a CUDA-like driver: a function of a cached module, with the PTX entry's
//! parameter list when the image was PTX (cubin and HSACO carry none we read).

use std::any::Any;
use std::sync::Arc;

use super::{Driver, RawFunction, RawModule};
use crate::error::Result;
use crate::interface::{KernelInterface, ParamCount};
use crate::platform::ptx_signature::{check_signature, param_count};
use crate::ptx::PtxEntry;
use crate::types::{DeviceAddress, ParamKind};

/// A loaded module; unloaded by its executor when the executor drops (after the device is
/// idle), so launches never outlive it.
pub(crate) struct GpuModule {
    pub(crate) raw: RawModule,
    /// `.entry` declarations when the image was PTX.
    pub(crate) entries: Option<Vec<PtxEntry>>,
    /// Address and size of its `__llvm_rpc_client` global, when it defines one.
    pub(crate) rpc_client: Option<(u64, usize)>,
}

/// A kernel of device `D`.
pub(crate) struct GpuKernel<D: Driver> {
    name: String,
    function: RawFunction,
    entry: Option<PtxEntry>,
    /// Keeps the module (and through it the executor's cache entry) for this kernel's life.
    _module: Arc<GpuModule>,
    _driver: std::marker::PhantomData<fn() -> D>,
}

impl<D: Driver> GpuKernel<D> {
    pub(crate) fn new(name: &str, function: RawFunction, module: Arc<GpuModule>) -> Self {
        let entry = module
            .entries
            .as_ref()
            .and_then(|es| es.iter().find(|e| e.name == name).cloned());
        GpuKernel {
            name: name.to_string(),
            function,
            entry,
            _module: module,
            _driver: std::marker::PhantomData,
        }
    }

    pub(crate) fn function(&self) -> RawFunction {
        self.function
    }
}

impl<D: Driver> KernelInterface for GpuKernel<D> {
    fn name(&self) -> &str {
        &self.name
    }

    fn param_count(&self) -> Option<ParamCount> {
        self.entry.as_ref().map(param_count)
    }

    fn verify_signature(&self, expected: &[ParamKind]) -> Result<()> {
        match &self.entry {
            Some(entry) => check_signature(entry, expected),
            None => Ok(()),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn rpc_client_symbol(&self) -> Option<(DeviceAddress, usize)> {
        self._module
            .rpc_client
            .map(|(a, n)| (DeviceAddress::new(a), n))
    }
}
