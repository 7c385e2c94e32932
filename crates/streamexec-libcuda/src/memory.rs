//! The process-wide address map (unified addressing: device and mapped host memory share one
//! address space, as on 64-bit CUDA) and allocation.
//!
//! Every device range a call names must lie inside one live region of the map, else the call
//! is `CUDA_ERROR_INVALID_VALUE`: device memory (`cuMemAlloc`), mapped pinned host memory
//! (`cuMemHostAlloc`: its host pointer is its device pointer), managed memory
//! (`cuMemAllocManaged`, `managed.rs`: ordinary memory both sides reach), or a module's global
//! once `cuModuleGetGlobal` has named it, or host memory registered with `cuMemHostRegister`
//! and `CU_MEMHOSTREGISTER_DEVICEMAP` (added to the engine's allocation table at its own
//! address, so kernels reach it). Memory registered without `DEVICEMAP` is pinned for copies
//! only.

use std::collections::BTreeMap;
use std::ffi::{c_uint, c_void};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys::{CUdeviceptr, CUresult};
use parking_lot::{Mutex, RwLock};
use streamexec::{DeviceMemory, DeviceSlice, Kernel, UnifiedMemory};

use crate::context::current;
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid, non_null, put};

/// What backs a region.
pub(crate) enum Backing {
    Device(DeviceMemory<u8>),
    Host {
        mem: UnifiedMemory<u8>,
        flags: c_uint,
    },
    /// Managed memory (`cuMemAllocManaged`): ordinary memory the host and kernels both reach
    /// at the one address, with what `cuMemAdvise`, `cuMemPrefetchAsync` and
    /// `cuStreamAttachMemAsync` said of it.
    Managed {
        mem: UnifiedMemory<u8>,
        state: Mutex<ManagedState>,
    },
    /// The caller's host memory registered with `CU_MEMHOSTREGISTER_DEVICEMAP`: the engine's
    /// allocation table holds it at its own address, so kernels reach it; dropping `mem`
    /// unregisters it (the memory stays the caller's).
    Registered {
        mem: DeviceMemory<u8>,
        flags: c_uint,
    },
    /// A module-scope variable (found through one of the module's kernels).
    Global {
        kernel: Kernel,
        name: String,
        module: usize,
    },
}

/// `CU_DEVICE_INVALID`: no device (a location never set).
pub(crate) const DEVICE_INVALID: i32 = -2;

/// What the managed-memory calls recorded for one `cuMemAllocManaged` allocation (the whole
/// allocation: advice given for part of it is kept for all of it), reported by
/// `cuMemRangeGetAttribute(s)`.
#[derive(Clone, Debug)]
pub(crate) struct ManagedState {
    /// `CU_MEM_ATTACH_GLOBAL` (1), `_HOST` (2) or `_SINGLE` (4).
    pub(crate) attach: u32,
    /// `CU_MEM_ADVISE_SET_READ_MOSTLY`.
    pub(crate) read_mostly: bool,
    /// `CU_MEM_ADVISE_SET_PREFERRED_LOCATION`: a device, `CU_DEVICE_CPU` (-1) or
    /// [`DEVICE_INVALID`].
    pub(crate) preferred: i32,
    /// `CU_MEM_ADVISE_SET_ACCESSED_BY`, in the order set.
    pub(crate) accessed_by: Vec<i32>,
    /// The target of the last `cuMemPrefetchAsync`, or [`DEVICE_INVALID`].
    pub(crate) last_prefetch: i32,
}

/// One live range of the address map.
pub(crate) struct Region {
    pub(crate) base: u64,
    /// The size asked for: copies, memsets and pointer queries must stay inside it. The memory
    /// behind it may be larger (a whole granule, `Driver::backing_bytes`), which kernels reach.
    pub(crate) bytes: u64,
    pub(crate) ctx: usize,
    pub(crate) device: usize,
    pub(crate) backing: Backing,
    /// A number unique to the allocation over the process's life (`CU_POINTER_ATTRIBUTE_
    /// BUFFER_ID`), set by [`insert`].
    pub(crate) id: u64,
}

