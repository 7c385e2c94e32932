//! Events on a CUDA-like driver, with record generations.
//!
//! A record may be queued behind a stream's host-side worker (deferred mode), so the driver
//! event may not be recorded yet when another stream asks to wait for it. Each record gets a
//! generation number when it is enqueued; the driver record happens later and publishes its
//! generation, and waiters that arrive early wait for that on the host (their stream goes
//! deferred). A record skipped because its stream failed publishes the failure instead.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::{Driver, RawEvent, RawStream};
use crate::error::{Error, Result};
use crate::interface::{EventInterface, EventStatus, ReadyFn};
use crate::platform::downcast::downcast;

#[derive(Default)]
struct Generations {
    /// Records enqueued so far.
    requested: u64,
    /// Highest generation whose driver record has been made (or skipped).
    recorded: u64,
    /// The failure of the latest failed generation.
    failed: Option<(u64, Error)>,
    /// `notify_complete` callbacks whose generation is not recorded yet.
    ready: Vec<(u64, ReadyFn)>,
}

/// An event of device `D`.
pub(crate) struct GpuEvent<D: Driver> {
    drv: Arc<D>,
    pub(crate) raw: RawEvent,
    state: Mutex<Generations>,
    published: Condvar,
}

impl<D: Driver> GpuEvent<D> {
    pub(crate) fn new(drv: Arc<D>, timing: bool) -> Result<Self> {
        let raw = drv.event_create(timing)?;
        Ok(GpuEvent {
            drv,
            raw,
            state: Mutex::new(Generations::default()),
            published: Condvar::new(),
        })
    }

    /// Reserves the next generation for a record about to be enqueued.
    pub(crate) fn begin_record(&self) -> u64 {
        let mut s = self.state.lock();
        s.requested += 1;
        s.requested
    }

    /// Records on `stream` for generation `generation` (called in stream order).
    pub(crate) fn record(&self, generation: u64, stream: RawStream) -> Result<()> {
        let r = self.drv.event_record(self.raw, stream);
        match &r {
            Ok(()) => self.publish(generation, None),
            Err(e) => self.publish(generation, Some(e.clone())),
        }
        r
    }

    /// Generation `generation` will never be recorded because its stream failed with `error`;
    /// the driver event is still recorded (best effort) so fences order after earlier work.
    pub(crate) fn skip(&self, generation: u64, stream: RawStream, error: &Error) {
        let _ = self.drv.event_record(self.raw, stream);
        self.publish(generation, Some(error.clone()));
    }

    fn publish(&self, generation: u64, failure: Option<Error>) {
        let mut s = self.state.lock();
        s.recorded = s.recorded.max(generation);
        if let Some(e) = failure {
            s.failed = Some((generation, e));
        }
        let recorded = s.recorded;
        let (fire, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut s.ready)
            .into_iter()
            .partition(|(g, _)| *g <= recorded);
        s.ready = keep;
        let fire: Vec<_> = fire
            .into_iter()
            .map(|(g, f)| {
                (
                    s.failed
                        .as_ref()
                        .filter(|(fg, _)| *fg == g)
                        .map(|(_, e)| e.clone()),
                    f,
                )
            })
            .collect();
        drop(s);
        self.published.notify_all();
        for (failure, f) in fire {
            match failure {
                Some(e) => f(Err(e)),
                None => self.notify_driver(f),
            }
        }
    }

    /// Calls `ready` from a driver host function once the driver record completes: a private
    /// stream waits for the event, then runs it (the stream is destroyed at once; the driver
    /// finishes its work first).
    fn notify_driver(&self, ready: ReadyFn) {
        let slot = Arc::new(Mutex::new(Some(ready)));
        let in_fn = slot.clone();
        let issued = self.drv.stream_create().and_then(|s| {
            let r = self.drv.stream_wait_event(s, self.raw).and_then(|()| {
                self.drv.launch_host_fn(
                    s,
                    Box::new(move || {
                        if let Some(f) = in_fn.lock().take() {
                            f(Ok(()));
                        }
                    }),
                )
            });
            // SAFETY: our own stream, not used again; queued work still runs.
            unsafe { self.drv.stream_destroy(s) };
            r
        });
        // Only a failed issue takes the callback back: otherwise the host function owns it.
        if let Err(e) = issued
            && let Some(f) = slot.lock().take()
        {
            f(Err(e));
        }
    }

