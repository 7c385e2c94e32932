//! MPI (feature `mpi`): a process's MPI session, its communicator, and stream-ordered
//! collectives on device memory (`Stream::then_all_reduce` and friends, in `collectives.rs`).
//!
//! - [`Mpi::init`] initializes MPI once per process at `MPI_THREAD_MULTIPLE` (a stream's host
//!   worker and an executor's RPC server thread call MPI while the main thread does too). A
//!   second `init` in the same process, or a library that gives less than `MULTIPLE`, is an
//!   `Err`.
//! - Dropping the [`Mpi`] (or [`Mpi::finalize`]) finalizes MPI, on the thread that initialized
//!   it (`Mpi` is not `Send`). It first waits for MPI calls in progress (each is bounded by its
//!   timeout), then for every rank in a barrier bounded by the timeout (or skips finalize, see
//!   dead peers below); after it, every operation of a [`Communicator`] still around returns an
//!   `Err` that says MPI was finalized, instead of calling into a finalized library.
//! - [`Communicator`] is the world communicator, duplicated at init (so this crate's traffic
//!   never matches the application's own messages on `MPI_COMM_WORLD`) and set to
//!   `MPI_ERRORS_RETURN`: an MPI failure becomes an `Err`, never an abort.
//! - Every wait is a nonblocking call polled against the communicator's timeout
//!   ([`Communicator::with_timeout`]; default `STREAMEXEC_MPI_TIMEOUT_MS`, else 60 s), so a peer
//!   that never arrives fails the stream with a message naming the rank and the operation.
//!
//! - Kernels call MPI through the Emissary layer ([`Communicator::serve_kernels`] registers the
//!   MPI API on an executor's RPC server; the device stubs are `include/streamexec_mpi.h`, the
//!   OpenCL C ones of `MultiKernelLoaderSpec::with_mpi`, and [`KernelMpi`] for native host
//!   kernels): `emissary.rs`, `kernel.rs`.
//!
//! ## Staging, agreement, timeouts, dead peers
//!
//! `src/mpi/`, on rsmpi (`mpi` 0.8, OpenMPI from Debian). Tests: `tests/mpi.rs` under mpirun, run
//! by `scripts/test-mpi.sh` (2, 3, 4 ranks; host and OpenCL; dead ranks), then
//! `tests/emissary_mpi/` (host kernels calling MPI, timeouts, refused calls) and
//! `examples/emissary_mpi.rs` (host and cuda with 2-4 ranks, opencl with 2); bench `benches/mpi.rs`
//! (`mpirun -n 2`: collectives, and device- against host-initiated latency and message rate).
//!
//! - **Session.** `Mpi::init()` calls `MPI_Init_thread(MULTIPLE)` once per process (a second call,
//!   even after a drop, is `Error::Mpi`, as is a library that provides less: both levels named).
//!   `Mpi` is not `Send`: it finalizes on drop, on the thread that initialized MPI. Communicators
//!   hold the session's `Arc`, and every MPI call holds a read guard of its `live` lock
//!   (`Communicator::enter`); finalize takes the write lock, so it waits for calls in progress
//!   (each bounded by its timeout) and every later operation is `Err("MPI was finalized")`, never a
//!   call into a finalized library.
//! - **Communicator.** A duplicate of `MPI_COMM_WORLD` (made at init; this crate's messages never
//!   match the application's), with `MPI_ERRORS_RETURN`: MPI failures are `Err`s, never aborts.
//!   `Clone + Send + Sync` (the handle is shared at `MPI_THREAD_MULTIPLE`). `as_raw()` (crate-only)
//!   gives the handle to code that calls MPI itself, under `enter`.
//! - **Staging.** Each stream operation is a device→host copy into staging memory, a host callback
//!   that runs the MPI call on it, and a host→device copy back, all queued on the stream, so it is
//!   ordered with the stream's other work on every backend. The staging memory comes from
//!   `allocate_host` (page-locked where the platform has it) through the session's pool
//!   (`Session::lend`): a buffer is lent as `HostRegion`s of its first bytes (taken under the
//!   pool's lock) and is reused once no region of it is left (`HostMemory::is_idle`); up to 8 idle
//!   buffers are kept. Allocating (and zeroing) 64 MiB costs ~100 ms, more than the MPI call. The
//!   callback's `Err` fails the stream; the copy after it is skipped (every backend skips the rest
//!   of the chain after a failed callback). All-reduce uses separate send and receive buffers
//!   (rsmpi exposes no `MPI_IN_PLACE`). A rank's failed stream skips its later MPI operations, so
//!   its peers time out in them.
//! - **Agreement.** A collective first runs one `MPI_Iallreduce(MIN)` of (v, −v) for the kind of
//!   operation, the count, element type, reduce op and root; if any differs, one `MPI_Iallgather`
//!   of everyone's values makes the same error on every rank ("element counts differ (rank 0: 10,
//!   rank 1: 11)") before any data moves.
//! - **Timeouts.** Every wait is a nonblocking call polled with `MPI_Test` (back to back, yielding,
//!   for the first second: OpenMPI progresses only inside MPI calls; then every 100 µs) until the
//!   communicator's timeout (`with_timeout`; default `STREAMEXEC_MPI_TIMEOUT_MS`, else 60 s). A
//!   point-to-point request that times out is cancelled (`MPI_Cancel`, then up to 1 s for it to
//!   complete) and the stream fails ("MPI rank 0: then_recv from rank 1 (tag 99): no message after
//!   0.5 s; is rank 1 alive and sending …?"); the communicator stays usable. A collective cannot be
//!   cancelled (MPI forbids it): its buffers are leaked (never freed under MPI) and the
//!   communicator is poisoned, every later operation on it an `Err` naming the timed-out one (later
//!   collectives would match the abandoned one on the other ranks). A send that cannot be cancelled
//!   leaks its staging buffer likewise.
//! - **A dead peer** (OpenMPI 4.1, seen by `scripts/test-mpi.sh`): by default mpirun ends the whole
//!   job within about 2 s when a rank dies (killed, or exits without `MPI_Finalize`, whatever its
//!   status), so the survivors are killed and mpirun exits non-zero. With `--mca
//!   orte_abort_on_non_zero_status 0` the survivors go on: their receives and collectives involving
//!   the dead rank fail at the timeout with the messages above. OpenMPI's `MPI_Finalize` then waits
//!   for the dead rank too, and in about one run of four it never returns; so finalize first meets
//!   every rank in an `MPI_Ibarrier` bounded by the timeout, on a communicator of its own (a
//!   collective another rank abandoned cannot match it; skipped when this rank's communicator is
//!   poisoned), and if that fails MPI is left unfinalized and `Mpi::finalize` is an `Err` saying
//!   why (a drop prints it). No wait is unbounded.