impl Region {
    /// `[addr, addr + len)` of this region as a slice the host platform checks again.
    pub(crate) fn slice(&self, addr: u64, len: u64) -> CuResult<DeviceSlice<'_, u8>> {
        let off = (addr - self.base) as usize;
        let range = off..off + len as usize;
        let whole = match &self.backing {
            Backing::Device(m) | Backing::Registered { mem: m, .. } => m.as_slice(),
            Backing::Host { mem, .. } | Backing::Managed { mem, .. } => mem.as_device().as_slice(),
            Backing::Global { kernel, name, .. } => {
                kernel.module_global(name).ok_or_else(|| {
                    CuErr::new(
                        CUresult::CUDA_ERROR_UNKNOWN,
                        format!("module global `{name}` vanished"),
                    )
                })?
            }
        };
        whole
            .slice(range)
            .map_err(|e| CuErr::new(CUresult::CUDA_ERROR_UNKNOWN, e.to_string()))
    }

    /// True for mapped page-locked host memory (`cuMemHostAlloc`, or `cuMemHostRegister` with
    /// `DEVICEMAP`).
    pub(crate) fn is_host(&self) -> bool {
        matches!(
            self.backing,
            Backing::Host { .. } | Backing::Registered { .. }
        )
    }

    /// True for managed memory (`cuMemAllocManaged`).
    pub(crate) fn is_managed(&self) -> bool {
        matches!(self.backing, Backing::Managed { .. })
    }

    /// True where the host reads and writes the memory directly (pinned host memory and
    /// managed memory): synchronous operations on it must be complete when they return.
    pub(crate) fn host_reachable(&self) -> bool {
        self.is_host() || self.is_managed()
    }
}

static REGIONS: RwLock<BTreeMap<u64, Arc<Region>>> = RwLock::new(BTreeMap::new());
/// Host ranges registered with `cuMemHostRegister`: base → (bytes, flags).
static REGISTERED: RwLock<BTreeMap<u64, (u64, c_uint)>> = RwLock::new(BTreeMap::new());

/// The live region containing `addr`, if any.
pub(crate) fn lookup(addr: u64) -> Option<Arc<Region>> {
    let map = REGIONS.read();
    let (_, r) = map.range(..=addr).next_back()?;
    (addr < r.base + r.bytes.max(1)).then(|| r.clone())
}

/// The region holding all of `[addr, addr + len)` (`len` > 0), else `CUDA_ERROR_INVALID_VALUE`
/// naming `what` and the range.
pub(crate) fn resolve(addr: u64, len: u64, what: &str) -> CuResult<Arc<Region>> {
    let outside = |why: String| {
        invalid(format!(
            "{what}: {len} bytes at {addr:#x} {why}; every device range must lie inside one live \
             allocation"
        ))
    };
    let r = lookup(addr).ok_or_else(|| outside("are not in any live allocation".into()))?;
    let end = addr
        .checked_add(len)
        .ok_or_else(|| outside("wrap the address space".into()))?;
    if end > r.base + r.bytes {
        return Err(outside(format!(
            "run past the end of the allocation at {:#x} ({} bytes)",
            r.base, r.bytes
        )));
    }
    Ok(r)
}

/// Adds `r` to the address map, with a fresh buffer id.
pub(crate) fn insert(mut r: Region) -> Arc<Region> {
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    r.id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let r = Arc::new(r);
    REGIONS.write().insert(r.base, r.clone());
    r
}

/// Registers module global `name` (at `addr`, `bytes` long) so copies can name it.
pub(crate) fn add_global(
    addr: u64,
    bytes: u64,
    ctx: usize,
    device: usize,
    kernel: Kernel,
    name: &str,
    module: usize,
) {
    if REGIONS.read().contains_key(&addr) {
        return;
    }
    insert(Region {
        base: addr,
        bytes,
        ctx,
        device,
        backing: Backing::Global {
            kernel,
            name: name.to_string(),
            module,
        },
        id: 0,
    });
}

/// Drops the map entries of module `module`'s globals.
pub(crate) fn remove_module(module: usize) {
    REGIONS
        .write()
        .retain(|_, r| !matches!(r.backing, Backing::Global { module: m, .. } if m == module));
}

/// Frees every region of context `ctx`.
pub(crate) fn free_context(ctx: usize) {
    REGIONS.write().retain(|_, r| r.ctx != ctx);
}

/// `CUDA_ERROR_OUT_OF_MEMORY` for an allocation of `bytes` that failed with `e`.
pub(crate) fn oom(bytes: u64, e: streamexec::Error) -> CuErr {
    CuErr::new(
        CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        format!("allocating {bytes} bytes: {e}"),
    )
}

