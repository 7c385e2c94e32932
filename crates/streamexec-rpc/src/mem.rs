//! The only code that touches the shared RPC block: relaxed atomic mailboxes and packet words
//! (devices and host threads touch the block at once, so every access is atomic; on x86-64 and
//! AArch64 those are plain loads and stores), fences, and the waiting policy. [`HostMem`] is
//! the real memory; the model-checking tests plug in a loom-backed [`Mem`] so the same
//! protocol code runs under loom.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod sealed {
    pub trait Sealed {}
}

/// A 32-bit lock word of a side's port lock bitmap (not in shared memory).
pub trait LockWord: Send + Sync {
    /// A zeroed word.
    fn zero() -> Self;
    /// Relaxed `fetch_or`.
    fn fetch_or(&self, bits: u32) -> u32;
    /// Relaxed `fetch_and`.
    fn fetch_and(&self, bits: u32) -> u32;
    /// Relaxed load.
    fn load(&self) -> u32;
}

impl LockWord for AtomicU32 {
    fn zero() -> Self {
        AtomicU32::new(0)
    }
    fn fetch_or(&self, bits: u32) -> u32 {
        AtomicU32::fetch_or(self, bits, Ordering::Relaxed)
    }
    fn fetch_and(&self, bits: u32) -> u32 {
        AtomicU32::fetch_and(self, bits, Ordering::Relaxed)
    }
    fn load(&self) -> u32 {
        AtomicU32::load(self, Ordering::Relaxed)
    }
}

/// Memory a shared RPC block lives in. Sealed: [`HostMem`] outside the crate's own tests.
///
/// Offsets are byte offsets from the block's start; callers keep them in bounds and aligned
/// (mailboxes 4, headers and packets 8), which `Geometry` guarantees.
pub trait Mem: sealed::Sealed + Send + Sync {
    /// The lock word type of this memory model.
    type Lock: LockWord;
    /// Relaxed load of the mailbox at `off`.
    fn load_u32(&self, off: usize) -> u32;
    /// Relaxed store to the mailbox at `off`.
    fn store_u32(&self, off: usize, v: u32);
    /// Reads `out.len()` words at `off` (contents ordered by the fences, not by these loads).
    fn read(&self, off: usize, out: &mut [u64]);
    /// Writes `src` at `off`.
    fn write(&self, off: usize, src: &[u64]);
    /// Acquire fence (system scope).
    fn acquire(&self);
    /// Release fence (system scope).
    fn release(&self);
    /// One waiting step of a side that waits the `wait` way; `step` counts the steps of this
    /// wait so far.
    fn pause(&self, step: u32, wait: Wait);
    /// The host address of byte `off`, used as a parking key (0 where nothing parks).
    fn addr(&self, off: usize) -> usize;
    /// Relaxed wrapping add of `delta` to the 64-bit doorbell counter at `off`; returns the old
    /// value. Memory without a doorbell (the model check's) ignores it and returns 0.
    fn counter_add(&self, off: usize, delta: u64) -> u64 {
        let _ = (off, delta);
        0
    }
    /// Relaxed load of the 64-bit word at `off` (the doorbell's counter and pointers); 0 for
    /// memory without a doorbell.
    fn load_u64(&self, off: usize) -> u64 {
        let _ = off;
        0
    }
}

/// How one side of a block waits for the other to hand a port over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wait {
    /// Spin briefly, then yield, then sleep a little longer each time (up to 200 µs): a CPU
    /// thread that shares cores with the server gives it the CPU. The clients' default.
    #[default]
    GiveWay,
    /// `spin_loop` only: never yield, sleep or wake the server, the way a GPU lane (or LLVM's
    /// own client on a CPU thread) waits. What the server must stay fast under.
    Spin,
    /// The server in the middle of a call: spin, then yield now and then, never sleep, so a
    /// message of many packets is not stretched by timer sleeps.
    Serve,
}

impl Wait {
    /// Spin steps (each a short `spin_loop` burst) before [`Wait::Serve`] starts yielding.
    const SERVE_SPINS: u32 = 1 << 12;

