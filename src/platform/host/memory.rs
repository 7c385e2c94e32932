//! Host-platform device memory: an allocation table, and the only code that touches its bytes.
//!
//! Kernels of different threads, blocks and streams may touch the same device bytes at once,
//! as on a GPU. To keep that free of undefined behaviour in Rust's memory model, every access
//! to device bytes is atomic (relaxed); on x86-64 and AArch64 those are plain loads and stores.
//! Host bytes on the other side of a copy are ordinary memory that the copy has exclusive or
//! shared access to (see `memory::HostRegion`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed};

use bytemuck::Pod;
use parking_lot::RwLock;

use crate::memory::AlignedHostBuffer;
use crate::platform::interface::{DeviceAddress, HostBuffer};

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
    /// True when `[addr, addr + bytes)` lies inside this pinned range.
    /// Host pointer of device address `addr`, which [`contains`](Self::contains) accepted.
    pub(crate) fn at(&self, addr: u64) -> *mut u8 {
        self.ptr.wrapping_add((addr - self.ptr as u64) as usize)
    }

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
        Some(DeviceAddress(base))
    }

    /// Removes `addr` from the table; in-flight operations that pinned it keep it alive.
    pub(crate) fn free(&self, addr: DeviceAddress) -> bool {
        self.map.write().remove(&addr.0).is_some()
    }

    /// Pins `[addr, addr + bytes)` if it lies inside one live allocation.
    pub(crate) fn resolve(&self, addr: DeviceAddress, bytes: u64) -> Option<Pinned> {
        let map = self.map.read();
        let (_, alloc) = map.range(..=addr.0).next_back()?;
        let offset = addr.0 - alloc.base();
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

    pub(crate) fn bytes_in_use(&self) -> u64 {
        self.map.read().values().map(|a| a.bytes).sum()
    }
}

/// Copies `n` bytes with `rep movsb`: as fast as `memcpy` (ERMS), and, being inline assembly,
/// opaque to the compiler, so a racing kernel access elsewhere is a hardware-level race on
/// coherent memory, not a Rust data race (the same argument as byte-wise atomic memcpy). The
/// ranges must not overlap.
///
/// # Safety
/// `dst` and `src` valid for `n` bytes, not overlapping.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline]
unsafe fn asm_copy(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller guarantees both ranges; the System V ABI guarantees DF = 0 (forward).
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rcx") n => _,
            inout("rdi") dst => _,
            inout("rsi") src => _,
            options(nostack, preserves_flags)
        )
    }
}

/// Copies host bytes into device bytes.
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of device memory (accessed atomically elsewhere).
pub(crate) unsafe fn store_bytes(dst: *mut u8, src: &[u8]) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `dst` is valid for `src.len()` bytes (contract); `src` is a live slice.
    return unsafe { asm_copy(dst, src.as_ptr(), src.len()) };
    #[allow(unreachable_code)]
    let n = src.len();
    let head = dst.align_offset(8).min(n);
    for (i, b) in src[..head].iter().enumerate() {
        // SAFETY: in bounds per the contract; AtomicU8 has alignment 1.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(*b, Relaxed) };
    }
    let words = (n - head) / 8;
    for w in 0..words {
        let at = head + w * 8;
        let v = u64::from_ne_bytes(src[at..at + 8].try_into().unwrap()); // ok: 8-byte slice
        // SAFETY: `dst + head` is 8-aligned and `at + 8 <= n`.
        unsafe { AtomicU64::from_ptr(dst.add(at) as *mut u64).store(v, Relaxed) };
    }
    for (i, b) in src.iter().enumerate().skip(head + words * 8) {
        // SAFETY: in bounds per the contract.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(*b, Relaxed) };
    }
}

