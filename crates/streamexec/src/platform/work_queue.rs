//! An in-order queue of host-side operations run by one worker thread: the host platform's
//! streams, and OpenCL streams in deferred mode, both use it.
//!
//! The first failing operation is stored in the queue's error slot; every later operation is
//! skipped (its `skip` hook runs instead, so an event record can mark its event failed).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result, panic_message};

/// An operation.
pub(crate) type RunFn = Box<dyn FnOnce() -> Result<()> + Send>;
/// What to do instead of an operation when the queue has already failed.
pub(crate) type SkipFn = Box<dyn FnOnce(&Error) + Send>;

#[derive(Default)]
struct State {
    ops: VecDeque<(RunFn, Option<SkipFn>)>,
    enqueued: u64,
    completed: u64,
    closed: bool,
    /// The worker has drained a closed queue and returned: nothing will pop the queue again.
    worker_gone: bool,
}

/// The queue; share it with its worker through an `Arc`.
#[derive(Default)]
pub(crate) struct WorkQueue {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    error: Arc<Mutex<Option<Error>>>,
}

impl WorkQueue {
    /// A queue that stores its first failure in `error` (which others may also write).
    pub(crate) fn with_error_slot(error: Arc<Mutex<Option<Error>>>) -> Self {
        WorkQueue {
            error,
            ..Default::default()
        }
    }

    /// The first failure, if any.
    pub(crate) fn error(&self) -> Option<Error> {
        self.error.lock().clone()
    }

    /// Starts the worker thread.
    pub(crate) fn spawn(self: &Arc<Self>, name: String, platform: &'static str) -> Result<()> {
        let me = self.clone();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || me.run_worker())
            .map(drop)
            .map_err(|e| Error::Driver {
                platform,
                call: "std::thread::spawn (stream worker)".into(),
                code: e.raw_os_error().unwrap_or(0) as i64,
                detail: format!("{e}; too many streams alive?"),
            })
    }

    /// Queues `run` (or `skip`, if the queue has failed by the time it is reached).
    ///
    /// Once the worker of a closed queue has returned, everything queued earlier has run, so a
    /// late push (an allocation fence recorded by another thread on a stream being dropped)
    /// runs at once on the caller's thread instead of waiting for a worker that is gone.
    pub(crate) fn push(&self, run: RunFn, skip: Option<SkipFn>) {
        let mut s = self.state.lock();
        s.enqueued += 1;
        if s.worker_gone {
            drop(s);
            self.run_one(run, skip);
            return;
        }
        s.ops.push_back((run, skip));
        drop(s);
        self.work.notify_one();
    }

    /// Lets the worker exit once it has drained the queue.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.work.notify_all();
    }

    /// Blocks until everything queued so far has run or been skipped; the first failure.
    pub(crate) fn wait_idle(&self) -> Result<()> {
        let mut s = self.state.lock();
        let target = s.enqueued;
        while s.completed < target {
            self.done.wait(&mut s);
        }
        drop(s);
        self.error().map_or(Ok(()), Err)
    }

    fn run_worker(&self) {
        loop {
            let (run, skip) = {
                let mut s = self.state.lock();
                loop {
                    if let Some(op) = s.ops.pop_front() {
                        break op;
                    }
                    if s.closed {
                        s.worker_gone = true;
                        return;
                    }
                    self.work.wait(&mut s);
                }
            };
            self.run_one(run, skip);
        }
    }

    /// Runs `run` (or `skip` once the queue has failed), then counts it as completed.
    fn run_one(&self, run: RunFn, skip: Option<SkipFn>) {
        match self.error() {
            Some(e) => {
                if let Some(skip) = skip {
                    // A panicking skip hook must not kill the worker and strand the queue.
                    let _ = catch_unwind(AssertUnwindSafe(|| skip(&e)));
                }
            }
            None => {
                let result = catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|p| {
                    Err(Error::HostCallback {
                        detail: format!("stream operation panicked: {}", panic_message(p.as_ref())),
                    })
                });
                if let Err(e) = result {
                    self.error.lock().get_or_insert(e);
                }
            }
        }
        self.state.lock().completed += 1;
        self.done.notify_all();
    }
}

/// `done` as a `run` and a `skip` hook for [`WorkQueue::push`]: whichever the queue calls
/// calls `done` (the other is dropped unused).
pub(crate) fn done_either_way(done: crate::interface::DoneFn) -> (RunFn, SkipFn) {
    let on_run = Arc::new(Mutex::new(Some(done)));
    let on_skip = on_run.clone();
    (
        Box::new(move || {
            if let Some(f) = on_run.lock().take() {
                f();
            }
            Ok(())
        }),
        Box::new(move |_: &Error| {
            if let Some(f) = on_skip.lock().take() {
                f();
            }
        }),
    )
}

