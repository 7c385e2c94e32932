//! Events (markers in a stream) and timers (two events).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::interface::{EventInterface, EventStatus};
use crate::stream::Signal;

/// A marker recorded into a stream with `then_record_event`; completes when the work before it
/// has. Other streams wait for it with `then_wait_for(&event)`. Re-recording moves the marker.
#[derive(Clone)]
pub struct Event {
    exec: StreamExecutor,
    pub(crate) inner: Arc<dyn EventInterface>,
}

impl Event {
    pub(crate) fn new(exec: StreamExecutor, inner: Arc<dyn EventInterface>) -> Self {
        Event { exec, inner }
    }
    /// The executor that made it.
    pub fn executor(&self) -> &StreamExecutor {
        &self.exec
    }
    /// State of the most recent record, without blocking.
    pub fn status(&self) -> EventStatus {
        self.inner.status()
    }
    /// True once the most recent record has completed.
    pub fn is_complete(&self) -> bool {
        self.inner.status() == EventStatus::Complete
    }
    /// Blocks until the most recent record completes; its stream's error if that stream
    /// failed before reaching it. An event never recorded returns at once.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }
    /// `synchronize` as a future: resolves once the most recent record (as of the first poll)
    /// has completed, to its stream's error if that stream failed before reaching it; at once
    /// for an event never recorded. The task is woken by the backend's completion path (the
    /// recording stream's worker on host, an OpenCL event callback, a CUDA/HIP host function
    /// on a private stream that waits for the event): no thread polls, and no particular
    /// async runtime is needed. Dropping it early is safe: nothing the device uses is freed.
    pub fn ready(&self) -> EventReady<'_> {
        EventReady {
            event: self,
            signal: None,
        }
    }
    /// Time from `start` to this event; both must be complete, and of one platform.
    pub fn elapsed_since(&self, start: &Event) -> Result<Duration> {
        if start.exec.platform_name() != self.exec.platform_name() {
            return Err(Error::Event {
                detail: format!(
                    "the start event belongs to another platform ({}, this event to {}); time \
                     events of one platform",
                    start.exec.platform_name(),
                    self.exec.platform_name()
                ),
            });
        }
        self.inner.elapsed_since(start.inner.as_ref())
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event({:?})", self.status())
    }
}

/// The future of [`Event::ready`].
#[must_use = "a future does nothing unless polled"]
pub struct EventReady<'a> {
    event: &'a Event,
    /// Set at the first poll, when the completion callback is registered.
    signal: Option<Arc<Signal<Result<()>>>>,
}

impl Future for EventReady<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        let signal = match &this.signal {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(Signal::default());
                let fire = s.clone();
                this.event
                    .inner
                    .notify_complete(Box::new(move |outcome| fire.fire(outcome)))?;
                this.signal = Some(s.clone());
                s
            }
        };
        match signal.poll(cx) {
            Some(outcome) => Poll::Ready(outcome),
            None => Poll::Pending,
        }
    }
}

/// Measures device time between `then_start_timer` and `then_stop_timer`.
#[derive(Clone, Debug)]
pub struct Timer {
    pub(crate) start: Event,
    pub(crate) stop: Event,
}

impl Timer {
    pub(crate) fn new(start: Event, stop: Event) -> Self {
        Timer { start, stop }
    }
    /// Elapsed time between start and stop. Blocks until the stop has completed; an `Event`
    /// error if the timer was never started and stopped.
    pub fn elapsed(&self) -> Result<Duration> {
        for (what, ev) in [("started", &self.start), ("stopped", &self.stop)] {
            if ev.status() == EventStatus::Unrecorded {
                return Err(Error::Event {
                    detail: format!(
                        "the timer was never {what}; call then_start_timer and then_stop_timer \
                         on a stream first"
                    ),
                });
            }
        }
        self.stop.synchronize()?;
        self.start.synchronize()?;
        self.stop.elapsed_since(&self.start)
    }
}
