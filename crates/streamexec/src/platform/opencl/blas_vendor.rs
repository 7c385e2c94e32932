//! BLAS through CLBlast (clblast.rs) on the stream's own queue: each call resolves its
//! operands to `cl_mem` + element offset at enqueue (so a bad operand is an enqueue-time
//! error), then runs the CLBlast routine from the stream's submitter (direct or deferred, in
//! stream order) and tracks the event it returns like any command of the stream.
//!
//! A call CLBlast cannot take as streamexec defines it returns `Ok(false)` and blas.rs runs the
//! built-in kernels instead: an operand in SVM (unified memory has no `cl_mem`), and GEMM/GEMV
//! whose A (or x) is not read (`alpha = 0` or an empty inner dimension, where the operands may
//! be empty slices that CLBlast would refuse).

use std::sync::Arc;

use opencl3::types::{cl_event, cl_mem};

use super::clblast::{COL_MAJOR, ClBlast, NO_TRANS, Routines, TRANS, check};
use super::device::OpenClExecutor;
use super::memory::ClAlloc;
use super::queue::StreamShared;
use super::stream::OpenClStream;
use crate::error::{Error, Result};
use crate::interface::StreamInterface;
use crate::interface::blas::{
    BlasElem, GemmCall, GemvCall, Level1Call, Level1Op, Operand, Transpose,
};
use crate::platform::downcast::downcast;

/// An operand as CLBlast takes it: its allocation's buffer and its offset in elements.
struct Buf {
    alloc: Arc<ClAlloc>,
    off: usize,
}

impl Buf {
    /// The buffer handle.
    fn mem(&self) -> cl_mem {
        // `Buf`s are made only of buffers (`OpenClExecutor::buf`).
        self.alloc.buffer().unwrap_or(std::ptr::null_mut())
    }
}

/// CLBlast's transpose argument (a real type's conjugate transpose is its transpose).
fn trans(t: Transpose) -> std::ffi::c_int {
    if t.is_transposed() { TRANS } else { NO_TRANS }
}

/// A validated extent or count as CLBlast's `size_t`.
fn us(v: u64) -> usize {
    v as usize // OpenCL devices addressable here have 64-bit size_t
}

impl OpenClExecutor {
    /// `o` as a buffer and element offset; `None` for SVM, which CLBlast cannot take.
    fn buf(&self, o: &Operand, size: u64, op: &str) -> Result<Option<Buf>> {
        let (alloc, off) = self.resolve(o.addr, o.len * size, op)?;
        if alloc.buffer().is_none() {
            return Ok(None);
        }
        if !(off as u64).is_multiple_of(size) {
            return Err(Error::invalid(
                op,
                format!(
                    "operand at {} is not aligned to its {size}-byte elements",
                    o.addr
                ),
            ));
        }
        Ok(Some(Buf {
            alloc,
            off: off / size as usize,
        }))
    }

    /// Every operand as a buffer, or `None` if any is SVM.
    fn bufs<const N: usize>(
        &self,
        ops: [&Operand; N],
        size: u64,
        op: &str,
    ) -> Result<Option<[Buf; N]>> {
        let mut out = Vec::with_capacity(N);
        for o in ops {
            match self.buf(o, size, op)? {
                Some(b) => out.push(b),
                None => return Ok(None),
            }
        }
        Ok(out.try_into().ok())
    }
}

/// The queue state of `stream` (an OpenCL stream of this executor).
fn stream_shared(stream: &dyn StreamInterface, op: &str) -> Result<Arc<StreamShared>> {
    let what = format!("the stream of {op}");
    let native = stream
        .native()
        .ok_or_else(|| Error::internal(format!("{what} has no native stream")))?;
    Ok(downcast::<OpenClStream>(native, &what)?.shared().clone())
}

/// Runs `call` (a CLBlast routine on the queue and event pointers it gets) on `stream`'s queue
/// in stream order, and tracks the event CLBlast returns as the stream's command.
fn enqueue(
    stream: &dyn StreamInterface,
    op: &str,
    call: impl FnOnce(*mut opencl3::types::cl_command_queue, *mut cl_event) -> Result<()>
    + Send
    + 'static,
) -> Result<()> {
    let shared = stream_shared(stream, op)?;
    shared.clone().submit(
        Box::new(move || {
            let mut queue = shared.queue.get();
            let mut event: cl_event = std::ptr::null_mut();
            call(&mut queue, &mut event)?;
            if !event.is_null() {
                drop(shared.track(event)); // the pending list keeps its own reference
            }
            Ok(())
        }),
        None,
        false,
    )
}

