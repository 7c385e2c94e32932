// Kernels of benches/ptx.rs: the PTX engine against native host kernels doing the same work.
#include "prelude.h"

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
