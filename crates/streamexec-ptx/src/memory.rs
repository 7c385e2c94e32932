//! Device memory on the host: the allocation table kernels run against, and pinned ranges that
//! keep an allocation alive while an operation uses it. A device address is the host address
//! of the byte (so generic pointers work as on CUDA with unified addressing). The bytes are only
//! touched through [`crate::device_bytes`] (atomic access: kernels, stream workers and the host
//! may race on them, as on a GPU).

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;

/// Alignment of every allocation, as `cudaMalloc` guarantees.
pub const ALLOC_ALIGN: usize = 256;

/// `len` zeroed bytes aligned to `align`, owned until drop; only raw pointers to them are handed
/// out.
pub struct AlignedBuffer {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    len: usize,
}

// SAFETY: the buffer is plain owned heap memory; it hands out only raw pointers.
unsafe impl Send for AlignedBuffer {}
// SAFETY: as above; it has no interior state of its own.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// `len` zeroed bytes aligned to `align` (a power of two; at least 64 is used); `None` when
    /// the system allocator refuses or the layout is impossible.
    pub fn new(len: usize, align: usize) -> Option<Self> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(64)).ok()?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        std::ptr::NonNull::new(ptr).map(|ptr| AlignedBuffer { ptr, layout, len })
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The size asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// The bytes behind an allocation.
enum Storage {
    /// Allocated by the table, freed when the allocation drops.
    Owned(AlignedBuffer),
    /// Host memory the caller registered ([`AllocTable::register`]); never freed here.
    Registered(std::ptr::NonNull<u8>),
}

/// One device allocation. Freed when the table and every in-flight operation have let go.
struct HostAllocation {
    storage: Storage,
    bytes: u64,
}

// SAFETY: a registered pointer is plain host memory the registrant keeps valid (the contract
// of `AllocTable::register`); all access through it is atomic, as for owned buffers.
unsafe impl Send for HostAllocation {}
// SAFETY: as above.
unsafe impl Sync for HostAllocation {}

impl HostAllocation {
    fn as_ptr(&self) -> *mut u8 {
        match &self.storage {
            Storage::Owned(buf) => buf.as_ptr(),
            Storage::Registered(p) => p.as_ptr(),
        }
    }

    fn base(&self) -> u64 {
        self.as_ptr() as u64
    }
}

/// A resolved device range: the allocation stays alive while this lives.
#[derive(Clone)]
pub struct Pinned {
    /// Keeps the allocation alive while the range is in use.
    _alloc: Arc<HostAllocation>,
    ptr: *mut u8,
    bytes: u64,
}

// SAFETY: `ptr` points into `alloc`, which the Arc keeps alive; all access through it is atomic.
unsafe impl Send for Pinned {}
// SAFETY: as above.
unsafe impl Sync for Pinned {}

impl Pinned {
    /// First pinned byte. (A method, so closures capture the whole `Pinned` and its Arc.)
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The device address of the first pinned byte.
    pub fn address(&self) -> u64 {
        self.ptr as u64
    }

    /// The pinned length in bytes.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// True for an empty range.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Host pointer of device address `addr`, which [`contains`](Self::contains) accepted.
    #[inline]
    pub fn at(&self, addr: u64) -> *mut u8 {
        self.ptr.wrapping_add((addr - self.ptr as u64) as usize)
    }

    /// True when `[addr, addr + bytes)` lies inside this pinned range.
    #[inline]
    pub fn contains(&self, addr: u64, bytes: u64) -> bool {
        let start = self.ptr as u64;
        addr >= start
            && addr
                .checked_add(bytes)
                .is_some_and(|e| e <= start + self.bytes)
    }
}

/// Live allocations of one device, by base address: the memory kernels reach. Every access a
/// kernel makes is checked against it (or against the launch's pinned arguments).
#[derive(Default)]
pub struct AllocTable {
    map: RwLock<BTreeMap<u64, Arc<HostAllocation>>>,
}

impl AllocTable {
    /// `bytes` zeroed bytes aligned to [`ALLOC_ALIGN`]; their device address, or `None` when the
    /// system allocator refuses.
    pub fn allocate(&self, bytes: u64) -> Option<u64> {
        let len = usize::try_from(bytes).ok()?;
        let buf = AlignedBuffer::new(len, ALLOC_ALIGN)?;
        let alloc = Arc::new(HostAllocation {
            storage: Storage::Owned(buf),
            bytes,
        });
        let base = alloc.base();
        self.map.write().insert(base, alloc);
        Some(base)
    }

    /// Adds the caller's host memory `[ptr, ptr + bytes)` to the table, so kernels and copies
    /// reach it at its own address (CUDA's `cuMemHostRegister` with `DEVICEMAP`); its device
    /// address is `ptr`. `None` when `bytes` is 0, `ptr` is null, or the range overlaps a live
    /// allocation. [`free`](Self::free) removes it; the memory itself is never freed here.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `bytes` bytes, through atomic accesses from any
    /// thread, until it has been freed from the table and every operation that pinned it (an
    /// enqueued copy, a running kernel) has finished.
    pub unsafe fn register(&self, ptr: *mut u8, bytes: u64) -> Option<u64> {
        let p = std::ptr::NonNull::new(ptr)?;
        let start = ptr as u64;
        let end = start.checked_add(bytes).filter(|_| bytes > 0)?;
        let mut map = self.map.write();
        let before = map
            .range(..end)
            .next_back()
            .is_some_and(|(&b, a)| b + a.bytes > start);
        if before {
            return None;
        }
        let alloc = Arc::new(HostAllocation {
            storage: Storage::Registered(p),
            bytes,
        });
        map.insert(start, alloc);
        Some(start)
    }

