//! FFT on a stream: plans made once by [`StreamExecutor::create_fft_plan`], run by
//! [`Stream::then_fft`] (out of place) and [`Stream::then_fft_inplace`].
//!
//! Conventions are cuFFT's (see `interface/fft.rs`): sizes outermost first, unnormalised
//! transforms, forward with exponent sign −1, R2C writing `n/2 + 1` complex values along the
//! last dimension. A plan's element types are its type parameters, so `FftPlan<f32, [f32; 2]>`
//! is a single-precision R2C plan and handing it `f64` buffers does not compile.
//!
//! Every check happens here, before a backend sees the plan or the call:
//! - at plan creation: rank 1–3, sizes ≥ 1, batch ≥ 1, each layout's `embed` has one entry per
//!   dimension with `embed[d] ≥` the side's size for `d ≥ 1`, `stride ≥ 1`, `dist ≥ 1`, each
//!   side's extent (the offset of its last element + 1) fits in `u64`, and the output layout
//!   maps no two elements to one place. The last is checked by a sufficient rule: with
//!   `stride ≥ 1` and `embed[d] ≥ size[d]` one transform's elements are distinct, and batches
//!   are apart when `batch = 1`, or `dist ≥` the span of one transform (batches one after
//!   another), or `(batch − 1)·dist < stride` (batches interleaved between elements);
//! - at enqueue: the plan and the buffers belong to the stream's executor, R2C runs forward and
//!   C2R inverse, each buffer holds its side's extent, out-of-place buffers do not overlap, and
//!   an in-place call meets the in-place rules (`in_place_problem`).

use std::marker::PhantomData;

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::interface::FftPlanInterface;
use crate::interface::blas::Operand;
use crate::interface::fft::{FftDirection, FftLayout, FftPlanDesc, FftPrecision, FftType};
use crate::memory::DeviceSlice;
use crate::stream::Stream;

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for [f32; 2] {}
    impl Sealed for [f64; 2] {}
}

/// Element types of FFT buffers: real `f32` / `f64` and complex `[f32; 2]` / `[f64; 2]`
/// (real part first).
pub trait FftElement: Pod + sealed::Sealed {
    /// The scalar precision.
    const PRECISION: FftPrecision;
    /// Whether the element is a complex number.
    const COMPLEX: bool;
}
impl FftElement for f32 {
    const PRECISION: FftPrecision = FftPrecision::F32;
    const COMPLEX: bool = false;
}
impl FftElement for f64 {
    const PRECISION: FftPrecision = FftPrecision::F64;
    const COMPLEX: bool = false;
}
impl FftElement for [f32; 2] {
    const PRECISION: FftPrecision = FftPrecision::F32;
    const COMPLEX: bool = true;
}
impl FftElement for [f64; 2] {
    const PRECISION: FftPrecision = FftPrecision::F64;
    const COMPLEX: bool = true;
}

/// An input element type that transforms into `Out`: complex → complex (C2C), real → complex
/// (R2C), complex → real (C2R), in one precision. Pairs that are no transform (real → real,
/// mixed precisions) have no implementation, so such a plan does not compile.
pub trait FftPair<Out: FftElement>: FftElement {
    /// The transform this pair makes.
    const TYPE: FftType;
}
impl FftPair<[f32; 2]> for [f32; 2] {
    const TYPE: FftType = FftType::C2C;
}
impl FftPair<[f64; 2]> for [f64; 2] {
    const TYPE: FftType = FftType::C2C;
}
impl FftPair<[f32; 2]> for f32 {
    const TYPE: FftType = FftType::R2C;
}
impl FftPair<[f64; 2]> for f64 {
    const TYPE: FftType = FftType::R2C;
}
impl FftPair<f32> for [f32; 2] {
    const TYPE: FftType = FftType::C2R;
}
impl FftPair<f64> for [f64; 2] {
    const TYPE: FftType = FftType::C2R;
}

impl FftLayout {
    /// A layout from `usize` values (see the type's docs for what each means).
    pub fn new(embed: &[usize], stride: usize, dist: usize) -> Self {
        FftLayout {
            embed: embed.iter().map(|&e| e as u64).collect(),
            stride: stride as u64,
            dist: dist as u64,
        }
    }

