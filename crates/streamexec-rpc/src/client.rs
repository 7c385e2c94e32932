//! The in-process client: what a host-platform kernel (or a test pretending to be a device)
//! uses to call the server. Lane size 1 in the usual case; [`Client::open_lanes`] acts as a
//! whole warp in one thread (a mask of active lanes, one packet slot per lane).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::emissary::{EmissaryArg, EmissaryReply, EmissaryStatus, encode};
use super::layout::{Geometry, Layout, Packet};
use super::mem::{HostMem, Wait};
use super::opcode;
use super::port::{Port, Process};
use super::server::{Inner, Server};
use super::services::Service;
use super::status::{error_reply, server_error};
use crate::error::{Error, Result};

/// An in-process client of one server. Cheap to clone; `Send + Sync`.
#[derive(Clone)]
pub struct Client {
    side: Side,
}

/// Which client half a [`Client`] drives.
#[derive(Clone)]
enum Side {
    /// The server's own client half (wakes a parked server).
    Server(Arc<Inner>),
    /// A half built from a device's `Client` image: it waits as a device does, by polling.
    Image(Arc<ImageSide>),
}

struct ImageSide {
    process: Process,
    next_port: AtomicUsize,
}

/// One argument of [`Client::printf`], laid out as a device's `va_list` would hold it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PrintfArg<'a> {
    /// `%d`, `%c`, `%x`, ... without a length modifier (4 bytes).
    Int(i32),
    /// Conversions with `l`, `ll`, `z`, ... (8 bytes).
    Long(i64),
    /// `%f`, `%e`, `%g`, `%a` (a double).
    Double(f64),
    /// `%s`: sent when the server asks for it.
    Str(&'a str),
}

impl Server {
    /// A client for in-process callers (host kernels, tests) that shares this block.
    pub fn client(&self) -> Client {
        self.inner.in_process.store(true, Ordering::Relaxed);
        Client {
            side: Side::Server(self.inner.clone()),
        }
    }
}

impl Client {
    /// A client that plays the device: it finds the block through the bytes of a device-side
    /// `Client` struct (what [`Server::client_image`](super::Server::client_image) gives and
    /// the executor writes into `__llvm_rpc_client`), as code built against LLVM's GPU libc
    /// does, with `lane_size` packet slots per port (the device's warp size). The layout comes
    /// from the image's size. It rings the doorbell but never wakes the server: a server thread
    /// sees it within its idle park (1 ms at most). It waits by spinning, then yielding and
    /// sleeping ([`Wait::GiveWay`]).
    ///
    /// # Safety
    /// The image's pointers must be host-accessible addresses of a live block of that geometry
    /// (device addresses equal host addresses: UVA, SVM, or host memory) that outlives the
    /// client, and no other client half may use the block's ports meanwhile.
    pub unsafe fn from_image(image: &[u8], lane_size: usize) -> Result<Client> {
        // SAFETY: the caller's contract.
        unsafe { Self::from_image_with_stop(image, lane_size, None) }
    }

    /// [`from_image`](Self::from_image) waiting the `wait` way: [`Wait::Spin`] is a client
    /// that only spins, as a GPU lane or LLVM's own client on a CPU thread does.
    ///
    /// # Safety
    /// As for `from_image`.
    pub unsafe fn from_image_waiting(image: &[u8], lane_size: usize, wait: Wait) -> Result<Client> {
        // SAFETY: the caller's contract.
        unsafe { Self::from_image_with(image, lane_size, None, wait) }
    }

    /// [`from_image`](Self::from_image) whose waits give up once `stop` is true.
    ///
    /// # Safety
    /// As for `from_image`.
    pub unsafe fn from_image_with_stop(
        image: &[u8],
        lane_size: usize,
        stop: Option<Arc<AtomicBool>>,
    ) -> Result<Client> {
        // SAFETY: the caller's contract.
        unsafe { Self::from_image_with(image, lane_size, stop, Wait::GiveWay) }
    }

    /// # Safety
    /// As for `from_image`.
    unsafe fn from_image_with(
        image: &[u8],
        lane_size: usize,
        stop: Option<Arc<AtomicBool>>,
        wait: Wait,
    ) -> Result<Client> {
        let bad = |detail: String| Error::invalid("rpc::Client::from_image", detail);
        let Some(layout) = Layout::from_client_size(image.len()) else {
            return Err(bad(format!(
                "a client image has {} or {} bytes, not {}",
                Layout::Current.client_image_size(),
                Layout::PreDoorbell.client_image_size(),
                image.len()
            )));
        };
        Geometry::new(layout, 1, lane_size)?; // a bad lane size is its own error
        // The image may see only a range of the block's ports (an executor gives each module
        // its own); its pointers say which, and how big the block is.
        let (geo, base, first, count) =
            Geometry::parse_client_image(image, lane_size).ok_or_else(|| {
                bad(format!(
                    "the image's pointers do not describe a range of ports of one {layout:?} \
                     block"
                ))
            })?;
        // SAFETY: the caller's contract: `base` is a live block of `geo`'s size.
        let mem = unsafe { HostMem::new(base as *mut u8, geo.allocation_size()) };
        let process = Process::new(mem, geo, false, stop, None, None).with_wait(wait);
        process.set_ports(first, count)?;
        Ok(Client {
            side: Side::Image(Arc::new(ImageSide {
                process,
                next_port: AtomicUsize::new(0),
            })),
        })
    }

