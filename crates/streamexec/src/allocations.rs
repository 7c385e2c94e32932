//! What an executor knows about its memory, above the backend: the live allocations (so every
//! platform refuses pointers to freed memory the same way), pins that keep recorded command
//! buffers' memory alive, the allocator for the executor's own parts, and the allocator
//! statistics (`StreamExecutor::allocator_stats`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::Result;
use crate::interface::StreamExecutorInterface;
use crate::types::{AllocatorStats, DeviceAddress};

/// The live allocations of one executor, by allocation id, kept above the backend so that
/// every platform refuses pointers to freed memory the same way. Ids are process-unique and
/// never reused, so a pointer that outlived its memory is refused even when a new allocation
/// took the same addresses.
///
/// An allocation may also be *pinned* (by a recorded command buffer, which may replay any
/// time it lives): freeing a pinned allocation makes it dead to every later check at once, and
/// defers the backend's `deallocate` to the last unpin ([`AllocationPin`]).
#[derive(Default)]
pub(crate) struct LiveAllocations {
    map: Mutex<HashMap<u64, Allocation>>,
    /// Bytes of the entries of `map`, the most ever, how many were made, the largest.
    in_use: AtomicU64,
    peak: AtomicU64,
    count: AtomicU64,
    largest: AtomicU64,
}

struct Allocation {
    base: u64,
    bytes: u64,
    /// The host address of unified memory (where kernels on some platforms see it: OpenCL SVM).
    host: Option<u64>,
    /// Command buffers holding it.
    pins: u64,
    /// Its owner has freed it (only while pinned: then the last unpin deallocates).
    freed: bool,
}

impl Allocation {
    fn holds(&self, addr: DeviceAddress, bytes: u64) -> bool {
        !self.freed
            && addr.raw() >= self.base
            && addr
                .raw()
                .checked_add(bytes)
                .is_some_and(|end| end <= self.base.saturating_add(self.bytes))
    }
}

impl LiveAllocations {
    /// Registers an allocation; returns its id.
    pub(crate) fn insert(&self, addr: DeviceAddress, bytes: u64) -> u64 {
        self.insert_with_host(addr, bytes, None)
    }

    /// Registers an allocation, with the host address of unified memory; returns its id.
    pub(crate) fn insert_with_host(
        &self,
        addr: DeviceAddress,
        bytes: u64,
        host: Option<u64>,
    ) -> u64 {
        static NEXT_ALLOCATION: AtomicU64 = AtomicU64::new(1);
        let id = NEXT_ALLOCATION.fetch_add(1, Ordering::Relaxed);
        let a = Allocation {
            base: addr.raw(),
            bytes,
            host,
            pins: 0,
            freed: false,
        };
        self.map.lock().insert(id, a);
        let now = self.in_use.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.largest.fetch_max(bytes, Ordering::Relaxed);
        id
    }

    /// Removes `id` from the map (its memory goes back to the backend now).
    fn remove(&self, map: &mut HashMap<u64, Allocation>, id: u64) {
        if let Some(a) = map.remove(&id) {
            self.in_use.fetch_sub(a.bytes, Ordering::Relaxed);
        }
    }

    /// The allocator statistics of this executor.
    pub(crate) fn stats(&self) -> AllocatorStats {
        AllocatorStats {
            bytes_in_use: self.in_use.load(Ordering::Relaxed),
            peak_bytes_in_use: self.peak.load(Ordering::Relaxed),
            num_allocs: self.count.load(Ordering::Relaxed),
            largest_alloc_size: self.largest.load(Ordering::Relaxed),
        }
    }

    /// Its owner frees allocation `id`: true when the backend may deallocate it now, false
    /// while a pin defers that to [`unpin`](Self::unpin).
    pub(crate) fn free(&self, id: u64) -> bool {
        let mut map = self.map.lock();
        match map.get_mut(&id) {
            Some(a) if a.pins > 0 => {
                a.freed = true;
                false
            }
            _ => {
                self.remove(&mut map, id);
                true
            }
        }
    }

    /// True when allocation `id` is live and `[addr, addr + bytes)` lies inside it.
    pub(crate) fn contains(&self, id: u64, addr: DeviceAddress, bytes: u64) -> bool {
        self.map
            .lock()
            .get(&id)
            .is_some_and(|a| a.holds(addr, bytes))
    }

    /// Pins allocation `id` if it is live and holds `[addr, addr + bytes)`.
    pub(crate) fn pin(&self, id: u64, addr: DeviceAddress, bytes: u64) -> bool {
        let mut map = self.map.lock();
        match map.get_mut(&id) {
            Some(a) if a.holds(addr, bytes) => {
                a.pins += 1;
                true
            }
            _ => false,
        }
    }

