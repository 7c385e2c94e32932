//! The built-in FFT plan that the CUDA-like backend (`gpu/fft.rs`) and OpenCL (`opencl/fft.rs`)
//! share: it factors the transform, builds its tables, allocates its scratch, and enqueues the
//! kernels of `kernels/fft_body.h` (CUDA C → committed PTX, and the same text as OpenCL C) on
//! the user's stream. A backend supplies only a [`Device`]: its executor, how it passes a
//! pointer, its block size, and the kernels.
//!
//! # Algorithm
//!
//! Every execution runs on a contiguous complex working array of shape batch × d₀ × d₁ × d₂
//! (the rank padded to 3 with leading 1s):
//! 1. `gather` reads the input layout (any stride, distance and embedding) into it: complex
//!    values, real values with imaginary part 0 (R2C), or for C2R the stored half of a
//!    Hermitian spectrum with the other half rebuilt as `X[k] = conj(X[−k mod d])`. An inverse
//!    transform is computed as `conj(forward(conj(x)))`, so the gather conjugates and every
//!    kernel and table after it is forward-only.
//! 2. Each axis of extent > 1 is transformed in place along its lines (elements `s` apart,
//!    `s` the product of the inner extents, so no transposes are needed): sizes of the form
//!    2ᵃ3ᵇ5ᶜ7ᵈ by mixed-radix Stockham passes (radix 4, 2, 3, 5, 7; one generic `pass`
//!    kernel taking the radix and the product of the earlier radices), ping-ponging between two
//!    working arrays; other sizes by Bluestein's chirp-z: `chirp_in` (x·a into a zero-padded
//!    power-of-two line m ≥ 2n − 1), m-point passes, `chirp_mul` (× the filter's transform,
//!    conjugated), m-point passes again (the conjugation makes them the inverse), `chirp_out`.
//! 3. `scatter` writes the output layout: all of it (C2C), the first n/2 + 1 along the last
//!    axis (R2C) or the real parts (C2R), conjugated back for an inverse.
//!
//! Because the whole input is read before any output is written, in-place plans need nothing
//! special, and a C2R plan leaves its input intact.
//!
//! # Memory and streams
//!
//! Twiddles (`e^{−2πi·t/n}` per axis size), Bluestein chirps and filters are computed in f64 on
//! the host and uploaded once at plan creation, with the two working arrays (and two padded
//! Bluestein arrays when an axis needs them). Dropping the plan deallocates them through the
//! executor, whose `deallocate` waits for work already enqueued (the interface's contract), so
//! a plan dropped with transforms pending is safe without blocking.
//!
//! One plan has one set of scratch, so executions are serialised: each execution waits (in
//! stream order, on the device) for an event recorded at the end of the previous execution of
//! the same plan, whatever stream ran it, and records its own. Two streams sharing a plan are
//! therefore correct but not concurrent; make one plan per stream for concurrency.

mod tables;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::interface::blas::Operand;
use crate::interface::fft::{FftDirection, FftPlanDesc, FftPlanInterface, FftPrecision, FftType};
use crate::interface::{EventInterface, KernelInterface, StreamExecutorInterface, StreamInterface};
use crate::types::{BlockDim, DeviceAddress, LaunchDims, Packable, PackedArg, ThreadDim};
use tables::{Axis, Method};

/// The operation named in errors.
const OP: &str = "then_fft";

/// How a backend passes a pointer to the kernels: the argument for the allocation holding
/// `addr` (covering `bytes` from `addr`) and `addr`'s offset from it in `scalar`-byte units.
pub(crate) type PointerFn = fn(DeviceAddress, u64, u64) -> Result<(PackedArg, u64)>;

/// What a backend lends the shared plan.
#[derive(Clone)]
pub(crate) struct Device {
    /// The executor that owns the streams and memory (allocations, events).
    pub exec: Arc<dyn StreamExecutorInterface>,
    /// Its pointer passing.
    pub pointer: PointerFn,
    /// Threads per block of every launch.
    pub threads: u32,
    /// The most blocks of one launch (the kernels loop over the rest).
    pub max_blocks: u32,
}

