//! One launch as its threads see it: the grid and block geometry, the pinned pointer arguments
//! and the memory reached through other pointers ([`LaunchCtx`]), one block's shared memory and
//! barrier ([`BlockState`]), and how a thread ends early ([`fault`], the abort the scheduler
//! sends).
//!
//! `kernel.rs` (what a thread sees) and `block.rs` (the scheduler that runs threads) both build
//! on this; the kernel body itself is not part of it, so neither of them reaches into the other.

use std::cell::Cell;
use std::panic::resume_unwind;
use std::sync::Arc;

use corosensei::Yielder;
use parking_lot::Mutex;

use crate::ptx::memory::{AllocTable, Pinned};
use crate::types::{DeviceAddress, Dim3};

/// What the scheduler tells a suspended thread.
pub(crate) enum Resume {
    Go,
    Abort,
}

/// What a thread tells the scheduler when it suspends.
pub(crate) struct AtBarrier;

/// Unwind payload of a thread the scheduler aborts (another thread failed).
pub(crate) struct AbortUnwind;

/// Unwind payload of a fault the runtime detected (bounds, divergence, bad pointer).
pub(crate) struct KernelFault(pub(crate) String);

/// Ends the current kernel thread with `msg` as the launch's error (no panic hook output).
pub(crate) fn fault(msg: String) -> ! {
    resume_unwind(Box::new(KernelFault(msg)))
}

/// Everything one launch shares across its blocks (the kernel body aside).
pub(crate) struct LaunchCtx {
    pub(crate) grid: Dim3,
    pub(crate) block: Dim3,
    /// Bytes of dynamic shared memory per block (rounded up to 16).
    pub(crate) dynamic_bytes: usize,
    /// Shared memory per block, dynamic and static together.
    pub(crate) shared_limit: usize,
    /// Pointer arguments, pinned when the launch was enqueued.
    pub(crate) pins: Vec<Pinned>,
    pub(crate) table: Arc<AllocTable>,
    /// Memory reached through pointers that were not arguments, pinned on first use.
    pub(crate) extra: Mutex<Vec<Pinned>>,
}

impl LaunchCtx {
    /// Host address of `[addr, addr + bytes)` if it lies inside live memory of the executor.
    /// The pinned arguments are checked inline (the hot path of `ThreadCtx::global`).
    #[inline]
    pub(crate) fn resolve(&self, addr: DeviceAddress, bytes: u64) -> Option<*mut u8> {
        match self.pins.iter().find(|p| p.contains(addr.raw(), bytes)) {
            Some(p) => Some(p.at(addr.raw())),
            None => self.resolve_other(addr, bytes),
        }
    }

    /// `resolve` for memory that was not a pointer argument: pinned on first use.
    #[inline(never)]
    fn resolve_other(&self, addr: DeviceAddress, bytes: u64) -> Option<*mut u8> {
        let mut extra = self.extra.lock();
        if let Some(p) = extra.iter().find(|p| p.contains(addr.raw(), bytes)) {
            return Some(p.at(addr.raw()));
        }
        let pinned = self.table.resolve(addr.raw(), bytes)?;
        let ptr = pinned.as_ptr();
        extra.push(pinned);
        Some(ptr)
    }
}

/// One running block.
pub(crate) struct BlockState<'l> {
    pub(crate) launch: &'l LaunchCtx,
    pub(crate) block_idx: Dim3,
    shared: &'l [Cell<u128>],
    /// Bytes of `shared` handed out so far (its high-water mark): all the next block on this
    /// worker has to zero again.
    shared_used: Cell<usize>,
    /// Set once a barrier has switched the block to one coroutine per thread.
    fiber_mode: Cell<bool>,
}

impl<'l> BlockState<'l> {
    /// Block `block_idx` of `launch`, with `shared` (zeroed) as its shared memory, starting
    /// with all its threads on one coroutine.
    pub(crate) fn new(launch: &'l LaunchCtx, block_idx: Dim3, shared: &'l [Cell<u128>]) -> Self {
        BlockState {
            launch,
            block_idx,
            shared,
            shared_used: Cell::new(0),
            fiber_mode: Cell::new(false),
        }
    }

    /// Bytes at the start of the block's shared memory that a thread may have written.
    pub(crate) fn shared_used(&self) -> usize {
        self.shared_used.get()
    }

    /// `len` elements of `T` at byte `offset` of the block's shared memory.
    pub(crate) fn shared_slice<T: bytemuck::Pod>(&self, offset: usize, len: usize) -> &[Cell<T>] {
        let size = std::mem::size_of::<T>();
        let end = len.checked_mul(size).and_then(|b| b.checked_add(offset));
        if end.is_none_or(|e| e > self.shared.len() * 16)
            || !offset.is_multiple_of(std::mem::align_of::<T>())
        {
            fault(format!(
                "shared memory range {offset}+{len}x{size} bytes is outside the block's {} bytes",
                self.launch.shared_limit
            ));
        }
        if let Some(end) = end {
            self.shared_used.set(self.shared_used.get().max(end));
        }
        let base = self.shared.as_ptr() as *const u8;
        // SAFETY: in bounds and aligned (checked above; the buffer is 16-aligned). `Cell<T>` has
        // `T`'s layout and `T: Pod` accepts any bytes. Every thread of the block runs on this
        // OS thread, and `ThreadCtx` is neither Send nor Sync, so the cells stay on one thread.
        unsafe { std::slice::from_raw_parts(base.add(offset) as *const Cell<T>, len) }
    }

    /// `sync_threads` of thread `tid`; `yielder` is `None` in plain-loop mode, where thread 0
    /// has already exited without a barrier, so any barrier is divergence.
    pub(crate) fn barrier(&self, tid: u32, yielder: Option<&Yielder<Resume, AtBarrier>>) {
        let yielder = match yielder {
            Some(y) if self.fiber_mode.get() || tid == 0 => y,
            _ => {
                let t = self.launch.block.unlinear(tid as u64);
                fault(format!(
                    "barrier divergence: thread {t} reached sync_threads, but the threads before \
                     it had already exited without reaching it; every thread of a block must \
                     reach every barrier"
                ));
            }
        };
        self.fiber_mode.set(true);
        match yielder.suspend(AtBarrier) {
            Resume::Go => {}
            Resume::Abort => resume_unwind(Box::new(AbortUnwind)),
        }
    }
}
