//! HIP calls for the shared GPU backend. Every call selects the device on the calling thread
//! first (`hipSetDevice` is a thread-local store).

use std::ffi::{CString, c_void};
use std::mem::MaybeUninit;
use std::panic::{AssertUnwindSafe, catch_unwind};

use hip_runtime_sys::{hipDeviceProp_t, hipEvent_t, hipStream_t};

use super::BINDINGS_MAJOR;
use super::ffi::{self, HipStatus};
use super::status::{PLATFORM, check, hip_error};
use crate::error::{Error, Result};
use crate::platform::gpu::{
    Driver, HostFn, ModuleImage, RawEvent, RawFunction, RawModule, RawStream,
};
use crate::types::DeviceDescription;
use crate::types::MultiKernelLoaderSpec;

/// One HIP device.
pub(crate) struct HipDriver {
    ordinal: usize,
}

impl HipDriver {
    pub(crate) fn new(ordinal: usize) -> Result<Self> {
        let d = HipDriver { ordinal };
        d.bind()?;
        Ok(d)
    }

    fn bind(&self) -> Result<()> {
        // SAFETY: selects a device for this thread.
        check("hipSetDevice", unsafe {
            ffi::hipSetDevice(self.ordinal as i32)
        })
    }

    /// Selects the device, then runs one HIP call.
    fn call(&self, name: &str, f: impl FnOnce() -> HipStatus) -> Result<()> {
        self.bind()?;
        check(name, f())
    }
}

fn stream(s: RawStream) -> hipStream_t {
    s.0 as hipStream_t
}

fn event(e: RawEvent) -> hipEvent_t {
    e.0 as hipEvent_t
}

fn dptr(p: u64) -> *mut c_void {
    p as usize as *mut c_void
}

extern "C" fn run_host_fn(_s: hipStream_t, _status: HipStatus, user: *mut c_void) {
    // SAFETY: `user` is the box leaked by `launch_host_fn`; HIP calls this once.
    let f = unsafe { Box::from_raw(user as *mut HostFn) };
    let _ = catch_unwind(AssertUnwindSafe(f));
}

