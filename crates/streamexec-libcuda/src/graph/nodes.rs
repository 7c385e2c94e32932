//! What each kind of graph node does: the operation a node holds, checked as the matching
//! stream call checks it when the node is added ([`Op`]), and that operation resolved again
//! for one launch ([`Ready`]): memory ranges inside live allocations, events and modules alive.

use std::collections::HashSet;
use std::ffi::{c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{
    CUDA_KERNEL_NODE_PARAMS_v1, CUDA_KERNEL_NODE_PARAMS_v2, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS,
    CUfunction, CUgraphNodeType, CUresult,
};
use streamexec::Stream;

use crate::copy::{Memset, Side, issue_copy, side};
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, as_host_fn, invalid, non_null};
use crate::event::{self, CuEvent};
use crate::launch::KernelLaunch;
use crate::memory::resolve;
use crate::module::{self, function_any};

/// `CUmemorytype` values.
const MEM_HOST: u32 = 1;
const MEM_DEVICE: u32 = 2;
const MEM_ARRAY: u32 = 3;
const MEM_UNIFIED: u32 = 4;

pub(super) fn not_supported(detail: impl Into<String>) -> CuErr {
    CuErr::new(CUresult::CUDA_ERROR_NOT_SUPPORTED, detail)
}

/// What a node does.
#[derive(Clone)]
pub(super) enum Op {
    Kernel(Arc<KernelLaunch>),
    Memset(Arc<MemsetNode>),
    Memcpy(Arc<MemcpyNode>),
    Host {
        f: unsafe extern "C" fn(*mut c_void),
        user: usize,
    },
    Empty,
    Record(Arc<CuEvent>),
    Wait(Arc<CuEvent>),
    /// A clone of the child graph: its operations in a topological order, flattened.
    Child(Arc<Vec<Op>>),
}

impl Op {
    pub(super) fn kind(&self) -> CUgraphNodeType {
        use CUgraphNodeType as T;
        match self {
            Op::Kernel(_) => T::CU_GRAPH_NODE_TYPE_KERNEL,
            Op::Memset(_) => T::CU_GRAPH_NODE_TYPE_MEMSET,
            Op::Memcpy(_) => T::CU_GRAPH_NODE_TYPE_MEMCPY,
            Op::Host { .. } => T::CU_GRAPH_NODE_TYPE_HOST,
            Op::Empty => T::CU_GRAPH_NODE_TYPE_EMPTY,
            Op::Record(_) => T::CU_GRAPH_NODE_TYPE_EVENT_RECORD,
            Op::Wait(_) => T::CU_GRAPH_NODE_TYPE_WAIT_EVENT,
            Op::Child(_) => T::CU_GRAPH_NODE_TYPE_GRAPH,
        }
    }

    pub(super) fn name(&self) -> &'static str {
        match self {
            Op::Kernel(_) => "kernel",
            Op::Memset(_) => "memset",
            Op::Memcpy(_) => "memcpy",
            Op::Host { .. } => "host",
            Op::Empty => "empty",
            Op::Record(_) => "event record",
            Op::Wait(_) => "event wait",
            Op::Child(_) => "child graph",
        }
    }

    /// The contexts this operation runs in (an event wait may wait for any context's event).
    pub(super) fn contexts(&self, out: &mut HashSet<usize>) {
        match self {
            Op::Kernel(k) => {
                out.insert(k.func.ctx);
            }
            Op::Memset(m) => {
                out.insert(m.ctx);
            }
            Op::Memcpy(m) => {
                out.insert(m.ctx);
            }
            Op::Record(e) => {
                out.insert(e.ctx);
            }
            Op::Child(ops) => ops.iter().for_each(|o| o.contexts(out)),
            Op::Host { .. } | Op::Empty | Op::Wait(_) => {}
        }
    }

    /// Checks what may have changed since the node was made (memory freed, an event
    /// destroyed, a module unloaded) and resolves its memory: what a launch enqueues, or
    /// `None` for a node that does nothing.
    pub(super) fn prepare(&self) -> CuResult<Option<Ready>> {
        driver()?;
        let live_event = |e: &Arc<CuEvent>| {
            if !event::is_live(e) {
                return Err(invalid(format!(
                    "event {:#x} of an event node was destroyed; a graph's events must outlive \
                     its launches",
                    e.handle
                )));
            }
            Ok(e.clone())
        };
        Ok(Some(match self {
            Op::Kernel(k) => {
                if !module::is_live(&k.func) {
                    return Err(invalid(format!(
                        "the module of kernel node function `{}` was unloaded; a graph's \
                         modules must outlive its launches",
                        k.func.entry.name
                    )));
                }
                Ready::Kernel(k.clone())
            }
            Op::Memset(m) => Ready::Memset(m.rows()?),
            Op::Memcpy(m) => Ready::Copy(m.prepare()?),
            &Op::Host { f, user } => Ready::Host { f, user },
            Op::Empty => return Ok(None),
            Op::Record(e) => Ready::Record(live_event(e)?),
            Op::Wait(e) => Ready::Wait(live_event(e)?),
            Op::Child(_) => {
                return Err(CuErr::new(
                    CUresult::CUDA_ERROR_UNKNOWN,
                    "internal error (please report): a child graph was not flattened",
                ));
            }
        }))
    }
}

