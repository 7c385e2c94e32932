//! cuBLAS for the CUDA platform's `BlasSupport`: one handle per device, created on first use,
//! bound to the calling stream for each call. Calls reach here in stream order (through the
//! stream's submitter); the handle is behind a mutex because `cublasSetStream` + the call must
//! not interleave between streams.

use std::ffi::c_int;

use cudarc::cublas::sys as cb;
use parking_lot::Mutex;

use super::PLATFORM;
use crate::error::{Error, Result};
use crate::platform::canned::{
    BlasElem, GemmCall, GemvCall, Level1Call, Level1Op, Operand, Transpose,
};
use crate::platform::gpu::{GpuBlas, RawStream};

/// A cuBLAS handle of one device.
pub(crate) struct CudaBlas {
    handle: Mutex<usize>,
}

// SAFETY: the handle is only used under its mutex.
unsafe impl Send for CudaBlas {}
// SAFETY: as above.
unsafe impl Sync for CudaBlas {}

fn check(call: &str, s: cb::cublasStatus_t) -> Result<()> {
    if s == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    Err(Error::Driver {
        platform: PLATFORM.into(),
        call: call.into(),
        code: s as i64,
        detail: format!("{s:?}"),
    })
}

fn int(v: u64, what: &str) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| {
        Error::unsupported(
            PLATFORM,
            "cuBLAS",
            format!("{what} = {v} does not fit cuBLAS's 32-bit int; split the call"),
        )
    })
}

fn op(t: Transpose) -> cb::cublasOperation_t {
    match t {
        Transpose::None => cb::cublasOperation_t::CUBLAS_OP_N,
        Transpose::Transpose => cb::cublasOperation_t::CUBLAS_OP_T,
        Transpose::ConjugateTranspose => cb::cublasOperation_t::CUBLAS_OP_C,
    }
}

/// The f32/f64 cuBLAS routines behind one interface.
trait Elem: Copy {
    fn from_f64(v: f64) -> Self;
    /// # Safety
    /// cuBLAS's contract for `?gemm` (or `?gemmStridedBatched` when `batch > 1`).
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        h: cb::cublasHandle_t,
        c: &GemmCall,
        d: [c_int; 6],
        al: &Self,
        be: &Self,
    ) -> cb::cublasStatus_t;
    /// # Safety
    /// cuBLAS's contract for `?gemv`.
    unsafe fn gemv(
        h: cb::cublasHandle_t,
        c: &GemvCall,
        d: [c_int; 5],
        al: &Self,
        be: &Self,
    ) -> cb::cublasStatus_t;
    /// # Safety
    /// cuBLAS's contract for the level-1 routine of `c.op`.
    unsafe fn level1(h: cb::cublasHandle_t, c: &Level1Call, d: [c_int; 3]) -> cb::cublasStatus_t;
}

/// The device pointer of an operand (CUDA device addresses are real pointers).
fn dptr<T>(o: &Operand) -> *mut T {
    o.addr.0 as usize as *mut T
}

impl Elem for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    unsafe fn gemm(
        h: cb::cublasHandle_t,
        c: &GemmCall,
        d: [c_int; 6],
        al: &Self,
        be: &Self,
    ) -> cb::cublasStatus_t {
        let [m, n, k, lda, ldb, ldc] = d;
        let (ta, tb) = (op(c.trans_a), op(c.trans_b));
        let (a, b, cc) = (dptr::<f32>(&c.a), dptr::<f32>(&c.b), dptr::<f32>(&c.c));
        // SAFETY: the caller's contract.
        unsafe {
            if c.batch == 1 {
                cb::cublasSgemm_v2(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, cc, ldc)
            } else {
                cb::cublasSgemmStridedBatched(
                    h,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    al,
                    a,
                    lda,
                    c.stride_a as i64,
                    b,
                    ldb,
                    c.stride_b as i64,
                    be,
                    cc,
                    ldc,
                    c.stride_c as i64,
                    c.batch as c_int,
                )
            }
        }
    }
    unsafe fn gemv(
        h: cb::cublasHandle_t,
        c: &GemvCall,
        d: [c_int; 5],
        al: &Self,
        be: &Self,
    ) -> cb::cublasStatus_t {
        let [m, n, lda, incx, incy] = d;
        // SAFETY: the caller's contract.
        unsafe {
            cb::cublasSgemv_v2(
                h,
                op(c.trans),
                m,
                n,
                al,
                dptr::<f32>(&c.a),
                lda,
                dptr::<f32>(&c.x),
                incx,
                be,
                dptr::<f32>(&c.y),
                incy,
            )
        }
    }
    unsafe fn level1(h: cb::cublasHandle_t, c: &Level1Call, d: [c_int; 3]) -> cb::cublasStatus_t {
        let [n, incx, incy] = d;
        let x = dptr::<f32>(&c.x);
        let y = c.y.map_or(std::ptr::null_mut(), |y| dptr::<f32>(&y));
        let r = c.result.map_or(std::ptr::null_mut(), |r| dptr::<f32>(&r));
        // SAFETY: the caller's contract.
        unsafe {
            match c.op {
                Level1Op::Axpy { alpha } => {
                    cb::cublasSaxpy_v2(h, n, &(alpha as f32), x, incx, y, incy)
                }
                Level1Op::Scal { alpha } => cb::cublasSscal_v2(h, n, &(alpha as f32), x, incx),
                Level1Op::Copy => cb::cublasScopy_v2(h, n, x, incx, y, incy),
                Level1Op::Dot => cb::cublasSdot_v2(h, n, x, incx, y, incy, r),
                Level1Op::Nrm2 => cb::cublasSnrm2_v2(h, n, x, incx, r),
                Level1Op::Asum => cb::cublasSasum_v2(h, n, x, incx, r),
            }
        }
    }
}

