//! BLAS on the host platform: the `gemm` crate for level 3, rayon loops for the rest. Each
//! call runs in stream order on the stream's worker, with its parallel part on the executor's
//! rayon pool.
//!
//! Device memory on the host is only ever touched through atomic or opaque (`rep movsb`) copies
//! (see memory.rs), so that racing kernels are a wrong answer and never undefined behaviour.
//! These operations keep that rule: they copy operands into private buffers with those
//! copies, compute there with ordinary (vectorised) code, and copy results back. For GEMM the
//! O(n²) copies are small next to the O(n³) product.

use std::cell::RefCell;
use std::sync::Arc;

use rayon::prelude::*;

use super::device::HostExecutor;
use crate::error::Result;
use crate::interface::blas::{BlasElem, GemmCall, GemvCall, Level1Call, Level1Op, Operand};
use crate::interface::{BlasSupport, StreamInterface};
use crate::ptx::device_bytes;
use crate::ptx::memory::Pinned;

/// The two element types, with the conversions the loops need.
trait Real: bytemuck::Pod + Send + Sync + 'static {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
}
impl Real for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}
impl Real for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// Copies a `rows × cols` column-major matrix (leading dimension `ld`) out of device memory,
/// packed (leading dimension `rows`).
fn read_matrix<T: Real>(p: *const u8, rows: u64, cols: u64, ld: u64) -> Vec<T> {
    let (rows, cols, ld) = (rows as usize, cols as usize, ld as usize);
    let mut out = vec![T::zeroed(); rows * cols];
    let size = size_of::<T>();
    if ld == rows {
        // SAFETY: the stream checked that the operand spans `ld·(cols−1)+rows` elements.
        unsafe { device_bytes::load_bytes(bytemuck::cast_slice_mut(&mut out), p) };
    } else {
        for (j, col) in out.chunks_mut(rows.max(1)).enumerate() {
            // SAFETY: column `j` lies inside the checked extent.
            unsafe {
                device_bytes::load_bytes(bytemuck::cast_slice_mut(col), p.add(j * ld * size));
            }
        }
    }
    out
}

/// Writes a packed `rows × cols` matrix into device memory with leading dimension `ld`,
/// touching only the matrix's elements (not the gaps between columns).
fn write_matrix<T: Real>(p: *mut u8, rows: u64, ld: u64, m: &[T]) {
    let (rows, ld) = (rows as usize, ld as usize);
    for (j, col) in m.chunks(rows.max(1)).enumerate() {
        // SAFETY: column `j` lies inside the checked extent.
        unsafe {
            device_bytes::store_bytes(p.add(j * ld * size_of::<T>()), bytemuck::cast_slice(col))
        };
    }
}

/// `n` elements `inc` apart.
fn gather<T: Real>(p: *const u8, n: u64, inc: u64) -> Vec<T> {
    if inc == 1 {
        return read_matrix(p, n, 1, n);
    }
    (0..n as usize)
        // SAFETY: element `i·inc` lies inside the checked extent.
        .map(|i| unsafe { device_bytes::load::<T>(p.add(i * inc as usize * size_of::<T>())) })
        .collect()
}

/// Writes `v` to elements `inc` apart.
fn scatter<T: Real>(p: *mut u8, inc: u64, v: &[T]) {
    if inc == 1 {
        return write_matrix(p, v.len() as u64, v.len() as u64, v);
    }
    for (i, x) in v.iter().enumerate() {
        // SAFETY: element `i·inc` lies inside the checked extent.
        unsafe { device_bytes::store(p.add(i * inc as usize * size_of::<T>()), *x) };
    }
}

fn at(p: &Pinned, elems: u64, size: u64) -> *mut u8 {
    p.as_ptr().wrapping_add((elems * size) as usize)
}

thread_local! {
    /// GEMM's packed operands, kept per thread of the executor's pool (f64 words, aligned for
    /// both types), so repeated calls reuse memory instead of faulting in fresh pages.
    static SCRATCH: RefCell<[Vec<f64>; 3]> = RefCell::default();
}