mod collectives;
mod emissary;
mod kernel;
mod raw;

pub use collectives::{MpiElement, ReduceOp};
pub use emissary::function;
pub use kernel::{KernelMpi, MpiRequest, MpiStatus};

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ::mpi::environment::{Threading, Universe};
use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::types::{HostMemory, HostRegion};

/// The environment variable that sets the default timeout of every MPI wait, in milliseconds.
pub const TIMEOUT_ENV: &str = "STREAMEXEC_MPI_TIMEOUT_MS";

/// The default timeout of an MPI wait when [`TIMEOUT_ENV`] is unset: generous, because a peer
/// may legitimately be busy with a long kernel before it reaches the matching call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Set by the first `Mpi::init` of the process (MPI may be initialized once per process).
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// State shared by the session and its communicators.
struct Session {
    /// True until finalize. Every MPI call holds a read guard; finalize takes the write lock, so
    /// it waits for calls in progress and no call starts after it.
    live: RwLock<bool>,
    /// The duplicated world communicator.
    comm: raw::Comm,
    /// A second duplicate, only for the barrier before finalize: a collective abandoned on
    /// `comm` by another rank cannot match it.
    finalize_comm: raw::Comm,
    rank: i32,
    size: i32,
    /// Set when a collective timed out: its request cannot be cancelled (MPI forbids it), so
    /// later collectives would match the abandoned one on other ranks.
    poisoned: RwLock<Option<String>>,
    /// Staging buffers from `allocate_host`, by executor id, reused once idle (see `staging`).
    pool: Mutex<Vec<(u64, HostMemory<u8>)>>,
}