/// The kernels' base names, as `kernels/fft_body.h` declares them.
const BASES: [&str; 6] = [
    "gather",
    "scatter",
    "pass",
    "chirp_in",
    "chirp_mul",
    "chirp_out",
];

/// The kernel `se_fft_<base>_<f32|f64>`.
pub(crate) fn kernel_name(base: &str, precision: FftPrecision) -> Result<&'static str> {
    let f64 = precision == FftPrecision::F64;
    Ok(match base {
        "gather" if f64 => "se_fft_gather_f64",
        "gather" => "se_fft_gather_f32",
        "scatter" if f64 => "se_fft_scatter_f64",
        "scatter" => "se_fft_scatter_f32",
        "pass" if f64 => "se_fft_pass_f64",
        "pass" => "se_fft_pass_f32",
        "chirp_in" if f64 => "se_fft_chirp_in_f64",
        "chirp_in" => "se_fft_chirp_in_f32",
        "chirp_mul" if f64 => "se_fft_chirp_mul_f64",
        "chirp_mul" => "se_fft_chirp_mul_f32",
        "chirp_out" if f64 => "se_fft_chirp_out_f64",
        "chirp_out" => "se_fft_chirp_out_f32",
        _ => return Err(Error::internal(format!("no built-in FFT kernel `{base}`"))),
    })
}

/// Parameters of kernel `name` (for loaders that need the count up front, as OpenCL's).
#[cfg(feature = "opencl")]
pub(crate) fn arity(name: &str) -> usize {
    match name.trim_end_matches("_f32").trim_end_matches("_f64") {
        "se_fft_gather" => 14,
        "se_fft_scatter" => 15,
        "se_fft_pass" => 11,
        "se_fft_chirp_mul" => 8,
        _ => 10, // chirp_in, chirp_out
    }
}

/// Memory the plan owns, deallocated when it drops.
struct Owned {
    exec: Arc<dyn StreamExecutorInterface>,
    bufs: Vec<DeviceAddress>,
}

impl Owned {
    /// Allocates `bytes` (at least 1) and keeps it.
    fn alloc(&mut self, bytes: u64) -> Result<(DeviceAddress, u64)> {
        let bytes = bytes.max(1);
        let addr = self.exec.allocate(bytes)?;
        self.bufs.push(addr);
        Ok((addr, bytes))
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        for &addr in &self.bufs {
            // SAFETY: `addr` is an allocation of `exec` that only this plan used; `deallocate`
            // keeps it until work enqueued before this call (the plan's transforms) is done.
            unsafe { self.exec.deallocate(addr) };
        }
    }
}

/// A buffer: its address and size in bytes.
type Buf = (DeviceAddress, u64);

/// A built-in plan (see the module notes).
struct Plan {
    dev: Device,
    desc: FftPlanDesc,
    /// Kernels by [`BASES`] index (the Bluestein ones only when an axis needs them).
    kernels: Vec<Option<Arc<dyn KernelInterface>>>,
    /// batch, d₀, d₁, d₂ of the working array.
    shape: [u64; 4],
    axes: Vec<Axis>,
    table: Buf,
    work: [Buf; 2],
    blue: Option<[Buf; 2]>,
    /// Orders executions (they share `work`).
    order: Serial,
    /// Last field: frees the memory after everything else.
    _owned: Owned,
}

