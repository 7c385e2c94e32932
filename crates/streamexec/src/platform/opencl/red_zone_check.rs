//! The red-zone check after a launch (`red_zone.rs` has the red zones themselves): which
//! buffers a launch (or the launches of a command buffer part) took; the check of a launch in a
//! completion callback on its event, and of a command buffer part as a native kernel right
//! behind it on the stream's in-order queue (or, on a device without native kernels, on the
//! submitting thread after waiting for the queue); and the `KernelFault` it puts in the
//! stream's error slot.

use std::ffi::c_void;
use std::sync::Arc;

use parking_lot::Mutex;

use super::memory::{ClAlloc, keep_until_complete};
use super::queue::{PendingChecks, StreamShared};
use super::red_zone::{Damage, FRONT, RedZones};
use super::status::{PLATFORM, cl_error};
use crate::error::{Error, Result};
use crate::types::DeviceAddress;

/// One buffer a launch passed, with red zones: the kernel, the argument indices that name the
/// buffer, and its base address.
struct Checked {
    alloc: Arc<ClAlloc>,
    kernel: String,
    args: Vec<usize>,
    base: DeviceAddress,
}

/// The red-zone check after a launch (or after the launches of a command buffer part): run by
/// the native kernel behind it, or inline.
pub(crate) struct CheckJob {
    buffers: Vec<Checked>,
    error: Arc<Mutex<Option<Error>>>,
}

impl CheckJob {
    /// The check for `kernel`'s buffers among `args` (index, address, allocation and byte
    /// offset of each pointer argument); `None` when none has red zones.
    pub(crate) fn new(
        kernel: &str,
        args: impl IntoIterator<Item = (usize, DeviceAddress, Arc<ClAlloc>, usize)>,
        shared: &StreamShared,
    ) -> Option<Self> {
        let mut buffers: Vec<Checked> = Vec::new();
        for (i, addr, alloc, off) in args {
            if alloc.red_zones().is_none() {
                continue;
            }
            match buffers.iter_mut().find(|c| Arc::ptr_eq(&c.alloc, &alloc)) {
                Some(c) => c.args.push(i),
                None => buffers.push(Checked {
                    alloc,
                    kernel: kernel.to_string(),
                    args: vec![i],
                    base: DeviceAddress::new(addr.raw() - off as u64),
                }),
            }
        }
        (!buffers.is_empty()).then(|| CheckJob {
            buffers,
            error: shared.error.clone(),
        })
    }

    /// Adds the buffers of a later launch that `self` does not check yet (a fault of a buffer
    /// both use is blamed on the earlier launch).
    pub(crate) fn extend(&mut self, later: CheckJob) {
        for c in later.buffers {
            if !self.buffers.iter().any(|b| Arc::ptr_eq(&b.alloc, &c.alloc)) {
                self.buffers.push(c);
            }
        }
    }

    /// Checks (and restores) every buffer's red zones; the fault of the first damaged one.
    fn run(&self) -> Result<()> {
        let mut first = None;
        for c in &self.buffers {
            let Some(z) = c.alloc.red_zones() else {
                continue;
            };
            if let Some(d) = z.check() {
                first.get_or_insert_with(|| self.fault(c, z, d));
            }
        }
        first.map_or(Ok(()), Err)
    }

    fn fault(&self, c: &Checked, z: &RedZones, d: Damage) -> Error {
        let args = c
            .args
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let (noun, len) = (
            if c.args.len() == 1 {
                "argument"
            } else {
                "arguments"
            },
            c.alloc.bytes,
        );
        let mut what = Vec::new();
        if let Some((near, far)) = d.after {
            what.push(format!(
                "out-of-bounds write past the end of the {len}-byte buffer of {noun} {args} at \
                 {}: bytes {near}..{far} past its end were changed",
                c.base
            ));
        }
        if let Some(far) = d.before {
            what.push(format!(
                "out-of-bounds write before the start of the {len}-byte buffer of {noun} {args} \
                 at {}: up to {far} bytes before its start were changed",
                c.base
            ));
        }
        Error::KernelFault {
            platform: PLATFORM,
            kernel: c.kernel.clone(),
            detail: format!(
                "{}. Caught by the red zones streamexec puts around buffers on CPU devices \
                 ({FRONT} bytes before, {} after this one), which are restored; writes further \
                 out are not caught. Check the kernel's indexing against the buffer sizes and \
                 the launch dimensions",
                what.join("; "),
                z.back_len()
            ),
        }
    }
}

/// The native kernel of a check: `args` points to the driver's copy of a `*const CheckJob`.
unsafe extern "C" fn run_native(args: *mut c_void) {
    // SAFETY: the argument block is the driver's copy of the pointer `enqueue` passed (read
    // unaligned: the driver need not align its copy); the job is kept alive until this
    // command's completion callback, which runs after this function returns.
    let job = unsafe { &*(args as *const *const CheckJob).read_unaligned() };
    // A panic must not unwind into the driver.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()));
    if let Ok(Err(e)) = result {
        job.error.lock().get_or_insert(e);
    }
}

/// Puts `job` on `shared`'s queue right behind what is there (the launch it checks): as a
/// native kernel where the device runs them (`native`), else by waiting for the queue here and
/// checking at once (the fault is then this call's error).
pub(crate) fn enqueue(shared: &StreamShared, job: CheckJob, native: bool) -> Result<()> {
    if !native {
        shared
            .marker()?
            .wait()
            .map_err(|e| cl_error("clWaitForEvents", e.0))?;
        return job.run();
    }
    let job = Arc::new(job);
    let mut block: *const CheckJob = Arc::as_ptr(&job);
    // SAFETY: the driver copies the pointer-sized argument block at enqueue; the job it points
    // to is kept alive until the command completes (below), and no memory objects are passed.
    let raw = unsafe {
        opencl3::command_queue::enqueue_native_kernel(
            shared.queue.get(),
            Some(run_native),
            &mut block as *mut *const CheckJob as *mut c_void,
            std::mem::size_of::<*const CheckJob>(),
            0,
            std::ptr::null(),
            std::ptr::null(),
            0,
            std::ptr::null(),
        )
    }
    .map_err(|e| {
        cl_error(
            "clEnqueueNativeKernel (the red-zone check after a launch)",
            e,
        )
    })?;
    keep_until_complete(&shared.track(raw), Box::new(job));
    Ok(())
}

/// A check run when the launch it follows completes (its box is dropped by the completion
/// callback `keep_until_complete` registers), counted in the stream's [`PendingChecks`].
struct OnComplete {
    job: CheckJob,
    pending: Arc<PendingChecks>,
}

impl Drop for OnComplete {
    fn drop(&mut self) {
        // A panic must not unwind into the driver's callback.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.job.run()));
        if let Ok(Err(e)) = result {
            self.job.error.lock().get_or_insert(e);
        }
        self.pending.done();
    }
}

/// Checks `job` when `launch` (the launch it belongs to) completes, in a completion callback:
/// cheaper than a command of its own (measured on PoCL: about 3 µs against 15 µs a launch).
/// `finish` and host callbacks wait for it, so a fault is the stream's error before either
/// reports; commands already queued behind the launch may run before the check.
pub(crate) fn check_on_complete(
    shared: &StreamShared,
    launch: &opencl3::event::Event,
    job: CheckJob,
) {
    shared.checks.add();
    let pending = shared.checks.clone();
    keep_until_complete(launch, Box::new(OnComplete { job, pending }));
}