    fn process(&self) -> &Process {
        match &self.side {
            Side::Server(inner) => &inner.client,
            Side::Image(side) => &side.process,
        }
    }

    fn next_port(&self) -> &AtomicUsize {
        match &self.side {
            Side::Server(inner) => &inner.next_port,
            Side::Image(side) => &side.next_port,
        }
    }

    /// Packet slots per port of the block (the warp width this client may use).
    pub fn lane_size(&self) -> usize {
        self.process().geometry().lane_size
    }

    /// Opens a port for `opcode` with only lane 0 active.
    pub fn open(&self, opcode: u32) -> Result<Port<'_>> {
        self.open_lanes(opcode, 1)
    }

    /// Opens a port for `opcode` as a warp whose active lanes are `mask` (non-zero, within the
    /// lane size). Each `send`/`recv` then visits every active lane.
    pub fn open_lanes(&self, opcode: u32, mask: u64) -> Result<Port<'_>> {
        let lanes = self.lane_size();
        if mask == 0 || (lanes < 64 && mask >> lanes != 0) {
            return Err(Error::invalid(
                "rpc::Client::open_lanes",
                format!("lane mask {mask:#x} is empty or names lanes past the lane size {lanes}"),
            ));
        }
        let p = self.process().ports().1;
        let hint = self.next_port().fetch_add(1, Ordering::Relaxed) % p;
        self.process().open(opcode, mask, hint)
    }

    /// Sends `request` (any size) under `opcode` and returns the reply stream; the exchange of
    /// user services and the echo tests.
    pub fn call(&self, opcode: u32, request: &[u8]) -> Result<Vec<u8>> {
        let mut port = self.open(opcode)?;
        port.send_n(|_| request)?;
        let mut out = port.recv_n()?;
        Ok(std::mem::take(&mut out[0]))
    }

    /// Sends one packet and returns the reply packet (an error reply is an `Err`).
    pub fn call_packet(&self, opcode: u32, request: Packet) -> Result<Packet> {
        let mut port = self.open(opcode)?;
        let mut reply = [0u64; 8];
        port.send_and_recv(|_, p| *p = request, |_, p| reply = *p)?;
        match error_reply(&reply) {
            Some(status) => Err(server_error(opcode, status)),
            None => Ok(reply),
        }
    }

    /// The asynchronous no-op: one packet, no reply.
    pub fn noop(&self) -> Result<()> {
        let mut port = self.open(opcode::NOOP)?;
        port.send(|_, _| {})
    }

    fn write(&self, op: u32, bytes: &[u8]) -> Result<u64> {
        let mut port = self.open(op)?;
        port.send_n(|_| bytes)?;
        let mut reply = [0u64; 8];
        port.recv(|_, p| reply = *p)?;
        match error_reply(&reply) {
            Some(status) => Err(server_error(op, status)),
            None => Ok(reply[0]),
        }
    }

    /// Writes `bytes` to the executor's stdout; returns the count written.
    pub fn write_stdout(&self, bytes: &[u8]) -> Result<u64> {
        self.write(opcode::WRITE_TO_STDOUT, bytes)
    }

    /// Writes `bytes` to the executor's stderr; returns the count written.
    pub fn write_stderr(&self, bytes: &[u8]) -> Result<u64> {
        self.write(opcode::WRITE_TO_STDERR, bytes)
    }

    /// `puts`: `s` and a newline to stdout.
    pub fn puts(&self, s: &str) -> Result<u64> {
        self.write(opcode::WRITE_TO_STDOUT_NEWLINE, s.as_bytes())
    }

    /// C `printf` formatted on the host: `format` and `args` travel as a device's format
    /// string and `va_list` would. Returns the printf result.
    pub fn printf(&self, format: &str, args: &[PrintfArg<'_>]) -> Result<i32> {
        let mut fmt = format.as_bytes().to_vec();
        fmt.push(0);
        let mut blob = Vec::new();
        let mut strings = Vec::new();
        for a in args {
            let (bytes, align): (Vec<u8>, usize) = match *a {
                PrintfArg::Int(v) => (v.to_le_bytes().to_vec(), 4),
                PrintfArg::Long(v) => (v.to_le_bytes().to_vec(), 8),
                PrintfArg::Double(v) => (v.to_le_bytes().to_vec(), 8),
                PrintfArg::Str(s) => {
                    strings.push(s);
                    // A fake device pointer: 1-based index of the string, nonzero.
                    ((strings.len() as u64).to_le_bytes().to_vec(), 8)
                }
            };
            blob.resize(blob.len().next_multiple_of(align), 0);
            blob.extend_from_slice(&bytes);
        }
        let mut port = self.open(opcode::PRINTF_TO_STDOUT)?;
        port.send_n(|_| &fmt)?;
        let mut reply = [0u64; 8];
        port.recv(|_, p| reply = *p)?;
        if let Some(status) = error_reply(&reply) {
            return Err(server_error(opcode::PRINTF_TO_STDOUT, status));
        }
        let size = reply[0] as usize;
        blob.resize(size.max(blob.len()), 0);
        port.send_n(|_| &blob[..size])?;
        loop {
            port.recv(|_, p| reply = *p)?;
            if let Some(status) = error_reply(&reply) {
                return Err(server_error(opcode::PRINTF_TO_STDOUT, status));
            }
            if reply[1] == 0 {
                return Ok(reply[0] as i32);
            }
            let mut s = strings
                .get(reply[1] as usize - 1)
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_default();
            s.push(0);
            port.send_n(|_| &s)?;
        }
    }

    /// `exit(status)` from a kernel: the server records it and fails the launching stream.
    pub fn exit(&self, status: i32) -> Result<()> {
        let mut port = self.open(opcode::EXIT)?;
        port.send_and_recv(|_, _| {}, |_, _| {})?;
        port.send(|_, p| p[0] = u64::from(status as u32))
    }

    /// Device-accessible memory from the executor (`MALLOC`); returns its device address.
    pub fn malloc(&self, bytes: u64) -> Result<u64> {
        let r = self.call_packet(opcode::MALLOC, [bytes, 0, 0, 0, 0, 0, 0, 0])?;
        Ok(r[0])
    }

    /// Frees [`malloc`](Self::malloc) memory (asynchronous).
    pub fn free(&self, address: u64) -> Result<()> {
        let mut port = self.open(opcode::FREE)?;
        port.send(|_, p| p[0] = address)
    }

    /// Calls the typed user service `S` with `request`.
    pub fn call_service<S: Service>(&self, request: &S::Request) -> Result<S::Response> {
        let reply = self.call(S::OPCODE, bytemuck::bytes_of(request))?;
        bytemuck::try_pod_read_unaligned(&reply).map_err(|_| Error::Rpc {
            detail: format!(
                "service {:#010x} replied {} bytes; the response type has {}",
                S::OPCODE,
                reply.len(),
                std::mem::size_of::<S::Response>()
            ),
        })
    }

    /// Calls function `function` of Emissary API `api` with `args` (one lane); an `Err` when
    /// the host refused or failed the call (its reason is in the server's `take_errors`).
    pub fn emissary(&self, api: u32, function: u32, args: &[EmissaryArg]) -> Result<EmissaryReply> {
        let buffer = encode(api, function, args);
        let mut port = self.open(opcode::OFFLOAD_EMISSARY)?;
        port.send_n(|_| &buffer)?;
        let mut w = [0u64; 8];
        port.recv(|_, p| w = *p)?;
        match EmissaryStatus::from_word(w[0]) {
            Some(EmissaryStatus::Ok) => {
                let mut outs = [0u64; 6];
                outs.copy_from_slice(&w[2..]);
                Ok(EmissaryReply {
                    ret: w[1] as i64,
                    outs,
                })
            }
            status => Err(Error::Emissary {
                api: api.to_string(),
                function: function.to_string(),
                lane: 0,
                status: w[0],
                detail: format!(
                    "the host answered {} (its reason is in rpc::Server::take_errors)",
                    status.map_or_else(|| format!("status {}", w[0]), |s| format!("{s:?}"))
                ),
            }),
        }
    }

    /// `HOST_CALL`: calls the registered host function `function` with a copy of `args`.
    pub fn host_call(&self, function: u64, args: &[u8]) -> Result<u64> {
        let mut port = self.open(opcode::HOST_CALL)?;
        port.send_n(|_| args)?;
        let mut reply = [0u64; 8];
        port.send_and_recv(|_, p| p[0] = function, |_, p| reply = *p)?;
        match error_reply(&reply) {
            Some(status) => Err(server_error(opcode::HOST_CALL, status)),
            None => Ok(reply[0]),
        }
    }
}
