//! A CUDA-like driver simulated on the host, so the shared GPU backend (fences, deferred
//! streams, event generations, host-memory release) is tested where no GPU is.
//!
//! Each driver stream is a thread running operations in order, as a GPU engine would: calls
//! return before the work is done. Device memory is `Vec<u8>` per allocation, addressed as
//! `(id << 32) | offset`; any operation that touches freed memory is recorded as a violation.
//! Kernels are a few built-ins found by entry name, with the parameter sizes of the PTX entry
//! the module declares.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{
    DnnCall, Driver, GpuBlas, GpuDnn, HostFn, ModuleImage, RawEvent, RawFunction, RawModule,
    RawStream,
};
use crate::error::{Error, Result};
use crate::platform::ptx_signature::kernel_load_error;
use crate::ptx::{PtxEntry, parse_entries};
use crate::types::DeviceDescription;
use crate::types::MultiKernelLoaderSpec;

type Op = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    ops: VecDeque<Op>,
    enqueued: u64,
    done: u64,
    closed: bool,
}

/// One simulated engine queue.
#[derive(Default)]
struct MockStream {
    q: Mutex<Queue>,
    cv: Condvar,
    error: Mutex<Option<Error>>,
}

impl MockStream {
    fn start() -> Arc<Self> {
        let s = Arc::new(MockStream::default());
        let me = s.clone();
        std::thread::spawn(move || {
            loop {
                let op = {
                    let mut q = me.q.lock();
                    loop {
                        if let Some(op) = q.ops.pop_front() {
                            break op;
                        }
                        if q.closed {
                            return;
                        }
                        me.cv.wait(&mut q);
                    }
                };
                op();
                me.q.lock().done += 1;
                me.cv.notify_all();
            }
        });
        s
    }

    fn push(&self, op: Op) {
        let mut q = self.q.lock();
        q.ops.push_back(op);
        q.enqueued += 1;
        drop(q);
        self.cv.notify_all();
    }

    fn sync(&self) -> Result<()> {
        let mut q = self.q.lock();
        let target = q.enqueued;
        while q.done < target {
            self.cv.wait(&mut q);
        }
        drop(q);
        self.error.lock().clone().map_or(Ok(()), Err)
    }
}

#[derive(Default)]
struct EventState {
    recorded: u64,
    done: u64,
    at: Option<Instant>,
}

#[derive(Default)]
struct MockEvent {
    s: Mutex<EventState>,
    cv: Condvar,
}

impl MockEvent {
    fn wait_for(&self, generation: u64) {
        let mut s = self.s.lock();
        while s.done < generation {
            self.cv.wait(&mut s);
        }
    }
}

/// Simulated device memory plus what went wrong with it.
#[derive(Default)]
pub(crate) struct MockMemory {
    bufs: Mutex<HashMap<u64, Vec<u8>>>,
    /// Operations that touched memory already freed (must stay empty).
    pub(crate) violations: Mutex<Vec<String>>,
    /// Allocations freed so far.
    pub(crate) frees: AtomicUsize,
}

impl MockMemory {
    fn with<R>(
        &self,
        addr: u64,
        len: usize,
        what: &str,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        let (id, off) = (addr >> 32, (addr & 0xffff_ffff) as usize);
        let mut bufs = self.bufs.lock();
        match bufs.get_mut(&id) {
            Some(b) if off + len <= b.len() => Some(f(&mut b[off..off + len])),
            _ => {
                self.violations.lock().push(format!(
                    "{what} touched {len} bytes at {addr:#x}, not live memory"
                ));
                None
            }
        }
    }

    /// Number of live allocations.
    pub(crate) fn live(&self) -> usize {
        self.bufs.lock().len()
    }
}

struct Function {
    name: String,
    sizes: Vec<usize>,
    module: usize,
}

/// A loaded module: its PTX entries and its globals (name → address, size).
struct MockModule {
    entries: Vec<PtxEntry>,
    globals: HashMap<String, (u64, usize)>,
}

