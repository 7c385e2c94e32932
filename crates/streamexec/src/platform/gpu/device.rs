//! The device state the shared backend's executor and streams both reach: `GpuExecutor<D>`
//! (allocations parked behind per-stream fences, the module cache, the registry of live
//! streams) and `StreamShared<D>` (a stream's driver stream, error slot and submitter). They
//! are one file because each refers to the other: a free records a fence on every live stream,
//! and a stream (with the work queued on it) keeps its executor alive. `executor.rs` and
//! `stream.rs` hold the interface impls on top.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::event::GpuEvent;
use super::kernel::GpuModule;
use super::status::out_of_memory;
use super::{Driver, RawModule, RawStream};
use crate::error::{Error, Result};
use crate::interface::KernelInterface;
use crate::platform::work_queue::{StreamSet, Submitter};
use crate::ptx::parse_entries;
use crate::types::{
    DeviceAddress, DeviceDescription, MultiKernelLoaderSpec, PluginConfig, PluginFamily,
    PluginStatus, Served, decide, refuse_vendor,
};

/// What a device address was allocated as.
#[derive(Clone, Copy, Debug)]
pub(super) enum Allocation {
    Device,
    /// Mapped page-locked host memory, with its host address.
    Mapped(usize),
}

/// An allocation freed by the user, waiting for the work queued before the free.
struct Parked<D: Driver> {
    ptr: u64,
    kind: Allocation,
    fences: Vec<(Arc<GpuEvent<D>>, u64)>,
}

/// One device.
pub(crate) struct GpuExecutor<D: Driver> {
    pub(super) drv: Arc<D>,
    pub(super) description: DeviceDescription,
    pub(super) streams: StreamSet<StreamShared<D>>,
    pub(super) modules: Mutex<HashMap<Vec<u8>, Arc<GpuModule>>>,
    pub(super) allocs: Mutex<HashMap<u64, Allocation>>,
    parked: Mutex<Vec<Parked<D>>>,
    /// Built-in kernels (Philox fills, rng.rs), by name.
    pub(super) builtins: Mutex<HashMap<&'static str, Arc<dyn KernelInterface>>>,
    /// Backs `Event::ready` up (see event.rs).
    pub(super) notifier: Arc<super::event::Notifier>,
    pub(super) me: Weak<GpuExecutor<D>>,
    /// What runs BLAS: the driver's vendor library or the built-in kernels (blas.rs).
    pub(super) blas_served: Served,
    /// What runs FFT: the driver's vendor library (its name) or the built-in kernels (fft.rs).
    pub(super) fft_served: Served,
    /// The vendor FFT's name, where it serves FFT.
    pub(super) fft_vendor: Option<&'static str>,
    /// What serves each canned family, as decided from the executor's `PluginConfig`.
    pub(super) plugins: Vec<PluginStatus>,
    /// DNN from the driver's vendor library, which falls back to the built-in kernels per
    /// operation, where it was chosen; otherwise the built-in kernels of `D::DNN_PTX`, if any,
    /// serve DNN (dnn.rs).
    pub(super) vendor_dnn: Option<VendorDnn<D>>,
}

/// DNN served by the driver's vendor library, falling back to the built-in kernels for each
/// operation the library does not serve (its `DnnSupport` is in dnn.rs).
pub(crate) struct VendorDnn<D: Driver> {
    /// The executor this belongs to (it holds this value, so a weak reference).
    pub(super) exec: Weak<GpuExecutor<D>>,
    /// The library's name.
    pub(super) name: &'static str,
}

impl<D: Driver> GpuExecutor<D> {
    /// The executor of `drv` with every family on `Plugin::Auto`.
    #[cfg(test)]
    pub(crate) fn new(drv: D) -> Result<Arc<Self>> {
        Self::with_plugins(drv, &PluginConfig::default())
    }

