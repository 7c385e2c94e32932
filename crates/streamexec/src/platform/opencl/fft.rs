//! FFT on OpenCL: the built-in kernels of kernels/fft_body.h (the text the CUDA platform
//! compiles to PTX) behind an OpenCL C prelude, built on first use per precision, planned
//! and enqueued by the plan the CUDA-like backend shares (`platform/fft_builtin`).

use super::builtins::{WG, ptr};
use super::device::OpenClExecutor;
use crate::error::{Error, Result};
use crate::interface::FftSupport;
use crate::interface::blas::Operand;
use crate::interface::fft::{FftPlanDesc, FftPlanInterface, FftPrecision};
use crate::platform::fft_builtin::{self, Device, arity};
use crate::types::{DeviceAddress, PackedArg};

/// The dialect macros of fft_body.h for OpenCL C, then the body. Built with
/// `-DSE_T=float -DSE_SUF=f32` or `-DSE_T=double -DSE_SUF=f64 -DSE_FP64`.
const SOURCE: &str = concat!(
    "#ifdef SE_FP64\n",
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    "#endif\n",
    "typedef ulong u64;\n",
    "typedef uint u32;\n",
    "#define SE_KERNEL kernel void\n",
    "#define SE_FN\n",
    "#define SE_GLOBAL global\n",
    "#define SE_GID ((u64)get_global_id(0))\n",
    "#define SE_GSIZE ((u64)get_global_size(0))\n",
    include_str!("../../../kernels/fft_body.h"),
);

/// Blocks per launch at most (the kernels loop with grid strides).
const MAX_GROUPS: u32 = 4096;

/// The allocation's base buffer and `addr`'s offset in scalars.
fn pointer(addr: DeviceAddress, bytes: u64, scalar: u64) -> Result<(PackedArg, u64)> {
    let len = bytes / scalar;
    let [p, _] = ptr(&Operand { addr, len }, scalar, "then_fft")?;
    let off = addr.raw() & ((1 << super::device::OFFSET_BITS) - 1);
    Ok((p, off / scalar))
}

impl FftSupport for OpenClExecutor {
    fn implementation(&self) -> &'static str {
        "built-in kernels"
    }

    fn create_plan(&self, desc: &FftPlanDesc) -> Result<Box<dyn FftPlanInterface>> {
        let exec = self
            .me
            .upgrade()
            .ok_or_else(|| Error::internal("an FFT plan made while its executor drops"))?;
        let dev = Device {
            exec,
            pointer,
            threads: WG as u32,
            max_blocks: MAX_GROUPS,
        };
        let fp64 = desc.precision == FftPrecision::F64;
        let options = if fp64 {
            "-DSE_T=double -DSE_SUF=f64 -DSE_FP64"
        } else {
            "-DSE_T=float -DSE_SUF=f32"
        };
        let load = |name: &'static str| {
            self.builtin_kernel_from(
                (SOURCE, options),
                fp64,
                name,
                arity(name),
                "create_fft_plan",
            )
        };
        fft_builtin::create_plan(dev, desc, &load)
    }
}