impl Elem for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    unsafe fn gemm(
        h: cb::cublasHandle_t,
        c: &GemmCall,
        d: [c_int; 6],
        al: &Self,
        be: &Self,
    ) -> cb::cublasStatus_t {
        let [m, n, k, lda, ldb, ldc] = d;
        let (ta, tb) = (op(c.trans_a), op(c.trans_b));
        let (a, b, cc) = (dptr::<f64>(&c.a), dptr::<f64>(&c.b), dptr::<f64>(&c.c));
        // SAFETY: the caller's contract.
        unsafe {
            if c.batch == 1 {
                cb::cublasDgemm_v2(h, ta, tb, m, n, k, al, a, lda, b, ldb, be, cc, ldc)
            } else {
                cb::cublasDgemmStridedBatched(
                    h,
                    ta,
                    tb,
                    m,
                    n,
                    k,
                    al,
                    a,
                    lda,
                    c.stride_a as i64,
                    b,
                    ldb,
                    c.stride_b as i64,
                    be,
                    cc,
                    ldc,
                    c.stride_c as i64,
                    c.batch as c_int,
                )
            }
        }
    }
    unsafe fn gemv(
        h: cb::cublasHandle_t,
        c: &GemvCall,
        d: [c_int; 5],
        al: &Self,
        be: &Self,
    ) -> cb::cublasStatus_t {
        let [m, n, lda, incx, incy] = d;
        // SAFETY: the caller's contract.
        unsafe {
            cb::cublasDgemv_v2(
                h,
                op(c.trans),
                m,
                n,
                al,
                dptr::<f64>(&c.a),
                lda,
                dptr::<f64>(&c.x),
                incx,
                be,
                dptr::<f64>(&c.y),
                incy,
            )
        }
    }
    unsafe fn level1(h: cb::cublasHandle_t, c: &Level1Call, d: [c_int; 3]) -> cb::cublasStatus_t {
        let [n, incx, incy] = d;
        let x = dptr::<f64>(&c.x);
        let y = c.y.map_or(std::ptr::null_mut(), |y| dptr::<f64>(&y));
        let r = c.result.map_or(std::ptr::null_mut(), |r| dptr::<f64>(&r));
        // SAFETY: the caller's contract.
        unsafe {
            match c.op {
                Level1Op::Axpy { alpha } => cb::cublasDaxpy_v2(h, n, &alpha, x, incx, y, incy),
                Level1Op::Scal { alpha } => cb::cublasDscal_v2(h, n, &alpha, x, incx),
                Level1Op::Copy => cb::cublasDcopy_v2(h, n, x, incx, y, incy),
                Level1Op::Dot => cb::cublasDdot_v2(h, n, x, incx, y, incy, r),
                Level1Op::Nrm2 => cb::cublasDnrm2_v2(h, n, x, incx, r),
                Level1Op::Asum => cb::cublasDasum_v2(h, n, x, incx, r),
            }
        }
    }
}

