#![doc = include_str!("../README.md")]
//!
//! ## The crate's parts
//!
//! - [`layout`]: where mailboxes, headers and packets sit for both layouts ([`Layout`]), and
//!   the bytes of the device's `Client` struct ([`CLIENT_SYMBOL`]).
//! - [`Port`] / [`Process`]: the protocol state machine (send, recv, send_n,
//!   recv_n, lane masks) over the shared block; all `unsafe` is in `mem.rs`.
//! - [`Server`] / [`ServerThread`]: the standalone server; [`Client`]: the in-process client
//!   host kernels and tests use; [`opcode`]: the libc and offload opcode numbers.
//! - `services.rs`: the built-in services (write, printf, malloc, exit, files, host calls),
//!   typed user services, and the opcode of the Emissary dispatcher.
//! - `emissary.rs`: the Emissary layer (LLVM offload's design): one opcode, one argument buffer
//!   per lane, per-API tables of host wrappers ([`EmissaryApi`]), pointer arguments resolved by
//!   an [`EmissaryMemory`].
//! - `status.rs`: handler statuses and the error reply ([`error_reply`]).
//! - `client.cl`: the OpenCL C client ([`OPENCL_CLIENT_SOURCE`]), to prepend to a kernel's
//!   source after [`opencl_prelude`] (streamexec does it for a spec `with_rpc`);
//!   `emissary_client.cl` and `mpi_client.cl`: the OpenCL C Emissary client and MPI stubs
//!   ([`OPENCL_EMISSARY_SOURCE`], [`OPENCL_MPI_SOURCE`]), after it.
//!
//! ## Invariants
//!
//! - **Shared memory is raw.** Every access to the block is a relaxed atomic (mailboxes `u32`,
//!   headers and packets `u64` words), ordered by the protocol's fences: acquire after seeing
//!   ownership, release before flipping the outbox, acquire after taking a lock, release before
//!   dropping it. Handlers get copies of packets, never references into the block, so a device that
//!   breaks the protocol gives wrong data, never UB. One addition to upstream: the client's `open`
//!   issues an acquire fence after it reads the mailboxes; without it the loom model finds a race
//!   between the new call's header write and the server's read of the previous (asynchronous)
//!   call's header.
//! - **Waiting.** A CPU waiter spins briefly, then yields, then parks (in-process peers unpark it
//!   through `parking_lot_core` keyed on the mailbox address) or sleeps with a growing delay
//!   (device peers cannot unpark anything). Every wait also checks the server's stop flag, so a
//!   stopped server makes clients fail with `Error::Rpc` instead of hanging.
//! - **Errors.** An unknown opcode, or a handler that returns `Err` or panics, is logged
//!   (`eprintln!` and `Server::take_errors`) and, if the server owns the port, answered with an
//!   error packet: status in word 0 (`RPC_UNHANDLED_OPCODE` / `RPC_ERROR`, what foreign clients
//!   read), `ERROR_TAG` in word 7 (what our clients check). Later exchanges of the same failed call
//!   are dispatched again and fail the same way, so the device drains instead of hanging.

#![warn(missing_docs)]

#[cfg(target_endian = "big")]
compile_error!("the RPC block is little-endian; big-endian hosts are not supported");

mod affinity;
mod calls;
mod client;
mod emissary;
mod error;
pub mod layout;
mod mem;
mod opencl;
mod port;
mod printf;
mod server;
mod services;
mod status;

#[cfg(test)]
mod tests;

pub use calls::{in_call, pause as pause_call};
pub use client::{Client, PrintfArg};
pub use emissary::{
    EMISSARY_API_MPI, EMISSARY_ARG_BYTES, EMISSARY_HEADER_BYTES, EMISSARY_MAX_ARGS, EmissaryApi,
    EmissaryArg, EmissaryCall, EmissaryFn, EmissaryMemory, EmissaryReply, EmissaryStatus,
    HostBuffer, decode as decode_emissary, encode as encode_emissary,
};
pub use error::{Error, Result};
pub use layout::{CLIENT_SYMBOL, EXECUTOR_PORTS, Geometry, Layout, Packet};
pub use mem::{HostMem, LockWord, Mem, Wait};
pub use opencl::{OPENCL_CLIENT_SOURCE, OPENCL_EMISSARY_SOURCE, OPENCL_MPI_SOURCE, opencl_prelude};
pub use port::{Handler, MAX_STREAM_BYTES, Port, Process};
pub use printf::format_args_buffer;
pub use server::{Server, ServerThread};
pub use services::{
    Allocator, ExitObserver, HostFunction, KernelExit, Service, StdStream, check_user_opcode,
};
pub use status::{ERROR_TAG, RPC_ERROR, RPC_SUCCESS, RPC_UNHANDLED_OPCODE, error_reply};

