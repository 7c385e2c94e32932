// Forging path closed: reaching the backend behind a `StreamExecutor` and calling a
// range-trusting plugin method directly (here a synchronous host-to-device copy of more bytes
// than the allocation holds). `StreamExecutor::interface()` is crate-private.
use streamexec::interface::StreamExecutorInterface;
use streamexec::*;

fn overflow(exec: &StreamExecutor, mem: &DeviceMemory<u8>) -> Result<()> {
    let src = vec![0u8; mem.len() + 4096];
    exec.interface().memcpy_h2d_sync(&src, mem.address())
}

fn main() {}