    /// The executor of `drv`, each canned family served as `config` asks: BLAS by the
    /// driver's vendor library or the built-in kernels of `D::CANNED_PTX`, RNG by the built-in
    /// Philox kernels (no vendor RNG in this build), FFT by the driver's vendor library or the
    /// built-in kernels of `D::FFT_PTX`, DNN by the driver's vendor library or the built-in
    /// kernels of `D::DNN_PTX`.
    pub(crate) fn with_plugins(drv: D, config: &PluginConfig) -> Result<Arc<Self>> {
        refuse_vendor(D::PLATFORM, config, &[PluginFamily::Rng])?;
        let vendor_blas = if D::HAS_BLAS {
            drv.blas_library()
        } else {
            Err(None)
        };
        let (blas_served, blas) = decide(
            D::PLATFORM,
            PluginFamily::Blas,
            config.get(PluginFamily::Blas),
            vendor_blas,
            D::CANNED_PTX.map(|_| "built-in kernels"),
        )?;
        let (_, rng) = decide(
            D::PLATFORM,
            PluginFamily::Rng,
            config.get(PluginFamily::Rng),
            Err(None),
            D::CANNED_PTX.map(|_| "built-in Philox kernels"),
        )?;
        let vendor_fft = drv.fft_library();
        let (fft_served, fft) = decide(
            D::PLATFORM,
            PluginFamily::Fft,
            config.get(PluginFamily::Fft),
            vendor_fft.clone(),
            D::FFT_PTX.map(|_| "built-in kernels"),
        )?;
        let fft_vendor = vendor_fft.ok().filter(|_| fft_served == Served::Vendor);
        let vendor_dnn = drv.dnn_library();
        let (dnn_served, dnn) = decide(
            D::PLATFORM,
            PluginFamily::Dnn,
            config.get(PluginFamily::Dnn),
            vendor_dnn.clone(),
            D::DNN_PTX.map(|_| "built-in kernels"),
        )?;
        let dnn_vendor = vendor_dnn.ok().filter(|_| dnn_served == Served::Vendor);
        let description = drv.describe()?;
        Ok(Arc::new_cyclic(|me| GpuExecutor {
            drv: Arc::new(drv),
            description,
            streams: StreamSet::default(),
            modules: Mutex::new(HashMap::new()),
            allocs: Mutex::new(HashMap::new()),
            parked: Mutex::new(Vec::new()),
            builtins: Mutex::new(HashMap::new()),
            notifier: Arc::default(),
            me: me.clone(),
            blas_served,
            fft_served,
            fft_vendor,
            plugins: vec![blas, rng, fft, dnn],
            vendor_dnn: dnn_vendor.map(|name| VendorDnn {
                exec: me.clone(),
                name,
            }),
        }))
    }

    pub(crate) fn driver(&self) -> &Arc<D> {
        &self.drv
    }

    /// Makes this executor's frees also fence `stream` (of another device), which is about to
    /// read this executor's memory in a peer copy.
    pub(crate) fn fence_also(&self, stream: &Arc<StreamShared<D>>) {
        self.streams.insert(stream);
    }

    /// `OutOfMemory` for `bytes` on this device, with the driver's error `e` as the detail.
    pub(super) fn oom(&self, bytes: u64, e: Error) -> Error {
        out_of_memory::<D>(self.description.ordinal, bytes, e)
    }

    /// Takes `addr` out of the live allocations and parks it behind a fence recorded on every
    /// live stream (in stream order), so it is freed only after the work queued before this
    /// call; frees whatever parked memory is ready.
    pub(super) fn park(&self, addr: DeviceAddress) {
        let Some(kind) = self.allocs.lock().remove(&addr.raw()) else {
            eprintln!(
                "streamexec: {}: deallocate of unknown address {addr}",
                D::PLATFORM
            );
            return;
        };
        let mut fences = Vec::new();
        for s in self.streams.live() {
            let fence = GpuEvent::new(self.drv.clone(), false)
                .map(Arc::new)
                .and_then(|ev| s.record(ev.clone()).map(|g| (ev, g)));
            match fence {
                Ok(f) => fences.push(f),
                // No fence: wait for the stream instead.
                Err(_) => drop(s.finish()),
            }
        }
        self.parked.lock().push(Parked {
            ptr: addr.raw(),
            kind,
            fences,
        });
        self.reap();
    }

    /// Frees parked allocations whose fences have all completed.
    pub(super) fn reap(&self) {
        let mut parked = self.parked.lock();
        parked.retain(|p| {
            if !p.fences.iter().all(|(ev, g)| ev.is_done(*g)) {
                return true;
            }
            self.free(p.ptr, p.kind);
            false
        });
    }

    fn free(&self, ptr: u64, kind: Allocation) {
        // SAFETY: every fence recorded after the work that could use `ptr` has completed (or
        // the device is idle, in `drop`); the allocation came from this driver.
        let r = unsafe {
            match kind {
                Allocation::Device => self.drv.mem_free(ptr),
                Allocation::Mapped(host) => {
                    self.drv.host_free(host as *mut u8);
                    Ok(())
                }
            }
        };
        if let Err(e) = r {
            eprintln!("streamexec: {}: freeing {ptr:#x} failed: {e}", D::PLATFORM);
        }
    }

