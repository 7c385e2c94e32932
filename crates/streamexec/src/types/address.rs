//! Device addresses and memory figures.

/// An address in one device's memory, as the backend that allocated it reported it.
///
/// Safe code can read it ([`raw`](Self::raw), `Display`) but cannot make one: every address a
/// user-facing handle holds came from a backend's allocator, and every range handed back to a
/// backend is checked above the plugin interface (see `interface`). Only the backend that made
/// an address knows what the number means (a host pointer, a CUDA device pointer, an OpenCL
/// buffer id and offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceAddress(u64);

impl DeviceAddress {
    /// An address a backend allocated (or an offset into such an allocation).
    pub(crate) const fn new(raw: u64) -> Self {
        DeviceAddress(raw)
    }

    /// The number the backend uses for this address.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// This address plus `bytes`; callers stay inside the allocation.
    pub(crate) const fn offset(self, bytes: u64) -> DeviceAddress {
        DeviceAddress(self.0 + bytes)
    }
}

impl std::fmt::Display for DeviceAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// What an executor's allocator holds and has held, as StreamExecutor's `AllocatorStats`:
/// every allocation made through the executor (device, unified, its own internal buffers) and
/// every host range registered with it, counted until the backend gets the memory back (a
/// recorded command buffer can hold freed memory a while longer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes held now.
    pub bytes_in_use: u64,
    /// The most bytes held at once since the executor was made.
    pub peak_bytes_in_use: u64,
    /// How many allocations (and registrations) were made.
    pub num_allocs: u64,
    /// The largest one, in bytes.
    pub largest_alloc_size: u64,
}

/// Free and total device memory in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes that can still be allocated (an estimate on some platforms).
    pub free: u64,
    /// Bytes on the device.
    pub total: u64,
}
