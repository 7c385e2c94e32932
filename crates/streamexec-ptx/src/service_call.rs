//! Running a call of a served function (`services.rs`) for one thread, on either engine:
//! its `.param` arguments read, the format string and other device strings read through the
//! thread's view of memory, the launcher's services called, the return value written back.

use crate::dim::Dim3;
use crate::interp::mem::{self, BlockMem};
use crate::ir::{Service, ServiceCall, Space};
use crate::launch::Launch;
use crate::services::{AssertFailure, DeviceView, ThreadPlace};

/// The calling thread's memory during a service call.
struct View<'a, 'm> {
    l: &'a Launch,
    m: &'a BlockMem<'m>,
    idx: usize,
}

impl DeviceView for View<'_, '_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        for (k, b) in out.iter_mut().enumerate() {
            let a = addr.wrapping_add(k as u64);
            let loc = mem::locate(self.l, self.m, Space::Generic, a, 1, self.idx, false)?;
            *b = mem::load(self.l, self.m, loc, 1) as u8;
        }
        Ok(())
    }
}

/// A view that remembers the first failed read (a fault of the thread after the call).
struct Recording<'v> {
    inner: &'v dyn DeviceView,
    failed: std::cell::RefCell<Option<String>>,
}

impl DeviceView for Recording<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), String> {
        self.inner.read(addr, out).inspect_err(|e| {
            self.failed.borrow_mut().get_or_insert_with(|| e.clone());
        })
    }
}

/// Runs `call` for the thread at index `idx` of the block memories in `m` (its linear thread
/// index in the block is `tid`); `Err` is the thread's fault.
pub(crate) fn run(
    l: &Launch,
    m: &mut BlockMem<'_>,
    idx: usize,
    block: Dim3,
    tid: u32,
    call: &ServiceCall,
) -> Result<(), String> {
    let row = idx * m.tparam_bytes;
    let arg = |k: usize| -> u64 {
        let (off, size) = call.args[k];
        let at = row + off as usize;
        let mut b = [0u8; 8];
        let n = (size as usize).min(8);
        b[..n].copy_from_slice(&m.tparam[at..at + n]);
        u64::from_le_bytes(b)
    };
    let place = ThreadPlace {
        block,
        thread: l.block.unlinear(tid as u64),
    };
    let ret: u64 = match call.service {
        Service::Vprintf => {
            let (fmt, args) = (arg(0), arg(1));
            let view = View { l, m, idx };
            let format = view
                .read_c_string(fmt)
                .map_err(|e| format!("vprintf's format string: {e}"))?;
            match &l.services {
                None => -1i32 as u32 as u64,
                Some(s) => {
                    let rec = Recording {
                        inner: &view,
                        failed: Default::default(),
                    };
                    let n = s.vprintf(&format, args, &rec, place);
                    if let Some(e) = rec.failed.into_inner() {
                        return Err(format!("vprintf's arguments: {e}"));
                    }
                    n as u32 as u64
                }
            }
        }
        Service::Malloc => l.services.as_ref().map_or(0, |s| s.malloc(arg(0))),
        Service::Free => {
            if let Some(s) = &l.services {
                s.free(arg(0));
            }
            0
        }
        Service::AssertFail => {
            let view = View { l, m, idx };
            let text = |addr: u64, what: &str| -> Result<String, String> {
                let b = view
                    .read_c_string(addr)
                    .map_err(|e| format!("__assertfail's {what}: {e}"))?;
                Ok(String::from_utf8_lossy(&b).into_owned())
            };
            let failure = AssertFailure {
                message: text(arg(0), "message")?,
                file: text(arg(1), "file name")?,
                line: arg(2) as u32,
                function: text(arg(3), "function name")?,
                block,
                thread: place.thread,
            };
            let msg = format!("device-side assertion failed: {failure}");
            let mut first = l.assertion.lock();
            if first.is_none() {
                *first = Some(failure);
            }
            return Err(msg);
        }
    };
    if let Some((off, size)) = call.ret {
        let at = row + off as usize;
        let n = (size as usize).min(8);
        m.tparam[at..at + n].copy_from_slice(&ret.to_le_bytes()[..n]);
    }
    Ok(())
}
