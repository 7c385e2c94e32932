//! The crate's one error type. Every message says what failed, where, and what to do.

use std::path::PathBuf;

/// What a [`Kernels`](crate::Kernels) build can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No clang to run, and no prebuilt outputs to fall back on.
    #[error(
        "streamexec-build: clang was not found (tried `{tried}`: {reason}). Install it \
         (Debian/Ubuntu: `apt install clang-19`), or set STREAMEXEC_CLANG to a clang 19 \
         binary, or use the prebuilt mode (`Kernels::prebuilt(dir)` with outputs committed \
         from a machine that has clang)"
    )]
    ClangNotFound {
        /// The binary that was tried.
        tried: String,
        /// Why it could not run.
        reason: String,
    },
    /// clang rejected a source; `diagnostics` is clang's own output.
    #[error(
        "streamexec-build: clang failed to {action} {file}:\n{diagnostics}{hint}\n(command: {command})"
    )]
    Clang {
        /// What the command was for ("compile to PTX for sm_70", "check the OpenCL C", ...).
        action: String,
        /// The source.
        file: PathBuf,
        /// clang's diagnostics (stderr).
        diagnostics: String,
        /// Advice for failures with a known cause (empty otherwise).
        hint: String,
        /// The command line, for reproducing it.
        command: String,
    },
    /// clang's JSON AST of a source could not be read as expected.
    #[error("streamexec-build: cannot read clang's AST of {file}: {detail}")]
    Ast {
        /// The source.
        file: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A kernel parameter whose C type has no faithful Rust counterpart.
    #[error(
        "streamexec-build: kernel `{kernel}` in {file}: parameter `{param}` has type `{ty}`, \
         which has no faithful Rust counterpart ({why}); change the parameter's type"
    )]
    UnsupportedParam {
        /// The kernel.
        kernel: String,
        /// The source that defines it.
        file: PathBuf,
        /// The parameter's name (or `#index` when unnamed).
        param: String,
        /// Its C type, as clang spells it.
        ty: String,
        /// Why it is refused.
        why: String,
    },
    /// The same kernel name in two sources with different Rust signatures, or two kernels that
    /// would get the same module name.
    #[error("streamexec-build: kernel `{kernel}`: {detail}")]
    Conflict {
        /// The kernel (module) name.
        kernel: String,
        /// The two definitions and what differs.
        detail: String,
    },
    /// A template instantiation asked for with [`Kernels::instantiate`](crate::Kernels::instantiate)
    /// that clang did not produce as a kernel.
    #[error("streamexec-build: instantiation `{request}` in {file}: {detail}")]
    Instantiation {
        /// What the builder was asked for.
        request: String,
        /// The CUDA source it applies to.
        file: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The builder was configured in a way it cannot build.
    #[error("streamexec-build: {0}")]
    Config(String),
    /// Committed prebuilt outputs do not match the sources or options.
    #[error(
        "streamexec-build: the prebuilt kernels in {dir} are stale: {detail}. Regenerate them \
         on a machine with clang 19: `STREAMEXEC_BUILD_UPDATE_PREBUILT=1 cargo build` in this \
         package, then commit {dir}"
    )]
    StalePrebuilt {
        /// The prebuilt folder.
        dir: PathBuf,
        /// Which file or option changed.
        detail: String,
    },
    /// Prebuilt mode without prebuilt outputs.
    #[error(
        "streamexec-build: no usable prebuilt kernels in {dir} ({detail}), and {why}. Generate \
         them on a machine with clang 19: `STREAMEXEC_BUILD_UPDATE_PREBUILT=1 cargo build` in \
         this package, then commit {dir}"
    )]
    MissingPrebuilt {
        /// The prebuilt folder.
        dir: PathBuf,
        /// What is missing or unreadable.
        detail: String,
        /// Why prebuilt mode was used.
        why: String,
    },
    /// A file could not be read or written.
    #[error("streamexec-build: cannot {action} {path}: {source}")]
    Io {
        /// "read", "write", "create", ...
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps an I/O error with the action and path.
pub(crate) fn io(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}
