//! The standalone RPC server: owns (or borrows) the shared block, dispatches opcodes to
//! handlers, and can run on its own thread that parks while nothing is in flight. A new server
//! installs the built-in services (`services.rs`); the in-process client (`client.rs`) is built
//! from a server's client half, which this file keeps but does not drive.

use std::collections::HashMap;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use super::calls::Calls;
use super::emissary::{EmissaryApi, EmissaryMemory};
use super::layout::{DOORBELL_COUNTER, DOORBELL_EVENT, Geometry, Layout};
use super::mem::{HostMem, Mem};
use super::port::{Handler, Port, Process, Wake};
use super::services::{
    self, Allocator, ExitObserver, HostFunction, KernelExit, Service, ServiceState,
    check_user_opcode,
};
use super::status::{RPC_ERROR, RPC_UNHANDLED_OPCODE};
use crate::error::{Error, Result, panic_message, with_sources};

/// 64 bytes aligned to 64: the unit of a server's own block (cache lines; the protocol needs
/// 8-byte alignment).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Line([u8; 64]);

/// Who owns the block's memory (kept alive until the server's halves have dropped).
pub(crate) enum Backing {
    /// The server's own block, only reached through the raw base pointer taken at creation.
    /// A `Vec`, not a `Box`: moving a `Box` asserts unique access to its bytes (Stacked
    /// Borrows), which would invalidate that pointer.
    Owned(#[allow(dead_code)] Vec<Line>),
    /// Memory owned by whoever built the server (an executor's unified allocation), which
    /// frees it when this value drops.
    External(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>),
    Caller,
}

pub(crate) struct Inner {
    // Field order matters: the two halves (which point into the block) drop before `backing`.
    pub(crate) server: Process,
    pub(crate) client: Process,
    base: *mut u8,
    device_base: u64,
    handlers: RwLock<HashMap<u32, Handler>>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) wake: Arc<Wake>,
    /// Set once an in-process client exists: the server half may then park while it waits
    /// for a client, which wakes it (a device could not).
    pub(crate) in_process: Arc<AtomicBool>,
    /// Kernels in flight that may call the server: while non-zero the thread polls.
    pub(crate) active: AtomicUsize,
    pub(crate) next_port: AtomicUsize,
    errors: Mutex<Vec<String>>,
    services: Arc<ServiceState>,
    _backing: Backing,
}

// SAFETY: `base` is only handed out as a raw pointer; the block is accessed through `HostMem`.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

/// An RPC server over one shared block: `port_count` ports of `lane_size` packet slots in the
/// given [`Layout`]. Drive it with [`poll`](Self::poll), or move it to a thread with
/// [`spawn`](Self::spawn). Dropping the owning `Server` (or its `ServerThread`) makes every
/// in-process client that waits on it fail instead of hang.
pub struct Server {
    pub(crate) inner: Arc<Inner>,
    owner: bool,
}

impl Server {
    /// A server with its own zeroed, 64-byte aligned block.
    pub fn new(layout: Layout, port_count: usize, lane_size: usize) -> Result<Server> {
        let geo = Geometry::new(layout, port_count, lane_size)?;
        let mut buf = vec![Line([0; 64]); geo.allocation_size().div_ceil(64)];
        // `as_mut_ptr` makes no reference to the elements, so the pointer stays valid for as
        // long as the vector lives and is not resized.
        let base = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: `buf` is at least `allocation_size` zeroed, 64-aligned bytes that `Inner`
        // keeps alive and never resizes (moving the vector does not move its heap bytes).
        unsafe { Self::build(geo, base, base as u64, Backing::Owned(buf)) }
    }

    /// A server whose block is the caller's memory at `memory` (host view) / `device_address`
    /// (the address devices use; equal to `memory` for UVA, SVM and host memory). The memory is
    /// zeroed here.
    ///
    /// # Safety
    /// `memory` must point to `allocation_size(layout, port_count, lane_size)` writable bytes,
    /// 8-byte aligned, that stay valid until the server and every client made from it are
    /// dropped, and that nothing but devices following the protocol touches meanwhile.
    pub unsafe fn with_memory(
        layout: Layout,
        port_count: usize,
        lane_size: usize,
        memory: *mut u8,
        device_address: u64,
    ) -> Result<Server> {
        let geo = Self::checked_geometry("with_memory", layout, port_count, lane_size, memory)?;
        // SAFETY: the caller's contract.
        unsafe { Self::build(geo, memory, device_address, Backing::Caller) }
    }

