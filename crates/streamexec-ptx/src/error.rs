//! The crate's errors: [`Error`], and [`PtxError`], what is wrong with a PTX text and where.

/// Everything that can go wrong loading or launching PTX.
///
/// The texts are what streamexec's host platform reports (its `KernelLoad`, `SignatureMismatch`,
/// `LaunchConfig`, `KernelFault` and `Unsupported` errors carry them as their detail).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text cannot be read, laid out or decoded (or uses what the engines do not run).
    #[error(transparent)]
    Ptx(#[from] PtxError),

    /// The module has no `.entry` of that name.
    #[error("the PTX module has no .entry named `{kernel}` (it has: {})", .have.join(", "))]
    NoEntry {
        /// The name asked for.
        kernel: String,
        /// The entries the module has, sorted.
        have: Vec<String>,
    },

    /// The memory for the module's `.global`/`.const` data could not be allocated.
    #[error("out of memory allocating the {bytes} bytes of the PTX module's data")]
    OutOfMemory {
        /// The data's size.
        bytes: u64,
    },

    /// The arguments of a launch do not match the entry's parameters.
    #[error("kernel `{kernel}`: {detail}")]
    Signature {
        /// The kernel.
        kernel: String,
        /// Which argument, and what the entry declares.
        detail: String,
    },

    /// A launch the engines cannot run (shared memory past the limit, ...).
    #[error("kernel `{kernel}`: {detail}")]
    Launch {
        /// The kernel.
        kernel: String,
        /// What is over which limit.
        detail: String,
    },

    /// The launch faulted: an access outside live memory, a misaligned access, `trap`, barrier
    /// divergence, a data race (with the race checker on). The detail names block, thread,
    /// kernel, PTX line and instruction.
    #[error("kernel `{kernel}` failed: {detail}")]
    Fault {
        /// The kernel.
        kernel: String,
        /// What happened where.
        detail: String,
    },

    /// A thread's device-side `assert` failed (`__assertfail`): the launch stopped. CUDA
    /// reports it as `CUDA_ERROR_ASSERT`; the text is CUDA's.
    #[error("kernel `{kernel}`: {failure}")]
    Assert {
        /// The kernel.
        kernel: String,
        /// The assertion, its place in the source, and the thread.
        failure: Box<crate::services::AssertFailure>,
    },

    /// `PtxEngine::Jit` was asked for a kernel the JIT does not compile.
    #[error("{detail}")]
    JitUnsupported {
        /// The kernel.
        kernel: String,
        /// Why, and what runs it instead.
        detail: String,
    },

    /// An argument that can never be valid.
    #[error("invalid argument to {operation}: {detail}")]
    InvalidArgument {
        /// The function that refused it.
        operation: String,
        /// What was wrong and what is allowed.
        detail: String,
    },
}

/// Shorthand for `std::result::Result<T, streamexec_ptx::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn invalid(operation: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::InvalidArgument {
            operation: operation.into(),
            detail: detail.into(),
        }
    }
}

/// Turns a caught panic payload into a readable message.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload.downcast_ref::<&str>().map(|s| s.to_string());
    text.or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_string())
}

/// A PTX text the front end cannot read (malformed syntax, a declaration it cannot lay out,
/// an instruction the host engine does not run): the 1-based PTX line and the function or
/// kernel where known, and what is wrong.
///
/// Its `Display` reads ``in `name`, PTX line N: message`` (parts that are not known are left
/// out). A loader reports it as its platform's kernel-load error with this text as the detail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxError {
    line: Option<usize>,
    function: Option<String>,
    message: String,
}

impl PtxError {
    /// An error at `line` (1-based) in `function` (`None`: at module scope or not known).
    pub(crate) fn new(
        line: Option<usize>,
        function: Option<&str>,
        message: impl std::fmt::Display,
    ) -> Self {
        PtxError {
            line,
            function: function.map(str::to_string),
            message: message.to_string(),
        }
    }

    /// The 1-based PTX line, where the error has one.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The function or kernel the error is in, where known (`None` at module scope).
    pub fn function(&self) -> Option<&str> {
        self.function.as_deref()
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for PtxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.function, self.line) {
            (Some(func), Some(line)) => write!(f, "in `{func}`, PTX line {line}: ")?,
            (Some(func), None) => write!(f, "in `{func}`: ")?,
            (None, Some(line)) => write!(f, "PTX line {line}: ")?,
            (None, None) => {}
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for PtxError {}

/// Shorthand for the front end's results.
pub(crate) type PtxResult<T> = std::result::Result<T, PtxError>;

/// A layout or decoding error in `kernel` (`None`: module data), at `line` where there is one.
pub(crate) fn load_error(
    kernel: Option<&str>,
    line: Option<u32>,
    detail: impl std::fmt::Display,
) -> PtxError {
    PtxError::new(line.map(|l| l as usize), kernel, detail)
}

#[cfg(test)]
mod tests {
    use super::PtxError;

    #[test]
    fn display_names_what_is_known() {
        let e = PtxError::new(Some(7), Some("k"), "`foo` is not supported");
        assert_eq!(e.to_string(), "in `k`, PTX line 7: `foo` is not supported");
        assert_eq!(
            (e.line(), e.function(), e.message()),
            (Some(7), Some("k"), "`foo` is not supported")
        );
        assert_eq!(
            PtxError::new(Some(2), None, "bad").to_string(),
            "PTX line 2: bad"
        );
        assert_eq!(
            PtxError::new(None, Some("k"), "bad").to_string(),
            "in `k`: bad"
        );
        assert_eq!(PtxError::new(None, None, "bad").to_string(), "bad");
    }
}