/// Makes a plan for validated `desc` on `dev`, loading kernels with `kernel`.
pub(crate) fn create_plan(
    dev: Device,
    desc: &FftPlanDesc,
    kernel: &dyn Fn(&'static str) -> Result<Arc<dyn KernelInterface>>,
) -> Result<Box<dyn FftPlanInterface>> {
    let mut dims = [1u64; 3];
    dims[3 - desc.dims.len()..].copy_from_slice(&desc.dims);
    let shape = [desc.batch, dims[0], dims[1], dims[2]];
    let total = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| Error::invalid(OP, "batch × sizes overflows 64 bits"))?;
    let (axes, table) = tables::plan_axes(&shape, OP)?;
    let real = desc.precision.real_bytes();
    let cplx = 2 * real;
    let too_big = || Error::invalid(OP, "the plan's scratch size overflows 64 bits");
    let mut owned = Owned {
        exec: dev.exec.clone(),
        bufs: Vec::new(),
    };
    let work_bytes = total.checked_mul(cplx).ok_or_else(too_big)?;
    let work = [owned.alloc(work_bytes)?, owned.alloc(work_bytes)?];
    let blue_elems = axes
        .iter()
        .filter_map(|a| match a.method {
            Method::Bluestein { m, .. } => a.lines.checked_mul(m),
            Method::Stockham { .. } => None,
        })
        .max();
    let blue = match blue_elems {
        Some(e) => {
            let bytes = e.checked_mul(cplx).ok_or_else(too_big)?;
            Some([owned.alloc(bytes)?, owned.alloc(bytes)?])
        }
        None => None,
    };
    let bytes: Vec<u8> = match desc.precision {
        FftPrecision::F32 => table
            .iter()
            .flat_map(|c| c.map(|v| v as f32))
            .flat_map(f32::to_ne_bytes)
            .collect(),
        FftPrecision::F64 => table
            .iter()
            .flatten()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
    };
    let table_buf = owned.alloc(bytes.len() as u64)?;
    if !bytes.is_empty() {
        // SAFETY: the allocation was just made with room for `bytes`.
        unsafe { dev.exec.memcpy_h2d_sync(&bytes, table_buf.0)? };
    }
    let mut kernels = Vec::new();
    for (i, base) in BASES.iter().enumerate() {
        let needed = i < 3 || blue.is_some();
        kernels.push(if needed {
            Some(kernel(kernel_name(base, desc.precision)?)?)
        } else {
            None
        });
    }
    Ok(Box::new(Plan {
        dev,
        desc: desc.clone(),
        kernels,
        shape,
        axes,
        table: table_buf,
        work,
        blue,
        order: Serial::default(),
        _owned: owned,
    }))
}

/// A layout's embed padded to rank 3 (e₁, e₂), stride and distance.
fn layout_args(embed: &[u64], stride: u64, dist: u64) -> [PackedArg; 4] {
    let mut e = [1u64; 3];
    e[3 - embed.len()..].copy_from_slice(embed);
    [e[1].pack(), e[2].pack(), stride.pack(), dist.pack()]
}

impl Plan {
    /// `buf` plus `offset` complex numbers, as a pointer and a scalar offset.
    fn at(&self, buf: Buf, offset: u64) -> Result<[PackedArg; 2]> {
        let real = self.desc.precision.real_bytes();
        let (p, off) = (self.dev.pointer)(buf.0, buf.1, real)?;
        Ok([p, (off + 2 * offset).pack()])
    }

    /// A user operand of `len` elements of `elem` bytes.
    fn operand(&self, o: Operand, elem: u64) -> Result<[PackedArg; 2]> {
        let real = self.desc.precision.real_bytes();
        let bytes = o.len.checked_mul(elem).ok_or_else(|| {
            Error::invalid(
                OP,
                format!("an operand of {} elements overflows 64 bits", o.len),
            )
        })?;
        let (p, off) = (self.dev.pointer)(o.addr, bytes, real)?;
        Ok([p, off.pack()])
    }

    /// Launches kernel `BASES[k]` over `work` items.
    ///
    /// # Safety
    /// `args` is that kernel's parameter list and its pointers cover what it touches.
    unsafe fn launch(
        &self,
        stream: &dyn StreamInterface,
        k: usize,
        work: u64,
        args: &[PackedArg],
    ) -> Result<()> {
        let kernel = self.kernels[k]
            .as_ref()
            .ok_or_else(|| Error::internal("a built-in FFT kernel was not loaded"))?;
        let threads = u64::from(self.dev.threads);
        let blocks = work
            .div_ceil(threads)
            .clamp(1, u64::from(self.dev.max_blocks.max(1))) as u32;
        let dims = LaunchDims {
            threads: ThreadDim::new(self.dev.threads, 1, 1),
            blocks: BlockDim::new(blocks, 1, 1),
            dynamic_shared_bytes: 0,
            cooperative: false,
        };
        // SAFETY: this function's contract.
        unsafe { stream.launch(kernel, &dims, args) }
    }