    pub(super) fn module(&self, spec: &MultiKernelLoaderSpec) -> Result<(Arc<GpuModule>, String)> {
        let image = self.drv.select_image(spec, &self.description)?;
        if let Some(m) = self.modules.lock().get(&image.bytes) {
            return Ok((m.clone(), image.kernel_name));
        }
        let raw = self.drv.module_load(&image)?;
        // A PTX entry list our parser cannot read leaves the kernel unchecked rather than
        // refusing PTX the driver accepted.
        let entries = image.ptx.as_deref().and_then(|t| parse_entries(t).ok());
        let rpc_client = match self.drv.module_global(raw, crate::rpc::CLIENT_SYMBOL) {
            Ok(g) => g,
            Err(e) => {
                // SAFETY: just loaded; nothing uses it.
                unsafe { self.drv.module_unload(raw) };
                return Err(e);
            }
        };
        let module = Arc::new(GpuModule {
            raw,
            entries,
            rpc_client,
        });
        self.modules.lock().insert(image.bytes, module.clone());
        Ok((module, image.kernel_name))
    }
}

impl<D: Driver> Drop for GpuExecutor<D> {
    fn drop(&mut self) {
        // Every stream (each holds this executor) is gone, but the driver may still run their
        // last work: wait for the device, then free what is parked and unload modules.
        let idle = self.drv.synchronize_device();
        if idle.is_ok() {
            for p in std::mem::take(&mut *self.parked.lock()) {
                self.free(p.ptr, p.kind);
            }
            let modules: Vec<RawModule> = self.modules.lock().values().map(|m| m.raw).collect();
            for m in modules {
                // SAFETY: the device is idle and no kernel outlives its executor's streams.
                unsafe { self.drv.module_unload(m) };
            }
        }
        // Live allocations still owned by `DeviceMemory` values cannot exist: they hold the
        // executor. If the device failed to go idle, parked memory leaks rather than being
        // freed under running work.
    }
}

/// The part of a stream that queued operations and the executor share.
pub(crate) struct StreamShared<D: Driver> {
    pub(super) drv: Arc<D>,
    /// Queued work keeps the executor (and so its modules and parked allocations) alive.
    _exec: Arc<GpuExecutor<D>>,
    pub(crate) raw: RawStream,
    /// False for the driver's legacy default stream (`NULL`), which is never destroyed.
    owned: bool,
    pub(super) error: Arc<Mutex<Option<Error>>>,
    pub(super) submitter: Submitter,
}

impl<D: Driver> StreamShared<D> {
    /// A new driver stream of `exec`, in direct mode.
    pub(super) fn new(exec: Arc<GpuExecutor<D>>) -> Result<Self> {
        let raw = exec.driver().stream_create()?;
        Ok(Self::on(exec, raw, true))
    }

    /// The driver's legacy default stream (`NULL`).
    pub(super) fn legacy(exec: Arc<GpuExecutor<D>>) -> Self {
        Self::on(exec, RawStream(0), false)
    }

    fn on(exec: Arc<GpuExecutor<D>>, raw: RawStream, owned: bool) -> Self {
        let error = Arc::new(Mutex::new(None));
        StreamShared {
            drv: exec.driver().clone(),
            _exec: exec,
            raw,
            owned,
            error: error.clone(),
            submitter: Submitter::new(error, "streamexec-gpu-stream", D::PLATFORM),
        }
    }

    /// Waits for the worker and the driver stream; the first failure.
    pub(crate) fn finish(&self) -> Result<()> {
        let _ = self.submitter.work().wait_idle(); // its failure is in the error slot
        if let Err(e) = self.drv.stream_synchronize(self.raw) {
            self.error.lock().get_or_insert(e);
        }
        self.error.lock().clone().map_or(Ok(()), Err)
    }

    /// Records `event` in stream order (after everything submitted so far); its generation.
    pub(crate) fn record(self: &Arc<Self>, event: Arc<GpuEvent<D>>) -> Result<u64> {
        let generation = event.begin_record();
        if !self.submitter.is_deferred() {
            event.record(generation, self.raw)?;
            return Ok(generation);
        }
        let (me, skipped, skip_me) = (self.clone(), event.clone(), self.clone());
        self.submitter.submit(
            Box::new(move || event.record(generation, me.raw)),
            Some(Box::new(move |e: &Error| {
                skipped.skip(generation, skip_me.raw, e)
            })),
            false,
        )?;
        Ok(generation)
    }

    pub(super) fn submit(&self, run: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
        self.submitter.submit(Box::new(run), None, false)
    }
}

impl<D: Driver> Drop for StreamShared<D> {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the last reference; the driver releases the stream once its work is done.
            unsafe { self.drv.stream_destroy(self.raw) };
        }
    }
}