impl CudaBlas {
    /// A handle for the current context; `Unsupported` when libcublas is missing.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: only tries to dlopen the library names cudarc would use.
        if !unsafe { cb::is_culib_present() } {
            return Err(Error::unsupported(
                PLATFORM,
                "then_blas_*",
                "cuBLAS (libcublas.so) was not found; install the CUDA toolkit's cuBLAS",
            ));
        }
        let mut h = std::ptr::null_mut();
        // SAFETY: writes one handle; the caller made the device's context current.
        check("cublasCreate", unsafe { cb::cublasCreate_v2(&mut h) })?;
        Ok(CudaBlas {
            handle: Mutex::new(h as usize),
        })
    }

    /// Runs `f` with the handle bound to stream `s`, results through device pointers.
    fn on(
        &self,
        s: RawStream,
        device_results: bool,
        f: impl FnOnce(cb::cublasHandle_t) -> cb::cublasStatus_t,
        call: &str,
    ) -> Result<()> {
        let guard = self.handle.lock();
        let h = *guard as cb::cublasHandle_t;
        // SAFETY: a live handle and stream.
        check("cublasSetStream", unsafe {
            cb::cublasSetStream_v2(h, s.0 as cb::cudaStream_t)
        })?;
        let mode = if device_results {
            cb::cublasPointerMode_t::CUBLAS_POINTER_MODE_DEVICE
        } else {
            cb::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST
        };
        // SAFETY: a live handle.
        check("cublasSetPointerMode", unsafe {
            cb::cublasSetPointerMode_v2(h, mode)
        })?;
        check(call, f(h))
    }

    fn gemm_t<T: Elem>(&self, s: RawStream, c: &GemmCall) -> Result<()> {
        let d = [
            int(c.m, "m")?,
            int(c.n, "n")?,
            int(c.k, "k")?,
            int(c.lda, "lda")?,
            int(c.ldb, "ldb")?,
            int(c.ldc, "ldc")?,
        ];
        int(c.batch, "batch")?;
        let (al, be) = (T::from_f64(c.alpha), T::from_f64(c.beta));
        // SAFETY: the stream checked every operand's extent and ownership; alpha and beta
        // are host values read during the call (pointer mode host).
        self.on(
            s,
            false,
            |h| unsafe { T::gemm(h, c, d, &al, &be) },
            "cublas?gemm",
        )
    }

    fn gemv_t<T: Elem>(&self, s: RawStream, c: &GemvCall) -> Result<()> {
        let d = [
            int(c.m, "m")?,
            int(c.n, "n")?,
            int(c.lda, "lda")?,
            int(c.incx, "incx")?,
            int(c.incy, "incy")?,
        ];
        let (al, be) = (T::from_f64(c.alpha), T::from_f64(c.beta));
        // SAFETY: as in `gemm_t`.
        self.on(
            s,
            false,
            |h| unsafe { T::gemv(h, c, d, &al, &be) },
            "cublas?gemv",
        )
    }

    fn level1_t<T: Elem>(&self, s: RawStream, c: &Level1Call) -> Result<()> {
        let d = [
            int(c.n, "n")?,
            int(c.incx, "incx")?,
            int(c.incy.max(1), "incy")?,
        ];
        // Reductions write their result to device memory (pointer mode device); scalars of
        // axpy/scal are host values.
        let device_results = c.result.is_some();
        // SAFETY: as in `gemm_t`; the result operand is one element of device memory.
        self.on(
            s,
            device_results,
            |h| unsafe { T::level1(h, c, d) },
            "cublas level 1",
        )
    }
}

impl GpuBlas for CudaBlas {
    fn gemm(&self, s: RawStream, c: &GemmCall) -> Result<()> {
        match c.elem {
            BlasElem::F32 => self.gemm_t::<f32>(s, c),
            BlasElem::F64 => self.gemm_t::<f64>(s, c),
        }
    }

    fn gemv(&self, s: RawStream, c: &GemvCall) -> Result<()> {
        match c.elem {
            BlasElem::F32 => self.gemv_t::<f32>(s, c),
            BlasElem::F64 => self.gemv_t::<f64>(s, c),
        }
    }

    fn level1(&self, s: RawStream, c: &Level1Call) -> Result<()> {
        match c.elem {
            BlasElem::F32 => self.level1_t::<f32>(s, c),
            BlasElem::F64 => self.level1_t::<f64>(s, c),
        }
    }
}

impl Drop for CudaBlas {
    fn drop(&mut self) {
        // SAFETY: the handle is ours and no call is in flight (we hold `&mut self`).
        let _ = unsafe { cb::cublasDestroy_v2(*self.handle.get_mut() as cb::cublasHandle_t) };
    }
}
