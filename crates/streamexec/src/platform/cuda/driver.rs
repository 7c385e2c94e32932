//! CUDA driver calls for the shared GPU backend: one device's primary context, made current
//! on the calling thread before every call (cheap: a thread-local store in the driver).

use std::ffi::{CStr, CString, c_char, c_void};
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};

use cudarc::driver::{result, sys};

use super::status::{PLATFORM, cu_error};
use crate::error::{Error, Result};
use crate::platform::gpu::{
    Driver, GraphNode, HostFn, KernelNode, ModuleImage, RawEvent, RawFunction, RawGraph,
    RawGraphExec, RawGraphNode, RawModule, RawStream,
};
use crate::types::DeviceDescription;
use crate::types::{KernelImage, MultiKernelLoaderSpec};

/// One CUDA device and its retained primary context.
pub(crate) struct CudaDriver {
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    ordinal: usize,
    /// cuBLAS, created on first use: `None` when libcublas is not installed (BLAS then runs
    /// the built-in kernels), or why it cannot be.
    blas: std::sync::OnceLock<Result<Option<super::blas::CudaBlas>>>,
    /// cuDNN, created on first use: `None` when libcudnn is not installed, or why it cannot be.
    dnn: std::sync::OnceLock<Result<Option<super::dnn::CudaDnn>>>,
}

// SAFETY: CUDA contexts and devices are process-wide handles usable from any thread.
unsafe impl Send for CudaDriver {}
// SAFETY: as above; the driver API is thread-safe.
unsafe impl Sync for CudaDriver {}

impl CudaDriver {
    pub(crate) fn new(ordinal: usize) -> Result<Self> {
        let dev = result::device::get(ordinal as i32).map_err(|e| cu_error("cuDeviceGet", e))?;
        // SAFETY: `dev` is a valid device; released in `drop`.
        let ctx = unsafe { result::primary_ctx::retain(dev) }
            .map_err(|e| cu_error("cuDevicePrimaryCtxRetain", e))?;
        Ok(CudaDriver {
            dev,
            ctx,
            ordinal,
            blas: std::sync::OnceLock::new(),
            dnn: std::sync::OnceLock::new(),
        })
    }

    fn bind(&self) -> Result<()> {
        // SAFETY: the primary context is retained for this value's life.
        unsafe { result::ctx::set_current(self.ctx) }.map_err(|e| cu_error("cuCtxSetCurrent", e))
    }

    /// The device's primary context.
    pub(super) fn context(&self) -> sys::CUcontext {
        self.ctx
    }

    /// Binds the context, then runs one raw driver call.
    pub(super) fn call(&self, name: &str, f: impl FnOnce() -> sys::CUresult) -> Result<()> {
        self.bind()?;
        f().result().map_err(|e| cu_error(name, e))
    }
}

impl Drop for CudaDriver {
    fn drop(&mut self) {
        // The library handles go first, while their context is still retained.
        drop(self.dnn.take());
        drop(self.blas.take());
        // SAFETY: balances the retain in `new`.
        let _ = unsafe { result::primary_ctx::release(self.dev) };
    }
}

fn stream(s: RawStream) -> sys::CUstream {
    s.0 as sys::CUstream
}

fn event(e: RawEvent) -> sys::CUevent {
    e.0 as sys::CUevent
}

extern "C" fn run_host_fn(user: *mut c_void) {
    // SAFETY: `user` is the box leaked by `launch_host_fn`; the driver calls this once.
    let f = unsafe { Box::from_raw(user as *mut HostFn) };
    // A panic must not unwind into the driver.
    let _ = catch_unwind(AssertUnwindSafe(f));
}

