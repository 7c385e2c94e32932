//! Built-in services (rpc-protocol.md section 10.1), typed user services, and the Emissary
//! dispatcher's opcode (`emissary.rs`): handlers over a [`ServiceState`], knowing nothing of
//! the server they run in. A new server installs every built-in ([`builtins`]) as a plain
//! handler, so a user may replace one with `Server::register`; the server's methods that
//! configure them (`set_stdout`, `register_emissary`, `register_service`, `take_exits`, ...)
//! delegate to the state here.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use bytemuck::Pod;
use parking_lot::{Mutex, RwLock};

use super::opcode as op;
use super::port::{Handler, Port};
use super::printf;
use crate::error::{Error, Result};

mod files;

pub use files::StdStream;

/// Output sink for kernel output; `None` means the process's own stdout/stderr.
pub(crate) type Sink = Arc<Mutex<Option<Box<dyn Write + Send>>>>;

/// How a kernel ended early: `exit(status)` or `abort()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelExit {
    /// `exit(status)`.
    Exit(i32),
    /// `abort()`.
    Abort,
}

/// Told about `exit`/`abort` calls as the server serves them, so that a layer above the
/// protocol can charge them to what it knows was running (an executor's RPC launches). Without
/// one, every exit goes to `Server::take_exits`.
pub trait ExitObserver: Send + Sync {
    /// The handshake of an `exit` (`abort == false`) or `abort` is being served: the device
    /// waits for it, so the caller is running now. A ticket when the observer takes the exit;
    /// `None` leaves it to `Server::take_exits`.
    fn exit_begun(&self, abort: bool) -> Option<u64>;
    /// The status of the exit `ticket` arrived.
    fn exit_done(&self, ticket: u64, exit: KernelExit);
}

/// Device memory handed out by `MALLOC`: (allocate `bytes` → device address, free address)
/// callbacks ([`Server::set_allocator`](crate::Server::set_allocator)).
pub type Allocator = (
    Box<dyn Fn(u64) -> Result<u64> + Send + Sync>,
    Box<dyn Fn(u64) + Send + Sync>,
);

/// Per-server state of the built-in services (shared by the server and its built-in handlers).
#[derive(Default)]
pub(crate) struct ServiceState {
    stdout: Sink,
    stderr: Sink,
    exits: Mutex<Vec<KernelExit>>,
    exit_observer: RwLock<Option<Arc<dyn ExitObserver>>>,
    allocator: RwLock<Option<Allocator>>,
    host_blocks: Mutex<HashMap<u64, Box<[u64]>>>,
    host_functions: RwLock<HashMap<u64, HostFunction>>,
    pub(crate) emissary: Arc<super::emissary::Dispatcher>,
    files: files::Files,
}

/// A host function kernels may call through `HOST_CALL`: it gets the argument blob.
pub type HostFunction = extern "C" fn(*mut std::ffi::c_void) -> u64;

/// `Ok` unless `opcode` is in the libc (`'c'`) or offload (`'o'`) range, which user services
/// may not take.
pub fn check_user_opcode(opcode: u32) -> Result<()> {
    match opcode >> 24 {
        0x63 | 0x6F => Err(Error::invalid(
            "rpc::Server::register_service",
            format!(
                "opcode {opcode:#010x} is in the reserved {} range; pick one whose top byte is \
                 neither 'c' (0x63) nor 'o' (0x6F)",
                if opcode >> 24 == 0x63 {
                    "libc 'c'"
                } else {
                    "offload 'o'"
                }
            ),
        )),
        _ => Ok(()),
    }
}

/// A typed user service: one opcode, a `Pod` request and a `Pod` response (streamed with
/// send_n / recv_n, so any size works).
pub trait Service: Send + Sync + 'static {
    /// The opcode; outside the reserved ranges.
    const OPCODE: u32;
    /// What the device sends.
    type Request: Pod;
    /// What the host answers.
    type Response: Pod;
    /// Serves one lane's request; an `Err` becomes an error reply.
    fn call(&self, request: Self::Request) -> Result<Self::Response>;
}

