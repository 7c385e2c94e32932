//! cuFFT for the CUDA platform's `FftSupport`: one cuFFT plan per FFT plan, made with
//! `cufftMakePlanMany64` (cuFFT's advanced layout is the contract's, so the validated
//! `FftPlanDesc` maps field by field), executed in stream order through the stream's submitter
//! (see `gpu/fft.rs`), bound to the driver stream with `cufftSetStream` under a mutex, as
//! `blas.rs` calls cuBLAS.
//!
//! This path is compiled everywhere but only runs where libcufft is installed (a real GPU);
//! the CPU libcuda has none, so there the built-in kernels serve FFT.

use std::ffi::c_longlong;

use cudarc::cufft::sys as cf;
use cudarc::driver::{result, sys};
use parking_lot::Mutex;

use super::status::{PLATFORM, cu_error, cufft_check as check};
use crate::error::{Error, Result};
use crate::interface::fft::{FftDirection, FftPlanDesc, FftPrecision, FftType};
use crate::platform::gpu::{GpuFftPlan, RawStream};

/// One cuFFT plan, bound to the device context it was made in.
pub(crate) struct CudaFftPlan {
    handle: Mutex<cf::cufftHandle>,
    ctx: usize,
    ty: cf::cufftType,
}

// SAFETY: the plan is only used under its mutex, with its context made current first.
unsafe impl Send for CudaFftPlan {}
// SAFETY: as above.
unsafe impl Sync for CudaFftPlan {}

/// `v` as cuFFT's 64-bit size.
fn long(v: u64, what: &str) -> Result<c_longlong> {
    c_longlong::try_from(v).map_err(|_| {
        Error::unsupported(
            PLATFORM,
            "create_fft_plan (cuFFT)",
            format!("{what} = {v} does not fit cuFFT's 64-bit sizes"),
        )
    })
}

fn bind(ctx: usize) -> Result<()> {
    // SAFETY: `ctx` is the driver's retained primary context, alive while the driver is
    // (the executor, which every plan keeps alive, owns the driver).
    unsafe { result::ctx::set_current(ctx as sys::CUcontext) }
        .map_err(|e| cu_error("cuCtxSetCurrent", e))
}

impl CudaFftPlan {
    /// A cuFFT plan for validated `desc` in context `ctx`. Only called where libcufft is
    /// installed (`cufft::sys::is_culib_present`); cudarc panics on a missing library.
    pub(crate) fn new(ctx: sys::CUcontext, desc: &FftPlanDesc) -> Result<Self> {
        use cf::cufftType::*;
        let ty = match (desc.precision, desc.ty) {
            (FftPrecision::F32, FftType::C2C) => CUFFT_C2C,
            (FftPrecision::F32, FftType::R2C) => CUFFT_R2C,
            (FftPrecision::F32, FftType::C2R) => CUFFT_C2R,
            (FftPrecision::F64, FftType::C2C) => CUFFT_Z2Z,
            (FftPrecision::F64, FftType::R2C) => CUFFT_D2Z,
            (FftPrecision::F64, FftType::C2R) => CUFFT_Z2D,
        };
        let all = |v: &[u64], what: &str| -> Result<Vec<c_longlong>> {
            v.iter().map(|&x| long(x, what)).collect()
        };
        let mut n = all(&desc.dims, "a transform size")?;
        let mut inembed = all(&desc.input.embed, "an input embed size")?;
        let mut onembed = all(&desc.output.embed, "an output embed size")?;
        let (istride, idist) = (
            long(desc.input.stride, "the input stride")?,
            long(desc.input.dist, "the input dist")?,
        );
        let (ostride, odist) = (
            long(desc.output.stride, "the output stride")?,
            long(desc.output.dist, "the output dist")?,
        );
        let batch = long(desc.batch, "batch")?;
        let rank = n.len() as std::ffi::c_int;
        let ctx = ctx as usize;
        bind(ctx)?;
        let mut handle: cf::cufftHandle = 0;
        // SAFETY: writes one handle.
        check("cufftCreate", unsafe { cf::cufftCreate(&mut handle) })?;
        // The handle is destroyed by `Drop` from here on, even if making the plan fails.
        let plan = CudaFftPlan {
            handle: Mutex::new(handle),
            ctx,
            ty,
        };
        let mut work = 0usize;
        // SAFETY: a fresh handle; the arrays hold `rank` sizes each and outlive the call,
        // which only reads them.
        check("cufftMakePlanMany64", unsafe {
            cf::cufftMakePlanMany64(
                handle,
                rank,
                n.as_mut_ptr(),
                inembed.as_mut_ptr(),
                istride,
                idist,
                onembed.as_mut_ptr(),
                ostride,
                odist,
                ty,
                batch,
                &mut work,
            )
        })?;
        Ok(plan)
    }
}

impl GpuFftPlan for CudaFftPlan {
    fn execute(
        &self,
        s: RawStream,
        direction: FftDirection,
        input: u64,
        output: u64,
    ) -> Result<()> {
        use cf::cufftType::*;
        let dir = match direction {
            FftDirection::Forward => -1, // CUFFT_FORWARD
            FftDirection::Inverse => 1,  // CUFFT_INVERSE
        };
        let guard = self.handle.lock();
        let h = *guard;
        bind(self.ctx)?;
        // SAFETY: a live plan and stream.
        check("cufftSetStream", unsafe {
            cf::cufftSetStream(h, s.0 as cf::cudaStream_t)
        })?;
        let (i, o) = (input as usize, output as usize);
        // SAFETY: the caller (the stream, through `FftPlanInterface::execute`'s contract)
        // checked that both operands cover every element the plan's layouts address; the
        // exec only enqueues on the bound stream.
        let (call, status) = unsafe {
            match self.ty {
                CUFFT_C2C => ("cufftExecC2C", cf::cufftExecC2C(h, i as _, o as _, dir)),
                CUFFT_Z2Z => ("cufftExecZ2Z", cf::cufftExecZ2Z(h, i as _, o as _, dir)),
                CUFFT_R2C => ("cufftExecR2C", cf::cufftExecR2C(h, i as _, o as _)),
                CUFFT_D2Z => ("cufftExecD2Z", cf::cufftExecD2Z(h, i as _, o as _)),
                CUFFT_C2R => ("cufftExecC2R", cf::cufftExecC2R(h, i as _, o as _)),
                CUFFT_Z2D => ("cufftExecZ2D", cf::cufftExecZ2D(h, i as _, o as _)),
            }
        };
        check(call, status)
    }
}

impl Drop for CudaFftPlan {
    fn drop(&mut self) {
        // The caller (gpu/fft.rs) waits for the plan's last execution before the last
        // reference drops, so no transform of this plan is pending here.
        if bind(self.ctx).is_ok() {
            // SAFETY: the handle is ours and no call is in flight (we hold `&mut self`).
            let _ = unsafe { cf::cufftDestroy(*self.handle.get_mut()) };
        }
    }
}
