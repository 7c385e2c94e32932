//! Events on a CUDA-like driver, with record generations and a driver event per generation.
//!
//! A record may be queued behind a stream's host-side worker (deferred mode), so the driver
//! record may not be made yet when another stream asks to wait for it. Each record gets a
//! generation number when it is enqueued; the driver record happens later, on a driver event
//! of its own, and publishes the generation with that event. A wait targets the generation
//! current when it is enqueued and waits for exactly that generation's driver event (on the
//! host first, its stream going deferred, when it is not published yet), so a later record
//! of the same event, on another stream, never stands in for it. A record skipped because its
//! stream failed publishes the failure instead.
//!
//! Driver events are kept while something may still need them: the latest record's (status,
//! `synchronize`, timing, fences) and those of generations that queued waits have yet to
//! issue.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::{Driver, RawEvent, RawStream};
use crate::error::{Error, Result};
use crate::interface::{EventInterface, EventStatus, ReadyFn};
use crate::platform::downcast::downcast;
use crate::platform::work_queue::WorkQueue;

/// One driver event, destroyed when the last user drops it (the driver defers destroying a
/// recorded event until it completes).
pub(crate) struct DriverEvent<D: Driver> {
    drv: Arc<D>,
    pub(crate) raw: RawEvent,
}

impl<D: Driver> Drop for DriverEvent<D> {
    fn drop(&mut self) {
        // SAFETY: ours; waits already enqueued on it hold the driver's own reference.
        unsafe { self.drv.event_destroy(self.raw) };
    }
}

/// The thread that backs `notify_complete` up (one per executor, started on first use): it
/// blocks in `event_synchronize` for each notification in turn. A driver host function
/// delivers the completion first in the normal case; this path delivers it when the context
/// has faulted, where CUDA documents that host functions are never called.
#[derive(Default)]
pub(crate) struct Notifier {
    queue: std::sync::OnceLock<Arc<WorkQueue>>,
}

impl Notifier {
    fn queue(&self, platform: &'static str) -> Result<&Arc<WorkQueue>> {
        if let Some(q) = self.queue.get() {
            return Ok(q);
        }
        let q = Arc::new(WorkQueue::default());
        q.spawn(format!("streamexec-{platform}-event-notifier"), platform)?;
        if let Err(q) = self.queue.set(q) {
            q.close(); // another thread won the race
        }
        Ok(self.queue.get().expect("set above")) // ok: set by us or the winner
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        if let Some(q) = self.queue.get() {
            q.close();
        }
    }
}

/// What a published generation left.
struct Published<D: Driver> {
    /// Its driver event (also made for a skipped record, so fences order after earlier work);
    /// `None` when creating or recording it failed.
    event: Option<Arc<DriverEvent<D>>>,
    /// Why the record failed or was skipped.
    failure: Option<Error>,
}

impl<D: Driver> Clone for Published<D> {
    fn clone(&self) -> Self {
        Published {
            event: self.event.clone(),
            failure: self.failure.clone(),
        }
    }
}

struct Generations<D: Driver> {
    /// Records enqueued so far (the latest record's generation).
    requested: u64,
    /// Generations enqueued and not yet published.
    unpublished: BTreeSet<u64>,
    /// Published generations still needed (see the module docs).
    published: BTreeMap<u64, Published<D>>,
    /// Waits enqueued for generations not published then, by generation: they look the
    /// generation up when they issue.
    pending_waits: BTreeMap<u64, usize>,
    /// `notify_complete` callbacks whose generation is not published yet.
    ready: Vec<(u64, ReadyFn)>,
}

impl<D: Driver> Default for Generations<D> {
    fn default() -> Self {
        Generations {
            requested: 0,
            unpublished: BTreeSet::new(),
            published: BTreeMap::new(),
            pending_waits: BTreeMap::new(),
            ready: Vec::new(),
        }
    }
}

impl<D: Driver> Generations<D> {
    fn is_published(&self, generation: u64) -> bool {
        generation <= self.requested && !self.unpublished.contains(&generation)
    }

    /// Forgets published generations nothing can ask for any more.
    fn prune(&mut self) {
        let (latest, waits) = (self.requested, &self.pending_waits);
        self.published
            .retain(|g, _| *g == latest || waits.contains_key(g));
    }
}

/// What a wait enqueued now waits for (see [`GpuEvent::wait_target`]).
pub(crate) enum WaitTarget<D: Driver> {
    /// Nothing: never recorded, or a published record whose driver event is gone (it failed).
    Nothing,
    /// The record failed or was skipped.
    Failed(Error),
    /// This driver event.
    Event(Arc<DriverEvent<D>>),
    /// Generation `0`, not published yet: [`GpuEvent::take_published`] once it is.
    Later(u64),
}

