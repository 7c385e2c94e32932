//! MPI as an Emissary API (id 3, as LLVM's `EmissaryIds.h` numbers it): the host wrappers
//! behind the device stubs of `include/streamexec_mpi.h`, the OpenCL C client and
//! [`KernelMpi`](super::KernelMpi). The device's handles are small integers (the ABI below)
//! mapped here to the library's; the device's one communicator is the one the table was built
//! for. Every wait is a nonblocking call polled against the communicator's
//! timeout, so a peer that died fails the call (`MPI_ERR_OTHER` to the device, the reason in
//! the server's log) instead of hanging the server thread. While a call polls, it suspends
//! (`rpc::pause_call`), so the server's other calls go on: a warp blocked in `MPI_Recv` does
//! not keep another warp's `MPI_Send` from being served.
//!
//! ## The device ABI
//!
//! The device's handles are small integers, mapped to the library's on the host: `MPI_Comm` 0 = the communicator the table serves
//! (`Communicator::serve_kernels`); datatypes `MPI_BYTE` 1, `MPI_CHAR` 2, `MPI_INT` 3,
//! `MPI_UNSIGNED` 4, `MPI_LONG` 5 (8 bytes), `MPI_UNSIGNED_LONG` 6, `MPI_LONG_LONG` 7, `MPI_FLOAT`
//! 8, `MPI_DOUBLE` 9; ops `MPI_SUM` 1, `MPI_PROD` 2, `MPI_MIN` 3, `MPI_MAX` 4; `MPI_Request` a
//! `u64` handle (0 = null); `MPI_ANY_SOURCE`/`MPI_ANY_TAG` -1; `MPI_IN_PLACE` the pointer 1;
//! `MPI_ERR_OTHER` 16 (what stubs return for a refused or timed-out call).
//!
//! | index | function | arguments | out values |
//! |---|---|---|---|
//! | 1 | `MPI_Send` | buf, count, datatype, dest, tag, comm | – |
//! | 2 | `MPI_Recv` | buf, count, datatype, source, tag, comm | source, tag, error, bytes |
//! | 3 | `MPI_Isend` | buf, count, datatype, dest, tag, comm | request |
//! | 4 | `MPI_Irecv` | buf, count, datatype, source, tag, comm | request |
//! | 5 | `MPI_Wait` | request (8-byte value) | source, tag, error, bytes |
//! | 6 | `MPI_Allreduce` | sendbuf (or `MPI_IN_PLACE`), recvbuf, count, datatype, op, comm | – |
//! | 7 | `MPI_Reduce` | sendbuf (or `MPI_IN_PLACE`), recvbuf (null off the root), count, datatype, op, root, comm | – |
//! | 8 | `MPI_Bcast` | buf, count, datatype, root, comm | – |
//! | 9 | `MPI_Barrier` | comm | – |
//! | 10 | `MPI_Comm_rank` | comm | rank |
//! | 11 | `MPI_Comm_size` | comm | size |

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mpi::ffi;
use parking_lot::Mutex;

use super::Communicator;
use crate::error::{Error, Result};
use crate::rpc::{EMISSARY_API_MPI, EmissaryApi, EmissaryCall, EmissaryReply, HostBuffer};

/// Function indices of the MPI API (the device ABI; 0 is invalid).
pub mod function {
    /// `MPI_Send`.
    pub const SEND: u32 = 1;
    /// `MPI_Recv`.
    pub const RECV: u32 = 2;
    /// `MPI_Isend`.
    pub const ISEND: u32 = 3;
    /// `MPI_Irecv`.
    pub const IRECV: u32 = 4;
    /// `MPI_Wait`.
    pub const WAIT: u32 = 5;
    /// `MPI_Allreduce`.
    pub const ALLREDUCE: u32 = 6;
    /// `MPI_Reduce`.
    pub const REDUCE: u32 = 7;
    /// `MPI_Bcast`.
    pub const BCAST: u32 = 8;
    /// `MPI_Barrier`.
    pub const BARRIER: u32 = 9;
    /// `MPI_Comm_rank`.
    pub const COMM_RANK: u32 = 10;
    /// `MPI_Comm_size`.
    pub const COMM_SIZE: u32 = 11;
}

/// The device's `MPI_ANY_SOURCE` / `MPI_ANY_TAG`.
pub const DEVICE_MPI_ANY: i32 = -1;
/// The device's `MPI_IN_PLACE` (a pointer with this address).
pub const DEVICE_MPI_IN_PLACE: u64 = 1;

