//! Stream-ordered MPI operations on device memory: `then_all_reduce`, `then_broadcast`,
//! `then_send`, `then_recv`.
//!
//! Each is staged through host memory from `allocate_host` (page-locked where the platform has
//! it): a device→host copy, a host callback that runs the MPI operation, a host→device copy,
//! all queued on the stream, so the operation is ordered with the stream's other work. The
//! callback fails the stream on any MPI error or timeout; the copies after it are then skipped.
//!
//! Collectives first agree: one small `MPI_Iallreduce` (min and max of the kind of operation,
//! the element count, type, reduce op and root) checks that every rank called the same thing,
//! and a mismatch fails the stream on every rank with each rank's arguments (one
//! `MPI_Iallgather`), before any data moves.

use std::ffi::{c_int, c_void};
use std::mem::forget;

use ::mpi::collective::SystemOperation;
use ::mpi::datatype::Equivalence;
use ::mpi::ffi::{self, MPI_Datatype, MPI_Request, MPI_Status};
use ::mpi::raw::AsRaw;
use bytemuck::Pod;

use super::raw::{self, Waited};
use super::{Communicator, Lend};
use crate::error::{Error, Result};
use crate::memory::DeviceSlice;
use crate::stream::Stream;
use crate::types::HostRegion;

mod sealed {
    pub trait Sealed {}
}

/// An element type MPI can reduce and move: `i32`, `i64`, `u32`, `u64`, `f32`, `f64`.
pub trait MpiElement: Pod + Send + sealed::Sealed {
    /// The Rust name, for messages.
    const NAME: &'static str;
    /// A code the ranks compare to check they pass the same type.
    #[doc(hidden)]
    const CODE: i64;
    /// MPI's datatype for it.
    #[doc(hidden)]
    fn datatype() -> MPI_Datatype;
    /// Its `MPI_Datatype` handle in the device ABI (`include/streamexec_mpi.h`).
    #[doc(hidden)]
    const DEVICE_DATATYPE: i32;
}

macro_rules! elements {
    ($($t:ty => $code:expr, $device:expr);*) => {$(
        impl sealed::Sealed for $t {}
        impl MpiElement for $t {
            const NAME: &'static str = stringify!($t);
            const CODE: i64 = $code;
            const DEVICE_DATATYPE: i32 = $device;
            fn datatype() -> MPI_Datatype {
                <$t>::equivalent_datatype().as_raw()
            }
        }
    )*};
}
elements!(i32 => 1, 3; i64 => 2, 5; u32 => 3, 4; u64 => 4, 6; f32 => 5, 8; f64 => 6, 9);

const TYPE_NAMES: [&str; 7] = ["-", "i32", "i64", "u32", "u64", "f32", "f64"];

/// The reduction of [`Stream::then_all_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Element-wise sum (floating-point: in an order MPI chooses).
    Sum,
    /// Element-wise minimum.
    Min,
    /// Element-wise maximum.
    Max,
    /// Element-wise product.
    Prod,
}

const OP_NAMES: [&str; 5] = ["-", "sum", "min", "max", "prod"];

impl ReduceOp {
    fn code(self) -> i64 {
        match self {
            ReduceOp::Sum => 1,
            ReduceOp::Min => 2,
            ReduceOp::Max => 3,
            ReduceOp::Prod => 4,
        }
    }

    fn raw(self) -> ffi::MPI_Op {
        match self {
            ReduceOp::Sum => SystemOperation::sum(),
            ReduceOp::Min => SystemOperation::min(),
            ReduceOp::Max => SystemOperation::max(),
            ReduceOp::Prod => SystemOperation::product(),
        }
        .as_raw()
    }
}

impl std::fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(OP_NAMES[self.code() as usize])
    }
}

/// What the ranks of a collective must agree on (see the module docs).
#[derive(Clone, Copy)]
struct Call {
    kind: i64,
    count: i64,
    elem: i64,
    op: i64,
    root: i64,
}

const KINDS: [&str; 3] = ["-", "then_all_reduce", "then_broadcast"];
const FIELDS: usize = 5;

impl Call {
    fn fields(self) -> [i64; FIELDS] {
        [self.kind, self.count, self.elem, self.op, self.root]
    }
}

/// A name for code `v` in `names`, or the number itself.
fn name(names: &[&str], v: i64) -> String {
    usize::try_from(v)
        .ok()
        .and_then(|i| names.get(i))
        .map_or_else(|| v.to_string(), |s| s.to_string())
}