/// Dispatches on the element type: `$body` runs with `$r` the routines and `$t` a function
/// that turns an `f64` scalar into the element type.
macro_rules! by_elem {
    ($elem:expr, $cb:expr, |$r:ident, $t:ident| $body:expr) => {
        match $elem {
            BlasElem::F32 => {
                let $r: &Routines<f32> = &$cb.s;
                let $t = |v: f64| v as f32;
                $body
            }
            BlasElem::F64 => {
                let $r: &Routines<f64> = &$cb.d;
                let $t = |v: f64| v;
                $body
            }
        }
    };
}

/// GEMM and strided-batched GEMM; `Ok(false)` where the built-in kernels must run it.
///
/// # Safety
/// `c`'s operands are validated (the `BlasSupport` contract) and `stream` is `exec`'s.
pub(super) unsafe fn gemm(
    exec: &OpenClExecutor,
    cb: &Arc<ClBlast>,
    stream: &dyn StreamInterface,
    c: &GemmCall,
) -> Result<bool> {
    const OP: &str = "then_blas_gemm";
    if c.alpha == 0.0 || c.k == 0 {
        return Ok(false);
    }
    let Some([a, b, cc]) = exec.bufs([&c.a, &c.b, &c.c], c.elem.size(), OP)? else {
        return Ok(false);
    };
    let (cb, c) = (cb.clone(), *c);
    let (ta, tb) = (trans(c.trans_a), trans(c.trans_b));
    let (m, n, k) = (us(c.m), us(c.n), us(c.k));
    let (lda, ldb, ldc) = (us(c.lda), us(c.ldb), us(c.ldc));
    enqueue(stream, OP, move |q, ev| {
        by_elem!(c.elem, cb, |r, t| {
            let single = c.batch == 1;
            let name = match (c.elem, single) {
                (BlasElem::F32, true) => "CLBlastSgemm",
                (BlasElem::F64, true) => "CLBlastDgemm",
                (BlasElem::F32, false) => "CLBlastSgemmStridedBatched",
                (BlasElem::F64, false) => "CLBlastDgemmStridedBatched",
            };
            // SAFETY: live buffers covering every extent of the call (validated at enqueue),
            // the stream's live queue; CLBlast returns its last command's event in `ev`.
            let status = unsafe {
                if single {
                    (r.gemm)(
                        COL_MAJOR,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        t(c.alpha),
                        a.mem(),
                        a.off,
                        lda,
                        b.mem(),
                        b.off,
                        ldb,
                        t(c.beta),
                        cc.mem(),
                        cc.off,
                        ldc,
                        q,
                        ev,
                    )
                } else {
                    (r.gemm_strided)(
                        COL_MAJOR,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        t(c.alpha),
                        a.mem(),
                        a.off,
                        lda,
                        us(c.stride_a),
                        b.mem(),
                        b.off,
                        ldb,
                        us(c.stride_b),
                        t(c.beta),
                        cc.mem(),
                        cc.off,
                        ldc,
                        us(c.stride_c),
                        us(c.batch),
                        q,
                        ev,
                    )
                }
            };
            check(name, status)
        })
    })?;
    Ok(true)
}