/// A device datatype handle: the library's datatype and the element size.
fn datatype(call: &EmissaryCall<'_>, handle: i32) -> Result<(ffi::MPI_Datatype, u64)> {
    // SAFETY: reading the library's predefined handles (extern statics set before main).
    let dt = unsafe {
        match handle {
            1 => (ffi::RSMPI_UINT8_T, 1),
            2 => (ffi::RSMPI_INT8_T, 1),
            3 => (ffi::RSMPI_INT32_T, 4),
            4 => (ffi::RSMPI_UINT32_T, 4),
            5 | 7 => (ffi::RSMPI_INT64_T, 8),
            6 => (ffi::RSMPI_UINT64_T, 8),
            8 => (ffi::RSMPI_FLOAT, 4),
            9 => (ffi::RSMPI_DOUBLE, 8),
            _ => {
                return Err(host_error(
                    call,
                    format!(
                        "datatype handle {handle} is not one the device ABI defines (1 MPI_BYTE \
                         .. 9 MPI_DOUBLE)"
                    ),
                ));
            }
        }
    };
    Ok(dt)
}

fn op(call: &EmissaryCall<'_>, handle: i32) -> Result<ffi::MPI_Op> {
    // SAFETY: reading the library's predefined handles.
    unsafe {
        match handle {
            1 => Ok(ffi::RSMPI_SUM),
            2 => Ok(ffi::RSMPI_PROD),
            3 => Ok(ffi::RSMPI_MIN),
            4 => Ok(ffi::RSMPI_MAX),
            _ => Err(host_error(
                call,
                format!("op handle {handle} is not MPI_SUM (1), MPI_PROD, MPI_MIN or MPI_MAX (4)"),
            )),
        }
    }
}

fn host_error(call: &EmissaryCall<'_>, detail: String) -> Error {
    Error::Rpc {
        detail: format!("MPI emissary (lane {}): {detail}", call.lane()),
    }
}

/// A source or tag from the device (`-1` is "any").
fn any_or(v: i32, any: i32) -> i32 {
    if v == DEVICE_MPI_ANY { any } else { v }
}

/// A pending `MPI_Isend`/`MPI_Irecv`: the request and the buffer it uses (kept, with its pin,
/// until `MPI_Wait`; a staged receive is copied to the device then).
struct Pending {
    request: ffi::MPI_Request,
    buffer: Option<HostBuffer>,
    receive: bool,
}

// SAFETY: an `MPI_Request` is a handle the library lets any thread use under
// `MPI_THREAD_MULTIPLE` (which `Mpi::init` requires); the buffer is `Send`.
unsafe impl Send for Pending {}

/// The MPI wrappers' state: the communicator and the requests in flight, by handle.
struct State {
    comm: Communicator,
    pending: Mutex<HashMap<u64, Pending>>,
    next: AtomicU64,
}

/// What a completed request reports, as the device's `MPI_Status` out values (MPI live: under
/// `Communicator::enter`).
fn status_outs(status: &ffi::MPI_Status) -> [u64; 6] {
    let mut count = 0;
    // SAFETY: `status` is a completed request's status; the datatype is predefined.
    unsafe { ffi::MPI_Get_count(status, ffi::RSMPI_UINT8_T, &mut count) };
    let mut outs = [0u64; 6];
    outs[0] = status.MPI_SOURCE as u32 as u64;
    outs[1] = status.MPI_TAG as u32 as u64;
    outs[2] = status.MPI_ERROR as u32 as u64;
    outs[3] = count as u32 as u64;
    outs
}

impl State {
    /// `MPI_Comm_rank` / `MPI_Comm_size`: checks the communicator argument, answers `v`.
    fn comm_value(&self, call: &EmissaryCall<'_>, v: i32) -> Result<EmissaryReply> {
        self.comm(call, 0)?;
        let mut r = EmissaryReply::ret(0);
        r.outs[0] = v as u32 as u64;
        Ok(r)
    }

    fn comm(&self, call: &EmissaryCall<'_>, i: usize) -> Result<ffi::MPI_Comm> {
        match call.i32(i)? {
            0 => Ok(self.comm.as_raw()),
            h => Err(host_error(
                call,
                format!("communicator handle {h}: the device has only MPI_COMM_WORLD (0)"),
            )),
        }
    }

