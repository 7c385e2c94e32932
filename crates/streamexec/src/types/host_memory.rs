//! Host memory that asynchronous copies may use, and the protocol that keeps it valid.
//!
//! [`HostMemory<T>`] is host memory a queued copy can read or write. A queued copy holds a
//! [`HostRegion`]: a counted reference to the buffer plus a read/write lock it takes while it
//! touches the bytes. Reading `HostMemory` waits for queued copies into it, writing it waits for
//! every queued copy that touches it. That is how an async copy can never touch freed or
//! borrowed host memory, even if the `HostMemory` is dropped or forgotten.
//!
//! Backends allocate the bytes ([`HostBuffer`]: page-locked where the platform has it); the
//! host platform and pageable `HostMemory` use [`AlignedHostBuffer`].

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;
use parking_lot::{ArcRwLockReadGuard, ArcRwLockWriteGuard, Condvar, Mutex, RawRwLock, RwLock};

use crate::error::{Error, Result};

/// Host memory owned by a backend (page-locked where the platform has it).
///
/// # Safety
/// `as_ptr()` must point to `len()` bytes, zeroed at allocation, aligned to at least 64 bytes,
/// valid and unaliased by the backend until the buffer is dropped.
pub unsafe trait HostBuffer: Send + Sync {
    /// First byte.
    fn as_ptr(&self) -> *mut u8;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True when `len() == 0`.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Zeroed host memory from the global allocator, 64-byte aligned: the host platform's "pinned"
/// memory, and the backing of [`HostMemory::from_slice`].
pub struct AlignedHostBuffer {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    len: usize,
}

// SAFETY: the buffer is plain owned heap memory; `AlignedHostBuffer` hands out only raw pointers.
unsafe impl Send for AlignedHostBuffer {}
// SAFETY: as above; it has no interior state of its own.
unsafe impl Sync for AlignedHostBuffer {}

impl AlignedHostBuffer {
    /// `len` zeroed bytes aligned to `align` (a power of two, at least 64 is used).
    pub fn new(len: usize, align: usize) -> Option<Self> {
        let layout = std::alloc::Layout::from_size_align(len.max(1), align.max(64)).ok()?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        std::ptr::NonNull::new(ptr).map(|ptr| AlignedHostBuffer { ptr, layout, len })
    }
}

impl Drop for AlignedHostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: `ptr` points to `len` zeroed, 64-byte aligned bytes owned until drop.
unsafe impl HostBuffer for AlignedHostBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

#[derive(Default)]
struct Pending {
    readers: usize,
    writers: usize,
}

struct HostShared {
    buf: Box<dyn HostBuffer>,
    pending: Mutex<Pending>,
    idle: Condvar,
    /// Held by queued copies while they touch the bytes (shared for reads, exclusive for
    /// writes), so copies queued on different streams never race each other.
    access: Arc<RwLock<()>>,
}

/// Host memory that asynchronous copies can use. See the module docs for how access waits.
pub struct HostMemory<T: Pod> {
    shared: Arc<HostShared>,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: Pod> HostMemory<T> {
    pub(crate) fn from_buffer(buf: Box<dyn HostBuffer>, len: usize) -> Self {
        debug_assert!(buf.len() >= len * std::mem::size_of::<T>());
        HostMemory {
            shared: Arc::new(HostShared {
                buf,
                pending: Mutex::new(Pending::default()),
                idle: Condvar::new(),
                access: Arc::new(RwLock::new(())),
            }),
            len,
            _elem: PhantomData,
        }
    }

    /// `len` zeroed elements in ordinary (pageable) memory. Prefer
    /// [`StreamExecutor::allocate_host`](crate::StreamExecutor::allocate_host) for page-locked
    /// memory on GPU platforms.
    pub fn zeroed(len: usize) -> Result<Self> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::invalid(
                "HostMemory::zeroed",
                format!("{len} elements overflow usize"),
            )
        })?;
        let buf = AlignedHostBuffer::new(bytes, std::mem::align_of::<T>()).ok_or_else(|| {
            Error::OutOfMemory {
                platform: "host",
                device: 0,
                bytes: bytes as u64,
                detail: "the global allocator refused".into(),
            }
        })?;
        Ok(Self::from_buffer(Box::new(buf), len))
    }

    /// A copy of `data` in ordinary (pageable) memory.
    pub fn from_slice(data: &[T]) -> Result<Self> {
        let mut m = Self::zeroed(data.len())?;
        m.as_mut_slice().copy_from_slice(data);
        Ok(m)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents. Blocks until queued copies into this memory have finished.
    pub fn as_slice(&self) -> &[T] {
        let mut p = self.shared.pending.lock();
        while p.writers > 0 {
            self.shared.idle.wait(&mut p);
        }
        drop(p);
        // SAFETY: the buffer holds `len` initialised `T: Pod` (zeroed at allocation), aligned
        // for T. No queued copy writes it (writers == 0), and none can be queued while this
        // shared borrow of `self` lives, because queuing a write needs `&mut self`.
        unsafe { std::slice::from_raw_parts(self.shared.buf.as_ptr() as *const T, self.len) }
    }

    /// The contents, mutable. Blocks until every queued copy that touches it has finished.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        let mut p = self.shared.pending.lock();
        while p.writers > 0 || p.readers > 0 {
            self.shared.idle.wait(&mut p);
        }
        drop(p);
        // SAFETY: as in `as_slice`, and no queued copy reads it either; none can be queued while
        // this exclusive borrow lives.
        unsafe { std::slice::from_raw_parts_mut(self.shared.buf.as_ptr() as *mut T, self.len) }
    }

    /// True when no queued copy holds a region of it: nothing is lent, nothing pending (the
    /// MPI staging pool reuses such memory).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn is_idle(&self) -> bool {
        Arc::strong_count(&self.shared) == 1
    }

    /// As [`region_for_read`](Self::region_for_read), lending only the first `bytes` bytes
    /// (at most the memory's size), for a staging buffer reused at several sizes.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn prefix_for_read(&self, bytes: usize) -> HostRegion {
        let mut r = self.region_for_read();
        r.bytes = r.bytes.min(bytes);
        r
    }

    /// As [`region_for_write`](Self::region_for_write), lending only the first `bytes` bytes
    /// (at most the memory's size).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) fn prefix_for_write(&mut self, bytes: usize) -> HostRegion {
        let mut r = self.region_for_write();
        r.bytes = r.bytes.min(bytes);
        r
    }

    /// A region a queued copy will read from (host→device).
    pub(crate) fn region_for_read(&self) -> HostRegion {
        self.shared.pending.lock().readers += 1;
        HostRegion {
            shared: self.shared.clone(),
            bytes: self.len * std::mem::size_of::<T>(),
            write: false,
        }
    }

    /// A region a queued copy will write into (device→host).
    pub(crate) fn region_for_write(&mut self) -> HostRegion {
        self.shared.pending.lock().writers += 1;
        HostRegion {
            shared: self.shared.clone(),
            bytes: self.len * std::mem::size_of::<T>(),
            write: true,
        }
    }
}

