//! Device queries: count, name, memory, attributes, UUID, peer access.

use std::ffi::{c_char, c_int};

use cudarc::driver::sys::{CUdevice, CUresult, CUuuid};

use crate::driver::{Driver, driver};
use crate::entry::{CuErr, CuResult, invalid, non_null, put};

/// Bytes of shared memory per block (the host platform's limit, also the opt-in limit).
pub(crate) const SHARED_PER_BLOCK: i32 = 48 * 1024;

impl Driver {
    /// `dev` as an ordinal, or `CUDA_ERROR_INVALID_DEVICE`.
    pub(crate) fn device(&self, dev: CUdevice) -> CuResult<usize> {
        usize::try_from(dev)
            .ok()
            .filter(|&d| d < self.device_count)
            .ok_or_else(|| {
                CuErr::new(
                    CUresult::CUDA_ERROR_INVALID_DEVICE,
                    format!(
                        "device {dev} does not exist: there are {} (STREAMEXEC_CUDA_DEVICES)",
                        self.device_count
                    ),
                )
            })
    }

    /// Total memory each device reports: the machine's.
    pub(crate) fn total_memory(&self) -> u64 {
        self.exec.description().total_memory
    }

    fn attribute(&self, attr: u32) -> Option<i32> {
        let d = self.exec.description();
        let v = match attr {
            1 => 1024,                                          // max threads per block
            2 | 3 => 1024,                                      // max block dim x, y
            4 => 64,                                            // max block dim z
            5 => i32::MAX,                                      // max grid dim x
            6 | 7 => 65535,                                     // max grid dim y, z
            8 => SHARED_PER_BLOCK,                              // shared memory per block
            9 => 64 * 1024,                                     // total constant memory
            10 => 32,                                           // warp size
            11 => i32::MAX,                                     // max pitch
            12 | 82 => 65536,                                   // registers per block / SM
            13 => d.clock_rate_khz.unwrap_or(1_000_000) as i32, // clock rate (kHz)
            14 | 30 => 512,                                     // texture / surface alignment
            15 | 31 | 40 => 1, // overlap, concurrent kernels, copy engines
            16 => d.compute_units.max(1) as i32, // multiprocessors
            18 | 19 | 41 => 1, // integrated, map host memory, unified addressing
            33 => 0,           // PCI bus id (set per device by the caller)
            36 => 1_000_000,   // memory clock (kHz)
            37 => 64,          // memory bus width
            38 => 4 * 1024 * 1024, // L2 cache
            39 => 2048,        // threads per SM
            75 => self.cc.0 as i32, // compute capability major
            76 => self.cc.1 as i32, // compute capability minor
            79 | 80 => 1,      // L1 caches
            81 => 2 * SHARED_PER_BLOCK, // shared memory per SM
            83 | 89 | 101 => 1, // managed memory, concurrent and direct host access to it
            91 => 1,           // registered memory's device pointer is its host pointer
            86 => 1,           // host-native atomics (mapped memory)
            95 => 1,           // cooperative launch (each block on a thread of its own)
            87 => 2,           // single/double perf ratio
            97 => SHARED_PER_BLOCK, // shared per block, opt-in
            99 => 1,           // host register (for copies)
            106 => 32,         // blocks per SM
            // Everything else (textures, surfaces, memory pools, cooperative
            // launch, stream memory operations, ...) is not offered: 0.
            _ => return (1..=150).contains(&attr).then_some(0),
        };
        Some(v)
    }
}

/// `cuDeviceGet`.
///
/// # Safety
/// `device` is null or valid for a write.
pub(crate) unsafe fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CuResult<()> {
    let d = driver()?.device(ordinal)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(device, d as CUdevice, "device") }
}

/// `cuDeviceGetCount`.
///
/// # Safety
/// `count` is null or valid for a write.
pub(crate) unsafe fn cuDeviceGetCount(count: *mut c_int) -> CuResult<()> {
    let n = driver()?.device_count as c_int;
    // SAFETY: the caller's out-pointer.
    unsafe { put(count, n, "count") }
}

/// `cuDeviceGetName`: at most `len` bytes, NUL-terminated.
///
/// # Safety
/// `name` is null or valid for writes of `len` bytes.
pub(crate) unsafe fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CuResult<()> {
    let drv = driver()?;
    let d = drv.device(dev)?;
    non_null(name, "name")?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l > 0)
        .ok_or_else(|| invalid(format!("len must be positive, got {len}")))?;
    let text = format!(
        "streamexec CPU device {d} (sm_{}{}, PTX engine on {})",
        drv.cc.0,
        drv.cc.1,
        drv.exec.description().name
    );
    let n = text.len().min(len - 1);
    // SAFETY: `name` has `len` > `n` bytes (the caller's contract).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), name.cast::<u8>(), n);
        name.add(n).write(0);
    }
    Ok(())
}

/// `cuDeviceTotalMem_v2`.
///
/// # Safety
/// `bytes` is null or valid for a write.
pub(crate) unsafe fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CuResult<()> {
    let drv = driver()?;
    drv.device(dev)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(bytes, drv.total_memory() as usize, "bytes") }
}