    /// Polls `request` to completion within the communicator's timeout. On timeout a
    /// point-to-point request (`p2p`) is cancelled; if it still does not complete, or it is a
    /// collective (which MPI cannot cancel; the communicator is poisoned then), `buffer` is
    /// leaked (the library may still write it) and the request abandoned.
    fn complete(
        &self,
        call: &EmissaryCall<'_>,
        what: &str,
        p2p: bool,
        mut request: ffi::MPI_Request,
        buffer: Option<HostBuffer>,
    ) -> Result<(ffi::MPI_Status, Option<HostBuffer>)> {
        let timeout = self.comm.timeout();
        let start = Instant::now();
        let mut polls = 0u32;
        loop {
            // MPI stays live for each test (finalize waits for it), but the guard is never held
            // across a pause: another call of this thread may take one meanwhile.
            let (rc, done, status) = {
                let _live = self.comm.enter(what)?;
                test(&mut request)
            };
            if rc != 0 {
                return Err(host_error(
                    call,
                    format!("{what} on rank {}: MPI error {rc}", self.comm.rank()),
                ));
            }
            if done {
                return Ok((status, buffer));
            }
            if start.elapsed() > timeout {
                let e = self.timed_out(call, what, timeout);
                if !p2p {
                    // A collective cannot be cancelled, and later ones would match it on the
                    // other ranks: the communicator is unusable from now on.
                    self.comm.poison(e.to_string());
                    std::mem::forget(buffer);
                    return Err(e);
                }
                let _live = self.comm.enter(what)?;
                // SAFETY: `request` is an active point-to-point request of this process.
                unsafe { ffi::MPI_Cancel(&mut request) };
                let cancelled = Instant::now();
                while cancelled.elapsed() < Duration::from_millis(100) {
                    if test(&mut request).1 {
                        return Err(e);
                    }
                    std::thread::yield_now();
                }
                // Not cancelled: the library may still use the buffer, so it is never freed.
                std::mem::forget(buffer);
                return Err(e);
            }
            // On the server thread the other calls (other warps' MPI calls among them) run
            // while this one waits; a caller outside the thread's calls backs off to sleeps.
            polls += 1;
            if polls < 1000 || crate::rpc::in_call() {
                crate::rpc::pause_call();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn timed_out(&self, call: &EmissaryCall<'_>, what: &str, t: Duration) -> Error {
        host_error(
            call,
            format!(
                "{what} on rank {}: not complete after {:.1} s; is the peer alive and making \
                 the matching call? (timeout: STREAMEXEC_MPI_TIMEOUT_MS)",
                self.comm.rank(),
                t.as_secs_f64()
            ),
        )
    }

    /// The buffer of pointer argument `i` for `count` elements of `dt`, or `None` for a null
    /// pointer or no elements.
    fn buffer(
        call: &EmissaryCall<'_>,
        i: usize,
        count: i32,
        size: u64,
    ) -> Result<Option<HostBuffer>> {
        if count < 0 {
            return Err(host_error(call, format!("count {count} is negative")));
        }
        if count == 0 || call.address(i)? == 0 {
            return Ok(None);
        }
        Ok(Some(call.buffer(i, count as u64 * size)?))
    }

    /// Starts a nonblocking MPI operation: `start` gets the request's out-parameter and
    /// returns MPI's code. MPI stays live for the call (under `enter`, released before any wait).
    fn begin(
        &self,
        call: &EmissaryCall<'_>,
        what: &str,
        start: impl FnOnce(*mut ffi::MPI_Request) -> i32,
    ) -> Result<ffi::MPI_Request> {
        let mut request = MaybeUninit::<ffi::MPI_Request>::uninit();
        let rc = {
            let _live = self.comm.enter(what)?;
            start(request.as_mut_ptr())
        };
        if rc != 0 {
            return Err(host_error(call, format!("MPI error {rc} starting {what}")));
        }
        // SAFETY: the call succeeded, so it wrote the request.
        Ok(unsafe { request.assume_init() })
    }

    fn point_to_point(&self, call: &EmissaryCall<'_>, receive: bool) -> Result<Pending> {
        let (count, dt) = (call.i32(1)?, call.i32(2)?);
        let (dt, size) = datatype(call, dt)?;
        let (peer, tag, comm) = (call.i32(3)?, call.i32(4)?, self.comm(call, 5)?);
        let buffer = Self::buffer(call, 0, count, size)?;
        let ptr = buffer
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.as_mut_ptr());
        let what = if receive { "MPI_Irecv" } else { "MPI_Isend" };
        let request = self.begin(call, what, |request| {
            // SAFETY: `ptr` holds `count` elements of `dt` (or is null for none) and stays
            // valid while `buffer` lives, which the request keeps until it completes.
            unsafe {
                if receive {
                    let (src, tag) = (
                        any_or(peer, ffi::RSMPI_ANY_SOURCE),
                        any_or(tag, ffi::RSMPI_ANY_TAG),
                    );
                    ffi::MPI_Irecv(ptr.cast(), count, dt, src, tag, comm, request)
                } else {
                    ffi::MPI_Isend(ptr.cast(), count, dt, peer, tag, comm, request)
                }
            }
        })?;
        Ok(Pending {
            request,
            buffer,
            receive,
        })
    }

    /// Completes `p`, copies a staged receive to the device, and answers with its status.
    fn finish(&self, call: &EmissaryCall<'_>, what: &str, p: Pending) -> Result<EmissaryReply> {
        let (status, buffer) = self.complete(call, what, true, p.request, p.buffer)?;
        if let Some(b) = buffer.filter(|_| p.receive) {
            b.write_back()?;
        }
        let _live = self.comm.enter(what)?;
        Ok(EmissaryReply {
            ret: 0,
            outs: status_outs(&status),
        })
    }

    fn blocking(
        &self,
        call: &EmissaryCall<'_>,
        what: &str,
        receive: bool,
    ) -> Result<EmissaryReply> {
        let p = self.point_to_point(call, receive)?;
        let r = self.finish(call, what, p)?;
        Ok(if receive { r } else { EmissaryReply::ret(0) })
    }

    fn start(&self, call: &EmissaryCall<'_>, receive: bool) -> Result<EmissaryReply> {
        let p = self.point_to_point(call, receive)?;
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        self.pending.lock().insert(handle, p);
        let mut r = EmissaryReply::ret(0);
        r.outs[0] = handle;
        Ok(r)
    }

    fn wait(&self, call: &EmissaryCall<'_>) -> Result<EmissaryReply> {
        let handle = call.u64(0)?;
        if handle == 0 {
            // MPI_Wait on MPI_REQUEST_NULL returns at once with an empty status.
            let mut r = EmissaryReply::ret(0);
            r.outs[0] = DEVICE_MPI_ANY as u32 as u64;
            r.outs[1] = DEVICE_MPI_ANY as u32 as u64;
            return Ok(r);
        }
        let p = self.pending.lock().remove(&handle).ok_or_else(|| {
            host_error(
                call,
                format!("MPI_Wait: request {handle} is not one this rank started (or was waited)"),
            )
        })?;
        let what = if p.receive {
            "MPI_Wait (Irecv)"
        } else {
            "MPI_Wait (Isend)"
        };
        self.finish(call, what, p)
    }

    /// `MPI_Allreduce` (`root == None`) or `MPI_Reduce`, through the nonblocking calls.
    fn reduce(&self, call: &EmissaryCall<'_>, root: Option<i32>) -> Result<EmissaryReply> {
        let count = call.i32(2)?;
        let (dt, size) = datatype(call, call.i32(3)?)?;
        let op = op(call, call.i32(4)?)?;
        let comm_arg = if root.is_some() { 6 } else { 5 };
        let comm = self.comm(call, comm_arg)?;
        let in_place = call.address(0)? == DEVICE_MPI_IN_PLACE;
        let recv = Self::buffer(call, 1, count, size)?;
        let is_root = root.is_none_or(|r| r == self.comm.rank());
        if is_root && recv.is_none() && count > 0 {
            return Err(host_error(call, "the receive buffer is null".into()));
        }
        // MPI_IN_PLACE: the data is in the receive buffer; send a copy of it.
        let send_copy: Option<Vec<u8>>;
        let send = if in_place {
            let r = recv
                .as_ref()
                .ok_or_else(|| host_error(call, "MPI_IN_PLACE needs a receive buffer".into()))?;
            let mut v = vec![0u8; r.len()];
            // SAFETY: `r` holds `r.len()` bytes; `v` is a distinct allocation of that size.
            unsafe { std::ptr::copy_nonoverlapping(r.as_mut_ptr(), v.as_mut_ptr(), v.len()) };
            send_copy = Some(v);
            None
        } else {
            send_copy = None;
            Self::buffer(call, 0, count, size)?
        };
        let sptr: *const u8 = match (&send, &send_copy) {
            (Some(b), _) => b.as_mut_ptr(),
            (None, Some(v)) => v.as_ptr(),
            (None, None) => std::ptr::null(),
        };
        let rptr = recv
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.as_mut_ptr());
        let what = if root.is_some() {
            "MPI_Reduce"
        } else {
            "MPI_Allreduce"
        };
        let request = self.begin(call, what, |request| {
            // SAFETY: both buffers hold `count` elements of `dt` (or are null where MPI ignores
            // them), and live until the request completes below.
            unsafe {
                match root {
                    None => {
                        ffi::MPI_Iallreduce(sptr.cast(), rptr.cast(), count, dt, op, comm, request)
                    }
                    Some(r) => {
                        ffi::MPI_Ireduce(sptr.cast(), rptr.cast(), count, dt, op, r, comm, request)
                    }
                }
            }
        })?;
        // The send side (and its copy) must outlive the request: keep them in one value.
        let keep = (send, send_copy);
        let (_, recv) = self.complete(call, what, false, request, recv)?;
        drop(keep);
        if let Some(b) = recv.filter(|_| is_root) {
            b.write_back()?;
        }
        Ok(EmissaryReply::ret(0))
    }

    fn bcast(&self, call: &EmissaryCall<'_>) -> Result<EmissaryReply> {
        let count = call.i32(1)?;
        let (dt, size) = datatype(call, call.i32(2)?)?;
        let (root, comm) = (call.i32(3)?, self.comm(call, 4)?);
        let buf = Self::buffer(call, 0, count, size)?;
        let ptr = buf
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.as_mut_ptr());
        let request = self.begin(call, "MPI_Bcast", |request| {
            // SAFETY: `ptr` holds `count` elements of `dt` and lives until the request completes.
            unsafe { ffi::MPI_Ibcast(ptr.cast(), count, dt, root, comm, request) }
        })?;
        let (_, buf) = self.complete(call, "MPI_Bcast", false, request, buf)?;
        if let Some(b) = buf.filter(|_| root != self.comm.rank()) {
            b.write_back()?;
        }
        Ok(EmissaryReply::ret(0))
    }

