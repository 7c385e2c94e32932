//! The protocol state machine: one side's view of the shared block ([`Process`]) and an open
//! port ([`Port`]) with send / recv / send_n / recv_n, exactly as rpc-protocol.md sections 3-7
//! describe. Both the server and the CPU clients are built on it.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::layout::{DOORBELL_COUNTER, Geometry, Layout, PACKET_BYTES, Packet};
use super::mem::{HostMem, LockWord, Mem, Wait};
use super::status::{ERROR_TAG, error_reply, server_error};
use crate::error::{Error, Result};

/// A handler for one opcode: drives the server side of the exchange on the open port.
pub type Handler = Arc<dyn Fn(&mut Port<'_>) -> Result<()> + Send + Sync + 'static>;

/// Words in a packet.
const WORDS: usize = PACKET_BYTES / 8;
/// Payload bytes in the first packet of a `send_n` (after the length word).
const FIRST_CHUNK: usize = 56;

/// Largest `recv_n` a server accepts from one lane (1 GiB): a bigger length is a corrupt packet.
pub const MAX_STREAM_BYTES: u64 = 1 << 30;

/// One side of the shared block: its geometry, which mailbox array is its inbox, and its own
/// port lock bitmap (never shared with the other side).
pub struct Process<M: Mem = HostMem> {
    pub(crate) mem: M,
    pub(crate) geo: Geometry,
    server: bool,
    locks: Arc<[M::Lock]>,
    /// Server: the in-process client half's locks. A port locked there is held by a thread that
    /// wakes this side when it hands the port over, so a wait on it may park.
    peer_locks: Option<Arc<[M::Lock]>>,
    stop: Option<Arc<AtomicBool>>,
    wake: Option<Arc<Wake>>,
    /// When set and true, waits park on the mailbox (in-process peers wake them) instead of
    /// only backing off; devices cannot wake a thread, so it stays off for them.
    parking: Option<Arc<AtomicBool>>,
    /// How this side waits when it cannot park.
    wait: Wait,
    /// The block has a doorbell (current layout, pointers filled in): clients ring its
    /// counter when they open a port, the server takes the ring back when it closes one.
    doorbell: bool,
    /// Client: the ports it opens (`first`, `count`); unset: all of them. Other client halves
    /// of the block (device images with their own locks) get other ranges.
    ports: OnceLock<(usize, usize)>,
    /// Server: ports `0..scan` are the ones any client half may use, so the only ones looked
    /// at (the block may have room for client halves not attached yet).
    scan: AtomicUsize,
}

/// Spins of a call on the server thread, at most, before it lets the other calls run.
const CALL_SPINS: u32 = 4096;
/// A spinning call looks for other work this often (in spins).
const CALL_CHECK: u32 = 64;

/// Spin and yield steps before a wait parks.
const SPIN_STEPS: u32 = 32 + 16;

/// Wakes a parked server thread after a client hands it a port (the in-process doorbell).
#[derive(Default)]
pub(crate) struct Wake {
    /// Set by the server thread before it parks, cleared after.
    pub(crate) sleeping: AtomicBool,
    pub(crate) thread: std::sync::OnceLock<std::thread::Thread>,
}

impl Wake {
    fn notify(&self) {
        // Pairs with the server's fence between setting `sleeping` and its last poll: either it
        // sees our mailbox store, or we see it asleep and wake it.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }
}

impl<M: Mem> Process<M> {
    /// The server (`server = true`) or client half over `mem`. When `stop` becomes true every
    /// wait gives up with an error instead of waiting for the other side.
    pub(crate) fn new(
        mem: M,
        geo: Geometry,
        server: bool,
        stop: Option<Arc<AtomicBool>>,
        wake: Option<Arc<Wake>>,
        parking: Option<Arc<AtomicBool>>,
    ) -> Self {
        let doorbell = geo.layout == Layout::Current && mem.load_u64(0) != 0;
        Process {
            wake,
            parking,
            mem,
            geo,
            server,
            locks: (0..geo.port_count.div_ceil(32))
                .map(|_| M::Lock::zero())
                .collect(),
            peer_locks: None,
            stop,
            wait: if server { Wait::Serve } else { Wait::GiveWay },
            doorbell,
            ports: OnceLock::new(),
            scan: AtomicUsize::new(geo.port_count),
        }
    }

    /// Client: opens only ports `first..first + count` from now on; an error when the range is
    /// empty, leaves the block, or was set before.
    pub(crate) fn set_ports(&self, first: usize, count: usize) -> Result<()> {
        if count == 0 || first + count > self.geo.port_count {
            return Err(Error::invalid(
                "rpc client ports",
                format!(
                    "ports {first}..{} are not a range of the block's {} ports",
                    first + count,
                    self.geo.port_count
                ),
            ));
        }
        self.ports.set((first, count)).map_err(|_| {
            Error::invalid(
                "rpc client ports",
                "this client half's ports are already set",
            )
        })
    }

    /// Client: the ports it opens (`first`, `count`).
    pub(crate) fn ports(&self) -> (usize, usize) {
        self.ports
            .get()
            .copied()
            .unwrap_or((0, self.geo.port_count))
    }

    /// Server: from now on looks at ports `0..end` (never fewer than before, at most all).
    pub(crate) fn scan_up_to(&self, end: usize) {
        self.scan
            .fetch_max(end.min(self.geo.port_count), Ordering::SeqCst);
    }

    /// Server: the end of the ports any client half may use.
    pub(crate) fn scan_end(&self) -> usize {
        self.scan.load(Ordering::Relaxed)
    }

    /// Server: looks at ports `0..end` only, until [`scan_up_to`](Self::scan_up_to) widens it
    /// (before any client half exists).
    pub(crate) fn scan_only(&self, end: usize) {
        self.scan
            .store(end.clamp(1, self.geo.port_count), Ordering::SeqCst);
    }

    /// This side waits the `wait` way (when it cannot park).
    pub(crate) fn with_wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Server: waits on ports that `client` (the in-process half) holds may park.
    pub(crate) fn watching(mut self, client: &Process<M>) -> Self {
        self.peer_locks = Some(client.locks.clone());
        self
    }

    /// Server: true when the block has a doorbell whose count of rings not yet taken back is
    /// non-zero and one the protocol can produce (at most one ring per port).
    pub(crate) fn rung(&self) -> bool {
        let n = self.mem.load_u64(DOORBELL_COUNTER);
        self.doorbell && n > 0 && n <= self.geo.port_count as u64
    }

    /// True when an in-process client (which wakes this side) holds `port`.
    pub(crate) fn peer_holds(&self, port: usize) -> bool {
        self.peer_locks
            .as_ref()
            .is_some_and(|l| l[port / 32].load() & (1 << (port % 32)) != 0)
    }

    /// The geometry of the block.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    fn inbox_off(&self, port: usize) -> usize {
        4 * port
            + if self.server {
                self.geo.client_outbox()
            } else {
                self.geo.client_inbox()
            }
    }

    fn outbox_off(&self, port: usize) -> usize {
        4 * port
            + if self.server {
                self.geo.client_inbox()
            } else {
                self.geo.client_outbox()
            }
    }

    fn load_inbox(&self, port: usize) -> u32 {
        self.mem.load_u32(self.inbox_off(port))
    }

    fn load_outbox(&self, port: usize) -> u32 {
        self.mem.load_u32(self.outbox_off(port))
    }

    /// True when this side may touch the port's packets, given its inbox and outbox.
    fn owns(&self, inbox: u32, outbox: u32) -> bool {
        (inbox != outbox) == self.server
    }

    fn try_lock(&self, port: usize) -> bool {
        let bit = 1u32 << (port % 32);
        if self.locks[port / 32].load() & bit != 0 {
            return false; // held: skip the read-modify-write (test and test-and-set)
        }
        let before = self.locks[port / 32].fetch_or(bit);
        if before & bit == 0 {
            self.mem.acquire();
            true
        } else {
            false
        }
    }

    fn unlock(&self, port: usize) {
        self.mem.release();
        self.locks[port / 32].fetch_and(!(1u32 << (port % 32)));
    }

    fn parks(&self) -> bool {
        self.parking
            .as_ref()
            .is_some_and(|p| p.load(Ordering::Relaxed))
    }

    /// Parking key for "a client port was released".
    fn free_key(&self) -> usize {
        self.mem.addr(0) + 1
    }

    fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    fn stopped_error(&self, what: &str) -> Error {
        Error::Rpc {
            detail: format!(
                "{what}: the RPC server shut down (its executor was dropped) while this side \
                 waited for it"
            ),
        }
    }

    /// Client: opens a free port for `opcode` with the lanes in `mask`, starting the search at
    /// `hint`. Waits while every port is busy.
    pub(crate) fn open(&self, opcode: u32, mask: u64, hint: usize) -> Result<Port<'_, M>> {
        debug_assert!(!self.server);
        let (first, p) = self.ports();
        let mut step = 0u32;
        loop {
            for k in 0..p {
                if let Some(port) = self.open_at(first + (hint + k) % p, opcode, mask) {
                    return Ok(port);
                }
            }
            if self.stopped() {
                return Err(self.stopped_error("rpc open"));
            }
            if self.parks() {
                // Every port is taken: sleep until a client closes one (or briefly, for ports
                // the server hands back after an asynchronous call).
                super::mem::park(self.free_key(), || true, Duration::from_millis(5));
            } else {
                self.mem.pause(step, self.wait);
            }
            step = step.saturating_add(1);
        }
    }

    /// Client: opens port `index` if it is free and client-owned.
    pub(crate) fn open_at(&self, index: usize, opcode: u32, mask: u64) -> Option<Port<'_, M>> {
        if !self.try_lock(index) {
            return None;
        }
        let inbox = self.load_inbox(index);
        let outbox = self.load_outbox(index);
        if !self.owns(inbox, outbox) {
            self.unlock(index);
            return None;
        }
        // Upstream relies on the lock's acquire fence, which comes before these loads; loom
        // shows that the header write then races with the server's read of the previous call's
        // header when that call was asynchronous. A second acquire fence closes it (free on x86).
        self.mem.acquire();
        self.mem
            .write(self.geo.header(index), &[mask, u64::from(opcode)]);
        if self.doorbell {
            self.mem.counter_add(DOORBELL_COUNTER, 1);
        }
        let mut port = Port::new(self, index, mask, outbox);
        port.opcode = opcode;
        Some(port)
    }

    /// Server: true when port `index` has work for the server (its client handed it over).
    pub(crate) fn pending(&self, index: usize) -> bool {
        self.owns(self.load_inbox(index), self.load_outbox(index))
    }

    /// Server: true when a port other than `except` has work for the server.
    pub(crate) fn any_pending(&self, except: Option<usize>) -> bool {
        (0..self.scan_end()).any(|p| Some(p) != except && self.pending(p))
    }

    /// Server: the first pending port at index `start` or later, locked, with its header read.
    #[cfg(test)]
    pub(crate) fn try_open(&self, start: usize) -> Option<Port<'_, M>> {
        (start..self.scan_end()).find_map(|index| self.open_pending(index))
    }

    /// Server: port `index`, locked, with its header read, if it is pending.
    pub(crate) fn open_pending(&self, index: usize) -> Option<Port<'_, M>> {
        debug_assert!(self.server);
        if !self.pending(index) || !self.try_lock(index) {
            return None;
        }
        // Another server thread may have served it between the check and the lock.
        if !self.pending(index) {
            self.unlock(index);
            return None;
        }
        let mut header = [0u64; 2];
        self.mem.read(self.geo.header(index), &mut header);
        // Lanes past the lane size cannot exist; a device that sets them is ignored there.
        let lanes = if self.geo.lane_size == 64 {
            u64::MAX
        } else {
            (1u64 << self.geo.lane_size) - 1
        };
        let mut port = Port::new(self, index, header[0] & lanes, self.load_outbox(index));
        port.opcode = header[1] as u32;
        Some(port)
    }
}

