//! Memory accesses of the PTX engine: address resolution per state space, bounds and
//! alignment checks, loads, stores and atomics.
//!
//! Device memory is the allocation table's, reached only through relaxed atomics after a
//! bounds check against the launch's pinned arguments or the table. Shared, local and parameter memory belong to
//! one block, which one host thread runs, so they are plain byte arrays.

use std::sync::atomic::Ordering;

use crate::DYNAMIC_SHARED_BASE;
use crate::device_bytes;
use crate::ir::{
    AtomOp, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, Space, THREAD_PARAM_BASE, Ty, WINDOW_BYTES,
};
use crate::launch::Launch;

/// Where an access lands.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Loc {
    /// Host pointer into pinned device memory.
    Global(*mut u8),
    /// Byte index into the block's shared memory.
    Shared(usize),
    /// Byte index into the warp's local memory.
    Local(usize),
    /// Byte index into the kernel parameter buffer (read-only).
    KParam(usize),
    /// Byte index into the warp's call-parameter memory.
    TParam(usize),
}

/// The per-block memories an access may touch.
pub(crate) struct BlockMem<'a> {
    pub(crate) shared: &'a mut [u8],
    pub(crate) static_shared: usize,
    pub(crate) dynamic_at: usize,
    pub(crate) dynamic_len: usize,
    pub(crate) local: &'a mut [u8],
    pub(crate) local_bytes: usize,
    pub(crate) tparam: &'a mut [u8],
    pub(crate) tparam_bytes: usize,
}

/// A pinned device range: first address, end address, host pointer of the first byte.
pub(crate) type Range = (u64, u64, *mut u8);

impl Launch {
    /// The pinned range holding `[addr, addr + bytes)`, if it lies in live device memory.
    pub(crate) fn global(&self, addr: u64, bytes: u64) -> Option<Range> {
        let range = |p: &crate::memory::Pinned| {
            let start = p.address();
            (start, start + p.len(), p.as_ptr())
        };
        if let Some(p) = self.pins.iter().find(|p| p.contains(addr, bytes)) {
            return Some(range(p));
        }
        let mut extra = self.extra.lock();
        if let Some(p) = extra.iter().find(|p| p.contains(addr, bytes)) {
            return Some(range(p));
        }
        // Pin the whole allocation, so later accesses to it hit the list above.
        let whole = self.table.resolve_whole(addr, bytes)?;
        let r = range(&whole);
        extra.push(whole);
        Some(r)
    }
}

/// Resolves a warp's accesses, remembering the last device range hit so that neighbouring
/// lanes and later instructions skip the search (and the launch's shared pin list, which
/// workers would contend on). A warp keeps it for one block of one launch, which pins every
/// range it remembers.
pub(crate) struct Resolver {
    /// The last few ranges hit (a kernel streams through a handful of arrays), replaced in
    /// turn.
    ranges: [Range; RESOLVER_WAYS],
    next: usize,
}

/// Ranges a [`Resolver`] remembers.
const RESOLVER_WAYS: usize = 4;

impl Resolver {
    pub(crate) fn new() -> Self {
        Resolver {
            ranges: [(1, 0, std::ptr::null_mut()); RESOLVER_WAYS],
            next: 0,
        }
    }

    /// As [`locate`], with fast paths for global and shared accesses.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn at(
        &mut self,
        l: &Launch,
        m: &BlockMem<'_>,
        space: Space,
        addr: u64,
        bytes: u64,
        lane: usize,
        store: bool,
    ) -> Result<Loc, String> {
        if addr & (bytes - 1) == 0 {
            match space {
                Space::Global | Space::Generic => {
                    // Saturating: an address near 2^64 must not wrap into a range.
                    let end = addr.saturating_add(bytes);
                    if let Some(r) = self.ranges.iter().find(|r| addr >= r.0 && end <= r.1) {
                        return Ok(Loc::Global(r.2.wrapping_add((addr - r.0) as usize)));
                    }
                }
                Space::Shared if addr.saturating_add(bytes) <= m.static_shared as u64 => {
                    return Ok(Loc::Shared(addr as usize));
                }
                _ => {}
            }
        }
        let loc = locate(l, m, space, addr, bytes, lane, store)?;
        if let Loc::Global(_) = loc
            && let Some(r) = l.global(addr, bytes)
        {
            self.ranges[self.next] = r;
            self.next = (self.next + 1) % RESOLVER_WAYS;
        }
        Ok(loc)
    }
}

