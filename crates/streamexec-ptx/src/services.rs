//! Functions a kernel calls that the launcher serves, with CUDA's device ABI: `vprintf`,
//! `malloc`, `free` and `__assertfail`.
//!
//! PTX declares them `.extern .func` without a body; the decoder turns a call of one into one
//! `Op::Service` that reads the caller's `.param` arguments. Both engines run it through
//! `service_call.rs` (the JIT calls it out of line), so they behave alike:
//!
//! - `vprintf(fmt, args)`: the engine reads the format string (a generic pointer to a
//!   NUL-terminated string) and hands it with the argument buffer's address and a view of the
//!   calling thread's memory ([`DeviceView`]) to [`DeviceServices::vprintf`]; the launcher
//!   formats and keeps the text (the crate has no formatter). Its result is `vprintf`'s: the
//!   number of arguments, or negative on error. Without services it is -1.
//! - `malloc(size)` / `free(ptr)`: [`DeviceServices::malloc`] / [`DeviceServices::free`];
//!   [`DeviceHeap`] is a heap a launcher can serve them from (each block its own allocation of
//!   the [`AllocTable`], so kernels of this and later launches reach it, with CUDA's size
//!   limit). Without services `malloc` returns NULL and `free` does nothing.
//! - `__assertfail(message, file, line, function, charSize)`: the launch fails with
//!   [`Error::Assert`](crate::Error::Assert) carrying an [`AssertFailure`] (the first thread's
//!   whose assertion failed); the calling thread stops there.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dim::Dim3;
use crate::memory::AllocTable;

/// The thread making a service call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadPlace {
    /// `%ctaid`.
    pub block: Dim3,
    /// `%tid`.
    pub thread: Dim3,
}

/// Memory as the calling thread sees it: generic addresses (device memory, its local memory,
/// its block's shared memory, parameters). A failed read is a fault of the calling thread.
pub trait DeviceView {
    /// Fills `out` from `addr`; `Err` says why the range cannot be read.
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String>;

    /// The NUL-terminated string at `addr`, without its NUL (at most 1 MiB).
    fn read_c_string(&self, addr: u64) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut b = [0u8];
        while out.len() < MAX_STRING {
            self.read(addr.wrapping_add(out.len() as u64), &mut b)?;
            if b[0] == 0 {
                return Ok(out);
            }
            out.push(b[0]);
        }
        Err(format!(
            "the string at {addr:#x} has no NUL in its first {MAX_STRING} bytes"
        ))
    }
}

/// Longest string a service reads.
const MAX_STRING: usize = 1 << 20;

/// What a launcher serves to its kernels (see the module docs for each function's ABI).
pub trait DeviceServices: Send + Sync {
    /// `vprintf`: format `format` with the arguments at `args` (CUDA's layout: each argument
    /// at an offset aligned to its size, `%s` as a 64-bit pointer) and keep the text. Returns
    /// the number of arguments, or a negative value on error.
    fn vprintf(&self, format: &[u8], args: u64, memory: &dyn DeviceView, place: ThreadPlace)
    -> i32;

    /// `malloc`: the device address of `bytes` bytes kernels may use, or 0.
    fn malloc(&self, bytes: u64) -> u64 {
        let _ = bytes;
        0
    }

    /// `free` of what `malloc` returned (0 does nothing).
    fn free(&self, addr: u64) {
        let _ = addr;
    }
}

/// A failed device-side `assert`: what `__assertfail` was called with, and by whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssertFailure {
    /// The asserted expression's text.
    pub message: String,
    /// The source file.
    pub file: String,
    /// The source line.
    pub line: u32,
    /// The function.
    pub function: String,
    /// The thread's block.
    pub block: Dim3,
    /// The thread.
    pub thread: Dim3,
}

impl std::fmt::Display for AssertFailure {
    /// CUDA's text: `file:line: function: block: [x,y,z], thread: [x,y,z] Assertion `message` failed.`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (b, t) = (self.block, self.thread);
        write!(
            f,
            "{}:{}: {}: block: [{},{},{}], thread: [{},{},{}] Assertion `{}` failed.",
            self.file, self.line, self.function, b.x, b.y, b.z, t.x, t.y, t.z, self.message
        )
    }
}

/// A device heap for `malloc`/`free` from kernels: each block is an allocation of the
/// [`AllocTable`] (so kernels of any later launch reach it, bounds-checked), and the bytes
/// live at once are at most the limit (CUDA's `CU_LIMIT_MALLOC_HEAP_SIZE`, 8 MiB by default).
/// Thread-safe.
pub struct DeviceHeap {
    table: Arc<AllocTable>,
    state: Mutex<HeapState>,
}

struct HeapState {
    limit: u64,
    used: u64,
    live: HashMap<u64, u64>,
}

impl DeviceHeap {
    /// CUDA's default heap size.
    pub const DEFAULT_LIMIT: u64 = 8 << 20;

    /// An empty heap of at most `limit` bytes in `table`.
    pub fn new(table: Arc<AllocTable>, limit: u64) -> Self {
        DeviceHeap {
            table,
            state: Mutex::new(HeapState {
                limit,
                used: 0,
                live: HashMap::new(),
            }),
        }
    }

    /// The size limit.
    pub fn limit(&self) -> u64 {
        self.state.lock().limit
    }

    /// Sets the size limit (blocks already allocated stay).
    pub fn set_limit(&self, bytes: u64) {
        self.state.lock().limit = bytes;
    }

    /// Bytes allocated and not freed.
    pub fn used(&self) -> u64 {
        self.state.lock().used
    }

    /// `bytes` zeroed bytes (16-byte aligned), or 0 when the heap is exhausted or `bytes` is 0.
    pub fn malloc(&self, bytes: u64) -> u64 {
        let mut s = self.state.lock();
        if bytes == 0 || s.used.saturating_add(bytes) > s.limit {
            return 0;
        }
        let Some(addr) = self.table.allocate(bytes) else {
            return 0;
        };
        s.used += bytes;
        s.live.insert(addr, bytes);
        addr
    }

    /// Frees a block `malloc` returned; false (and nothing freed) for any other address.
    pub fn free(&self, addr: u64) -> bool {
        let mut s = self.state.lock();
        match s.live.remove(&addr) {
            Some(bytes) => {
                s.used -= bytes;
                self.table.free(addr);
                true
            }
            None => false,
        }
    }
}

impl Drop for DeviceHeap {
    fn drop(&mut self) {
        for addr in self.state.get_mut().live.keys() {
            self.table.free(*addr);
        }
    }
}
