//! `cl_khr_command_buffer` as a device's driver provides it: detection, the entry points, and
//! an owned `cl_command_buffer_khr`. `command_buffer.rs` builds streamexec's command buffers on
//! it.
//!
//! # Which versions
//!
//! The extension is provisional and its ABI changed at version 0.9.5, which added a
//! `properties` parameter to every recording entry point except `clCommandNDRangeKernelKHR`
//! (which always had one). Calling a driver through the wrong signature shifts every argument,
//! so only the versions whose signatures this file declares, 0.9.0 to 0.9.4, are used (PoCL 3.1
//! reports 0.9.0); a device with another version, or none in `CL_DEVICE_EXTENSIONS_WITH_VERSION`,
//! gets plain replay. Supporting 0.9.5+ is a second set of signatures with a null
//! `properties` argument, untested here for want of such a driver.
//!
//! # Where the entry points come from
//!
//! Extension functions are not exported by ICD loaders (ocl-icd 2.3 exports none of these),
//! so `opencl3::command_buffer`, which looks them up in the loader (and has the 0.9.5+
//! signatures), cannot reach them; they are looked up per platform with
//! `clGetExtensionFunctionAddressForPlatform`, which the loader forwards to the driver.
//!
//! Copies and fills of SVM (`clCommandSVMMemcpyKHR`, from 0.9.4) are not used: PoCL 3.1 has
//! none, and a device that has them is untested here; such commands replay through the stream.

use std::ffi::{CString, c_void};

use cl3::ext::{
    CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR, CL_COMMAND_BUFFER_FLAGS_KHR,
    CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR,
    CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR, cl_command_buffer_khr,
    cl_command_buffer_properties_khr, cl_sync_point_khr,
};
use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::types::{
    cl_command_queue, cl_device_id, cl_event, cl_int, cl_kernel, cl_mem, cl_platform_id, cl_uint,
};

use super::queue::{STREAM_QUEUE_PROPERTIES, stream_queue};
use super::status::cl_error;
use crate::error::Result;

/// The extension's name in the device's extension string.
const EXTENSION: &str = "cl_khr_command_buffer";

// The 0.9.0–0.9.4 signatures (`cl_ext.h` of those versions).
type CreateFn = unsafe extern "C" fn(
    cl_uint,
    *const cl_command_queue,
    *const cl_command_buffer_properties_khr,
    *mut cl_int,
) -> cl_command_buffer_khr;
type FinalizeFn = unsafe extern "C" fn(cl_command_buffer_khr) -> cl_int;
type ReleaseFn = unsafe extern "C" fn(cl_command_buffer_khr) -> cl_int;
type EnqueueFn = unsafe extern "C" fn(
    cl_uint,
    *mut cl_command_queue,
    cl_command_buffer_khr,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
type NdRangeFn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    *const cl_command_buffer_properties_khr,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut c_void,
) -> cl_int;
type CopyBufferFn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut c_void,
) -> cl_int;
type FillBufferFn = unsafe extern "C" fn(
    cl_command_buffer_khr,
    cl_command_queue,
    cl_mem,
    *const c_void,
    usize,
    usize,
    usize,
    cl_uint,
    *const cl_sync_point_khr,
    *mut cl_sync_point_khr,
    *mut c_void,
) -> cl_int;

/// A device's command-buffer support: the entry points, whether a buffer may be enqueued again
/// while an earlier enqueue is pending, and the queue commands are recorded against.
pub(crate) struct CommandBufferSupport {
    create: CreateFn,
    finalize: FinalizeFn,
    release: ReleaseFn,
    enqueue: EnqueueFn,
    nd_range: NdRangeFn,
    copy_buffer: CopyBufferFn,
    fill_buffer: FillBufferFn,
    /// `CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR`: buffers are created with
    /// `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR`. Without it a buffer still pending is refused
    /// by `clEnqueueCommandBufferKHR` (`CL_INVALID_OPERATION`) and the caller records another.
    pub(super) simultaneous: bool,
    /// Recorded against, never enqueued on: it has the device and properties of every stream's
    /// queue, so each enqueue substitutes the submitting stream's queue for it.
    record_queue: CommandQueue,
}

// SAFETY: function pointers and an OpenCL queue handle, which OpenCL allows on any thread; the
// queue is only named in recording calls, never enqueued on.
unsafe impl Send for CommandBufferSupport {}
// SAFETY: as above; nothing is mutated after `detect`.
unsafe impl Sync for CommandBufferSupport {}

/// The address of extension function `name` of `platform`, if the driver has it.
fn lookup(platform: cl_platform_id, name: &str) -> Option<*mut c_void> {
    let lib = cl3::load_library().as_ref().ok()?;
    let name = CString::new(name).ok()?;
    let p = lib.clGetExtensionFunctionAddressForPlatform(platform, name.as_ptr())?;
    (!p.is_null()).then_some(p)
}