impl Stream {
    /// Reduces `data` element-wise with `op` across every rank of `comm`, in place: after it,
    /// `data` holds the same result on every rank. Ordered with the stream's other work. Every
    /// rank must call it, in the same order among `comm`'s collectives, with the same length,
    /// type and op; a mismatch fails the stream on every rank with each rank's arguments, and a
    /// rank that does not arrive within `comm`'s timeout fails it too.
    pub fn then_all_reduce<'a, T: MpiElement>(
        &mut self,
        comm: &Communicator,
        data: impl Into<DeviceSlice<'a, T>>,
        op: ReduceOp,
    ) -> &mut Self {
        let data = data.into();
        let operation = format!("then_all_reduce ({op} of {} {})", data.len(), T::NAME);
        let call = Call {
            kind: 1,
            count: data.len() as i64,
            elem: T::CODE,
            op: op.code(),
            root: -1,
        };
        let bytes = data.size_bytes() as usize;
        let staged = count(data.len(), &operation).and_then(|n| {
            let send = self.lend(comm, bytes, [Lend::Write, Lend::Read])?;
            let recv = self.lend(comm, bytes, [Lend::Write, Lend::Read])?;
            Ok((n, send, recv))
        });
        let (n, [to_send, send_region], [mut recv_region, received]) = match staged {
            Ok(s) => s,
            Err(e) => return self.enqueue(|_| Err(e)),
        };
        self.stage_out(data, to_send, &operation);
        let (comm, what) = (comm.clone(), operation.clone());
        self.then_host_callback_with_status(move || {
            let _live = comm.enter(&operation)?;
            agree(&comm, &operation, call)?;
            let src = send_region.lock_read();
            let mut dst = recv_region
                .lock_write()
                .ok_or_else(|| write_region(&operation))?;
            let mut req = raw::null_request();
            // SAFETY: MPI is live (guard); both buffers hold `n` elements of `T` and stay
            // allocated and unaliased until the request completes (on timeout they are leaked).
            let rc = unsafe {
                ffi::MPI_Iallreduce(
                    src.as_ptr() as *const c_void,
                    dst.as_mut_ptr() as *mut c_void,
                    n,
                    T::datatype(),
                    op.raw(),
                    comm.as_raw(),
                    &mut req,
                )
            };
            raw::check(rc, "MPI_Iallreduce").map_err(|m| comm.error(&operation, m))?;
            // SAFETY: MPI is live (guard); `req` was just started.
            unsafe { wait_collective(&comm, &operation, &mut req, (src, dst, send_region)) }?;
            drop(recv_region);
            Ok(())
        });
        self.stage_in(received, data, &what)
    }

    /// Copies `data` of rank `root` into `data` of every other rank of `comm`. Ordered with the
    /// stream's other work; the same agreement and timeout as
    /// [`then_all_reduce`](Self::then_all_reduce) (the root must match too).
    pub fn then_broadcast<'a, T: MpiElement>(
        &mut self,
        comm: &Communicator,
        data: impl Into<DeviceSlice<'a, T>>,
        root: i32,
    ) -> &mut Self {
        let data = data.into();
        let operation = format!(
            "then_broadcast ({} {} from rank {root})",
            data.len(),
            T::NAME
        );
        let call = Call {
            kind: 2,
            count: data.len() as i64,
            elem: T::CODE,
            op: 0,
            root: root as i64,
        };
        let bytes = data.size_bytes() as usize;
        let staged = comm
            .check_rank(root, "root", &operation)
            .and_then(|()| count(data.len(), &operation))
            .and_then(|n| Ok((n, self.lend(comm, bytes, [Lend::Write; 3])?)));
        let (n, [sent, mut region, received]) = match staged {
            Ok(s) => s,
            Err(e) => return self.enqueue(|_| Err(e)),
        };
        let is_root = comm.rank() == root;
        if is_root {
            self.stage_out(data, sent, &operation);
        }
        let (comm, what) = (comm.clone(), operation.clone());
        self.then_host_callback_with_status(move || {
            let _live = comm.enter(&operation)?;
            agree(&comm, &operation, call)?;
            let mut buf = region
                .lock_write()
                .ok_or_else(|| write_region(&operation))?;
            let mut req = raw::null_request();
            // SAFETY: MPI is live (guard); the buffer holds `n` elements of `T` and stays
            // allocated and unaliased until the request completes (on timeout it is leaked).
            let rc = unsafe {
                ffi::MPI_Ibcast(
                    buf.as_mut_ptr() as *mut c_void,
                    n,
                    T::datatype(),
                    root,
                    comm.as_raw(),
                    &mut req,
                )
            };
            raw::check(rc, "MPI_Ibcast").map_err(|m| comm.error(&operation, m))?;
            // SAFETY: MPI is live (guard); `req` was just started.
            unsafe { wait_collective(&comm, &operation, &mut req, buf) }?;
            drop(region);
            Ok(())
        });
        if is_root {
            return self;
        }
        self.stage_in(received, data, &what)
    }

    /// Sends `data` to rank `dest` of `comm` with `tag`, ordered with the stream's other work;
    /// the receiver's [`then_recv`](Self::then_recv) must name this rank, the tag and the same
    /// length. Fails the stream if `dest` does not take the message within `comm`'s timeout
    /// (small messages complete at once, buffered by MPI). To send to this rank itself, send
    /// and receive on two streams.
    pub fn then_send<'a, T: MpiElement>(
        &mut self,
        comm: &Communicator,
        data: impl Into<DeviceSlice<'a, T>>,
        dest: i32,
        tag: i32,
    ) -> &mut Self {
        let data = data.into();
        let operation = format!("then_send to rank {dest} (tag {tag})");
        let bytes = data.size_bytes() as usize;
        let staged = check_p2p(comm, dest, "destination", tag, &operation)
            .and_then(|()| count(data.len(), &operation))
            .and_then(|n| Ok((n, self.lend(comm, bytes, [Lend::Write, Lend::Read])?)));
        let (n, [to_send, region]) = match staged {
            Ok(s) => s,
            Err(e) => return self.enqueue(|_| Err(e)),
        };
        self.stage_out(data, to_send, &operation);
        let comm = comm.clone();
        self.then_host_callback_with_status(move || {
            let _live = comm.enter(&operation)?;
            let buf = region.lock_read();
            let mut req = raw::null_request();
            // SAFETY: MPI is live (guard); the buffer holds `n` elements of `T` and stays
            // allocated until the request completes (if it cannot be cancelled it is leaked).
            let rc = unsafe {
                ffi::MPI_Isend(
                    buf.as_ptr() as *const c_void,
                    n,
                    T::datatype(),
                    dest,
                    tag,
                    comm.as_raw(),
                    &mut req,
                )
            };
            raw::check(rc, "MPI_Isend").map_err(|m| comm.error(&operation, m))?;
            let timeout = format!(
                "rank {dest} took no message after {:.1} s; is rank {dest} alive and receiving \
                 (then_recv from rank {} with tag {tag})?",
                comm.timeout().as_secs_f64(),
                comm.rank()
            );
            // SAFETY: MPI is live (guard); `req` was just started.
            unsafe { wait_p2p(&comm, &operation, &mut req, timeout, (buf, region)) }?;
            Ok(())
        })
    }

    /// Receives into `data` the message that rank `source` of `comm` sends with `tag`, ordered
    /// with the stream's other work. Fails the stream if no message arrives within `comm`'s
    /// timeout, or if it has another length than `data`.
    pub fn then_recv<'a, T: MpiElement>(
        &mut self,
        comm: &Communicator,
        data: impl Into<DeviceSlice<'a, T>>,
        source: i32,
        tag: i32,
    ) -> &mut Self {
        let data = data.into();
        let operation = format!("then_recv from rank {source} (tag {tag})");
        let bytes = data.size_bytes() as usize;
        let staged = check_p2p(comm, source, "source", tag, &operation)
            .and_then(|()| count(data.len(), &operation))
            .and_then(|n| Ok((n, self.lend(comm, bytes, [Lend::Write, Lend::Read])?)));
        let (n, [mut region, received]) = match staged {
            Ok(s) => s,
            Err(e) => return self.enqueue(|_| Err(e)),
        };
        let (comm, what) = (comm.clone(), operation.clone());
        self.then_host_callback_with_status(move || {
            let _live = comm.enter(&operation)?;
            let mut buf = region
                .lock_write()
                .ok_or_else(|| write_region(&operation))?;
            let mut req = raw::null_request();
            // SAFETY: MPI is live (guard); the buffer holds `n` elements of `T` and stays
            // allocated and unaliased until the request completes or is cancelled (else it is
            // leaked).
            let rc = unsafe {
                ffi::MPI_Irecv(
                    buf.as_mut_ptr() as *mut c_void,
                    n,
                    T::datatype(),
                    source,
                    tag,
                    comm.as_raw(),
                    &mut req,
                )
            };
            raw::check(rc, "MPI_Irecv").map_err(|m| comm.error(&operation, m))?;
            let timeout = format!(
                "no message after {:.1} s; is rank {source} alive and sending (then_send to \
                 rank {} with tag {tag})?",
                comm.timeout().as_secs_f64(),
                comm.rank()
            );
            // SAFETY: MPI is live (guard); `req` was just started.
            let (status, _) =
                unsafe { wait_p2p(&comm, &operation, &mut req, timeout, (buf, region)) }?;
            // SAFETY: MPI is live; `status` is the completed receive's.
            let got = unsafe { raw::received(&status, T::datatype()) };
            if got != n as i64 {
                return Err(comm.error(
                    &operation,
                    format!(
                        "received {got} {} but {n} were expected; then_send and then_recv must \
                         pass the same length",
                        T::NAME
                    ),
                ));
            }
            Ok(())
        });
        self.stage_in(received, data, &what)
    }

    /// Regions of one pooled staging buffer of this stream's executor (`Session::lend`).
    fn lend<const K: usize>(
        &self,
        comm: &Communicator,
        bytes: usize,
        kinds: [Lend; K],
    ) -> Result<[HostRegion; K]> {
        comm.session.lend(self.executor(), bytes, kinds)
    }

    /// Enqueues a copy of `data` into `region` (`data`'s size, from `lend`).
    fn stage_out<T: Pod>(
        &mut self,
        data: DeviceSlice<'_, T>,
        region: HostRegion,
        operation: &str,
    ) -> &mut Self {
        self.enqueue(|s| {
            s.check_slice(&data, operation)?;
            // SAFETY: `data` borrows live memory of this executor (owner checked); the region
            // has exactly its size.
            unsafe { s.iface().memcpy_d2h(data.address(), region) }
        })
    }

    /// Enqueues a copy of `region` (`data`'s size, from `lend`) into `data`.
    fn stage_in<T: Pod>(
        &mut self,
        region: HostRegion,
        data: DeviceSlice<'_, T>,
        operation: &str,
    ) -> &mut Self {
        self.enqueue(|s| {
            s.check_slice(&data, operation)?;
            // SAFETY: as in `stage_out`.
            unsafe { s.iface().memcpy_h2d(region, data.address()) }
        })
    }
}