/// The first `n` elements of `buf` as `T`, growing it if needed (old contents stay).
fn sized<T: Real>(buf: &mut Vec<f64>, n: usize) -> &mut [T] {
    let words = (n * size_of::<T>()).div_ceil(8);
    if buf.len() < words {
        buf.resize(words, 0.0);
    }
    &mut bytemuck::cast_slice_mut::<f64, T>(buf)[..n]
}

/// Bytes per parallel copy task.
const COPY_CHUNK: usize = 256 << 10;

/// [`read_matrix`] into `out`, in parallel on the current rayon pool.
fn par_read_matrix<T: Real>(p: *const u8, rows: u64, ld: u64, out: &mut [T]) {
    let (rows, ld, size) = (rows as usize, ld as usize, size_of::<T>());
    let p = p as usize;
    if ld == rows {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        bytes
            .par_chunks_mut(COPY_CHUNK)
            .enumerate()
            .for_each(|(i, b)| {
                // SAFETY: inside the checked, pinned extent of `rows · cols` elements.
                unsafe { device_bytes::load_bytes(b, (p + i * COPY_CHUNK) as *const u8) }
            });
    } else {
        out.par_chunks_mut(rows.max(1))
            .enumerate()
            .for_each(|(j, col)| {
                // SAFETY: column `j` lies inside the checked, pinned extent.
                unsafe {
                    device_bytes::load_bytes(
                        bytemuck::cast_slice_mut(col),
                        (p + j * ld * size) as _,
                    )
                }
            });
    }
}

/// [`write_matrix`], in parallel on the current rayon pool.
fn par_write_matrix<T: Real>(p: *mut u8, rows: u64, ld: u64, m: &[T]) {
    let (rows, ld, size) = (rows as usize, ld as usize, size_of::<T>());
    let p = p as usize;
    if ld == rows {
        let bytes: &[u8] = bytemuck::cast_slice(m);
        bytes.par_chunks(COPY_CHUNK).enumerate().for_each(|(i, b)| {
            // SAFETY: inside the checked, pinned extent.
            unsafe { device_bytes::store_bytes((p + i * COPY_CHUNK) as *mut u8, b) }
        });
    } else {
        m.par_chunks(rows.max(1)).enumerate().for_each(|(j, col)| {
            // SAFETY: column `j` lies inside the checked, pinned extent.
            unsafe {
                device_bytes::store_bytes((p + j * ld * size) as _, bytemuck::cast_slice(col))
            }
        });
    }
}

fn gemm_on<T: Real>(c: &GemmCall, pa: &Pinned, pb: &Pinned, pc: &Pinned) {
    if (c.alpha == 0.0 || c.k == 0) && c.beta == 1.0 {
        return;
    }
    // A pool thread blocked inside one GEMM may steal another stream's GEMM: that one gets
    // fresh buffers instead of the (borrowed) scratch.
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut bufs) => gemm_with::<T>(c, pa, pb, pc, &mut bufs),
        Err(_) => gemm_with::<T>(c, pa, pb, pc, &mut Default::default()),
    });
}