/// Device code the test supplies for a kernel name: it runs in stream order and gets the
/// bytes of the module's `__llvm_rpc_client` (empty when the module has none) as the device
/// would see them when the kernel starts. An `Err` is the kernel's fault.
pub(crate) type DeviceCode = Arc<dyn Fn(&[u8]) -> Result<()> + Send + Sync>;

/// The globals a PTX module declares as `.global ... .b8 NAME[SIZE]`.
fn ptx_globals(ptx: &str) -> Vec<(String, usize)> {
    ptx.lines()
        .filter(|l| l.contains(".global") && !l.contains(".entry"))
        .filter_map(|l| {
            let decl = l.trim().trim_end_matches(';').split_whitespace().last()?;
            let (name, rest) = decl.split_once('[')?;
            Some((name.to_string(), rest.trim_end_matches(']').parse().ok()?))
        })
        .collect()
}

/// A recorded launch of a built-in BLAS kernel: name, grid, block.
pub(crate) type CannedLaunch = (String, [u32; 3], [u32; 3]);

/// The simulated driver.
pub(crate) struct MockDriver {
    pub(crate) mem: Arc<MockMemory>,
    next: AtomicUsize,
    streams: Mutex<HashMap<usize, Arc<MockStream>>>,
    events: Mutex<HashMap<usize, Arc<MockEvent>>>,
    modules: Mutex<HashMap<usize, MockModule>>,
    functions: Mutex<HashMap<usize, Arc<Function>>>,
    /// Warp size of the described device (32 like NVIDIA, 64 like AMD wavefronts).
    warp: u32,
    /// Maps page-locked host memory (with one address space: the device address is the host
    /// pointer, as with CUDA UVA).
    mapped: bool,
    device_code: Mutex<HashMap<String, DeviceCode>>,
    /// Whether a vendor BLAS library is "installed" (`blas()` is `Some`).
    blas_library: bool,
    /// Whether a vendor DNN library is "installed" (`dnn()` is `Some`; it serves f32 ReLU
    /// forward only, so every other operation falls back to the built-in kernels).
    dnn_library: bool,
    /// Built-in BLAS kernels (`se_blas_*`) launched so far, in stream order: name, grid and
    /// block. They are recorded, not simulated (their results are tested on the host's PTX
    /// engine: canned_blas_tests.rs and tests/canned_ptx_blas.rs).
    pub(crate) canned_blas: Arc<Mutex<Vec<CannedLaunch>>>,
}

impl MockDriver {
    pub(crate) fn new() -> Self {
        MockDriver {
            mem: Arc::default(),
            next: AtomicUsize::new(1),
            streams: Mutex::default(),
            events: Mutex::default(),
            modules: Mutex::default(),
            functions: Mutex::default(),
            warp: 32,
            mapped: false,
            device_code: Mutex::default(),
            blas_library: true,
            dnn_library: false,
            canned_blas: Arc::default(),
        }
    }

    /// A device whose driver has a vendor DNN library installed (see `dnn_library`).
    pub(crate) fn with_dnn_library() -> Self {
        MockDriver {
            dnn_library: true,
            ..MockDriver::new()
        }
    }

    /// A device whose driver has no BLAS library installed (BLAS runs built-in kernels).
    pub(crate) fn without_blas_library() -> Self {
        MockDriver {
            blas_library: false,
            ..MockDriver::new()
        }
    }

    /// A device with mapped host memory and warp size `warp`, for RPC tests.
    pub(crate) fn mapped(warp: u32) -> Self {
        MockDriver {
            warp,
            mapped: true,
            ..MockDriver::new()
        }
    }

    /// Runs `code` for launches of kernels named `name`.
    pub(crate) fn set_device_code(&self, name: &str, code: DeviceCode) {
        self.device_code.lock().insert(name.into(), code);
    }

