//! Emissary pointer arguments on an executor: a kernel's pointer is resolved against the
//! executor's live allocations and pinned for the call. Memory the host can address (the host
//! platform's, or unified memory, found at its device or host address) is handed over in
//! place; other device memory is staged: copied to the host when the buffer is taken and back
//! when the wrapper writes it back.

use std::sync::Weak;

use crate::error::{Error, Result};
use crate::executor::{ExecutorShared, StreamExecutor};
use crate::rpc::{EmissaryArg, EmissaryMemory, HostBuffer};
use crate::types::DeviceAddress;

/// The resolver an executor's server uses (weak: the server lives inside the executor).
pub(super) struct ExecutorMemory {
    pub(super) exec: Weak<ExecutorShared>,
}

impl EmissaryMemory for ExecutorMemory {
    fn buffer(&self, arg: EmissaryArg, bytes: u64) -> crate::rpc::Result<HostBuffer> {
        Ok(self.resolve(arg, bytes)?)
    }
}

impl ExecutorMemory {
    fn resolve(&self, arg: EmissaryArg, bytes: u64) -> Result<HostBuffer> {
        let EmissaryArg::Device(addr) = arg else {
            return Err(Error::invalid(
                "emissary pointer",
                format!(
                    "{arg:?}: host pointers are not resolved yet; pass device or unified memory"
                ),
            ));
        };
        let exec = StreamExecutor::from_shared(self.exec.upgrade().ok_or_else(|| Error::Rpc {
            detail: "the executor of this RPC server is gone".into(),
        })?);
        let len = usize::try_from(bytes)
            .map_err(|_| Error::invalid("emissary pointer", format!("{bytes} bytes")))?;
        let (pin, host) = exec.pin_address(addr, bytes)?;
        if let Some(h) = host {
            // SAFETY: `[h, h + len)` lies inside a unified allocation (host-coherent memory,
            // reachable at this host address), which the pin keeps from being deallocated.
            return Ok(unsafe { HostBuffer::in_place(h as *mut u8, len, Box::new(pin)) });
        }
        let iface = exec.interface().clone();
        let dev = DeviceAddress::new(addr);
        if let Some((ptr, keep)) = iface.host_view(dev, bytes) {
            // SAFETY: the backend says `ptr` is the host address of these `len` bytes, kept
            // alive by `keep` (and the allocation by the pin).
            return Ok(unsafe { HostBuffer::in_place(ptr, len, Box::new((pin, keep))) });
        }
        let mut data = vec![0u8; len];
        // SAFETY: `[addr, addr + len)` lies inside a live allocation of this executor, pinned.
        unsafe { iface.memcpy_d2h_sync(dev, &mut data)? };
        let back = move |d: &[u8]| {
            // SAFETY: as above; the pin, moved into this closure, still holds the allocation,
            // and `d` has the `len` bytes taken from it.
            Ok(unsafe { iface.memcpy_h2d_sync(d, dev) }?)
        };
        Ok(HostBuffer::staged(data, back, Box::new(pin)))
    }
}
