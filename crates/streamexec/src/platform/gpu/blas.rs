//! BLAS on CUDA-like devices, from one of two sources chosen per call:
//!
//! - the driver's vendor library (`Driver::blas`, cuBLAS on CUDA) when it is installed, called
//!   in stream order through the stream's submitter on its driver stream handle, so calls keep
//!   stream order in deferred mode too;
//! - otherwise (`Driver::blas` is `Ok(None)`) the built-in `se_blas_*` kernels of
//!   kernels/canned.cu (`Driver::CANNED_PTX`), launched like any kernel on the user's stream,
//!   as rng.rs launches the Philox fills. [`Canned`] packs their arguments and picks their grids;
//!   it only needs a kernel loader and the device's grid limits, so the tests run the very same
//!   launches on the host platform's PTX engine.
//!
//! A vendor library that is installed but fails (`cublasCreate` refuses) is an error, not a
//! reason to fall back.

use std::sync::Arc;

use super::stream::GpuStream;
use super::{Driver, GpuBlas, GpuExecutor};
use crate::error::{Error, Result};
use crate::interface::blas::{BlasElem, GemmCall, GemvCall, Level1Call, Level1Op, Operand};
use crate::interface::{BlasSupport, KernelInterface, StreamExecutorInterface, StreamInterface};
use crate::platform::downcast::downcast;
use crate::types::Served;
use crate::types::{BlockDim, LaunchDims, Packable, PackedArg, ThreadDim};

/// The stream as this backend's, for calls that need its driver handle (the handle layer
/// passes only streams of the executor whose `BlasSupport` this is).
pub(super) fn gpu_stream<'s, D: Driver>(
    stream: &'s dyn StreamInterface,
    op: &str,
) -> Result<&'s GpuStream<D>> {
    let what = format!("the stream of {op}");
    let native = stream
        .native()
        .ok_or_else(|| Error::internal(format!("{what} has no native stream")))?;
    downcast::<GpuStream<D>>(native, &what)
}

/// The vendor library inside a submitted call (the call was routed there because it exists).
fn vendor<D: Driver>(drv: &D) -> Result<&dyn GpuBlas> {
    drv.blas()?
        .ok_or_else(|| Error::internal("the BLAS library was found at enqueue but not at run"))
}

impl<D: Driver> GpuExecutor<D> {
    /// Runs `f` with the built-in kernels of this device; `Unsupported` where the driver has none.
    fn canned<R>(&self, op: &str, f: impl FnOnce(&Canned<'_>) -> Result<R>) -> Result<R> {
        let Some(ptx) = D::CANNED_PTX else {
            return Err(Error::unsupported(
                D::PLATFORM,
                op,
                "no BLAS library is installed and this platform has no built-in kernels",
            ));
        };
        let load = |name: &'static str| self.builtin_kernel(ptx, name);
        f(&Canned {
            kernel: &load,
            max_grid: self.description().max_grid_dims,
        })
    }
}

impl<D: Driver> BlasSupport for GpuExecutor<D> {
    unsafe fn gemm(&self, stream: &dyn StreamInterface, call: &GemmCall) -> Result<()> {
        const OP: &str = "then_blas_gemm";
        if self.blas_served != Served::Vendor {
            // SAFETY: the operands are this call's, validated by the caller (the contract).
            return self.canned(OP, |k| unsafe { k.gemm(stream, call) });
        }
        let call = *call;
        gpu_stream::<D>(stream, OP)?.submit_driver(move |drv, s| vendor(drv)?.gemm(s, &call))
    }

    unsafe fn gemv(&self, stream: &dyn StreamInterface, call: &GemvCall) -> Result<()> {
        const OP: &str = "then_blas_gemv";
        if self.blas_served != Served::Vendor {
            // SAFETY: the operands are this call's, validated by the caller (the contract).
            return self.canned(OP, |k| unsafe { k.gemv(stream, call) });
        }
        let call = *call;
        gpu_stream::<D>(stream, OP)?.submit_driver(move |drv, s| vendor(drv)?.gemv(s, &call))
    }

