//! The BLAS plugin trait and the validated call descriptors it takes.
//!
//! A backend that runs BLAS returns an implementation from
//! [`StreamExecutorInterface::blas`](super::StreamExecutorInterface::blas); the default is
//! `None`, and the stream then fails with `Error::Unsupported` naming the operation. As in
//! StreamExecutor, the support object belongs to the executor and every call names the stream
//! to enqueue on.
//!
//! `Stream` (src/blas.rs) validates everything before it calls this trait: dimensions, leading
//! dimensions, increments, and that every operand's extent lies inside its slice, which lies
//! inside one allocation of this executor. That is the contract of the `unsafe` methods: a
//! backend may assume it, and must still return `Err` for anything its driver refuses.

use super::StreamInterface;
use crate::error::Result;
use crate::types::DeviceAddress;

/// Element type of a BLAS call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlasElem {
    /// `f32` (the `s` routines).
    F32,
    /// `f64` (the `d` routines).
    F64,
}

impl BlasElem {
    /// Bytes per element.
    pub const fn size(self) -> u64 {
        match self {
            BlasElem::F32 => 4,
            BlasElem::F64 => 8,
        }
    }
    /// BLAS prefix (`s` or `d`), for messages.
    pub const fn prefix(self) -> &'static str {
        match self {
            BlasElem::F32 => "s",
            BlasElem::F64 => "d",
        }
    }
}

/// How a matrix operand is used, as BLAS's `trans` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transpose {
    /// `op(A) = A`.
    None,
    /// `op(A) = Aᵀ`.
    Transpose,
    /// `op(A) = Aᴴ`; the same as `Transpose` for real types.
    ConjugateTranspose,
}

impl Transpose {
    /// True for `Transpose` and `ConjugateTranspose`.
    pub const fn is_transposed(self) -> bool {
        !matches!(self, Transpose::None)
    }
}

/// A validated operand: `len` elements starting at `addr`, all inside one live allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    /// First element.
    pub addr: DeviceAddress,
    /// Elements reachable from `addr` (at least the extent the call touches).
    pub len: u64,
}

/// `C[b] = alpha·op(A[b])·op(B[b]) + beta·C[b]` for `b < batch`, column-major.
///
/// `A[b]` starts `b·stride_a` elements after `a.addr` (likewise B, C). When `beta == 0`, C is
/// not read (NaNs in it do not propagate); when `alpha == 0` or `k == 0`, A and B are not read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmCall {
    /// Element type.
    pub elem: BlasElem,
    /// `op(A)`.
    pub trans_a: Transpose,
    /// `op(B)`.
    pub trans_b: Transpose,
    /// Rows of `op(A)` and C.
    pub m: u64,
    /// Columns of `op(B)` and C.
    pub n: u64,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: u64,
    /// Scale of the product (exact for `f32`).
    pub alpha: f64,
    /// A.
    pub a: Operand,
    /// Leading dimension of A as stored.
    pub lda: u64,
    /// B.
    pub b: Operand,
    /// Leading dimension of B as stored.
    pub ldb: u64,
    /// Scale of C's old value.
    pub beta: f64,
    /// C.
    pub c: Operand,
    /// Leading dimension of C.
    pub ldc: u64,
    /// Number of products (1 for a plain GEMM).
    pub batch: u64,
    /// Elements between consecutive A matrices.
    pub stride_a: u64,
    /// Elements between consecutive B matrices.
    pub stride_b: u64,
    /// Elements between consecutive C matrices.
    pub stride_c: u64,
}

/// `y = alpha·op(A)·x + beta·y`, A stored `m × n` column-major.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemvCall {
    /// Element type.
    pub elem: BlasElem,
    /// `op(A)`.
    pub trans: Transpose,
    /// Rows of A as stored.
    pub m: u64,
    /// Columns of A as stored.
    pub n: u64,
    /// Scale of the product.
    pub alpha: f64,
    /// A.
    pub a: Operand,
    /// Leading dimension of A.
    pub lda: u64,
    /// x (`n` elements, or `m` when transposed).
    pub x: Operand,
    /// Stride of x, ≥ 1.
    pub incx: u64,
    /// Scale of y's old value; when 0, y is not read.
    pub beta: f64,
    /// y (`m` elements, or `n` when transposed).
    pub y: Operand,
    /// Stride of y, ≥ 1.
    pub incy: u64,
}

/// A level-1 BLAS operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Level1Op {
    /// `y = alpha·x + y`.
    Axpy {
        /// Scale of x.
        alpha: f64,
    },
    /// `x = alpha·x`.
    Scal {
        /// Scale.
        alpha: f64,
    },
    /// `y = x`.
    Copy,
    /// `result[0] = Σ xᵢ·yᵢ`.
    Dot,
    /// `result[0] = √(Σ xᵢ²)`.
    Nrm2,
    /// `result[0] = Σ |xᵢ|`.
    Asum,
}

impl Level1Op {
    /// The BLAS routine name without its type prefix.
    pub const fn name(&self) -> &'static str {
        match self {
            Level1Op::Axpy { .. } => "axpy",
            Level1Op::Scal { .. } => "scal",
            Level1Op::Copy => "copy",
            Level1Op::Dot => "dot",
            Level1Op::Nrm2 => "nrm2",
            Level1Op::Asum => "asum",
        }
    }
}

/// One level-1 call over `n` elements (`n ≥ 1`; the stream skips empty calls after writing a
/// zero result where there is one).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level1Call {
    /// Element type.
    pub elem: BlasElem,
    /// What to compute.
    pub op: Level1Op,
    /// Element count.
    pub n: u64,
    /// x.
    pub x: Operand,
    /// Stride of x, ≥ 1.
    pub incx: u64,
    /// y (axpy, copy, dot).
    pub y: Option<Operand>,
    /// Stride of y, ≥ 1.
    pub incy: u64,
    /// Where a reduction writes its one element (dot, nrm2, asum).
    pub result: Option<Operand>,
}

/// BLAS on one executor. Each call enqueues on `stream` (a stream of this executor) and
/// returns at once; a run-time failure fails the stream.
///
/// # Safety (every method)
/// `stream` belongs to this executor, and every [`Operand`] of the call lies inside one live
/// allocation of this executor that covers the extent the call touches (the module docs list
/// what `Stream` checks). A backend trusts the operands as it trusts the ranges of
/// [`StreamInterface`]'s copies.
pub trait BlasSupport: Send + Sync {
    /// GEMM and strided-batched GEMM.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn gemm(&self, stream: &dyn StreamInterface, call: &GemmCall) -> Result<()>;
    /// GEMV.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn gemv(&self, stream: &dyn StreamInterface, call: &GemvCall) -> Result<()>;
    /// axpy, scal, copy, dot, nrm2, asum.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn level1(&self, stream: &dyn StreamInterface, call: &Level1Call) -> Result<()>;
}