fn attribute(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Option<u32> {
    // SAFETY: a query of a valid device.
    unsafe { result::device::get_attribute(dev, a) }
        .ok()
        .and_then(|v| u32::try_from(v).ok())
}

/// The symbol only streamexec's CPU libcuda exports (`streamexec-libcuda`'s `lib.rs`): a
/// function returning its version as a C string.
const CPU_LIBCUDA_MARKER: &[u8] = b"streamexec_cpu_libcuda_version\0";

/// Whether the loaded libcuda is streamexec's CPU libcuda (it exports [`CPU_LIBCUDA_MARKER`]).
fn cpu_libcuda() -> bool {
    // SAFETY: called once the driver loaded; the lookup only reads its symbol table.
    let lib = unsafe { sys::culib() };
    // SAFETY: only whether the symbol exists is used.
    unsafe { lib.get::<unsafe extern "C" fn()>(CPU_LIBCUDA_MARKER) }.is_ok()
}

/// Vendor library `name` where it is installed (`present`) and can run: NVIDIA's libraries
/// carry GPU code that only NVIDIA's driver runs, so under the CPU libcuda they are not
/// chosen even where installed (`Plugin::Auto` then uses the built-in kernels).
fn vendor_library(
    name: &'static str,
    present: bool,
    file: &str,
) -> std::result::Result<&'static str, Option<String>> {
    if !present {
        return Err(Some(format!("{name} not found: {file} is missing")));
    }
    if cpu_libcuda() {
        return Err(Some(format!(
            "{name} is installed but needs NVIDIA's driver: the libcuda loaded is streamexec's \
             CPU libcuda, which cannot run {name}'s GPU code"
        )));
    }
    Ok(name)
}

/// Which library answers the driver API, from the library cudarc loaded: streamexec's CPU
/// libcuda (it exports [`CPU_LIBCUDA_MARKER`]) or NVIDIA's driver, with the file `cuInit`
/// lives in (`dladdr`).
fn driver_library() -> String {
    // SAFETY: called once the driver loaded (`cuInit` succeeded), so cudarc's library is
    // there; the lookups only read its symbol table.
    let lib = unsafe { sys::culib() };
    // SAFETY: only the symbol's address is used.
    let init = unsafe { lib.get::<unsafe extern "C" fn()>(b"cuInit\0") };
    let file = init
        .ok()
        .and_then(|f| {
            let mut info = MaybeUninit::<libc::Dl_info>::zeroed();
            // SAFETY: `f` is a function of a loaded library; `info` is written by dladdr.
            let found = unsafe { libc::dladdr(*f as *const c_void, info.as_mut_ptr()) } != 0;
            // SAFETY: dladdr filled `info` when it returned non-zero.
            let name = unsafe { info.assume_init() }.dli_fname;
            // SAFETY: a NUL-terminated path owned by the loader, valid while the library is.
            (found && !name.is_null()).then(|| unsafe { CStr::from_ptr(name) })
        })
        .map_or_else(
            || "file unknown".to_string(),
            |p| p.to_string_lossy().into_owned(),
        );
    // SAFETY: the marker, where present, is `extern "C" fn() -> *const c_char`.
    let marker = unsafe { lib.get::<unsafe extern "C" fn() -> *const c_char>(CPU_LIBCUDA_MARKER) };
    match marker {
        Ok(version) => {
            // SAFETY: the CPU libcuda returns a static NUL-terminated string.
            let v = unsafe { CStr::from_ptr(version()) };
            format!("streamexec's CPU libcuda {} ({file})", v.to_string_lossy())
        }
        Err(_) => format!("NVIDIA's driver ({file})"),
    }
}