    unsafe fn level1(&self, stream: &dyn StreamInterface, call: &Level1Call) -> Result<()> {
        const OP: &str = "then_blas_*";
        if self.blas_served != Served::Vendor {
            // SAFETY: the operands are this call's, validated by the caller (the contract).
            return self.canned(OP, |k| unsafe { k.level1(stream, call) });
        }
        let call = *call;
        gpu_stream::<D>(stream, OP)?.submit_driver(move |drv, s| vendor(drv)?.level1(s, &call))
    }
}

/// Threads per block of GEMV, level 1 and the reductions (`SE_THREADS` in canned.cu).
pub(super) const THREADS: u32 = 256;
/// GEMM tile edge (`SE_TILE`): a block of `TILE × TILE` threads computes a tile of C.
pub(super) const TILE: u32 = 16;
/// Elements of `Aᵀx` one block of `se_blas_gemv_t_*` computes (`SE_WARPS`: one per warp).
pub(super) const GEMV_T_PER_BLOCK: u64 = (THREADS / 32) as u64;

/// The built-in BLAS kernels of kernels/canned.cu on one device: which kernel a call runs,
/// its arguments (in the order canned.cu declares them) and its grid.
pub(super) struct Canned<'a> {
    /// Loads (or finds) the built-in kernel of that name.
    pub kernel: &'a dyn Fn(&'static str) -> Result<Arc<dyn KernelInterface>>,
    /// The device's grid limits; every kernel loops over its work with grid strides, so a
    /// grid capped at these computes everything.
    pub max_grid: [u32; 3],
}

/// `se_blas_<op>_<f32|f64>`.
fn kernel_name(op: &str, elem: BlasElem) -> Result<&'static str> {
    let f64 = elem == BlasElem::F64;
    Ok(match op {
        "gemm" if f64 => "se_blas_gemm_f64",
        "gemm" => "se_blas_gemm_f32",
        "gemv_n" if f64 => "se_blas_gemv_n_f64",
        "gemv_n" => "se_blas_gemv_n_f32",
        "gemv_t" if f64 => "se_blas_gemv_t_f64",
        "gemv_t" => "se_blas_gemv_t_f32",
        "axpy" if f64 => "se_blas_axpy_f64",
        "axpy" => "se_blas_axpy_f32",
        "scal" if f64 => "se_blas_scal_f64",
        "scal" => "se_blas_scal_f32",
        "copy" if f64 => "se_blas_copy_f64",
        "copy" => "se_blas_copy_f32",
        "dot" if f64 => "se_blas_dot_f64",
        "dot" => "se_blas_dot_f32",
        "nrm2" if f64 => "se_blas_nrm2_f64",
        "nrm2" => "se_blas_nrm2_f32",
        "asum" if f64 => "se_blas_asum_f64",
        "asum" => "se_blas_asum_f32",
        _ => return Err(Error::internal(format!("no built-in BLAS kernel `{op}`"))),
    })
}

/// An operand as a pointer argument covering its validated range.
fn ptr(o: &Operand, elem: BlasElem) -> PackedArg {
    let (size, name) = match elem {
        BlasElem::F32 => (4, "f32"),
        BlasElem::F64 => (8, "f64"),
    };
    PackedArg::backend_pointer(o.addr, o.len * size, size as usize, name)
}

/// `want` blocks, at least 1 and at most `max`.
fn grid(want: u64, max: u32) -> u32 {
    want.clamp(1, u64::from(max.max(1))) as u32
}

