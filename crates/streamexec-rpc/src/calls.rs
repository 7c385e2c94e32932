//! The server thread's calls in flight. Each pending port's handler runs as a stackful
//! coroutine on the server thread; a handler that waits for its client suspends instead of
//! spinning, and the thread moves on to the next call. With more spinning clients than cores
//! most clients are descheduled at any moment: serving one call at a time, the server would
//! wait out a whole time slice for each of them, while interleaved it serves whichever clients
//! are running. (Handlers therefore must not hold a lock across a port operation that another
//! call of the same server may take.)

use std::cell::Cell;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::error::{Error, Result};

/// Stack of one call: handlers format, parse and do file I/O, no deep recursion.
const STACK_BYTES: usize = 256 * 1024;

type Call = Coroutine<(), (), (), DefaultStack>;

thread_local! {
    /// The yielder of the call running on this thread; null outside calls.
    static CURRENT: Cell<*const Yielder<(), ()>> = const { Cell::new(std::ptr::null()) };
    /// Set when a call on this thread got the port back from its client since the last pass.
    static PROGRESS: Cell<bool> = const { Cell::new(false) };
    /// Set by [`pause`]: the running call suspended to wait on something outside the protocol
    /// (an MPI request), not on its client.
    static EXTERNAL: Cell<bool> = const { Cell::new(false) };
}

/// True on a server thread inside a call (not on a thread calling `Server::poll`, the
/// clients, or the model check): a handler may then [`pause`] instead of blocking.
pub fn in_call() -> bool {
    !CURRENT.with(Cell::get).is_null()
}

/// Inside a call: suspends it until the scheduler's next pass. Elsewhere it does nothing.
pub(crate) fn suspend() {
    let y = CURRENT.with(Cell::get);
    if y.is_null() {
        return;
    }
    // SAFETY: `CURRENT` is non-null only while a call's coroutine runs on this thread (its body
    // sets it, the scheduler clears it each time control comes back), and then it is that
    // coroutine's own yielder, which lives as long as the coroutine.
    unsafe { (*y).suspend(()) };
    CURRENT.with(|c| c.set(y));
}

/// For a handler waiting on something other than its port (an MPI request, say): inside a
/// call, suspends it so the server's other calls run meanwhile; elsewhere yields the thread.
pub fn pause() {
    if in_call() {
        EXTERNAL.with(|e| e.set(true));
        suspend();
    } else {
        std::thread::yield_now();
    }
}

/// Notes that a wait on this thread ended (its port came back): the pass made progress.
pub(crate) fn progressed() {
    PROGRESS.with(|p| p.set(true));
}

/// The calls in flight on one server thread, by port index, and spare stacks.
#[derive(Default)]
pub(crate) struct Calls {
    /// Port, call, and whether it last suspended in [`pause`] (an external wait).
    running: Vec<(usize, Call, bool)>,
    stacks: Vec<DefaultStack>,
}

impl Calls {
    /// Number of calls in flight.
    pub(crate) fn len(&self) -> usize {
        self.running.len()
    }

    /// True when `port` has a call in flight.
    pub(crate) fn serving(&self, port: usize) -> bool {
        self.running.iter().any(|(p, ..)| *p == port)
    }

    /// True when every call in flight waits on something that will not need this thread to
    /// spin: an external event ([`pause`]), or a client for which `peer_holds(port)` (an
    /// in-process client, which wakes the thread).
    pub(crate) fn all_waiting(&self, peer_holds: impl Fn(usize) -> bool) -> bool {
        self.running
            .iter()
            .all(|(p, _, external)| *external || peer_holds(*p))
    }

    /// Starts `body` as the call on `port` and runs it until it first waits or ends.
    pub(crate) fn start(&mut self, port: usize, body: impl FnOnce() + 'static) -> Result<()> {
        let stack = match self.stacks.pop() {
            Some(s) => s,
            None => DefaultStack::new(STACK_BYTES).map_err(|e| Error::Rpc {
                detail: format!("cannot allocate a {STACK_BYTES}-byte stack for a call: {e}"),
            })?,
        };
        let call = Call::with_stack(stack, move |y: &Yielder<(), ()>, ()| {
            CURRENT.with(|c| c.set(y as *const _));
            body();
        });
        self.running.push((port, call, false));
        let last = self.running.len() - 1;
        self.resume(last);
        Ok(())
    }

    /// Resumes every call once. Returns true when one ended or got its port back.
    pub(crate) fn pass(&mut self) -> bool {
        PROGRESS.with(|p| p.set(false));
        let before = self.running.len();
        let mut i = 0;
        while i < self.running.len() {
            if self.resume(i) {
                i += 1;
            }
        }
        PROGRESS.with(Cell::get) || self.running.len() < before
    }

    /// Resumes call `i`; returns false (and recycles its stack) when it ended.
    fn resume(&mut self, i: usize) -> bool {
        EXTERNAL.with(|e| e.set(false));
        let result = self.running[i].1.resume(());
        CURRENT.with(|c| c.set(std::ptr::null()));
        self.running[i].2 = EXTERNAL.with(Cell::get);
        match result {
            CoroutineResult::Yield(()) => true,
            CoroutineResult::Return(()) => {
                let (_, call, _) = self.running.swap_remove(i);
                self.stacks.push(call.into_stack());
                false
            }
        }
    }
}
