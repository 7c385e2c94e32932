//! The crate's one error type.
//!
//! Every fallible call returns [`Result`]. Messages say what failed, where (platform, device,
//! kernel, argument) and, where there is one, what to do about it. `Error` is `Clone` because a
//! stream stores its first error and hands copies to every caller that asks (`status()`,
//! `block_host_until_done()`, streams that wait on it).
//!
//! An error caused by another (`DependencyFailed`, `Io`) keeps it as its
//! [`source`](std::error::Error::source) and does not repeat it in its own message: print the
//! chain (walk `source()`, or use a reporter such as `anyhow`'s `{:#}`) to see both.

use std::sync::Arc;

/// Shorthand for `std::result::Result<T, streamexec::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in streamexec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The platform is compiled in but cannot be used on this machine (no driver, no device).
    #[error("platform `{platform}` is unavailable: {reason}")]
    PlatformUnavailable {
        /// Platform name.
        platform: &'static str,
        /// Why, and what to install or enable.
        reason: String,
    },

    /// No platform has that name.
    #[error("no platform named `{name}`; known platforms: {known}")]
    UnknownPlatform {
        /// The name asked for.
        name: String,
        /// Every name the registry knows.
        known: String,
    },

    /// A device ordinal past the platform's device count.
    #[error(
        "{platform}: no device {ordinal}; the platform has {count} device(s) (ordinals 0..{count})"
    )]
    InvalidDevice {
        /// Platform name.
        platform: &'static str,
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices there are.
        count: usize,
    },

    /// The platform does not implement this (optional) operation.
    #[error("{platform}: `{operation}` is not supported: {reason}")]
    Unsupported {
        /// Platform name.
        platform: &'static str,
        /// The operation that was asked for.
        operation: String,
        /// Why, and what to use instead.
        reason: String,
    },

    /// An allocation failed.
    #[error("{platform} device {device}: out of memory allocating {bytes} bytes: {detail}")]
    OutOfMemory {
        /// Platform name.
        platform: &'static str,
        /// Device ordinal.
        device: usize,
        /// Bytes asked for.
        bytes: u64,
        /// What the platform said, and what is free.
        detail: String,
    },

    /// A copy, fill or slice that would reach past the end of a buffer.
    #[error("out of bounds in {operation}: {detail}")]
    OutOfBounds {
        /// The operation (`then_memcpy_h2d`, `DeviceMemory::slice`, ...).
        operation: String,
        /// Offsets and lengths involved.
        detail: String,
    },

    /// An argument that can never be valid (size mismatch, memory of another executor, ...).
    #[error("invalid argument to {operation}: {detail}")]
    InvalidArgument {
        /// The call that rejected it.
        operation: String,
        /// What is wrong and what is expected.
        detail: String,
    },

    /// A launch configuration the device cannot run.
    #[error("cannot launch kernel `{kernel}` on {platform}: {detail}")]
    LaunchConfig {
        /// Platform name.
        platform: &'static str,
        /// Kernel name.
        kernel: String,
        /// Which limit was broken and the device's limit.
        detail: String,
    },

    /// The spec holds no format that this platform can load.
    #[error(
        "{platform} cannot load kernel `{kernel}`: the loader spec holds no format this platform \
         loads (it holds: {available}); add {wanted} to the MultiKernelLoaderSpec"
    )]
    NoSuitableFormat {
        /// Platform name.
        platform: &'static str,
        /// Kernel name (first name in the spec).
        kernel: String,
        /// Formats the spec holds.
        available: String,
        /// Formats the platform would accept.
        wanted: String,
    },

    /// Loading or building a kernel failed (compiler log, missing entry point, bad binary).
    #[error("{platform}: loading kernel `{kernel}` failed: {detail}")]
    KernelLoad {
        /// Platform name.
        platform: &'static str,
        /// Kernel name.
        kernel: String,
        /// What went wrong; includes the compiler or JIT log where there is one.
        detail: String,
    },

    /// The kernel's own parameter list does not match the `TypedKernel` argument types.
    #[error("kernel `{kernel}` signature mismatch: {detail}")]
    SignatureMismatch {
        /// Kernel name.
        kernel: String,
        /// Argument index and both types.
        detail: String,
    },

    /// A kernel failed while running (panic, out-of-bounds access, barrier divergence).
    #[error("{platform}: kernel `{kernel}` failed: {detail}")]
    KernelFault {
        /// Platform name.
        platform: &'static str,
        /// Kernel name.
        kernel: String,
        /// Block, thread and cause.
        detail: String,
    },

    /// A kernel's device-side `assert` failed (CUDA's `__assertfail`): the assertion's
    /// message, file, line and function and the thread, in CUDA's text
    /// (`file:line: function: block: [x,y,z], thread: [x,y,z] Assertion `message` failed.`).
    #[error("{platform}: kernel `{kernel}`: {failure}")]
    KernelAssert {
        /// Platform name.
        platform: &'static str,
        /// Kernel name.
        kernel: String,
        /// What was asserted where, and by which thread.
        failure: Box<crate::ptx::AssertFailure>,
    },

    /// A host callback on a stream returned an error or panicked.
    #[error("host callback failed: {detail}")]
    HostCallback {
        /// The callback's error or panic message.
        detail: String,
    },

    /// This operation was not run because something it depends on failed first.
    #[error("{what} failed because a dependency failed")]
    DependencyFailed {
        /// What could not run (`then_wait_for`, an event wait).
        what: String,
        /// The dependency's own error.
        source: Box<Error>,
    },

    /// An event was queried or waited for in a state where that is meaningless.
    #[error("event error: {detail}")]
    Event {
        /// What was wrong (never recorded, not yet complete, from another executor).
        detail: String,
    },

    /// A vendor driver call failed.
    #[error("{platform}: {call} failed with code {code}: {detail}")]
    Driver {
        /// Platform name.
        platform: &'static str,
        /// The driver call.
        call: String,
        /// The driver's status code.
        code: i64,
        /// The driver's message and what to check.
        detail: String,
    },

    /// A device-initiated RPC failed: the other side broke the protocol, a service failed, or
    /// the server shut down while a kernel waited for it.
    #[error("rpc: {detail}")]
    Rpc {
        /// What failed, on which port or opcode.
        detail: String,
    },

    /// An emissary call (a kernel calling a host API through `OFFLOAD_EMISSARY`) was refused or
    /// failed: the device got a reply with `status` (`rpc::EmissaryStatus`) instead of a result.
    #[error("emissary `{function}` of API `{api}` (lane {lane}): {detail}")]
    Emissary {
        /// The API's name (or id).
        api: String,
        /// The function's name (or index).
        function: String,
        /// The calling lane.
        lane: usize,
        /// The reply's status word.
        status: u64,
        /// What was wrong.
        detail: String,
    },

    /// An MPI operation failed (feature `mpi`): a peer that never arrived before the timeout,
    /// arguments the ranks disagree on, an error MPI returned, or a finalized session.
    #[error("{}{operation}: {detail}", mpi_rank_prefix(*rank))]
    Mpi {
        /// This process's rank, or -1 before it is known (`Mpi::init`).
        rank: i32,
        /// The operation, with its peer and tag where it has them.
        operation: String,
        /// What went wrong and what to check.
        detail: String,
    },

    /// A file named by a loader spec could not be read.
    #[error("cannot read `{path}`")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        #[source]
        source: IoError,
    },

    /// Something streamexec itself should have made impossible happened: a bug in streamexec,
    /// not in the calling program. Please report it with the message.
    #[error(
        "internal error: {detail} (this is a bug in streamexec, not in your program; please \
         report it with this message)"
    )]
    Internal {
        /// What was expected and what was found instead.
        detail: String,
    },
}