/// The description of device `dev` from its attributes (no context needed).
pub(crate) fn describe(dev: sys::CUdevice, ordinal: usize) -> Result<DeviceDescription> {
    use sys::CUdevice_attribute as A;
    let at = |a| attribute(dev, a).unwrap_or(0);
    let name = result::device::get_name(dev).map_err(|e| cu_error("cuDeviceGetName", e))?;
    // SAFETY: a query of a valid device.
    let total = unsafe { result::device::total_mem(dev) }
        .map_err(|e| cu_error("cuDeviceTotalMem", e))? as u64;
    let mut version = 0;
    // SAFETY: writes one int.
    let _ = unsafe { sys::cuDriverGetVersion(&mut version) };
    let cc = (
        at(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
        at(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
    );
    Ok(DeviceDescription {
        platform: PLATFORM,
        ordinal,
        name,
        vendor: "NVIDIA".into(),
        platform_version: format!("CUDA {}.{}", version / 1000, (version % 1000) / 10),
        driver_version: version.to_string(),
        driver: driver_library(),
        total_memory: total,
        compute_units: at(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        max_threads_per_block: at(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        max_block_dims: [
            at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
            at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
            at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z),
        ],
        max_grid_dims: [
            at(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
            at(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
            at(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z),
        ],
        warp_size: at(A::CU_DEVICE_ATTRIBUTE_WARP_SIZE),
        shared_memory_per_block: at(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK) as u64,
        clock_rate_khz: attribute(dev, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        compute_capability: Some(cc),
        isa: Some(format!("sm_{}{}", cc.0, cc.1)),
        unified_memory: at(A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING) != 0
            && at(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0,
        host_mapped_memory: at(A::CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY) != 0,
        max_allocation: total,
        // An upper bound: the driver checks the kernel's occupancy at launch.
        max_cooperative_blocks: if at(A::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0 {
            at(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
                .saturating_mul(at(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR))
        } else {
            0
        },
    })
}

/// Compiles CUDA C++ to PTX for `cc` with NVRTC.
fn nvrtc_compile(source: &str, kernel: &str, cc: (u32, u32)) -> Result<String> {
    let load_err = |detail: String| Error::KernelLoad {
        platform: PLATFORM,
        kernel: kernel.into(),
        detail,
    };
    // SAFETY: only tries to dlopen the library names cudarc would use.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(load_err(
            "CUDA C++ source needs NVRTC (libnvrtc.so), which was not found; install the CUDA \
             toolkit's NVRTC (with the CPU libcuda: streamexec's libnvrtc, which \
             scripts/build-libcuda.sh puts next to it) or give the spec PTX"
                .into(),
        ));
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture=compute_{}{}", cc.0, cc.1)],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(source, opts)
        .map(|ptx| ptx.to_src())
        .map_err(|e| match e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => load_err(format!(
                "NVRTC failed to compile the CUDA C++ source:\n{}",
                log.to_string_lossy()
            )),
            other => load_err(format!("NVRTC failed: {other:?}")),
        })
}

/// The image a CUDA device of capability `cc` loads from `spec`.
#[derive(Debug)]
enum Chosen<'a> {
    Cubin(&'a KernelImage),
    Ptx(&'a KernelImage),
    Source(&'a KernelImage),
}

/// Cubin first (no JIT), then the best PTX for `cc` (highest keyed capability not above it,
/// else unkeyed), then CUDA C++ for NVRTC; else `NoSuitableFormat` saying why.
fn choose(spec: &MultiKernelLoaderSpec, cc: (u32, u32)) -> Result<Chosen<'_>> {
    if let Some(img) = spec.cuda_cubin().first() {
        return Ok(Chosen::Cubin(img));
    }
    if let Some(img) = spec.select_cuda_ptx(Some(cc)) {
        return Ok(Chosen::Ptx(img));
    }
    if let Some(img) = spec.cuda_source() {
        return Ok(Chosen::Source(img));
    }
    let keyed: Vec<String> = spec
        .cuda_ptx()
        .iter()
        .filter_map(|i| i.compute_capability)
        .map(|(a, b)| format!("sm_{a}{b}"))
        .collect();
    let note = if keyed.is_empty() {
        String::new()
    } else {
        format!(
            " (its PTX targets {}, all above this device's sm_{}{})",
            keyed.join(", "),
            cc.0,
            cc.1
        )
    };
    Err(spec.no_suitable_format(
        PLATFORM,
        &format!(
            "PTX for sm_{}{} or lower (add_cuda_ptx_in_memory / _on_disk), a cubin, or CUDA C++ \
             source (add_cuda_source_in_memory){note}",
            cc.0, cc.1
        ),
    ))
}

// SAFETY: every call binds the primary context and reports failures as `Err`; handles come
// from the driver and are destroyed only through the matching calls.
unsafe impl Driver for CudaDriver {
    const PLATFORM: &'static str = PLATFORM;
    const HAS_BLAS: bool = true;

    fn blas(&self) -> Result<Option<&dyn crate::platform::gpu::GpuBlas>> {
        match self.blas.get_or_init(|| {
            self.bind()?;
            super::blas::CudaBlas::new()
        }) {
            Ok(b) => Ok(b.as_ref().map(|b| b as &dyn crate::platform::gpu::GpuBlas)),
            Err(e) => Err(e.clone()),
        }
    }

    const CANNED_PTX: Option<&'static str> =
        Some(include_str!("../../../kernels/ptx/canned.O3.ptx"));

    const FFT_PTX: Option<&'static str> = Some(include_str!("../../../kernels/ptx/fft.O3.ptx"));

    const DNN_PTX: Option<&'static str> = Some(include_str!("../../../kernels/ptx/dnn.O3.ptx"));

    fn blas_library(&self) -> std::result::Result<&'static str, Option<String>> {
        // SAFETY: only tries to dlopen the library names cudarc would use.
        let present = unsafe { cudarc::cublas::sys::is_culib_present() };
        vendor_library(
            "cuBLAS",
            present,
            "libcublas.so.12 (or another name cudarc tries)",
        )
    }

    fn fft_library(&self) -> std::result::Result<&'static str, Option<String>> {
        // SAFETY: only tries to dlopen the library names cudarc would use.
        let present = unsafe { cudarc::cufft::sys::is_culib_present() };
        vendor_library(
            "cuFFT",
            present,
            "libcufft.so (or another name cudarc tries, e.g. libcufft.so.11)",
        )
    }

    fn dnn_library(&self) -> std::result::Result<&'static str, Option<String>> {
        // SAFETY: only tries to dlopen the library names cudarc would use.
        let present = unsafe { cudarc::cudnn::sys::is_culib_present() };
        vendor_library(
            "cuDNN",
            present,
            "libcudnn.so (or another name cudarc tries, e.g. libcudnn.so.9)",
        )
    }

    fn dnn(&self) -> Result<Option<&dyn crate::platform::gpu::GpuDnn>> {
        let made = self.dnn.get_or_init(|| {
            // SAFETY: only tries to dlopen the library names cudarc would use.
            if !unsafe { cudarc::cudnn::sys::is_culib_present() } {
                return Ok(None);
            }
            super::dnn::CudaDnn::new(self.ctx).map(Some)
        });
        match made {
            Ok(d) => Ok(d.as_ref().map(|d| d as &dyn crate::platform::gpu::GpuDnn)),
            Err(e) => Err(e.clone()),
        }
    }

    fn fft_plan(
        &self,
        desc: &crate::interface::fft::FftPlanDesc,
    ) -> Result<Box<dyn crate::platform::gpu::GpuFftPlan>> {
        Ok(Box::new(super::fft::CudaFftPlan::new(self.ctx, desc)?))
    }

    fn open(ordinal: usize) -> Result<Self> {
        CudaDriver::new(ordinal)
    }

    fn describe_device(ordinal: usize) -> Result<DeviceDescription> {
        let dev = result::device::get(ordinal as i32).map_err(|e| cu_error("cuDeviceGet", e))?;
        describe(dev, ordinal)
    }

    fn describe(&self) -> Result<DeviceDescription> {
        describe(self.dev, self.ordinal)
    }

    fn synchronize_device(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.call("cuCtxSynchronize", || unsafe { sys::cuCtxSynchronize() })
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (free, total) = result::mem_get_info().map_err(|e| cu_error("cuMemGetInfo", e))?;
        Ok((free as u64, total as u64))
    }

    fn mem_alloc(&self, bytes: u64) -> Result<u64> {
        let mut p = 0;
        // SAFETY: writes one device pointer.
        self.call("cuMemAlloc", || unsafe {
            sys::cuMemAlloc_v2(&mut p, bytes as usize)
        })?;
        Ok(p)
    }

    unsafe fn mem_free(&self, ptr: u64) -> Result<()> {
        // SAFETY: the caller guarantees `ptr` is ours and idle.
        self.call("cuMemFree", || unsafe { sys::cuMemFree_v2(ptr) })
    }

    fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<*mut u8> {
        let flags = if mapped {
            sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE
        } else {
            sys::CU_MEMHOSTALLOC_PORTABLE
        };
        let mut p = std::ptr::null_mut();
        // SAFETY: writes one host pointer.
        self.call("cuMemHostAlloc", || unsafe {
            sys::cuMemHostAlloc(&mut p, bytes, flags)
        })?;
        Ok(p as *mut u8)
    }

    unsafe fn host_free(&self, ptr: *mut u8) {
        // SAFETY: the caller guarantees `ptr` is ours and unused.
        let _ = self.call("cuMemFreeHost", || unsafe {
            sys::cuMemFreeHost(ptr as *mut c_void)
        });
    }

    unsafe fn host_device_pointer(&self, ptr: *mut u8) -> Result<u64> {
        let mut d = 0;
        // SAFETY: `ptr` is mapped host memory (caller); writes one device pointer.
        self.call("cuMemHostGetDevicePointer", || unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut d, ptr as *mut c_void, 0)
        })?;
        Ok(d)
    }

    fn stream_create(&self) -> Result<RawStream> {
        let mut s = MaybeUninit::uninit();
        // SAFETY: writes one stream handle.
        self.call("cuStreamCreate", || unsafe {
            sys::cuStreamCreate(
                s.as_mut_ptr(),
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            )
        })?;
        // SAFETY: initialised by the successful call.
        Ok(RawStream(unsafe { s.assume_init() } as usize))
    }

    unsafe fn stream_destroy(&self, s: RawStream) {
        // SAFETY: the caller's handle; the driver finishes queued work first.
        let _ = self.call("cuStreamDestroy", || unsafe {
            sys::cuStreamDestroy_v2(stream(s))
        });
    }

    fn stream_synchronize(&self, s: RawStream) -> Result<()> {
        // SAFETY: a live stream.
        self.call("cuStreamSynchronize", || unsafe {
            sys::cuStreamSynchronize(stream(s))
        })
    }

    fn launch_host_fn(&self, s: RawStream, f: HostFn) -> Result<()> {
        let user = Box::into_raw(Box::new(f));
        // SAFETY: `run_host_fn` takes back the box exactly once.
        let r = self.call("cuLaunchHostFunc", || unsafe {
            sys::cuLaunchHostFunc(stream(s), Some(run_host_fn), user as *mut c_void)
        });
        if r.is_err() {
            // SAFETY: not enqueued, so the box is still ours.
            drop(unsafe { Box::from_raw(user) });
        }
        r
    }

    unsafe fn memcpy_htod_async(
        &self,
        dst: u64,
        src: *const u8,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: the caller keeps `src` readable until the copy is done.
        self.call("cuMemcpyHtoDAsync", || unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src as *const c_void, bytes, stream(s))
        })
    }

    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: u64,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: the caller keeps `dst` writable until the copy is done.
        self.call("cuMemcpyDtoHAsync", || unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst as *mut c_void, src, bytes, stream(s))
        })
    }

    unsafe fn memcpy_dtod_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: both ranges are live (caller).
        self.call("cuMemcpyDtoDAsync", || unsafe {
            sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream(s))
        })
    }

    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        let mut can = 0;
        // SAFETY: valid devices; writes one int.
        self.call("cuDeviceCanAccessPeer", || unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, self.dev, peer.dev)
        })?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        self.bind()?;
        // SAFETY: a retained context of another device.
        match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx, 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
                Ok(())
            }
            e => Err(cu_error("cuCtxEnablePeerAccess", result::DriverError(e))),
        }
    }

    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        src_dev: &Self,
        src: u64,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: both ranges are live on their devices (caller).
        self.call("cuMemcpyPeerAsync", || unsafe {
            sys::cuMemcpyPeerAsync(dst, self.ctx, src, src_dev.ctx, bytes, stream(s))
        })
    }

    unsafe fn memset_d8_async(
        &self,
        dst: u64,
        value: u8,
        bytes: usize,
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: the range is live (caller).
        self.call("cuMemsetD8Async", || unsafe {
            sys::cuMemsetD8Async(dst, value, bytes, stream(s))
        })
    }

    unsafe fn memset_d32_async(
        &self,
        dst: u64,
        value: u32,
        count: usize,
        s: RawStream,
    ) -> Result<()> {
        // SAFETY: the range is live and aligned (caller).
        self.call("cuMemsetD32Async", || unsafe {
            sys::cuMemsetD32Async(dst, value, count, stream(s))
        })
    }

    unsafe fn memcpy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        // SAFETY: the device range is live (caller); `src` is borrowed for the call.
        self.call("cuMemcpyHtoD", || unsafe {
            sys::cuMemcpyHtoD_v2(dst, src.as_ptr() as *const c_void, src.len())
        })
    }

    unsafe fn memcpy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        // SAFETY: the device range is live (caller); `dst` is borrowed for the call.
        self.call("cuMemcpyDtoH", || unsafe {
            sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, src, dst.len())
        })
    }

    unsafe fn memset_d8(&self, dst: u64, value: u8, bytes: usize) -> Result<()> {
        // SAFETY: the device range is live (caller).
        self.call("cuMemsetD8", || unsafe {
            sys::cuMemsetD8_v2(dst, value, bytes)
        })
    }

    fn event_create(&self, timing: bool) -> Result<RawEvent> {
        let flags = if timing {
            sys::CUevent_flags::CU_EVENT_DEFAULT
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        self.bind()?;
        result::event::create(flags)
            .map(|e| RawEvent(e as usize))
            .map_err(|e| cu_error("cuEventCreate", e))
    }

    unsafe fn event_destroy(&self, e: RawEvent) {
        // SAFETY: the caller's handle.
        let _ = self.call("cuEventDestroy", || unsafe {
            sys::cuEventDestroy_v2(event(e))
        });
    }

    fn event_record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        // SAFETY: live handles.
        self.call("cuEventRecord", || unsafe {
            sys::cuEventRecord(event(e), stream(s))
        })
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        self.bind()?;
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(event(e)) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(cu_error("cuEventQuery", result::DriverError(other))),
        }
    }

    fn event_synchronize(&self, e: RawEvent) -> Result<()> {
        // SAFETY: a live event.
        self.call("cuEventSynchronize", || unsafe {
            sys::cuEventSynchronize(event(e))
        })
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        let mut ms = 0.0f32;
        // SAFETY: live events; writes one float.
        self.call("cuEventElapsedTime", || unsafe {
            sys::cuEventElapsedTime(&mut ms, event(start), event(end))
        })?;
        Ok(ms)
    }

    fn stream_wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        // SAFETY: live handles.
        self.call("cuStreamWaitEvent", || unsafe {
            sys::cuStreamWaitEvent(stream(s), event(e), 0)
        })
    }

    fn select_image(
        &self,
        spec: &MultiKernelLoaderSpec,
        d: &DeviceDescription,
    ) -> Result<ModuleImage> {
        let cc = d.compute_capability.unwrap_or((0, 0));
        let ptx_image = |text: String, name: &str, what: String| {
            let mut bytes = text.clone().into_bytes();
            if bytes.contains(&0) {
                return Err(Error::KernelLoad {
                    platform: PLATFORM,
                    kernel: name.into(),
                    detail: "the PTX contains a NUL byte".into(),
                });
            }
            bytes.push(0);
            Ok(ModuleImage {
                bytes,
                kernel_name: name.into(),
                ptx: Some(text),
                what,
            })
        };
        match choose(spec, cc)? {
            Chosen::Cubin(img) => Ok(ModuleImage {
                bytes: img.source.bytes()?.into_owned(),
                kernel_name: img.kernel_name.clone(),
                ptx: None,
                what: "cubin".into(),
            }),
            Chosen::Ptx(img) => {
                let what = match img.compute_capability {
                    Some((a, b)) => format!("PTX for sm_{a}{b}"),
                    None => "PTX".into(),
                };
                ptx_image(img.source.text()?.into_owned(), &img.kernel_name, what)
            }
            Chosen::Source(img) => {
                let ptx = nvrtc_compile(&img.source.text()?, &img.kernel_name, cc)?;
                ptx_image(ptx, &img.kernel_name, "CUDA C++ compiled by NVRTC".into())
            }
        }
    }

    fn module_load(&self, image: &ModuleImage) -> Result<RawModule> {
        const LOG: usize = 16 * 1024;
        let mut error_log = vec![0u8; LOG];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // JIT option values are passed as pointer-sized integers or pointers.
        let mut values: [*mut c_void; 2] =
            [error_log.as_mut_ptr() as *mut c_void, LOG as *mut c_void];
        let mut m = MaybeUninit::uninit();
        self.bind()?;
        // SAFETY: `image.bytes` is a NUL-terminated PTX text or a cubin; the log buffer has
        // the size given in the options; writes one module handle.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                m.as_mut_ptr(),
                image.bytes.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        if let Err(e) = r.result() {
            let end = error_log.iter().position(|&b| b == 0).unwrap_or(LOG);
            let log = String::from_utf8_lossy(&error_log[..end]);
            return Err(Error::KernelLoad {
                platform: PLATFORM,
                kernel: image.kernel_name.clone(),
                detail: format!(
                    "the driver rejected the {}: {}{}",
                    image.what,
                    cu_error("cuModuleLoadDataEx", e),
                    if log.trim().is_empty() {
                        String::new()
                    } else {
                        format!("\nJIT log:\n{}", log.trim_end())
                    }
                ),
            });
        }
        // SAFETY: initialised by the successful call.
        Ok(RawModule(unsafe { m.assume_init() } as usize))
    }

    unsafe fn module_unload(&self, m: RawModule) {
        // SAFETY: the caller guarantees no queued launch uses the module.
        let _ = self.call("cuModuleUnload", || unsafe {
            sys::cuModuleUnload(m.0 as sys::CUmodule)
        });
    }

    fn module_function(&self, m: RawModule, name: &str) -> Result<RawFunction> {
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(
                "get_kernel",
                format!("kernel name {name:?} contains a NUL byte"),
            )
        })?;
        let mut f = MaybeUninit::uninit();
        // SAFETY: a live module and a NUL-terminated name; writes one function handle.
        self.call("cuModuleGetFunction", || unsafe {
            sys::cuModuleGetFunction(f.as_mut_ptr(), m.0 as sys::CUmodule, cname.as_ptr())
        })?;
        // SAFETY: initialised by the successful call.
        Ok(RawFunction(unsafe { f.assume_init() } as usize))
    }

    fn module_global(&self, m: RawModule, name: &str) -> Result<Option<(u64, usize)>> {
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(
                "get_kernel",
                format!("global name {name:?} contains a NUL byte"),
            )
        })?;
        self.bind()?;
        let (mut ptr, mut bytes) = (0, 0usize);
        // SAFETY: a live module and a NUL-terminated name; writes an address and a size.
        let r = unsafe {
            sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, m.0 as sys::CUmodule, cname.as_ptr())
        };
        match r {
            sys::CUresult::CUDA_SUCCESS => Ok(Some((ptr, bytes))),
            sys::CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
            e => Err(cu_error("cuModuleGetGlobal", result::DriverError(e))),
        }
    }

    const GRAPH_KIND: &'static str = "CUDA graph";

    fn has_graphs(&self) -> bool {
        true
    }

    unsafe fn graph_chain(
        &self,
        nodes: &mut [GraphNode<'_>],
    ) -> Result<(RawGraph, Vec<RawGraphNode>)> {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.chain(nodes) }
    }

    unsafe fn graph_instantiate(&self, g: RawGraph) -> Result<RawGraphExec> {
        // SAFETY: the caller's live graph.
        unsafe { self.instantiate(g) }
    }

    unsafe fn graph_launch(&self, e: RawGraphExec, s: RawStream) -> Result<()> {
        // SAFETY: the caller's live exec; its memory is live until the launch is done.
        self.call("cuGraphLaunch", || unsafe {
            sys::cuGraphLaunch(e.0 as sys::CUgraphExec, stream(s))
        })
    }

    unsafe fn graph_exec_kernel_params(
        &self,
        e: RawGraphExec,
        n: RawGraphNode,
        node: KernelNode<'_>,
    ) -> Result<()> {
        // SAFETY: the caller's guarantees, passed on.
        unsafe { self.set_kernel_params(e, n, node) }
    }

    unsafe fn graph_destroy(&self, g: RawGraph) {
        // SAFETY: the caller's graph, not used again.
        let _ = self.call("cuGraphDestroy", || unsafe {
            sys::cuGraphDestroy(g.0 as sys::CUgraph)
        });
    }

    unsafe fn graph_exec_destroy(&self, e: RawGraphExec) {
        // SAFETY: the caller's exec, not used again; launches already made finish.
        let _ = self.call("cuGraphExecDestroy", || unsafe {
            sys::cuGraphExecDestroy(e.0 as sys::CUgraphExec)
        });
    }

    unsafe fn launch(
        &self,
        f: RawFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        s: RawStream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let func = f.0 as sys::CUfunction;
        // Dynamic shared memory above 48 KiB must be opted into per function.
        self.allow_shared(f, shared_bytes)?;
        // SAFETY: the caller's contract: one valid pointer per parameter.
        self.call("cuLaunchKernel", || unsafe {
            sys::cuLaunchKernel(
                func,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_bytes,
                stream(s),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    unsafe fn launch_cooperative(
        &self,
        f: RawFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        s: RawStream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let func = f.0 as sys::CUfunction;
        self.allow_shared(f, shared_bytes)?;
        // SAFETY: the caller's contract: one valid pointer per parameter.
        self.call("cuLaunchCooperativeKernel", || unsafe {
            sys::cuLaunchCooperativeKernel(
                func,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_bytes,
                stream(s),
                params.as_mut_ptr(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_chosen_cubin_then_ptx_by_capability_then_source() {
        let spec = MultiKernelLoaderSpec::new(0)
            .add_cuda_ptx_in_memory_for("p80", "k", (8, 0))
            .add_cuda_ptx_in_memory_for("p90", "k", (9, 0))
            .add_cuda_source_in_memory("src", "k");
        let pick = |spec: &MultiKernelLoaderSpec, cc| match choose(spec, cc).unwrap() {
            Chosen::Ptx(i) => format!("ptx {:?}", i.compute_capability),
            Chosen::Cubin(_) => "cubin".into(),
            Chosen::Source(_) => "source".into(),
        };
        assert_eq!(pick(&spec, (8, 6)), "ptx Some((8, 0))");
        assert_eq!(pick(&spec, (9, 0)), "ptx Some((9, 0))");
        assert_eq!(pick(&spec, (7, 5)), "source");
        let with_cubin = spec.clone().add_cuda_cubin_in_memory(b"\x7fELF", "k");
        assert_eq!(pick(&with_cubin, (9, 0)), "cubin");
        let only_new = MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory_for("p", "k", (9, 0));
        let err = choose(&only_new, (7, 0)).unwrap_err().to_string();
        assert!(
            err.contains("sm_90, all above this device's sm_70") && err.contains("CUDA PTX sm_90"),
            "{err}"
        );
    }
}