    /// A server whose block lives in memory that `owner` keeps alive (and frees when the
    /// server drops it, after every use of the block).
    ///
    /// # Safety
    /// As [`with_memory`](Self::with_memory), except that the memory must stay valid while
    /// `owner` lives rather than until the server drops. The memory is zeroed here.
    pub unsafe fn with_owner(
        layout: Layout,
        port_count: usize,
        lane_size: usize,
        memory: *mut u8,
        device_address: u64,
        owner: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Server> {
        let geo = Self::checked_geometry("with_owner", layout, port_count, lane_size, memory)?;
        // SAFETY: the caller's contract; `owner` keeps the bytes alive until the halves that
        // point into them have dropped (field order of `Inner`).
        unsafe { Self::build(geo, memory, device_address, Backing::External(owner)) }
    }

    /// The geometry of a block at `memory` provided by the caller of `Server::{constructor}`;
    /// an error if the geometry is invalid or `memory` is null or not 8-byte aligned.
    fn checked_geometry(
        constructor: &str,
        layout: Layout,
        port_count: usize,
        lane_size: usize,
        memory: *mut u8,
    ) -> Result<Geometry> {
        let geo = Geometry::new(layout, port_count, lane_size)?;
        if memory.is_null() || !(memory as usize).is_multiple_of(8) {
            return Err(Error::invalid(
                format!("rpc::Server::{constructor}"),
                format!("the block at {memory:p} is null or not 8-byte aligned"),
            ));
        }
        Ok(geo)
    }

    /// # Safety
    /// `base` points to `geo.allocation_size()` valid bytes that `backing` keeps alive.
    unsafe fn build(
        geo: Geometry,
        base: *mut u8,
        device_base: u64,
        backing: Backing,
    ) -> Result<Server> {
        let len = geo.allocation_size();
        // SAFETY: caller's contract; nobody else uses the block yet.
        unsafe { std::ptr::write_bytes(base, 0, len) };
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Wake::default());
        let in_process = Arc::new(AtomicBool::new(false));
        // SAFETY: caller's contract; both halves only use atomics on it.
        let (m1, m2) = unsafe { (HostMem::new(base, len), HostMem::new(base, len)) };
        if geo.layout == Layout::Current {
            // The doorbell: `value` and `mailbox` point at the counter and event word inside
            // its own padding; `event_id` stays 0. Clients then ring, and the server sees it.
            m1.write(
                0,
                &[
                    device_base + DOORBELL_COUNTER as u64,
                    device_base + DOORBELL_EVENT as u64,
                ],
            );
        }
        let client = Process::new(
            m2,
            geo,
            false,
            Some(stop.clone()),
            Some(wake.clone()),
            Some(Arc::new(AtomicBool::new(true))),
        );
        let mut inner = Inner {
            server: Process::new(
                m1,
                geo,
                true,
                Some(stop.clone()),
                None,
                Some(in_process.clone()),
            )
            .watching(&client),
            client,
            in_process,
            base,
            device_base,
            handlers: RwLock::new(HashMap::new()),
            stop,
            wake,
            active: AtomicUsize::new(0),
            next_port: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
            services: Arc::default(),
            _backing: backing,
        };
        inner
            .handlers
            .get_mut()
            .extend(services::builtins(&inner.services));
        Ok(Server {
            inner: Arc::new(inner),
            owner: true,
        })
    }

    /// The block's geometry (layout, port count, lane size and offsets).
    pub fn geometry(&self) -> Geometry {
        self.inner.server.geometry()
    }

    /// Bytes of the block.
    pub fn allocation_size(&self) -> usize {
        self.geometry().allocation_size()
    }

    /// Host address of the block (zeroed at creation, 64-byte aligned when the server allocated
    /// it). Access it only through the protocol.
    pub fn buffer(&self) -> *mut u8 {
        self.inner.base
    }

