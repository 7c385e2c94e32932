//! The crate's one error type.
//!
//! Every fallible call returns [`Result`]. A handler (or an Emissary wrapper) that fails for a
//! reason of its own returns [`Error::Service`] with that error as its source, so the server's
//! log and the caller keep the whole chain.

use std::sync::Arc;

/// Shorthand for `std::result::Result<T, streamexec_rpc::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the RPC protocol, its server and its services.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument that can never be valid (a geometry past the protocol's limits, an opcode
    /// in a reserved range, a malformed client image, ...).
    #[error("invalid argument to {operation}: {detail}")]
    InvalidArgument {
        /// The function that refused it (`rpc::Server::new`, ...).
        operation: String,
        /// What was wrong and what is allowed.
        detail: String,
    },

    /// A call failed: the other side broke the protocol, a service failed, or the server shut
    /// down while a client waited for it.
    #[error("rpc: {detail}")]
    Rpc {
        /// What failed, on which port or opcode.
        detail: String,
    },

    /// An Emissary call (a kernel calling a host API through `OFFLOAD_EMISSARY`) was refused or
    /// failed: the device got a reply with `status` ([`EmissaryStatus`](crate::EmissaryStatus))
    /// instead of a result.
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

    /// A handler, service or host function failed with an error of its own (the source).
    #[error(transparent)]
    Service(Arc<dyn std::error::Error + Send + Sync>),
}

impl Error {
    pub(crate) fn invalid(operation: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::InvalidArgument {
            operation: operation.into(),
            detail: detail.into(),
        }
    }

    /// A handler's own failure, kept as the source.
    pub fn service(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Service(Arc::new(source))
    }
}

/// `e`'s message followed by each of its sources' (`: `-separated), for logs: `Display` leaves
/// the sources out.
pub(crate) fn with_sources(e: &(dyn std::error::Error + 'static)) -> String {
    let chain = std::iter::successors(Some(e), |e| e.source());
    chain.map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
}

/// Turns a caught panic payload into a readable message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().map(|s| s.to_string());
    text.or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_string())
}