impl Canned<'_> {
    /// Launches built-in kernel `op` for `elem` on `stream`.
    ///
    /// # Safety
    /// Every pointer in `args` is a validated operand of the call, and `args` is the
    /// parameter list canned.cu declares for that kernel.
    unsafe fn launch(
        &self,
        stream: &dyn StreamInterface,
        (op, elem): (&str, BlasElem),
        threads: ThreadDim,
        blocks: BlockDim,
        args: &[PackedArg],
    ) -> Result<()> {
        let kernel = (self.kernel)(kernel_name(op, elem)?)?;
        let dims = LaunchDims {
            threads,
            blocks,
            dynamic_shared_bytes: 0,
            cooperative: false,
        };
        // SAFETY: the pointers are validated operands and the parameter list is the kernel's
        // (this function's contract; tests/canned_ptx_blas.rs and canned_blas_tests.rs run
        // them on the host's PTX engine, which checks sizes); the grid fits the device.
        unsafe { stream.launch(&kernel, &dims, args) }
    }

    /// GEMM and strided-batched GEMM: one 16×16 block per tile of C and matrix of the batch.
    ///
    /// # Safety
    /// The operands of `c` are validated ([`BlasSupport::gemm`]'s contract).
    pub(super) unsafe fn gemm(&self, stream: &dyn StreamInterface, c: &GemmCall) -> Result<()> {
        if (c.alpha == 0.0 || c.k == 0) && c.beta == 1.0 {
            return Ok(()); // C = C, which the host does not write either
        }
        let args = [
            ptr(&c.a, c.elem),
            ptr(&c.b, c.elem),
            ptr(&c.c, c.elem),
            c.m.pack(),
            c.n.pack(),
            c.k.pack(),
            c.lda.pack(),
            c.ldb.pack(),
            c.ldc.pack(),
            c.stride_a.pack(),
            c.stride_b.pack(),
            c.stride_c.pack(),
            c.batch.pack(),
            u32::from(c.trans_a.is_transposed()).pack(),
            u32::from(c.trans_b.is_transposed()).pack(),
            c.alpha.pack(),
            c.beta.pack(),
        ];
        let tile = u64::from(TILE);
        let [gx, gy, gz] = self.max_grid;
        let blocks = BlockDim::new(
            grid(c.m.div_ceil(tile), gx),
            grid(c.n.div_ceil(tile), gy),
            grid(c.batch, gz),
        );
        // SAFETY: `args` holds this call's operands in se_blas_gemm's parameter order.
        unsafe {
            self.launch(
                stream,
                ("gemm", c.elem),
                ThreadDim::new(TILE, TILE, 1),
                blocks,
                &args,
            )
        }
    }

    /// GEMV: a thread per element of y without transpose, a warp per element transposed.
    ///
    /// # Safety
    /// The operands of `c` are validated ([`BlasSupport::gemv`]'s contract).
    pub(super) unsafe fn gemv(&self, stream: &dyn StreamInterface, c: &GemvCall) -> Result<()> {
        let args = [
            ptr(&c.a, c.elem),
            ptr(&c.x, c.elem),
            ptr(&c.y, c.elem),
            c.m.pack(),
            c.n.pack(),
            c.lda.pack(),
            c.incx.pack(),
            c.incy.pack(),
            c.alpha.pack(),
            c.beta.pack(),
        ];
        let (op, blocks) = if c.trans.is_transposed() {
            ("gemv_t", c.n.div_ceil(GEMV_T_PER_BLOCK))
        } else {
            ("gemv_n", c.m.div_ceil(u64::from(THREADS)))
        };
        let blocks = BlockDim::new(grid(blocks, self.max_grid[0]), 1, 1);
        // SAFETY: `args` holds this call's operands in se_blas_gemv_*'s parameter order.
        unsafe {
            self.launch(
                stream,
                (op, c.elem),
                ThreadDim::new(THREADS, 1, 1),
                blocks,
                &args,
            )
        }
    }

    /// axpy, scal and copy over a grid of `n` threads (capped); dot, nrm2 and asum in one
    /// block, so their sums have one fixed order.
    ///
    /// # Safety
    /// The operands of `c` are validated ([`BlasSupport::level1`]'s contract).
    pub(super) unsafe fn level1(&self, stream: &dyn StreamInterface, c: &Level1Call) -> Result<()> {
        let missing = |what: &str| {
            Error::internal(format!(
                "then_blas_{} was called without {what}",
                c.op.name()
            ))
        };
        let y = || {
            c.y.as_ref()
                .map(|y| ptr(y, c.elem))
                .ok_or_else(|| missing("y"))
        };
        let r = || {
            c.result
                .as_ref()
                .map(|r| ptr(r, c.elem))
                .ok_or_else(|| missing("a result"))
        };
        let x = ptr(&c.x, c.elem);
        let (n, incx, incy) = (c.n.pack(), c.incx.pack(), c.incy.pack());
        let (args, reduction) = match c.op {
            Level1Op::Axpy { alpha } => (vec![x, y()?, n, incx, incy, alpha.pack()], false),
            Level1Op::Scal { alpha } => (vec![x, n, incx, alpha.pack()], false),
            Level1Op::Copy => (vec![x, y()?, n, incx, incy], false),
            Level1Op::Dot => (vec![x, y()?, r()?, n, incx, incy], true),
            Level1Op::Nrm2 | Level1Op::Asum => (vec![x, r()?, n, incx], true),
        };
        let blocks = if reduction {
            1
        } else {
            grid(c.n.div_ceil(u64::from(THREADS)), self.max_grid[0])
        };
        // SAFETY: `args` holds this call's operands in the kernel's parameter order.
        unsafe {
            self.launch(
                stream,
                (c.op.name(), c.elem),
                ThreadDim::new(THREADS, 1, 1),
                BlockDim::new(blocks, 1, 1),
                &args,
            )
        }
    }
}