fn space_name(s: Space) -> &'static str {
    match s {
        Space::Global => "global",
        Space::Shared => "shared",
        Space::Local => "local",
        Space::Param => "param",
        Space::Generic => "generic",
    }
}

/// Resolves an access of `bytes` at `addr` in `space` for `lane`; `Err` says why it faults.
#[inline]
pub(crate) fn locate(
    l: &Launch,
    m: &BlockMem<'_>,
    space: Space,
    addr: u64,
    bytes: u64,
    lane: usize,
    store: bool,
) -> Result<Loc, String> {
    let what = if store { "store" } else { "load" };
    // Every access size is a power of two (1..8 bytes, times 1, 2 or 4 elements).
    if addr & (bytes - 1) != 0 {
        return Err(format!(
            "misaligned {bytes}-byte {} {what} at address {addr:#x} (it must be {bytes}-byte aligned)",
            space_name(space)
        ));
    }
    let (space, a) = match space {
        Space::Generic if (SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&addr) => {
            (Space::Shared, addr - SHARED_WINDOW)
        }
        Space::Generic if (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_BYTES).contains(&addr) => {
            (Space::Local, addr - LOCAL_WINDOW)
        }
        Space::Generic if (PARAM_WINDOW..PARAM_WINDOW + WINDOW_BYTES).contains(&addr) => {
            (Space::Param, addr - PARAM_WINDOW)
        }
        Space::Generic => (Space::Global, addr),
        s => (s, addr),
    };
    let oob = |extent: String| {
        format!(
            "out-of-bounds {bytes}-byte {} {what} at address {addr:#x} ({extent})",
            space_name(space)
        )
    };
    match space {
        Space::Global => l
            .global(a, bytes)
            .map(|(start, _, p)| Loc::Global(p.wrapping_add((a - start) as usize)))
            .ok_or_else(|| oob("not inside a live allocation of this executor".into())),
        Space::Shared => {
            let end = a.saturating_add(bytes);
            if end <= m.static_shared as u64 {
                Ok(Loc::Shared(a as usize))
            } else if a >= DYNAMIC_SHARED_BASE && end - DYNAMIC_SHARED_BASE <= m.dynamic_len as u64
            {
                Ok(Loc::Shared(
                    m.dynamic_at + (a - DYNAMIC_SHARED_BASE) as usize,
                ))
            } else {
                Err(oob(format!(
                    "the block has {} bytes of static shared memory at 0 and {} dynamic bytes at {DYNAMIC_SHARED_BASE:#x}",
                    m.static_shared, m.dynamic_len
                )))
            }
        }
        Space::Local => {
            if a.checked_add(bytes)
                .is_some_and(|e| e <= m.local_bytes as u64)
            {
                Ok(Loc::Local(lane * m.local_bytes + a as usize))
            } else {
                Err(oob(format!(
                    "each thread has {} bytes of local memory",
                    m.local_bytes
                )))
            }
        }
        Space::Param if a >= THREAD_PARAM_BASE => {
            let o = a - THREAD_PARAM_BASE;
            if o.saturating_add(bytes) <= m.tparam_bytes as u64 {
                Ok(Loc::TParam(lane * m.tparam_bytes + o as usize))
            } else {
                Err(oob("outside the call parameters".into()))
            }
        }
        Space::Param => {
            if store {
                Err(format!("store to kernel parameter memory at {addr:#x}"))
            } else if a.saturating_add(bytes) <= l.params.len() as u64 {
                Ok(Loc::KParam(a as usize))
            } else {
                Err(oob(format!(
                    "the kernel has {} bytes of parameters",
                    l.params.len()
                )))
            }
        }
        Space::Generic => unreachable!("resolved above"), // ok: generic was mapped to a space
    }
}

