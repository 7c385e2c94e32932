//! Host-platform events: a generation counter and a condition variable.
//!
//! Each `record` takes the next generation when it is enqueued; a wait enqueued later targets
//! the generation current at that moment (CUDA's `cudaStreamWaitEvent` rule), so waits only
//! ever target records already enqueued and cannot form cycles.

use std::any::Any;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::interface::{EventInterface, EventStatus};
use crate::platform::downcast::downcast;

#[derive(Default)]
struct State {
    recorded: u64,
    completed: u64,
    /// Generation and error of the most recent failed record.
    failed: Option<(u64, Error)>,
    time: Option<Instant>,
}

/// A host-platform event.
#[derive(Default)]
pub(crate) struct HostEvent {
    state: Mutex<State>,
    cv: Condvar,
}

impl HostEvent {
    /// Takes the next generation for a record being enqueued.
    pub(crate) fn begin_record(&self) -> u64 {
        let mut s = self.state.lock();
        s.recorded += 1;
        s.recorded
    }

    /// Completes generation `generation`, successfully or not.
    pub(crate) fn complete(&self, generation: u64, result: Result<()>) {
        let mut s = self.state.lock();
        s.completed = s.completed.max(generation);
        match result {
            Ok(()) => {
                s.time = Some(Instant::now());
                if s.failed.as_ref().is_some_and(|(g, _)| *g <= generation) {
                    s.failed = None;
                }
            }
            Err(e) => s.failed = Some((generation, e)),
        }
        drop(s);
        self.cv.notify_all();
    }

    /// The generation a wait enqueued now must wait for.
    pub(crate) fn wait_target(&self) -> u64 {
        self.state.lock().recorded
    }

    /// Blocks until generation `target` completes.
    pub(crate) fn wait_for(&self, target: u64) -> Result<()> {
        let mut s = self.state.lock();
        while s.completed < target {
            self.cv.wait(&mut s);
        }
        match &s.failed {
            Some((g, e)) if *g >= target => Err(e.clone()),
            _ => Ok(()),
        }
    }
}

impl EventInterface for HostEvent {
    fn status(&self) -> EventStatus {
        let s = self.state.lock();
        if s.recorded == 0 {
            EventStatus::Unrecorded
        } else if s.completed < s.recorded {
            EventStatus::Pending
        } else if let Some((_, e)) = &s.failed {
            EventStatus::Error(e.clone())
        } else {
            EventStatus::Complete
        }
    }

    fn synchronize(&self) -> Result<()> {
        let target = self.wait_target();
        self.wait_for(target)
    }

    fn elapsed_since(&self, start: &dyn EventInterface) -> Result<Duration> {
        // Events of another platform are refused by `Event::elapsed_since`.
        let start = downcast::<HostEvent>(start.as_any(), "the start event of elapsed_since")?;
        let not_done = || Error::Event {
            detail: "both events must be recorded and complete; call synchronize() first".into(),
        };
        let t1 = self.state.lock().time.ok_or_else(not_done)?;
        let t0 = start.state.lock().time.ok_or_else(not_done)?;
        Ok(t1.saturating_duration_since(t0))
    }

    fn record_failure(&self, error: Error) {
        let g = self.begin_record();
        self.complete(g, Err(error));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
