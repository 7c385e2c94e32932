//! Device memory handles.
//!
//! - [`DeviceMemory<T>`] owns a device allocation and frees it on drop. The backend defers the
//!   release until operations enqueued before the drop are done, so dropping memory that a
//!   queued kernel still uses is safe.
//! - [`DeviceSlice<'a, T>`] borrows a range of one; stream operations take these, so every
//!   range they hand a backend lies inside a live allocation by construction.
//! - [`UnifiedMemory<T>`] is one allocation that kernels and the host reach at once.
//!
//! What a kernel receives (`DevicePtr<T>`) and host memory for async copies (`HostMemory<T>`)
//! are plain types of the floor (`src/types/`).

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::types::{DeviceAddress, DevicePtr};

fn resolve_range(range: impl RangeBounds<usize>, len: usize, what: &str) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::bounds(
            what,
            format!("range {start}..{end} does not fit in {len} elements"),
        ));
    }
    Ok((start, end))
}

/// A device allocation of `len` elements of `T`, freed on drop.
///
/// Holds its executor alive: dropping every `StreamExecutor` handle while memory lives keeps
/// the device open until the memory drops.
pub struct DeviceMemory<T: Pod> {
    exec: StreamExecutor,
    addr: DeviceAddress,
    len: usize,
    /// The executor's id for this allocation (pointers into it carry it).
    alloc: u64,
    _elem: PhantomData<T>,
}

impl<T: Pod> DeviceMemory<T> {
    pub(crate) fn from_raw(
        exec: StreamExecutor,
        addr: DeviceAddress,
        len: usize,
        alloc: u64,
    ) -> Self {
        DeviceMemory {
            exec,
            addr,
            len,
            alloc,
            _elem: PhantomData,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.len as u64 * std::mem::size_of::<T>() as u64
    }
    /// Device address of element 0.
    pub fn address(&self) -> DeviceAddress {
        self.addr
    }
    /// The executor that owns it.
    pub fn executor(&self) -> &StreamExecutor {
        &self.exec
    }
    /// The whole allocation as a kernel argument.
    pub fn ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_parts(self.addr, self.len, self.exec.id(), self.alloc)
    }
    /// The whole allocation as a slice.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            addr: self.addr,
            len: self.len,
            owner: self.exec.id(),
            alloc: self.alloc,
            _mem: PhantomData,
        }
    }
    /// Elements `range` as a slice; `OutOfBounds` if it does not fit.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        self.as_slice().slice(range)
    }
}

impl<T: Pod> Drop for DeviceMemory<T> {
    fn drop(&mut self) {
        self.exec.release(self.addr, self.alloc);
    }
}

impl<T: Pod> std::fmt::Debug for DeviceMemory<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceMemory<{}>[{}] at {} on {}",
            std::any::type_name::<T>(),
            self.len,
            self.addr,
            self.exec.platform_name()
        )
    }
}

/// A borrowed range of a [`DeviceMemory<T>`].
pub struct DeviceSlice<'a, T> {
    addr: DeviceAddress,
    len: usize,
    owner: u64,
    alloc: u64,
    _mem: PhantomData<&'a T>,
}

impl<T> Clone for DeviceSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceSlice<'_, T> {}

impl<'a, T: Pod> DeviceSlice<'a, T> {
    /// A slice of memory the borrowed owner of `'a` keeps alive (a module's global).
    pub(crate) fn from_raw(addr: DeviceAddress, len: usize, owner: u64, alloc: u64) -> Self {
        DeviceSlice {
            addr,
            len,
            owner,
            alloc,
            _mem: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.len as u64 * std::mem::size_of::<T>() as u64
    }
    /// Device address of the first element.
    pub fn address(&self) -> DeviceAddress {
        self.addr
    }
    /// Id of the executor that owns the memory.
    pub fn owner(&self) -> u64 {
        self.owner
    }
    /// The executor's id for the allocation it lies in.
    pub(crate) fn allocation(&self) -> u64 {
        self.alloc
    }
    /// As a kernel argument.
    pub fn ptr(&self) -> DevicePtr<T> {
        DevicePtr::from_parts(self.addr, self.len, self.owner, self.alloc)
    }
    /// A sub-range; `OutOfBounds` if it does not fit.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>> {
        let (s, e) = resolve_range(range, self.len, "DeviceSlice::slice")?;
        Ok(DeviceSlice {
            addr: self.addr.offset(s as u64 * std::mem::size_of::<T>() as u64),
            len: e - s,
            owner: self.owner,
            alloc: self.alloc,
            _mem: PhantomData,
        })
    }