    /// The packed layout of `batch` transforms of `shape`: unit stride, `embed = shape`, batches
    /// one after another.
    pub fn contiguous(shape: &[usize]) -> Self {
        FftLayout::new(shape, 1, shape.iter().product())
    }
}

/// What to plan: sizes, batch and, optionally, each side's layout (packed by default).
///
/// ```
/// # use streamexec::{FftLayout, FftPlanSpec};
/// // 256 transforms of 1024 points, packed.
/// let batched = FftPlanSpec::new(&[1024]).batch(256);
/// // A 64 × 64 image inside rows of 80 elements, one transform.
/// let embedded = FftPlanSpec::new(&[64, 64]).input_layout(FftLayout::new(&[64, 80], 1, 64 * 80));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FftPlanSpec {
    dims: Vec<u64>,
    batch: u64,
    input: Option<FftLayout>,
    output: Option<FftLayout>,
    padded_real: bool,
}

impl FftPlanSpec {
    /// One transform of `dims` (outermost first), packed layouts.
    pub fn new(dims: &[usize]) -> Self {
        FftPlanSpec {
            dims: dims.iter().map(|&d| d as u64).collect(),
            batch: 1,
            input: None,
            output: None,
            padded_real: false,
        }
    }

    /// `batch` transforms per execution (default 1).
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch as u64;
        self
    }

    /// The input side's layout, counted in input elements (default: packed).
    pub fn input_layout(mut self, layout: FftLayout) -> Self {
        self.input = Some(layout);
        self
    }

    /// The output side's layout, counted in output elements (default: packed).
    pub fn output_layout(mut self, layout: FftLayout) -> Self {
        self.output = Some(layout);
        self
    }

    /// For R2C and C2R plans: the real side's default layout becomes the complex side's storage
    /// seen as reals (last dimension padded to `2·(n/2 + 1)`), as an in-place real transform
    /// needs. Layouts given explicitly are kept.
    pub fn padded_real(mut self) -> Self {
        self.padded_real = true;
        self
    }
}

/// A prepared transform of `I` elements into `O` elements, usable from any stream of the
/// executor that made it. Dropping it while an execution is pending is safe.
pub struct FftPlan<I: FftPair<O>, O: FftElement> {
    inner: Box<dyn FftPlanInterface>,
    desc: FftPlanDesc,
    input_extent: u64,
    output_extent: u64,
    exec: StreamExecutor,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: FftPair<O>, O: FftElement> std::fmt::Debug for FftPlan<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FftPlan")
            .field("desc", &self.desc)
            .field("executor", &self.exec.id())
            .finish_non_exhaustive()
    }
}

impl<I: FftPair<O>, O: FftElement> FftPlan<I, O> {
    /// The validated plan (type, sizes, batch, both layouts).
    pub fn desc(&self) -> &FftPlanDesc {
        &self.desc
    }

    /// Input elements an execution reads up to: the input buffer's minimum length.
    pub fn input_len(&self) -> usize {
        self.input_extent as usize
    }

    /// Output elements an execution writes up to: the output buffer's minimum length.
    pub fn output_len(&self) -> usize {
        self.output_extent as usize
    }

    /// The executor the plan runs on.
    pub fn executor(&self) -> &StreamExecutor {
        &self.exec
    }
}

const CREATE: &str = "create_fft_plan";

