//! noop's events. noop records none, so an event is never recorded, or failed: a stream in
//! its error state marks the events it skips as failed (`record_failure`), and waiters must
//! then fail instead of waiting forever. That part of the contract every backend implements,
//! devices or not.
//!
//! A real event keeps its most recent record (a driver event, or a generation counter as on
//! host and the GPU backend) so that waits enqueued later target the record current at enqueue.

use std::any::Any;
use std::time::Duration;

use parking_lot::Mutex;

use super::status::unsupported;
use crate::error::{Error, Result};
use crate::interface::{EventInterface, EventStatus, ReadyFn};

/// A noop event: never recorded, or failed with the error of the stream that skipped it.
#[derive(Default)]
pub(crate) struct NoopEvent {
    failed: Mutex<Option<Error>>,
}

impl NoopEvent {
    /// The error of the failed record, if the event's last "record" failed.
    pub(super) fn failure(&self) -> Option<Error> {
        self.failed.lock().clone()
    }
}

impl EventInterface for NoopEvent {
    fn status(&self) -> EventStatus {
        match self.failure() {
            Some(e) => EventStatus::Error(e),
            None => EventStatus::Unrecorded,
        }
    }

    fn synchronize(&self) -> Result<()> {
        // Never recorded: returns at once. Failed: that failure.
        self.failure().map_or(Ok(()), Err)
    }

    fn elapsed_since(&self, _start: &dyn EventInterface) -> Result<Duration> {
        // A real backend gets `start` back with `platform::downcast` (the handle layer refused
        // events of other platforms) and needs both records complete (`Error::Event` if not).
        Err(unsupported("elapsed_since", "noop records no events"))
    }

    fn notify_complete(&self, ready: ReadyFn) -> Result<()> {
        // Nothing is ever pending: the outcome is known now.
        ready(self.synchronize());
        Ok(())
    }

    fn record_failure(&self, error: Error) {
        *self.failed.lock() = Some(error);
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
