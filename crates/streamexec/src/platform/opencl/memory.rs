//! OpenCL device memory: `cl_mem` buffers and fine-grained SVM allocations behind one type,
//! the enqueue helpers that pick the right OpenCL call for each, and keeping memory (device or
//! lent host memory) alive until the command that uses it completes.
//!
//! `cl_mem` buffers may be released while queued commands use them (OpenCL defers it). SVM
//! may not (`clSVMFree` is immediate), so commands that touch SVM keep their `Arc<ClAlloc>` until
//! their completion callback, and the last drop parks the pointer in the executor's reaper, which
//! frees it on an ordinary thread at the next allocation or synchronisation.
//!
//! On CPU devices buffers sit on the executor's own mappings between red zones (`red_zone.rs`);
//! a mapping is unmapped by its `cl_mem`'s destructor callback, so it too outlives every
//! command that uses the buffer.

use std::ffi::c_void;
use std::sync::Arc;

use opencl3::event::{CL_COMPLETE, Event};
use opencl3::memory::{Buffer, ClMem};
use opencl3::types::{cl_bool, cl_command_queue, cl_event, cl_int};
use parking_lot::Mutex;

use super::red_zone::RedZones;

/// SVM pointers whose last user has gone, waiting to be freed on an ordinary thread.
pub(crate) type Reaper = Arc<Mutex<Vec<usize>>>;

pub(crate) enum ClMemory {
    Buffer(Buffer<u8>),
    Svm { ptr: *mut c_void, reaper: Reaper },
}

/// One device allocation.
pub(crate) struct ClAlloc {
    pub(crate) mem: ClMemory,
    pub(crate) bytes: u64,
    /// The red zones around a buffer on a CPU device (`red_zone.rs`); their mapping lives as
    /// long as the buffer.
    pub(crate) red: Option<RedZones>,
}

// SAFETY: OpenCL memory objects and SVM pointers may be used from any thread.
unsafe impl Send for ClAlloc {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for ClAlloc {}

impl Drop for ClAlloc {
    fn drop(&mut self) {
        if let ClMemory::Svm { ptr, reaper } = &self.mem {
            reaper.lock().push(*ptr as usize);
        }
    }
}

type Enqueued = std::result::Result<cl_event, cl_int>;

impl ClAlloc {
    /// The red zones around this buffer, if it has them.
    pub(crate) fn red_zones(&self) -> Option<&RedZones> {
        self.red.as_ref()
    }

    /// The SVM address of byte `off`, for SVM allocations.
    pub(crate) fn svm_ptr(&self, off: usize) -> Option<*mut c_void> {
        match &self.mem {
            ClMemory::Svm { ptr, .. } => Some(ptr.wrapping_byte_add(off)),
            ClMemory::Buffer(_) => None,
        }
    }

    /// The `cl_mem`, for buffers.
    pub(crate) fn buffer(&self) -> Option<opencl3::types::cl_mem> {
        match &self.mem {
            ClMemory::Buffer(b) => Some(b.get()),
            ClMemory::Svm { .. } => None,
        }
    }

    /// Enqueues a copy of `len` host bytes at `src` to byte `off`.
    ///
    /// # Safety
    /// `src` readable for `len` bytes until the command completes; `off + len` in bounds.
    pub(crate) unsafe fn write(
        &self,
        q: cl_command_queue,
        blocking: cl_bool,
        off: usize,
        src: *const c_void,
        len: usize,
    ) -> Enqueued {
        // SAFETY: per the contract.
        unsafe {
            match &self.mem {
                ClMemory::Buffer(b) => opencl3::command_queue::enqueue_write_buffer(
                    q,
                    b.get(),
                    blocking,
                    off,
                    len,
                    src,
                    0,
                    std::ptr::null(),
                ),
                ClMemory::Svm { ptr, .. } => opencl3::command_queue::enqueue_svm_mem_cpy(
                    q,
                    blocking,
                    ptr.wrapping_byte_add(off),
                    src,
                    len,
                    0,
                    std::ptr::null(),
                ),
            }
        }
    }

    /// Enqueues a copy of `len` bytes at byte `off` to host bytes at `dst`.
    ///
    /// # Safety
    /// `dst` writable for `len` bytes until the command completes; `off + len` in bounds.
    pub(crate) unsafe fn read(
        &self,
        q: cl_command_queue,
        blocking: cl_bool,
        off: usize,
        dst: *mut c_void,
        len: usize,
    ) -> Enqueued {
        // SAFETY: per the contract.
        unsafe {
            match &self.mem {
                ClMemory::Buffer(b) => opencl3::command_queue::enqueue_read_buffer(
                    q,
                    b.get(),
                    blocking,
                    off,
                    len,
                    dst,
                    0,
                    std::ptr::null(),
                ),
                ClMemory::Svm { ptr, .. } => opencl3::command_queue::enqueue_svm_mem_cpy(
                    q,
                    blocking,
                    dst,
                    ptr.wrapping_byte_add(off),
                    len,
                    0,
                    std::ptr::null(),
                ),
            }
        }
    }

