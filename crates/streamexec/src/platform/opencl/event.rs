//! OpenCL events: the `cl_event` of the most recent record (a marker), re-recordable.

use std::any::Any;
use std::time::Duration;

use opencl3::event::{CL_COMPLETE, Event};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::status::{cl_error, command_failed};
use crate::error::{Error, Result};
use std::ffi::c_void;

use opencl3::types::{cl_event, cl_int};

use crate::interface::{EventInterface, EventStatus, ReadyFn};
use crate::platform::downcast::downcast;

#[derive(Default)]
enum State {
    #[default]
    Unrecorded,
    Recorded(Event),
    /// Recorded on a stream whose submissions wait behind a host callback: the marker exists
    /// once the stream's worker reaches the record.
    Deferred(Arc<DeferredRecord>),
    Failed(Error),
}

/// A record that a stream's worker will enqueue (or skip) later.
#[derive(Default)]
pub(crate) struct DeferredRecord {
    done: Mutex<Option<std::result::Result<Event, Error>>>,
    cv: Condvar,
    /// `notify_complete` callbacks waiting for the worker to enqueue or skip the record.
    ready: Mutex<Vec<ReadyFn>>,
}

// SAFETY: cl_event handles are thread-safe; the state is behind a Mutex.
unsafe impl Send for DeferredRecord {}
// SAFETY: as above.
unsafe impl Sync for DeferredRecord {}

impl DeferredRecord {
    pub(crate) fn resolve(&self, r: std::result::Result<Event, Error>) {
        *self.done.lock() = Some(r);
        self.cv.notify_all();
        let ready = std::mem::take(&mut *self.ready.lock());
        for f in ready {
            self.fire(f);
        }
    }

    /// Calls `f` when the resolved record completes.
    fn fire(&self, f: ReadyFn) {
        match self.wait() {
            Ok(ev) => notify_on(&ev, f),
            Err(e) => f(Err(e)),
        }
    }

    /// Calls `f` once the record is enqueued and complete, or skipped.
    fn notify(self: &Arc<Self>, f: ReadyFn) {
        {
            // Registered under the lock `resolve` takes after publishing: either it sees `f`
            // or this sees the result.
            let done = self.done.lock();
            if done.is_none() {
                self.ready.lock().push(f);
                return;
            }
        }
        self.fire(f);
    }

    /// Blocks until the worker has enqueued or skipped the record; a retained event or the error.
    pub(crate) fn wait(&self) -> std::result::Result<Event, Error> {
        let mut d = self.done.lock();
        while d.is_none() {
            self.cv.wait(&mut d);
        }
        match d.as_ref() {
            Some(Ok(ev)) => {
                // SAFETY: `ev` is live; the returned Event releases this reference.
                let _ = unsafe { opencl3::event::retain_event(ev.get()) };
                Ok(Event::new(ev.get()))
            }
            Some(Err(e)) => Err(e.clone()),
            None => unreachable!("waited until resolved"), // ok: loop above
        }
    }

    fn try_get(&self) -> Option<std::result::Result<Event, Error>> {
        let resolved = self.done.lock().is_some();
        resolved.then(|| self.wait())
    }
}

/// A streamexec event on OpenCL.
#[derive(Default)]
pub(crate) struct OpenClEvent {
    state: Mutex<State>,
}

// SAFETY: cl_event handles are thread-safe; the state is behind a Mutex.
unsafe impl Send for OpenClEvent {}
// SAFETY: as above.
unsafe impl Sync for OpenClEvent {}

/// What a wait must do, read at enqueue time.
pub(crate) enum WaitTarget {
    Nothing,
    Event(Event),
    Deferred(Arc<DeferredRecord>),
    Failed(Error),
}

fn profile_end(ev: &Event) -> Result<u64> {
    ev.profiling_command_end()
        .map_err(|e| cl_error("clGetEventProfilingInfo", e.0))
}

fn event_status(ev: &Event) -> EventStatus {
    match ev.command_execution_status() {
        Ok(s) if s.0 == CL_COMPLETE => EventStatus::Complete,
        Ok(s) if s.0 < 0 => EventStatus::Error(command_failed(s.0)),
        Ok(_) => EventStatus::Pending,
        Err(e) => EventStatus::Error(cl_error("clGetEventInfo", e.0)),
    }
}