    fn id(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn stream(&self, s: RawStream) -> Arc<MockStream> {
        self.streams.lock()[&s.0].clone()
    }

    fn event(&self, e: RawEvent) -> Arc<MockEvent> {
        self.events.lock()[&e.0].clone()
    }

    fn on(&self, s: RawStream, op: impl FnOnce() + Send + 'static) -> Result<()> {
        self.stream(s).push(Box::new(op));
        Ok(())
    }
}

/// The built-in kernels: (name, PTX declaration).
pub(crate) const KERNELS_PTX: &str = "
.version 7.0
.target sm_70
.address_size 64
.visible .entry affine(.param .u64 x, .param .u32 n, .param .u32 mul, .param .u32 add) { ret; }
.visible .entry sleep_ms(.param .u32 ms) { ret; }
.visible .entry fault() { ret; }
";

// SAFETY: handles are map keys that stay valid until destroyed; failures are `Err`s.
unsafe impl Driver for MockDriver {
    const PLATFORM: &'static str = "mock";
    const HAS_BLAS: bool = true;

    fn blas(&self) -> Result<Option<&dyn GpuBlas>> {
        Ok(self.blas_library.then_some(self as &dyn GpuBlas))
    }

    fn blas_library(&self) -> std::result::Result<&'static str, Option<String>> {
        match self.blas_library {
            true => Ok("mock BLAS"),
            false => Err(Some("mock BLAS not installed".into())),
        }
    }

    const CANNED_PTX: Option<&'static str> =
        Some(include_str!("../../../kernels/ptx/canned.O3.ptx"));

    const FFT_PTX: Option<&'static str> = Some(include_str!("../../../kernels/ptx/fft.O3.ptx"));