/// A driver stream's submission path. Direct: each operation is handed to the driver at once.
/// Deferred, from the first operation that must run on the host in stream order (a host
/// callback, a wait on a record not yet made) on: operations go through a [`WorkQueue`]
/// worker, so a failure really skips the rest and callbacks may call the driver.
#[cfg_attr(
    not(any(feature = "opencl", feature = "cuda", feature = "hip")),
    allow(dead_code)
)]
pub(crate) struct Submitter {
    deferred: AtomicBool,
    work: Arc<WorkQueue>,
    thread_name: &'static str,
    platform: &'static str,
}

#[cfg_attr(
    not(any(feature = "opencl", feature = "cuda", feature = "hip")),
    allow(dead_code)
)]
impl Submitter {
    /// A direct-mode submitter whose worker (once started) stores failures in `error`.
    pub(crate) fn new(
        error: Arc<Mutex<Option<Error>>>,
        thread_name: &'static str,
        platform: &'static str,
    ) -> Self {
        Submitter {
            deferred: AtomicBool::new(false),
            work: Arc::new(WorkQueue::with_error_slot(error)),
            thread_name,
            platform,
        }
    }

    /// Runs `run` now (direct mode) or queues it (deferred mode); `force_deferred` switches to
    /// deferred mode first. Direct mode returns `run`'s error as an enqueue-time error.
    pub(crate) fn submit(
        &self,
        run: RunFn,
        skip: Option<SkipFn>,
        force_deferred: bool,
    ) -> Result<()> {
        if force_deferred
            && !self.deferred.swap(true, Ordering::SeqCst)
            && let Err(e) = self.work.spawn(self.thread_name.into(), self.platform)
        {
            self.deferred.store(false, Ordering::SeqCst);
            return Err(e);
        }
        if !self.deferred.load(Ordering::SeqCst) {
            return run();
        }
        self.work.push(run, skip);
        Ok(())
    }

    /// True once the stream has switched to deferred mode.
    pub(crate) fn is_deferred(&self) -> bool {
        self.deferred.load(Ordering::SeqCst)
    }

    /// The worker's queue.
    pub(crate) fn work(&self) -> &Arc<WorkQueue> {
        &self.work
    }
}

/// The live streams of an executor, for `synchronize_all`; streams that dropped fall out.
pub(crate) struct StreamSet<T>(Mutex<Vec<Weak<T>>>);

impl<T> Default for StreamSet<T> {
    fn default() -> Self {
        StreamSet(Mutex::new(Vec::new()))
    }
}

impl<T> StreamSet<T> {
    /// Adds `s`, forgetting streams that have dropped.
    pub(crate) fn insert(&self, s: &Arc<T>) {
        let mut v = self.0.lock();
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(s));
    }

    /// The streams still alive.
    pub(crate) fn live(&self) -> Vec<Arc<T>> {
        self.0.lock().iter().filter_map(Weak::upgrade).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operation pushed after the worker of a closed queue has returned (a fence recorded
    /// by another thread on a stream being dropped) still runs, and `wait_idle` returns: the
    /// conformance suite once hung here, one run in four, on two CUDA devices.
    #[test]
    fn a_push_after_the_worker_is_gone_runs_instead_of_hanging() {
        let q = Arc::new(WorkQueue::default());
        q.spawn("test-worker".into(), "test").unwrap();
        let ran = Arc::new(Mutex::new(Vec::new()));
        let note = |v: u32| -> RunFn {
            let r = ran.clone();
            Box::new(move || {
                r.lock().push(v);
                Ok(())
            })
        };
        q.push(note(1), None);
        q.close();
        while !q.state.lock().worker_gone {
            std::thread::yield_now();
        }
        q.push(note(2), None);
        q.wait_idle().unwrap();
        assert_eq!(*ran.lock(), vec![1, 2]);

        // After a failure a late push is skipped, like any other.
        q.error.lock().replace(Error::invalid("test", "failed"));
        let skipped = Arc::new(Mutex::new(false));
        let s = skipped.clone();
        q.push(
            Box::new(|| panic!("ran after a failure")),
            Some(Box::new(move |_| *s.lock() = true)),
        );
        assert!(q.wait_idle().is_err());
        assert!(*skipped.lock());
    }
}
