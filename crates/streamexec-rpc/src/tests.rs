//! Unit tests of the protocol core: a loom model check, and single-threaded mailbox traces
//! (small enough for Miri).

use super::layout::{Geometry, Layout};
use super::port::Process;

#[cfg(not(miri))]
mod model {
    use super::*;
    use crate::mem::model::LoomMem;
    use loom::sync::Arc;

    const INCREMENT: u32 = 1;
    const ASYNC: u32 = 2;

    /// 2 clients, 1 server, 2 ports. Client B makes an asynchronous call (send, then close
    /// without waiting for the server); client A makes a blocking call (send, recv) starting
    /// its port search at the same port, so it either takes the other port or reuses B's once
    /// the server hands it back. Loom explores the interleavings and checks that the fences
    /// order every packet and header access (a missing fence is a data race on those cells).
    #[test]
    fn two_clients_one_server_two_ports() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.max_branches = 100_000;
        builder.check(|| {
            let geo = Geometry::new(Layout::Current, 2, 1).unwrap();
            let mem = LoomMem::new(geo.allocation_size());
            let server = Process::new(mem.clone(), geo, true, None, None, None);
            let client = Arc::new(Process::new(mem, geo, false, None, None, None));

            let a = {
                let c = client.clone();
                loom::thread::spawn(move || {
                    let mut port = c.open(INCREMENT, 1, 0).unwrap();
                    let mut got = 0;
                    port.send_and_recv(|_, p| p[3] = 10, |_, p| got = p[3])
                        .unwrap();
                    assert_eq!(got, 11);
                })
            };
            let b = {
                let c = client.clone();
                loom::thread::spawn(move || {
                    let mut port = c.open(ASYNC, 1, 0).unwrap();
                    port.send(|_, p| p[0] = 7).unwrap();
                    // Asynchronous close: the server still owns the port.
                })
            };
            let mut served = 0;
            let mut async_seen = 0;
            while served < 2 {
                let Some(mut port) = server.try_open(0) else {
                    loom::thread::yield_now();
                    continue;
                };
                match port.opcode() {
                    INCREMENT => port.recv_and_send(|_, p| p[3] += 1).unwrap(),
                    ASYNC => port.recv(|_, p| async_seen = p[0]).unwrap(),
                    other => panic!("opcode {other}"),
                }
                served += 1;
            }
            assert_eq!(async_seen, 7);
            a.join().unwrap();
            b.join().unwrap();
        });
    }
}

/// The mailbox trace of rpc-protocol.md section 6, one step at a time on one thread.
#[test]
fn mailbox_trace_of_one_call() {
    let geo = Geometry::new(Layout::PreDoorbell, 4, 1).unwrap();
    let server = crate::Server::new(Layout::PreDoorbell, 4, 1).unwrap();
    let s: &Process = &server.inner.server;
    let c: &Process = &server.inner.client;
    let mailboxes = |port: usize| {
        let a = crate::mem::Mem::load_u32(&s.mem, geo.client_inbox() + 4 * port);
        let b = crate::mem::Mem::load_u32(&s.mem, geo.client_outbox() + 4 * port);
        (a, b)
    };
    assert!(s.try_open(0).is_none(), "nothing pending at 0/0");
    let mut cp = c.open(99, 1, 2).unwrap();
    assert_eq!(cp.index(), 2);
    cp.send(|_, p| p[0] = 41).unwrap();
    assert_eq!(mailboxes(2), (0, 1));
    let mut sp = s.try_open(0).unwrap();
    assert_eq!((sp.index(), sp.opcode(), sp.mask()), (2, 99, 1));
    sp.recv_and_send(|_, p| p[0] += 1).unwrap();
    assert_eq!(mailboxes(2), (1, 1));
    drop(sp);
    let mut got = 0;
    cp.recv(|_, p| got = p[0]).unwrap();
    assert_eq!(got, 42);
    drop(cp);
    assert_eq!(mailboxes(2), (1, 1), "idle again, client owns");
    assert!(s.try_open(0).is_none());
    // An asynchronous send: the server's close (after a recv) hands the port back.
    let mut cp = c.open(5, 1, 2).unwrap();
    cp.send(|_, _| {}).unwrap();
    drop(cp);
    assert_eq!(mailboxes(2), (1, 0));
    s.try_open(0).unwrap().recv(|_, _| {}).unwrap();
    assert_eq!(mailboxes(2), (0, 0));
}

/// The executor charges an `exit` to the launches running while its handshake is served, so
/// the observer must hear of it before the reply releases the caller: a released kernel may
/// end, and its launch finish uncharged, before a late observer runs. (Under Miri's slow
/// scheduling a stream once finished `Ok` after its kernel called `exit(7)`.)
#[test]
fn an_exit_is_charged_while_its_caller_still_waits_for_the_handshake() {
    use crate::{ExitObserver, KernelExit, opcode};
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[derive(Default)]
    struct Probe {
        replied: AtomicBool,
        caller_waiting: Mutex<Option<bool>>,
        exit: Mutex<Option<KernelExit>>,
    }
    impl ExitObserver for Probe {
        fn exit_begun(&self, _abort: bool) -> Option<u64> {
            // Time for a caller already released to run on.
            std::thread::sleep(Duration::from_millis(20));
            *self.caller_waiting.lock() = Some(!self.replied.load(Ordering::SeqCst));
            Some(1)
        }
        fn exit_done(&self, _ticket: u64, exit: KernelExit) {
            *self.exit.lock() = Some(exit);
        }
    }

    let server = crate::Server::new(Layout::Current, 4, 1).unwrap();
    let probe = Arc::new(Probe::default());
    server.set_exit_observer(Some(probe.clone()));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let c: &Process = &server.inner.client;
            let mut port = c.open(opcode::EXIT, 1, 0).unwrap();
            port.send_and_recv(|_, _| {}, |_, _| {}).unwrap();
            probe.replied.store(true, Ordering::SeqCst);
            port.send(|_, p| p[0] = 7).unwrap();
        });
        while probe.exit.lock().is_none() {
            server.poll().unwrap();
            std::thread::yield_now();
        }
    });
    assert_eq!(*probe.caller_waiting.lock(), Some(true));
    assert!(matches!(*probe.exit.lock(), Some(KernelExit::Exit(7))));
    assert!(server.take_errors().is_empty());
}