/// `cuMemAlloc_v2`.
///
/// # Safety
/// `dptr` is null or valid for a write.
pub(crate) unsafe fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CuResult<()> {
    let ctx = current()?;
    non_null(dptr, "dptr")?;
    if bytesize == 0 {
        return Err(invalid("bytesize is 0"));
    }
    let drv = driver()?;
    let real = drv
        .backing_bytes(bytesize)
        .ok_or_else(|| CuErr::new(CUresult::CUDA_ERROR_OUT_OF_MEMORY, "bytesize overflows"))?;
    let mem = drv
        .exec
        .allocate_array::<u8>(real)
        .map_err(|e| oom(bytesize as u64, e))?;
    let base = mem.address().raw();
    insert(Region {
        base,
        bytes: bytesize as u64,
        ctx: ctx.handle,
        device: ctx.device,
        backing: Backing::Device(mem),
        id: 0,
    });
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(dptr, base, "dptr") }
}

/// Keeps `r`'s memory until every stream of its context has run what was enqueued before this
/// call. Copies pin what they touch, but a kernel takes its pointers as raw bytes, so nothing
/// else keeps memory alive for a kernel still queued when the program frees it (numba-cuda
/// frees temporaries right after launching on them: CUDA's free waits for that kernel). The
/// region is already out of the address map, so every later call sees it freed; the memory goes
/// when the last stream's marker has run (or was skipped by a failed stream).
fn release_after_queued_work(r: Arc<Region>) {
    let Ok(ctx) = crate::context::lookup(r.ctx) else {
        return;
    };
    for s in ctx.all_streams() {
        let keep = r.clone();
        // A stream that cannot take the marker has no work left to wait for.
        let _ = s.enqueue_after(&[], move |se| {
            se.then_host_callback(move || drop(keep));
        });
    }
}

/// `cuMemFree_v2`: `dptr` must be what `cuMemAlloc` (or `cuMemAllocManaged`) returned. It
/// waits for the current context's work first, as CUDA's does: a kernel reaches memory through
/// addresses inside its parameters (numba passes arrays as structs of integers), which no
/// launch can pin ahead. Where the memory is another context's, its streams keep it until they
/// have run what was enqueued before ([`release_after_queued_work`]).
pub(crate) fn cuMemFree_v2(dptr: CUdeviceptr) -> CuResult<()> {
    current()?.synchronize()?;
    let mut map = REGIONS.write();
    match map.get(&dptr) {
        Some(r) if matches!(r.backing, Backing::Device(_) | Backing::Managed { .. }) => {
            let r = r.clone();
            map.remove(&dptr);
            drop(map);
            release_after_queued_work(r);
            Ok(())
        }
        _ => Err(invalid(format!(
            "{dptr:#x} is not the start of a live cuMemAlloc or cuMemAllocManaged allocation \
             (freed twice, an offset pointer, or host memory)"
        ))),
    }
}

/// `cuMemGetInfo_v2`: the machine's memory less what this device has allocated.
///
/// # Safety
/// Each pointer is null or valid for a write.
pub(crate) unsafe fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CuResult<()> {
    let ctx = current()?;
    let all = driver()?.total_memory();
    let used: u64 = REGIONS
        .read()
        .values()
        .filter(|r| {
            r.device == ctx.device
                && !matches!(
                    r.backing,
                    Backing::Global { .. } | Backing::Registered { .. }
                )
        })
        .map(|r| r.bytes)
        .sum();
    // SAFETY: the caller's out-pointers.
    unsafe {
        put(free, all.saturating_sub(used) as usize, "free")?;
        put(total, all as usize, "total")
    }
}

/// `cuMemGetAddressRange_v2`: the allocation containing `dptr`; `CUDA_ERROR_NOT_FOUND` when no
/// live allocation contains it, as the driver returns.
///
/// # Safety
/// Each pointer is null (ignored) or valid for a write.
pub(crate) unsafe fn cuMemGetAddressRange_v2(
    pbase: *mut CUdeviceptr,
    psize: *mut usize,
    dptr: CUdeviceptr,
) -> CuResult<()> {
    current()?;
    let r = lookup(dptr).ok_or_else(|| {
        CuErr::new(
            CUresult::CUDA_ERROR_NOT_FOUND,
            format!("{dptr:#x} is not in any live allocation"),
        )
    })?;
    // SAFETY: the caller's out-pointers, each written only when non-null.
    unsafe {
        if !pbase.is_null() {
            pbase.write(r.base);
        }
        if !psize.is_null() {
            psize.write(r.bytes as usize);
        }
    }
    Ok(())
}

