//! cuBLAS for the CUDA platform's `BlasSupport`: one handle per device, created on first use,
//! bound to the calling stream for each call. Calls reach here in stream order (through the
//! stream's submitter); the handle is behind a mutex because `cublasSetStream` + the call must
//! not interleave between streams.

use std::ffi::c_int;

use cudarc::cublas::sys as cb;
use parking_lot::Mutex;

use super::status::{PLATFORM, cublas_check as check};
use crate::error::{Error, Result};
use crate::interface::blas::{
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

/// The device pointer of an operand (CUDA device addresses are real pointers).
fn dptr<T>(o: &Operand) -> *mut T {
    o.addr.raw() as usize as *mut T
}

type H = cb::cublasHandle_t;
type Op = cb::cublasOperation_t;
type St = cb::cublasStatus_t;
type Gemm<T> = unsafe fn(
    H,
    Op,
    Op,
    c_int,
    c_int,
    c_int,
    *const T,
    *const T,
    c_int,
    *const T,
    c_int,
    *const T,
    *mut T,
    c_int,
) -> St;
type GemmStrided<T> = unsafe fn(
    H,
    Op,
    Op,
    c_int,
    c_int,
    c_int,
    *const T,
    *const T,
    c_int,
    i64,
    *const T,
    c_int,
    i64,
    *const T,
    *mut T,
    c_int,
    i64,
    c_int,
) -> St;
type Gemv<T> = unsafe fn(
    H,
    Op,
    c_int,
    c_int,
    *const T,
    *const T,
    c_int,
    *const T,
    c_int,
    *const T,
    *mut T,
    c_int,
) -> St;
type Axpy<T> = unsafe fn(H, c_int, *const T, *const T, c_int, *mut T, c_int) -> St;
type Scal<T> = unsafe fn(H, c_int, *const T, *mut T, c_int) -> St;
type Copy<T> = unsafe fn(H, c_int, *const T, c_int, *mut T, c_int) -> St;
type Dot<T> = unsafe fn(H, c_int, *const T, c_int, *const T, c_int, *mut T) -> St;
type Reduce<T> = unsafe fn(H, c_int, *const T, c_int, *mut T) -> St;

/// The cuBLAS routines of one element type (`cublasS*` for f32, `cublasD*` for f64).
trait Elem: std::marker::Copy + 'static {
    const GEMM: Gemm<Self>;
    const GEMM_STRIDED: GemmStrided<Self>;
    const GEMV: Gemv<Self>;
    const AXPY: Axpy<Self>;
    const SCAL: Scal<Self>;
    const COPY: Copy<Self>;
    const DOT: Dot<Self>;
    const NRM2: Reduce<Self>;
    const ASUM: Reduce<Self>;
    fn from_f64(v: f64) -> Self;
}