/// `len` as MPI's `int` count, or `InvalidArgument`.
fn count(len: usize, operation: &str) -> Result<c_int> {
    c_int::try_from(len).map_err(|_| {
        Error::invalid(
            operation,
            format!(
                "{len} elements exceed MPI's count limit of {} per call; split the buffer",
                c_int::MAX
            ),
        )
    })
}

/// A peer that is a rank of `comm`, and a tag MPI allows (non-negative).
fn check_p2p(comm: &Communicator, peer: i32, what: &str, tag: i32, operation: &str) -> Result<()> {
    comm.check_rank(peer, what, operation)?;
    if tag < 0 {
        return Err(Error::invalid(
            operation,
            format!("tag {tag} is negative; MPI tags are 0..=MPI_TAG_UB (at least 32767)"),
        ));
    }
    Ok(())
}

fn write_region(operation: &str) -> Error {
    Error::internal(format!(
        "{operation}: the staging region was lent read-only"
    ))
}

/// Checks that every rank passes the same `call` (see the module docs).
fn agree(comm: &Communicator, operation: &str, call: Call) -> Result<()> {
    // Min of (v, -v) gives the min and the max of v at once.
    let mut send = Box::new([0i64; 2 * FIELDS]);
    for (i, v) in call.fields().into_iter().enumerate() {
        send[2 * i] = v;
        send[2 * i + 1] = v.wrapping_neg();
    }
    let mut recv = Box::new([0i64; 2 * FIELDS]);
    let mut req = raw::null_request();
    // SAFETY: MPI is live (the caller holds the guard); both boxes hold 2 * FIELDS i64s and
    // stay allocated until the request completes (on timeout they are leaked).
    let rc = unsafe {
        ffi::MPI_Iallreduce(
            send.as_ptr() as *const c_void,
            recv.as_mut_ptr() as *mut c_void,
            (2 * FIELDS) as c_int,
            i64::datatype(),
            ReduceOp::Min.raw(),
            comm.as_raw(),
            &mut req,
        )
    };
    raw::check(rc, "MPI_Iallreduce").map_err(|m| comm.error(operation, m))?;
    // SAFETY: MPI is live; `req` was just started.
    let (_, recv) = unsafe { wait_collective(comm, operation, &mut req, (send, recv)) }?;
    let same = (0..FIELDS).all(|i| recv[2 * i] == recv[2 * i + 1].wrapping_neg());
    if same {
        return Ok(());
    }
    Err(comm.error(operation, disagreement(comm, operation, call)?))
}