/// `layout` of a side of `shape` (`name` for messages): checks it and returns its extent and
/// the span of one transform, in elements.
fn check_layout(name: &str, layout: &FftLayout, shape: &[u64], batch: u64) -> Result<(u64, u64)> {
    let rank = shape.len();
    if layout.embed.len() != rank {
        return Err(Error::invalid(
            CREATE,
            format!(
                "{name}.embed has {} entries but the plan has rank {rank}; give one storage size \
                 per dimension, outermost first",
                layout.embed.len()
            ),
        ));
    }
    for (d, (&e, &n)) in layout.embed.iter().zip(shape).enumerate().skip(1) {
        if e < n {
            return Err(Error::invalid(
                CREATE,
                format!(
                    "{name}.embed[{d}] = {e} is less than {n}, the side's size in dimension {d}; \
                     storage sizes must hold the data"
                ),
            ));
        }
    }
    for (field, v) in [("stride", layout.stride), ("dist", layout.dist)] {
        if v == 0 {
            return Err(Error::invalid(
                CREATE,
                format!("{name}.{field} = 0; strides and batch distances must be ≥ 1"),
            ));
        }
    }
    let overflow = |what: &str| {
        Error::invalid(
            CREATE,
            format!(
                "{name}: {what} overflows 64 bits; use smaller sizes, storage sizes, stride, \
                 dist or batch"
            ),
        )
    };
    let mut last = 0u64;
    for (d, &n) in shape.iter().enumerate() {
        last = if d == 0 {
            n - 1
        } else {
            last.checked_mul(layout.embed[d])
                .and_then(|x| x.checked_add(n - 1))
                .ok_or_else(|| overflow("one transform's extent"))?
        };
    }
    let span = layout
        .stride
        .checked_mul(last)
        .and_then(|x| x.checked_add(1))
        .ok_or_else(|| overflow("one transform's extent"))?;
    let extent = (batch - 1)
        .checked_mul(layout.dist)
        .and_then(|x| x.checked_add(span))
        .ok_or_else(|| {
            overflow(&format!(
                "the extent of {batch} batches {} apart",
                layout.dist
            ))
        })?;
    Ok((extent, span))
}

/// The descriptor `spec` describes for a transform of type `ty` in `precision`, validated,
/// with each side's extent in its elements.
fn validate(
    ty: FftType,
    precision: FftPrecision,
    spec: &FftPlanSpec,
) -> Result<(FftPlanDesc, u64, u64)> {
    let rank = spec.dims.len();
    if !(1..=3).contains(&rank) {
        return Err(Error::invalid(
            CREATE,
            format!("dims has {rank} sizes; a plan has 1, 2 or 3 dimensions"),
        ));
    }
    if let Some(d) = spec.dims.iter().position(|&n| n == 0) {
        return Err(Error::invalid(
            CREATE,
            format!("dims[{d}] = 0; every transform size must be ≥ 1"),
        ));
    }
    if spec.batch == 0 {
        return Err(Error::invalid(
            CREATE,
            "batch = 0; a plan runs at least one transform",
        ));
    }
    let mut desc = FftPlanDesc {
        ty,
        precision,
        dims: spec.dims.clone(),
        batch: spec.batch,
        input: FftLayout::new(&[], 1, 1),
        output: FftLayout::new(&[], 1, 1),
    };
    // The packed layout of a side of `shape`; `pad` widens the last dimension to the complex
    // side's storage seen as reals.
    let packed = |shape: Vec<u64>, pad: bool| -> Result<FftLayout> {
        let overflow = || Error::invalid(CREATE, format!("dims {:?} overflow 64 bits", spec.dims));
        let mut embed = shape;
        if pad {
            embed[rank - 1] = (spec.dims[rank - 1] / 2 + 1)
                .checked_mul(2)
                .ok_or_else(overflow)?;
        }
        let dist = embed
            .iter()
            .try_fold(1u64, |a, &e| a.checked_mul(e))
            .ok_or_else(overflow)?;
        Ok(FftLayout {
            embed,
            stride: 1,
            dist,
        })
    };
    let (in_shape, out_shape) = (desc.input_shape(), desc.output_shape());
    let pad = spec.padded_real && ty != FftType::C2C;
    desc.input = match &spec.input {
        Some(l) => l.clone(),
        None => packed(in_shape.clone(), pad && ty == FftType::R2C)?,
    };
    desc.output = match &spec.output {
        Some(l) => l.clone(),
        None => packed(out_shape.clone(), pad && ty == FftType::C2R)?,
    };
    let (in_extent, _) = check_layout("input_layout", &desc.input, &in_shape, desc.batch)?;
    let (out_extent, span) = check_layout("output_layout", &desc.output, &out_shape, desc.batch)?;
    let l = &desc.output;
    let interleaved = (desc.batch - 1)
        .checked_mul(l.dist)
        .is_some_and(|x| x < l.stride);
    if desc.batch > 1 && l.dist < span && !interleaved {
        return Err(Error::invalid(
            CREATE,
            format!(
                "output_layout.dist = {} is less than {span}, the span of one transform, and \
                 batches are not interleaved ((batch − 1)·dist < stride), so two outputs could \
                 land on one element; use dist ≥ {span}",
                l.dist
            ),
        ));
    }
    Ok((desc, in_extent, out_extent))
}

