//! PTX text → [`ast::Module`](super::ast::Module).

use super::ast::Module;
use crate::error::{Error, Result};

/// Parses a whole PTX module. Malformed text is a `KernelLoad` error naming the line.
pub fn parse_module(_ptx: &str) -> Result<Module> {
    Err(Error::KernelLoad {
        platform: "ptx".into(),
        kernel: "(module)".into(),
        detail: "the PTX parser is being written".into(),
    })
}
