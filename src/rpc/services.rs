//! Built-in services (rpc-protocol.md section 10.1), typed user services, and the Emissary-style
//! dispatcher. Every built-in is a plain handler registered on a new server, so a user may
//! replace one with `Server::register`.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use bytemuck::Pod;
use parking_lot::{Mutex, RwLock};

use super::opcode as op;
use super::port::Port;
use super::printf;
use super::server::Server;
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

/// Device memory handed out by `MALLOC`: (allocate, free) callbacks.
pub(crate) type Allocator = (
    Box<dyn Fn(u64) -> Result<u64> + Send + Sync>,
    Box<dyn Fn(u64) + Send + Sync>,
);

/// Per-server state of the built-in services.
#[derive(Default)]
pub(crate) struct ServiceState {
    pub(crate) stdout: Sink,
    pub(crate) stderr: Sink,
    pub(crate) exits: Mutex<Vec<KernelExit>>,
    pub(crate) launches: super::launches::Launches,
    pub(crate) allocator: RwLock<Option<Allocator>>,
    host_blocks: Mutex<HashMap<u64, Box<[u64]>>>,
    pub(crate) host_functions: RwLock<HashMap<u64, HostFunction>>,
    pub(crate) emissary: RwLock<HashMap<(u32, u32), EmissaryFn>>,
    pub(crate) files: files::Files,
}

/// A host function kernels may call through `HOST_CALL`: it gets the argument blob.
pub type HostFunction = extern "C" fn(*mut std::ffi::c_void) -> u64;
type EmissaryFn = Arc<dyn Fn(&[u8]) -> Result<Vec<u8>> + Send + Sync>;

/// Streamexec's Emissary opcode (`'s' 'E'` in the top bytes, outside the reserved ranges).
pub const EMISSARY_OPCODE: u32 = 0x7345_0000;

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

/// Tuples of `Pod` values read from a packed (unpadded) argument buffer.
pub trait Emissary: Sized {
    /// Reads `Self` from the front of `bytes`; `None` if it is too short.
    fn unpack(bytes: &[u8]) -> Option<Self>;
}

fn take<T: Pod>(bytes: &mut &[u8]) -> Option<T> {
    let n = std::mem::size_of::<T>();
    let v = bytemuck::try_pod_read_unaligned(bytes.get(..n)?).ok()?;
    *bytes = &bytes[n..];
    Some(v)
}

impl Emissary for () {
    fn unpack(_: &[u8]) -> Option<Self> {
        Some(())
    }
}
impl<A: Pod> Emissary for (A,) {
    fn unpack(mut b: &[u8]) -> Option<Self> {
        Some((take(&mut b)?,))
    }
}
impl<A: Pod, B: Pod> Emissary for (A, B) {
    fn unpack(mut b: &[u8]) -> Option<Self> {
        Some((take(&mut b)?, take(&mut b)?))
    }
}
impl<A: Pod, B: Pod, C: Pod> Emissary for (A, B, C) {
    fn unpack(mut b: &[u8]) -> Option<Self> {
        Some((take(&mut b)?, take(&mut b)?, take(&mut b)?))
    }
}
impl<A: Pod, B: Pod, C: Pod, D: Pod> Emissary for (A, B, C, D) {
    fn unpack(mut b: &[u8]) -> Option<Self> {
        Some((take(&mut b)?, take(&mut b)?, take(&mut b)?, take(&mut b)?))
    }
}

fn lane_error(opcode: u32, what: String) -> Error {
    Error::Rpc {
        detail: format!("opcode {opcode:#010x}: {what}"),
    }
}

