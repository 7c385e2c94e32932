//! The FFT plugin trait: plans made once, executed on streams.
//!
//! `StreamExecutor::create_fft_plan` (src/fft.rs) validates a plan completely (sizes, rank,
//! batch, layouts that fit in 64 bits and do not overlap on the output side, in-place rules)
//! before it calls [`FftSupport::create_plan`]; `Stream::then_fft` checks buffer sizes and
//! element types before it calls [`FftPlanInterface::execute`]. A backend never sees an
//! impossible plan, so it only fails for its own reasons (a vendor library's refusal, memory).
//!
//! Conventions are cuFFT's: sizes outermost first (the last varies fastest), transforms
//! unnormalised (forward then inverse scales by the product of the sizes), forward has
//! exponent sign −1. R2C writes `n/2 + 1` complex values along the last dimension; C2R reads
//! them (and may overwrite its input, as cuFFT's C2R does).

use super::StreamInterface;
use super::blas::Operand;
use crate::error::Result;

/// Scalar precision of a transform: its complex numbers are pairs of this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftPrecision {
    /// `f32` (complex: `[f32; 2]`).
    F32,
    /// `f64` (complex: `[f64; 2]`).
    F64,
}

impl FftPrecision {
    /// Bytes of one real scalar.
    pub const fn real_bytes(self) -> u64 {
        match self {
            FftPrecision::F32 => 4,
            FftPrecision::F64 => 8,
        }
    }
}

/// What a plan transforms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftType {
    /// Complex to complex, either direction.
    C2C,
    /// Real to complex (forward only): `n/2 + 1` outputs along the last dimension.
    R2C,
    /// Complex to real (inverse only): reads `n/2 + 1` inputs along the last dimension.
    C2R,
}

/// Sign of the exponent: forward is `e^{−2πi·jk/n}`, inverse `e^{+2πi·jk/n}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftDirection {
    /// Exponent sign −1.
    Forward,
    /// Exponent sign +1 (unnormalised).
    Inverse,
}

/// One side's data layout, cuFFT's advanced layout, counted in that side's elements (complex
/// numbers on a complex side, scalars on a real side).
///
/// Element `(b, i₀, …, i_{r−1})` is at `b·dist + stride·((i₀·embed[1] + i₁)·embed[2] + i₂ …)`
/// (`embed[0]` bounds nothing but is kept, as in cuFFT). A contiguous side has `stride = 1`,
/// `embed` equal to its shape and `dist` the product of its shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FftLayout {
    /// Storage sizes per dimension, outermost first; each ≥ the side's logical size there
    /// (except `embed[0]`).
    pub embed: Vec<u64>,
    /// Distance between consecutive elements of the innermost dimension.
    pub stride: u64,
    /// Distance between the first elements of consecutive batches.
    pub dist: u64,
}

impl FftLayout {
    /// The position of element `idx` (one index per dimension) of batch `b`. Overflow-free for
    /// any index inside a validated plan's shape.
    pub fn offset(&self, b: u64, idx: &[u64]) -> u64 {
        let mut linear = 0u64;
        for (d, &i) in idx.iter().enumerate() {
            linear = if d == 0 {
                i
            } else {
                linear * self.embed[d] + i
            };
        }
        b * self.dist + self.stride * linear
    }
}

/// A validated plan, as backends see it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FftPlanDesc {
    /// What it transforms.
    pub ty: FftType,
    /// In what precision.
    pub precision: FftPrecision,
    /// Logical transform sizes, outermost first; 1 ≤ rank ≤ 3, each ≥ 1.
    pub dims: Vec<u64>,
    /// Transforms per execution, ≥ 1.
    pub batch: u64,
    /// The input side's layout.
    pub input: FftLayout,
    /// The output side's layout.
    pub output: FftLayout,
}

impl FftPlanDesc {
    /// Whether the input side holds complex numbers (C2C, C2R).
    pub fn input_is_complex(&self) -> bool {
        self.ty != FftType::R2C
    }

    /// Whether the output side holds complex numbers (C2C, R2C).
    pub fn output_is_complex(&self) -> bool {
        self.ty != FftType::C2R
    }

    /// The logical shape of the complex side of a real transform (and of both sides of C2C):
    /// `dims` with the last size `n/2 + 1` for R2C and C2R.
    pub fn complex_shape(&self) -> Vec<u64> {
        let mut shape = self.dims.clone();
        if self.ty != FftType::C2C {
            let last = shape.len() - 1;
            shape[last] = shape[last] / 2 + 1;
        }
        shape
    }

    /// The logical shape of the input side.
    pub fn input_shape(&self) -> Vec<u64> {
        if self.ty == FftType::C2R {
            self.complex_shape()
        } else {
            self.dims.clone()
        }
    }

    /// The logical shape of the output side.
    pub fn output_shape(&self) -> Vec<u64> {
        if self.ty == FftType::R2C {
            self.complex_shape()
        } else {
            self.dims.clone()
        }
    }

    /// Bytes of one input element (a complex number or a real scalar).
    pub fn input_element_bytes(&self) -> u64 {
        self.precision.real_bytes() * if self.input_is_complex() { 2 } else { 1 }
    }

    /// Bytes of one output element.
    pub fn output_element_bytes(&self) -> u64 {
        self.precision.real_bytes() * if self.output_is_complex() { 2 } else { 1 }
    }
}

/// FFT on one executor: a factory of plans.
pub trait FftSupport: Send + Sync {
    /// What serves the transforms, for the executor's plugin report (e.g. "rustfft",
    /// "built-in kernels", "cuFFT").
    fn implementation(&self) -> &'static str;

    /// Prepares `desc` (twiddles, scratch memory, a vendor plan). `desc` is validated; a
    /// backend that cannot run a valid plan returns `Error::Unsupported` saying what it lacks.
    fn create_plan(&self, desc: &FftPlanDesc) -> Result<Box<dyn FftPlanInterface>>;
}

/// A prepared plan. It keeps whatever it allocated until dropped; dropping it while a
/// transform it enqueued is still pending is safe (the backend keeps the memory alive or
/// waits), as dropping a `DeviceMemory` is.
pub trait FftPlanInterface: Send + Sync {
    /// Enqueues one execution (all `batch` transforms) on `stream` and returns at once; a
    /// run-time failure fails the stream. `input` and `output` count elements of their sides
    /// (complex numbers or real scalars). In place when `input.addr == output.addr`.
    ///
    /// # Safety
    /// `stream` belongs to the executor that made the plan; each operand lies inside one live
    /// allocation of that executor covering every element its layout addresses; `direction` is
    /// `Forward` for R2C and `Inverse` for C2R; an in-place call's layouts passed the
    /// validator's in-place rules, and operands that are not in place do not overlap.
    unsafe fn execute(
        &self,
        stream: &dyn StreamInterface,
        direction: FftDirection,
        input: Operand,
        output: Operand,
    ) -> Result<()>;
}