/// A node's operation resolved for one launch.
pub(super) enum Ready {
    Kernel(Arc<KernelLaunch>),
    Memset(Vec<Memset>),
    Copy(ReadyCopy),
    Host {
        f: unsafe extern "C" fn(*mut c_void),
        user: usize,
    },
    Record(Arc<CuEvent>),
    Wait(Arc<CuEvent>),
}

impl Ready {
    /// Enqueues the operation on `se`; an error only where a range checked by
    /// [`Op::prepare`] no longer resolves (a module global unloaded in between).
    pub(super) fn issue(&self, se: &mut Stream) -> CuResult<()> {
        match self {
            Ready::Kernel(k) => k.issue(se),
            Ready::Memset(rows) => {
                for row in rows {
                    row.issue(se)?;
                }
            }
            Ready::Copy(c) => c.issue(se)?,
            &Ready::Host { f, user } => {
                se.then_host_callback(move || {
                    // SAFETY: the caller's contract (CUDA_HOST_NODE_PARAMS): `fn` may be called
                    // with `userData` whenever the node runs.
                    as_host_fn(|| unsafe { f(user as *mut c_void) });
                });
            }
            Ready::Record(e) => {
                se.then_record_event(&e.se);
            }
            Ready::Wait(e) => {
                // As cuStreamWaitEvent: the event's last record when the launch is made; an
                // event never recorded is no wait.
                if e.recorded() {
                    se.then_wait_for(&e.se);
                }
            }
        }
        Ok(())
    }
}

/// A memset node (`CUDA_MEMSET_NODE_PARAMS`).
pub(super) struct MemsetNode {
    pub(super) ctx: usize,
    /// The context whose allocation `dst` lies in.
    pub(super) mem_ctx: usize,
    dst: u64,
    pitch: usize,
    value: u32,
    elem: u32,
    width: usize,
    pub(super) height: usize,
}

impl MemsetNode {
    /// Reads and checks `p` (ranges must lie inside live allocations).
    ///
    /// # Safety
    /// `p` is null or valid for a read.
    pub(super) unsafe fn new(
        p: *const CUDA_MEMSET_NODE_PARAMS,
        ctx: usize,
    ) -> CuResult<MemsetNode> {
        non_null(p, "memsetParams")?;
        // SAFETY: non-null, and valid for a read (the caller's contract); no enum fields.
        let p = unsafe { p.read() };
        if ![1, 2, 4].contains(&p.elementSize) {
            return Err(invalid(format!(
                "elementSize is {}: a memset node sets elements of 1, 2 or 4 bytes",
                p.elementSize
            )));
        }
        if p.width == 0 || p.height == 0 {
            return Err(invalid(format!(
                "width {} and height {}: a memset node sets at least one element (height 1 for \
                 a 1-D memset)",
                p.width, p.height
            )));
        }
        let row = (p.width as u64)
            .checked_mul(p.elementSize.into())
            .ok_or_else(|| invalid("width * elementSize overflows"))?;
        if p.height > 1 && (p.pitch as u64) < row {
            return Err(invalid(format!(
                "pitch {} is less than a row's {row} bytes (width * elementSize)",
                p.pitch
            )));
        }
        let value = match p.elementSize {
            1 => p.value & 0xff,
            2 => p.value & 0xffff,
            _ => p.value,
        };
        let mut node = MemsetNode {
            ctx,
            mem_ctx: 0,
            dst: p.dst,
            pitch: p.pitch,
            value,
            elem: p.elementSize,
            width: p.width,
            height: p.height,
        };
        let rows = node.rows()?;
        node.mem_ctx = rows[0].ctx();
        Ok(node)
    }