    /// The block's address as devices see it.
    pub fn device_address(&self) -> u64 {
        self.inner.device_base
    }

    /// The bytes of the device-side `Client` struct for this block, to copy into the
    /// `__llvm_rpc_client` symbol of a loaded module (2096 or 552 bytes, by layout).
    pub fn client_image(&self) -> Vec<u8> {
        self.inner.server.scan_up_to(self.geometry().port_count);
        self.geometry().client_image(self.inner.device_base)
    }

    /// [`client_image`](Self::client_image) for a client half that opens only ports
    /// `first..first + count` (its own lock bitmap then never races another half's); the
    /// server looks at those ports from now on. An error for a range outside the block.
    pub fn client_image_ports(&self, first: usize, count: usize) -> Result<Vec<u8>> {
        let geo = self.geometry();
        if count == 0 || first + count > geo.port_count {
            return Err(Error::invalid(
                "rpc::Server::client_image_ports",
                format!(
                    "ports {first}..{} are not a range of the block's {} ports",
                    first + count,
                    geo.port_count
                ),
            ));
        }
        self.inner.server.scan_up_to(first + count);
        Ok(geo.client_image_ports(self.inner.device_base, first, count))
    }

    /// Confines the in-process client half ([`client`](Self::client)) to ports
    /// `first..first + count`, and the server's scan to those ports until client images of
    /// other ranges widen it ([`client_image_ports`](Self::client_image_ports)). Call it
    /// before any client exists.
    pub fn confine_in_process_ports(&self, first: usize, count: usize) -> Result<()> {
        self.inner.client.set_ports(first, count)?;
        self.inner.server.scan_only(first + count);
        Ok(())
    }