/// An event of device `D`.
pub(crate) struct GpuEvent<D: Driver> {
    drv: Arc<D>,
    timing: bool,
    /// The executor's notifier (`None` for internal fences, which nobody awaits).
    notifier: Option<Arc<Notifier>>,
    state: Mutex<Generations<D>>,
    published: Condvar,
}

impl<D: Driver> GpuEvent<D> {
    pub(crate) fn new(drv: Arc<D>, timing: bool) -> Result<Self> {
        Ok(GpuEvent {
            drv,
            timing,
            notifier: None,
            state: Mutex::new(Generations::default()),
            published: Condvar::new(),
        })
    }

    /// An event `Event::ready` may await: completions also go through `notifier`.
    pub(crate) fn awaitable(drv: Arc<D>, notifier: Arc<Notifier>) -> Result<Self> {
        let mut ev = Self::new(drv, true)?;
        ev.notifier = Some(notifier);
        Ok(ev)
    }

    /// Reserves the next generation for a record about to be enqueued.
    pub(crate) fn begin_record(&self) -> u64 {
        let mut s = self.state.lock();
        s.requested += 1;
        let g = s.requested;
        s.unpublished.insert(g);
        g
    }

    /// A new driver event recorded on `stream`.
    fn driver_record(&self, stream: RawStream) -> Result<Arc<DriverEvent<D>>> {
        let raw = self.drv.event_create(self.timing)?;
        let ev = Arc::new(DriverEvent {
            drv: self.drv.clone(),
            raw,
        });
        self.drv.event_record(raw, stream)?;
        Ok(ev)
    }

    /// Records on `stream` for generation `generation` (called in stream order).
    pub(crate) fn record(&self, generation: u64, stream: RawStream) -> Result<()> {
        match self.driver_record(stream) {
            Ok(ev) => {
                self.publish(generation, Some(ev), None);
                Ok(())
            }
            Err(e) => {
                self.publish(generation, None, Some(e.clone()));
                Err(e)
            }
        }
    }

    /// Generation `generation` will never be recorded because its stream failed with `error`;
    /// a driver event is still recorded (best effort) so fences order after earlier work.
    pub(crate) fn skip(&self, generation: u64, stream: RawStream, error: &Error) {
        let ev = self.driver_record(stream).ok();
        self.publish(generation, ev, Some(error.clone()));
    }

    fn publish(&self, generation: u64, event: Option<Arc<DriverEvent<D>>>, failure: Option<Error>) {
        let p = Published { event, failure };
        let mut s = self.state.lock();
        s.unpublished.remove(&generation);
        s.published.insert(generation, p.clone());
        s.prune();
        let (fire, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut s.ready)
            .into_iter()
            .partition(|(g, _)| *g == generation);
        s.ready = keep;
        drop(s);
        self.published.notify_all();
        for (_, f) in fire {
            self.notify_published(&p, f);
        }
    }

    /// What a wait enqueued now must wait for: the latest record. A `Later` target counts
    /// as a pending wait until [`take_published`](Self::take_published) is called for it.
    pub(crate) fn wait_target(&self) -> WaitTarget<D> {
        let mut s = self.state.lock();
        let g = s.requested;
        if g == 0 {
            return WaitTarget::Nothing;
        }
        if !s.is_published(g) {
            *s.pending_waits.entry(g).or_default() += 1;
            return WaitTarget::Later(g);
        }
        match s.published.get(&g) {
            Some(Published {
                failure: Some(e), ..
            }) => WaitTarget::Failed(e.clone()),
            Some(Published {
                event: Some(ev), ..
            }) => WaitTarget::Event(ev.clone()),
            _ => WaitTarget::Nothing,
        }
    }

    /// Blocks until generation `generation` (a `Later` target) is published, and hands back
    /// its driver event, or its failure.
    pub(crate) fn take_published(&self, generation: u64) -> Result<Option<Arc<DriverEvent<D>>>> {
        let mut s = self.state.lock();
        while !s.is_published(generation) {
            self.published.wait(&mut s);
        }
        let p = s.published.get(&generation).cloned();
        if let Some(n) = s.pending_waits.get_mut(&generation) {
            *n -= 1;
            if *n == 0 {
                s.pending_waits.remove(&generation);
            }
        }
        s.prune();
        match p {
            Some(Published {
                failure: Some(e), ..
            }) => Err(e),
            Some(p) => Ok(p.event),
            None => Ok(None),
        }
    }

