//! RPC launches, and which of them an `exit` or `abort` belongs to.
//!
//! The protocol does not say which kernel sent a packet. What the server does know is which
//! RPC launches are running: a host callback marks a launch running just before its kernel,
//! and the launch's completion callback ends it. `exit`/`abort` begin with a handshake the
//! device waits on, so the kernel that calls them is running while the server serves that
//! handshake. The launches running at that moment are the candidates: with one, the exit is
//! charged to it exactly; with several, each of them fails, and the message says the exit may
//! have come from any of them. Kernels launched without RPC are never candidates.
//!
//! The protocol reports exits through its `ExitObserver` hook; [`Launches`] is that observer
//! for an executor's server.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::Error;
use crate::kernel::TypedKernel;
use crate::rpc::{ExitObserver, KernelExit, Server};
use crate::stream::Stream;
use crate::types::{BlockDim, KernelArgs, ThreadDim};

/// How long a finished launch waits for the status of an `exit` it began: the device sent it
/// before it ended, so only the server's turnaround is left.
const STATUS_WAIT: Duration = Duration::from_secs(2);

#[derive(Default)]
pub(crate) struct Launches {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    /// Launches enqueued and not yet finished, with their kernel names.
    names: HashMap<u64, String>,
    /// Launches whose kernel may be running.
    running: BTreeSet<u64>,
    charged: Vec<Charged>,
}

/// An `exit`/`abort` and the launches it is charged to.
struct Charged {
    ticket: u64,
    abort: bool,
    /// `None` until the status packet arrives.
    exit: Option<KernelExit>,
    /// Candidates not yet finished.
    launches: Vec<u64>,
    /// Names of all candidates, for the message.
    names: Vec<String>,
}

impl Charged {
    fn error(&self) -> Error {
        let what = match &self.exit {
            Some(KernelExit::Exit(code)) => format!("exit({code})"),
            Some(KernelExit::Abort) => "abort()".into(),
            None if self.abort => "abort()".into(),
            None => "exit() (its status never reached the server)".into(),
        };
        let detail = match self.names.as_slice() {
            [one] => format!("kernel `{one}` called {what}"),
            many => format!(
                "a kernel called {what} while {} RPC launches ran on this executor ({}); the \
                 protocol does not say which one called it, so each of them fails",
                many.len(),
                many.iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        Error::Rpc { detail }
    }
}

impl ExitObserver for Launches {
    /// The handshake of an `exit`/`abort` is being served: charge it to the running launches.
    /// `None` when none runs (the exit then goes to [`Server::take_exits`]).
    fn exit_begun(&self, abort: bool) -> Option<u64> {
        let mut st = self.state.lock();
        if st.running.is_empty() {
            return None;
        }
        st.next += 1;
        let ticket = st.next;
        let launches: Vec<u64> = st.running.iter().copied().collect();
        let names = launches.iter().map(|l| st.names[l].clone()).collect();
        st.charged.push(Charged {
            ticket,
            abort,
            exit: None,
            launches,
            names,
        });
        Some(ticket)
    }

    /// The status of the exit `ticket` arrived.
    fn exit_done(&self, ticket: u64, exit: KernelExit) {
        let mut st = self.state.lock();
        if let Some(c) = st.charged.iter_mut().find(|c| c.ticket == ticket) {
            c.exit = Some(exit);
        }
    }
}

impl Launches {
    /// Registers an RPC launch of kernel `name` (not yet running); returns its id.
    fn new_launch(&self, name: &str) -> u64 {
        let mut st = self.state.lock();
        st.next += 1;
        let id = st.next;
        st.names.insert(id, name.to_string());
        id
    }

    /// The launch's kernel is about to run.
    fn start_launch(&self, id: u64) {
        let mut st = self.state.lock();
        if st.names.contains_key(&id) {
            st.running.insert(id);
        }
    }

    /// The launch's kernel is done: the error of the first `exit`/`abort` charged to it, after
    /// waiting (briefly) for the status of one still in progress.
    fn finish_launch(&self, id: u64) -> Option<Error> {
        let deadline = Instant::now() + STATUS_WAIT;
        loop {
            let mut st = self.state.lock();
            st.running.remove(&id);
            let pending = st
                .charged
                .iter()
                .any(|c| c.exit.is_none() && c.launches.contains(&id));
            if pending && Instant::now() < deadline {
                drop(st);
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            let mut first = None;
            st.charged.retain_mut(|c| {
                if !c.launches.contains(&id) {
                    return true;
                }
                first.get_or_insert_with(|| c.error());
                c.launches.retain(|&l| l != id);
                !c.launches.is_empty()
            });
            return first;
        }
    }

    /// Forgets the launch (its completion callback ran, or was skipped on a failed stream).
    fn end_launch(&self, id: u64) {
        let mut st = self.state.lock();
        st.names.remove(&id);
        st.running.remove(&id);
        st.charged.retain_mut(|c| {
            c.launches.retain(|&l| l != id);
            !c.launches.is_empty()
        });
    }
}

/// Marks an RPC launch in flight until dropped: the server thread polls meanwhile, and an
/// `exit`/`abort` served while it runs is charged to it.
struct InFlight {
    server: Server,
    launches: std::sync::Arc<Launches>,
    launch: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.launches.end_launch(self.launch);
        self.server.end_kernel();
    }
}

impl Stream {
    /// `then_launch` for a kernel that may call the executor's RPC server: the server thread
    /// polls while the kernel runs, and an `exit`/`abort` the kernel sent fails this stream.
    /// Kernels of a CUDA/HIP module that defines `__llvm_rpc_client` launch this way from
    /// plain `then_launch` too.
    pub fn then_launch_with_rpc<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> &mut Self {
        let (threads, blocks) = (threads.into(), blocks.into());
        self.with_rpc(kernel.name(), |s| {
            s.launch_typed(threads, blocks, kernel, args);
        })
    }

    /// Runs `launch` (which enqueues one kernel) as an RPC launch: the server polls from now
    /// until the kernel is done; a host callback just before the kernel marks it running and
    /// one after it charges the `exit`/`abort` calls served meanwhile to this stream.
    pub(crate) fn with_rpc(&mut self, name: &str, launch: impl FnOnce(&mut Self)) -> &mut Self {
        let (server, launches) = match self.executor().rpc() {
            Ok(r) => (r.server().view(), r.launches.clone()),
            Err(e) => return self.then_host_callback_with_status(move || Err(e)),
        };
        server.begin_kernel();
        let launch_id = launches.new_launch(name);
        let guard = InFlight {
            server,
            launches: launches.clone(),
            launch: launch_id,
        };
        self.then_host_callback_with_status(move || {
            launches.start_launch(launch_id);
            Ok(())
        });
        launch(self);
        self.then_host_callback_with_status(move || {
            let exit = guard.launches.finish_launch(guard.launch);
            drop(guard);
            exit.map_or(Ok(()), Err)
        })
    }
}
