//! BLAS on a stream: `then_blas_gemm`, `then_blas_gemm_strided_batched`, `then_blas_gemv` and
//! the level-1 operations, for `f32` and `f64`.
//!
//! Conventions are reference BLAS's: matrices are column-major, `lda` is the distance between
//! columns as stored (`lda ≥ max(1, rows as stored)`), increments count elements (here ≥ 1).
//! When `beta == 0` the output is not read, so NaNs in it do not propagate; when `alpha == 0`
//! (or `k == 0`) the inputs are not read. Reductions (`dot`, `nrm2`, `asum`) write their result
//! into element 0 of a device slice, as StreamExecutor's do. Every dimension, leading-dimension,
//! increment and buffer-size check happens here, before the backend sees the call.

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::interface::BlasSupport;
use crate::interface::blas::{
    BlasElem, GemmCall, GemvCall, Level1Call, Level1Op, Operand, Transpose,
};
use crate::memory::DeviceSlice;
use crate::stream::Stream;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// Element types the BLAS operations take: `f32`, `f64`.
pub trait BlasScalar: Pod + sealed::Sealed + Into<f64> {
    /// Which routines.
    const ELEM: BlasElem;
}
impl BlasScalar for f32 {
    const ELEM: BlasElem = BlasElem::F32;
}
impl BlasScalar for f64 {
    const ELEM: BlasElem = BlasElem::F64;
}

/// Elements a `rows × cols` column-major matrix with leading dimension `ld` spans.
fn matrix_extent(rows: u64, cols: u64, ld: u64, op: &str) -> Result<u64> {
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    ld.checked_mul(cols - 1)
        .and_then(|x| x.checked_add(rows))
        .ok_or_else(|| Error::invalid(op, format!("{rows}×{cols} with ld {ld} overflows u64")))
}

/// Elements `n` values with increment `inc` span.
fn vector_extent(n: u64, inc: u64, op: &str) -> Result<u64> {
    if n == 0 {
        return Ok(0);
    }
    inc.checked_mul(n - 1)
        .and_then(|x| x.checked_add(1))
        .ok_or_else(|| Error::invalid(op, format!("{n} elements at increment {inc} overflow")))
}

fn check_ld(op: &str, name: &str, ld: u64, rows: u64) -> Result<()> {
    if ld < rows.max(1) {
        return Err(Error::invalid(
            op,
            format!("{name} = {ld} is less than max(1, {rows}), the rows of the stored matrix"),
        ));
    }
    Ok(())
}

fn check_inc(op: &str, name: &str, inc: u64) -> Result<()> {
    if inc == 0 {
        return Err(Error::invalid(
            op,
            format!("{name} = 0; increments must be ≥ 1 (negative increments are not supported)"),
        ));
    }
    Ok(())
}

impl Stream {
    fn blas_support(&self, operation: &str) -> Result<&dyn BlasSupport> {
        let exec = self.executor();
        exec.interface().blas().ok_or_else(|| {
            Error::unsupported(
                exec.platform_name(),
                operation,
                format!(
                    "{} has no BLAS support; run BLAS on a platform that has it (host, opencl)",
                    exec.description().name
                ),
            )
        })
    }

    /// `slice` as an operand that must span `extent` elements.
    fn operand<T: Pod>(
        &self,
        slice: &DeviceSlice<'_, T>,
        extent: u64,
        op: &str,
        name: &str,
    ) -> Result<Operand> {
        self.check_slice(slice, op)?;
        if extent > slice.len() as u64 {
            return Err(Error::bounds(
                op,
                format!(
                    "{name} needs {extent} elements for these dimensions but its slice has {}; \
                     pass a larger slice or smaller dimensions",
                    slice.len()
                ),
            ));
        }
        Ok(Operand {
            addr: slice.address(),
            len: slice.len() as u64,
        })
    }