/// A device-info value that is one `cl_bitfield`.
fn bitfield(device: &Device, param: u32) -> std::result::Result<u64, String> {
    let bytes = device
        .get_data(param)
        .map_err(|e| format!("clGetDeviceInfo({param:#x}): {e}"))?;
    let bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("clGetDeviceInfo({param:#x}) returned {} bytes", bytes.len()))?;
    Ok(u64::from_ne_bytes(bytes))
}

impl CommandBufferSupport {
    /// The device's support, or why there is none (plain replay then).
    pub(super) fn detect(
        device: cl_device_id,
        context: &Context,
    ) -> std::result::Result<Self, String> {
        let d = Device::new(device);
        let listed = d
            .extensions()
            .map_err(|e| format!("clGetDeviceInfo(CL_DEVICE_EXTENSIONS): {e}"))?
            .split_whitespace()
            .any(|x| x == EXTENSION);
        if !listed {
            return Err(format!("the device does not report {EXTENSION}"));
        }
        let version = d
            .extensions_with_version()
            .ok()
            .and_then(|all| {
                all.into_iter().find(|x| {
                    let end = x.name.iter().position(|&c| c == 0).unwrap_or(x.name.len());
                    &x.name[..end] == EXTENSION.as_bytes()
                })
            })
            .map(|x| {
                (
                    x.version >> 22,
                    (x.version >> 12) & 0x3ff,
                    x.version & 0xfff,
                )
            })
            .ok_or_else(|| {
                format!(
                    "the device reports no version of {EXTENSION} \
                     (CL_DEVICE_EXTENSIONS_WITH_VERSION), so its ABI is unknown"
                )
            })?;
        if !matches!(version, (0, 9, 0..=4)) {
            return Err(format!(
                "{EXTENSION} {}.{}.{} has other entry-point signatures than 0.9.0-0.9.4, the \
                 versions supported here",
                version.0, version.1, version.2
            ));
        }
        let required = bitfield(&d, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR)?;
        if required & !STREAM_QUEUE_PROPERTIES != 0 {
            return Err(format!(
                "command buffers need queue properties {required:#x}, streams' queues have \
                 {STREAM_QUEUE_PROPERTIES:#x}"
            ));
        }
        let caps = bitfield(&d, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR)?;
        let platform = d
            .platform()
            .map_err(|e| format!("clGetDeviceInfo(CL_DEVICE_PLATFORM): {e}"))?;
        let get = |name: &str| {
            lookup(platform, name).ok_or_else(|| {
                format!("the driver reports {EXTENSION} but has no entry point {name}")
            })
        };
        // SAFETY: each transmute is of a non-null address the driver returned for that name,
        // whose signature in extension versions 0.9.0-0.9.4 (checked above) is the type's.
        let support = unsafe {
            CommandBufferSupport {
                create: std::mem::transmute::<*mut c_void, CreateFn>(get(
                    "clCreateCommandBufferKHR",
                )?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(get(
                    "clFinalizeCommandBufferKHR",
                )?),
                release: std::mem::transmute::<*mut c_void, ReleaseFn>(get(
                    "clReleaseCommandBufferKHR",
                )?),
                enqueue: std::mem::transmute::<*mut c_void, EnqueueFn>(get(
                    "clEnqueueCommandBufferKHR",
                )?),
                nd_range: std::mem::transmute::<*mut c_void, NdRangeFn>(get(
                    "clCommandNDRangeKernelKHR",
                )?),
                copy_buffer: std::mem::transmute::<*mut c_void, CopyBufferFn>(get(
                    "clCommandCopyBufferKHR",
                )?),
                fill_buffer: std::mem::transmute::<*mut c_void, FillBufferFn>(get(
                    "clCommandFillBufferKHR",
                )?),
                simultaneous: caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR != 0,
                record_queue: stream_queue(context).map_err(|e| e.to_string())?,
            }
        };
        Ok(support)
    }

    /// A new, empty command buffer in the recording state.
    pub(super) fn create(&self) -> Result<ClCommandBuffer> {
        let flags = if self.simultaneous {
            CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR
        } else {
            0
        };
        let props: [cl_command_buffer_properties_khr; 3] = [CL_COMMAND_BUFFER_FLAGS_KHR, flags, 0];
        let q = self.record_queue.get();
        let mut status: cl_int = 0;
        // SAFETY: one live queue, a zero-terminated property list, a status out-parameter.
        let raw = unsafe { (self.create)(1, &q, props.as_ptr(), &mut status) };
        if status != 0 || raw.is_null() {
            return Err(cl_error("clCreateCommandBufferKHR", status));
        }
        Ok(ClCommandBuffer {
            raw,
            release: self.release,
        })
    }

    /// Ends recording of `cb`.
    pub(super) fn finalize(&self, cb: &ClCommandBuffer) -> Result<()> {
        // SAFETY: a live command buffer in the recording state.
        match unsafe { (self.finalize)(cb.raw) } {
            0 => Ok(()),
            e => Err(cl_error("clFinalizeCommandBufferKHR", e)),
        }
    }

    /// Records a launch of `kernel` (whose arguments are set) after sync point `after`.
    ///
    /// # Safety
    /// `kernel` is live, of this context, and every argument is set and stays as set while
    /// `cb` may be enqueued (see `command_buffer.rs`: drivers read them at enqueue).
    pub(super) unsafe fn nd_range(
        &self,
        cb: &ClCommandBuffer,
        kernel: cl_kernel,
        global: &[usize; 3],
        local: &[usize; 3],
        after: Option<cl_sync_point_khr>,
    ) -> std::result::Result<cl_sync_point_khr, cl_int> {
        // SAFETY: per the contract; the sizes point at three values each.
        recorded(after, |n, wait, point| unsafe {
            (self.nd_range)(
                cb.raw,
                std::ptr::null_mut(),
                std::ptr::null(),
                kernel,
                3,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                n,
                wait,
                point,
                std::ptr::null_mut(),
            )
        })
    }

    /// Records a copy of `len` bytes between two buffers after sync point `after`.
    ///
    /// # Safety
    /// Both ranges lie inside live buffers of this context that outlive `cb`'s use.
    pub(super) unsafe fn copy_buffer(
        &self,
        cb: &ClCommandBuffer,
        src: (cl_mem, usize),
        dst: (cl_mem, usize),
        len: usize,
        after: Option<cl_sync_point_khr>,
    ) -> std::result::Result<cl_sync_point_khr, cl_int> {
        // SAFETY: per the contract.
        recorded(after, |n, wait, point| unsafe {
            (self.copy_buffer)(
                cb.raw,
                std::ptr::null_mut(),
                src.0,
                dst.0,
                src.1,
                dst.1,
                len,
                n,
                wait,
                point,
                std::ptr::null_mut(),
            )
        })
    }

    /// Records a fill of `len` bytes at byte `off` of `buffer` with `pattern` (copied at record
    /// time) after sync point `after`.
    ///
    /// # Safety
    /// The range lies inside a live buffer of this context that outlives `cb`'s use; `off` and
    /// `len` are multiples of the pattern's size.
    pub(super) unsafe fn fill_buffer(
        &self,
        cb: &ClCommandBuffer,
        buffer: cl_mem,
        pattern: &[u8],
        off: usize,
        len: usize,
        after: Option<cl_sync_point_khr>,
    ) -> std::result::Result<cl_sync_point_khr, cl_int> {
        // SAFETY: per the contract; the pattern is read during the call.
        recorded(after, |n, wait, point| unsafe {
            (self.fill_buffer)(
                cb.raw,
                std::ptr::null_mut(),
                buffer,
                pattern.as_ptr() as *const c_void,
                pattern.len(),
                off,
                len,
                n,
                wait,
                point,
                std::ptr::null_mut(),
            )
        })
    }

    /// Enqueues finalized `cb` on `queue` (in place of the queue it was recorded against): its
    /// event, or the status (`CL_INVALID_OPERATION`: still pending and not simultaneous-use).
    ///
    /// # Safety
    /// Everything `cb`'s commands use stays alive until the returned event completes.
    pub(super) unsafe fn enqueue(
        &self,
        cb: &ClCommandBuffer,
        queue: cl_command_queue,
    ) -> std::result::Result<cl_event, cl_int> {
        let mut q = queue;
        let mut event: cl_event = std::ptr::null_mut();
        // SAFETY: one live queue of this context with the recording queue's device and
        // properties; an event out-parameter (PoCL 3.1 needs one).
        let status = unsafe { (self.enqueue)(1, &mut q, cb.raw, 0, std::ptr::null(), &mut event) };
        if status == 0 && !event.is_null() {
            Ok(event)
        } else if status == 0 {
            Err(opencl3::error_codes::CL_INVALID_EVENT)
        } else {
            Err(status)
        }
    }
}

/// Records one command with `record` (given the wait list of sync point `after`, none for the
/// first command, and where to put its own sync point): the new sync point, or the status.
fn recorded(
    after: Option<cl_sync_point_khr>,
    record: impl FnOnce(cl_uint, *const cl_sync_point_khr, *mut cl_sync_point_khr) -> cl_int,
) -> std::result::Result<cl_sync_point_khr, cl_int> {
    let (n, wait) = match &after {
        Some(p) => (1, p as *const cl_sync_point_khr),
        None => (0, std::ptr::null()),
    };
    let mut point = 0;
    match record(n, wait, &mut point) {
        0 => Ok(point),
        status => Err(status),
    }
}

/// An owned `cl_command_buffer_khr`, released on drop (OpenCL keeps it for enqueues still
/// pending).
pub(super) struct ClCommandBuffer {
    raw: cl_command_buffer_khr,
    release: ReleaseFn,
}

// SAFETY: OpenCL objects are thread-safe handles; recording happens before it is shared.
unsafe impl Send for ClCommandBuffer {}
// SAFETY: as above; after finalize only `clEnqueueCommandBufferKHR` uses it.
unsafe impl Sync for ClCommandBuffer {}

impl Drop for ClCommandBuffer {
    fn drop(&mut self) {
        // SAFETY: our reference, released once; a failure leaks it rather than panicking.
        let _ = unsafe { (self.release)(self.raw) };
    }
}
