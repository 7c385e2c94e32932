//! BLAS on OpenCL: CLBlast where the executor's `PluginConfig` chose it (blas_vendor.rs, which
//! hands back the calls CLBlast cannot take), else GEMM (tiled, local memory), GEMV, level 1
//! and one-work-group reductions as built-in kernels of `builtins.cl` (see builtins.rs for how
//! they are built and launched).

use super::blas_vendor;
use super::builtins::{WG, groups, ptr};
use super::device::OpenClExecutor;
use crate::error::{Error, Result};
use crate::interface::blas::{BlasElem, GemmCall, GemvCall, Level1Call, Level1Op};
use crate::interface::{BlasSupport, StreamInterface};
use crate::types::{BlockDim, Packable, PackedArg, ThreadDim};

/// GEMM tile edge and work-items per tile edge (`TS`, `RT` in builtins.cl).
const GEMM_TS: u64 = 64;
const GEMM_RT: u32 = 8;
/// Work-group size of the reductions (`RED_WG`).
const RED_WG: u32 = 256;

/// A scalar of the call's element type.
fn real(elem: BlasElem, v: f64) -> PackedArg {
    match elem {
        BlasElem::F32 => (v as f32).pack(),
        BlasElem::F64 => v.pack(),
    }
}

fn flag(b: bool) -> PackedArg {
    i32::from(b).pack()
}

impl BlasSupport for OpenClExecutor {
    unsafe fn gemm(&self, stream: &dyn StreamInterface, c: &GemmCall) -> Result<()> {
        if let Some(cb) = &self.clblast
            // SAFETY: the trait method's contract, passed on.
            && unsafe { blas_vendor::gemm(self, cb, stream, c)? }
        {
            return Ok(());
        }
        const OP: &str = "then_blas_gemm";
        let (size, fp64) = (c.elem.size(), c.elem == BlasElem::F64);
        let [a, offa] = ptr(&c.a, size, OP)?;
        let [b, offb] = ptr(&c.b, size, OP)?;
        let [cc, offc] = ptr(&c.c, size, OP)?;
        let args = [
            c.m.pack(),
            c.n.pack(),
            c.k.pack(),
            real(c.elem, c.alpha),
            a,
            offa,
            c.lda.pack(),
            c.stride_a.pack(),
            flag(c.trans_a.is_transposed()),
            b,
            offb,
            c.ldb.pack(),
            c.stride_b.pack(),
            flag(c.trans_b.is_transposed()),
            real(c.elem, c.beta),
            cc,
            offc,
            c.ldc.pack(),
            c.stride_c.pack(),
        ];
        let batch = u32::try_from(c.batch)
            .map_err(|_| Error::invalid(OP, format!("batch {} exceeds u32", c.batch)))?;
        let blocks = BlockDim::new(groups(c.m, GEMM_TS, OP)?, groups(c.n, GEMM_TS, OP)?, batch);
        let threads = ThreadDim::new(GEMM_RT, GEMM_RT, 1);
        // SAFETY: `args` points only at the validated operands of this call (the
        // trait method's contract).
        unsafe { self.run_builtin(stream, (fp64, "se_gemm", OP), threads, blocks, &args) }
    }

    unsafe fn gemv(&self, stream: &dyn StreamInterface, c: &GemvCall) -> Result<()> {
        if let Some(cb) = &self.clblast
            // SAFETY: the trait method's contract, passed on.
            && unsafe { blas_vendor::gemv(self, cb, stream, c)? }
        {
            return Ok(());
        }
        const OP: &str = "then_blas_gemv";
        let (size, fp64) = (c.elem.size(), c.elem == BlasElem::F64);
        let [a, offa] = ptr(&c.a, size, OP)?;
        let [x, offx] = ptr(&c.x, size, OP)?;
        let [y, offy] = ptr(&c.y, size, OP)?;
        let args = [
            c.m.pack(),
            c.n.pack(),
            real(c.elem, c.alpha),
            a,
            offa,
            c.lda.pack(),
            flag(c.trans.is_transposed()),
            x,
            offx,
            c.incx.pack(),
            real(c.elem, c.beta),
            y,
            offy,
            c.incy.pack(),
        ];
        let ly = if c.trans.is_transposed() { c.n } else { c.m };
        let blocks = BlockDim::new(groups(ly, WG, OP)?, 1, 1);
        // SAFETY: `args` points only at the validated operands of this call (the
        // trait method's contract).
        unsafe {
            self.run_builtin(
                stream,
                (fp64, "se_gemv", OP),
                ThreadDim::new(WG as u32, 1, 1),
                blocks,
                &args,
            )
        }
    }

    unsafe fn level1(&self, stream: &dyn StreamInterface, c: &Level1Call) -> Result<()> {
        if let Some(cb) = &self.clblast
            // SAFETY: the trait method's contract, passed on.
            && unsafe { blas_vendor::level1(self, cb, stream, c)? }
        {
            return Ok(());
        }
        let op = format!("then_blas_{}", c.op.name());
        let (size, fp64) = (c.elem.size(), c.elem == BlasElem::F64);
        let [x, offx] = ptr(&c.x, size, &op)?;
        // Kernels without y (scal, nrm2, asum) get x again in its place; they never touch it.
        let [y, offy] = ptr(c.y.as_ref().unwrap_or(&c.x), size, &op)?;
        let (code, alpha, reduce) = match c.op {
            Level1Op::Axpy { alpha } => (0i32, alpha, false),
            Level1Op::Scal { alpha } => (1, alpha, false),
            Level1Op::Copy => (2, 0.0, false),
            Level1Op::Dot => (0, 0.0, true),
            Level1Op::Nrm2 => (1, 0.0, true),
            Level1Op::Asum => (2, 0.0, true),
        };
        if !reduce {
            let args = [
                code.pack(),
                c.n.pack(),
                real(c.elem, alpha),
                x,
                offx,
                c.incx.pack(),
                y,
                offy,
                c.incy.pack(),
            ];
            let blocks = BlockDim::new(groups(c.n, WG, &op)?, 1, 1);
            let threads = ThreadDim::new(WG as u32, 1, 1);
            // SAFETY: `args` points only at the validated operands of this call (the
            // trait method's contract).
            return unsafe {
                self.run_builtin(stream, (fp64, "se_level1", &op), threads, blocks, &args)
            };
        }
        let result = c
            .result
            .ok_or_else(|| Error::invalid(&op, "no result operand"))?;
        let [r, offr] = ptr(&result, size, &op)?;
        let args = [
            code.pack(),
            c.n.pack(),
            x,
            offx,
            c.incx.pack(),
            y,
            offy,
            c.incy.pack(),
            r,
            offr,
        ];
        let threads = ThreadDim::new(RED_WG, 1, 1);
        // SAFETY: `args` points only at the validated operands of this call (the
        // trait method's contract).
        unsafe {
            self.run_builtin(
                stream,
                (fp64, "se_reduce", &op),
                threads,
                BlockDim::new(1, 1, 1),
                &args,
            )
        }
    }
}
