//! The kernels the conformance suite launches, in every format the platforms load: a native
//! host kernel, OpenCL C text, and PTX compiled by clang-19 from kernels/conformance.cu.

use std::cell::Cell;

/// PTX of kernels/conformance.cu (regenerate with scripts/gen-ptx.sh).
pub const PTX: &str = include_str!("../../../../kernels/ptx/conformance.O3.ptx");

use streamexec::{
    DevicePtr, HostKernel, MultiKernelLoaderSpec, SharedMemory, ThreadCtx, TypedKernel,
};

/// `y[i] = a * x[i] + y[i]` for `i < n`, one element per thread.
pub fn saxpy() -> MultiKernelLoaderSpec {
    saxpy_declaring(4)
}

/// [`saxpy`] (4 parameters) in a spec that declares `arity` parameters.
pub fn saxpy_declaring(arity: usize) -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(arity)
        .add_cuda_ptx_in_memory(PTX, "saxpy")
        .add_opencl_text_in_memory(
            "__kernel void saxpy(uint n, float a, __global const float* x, __global float* y) {
                 uint i = get_global_id(0);
                 if (i < n) y[i] = a * x[i] + y[i];
             }",
            "saxpy",
        )
        .add_host_kernel(HostKernel::new(
            "saxpy",
            |ctx, (n, a, x, y): (u32, f32, DevicePtr<f32>, DevicePtr<f32>)| {
                let i = ctx.global_id_x();
                if i < n as usize {
                    let (x, y) = (ctx.global(x), ctx.global(y));
                    y.set(i, a * x.get(i) + y.get(i));
                }
            },
        ))
}

/// OpenCL C of [`affine`].
pub const AFFINE_CL: &str = "__kernel void affine(__global uint* x, uint n, uint mul, uint add) {
    uint i = get_global_id(0);
    if (i < n) x[i] = x[i] * mul + add;
}";

/// `x[i] = x[i] * mul + add` (wrapping) for `i < n`: non-commuting steps to test ordering.
pub fn affine() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(4)
        .add_cuda_ptx_in_memory(PTX, "affine")
        .add_opencl_text_in_memory(AFFINE_CL, "affine")
        .add_host_kernel(HostKernel::new(
            "affine",
            |ctx, (x, n, mul, add): (DevicePtr<u32>, u32, u32, u32)| {
                let i = ctx.global_id_x();
                if i < n as usize {
                    let x = ctx.global(x);
                    x.set(i, x.get(i).wrapping_mul(mul).wrapping_add(add));
                }
            },
        ))
}

/// Reference for [`affine`].
pub fn affine_ref(x: &mut [u32], mul: u32, add: u32) {
    x.iter_mut()
        .for_each(|v| *v = v.wrapping_mul(mul).wrapping_add(add));
}

fn reduce_in_block(
    ctx: &ThreadCtx<'_>,
    sh: &[Cell<u32>],
    input: DevicePtr<u32>,
    out: DevicePtr<u32>,
    n: u32,
) {
    let tid = ctx.thread_idx().x as usize;
    let bd = ctx.block_dim().x as usize;
    let i = ctx.block_idx().x as usize * bd + tid;
    sh[tid].set(if i < n as usize {
        ctx.global(input).get(i)
    } else {
        0
    });
    ctx.sync_threads();
    let mut s = bd.next_power_of_two() / 2;
    while s > 0 {
        if tid < s && tid + s < bd {
            sh[tid].set(sh[tid].get().wrapping_add(sh[tid + s].get()));
        }
        ctx.sync_threads();
        s /= 2;
    }
    if tid == 0 {
        ctx.global(out).set(ctx.block_idx().x as usize, sh[0].get());
    }
}

