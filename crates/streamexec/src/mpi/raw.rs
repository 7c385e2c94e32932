//! The MPI C calls the module makes, each wrapped once: the communicator handle, error strings,
//! and waiting for a request with a timeout (poll, then cancel or abandon).

use std::ffi::{c_char, c_int};
use std::time::{Duration, Instant};

use ::mpi::ffi::{self, MPI_Comm, MPI_Request, MPI_Status};

/// A communicator handle that may cross threads: MPI runs at `MPI_THREAD_MULTIPLE`, where any
/// thread may use any handle.
#[derive(Clone, Copy)]
pub(super) struct Comm(pub(super) MPI_Comm);

// SAFETY: the handle is an opaque pointer MPI owns; at MPI_THREAD_MULTIPLE (checked by
// `Mpi::init`, the only maker of a `Comm`) MPI calls on it from any thread are allowed.
unsafe impl Send for Comm {}
// SAFETY: as above; concurrent calls on one communicator are allowed at MPI_THREAD_MULTIPLE.
unsafe impl Sync for Comm {}

/// `MPI_SUCCESS` as the C functions return it.
const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;

/// Duplicates the world communicator, sets it to return errors, and reads rank and size.
///
/// # Safety
/// MPI is initialized (and not finalized); `world` is `MPI_COMM_WORLD`.
pub(super) unsafe fn dup_world(world: MPI_Comm) -> Result<(Comm, i32, i32), String> {
    let mut comm = std::mem::MaybeUninit::<MPI_Comm>::uninit();
    // SAFETY: MPI is live (caller); `comm` is a valid place for the new handle. MPI_Comm_dup is
    // collective: every rank calls it in Mpi::init.
    let rc = unsafe { ffi::MPI_Comm_dup(world, comm.as_mut_ptr()) };
    check(rc, "MPI_Comm_dup(MPI_COMM_WORLD)")?;
    // SAFETY: MPI_Comm_dup succeeded, so it wrote the handle.
    let comm = unsafe { comm.assume_init() };
    // SAFETY: `comm` is a live communicator; the errhandler is MPI's predefined one.
    let rc = unsafe { ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)")?;
    let (mut rank, mut size) = (0, 0);
    // SAFETY: `comm` is live; the out-parameters are valid ints.
    let rc = unsafe { ffi::MPI_Comm_rank(comm, &mut rank) };
    check(rc, "MPI_Comm_rank")?;
    // SAFETY: as above.
    let rc = unsafe { ffi::MPI_Comm_size(comm, &mut size) };
    check(rc, "MPI_Comm_size")?;
    Ok((Comm(comm), rank, size))
}

/// Frees the communicator `dup_world` made (errors ignored: MPI_Finalize follows).
///
/// # Safety
/// MPI is live, `comm` came from `dup_world`, and no request on it will be waited for again.
pub(super) unsafe fn free_comm(comm: Comm) {
    let mut c = comm.0;
    // SAFETY: `c` is a live communicator (caller).
    unsafe { ffi::MPI_Comm_free(&mut c) };
}

/// A barrier of every rank on `comm`, bounded by `timeout`: `Err` (why) when MPI fails or a
/// rank does not arrive in time (dead, stuck, or still working). On timeout the barrier request
/// is abandoned: the caller must not finalize MPI then (see `Mpi::finalize`).
///
/// # Safety
/// MPI is live; `comm` is live and no other collective on it is in progress.
pub(super) unsafe fn barrier(comm: Comm, timeout: Duration) -> Result<(), String> {
    let mut req = null_request();
    // SAFETY: `comm` is live (caller); `req` is a valid place for the request.
    let rc = unsafe { ffi::MPI_Ibarrier(comm.0, &mut req) };
    check(rc, "MPI_Ibarrier")?;
    // SAFETY: `req` was just started and MPI stays live (caller).
    match unsafe { wait(&mut req, timeout) } {
        Waited::Done(_) => Ok(()),
        Waited::Failed(e) => Err(format!("MPI_Ibarrier failed: {e}")),
        Waited::TimedOut => Err(format!(
            "not every rank reached finalize within {:.1} s",
            timeout.as_secs_f64()
        )),
    }
}

