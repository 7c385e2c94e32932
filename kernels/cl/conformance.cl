// The conformance suite's kernels in OpenCL C: the same behaviour as kernels/conformance.cu and
// the host kernels of crates/streamexec/tests/conformance/kernels.rs. Each kernel's loader spec
// carries this whole program (crates/streamexec/tests/conformance/generated/, regenerate with
// scripts/gen-typed.sh).

__kernel void saxpy(uint n, float a, __global const float* x, __global float* y) {
    uint i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}

__kernel void affine(__global uint* x, uint n, uint mul, uint add) {
    uint i = get_global_id(0);
    if (i < n) x[i] = x[i] * mul + add;
}

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

__kernel void thread_ids(__global uint* out) {
    uint bx = get_group_id(0), by = get_group_id(1), bz = get_group_id(2);
    uint gx = get_num_groups(0), gy = get_num_groups(1);
    uint tx = get_local_id(0), ty = get_local_id(1), tz = get_local_id(2);
    uint dx = get_local_size(0), dy = get_local_size(1), dz = get_local_size(2);
    uint block = (bz * gy + by) * gx + bx;
    uint t = (tz * dy + ty) * dx + tx;
    out[block * dx * dy * dz + t] = block * 65536u + t;
}

__kernel void spin(volatile __global uint* flag, __global uint* out) {
    ulong i = 0;
    while (flag[0] == 0 && i < (1ul << 31)) i++;
    out[0] = flag[0];
}