    /// Stockham passes of `radices` over `lines` lines of `n` elements `s` apart, starting in
    /// `bufs[cur]`; returns the index of the buffer holding the result.
    ///
    /// # Safety
    /// Both buffers hold `lines · n` complex numbers.
    #[allow(clippy::too_many_arguments)]
    unsafe fn passes(
        &self,
        stream: &dyn StreamInterface,
        bufs: [Buf; 2],
        mut cur: usize,
        (lines, n, s): (u64, u64, u64),
        radices: &[u32],
        twiddles: u64,
    ) -> Result<usize> {
        let mut m = 1u64;
        for &p in radices {
            let [src, src_off] = self.at(bufs[cur], 0)?;
            let [dst, dst_off] = self.at(bufs[1 - cur], 0)?;
            let [tw, tw_off] = self.at(self.table, twiddles)?;
            let args = [
                src,
                src_off,
                dst,
                dst_off,
                tw,
                tw_off,
                lines.pack(),
                n.pack(),
                s.pack(),
                p.pack(),
                m.pack(),
            ];
            // SAFETY: `pass` reads and writes `lines · n` elements of the two buffers and `n`
            // twiddles, all inside them.
            unsafe { self.launch(stream, 2, lines * (n / u64::from(p)), &args)? };
            m *= u64::from(p);
            cur = 1 - cur;
        }
        Ok(cur)
    }

    /// Enqueues the whole transform.
    ///
    /// # Safety
    /// [`FftPlanInterface::execute`]'s contract.
    unsafe fn enqueue(
        &self,
        stream: &dyn StreamInterface,
        direction: FftDirection,
        input: Operand,
        output: Operand,
    ) -> Result<()> {
        let d = &self.desc;
        let [batch, d0, d1, d2] = self.shape;
        let conj = u32::from(direction == FftDirection::Inverse);
        let (in_mode, out_mode, o2) = match d.ty {
            FftType::C2C => (0u32, 0u32, d2),
            FftType::R2C => (1, 0, d2 / 2 + 1),
            FftType::C2R => (2, 1, d2),
        };
        let total = batch * d0 * d1 * d2;
        let [ip, ioff] = self.operand(input, d.input_element_bytes())?;
        let [wp, woff] = self.at(self.work[0], 0)?;
        let mut args = vec![
            ip,
            ioff,
            wp,
            woff,
            total.pack(),
            d0.pack(),
            d1.pack(),
            d2.pack(),
        ];
        args.extend(layout_args(&d.input.embed, d.input.stride, d.input.dist));
        args.extend([in_mode.pack(), conj.pack()]);
        // SAFETY: `gather` reads the input layout's elements (inside `input`, the contract)
        // and writes `total` elements of work[0].
        unsafe { self.launch(stream, 0, total, &args)? };
        let mut cur = 0;
        for a in &self.axes {
            let (lines, n, s) = (a.lines, a.n, a.s);
            match &a.method {
                Method::Stockham { radices, twiddles } => {
                    // SAFETY: both working arrays hold `total = lines · n` elements.
                    cur = unsafe {
                        self.passes(stream, self.work, cur, (lines, n, s), radices, *twiddles)?
                    };
                }
                Method::Bluestein {
                    m,
                    radices,
                    twiddles,
                    chirp,
                    filter,
                } => {
                    // SAFETY: `create_plan` sized the Bluestein arrays for `lines · m`, the
                    // working arrays hold `lines · n`, the table holds the offsets' entries.
                    unsafe {
                        self.bluestein(stream, cur, a, *m, radices, (*twiddles, *chirp, *filter))?
                    };
                }
            }
        }
        let [wp, woff] = self.at(self.work[cur], 0)?;
        let [op, ooff] = self.operand(output, d.output_element_bytes())?;
        let out_total = batch * d0 * d1 * o2;
        let mut args = vec![
            wp,
            woff,
            op,
            ooff,
            out_total.pack(),
            d0.pack(),
            d1.pack(),
            d2.pack(),
            o2.pack(),
        ];
        args.extend(layout_args(&d.output.embed, d.output.stride, d.output.dist));
        args.extend([out_mode.pack(), conj.pack()]);
        // SAFETY: `scatter` reads work[cur] and writes the output layout's elements (inside
        // `output`, the contract).
        unsafe { self.launch(stream, 1, out_total, &args) }
    }

