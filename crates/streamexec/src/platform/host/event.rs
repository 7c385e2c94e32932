//! Host-platform events: a generation counter, the set of completed generations, and a
//! condition variable.
//!
//! Each `record` takes the next generation when it is enqueued; a wait enqueued later targets
//! the generation current at that moment (CUDA's `cudaStreamWaitEvent` rule), so waits only
//! ever target records already enqueued and cannot form cycles.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::interface::{EventInterface, EventStatus, ReadyFn};
use crate::platform::downcast::downcast;

#[derive(Default)]
struct State {
    /// Generations taken so far (the latest record's).
    recorded: u64,
    /// Every generation up to this one has completed.
    prefix: u64,
    /// Completed generations above `prefix`: records on different streams complete out of
    /// order, so "a later generation completed" says nothing about an earlier one.
    done: BTreeSet<u64>,
    /// Failed generations, the most recent `FAILURES_KEPT`.
    failures: BTreeMap<u64, Error>,
    /// The completion time of the highest generation that completed successfully.
    time: Option<(u64, Instant)>,
    /// `notify_complete` callbacks, by the generation they wait for.
    ready: Vec<(u64, ReadyFn)>,
}

/// How many failed generations an event remembers for waits still queued on them.
const FAILURES_KEPT: usize = 256;

impl State {
    fn is_complete(&self, generation: u64) -> bool {
        generation <= self.prefix || self.done.contains(&generation)
    }

    /// The outcome of a complete generation.
    fn outcome(&self, generation: u64) -> Result<()> {
        self.failures
            .get(&generation)
            .map_or(Ok(()), |e| Err(e.clone()))
    }
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
        s.done.insert(generation);
        while s.done.first() == Some(&(s.prefix + 1)) {
            s.done.pop_first();
            s.prefix += 1;
        }
        match result {
            Ok(()) => {
                if s.time.is_none_or(|(g, _)| g < generation) {
                    s.time = Some((generation, Instant::now()));
                }
            }
            Err(e) => {
                s.failures.insert(generation, e);
                if s.failures.len() > FAILURES_KEPT {
                    s.failures.pop_first();
                }
            }
        }
        // Callbacks whose generation is now complete run here, outside the lock.
        let (fire, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut s.ready)
            .into_iter()
            .partition(|(g, _)| s.is_complete(*g));
        s.ready = keep;
        let fire: Vec<_> = fire.into_iter().map(|(g, f)| (s.outcome(g), f)).collect();
        drop(s);
        self.cv.notify_all();
        for (outcome, f) in fire {
            f(outcome);
        }
    }

    /// The generation a wait enqueued now must wait for.
    pub(crate) fn wait_target(&self) -> u64 {
        self.state.lock().recorded
    }

    /// Blocks until generation `target` completes; its failure, if it failed.
    pub(crate) fn wait_for(&self, target: u64) -> Result<()> {
        let mut s = self.state.lock();
        while !s.is_complete(target) {
            self.cv.wait(&mut s);
        }
        s.outcome(target)
    }
}

impl EventInterface for HostEvent {
    fn status(&self) -> EventStatus {
        let s = self.state.lock();
        if s.recorded == 0 {
            EventStatus::Unrecorded
        } else if !s.is_complete(s.recorded) {
            EventStatus::Pending
        } else if let Some(e) = s.failures.get(&s.recorded) {
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
        let t1 = self.state.lock().time.ok_or_else(not_done)?.1;
        let t0 = start.state.lock().time.ok_or_else(not_done)?.1;
        Ok(t1.saturating_duration_since(t0))
    }

    fn notify_complete(&self, ready: ReadyFn) -> Result<()> {
        let mut s = self.state.lock();
        let target = s.recorded;
        if s.is_complete(target) {
            let outcome = s.outcome(target);
            drop(s);
            ready(outcome);
        } else {
            s.ready.push((target, ready));
        }
        Ok(())
    }

    fn record_failure(&self, error: Error) {
        let g = self.begin_record();
        self.complete(g, Err(error));
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