#[inline(always)]
fn read_le(b: &[u8], i: usize, n: usize) -> u64 {
    match n {
        1 => b[i] as u64,
        2 => u16::from_le_bytes([b[i], b[i + 1]]) as u64,
        4 => {
            let mut v = [0u8; 4];
            v.copy_from_slice(&b[i..i + 4]);
            u32::from_le_bytes(v) as u64
        }
        _ => {
            let mut v = [0u8; 8];
            v.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(v)
        }
    }
}

#[inline(always)]
fn write_le(b: &mut [u8], i: usize, n: usize, v: u64) {
    match n {
        1 => b[i] = v as u8,
        2 => b[i..i + 2].copy_from_slice(&(v as u16).to_le_bytes()),
        4 => b[i..i + 4].copy_from_slice(&(v as u32).to_le_bytes()),
        _ => b[i..i + 8].copy_from_slice(&v.to_le_bytes()),
    }
}

/// Loads `bytes` (1, 2, 4 or 8) at `loc`, zero-extended.
#[inline]
pub(crate) fn load(l: &Launch, m: &BlockMem<'_>, loc: Loc, bytes: usize) -> u64 {
    match loc {
        // SAFETY: `locate` checked that the range is inside pinned live device memory and
        // aligned to `bytes`.
        Loc::Global(p) => unsafe {
            match bytes {
                1 => device_bytes::load_aligned::<u8>(p) as u64,
                2 => device_bytes::load_aligned::<u16>(p) as u64,
                4 => device_bytes::load_aligned::<u32>(p) as u64,
                _ => device_bytes::load_aligned::<u64>(p),
            }
        },
        Loc::Shared(i) => read_le(m.shared, i, bytes),
        Loc::Local(i) => read_le(m.local, i, bytes),
        Loc::KParam(i) => read_le(&l.params, i, bytes),
        Loc::TParam(i) => read_le(m.tparam, i, bytes),
    }
}

/// Reads `bytes` of the kernel parameter buffer at `at` (the caller checked the range).
#[inline]
pub(crate) fn read_param(l: &Launch, at: usize, bytes: usize) -> u64 {
    read_le(&l.params, at, bytes)
}

/// Stores the low `bytes` of `v` at `loc` (never `KParam`: `locate` refuses that).
#[inline]
pub(crate) fn store(m: &mut BlockMem<'_>, loc: Loc, bytes: usize, v: u64) {
    match loc {
        // SAFETY: as in `load`.
        Loc::Global(p) => unsafe {
            match bytes {
                1 => device_bytes::store_aligned::<u8>(p, v as u8),
                2 => device_bytes::store_aligned::<u16>(p, v as u16),
                4 => device_bytes::store_aligned::<u32>(p, v as u32),
                _ => device_bytes::store_aligned::<u64>(p, v),
            }
        },
        Loc::Shared(i) => write_le(m.shared, i, bytes, v),
        Loc::Local(i) => write_le(m.local, i, bytes, v),
        Loc::TParam(i) => write_le(m.tparam, i, bytes, v),
        Loc::KParam(_) => {}
    }
}