    /// Serves `opcode` with `handler` from now on, replacing any earlier handler. Raw handlers
    /// may take any opcode, including the reserved libc (`'c'`) and offload (`'o'`) ranges,
    /// to override a built-in; [`register_service`](Self::register_service) refuses those.
    pub fn register(
        &self,
        opcode: u32,
        handler: impl Fn(&mut Port<'_>) -> Result<()> + Send + Sync + 'static,
    ) {
        self.inner
            .handlers
            .write()
            .insert(opcode, Arc::new(handler));
    }

    /// Serves every pending port once; returns how many it served. Handler errors and panics
    /// are answered with an error reply and recorded ([`take_errors`](Self::take_errors)).
    pub fn poll(&self) -> Result<usize> {
        Ok(self.inner.poll())
    }

    /// Messages of handler failures, unhandled opcodes and refused emissary calls since the
    /// last call.
    pub fn take_errors(&self) -> Vec<String> {
        let mut e = std::mem::take(&mut *self.inner.errors.lock());
        e.extend(self.inner.services.emissary.take_errors());
        e
    }

    /// Runs the server on its own thread until the returned handle is stopped or dropped; an
    /// error if the thread cannot be started (the server is then stopped).
    pub fn spawn(self) -> Result<ServerThread> {
        let view = Server {
            inner: self.inner.clone(),
            owner: false,
        };
        let join = std::thread::Builder::new()
            .name("streamexec-rpc".into())
            .spawn(move || {
                raise_priority();
                let _ = self.inner.wake.thread.set(std::thread::current());
                Inner::run(&self.inner);
                drop(self);
            })
            .map_err(|e| Error::Rpc {
                detail: format!("cannot start the server thread: {e}"),
            })?;
        Ok(ServerThread {
            server: view,
            join: Some(join),
        })
    }

    /// Marks one more kernel that may call the server as in flight: until a matching
    /// [`end_kernel`](Self::end_kernel) the idle thread parks for at most 100 µs at a time
    /// (1 ms otherwise), so device clients, which cannot wake it, are served sooner.
    pub fn begin_kernel(&self) {
        self.inner.active.fetch_add(1, Ordering::SeqCst);
        if let Some(t) = self.inner.wake.thread.get() {
            t.unpark();
        }
    }

    /// Ends a [`begin_kernel`](Self::begin_kernel).
    pub fn end_kernel(&self) {
        self.inner.active.fetch_sub(1, Ordering::SeqCst);
    }

    /// A handle that does not stop the server when dropped.
    pub fn view(&self) -> Server {
        Server {
            inner: self.inner.clone(),
            owner: false,
        }
    }

    /// Serves the typed service `S` under `S::OPCODE`. Refuses the reserved ranges.
    pub fn register_service<S: Service>(&self, service: S) -> Result<()> {
        check_user_opcode(S::OPCODE)?;
        self.inner
            .handlers
            .write()
            .insert(S::OPCODE, services::service_handler(service));
        Ok(())
    }

    /// Serves the Emissary API `api` (its table of host wrappers, by function index) through
    /// `OFFLOAD_EMISSARY`, replacing an earlier table with its id. Refuses id 0 and index 0
    /// (reserved as invalid).
    pub fn register_emissary(&self, api: EmissaryApi) -> Result<()> {
        self.inner.services.emissary.register(api)
    }

    /// Resolves emissary pointer arguments with `memory` from now on (an executor's server
    /// installs one over its allocations; a standalone server refuses pointers).
    pub fn set_emissary_memory(&self, memory: Arc<dyn EmissaryMemory>) {
        self.inner.services.emissary.set_memory(memory)
    }

    /// Lets kernels call `f` through `HOST_CALL` / `OFFLOAD_HOST_CALL`; returns the value they
    /// pass as the function pointer. Pointers never registered get an error reply.
    pub fn register_host_function(&self, f: HostFunction) -> u64 {
        self.inner.services.register_host_function(f)
    }

    /// Sends kernel stdout (`None`: the process's stdout) to `w`.
    pub fn set_stdout(&self, w: Option<Box<dyn Write + Send>>) {
        self.inner.services.set_output(false, w)
    }

    /// Sends kernel stderr (`None`: the process's stderr) to `w`.
    pub fn set_stderr(&self, w: Option<Box<dyn Write + Send>>) {
        self.inner.services.set_output(true, w)
    }

    /// `exit` / `abort` calls recorded since the last call while no RPC launch of an executor
    /// ran (those are charged to the launches instead: they fail their streams).
    pub fn take_exits(&self) -> Vec<KernelExit> {
        self.inner.services.take_exits()
    }

    /// Serves `MALLOC` / `FREE` with these callbacks (an executor's device memory) instead of
    /// host memory.
    pub fn set_allocator(&self, a: Allocator) {
        self.inner.services.set_allocator(a)
    }

    /// Reports `exit` / `abort` calls to `observer` as they are served (an executor charges
    /// them to its running launches); `None`: they go to [`take_exits`](Self::take_exits).
    pub fn set_exit_observer(&self, observer: Option<Arc<dyn ExitObserver>>) {
        self.inner.services.set_exit_observer(observer)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.owner {
            self.inner.stop.store(true, Ordering::SeqCst);
        }
    }
}

impl Inner {
    fn record_error(&self, msg: String) {
        eprintln!("streamexec rpc: {msg}");
        let mut e = self.errors.lock();
        if e.len() < 1024 {
            e.push(msg);
        }
    }

    pub(crate) fn poll(&self) -> usize {
        (0..self.server.scan_end())
            .filter(|&index| self.serve(index))
            .count()
    }

    /// Serves port `index` if it is pending; true when it did.
    fn serve(&self, index: usize) -> bool {
        let Some(mut port) = self.server.open_pending(index) else {
            return false;
        };
        self.dispatch(&mut port);
        true
    }

    fn dispatch(&self, port: &mut Port<'_>) {
        let opcode = port.opcode();
        let handler = self.handlers.read().get(&opcode).cloned();
        let Some(handler) = handler else {
            self.record_error(format!(
                "unhandled opcode {opcode:#010x} on port {}; replied RPC_UNHANDLED_OPCODE",
                port.index()
            ));
            port.reply_error(RPC_UNHANDLED_OPCODE);
            return;
        };
        let failure = match catch_unwind(AssertUnwindSafe(|| handler(port))) {
            Ok(Ok(())) => return,
            Ok(Err(e)) => with_sources(&e),
            Err(payload) => format!("panicked: {}", panic_message(&*payload)),
        };
        self.record_error(format!(
            "handler for opcode {opcode:#010x} on port {} failed: {failure}; replied RPC_ERROR",
            port.index()
        ));
        port.reply_error(RPC_ERROR);
    }

