//! The built-in kernels behind BLAS and Philox on OpenCL (`builtins.cl`, and FFT's through
//! `fft.rs`): built on first use
//! (once per executor and precision) and launched through the stream's ordinary `launch`, so
//! they follow the stream's ordering, error state and direct/deferred modes like any user
//! kernel.
//!
//! Operands are passed as their allocation's base buffer plus an element offset (not as
//! sub-buffers), so slices at any element offset work regardless of the device's
//! base-address alignment.

use std::sync::Arc;

use super::device::{OFFSET_BITS, OpenClExecutor};
use super::status::PLATFORM;
use crate::error::{Error, Result};
use crate::interface::blas::Operand;
use crate::interface::{KernelInterface, StreamExecutorInterface, StreamInterface};
use crate::types::{
    BlockDim, DeviceAddress, LaunchDims, MultiKernelLoaderSpec, Packable, PackedArg, ThreadDim,
};

const SOURCE: &str = include_str!("builtins.cl");

/// Work-group size of the element-wise kernels and fills.
pub(super) const WG: u64 = 64;

fn arity(name: &str) -> usize {
    match name {
        "se_gemm" => 19,
        "se_gemv" => 14,
        "se_level1" => 9,
        "se_reduce" => 10,
        "se_philox_gaussian_f32" | "se_philox_gaussian_f64" => 10,
        _ => 8,
    }
}

impl OpenClExecutor {
    /// Built-in kernel `name` of `builtins.cl` in single or double precision (`fp64`), built
    /// on first use; `op` is the operation that needs it (for the `Unsupported` of a device
    /// without fp64).
    fn builtin_kernel(
        &self,
        fp64: bool,
        name: &'static str,
        op: &str,
    ) -> Result<Arc<dyn KernelInterface>> {
        let options = if fp64 {
            "-DSE_T=double -DSE_FP64"
        } else {
            "-DSE_T=float"
        };
        self.builtin_kernel_from((SOURCE, options), fp64, name, arity(name), op)
    }

    /// Built-in kernel `name` (of `arity` parameters) from `source` built with `options`,
    /// cached by (`fp64`, `name`), so names must be unique across sources.
    pub(super) fn builtin_kernel_from(
        &self,
        (source, options): (&'static str, &str),
        fp64: bool,
        name: &'static str,
        arity: usize,
        op: &str,
    ) -> Result<Arc<dyn KernelInterface>> {
        if let Some(k) = self.builtins.lock().get(&(fp64, name)) {
            return Ok(k.clone());
        }
        let spec = MultiKernelLoaderSpec::new(arity)
            .add_opencl_text_in_memory(source, name)
            .with_opencl_build_options(options);
        let k = self.load_kernel(&spec).map_err(|e| match e {
            Error::KernelLoad { detail, .. } if fp64 => Error::unsupported(
                PLATFORM,
                op,
                format!(
                    "{} could not build the double-precision built-in kernels (it needs \
                     cl_khr_fp64); use f32, or the host platform: {detail}",
                    self.description.name
                ),
            ),
            e => e,
        })?;
        self.builtins.lock().insert((fp64, name), k.clone());
        Ok(k)
    }

    /// Launches built-in kernel `name` on `stream`.
    ///
    /// # Safety
    /// `stream` belongs to this executor and every pointer in `args` covers only validated
    /// operands of the call (the contract of `BlasSupport` / `RngSupport`).
    pub(super) unsafe fn run_builtin(
        &self,
        stream: &dyn StreamInterface,
        (fp64, name, op): (bool, &'static str, &str),
        threads: ThreadDim,
        blocks: BlockDim,
        args: &[PackedArg],
    ) -> Result<()> {
        let k = self.builtin_kernel(fp64, name, op)?;
        let dims = LaunchDims {
            threads,
            blocks,
            dynamic_shared_bytes: 0,
            cooperative: false,
        };
        // SAFETY: the kernel is ours, built on this executor with this parameter list; the
        // pointers are validated operands (this function's contract).
        unsafe { stream.launch(&k, &dims, args) }
    }
}

/// The allocation's base pointer (covering `o`) and `o`'s offset in elements.
pub(super) fn ptr(o: &Operand, size: u64, op: &str) -> Result<[PackedArg; 2]> {
    let off = o.addr.raw() & ((1 << OFFSET_BITS) - 1);
    if !off.is_multiple_of(size) {
        return Err(Error::invalid(
            op,
            format!(
                "operand at {} is not aligned to its {size}-byte elements",
                o.addr
            ),
        ));
    }
    Ok([
        PackedArg::backend_pointer(
            DeviceAddress::new(o.addr.raw() - off),
            off + o.len * size,
            size as usize,
            "canned operand",
        ),
        (off / size).pack(),
    ])
}

/// Groups of `per` work-items covering `items`, as a grid extent.
pub(super) fn groups(items: u64, per: u64, op: &str) -> Result<u32> {
    u32::try_from(items.div_ceil(per)).map_err(|_| {
        Error::invalid(
            op,
            format!("{items} work-items exceed one launch; split the call"),
        )
    })
}