/// An open port: exclusive use of one port's header and packets for one call. Closes on drop
/// (the server hands a port it still owns back to the client).
pub struct Port<'a, M: Mem = HostMem> {
    process: &'a Process<M>,
    index: usize,
    mask: u64,
    opcode: u32,
    out: u32,
    receive: bool,
    owns_buffer: bool,
}

impl<'a, M: Mem> Port<'a, M> {
    fn new(process: &'a Process<M>, index: usize, mask: u64, out: u32) -> Self {
        Port {
            process,
            index,
            mask,
            opcode: 0,
            out,
            receive: false,
            owns_buffer: true,
        }
    }

    /// The port's index in the block.
    pub fn index(&self) -> usize {
        self.index
    }
    /// The active lanes of the client warp.
    pub fn mask(&self) -> u64 {
        self.mask
    }
    /// The opcode the client opened the port with (server side).
    pub fn opcode(&self) -> u32 {
        self.opcode
    }
    /// Packet slots per port.
    pub fn lane_size(&self) -> usize {
        self.process.geo.lane_size
    }

    fn lanes(&self) -> impl Iterator<Item = usize> + use<M> {
        let (mask, n) = (self.mask, self.process.geo.lane_size);
        (0..n).filter(move |l| mask >> l & 1 == 1)
    }