    /// Finds and pins the live allocation holding `[addr, addr + bytes)`, at its device
    /// address or (unified memory) its host address: its id, and the range's host pointer
    /// when it is unified memory.
    pub(crate) fn pin_range(&self, addr: u64, bytes: u64) -> Option<(u64, Option<u64>)> {
        let mut map = self.map.lock();
        let inside = |base: u64, len: u64| {
            addr >= base
                && addr
                    .checked_add(bytes)
                    .is_some_and(|end| end <= base.saturating_add(len))
        };
        let (id, a, host) = map.iter_mut().find_map(|(id, a)| {
            if a.freed {
                None
            } else if inside(a.base, a.bytes) {
                let host = a.host.map(|h| h + (addr - a.base));
                Some((*id, a, host))
            } else if a.host.is_some_and(|h| inside(h, a.bytes)) {
                Some((*id, a, Some(addr)))
            } else {
                None
            }
        })?;
        a.pins += 1;
        Some((id, host))
    }

    /// Drops one pin of `id`: its base address when that was the last pin of a freed
    /// allocation, which the caller must now deallocate.
    pub(crate) fn unpin(&self, id: u64) -> Option<DeviceAddress> {
        let mut map = self.map.lock();
        let a = map.get_mut(&id)?;
        a.pins -= 1;
        if a.pins > 0 || !a.freed {
            return None;
        }
        let base = a.base;
        self.remove(&mut map, id);
        Some(DeviceAddress::new(base))
    }
}

/// Keeps one allocation's memory from being deallocated while it lives (a recorded command
/// buffer holds one per allocation its commands touch). Dropping the last pin of memory whose
/// owner has already freed it deallocates it; the backend defers that past every operation
/// enqueued before, as for any free, so replays already queued finish first.
pub(crate) struct AllocationPin {
    pub(crate) iface: Arc<dyn StreamExecutorInterface>,
    pub(crate) live: Arc<LiveAllocations>,
    pub(crate) id: u64,
}

impl Drop for AllocationPin {
    fn drop(&mut self) {
        if let Some(base) = self.live.unpin(self.id) {
            // SAFETY: `base` is the base of allocation `id`, whose owner has freed it (and so
            // never uses it again) and whose last pin this was.
            unsafe { self.iface.deallocate(base) };
        }
    }
}

/// Allocates for parts of the executor itself (its RPC block, memory kernels `malloc` through
/// RPC). It keeps the backend and the live set, not a `StreamExecutor` handle, which would be a
/// reference cycle; what it allocates is registered as live and freed when dropped.
#[derive(Clone)]
pub(crate) struct InternalAllocator {
    pub(crate) iface: Arc<dyn StreamExecutorInterface>,
    pub(crate) live: Arc<LiveAllocations>,
}

impl InternalAllocator {
    fn own(&self, addr: DeviceAddress, bytes: u64) -> OwnedAllocation {
        let id = self.live.insert(addr, bytes);
        OwnedAllocation {
            iface: self.iface.clone(),
            live: self.live.clone(),
            addr,
            id,
        }
    }

    /// `bytes` of device memory.
    pub(crate) fn allocate(&self, bytes: u64) -> Result<OwnedAllocation> {
        let addr = self.iface.allocate(bytes)?;
        Ok(self.own(addr, bytes))
    }

    /// `bytes` of zeroed unified memory, with its host address.
    pub(crate) fn allocate_unified(&self, bytes: u64) -> Result<(OwnedAllocation, *mut u8)> {
        let (addr, host) = self.iface.allocate_unified(bytes)?;
        Ok((self.own(addr, bytes), host))
    }
}

/// An allocation made by an [`InternalAllocator`]: live while it exists, freed on drop.
pub(crate) struct OwnedAllocation {
    iface: Arc<dyn StreamExecutorInterface>,
    live: Arc<LiveAllocations>,
    addr: DeviceAddress,
    id: u64,
}

impl OwnedAllocation {
    /// The allocation's device address.
    pub(crate) fn address(&self) -> DeviceAddress {
        self.addr
    }

    /// The allocation's id (what a `DevicePtr` into it carries).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for OwnedAllocation {
    fn drop(&mut self) {
        if self.live.free(self.id) {
            // SAFETY: `addr` is the base of the allocation this value owns, and nothing uses
            // it after this drop (the owner drops its users first; pins defer the free).
            unsafe { self.iface.deallocate(self.addr) };
        }
    }
}
