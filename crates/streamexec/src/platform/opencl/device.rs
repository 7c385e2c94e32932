//! The OpenCL device's state: the context, the allocation table behind synthetic device
//! addresses, the program cache and the stream registry. Streams and the built-in kernels use
//! it; `executor.rs` (the `StreamExecutorInterface` impl, which creates streams) builds on it,
//! so nothing here depends on the executor or stream files.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_CPU, CL_EXEC_NATIVE_KERNEL, Device};
use opencl3::program::Program;
use opencl3::types::cl_device_id;
use parking_lot::{Mutex, RwLock};

use super::clblast::{self, ClBlast};
use super::khr_command_buffer::CommandBufferSupport;
use super::memory::{ClAlloc, Reaper, reap};
use super::queue::StreamShared;
use super::red_zone;
use super::status::{PLATFORM, cl_error, error_text};
use crate::error::{Error, Result};
use crate::interface::KernelInterface;
use crate::platform::work_queue::StreamSet;
use crate::types::{
    DeviceAddress, DeviceDescription, MultiKernelLoaderSpec, Plugin, PluginConfig, PluginFamily,
    PluginStatus, Served, decide, refuse_vendor,
};

/// `STREAMEXEC_OPENCL_RED_ZONES=0` (read when an executor is created) turns red zones off:
/// buffers on CPU devices are the driver's again and launches are not checked (for
/// comparison, e.g. in benches).
pub(crate) const RED_ZONES_ENV: &str = "STREAMEXEC_OPENCL_RED_ZONES";

/// Bits of a device address that hold the byte offset inside an allocation.
pub(crate) const OFFSET_BITS: u32 = 40;