/// How many idle staging buffers the session keeps.
const POOL_BUFFERS: usize = 8;

/// How a staging region is lent (see `Session::lend`).
#[derive(Clone, Copy)]
pub(crate) enum Lend {
    /// To a copy or MPI call that reads it.
    Read,
    /// To a copy or MPI call that writes it.
    Write,
}

impl Session {
    /// Regions of the first `bytes` bytes of one staging buffer of `exec`, one per `kinds`: a
    /// pooled buffer that no queued copy uses (the smallest that fits), else a new one from
    /// `allocate_host`, kept for reuse. Allocating page-locked memory costs far more than the
    /// copies through it (about 100 ms for 64 MiB on the host platform, zeroing included), so
    /// operations reuse buffers. The regions are taken under the pool's lock, so the buffer
    /// is busy before another operation can pick it, until they all drop; past
    /// `POOL_BUFFERS`, idle buffers are freed, oldest first.
    fn lend<const K: usize>(
        &self,
        exec: &StreamExecutor,
        bytes: usize,
        kinds: [Lend; K],
    ) -> Result<[HostRegion; K]> {
        let mut pool = self.pool.lock();
        let id = exec.id();
        let best = pool
            .iter()
            .enumerate()
            .filter(|(_, (owner, m))| *owner == id && m.len() >= bytes && m.is_idle())
            .min_by_key(|(_, (_, m))| m.len())
            .map(|(i, _)| i);
        let i = match best {
            Some(i) => i,
            None => {
                pool.push((id, exec.allocate_host::<u8>(bytes.max(1))?));
                pool.len() - 1
            }
        };
        let mem = &mut pool[i].1;
        let regions = kinds.map(|k| match k {
            Lend::Read => mem.prefix_for_read(bytes),
            Lend::Write => mem.prefix_for_write(bytes),
        });
        while pool.len() > POOL_BUFFERS {
            match pool.iter().position(|(_, m)| m.is_idle()) {
                Some(i) => drop(pool.remove(i)),
                None => break,
            }
        }
        Ok(regions)
    }
}

/// A process's MPI session: MPI is initialized while it lives and finalized when it drops.
/// See the module docs.
pub struct Mpi {
    session: Arc<Session>,
    universe: Option<Universe>,
    default_timeout: Duration,
    /// Finalize must run on the thread that initialized MPI: `Mpi` stays on it.
    _not_send: PhantomData<*const ()>,
}

impl Mpi {
    /// Initializes MPI for this process with `MPI_THREAD_MULTIPLE`. `Err` if MPI was already
    /// initialized in this process (by an earlier `init`, even one since dropped, or by other
    /// code), if the library provides a lower thread level, or if `STREAMEXEC_MPI_TIMEOUT_MS`
    /// is set but not a number of milliseconds.
    pub fn init() -> Result<Mpi> {
        let default_timeout = timeout_from_env()?;
        if INITIALIZED.swap(true, Ordering::SeqCst) {
            return Err(init_error(
                "MPI was already initialized in this process: Mpi::init may be called once per \
                 process (MPI cannot be initialized again after MPI_Finalize); keep the first Mpi \
                 and share its Communicator",
            ));
        }
        let Some((universe, provided)) = ::mpi::initialize_with_threading(Threading::Multiple)
        else {
            return Err(init_error(
                "MPI was already initialized in this process by other code; streamexec must \
                 initialize it itself (Mpi::init) to request MPI_THREAD_MULTIPLE",
            ));
        };
        if provided != Threading::Multiple {
            drop(universe);
            return Err(init_error(format!(
                "the MPI library provides thread level {} but streamexec needs \
                 MPI_THREAD_MULTIPLE (stream workers and RPC server threads call MPI \
                 concurrently); use an MPI built with thread-multiple support (OpenMPI: \
                 `ompi_info | grep -i thread`)",
                threading_name(provided)
            )));
        }
        let world = universe.world();
        // SAFETY: MPI is initialized at MPI_THREAD_MULTIPLE and not finalized (we own the
        // universe); `world` is the valid world communicator.
        let (comm, rank, size) =
            unsafe { raw::dup_world(::mpi::raw::AsRaw::as_raw(&world)) }.map_err(init_error)?;
        // SAFETY: as above.
        let (finalize_comm, _, _) =
            unsafe { raw::dup_world(::mpi::raw::AsRaw::as_raw(&world)) }.map_err(init_error)?;
        Ok(Mpi {
            session: Arc::new(Session {
                live: RwLock::new(true),
                comm,
                finalize_comm,
                rank,
                size,
                poisoned: RwLock::new(None),
                pool: Mutex::new(Vec::new()),
            }),
            universe: Some(universe),
            default_timeout,
            _not_send: PhantomData,
        })
    }