    /// The latest requested generation, and its failure if it is known to have failed.
    pub(crate) fn latest(&self) -> (u64, Option<Error>) {
        let s = self.state.lock();
        let failed = s
            .failed
            .as_ref()
            .filter(|(g, _)| *g == s.requested)
            .map(|(_, e)| e.clone());
        (s.requested, failed)
    }

    /// True once generation `generation` has been recorded (or skipped).
    pub(crate) fn is_published(&self, generation: u64) -> bool {
        self.state.lock().recorded >= generation
    }

    /// Blocks until generation `generation` is recorded; its failure if it was skipped.
    pub(crate) fn wait_published(&self, generation: u64) -> Result<()> {
        let mut s = self.state.lock();
        while s.recorded < generation {
            self.published.wait(&mut s);
        }
        match &s.failed {
            Some((g, e)) if *g == generation => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// For fences: true when the driver record of `generation` has completed on the device.
    pub(crate) fn is_done(&self, generation: u64) -> bool {
        self.is_published(generation) && !matches!(self.drv.event_query(self.raw), Ok(false))
    }
}

impl<D: Driver> Drop for GpuEvent<D> {
    fn drop(&mut self) {
        // SAFETY: the event is ours; streams that recorded or wait on it hold the driver's own
        // reference (destroying a recorded event is allowed, the driver defers it).
        unsafe { self.drv.event_destroy(self.raw) };
    }
}

impl<D: Driver> EventInterface for GpuEvent<D> {
    fn status(&self) -> EventStatus {
        let (generation, failed) = self.latest();
        if generation == 0 {
            return EventStatus::Unrecorded;
        }
        if let Some(e) = failed {
            return EventStatus::Error(e);
        }
        if !self.is_published(generation) {
            return EventStatus::Pending;
        }
        match self.drv.event_query(self.raw) {
            Ok(true) => EventStatus::Complete,
            Ok(false) => EventStatus::Pending,
            Err(e) => EventStatus::Error(e),
        }
    }

    fn synchronize(&self) -> Result<()> {
        let (generation, _) = self.latest();
        if generation == 0 {
            return Ok(());
        }
        self.wait_published(generation)?;
        self.drv.event_synchronize(self.raw)
    }

    fn elapsed_since(&self, start: &dyn EventInterface) -> Result<Duration> {
        // Events of another platform are refused by `Event::elapsed_since`.
        let start = downcast::<GpuEvent<D>>(start.as_any(), "the start event of elapsed_since")?;
        for (what, e) in [("start", start), ("stop", self)] {
            if e.status() != EventStatus::Complete {
                return Err(Error::Event {
                    detail: format!(
                        "the {what} event is not complete ({:?}); synchronize the stream first",
                        e.status()
                    ),
                });
            }
        }
        let ms = self.drv.event_elapsed_ms(start.raw, self.raw)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn notify_complete(&self, ready: ReadyFn) -> Result<()> {
        let mut s = self.state.lock();
        let generation = s.requested;
        if generation == 0 {
            drop(s);
            ready(Ok(()));
        } else if let Some((_, e)) = s.failed.as_ref().filter(|(g, _)| *g == generation) {
            let e = e.clone();
            drop(s);
            ready(Err(e));
        } else if s.recorded >= generation {
            drop(s);
            self.notify_driver(ready);
        } else {
            s.ready.push((generation, ready));
        }
        Ok(())
    }

    fn record_failure(&self, error: Error) {
        let generation = self.begin_record();
        self.publish(generation, Some(error));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