    /// One checked memset per row (one in all where the rows are contiguous).
    fn rows(&self) -> CuResult<Vec<Memset>> {
        let elem = u64::from(self.elem);
        let row = self.width as u64 * elem;
        if self.height == 1 || self.pitch as u64 == row {
            let count = self
                .width
                .checked_mul(self.height)
                .ok_or_else(|| invalid("width * height overflows"))?;
            return Ok(vec![Memset::new(self.dst, self.value, elem, count)?]);
        }
        (0..self.height as u64)
            .map(|y| {
                let at = y
                    .checked_mul(self.pitch as u64)
                    .and_then(|o| self.dst.checked_add(o))
                    .ok_or_else(|| invalid("dst + height * pitch overflows"))?;
                Memset::new(at, self.value, elem, self.width)
            })
            .collect()
    }
}

/// `CUDA_MEMCPY3D` with its `CUmemorytype` fields as integers, so any value the caller passes
/// is a value this library can read (the layout is checked against cudarc's struct below).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RawMemcpy3D {
    pub(crate) srcXInBytes: usize,
    pub(crate) srcY: usize,
    pub(crate) srcZ: usize,
    pub(crate) srcLOD: usize,
    pub(crate) srcMemoryType: u32,
    pub(crate) srcHost: *const c_void,
    pub(crate) srcDevice: u64,
    pub(crate) srcArray: *mut c_void,
    pub(crate) reserved0: *mut c_void,
    pub(crate) srcPitch: usize,
    pub(crate) srcHeight: usize,
    pub(crate) dstXInBytes: usize,
    pub(crate) dstY: usize,
    pub(crate) dstZ: usize,
    pub(crate) dstLOD: usize,
    pub(crate) dstMemoryType: u32,
    pub(crate) dstHost: *mut c_void,
    pub(crate) dstDevice: u64,
    pub(crate) dstArray: *mut c_void,
    pub(crate) reserved1: *mut c_void,
    pub(crate) dstPitch: usize,
    pub(crate) dstHeight: usize,
    pub(crate) WidthInBytes: usize,
    pub(crate) Height: usize,
    pub(crate) Depth: usize,
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<RawMemcpy3D>() == size_of::<CUDA_MEMCPY3D>());
    assert!(offset_of!(RawMemcpy3D, srcMemoryType) == offset_of!(CUDA_MEMCPY3D, srcMemoryType));
    assert!(offset_of!(RawMemcpy3D, srcHost) == offset_of!(CUDA_MEMCPY3D, srcHost));
    assert!(offset_of!(RawMemcpy3D, dstMemoryType) == offset_of!(CUDA_MEMCPY3D, dstMemoryType));
    assert!(offset_of!(RawMemcpy3D, dstHost) == offset_of!(CUDA_MEMCPY3D, dstHost));
    assert!(offset_of!(RawMemcpy3D, Depth) == offset_of!(CUDA_MEMCPY3D, Depth));
};

/// One end of a memcpy node: its memory type, first byte and row pitch.
#[derive(Clone, Copy)]
struct End {
    kind: u32,
    start: u64,
    pitch: usize,
}

/// A memcpy node (1-D or 2-D).
pub(crate) struct MemcpyNode {
    pub(super) ctx: usize,
    dst: End,
    src: End,
    width: usize,
    pub(super) height: usize,
    /// The context whose allocation each end lies in (`None`: host memory), for
    /// `cuGraphExecMemcpyNodeSetParams`.
    pub(super) mem_ctx: (Option<usize>, Option<usize>),
}

/// A memcpy node's ends resolved for one launch (or one `cuMemcpy2D`/`cuMemcpy3D` slice).
pub(crate) struct ReadyCopy {
    dst: (Side, End),
    src: (Side, End),
    width: usize,
    height: usize,
}

impl ReadyCopy {
    /// Whether either end is host memory outside the address map (pageable or registered
    /// without mapping): such a copy touches it when it runs.
    pub(crate) fn touches_host(&self) -> bool {
        matches!(self.dst.0, Side::Host) || matches!(self.src.0, Side::Host)
    }