    /// The world communicator (every rank of the job), with the default timeout.
    pub fn world(&self) -> Communicator {
        Communicator {
            session: self.session.clone(),
            timeout: self.default_timeout,
        }
    }

    /// This process's rank in the world communicator.
    pub fn rank(&self) -> i32 {
        self.session.rank
    }

    /// The number of ranks in the world communicator.
    pub fn size(&self) -> i32 {
        self.session.size
    }
}

impl Mpi {
    /// Finalizes MPI now, on this thread (dropping the `Mpi` does the same and prints the `Err`
    /// to stderr). Every rank first meets in a barrier bounded by the default timeout: OpenMPI's
    /// `MPI_Finalize` waits for every rank of the job, so with a rank dead or stuck it would
    /// never return. When the barrier times out, or a collective timed out earlier (the
    /// communicator is poisoned, so a barrier could match the abandoned collective), MPI is
    /// left unfinalized and this is an `Err` saying why; the process should then exit (under
    /// mpirun's defaults, a rank that exits without finalizing ends the job).
    pub fn finalize(mut self) -> Result<()> {
        self.finalize_now()
    }

    fn finalize_now(&mut self) -> Result<()> {
        let Some(universe) = self.universe.take() else {
            return Ok(());
        };
        // Waits for MPI calls in progress (each ends by its timeout at the latest); no call
        // starts after this.
        let mut live = self.session.live.write();
        *live = false;
        let poisoned = self.session.poisoned.read().clone();
        let why = match poisoned {
            Some(why) => Err(format!("an earlier collective timed out ({why})")),
            // SAFETY: MPI is live and no other thread is inside an MPI call (write lock);
            // `finalize_comm` serves only this barrier.
            None => unsafe { raw::barrier(self.session.finalize_comm, self.default_timeout) },
        };
        if let Err(why) = why {
            // Never finalized: rsmpi's Universe would call MPI_Finalize when it drops.
            std::mem::forget(universe);
            return Err(Error::Mpi {
                rank: self.session.rank,
                operation: "MPI_Finalize".into(),
                detail: format!(
                    "skipped: {why}; with a rank dead or stuck, MPI_Finalize would wait for it \
                     forever. MPI stays initialized; exit the process"
                ),
            });
        }
        // SAFETY: MPI is initialized and no other thread is inside an MPI call (write lock);
        // no request on either communicator is waited for again.
        unsafe {
            raw::free_comm(self.session.comm);
            raw::free_comm(self.session.finalize_comm);
        }
        // rsmpi's Universe calls MPI_Finalize when it drops.
        drop(universe);
        Ok(())
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        if let Err(e) = self.finalize_now() {
            eprintln!("streamexec: {e}");
        }
    }
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mpi(rank {} of {})", self.rank(), self.size())
    }
}