/// Why `desc`'s layouts cannot run in place, or `None` if they can. C2C: both layouts equal.
/// R2C and C2R (cuFFT's rule): the real side is the complex side's storage seen as reals, so
/// every row and every batch start at the same byte on both sides: equal strides,
/// `real.embed[last] = 2·complex.embed[last]`, equal `embed` in the dimensions between the first
/// and the last, and `real.dist = 2·complex.dist`.
fn in_place_problem(desc: &FftPlanDesc) -> Option<String> {
    if desc.ty == FftType::C2C {
        return (desc.input != desc.output).then(|| {
            "a C2C plan runs in place only when its input and output layouts are equal; make \
             them equal or use then_fft with two buffers"
                .to_string()
        });
    }
    let (real, complex) = if desc.ty == FftType::R2C {
        (&desc.input, &desc.output)
    } else {
        (&desc.output, &desc.input)
    };
    let last = desc.dims.len() - 1;
    let mut wrong = Vec::new();
    if real.stride != complex.stride {
        wrong.push(format!(
            "strides differ ({} real, {} complex)",
            real.stride, complex.stride
        ));
    }
    if complex.embed[last].checked_mul(2) != Some(real.embed[last]) {
        wrong.push(format!(
            "the real embed of the last dimension is {}, not 2 × {} (the complex one)",
            real.embed[last], complex.embed[last]
        ));
    }
    if last >= 2 && real.embed[1] != complex.embed[1] {
        wrong.push(format!(
            "embed[1] differs ({} real, {} complex)",
            real.embed[1], complex.embed[1]
        ));
    }
    if desc.batch > 1 && complex.dist.checked_mul(2) != Some(real.dist) {
        wrong.push(format!(
            "the real dist is {}, not 2 × {} (the complex one)",
            real.dist, complex.dist
        ));
    }
    (!wrong.is_empty()).then(|| {
        format!(
            "an in-place real transform needs the real side to be the complex side's storage \
             seen as reals, but {}; plan with FftPlanSpec::padded_real() or use then_fft with \
             two buffers",
            wrong.join(", ")
        )
    })
}

impl StreamExecutor {
    /// Plans transforms of `I` into `O` (C2C, R2C or C2R in `f32` or `f64`, from the types) as
    /// `spec` describes, after checking it completely (see the module docs).
    pub fn create_fft_plan<I: FftPair<O>, O: FftElement>(
        &self,
        spec: &FftPlanSpec,
    ) -> Result<FftPlan<I, O>> {
        let support = self.interface().fft().ok_or_else(|| {
            Error::unsupported(
                self.platform_name(),
                CREATE,
                format!(
                    "{} has no FFT support; plan on a platform that has it (host)",
                    self.description().name
                ),
            )
        })?;
        let (desc, input_extent, output_extent) = validate(I::TYPE, I::PRECISION, spec)?;
        let inner = support.create_plan(&desc)?;
        Ok(FftPlan {
            inner,
            desc,
            input_extent,
            output_extent,
            exec: self.clone(),
            _types: PhantomData,
        })
    }
}

/// Bytes `[start, start + len)` of two ranges intersect.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.1 > 0 && b.1 > 0 && a.0 < b.0.saturating_add(b.1) && b.0 < a.0.saturating_add(a.1)
}

impl Stream {
    /// The plan-level checks of an execution: the plan is this executor's and `direction`
    /// suits its type.
    fn check_fft_plan<I: FftPair<O>, O: FftElement>(
        &self,
        plan: &FftPlan<I, O>,
        direction: FftDirection,
        op: &str,
    ) -> Result<()> {
        let exec = self.executor();
        if plan.exec.id() != exec.id() {
            return Err(Error::invalid(
                op,
                format!(
                    "plan was made by executor #{}, not by this stream's (#{}, {} device {}); \
                     make the plan on this stream's executor",
                    plan.exec.id(),
                    exec.id(),
                    exec.platform_name(),
                    exec.device_ordinal()
                ),
            ));
        }
        let wrong = match (plan.desc.ty, direction) {
            (FftType::R2C, FftDirection::Inverse) => Some("an R2C plan runs forward only"),
            (FftType::C2R, FftDirection::Forward) => Some("a C2R plan runs inverse only"),
            _ => None,
        };
        if let Some(why) = wrong {
            return Err(Error::invalid(
                op,
                format!("direction = {direction:?}, but {why}"),
            ));
        }
        Ok(())
    }

