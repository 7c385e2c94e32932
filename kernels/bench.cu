// Kernels of crates/streamexec-ptx/benches/ptx.rs: the PTX engines (JIT and interpreter) against plain
// Rust doing the same work. crates/streamexec-ptx/tests/bench_kernels.rs checks each against a Rust reference.
#include "prelude.h"

// y[i] = a * x[i] + y[i], one element per thread (clang contracts it to one fma.rn.f32).
extern "C" __global__ void bench_saxpy(unsigned n, float a, const float* x, float* y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

#define TILE 16

// C = A * B for n x n row-major matrices, n a multiple of TILE; 16x16 threads per block.
extern "C" __global__ void bench_matmul(const float* a, const float* b, float* c, unsigned n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    unsigned tx = threadIdx.x, ty = threadIdx.y;
    unsigned row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (unsigned t = 0; t < n; t += TILE) {
        as[ty][tx] = a[row * n + t + tx];
        bs[ty][tx] = b[(t + ty) * n + col];
        __syncthreads();
        for (unsigned k = 0; k < TILE; k++) acc += as[ty][k] * bs[k][tx];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

#define RED_THREADS 256

// partial[blockIdx.x] = sum of the block's RED_THREADS elements of in (0 past n), by a tree in
// shared memory with a barrier per level. Launch with blockDim.x == RED_THREADS.
extern "C" __global__ void bench_block_reduce(const float* in, float* partial, unsigned n) {
    __shared__ float s[RED_THREADS];
    unsigned t = threadIdx.x, i = blockIdx.x * RED_THREADS + t;
    s[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (unsigned stride = RED_THREADS / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}

// partial[w] = sum of the 32 elements of global warp w (0 past n), by shfl.sync.down; lane 0
// writes it. blockDim.x: a multiple of 32; partial has an entry for every launched warp.
extern "C" __global__ void bench_warp_reduce(const int* in, int* partial, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    for (unsigned offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(__FULL_MASK, v, offset);
    if ((threadIdx.x & 31) == 0) partial[i / 32] = v;
}