    /// The same bytes seen as elements of `U`: the byte length must be a whole number of `U`s
    /// and the address aligned for `U` (as `bytemuck::try_cast_slice` asks of host slices).
    pub fn cast<U: Pod>(&self) -> Result<DeviceSlice<'a, U>> {
        let bytes = self.len * std::mem::size_of::<T>();
        let (size, align) = (std::mem::size_of::<U>(), std::mem::align_of::<U>());
        if size == 0 || !bytes.is_multiple_of(size) || !self.addr.raw().is_multiple_of(align as u64)
        {
            return Err(Error::invalid(
                "DeviceSlice::cast",
                format!(
                    "{bytes} bytes at {} are not a whole, aligned number of {} ({size} bytes, \
                     alignment {align})",
                    self.addr,
                    std::any::type_name::<U>()
                ),
            ));
        }
        Ok(DeviceSlice {
            addr: self.addr,
            len: bytes / size,
            owner: self.owner,
            alloc: self.alloc,
            _mem: PhantomData,
        })
    }
}

impl<'a, T: Pod> From<&'a DeviceMemory<T>> for DeviceSlice<'a, T> {
    fn from(m: &'a DeviceMemory<T>) -> Self {
        m.as_slice()
    }
}

impl<'a, T: Pod> From<&'a mut DeviceMemory<T>> for DeviceSlice<'a, T> {
    fn from(m: &'a mut DeviceMemory<T>) -> Self {
        m.as_slice()
    }
}

impl<T> std::fmt::Debug for DeviceSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceSlice<{}>[{}] at {}",
            std::any::type_name::<T>(),
            self.len,
            self.addr
        )
    }
}

/// Unified memory: one allocation that kernels and the host reach at the same time, with no
/// copies (fine-grained SVM on OpenCL, ordinary memory on host). Kernels take [`ptr`](Self::ptr)
/// like any device memory; the host uses [`load`](Self::load) / [`store`](Self::store), which
/// are atomic (relaxed), so host and kernel accesses that race are not undefined behaviour.
/// This is the memory device-initiated RPC mailboxes live in.
pub struct UnifiedMemory<T: Pod> {
    mem: DeviceMemory<T>,
    host: *mut u8,
}

// SAFETY: the host pointer is only dereferenced through atomics; the allocation is owned.
unsafe impl<T: Pod> Send for UnifiedMemory<T> {}
// SAFETY: as above.
unsafe impl<T: Pod> Sync for UnifiedMemory<T> {}

impl<T: Pod> UnifiedMemory<T> {
    pub(crate) fn from_raw(mem: DeviceMemory<T>, host: *mut u8) -> Self {
        UnifiedMemory { mem, host }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.mem.len()
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }
    /// As a kernel argument.
    pub fn ptr(&self) -> DevicePtr<T> {
        self.mem.ptr()
    }
    /// As device memory, for stream copies and fills.
    pub fn as_device(&self) -> &DeviceMemory<T> {
        &self.mem
    }
    /// The host address of element 0, for protocol code that builds its own atomics on it.
    /// Valid while `self` lives; any access through it must be atomic.
    pub fn host_ptr(&self) -> *mut T {
        self.host as *mut T
    }

    fn at(&self, i: usize) -> *mut u8 {
        assert!(
            i < self.len(),
            "UnifiedMemory index {i} out of bounds for {} elements",
            self.len()
        );
        self.host.wrapping_add(i * std::mem::size_of::<T>())
    }

    /// Element `i`, read with a relaxed atomic load. Panics if `i` is out of bounds.
    pub fn load(&self, i: usize) -> T {
        let p = self.at(i);
        // SAFETY: in bounds of the live allocation, aligned for T (64-byte aligned base,
        // whole elements); accessed atomically.
        unsafe { crate::ptx::device_bytes::load_aligned(p) }
    }

    /// Sets element `i` with a relaxed atomic store. Panics if `i` is out of bounds.
    pub fn store(&self, i: usize, v: T) {
        let p = self.at(i);
        // SAFETY: as in `load`.
        unsafe { crate::ptx::device_bytes::store_aligned(p, v) }
    }
}

impl<T: Pod> std::fmt::Debug for UnifiedMemory<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UnifiedMemory<{}>[{}]",
            std::any::type_name::<T>(),
            self.len()
        )
    }
}