    /// The latest record's driver event, once it is published (blocking until then); `None`
    /// when never recorded.
    fn latest_event(&self) -> Result<Option<Arc<DriverEvent<D>>>> {
        let mut s = self.state.lock();
        let g = s.requested;
        if g == 0 {
            return Ok(None);
        }
        while !s.is_published(g) {
            self.published.wait(&mut s);
        }
        match s.published.get(&g) {
            Some(Published {
                failure: Some(e), ..
            }) => Err(e.clone()),
            Some(p) => Ok(p.event.clone()),
            None => Ok(None),
        }
    }

    /// For fences (one record each): true when the driver record of `generation` has
    /// completed on the device.
    pub(crate) fn is_done(&self, generation: u64) -> bool {
        let s = self.state.lock();
        if !s.is_published(generation) {
            return false;
        }
        match s.published.get(&generation).and_then(|p| p.event.clone()) {
            Some(ev) => {
                drop(s);
                !matches!(self.drv.event_query(ev.raw), Ok(false))
            }
            None => true,
        }
    }

    /// Calls `ready` once published generation `p` completes.
    fn notify_published(&self, p: &Published<D>, ready: ReadyFn) {
        match (&p.failure, &p.event) {
            (Some(e), _) => ready(Err(e.clone())),
            (None, Some(ev)) => self.notify_driver(ev.clone(), ready),
            (None, None) => ready(Ok(())),
        }
    }

    /// Calls `ready` once `ev` completes: from a driver host function on a private stream
    /// that waits for the event (the stream is destroyed at once; the driver finishes its work
    /// first), or from the executor's notifier thread when the context has faulted and the
    /// host function never runs, whichever comes first.
    fn notify_driver(&self, ev: Arc<DriverEvent<D>>, ready: ReadyFn) {
        let slot = Arc::new(Mutex::new(Some(ready)));
        let fire = move |slot: &Mutex<Option<ReadyFn>>, r: Result<()>| {
            if let Some(f) = slot.lock().take() {
                f(r);
            }
        };
        let in_fn = slot.clone();
        let issued = self.drv.stream_create().and_then(|s| {
            let r = self.drv.stream_wait_event(s, ev.raw).and_then(|()| {
                self.drv
                    .launch_host_fn(s, Box::new(move || fire(&in_fn, Ok(()))))
            });
            // SAFETY: our own stream, not used again; queued work still runs.
            unsafe { self.drv.stream_destroy(s) };
            r
        });
        if let Err(e) = issued {
            fire(&slot, Err(e));
            return;
        }
        let queue = self.notifier.as_ref().map(|n| n.queue(D::PLATFORM));
        match queue {
            Some(Ok(q)) => {
                let drv = self.drv.clone();
                q.push(
                    Box::new(move || {
                        let r = drv.event_synchronize(ev.raw);
                        fire(&slot, r);
                        Ok(())
                    }),
                    None,
                );
            }
            Some(Err(e)) => fire(&slot, Err(e)),
            None => {}
        }
    }
}

impl<D: Driver> EventInterface for GpuEvent<D> {
    fn status(&self) -> EventStatus {
        let s = self.state.lock();
        let g = s.requested;
        if g == 0 {
            return EventStatus::Unrecorded;
        }
        if !s.is_published(g) {
            return EventStatus::Pending;
        }
        let ev = match s.published.get(&g) {
            Some(Published {
                failure: Some(e), ..
            }) => return EventStatus::Error(e.clone()),
            Some(Published {
                event: Some(ev), ..
            }) => ev.clone(),
            _ => return EventStatus::Complete,
        };
        drop(s);
        match self.drv.event_query(ev.raw) {
            Ok(true) => EventStatus::Complete,
            Ok(false) => EventStatus::Pending,
            Err(e) => EventStatus::Error(e),
        }
    }

    fn synchronize(&self) -> Result<()> {
        match self.latest_event()? {
            Some(ev) => self.drv.event_synchronize(ev.raw),
            None => Ok(()),
        }
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
        let missing = || Error::Event {
            detail: "an event's driver record is missing; record both events again".into(),
        };
        let t0 = start.latest_event()?.ok_or_else(missing)?;
        let t1 = self.latest_event()?.ok_or_else(missing)?;
        let ms = self.drv.event_elapsed_ms(t0.raw, t1.raw)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1e3))
    }

    fn notify_complete(&self, ready: ReadyFn) -> Result<()> {
        let mut s = self.state.lock();
        let g = s.requested;
        if g == 0 {
            drop(s);
            ready(Ok(()));
        } else if !s.is_published(g) {
            s.ready.push((g, ready));
        } else {
            let p = s.published.get(&g).cloned();
            drop(s);
            match p {
                Some(p) => self.notify_published(&p, ready),
                None => ready(Ok(())),
            }
        }
        Ok(())
    }

    fn record_failure(&self, error: Error) {
        let generation = self.begin_record();
        self.publish(generation, None, Some(error));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
