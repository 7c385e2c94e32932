//! How the host platform reports its failures. It has no driver and so no status codes: what
//! can fail is the system allocator, the thread pool, a pointer that is not live memory of the
//! executor, and a kernel thread. Those become the crate's `Error`s here, in one place, so every
//! message names the platform the same way.

use crate::error::Error;
use crate::types::DeviceAddress;

/// The platform's name in every error and description.
pub(crate) const PLATFORM: &str = "host";

/// The system allocator refused `bytes`; `detail` says which memory.
pub(crate) fn out_of_memory(device: usize, bytes: u64, detail: &str) -> Error {
    Error::OutOfMemory {
        platform: PLATFORM,
        device,
        bytes,
        detail: detail.into(),
    }
}

/// `[addr, addr + bytes)` is not inside one live allocation of the executor.
pub(crate) fn not_live(addr: DeviceAddress, bytes: u64, operation: &str) -> Error {
    Error::invalid(
        operation,
        format!("{bytes} bytes at {addr} are not inside one live allocation of this executor"),
    )
}

/// The executor's rayon pool could not be built.
pub(crate) fn pool_failed(e: rayon::ThreadPoolBuildError) -> Error {
    Error::Driver {
        platform: PLATFORM,
        call: "rayon::ThreadPoolBuilder::build".into(),
        code: 0,
        detail: e.to_string(),
    }
}

/// A thread of kernel `kernel` failed (`detail` names the block, the thread and the cause).
pub(crate) fn kernel_fault(kernel: String, detail: String) -> Error {
    Error::KernelFault {
        platform: PLATFORM,
        kernel,
        detail,
    }
}