fn host_alloc(pp: *mut *mut c_void, bytesize: usize, flags: c_uint) -> CuResult<()> {
    let ctx = current()?;
    non_null(pp, "pp")?;
    if bytesize == 0 {
        return Err(invalid("bytesize is 0"));
    }
    if flags & !0x7 != 0 {
        return Err(invalid(format!(
            "{flags:#x} is not a valid set of CU_MEMHOSTALLOC flags (PORTABLE, DEVICEMAP, \
             WRITECOMBINED)"
        )));
    }
    let drv = driver()?;
    let real = drv
        .backing_bytes(bytesize)
        .ok_or_else(|| CuErr::new(CUresult::CUDA_ERROR_OUT_OF_MEMORY, "bytesize overflows"))?;
    let mem = drv
        .exec
        .allocate_unified::<u8>(real)
        .map_err(|e| oom(bytesize as u64, e))?;
    let host = mem.host_ptr();
    let base = mem.ptr().address().raw();
    debug_assert_eq!(base, host as u64, "host memory is its own device address");
    insert(Region {
        base,
        bytes: bytesize as u64,
        ctx: ctx.handle,
        device: ctx.device,
        backing: Backing::Host { mem, flags },
        id: 0,
    });
    // SAFETY: the caller's out-pointer (checked non-null above).
    unsafe { put(pp, host.cast::<c_void>(), "pp") }
}

/// `cuMemHostAlloc`: pinned host memory, always mapped (its address is also its device
/// address).
///
/// # Safety
/// `pp` is null or valid for a write.
pub(crate) unsafe fn cuMemHostAlloc(
    pp: *mut *mut c_void,
    bytesize: usize,
    Flags: c_uint,
) -> CuResult<()> {
    host_alloc(pp, bytesize, Flags)
}

/// `cuMemAllocHost_v2`: `cuMemHostAlloc` with no flags.
///
/// # Safety
/// `pp` is null or valid for a write.
pub(crate) unsafe fn cuMemAllocHost_v2(pp: *mut *mut c_void, bytesize: usize) -> CuResult<()> {
    host_alloc(pp, bytesize, 0)
}

/// `cuMemFreeHost`: `p` must be what `cuMemHostAlloc` returned.
pub(crate) fn cuMemFreeHost(p: *mut c_void) -> CuResult<()> {
    current()?;
    let mut map = REGIONS.write();
    match map.get(&(p as u64)) {
        Some(r) if matches!(r.backing, Backing::Host { .. }) => {
            let r = r.clone();
            map.remove(&(p as u64));
            drop(map);
            release_after_queued_work(r);
            Ok(())
        }
        _ => Err(invalid(format!(
            "{p:p} is not the start of live cuMemHostAlloc memory"
        ))),
    }
}

/// `cuMemHostGetDevicePointer_v2`: the device address of mapped pinned memory (the same
/// address).
///
/// # Safety
/// `pdptr` is null or valid for a write.
pub(crate) unsafe fn cuMemHostGetDevicePointer_v2(
    pdptr: *mut CUdeviceptr,
    p: *mut c_void,
    Flags: c_uint,
) -> CuResult<()> {
    current()?;
    if Flags != 0 {
        return Err(invalid(format!("Flags must be 0, got {Flags}")));
    }
    match lookup(p as u64) {
        Some(r) if r.is_host() => {}
        _ if registered(p as u64, 1).is_some() => {
            return Err(invalid(
                "memory registered with cuMemHostRegister without CU_MEMHOSTREGISTER_DEVICEMAP \
                 is not mapped for kernels",
            ));
        }
        _ => {
            return Err(invalid(format!(
                "{p:p} is not in mapped pinned memory from cuMemHostAlloc"
            )));
        }
    }
    // SAFETY: the caller's out-pointer.
    unsafe { put(pdptr, p as u64, "pdptr") }
}

/// `cuMemHostGetFlags`.
///
/// # Safety
/// `pFlags` is null or valid for a write.
pub(crate) unsafe fn cuMemHostGetFlags(pFlags: *mut c_uint, p: *mut c_void) -> CuResult<()> {
    current()?;
    let flags = match lookup(p as u64).as_deref() {
        Some(Region {
            backing: Backing::Host { flags, .. } | Backing::Registered { flags, .. },
            ..
        }) => *flags,
        _ => registered(p as u64, 1)
            .map(|(_, f)| f)
            .ok_or_else(|| invalid(format!("{p:p} is not pinned host memory")))?,
    };
    // SAFETY: the caller's out-pointer.
    unsafe { put(pFlags, flags, "pFlags") }
}