fn gemm_with<T: Real>(
    c: &GemmCall,
    pa: &Pinned,
    pb: &Pinned,
    pc: &Pinned,
    [sa, sb, sc]: &mut [Vec<f64>; 3],
) {
    let size = c.elem.size();
    let (ta, tb) = (c.trans_a.is_transposed(), c.trans_b.is_transposed());
    let (ar, ac) = if ta { (c.k, c.m) } else { (c.m, c.k) };
    let (br, bc) = if tb { (c.n, c.k) } else { (c.k, c.n) };
    let reads_ab = c.alpha != 0.0 && c.k > 0;
    {
        for i in 0..c.batch {
            let cp = at(pc, i * c.stride_c, size);
            let cm: &mut [T] = sized(sc, (c.m * c.n) as usize);
            if c.beta != 0.0 {
                par_read_matrix(cp, c.m, c.ldc, cm);
            } else if !reads_ab {
                cm.fill(T::zeroed());
            }
            if reads_ab {
                let am: &mut [T] = sized(sa, (ar * ac) as usize);
                par_read_matrix(at(pa, i * c.stride_a, size), ar, c.lda, am);
                let bm: &mut [T] = sized(sb, (br * bc) as usize);
                par_read_matrix(at(pb, i * c.stride_b, size), br, c.ldb, bm);
                // Strides of op(A) (m × k) and op(B) (k × n) over the packed copies.
                let (a_rs, a_cs) = if ta {
                    (ar as isize, 1)
                } else {
                    (1, ar as isize)
                };
                let (b_rs, b_cs) = if tb {
                    (br as isize, 1)
                } else {
                    (1, br as isize)
                };
                // SAFETY: the three buffers are private, packed, and sized m·n, ar·ac, br·bc;
                // the strides above stay inside them. gemm computes
                // dst = alpha·dst + beta·lhs·rhs, so BLAS's beta goes first; with
                // read_dst false it does not read dst.
                unsafe {
                    gemm::gemm(
                        c.m as usize,
                        c.n as usize,
                        c.k as usize,
                        cm.as_mut_ptr(),
                        c.m as isize,
                        1,
                        c.beta != 0.0,
                        am.as_ptr(),
                        a_cs,
                        a_rs,
                        bm.as_ptr(),
                        b_cs,
                        b_rs,
                        T::from_f64(c.beta),
                        T::from_f64(c.alpha),
                        false,
                        false,
                        false,
                        gemm::Parallelism::Rayon(0),
                    )
                }
            } else if c.beta != 0.0 {
                let beta = c.beta;
                cm.par_iter_mut()
                    .for_each(|v| *v = T::from_f64(beta * v.to_f64()));
            }
            par_write_matrix(cp, c.m, c.ldc, cm);
        }
    }
}

fn gemv_on<T: Real>(c: &GemvCall, pa: &Pinned, px: &Pinned, py: &Pinned) {
    let (lx, ly) = if c.trans.is_transposed() {
        (c.m, c.n)
    } else {
        (c.n, c.m)
    };
    let old: Vec<T> = if c.beta != 0.0 {
        gather(py.as_ptr(), ly, c.incy)
    } else {
        vec![T::zeroed(); ly as usize]
    };
    let mut acc = vec![0.0f64; ly as usize];
    if c.alpha != 0.0 && lx > 0 {
        let a: Vec<T> = read_matrix(pa.as_ptr(), c.m, c.n, c.lda);
        let x: Vec<T> = gather(px.as_ptr(), lx, c.incx);
        let m = c.m as usize;
        if c.trans.is_transposed() {
            acc.par_iter_mut().enumerate().for_each(|(j, s)| {
                let col = &a[j * m..(j + 1) * m];
                *s = col
                    .iter()
                    .zip(&x)
                    .map(|(a, x)| a.to_f64() * x.to_f64())
                    .sum();
            });
        } else {
            acc.par_chunks_mut(1024)
                .enumerate()
                .for_each(|(blk, rows)| {
                    let r0 = blk * 1024;
                    for (j, xj) in x.iter().enumerate() {
                        let col = &a[j * m + r0..j * m + r0 + rows.len()];
                        for (s, a) in rows.iter_mut().zip(col) {
                            *s += a.to_f64() * xj.to_f64();
                        }
                    }
                });
        }
    }
    let y: Vec<T> = acc
        .iter()
        .zip(&old)
        .map(|(s, o)| {
            let scaled = if c.beta != 0.0 {
                c.beta * o.to_f64()
            } else {
                0.0
            };
            T::from_f64(c.alpha * s + scaled)
        })
        .collect();
    scatter(py.as_ptr(), c.incy, &y);
}