impl Error {
    pub(crate) fn invalid(operation: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::InvalidArgument {
            operation: operation.into(),
            detail: detail.into(),
        }
    }

    pub(crate) fn bounds(operation: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::OutOfBounds {
            operation: operation.into(),
            detail: detail.into(),
        }
    }

    /// `Unsupported` for `operation` on `platform`, with the reason and what to use instead.
    pub fn unsupported(
        platform: &'static str,
        operation: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Unsupported {
            platform,
            operation: operation.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Error::Internal {
            detail: detail.into(),
        }
    }

    pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Self {
        Error::Io {
            path: path.display().to_string(),
            source: e.into(),
        }
    }

    pub(crate) fn dependency(what: impl Into<String>, source: Error) -> Self {
        Error::DependencyFailed {
            what: what.into(),
            source: Box::new(source),
        }
    }
}

/// The OS error behind [`Error::Io`], shared so that `Error` stays `Clone`. Two are equal when
/// their kind and message are (`std::io::Error` itself has no `PartialEq`).
#[derive(Debug, Clone)]
pub struct IoError(Arc<std::io::Error>);

impl IoError {
    /// The OS error.
    pub fn get_ref(&self) -> &std::io::Error {
        &self.0
    }

    /// Its kind (`NotFound`, `PermissionDenied`, ...).
    pub fn kind(&self) -> std::io::ErrorKind {
        self.0.kind()
    }
}

impl From<std::io::Error> for IoError {
    fn from(e: std::io::Error) -> Self {
        IoError(Arc::new(e))
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string())
    }
}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The OS error's own source, if any: `IoError` is the OS error, shared, not a layer of its own.
impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The RPC crate's errors as the same variants of this crate's (a service's own error, kept as
/// the source of `rpc::Error::Service`, comes back as itself when it is one of ours).
impl From<crate::rpc::Error> for Error {
    fn from(e: crate::rpc::Error) -> Self {
        use crate::rpc::Error as R;
        match e {
            R::InvalidArgument { operation, detail } => {
                Error::InvalidArgument { operation, detail }
            }
            R::Rpc { detail } => Error::Rpc { detail },
            R::Emissary {
                api,
                function,
                lane,
                status,
                detail,
            } => Error::Emissary {
                api,
                function,
                lane,
                status,
                detail,
            },
            R::Service(source) => match source.downcast_ref::<Error>() {
                Some(ours) => ours.clone(),
                None => Error::Rpc {
                    detail: source.to_string(),
                },
            },
            other => Error::Rpc {
                detail: other.to_string(),
            },
        }
    }
}

/// This crate's errors inside RPC handlers and Emissary wrappers: the RPC variants as
/// themselves, anything else as a service failure with this error as its source.
impl From<Error> for crate::rpc::Error {
    fn from(e: Error) -> Self {
        use crate::rpc::Error as R;
        match e {
            Error::Rpc { detail } => R::Rpc { detail },
            Error::Emissary {
                api,
                function,
                lane,
                status,
                detail,
            } => R::Emissary {
                api,
                function,
                lane,
                status,
                detail,
            },
            other => R::service(other),
        }
    }
}

/// The PTX engine's errors as the host platform reports them (the engine runs the host
/// platform's PTX; its texts become the details).
impl From<crate::ptx::Error> for Error {
    fn from(e: crate::ptx::Error) -> Self {
        use crate::ptx::Error as P;
        const HOST: &str = "host";
        match e {
            P::Ptx(e) => Error::KernelLoad {
                platform: HOST,
                kernel: e.function().unwrap_or_default().to_string(),
                detail: e.to_string(),
            },
            e @ P::NoEntry { .. } => Error::KernelLoad {
                platform: HOST,
                kernel: match &e {
                    P::NoEntry { kernel, .. } => kernel.clone(),
                    _ => String::new(),
                },
                detail: e.to_string(),
            },
            P::Signature { kernel, detail } => Error::SignatureMismatch { kernel, detail },
            P::Launch { kernel, detail } => Error::LaunchConfig {
                platform: HOST,
                kernel,
                detail,
            },
            P::Fault { kernel, detail } => Error::KernelFault {
                platform: HOST,
                kernel,
                detail,
            },
            P::Assert { kernel, failure } => Error::KernelAssert {
                platform: HOST,
                kernel,
                failure,
            },
            P::JitUnsupported { detail, .. } => Error::unsupported("host", "PTX JIT", detail),
            P::InvalidArgument { operation, detail } => {
                Error::InvalidArgument { operation, detail }
            }
            other => Error::internal(format!("PTX engine: {other}")),
        }
    }
}

/// `MPI rank R: ` (or `MPI: ` while the rank is unknown) before an MPI error's operation.
fn mpi_rank_prefix(rank: i32) -> String {
    if rank < 0 {
        "MPI: ".into()
    } else {
        format!("MPI rank {rank}: ")
    }
}

/// `e`'s message followed by each of its sources' (`: `-separated): what a detail that quotes
/// another error says, now that `Display` leaves the sources out.
pub(crate) fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let chain = std::iter::successors(Some(e), |e| e.source());
    chain.map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

/// Turns a caught panic payload into a readable message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
