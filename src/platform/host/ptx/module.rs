//! Loaded PTX modules and the per-executor cache of them. The executor's device state holds the
//! cache; the engine fills it (`load_module` in `mod.rs`).

use std::sync::Arc;

use parking_lot::Mutex;

use crate::platform::host::memory::{AllocTable, Pinned};
use crate::ptx::PtxEntry;
use crate::ptx::ir::DecodedModule;
use crate::types::DeviceAddress;

/// A loaded module: decoded programs and the device memory of its module-scope data.
pub(crate) struct LoadedModule {
    pub(super) text: Arc<str>,
    pub(super) decoded: DecodedModule,
    pub(super) entries: Vec<PtxEntry>,
    pub(super) data: Option<(DeviceAddress, Pinned)>,
    /// Module-scope variables: name → (offset in `data`, bytes).
    pub(super) symbols: std::collections::HashMap<String, (u64, u64)>,
    pub(super) table: Arc<AllocTable>,
    /// Kernels the JIT compiled (or refused, with why), by entry name.
    pub(super) jit: Mutex<std::collections::HashMap<String, JitOutcome>>,
}

/// A kernel compiled by the JIT, or why the JIT left it to the interpreter.
pub(super) type JitOutcome = Result<Arc<super::jit::JitKernel>, super::jit::Unsupported>;

impl Drop for LoadedModule {
    fn drop(&mut self) {
        if let Some((addr, _)) = &self.data {
            self.table.free(*addr);
        }
    }
}

/// Per-executor cache of loaded modules, by text.
#[derive(Default)]
pub(crate) struct ModuleCache {
    pub(super) modules: Mutex<Vec<Arc<LoadedModule>>>,
}
