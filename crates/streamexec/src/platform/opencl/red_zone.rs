//! Red zones around `cl_mem` buffers on CPU devices, so that a kernel writing past the end (or
//! before the start) of a buffer is reported as a kernel fault instead of corrupting the
//! process.
//!
//! # Why
//!
//! A CPU OpenCL driver (PoCL) keeps buffers in ordinary heap memory, so a wild write by a kernel
//! lands in the allocator's metadata or in another object, and the process dies later, far from
//! the cause (`malloc(): unsorted double linked list corrupted`). The host and CUDA platforms
//! report the same kernel as an out-of-bounds fault naming the kernel; this module makes the
//! OpenCL platform on CPU devices do the same.
//!
//! # How
//!
//! On a CPU or host-unified device whose driver uses a `CL_MEM_USE_HOST_PTR` pointer in place
//! (checked once per executor by [`probe_zero_copy`]: a fill through the driver must show in the
//! host memory), every buffer is a private anonymous `mmap` of
//!
//! ```text
//! [ front red zone: FRONT bytes ][ the buffer: `bytes` ][ back red zone: to the page end + back_extra ]
//! ```
//!
//! and the `cl_mem` is created with `CL_MEM_USE_HOST_PTR` on the page-aligned middle part. Both
//! red zones hold a pseudo-random canary, a function of the byte's offset in the mapping and
//! of the mapping's address (so a kernel copying one buffer's red zone into another's changes
//! the latter). Every launch that takes such a buffer registers a check on its completion
//! (`red_zone_check.rs`: a callback on the launch's event, counted so that the stream's `finish`
//! and host callbacks wait for it; a command buffer's replay checks with a native kernel behind
//! it) that compares the red zones of the launch's buffers with the canary. A difference puts
//! the stream in its error state with `Error::KernelFault` naming the kernel, the argument and
//! how far before the start or past the end the writes went; the canary is then restored, so
//! the buffer stays usable and later launches are checked afresh. Commands queued behind the
//! launch may run before its check (they cannot see the red zones); the stream reports the
//! fault at its next synchronisation or host callback.
//!
//! The mapping is unmapped by the `cl_mem`'s destructor callback, which OpenCL calls once the
//! buffer is released and every command that uses it has completed; the check step keeps the
//! allocation alive until it has run.
//!
//! # Limits
//!
//! - The back red zone is `back_extra(bytes)` = max(4 KiB, `bytes`/8) bytes (capped at 1 MiB)
//!   past the end of the buffer's last page, plus the rest of that page: a write at most that
//!   far past the end is caught, byte-exact; the front red zone catches writes up to 4 KiB
//!   before the start. A write further out is not caught and lands where it would have before
//!   (a neighbouring mapping). There are no `PROT_NONE` guard pages: a fault inside the
//!   driver's worker threads would kill the process.
//! - Only writes that change a red-zone byte are seen: writing the canary's own value is not,
//!   nor are out-of-bounds reads.
//! - Only the buffers passed to the launch are checked. A kernel of another stream that
//!   overruns the same buffer at the same time may be blamed on this launch.
//! - Fine-grained SVM (`allocate_unified`) has no red zones: `clSVMAlloc` memory is the
//!   driver's, and SVM pointers can reach kernels inside other data, not only as arguments.
//! - Discrete GPUs (neither CPU nor host-unified) keep the driver's buffers and no check.
//! - Each launch that takes a buffer costs a completion callback and a scan of its buffers' red
//!   zones (8 KiB or more each): measured on PoCL, a launch of a 1024-float axpy went from
//!   34–39 µs to 40–44 µs (a native kernel per launch instead cost 44–57 µs).

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use opencl3::context::Context;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR, ClMem};

use super::status::error_text;

/// Bytes of the front red zone (also the alignment of the buffer inside its mapping).
pub(crate) const FRONT: usize = 4096;
/// The least and the most a back red zone extends past the page that holds the buffer's end.
const BACK_MIN: usize = 4096;
const BACK_MAX: usize = 1 << 20;
/// Words in the canary's period (the pattern repeats every 4 KiB of the mapping).
const PERIOD_WORDS: usize = 512;

