// Kernels for tests/libcuda_cudarc.rs, which drives the CPU libcuda through cudarc's safe API
// (a client we did not write): scalars and pointers mixed, a `__constant__` table read through
// cuModuleGetGlobal, a struct passed by value, dynamic shared memory.
#include "prelude.h"

struct Affine { double scale; int offset; };  // 16 bytes, align 8

__constant__ float poly_coeffs[4];

// y[i] = a * x[i] + b * y[i]
extern "C" __global__ void axpby(unsigned n, float a, const float* x, float b, float* y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b * y[i];
}

// out[i] = c0 + c1 x + c2 x^2 + c3 x^3 with the coefficients from constant memory.
extern "C" __global__ void poly(const float* x, float* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        out[i] = ((poly_coeffs[3] * v + poly_coeffs[2]) * v + poly_coeffs[1]) * v + poly_coeffs[0];
    }
}

// out[i] = in[i] * t.scale + t.offset
extern "C" __global__ void affine_struct(Affine t, const int* in, double* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (double)in[i] * t.scale + (double)t.offset;
}

extern __shared__ double sum_scratch[];

// out[b] = the sum of block b's elements of x, summed in dynamic shared memory (blockDim.x
// doubles, blockDim.x a power of two).
extern "C" __global__ void block_sum(const float* x, double* out, unsigned n) {
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    sum_scratch[t] = i < n ? (double)x[i] : 0.0;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sum_scratch[t] += sum_scratch[t + s];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sum_scratch[0];
}
