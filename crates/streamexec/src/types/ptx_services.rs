//! What PTX kernels on the host platform call outside their module: `printf` (`vprintf`),
//! `malloc`/`free` from the device heap. The engine (`streamexec_ptx::services`) calls them;
//! this is the host platform's implementation, one per executor
//! ([`StreamExecutor::ptx_services`](crate::StreamExecutor::ptx_services)).

use std::io::Write;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::ptx::{AllocTable, DeviceHeap, DeviceServices, DeviceView, ThreadPlace};

/// Where a kernel's `printf` text goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PrintfOutput {
    /// Straight to the process's stdout, each call's text at once (the default).
    #[default]
    Immediate,
    /// Kept in the executor's buffer, in the order the calls were made, until
    /// [`PtxServices::flush_printf`] writes it to stdout or [`PtxServices::take_printf`]
    /// takes it (CUDA's driver does this at synchronisation points).
    Buffered,
}

/// The host platform's `vprintf`, `malloc` and `free` for PTX kernels: the text formatted by
/// the RPC crate's printf formatter ([`crate::rpc::format_args_buffer`], the one the RPC
/// printf services use), and a [`DeviceHeap`] in the executor's memory (8 MiB by default, as
/// CUDA's `CU_LIMIT_MALLOC_HEAP_SIZE`). Thread-safe.
pub struct PtxServices {
    mode: Mutex<PrintfOutput>,
    buffer: Mutex<Vec<u8>>,
    heap: DeviceHeap,
}

impl std::fmt::Debug for PtxServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtxServices")
            .field("mode", &*self.mode.lock())
            .field("buffered_bytes", &self.buffer.lock().len())
            .field("heap_limit", &self.heap.limit())
            .field("heap_used", &self.heap.used())
            .finish()
    }
}

impl PtxServices {
    /// Services whose heap lives in `table`.
    pub(crate) fn new(table: Arc<AllocTable>) -> Self {
        PtxServices {
            mode: Mutex::new(PrintfOutput::Immediate),
            buffer: Mutex::new(Vec::new()),
            heap: DeviceHeap::new(table, DeviceHeap::DEFAULT_LIMIT),
        }
    }

    /// Chooses where later `printf` text goes (switching to `Immediate` flushes the buffer).
    pub fn set_printf_output(&self, mode: PrintfOutput) {
        *self.mode.lock() = mode;
        if mode == PrintfOutput::Immediate {
            self.flush_printf();
        }
    }

    /// Writes the buffered `printf` text to stdout and flushes stdout.
    pub fn flush_printf(&self) {
        let text = self.take_printf();
        if !text.is_empty() {
            let mut out = std::io::stdout().lock();
            // stdout closed: the text has nowhere to go, as on a GPU.
            let _ = out.write_all(&text).and_then(|_| out.flush());
        }
    }

    /// Takes the buffered `printf` text.
    pub fn take_printf(&self) -> Vec<u8> {
        std::mem::take(&mut *self.buffer.lock())
    }

    /// The device heap's size limit in bytes.
    pub fn heap_limit(&self) -> u64 {
        self.heap.limit()
    }

    /// Sets the device heap's size limit (blocks already allocated stay).
    pub fn set_heap_limit(&self, bytes: u64) {
        self.heap.set_limit(bytes)
    }

    /// Bytes kernels have allocated with `malloc` and not freed.
    pub fn heap_used(&self) -> u64 {
        self.heap.used()
    }
}

impl DeviceServices for PtxServices {
    fn vprintf(&self, format: &[u8], args: u64, view: &dyn DeviceView, _: ThreadPlace) -> i32 {
        let read_args = |bytes: usize| {
            let mut b = vec![0u8; bytes];
            view.read(args, &mut b).map(|_| b)
        };
        let Ok((text, n)) =
            crate::rpc::format_args_buffer(format, read_args, |p| view.read_c_string(p))
        else {
            return -1;
        };
        match *self.mode.lock() {
            PrintfOutput::Buffered => self.buffer.lock().extend_from_slice(&text),
            PrintfOutput::Immediate => {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(&text).and_then(|_| out.flush());
            }
        }
        i32::try_from(n).unwrap_or(i32::MAX)
    }

    fn malloc(&self, bytes: u64) -> u64 {
        self.heap.malloc(bytes)
    }

    fn free(&self, addr: u64) {
        self.heap.free(addr);
    }
}