    /// Issues the copy's rows on `se`.
    pub(crate) fn issue(&self, se: &mut Stream) -> CuResult<()> {
        let ((ds, d), (ss, s)) = (&self.dst, &self.src);
        let contiguous = self.height == 1 || (d.pitch == self.width && s.pitch == self.width);
        let (rows, n) = if contiguous {
            (1, self.width * self.height)
        } else {
            (self.height, self.width)
        };
        for y in 0..rows as u64 {
            let (dst, src) = (d.start + y * d.pitch as u64, s.start + y * s.pitch as u64);
            // SAFETY: the caller's contract for a memcpy node: its host memory stays valid
            // while the graph may run; device ranges were checked (resolved) for this launch.
            unsafe { issue_copy(se, (ds, dst), (ss, src), n)? };
        }
        Ok(())
    }
}

impl MemcpyNode {
    /// Reads and checks `p`: 1-D and 2-D copies between host, device and unified memory.
    ///
    /// # Safety
    /// `p` is null or valid for a read.
    pub(crate) unsafe fn new(p: *const CUDA_MEMCPY3D, ctx: usize) -> CuResult<MemcpyNode> {
        non_null(p, "copyParams")?;
        // SAFETY: non-null, valid for a read (the caller's contract), and `RawMemcpy3D` has
        // the layout of `CUDA_MEMCPY3D` with integers where it has enums.
        let p = unsafe { p.cast::<RawMemcpy3D>().read() };
        for (what, kind) in [("src", p.srcMemoryType), ("dst", p.dstMemoryType)] {
            match kind {
                MEM_HOST | MEM_DEVICE | MEM_UNIFIED => {}
                MEM_ARRAY => {
                    return Err(not_supported(format!(
                        "{what}MemoryType is CU_MEMORYTYPE_ARRAY: the CPU driver (streamexec \
                         libcuda) has no CUDA arrays; copy linear memory (HOST, DEVICE or \
                         UNIFIED)"
                    )));
                }
                k => {
                    return Err(invalid(format!(
                        "{what}MemoryType {k} is not a CUmemorytype"
                    )));
                }
            }
        }
        if p.Depth > 1 || p.srcZ != 0 || p.dstZ != 0 {
            return Err(not_supported(format!(
                "a 3-D copy (Depth {}, srcZ {}, dstZ {}): the CPU driver (streamexec libcuda) \
                 offers 1-D and 2-D memcpy nodes; give Depth 1 and srcZ = dstZ = 0, or one \
                 node per slice",
                p.Depth, p.srcZ, p.dstZ
            )));
        }
        if p.srcLOD != 0 || p.dstLOD != 0 {
            return Err(invalid("srcLOD and dstLOD must be 0 (they are for arrays)"));
        }
        if !p.reserved0.is_null() || !p.reserved1.is_null() {
            return Err(invalid("reserved0 and reserved1 must be NULL"));
        }
        if p.WidthInBytes == 0 || p.Height == 0 || p.Depth == 0 {
            return Err(invalid(format!(
                "WidthInBytes {}, Height {}, Depth {}: a copy moves at least one byte (Height \
                 and Depth 1 for a 1-D copy)",
                p.WidthInBytes, p.Height, p.Depth
            )));
        }
        let end = |what: &str, kind: u32, host: u64, device: u64, x: usize, y: usize, pitch| {
            let base = if kind == MEM_HOST { host } else { device };
            if base == 0 {
                let field = if kind == MEM_HOST { "Host" } else { "Device" };
                return Err(invalid(format!("{what}{field} is NULL")));
            }
            let row = x
                .checked_add(p.WidthInBytes)
                .ok_or_else(|| invalid(format!("{what}XInBytes + WidthInBytes overflows")))?;
            if (p.Height > 1 || y > 0) && pitch < row {
                return Err(invalid(format!(
                    "{what}Pitch {pitch} is less than {what}XInBytes + WidthInBytes ({row})"
                )));
            }
            let start = (y as u64)
                .checked_mul(pitch as u64)
                .and_then(|o| o.checked_add(x as u64))
                .and_then(|o| base.checked_add(o))
                .ok_or_else(|| invalid(format!("{what}: the start address overflows")))?;
            Ok(End { kind, start, pitch })
        };
        let dst = end(
            "dst",
            p.dstMemoryType,
            p.dstHost as u64,
            p.dstDevice,
            p.dstXInBytes,
            p.dstY,
            p.dstPitch,
        )?;
        let src = end(
            "src",
            p.srcMemoryType,
            p.srcHost as u64,
            p.srcDevice,
            p.srcXInBytes,
            p.srcY,
            p.srcPitch,
        )?;
        let mut node = MemcpyNode {
            ctx,
            dst,
            src,
            width: p.WidthInBytes,
            height: p.Height,
            mem_ctx: (None, None),
        };
        let ready = node.prepare()?;
        let owner = |s: &Side| match s {
            Side::Device(r) => Some(r.ctx),
            Side::Host => None,
        };
        node.mem_ctx = (owner(&ready.dst.0), owner(&ready.src.0));
        Ok(node)
    }