/// splitmix64: the canary word at word `i` of a mapping's period.
const fn canary_word(i: u64) -> u64 {
    let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

static CANARY: [u64; PERIOD_WORDS] = {
    let mut a = [0u64; PERIOD_WORDS];
    let mut i = 0;
    while i < PERIOD_WORDS {
        a[i] = canary_word(i as u64);
        i += 1;
    }
    a
};

/// How far past the page holding the end of a `bytes`-byte buffer its back red zone reaches.
pub(crate) fn back_extra(bytes: usize) -> usize {
    (bytes / 8)
        .clamp(BACK_MIN, BACK_MAX)
        .next_multiple_of(FRONT)
}

/// A buffer's mapping: where the red zones are. Plain addresses; the mapping lives as long as
/// the `cl_mem` created on it (its destructor callback unmaps it), so whoever holds the
/// `ClAlloc` may use them.
#[derive(Debug)]
pub(crate) struct RedZones {
    base: usize,
    len: usize,
    bytes: usize,
    /// XORed into the canary, so two mappings' canaries differ: a kernel that copies one
    /// buffer's red zone into another's (a copy kernel with too many threads) is caught.
    seed: u64,
}

// Offsets inside the mapping.
impl RedZones {
    fn end(&self) -> usize {
        FRONT + self.bytes
    }

    /// The buffer's first byte.
    pub(crate) fn user_ptr(&self) -> *mut c_void {
        (self.base + FRONT) as *mut c_void
    }

    /// Bytes of the back red zone.
    pub(crate) fn back_len(&self) -> usize {
        self.len - self.end()
    }

    /// The canary word at byte offset `off` (a multiple of 8) of the mapping.
    fn canary_word(&self, off: usize) -> u64 {
        CANARY[(off / 8) % PERIOD_WORDS] ^ self.seed
    }

    /// The canary byte at byte offset `off` of the mapping.
    fn canary_byte(&self, off: usize) -> u8 {
        self.canary_word(off & !7).to_ne_bytes()[off % 8]
    }

    /// Writes the canary over `[from, to)` of the mapping.
    fn paint(&self, from: usize, to: usize) {
        let mut off = from;
        while off < to && !off.is_multiple_of(8) {
            self.byte(off)
                .store(self.canary_byte(off), Ordering::Relaxed);
            off += 1;
        }
        while off + 8 <= to {
            self.word(off)
                .store(self.canary_word(off), Ordering::Relaxed);
            off += 8;
        }
        while off < to {
            self.byte(off)
                .store(self.canary_byte(off), Ordering::Relaxed);
            off += 1;
        }
    }

    /// The first and last byte of `[from, to)` that differ from the canary.
    fn damage(&self, from: usize, to: usize) -> Option<(usize, usize)> {
        let mut hit: Option<(usize, usize)> = None;
        let mut note = |off: usize| {
            hit = Some(hit.map_or((off, off), |(a, _)| (a, off)));
        };
        let mut off = from;
        while off < to && !off.is_multiple_of(8) {
            if self.byte(off).load(Ordering::Relaxed) != self.canary_byte(off) {
                note(off);
            }
            off += 1;
        }
        while off + 8 <= to {
            let w = self.word(off).load(Ordering::Relaxed);
            let diff = w ^ self.canary_word(off);
            if diff != 0 {
                // Native byte order: the lowest changed byte of the word is the first.
                let bytes = diff.to_ne_bytes();
                let first = bytes.iter().position(|&b| b != 0).unwrap_or(0);
                let last = bytes.iter().rposition(|&b| b != 0).unwrap_or(7);
                note(off + first);
                note(off + last);
            }
            off += 8;
        }
        while off < to {
            if self.byte(off).load(Ordering::Relaxed) != self.canary_byte(off) {
                note(off);
            }
            off += 1;
        }
        hit
    }

    fn byte(&self, off: usize) -> &AtomicU8 {
        debug_assert!(off < self.len);
        // SAFETY: `off` is inside the live mapping (the caller's offsets come from `self`),
        // which is readable and writable; kernels may write it concurrently, hence atomics.
        unsafe { AtomicU8::from_ptr((self.base + off) as *mut u8) }
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.len && off.is_multiple_of(8));
        // SAFETY: as in `byte`; the mapping is page-aligned and `off` a multiple of 8.
        unsafe { AtomicU64::from_ptr((self.base + off) as *mut u64) }
    }

    /// Compares both red zones with the canary and restores them. `None`: untouched.
    pub(crate) fn check(&self) -> Option<Damage> {
        let before = self.damage(0, FRONT).map(|(first, _)| FRONT - first);
        let after = self
            .damage(self.end(), self.len)
            .map(|(first, last)| (first - self.end(), last + 1 - self.end()));
        if before.is_none() && after.is_none() {
            return None;
        }
        self.paint(0, FRONT);
        self.paint(self.end(), self.len);
        Some(Damage { before, after })
    }
}

/// What a check found: the furthest byte written before the start (counted from the start),
/// and the nearest and furthest (exclusive) bytes written past the end (counted from the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Damage {
    pub(crate) before: Option<usize>,
    pub(crate) after: Option<(usize, usize)>,
}