/// Every rank's arguments, for the error of a failed agreement (all ranks get here together).
fn disagreement(comm: &Communicator, operation: &str, call: Call) -> Result<String> {
    let size = comm.size() as usize;
    let send = Box::new(call.fields());
    let mut all = vec![0i64; FIELDS * size];
    let mut req = raw::null_request();
    // SAFETY: MPI is live (the caller holds the guard); `send` holds FIELDS i64s and `all`
    // FIELDS per rank; both stay allocated until the request completes (or are leaked).
    let rc = unsafe {
        ffi::MPI_Iallgather(
            send.as_ptr() as *const c_void,
            FIELDS as c_int,
            i64::datatype(),
            all.as_mut_ptr() as *mut c_void,
            FIELDS as c_int,
            i64::datatype(),
            comm.as_raw(),
            &mut req,
        )
    };
    raw::check(rc, "MPI_Iallgather").map_err(|m| comm.error(operation, m))?;
    // SAFETY: MPI is live; `req` was just started.
    let (_, all) = unsafe { wait_collective(comm, operation, &mut req, (send, all)) }?;
    let labels: [(&str, &[&str]); FIELDS] = [
        ("operation", &KINDS),
        ("element count", &[]),
        ("element type", &TYPE_NAMES),
        ("reduce op", &OP_NAMES),
        ("root", &[]),
    ];
    let mut parts = Vec::new();
    for (f, (label, names)) in labels.iter().enumerate() {
        let column: Vec<i64> = (0..size).map(|r| all[r * FIELDS + f]).collect();
        if column.iter().all(|&v| v == column[0]) {
            continue;
        }
        let per_rank: Vec<String> = column
            .iter()
            .enumerate()
            .map(|(r, &v)| format!("rank {r}: {}", name(names, v)))
            .collect();
        parts.push(format!("{label}s differ ({})", per_rank.join(", ")));
    }
    Ok(format!(
        "the ranks passed different arguments: {}; every rank must make the same collective \
         calls in the same order",
        parts.join("; ")
    ))
}

