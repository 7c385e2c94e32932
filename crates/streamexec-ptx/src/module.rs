//! Loaded modules: a PTX text parsed, its `.global`/`.const` data placed in device memory, and
//! every `.entry` decoded, with what the JIT made of each entry it was asked for; and their
//! kernels.

use std::collections::HashMap;
use std::sync::Arc;

use crate::device_bytes;
use crate::error::{Error, Result};
use crate::ir::{DecodedModule, Program};
use crate::memory::{AllocTable, Pinned};
use crate::{PtxEntry, decode_module, module_data, parse_entries, parse_module};

/// What the JIT made of an entry: the compiled kernel, or why it left it to the interpreter.
#[cfg(feature = "jit")]
pub(crate) type JitOutcome = std::result::Result<Arc<crate::jit::JitKernel>, String>;

/// A loaded module: decoded programs and the device memory of its module-scope data, which
/// stays allocated (and pinned) while the module lives.
pub struct Module {
    text: Arc<str>,
    pub(crate) decoded: DecodedModule,
    entries: Vec<PtxEntry>,
    data: Option<(u64, Pinned)>,
    /// Module-scope variables: name → (offset in `data`, bytes).
    symbols: HashMap<String, (u64, u64)>,
    table: Arc<AllocTable>,
    /// What the JIT made of each entry it was asked for, by entry name.
    #[cfg(feature = "jit")]
    pub(crate) jit: parking_lot::Mutex<HashMap<String, JitOutcome>>,
}

impl Module {
    /// Parses `text`, lays out its `.global`/`.const` data in an allocation of `memory`
    /// (relocating address initialisers), and decodes every `.entry`. What the engines do not
    /// run is refused here, naming the line, never at launch.
    pub fn load(text: &str, memory: &Arc<AllocTable>) -> Result<Arc<Module>> {
        let ast = parse_module(text)?;
        let data = module_data(&ast)?;
        let placed = if data.image.is_empty() {
            None
        } else {
            let bytes = data.image.len() as u64;
            let addr = memory.allocate(bytes).ok_or(Error::OutOfMemory { bytes })?;
            let pinned = memory
                .resolve(addr, bytes)
                .ok_or(Error::OutOfMemory { bytes })?;
            let mut image = data.image.clone();
            for &at in &data.relocs {
                let v = u64::from_le_bytes(image[at..at + 8].try_into().unwrap_or([0; 8])); // ok: 8 bytes
                image[at..at + 8].copy_from_slice(&v.wrapping_add(addr).to_le_bytes());
            }
            // SAFETY: pinned for `bytes` bytes of live device memory.
            unsafe { device_bytes::store_bytes(pinned.as_ptr(), &image) };
            Some((addr, pinned))
        };
        let base = placed.as_ref().map_or(0, |(a, _)| *a);
        let decoded = match decode_module(&ast, &data, base) {
            Ok(d) => d,
            Err(e) => {
                if let Some((a, _)) = &placed {
                    memory.free(*a);
                }
                return Err(e.into());
            }
        };
        Ok(Arc::new(Module {
            text: text.into(),
            decoded,
            entries: parse_entries(text).unwrap_or_default(),
            symbols: data
                .symbols
                .iter()
                .map(|(n, &off)| (n.clone(), (off, data.sizes.get(n).copied().unwrap_or(0))))
                .collect(),
            data: placed,
            table: memory.clone(),
            #[cfg(feature = "jit")]
            jit: Default::default(),
        }))
    }

    /// The text it was loaded from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The `.entry` parameter lists of the module.
    pub fn entries(&self) -> &[PtxEntry] {
        &self.entries
    }

    /// Module-scope variable `name` (`.global`/`.const`): its device address and size.
    pub fn global(&self, name: &str) -> Option<(u64, u64)> {
        let (base, _) = self.data.as_ref()?;
        let &(off, bytes) = self.symbols.get(name)?;
        Some((base + off, bytes))
    }

    /// The memory the module's data and its kernels' pointers live in.
    pub(crate) fn table(&self) -> &Arc<AllocTable> {
        &self.table
    }

    /// The pinned range of the module's data, if it has any: a launch holds it.
    pub(crate) fn data_pin(&self) -> Option<&Pinned> {
        self.data.as_ref().map(|(_, p)| p)
    }

    /// Entry `name` as a kernel.
    pub fn kernel(self: &Arc<Self>, name: &str) -> Result<Kernel> {
        let Some(prog) = self.decoded.programs.get(name).cloned() else {
            let mut have: Vec<String> = self.decoded.programs.keys().cloned().collect();
            have.sort_unstable();
            return Err(Error::NoEntry {
                kernel: name.to_string(),
                have,
            });
        };
        Ok(Kernel {
            name: name.to_string(),
            module: self.clone(),
            prog,
            entry: self.entries.iter().find(|e| e.name == name).cloned(),
        })
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if let Some((addr, _)) = &self.data {
            self.table.free(*addr);
        }
    }
}

/// An entry of a loaded module, ready to launch ([`Kernel::launch`], [`Kernel::prepare`]).
/// Holds its module (and so the module's data) alive.
#[derive(Clone)]
pub struct Kernel {
    pub(crate) name: String,
    pub(crate) module: Arc<Module>,
    pub(crate) prog: Arc<Program>,
    entry: Option<PtxEntry>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Kernel {
    /// The entry's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The module it belongs to.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// The entry's parameter list as the PTX declares it (for signature checks).
    pub fn entry(&self) -> Option<&PtxEntry> {
        self.entry.as_ref()
    }

    /// Bytes of `.shared` memory the kernel declares statically.
    pub fn static_shared_bytes(&self) -> u64 {
        self.prog.static_shared_bytes as u64
    }

    /// The most threads a block of this kernel may have by its launch bounds (`.maxntid`'s
    /// product, or `.reqntid`'s), if it declares any: what CUDA reports as
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK` (capped there by the device's limit).
    pub fn max_threads_per_block(&self) -> Option<u64> {
        let b = &self.prog.bounds;
        let count = |d: [u32; 3]| d.iter().map(|&v| v as u64).product::<u64>();
        match (b.maxntid.map(count), b.reqntid.map(count)) {
            (Some(m), Some(r)) => Some(m.min(r)),
            (m, r) => m.or(r),
        }
    }

    /// The block shape `.reqntid` requires, if the entry declares one.
    pub fn required_block(&self) -> Option<crate::Dim3> {
        self.prog
            .bounds
            .reqntid
            .map(|d| crate::Dim3::new(d[0], d[1], d[2]))
    }
}