    fn flip(&mut self) {
        self.process.mem.release();
        self.out ^= 1;
        self.process
            .mem
            .store_u32(self.process.outbox_off(self.index), self.out);
        self.owns_buffer = false;
        if let Some(w) = &self.process.wake {
            w.notify();
        }
        if self.process.parking.is_some() {
            // The peer may be parked on this mailbox (its inbox).
            let off = self.process.outbox_off(self.index);
            super::mem::unpark_all(self.process.mem.addr(off));
        }
    }

    fn wait_for_ownership(&self, mut inbox: u32) -> Result<()> {
        let mut step = 0u32;
        let parks = if self.process.server {
            self.process.peer_holds(self.index)
        } else {
            self.process.parks()
        };
        while !self.process.owns(inbox, self.out) {
            if self.process.server && super::calls::in_call() {
                // A call on the server thread: spin for a running client's answer while no
                // other port has work (checked every `CALL_CHECK` spins); else let the other
                // calls run.
                let spin = step < CALL_SPINS
                    && (step % CALL_CHECK != CALL_CHECK - 1
                        || !self.process.any_pending(Some(self.index)));
                if spin {
                    std::hint::spin_loop();
                } else {
                    super::calls::suspend();
                    if self.process.stopped() {
                        return Err(self.process.stopped_error("rpc wait"));
                    }
                }
                step = step.saturating_add(1);
                inbox = self.process.load_inbox(self.index);
                continue;
            }
            if step >= SPIN_STEPS && step.is_multiple_of(16) && self.process.stopped() {
                return Err(self.process.stopped_error("rpc wait"));
            }
            if parks && step >= SPIN_STEPS {
                let off = self.process.inbox_off(self.index);
                let still = || {
                    !self
                        .process
                        .owns(self.process.load_inbox(self.index), self.out)
                };
                super::mem::park(self.process.mem.addr(off), still, Duration::from_millis(10));
            } else {
                self.process.mem.pause(step, self.process.wait);
            }
            step = step.saturating_add(1);
            inbox = self.process.load_inbox(self.index);
        }
        self.process.mem.acquire();
        if self.process.server {
            super::calls::progressed();
        }
        Ok(())
    }

