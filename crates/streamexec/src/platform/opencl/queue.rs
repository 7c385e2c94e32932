//! One stream's command queue as the executor also sees it: the in-order profiling queue, the
//! stream's error slot, the commands not yet checked for failure, and the direct/deferred
//! submitter. `OpenClStream` (stream.rs) enqueues through it; the executor keeps a weak set of
//! them so `synchronize_all` can finish every stream.

use std::sync::Arc;

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::event::{CL_COMPLETE, Event};
use opencl3::types::{cl_command_queue_properties, cl_event};
use parking_lot::{Condvar, Mutex};

use super::status::{PLATFORM, cl_error};
use crate::error::{Error, Result};
use crate::platform::work_queue::{RunFn, SkipFn, Submitter};

type ErrorSlot = Arc<Mutex<Option<Error>>>;

/// A new in-order profiling queue: a stream's, or one with the same properties (command
/// buffers are recorded against one and enqueued on the streams' queues, which must have the
/// properties of the queue recorded against).
pub(super) fn stream_queue(context: &Context) -> Result<CommandQueue> {
    CommandQueue::create_default_with_properties(context, STREAM_QUEUE_PROPERTIES, 0)
        .map_err(|e| cl_error("clCreateCommandQueueWithProperties", e.0))
}

/// The properties of every stream's queue.
pub(super) const STREAM_QUEUE_PROPERTIES: cl_command_queue_properties = CL_QUEUE_PROFILING_ENABLE;

/// The part of a stream the executor keeps to synchronise it.
pub(crate) struct StreamShared {
    pub(super) queue: CommandQueue,
    pub(super) error: ErrorSlot,
    /// Commands since the last `finish`, checked for failure then.
    pending: Mutex<Vec<Event>>,
    /// Direct or deferred submission.
    pub(super) submitter: Submitter,
    /// Red-zone checks registered on launches' completion and not yet run (`red_zone_check.rs`).
    pub(super) checks: Arc<PendingChecks>,
}

/// A count of red-zone checks that run in completion callbacks: whoever reports the stream's
/// state (`finish`, host callbacks) waits for it to reach zero, since OpenCL may call a
/// callback after `clFinish` or a later marker has returned.
#[derive(Default)]
pub(crate) struct PendingChecks {
    n: Mutex<usize>,
    idle: Condvar,
}

impl PendingChecks {
    pub(super) fn add(&self) {
        *self.n.lock() += 1;
    }

    pub(super) fn done(&self) {
        let mut n = self.n.lock();
        *n -= 1;
        if *n == 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until every registered check has run.
    pub(super) fn wait_idle(&self) {
        let mut n = self.n.lock();
        while *n > 0 {
            self.idle.wait(&mut n);
        }
    }
}

// SAFETY: OpenCL queues and events are thread-safe handles; the rest is behind Mutexes.
unsafe impl Send for StreamShared {}
// SAFETY: as above.
unsafe impl Sync for StreamShared {}

impl StreamShared {
    /// A new in-order profiling queue on `context`, in direct mode.
    pub(super) fn new(context: &Context) -> Result<Self> {
        let queue = stream_queue(context)?;
        let error: ErrorSlot = Arc::new(Mutex::new(None));
        Ok(StreamShared {
            queue,
            error: error.clone(),
            pending: Mutex::new(Vec::new()),
            submitter: Submitter::new(error, "streamexec-opencl-stream", PLATFORM),
            checks: Arc::default(),
        })
    }

    /// Waits for the worker and every command, then reports the first failure.
    pub(crate) fn finish(&self) -> Result<()> {
        let _ = self.submitter.work().wait_idle(); // its failure is in the shared error slot
        let finished = self.queue.finish().map_err(|e| cl_error("clFinish", e.0));
        let pending = std::mem::take(&mut *self.pending.lock());
        for ev in pending {
            if let Ok(s) = ev.command_execution_status()
                && s.0 < 0
            {
                self.error
                    .lock()
                    .get_or_insert_with(|| cl_error("a queued command", s.0));
            }
        }
        if let Err(e) = finished {
            self.error.lock().get_or_insert(e);
        }
        self.checks.wait_idle();
        self.error.lock().clone().map_or(Ok(()), Err)
    }

    pub(super) fn track(&self, raw: cl_event) -> Event {
        // SAFETY: `raw` is live; the pending list's Event releases this extra reference.
        let _ = unsafe { opencl3::event::retain_event(raw) };
        let mut pending = self.pending.lock();
        if pending.len() >= 1024 {
            pending.retain(|e| {
                e.command_execution_status()
                    .is_ok_and(|s| s.0 != CL_COMPLETE)
            });
        }
        pending.push(Event::new(raw));
        drop(pending);
        let _ = self.queue.flush();
        Event::new(raw)
    }

    pub(super) fn submit(
        &self,
        run: RunFn,
        skip: Option<SkipFn>,
        force_deferred: bool,
    ) -> Result<()> {
        self.submitter.submit(run, skip, force_deferred)
    }

    pub(super) fn is_deferred(&self) -> bool {
        self.submitter.is_deferred()
    }

    pub(super) fn marker(&self) -> Result<Event> {
        // SAFETY: a marker with no wait list: it completes when earlier commands have.
        let raw = unsafe {
            opencl3::command_queue::enqueue_marker_with_wait_list(
                self.queue.get(),
                0,
                std::ptr::null(),
            )
        }
        .map_err(|e| cl_error("clEnqueueMarkerWithWaitList", e))?;
        Ok(self.track(raw))
    }

    pub(super) fn barrier_on(&self, ev: &Event) -> Result<()> {
        let raw = ev.get();
        // SAFETY: a barrier waiting for a live event of the same context.
        let barrier = unsafe {
            opencl3::command_queue::enqueue_barrier_with_wait_list(self.queue.get(), 1, &raw)
        }
        .map_err(|e| cl_error("clEnqueueBarrierWithWaitList", e))?;
        self.track(barrier);
        Ok(())
    }
}
