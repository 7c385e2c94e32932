//! Host-platform device memory: the allocation table, and pinned ranges that keep an allocation
//! alive while an operation uses it. The bytes themselves are only touched through
//! `crate::device_bytes` (atomic access: kernels, stream workers and the host may race on them,
//! as on a GPU).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::types::{AlignedHostBuffer, DeviceAddress, HostBuffer};

/// Alignment of every allocation, as `cudaMalloc` guarantees.
pub(crate) const ALLOC_ALIGN: usize = 256;

/// One device allocation. Freed when the table and every in-flight operation have let go.
pub(crate) struct HostAllocation {
    buf: AlignedHostBuffer,
    bytes: u64,
}

impl HostAllocation {
    pub(crate) fn base(&self) -> u64 {
        HostBuffer::as_ptr(&self.buf) as u64
    }
}

/// A resolved device range: the allocation stays alive while this lives.
#[derive(Clone)]
pub(crate) struct Pinned {
    /// Keeps the allocation alive while the range is in use.
    pub(crate) _alloc: Arc<HostAllocation>,
    pub(crate) ptr: *mut u8,
    pub(crate) bytes: u64,
}

// SAFETY: `ptr` points into `alloc`, which the Arc keeps alive; all access through it is atomic.
unsafe impl Send for Pinned {}
// SAFETY: as above.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// First pinned byte. (A method, so closures capture the whole `Pinned` and its Arc.)
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    /// Host pointer of device address `addr`, which [`contains`](Self::contains) accepted.
    #[inline]
    pub(crate) fn at(&self, addr: u64) -> *mut u8 {
        self.ptr.wrapping_add((addr - self.ptr as u64) as usize)
    }

    /// True when `[addr, addr + bytes)` lies inside this pinned range.
    #[inline]
    pub(crate) fn contains(&self, addr: u64, bytes: u64) -> bool {
        let start = self.ptr as u64;
        addr >= start
            && addr
                .checked_add(bytes)
                .is_some_and(|e| e <= start + self.bytes)
    }
}

/// Live allocations of one executor, by base address.
#[derive(Default)]
pub(crate) struct AllocTable {
    map: RwLock<BTreeMap<u64, Arc<HostAllocation>>>,
}

impl AllocTable {
    pub(crate) fn allocate(&self, bytes: u64) -> Option<DeviceAddress> {
        let len = usize::try_from(bytes).ok()?;
        let buf = AlignedHostBuffer::new(len, ALLOC_ALIGN)?;
        let alloc = Arc::new(HostAllocation { buf, bytes });
        let base = alloc.base();
        self.map.write().insert(base, alloc);
        Some(DeviceAddress::new(base))
    }

    /// Removes `addr` from the table; in-flight operations that pinned it keep it alive.
    pub(crate) fn free(&self, addr: DeviceAddress) -> bool {
        self.map.write().remove(&addr.raw()).is_some()
    }

    /// Pins `[addr, addr + bytes)` if it lies inside one live allocation.
    pub(crate) fn resolve(&self, addr: DeviceAddress, bytes: u64) -> Option<Pinned> {
        let map = self.map.read();
        let (_, alloc) = map.range(..=addr.raw()).next_back()?;
        let offset = addr.raw() - alloc.base();
        if offset.checked_add(bytes)? > alloc.bytes {
            return None;
        }
        // Derived from the allocation's own pointer, so it keeps its provenance.
        let ptr = HostBuffer::as_ptr(&alloc.buf).wrapping_add(offset as usize);
        Some(Pinned {
            _alloc: alloc.clone(),
            ptr,
            bytes,
        })
    }

    /// The whole allocation holding `[addr, addr + bytes)`, pinned: what a kernel that
    /// reached the allocation through a pointer it computed keeps using.
    pub(crate) fn resolve_whole(&self, addr: DeviceAddress, bytes: u64) -> Option<Pinned> {
        let inner = self.resolve(addr, bytes)?;
        let base = HostBuffer::as_ptr(&inner._alloc.buf);
        let len = inner._alloc.bytes;
        Some(Pinned {
            _alloc: inner._alloc,
            ptr: base,
            bytes: len,
        })
    }

    pub(crate) fn bytes_in_use(&self) -> u64 {
        self.map.read().values().map(|a| a.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    //! Pure-Rust and Miri-checked: `cargo +nightly miri test --lib platform::host::memory`.
    use super::*;
    use crate::device_bytes::{fill_u8, load_bytes};

    fn read_all(p: &Pinned, n: usize) -> Vec<u8> {
        let mut out = vec![0xEE; n];
        // SAFETY: pinned for n bytes.
        unsafe { load_bytes(&mut out, p.as_ptr()) };
        out
    }

    #[test]
    fn the_table_resolves_only_live_in_bounds_ranges() {
        let t = AllocTable::default();
        let a = t.allocate(100).unwrap();
        let b = t.allocate(0).unwrap();
        assert!(t.resolve(a, 100).is_some());
        assert!(t.resolve(a.offset(99), 1).is_some());
        assert!(t.resolve(a.offset(99), 2).is_none());
        assert!(
            t.resolve(a.offset(100), 1).is_none()
                || t.resolve(a.offset(100), 1).unwrap().as_ptr() as u64 == b.raw()
        );
        assert!(t.resolve(b, 0).is_some());
        assert!(t.resolve(DeviceAddress::new(8), 1).is_none());
        let pinned = t.resolve(a, 100).unwrap();
        assert!(t.free(a));
        assert!(!t.free(a));
        assert!(t.resolve(a, 1).is_none(), "freed memory no longer resolves");
        // The pin keeps the bytes alive after the free.
        // SAFETY: pinned for 100 bytes.
        unsafe { fill_u8(pinned.as_ptr(), 7, 100) };
        assert_eq!(read_all(&pinned, 100), vec![7; 100]);
    }
}