    fn dnn_library(&self) -> std::result::Result<&'static str, Option<String>> {
        match self.dnn_library {
            true => Ok("mock DNN"),
            false => Err(Some("mock DNN not installed".into())),
        }
    }

    fn dnn(&self) -> Result<Option<&dyn GpuDnn>> {
        Ok(self.dnn_library.then_some(self as &dyn GpuDnn))
    }

    fn open(_ordinal: usize) -> Result<Self> {
        Err(Error::unsupported(
            Self::PLATFORM,
            "open",
            "mock devices are made by the tests (MockDriver::new), not opened by ordinal",
        ))
    }

    fn describe_device(_ordinal: usize) -> Result<DeviceDescription> {
        Err(Error::unsupported(
            Self::PLATFORM,
            "describe_device",
            "mock devices are made by the tests (MockDriver::new), not described by ordinal",
        ))
    }

    fn describe(&self) -> Result<DeviceDescription> {
        Ok(DeviceDescription {
            platform: "mock",
            ordinal: 0,
            name: "simulated CUDA-like device".into(),
            vendor: "streamexec".into(),
            platform_version: "mock".into(),
            driver_version: "mock".into(),
            driver: "the mock driver of the unit tests".into(),
            total_memory: 1 << 30,
            compute_units: 1,
            max_threads_per_block: 1024,
            max_block_dims: [1024, 1024, 64],
            max_grid_dims: [u32::MAX, 65535, 65535],
            warp_size: self.warp,
            shared_memory_per_block: 48 << 10,
            clock_rate_khz: None,
            compute_capability: Some((7, 0)),
            isa: None,
            unified_memory: false,
            host_mapped_memory: self.mapped,
            max_allocation: 1 << 30,
            max_cooperative_blocks: 0,
        })
    }

    fn synchronize_device(&self) -> Result<()> {
        let streams: Vec<_> = self.streams.lock().values().cloned().collect();
        for s in streams {
            let _ = s.sync();
        }
        Ok(())
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        Ok((1 << 30, 1 << 30))
    }

    fn mem_alloc(&self, bytes: u64) -> Result<u64> {
        let id = self.id() as u64;
        self.mem.bufs.lock().insert(id, vec![0; bytes as usize]);
        Ok(id << 32)
    }

    unsafe fn mem_free(&self, ptr: u64) -> Result<()> {
        self.mem.bufs.lock().remove(&(ptr >> 32));
        self.mem.frees.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<*mut u8> {
        if mapped && !self.mapped {
            return Err(Error::unsupported("mock", "host_alloc", "no mapped memory"));
        }
        let layout = std::alloc::Layout::from_size_align(bytes, 4096).unwrap();
        // SAFETY: a non-zero size (the executor never asks for 0 bytes here).
        Ok(unsafe { std::alloc::alloc(layout) })
    }

    unsafe fn host_free(&self, _ptr: *mut u8) {
        // Leaked: the mock does not track host allocation sizes.
    }

    unsafe fn host_device_pointer(&self, ptr: *mut u8) -> Result<u64> {
        if self.mapped {
            return Ok(ptr as u64);
        }
        Err(Error::unsupported(
            "mock",
            "host_device_pointer",
            "no mapped memory",
        ))
    }

    fn stream_create(&self) -> Result<RawStream> {
        let id = self.id();
        self.streams.lock().insert(id, MockStream::start());
        Ok(RawStream(id))
    }

    unsafe fn stream_destroy(&self, s: RawStream) {
        if let Some(st) = self.streams.lock().remove(&s.0) {
            st.q.lock().closed = true;
            st.cv.notify_all();
        }
    }

    fn stream_synchronize(&self, s: RawStream) -> Result<()> {
        self.stream(s).sync()
    }

    fn launch_host_fn(&self, s: RawStream, f: HostFn) -> Result<()> {
        self.on(s, f)
    }

    unsafe fn memcpy_htod_async(
        &self,
        dst: u64,
        src: *const u8,
        n: usize,
        s: RawStream,
    ) -> Result<()> {
        let (mem, src) = (self.mem.clone(), src as usize);
        self.on(s, move || {
            mem.with(dst, n, "memcpy_htod", |d| {
                // SAFETY: the backend keeps the host bytes readable until the copy is done.
                d.copy_from_slice(unsafe { std::slice::from_raw_parts(src as *const u8, n) })
            });
        })
    }

    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: u64,
        n: usize,
        s: RawStream,
    ) -> Result<()> {
        let (mem, dst) = (self.mem.clone(), dst as usize);
        self.on(s, move || {
            mem.with(src, n, "memcpy_dtoh", |d| {
                // SAFETY: the backend keeps the host bytes writable until the copy is done.
                unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, n) }.copy_from_slice(d)
            });
        })
    }

    unsafe fn memcpy_dtod_async(&self, dst: u64, src: u64, n: usize, s: RawStream) -> Result<()> {
        let mem = self.mem.clone();
        self.on(s, move || {
            if let Some(bytes) = mem.with(src, n, "memcpy_dtod", |d| d.to_vec()) {
                mem.with(dst, n, "memcpy_dtod", |d| d.copy_from_slice(&bytes));
            }
        })
    }

    fn can_access_peer(&self, _peer: &Self) -> Result<bool> {
        Ok(false)
    }

    fn enable_peer_access(&self, _peer: &Self) -> Result<()> {
        Err(Error::unsupported(
            "mock",
            "enable_peer_access",
            "one device",
        ))
    }

    unsafe fn memcpy_peer_async(
        &self,
        _: u64,
        _: &Self,
        _: u64,
        _: usize,
        _: RawStream,
    ) -> Result<()> {
        Err(Error::unsupported("mock", "memcpy_peer", "one device"))
    }

    unsafe fn memset_d8_async(&self, dst: u64, v: u8, n: usize, s: RawStream) -> Result<()> {
        let mem = self.mem.clone();
        self.on(s, move || {
            mem.with(dst, n, "memset_d8", |d| d.fill(v));
        })
    }

    unsafe fn memset_d32_async(&self, dst: u64, v: u32, count: usize, s: RawStream) -> Result<()> {
        let mem = self.mem.clone();
        self.on(s, move || {
            mem.with(dst, count * 4, "memset_d32", |d| {
                d.chunks_exact_mut(4)
                    .for_each(|c| c.copy_from_slice(&v.to_ne_bytes()))
            });
        })
    }

    unsafe fn memcpy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        self.mem
            .with(dst, src.len(), "memcpy_htod", |d| d.copy_from_slice(src));
        Ok(())
    }

    unsafe fn memcpy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        self.mem
            .with(src, dst.len(), "memcpy_dtoh", |d| dst.copy_from_slice(d));
        Ok(())
    }

    unsafe fn memset_d8(&self, dst: u64, v: u8, n: usize) -> Result<()> {
        self.mem.with(dst, n, "memset_d8", |d| d.fill(v));
        Ok(())
    }

    fn event_create(&self, _timing: bool) -> Result<RawEvent> {
        let id = self.id();
        self.events.lock().insert(id, Arc::default());
        Ok(RawEvent(id))
    }

    unsafe fn event_destroy(&self, e: RawEvent) {
        self.events.lock().remove(&e.0);
    }

    fn event_record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        let ev = self.event(e);
        let generation = {
            let mut st = ev.s.lock();
            st.recorded += 1;
            st.recorded
        };
        self.on(s, move || {
            let mut st = ev.s.lock();
            st.done = st.done.max(generation);
            st.at = Some(Instant::now());
            drop(st);
            ev.cv.notify_all();
        })
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        let ev = self.event(e);
        let st = ev.s.lock();
        Ok(st.done >= st.recorded)
    }

    fn event_synchronize(&self, e: RawEvent) -> Result<()> {
        let ev = self.event(e);
        let target = ev.s.lock().recorded;
        ev.wait_for(target);
        Ok(())
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        let (a, b) = (self.event(start).s.lock().at, self.event(end).s.lock().at);
        match (a, b) {
            (Some(a), Some(b)) => Ok(b.saturating_duration_since(a).as_secs_f32() * 1e3),
            _ => Err(Error::Event {
                detail: "mock: an event was never recorded".into(),
            }),
        }
    }

    fn stream_wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        let ev = self.event(e);
        let target = ev.s.lock().recorded;
        self.on(s, move || ev.wait_for(target))
    }

    fn select_image(
        &self,
        spec: &MultiKernelLoaderSpec,
        _d: &DeviceDescription,
    ) -> Result<ModuleImage> {
        let img = spec
            .select_cuda_ptx(Some((7, 0)))
            .ok_or_else(|| spec.no_suitable_format("mock", "PTX"))?;
        let text = img.source.text()?.into_owned();
        Ok(ModuleImage {
            bytes: text.clone().into_bytes(),
            kernel_name: img.kernel_name.clone(),
            ptx: Some(text),
            what: "PTX".into(),
        })
    }

    fn module_load(&self, image: &ModuleImage) -> Result<RawModule> {
        let ptx = image.ptx.as_deref().unwrap_or("");
        let entries = parse_entries(ptx)
            .map_err(|e| kernel_load_error(Self::PLATFORM, &image.kernel_name, e))?;
        let mut globals = HashMap::new();
        for (name, size) in ptx_globals(ptx) {
            globals.insert(name, (self.mem_alloc(size.max(1) as u64)?, size));
        }
        let id = self.id();
        self.modules
            .lock()
            .insert(id, MockModule { entries, globals });
        Ok(RawModule(id))
    }

    unsafe fn module_unload(&self, m: RawModule) {
        self.modules.lock().remove(&m.0);
    }

    fn module_function(&self, m: RawModule, name: &str) -> Result<RawFunction> {
        let modules = self.modules.lock();
        let entry = modules[&m.0]
            .entries
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| Error::invalid("module_function", format!("no entry {name}")))?;
        let f = Function {
            name: name.into(),
            sizes: entry.params.iter().map(|p| p.size() as usize).collect(),
            module: m.0,
        };
        let id = self.id();
        self.functions.lock().insert(id, Arc::new(f));
        Ok(RawFunction(id))
    }

    fn module_global(&self, m: RawModule, name: &str) -> Result<Option<(u64, usize)>> {
        Ok(self.modules.lock()[&m.0].globals.get(name).copied())
    }

    unsafe fn launch(
        &self,
        f: RawFunction,
        grid: [u32; 3],
        block: [u32; 3],
        _shared: u32,
        s: RawStream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let f = self.functions.lock()[&f.0].clone();
        assert_eq!(params.len(), f.sizes.len(), "one pointer per parameter");
        // The driver copies parameter values at launch, as CUDA does.
        let args: Vec<Vec<u8>> = params
            .iter()
            .zip(&f.sizes)
            // SAFETY: each pointer refers to a value of its parameter's size (the contract).
            .map(|(&p, &n)| unsafe { std::slice::from_raw_parts(p as *const u8, n) }.to_vec())
            .collect();
        let (mem, stream) = (self.mem.clone(), self.stream(s));
        let canned_blas = self.canned_blas.clone();
        let u32_at = |a: &[u8]| u32::from_ne_bytes(a[..4].try_into().unwrap());
        let st = stream.clone();
        if let Some(code) = self.device_code.lock().get(&f.name).cloned() {
            let client = self.modules.lock()[&f.module]
                .globals
                .get(crate::rpc::CLIENT_SYMBOL)
                .copied();
            stream.push(Box::new(move || {
                let image = client
                    .and_then(|(a, n)| mem.with(a, n, "device code", |d| d.to_vec()))
                    .unwrap_or_default();
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| code(&image)));
                let failure = match r {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e.to_string(),
                    Err(p) => format!("panicked: {}", crate::error::panic_message(p.as_ref())),
                };
                st.error.lock().get_or_insert(Error::KernelFault {
                    platform: "mock",
                    kernel: f.name.clone(),
                    detail: failure,
                });
            }));
            return Ok(());
        }
        stream.push(Box::new(move || match f.name.as_str() {
            "affine" => {
                let x = u64::from_ne_bytes(args[0][..8].try_into().unwrap());
                let (n, mul, add) = (u32_at(&args[1]), u32_at(&args[2]), u32_at(&args[3]));
                mem.with(x, n as usize * 4, "affine", |d| {
                    for c in d.chunks_exact_mut(4) {
                        let v = u32::from_ne_bytes(c.try_into().unwrap());
                        c.copy_from_slice(&v.wrapping_mul(mul).wrapping_add(add).to_ne_bytes());
                    }
                });
            }
            "sleep_ms" => std::thread::sleep(Duration::from_millis(u32_at(&args[0]) as u64)),
            name if name.starts_with("se_blas_") => {
                canned_blas.lock().push((name.to_string(), grid, block));
            }
            name if name.starts_with("se_philox_") => {
                let threads = grid[0] as u64 * block[0] as u64;
                philox_kernel(&mem, name, &args, threads)
            }
            _ => {
                st.error.lock().get_or_insert(Error::KernelFault {
                    platform: "mock",
                    kernel: f.name.clone(),
                    detail: "simulated illegal address".into(),
                });
            }
        }));
        Ok(())
    }
}