    /// `C = alpha·op(A)·op(B) + beta·C` (xGEMM): `op(A)` is `m × k`, `op(B)` is `k × n`, C is
    /// `m × n`, all column-major with leading dimensions `lda`, `ldb`, `ldc`.
    #[allow(clippy::too_many_arguments)] // BLAS's own argument list, in BLAS's order.
    pub fn then_blas_gemm<'a, 'b, 'c, T: BlasScalar>(
        &mut self,
        trans_a: Transpose,
        trans_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: T,
        a: impl Into<DeviceSlice<'a, T>>,
        lda: usize,
        b: impl Into<DeviceSlice<'b, T>>,
        ldb: usize,
        beta: T,
        c: impl Into<DeviceSlice<'c, T>>,
        ldc: usize,
    ) -> &mut Self {
        let (a, b, c) = (a.into(), b.into(), c.into());
        self.enqueue(|s| {
            s.gemm_impl(
                "then_blas_gemm",
                trans_a,
                trans_b,
                [m, n, k],
                (alpha, beta),
                [(a, lda, 0), (b, ldb, 0), (c, ldc, 0)],
                1,
            )
        })
    }

    /// `batch` GEMMs: matrix `i` of A starts `i·stride_a` elements into `a` (likewise B, C).
    /// Strides of A and B may be 0 (one matrix for every product); C's matrices must not
    /// overlap.
    #[allow(clippy::too_many_arguments)] // cublas<t>gemmStridedBatched's argument list.
    pub fn then_blas_gemm_strided_batched<'a, 'b, 'c, T: BlasScalar>(
        &mut self,
        trans_a: Transpose,
        trans_b: Transpose,
        m: usize,
        n: usize,
        k: usize,
        alpha: T,
        a: impl Into<DeviceSlice<'a, T>>,
        lda: usize,
        stride_a: usize,
        b: impl Into<DeviceSlice<'b, T>>,
        ldb: usize,
        stride_b: usize,
        beta: T,
        c: impl Into<DeviceSlice<'c, T>>,
        ldc: usize,
        stride_c: usize,
        batch: usize,
    ) -> &mut Self {
        let (a, b, c) = (a.into(), b.into(), c.into());
        self.enqueue(|s| {
            s.gemm_impl(
                "then_blas_gemm_strided_batched",
                trans_a,
                trans_b,
                [m, n, k],
                (alpha, beta),
                [(a, lda, stride_a), (b, ldb, stride_b), (c, ldc, stride_c)],
                batch,
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn gemm_impl<T: BlasScalar>(
        &self,
        op: &str,
        trans_a: Transpose,
        trans_b: Transpose,
        [m, n, k]: [usize; 3],
        (alpha, beta): (T, T),
        [(a, lda, sa), (b, ldb, sb), (c, ldc, sc)]: [(DeviceSlice<'_, T>, usize, usize); 3],
        batch: usize,
    ) -> Result<()> {
        let blas = self.blas_support(op)?;
        let (m, n, k, batch) = (m as u64, n as u64, k as u64, batch as u64);
        let (lda, ldb, ldc) = (lda as u64, ldb as u64, ldc as u64);
        let (ar, ac) = if trans_a.is_transposed() {
            (k, m)
        } else {
            (m, k)
        };
        let (br, bc) = if trans_b.is_transposed() {
            (n, k)
        } else {
            (k, n)
        };
        check_ld(op, "lda", lda, ar)?;
        check_ld(op, "ldb", ldb, br)?;
        check_ld(op, "ldc", ldc, m)?;
        let batched = |one: u64, stride: usize, name: &str| -> Result<u64> {
            if batch == 0 || one == 0 {
                return Ok(0);
            }
            (stride as u64)
                .checked_mul(batch - 1)
                .and_then(|x| x.checked_add(one))
                .ok_or_else(|| Error::invalid(op, format!("{name}: batch extent overflows")))
        };
        let reads_ab = alpha.into() != 0.0 && k > 0 && m > 0 && n > 0;
        let ea = if reads_ab {
            matrix_extent(ar, ac, lda, op)?
        } else {
            0
        };
        let eb = if reads_ab {
            matrix_extent(br, bc, ldb, op)?
        } else {
            0
        };
        let ec1 = matrix_extent(m, n, ldc, op)?;
        if batch > 1 && ec1 > 0 && (sc as u64) < ec1 {
            return Err(Error::invalid(
                op,
                format!(
                    "stride_c = {sc} is less than the {ec1} elements one C matrix spans, so \
                     products would write the same elements; use stride_c ≥ ldc·(n−1)+m"
                ),
            ));
        }
        let call = GemmCall {
            elem: T::ELEM,
            trans_a,
            trans_b,
            m,
            n,
            k,
            alpha: alpha.into(),
            a: self.operand(&a, batched(ea, sa, "A")?, op, "A")?,
            lda,
            b: self.operand(&b, batched(eb, sb, "B")?, op, "B")?,
            ldb,
            beta: beta.into(),
            c: self.operand(&c, batched(ec1, sc, "C")?, op, "C")?,
            ldc,
            batch,
            stride_a: sa as u64,
            stride_b: sb as u64,
            stride_c: sc as u64,
        };
        if m == 0 || n == 0 || batch == 0 {
            return Ok(());
        }
        // SAFETY: every operand was checked by `operand` (owner, extent inside its slice,
        // which borrows live memory of this executor) and the batch does not overlap C.
        unsafe { blas.gemm(self.iface(), &call) }
    }

    /// `y = alpha·op(A)·x + beta·y` (xGEMV); A is stored `m × n` with leading dimension `lda`.
    #[allow(clippy::too_many_arguments)] // BLAS's own argument list, in BLAS's order.
    pub fn then_blas_gemv<'a, 'x, 'y, T: BlasScalar>(
        &mut self,
        trans: Transpose,
        m: usize,
        n: usize,
        alpha: T,
        a: impl Into<DeviceSlice<'a, T>>,
        lda: usize,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
        beta: T,
        y: impl Into<DeviceSlice<'y, T>>,
        incy: usize,
    ) -> &mut Self {
        let (a, x, y) = (a.into(), x.into(), y.into());
        const OP: &str = "then_blas_gemv";
        self.enqueue(|s| {
            let blas = s.blas_support(OP)?;
            let (m, n, lda, incx, incy) =
                (m as u64, n as u64, lda as u64, incx as u64, incy as u64);
            check_ld(OP, "lda", lda, m)?;
            check_inc(OP, "incx", incx)?;
            check_inc(OP, "incy", incy)?;
            let (lx, ly) = if trans.is_transposed() {
                (m, n)
            } else {
                (n, m)
            };
            let reads = alpha.into() != 0.0 && lx > 0;
            let ea = if reads {
                matrix_extent(m, n, lda, OP)?
            } else {
                0
            };
            let ex = if reads {
                vector_extent(lx, incx, OP)?
            } else {
                0
            };
            let call = GemvCall {
                elem: T::ELEM,
                trans,
                m,
                n,
                alpha: alpha.into(),
                a: s.operand(&a, ea, OP, "A")?,
                lda,
                x: s.operand(&x, ex, OP, "x")?,
                incx,
                beta: beta.into(),
                y: s.operand(&y, vector_extent(ly, incy, OP)?, OP, "y")?,
                incy,
            };
            if ly == 0 {
                return Ok(());
            }
            // SAFETY: every operand was checked by `operand` (owner, extent inside its slice).
            unsafe { blas.gemv(s.iface(), &call) }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn level1<T: BlasScalar>(
        &mut self,
        op: Level1Op,
        n: usize,
        x: DeviceSlice<'_, T>,
        incx: usize,
        y: Option<(DeviceSlice<'_, T>, usize)>,
        result: Option<DeviceSlice<'_, T>>,
    ) -> &mut Self {
        let name = format!("then_blas_{}", op.name());
        self.enqueue(|s| {
            let blas = s.blas_support(&name)?;
            let (n, incx) = (n as u64, incx as u64);
            check_inc(&name, "incx", incx)?;
            let x = s.operand(&x, vector_extent(n, incx, &name)?, &name, "x")?;
            let (y, incy) = match y {
                Some((y, incy)) => {
                    check_inc(&name, "incy", incy as u64)?;
                    let e = vector_extent(n, incy as u64, &name)?;
                    (Some(s.operand(&y, e, &name, "y")?), incy as u64)
                }
                None => (None, 1),
            };
            let result = match result {
                Some(r) => Some(s.operand(&r, 1, &name, "result")?),
                None => None,
            };
            if n == 0 {
                // BLAS returns 0 for an empty reduction; zero bits are 0.0.
                return match result {
                    // SAFETY: `r` was checked by `operand`: one element inside a live slice.
                    Some(r) => unsafe { s.iface().memset8(r.addr, 0, T::ELEM.size()) },
                    None => Ok(()),
                };
            }
            let call = Level1Call {
                elem: T::ELEM,
                op,
                n,
                x,
                incx,
                y,
                incy,
                result,
            };
            // SAFETY: every operand was checked by `operand` (owner, extent inside its slice).
            unsafe { blas.level1(s.iface(), &call) }
        })
    }

    /// `y = alpha·x + y` over `n` elements (xAXPY).
    pub fn then_blas_axpy<'x, 'y, T: BlasScalar>(
        &mut self,
        n: usize,
        alpha: T,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
        y: impl Into<DeviceSlice<'y, T>>,
        incy: usize,
    ) -> &mut Self {
        let alpha = alpha.into();
        self.level1(
            Level1Op::Axpy { alpha },
            n,
            x.into(),
            incx,
            Some((y.into(), incy)),
            None,
        )
    }

    /// `x = alpha·x` over `n` elements (xSCAL).
    pub fn then_blas_scal<'x, T: BlasScalar>(
        &mut self,
        n: usize,
        alpha: T,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
    ) -> &mut Self {
        let alpha = alpha.into();
        self.level1(Level1Op::Scal { alpha }, n, x.into(), incx, None, None)
    }

    /// `y = x` over `n` elements (xCOPY).
    pub fn then_blas_copy<'x, 'y, T: BlasScalar>(
        &mut self,
        n: usize,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
        y: impl Into<DeviceSlice<'y, T>>,
        incy: usize,
    ) -> &mut Self {
        self.level1(
            Level1Op::Copy,
            n,
            x.into(),
            incx,
            Some((y.into(), incy)),
            None,
        )
    }

    /// `result[0] = Σ xᵢ·yᵢ` over `n` elements (xDOT).
    pub fn then_blas_dot<'x, 'y, 'r, T: BlasScalar>(
        &mut self,
        n: usize,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
        y: impl Into<DeviceSlice<'y, T>>,
        incy: usize,
        result: impl Into<DeviceSlice<'r, T>>,
    ) -> &mut Self {
        let (x, y, r) = (x.into(), y.into(), result.into());
        self.level1(Level1Op::Dot, n, x, incx, Some((y, incy)), Some(r))
    }

    /// `result[0] = √(Σ xᵢ²)` over `n` elements (xNRM2).
    pub fn then_blas_nrm2<'x, 'r, T: BlasScalar>(
        &mut self,
        n: usize,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
        result: impl Into<DeviceSlice<'r, T>>,
    ) -> &mut Self {
        self.level1(Level1Op::Nrm2, n, x.into(), incx, None, Some(result.into()))
    }

    /// `result[0] = Σ |xᵢ|` over `n` elements (xASUM).
    pub fn then_blas_asum<'x, 'r, T: BlasScalar>(
        &mut self,
        n: usize,
        x: impl Into<DeviceSlice<'x, T>>,
        incx: usize,
        result: impl Into<DeviceSlice<'r, T>>,
    ) -> &mut Self {
        self.level1(Level1Op::Asum, n, x.into(), incx, None, Some(result.into()))
    }
}