/// Copies device bytes into host bytes.
///
/// # Safety
/// `src` must be valid for `dst.len()` bytes of device memory.
pub(crate) unsafe fn load_bytes(dst: &mut [u8], src: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `src` is valid for `dst.len()` bytes (contract); `dst` is a live slice.
    return unsafe { asm_copy(dst.as_mut_ptr(), src, dst.len()) };
    #[allow(unreachable_code)]
    let n = dst.len();
    let head = src.align_offset(8).min(n);
    for (i, b) in dst[..head].iter_mut().enumerate() {
        // SAFETY: in bounds per the contract.
        *b = unsafe { AtomicU8::from_ptr(src.add(i) as *mut u8).load(Relaxed) };
    }
    let words = (n - head) / 8;
    for w in 0..words {
        let at = head + w * 8;
        // SAFETY: `src + head` is 8-aligned and `at + 8 <= n`.
        let v = unsafe { AtomicU64::from_ptr(src.add(at) as *mut u64).load(Relaxed) };
        dst[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in dst.iter_mut().enumerate().skip(head + words * 8) {
        // SAFETY: in bounds per the contract.
        *b = unsafe { AtomicU8::from_ptr(src.add(i) as *mut u8).load(Relaxed) };
    }
}

/// Copies `n` device bytes to other device bytes, with `memmove` semantics for overlap.
///
/// # Safety
/// Both ranges must be valid device memory.
pub(crate) unsafe fn copy_device(dst: *mut u8, src: *const u8, n: usize) {
    const CHUNK: usize = 16 * 1024;
    let mut tmp = [0u8; CHUNK];
    let chunks = n.div_ceil(CHUNK);
    let backward = (dst as usize) > (src as usize) && (dst as usize) < src as usize + n;
    for k in 0..chunks {
        let c = if backward { chunks - 1 - k } else { k };
        let start = c * CHUNK;
        let len = CHUNK.min(n - start);
        // SAFETY: `start + len <= n` for both ranges.
        unsafe {
            load_bytes(&mut tmp[..len], src.add(start));
            store_bytes(dst.add(start), &tmp[..len]);
        }
    }
}

/// Fills `count` 32-bit words with `value`.
///
/// # Safety
/// `dst` must be 4-aligned and valid for `4 * count` bytes of device memory.
pub(crate) unsafe fn fill_u32(dst: *mut u8, value: u32, count: usize) {
    let mut i = 0;
    while i < count && !(dst as usize + 4 * i).is_multiple_of(8) {
        // SAFETY: 4-aligned, in bounds.
        unsafe { AtomicU32::from_ptr(dst.add(4 * i) as *mut u32).store(value, Relaxed) };
        i += 1;
    }
    let wide = (value as u64) | ((value as u64) << 32);
    while i + 2 <= count {
        // SAFETY: 8-aligned here, `4 * (i + 2) <= 4 * count`.
        unsafe { AtomicU64::from_ptr(dst.add(4 * i) as *mut u64).store(wide, Relaxed) };
        i += 2;
    }
    if i < count {
        // SAFETY: 4-aligned, in bounds.
        unsafe { AtomicU32::from_ptr(dst.add(4 * i) as *mut u32).store(value, Relaxed) };
    }
}

/// Fills `n` bytes with `value`.
///
/// # Safety
/// `dst` must be valid for `n` bytes of device memory.
pub(crate) unsafe fn fill_u8(dst: *mut u8, value: u8, n: usize) {
    let head = dst.align_offset(4).min(n);
    for i in 0..head {
        // SAFETY: in bounds.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(value, Relaxed) };
    }
    let words = (n - head) / 4;
    // SAFETY: `dst + head` is 4-aligned with `4 * words` bytes left.
    unsafe { fill_u32(dst.add(head), u32::from_ne_bytes([value; 4]), words) };
    for i in head + 4 * words..n {
        // SAFETY: in bounds.
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(value, Relaxed) };
    }
}

/// Loads one `T` from device memory.
///
/// # Safety
/// `p` must be valid for `size_of::<T>()` bytes of device memory.
#[inline]
pub(crate) unsafe fn load<T: Pod>(p: *const u8) -> T {
    let size = std::mem::size_of::<T>();
    let addr = p as usize;
    // SAFETY (all arms): valid per the contract; each arm checks the atomic's alignment.
    unsafe {
        match size {
            1 => {
                bytemuck::cast_slice::<u8, T>(&[AtomicU8::from_ptr(p as *mut u8).load(Relaxed)])[0]
            }
            2 if addr.is_multiple_of(2) => {
                let v = AtomicU16::from_ptr(p as *mut u16).load(Relaxed);
                bytemuck::pod_read_unaligned(&v.to_ne_bytes())
            }
            4 if addr.is_multiple_of(4) => {
                let v = AtomicU32::from_ptr(p as *mut u32).load(Relaxed);
                bytemuck::pod_read_unaligned(&v.to_ne_bytes())
            }
            8 if addr.is_multiple_of(8) => {
                let v = AtomicU64::from_ptr(p as *mut u64).load(Relaxed);
                bytemuck::pod_read_unaligned(&v.to_ne_bytes())
            }
            _ => {
                let mut v = T::zeroed();
                load_bytes(bytemuck::bytes_of_mut(&mut v), p);
                v
            }
        }
    }
}

/// Stores one `T` into device memory.
///
/// # Safety
/// `p` must be valid for `size_of::<T>()` bytes of device memory.
#[inline]
pub(crate) unsafe fn store<T: Pod>(p: *mut u8, v: T) {
    let bytes = bytemuck::bytes_of(&v);
    let addr = p as usize;
    // SAFETY (all arms): valid per the contract; each arm checks the atomic's alignment.
    unsafe {
        match bytes.len() {
            1 => AtomicU8::from_ptr(p).store(bytes[0], Relaxed),
            2 if addr.is_multiple_of(2) => AtomicU16::from_ptr(p as *mut u16)
                .store(u16::from_ne_bytes([bytes[0], bytes[1]]), Relaxed),
            4 if addr.is_multiple_of(4) => AtomicU32::from_ptr(p as *mut u32)
                .store(u32::from_ne_bytes(bytes.try_into().unwrap()), Relaxed), // ok: 4 bytes
            8 if addr.is_multiple_of(8) => AtomicU64::from_ptr(p as *mut u64)
                .store(u64::from_ne_bytes(bytes.try_into().unwrap()), Relaxed), // ok: 8 bytes
            _ => store_bytes(p, bytes),
        }
    }
}

/// Loads one `T` from a `T`-aligned address: no run-time alignment test when `T`'s alignment
/// covers its size (every primitive), so element loops stay tight.
///
/// # Safety
/// `p` must be aligned for `T` and valid for `size_of::<T>()` bytes of device memory.
#[inline(always)]
pub(crate) unsafe fn load_aligned<T: Pod>(p: *const u8) -> T {
    let size = std::mem::size_of::<T>();
    if std::mem::align_of::<T>() >= size {
        // SAFETY (all arms): valid per the contract, aligned for an atomic of `size` bytes.
        unsafe {
            match size {
                1 => return bytemuck::cast(AtomicU8::from_ptr(p as *mut u8).load(Relaxed)),
                2 => return bytemuck::cast(AtomicU16::from_ptr(p as *mut u16).load(Relaxed)),
                4 => return bytemuck::cast(AtomicU32::from_ptr(p as *mut u32).load(Relaxed)),
                8 => return bytemuck::cast(AtomicU64::from_ptr(p as *mut u64).load(Relaxed)),
                _ => {}
            }
        }
    }
    // SAFETY: as above.
    unsafe { load(p) }
}

/// Stores one `T` at a `T`-aligned address; see [`load_aligned`].
///
/// # Safety
/// As [`load_aligned`].
#[inline(always)]
pub(crate) unsafe fn store_aligned<T: Pod>(p: *mut u8, v: T) {
    let size = std::mem::size_of::<T>();
    if std::mem::align_of::<T>() >= size {
        // SAFETY (all arms): valid per the contract, aligned for an atomic of `size` bytes.
        unsafe {
            match size {
                1 => return AtomicU8::from_ptr(p).store(bytemuck::cast(v), Relaxed),
                2 => return AtomicU16::from_ptr(p as *mut u16).store(bytemuck::cast(v), Relaxed),
                4 => return AtomicU32::from_ptr(p as *mut u32).store(bytemuck::cast(v), Relaxed),
                8 => return AtomicU64::from_ptr(p as *mut u64).store(bytemuck::cast(v), Relaxed),
                _ => {}
            }
        }
    }
    // SAFETY: as above.
    unsafe { store(p, v) }
}

#[cfg(test)]
mod tests {
    //! Pure-Rust and Miri-checked: `cargo +nightly miri test --lib platform::host::memory`.
    use super::*;

    fn device(n: usize) -> (AllocTable, Pinned) {
        let t = AllocTable::default();
        let a = t.allocate(n as u64).unwrap();
        let p = t.resolve(a, n as u64).unwrap();
        (t, p)
    }

    fn read_all(p: &Pinned, n: usize) -> Vec<u8> {
        let mut out = vec![0xEE; n];
        // SAFETY: pinned for n bytes.
        unsafe { load_bytes(&mut out, p.as_ptr()) };
        out
    }

    #[test]
    fn copies_and_fills_at_every_alignment() {
        let n = 61;
        let (_t, p) = device(n);
        for off in 0..9 {
            for len in [0, 1, 7, 8, 9, 17, 40] {
                if off + len > n {
                    continue;
                }
                let src: Vec<u8> = (0..len as u8)
                    .map(|i| i.wrapping_mul(37).wrapping_add(off as u8))
                    .collect();
                // SAFETY: off + len <= n pinned bytes.
                unsafe { fill_u8(p.as_ptr(), 0, n) };
                unsafe { store_bytes(p.as_ptr().add(off), &src) };
                let all = read_all(&p, n);
                assert_eq!(&all[off..off + len], &src[..], "off {off} len {len}");
                assert!(all[..off].iter().chain(&all[off + len..]).all(|&b| b == 0));
                // SAFETY: as above.
                unsafe { fill_u8(p.as_ptr().add(off), 0xA5, len) };
                let all = read_all(&p, n);
                assert!(all[off..off + len].iter().all(|&b| b == 0xA5));
                assert!(all[..off].iter().chain(&all[off + len..]).all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn fill_u32_and_typed_access() {
        let (_t, p) = device(64);
        for start in [0usize, 4, 8, 12] {
            for count in 0..7 {
                // SAFETY: start + 4 * count <= 64, 4-aligned.
                unsafe { fill_u8(p.as_ptr(), 0, 64) };
                unsafe { fill_u32(p.as_ptr().add(start), 0x0102_0304, count) };
                let all = read_all(&p, 64);
                for (i, b) in all.iter().enumerate() {
                    let inside = i >= start && i < start + 4 * count;
                    let want = if inside {
                        0x0102_0304u32.to_ne_bytes()[(i - start) % 4]
                    } else {
                        0
                    };
                    assert_eq!(*b, want, "start {start} count {count} byte {i}");
                }
            }
        }
        // SAFETY: in bounds; each typed access picks a width its address allows.
        unsafe {
            store::<f64>(p.as_ptr().add(8), 2.5);
            assert_eq!(load::<f64>(p.as_ptr().add(8)), 2.5);
            store::<u16>(p.as_ptr().add(3), 0xBEEF);
            assert_eq!(load::<u16>(p.as_ptr().add(3)), 0xBEEF);
            store::<[u8; 3]>(p.as_ptr().add(20), [1, 2, 3]);
            assert_eq!(load::<[u8; 3]>(p.as_ptr().add(20)), [1, 2, 3]);
            store::<u64>(p.as_ptr().add(36), u64::MAX - 1);
            assert_eq!(load::<u64>(p.as_ptr().add(36)), u64::MAX - 1);
        }
    }

    #[test]
    fn device_to_device_copy_handles_overlap_both_ways() {
        let n = 40_000; // more than one internal chunk
        let (_t, p) = device(n);
        let src: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        for (from, to, len) in [
            (0, 100, 30_000),
            (100, 0, 30_000),
            (5, 5000, 17),
            (0, 20_000, 20_000),
        ] {
            // SAFETY: all ranges within n.
            unsafe { store_bytes(p.as_ptr(), &src) };
            unsafe { copy_device(p.as_ptr().add(to), p.as_ptr().add(from), len) };
            let mut want = src.clone();
            want.copy_within(from..from + len, to);
            assert!(read_all(&p, n) == want, "{from} -> {to} ({len})");
        }
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
                || t.resolve(a.offset(100), 1).unwrap().as_ptr() as u64 == b.0
        );
        assert!(t.resolve(b, 0).is_some());
        assert!(t.resolve(DeviceAddress(8), 1).is_none());
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