/// The Philox fill kernels of kernels/canned.cu, computed with `crate::philox` from the
/// parameters in the order the PTX declares them; each of `threads` threads writes one block.
fn philox_kernel(mem: &MockMemory, name: &str, args: &[Vec<u8>], threads: u64) {
    use crate::types::RandDistribution as R;
    use crate::types::philox::{PhiloxStream, generate};
    let u64_at = |i: usize| u64::from_ne_bytes(args[i][..8].try_into().unwrap());
    let u32_at = |i: usize| u32::from_ne_bytes(args[i][..4].try_into().unwrap());
    let f64_at = |i: usize| f64::from_ne_bytes(args[i][..8].try_into().unwrap());
    let (dst, n) = (u64_at(0), u64_at(1));
    let stream = PhiloxStream {
        key: [u32_at(2), u32_at(3)],
        counter_hi: [u32_at(4), u32_at(5)],
        offset: u64_at(6),
    };
    let dist = match name {
        "se_philox_u32" => R::U32,
        "se_philox_uniform_f32" => R::UniformF32,
        "se_philox_uniform_f64" => R::UniformF64,
        "se_philox_gaussian_f32" => R::GaussianF32 {
            mean: f64_at(7),
            stddev: f64_at(8),
        },
        _ => R::GaussianF64 {
            mean: f64_at(7),
            stddev: f64_at(8),
        },
    };
    let n = n.min(threads * dist.elems_per_block());
    let bytes = (n * dist.elem_size()) as usize;
    mem.with(dst, bytes, name, |d| generate(&stream, dist, 0, d));
}