/// GEMV; `Ok(false)` where the built-in kernels must run it.
///
/// # Safety
/// As [`gemm`].
pub(super) unsafe fn gemv(
    exec: &OpenClExecutor,
    cb: &Arc<ClBlast>,
    stream: &dyn StreamInterface,
    c: &GemvCall,
) -> Result<bool> {
    const OP: &str = "then_blas_gemv";
    let (lx, ly) = if c.trans.is_transposed() {
        (c.m, c.n)
    } else {
        (c.n, c.m)
    };
    // CLBlast reads y even when beta = 0 (NaN·0 propagates); streamexec's contract says y is
    // not read then. A contiguous y is zeroed first; a strided one (whose gaps must stay as
    // they are) goes to the built-in kernels.
    if c.alpha == 0.0 || lx == 0 || (c.beta == 0.0 && c.incy != 1) {
        return Ok(false);
    }
    let Some([a, x, y]) = exec.bufs([&c.a, &c.x, &c.y], c.elem.size(), OP)? else {
        return Ok(false);
    };
    let (cb, c) = (cb.clone(), *c);
    let zero_y = (c.beta == 0.0).then(|| {
        let size = c.elem.size() as usize;
        (
            y.alloc.clone(),
            y.off * size,
            us(ly) * size,
            vec![0u8; size],
        )
    });
    let shared = stream_shared(stream, OP)?;
    enqueue(stream, OP, move |q, ev| {
        if let Some((alloc, off, len, pattern)) = zero_y {
            // SAFETY: y's validated range (`ly` contiguous elements), on the stream's queue.
            let raw = unsafe { alloc.fill(*q, off, &pattern, len) }
                .map_err(|e| super::status::cl_error("clEnqueueFillBuffer (gemv's y)", e))?;
            drop(shared.track(raw));
        }
        by_elem!(c.elem, cb, |r, t| {
            let name = if c.elem == BlasElem::F32 {
                "CLBlastSgemv"
            } else {
                "CLBlastDgemv"
            };
            // SAFETY: as in `gemm`.
            let status = unsafe {
                (r.gemv)(
                    COL_MAJOR,
                    trans(c.trans),
                    us(c.m),
                    us(c.n),
                    t(c.alpha),
                    a.mem(),
                    a.off,
                    us(c.lda),
                    x.mem(),
                    x.off,
                    us(c.incx),
                    t(c.beta),
                    y.mem(),
                    y.off,
                    us(c.incy),
                    q,
                    ev,
                )
            };
            check(name, status)
        })
    })?;
    Ok(true)
}

/// axpy, scal, copy, dot, nrm2, asum; `Ok(false)` where the built-in kernels must run it.
///
/// # Safety
/// As [`gemm`].
pub(super) unsafe fn level1(
    exec: &OpenClExecutor,
    cb: &Arc<ClBlast>,
    stream: &dyn StreamInterface,
    c: &Level1Call,
) -> Result<bool> {
    let op = format!("then_blas_{}", c.op.name());
    let size = c.elem.size();
    let Some([x]) = exec.bufs([&c.x], size, &op)? else {
        return Ok(false);
    };
    let mut svm = false;
    let mut get = |o: Option<Operand>| -> Result<Option<Buf>> {
        let Some(o) = o else { return Ok(None) };
        let b = exec.buf(&o, size, &op)?;
        svm |= b.is_none();
        Ok(b)
    };
    let (y, r) = (get(c.y)?, get(c.result)?);
    if svm {
        return Ok(false);
    }
    let (cb, c) = (cb.clone(), *c);
    let name = format!(
        "CLBlast{}{}",
        c.elem.prefix().to_ascii_uppercase(),
        c.op.name()
    );
    let needs_y = matches!(c.op, Level1Op::Axpy { .. } | Level1Op::Copy | Level1Op::Dot);
    let needs_r = matches!(c.op, Level1Op::Dot | Level1Op::Nrm2 | Level1Op::Asum);
    if (needs_y && y.is_none()) || (needs_r && r.is_none()) {
        return Err(Error::internal(format!("{name}: an operand is missing")));
    }
    let (n, incx, incy) = (us(c.n), us(c.incx), us(c.incy));
    enqueue(stream, &op, move |q, ev| {
        // Operands a routine does not take are x again (never passed).
        let (ym, yo) = y.as_ref().map_or((x.mem(), x.off), |b| (b.mem(), b.off));
        let (rm, ro) = r.as_ref().map_or((x.mem(), x.off), |b| (b.mem(), b.off));
        let (xm, xo) = (x.mem(), x.off);
        by_elem!(c.elem, cb, |rt, t| {
            // SAFETY: as in `gemm`; each routine gets the operands its op has (checked above).
            let status = unsafe {
                match c.op {
                    Level1Op::Axpy { alpha } => {
                        (rt.axpy)(n, t(alpha), xm, xo, incx, ym, yo, incy, q, ev)
                    }
                    Level1Op::Scal { alpha } => (rt.scal)(n, t(alpha), xm, xo, incx, q, ev),
                    Level1Op::Copy => (rt.copy)(n, xm, xo, incx, ym, yo, incy, q, ev),
                    Level1Op::Dot => (rt.dot)(n, rm, ro, xm, xo, incx, ym, yo, incy, q, ev),
                    Level1Op::Nrm2 => (rt.nrm2)(n, rm, ro, xm, xo, incx, q, ev),
                    Level1Op::Asum => (rt.asum)(n, rm, ro, xm, xo, incx, q, ev),
                }
            };
            check(&name, status)
        })
    })?;
    Ok(true)
}