    /// Runs `plan` on `input`, writing `output` (out of place: the buffers must not overlap).
    /// `direction` is `Forward` for R2C and `Inverse` for C2R; C2C takes either.
    pub fn then_fft<'a, 'b, I: FftPair<O>, O: FftElement>(
        &mut self,
        plan: &FftPlan<I, O>,
        direction: FftDirection,
        input: impl Into<DeviceSlice<'a, I>>,
        output: impl Into<DeviceSlice<'b, O>>,
    ) -> &mut Self {
        const OP: &str = "then_fft";
        let (input, output) = (input.into(), output.into());
        self.enqueue(|s| {
            s.check_fft_plan(plan, direction, OP)?;
            s.check_slice(&input, "then_fft (input)")?;
            s.check_slice(&output, "then_fft (output)")?;
            for (name, len, extent) in [
                ("input", input.len(), plan.input_extent),
                ("output", output.len(), plan.output_extent),
            ] {
                if (len as u64) < extent {
                    return Err(Error::bounds(
                        OP,
                        format!(
                            "{name} has {len} elements but the plan's {name} layout reaches \
                             {extent}; pass a larger slice (FftPlan::{name}_len)"
                        ),
                    ));
                }
            }
            let in_bytes = plan.input_extent * size_of::<I>() as u64;
            let out_bytes = plan.output_extent * size_of::<O>() as u64;
            let (ia, oa) = (input.address().raw(), output.address().raw());
            if overlaps((ia, in_bytes), (oa, out_bytes)) {
                return Err(Error::invalid(
                    OP,
                    "output overlaps input; pass separate buffers, or run in place with \
                     then_fft_inplace",
                ));
            }
            let input = Operand {
                addr: input.address(),
                len: input.len() as u64,
            };
            let output = Operand {
                addr: output.address(),
                len: output.len() as u64,
            };
            // SAFETY: the plan is this executor's, both slices are this executor's live memory
            // (borrowed for the call) and hold their sides' extents, the direction suits the
            // plan's type, and the extents do not overlap.
            unsafe { plan.inner.execute(s.iface(), direction, input, output) }
        })
    }

    /// Runs `plan` in place on `data`, which holds the input (as `I`) and receives the output.
    /// C2C needs equal layouts; R2C and C2R need the real side to be the complex side's storage
    /// seen as reals ([`FftPlanSpec::padded_real`]).
    pub fn then_fft_inplace<'a, I: FftPair<O>, O: FftElement>(
        &mut self,
        plan: &FftPlan<I, O>,
        direction: FftDirection,
        data: impl Into<DeviceSlice<'a, I>>,
    ) -> &mut Self {
        const OP: &str = "then_fft_inplace";
        let data = data.into();
        self.enqueue(|s| {
            s.check_fft_plan(plan, direction, OP)?;
            s.check_slice(&data, "then_fft_inplace (data)")?;
            if let Some(why) = in_place_problem(&plan.desc) {
                return Err(Error::invalid(OP, format!("plan: {why}")));
            }
            let bytes = data.size_bytes();
            let need = (plan.input_extent * size_of::<I>() as u64)
                .max(plan.output_extent * size_of::<O>() as u64);
            if bytes < need {
                return Err(Error::bounds(
                    OP,
                    format!(
                        "data has {bytes} bytes but the plan's layouts reach {need} bytes; pass \
                         a larger slice"
                    ),
                ));
            }
            let input = Operand {
                addr: data.address(),
                len: data.len() as u64,
            };
            let output = Operand {
                addr: data.address(),
                len: bytes / size_of::<O>() as u64,
            };
            // SAFETY: the plan is this executor's, `data` is this executor's live memory
            // (borrowed for the call) holding both sides' extents, the direction suits the
            // plan's type, and the layouts passed the in-place rules.
            unsafe { plan.inner.execute(s.iface(), direction, input, output) }
        })
    }
}