extern "C" fn fire_ready(_ev: cl_event, status: cl_int, user: *mut c_void) {
    // SAFETY: `user` is the box leaked in `notify_on`; OpenCL calls this once.
    let f = unsafe { Box::from_raw(user as *mut ReadyFn) };
    f(if status < 0 {
        Err(command_failed(status))
    } else {
        Ok(())
    });
}

/// Calls `f` from OpenCL's callback when `ev` completes (or fails).
fn notify_on(ev: &Event, f: ReadyFn) {
    let raw = Box::into_raw(Box::new(f));
    if ev
        .set_callback(CL_COMPLETE, fire_ready, raw as *mut c_void)
        .is_err()
    {
        // SAFETY: the callback was not registered, so the box is still ours.
        let f = unsafe { Box::from_raw(raw) };
        f(wait_event(ev));
    }
}

/// Blocks until `ev` completes; its failure as an error.
pub(crate) fn wait_event(ev: &Event) -> Result<()> {
    let _ = ev.wait();
    match ev.command_execution_status() {
        Ok(s) if s.0 < 0 => Err(command_failed(s.0)),
        Ok(_) => Ok(()),
        Err(e) => Err(cl_error("clGetEventInfo", e.0)),
    }
}

impl OpenClEvent {
    pub(crate) fn set_recorded(&self, ev: Event) {
        *self.state.lock() = State::Recorded(ev);
    }

    pub(crate) fn set_deferred(&self, rec: Arc<DeferredRecord>) {
        *self.state.lock() = State::Deferred(rec);
    }

    /// The current record, retained so the caller may use it after the lock is gone.
    pub(crate) fn wait_target(&self) -> WaitTarget {
        match &*self.state.lock() {
            State::Unrecorded => WaitTarget::Nothing,
            State::Failed(e) => WaitTarget::Failed(e.clone()),
            State::Deferred(rec) => WaitTarget::Deferred(rec.clone()),
            State::Recorded(ev) => {
                // SAFETY: `ev` is a live event; the returned `Event` releases this reference.
                let _ = unsafe { opencl3::event::retain_event(ev.get()) };
                WaitTarget::Event(Event::new(ev.get()))
            }
        }
    }

    fn profile_end(&self) -> Result<u64> {
        match self.wait_target() {
            WaitTarget::Event(ev) => profile_end(&ev),
            WaitTarget::Deferred(rec) => profile_end(&rec.wait()?),
            _ => Err(Error::Event {
                detail: "the event has no completed record".into(),
            }),
        }
    }
}

impl EventInterface for OpenClEvent {
    fn status(&self) -> EventStatus {
        match &*self.state.lock() {
            State::Unrecorded => EventStatus::Unrecorded,
            State::Failed(e) => EventStatus::Error(e.clone()),
            State::Recorded(ev) => event_status(ev),
            State::Deferred(rec) => match rec.try_get() {
                None => EventStatus::Pending,
                Some(Ok(ev)) => event_status(&ev),
                Some(Err(e)) => EventStatus::Error(e),
            },
        }
    }

    fn synchronize(&self) -> Result<()> {
        match self.wait_target() {
            WaitTarget::Nothing => Ok(()),
            WaitTarget::Failed(e) => Err(e),
            WaitTarget::Event(ev) => wait_event(&ev),
            WaitTarget::Deferred(rec) => wait_event(&rec.wait()?),
        }
    }

    fn elapsed_since(&self, start: &dyn EventInterface) -> Result<Duration> {
        // Events of another platform are refused by `Event::elapsed_since`.
        let start = downcast::<OpenClEvent>(start.as_any(), "the start event of elapsed_since")?;
        let (t1, t0) = (self.profile_end()?, start.profile_end()?);
        Ok(Duration::from_nanos(t1.saturating_sub(t0)))
    }

    fn notify_complete(&self, ready: ReadyFn) -> Result<()> {
        match self.wait_target() {
            WaitTarget::Nothing => ready(Ok(())),
            WaitTarget::Failed(e) => ready(Err(e)),
            WaitTarget::Event(ev) => notify_on(&ev, ready),
            WaitTarget::Deferred(rec) => rec.notify(ready),
        }
        Ok(())
    }

    fn record_failure(&self, error: Error) {
        *self.state.lock() = State::Failed(error);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
