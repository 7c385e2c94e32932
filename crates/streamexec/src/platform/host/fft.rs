//! FFT on the host platform: `rustfft` transforms complex lines, `realfft` the real last
//! dimension of R2C and C2R. A plan makes its rustfft/realfft plans once; an execution runs in
//! stream order on the stream's worker, its batches spread over the executor's rayon pool.
//!
//! Device memory is only touched through `device_bytes` copies (see blas.rs), so an execution
//! gathers its input into packed private buffers, transforms there, and scatters the result,
//! writing only the elements the output layout addresses. Multi-dimensional transforms run
//! one axis at a time: the last axis over contiguous rows, every other axis by transposing each
//! `n × inner` block so its lines become rows. Batches are independent, so each chunk of
//! batches is gathered, transformed and scattered by one task; an in-place real transform
//! (whose two sides share bytes across batches) gathers every batch before any is written.

use std::sync::Arc;

use num_complex::Complex;
use parking_lot::Mutex;
use rayon::prelude::*;
use realfft::{ComplexToReal, FftError, RealFftPlanner, RealToComplex};
use rustfft::{Fft, FftNum, FftPlanner};

use super::device::HostExecutor;
use crate::error::{Error, Result};
use crate::interface::StreamInterface;
use crate::interface::blas::Operand;
use crate::interface::fft::{
    FftDirection, FftLayout, FftPlanDesc, FftPlanInterface, FftPrecision, FftSupport, FftType,
};
use crate::ptx::device_bytes;
use crate::ptx::memory::Pinned;

/// Bytes of packed data one task handles (gathers, transforms, scatters) at a time.
const CHUNK_BYTES: usize = 256 << 10;

/// The most points one transform may have (2^34: 128 GiB of f32 complex values).
const MAX_POINTS: u64 = 1 << 34;

/// Elements of rows one task transforms when a chunk's rows are split across threads.
const ROW_CHUNK: usize = 16 << 10;

/// Bytes per parallel task of a large contiguous copy.
const COPY_CHUNK: usize = 256 << 10;

/// The rustfft/realfft plans of one precision.
struct Lines<T: FftNum> {
    /// Per dimension, complex FFTs of its size: `[forward, inverse]`. For R2C and C2R the last
    /// dimension's are unused (realfft serves it).
    c2c: Vec<[Arc<dyn Fft<T>>; 2]>,
    r2c: Option<Arc<dyn RealToComplex<T>>>,
    c2r: Option<Arc<dyn ComplexToReal<T>>>,
    /// Scratch the largest of them needs.
    scratch: usize,
}

/// Private buffers of one task: an axis block's transpose and the FFT scratch.
struct TaskBufs<T> {
    block: Vec<Complex<T>>,
    scratch: Vec<Complex<T>>,
}

/// Packed real and complex data of one execution (the real part empty for C2C).
type Packed<T> = (Vec<T>, Vec<Complex<T>>);

/// A host plan in one precision.
struct Plan<T: FftNum> {
    desc: FftPlanDesc,
    /// Logical shape of the real side (R2C/C2R) and of the complex side, as `usize`.
    real_shape: Vec<usize>,
    complex_shape: Vec<usize>,
    lines: Lines<T>,
    /// Packed real and complex data of whole executions, kept for the next one.
    data: Mutex<Vec<Packed<T>>>,
    /// Task buffers, kept for the next task.
    bufs: Mutex<Vec<TaskBufs<T>>>,
}

/// The f32 or f64 plan.
enum Typed {
    F32(Arc<Plan<f32>>),
    F64(Arc<Plan<f64>>),
}

/// A plan of the host platform.
struct HostFftPlan {
    exec: Arc<HostExecutor>,
    typed: Typed,
}

