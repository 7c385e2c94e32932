//! Streams. Each CUDA stream wraps a host-platform `streamexec::Stream` (a worker thread
//! running its operations in order), so work runs off the calling thread as on a GPU.
//!
//! Ordering between streams follows CUDA's legacy default stream: an operation on the legacy
//! stream (`NULL`, `CU_STREAM_LEGACY`) first waits for all earlier work of every blocking
//! stream of its context, and an operation on a blocking stream (flags 0, and the per-thread
//! default stream `CU_STREAM_PER_THREAD`) first waits for all earlier work of the legacy stream;
//! `CU_STREAM_NON_BLOCKING` streams do neither. The waits are `then_wait_for` on the other
//! stream, taken only when it has work enqueued since the last wait.
//!
//! Locks: an enqueue locks the streams it orders against in handle order (never two contexts),
//! and nothing blocks while holding a stream's lock: synchronizing records an event under the
//! lock and waits for it outside, so a host thread serving a running kernel (RPC) can still
//! call the driver.
//!
//! This file holds the stream object, its handle table and the lock-ordered enqueue, and knows
//! no context: which streams an operation waits for, and the sticky error around it, are the
//! context's (`CuStream::enqueue` in `context/mod.rs`, which holds the streams). The
//! `cuStream*` entry points are in `api.rs`.

pub(crate) mod api;

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::CUresult;
use parking_lot::{Mutex, MutexGuard};
use streamexec::Stream;

use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid};
use crate::handles::Table;

/// `CU_STREAM_LEGACY`.
pub(crate) const STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`.
pub(crate) const STREAM_PER_THREAD: usize = 0x2;

/// Streams made with `cuStreamCreate` (the default streams are their context's, not here).
static STREAMS: Table<CuStream> = Table::new(0x2000_0000);

/// How a stream orders against the legacy default stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Legacy,
    PerThread,
    Blocking,
    NonBlocking,
}

/// One stream.
pub(crate) struct CuStream {
    pub(crate) handle: usize,
    pub(crate) ctx: usize,
    pub(crate) kind: Kind,
    pub(crate) flags: c_uint,
    pub(crate) priority: c_int,
    state: Mutex<State>,
}

struct State {
    se: Stream,
    /// Operations enqueued so far.
    ops: u64,
    /// For each stream this one waited for: its `ops` at that wait.
    waited: HashMap<usize, u64>,
}

/// A raw pointer handed to work on another thread (the caller guarantees its validity until
/// the work has run, as the driver API requires of asynchronous operations).
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut c_void);
// SAFETY: only dereferenced by the operation the caller enqueued, under the driver API's
// contract that the memory stays valid until that operation has run.
unsafe impl Send for SendPtr {}

pub(crate) fn se_error(what: &str, e: streamexec::Error) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_UNKNOWN, format!("{what}: {e}"))
}

/// The stream `cuStreamCreate` made with handle `h`, if it is live.
pub(crate) fn lookup(h: usize) -> Option<Arc<CuStream>> {
    STREAMS.get(h)
}

/// Makes `s` reachable by its handle.
pub(crate) fn register(s: &Arc<CuStream>) {
    STREAMS.insert(s.handle, s.clone());
}

/// Takes handle `h` out of the table (`cuStreamDestroy`); work already enqueued still runs.
pub(crate) fn unregister(h: usize) -> Option<Arc<CuStream>> {
    STREAMS.remove(h)
}

/// Takes every stream of context `ctx` out of the table (the context is destroyed).
pub(crate) fn unregister_context(ctx: usize) {
    for s in STREAMS.filter(|s| s.ctx == ctx) {
        STREAMS.remove(s.handle);
    }
}

impl CuStream {
    /// A new stream of context `ctx` (its handle reserved, not yet registered).
    pub(crate) fn new(
        ctx: usize,
        kind: Kind,
        flags: c_uint,
        priority: c_int,
    ) -> CuResult<Arc<CuStream>> {
        let se = driver()?
            .exec
            .create_stream()
            .map_err(|e| se_error("creating the stream", e))?;
        Ok(Arc::new(CuStream {
            handle: STREAMS.reserve(),
            ctx,
            kind,
            flags,
            priority,
            state: Mutex::new(State {
                se,
                ops: 0,
                waited: HashMap::new(),
            }),
        }))
    }

    /// The first failure of the stream's work so far (does not wait).
    pub(crate) fn status(&self) -> Result<(), streamexec::Error> {
        self.state.lock().se.status()
    }

    /// Enqueues `op` after the work enqueued so far on `deps` (the implicit waits the caller
    /// worked out). `op` must only enqueue (never block). A failure `op` reports synchronously
    /// is returned as `CUDA_ERROR_INVALID_VALUE` and leaves the stream usable.
    pub(crate) fn enqueue_after(
        &self,
        deps: &[Arc<CuStream>],
        op: impl FnOnce(&mut Stream),
    ) -> CuResult<()> {
        let mut order: Vec<&CuStream> = deps.iter().map(|d| &**d).collect();
        order.push(self);
        order.sort_by_key(|s| s.handle);
        order.dedup_by_key(|s| s.handle);
        let mut guards: Vec<(usize, MutexGuard<'_, State>)> =
            order.iter().map(|s| (s.handle, s.state.lock())).collect();
        let me = guards
            .iter()
            .position(|(h, _)| *h == self.handle)
            .expect("self is in the lock order"); // ok: pushed above
        let (mine, rest) = {
            let (a, b) = guards.split_at_mut(me);
            let (m, c) = b.split_first_mut().expect("non-empty"); // ok: index `me` exists
            (m, a.iter().chain(c.iter()).collect::<Vec<_>>())
        };
        let state = &mut *mine.1;
        for (h, other) in rest {
            if other.ops > state.waited.get(h).copied().unwrap_or(0) {
                state.se.then_wait_for(&other.se);
                state.waited.insert(*h, other.ops);
            }
        }
        let was_ok = state.se.ok();
        op(&mut state.se);
        state.ops += 1;
        if was_ok && let Err(e) = state.se.status() {
            use streamexec::Error as E;
            if !matches!(
                e,
                E::KernelFault { .. }
                    | E::KernelAssert { .. }
                    | E::DependencyFailed { .. }
                    | E::HostCallback { .. }
            ) {
                // A check of the handle layer refused the operation: report it, and give the
                // stream a fresh queue that starts after the old one's work.
                let fresh = ctx_exec()
                    .create_stream()
                    .map_err(|e| se_error("stream", e))?;
                let mut old = std::mem::replace(&mut state.se, fresh);
                let _ = old.block_host_until_done();
                return Err(invalid(e.to_string()));
            }
        }
        Ok(())
    }

    /// Waits for the stream's work, ignoring ordering (teardown).
    pub(crate) fn drain(&self) -> Result<(), streamexec::Error> {
        let ev = ctx_exec().create_event()?;
        self.state.lock().se.then_record_event(&ev);
        ev.synchronize()
    }
}

/// The executor every stream runs on.
pub(crate) fn ctx_exec() -> &'static streamexec::StreamExecutor {
    &driver().expect("streams exist only after cuInit").exec // ok: a stream implies cuInit
}