    fn slot(&self, lane: usize) -> usize {
        self.process.geo.packet(self.index, lane)
    }

    /// Fills each active lane's packet (`fill(lane, packet)` sees the packet's current bytes)
    /// and hands the port to the other side.
    pub fn send(&mut self, mut fill: impl FnMut(usize, &mut Packet)) -> Result<()> {
        let inbox = if self.owns_buffer {
            self.out ^ u32::from(self.process.server)
        } else {
            self.process.load_inbox(self.index)
        };
        self.wait_for_ownership(inbox)?;
        for lane in self.lanes() {
            let mut p = [0u64; WORDS];
            self.process.mem.read(self.slot(lane), &mut p);
            fill(lane, &mut p);
            self.process.mem.write(self.slot(lane), &p);
        }
        self.flip();
        self.receive = false;
        Ok(())
    }

    /// Waits for the other side's packets and gives each active lane's to `use_`.
    pub fn recv(&mut self, mut use_: impl FnMut(usize, &Packet)) -> Result<()> {
        if self.receive {
            self.flip();
        }
        self.wait_for_ownership(self.process.load_inbox(self.index))?;
        for lane in self.lanes() {
            let mut p = [0u64; WORDS];
            self.process.mem.read(self.slot(lane), &mut p);
            use_(lane, &p);
        }
        self.receive = true;
        self.owns_buffer = true;
        Ok(())
    }

    /// `send(fill)` then `recv(use_)`.
    pub fn send_and_recv(
        &mut self,
        fill: impl FnMut(usize, &mut Packet),
        use_: impl FnMut(usize, &Packet),
    ) -> Result<()> {
        self.send(fill)?;
        self.recv(use_)
    }