    /// Enqueues a fill of `len` bytes at byte `off` with `pattern`.
    ///
    /// # Safety
    /// `off + len` in bounds and both multiples of the pattern size.
    pub(crate) unsafe fn fill(
        &self,
        q: cl_command_queue,
        off: usize,
        pattern: &[u8],
        len: usize,
    ) -> Enqueued {
        let p = pattern.as_ptr() as *const c_void;
        // SAFETY: per the contract; OpenCL copies the pattern at enqueue.
        unsafe {
            match &self.mem {
                ClMemory::Buffer(b) => opencl3::command_queue::enqueue_fill_buffer(
                    q,
                    b.get(),
                    p,
                    pattern.len(),
                    off,
                    len,
                    0,
                    std::ptr::null(),
                ),
                ClMemory::Svm { ptr, .. } => opencl3::command_queue::enqueue_svm_mem_fill(
                    q,
                    ptr.wrapping_byte_add(off),
                    p,
                    pattern.len(),
                    len,
                    0,
                    std::ptr::null(),
                ),
            }
        }
    }
}

/// Enqueues a device-to-device copy between any two allocations.
///
/// # Safety
/// Both ranges in bounds of live allocations.
pub(crate) unsafe fn copy(
    q: cl_command_queue,
    src: &ClAlloc,
    so: usize,
    dst: &ClAlloc,
    doff: usize,
    len: usize,
) -> Enqueued {
    // SAFETY: per the contract; fine-grained SVM pointers are valid host pointers.
    unsafe {
        match (
            src.svm_ptr(so),
            dst.svm_ptr(doff),
            src.buffer(),
            dst.buffer(),
        ) {
            (None, None, Some(s), Some(d)) => opencl3::command_queue::enqueue_copy_buffer(
                q,
                s,
                d,
                so,
                doff,
                len,
                0,
                std::ptr::null(),
            ),
            (Some(s), None, _, _) => dst.write(q, opencl3::types::CL_NON_BLOCKING, doff, s, len),
            (None, Some(d), _, _) => src.read(q, opencl3::types::CL_NON_BLOCKING, so, d, len),
            (Some(s), Some(d), _, _) => opencl3::command_queue::enqueue_svm_mem_cpy(
                q,
                opencl3::types::CL_NON_BLOCKING,
                d,
                s,
                len,
                0,
                std::ptr::null(),
            ),
            _ => Err(opencl3::error_codes::CL_INVALID_MEM_OBJECT),
        }
    }
}

extern "C" fn release_keepalive(_ev: cl_event, _status: cl_int, user: *mut c_void) {
    // SAFETY: `user` is the box leaked in `keep_until_complete`; OpenCL calls this once.
    drop(unsafe { Box::from_raw(user as *mut Box<dyn Send>) });
}

/// Keeps `keep` alive until `ev` completes (or fails).
pub(crate) fn keep_until_complete(ev: &Event, keep: Box<dyn Send>) {
    let raw = Box::into_raw(Box::new(keep));
    if ev
        .set_callback(CL_COMPLETE, release_keepalive, raw as *mut c_void)
        .is_err()
    {
        // SAFETY: the callback was not registered, so the box is still ours.
        let keep = unsafe { Box::from_raw(raw) };
        let _ = ev.wait();
        drop(keep);
    }
}

/// Frees every SVM pointer in `reaper`.
pub(crate) fn reap(context: opencl3::types::cl_context, reaper: &Reaper) {
    for p in std::mem::take(&mut *reaper.lock()) {
        // SAFETY: the pointer came from clSVMAlloc on this context and no command uses it:
        // every command that did held an Arc<ClAlloc> until it completed.
        let _ = unsafe { opencl3::memory::svm_free(context, p as *mut c_void) };
    }
}

/// Keeps `alloc` alive until `ev` completes when it is SVM (buffers need no help).
pub(crate) fn keep_svm(ev: &Event, allocs: &[&Arc<ClAlloc>]) {
    let svm: Vec<Arc<ClAlloc>> = allocs
        .iter()
        .filter(|a| a.svm_ptr(0).is_some())
        .map(|a| Arc::clone(a))
        .collect();
    if !svm.is_empty() {
        keep_until_complete(ev, Box::new(svm));
    }
}