/// Maps `bytes` (at least 1) between two red zones, painted with the canary.
fn map(bytes: usize) -> std::result::Result<RedZones, String> {
    let bytes = bytes.max(1);
    let end = FRONT
        .checked_add(bytes)
        .and_then(|e| e.checked_next_multiple_of(FRONT))
        .and_then(|e| e.checked_add(back_extra(bytes)))
        .ok_or("the size overflows")?;
    // SAFETY: a fresh private anonymous mapping; nothing else is affected.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            end,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let z = RedZones {
        base: p as usize,
        len: end,
        bytes,
        seed: canary_word(p as u64 >> 12),
    };
    z.paint(0, FRONT);
    z.paint(z.end(), z.len);
    Ok(z)
}

/// Unmaps the mapping at `base` of `len` bytes.
///
/// # Safety
/// Nothing uses the mapping any more.
unsafe fn unmap(base: usize, len: usize) {
    // SAFETY: per the contract; the range is one mapping made by `map`.
    let _ = unsafe { libc::munmap(base as *mut c_void, len) };
    #[cfg(test)]
    UNMAPPED.lock().push(base);
}

/// The base of every mapping unmapped so far (tests check that buffers give theirs back).
#[cfg(test)]
static UNMAPPED: parking_lot::Mutex<Vec<usize>> = parking_lot::Mutex::new(Vec::new());

extern "C" fn unmap_on_destroy(_mem: opencl3::types::cl_mem, user: *mut c_void) {
    // SAFETY: `user` is the box leaked in `create_buffer`; OpenCL calls this once, after the
    // buffer is released and no command uses it.
    let (base, len) = *unsafe { Box::from_raw(user as *mut (usize, usize)) };
    // SAFETY: the buffer (the only user of the mapping besides its `ClAlloc`, which is gone)
    // is being destroyed.
    unsafe { unmap(base, len) };
}

/// A `CL_MEM_USE_HOST_PTR` buffer of `bytes` on a new mapping with red zones.
pub(crate) fn create_buffer(
    context: &Context,
    bytes: usize,
) -> std::result::Result<(Buffer<u8>, RedZones), String> {
    let z = map(bytes)?;
    // SAFETY: the host pointer is the page-aligned middle of our mapping, `z.bytes` long, and
    // stays mapped until the buffer's destructor callback (registered below) unmaps it.
    let buffer = unsafe {
        Buffer::<u8>::create(
            context,
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            z.bytes,
            z.user_ptr(),
        )
    };
    let buffer = match buffer {
        Ok(b) => b,
        Err(e) => {
            // SAFETY: the driver refused the buffer, so nothing uses the mapping.
            unsafe { unmap(z.base, z.len) };
            return Err(format!(
                "clCreateBuffer(CL_MEM_USE_HOST_PTR): {}",
                error_text(e.0)
            ));
        }
    };
    let user = Box::into_raw(Box::new((z.base, z.len)));
    // SAFETY: `user` is a leaked box that the callback takes back exactly once.
    let registered = unsafe {
        opencl3::memory::set_mem_object_destructor_callback(
            buffer.get(),
            unmap_on_destroy,
            user as *mut c_void,
        )
    };
    if registered.is_err() {
        // SAFETY: not registered, so the box is still ours. Without the callback nobody knows
        // when the driver is done with the mapping: it stays mapped (a leak, never a
        // use-after-unmap).
        drop(unsafe { Box::from_raw(user) });
    }
    Ok((buffer, z))
}