const REDUCE_CL: &str = "
inline void reduce_in_block(__local uint* sh, __global const uint* input, __global uint* out,
                            uint n) {
    uint tid = get_local_id(0);
    uint bd = get_local_size(0);
    uint i = get_group_id(0) * bd + tid;
    sh[tid] = i < n ? input[i] : 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint s = 1;
    while (s < bd) s <<= 1;
    for (s >>= 1; s > 0; s >>= 1) {
        if (tid < s && tid + s < bd) sh[tid] += sh[tid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (tid == 0) out[get_group_id(0)] = sh[0];
}
__kernel void block_reduce(__global const uint* input, __global uint* out, uint n) {
    __local uint sh[1024];
    reduce_in_block(sh, input, out, n);
}
__kernel void block_reduce_dyn(__global const uint* input, __global uint* out, uint n,
                               __local uint* sh) {
    reduce_in_block(sh, input, out, n);
}
";

/// Per-block sum of `input` into `out[block]`, through a static shared array and barriers.
pub fn block_reduce() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(3)
        .add_cuda_ptx_in_memory(PTX, "block_reduce")
        .add_opencl_text_in_memory(REDUCE_CL, "block_reduce")
        .add_host_kernel(HostKernel::new(
            "block_reduce",
            |ctx, (input, out, n): (DevicePtr<u32>, DevicePtr<u32>, u32)| {
                let sh = ctx.shared_array::<u32>(1024);
                reduce_in_block(ctx, sh, input, out, n);
            },
        ))
}

/// As [`block_reduce`], with the shared array passed as dynamic shared memory.
pub fn block_reduce_dyn() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(4)
        .add_cuda_ptx_in_memory(PTX, "block_reduce_dyn")
        .add_opencl_text_in_memory(REDUCE_CL, "block_reduce_dyn")
        .add_host_kernel(HostKernel::new(
            "block_reduce_dyn",
            |ctx, (input, out, n, sh): (DevicePtr<u32>, DevicePtr<u32>, u32, SharedMemory<u32>)| {
                let sh = ctx.shared_param(sh);
                reduce_in_block(ctx, sh, input, out, n);
            },
        ))
}

/// `out[i] = (linear global thread id, block linear id)` packed into one u32 per thread of a
/// 3-D launch: checks index math on every platform.
pub fn thread_ids() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(1)
        .add_cuda_ptx_in_memory(PTX, "thread_ids")
        .add_opencl_text_in_memory(
            "__kernel void thread_ids(__global uint* out) {
                 uint bx = get_group_id(0), by = get_group_id(1), bz = get_group_id(2);
                 uint gx = get_num_groups(0), gy = get_num_groups(1);
                 uint tx = get_local_id(0), ty = get_local_id(1), tz = get_local_id(2);
                 uint dx = get_local_size(0), dy = get_local_size(1), dz = get_local_size(2);
                 uint block = (bz * gy + by) * gx + bx;
                 uint t = (tz * dy + ty) * dx + tx;
                 out[block * dx * dy * dz + t] = block * 65536u + t;
             }",
            "thread_ids",
        )
        .add_host_kernel(HostKernel::new(
            "thread_ids",
            |ctx, (out,): (DevicePtr<u32>,)| {
                let (b, g, t, d) = (
                    ctx.block_idx(),
                    ctx.grid_dim(),
                    ctx.thread_idx(),
                    ctx.block_dim(),
                );
                let block = (b.z * g.y + b.y) * g.x + b.x;
                let tid = (t.z * d.y + t.y) * d.x + t.x;
                ctx.global(out).set(
                    (block * d.x * d.y * d.z + tid) as usize,
                    block * 65536 + tid,
                );
            },
        ))
}

/// [`saxpy`] as a typed kernel.
pub type Saxpy = TypedKernel<(u32, f32, DevicePtr<f32>, DevicePtr<f32>)>;
/// [`affine`] as a typed kernel.
pub type Affine = TypedKernel<(DevicePtr<u32>, u32, u32, u32)>;
/// [`block_reduce`] as a typed kernel.
pub type Reduce = TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, u32)>;
/// [`block_reduce_dyn`] as a typed kernel.
pub type ReduceDyn = TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, u32, SharedMemory<u32>)>;

/// `grid_arrive(arrived, out)`: every block arrives at `*arrived` (zeroed first), every thread
/// waits for all blocks and writes the count it saw at its global index. PTX only: it needs a
/// cooperative launch (no OpenCL or native host form).
pub fn grid_arrive() -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(2).add_cuda_ptx_in_memory(PTX, "grid_arrive")
}
