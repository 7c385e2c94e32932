//! How a failed call looks on the wire: the status codes handlers answer with, and the error
//! reply that carries them (status in word 0 for foreign clients, [`ERROR_TAG`] in word 7 for
//! ours). Both halves of the protocol use it: the server writes error replies, ports and the
//! in-process client recognise them.

use super::layout::Packet;
use crate::error::Error;

/// A handler's status: success.
pub const RPC_SUCCESS: u32 = 0;
/// A handler's status: the handler failed or panicked.
pub const RPC_ERROR: u32 = 0x1000;
/// A handler's status: nobody handles the opcode.
pub const RPC_UNHANDLED_OPCODE: u32 = 0x1001;

/// Word 7 of an error reply ("RPC_ERR!" little-endian); words 1..=6 are zero and word 0 holds
/// the status. Our clients check for it; foreign clients see the status in `data[0]`.
pub const ERROR_TAG: u64 = u64::from_le_bytes(*b"RPC_ERR!");

/// The status of an error reply, or `None` for an ordinary packet.
pub fn error_reply(p: &Packet) -> Option<u32> {
    (p[7] == ERROR_TAG && p[1..7].iter().all(|&w| w == 0)).then_some(p[0] as u32)
}

/// The error a client reports when the server answered `op` with `status`.
pub(crate) fn server_error(op: u32, status: u32) -> Error {
    let what = match status {
        RPC_UNHANDLED_OPCODE => "RPC_UNHANDLED_OPCODE (no handler is registered)",
        RPC_ERROR => "RPC_ERROR (the handler failed; see the server's log)",
        _ => "an error status",
    };
    Error::Rpc {
        detail: format!("opcode {op:#010x}: the server replied {what}"),
    }
}