    /// Removes the allocation at `addr` from the table (false if there is none); in-flight
    /// operations that pinned it keep it alive.
    pub fn free(&self, addr: u64) -> bool {
        self.map.write().remove(&addr).is_some()
    }

    /// Pins `[addr, addr + bytes)` if it lies inside one live allocation.
    pub fn resolve(&self, addr: u64, bytes: u64) -> Option<Pinned> {
        let map = self.map.read();
        let (_, alloc) = map.range(..=addr).next_back()?;
        let offset = addr - alloc.base();
        if offset.checked_add(bytes)? > alloc.bytes {
            return None;
        }
        // Derived from the allocation's own pointer, so it keeps its provenance.
        let ptr = alloc.as_ptr().wrapping_add(offset as usize);
        Some(Pinned {
            _alloc: alloc.clone(),
            ptr,
            bytes,
        })
    }

    /// The whole allocation holding `[addr, addr + bytes)`, pinned: what a kernel that
    /// reached the allocation through a pointer it computed keeps using.
    pub fn resolve_whole(&self, addr: u64, bytes: u64) -> Option<Pinned> {
        let inner = self.resolve(addr, bytes)?;
        let base = inner._alloc.as_ptr();
        let len = inner._alloc.bytes;
        Some(Pinned {
            _alloc: inner._alloc,
            ptr: base,
            bytes: len,
        })
    }

    /// Copies `bytes` to device address `addr`; `None` (and nothing written) unless the range
    /// lies inside one live allocation.
    pub fn write(&self, addr: u64, bytes: &[u8]) -> Option<()> {
        let pinned = self.resolve(addr, bytes.len() as u64)?;
        // SAFETY: pinned for `bytes.len()` bytes of live device memory.
        unsafe { crate::device_bytes::store_bytes(pinned.as_ptr(), bytes) };
        Some(())
    }

    /// Fills `out` from device address `addr`; `None` (and `out` untouched) unless the range
    /// lies inside one live allocation.
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Option<()> {
        let pinned = self.resolve(addr, out.len() as u64)?;
        // SAFETY: pinned for `out.len()` bytes of live device memory.
        unsafe { crate::device_bytes::load_bytes(out, pinned.as_ptr()) };
        Some(())
    }

    /// Bytes of every live allocation.
    pub fn bytes_in_use(&self) -> u64 {
        self.map.read().values().map(|a| a.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    //! Pure-Rust and Miri-checked: `cargo +nightly miri test -p streamexec-ptx --lib memory`.
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
        assert!(t.resolve(a + 99, 1).is_some());
        assert!(t.resolve(a + 99, 2).is_none());
        assert!(
            t.resolve(a + 100, 1).is_none() || t.resolve(a + 100, 1).unwrap().as_ptr() as u64 == b
        );
        assert!(t.resolve(b, 0).is_some());
        assert!(t.resolve(8, 1).is_none());
        let pinned = t.resolve(a, 100).unwrap();
        assert!(t.free(a));
        assert!(!t.free(a));
        assert!(t.resolve(a, 1).is_none(), "freed memory no longer resolves");
        // The pin keeps the bytes alive after the free.
        // SAFETY: pinned for 100 bytes.
        unsafe { fill_u8(pinned.as_ptr(), 7, 100) };
        assert_eq!(read_all(&pinned, 100), vec![7; 100]);
    }

    #[test]
    fn registered_host_memory_resolves_at_its_own_address() {
        let t = AllocTable::default();
        let mut host = vec![0u8; 64];
        let p = host.as_mut_ptr();
        // SAFETY: `host` outlives every use below and is only read after the table let go.
        let a = unsafe { t.register(p, 48) }.unwrap();
        assert_eq!(a, p as u64);
        // SAFETY: as above.
        unsafe {
            assert!(t.register(p.wrapping_add(40), 8).is_none(), "overlaps");
            assert!(t.register(p.wrapping_add(8), 8).is_none(), "inside");
            assert!(t.register(p, 0).is_none(), "empty");
            assert!(t.register(std::ptr::null_mut(), 8).is_none(), "null");
        }
        assert!(t.write(a + 8, &[9; 40]).is_some());
        assert!(
            t.write(a + 40, &[9; 9]).is_none(),
            "past the registered range"
        );
        assert!(t.free(a));
        assert!(t.resolve(a, 1).is_none());
        assert_eq!(&host[..8], &[0; 8]);
        assert_eq!(&host[8..48], &[9; 40]);
        assert_eq!(&host[48..], &[0; 16], "not written past the range");
    }
}
