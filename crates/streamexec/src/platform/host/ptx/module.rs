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
    /// What the JIT made of each entry it was asked for (the compiled kernel or why it was
    /// refused), by entry name. Type-erased so that this file does not depend on the JIT,
    /// which depends on the launch types of `mod.rs`.
    pub(super) jit: Mutex<std::collections::HashMap<String, Arc<dyn std::any::Any + Send + Sync>>>,
}

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