/// The new value of an atomic location holding `old`.
fn apply(op: AtomOp, ty: Ty, old: u64, b: u64, c: u64) -> u64 {
    let wide = ty.bytes() == 8;
    let mask = if wide { u64::MAX } else { u32::MAX as u64 };
    let (o, b) = (old & mask, b & mask);
    let r = match (op, ty) {
        (AtomOp::Add, Ty::F32) => {
            (f32::from_bits(o as u32) + f32::from_bits(b as u32)).to_bits() as u64
        }
        (AtomOp::Add, Ty::F64) => (f64::from_bits(o) + f64::from_bits(b)).to_bits(),
        (AtomOp::Add, _) => o.wrapping_add(b),
        (AtomOp::Min | AtomOp::Max, _) => {
            let (x, y) = (ty.extend(o) as i64, ty.extend(b) as i64);
            let less = if ty.signed() { x < y } else { o < b };
            if less == (op == AtomOp::Min) { o } else { b }
        }
        (AtomOp::Exch, _) => b,
        (AtomOp::Cas, _) => {
            if o == b {
                c
            } else {
                o
            }
        }
        (AtomOp::Inc, _) => {
            if o >= b {
                0
            } else {
                o + 1
            }
        }
        (AtomOp::Dec, _) => {
            if o == 0 || o > b {
                b
            } else {
                o - 1
            }
        }
        (AtomOp::AddHalf { bf, x2 }, _) => {
            use crate::alu::half::{ADD, hbin};
            match (bf, x2) {
                (false, false) => hbin::<false, false, ADD, false, false>(o, b),
                (false, true) => hbin::<false, true, ADD, false, false>(o, b),
                (true, false) => hbin::<true, false, ADD, false, false>(o, b),
                (true, true) => hbin::<true, true, ADD, false, false>(o, b),
            }
        }
        (AtomOp::And, _) => o & b,
        (AtomOp::Or, _) => o | b,
        (AtomOp::Xor, _) => o ^ b,
    };
    r & mask
}

/// Performs an atomic read-modify-write at `loc`; returns the old value.
pub(crate) fn atomic(m: &mut BlockMem<'_>, loc: Loc, op: AtomOp, ty: Ty, b: u64, c: u64) -> u64 {
    let bytes = ty.bytes() as usize;
    match loc {
        Loc::Global(p) => {
            // A CAS loop on the word at `p` of the access's width.
            macro_rules! cas {
                ($w:ty) => {{
                    // SAFETY: `locate` checked bounds and alignment (to the access size) of
                    // live pinned memory; every access to device memory is atomic.
                    let a = unsafe { device_bytes::atomic::<$w>(p) };
                    let mut old = a.load(Ordering::Relaxed);
                    loop {
                        let new = apply(op, ty, old as u64, b, c) as $w;
                        match a.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Relaxed)
                        {
                            Ok(_) => return old as u64,
                            Err(now) => old = now,
                        }
                    }
                }};
            }
            match bytes {
                8 => cas!(u64),
                2 => cas!(u16),
                _ => cas!(u32),
            }
        }
        Loc::Shared(i) => {
            let old = read_le(m.shared, i, bytes);
            write_le(m.shared, i, bytes, apply(op, ty, old, b, c));
            old
        }
        // `locate` only yields these for non-atomic spaces, which the decoder rejects.
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inc_dec_wrap_and_signed_min() {
        assert_eq!(apply(AtomOp::Inc, Ty::U32, 5, 5, 0), 0);
        assert_eq!(apply(AtomOp::Inc, Ty::U32, 4, 5, 0), 5);
        assert_eq!(apply(AtomOp::Dec, Ty::U32, 0, 7, 0), 7);
        assert_eq!(apply(AtomOp::Dec, Ty::U32, 9, 7, 0), 7);
        assert_eq!(apply(AtomOp::Dec, Ty::U32, 3, 7, 0), 2);
        let m1 = (-1i32) as u32 as u64;
        assert_eq!(apply(AtomOp::Min, Ty::S32, 3, m1, 0), m1);
        assert_eq!(apply(AtomOp::Min, Ty::U32, 3, m1, 0), 3);
        assert_eq!(apply(AtomOp::Cas, Ty::U32, 3, 3, 9), 9);
        assert_eq!(apply(AtomOp::Cas, Ty::U32, 4, 3, 9), 4);
    }
}