/// A column-major f32 GEMM (batch 1) in stream order, enough to test the BLAS plumbing.
impl GpuBlas for MockDriver {
    fn gemm(&self, s: RawStream, c: &crate::interface::blas::GemmCall) -> Result<()> {
        use crate::interface::blas::BlasElem;
        if c.elem != BlasElem::F32
            || c.batch != 1
            || c.trans_a.is_transposed()
            || c.trans_b.is_transposed()
        {
            return Err(Error::unsupported(
                "mock",
                "gemm",
                "only f32, batch 1, no transposes",
            ));
        }
        let (c, mem) = (*c, self.mem.clone());
        self.on(s, move || {
            let read = |o: &crate::interface::blas::Operand| {
                mem.with(o.addr.raw(), o.len as usize * 4, "gemm", |d| {
                    d.chunks_exact(4)
                        .map(|w| f32::from_ne_bytes(w.try_into().unwrap()))
                        .collect::<Vec<f32>>()
                })
            };
            let (Some(a), Some(b), Some(old)) = (read(&c.a), read(&c.b), read(&c.c)) else {
                return;
            };
            let (m, n, k) = (c.m as usize, c.n as usize, c.k as usize);
            let (lda, ldb, ldc) = (c.lda as usize, c.ldb as usize, c.ldc as usize);
            let mut out = old.clone();
            for j in 0..n {
                for i in 0..m {
                    let dot: f32 = (0..k).map(|p| a[i + p * lda] * b[p + j * ldb]).sum();
                    let prev = if c.beta == 0.0 {
                        0.0
                    } else {
                        c.beta as f32 * old[i + j * ldc]
                    };
                    out[i + j * ldc] = c.alpha as f32 * dot + prev;
                }
            }
            let bytes: Vec<u8> = out.iter().flat_map(|v| v.to_ne_bytes()).collect();
            mem.with(c.c.addr.raw(), bytes.len(), "gemm", |d| {
                d.copy_from_slice(&bytes)
            });
        })
    }