/// Waits for a collective's request; gives `keep` (what MPI reads or writes) back once it is
/// done. On a timeout or an error the request cannot be cancelled (MPI forbids cancelling
/// collectives), so `keep` is leaked, never freed under MPI, and the communicator is poisoned.
///
/// # Safety
/// MPI is live; `req` is an active collective request using only memory that `keep` owns or
/// locks.
unsafe fn wait_collective<K>(
    comm: &Communicator,
    operation: &str,
    req: &mut MPI_Request,
    keep: K,
) -> Result<K> {
    // SAFETY: forwarded from the caller.
    let detail = match unsafe { raw::wait(req, comm.timeout()) } {
        Waited::Done(_) => return Ok(keep),
        Waited::Failed(m) => format!("MPI failed: {m}; is every rank still alive?"),
        Waited::TimedOut => format!(
            "not every rank arrived after {:.1} s; is every rank alive and making the same \
             collective calls in the same order?",
            comm.timeout().as_secs_f64()
        ),
    };
    forget(keep);
    comm.poison(format!("{operation}: {detail}"));
    Err(comm.error(operation, detail))
}

/// Waits for a point-to-point request; its status and `keep` back once it completes. On a
/// timeout the request is cancelled and the stream fails with `timeout`; if MPI cannot cancel
/// it, or MPI reports an error, `keep` is leaked (never freed while MPI may use it).
///
/// # Safety
/// MPI is live; `req` is an active point-to-point request using only memory that `keep` owns
/// or locks.
unsafe fn wait_p2p<K>(
    comm: &Communicator,
    operation: &str,
    req: &mut MPI_Request,
    timeout: String,
    keep: K,
) -> Result<(MPI_Status, K)> {
    // SAFETY: forwarded from the caller.
    match unsafe { raw::wait(req, comm.timeout()) } {
        Waited::Done(s) => Ok((s, keep)),
        Waited::Failed(m) => {
            forget(keep);
            let hint = if m.contains("TRUNCATE") || m.contains("truncated") {
                "; the message is longer than the receive's buffer: then_send and then_recv \
                 must pass the same length"
            } else {
                ""
            };
            Err(comm.error(operation, format!("MPI failed: {m}{hint}")))
        }
        // SAFETY: forwarded from the caller; the request is still active.
        Waited::TimedOut => match unsafe { raw::cancel(req) } {
            // SAFETY: `s` is the completed request's status.
            Some(s) if !unsafe { raw::cancelled(&s) } => Ok((s, keep)),
            Some(_) => Err(comm.error(operation, timeout)),
            None => {
                forget(keep);
                Err(comm.error(
                    operation,
                    format!("{timeout} (MPI could not cancel it; its staging memory is leaked)"),
                ))
            }
        },
    }
}
