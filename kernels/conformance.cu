// The conformance suite's kernels in CUDA C: the same behaviour as the OpenCL C and host
// kernels of tests/conformance/kernels.rs.
#include "prelude.h"

extern "C" __global__ void saxpy(unsigned n, float a, const float* x, float* y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void affine(unsigned* x, unsigned n, unsigned mul, unsigned add) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * mul + add;
}

static __device__ void reduce_in_block(unsigned* sh, const unsigned* input, unsigned* out,
                                       unsigned n) {
    unsigned tid = threadIdx.x, bd = blockDim.x;
    unsigned i = blockIdx.x * bd + tid;
    sh[tid] = i < n ? input[i] : 0;
    __syncthreads();
    unsigned s = 1;
    while (s < bd) s <<= 1;
    for (s >>= 1; s > 0; s >>= 1) {
        if (tid < s && tid + s < bd) sh[tid] += sh[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sh[0];
}

extern "C" __global__ void block_reduce(const unsigned* input, unsigned* out, unsigned n) {
    __shared__ unsigned sh[1024];
    reduce_in_block(sh, input, out, n);
}

extern __shared__ unsigned dynamic_shared[];

extern "C" __global__ void block_reduce_dyn(const unsigned* input, unsigned* out, unsigned n) {
    reduce_in_block(dynamic_shared, input, out, n);
}

extern "C" __global__ void thread_ids(unsigned* out) {
    unsigned block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    out[block * blockDim.x * blockDim.y * blockDim.z + t] = block * 65536u + t;
}

extern "C" __global__ void spin(volatile unsigned* flag, unsigned* out) {
    unsigned long long i = 0;
    while (flag[0] == 0 && i < (1ull << 31)) i++;
    out[0] = flag[0];
}

// A grid-wide wait, for cooperative launches (every block resident at once): each block
// arrives once at `*arrived`, then every thread waits until all blocks have and writes the
// count it saw at its global index. Without co-residency the blocks that wait would never
// let the others start.
extern "C" __global__ void grid_arrive(unsigned* arrived, unsigned* out) {
    if (threadIdx.x == 0) atomicAdd(arrived, 1u);
    volatile unsigned* a = arrived;
    while (a[0] < gridDim.x) asm volatile("nanosleep.u32 1000;" ::: "memory");
    out[blockIdx.x * blockDim.x + threadIdx.x] = a[0];
}