    /// One waiting step on real memory.
    pub(crate) fn pause(self, step: u32) {
        match self {
            Wait::GiveWay => backoff(step),
            Wait::Spin => std::hint::spin_loop(),
            Wait::Serve => {
                if step >= Self::SERVE_SPINS && step.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// The shared block in ordinary (or pinned, or SVM) host memory.
///
/// Every access is atomic, so a device that breaks the protocol (writes a packet it does not
/// own) gives wrong data on the host, never undefined behaviour.
pub struct HostMem {
    base: *mut u8,
    len: usize,
}

// SAFETY: all access goes through atomics on memory that outlives the `HostMem` (its owner, the
// server, keeps the allocation alive).
unsafe impl Send for HostMem {}
// SAFETY: as above.
unsafe impl Sync for HostMem {}

impl HostMem {
    /// # Safety
    /// `base` must point to `len` bytes, 8-byte aligned, valid for the life of the `HostMem`,
    /// and accessed by anyone else only atomically or by a device through the protocol.
    pub(crate) unsafe fn new(base: *mut u8, len: usize) -> HostMem {
        debug_assert!((base as usize).is_multiple_of(8));
        HostMem { base, len }
    }

    fn at(&self, off: usize, bytes: usize) -> *mut u8 {
        assert!(off + bytes <= self.len, "rpc block access out of bounds");
        self.base.wrapping_add(off)
    }
}

impl sealed::Sealed for HostMem {}

impl Mem for HostMem {
    type Lock = AtomicU32;

    fn load_u32(&self, off: usize) -> u32 {
        let p = self.at(off, 4) as *mut u32;
        // SAFETY: in bounds (checked), 4-aligned (geometry), live (type invariant), atomic only.
        unsafe { AtomicU32::from_ptr(p) }.load(Ordering::Relaxed)
    }

    fn store_u32(&self, off: usize, v: u32) {
        let p = self.at(off, 4) as *mut u32;
        // SAFETY: as in `load_u32`.
        unsafe { AtomicU32::from_ptr(p) }.store(v, Ordering::Relaxed)
    }

    fn read(&self, off: usize, out: &mut [u64]) {
        let p = self.at(off, out.len() * 8) as *mut u64;
        for (i, w) in out.iter_mut().enumerate() {
            // SAFETY: in bounds (checked for the whole range), 8-aligned, live, atomic only.
            *w = unsafe { AtomicU64::from_ptr(p.add(i)) }.load(Ordering::Relaxed);
        }
    }

    fn write(&self, off: usize, src: &[u64]) {
        let p = self.at(off, src.len() * 8) as *mut u64;
        for (i, w) in src.iter().enumerate() {
            // SAFETY: as in `read`.
            unsafe { AtomicU64::from_ptr(p.add(i)) }.store(*w, Ordering::Relaxed);
        }
    }

    fn acquire(&self) {
        std::sync::atomic::fence(Ordering::Acquire)
    }

    fn release(&self) {
        std::sync::atomic::fence(Ordering::Release)
    }

    fn pause(&self, step: u32, wait: Wait) {
        wait.pause(step)
    }

    fn addr(&self, off: usize) -> usize {
        self.base as usize + off
    }

    fn counter_add(&self, off: usize, delta: u64) -> u64 {
        let p = self.at(off, 8);
        // SAFETY: in bounds (checked), 8-aligned (doorbell layout), live, accessed atomically
        // by every side (devices do relaxed system-scope atomics on it).
        let word = unsafe { AtomicU64::from_ptr(p as *mut u64) };
        word.fetch_add(delta, Ordering::Relaxed)
    }

    fn load_u64(&self, off: usize) -> u64 {
        let p = self.at(off, 8);
        // SAFETY: as in `counter_add`.
        unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Relaxed)
    }
}

/// Parks the calling thread on `key` until `unpark(key)`, `timeout`, or `still_waiting()` is
/// false (checked under the parking lot's lock, so a wake-up between the check and the sleep is
/// not lost).
pub(crate) fn park(key: usize, still_waiting: impl FnOnce() -> bool, timeout: Duration) {
    // SAFETY: `key` is an address inside an RPC block (or one past a mailbox), never the
    // address of a parking_lot lock; the callbacks neither panic nor park.
    unsafe {
        parking_lot_core::park(
            key,
            still_waiting,
            || {},
            |_, _| {},
            parking_lot_core::DEFAULT_PARK_TOKEN,
            Some(Instant::now() + timeout),
        );
    }
}

/// Wakes every thread parked on `key`.
pub(crate) fn unpark_all(key: usize) {
    // SAFETY: as in `park`.
    unsafe { parking_lot_core::unpark_all(key, parking_lot_core::DEFAULT_UNPARK_TOKEN) };
}

/// Wakes one thread parked on `key`.
pub(crate) fn unpark_one(key: usize) {
    // SAFETY: as in `park`.
    unsafe { parking_lot_core::unpark_one(key, |_| parking_lot_core::DEFAULT_UNPARK_TOKEN) };
}

/// Spin briefly, then yield, then sleep with a growing delay (capped at 200 µs): on a CPU both
/// sides of an exchange share cores with each other, so a waiter must get out of the way.
pub(crate) fn backoff(step: u32) {
    /// Steps of 8 `pause`s each (about 20-40 µs in all) before the first yield.
    const SPINS: u32 = 32;
    if step < SPINS {
        for _ in 0..2 {
            std::hint::spin_loop();
        }
    } else if step < SPINS + 16 {
        std::thread::yield_now();
    } else {
        let us = 1u64 << ((step - SPINS - 16) / 4).min(8);
        std::thread::sleep(std::time::Duration::from_micros(us.min(200)));
    }
}

#[cfg(all(test, not(miri)))]
pub(crate) mod model {
    //! A loom-backed block: mailboxes are loom atomics, packet words are loom `UnsafeCell`s, so
    //! loom checks both the interleavings and that the fences order every packet access.
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::AtomicU32 as LAtomicU32;

    /// One block shared by clones (each half of the protocol holds one).
    #[derive(Clone)]
    pub struct LoomMem(std::sync::Arc<Cells>);

    pub struct Cells {
        words32: Vec<LAtomicU32>,
        cells: Vec<UnsafeCell<u64>>,
    }

    // SAFETY: the cells are only accessed through loom, which reports any unsynchronised access.
    unsafe impl Sync for Cells {}
    // SAFETY: as above.
    unsafe impl Send for Cells {}

    impl LoomMem {
        pub fn new(len: usize) -> Self {
            LoomMem(std::sync::Arc::new(Cells {
                words32: (0..len / 4).map(|_| LAtomicU32::new(0)).collect(),
                cells: (0..len / 8).map(|_| UnsafeCell::new(0)).collect(),
            }))
        }
    }

    impl LockWord for LAtomicU32 {
        fn zero() -> Self {
            LAtomicU32::new(0)
        }
        fn fetch_or(&self, bits: u32) -> u32 {
            LAtomicU32::fetch_or(self, bits, Ordering::Relaxed)
        }
        fn fetch_and(&self, bits: u32) -> u32 {
            LAtomicU32::fetch_and(self, bits, Ordering::Relaxed)
        }
        fn load(&self) -> u32 {
            LAtomicU32::load(self, Ordering::Relaxed)
        }
    }

    impl sealed::Sealed for LoomMem {}

    impl Mem for LoomMem {
        type Lock = LAtomicU32;
        fn load_u32(&self, off: usize) -> u32 {
            self.0.words32[off / 4].load(Ordering::Relaxed)
        }
        fn store_u32(&self, off: usize, v: u32) {
            self.0.words32[off / 4].store(v, Ordering::Relaxed)
        }
        fn read(&self, off: usize, out: &mut [u64]) {
            for (i, w) in out.iter_mut().enumerate() {
                // SAFETY: loom checks that no write races with this read.
                *w = self.0.cells[off / 8 + i].with(|p| unsafe { *p });
            }
        }
        fn write(&self, off: usize, src: &[u64]) {
            for (i, w) in src.iter().enumerate() {
                // SAFETY: loom checks that no access races with this write.
                self.0.cells[off / 8 + i].with_mut(|p| unsafe { *p = *w });
            }
        }
        fn acquire(&self) {
            loom::sync::atomic::fence(Ordering::Acquire)
        }
        fn release(&self) {
            loom::sync::atomic::fence(Ordering::Release)
        }
        fn pause(&self, _step: u32, _wait: Wait) {
            loom::thread::yield_now()
        }
        fn addr(&self, _off: usize) -> usize {
            0
        }
    }
}