/// The description of device `ordinal` from `hipGetDeviceProperties`, read only when the
/// runtime's major version has the struct layout of the bindings.
pub(crate) fn describe(ordinal: usize) -> Result<DeviceDescription> {
    let mut runtime = 0;
    // SAFETY: writes one int.
    check("hipRuntimeGetVersion", unsafe {
        ffi::hipRuntimeGetVersion(&mut runtime)
    })?;
    let major = runtime / 10_000_000;
    if major != BINDINGS_MAJOR {
        return Err(Error::unsupported(
            PLATFORM,
            "hipGetDeviceProperties",
            format!(
                "the HIP runtime is version {major}.x, but streamexec's hip-runtime-sys bindings \
                 describe HIP {BINDINGS_MAJOR}.x's hipDeviceProp_t; reading a struct of another \
                 layout would give garbage"
            ),
        ));
    }
    // Zeroed, and larger than the bindings' struct, so a runtime writing a few more bytes
    // than expected cannot overrun it.
    #[repr(C)]
    struct Padded {
        props: hipDeviceProp_t,
        _slack: [u8; 4096],
    }
    let mut p = Box::new(MaybeUninit::<Padded>::zeroed());
    // SAFETY: writes at most a hipDeviceProp_t into a zeroed, larger buffer.
    check("hipGetDeviceProperties", unsafe {
        ffi::hipGetDeviceProperties(p.as_mut_ptr() as *mut hipDeviceProp_t, ordinal as i32)
    })?;
    // SAFETY: zero-initialised plain data, then filled by HIP.
    let p = unsafe { p.assume_init() }.props;
    let cstr = |b: &[std::ffi::c_char]| {
        let bytes: Vec<u8> = b
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let u = |v: i32| v.max(0) as u32;
    let mut driver = 0;
    // SAFETY: writes one int.
    let _ = unsafe { ffi::hipDriverGetVersion(&mut driver) };
    Ok(DeviceDescription {
        platform: PLATFORM,
        ordinal,
        name: cstr(&p.name),
        vendor: "AMD".into(),
        platform_version: format!("HIP {}.{}", major, (runtime / 100_000) % 100),
        driver_version: driver.to_string(),
        driver: "AMD's HIP runtime (libamdhip64, linked)".into(),
        total_memory: p.totalGlobalMem as u64,
        compute_units: u(p.multiProcessorCount),
        max_threads_per_block: u(p.maxThreadsPerBlock),
        max_block_dims: p.maxThreadsDim.map(u),
        max_grid_dims: p.maxGridSize.map(u),
        warp_size: u(p.warpSize),
        shared_memory_per_block: p.sharedMemPerBlock as u64,
        clock_rate_khz: Some(u(p.clockRate)),
        compute_capability: None,
        isa: Some(cstr(&p.gcnArchName)),
        unified_memory: p.canMapHostMemory != 0,
        host_mapped_memory: p.canMapHostMemory != 0,
        max_allocation: p.totalGlobalMem as u64,
        // Cooperative launches are not wired to hipLaunchCooperativeKernel.
        max_cooperative_blocks: 0,
    })
}

// SAFETY: every call selects the device and reports failures as `Err`; handles come from HIP
// and are destroyed only through the matching calls.
unsafe impl Driver for HipDriver {
    const PLATFORM: &'static str = PLATFORM;

    fn open(ordinal: usize) -> Result<Self> {
        HipDriver::new(ordinal)
    }

    fn describe_device(ordinal: usize) -> Result<DeviceDescription> {
        describe(ordinal)
    }

    fn describe(&self) -> Result<DeviceDescription> {
        describe(self.ordinal)
    }

    fn synchronize_device(&self) -> Result<()> {
        // SAFETY: no arguments.
        self.call("hipDeviceSynchronize", || unsafe {
            ffi::hipDeviceSynchronize()
        })
    }

    fn mem_info(&self) -> Result<(u64, u64)> {
        let (mut free, mut total) = (0, 0);
        // SAFETY: writes two sizes.
        self.call("hipMemGetInfo", || unsafe {
            ffi::hipMemGetInfo(&mut free, &mut total)
        })?;
        Ok((free as u64, total as u64))
    }

    fn mem_alloc(&self, bytes: u64) -> Result<u64> {
        let mut p = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        self.call("hipMalloc", || unsafe {
            ffi::hipMalloc(&mut p, bytes as usize)
        })?;
        Ok(p as usize as u64)
    }

    unsafe fn mem_free(&self, ptr: u64) -> Result<()> {
        // SAFETY: the caller guarantees `ptr` is ours and idle.
        self.call("hipFree", || unsafe { ffi::hipFree(dptr(ptr)) })
    }

    fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<*mut u8> {
        let flags = if mapped {
            hip_runtime_sys::hipHostMallocMapped | hip_runtime_sys::hipHostMallocPortable
        } else {
            hip_runtime_sys::hipHostMallocPortable
        };
        let mut p = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        self.call("hipHostMalloc", || unsafe {
            ffi::hipHostMalloc(&mut p, bytes, flags)
        })?;
        Ok(p as *mut u8)
    }

    unsafe fn host_free(&self, ptr: *mut u8) {
        // SAFETY: the caller guarantees `ptr` is ours and unused.
        let _ = self.call("hipHostFree", || unsafe {
            ffi::hipHostFree(ptr as *mut c_void)
        });
    }

    unsafe fn host_device_pointer(&self, ptr: *mut u8) -> Result<u64> {
        let mut d = std::ptr::null_mut();
        // SAFETY: mapped host memory (caller); writes one pointer.
        self.call("hipHostGetDevicePointer", || unsafe {
            ffi::hipHostGetDevicePointer(&mut d, ptr as *mut c_void, 0)
        })?;
        Ok(d as usize as u64)
    }

    fn stream_create(&self) -> Result<RawStream> {
        let mut s = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.call("hipStreamCreateWithFlags", || unsafe {
            ffi::hipStreamCreateWithFlags(&mut s, hip_runtime_sys::hipStreamNonBlocking)
        })?;
        Ok(RawStream(s as usize))
    }

    unsafe fn stream_destroy(&self, s: RawStream) {
        // SAFETY: the caller's handle.
        let _ = self.call("hipStreamDestroy", || unsafe {
            ffi::hipStreamDestroy(stream(s))
        });
    }

    fn stream_synchronize(&self, s: RawStream) -> Result<()> {
        // SAFETY: a live stream.
        self.call("hipStreamSynchronize", || unsafe {
            ffi::hipStreamSynchronize(stream(s))
        })
    }

    fn launch_host_fn(&self, s: RawStream, f: HostFn) -> Result<()> {
        let user = Box::into_raw(Box::new(f));
        // SAFETY: `run_host_fn` takes back the box exactly once.
        let r = self.call("hipStreamAddCallback", || unsafe {
            ffi::hipStreamAddCallback(stream(s), run_host_fn, user as *mut c_void, 0)
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
        self.call("hipMemcpyHtoDAsync", || unsafe {
            ffi::hipMemcpyHtoDAsync(dptr(dst), src as *mut c_void, bytes, stream(s))
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
        self.call("hipMemcpyDtoHAsync", || unsafe {
            ffi::hipMemcpyDtoHAsync(dst as *mut c_void, dptr(src), bytes, stream(s))
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
        self.call("hipMemcpyDtoDAsync", || unsafe {
            ffi::hipMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream(s))
        })
    }

    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        let mut can = 0;
        // SAFETY: writes one int.
        self.call("hipDeviceCanAccessPeer", || unsafe {
            ffi::hipDeviceCanAccessPeer(&mut can, self.ordinal as i32, peer.ordinal as i32)
        })?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        self.bind()?;
        // SAFETY: plain call on the current device.
        match unsafe { ffi::hipDeviceEnablePeerAccess(peer.ordinal as i32, 0) } {
            HipStatus::SUCCESS | HipStatus::PEER_ACCESS_ALREADY_ENABLED => Ok(()),
            e => Err(hip_error("hipDeviceEnablePeerAccess", e)),
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
        self.call("hipMemcpyPeerAsync", || unsafe {
            ffi::hipMemcpyPeerAsync(
                dptr(dst),
                self.ordinal as i32,
                dptr(src),
                src_dev.ordinal as i32,
                bytes,
                stream(s),
            )
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
        self.call("hipMemsetD8Async", || unsafe {
            ffi::hipMemsetD8Async(dptr(dst), value, bytes, stream(s))
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
        self.call("hipMemsetD32Async", || unsafe {
            ffi::hipMemsetD32Async(dptr(dst), value as i32, count, stream(s))
        })
    }

    unsafe fn memcpy_htod(&self, dst: u64, src: &[u8]) -> Result<()> {
        // SAFETY: the device range is live (caller); HIP only reads `src`.
        self.call("hipMemcpyHtoD", || unsafe {
            ffi::hipMemcpyHtoD(dptr(dst), src.as_ptr() as *mut c_void, src.len())
        })
    }

    unsafe fn memcpy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()> {
        // SAFETY: the device range is live (caller).
        self.call("hipMemcpyDtoH", || unsafe {
            ffi::hipMemcpyDtoH(dst.as_mut_ptr() as *mut c_void, dptr(src), dst.len())
        })
    }

    unsafe fn memset_d8(&self, dst: u64, value: u8, bytes: usize) -> Result<()> {
        // SAFETY: the device range is live (caller).
        self.call("hipMemsetD8", || unsafe {
            ffi::hipMemsetD8(dptr(dst), value, bytes)
        })
    }

    fn event_create(&self, timing: bool) -> Result<RawEvent> {
        let flags = if timing {
            hip_runtime_sys::hipEventDefault
        } else {
            hip_runtime_sys::hipEventDisableTiming
        };
        let mut e = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.call("hipEventCreateWithFlags", || unsafe {
            ffi::hipEventCreateWithFlags(&mut e, flags)
        })?;
        Ok(RawEvent(e as usize))
    }

    unsafe fn event_destroy(&self, e: RawEvent) {
        // SAFETY: the caller's handle.
        let _ = self.call("hipEventDestroy", || unsafe {
            ffi::hipEventDestroy(event(e))
        });
    }

    fn event_record(&self, e: RawEvent, s: RawStream) -> Result<()> {
        // SAFETY: live handles.
        self.call("hipEventRecord", || unsafe {
            ffi::hipEventRecord(event(e), stream(s))
        })
    }

    fn event_query(&self, e: RawEvent) -> Result<bool> {
        self.bind()?;
        // SAFETY: a live event.
        match unsafe { ffi::hipEventQuery(event(e)) } {
            HipStatus::SUCCESS => Ok(true),
            HipStatus::NOT_READY => Ok(false),
            other => Err(hip_error("hipEventQuery", other)),
        }
    }

    fn event_synchronize(&self, e: RawEvent) -> Result<()> {
        // SAFETY: a live event.
        self.call("hipEventSynchronize", || unsafe {
            ffi::hipEventSynchronize(event(e))
        })
    }

    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32> {
        let mut ms = 0.0;
        // SAFETY: live events; writes one float.
        self.call("hipEventElapsedTime", || unsafe {
            ffi::hipEventElapsedTime(&mut ms, event(start), event(end))
        })?;
        Ok(ms)
    }

    fn stream_wait_event(&self, s: RawStream, e: RawEvent) -> Result<()> {
        // SAFETY: live handles.
        self.call("hipStreamWaitEvent", || unsafe {
            ffi::hipStreamWaitEvent(stream(s), event(e), 0)
        })
    }

    fn select_image(
        &self,
        spec: &MultiKernelLoaderSpec,
        _d: &DeviceDescription,
    ) -> Result<ModuleImage> {
        let img = spec.hsaco().ok_or_else(|| {
            spec.no_suitable_format(
                PLATFORM,
                "an HSACO code object (add_hsaco_in_memory / _on_disk)",
            )
        })?;
        Ok(ModuleImage {
            bytes: img.source.bytes()?.into_owned(),
            kernel_name: img.kernel_name.clone(),
            ptx: None,
            what: "HSACO code object".into(),
        })
    }

    fn module_load(&self, image: &ModuleImage) -> Result<RawModule> {
        let mut m = std::ptr::null_mut();
        // SAFETY: `image.bytes` outlives the call; writes one handle.
        self.call("hipModuleLoadData", || unsafe {
            ffi::hipModuleLoadData(&mut m, image.bytes.as_ptr() as *const c_void)
        })
        .map_err(|e| Error::KernelLoad {
            platform: PLATFORM,
            kernel: image.kernel_name.clone(),
            detail: format!("the runtime rejected the {}: {e}", image.what),
        })?;
        Ok(RawModule(m as usize))
    }

    unsafe fn module_unload(&self, m: RawModule) {
        // SAFETY: the caller guarantees no queued launch uses the module.
        let _ = self.call("hipModuleUnload", || unsafe {
            ffi::hipModuleUnload(m.0 as hip_runtime_sys::hipModule_t)
        });
    }

    fn module_function(&self, m: RawModule, name: &str) -> Result<RawFunction> {
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(
                "get_kernel",
                format!("kernel name {name:?} contains a NUL byte"),
            )
        })?;
        let mut f = std::ptr::null_mut();
        // SAFETY: a live module and a NUL-terminated name; writes one handle.
        self.call("hipModuleGetFunction", || unsafe {
            ffi::hipModuleGetFunction(&mut f, m.0 as hip_runtime_sys::hipModule_t, cname.as_ptr())
        })?;
        Ok(RawFunction(f as usize))
    }

    fn module_global(&self, m: RawModule, name: &str) -> Result<Option<(u64, usize)>> {
        let cname = CString::new(name).map_err(|_| {
            Error::invalid(
                "get_kernel",
                format!("global name {name:?} contains a NUL byte"),
            )
        })?;
        self.bind()?;
        let (mut ptr, mut bytes) = (std::ptr::null_mut(), 0usize);
        // SAFETY: a live module and a NUL-terminated name; writes an address and a size.
        let r = unsafe {
            ffi::hipModuleGetGlobal(
                &mut ptr,
                &mut bytes,
                m.0 as hip_runtime_sys::hipModule_t,
                cname.as_ptr(),
            )
        };
        match r {
            HipStatus::SUCCESS => Ok(Some((ptr as u64, bytes))),
            HipStatus::NOT_FOUND => Ok(None),
            e => Err(hip_error("hipModuleGetGlobal", e)),
        }
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
        // SAFETY: the caller's contract: one valid pointer per parameter.
        self.call("hipModuleLaunchKernel", || unsafe {
            ffi::hipModuleLaunchKernel(
                f.0 as hip_runtime_sys::hipFunction_t,
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
}