fn level1_on<T: Real>(c: &Level1Call, px: &Pinned, py: Option<&Pinned>, pr: Option<&Pinned>) {
    let x: Vec<T> = gather(px.as_ptr(), c.n, c.incx);
    let reduce = |f: &(dyn Fn(usize) -> f64 + Sync)| -> f64 {
        // Fixed chunks summed in order: the same bits on every run.
        let parts: Vec<f64> = (0..x.len())
            .collect::<Vec<_>>()
            .par_chunks(1 << 14)
            .map(|idx| idx.iter().map(|&i| f(i)).sum::<f64>())
            .collect();
        parts.iter().sum()
    };
    let put = |v: f64| {
        let r = pr.expect("reductions carry a result operand"); // ok: built by Stream::level1
        // SAFETY: the result operand spans at least one element.
        unsafe { device_bytes::store(r.as_ptr(), T::from_f64(v)) }
    };
    let py_ptr = || py.expect("axpy/copy/dot carry y").as_ptr(); // ok: built by Stream::level1
    match c.op {
        Level1Op::Axpy { alpha } => {
            let mut y: Vec<T> = gather(py_ptr(), c.n, c.incy);
            let a = T::from_f64(alpha).to_f64();
            y.par_iter_mut()
                .zip(&x)
                .for_each(|(y, x)| *y = T::from_f64(a * x.to_f64() + y.to_f64()));
            scatter(py_ptr(), c.incy, &y);
        }
        Level1Op::Scal { alpha } => {
            let mut x = x;
            x.par_iter_mut()
                .for_each(|v| *v = T::from_f64(alpha * v.to_f64()));
            scatter(px.as_ptr(), c.incx, &x);
        }
        Level1Op::Copy => scatter(py_ptr(), c.incy, &x),
        Level1Op::Dot => {
            let y: Vec<T> = gather(py_ptr(), c.n, c.incy);
            put(reduce(&|i| x[i].to_f64() * y[i].to_f64()));
        }
        Level1Op::Nrm2 => put(reduce(&|i| x[i].to_f64() * x[i].to_f64()).sqrt()),
        Level1Op::Asum => put(reduce(&|i| x[i].to_f64().abs())),
    }
}

impl HostExecutor {
    fn pin_operand(&self, o: &Operand, size: u64, op: &str) -> Result<Pinned> {
        self.pin(o.addr, o.len * size, op)
    }
}

impl BlasSupport for HostExecutor {
    unsafe fn gemm(&self, stream: &dyn StreamInterface, call: &GemmCall) -> Result<()> {
        let (s, op) = (call.elem.size(), "then_blas_gemm");
        let (a, b) = (
            self.pin_operand(&call.a, s, op)?,
            self.pin_operand(&call.b, s, op)?,
        );
        let c = self.pin_operand(&call.c, s, op)?;
        let (pool, call) = (Arc::clone(&self.pool), *call);
        stream.host_callback(Box::new(move || {
            pool.install(|| match call.elem {
                BlasElem::F32 => gemm_on::<f32>(&call, &a, &b, &c),
                BlasElem::F64 => gemm_on::<f64>(&call, &a, &b, &c),
            });
            Ok(())
        }))
    }

    unsafe fn gemv(&self, stream: &dyn StreamInterface, call: &GemvCall) -> Result<()> {
        let (s, op) = (call.elem.size(), "then_blas_gemv");
        let (a, x) = (
            self.pin_operand(&call.a, s, op)?,
            self.pin_operand(&call.x, s, op)?,
        );
        let y = self.pin_operand(&call.y, s, op)?;
        let (pool, call) = (Arc::clone(&self.pool), *call);
        stream.host_callback(Box::new(move || {
            pool.install(|| match call.elem {
                BlasElem::F32 => gemv_on::<f32>(&call, &a, &x, &y),
                BlasElem::F64 => gemv_on::<f64>(&call, &a, &x, &y),
            });
            Ok(())
        }))
    }

    unsafe fn level1(&self, stream: &dyn StreamInterface, call: &Level1Call) -> Result<()> {
        let (s, op) = (call.elem.size(), "then_blas_level1");
        let x = self.pin_operand(&call.x, s, op)?;
        let y = call.y.map(|y| self.pin_operand(&y, s, op)).transpose()?;
        let r = call
            .result
            .map(|r| self.pin_operand(&r, s, op))
            .transpose()?;
        let (pool, call) = (Arc::clone(&self.pool), *call);
        stream.host_callback(Box::new(move || {
            pool.install(|| match call.elem {
                BlasElem::F32 => level1_on::<f32>(&call, &x, y.as_ref(), r.as_ref()),
                BlasElem::F64 => level1_on::<f64>(&call, &x, y.as_ref(), r.as_ref()),
            });
            Ok(())
        }))
    }
}