/// The registration holding `[addr, addr + len)`, if any: (base, flags).
pub(crate) fn registered(addr: u64, len: u64) -> Option<(u64, c_uint)> {
    let map = REGISTERED.read();
    let (&base, &(bytes, flags)) = map.range(..=addr).next_back()?;
    (addr + len <= base + bytes).then_some((base, flags))
}

/// `cuMemHostRegister_v2`: pins `[p, p + bytesize)` for copies; with
/// `CU_MEMHOSTREGISTER_DEVICEMAP` it is also mapped: a region of the address map at its own
/// address (its device pointer), in the engine's allocation table, so kernels reach it and
/// their bounds checks know it.
///
/// # Safety
/// `[p, p + bytesize)` stays valid host memory until `cuMemHostUnregister` (the driver API's
/// contract).
pub(crate) unsafe fn cuMemHostRegister_v2(
    p: *mut c_void,
    bytesize: usize,
    Flags: c_uint,
) -> CuResult<()> {
    let ctx = current()?;
    non_null(p, "p")?;
    if bytesize == 0 || Flags & !0xf != 0 {
        return Err(invalid(format!(
            "bytesize {bytesize} and Flags {Flags:#x}: give a non-empty range and \
             CU_MEMHOSTREGISTER flags"
        )));
    }
    let (start, end) = (p as u64, p as u64 + bytesize as u64);
    let taken = || {
        CuErr::new(
            CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
            format!("{bytesize} bytes at {p:p} overlap pinned memory"),
        )
    };
    if Flags & 0x2 != 0 {
        let overlaps = REGISTERED
            .read()
            .range(..end)
            .next_back()
            .is_some_and(|(&b, &(n, _))| b + n > start);
        if overlaps {
            return Err(taken());
        }
        // SAFETY: the caller's contract: the range stays valid until cuMemHostUnregister,
        // which waits for the context's work before it unregisters (the interface's
        // contract); the host's own accesses while kernels run are the caller's race, as on a
        // GPU.
        let mem = unsafe {
            driver()?
                .exec
                .register_host_memory(p.cast::<u8>(), bytesize)
        }
        .map_err(|_| taken())?;
        insert(Region {
            base: start,
            bytes: bytesize as u64,
            ctx: ctx.handle,
            device: ctx.device,
            backing: Backing::Registered { mem, flags: Flags },
            id: 0,
        });
        return Ok(());
    }
    let mut map = REGISTERED.write();
    let overlaps = map
        .range(..end)
        .next_back()
        .is_some_and(|(&b, &(n, _))| b + n > start);
    let mapped = REGIONS
        .read()
        .range(..end)
        .next_back()
        .is_some_and(|(&b, r)| b + r.bytes > start);
    if overlaps || mapped {
        return Err(taken());
    }
    map.insert(start, (bytesize as u64, Flags));
    Ok(())
}

/// `cuMemHostUnregister`. Mapped memory is first waited for: the current context's work
/// finishes (whatever its outcome), so no kernel touches the memory once the call returns.
pub(crate) fn cuMemHostUnregister(p: *mut c_void) -> CuResult<()> {
    let ctx = current()?;
    let mapped = REGIONS
        .read()
        .get(&(p as u64))
        .is_some_and(|r| matches!(r.backing, Backing::Registered { .. }));
    if mapped {
        // A sticky error of the context does not keep the memory registered.
        let _ = ctx.synchronize();
        REGIONS.write().remove(&(p as u64));
        return Ok(());
    }
    REGISTERED
        .write()
        .remove(&(p as u64))
        .map(|_| ())
        .ok_or_else(|| {
            CuErr::new(
                CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
                format!("{p:p} is not the start of a cuMemHostRegister range"),
            )
        })
}

/// The `cuMemHostRegister` range (not mapped) holding `ptr`: its base and size.
pub(crate) fn registered_range(ptr: u64) -> Option<(u64, u64)> {
    let map = REGISTERED.read();
    let (&base, &(bytes, _)) = map.range(..=ptr).next_back()?;
    (ptr < base + bytes).then_some((base, bytes))
}