fn lane_error(opcode: u32, what: String) -> Error {
    Error::Rpc {
        detail: format!("opcode {opcode:#010x}: {what}"),
    }
}

/// The handler of the typed service `S` (its opcode is checked by the caller).
pub(crate) fn service_handler<S: Service>(service: S) -> Handler {
    handler(move |port| {
        let lanes = port.recv_n()?;
        let mut replies = vec![Vec::new(); lanes.len()];
        for lane in (0..lanes.len()).filter(|l| port.mask() >> l & 1 == 1) {
            let req: S::Request = bytemuck::try_pod_read_unaligned(&lanes[lane]).map_err(|_| {
                lane_error(
                    S::OPCODE,
                    format!(
                        "lane {lane} sent {} bytes; the request type has {}",
                        lanes[lane].len(),
                        std::mem::size_of::<S::Request>()
                    ),
                )
            })?;
            replies[lane] = bytemuck::bytes_of(&service.call(req)?).to_vec();
        }
        port.send_n(|l| &replies[l])
    })
}

impl ServiceState {
    /// Lets kernels call `f` through `HOST_CALL`; the value they pass as its pointer.
    pub(crate) fn register_host_function(&self, f: HostFunction) -> u64 {
        let key = f as usize as u64;
        self.host_functions.write().insert(key, f);
        key
    }

    /// Where kernel stdout (`stderr == false`) or stderr goes; `None`: the process's own.
    pub(crate) fn set_output(&self, stderr: bool, w: Option<Box<dyn Write + Send>>) {
        let sink = if stderr { &self.stderr } else { &self.stdout };
        *sink.lock() = w;
    }

    /// `exit` / `abort` calls no [`ExitObserver`] took, since the last call.
    pub(crate) fn take_exits(&self) -> Vec<KernelExit> {
        std::mem::take(&mut *self.exits.lock())
    }

    /// Serves `MALLOC` / `FREE` with these callbacks.
    pub(crate) fn set_allocator(&self, a: Allocator) {
        *self.allocator.write() = Some(a);
    }

    /// Reports `exit` / `abort` calls to `observer` (`None`: to `take_exits`).
    pub(crate) fn set_exit_observer(&self, observer: Option<Arc<dyn ExitObserver>>) {
        *self.exit_observer.write() = observer;
    }
}

/// Writes `bytes` to a sink (or the process stream); returns the count written.
pub(crate) fn write_to(sink: &Sink, stderr: bool, bytes: &[u8]) -> u64 {
    let mut g = sink.lock();
    let ok = match g.as_mut() {
        Some(w) => w.write_all(bytes).and_then(|_| w.flush()),
        None if stderr => std::io::stderr().lock().write_all(bytes),
        None => {
            let mut o = std::io::stdout().lock();
            o.write_all(bytes).and_then(|_| o.flush())
        }
    };
    if ok.is_ok() { bytes.len() as u64 } else { 0 }
}

fn lanes_of(port: &Port<'_>) -> impl Iterator<Item = usize> + use<> {
    let (mask, n) = (port.mask(), port.lane_size());
    (0..n).filter(move |l| mask >> l & 1 == 1)
}

fn reply_words(port: &mut Port<'_>, words: &[u64]) -> Result<()> {
    port.send(|l, p| {
        p[0] = words[l];
    })
}

