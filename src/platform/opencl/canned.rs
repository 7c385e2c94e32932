//! BLAS and Philox on OpenCL: the built-in kernels of `canned.cl`, built on first use (once per
//! executor and precision) and launched through the stream's ordinary `launch`, so they follow
//! the stream's ordering, error state and direct/deferred modes like any user kernel.
//!
//! Operands are passed as their allocation's base buffer plus an element offset (not as
//! sub-buffers), so slices at any element offset work regardless of the device's
//! base-address alignment.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::executor::{OFFSET_BITS, OpenClExecutor};
use crate::error::{Error, Result};
use crate::interface::blas::{BlasElem, GemmCall, GemvCall, Level1Call, Level1Op, Operand};
use crate::interface::rng::PhiloxFill;
use crate::interface::{BlasSupport, RngSupport};
use crate::interface::{KernelInterface, StreamInterface};
use crate::types::MultiKernelLoaderSpec;
use crate::types::RandDistribution;
use crate::types::{BlockDim, Packable, PackedArg, ThreadDim};
use crate::types::{DeviceAddress, LaunchDims};

const SOURCE: &str = include_str!("canned.cl");

/// GEMM tile edge and work-items per tile edge (`TS`, `RT` in canned.cl).
const GEMM_TS: u64 = 64;
const GEMM_RT: u32 = 8;
/// Work-group size of the element-wise kernels and fills; of the reductions (`RED_WG`).
const WG: u64 = 64;
const RED_WG: u32 = 256;

/// A built-in kernel: double precision or not, and its name.
type KernelKey = (bool, &'static str);

/// Built kernels of one executor.
#[derive(Default)]
pub(crate) struct CannedKernels(Mutex<HashMap<KernelKey, Arc<dyn KernelInterface>>>);

fn arity(name: &str) -> usize {
    match name {
        "se_gemm" => 19,
        "se_gemv" => 14,
        "se_level1" => 9,
        "se_reduce" => 10,
        "se_philox_gaussian_f32" | "se_philox_gaussian_f64" => 10,
        _ => 8,
    }
}

impl OpenClExecutor {
    fn canned_kernel(
        &self,
        fp64: bool,
        name: &'static str,
        op: &str,
    ) -> Result<Arc<dyn KernelInterface>> {
        if let Some(k) = self.canned.0.lock().get(&(fp64, name)) {
            return Ok(k.clone());
        }
        let options = if fp64 {
            "-DSE_T=double -DSE_FP64"
        } else {
            "-DSE_T=float"
        };
        let spec = MultiKernelLoaderSpec::new(arity(name))
            .add_opencl_text_in_memory(SOURCE, name)
            .with_opencl_build_options(options);
        use crate::interface::StreamExecutorInterface;
        let k = self.load_kernel(&spec).map_err(|e| match e {
            Error::KernelLoad { detail, .. } if fp64 => Error::unsupported(
                super::PLATFORM,
                op,
                format!(
                    "{} could not build the double-precision built-in kernels (it needs \
                     cl_khr_fp64); use f32, or the host platform: {detail}",
                    self.description.name
                ),
            ),
            e => e,
        })?;
        self.canned.0.lock().insert((fp64, name), k.clone());
        Ok(k)
    }

    /// Launches built-in kernel `name` on `stream`.
    ///
    /// # Safety
    /// `stream` belongs to this executor and every pointer in `args` covers only validated
    /// operands of the call (the contract of `BlasSupport` / `RngSupport`).
    unsafe fn run(
        &self,
        stream: &dyn StreamInterface,
        (fp64, name, op): (bool, &'static str, &str),
        threads: ThreadDim,
        blocks: BlockDim,
        args: &[PackedArg],
    ) -> Result<()> {
        let k = self.canned_kernel(fp64, name, op)?;
        let dims = LaunchDims {
            threads,
            blocks,
            dynamic_shared_bytes: 0,
        };
        // SAFETY: the kernel is ours, built on this executor with this parameter list; the
        // pointers are validated operands (this function's contract).
        unsafe { stream.launch(&k, &dims, args) }
    }
}

/// The allocation's base pointer (covering `o`) and `o`'s offset in elements.
fn ptr(o: &Operand, size: u64, op: &str) -> Result<[PackedArg; 2]> {
    let off = o.addr.raw() & ((1 << OFFSET_BITS) - 1);
    if !off.is_multiple_of(size) {
        return Err(Error::invalid(
            op,
            format!(
                "operand at {} is not aligned to its {size}-byte elements",
                o.addr
            ),
        ));
    }
    Ok([
        PackedArg::backend_pointer(
            DeviceAddress::new(o.addr.raw() - off),
            off + o.len * size,
            size as usize,
            "canned operand",
        ),
        (off / size).pack(),
    ])
}

/// A scalar of the call's element type.
fn real(elem: BlasElem, v: f64) -> PackedArg {
    match elem {
        BlasElem::F32 => (v as f32).pack(),
        BlasElem::F64 => v.pack(),
    }
}

/// Groups of `per` work-items covering `items`, as a grid extent.
fn groups(items: u64, per: u64, op: &str) -> Result<u32> {
    u32::try_from(items.div_ceil(per)).map_err(|_| {
        Error::invalid(
            op,
            format!("{items} work-items exceed one launch; split the call"),
        )
    })
}

fn flag(b: bool) -> PackedArg {
    i32::from(b).pack()
}

impl BlasSupport for OpenClExecutor {
    unsafe fn gemm(&self, stream: &dyn StreamInterface, c: &GemmCall) -> Result<()> {
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
        unsafe { self.run(stream, (fp64, "se_gemm", OP), threads, blocks, &args) }
    }

    unsafe fn gemv(&self, stream: &dyn StreamInterface, c: &GemvCall) -> Result<()> {
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
            self.run(
                stream,
                (fp64, "se_gemv", OP),
                ThreadDim::new(WG as u32, 1, 1),
                blocks,
                &args,
            )
        }
    }

    unsafe fn level1(&self, stream: &dyn StreamInterface, c: &Level1Call) -> Result<()> {
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
            return unsafe { self.run(stream, (fp64, "se_level1", &op), threads, blocks, &args) };
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
            self.run(
                stream,
                (fp64, "se_reduce", &op),
                threads,
                BlockDim::new(1, 1, 1),
                &args,
            )
        }
    }
}