impl Elem for f32 {
    const GEMM: Gemm<Self> = cb::cublasSgemm_v2;
    const GEMM_STRIDED: GemmStrided<Self> = cb::cublasSgemmStridedBatched;
    const GEMV: Gemv<Self> = cb::cublasSgemv_v2;
    const AXPY: Axpy<Self> = cb::cublasSaxpy_v2;
    const SCAL: Scal<Self> = cb::cublasSscal_v2;
    const COPY: Copy<Self> = cb::cublasScopy_v2;
    const DOT: Dot<Self> = cb::cublasSdot_v2;
    const NRM2: Reduce<Self> = cb::cublasSnrm2_v2;
    const ASUM: Reduce<Self> = cb::cublasSasum_v2;
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Elem for f64 {
    const GEMM: Gemm<Self> = cb::cublasDgemm_v2;
    const GEMM_STRIDED: GemmStrided<Self> = cb::cublasDgemmStridedBatched;
    const GEMV: Gemv<Self> = cb::cublasDgemv_v2;
    const AXPY: Axpy<Self> = cb::cublasDaxpy_v2;
    const SCAL: Scal<Self> = cb::cublasDscal_v2;
    const COPY: Copy<Self> = cb::cublasDcopy_v2;
    const DOT: Dot<Self> = cb::cublasDdot_v2;
    const NRM2: Reduce<Self> = cb::cublasDnrm2_v2;
    const ASUM: Reduce<Self> = cb::cublasDasum_v2;
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl CudaBlas {
    /// A handle for the current context; `Ok(None)` when libcublas is not installed (the
    /// backend then runs its built-in BLAS kernels), `Err` when it is but cannot start.
    pub(crate) fn new() -> Result<Option<Self>> {
        // SAFETY: only tries to dlopen the library names cudarc would use.
        if !unsafe { cb::is_culib_present() } {
            return Ok(None);
        }
        let mut h = std::ptr::null_mut();
        // SAFETY: writes one handle; the caller made the device's context current.
        check("cublasCreate", unsafe { cb::cublasCreate_v2(&mut h) })?;
        Ok(Some(CudaBlas {
            handle: Mutex::new(h as usize),
        }))
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
        let [m, n, k, lda, ldb, ldc] = d;
        let (al, be) = (T::from_f64(c.alpha), T::from_f64(c.beta));
        let (ta, tb) = (op(c.trans_a), op(c.trans_b));
        let (a, b, cc) = (dptr::<T>(&c.a), dptr::<T>(&c.b), dptr::<T>(&c.c));
        let (sa, sb, sc) = (c.stride_a as i64, c.stride_b as i64, c.stride_c as i64);
        let batch = c.batch as c_int;
        // SAFETY: the stream checked every operand's extent and ownership; alpha and beta
        // are host values read during the call (pointer mode host).
        self.on(
            s,
            false,
            |h| unsafe {
                if batch == 1 {
                    (T::GEMM)(h, ta, tb, m, n, k, &al, a, lda, b, ldb, &be, cc, ldc)
                } else {
                    let (x, y, z) = ((a, lda, sa), (b, ldb, sb), (cc, ldc, sc));
                    (T::GEMM_STRIDED)(
                        h, ta, tb, m, n, k, &al, x.0, x.1, x.2, y.0, y.1, y.2, &be, z.0, z.1, z.2,
                        batch,
                    )
                }
            },
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
        let [m, n, lda, incx, incy] = d;
        let (al, be) = (T::from_f64(c.alpha), T::from_f64(c.beta));
        let (a, x, y) = (dptr::<T>(&c.a), dptr::<T>(&c.x), dptr::<T>(&c.y));
        let t = op(c.trans);
        // SAFETY: as in `gemm_t`.
        self.on(
            s,
            false,
            |h| unsafe { (T::GEMV)(h, t, m, n, &al, a, lda, x, incx, &be, y, incy) },
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
        let [n, incx, incy] = d;
        let x = dptr::<T>(&c.x);
        let y = c.y.map_or(std::ptr::null_mut(), |y| dptr::<T>(&y));
        let r = c.result.map_or(std::ptr::null_mut(), |r| dptr::<T>(&r));
        // SAFETY: as in `gemm_t`; the result operand is one element of device memory.
        self.on(
            s,
            device_results,
            |h| unsafe {
                match c.op {
                    Level1Op::Axpy { alpha } => {
                        (T::AXPY)(h, n, &T::from_f64(alpha), x, incx, y, incy)
                    }
                    Level1Op::Scal { alpha } => (T::SCAL)(h, n, &T::from_f64(alpha), x, incx),
                    Level1Op::Copy => (T::COPY)(h, n, x, incx, y, incy),
                    Level1Op::Dot => (T::DOT)(h, n, x, incx, y, incy, r),
                    Level1Op::Nrm2 => (T::NRM2)(h, n, x, incx, r),
                    Level1Op::Asum => (T::ASUM)(h, n, x, incx, r),
                }
            },
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