/// `f` as a [`Handler`].
pub(crate) fn handler(f: impl Fn(&mut Port<'_>) -> Result<()> + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

/// Every built-in service, by opcode, serving from `state`.
pub(crate) fn builtins(state: &Arc<ServiceState>) -> Vec<(u32, Handler)> {
    let mut out = vec![(op::NOOP, handler(|port| port.recv(|_, _| {})))];
    for (code, exit) in [(op::EXIT, true), (op::ABORT, false)] {
        let s = state.clone();
        out.push((
            code,
            handler(move |port| {
                // The caller waits for the reply to this handshake, so it is running until the
                // reply is sent: charge the exit before sending it (see ExitObserver), or the
                // kernel may end, and its launch finish uncharged, in between.
                port.recv(|_, _| {})?;
                let observer = s.exit_observer.read().clone();
                let ticket = observer.as_ref().and_then(|o| o.exit_begun(!exit));
                port.send(|_, _| {})?;
                let mut status = 0i32;
                port.recv(|_, p| status = p[0] as u32 as i32)?;
                let what = if exit {
                    KernelExit::Exit(status)
                } else {
                    KernelExit::Abort
                };
                match (observer, ticket) {
                    (Some(o), Some(t)) => o.exit_done(t, what),
                    _ => s.exits.lock().push(what),
                }
                Ok(())
            }),
        ));
    }
    for code in [
        op::WRITE_TO_STDOUT,
        op::WRITE_TO_STDERR,
        op::WRITE_TO_STDOUT_NEWLINE,
        op::WRITE_TO_STREAM,
    ] {
        let s = state.clone();
        out.push((
            code,
            handler(move |port| {
                let mut streams = vec![2u64; port.lane_size()];
                if code == op::WRITE_TO_STREAM {
                    port.recv(|l, p| streams[l] = p[0])?;
                } else if code == op::WRITE_TO_STDERR {
                    streams.fill(3);
                }
                let data = port.recv_n()?;
                let mut counts = vec![0u64; data.len()];
                for l in lanes_of(port) {
                    let mut bytes = data[l].clone();
                    if code == op::WRITE_TO_STDOUT_NEWLINE {
                        bytes.push(b'\n');
                    }
                    counts[l] = s.files.write(&s, streams[l], &bytes);
                }
                reply_words(port, &counts)
            }),
        ));
    }
    for code in [
        op::PRINTF_TO_STDOUT,
        op::PRINTF_TO_STDERR,
        op::PRINTF_TO_STREAM,
        op::PRINTF_TO_STDOUT_PACKED,
        op::PRINTF_TO_STDERR_PACKED,
        op::PRINTF_TO_STREAM_PACKED,
    ] {
        let s = state.clone();
        out.push((code, handler(move |port| printf_service(&s, port, code))));
    }
    let s = state.clone();
    out.push((
        op::MALLOC,
        handler(move |port| {
            let mut sizes = vec![0u64; port.lane_size()];
            port.recv(|l, p| sizes[l] = p[0])?;
            let mut ptrs = vec![0u64; sizes.len()];
            for l in lanes_of(port) {
                ptrs[l] = s.malloc(sizes[l]).unwrap_or(0);
            }
            reply_words(port, &ptrs)
        }),
    ));
    let s = state.clone();
    out.push((
        op::FREE,
        handler(move |port| {
            let mut ptrs = vec![0u64; port.lane_size()];
            port.recv(|l, p| ptrs[l] = p[0])?;
            for l in lanes_of(port) {
                s.free(ptrs[l]);
            }
            Ok(())
        }),
    ));
    for code in [op::HOST_CALL, op::OFFLOAD_HOST_CALL] {
        let s = state.clone();
        out.push((
            code,
            handler(move |port| {
                let mut blobs = port.recv_n()?;
                let mut fns = vec![0u64; blobs.len()];
                port.recv(|l, p| fns[l] = p[0])?;
                let mut results = vec![0u64; blobs.len()];
                for l in lanes_of(port) {
                    let f = s.host_functions.read().get(&fns[l]).copied();
                    let f = f.ok_or_else(|| {
                        lane_error(
                            code,
                            format!(
                                "{:#x} is not a registered host function (Server::register_host_function)",
                                fns[l]
                            ),
                        )
                    })?;
                    results[l] = f(blobs[l].as_mut_ptr().cast());
                }
                reply_words(port, &results)
            }),
        ));
    }
    out.push((
        op::OFFLOAD_EMISSARY,
        super::emissary::handler(state.emissary.clone()),
    ));
    files::handlers(state, &mut out);
    out
}

impl ServiceState {
    fn malloc(&self, bytes: u64) -> Result<u64> {
        if let Some((alloc, _)) = &*self.allocator.read() {
            return alloc(bytes);
        }
        // Standalone server: host memory (a device on the same host reaches it).
        let words = bytes.div_ceil(8).max(1) as usize;
        let block = vec![0u64; words].into_boxed_slice();
        let addr = block.as_ptr() as u64;
        self.host_blocks.lock().insert(addr, block);
        Ok(addr)
    }

    fn free(&self, addr: u64) {
        if let Some((_, free)) = &*self.allocator.read() {
            return free(addr);
        }
        self.host_blocks.lock().remove(&addr);
    }
}

fn printf_service(s: &ServiceState, port: &mut Port<'_>, code: u32) -> Result<()> {
    let to_stream = matches!(code, op::PRINTF_TO_STREAM | op::PRINTF_TO_STREAM_PACKED);
    let packed = code >= op::PRINTF_TO_STDOUT_PACKED;
    let n = port.lane_size();
    let mut streams = vec![
        if matches!(code, op::PRINTF_TO_STDERR | op::PRINTF_TO_STDERR_PACKED) {
            3
        } else {
            2
        };
        n
    ];
    if to_stream {
        port.recv(|l, p| streams[l] = p[0])?;
    }
    let formats = port.recv_n()?;
    let lanes: Vec<usize> = lanes_of(port).collect();
    let mut pieces = vec![Vec::new(); n];
    let mut slots = vec![Vec::new(); n];
    let mut sizes = vec![0u64; n];
    for &l in &lanes {
        let f = &formats[l];
        let f = &f[..f.iter().position(|&c| c == 0).unwrap_or(f.len())];
        pieces[l] = printf::parse(f);
        let (sl, size) = printf::layout(&pieces[l], packed);
        slots[l] = sl;
        sizes[l] = size as u64;
    }
    reply_words(port, &sizes)?;
    let args = port.recv_n()?;
    // Each lane's %s pointers, fetched from the end of the list (the order the protocol uses).
    let mut pending: Vec<Vec<u64>> = vec![Vec::new(); n];
    for &l in &lanes {
        for off in printf::string_slots(&pieces[l], &slots[l]) {
            let mut b = [0u8; 8];
            if let Some(src) = args[l].get(off..off + 8) {
                b.copy_from_slice(src);
            }
            pending[l].push(u64::from_le_bytes(b));
        }
    }
    let mut fetched: Vec<Vec<Option<Vec<u8>>>> = vec![Vec::new(); n];
    let mut nulls: Vec<Vec<bool>> = pending
        .iter()
        .map(|p| p.iter().map(|&a| a == 0).collect())
        .collect();
    for p in &mut pending {
        p.retain(|&a| a != 0);
    }
    while lanes.iter().any(|&l| !pending[l].is_empty()) {
        let next: Vec<u64> = (0..n).map(|l| pending[l].pop().unwrap_or(0)).collect();
        port.send(|l, p| p[1] = next[l])?;
        let got = port.recv_n()?;
        for &l in &lanes {
            if next[l] != 0 {
                fetched[l].push(Some(got[l].clone()));
            }
        }
    }
    let mut results = vec![0u64; n];
    for &l in &lanes {
        // Strings arrived last-first; put them back in format order, with nulls in place.
        let mut it = fetched[l].drain(..).rev();
        let strings: Vec<Option<Vec<u8>>> = nulls[l]
            .drain(..)
            .map(|null| if null { None } else { it.next().flatten() })
            .collect();
        let text = printf::format_pieces(&pieces[l], &slots[l], &args[l], &strings);
        results[l] = s.files.write(s, streams[l], &text) as u32 as u64;
    }
    port.send(|l, p| {
        p[0] = results[l];
        p[1] = 0;
    })
}