impl RngSupport for OpenClExecutor {
    unsafe fn philox_fill(&self, stream: &dyn StreamInterface, f: &PhiloxFill) -> Result<()> {
        let (name, fp64, op, gauss) = match f.dist {
            RandDistribution::U32 => ("se_philox_u32", false, "then_populate_rand_uniform", None),
            RandDistribution::UniformF32 => (
                "se_philox_uniform_f32",
                false,
                "then_populate_rand_uniform",
                None,
            ),
            RandDistribution::UniformF64 => (
                "se_philox_uniform_f64",
                true,
                "then_populate_rand_uniform",
                None,
            ),
            RandDistribution::GaussianF32 { mean, stddev } => (
                "se_philox_gaussian_f32",
                true,
                "then_populate_rand_gaussian",
                Some((mean, stddev)),
            ),
            RandDistribution::GaussianF64 { mean, stddev } => (
                "se_philox_gaussian_f64",
                true,
                "then_populate_rand_gaussian",
                Some((mean, stddev)),
            ),
        };
        let [dst, off] = ptr(&f.dst, f.dist.elem_size(), op)?;
        let mut args = vec![
            dst,
            off,
            f.count.pack(),
            f.key[0].pack(),
            f.key[1].pack(),
            f.counter_hi[0].pack(),
            f.counter_hi[1].pack(),
            f.offset.pack(),
        ];
        if let Some((mean, stddev)) = gauss {
            args.extend([mean.pack(), stddev.pack()]);
        }
        let blocks = f.count.div_ceil(f.dist.elems_per_block());
        let grid = BlockDim::new(groups(blocks, WG, op)?, 1, 1);
        // SAFETY: `args` points only at the validated operands of this call (the
        // trait method's contract).
        unsafe {
            self.run(
                stream,
                (fp64, name, op),
                ThreadDim::new(WG as u32, 1, 1),
                grid,
                &args,
            )
        }
    }
}