impl Server {
    /// Serves the typed service `S` under `S::OPCODE`. Refuses the reserved ranges.
    pub fn register_service<S: Service>(&self, service: S) -> Result<()> {
        check_user_opcode(S::OPCODE)?;
        self.register(S::OPCODE, move |port| {
            let lanes = port.recv_n()?;
            let mut replies = vec![Vec::new(); lanes.len()];
            for lane in (0..lanes.len()).filter(|l| port.mask() >> l & 1 == 1) {
                let req: S::Request =
                    bytemuck::try_pod_read_unaligned(&lanes[lane]).map_err(|_| {
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
        });
        Ok(())
    }

    /// Exposes `f` to kernels as Emissary function (`service`, `index`): the device sends the
    /// pair and a packed argument buffer, `f` gets the arguments unpacked, and its result goes
    /// back as bytes.
    pub fn expose<A: Emissary, R: Pod>(
        &self,
        service: u32,
        index: u32,
        f: impl Fn(A) -> R + Send + Sync + 'static,
    ) {
        let call = move |bytes: &[u8]| {
            let args = A::unpack(bytes).ok_or_else(|| {
                lane_error(
                    EMISSARY_OPCODE,
                    format!(
                        "{} argument bytes are too few for {}",
                        bytes.len(),
                        std::any::type_name::<A>()
                    ),
                )
            })?;
            Ok(bytemuck::bytes_of(&f(args)).to_vec())
        };
        self.inner
            .services
            .emissary
            .write()
            .insert((service, index), Arc::new(call));
    }

    /// Lets kernels call `f` through `HOST_CALL` / `OFFLOAD_HOST_CALL`; returns the value they
    /// pass as the function pointer. Pointers never registered get an error reply.
    pub fn register_host_function(&self, f: HostFunction) -> u64 {
        let key = f as usize as u64;
        self.inner.services.host_functions.write().insert(key, f);
        key
    }

    /// Sends kernel stdout (`None`: the process's stdout) to `w`.
    pub fn set_stdout(&self, w: Option<Box<dyn Write + Send>>) {
        *self.inner.services.stdout.lock() = w;
    }

    /// Sends kernel stderr (`None`: the process's stderr) to `w`.
    pub fn set_stderr(&self, w: Option<Box<dyn Write + Send>>) {
        *self.inner.services.stderr.lock() = w;
    }

    /// `exit` / `abort` calls recorded since the last call while no RPC launch of an executor
    /// ran (those are charged to the launches instead: they fail their streams).
    pub fn take_exits(&self) -> Vec<KernelExit> {
        std::mem::take(&mut *self.inner.services.exits.lock())
    }

    /// Serves `MALLOC` / `FREE` with these callbacks (the executor's device memory).
    pub(crate) fn set_allocator(&self, a: Allocator) {
        *self.inner.services.allocator.write() = Some(a);
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

/// Registers every built-in service on `server`.
pub(crate) fn install_builtins(server: &Server) {
    server.register(op::NOOP, |port| port.recv(|_, _| {}));
    for (code, exit) in [(op::EXIT, true), (op::ABORT, false)] {
        let s = server.weak();
        server.register(code, move |port| {
            port.recv_and_send(|_, _| {})?;
            // The caller waits for this handshake, so it is running now (see launches.rs).
            let ticket = s
                .upgrade()
                .and_then(|s| s.services.launches.exit_begun(!exit));
            let mut status = 0i32;
            port.recv(|_, p| status = p[0] as u32 as i32)?;
            let what = if exit {
                KernelExit::Exit(status)
            } else {
                KernelExit::Abort
            };
            if let Some(s) = s.upgrade() {
                match ticket {
                    Some(t) => s.services.launches.exit_done(t, what),
                    None => s.services.exits.lock().push(what),
                }
            }
            Ok(())
        });
    }
    for code in [
        op::WRITE_TO_STDOUT,
        op::WRITE_TO_STDERR,
        op::WRITE_TO_STDOUT_NEWLINE,
        op::WRITE_TO_STREAM,
    ] {
        let s = server.weak();
        server.register(code, move |port| {
            let s = s.upgrade().ok_or_else(gone)?;
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
                counts[l] = s.services.files.write(&s.services, streams[l], &bytes);
            }
            reply_words(port, &counts)
        });
    }
    for code in [
        op::PRINTF_TO_STDOUT,
        op::PRINTF_TO_STDERR,
        op::PRINTF_TO_STREAM,
        op::PRINTF_TO_STDOUT_PACKED,
        op::PRINTF_TO_STDERR_PACKED,
        op::PRINTF_TO_STREAM_PACKED,
    ] {
        let s = server.weak();
        server.register(code, move |port| {
            let s = s.upgrade().ok_or_else(gone)?;
            printf_service(&s.services, port, code)
        });
    }
    let s = server.weak();
    server.register(op::MALLOC, move |port| {
        let s = s.upgrade().ok_or_else(gone)?;
        let mut sizes = vec![0u64; port.lane_size()];
        port.recv(|l, p| sizes[l] = p[0])?;
        let mut ptrs = vec![0u64; sizes.len()];
        for l in lanes_of(port) {
            ptrs[l] = s.services.malloc(sizes[l]).unwrap_or(0);
        }
        reply_words(port, &ptrs)
    });
    let s = server.weak();
    server.register(op::FREE, move |port| {
        let s = s.upgrade().ok_or_else(gone)?;
        let mut ptrs = vec![0u64; port.lane_size()];
        port.recv(|l, p| ptrs[l] = p[0])?;
        for l in lanes_of(port) {
            s.services.free(ptrs[l]);
        }
        Ok(())
    });
    for code in [op::HOST_CALL, op::OFFLOAD_HOST_CALL] {
        let s = server.weak();
        server.register(code, move |port| {
            let s = s.upgrade().ok_or_else(gone)?;
            let mut blobs = port.recv_n()?;
            let mut fns = vec![0u64; blobs.len()];
            port.recv(|l, p| fns[l] = p[0])?;
            let mut results = vec![0u64; blobs.len()];
            for l in lanes_of(port) {
                let f = s.services.host_functions.read().get(&fns[l]).copied();
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
        });
    }
    let s = server.weak();
    server.register(EMISSARY_OPCODE, move |port| {
        let s = s.upgrade().ok_or_else(gone)?;
        let mut ids = vec![(0u32, 0u32); port.lane_size()];
        port.recv(|l, p| ids[l] = (p[0] as u32, p[1] as u32))?;
        let args = port.recv_n()?;
        let mut replies = vec![Vec::new(); args.len()];
        for l in lanes_of(port) {
            let f = s.services.emissary.read().get(&ids[l]).cloned();
            let f = f.ok_or_else(|| {
                lane_error(
                    EMISSARY_OPCODE,
                    format!(
                        "no function exposed as service {} index {}",
                        ids[l].0, ids[l].1
                    ),
                )
            })?;
            replies[l] = f(&args[l])?;
        }
        port.send_n(|l| &replies[l])
    });
    files::install(server);
}

fn gone() -> Error {
    Error::Rpc {
        detail: "the server is shutting down".into(),
    }
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
        let text = printf::format(&pieces[l], &slots[l], &args[l], &strings);
        results[l] = s.files.write(s, streams[l], &text) as u32 as u64;
    }
    port.send(|l, p| {
        p[0] = results[l];
        p[1] = 0;
    })
}
