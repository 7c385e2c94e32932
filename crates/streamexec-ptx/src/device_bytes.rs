//! The one place that touches device bytes on the host side: atomic (relaxed) copies, fills and
//! typed loads and stores.
//!
//! Device memory that the host can address (the host platform's allocations, unified memory,
//! the RPC block) may be touched by kernel threads, stream workers and the host at once, as on
//! a GPU. To keep that free of undefined behaviour in Rust's memory model, every access to such
//! bytes goes through this module and is atomic; on x86-64 and AArch64 those are plain loads and
//! stores. The bytes on the other side of a copy are ordinary memory the caller owns.

use std::sync::atomic::{
    AtomicI32, AtomicI64, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering::Relaxed,
};

use bytemuck::Pod;

/// A word type with a native atomic, for read-modify-write operations on device memory
/// (kernel atomics, the PTX engine's `atom`/`red`, RPC mailboxes).
pub trait DeviceWord: Copy {
    /// The standard atomic of the same width.
    type Atomic;
    /// The word at `p`, as its atomic.
    ///
    /// # Safety
    /// `p` must be aligned for `Self` and valid for `size_of::<Self>()` bytes of device memory
    /// for `'a`, and every other access to those bytes must be atomic (this module).
    unsafe fn atomic<'a>(p: *mut u8) -> &'a Self::Atomic;
}

macro_rules! device_word {
    ($($t:ty => $a:ty),*) => {$(
        impl DeviceWord for $t {
            type Atomic = $a;
            #[inline(always)]
            unsafe fn atomic<'a>(p: *mut u8) -> &'a $a {
                // SAFETY: the caller guarantees alignment, validity for 'a and atomic-only use.
                unsafe { <$a>::from_ptr(p as *mut $t) }
            }
        }
    )*};
}
device_word!(u16 => AtomicU16, u32 => AtomicU32, i32 => AtomicI32, u64 => AtomicU64, i64 => AtomicI64);

/// The device word at `p` as an atomic; see [`DeviceWord::atomic`].
///
/// # Safety
/// As [`DeviceWord::atomic`].
#[inline(always)]
pub unsafe fn atomic<'a, W: DeviceWord>(p: *mut u8) -> &'a W::Atomic {
    // SAFETY: forwarded contract.
    unsafe { W::atomic(p) }
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
pub unsafe fn store_bytes(dst: *mut u8, src: &[u8]) {
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
pub unsafe fn load_bytes(dst: &mut [u8], src: *const u8) {
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
pub unsafe fn copy_device(dst: *mut u8, src: *const u8, n: usize) {
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
pub unsafe fn fill_u32(dst: *mut u8, value: u32, count: usize) {
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
pub unsafe fn fill_u8(dst: *mut u8, value: u8, n: usize) {
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
pub unsafe fn load<T: Pod>(p: *const u8) -> T {
    let size = std::mem::size_of::<T>();
    let addr = p as usize;
    // SAFETY: (all arms) valid per the contract; each arm checks the atomic's alignment.
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
pub unsafe fn store<T: Pod>(p: *mut u8, v: T) {
    let bytes = bytemuck::bytes_of(&v);
    let addr = p as usize;
    // SAFETY: (all arms) valid per the contract; each arm checks the atomic's alignment.
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
pub unsafe fn load_aligned<T: Pod>(p: *const u8) -> T {
    let size = std::mem::size_of::<T>();
    if std::mem::align_of::<T>() >= size {
        // SAFETY: (all arms) valid per the contract, aligned for an atomic of `size` bytes.
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
pub unsafe fn store_aligned<T: Pod>(p: *mut u8, v: T) {
    let size = std::mem::size_of::<T>();
    if std::mem::align_of::<T>() >= size {
        // SAFETY: (all arms) valid per the contract, aligned for an atomic of `size` bytes.
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
    //! Pure-Rust and Miri-checked: `cargo +nightly miri test --lib device_bytes`.
    use super::*;

    /// `n` bytes of 8-aligned "device" memory.
    struct Device(Vec<u64>);

    impl Device {
        fn as_ptr(&mut self) -> *mut u8 {
            self.0.as_mut_ptr() as *mut u8
        }
    }

    fn device(n: usize) -> ((), Device) {
        ((), Device(vec![0; n.div_ceil(8)]))
    }

    fn read_all(p: &Device, n: usize) -> Vec<u8> {
        let mut out = vec![0xEE; n];
        // SAFETY: the buffer holds at least n bytes.
        unsafe { load_bytes(&mut out, p.0.as_ptr() as *const u8) };
        out
    }

    #[test]
    fn copies_and_fills_at_every_alignment() {
        let n = 61;
        let (_t, mut p) = device(n);
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
                // SAFETY: as above.
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
        let (_t, mut p) = device(64);
        for start in [0usize, 4, 8, 12] {
            for count in 0..7 {
                // SAFETY: start + 4 * count <= 64, 4-aligned.
                unsafe { fill_u8(p.as_ptr(), 0, 64) };
                // SAFETY: as above.
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
        let (_t, mut p) = device(n);
        let src: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        for (from, to, len) in [
            (0, 100, 30_000),
            (100, 0, 30_000),
            (5, 5000, 17),
            (0, 20_000, 20_000),
        ] {
            // SAFETY: all ranges within n.
            unsafe { store_bytes(p.as_ptr(), &src) };
            // SAFETY: as above.
            unsafe { copy_device(p.as_ptr().add(to), p.as_ptr().add(from), len) };
            let mut want = src.clone();
            want.copy_within(from..from + len, to);
            assert!(read_all(&p, n) == want, "{from} -> {to} ({len})");
        }
    }
}