/// Whether the driver uses a `CL_MEM_USE_HOST_PTR` pointer of a page-aligned mapping in place
/// (zero copy): a fill of such a buffer must show in the host memory once it completes. Red
/// zones are useless on a driver that copies (its kernels write its own memory).
pub(crate) fn probe_zero_copy(
    context: &Context,
    queue: &opencl3::command_queue::CommandQueue,
) -> bool {
    let Ok((buffer, z)) = create_buffer(context, 64) else {
        return false;
    };
    let pattern = 0x5Au8;
    // SAFETY: a fill of the whole live 64-byte buffer; the pattern is copied at enqueue.
    let ev = unsafe {
        opencl3::command_queue::enqueue_fill_buffer(
            queue.get(),
            buffer.get(),
            &pattern as *const u8 as *const c_void,
            1,
            0,
            64,
            0,
            std::ptr::null(),
        )
    };
    let Ok(ev) = ev else {
        return false;
    };
    let ev = opencl3::event::Event::new(ev);
    if ev.wait().is_err() {
        return false;
    }
    // Read through the mapping: no other user now that the fill has completed.
    let seen = (FRONT..FRONT + 64).all(|off| z.byte(off).load(Ordering::Relaxed) == pattern);
    seen && z.check().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unmapped(z: RedZones) {
        // SAFETY: the test's mapping, used by nothing else.
        unsafe { unmap(z.base, z.len) };
    }

    fn poke(z: &RedZones, off: usize, v: u8) {
        z.byte(off).store(v, Ordering::Relaxed);
    }

    #[test]
    fn untouched_red_zones_check_clean_and_the_buffer_is_writable() {
        for bytes in [0usize, 1, 7, 64, 4095, 4096, 4097, 100_000] {
            let z = map(bytes).unwrap();
            assert!(z.back_len() >= BACK_MIN, "{bytes}");
            assert!(z.back_len() >= back_extra(bytes.max(1)));
            assert!((z.user_ptr() as usize).is_multiple_of(4096), "page-aligned");
            for off in FRONT..z.end() {
                poke(&z, off, 0xFF);
            }
            assert_eq!(z.check(), None, "{bytes}");
            unmapped(z);
        }
    }

    #[test]
    fn writes_past_the_end_and_before_the_start_are_measured_and_restored() {
        let z = map(64).unwrap();
        // One byte past the end.
        poke(&z, z.end(), !z.canary_byte(z.end()));
        assert_eq!(
            z.check(),
            Some(Damage {
                before: None,
                after: Some((0, 1))
            })
        );
        assert_eq!(z.check(), None, "restored");
        // 48 floats past the end of 16 floats, and the last byte of the back zone (each byte
        // unlike its canary: a write of the canary's own value is not seen).
        for off in z.end()..z.end() + 192 {
            poke(&z, off, !z.canary_byte(off));
        }
        let last = z.len - 1;
        poke(&z, last, !z.canary_byte(last));
        assert_eq!(
            z.check(),
            Some(Damage {
                before: None,
                after: Some((0, z.back_len()))
            })
        );
        // Four bytes before the start.
        for off in FRONT - 4..FRONT {
            poke(&z, off, !z.canary_byte(off));
        }
        let d = z.check().unwrap();
        assert_eq!((d.before, d.after), (Some(4), None));
        assert_eq!(z.check(), None);
        unmapped(z);
    }

    #[test]
    fn two_mappings_have_different_canaries() {
        let (a, b) = (map(64).unwrap(), map(64).unwrap());
        let differ = (a.end()..a.len)
            .filter(|&o| a.canary_byte(o) != b.canary_byte(o))
            .count();
        assert!(differ > (a.len - a.end()) / 2, "{differ}");
        unmapped(a);
        unmapped(b);
    }

    /// A context and queue on the first CPU device, if there is one.
    fn cpu_queue() -> Option<(Context, opencl3::command_queue::CommandQueue)> {
        use opencl3::device::{CL_DEVICE_TYPE_CPU, Device};
        let platforms = opencl3::platform::get_platforms().ok()?;
        let id = platforms
            .iter()
            .find_map(|p| p.get_devices(CL_DEVICE_TYPE_CPU).ok()?.first().copied())?;
        let context = Context::from_device(&Device::new(id)).ok()?;
        let queue =
            opencl3::command_queue::CommandQueue::create_default_with_properties(&context, 0, 0)
                .ok()?;
        Some((context, queue))
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "loads the OpenCL driver (dlopen), which Miri cannot call"
    )]
    fn a_mapping_is_unmapped_once_its_buffer_and_the_commands_using_it_are_done() {
        let Some((context, queue)) = cpu_queue() else {
            eprintln!("no OpenCL CPU device: skipping");
            return;
        };
        assert!(
            probe_zero_copy(&context, &queue),
            "PoCL uses the host pointer in place"
        );
        // A base in the log after this point was unmapped after this test mapped it (while
        // ours is mapped, no other mapping can start there).
        let start = UNMAPPED.lock().len();
        let mut bases = Vec::new();
        for bytes in [1usize, 4096, 100_000] {
            let (buffer, z) = create_buffer(&context, bytes).unwrap();
            bases.push(z.base);
            let pattern = 7u8;
            // SAFETY: a fill of the whole live buffer; the pattern is copied at enqueue.
            let ev = unsafe {
                opencl3::command_queue::enqueue_fill_buffer(
                    queue.get(),
                    buffer.get(),
                    &pattern as *const u8 as *const c_void,
                    1,
                    0,
                    bytes,
                    0,
                    std::ptr::null(),
                )
            }
            .unwrap();
            // Released while the fill may still be queued: the mapping must outlive it.
            drop(buffer);
            opencl3::event::Event::new(ev).wait().unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let gone = {
                let log = UNMAPPED.lock();
                bases.iter().all(|b| log[start..].contains(b))
            };
            if gone {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "a mapping was never unmapped"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn the_back_red_zone_grows_with_the_buffer_up_to_its_cap() {
        assert_eq!(back_extra(1), BACK_MIN);
        assert_eq!(back_extra(1 << 20), 128 << 10);
        assert_eq!(back_extra(1 << 30), BACK_MAX);
    }
}