    /// Bytes from the first to the last byte of an end.
    fn span(&self, e: &End) -> CuResult<usize> {
        (self.height - 1)
            .checked_mul(e.pitch)
            .and_then(|s| s.checked_add(self.width))
            .ok_or_else(|| invalid("Height * pitch overflows"))
    }

    /// Resolves both ends (device ranges inside live allocations) for one issue.
    pub(crate) fn prepare(&self) -> CuResult<ReadyCopy> {
        let resolve_end = |what: &str, e: End| -> CuResult<(Side, End)> {
            let n = self.span(&e)?;
            let side = if e.kind == MEM_DEVICE {
                Side::Device(resolve(e.start, n as u64, &format!("{what}Device"))?)
            } else {
                // HOST memory the address map holds (cuMemHostAlloc) is used through it;
                // UNIFIED addresses are whatever the map says.
                side(e.start, n, what)?
            };
            Ok((side, e))
        };
        Ok(ReadyCopy {
            dst: resolve_end("dst", self.dst)?,
            src: resolve_end("src", self.src)?,
            width: self.width,
            height: self.height,
        })
    }
}

/// `CUDA_KERNEL_NODE_PARAMS` (v1, or v2 with its `kern` field) as read from the caller.
pub(super) struct KernelParams {
    func: CUfunction,
    kern: bool,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    kernel_params: *mut *mut c_void,
    extra: *mut *mut c_void,
}

impl KernelParams {
    /// # Safety
    /// `p` is null or valid for a read.
    pub(super) unsafe fn v1(p: *const CUDA_KERNEL_NODE_PARAMS_v1) -> CuResult<KernelParams> {
        non_null(p, "nodeParams")?;
        // SAFETY: non-null, valid for a read (the caller's contract); no enum fields.
        let p = unsafe { p.read() };
        Ok(KernelParams {
            func: p.func,
            kern: false,
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            kernel_params: p.kernelParams,
            extra: p.extra,
        })
    }

    /// # Safety
    /// `p` is null or valid for a read.
    pub(super) unsafe fn v2(p: *const CUDA_KERNEL_NODE_PARAMS_v2) -> CuResult<KernelParams> {
        non_null(p, "nodeParams")?;
        // SAFETY: non-null, valid for a read (the caller's contract); no enum fields.
        let p = unsafe { p.read() };
        Ok(KernelParams {
            func: p.func,
            kern: !p.kern.is_null(),
            grid: [p.gridDimX, p.gridDimY, p.gridDimZ],
            block: [p.blockDimX, p.blockDimY, p.blockDimZ],
            shared: p.sharedMemBytes,
            kernel_params: p.kernelParams,
            extra: p.extra,
        })
    }

    /// The checked launch (arguments copied now).
    ///
    /// # Safety
    /// `kernelParams` or `extra` are valid as for `cuLaunchKernel`.
    pub(super) unsafe fn launch(&self) -> CuResult<KernelLaunch> {
        if self.func.is_null() {
            if self.kern {
                return Err(not_supported(
                    "a kernel node with a CUkernel (kern) instead of a CUfunction: the CPU \
                     driver (streamexec libcuda) has no cuLibrary API; set func \
                     (cuModuleGetFunction)",
                ));
            }
            return Err(invalid("nodeParams->func is NULL"));
        }
        let func = function_any(self.func)?;
        // SAFETY: the caller's contract.
        unsafe {
            KernelLaunch::new(
                func,
                self.grid,
                self.block,
                self.shared,
                self.kernel_params,
                self.extra,
            )
        }
    }
}
