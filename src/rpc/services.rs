//! Built-in services and user services.

use super::server::Server;

/// Per-server state of the built-in services.
#[derive(Default)]
pub(crate) struct ServiceState {}

pub(crate) fn install_builtins(_server: &Server) {}

/// A typed user service.
pub trait Service {}
/// The Emissary dispatcher.
pub struct Emissary;
/// A standard stream.
pub enum StdStream {}
/// Rejects reserved opcodes.
pub fn check_user_opcode(_op: u32) -> crate::Result<()> {
    Ok(())
}