impl<T: Pod> std::fmt::Debug for HostMemory<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HostMemory<{}>[{}]",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

/// Host bytes lent to one queued copy. The memory stays allocated, and the user's access to it
/// waits, until the backend drops this (after the copy has finished or was skipped).
pub struct HostRegion {
    shared: Arc<HostShared>,
    bytes: usize,
    write: bool,
}

impl HostRegion {
    /// First byte. Valid for [`len`](Self::len) bytes while `self` lives; writable only if the
    /// region was lent for a device→host copy.
    pub fn as_ptr(&self) -> *mut u8 {
        self.shared.buf.as_ptr()
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }
    /// True when the region is empty.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    /// Locks the bytes for reading (host→device copy) until the guard drops. Copies queued on
    /// other streams that write this memory wait for it.
    pub fn lock_read(&self) -> HostReadGuard {
        HostReadGuard {
            _guard: self.shared.access.read_arc(),
            ptr: self.shared.buf.as_ptr(),
            len: self.bytes,
        }
    }
    /// Locks the bytes for writing (device→host copy) until the guard drops; `None` if the
    /// region was lent read-only.
    pub fn lock_write(&mut self) -> Option<HostWriteGuard> {
        self.write.then(|| HostWriteGuard {
            _guard: self.shared.access.write_arc(),
            ptr: self.shared.buf.as_ptr(),
            len: self.bytes,
        })
    }
}