    fn barrier(&self, call: &EmissaryCall<'_>) -> Result<EmissaryReply> {
        let comm = self.comm(call, 0)?;
        let request = self.begin(call, "MPI_Barrier", |request| {
            // SAFETY: a valid communicator and an out-parameter for the request.
            unsafe { ffi::MPI_Ibarrier(comm, request) }
        })?;
        self.complete(call, "MPI_Barrier", false, request, None)?;
        Ok(EmissaryReply::ret(0))
    }
}

/// `MPI_Test`: (return code, done, status).
fn test(request: &mut ffi::MPI_Request) -> (i32, bool, ffi::MPI_Status) {
    let mut flag = 0;
    let mut status = MaybeUninit::<ffi::MPI_Status>::zeroed();
    // SAFETY: `request` is a request of this process (or MPI_REQUEST_NULL once complete);
    // the status is an out-parameter.
    let rc = unsafe { ffi::MPI_Test(request, &mut flag, status.as_mut_ptr()) };
    // SAFETY: zeroed is a valid MPI_Status (plain integers), and MPI_Test may have filled it.
    (rc, flag != 0, unsafe { status.assume_init() })
}

/// The MPI API's table for kernels, serving `comm` (the device's `MPI_COMM_WORLD`).
pub(crate) fn api(comm: &Communicator) -> EmissaryApi {
    let s = Arc::new(State {
        comm: comm.clone(),
        pending: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
    });
    let f = |s: &Arc<State>, g: fn(&State, &EmissaryCall<'_>) -> Result<EmissaryReply>| {
        let s = s.clone();
        move |c: &EmissaryCall<'_>| Ok(g(&s, c)?)
    };
    use function as f_;
    EmissaryApi::new(EMISSARY_API_MPI, "MPI")
        .function(
            f_::SEND,
            "MPI_Send",
            6,
            f(&s, |s, c| s.blocking(c, "MPI_Send", false)),
        )
        .function(
            f_::RECV,
            "MPI_Recv",
            6,
            f(&s, |s, c| s.blocking(c, "MPI_Recv", true)),
        )
        .function(f_::ISEND, "MPI_Isend", 6, f(&s, |s, c| s.start(c, false)))
        .function(f_::IRECV, "MPI_Irecv", 6, f(&s, |s, c| s.start(c, true)))
        .function(f_::WAIT, "MPI_Wait", 1, f(&s, State::wait))
        .function(
            f_::ALLREDUCE,
            "MPI_Allreduce",
            6,
            f(&s, |s, c| s.reduce(c, None)),
        )
        .function(
            f_::REDUCE,
            "MPI_Reduce",
            7,
            f(&s, |s, c| s.reduce(c, Some(c.i32(5)?))),
        )
        .function(f_::BCAST, "MPI_Bcast", 5, f(&s, State::bcast))
        .function(f_::BARRIER, "MPI_Barrier", 1, f(&s, State::barrier))
        .function(
            f_::COMM_RANK,
            "MPI_Comm_rank",
            1,
            f(&s, |s, c| s.comm_value(c, s.comm.rank())),
        )
        .function(
            f_::COMM_SIZE,
            "MPI_Comm_size",
            1,
            f(&s, |s, c| s.comm_value(c, s.comm.size())),
        )
}