/// A communicator: the ranks of the job, the timeout of each wait, and a handle on the session.
/// Cheap to clone; `Send` and `Sync` (MPI runs at `MPI_THREAD_MULTIPLE`).
#[derive(Clone)]
pub struct Communicator {
    session: Arc<Session>,
    timeout: Duration,
}

impl Communicator {
    /// This process's rank.
    pub fn rank(&self) -> i32 {
        self.session.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> i32 {
        self.session.size
    }

    /// How long one MPI wait (a receive, a collective) may take before the operation fails.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The same communicator with another timeout for its waits (operations already queued
    /// keep the one they were queued with).
    pub fn with_timeout(&self, timeout: Duration) -> Communicator {
        Communicator {
            session: self.session.clone(),
            timeout,
        }
    }

    /// The raw MPI handle, for code of this crate that calls MPI directly (the emissary
    /// services). Valid only while MPI is live: call it under [`enter`](Self::enter).
    pub(crate) fn as_raw(&self) -> ::mpi::ffi::MPI_Comm {
        self.session.comm.0
    }

    /// A guard under which MPI calls on this communicator are sound: `Err` (naming
    /// `operation`) once the session was finalized or the communicator poisoned by a
    /// timed-out collective. Finalize waits for guards to drop.
    pub(crate) fn enter(&self, operation: &str) -> Result<RwLockReadGuard<'_, bool>> {
        let live = self.session.live.read();
        if !*live {
            return Err(self.error(
                operation,
                "MPI was finalized (the Mpi session was dropped); keep the Mpi alive until every \
                 stream that uses its communicator is done",
            ));
        }
        if let Some(why) = self.session.poisoned.read().as_ref() {
            return Err(self.error(
                operation,
                format!(
                    "the communicator is unusable: an earlier collective timed out ({why}), and \
                     later collectives would be matched with it on the other ranks"
                ),
            ));
        }
        Ok(live)
    }

    /// Marks the communicator unusable after a collective timed out (see `Session::poisoned`).
    pub(crate) fn poison(&self, why: String) {
        self.session.poisoned.write().get_or_insert(why);
    }

    /// An `Error::Mpi` of this rank.
    pub(crate) fn error(&self, operation: impl Into<String>, detail: impl Into<String>) -> Error {
        Error::Mpi {
            rank: self.rank(),
            operation: operation.into(),
            detail: detail.into(),
        }
    }

    /// `InvalidArgument` unless `peer` is a rank of this communicator.
    pub(crate) fn check_rank(&self, peer: i32, what: &str, operation: &str) -> Result<()> {
        if (0..self.size()).contains(&peer) {
            return Ok(());
        }
        Err(Error::invalid(
            operation,
            format!(
                "{what} rank {peer} is not a rank of the communicator (ranks 0..{})",
                self.size()
            ),
        ))
    }
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Communicator(rank {} of {}, timeout {:?})",
            self.rank(),
            self.size(),
            self.timeout
        )
    }
}

/// The default timeout: `STREAMEXEC_MPI_TIMEOUT_MS` if set, else [`DEFAULT_TIMEOUT`].
fn timeout_from_env() -> Result<Duration> {
    match std::env::var(TIMEOUT_ENV) {
        Err(_) => Ok(DEFAULT_TIMEOUT),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| {
                init_error(format!(
                    "{TIMEOUT_ENV}={v:?} is not a whole number of milliseconds; unset it for the \
                 default of {} s",
                    DEFAULT_TIMEOUT.as_secs()
                ))
            }),
    }
}

fn init_error(detail: impl Into<String>) -> Error {
    Error::Mpi {
        rank: -1,
        operation: "Mpi::init".into(),
        detail: detail.into(),
    }
}

fn threading_name(t: Threading) -> &'static str {
    match t {
        Threading::Single => "MPI_THREAD_SINGLE",
        Threading::Funneled => "MPI_THREAD_FUNNELED",
        Threading::Serialized => "MPI_THREAD_SERIALIZED",
        Threading::Multiple => "MPI_THREAD_MULTIPLE",
    }
}