/// Shared access to a [`HostRegion`]'s bytes; see [`HostRegion::lock_read`].
pub struct HostReadGuard {
    _guard: ArcRwLockReadGuard<RawRwLock, ()>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the guard is a shared lock on plain bytes that its Arc keeps alive.
unsafe impl Send for HostReadGuard {}

impl std::ops::Deref for HostReadGuard {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes stay allocated while the region's Arc lives (the
        // region outlives queued work); the read lock excludes queued writers, and user `&mut`
        // access waits for the region to drop.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// Exclusive access to a [`HostRegion`]'s bytes; see [`HostRegion::lock_write`].
pub struct HostWriteGuard {
    _guard: ArcRwLockWriteGuard<RawRwLock, ()>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the guard is an exclusive lock on plain bytes that its Arc keeps alive.
unsafe impl Send for HostWriteGuard {}

impl std::ops::Deref for HostWriteGuard {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: see `deref_mut`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::ops::DerefMut for HostWriteGuard {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: the write lock excludes every other queued copy; user access of any kind
        // waits until the region (which outlives this guard's use) drops.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for HostRegion {
    fn drop(&mut self) {
        let mut p = self.shared.pending.lock();
        if self.write {
            p.writers -= 1;
        } else {
            p.readers -= 1;
        }
        drop(p);
        self.shared.idle.notify_all();
    }
}

#[cfg(test)]
mod tests {
    //! Pure-Rust and Miri-checked: `cargo +nightly miri test --lib memory::tests`.
    use super::*;

    #[test]
    fn regions_lend_bytes_and_access_waits_for_them() {
        let mut h = HostMemory::<u32>::from_slice(&[1, 2, 3, 4]).unwrap();
        let read = h.region_for_read();
        assert_eq!(
            &*read.lock_read(),
            bytemuck::cast_slice::<u32, u8>(&[1, 2, 3, 4])
        );
        assert_eq!(
            h.as_slice(),
            &[1, 2, 3, 4],
            "reads do not wait for queued reads"
        );
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(read);
        });
        h.as_mut_slice()[0] = 9; // waits for the queued read to drop
        t.join().unwrap();
        let mut w = h.region_for_write();
        let t = std::thread::spawn(move || {
            w.lock_write()
                .unwrap()
                .copy_from_slice(bytemuck::cast_slice::<u32, u8>(&[5, 6, 7, 8]));
            drop(w);
        });
        assert_eq!(
            h.as_slice(),
            &[5, 6, 7, 8],
            "reading waits for the queued write"
        );
        t.join().unwrap();
        assert!(
            h.region_for_read().lock_write().is_none(),
            "a read region cannot write"
        );
    }

    #[test]
    fn host_memory_dropped_with_a_region_outstanding_stays_valid() {
        let h = HostMemory::<u64>::from_slice(&[42; 8]).unwrap();
        let r = h.region_for_read();
        drop(h);
        assert_eq!(r.lock_read().len(), 64);
        assert_eq!(r.lock_read()[0], 42);
        let h = HostMemory::<u8>::zeroed(3).unwrap();
        let r = h.region_for_read();
        std::mem::forget(h);
        assert_eq!(&*r.lock_read(), &[0, 0, 0]);
    }
}