    /// Bluestein along axis `a`, whose data is in `work[cur]` and stays there.
    ///
    /// # Safety
    /// The Bluestein arrays hold `a.lines · m` elements; the table offsets are this axis's.
    unsafe fn bluestein(
        &self,
        stream: &dyn StreamInterface,
        cur: usize,
        a: &Axis,
        m: u64,
        radices: &[u32],
        (twiddles, chirp, filter): (u64, u64, u64),
    ) -> Result<()> {
        let blue = self
            .blue
            .ok_or_else(|| Error::internal("a Bluestein axis without its scratch"))?;
        let (lines, n, s) = (a.lines, a.n, a.s);
        let [wp, woff] = self.at(self.work[cur], 0)?;
        let [up, uoff] = self.at(blue[0], 0)?;
        let [cp, coff] = self.at(self.table, chirp)?;
        let args = [
            wp,
            woff,
            up,
            uoff,
            cp,
            coff,
            lines.pack(),
            n.pack(),
            s.pack(),
            m.pack(),
        ];
        // SAFETY: reads the axis's lines of work[cur] and n chirp entries, writes lines · m.
        unsafe { self.launch(stream, 3, lines * m, &args)? };
        // SAFETY: the Bluestein arrays hold lines · m elements.
        let bc = unsafe { self.passes(stream, blue, 0, (lines, m, 1), radices, twiddles)? };
        let [up, uoff] = self.at(blue[bc], 0)?;
        let [hp, hoff] = self.at(self.table, filter)?;
        let args = [
            up.clone(),
            uoff.clone(),
            up,
            uoff,
            hp,
            hoff,
            (lines * m).pack(),
            m.pack(),
        ];
        // SAFETY: element-wise over lines · m elements of one array, m filter entries.
        unsafe { self.launch(stream, 4, lines * m, &args)? };
        // SAFETY: as above.
        let bc = unsafe { self.passes(stream, blue, bc, (lines, m, 1), radices, twiddles)? };
        let [up, uoff] = self.at(blue[bc], 0)?;
        let [wp, woff] = self.at(self.work[cur], 0)?;
        let [cp, coff] = self.at(self.table, chirp)?;
        let args = [
            up,
            uoff,
            wp,
            woff,
            cp,
            coff,
            lines.pack(),
            n.pack(),
            s.pack(),
            m.pack(),
        ];
        // SAFETY: reads lines · m elements and n chirp entries, writes the axis's lines.
        unsafe { self.launch(stream, 5, lines * n, &args) }
    }
}

impl FftPlanInterface for Plan {
    unsafe fn execute(
        &self,
        stream: &dyn StreamInterface,
        direction: FftDirection,
        input: Operand,
        output: Operand,
    ) -> Result<()> {
        self.order.run(&*self.dev.exec, stream, || {
            // SAFETY: the caller keeps `execute`'s contract.
            unsafe { self.enqueue(stream, direction, input, output) }
        })
    }
}

/// Orders the executions of one plan, which share its scratch memory (or a vendor plan's work
/// area): each waits on its stream for the end of the previous one, on whatever stream that
/// ran.
#[derive(Default)]
pub(crate) struct Serial {
    /// The end of the previous execution.
    last: Mutex<Option<Arc<dyn EventInterface>>>,
}

impl Serial {
    /// Enqueues `enqueue` on `stream` after the previous execution, then records its end.
    pub(crate) fn run(
        &self,
        exec: &dyn StreamExecutorInterface,
        stream: &dyn StreamInterface,
        enqueue: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut last = self.last.lock();
        if let Some(prev) = last.as_ref() {
            stream.wait_event(prev)?;
        }
        let result = enqueue();
        // Recorded even after a failed enqueue, so the next execution (and a drop that waits)
        // waits for what was enqueued before the failure.
        let end = exec.create_event()?;
        stream.record_event(&end)?;
        *last = Some(end);
        result
    }

    /// Waits for the last execution to end (a failed wait means its stream failed, and what
    /// it skipped never runs).
    #[cfg(any(feature = "cuda", feature = "hip"))]
    pub(crate) fn wait(&mut self) {
        if let Some(ev) = self.last.get_mut().take() {
            let _ = ev.synchronize();
        }
    }
}
