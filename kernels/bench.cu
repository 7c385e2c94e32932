// Kernels of crates/streamexec-ptx/benches/ptx.rs: the PTX engines (JIT and interpreter) against plain
// Rust and PoCL doing the same work (kernels/cl/bench.cl holds their OpenCL C twins; change both
// together). crates/streamexec-ptx/tests/bench_kernels.rs checks each against a Rust reference.
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

#define BLUR_TILE 16

// The weight of tap (dy, dx) of the 3x3 binomial filter [1 2 1; 2 4 2; 1 2 1] / 16: powers of
// two, so every product is exact and the result does not depend on fma contraction.
__device__ __forceinline__ float blur_weight(int dy, int dx) {
    return (float)((2 - (dy < 0 ? -dy : dy)) * (2 - (dx < 0 ? -dx : dx))) * 0.0625f;
}

// i clamped into [0, n).
__device__ __forceinline__ int clamp_index(int i, int n) {
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

// out = in (w x h, row-major) filtered by the 3x3 binomial blur, each coordinate clamped into
// the image at the borders. 16x16 threads per block, one block per 16x16 tile of out (w and h
// need not be multiples of 16): the block stages its tile and a one-pixel halo (18x18) in
// shared memory (threads with x or y below 2 load a second column or row), then each thread sums its 9 taps, row by row, with __builtin_fmaf
// (fma.rn.f32) from 0.
extern "C" __global__ void bench_blur(const float* in, float* out, unsigned w, unsigned h) {
    __shared__ float tile[BLUR_TILE + 2][BLUR_TILE + 2];
    int x0 = (int)(blockIdx.x * BLUR_TILE) - 1, y0 = (int)(blockIdx.y * BLUR_TILE) - 1;
    for (unsigned ty = threadIdx.y; ty < BLUR_TILE + 2; ty += BLUR_TILE) {
        int y = clamp_index(y0 + (int)ty, (int)h);
        for (unsigned tx = threadIdx.x; tx < BLUR_TILE + 2; tx += BLUR_TILE) {
            int x = clamp_index(x0 + (int)tx, (int)w);
            tile[ty][tx] = in[(unsigned)y * w + (unsigned)x];
        }
    }
    __syncthreads();
    unsigned x = blockIdx.x * BLUR_TILE + threadIdx.x, y = blockIdx.y * BLUR_TILE + threadIdx.y;
    if (x < w && y < h) {
        float acc = 0.0f;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++)
                acc = __builtin_fmaf(blur_weight(dy, dx),
                                     tile[threadIdx.y + 1 + dy][threadIdx.x + 1 + dx], acc);
        out[y * w + x] = acc;
    }
}

#define NORM_THREADS 256

// The sum of v over the block (NORM_THREADS threads), the same tree as bench_block_reduce;
// every thread gets it. s is free again when it returns.
__device__ __forceinline__ float block_sum(float v, float* s) {
    unsigned t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (unsigned stride = NORM_THREADS / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    float total = s[0];
    __syncthreads();
    return total;
}

// Layer normalisation of each row of x (rows x cols, row-major), one block of NORM_THREADS
// threads per row: mean and variance by block reductions (thread t first sums elements t,
// t + NORM_THREADS, ... in order), then y = (x - mean) * (1 / sqrt(var + eps)) * gamma + beta.
// Every multiply-add is an explicit __builtin_fmaf; the division and square root round correctly
// (div.rn, sqrt.rn), so a reference in the same order matches bit for bit.
extern "C" __global__ void bench_layernorm(const float* x, const float* gamma, const float* beta,
                                           float* y, unsigned cols, float eps) {
    __shared__ float s[NORM_THREADS];
    const float* row = x + (unsigned long long)blockIdx.x * cols;
    float* out = y + (unsigned long long)blockIdx.x * cols;
    float sum = 0.0f;
    for (unsigned j = threadIdx.x; j < cols; j += NORM_THREADS) sum += row[j];
    float mean = block_sum(sum, s) / (float)cols;
    float sq = 0.0f;
    for (unsigned j = threadIdx.x; j < cols; j += NORM_THREADS) {
        float d = row[j] - mean;
        sq = __builtin_fmaf(d, d, sq);
    }
    float rstd = 1.0f / __builtin_sqrtf(block_sum(sq, s) / (float)cols + eps);
    for (unsigned j = threadIdx.x; j < cols; j += NORM_THREADS)
        out[j] = __builtin_fmaf((row[j] - mean) * rstd, gamma[j], beta[j]);
}