/// `Err("<call> failed: <MPI's message> (code N)")` unless `rc` is `MPI_SUCCESS`.
///
/// MPI must be live (the caller is inside the session's guard, or in `dup_world`).
pub(super) fn check(rc: c_int, call: &str) -> Result<(), String> {
    if rc == SUCCESS {
        return Ok(());
    }
    Err(format!("{call} failed: {} (code {rc})", error_string(rc)))
}

/// MPI's message for an error code.
fn error_string(code: c_int) -> String {
    let mut buf = vec![0 as c_char; 1024]; // MPI_MAX_ERROR_STRING is 256 in OpenMPI, 1024 in MPICH
    let mut len: c_int = 0;
    // SAFETY: the buffer holds at least MPI_MAX_ERROR_STRING chars; MPI_Error_string may be
    // called whenever MPI is initialized (callers are inside the session).
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    if rc != SUCCESS {
        return "unknown MPI error".into();
    }
    let len = (len.max(0) as usize).min(buf.len());
    let bytes: Vec<u8> = buf[..len].iter().map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// How a wait ended.
pub(super) enum Waited {
    /// The request completed; its status.
    Done(MPI_Status),
    /// MPI reported an error (its message).
    Failed(String),
    /// The timeout passed; the request is still active.
    TimedOut,
}

/// Polls `req` with `MPI_Test` until it completes or `timeout` passes.
///
/// OpenMPI progresses nonblocking operations only inside MPI calls, so the first second polls
/// back to back (yielding the core between tests, for oversubscribed ranks); after that a wait
/// is for a peer that is busy or gone, and it sleeps 100 µs between tests.
///
/// # Safety
/// MPI is live for the whole call, and `req` is an active request (or `MPI_REQUEST_NULL`).
pub(super) unsafe fn wait(req: &mut MPI_Request, timeout: Duration) -> Waited {
    let start = Instant::now();
    let mut status = std::mem::MaybeUninit::<MPI_Status>::zeroed();
    loop {
        let mut flag: c_int = 0;
        // SAFETY: `req` is an active request (caller); `flag` and `status` are valid places.
        let rc = unsafe { ffi::MPI_Test(req, &mut flag, status.as_mut_ptr()) };
        if rc != SUCCESS {
            return Waited::Failed(format!("{} (code {rc})", error_string(rc)));
        }
        if flag != 0 {
            // SAFETY: zero-initialized plain C struct, filled by MPI_Test on completion.
            return Waited::Done(unsafe { status.assume_init() });
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Waited::TimedOut;
        }
        if waited < Duration::from_secs(1) {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// Cancels a point-to-point request that timed out and waits (up to a second) for the cancel
/// to complete. `Some(status)` when the request is finished (cancelled, or completed meanwhile:
/// [`cancelled`] says which), so its buffer is free again; `None` when MPI could not cancel it
/// (a send that already started), in which case the caller must never free the buffer.
///
/// # Safety
/// MPI is live; `req` is an active point-to-point request.
pub(super) unsafe fn cancel(req: &mut MPI_Request) -> Option<MPI_Status> {
    // SAFETY: `req` is active (caller).
    unsafe { ffi::MPI_Cancel(req) };
    // SAFETY: as above; MPI_Cancel leaves it to be completed by a test or wait.
    match unsafe { wait(req, Duration::from_secs(1)) } {
        Waited::Done(s) => Some(s),
        Waited::Failed(_) | Waited::TimedOut => None,
    }
}

/// True when a completed request's status says it was cancelled.
///
/// # Safety
/// MPI is live; `status` comes from a completed request.
pub(super) unsafe fn cancelled(status: &MPI_Status) -> bool {
    let mut flag: c_int = 0;
    // SAFETY: `status` is a valid status (caller).
    unsafe { ffi::MPI_Test_cancelled(status, &mut flag) };
    flag != 0
}

/// The number of `datatype` elements a completed receive got.
///
/// # Safety
/// MPI is live; `status` comes from a completed receive of `datatype`.
pub(super) unsafe fn received(status: &MPI_Status, datatype: ffi::MPI_Datatype) -> i64 {
    let mut count: c_int = 0;
    // SAFETY: `status` is a valid receive status (caller).
    unsafe { ffi::MPI_Get_count(status, datatype, &mut count) };
    count as i64
}

/// `MPI_REQUEST_NULL`, for requests about to be started.
pub(super) fn null_request() -> MPI_Request {
    // SAFETY: reading MPI's predefined constant handle (a link-time constant of rsmpi's shim).
    unsafe { ffi::RSMPI_REQUEST_NULL }
}