    /// The server thread. Every pending port's handler runs as a call (`calls.rs`); each pass
    /// resumes the calls in flight and starts calls for newly pending ports. While calls are in
    /// flight it spins, yields now and then once a wait grows long, parks when every call waits
    /// on an in-process client (which wakes it), and after [`STALL`] without progress steps off
    /// its core (`affinity.rs`: the client may be waiting for it) and sleeps briefly. With no call in
    /// flight it spins for [`IDLE_SPIN`] (a client's next call usually follows within
    /// microseconds), then parks for a time that doubles up to a cap: [`BUSY_PARK`] while a
    /// kernel is in flight or the doorbell has rung, [`IDLE_PARK`] otherwise, [`DEEP_PARK`]
    /// after [`LONG_IDLE`] of quiet. In-process clients unpark it at once; clients that cannot
    /// (devices, LLVM's own client) are seen within the cap.
    fn run(self: &Arc<Self>) {
        // On one core (an MPI rank bound to it, `taskset`), spinning only keeps the clients
        // from running: park at once. Measured with an in-process client on one core: 70 µs a
        // call with the spin, against 1.6 µs on two.
        let idle_spin = match std::thread::available_parallelism() {
            Ok(n) if n.get() == 1 => Duration::ZERO,
            _ => IDLE_SPIN,
        };
        let mut calls = Calls::default();
        let mut quiet_since: Option<Instant> = None;
        let mut park = PARK_FIRST;
        let mut passes = 0u32;
        let mut aside = crate::affinity::StepAside::new();
        loop {
            let stopping = self.stop.load(Ordering::SeqCst);
            if stopping && calls.len() == 0 {
                return;
            }
            let mut progress = calls.pass();
            if !stopping {
                progress |= self.start_calls(&mut calls);
            }
            if progress {
                quiet_since = None;
                park = PARK_FIRST;
                passes = 0;
                continue;
            }
            passes = passes.saturating_add(1);
            let quiet = quiet_since.get_or_insert_with(Instant::now).elapsed();
            if calls.len() > 0 {
                // Every call waits on an in-process client (which wakes the thread) or on an
                // external event (an MPI request: seen within the park; a spinning thread would
                // take the core from the processes and kernels that make the event happen).
                if quiet >= idle_spin && calls.all_waiting(|p| self.server.peer_holds(p)) {
                    self.park_unless_pending(BUSY_PARK);
                } else if quiet >= STALL && passes.is_multiple_of(64) {
                    // A client has not answered for a millisecond: it is off the CPU, quite
                    // possibly waiting for this core (a yield does not give a nice -20
                    // thread's core away to ordinary threads). Leave this core to it, and
                    // sleep briefly.
                    aside.step_aside();
                    self.park_unless_pending(STALL_PARK);
                } else if passes >= YIELD_AFTER_PASSES && passes.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            if quiet < idle_spin {
                std::hint::spin_loop();
                continue;
            }
            let busy = self.active.load(Ordering::SeqCst) > 0 || self.server.rung();
            aside.restore();
            if self.park_unless_pending(park) {
                let cap = if busy {
                    BUSY_PARK
                } else if quiet < LONG_IDLE {
                    IDLE_PARK
                } else {
                    DEEP_PARK
                };
                park = (park * 2).min(cap);
            } else {
                quiet_since = None;
                park = PARK_FIRST;
            }
        }
    }

    /// Starts a call for every pending port that has none; true when it started one.
    fn start_calls(self: &Arc<Self>, calls: &mut Calls) -> bool {
        let mut started = false;
        for index in 0..self.server.scan_end() {
            if !self.server.pending(index) || calls.serving(index) {
                continue;
            }
            if cfg!(miri) {
                // Miri cannot switch stacks: one call at a time, as `poll` serves them.
                started |= self.serve(index);
                continue;
            }
            let inner = self.clone();
            match calls.start(index, move || {
                inner.serve(index);
            }) {
                Ok(()) => started = true,
                Err(e) => {
                    // Out of memory for stacks: the port stays pending for a later pass.
                    self.record_error(format!("port {index}: {e}"));
                    break;
                }
            }
        }
        started
    }

    /// Parks the thread for up to `timeout` unless a port is pending; true when it parked.
    /// In-process clients see `sleeping` and unpark it when they hand a port over.
    fn park_unless_pending(&self, timeout: Duration) -> bool {
        self.wake.sleeping.store(true, Ordering::Relaxed);
        // Pairs with the clients' fence in `Wake::notify`: either they see `sleeping`, or the
        // check below sees their mailbox store.
        std::sync::atomic::fence(Ordering::SeqCst);
        let parks = !self.server.any_pending(None) && !self.stop.load(Ordering::SeqCst);
        if parks {
            std::thread::park_timeout(timeout);
        }
        self.wake.sleeping.store(false, Ordering::Relaxed);
        parks
    }
}

/// Passes without progress, with calls in flight, before the thread starts yielding (one pass
/// in 64) to a client that may be waiting for its core.
const YIELD_AFTER_PASSES: u32 = 1 << 12;
/// The server thread's nice value unless `STREAMEXEC_RPC_SERVER_NICE` says otherwise.
const SERVER_NICE: i32 = -20;

/// Gives the calling (server) thread a higher scheduling priority, where the OS allows it
/// (root or `CAP_SYS_NICE`; elsewhere this does nothing). Clients that spin on every core (CPU
/// kernels, LLVM's own client) would otherwise hold the server to a fair share of a core: with
/// 32 of them on 2 cores, one thirty-third of the machine. The thread only runs while calls
/// are in flight and parks otherwise, so it takes nothing from the machine when idle.
/// `STREAMEXEC_RPC_SERVER_NICE` sets the nice value (0 keeps the default priority).
fn raise_priority() {
    let nice = std::env::var("STREAMEXEC_RPC_SERVER_NICE")
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .unwrap_or(SERVER_NICE)
        .clamp(-20, 19);
    if nice == 0 {
        return;
    }
    #[cfg(all(target_os = "linux", not(miri)))]
    // SAFETY: `gettid` has no preconditions; `setpriority` on our own thread id only changes
    // its nice value and reports failure (no permission) through its return value, ignored.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}

/// How long an idle server thread spins before it parks.
const IDLE_SPIN: Duration = Duration::from_micros(50);
/// With calls in flight, no progress for this long means their clients are off the CPU: the
/// thread then leaves its core and parks [`STALL_PARK`] at a time (one pass in 64), so it does
/// not keep a core from them (spin-only clients of several processes on few cores: MPI ranks;
/// a client sharing the core with it while another process takes the other). Measured in
/// `benches/rpc.rs` (`spin_clients_loaded`): without leaving the core, one client's calls
/// stalled for about 120 ms now and then; parking sooner (100 µs) made every call slow.
const STALL: Duration = Duration::from_millis(1);
/// See [`STALL`].
const STALL_PARK: Duration = Duration::from_micros(50);
/// Its first park.
const PARK_FIRST: Duration = Duration::from_micros(20);
/// The longest park while kernels are in flight or the doorbell has rung.
const BUSY_PARK: Duration = Duration::from_micros(100);
/// The longest park otherwise, for the first [`LONG_IDLE`] of quiet.
const IDLE_PARK: Duration = Duration::from_millis(1);
/// Quiet after which parks grow to [`DEEP_PARK`].
const LONG_IDLE: Duration = Duration::from_millis(100);
/// The longest park of a server quiet for [`LONG_IDLE`]: the most a client that cannot wake
/// the server waits for it, at a cost of 100 wake-ups a second.
const DEEP_PARK: Duration = Duration::from_millis(10);

/// A server running on its own thread. Stops and joins on drop; in-process clients still
/// waiting on it then fail with `Error::Rpc` instead of hanging.
pub struct ServerThread {
    server: Server,
    join: Option<JoinHandle<()>>,
}

impl ServerThread {
    /// The running server (register handlers, make clients, mark kernels in flight).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.server.inner.stop.store(true, Ordering::SeqCst);
        if let Some(j) = self.join.take() {
            j.thread().unpark();
            let _ = j.join();
        }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::ops::Deref for ServerThread {
    type Target = Server;
    fn deref(&self) -> &Server {
        &self.server
    }
}
