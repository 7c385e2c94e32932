//! Which of the two engines runs a kernel.

use crate::error::{Error, Result};

/// The engine that runs a launch.
///
/// The default is [`PtxEngine::Auto`]. streamexec's host platform starts with what the
/// environment variable `STREAMEXEC_PTX_ENGINE` (`auto`, `jit`, `interpreter`) names when an
/// executor is created ([`from_env`](Self::from_env)); its `StreamExecutor::set_ptx_engine`
/// changes it for later launches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PtxEngine {
    /// The native-code compiler for kernels it supports, the interpreter for the rest.
    #[default]
    Auto,
    /// Only the compiler: a kernel it does not support (or a build without the `jit` feature)
    /// fails to launch with [`Error::JitUnsupported`] naming what it lacks (for tests that must
    /// know which engine ran).
    Jit,
    /// Only the interpreter (it alone has the data-race checker, which implies it).
    Interpreter,
}

impl PtxEngine {
    /// The environment variable read when an executor is created.
    pub const ENV: &'static str = "STREAMEXEC_PTX_ENGINE";

    /// Parses `auto`, `jit` or `interpreter` (also `interp`), case-insensitively.
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(PtxEngine::Auto),
            "jit" => Ok(PtxEngine::Jit),
            "interpreter" | "interp" => Ok(PtxEngine::Interpreter),
            other => Err(Error::invalid(
                "PtxEngine::parse",
                format!(
                    "PTX engine `{other}`: expected `auto`, `jit` or `interpreter` (in {} or \
                     StreamExecutor::set_ptx_engine)",
                    Self::ENV
                ),
            )),
        }
    }

    /// What `STREAMEXEC_PTX_ENGINE` names (unset: `Auto`).
    pub fn from_env() -> Result<Self> {
        match std::env::var(Self::ENV) {
            Ok(v) => Self::parse(&v),
            Err(_) => Ok(PtxEngine::Auto),
        }
    }
}