    fn gemv(&self, _s: RawStream, _c: &crate::interface::blas::GemvCall) -> Result<()> {
        Err(Error::unsupported("mock", "gemv", "not simulated"))
    }

    fn level1(&self, _s: RawStream, _c: &crate::interface::blas::Level1Call) -> Result<()> {
        Err(Error::unsupported("mock", "level1", "not simulated"))
    }
}

impl GpuDnn for MockDriver {
    fn supports(&self, call: &DnnCall) -> bool {
        use crate::interface::dnn::{Activation, DnnDataType};
        matches!(call, DnnCall::ActivationForward { act: Activation::Relu, t, .. }
            if t.dtype == DnnDataType::F32)
    }

    fn run(&self, s: RawStream, call: &DnnCall) -> Result<()> {
        let DnnCall::ActivationForward { t, x, y, .. } = *call else {
            return Err(Error::internal(
                "the mock DNN ran a call it does not support",
            ));
        };
        let (bytes, mem) = (t.elements() as usize * 4, self.mem.clone());
        self.on(s, move || {
            let Some(v) = mem.with(x, bytes, "relu", |d| d.to_vec()) else {
                return;
            };
            let out: Vec<u8> = v
                .chunks_exact(4)
                .flat_map(|w| {
                    f32::from_ne_bytes(w.try_into().unwrap())
                        .max(0.0)
                        .to_ne_bytes()
                })
                .collect();
            mem.with(y, bytes, "relu", |d| d.copy_from_slice(&out));
        })
    }
}