    /// Receives, lets `work` change each lane's packet in place, and sends it back.
    pub fn recv_and_send(&mut self, mut work: impl FnMut(usize, &mut Packet)) -> Result<()> {
        let mut got = vec![[0u64; WORDS]; self.process.geo.lane_size];
        self.recv(|lane, p| got[lane] = *p)?;
        self.send(|lane, p| {
            *p = got[lane];
            work(lane, p)
        })
    }

    /// Streams `data(lane)` of each active lane: the length and 56 bytes, then 64-byte chunks,
    /// as many chunks as the longest lane needs.
    pub fn send_n<'d>(&mut self, data: impl Fn(usize) -> &'d [u8]) -> Result<()> {
        let max = self.lanes().map(|l| data(l).len()).max().unwrap_or(0);
        self.send(|lane, p| {
            let d = data(lane);
            p[0] = d.len() as u64;
            let n = d.len().min(FIRST_CHUNK);
            bytemuck::cast_slice_mut::<u64, u8>(&mut p[1..])[..n].copy_from_slice(&d[..n]);
        })?;
        let mut at = FIRST_CHUNK;
        while at < max {
            self.send(|lane, p| {
                let d = data(lane);
                if at < d.len() {
                    let n = (d.len() - at).min(PACKET_BYTES);
                    bytemuck::cast_slice_mut::<u64, u8>(p)[..n].copy_from_slice(&d[at..at + n]);
                }
            })?;
            at += PACKET_BYTES;
        }
        Ok(())
    }

    /// Receives a `send_n` stream: one `Vec` per lane of the block (empty for inactive lanes).
    pub fn recv_n(&mut self) -> Result<Vec<Vec<u8>>> {
        let mut out: Vec<Vec<u8>> = vec![Vec::new(); self.process.geo.lane_size];
        let mut sizes = vec![0usize; out.len()];
        let mut bad = None;
        let mut status = None;
        let client = !self.process.server;
        self.recv(|lane, p| {
            if client && let Some(s) = error_reply(p) {
                status = Some(s);
                return;
            }
            if p[0] > MAX_STREAM_BYTES {
                bad = Some(p[0]);
                return;
            }
            let size = p[0] as usize;
            let n = size.min(FIRST_CHUNK);
            let mut v = Vec::with_capacity(size);
            v.extend_from_slice(&bytemuck::cast_slice::<u64, u8>(&p[1..])[..n]);
            sizes[lane] = size;
            out[lane] = v;
        })?;
        if let Some(s) = status {
            return Err(server_error(self.opcode, s));
        }
        if let Some(size) = bad {
            return Err(Error::Rpc {
                detail: format!(
                    "recv_n on port {}: a stream of {size} bytes exceeds the {MAX_STREAM_BYTES}-byte \
                     limit; the other side is not following the protocol",
                    self.index
                ),
            });
        }
        let max = sizes.iter().copied().max().unwrap_or(0);
        let mut at = FIRST_CHUNK;
        while at < max {
            self.recv(|lane, p| {
                let size = sizes[lane];
                if at < size {
                    let n = (size - at).min(PACKET_BYTES);
                    out[lane].extend_from_slice(&bytemuck::cast_slice::<u64, u8>(p)[..n]);
                }
            })?;
            at += PACKET_BYTES;
        }
        Ok(out)
    }

    /// Overwrites every active lane's packet with an error reply (`status` in word 0,
    /// [`ERROR_TAG`] in word 7) and hands the port back, if this side owns it.
    pub(crate) fn reply_error(&mut self, status: u32) {
        if self.owns_buffer {
            let _ = self.send(|_, p| {
                *p = [0; WORDS];
                p[0] = u64::from(status);
                p[7] = ERROR_TAG;
            });
        }
    }

    /// Closes the port: the server hands back a buffer it still owns; both sides unlock.
    pub fn close(self) {}
}

impl<M: Mem> Drop for Port<'_, M> {
    fn drop(&mut self) {
        if self.process.server && self.owns_buffer {
            self.flip();
        }
        if self.process.server && self.process.rung() {
            // The protocol's `finish`: take back the ring of the client that opened the port.
            self.process.mem.counter_add(DOORBELL_COUNTER, u64::MAX);
        }
        self.process.unlock(self.index);
        if !self.process.server && self.process.parks() {
            super::mem::unpark_one(self.process.free_key());
        }
    }
}