type ProgramKey = (bool, Vec<u8>, String);
/// A built-in kernel: double precision or not, and its name.
type BuiltinKey = (bool, &'static str);

/// The OpenCL platform's canned families: BLAS by CLBlast (clblast.rs) or the built-in
/// kernels, RNG by the built-in Philox kernels; FFT and DNN by built-in kernels (reported from
/// `fft()` / `dnn()`); no vendor RNG, FFT or DNN in this build.
fn decide_plugins(config: &PluginConfig) -> Result<(Option<Arc<ClBlast>>, Vec<PluginStatus>)> {
    refuse_vendor(
        PLATFORM,
        config,
        &[PluginFamily::Rng, PluginFamily::Fft, PluginFamily::Dnn],
    )?;
    let choice = config.get(PluginFamily::Blas);
    let loaded = match choice {
        Plugin::Builtin => Err(None),
        _ => ClBlast::get().map_err(Some),
    };
    let vendor = loaded.as_ref().map(|_| clblast::NAME).map_err(Clone::clone);
    let (served, blas) = decide(
        PLATFORM,
        PluginFamily::Blas,
        choice,
        vendor,
        Some("built-in kernels"),
    )?;
    let (_, rng) = decide(
        PLATFORM,
        PluginFamily::Rng,
        config.get(PluginFamily::Rng),
        Err(None),
        Some("built-in Philox kernels"),
    )?;
    let clblast = loaded.ok().filter(|_| served == Served::Vendor);
    Ok((clblast, vec![blas, rng]))
}

/// One OpenCL device.
pub(crate) struct OpenClExecutor {
    pub(super) description: DeviceDescription,
    pub(super) context: Context,
    pub(super) sync_queue: Arc<Mutex<CommandQueue>>,
    pub(super) allocs: RwLock<HashMap<u64, Arc<ClAlloc>>>,
    next_id: AtomicU64,
    programs: Mutex<HashMap<ProgramKey, Arc<Program>>>,
    pub(super) streams: StreamSet<StreamShared>,
    pub(super) reaper: Reaper,
    /// The device works on host memory directly (CPU drivers such as PoCL): page-locked
    /// staging buffers buy nothing there, so host allocations are ordinary memory.
    pub(super) host_unified: bool,
    /// Buffers get red zones checked after each launch (`red_zone.rs`): a CPU or host-unified
    /// device whose driver uses `CL_MEM_USE_HOST_PTR` memory in place.
    pub(super) red_zones: bool,
    /// The device runs native kernels (`CL_EXEC_NATIVE_KERNEL`): the red-zone check runs as
    /// one, in the stream's order, instead of on the submitting thread.
    pub(super) native_kernels: bool,
    /// Built-in BLAS and Philox kernels (`builtins.rs`) by (double precision, name), built on
    /// first use.
    pub(super) builtins: Mutex<HashMap<BuiltinKey, Arc<dyn KernelInterface>>>,
    pub(super) me: Weak<OpenClExecutor>,
    /// `cl_khr_command_buffer` support, or why there is none (`command_buffer.rs`).
    pub(super) command_buffers: std::result::Result<Arc<CommandBufferSupport>, String>,
    /// CLBlast, where the `PluginConfig` chose it for BLAS (blas.rs); `None`: built-in kernels.
    pub(super) clblast: Option<Arc<ClBlast>>,
    /// What serves each canned family, as decided from the `PluginConfig`.
    pub(super) plugins: Vec<PluginStatus>,
}

// SAFETY: OpenCL contexts, devices and queues are thread-safe handles (OpenCL 1.1+); the
// queue used from several threads is behind a Mutex.
unsafe impl Send for OpenClExecutor {}
// SAFETY: as above.
unsafe impl Sync for OpenClExecutor {}

impl OpenClExecutor {
    pub(crate) fn new(
        device: cl_device_id,
        description: DeviceDescription,
        config: &PluginConfig,
    ) -> Result<Arc<Self>> {
        let (clblast, plugins) = decide_plugins(config)?;
        let context = Context::from_device(&Device::new(device))
            .map_err(|e| cl_error("clCreateContext", e.0))?;
        let queue =
            CommandQueue::create_default_with_properties(&context, CL_QUEUE_PROFILING_ENABLE, 0)
                .map_err(|e| cl_error("clCreateCommandQueueWithProperties", e.0))?;
        let command_buffers = CommandBufferSupport::detect(device, &context).map(Arc::new);
        let dev = Device::new(device);
        let host_unified = dev.host_unified_memory().unwrap_or(false);
        let cpu = dev.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_CPU != 0);
        let native_kernels = dev
            .execution_capabilities()
            .is_ok_and(|c| c & CL_EXEC_NATIVE_KERNEL != 0);
        let red_zones = (cpu || host_unified)
            && std::env::var_os(RED_ZONES_ENV).is_none_or(|v| v != "0")
            && red_zone::probe_zero_copy(&context, &queue);
        Ok(Arc::new_cyclic(|me| OpenClExecutor {
            description,
            context,
            sync_queue: Arc::new(Mutex::new(queue)),
            allocs: RwLock::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            programs: Mutex::new(HashMap::new()),
            streams: StreamSet::default(),
            reaper: Reaper::default(),
            host_unified,
            red_zones,
            native_kernels,
            builtins: Mutex::new(HashMap::new()),
            me: me.clone(),
            command_buffers,
            clblast,
            plugins,
        }))
    }

    /// The allocation behind `[addr, addr + bytes)` and the byte offset of `addr` in it.
    pub(crate) fn resolve(
        &self,
        addr: DeviceAddress,
        bytes: u64,
        what: &str,
    ) -> Result<(Arc<ClAlloc>, usize)> {
        self.try_resolve(addr, bytes).ok_or_else(|| {
            Error::invalid(
                what,
                format!(
                    "{bytes} bytes at {addr} are not inside one live allocation of this device"
                ),
            )
        })
    }

    pub(super) fn insert(&self, alloc: ClAlloc) -> DeviceAddress {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.allocs.write().insert(id, Arc::new(alloc));
        DeviceAddress::new(id << OFFSET_BITS)
    }

    /// As [`resolve`](Self::resolve), without building an error (hot paths build it lazily).
    pub(crate) fn try_resolve(
        &self,
        addr: DeviceAddress,
        bytes: u64,
    ) -> Option<(Arc<ClAlloc>, usize)> {
        let id = addr.raw() >> OFFSET_BITS;
        let offset = addr.raw() & ((1 << OFFSET_BITS) - 1);
        let map = self.allocs.read();
        let a = map.get(&id)?;
        offset.checked_add(bytes).filter(|&e| e <= a.bytes)?;
        Some((a.clone(), offset as usize))
    }

    /// The built program for the spec's OpenCL image (cached), and that image's kernel name.
    pub(super) fn program(&self, spec: &MultiKernelLoaderSpec) -> Result<(Arc<Program>, String)> {
        let (image, binary) = match (spec.opencl_text(), spec.opencl_binary()) {
            (Some(t), _) => (t, false),
            (None, Some(b)) => (b, true),
            (None, None) => {
                return Err(spec.no_suitable_format(
                    PLATFORM,
                    "OpenCL C text or an OpenCL binary (add_opencl_text_in_memory / _on_disk, \
                     add_opencl_binary_in_memory / _on_disk)",
                ));
            }
        };
        let load_err = |detail: String| Error::KernelLoad {
            platform: PLATFORM,
            kernel: image.kernel_name.clone(),
            detail,
        };
        let options = format!("-cl-kernel-arg-info {}", spec.opencl_build_options());
        if options.contains('\0') {
            return Err(load_err("the build options contain a NUL byte".into()));
        }
        let mut bytes = image.source.bytes()?.into_owned();
        if spec.rpc() {
            if binary {
                return Err(load_err(
                    "the spec asks for RPC, which needs OpenCL C text to put the client in front \
                     of; add_opencl_text_* instead of a binary"
                        .into(),
                ));
            }
            bytes.splice(0..0, crate::rpc::opencl_prelude(spec.mpi()).into_bytes());
        }
        let key = (binary, bytes, options);
        if let Some(p) = self.programs.lock().get(&key) {
            return Ok((p.clone(), image.kernel_name.clone()));
        }
        let (binary, bytes, options) = &key;
        let program = if *binary {
            Program::create_and_build_from_binary(&self.context, &[bytes], options).map_err(
                |e| {
                    load_err(format!(
                        "the OpenCL binary did not load or build: {} ({})",
                        error_text(e.0),
                        e.0
                    ))
                },
            )?
        } else {
            let text = std::str::from_utf8(bytes)
                .map_err(|e| load_err(format!("the OpenCL C source is not UTF-8: {e}")))?;
            if text.contains('\0') {
                return Err(load_err("the OpenCL C source contains a NUL byte".into()));
            }
            Program::create_and_build_from_source(&self.context, text, options)
                .map_err(|log| load_err(format!("the OpenCL C compiler failed: {log}")))?
        };
        let program = Arc::new(program);
        self.programs.lock().insert(key, program.clone());
        Ok((program, image.kernel_name.clone()))
    }

    pub(super) fn with_sync_queue<T>(
        &self,
        f: impl FnOnce(&CommandQueue) -> Result<T>,
    ) -> Result<T> {
        let q = self.sync_queue.lock();
        f(&q)
    }
}

impl Drop for OpenClExecutor {
    fn drop(&mut self) {
        // Every stream (each holds this executor) is gone; SVM still held by a queued command
        // stays parked, and leaks rather than being freed under that command.
        let _ = self.sync_queue.lock().finish();
        reap(self.context.get(), &self.reaper);
    }
}
