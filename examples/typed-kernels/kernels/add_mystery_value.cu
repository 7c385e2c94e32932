// StreamExecutor's seed kernel in CUDA C: `*out = x + 123.0f`. `extern "C"`, so the PTX entry
// is the plain name (a C++ kernel's entry is its mangled name; streamexec-build handles both).
#include "mystery.h"

extern "C" __global__ void add_mystery_value(float x, float *out) {
    *out = x + MYSTERY_VALUE;
}

// A C++ kernel (mangled entry) with a struct by value, a bool and dynamic shared memory:
// out[i] = p.scale * in[i] + p.offset (+ p.bias when `use_bias`), staged through shared memory.
struct Affine {
    float scale;
    double offset;
    int bias;
};

extern __shared__ float staging[];

__global__ void affine(Affine p, bool use_bias, const float *in, double *out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        staging[threadIdx.x] = in[i];
        out[i] = (double)p.scale * staging[threadIdx.x] + p.offset + (use_bias ? p.bias : 0);
    }
}