/// Opcode numbers (rpc-protocol.md section 10).
pub mod opcode {
    /// `('c' << 24) | n`: the libc range.
    pub const fn libc(n: u32) -> u32 {
        0x6300_0000 | n
    }
    /// `('o' << 24) | n`: the offload range.
    pub const fn offload(n: u32) -> u32 {
        0x6F00_0000 | n
    }
    /// Does nothing (asynchronous).
    pub const NOOP: u32 = libc(0);
    /// Ends the kernel with a status.
    pub const EXIT: u32 = libc(1);
    /// Writes bytes to stdout.
    pub const WRITE_TO_STDOUT: u32 = libc(2);
    /// Writes bytes to stderr.
    pub const WRITE_TO_STDERR: u32 = libc(3);
    /// Writes bytes to a stream.
    pub const WRITE_TO_STREAM: u32 = libc(4);
    /// Writes bytes and a newline to stdout (`puts`).
    pub const WRITE_TO_STDOUT_NEWLINE: u32 = libc(5);
    /// `fread`.
    pub const READ_FROM_STREAM: u32 = libc(6);
    /// `fgets`.
    pub const READ_FGETS: u32 = libc(7);
    /// `fopen`.
    pub const OPEN_FILE: u32 = libc(8);
    /// `fclose`.
    pub const CLOSE_FILE: u32 = libc(9);
    /// Device-accessible memory from the host.
    pub const MALLOC: u32 = libc(10);
    /// Frees `MALLOC` memory (asynchronous).
    pub const FREE: u32 = libc(11);
    /// Calls a host function pointer with an argument blob.
    pub const HOST_CALL: u32 = libc(12);
    /// Aborts the kernel.
    pub const ABORT: u32 = libc(13);
    /// `feof`.
    pub const FEOF: u32 = libc(14);
    /// `ferror`.
    pub const FERROR: u32 = libc(15);
    /// `clearerr`.
    pub const CLEARERR: u32 = libc(16);
    /// `fseek`.
    pub const FSEEK: u32 = libc(17);
    /// `ftell`.
    pub const FTELL: u32 = libc(18);
    /// `fflush`.
    pub const FFLUSH: u32 = libc(19);
    /// `ungetc`.
    pub const UNGETC: u32 = libc(20);
    /// `printf` to stdout.
    pub const PRINTF_TO_STDOUT: u32 = libc(21);
    /// `printf` to stderr.
    pub const PRINTF_TO_STDERR: u32 = libc(22);
    /// `fprintf`.
    pub const PRINTF_TO_STREAM: u32 = libc(23);
    /// `printf` to stdout, packed arguments (AMDGPU).
    pub const PRINTF_TO_STDOUT_PACKED: u32 = libc(24);
    /// `printf` to stderr, packed arguments.
    pub const PRINTF_TO_STDERR_PACKED: u32 = libc(25);
    /// `fprintf`, packed arguments.
    pub const PRINTF_TO_STREAM_PACKED: u32 = libc(26);
    /// `remove`.
    pub const REMOVE: u32 = libc(27);
    /// `rename`.
    pub const RENAME: u32 = libc(28);
    /// `system` (not served: a kernel does not get a shell).
    pub const SYSTEM: u32 = libc(29);
    /// The offload runtime's host call.
    pub const OFFLOAD_HOST_CALL: u32 = offload(0);
    /// The Emissary dispatcher (LLVM offload's `OFFLOAD_EMISSARY`): one argument buffer per
    /// lane (API id, function index, arguments), one reply packet per lane.
    pub const OFFLOAD_EMISSARY: u32 = offload(1);
}