fn product(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl<T: FftNum + bytemuck::Pod> Plan<T> {
    fn new(desc: &FftPlanDesc) -> Self {
        let dims: Vec<usize> = desc.dims.iter().map(|&d| d as usize).collect();
        let complex_shape: Vec<usize> = desc.complex_shape().iter().map(|&d| d as usize).collect();
        let mut planner = FftPlanner::<T>::new();
        let c2c: Vec<[Arc<dyn Fft<T>>; 2]> = dims
            .iter()
            .map(|&n| [planner.plan_fft_forward(n), planner.plan_fft_inverse(n)])
            .collect();
        let mut scratch = c2c
            .iter()
            .flatten()
            .map(|f| f.get_inplace_scratch_len())
            .max()
            .unwrap_or(0);
        let (mut r2c, mut c2r) = (None, None);
        let last = *dims.last().expect("validated plans have rank ≥ 1"); // ok: validated
        let mut real = RealFftPlanner::<T>::new();
        match desc.ty {
            FftType::C2C => {}
            FftType::R2C => {
                let p = real.plan_fft_forward(last);
                scratch = scratch.max(p.get_scratch_len());
                r2c = Some(p);
            }
            FftType::C2R => {
                let p = real.plan_fft_inverse(last);
                scratch = scratch.max(p.get_scratch_len());
                c2r = Some(p);
            }
        }
        Plan {
            desc: desc.clone(),
            real_shape: dims,
            complex_shape,
            lines: Lines {
                c2c,
                r2c,
                c2r,
                scratch,
            },
            data: Mutex::new(Vec::new()),
            bufs: Mutex::new(Vec::new()),
        }
    }

    /// Runs every batch: `input` and `output` are the pinned operands (the same bytes when in
    /// place).
    fn run(&self, direction: FftDirection, input: &Pinned, output: &Pinned) -> Result<()> {
        let d = &self.desc;
        let batch = d.batch as usize;
        let (nr, nc) = (product(&self.real_shape), product(&self.complex_shape));
        let real = d.ty != FftType::C2C;
        let (per_re, per_cx) = if real { (nr, nc) } else { (0, nc) };
        let (mut re, mut cx) = self.data.lock().pop().unwrap_or_default();
        re.resize(batch * per_re, T::zero());
        cx.resize(batch * per_cx, Complex::new(T::zero(), T::zero()));
        let per_bytes = (per_re + 2 * per_cx) * size_of::<T>();
        let k = (CHUNK_BYTES / per_bytes.max(1)).clamp(1, batch);
        let phased = real && input.as_ptr() == output.as_ptr();
        let result = if phased {
            self.phases(direction, input, output, k, &mut re, &mut cx)
        } else {
            self.fused(direction, input, output, k, &mut re, &mut cx)
        };
        self.data.lock().push((re, cx));
        result
    }

    /// Each task gathers, transforms and scatters its chunk of `k` batches.
    fn fused(
        &self,
        direction: FftDirection,
        input: &Pinned,
        output: &Pinned,
        k: usize,
        re: &mut [T],
        cx: &mut [Complex<T>],
    ) -> Result<()> {
        let per_cx = product(&self.complex_shape);
        let per_re = if re.is_empty() {
            0
        } else {
            product(&self.real_shape)
        };
        let (ip, op) = (input.as_ptr() as usize, output.as_ptr() as usize);
        let run = |(i, (re, cx)): (usize, (&mut [T], &mut [Complex<T>]))| -> Result<()> {
            let b0 = i * k;
            self.gather(ip as *const u8, b0, re, cx);
            self.transform(direction, re, cx)?;
            self.scatter(op as *mut u8, b0, re, cx);
            Ok(())
        };
        if per_re == 0 {
            cx.par_chunks_mut(k * per_cx)
                .map(|c| (&mut [][..], c))
                .enumerate()
                .try_for_each(run)
        } else {
            re.par_chunks_mut(k * per_re)
                .zip(cx.par_chunks_mut(k * per_cx))
                .enumerate()
                .try_for_each(run)
        }
    }

    /// Gathers every batch, then transforms every chunk, then scatters every batch: for an
    /// in-place real transform, whose output may overwrite input of other batches.
    fn phases(
        &self,
        direction: FftDirection,
        input: &Pinned,
        output: &Pinned,
        k: usize,
        re: &mut [T],
        cx: &mut [Complex<T>],
    ) -> Result<()> {
        let (per_re, per_cx) = (product(&self.real_shape), product(&self.complex_shape));
        let (ip, op) = (input.as_ptr() as usize, output.as_ptr() as usize);
        re.par_chunks_mut(k * per_re)
            .zip(cx.par_chunks_mut(k * per_cx))
            .enumerate()
            .for_each(|(i, (re, cx))| self.gather(ip as *const u8, i * k, re, cx));
        re.par_chunks_mut(k * per_re)
            .zip(cx.par_chunks_mut(k * per_cx))
            .try_for_each(|(re, cx)| self.transform(direction, re, cx))?;
        re.par_chunks_mut(k * per_re)
            .zip(cx.par_chunks_mut(k * per_cx))
            .enumerate()
            .for_each(|(i, (re, cx))| self.scatter(op as *mut u8, i * k, re, cx));
        Ok(())
    }

    /// Copies the input of batches `b0..` (as many as the packed buffers hold) from `p`.
    fn gather(&self, p: *const u8, b0: usize, re: &mut [T], cx: &mut [Complex<T>]) {
        let d = &self.desc;
        if d.ty == FftType::R2C {
            let b = bytemuck::cast_slice_mut(re);
            copy_layout(
                p as *mut u8,
                &d.input,
                &self.real_shape,
                size_of::<T>(),
                b0,
                b,
                false,
            );
        } else {
            let b = bytemuck::cast_slice_mut(cx);
            copy_layout(
                p as *mut u8,
                &d.input,
                &self.complex_shape,
                2 * size_of::<T>(),
                b0,
                b,
                false,
            );
        }
    }

    /// Copies the output of batches `b0..` to `p`, only the elements the layout addresses.
    fn scatter(&self, p: *mut u8, b0: usize, re: &mut [T], cx: &mut [Complex<T>]) {
        let d = &self.desc;
        if d.ty == FftType::C2R {
            let b = bytemuck::cast_slice_mut(re);
            copy_layout(p, &d.output, &self.real_shape, size_of::<T>(), b0, b, true);
        } else {
            let b = bytemuck::cast_slice_mut(cx);
            copy_layout(
                p,
                &d.output,
                &self.complex_shape,
                2 * size_of::<T>(),
                b0,
                b,
                true,
            );
        }
    }

    /// Transforms the packed batches in `re` / `cx`.
    fn transform(
        &self,
        direction: FftDirection,
        re: &mut [T],
        cx: &mut [Complex<T>],
    ) -> Result<()> {
        let mut bufs = self.bufs.lock().pop().unwrap_or_else(|| TaskBufs {
            block: Vec::new(),
            scratch: Vec::new(),
        });
        let zero = Complex::new(T::zero(), T::zero());
        bufs.scratch.resize(self.lines.scratch, zero);
        let result = self.transform_with(direction, re, cx, &mut bufs);
        self.bufs.lock().push(bufs);
        result
    }

    fn transform_with(
        &self,
        direction: FftDirection,
        re: &mut [T],
        cx: &mut [Complex<T>],
        bufs: &mut TaskBufs<T>,
    ) -> Result<()> {
        let shape = &self.complex_shape;
        let rank = shape.len();
        let dir = usize::from(direction == FftDirection::Inverse);
        let (n_last, nc_last) = (self.real_shape[rank - 1], shape[rank - 1]);
        match self.desc.ty {
            FftType::C2C => self.axes(dir, 0..rank, cx, bufs),
            FftType::R2C => {
                let r2c = self.lines.r2c.as_ref().expect("R2C plans hold an r2c"); // ok: made in new
                let rows = (ROW_CHUNK / n_last).max(1);
                re.par_chunks_mut(rows * n_last)
                    .zip(cx.par_chunks_mut(rows * nc_last))
                    .try_for_each(|(re, cx)| {
                        let mut scratch = self.scratch();
                        for (r, c) in re.chunks_mut(n_last).zip(cx.chunks_mut(nc_last)) {
                            r2c.process_with_scratch(r, c, &mut scratch)
                                .map_err(|e| Error::internal(format!("realfft R2C: {e}")))?;
                        }
                        Ok::<_, Error>(())
                    })?;
                self.axes(0, 0..rank - 1, cx, bufs);
            }
            FftType::C2R => {
                self.axes(1, 0..rank - 1, cx, bufs);
                let c2r = self.lines.c2r.as_ref().expect("C2R plans hold a c2r"); // ok: made in new
                let rows = (ROW_CHUNK / n_last).max(1);
                cx.par_chunks_mut(rows * nc_last)
                    .zip(re.par_chunks_mut(rows * n_last))
                    .try_for_each(|(cx, re)| {
                        let mut scratch = self.scratch();
                        for (c, r) in cx.chunks_mut(nc_last).zip(re.chunks_mut(n_last)) {
                            match c2r.process_with_scratch(c, r, &mut scratch) {
                                // Non-zero imaginary parts of the first (and, n even, the last)
                                // value are ignored, as cuFFT ignores them; realfft computes as
                                // if they were 0.
                                Ok(()) | Err(FftError::InputValues(..)) => {}
                                Err(e) => return Err(Error::internal(format!("realfft C2R: {e}"))),
                            }
                        }
                        Ok(())
                    })?;
            }
        }
        Ok(())
    }

    /// Complex FFTs (`dir`: 0 forward, 1 inverse) along each axis in `axes` of the packed
    /// transforms in `cx` (shape `complex_shape`).
    fn axes(
        &self,
        dir: usize,
        axes: std::ops::Range<usize>,
        cx: &mut [Complex<T>],
        bufs: &mut TaskBufs<T>,
    ) {
        let shape = &self.complex_shape;
        for d in axes.rev() {
            let n = shape[d];
            if n == 1 {
                continue;
            }
            let fft = &self.lines.c2c[d][dir];
            let inner: usize = product(&shape[d + 1..]);
            if inner == 1 {
                self.rows(fft, cx, &mut bufs.scratch);
                continue;
            }
            bufs.block
                .resize(n * inner, Complex::new(T::zero(), T::zero()));
            for block in cx.chunks_mut(n * inner) {
                // The block is `n × inner` (row-major): its lines along this axis are columns.
                transpose::transpose(block, &mut bufs.block, inner, n);
                self.rows(fft, &mut bufs.block, &mut bufs.scratch);
                transpose::transpose(&bufs.block, block, n, inner);
            }
        }
    }
}

impl<T: FftNum + bytemuck::Pod> Plan<T> {
    /// `fft` over every row of `buf` (rows of `fft.len()`), in parallel chunks of about
    /// [`ROW_CHUNK`] elements when there is more than one.
    fn rows(&self, fft: &Arc<dyn Fft<T>>, buf: &mut [Complex<T>], scratch: &mut [Complex<T>]) {
        let n = fft.len();
        let per = (ROW_CHUNK / n).max(1) * n;
        if buf.len() <= per {
            fft.process_with_scratch(buf, scratch);
            return;
        }
        buf.par_chunks_mut(per)
            .for_each(|rows| fft.process_with_scratch(rows, &mut self.scratch()));
    }

    /// A fresh FFT scratch buffer for a parallel task.
    fn scratch(&self) -> Vec<Complex<T>> {
        vec![Complex::new(T::zero(), T::zero()); self.lines.scratch]
    }
}

/// Copies between device memory at `p` (a side with `layout` over `shape`, elements of `e`
/// bytes) and `packed` (whole batches from `b0`, packed): device → packed unless `store`.
/// Only the addressed elements are touched.
fn copy_layout(
    p: *mut u8,
    layout: &FftLayout,
    shape: &[usize],
    e: usize,
    b0: usize,
    packed: &mut [u8],
    store: bool,
) {
    let rank = shape.len();
    let per = product(shape);
    let count = packed.len() / (per * e);
    let (stride, dist) = (layout.stride as usize, layout.dist as usize);
    let rows_packed = layout.embed[1..]
        .iter()
        .zip(&shape[1..])
        .all(|(&m, &n)| m as usize == n);
    let copy = |off_elems: usize, bytes: &mut [u8]| {
        let at = p.wrapping_add(off_elems * e);
        // SAFETY: every offset this function forms is an element of a validated layout for a
        // batch below the plan's batch count, inside the pinned operand that the stream
        // checked holds the layout's extent.
        unsafe {
            if store {
                device_bytes::store_bytes(at, bytes);
            } else {
                device_bytes::load_bytes(bytes, at);
            }
        }
    };
    if stride == 1 && rows_packed && dist == per {
        // All batches are one contiguous range: large copies in parallel.
        let base = p as usize + b0 * dist * e;
        packed
            .par_chunks_mut(COPY_CHUNK)
            .enumerate()
            .for_each(|(i, bytes)| {
                let off = i * COPY_CHUNK;
                let at = (base + off) as *mut u8;
                // SAFETY: as in `copy`: inside the batches' contiguous extent.
                unsafe {
                    if store {
                        device_bytes::store_bytes(at, bytes);
                    } else {
                        device_bytes::load_bytes(bytes, at);
                    }
                }
            });
        return;
    }
    let n_last = shape[rank - 1];
    let rows = per / n_last;
    for b in 0..count {
        let one = &mut packed[b * per * e..(b + 1) * per * e];
        let base = (b0 + b) * dist;
        if stride == 1 && rows_packed {
            copy(base, one);
            continue;
        }
        for (row, bytes) in one.chunks_mut(n_last * e).enumerate().take(rows) {
            // The offset of the row's first element: its outer indices in the embeds.
            let mut rest = row;
            let mut lin = 0usize;
            let mut weight = 1usize;
            for d in (0..rank - 1).rev() {
                let i = rest % shape[d];
                rest /= shape[d];
                weight *= layout.embed[d + 1] as usize;
                lin += i * weight;
            }
            let start = base + stride * lin;
            if stride == 1 {
                copy(start, bytes);
            } else {
                for (j, el) in bytes.chunks_mut(e).enumerate() {
                    copy(start + j * stride, el);
                }
            }
        }
    }
}

impl FftSupport for HostExecutor {
    fn implementation(&self) -> &'static str {
        "rustfft"
    }

    fn create_plan(&self, desc: &FftPlanDesc) -> Result<Box<dyn FftPlanInterface>> {
        // Twiddles and scratch are O(n) host memory made now; refuse sizes no buffer could
        // hold rather than abort on a failed allocation.
        let points = desc.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        if points.is_none_or(|n| n > MAX_POINTS) {
            return Err(Error::unsupported(
                super::PLATFORM,
                "create_fft_plan",
                format!(
                    "dims {:?} make more than 2^34 points per transform, more than the host \
                     FFT plans; split the transform",
                    desc.dims
                ),
            ));
        }
        let exec = self
            .me
            .upgrade()
            .ok_or_else(|| Error::internal("host executor dropped while planning an FFT"))?;
        let typed = match desc.precision {
            FftPrecision::F32 => Typed::F32(Arc::new(Plan::new(desc))),
            FftPrecision::F64 => Typed::F64(Arc::new(Plan::new(desc))),
        };
        Ok(Box::new(HostFftPlan { exec, typed }))
    }
}

impl FftPlanInterface for HostFftPlan {
    unsafe fn execute(
        &self,
        stream: &dyn StreamInterface,
        direction: FftDirection,
        input: Operand,
        output: Operand,
    ) -> Result<()> {
        const OP: &str = "then_fft";
        let d = match &self.typed {
            Typed::F32(p) => &p.desc,
            Typed::F64(p) => &p.desc,
        };
        let (ib, ob) = (d.input_element_bytes(), d.output_element_bytes());
        let inp = self.exec.pin(input.addr, input.len * ib, OP)?;
        let out = self.exec.pin(output.addr, output.len * ob, OP)?;
        let pool = Arc::clone(&self.exec.pool);
        let run: Box<dyn FnOnce() -> Result<()> + Send> = match &self.typed {
            Typed::F32(p) => {
                let p = Arc::clone(p);
                Box::new(move || pool.install(|| p.run(direction, &inp, &out)))
            }
            Typed::F64(p) => {
                let p = Arc::clone(p);
                Box::new(move || pool.install(|| p.run(direction, &inp, &out)))
            }
        };
        stream.host_callback(run)
    }
}
