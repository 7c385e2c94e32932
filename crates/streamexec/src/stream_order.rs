//! CUDA's legacy default stream on every platform: each executor has one default stream; an
//! operation on a blocking stream first waits for all earlier work of the default stream, and
//! an operation on the default stream first waits for all earlier work of every blocking
//! stream; non-blocking streams do neither.
//!
//! The waits are an event recorded on the other stream and waited for on this one, taken only
//! when the other stream has had operations since this one last waited for it; until the
//! default stream exists, a blocking stream's check is one atomic load. Ordering is decided when
//! an operation is enqueued, so it holds however a backend defers its work (a CUDA stream that
//! runs its operations from a worker thread after a host callback included).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::error::Result;
use crate::interface::{StreamExecutorInterface, StreamInterface};

/// How a stream orders against its executor's default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamKind {
    /// The executor's default stream.
    Default,
    /// Waits for the default stream, which waits for it (`create_stream`).
    Blocking,
    /// Neither (`create_stream_non_blocking`).
    NonBlocking,
}

/// A backend stream, shared by the `Stream` handles on it.
pub(crate) struct SharedStream {
    pub(crate) iface: Box<dyn StreamInterface>,
    pub(crate) kind: StreamKind,
    /// Process-unique, so a wait recorded for a dropped stream never matches a new one.
    id: u64,
    /// Operations enqueued so far (not counting implicit waits).
    ops: AtomicU64,
    /// For each stream this one waited for: that stream's `ops` at the wait.
    waited: Mutex<HashMap<u64, u64>>,
}

impl SharedStream {
    pub(crate) fn new(iface: Box<dyn StreamInterface>, kind: StreamKind) -> Arc<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Arc::new(SharedStream {
            iface,
            kind,
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            ops: AtomicU64::new(0),
            waited: Mutex::new(HashMap::new()),
        })
    }

    /// Counts one enqueued operation.
    pub(crate) fn count_op(&self) {
        self.ops.fetch_add(1, Ordering::SeqCst);
    }

    /// Makes this stream's later work wait for `other`'s work so far, unless it already does.
    fn wait_for(&self, other: &SharedStream, exec: &dyn StreamExecutorInterface) -> Result<()> {
        let mut waited = self.waited.lock();
        let ops = other.ops.load(Ordering::SeqCst);
        if ops == 0 || waited.get(&other.id) == Some(&ops) {
            return Ok(());
        }
        let event = exec.create_event()?;
        other.iface.record_event(&event)?;
        self.iface.wait_event_for_order(&event)?;
        waited.insert(other.id, ops);
        Ok(())
    }
}

/// An executor's default stream (made on first use) and its live blocking streams.
#[derive(Default)]
pub(crate) struct StreamOrder {
    /// Read on every operation of a blocking stream (an atomic load once set).
    default: OnceLock<Arc<SharedStream>>,
    /// Serialises making the default stream.
    making: Mutex<()>,
    blocking: Mutex<Vec<Weak<SharedStream>>>,
}

impl StreamOrder {
    /// The default stream, made with `make` on first use.
    pub(crate) fn default_stream(
        &self,
        make: impl FnOnce() -> Result<Box<dyn StreamInterface>>,
    ) -> Result<Arc<SharedStream>> {
        let _making = self.making.lock();
        if let Some(s) = self.default.get() {
            return Ok(s.clone());
        }
        let s = SharedStream::new(make()?, StreamKind::Default);
        let _ = self.default.set(s.clone()); // unset: `making` is held
        Ok(s)
    }

    /// Registers a new blocking stream.
    pub(crate) fn add_blocking(&self, s: &Arc<SharedStream>) {
        let mut v = self.blocking.lock();
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(s));
    }

    /// The implicit waits due before the next operation on `s`.
    pub(crate) fn before_op(
        &self,
        s: &SharedStream,
        exec: &dyn StreamExecutorInterface,
    ) -> Result<()> {
        match s.kind {
            StreamKind::NonBlocking => Ok(()),
            StreamKind::Blocking => match self.default.get() {
                Some(d) => s.wait_for(d, exec),
                None => Ok(()),
            },
            StreamKind::Default => {
                let live: Vec<_> = self
                    .blocking
                    .lock()
                    .iter()
                    .filter_map(Weak::upgrade)
                    .collect();
                {
                    // Forget the streams that have dropped, now and then.
                    let mut waited = s.waited.lock();
                    if waited.len() > 2 * live.len() + 16 {
                        waited.retain(|id, _| live.iter().any(|b| b.id == *id));
                    }
                }
                live.iter().try_for_each(|b| s.wait_for(b, exec))
            }
        }
    }
}