/// `cuDeviceGetAttribute`: every attribute of CUDA 12 has a value; unknown numbers are
/// `CUDA_ERROR_INVALID_VALUE`.
///
/// # Safety
/// `pi` is null or valid for a write.
pub(crate) unsafe fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attrib: u32,
    dev: CUdevice,
) -> CuResult<()> {
    let drv = driver()?;
    let d = drv.device(dev)?;
    let v = match attrib {
        33 => d as i32,
        a => drv
            .attribute(a)
            .ok_or_else(|| invalid(format!("{a} is not a CUdevice_attribute")))?,
    };
    // SAFETY: the caller's out-pointer.
    unsafe { put(pi, v, "pi") }
}

/// `cuDeviceGetUuid`: a fixed UUID per ordinal.
///
/// # Safety
/// `uuid` is null or valid for a write.
pub(crate) unsafe fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    let mut bytes = *b"streamexec-cpu\0\0";
    bytes[15] = d as u8;
    let id = CUuuid {
        bytes: bytes.map(|b| b as c_char),
    };
    // SAFETY: the caller's out-pointer.
    unsafe { put(uuid, id, "uuid") }
}

/// `cuDeviceGetUuid_v2`: as `cuDeviceGetUuid`.
///
/// # Safety
/// `uuid` is null or valid for a write.
pub(crate) unsafe fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) -> CuResult<()> {
    // SAFETY: same contract.
    unsafe { cuDeviceGetUuid(uuid, dev) }
}

/// `cuDeviceCanAccessPeer`: every pair of distinct devices can (one address space).
///
/// # Safety
/// `canAccessPeer` is null or valid for a write.
pub(crate) unsafe fn cuDeviceCanAccessPeer(
    canAccessPeer: *mut c_int,
    dev: CUdevice,
    peerDev: CUdevice,
) -> CuResult<()> {
    let drv = driver()?;
    let (a, b) = (drv.device(dev)?, drv.device(peerDev)?);
    // SAFETY: the caller's out-pointer.
    unsafe { put(canAccessPeer, c_int::from(a != b), "canAccessPeer") }
}

/// `cuDeviceComputeCapability` (deprecated; as the two attributes).
///
/// # Safety
/// `major` and `minor` are null or valid for writes.
pub(crate) unsafe fn cuDeviceComputeCapability(
    major: *mut c_int,
    minor: *mut c_int,
    dev: CUdevice,
) -> CuResult<()> {
    let drv = driver()?;
    drv.device(dev)?;
    non_null(minor, "minor")?;
    // SAFETY: the caller's out-pointers.
    unsafe {
        put(major, drv.cc.0 as c_int, "major")?;
        put(minor, drv.cc.1 as c_int, "minor")
    }
}

/// The PCI bus id of device `d`: domain 0, bus `d` (as `CU_DEVICE_ATTRIBUTE_PCI_BUS_ID`
/// reports), device 0.
fn pci_bus_id(d: usize) -> String {
    format!("0000:{d:02x}:00.0")
}

/// `cuDeviceGetPCIBusId`: `domain:bus:device.function`, NUL-terminated in at most `len` bytes.
///
/// # Safety
/// `pciBusId` is null or valid for writes of `len` bytes.
pub(crate) unsafe fn cuDeviceGetPCIBusId(
    pciBusId: *mut c_char,
    len: c_int,
    dev: CUdevice,
) -> CuResult<()> {
    let d = driver()?.device(dev)?;
    non_null(pciBusId, "pciBusId")?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l > 0)
        .ok_or_else(|| invalid(format!("len must be positive, got {len}")))?;
    let text = pci_bus_id(d);
    let n = text.len().min(len - 1);
    // SAFETY: `pciBusId` has `len` > `n` bytes (the caller's contract).
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), pciBusId.cast::<u8>(), n);
        pciBusId.add(n).write(0);
    }
    Ok(())
}

/// `cuDeviceGetByPCIBusId`: the device of a PCI bus id `cuDeviceGetPCIBusId` gives (`[domain:]
/// bus:device[.function]`, hexadecimal).
///
/// # Safety
/// `dev` is null or valid for a write; `pciBusId` is NUL-terminated.
pub(crate) unsafe fn cuDeviceGetByPCIBusId(
    dev: *mut CUdevice,
    pciBusId: *const c_char,
) -> CuResult<()> {
    let drv = driver()?;
    non_null(pciBusId, "pciBusId")?;
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    let id = unsafe { std::ffi::CStr::from_ptr(pciBusId) }.to_string_lossy();
    let parts: Vec<&str> = id.split(':').collect();
    let (bus, rest) = match parts[..] {
        [_, bus, rest] | [bus, rest] => (bus, rest),
        _ => return Err(invalid(format!("{id:?} is not a PCI bus id"))),
    };
    let slot = rest.split('.').next().unwrap_or(rest);
    let found = (0..drv.device_count).find(|&d| {
        u32::from_str_radix(bus, 16) == Ok(d as u32) && u32::from_str_radix(slot, 16) == Ok(0)
    });
    let d = found.ok_or_else(|| {
        CuErr::new(
            CUresult::CUDA_ERROR_INVALID_DEVICE,
            format!("no device has PCI bus id {id:?}"),
        )
    })?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(dev, d as CUdevice, "dev") }
}
