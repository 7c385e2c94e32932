//! The host device's state: what the executor, its streams, BLAS/RNG and the PTX engine share.
//!
//! It lives apart from `executor.rs` (the `StreamExecutorInterface` impl, which creates
//! streams) so that streams and the other users depend on the state, not on the executor that
//! creates them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use super::status::{self, PLATFORM};
use crate::error::Result;
use crate::platform::work_queue::{StreamSet, WorkQueue};
use crate::ptx::memory::{self, AllocTable};
use crate::types::{
    DeviceAddress, DeviceDescription, PluginConfig, PluginFamily, PluginStatus, decide,
    refuse_vendor,
};

/// The host platform's canned families: BLAS (the `gemm` crate and loops, blas.rs) and Philox
/// (rng.rs) are built in, with no vendor alternative; FFT (rustfft) and DNN (im2col + gemm)
/// are built in too and report through `served_by_default`.
fn decide_plugins(config: &PluginConfig) -> Result<Vec<PluginStatus>> {
    refuse_vendor(PLATFORM, config, &[PluginFamily::Fft, PluginFamily::Dnn])?;
    let blas = decide(
        PLATFORM,
        PluginFamily::Blas,
        config.get(PluginFamily::Blas),
        Err(Some(
            "the host platform has no vendor BLAS (its BLAS is the gemm crate, built in)".into(),
        )),
        Some("gemm crate"),
    )?;
    let rng = decide(
        PLATFORM,
        PluginFamily::Rng,
        config.get(PluginFamily::Rng),
        Err(None),
        Some("built-in Philox"),
    )?;
    Ok(vec![blas.1, rng.1])
}

/// The host device.
pub(crate) struct HostExecutor {
    pub(super) description: DeviceDescription,
    pub(super) table: Arc<AllocTable>,
    pub(super) pool: Arc<rayon::ThreadPool>,
    pub(super) streams: StreamSet<WorkQueue>,
    pub(super) me: Weak<HostExecutor>,
    pub(super) next_stream: AtomicU64,
    /// PTX modules loaded by this executor, by text (a module is decoded once per executor).
    pub(super) ptx_modules: parking_lot::Mutex<Vec<Arc<crate::ptx::Module>>>,
    /// `set_race_check`: PTX launches record accesses and report data races.
    pub(super) race_check: AtomicBool,
    /// `set_ptx_engine` (initially `STREAMEXEC_PTX_ENGINE`, else `Auto`).
    pub(super) ptx_engine: parking_lot::Mutex<crate::types::PtxEngine>,
    /// What PTX kernels' `vprintf`, `malloc` and `free` calls reach.
    pub(super) ptx_services: Arc<crate::types::PtxServices>,
    /// What serves each canned family (decided from the executor's `PluginConfig`).
    pub(super) plugins: Vec<PluginStatus>,
}

impl HostExecutor {
    pub(super) fn new(description: DeviceDescription, config: &PluginConfig) -> Result<Arc<Self>> {
        let plugins = decide_plugins(config)?;
        let ordinal = description.ordinal;
        let ptx_engine = crate::types::PtxEngine::from_env()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(description.compute_units as usize)
            .thread_name(move |i| format!("streamexec-{PLATFORM}{ordinal}-block-{i}"))
            .build()
            .map_err(status::pool_failed)?;
        let table = Arc::new(AllocTable::default());
        Ok(Arc::new_cyclic(|me| HostExecutor {
            description,
            ptx_services: Arc::new(crate::types::PtxServices::new(table.clone())),
            table,
            pool: Arc::new(pool),
            streams: StreamSet::default(),
            me: me.clone(),
            next_stream: AtomicU64::new(0),
            ptx_modules: Default::default(),
            race_check: AtomicBool::new(false),
            ptx_engine: parking_lot::Mutex::new(ptx_engine),
            plugins,
        }))
    }

    /// `bytes` of device memory (`OutOfMemory` when the system allocator refuses).
    pub(super) fn allocate_bytes(&self, bytes: u64) -> Result<DeviceAddress> {
        self.table
            .allocate(bytes)
            .map(DeviceAddress::new)
            .ok_or_else(|| {
                status::out_of_memory(
                    self.description.ordinal,
                    bytes,
                    "the system allocator refused",
                )
            })
    }

    /// Whether PTX launches run the data-race checker.
    pub(crate) fn race_check(&self) -> bool {
        self.race_check.load(Ordering::Relaxed)
    }

    /// The engine PTX launches use.
    pub(crate) fn ptx_engine(&self) -> crate::types::PtxEngine {
        *self.ptx_engine.lock()
    }

    /// Pins `[addr, addr + bytes)` for an operation, or says why it is not live memory.
    pub(crate) fn pin(
        &self,
        addr: DeviceAddress,
        bytes: u64,
        what: &str,
    ) -> Result<memory::Pinned> {
        self.table
            .resolve(addr.raw(), bytes)
            .ok_or_else(|| status::not_live(addr, bytes, what))
    }

    /// As [`pin`](Self::pin), for pointer argument `i` of a launch of `kernel` (the message is
    /// only built on failure: this runs per pointer per launch).
    pub(crate) fn pin_arg(
        &self,
        addr: DeviceAddress,
        bytes: u64,
        kernel: &str,
        i: usize,
    ) -> Result<memory::Pinned> {
        self.table.resolve(addr.raw(), bytes).ok_or_else(|| {
            status::not_live(
                addr,
                bytes,
                &format!("then_launch of `{kernel}` (argument {i})"),
            )
        })
    }
}
