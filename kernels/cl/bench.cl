// OpenCL C twins of kernels/bench.cu for crates/streamexec-ptx/benches/ptx.rs, which runs them
// on PoCL (OpenCL on the CPU) beside the PTX engines and plain Rust, with the same launch
// shapes: a CUDA block is a work-group, threadIdx is get_local_id, blockIdx is get_group_id.
//
// The results must match the PTX's bit for bit where the PTX rounds the same way, so:
// - contraction is off and every multiply-add the PTX does as fma.rn.f32 is an explicit fma()
//   (one rounding); OpenCL C contracts a * b + c by default, which would round differently
//   where the PTX does not fuse;
// - the bench builds with -cl-fp32-correctly-rounded-divide-sqrt, so `/` and sqrt() round as
//   div.rn.f32 and sqrt.rn.f32 (by default OpenCL allows 2.5 and 3 ulp);
// - sums run in the CUDA source's order.
#pragma OPENCL FP_CONTRACT OFF

// y[i] = fma(a, x[i], y[i]), one element per work-item (bench_saxpy's fma.rn.f32).
__kernel void bench_saxpy(uint n, float a, __global const float* x, __global float* y) {
    size_t i = get_global_id(0);
    if (i < n) y[i] = fma(a, x[i], y[i]);
}

#define TILE 16

// C = A * B for n x n row-major matrices, n a multiple of TILE; 16x16 work-items per group, each
// C element an fma chain over k in order.
__kernel void bench_matmul(__global const float* a, __global const float* b, __global float* c,
                           uint n) {
    __local float as[TILE][TILE];
    __local float bs[TILE][TILE];
    uint tx = get_local_id(0), ty = get_local_id(1);
    uint row = get_group_id(1) * TILE + ty, col = get_group_id(0) * TILE + tx;
    float acc = 0.0f;
    for (uint t = 0; t < n; t += TILE) {
        as[ty][tx] = a[row * n + t + tx];
        bs[ty][tx] = b[(t + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint k = 0; k < TILE; k++) acc = fma(as[ty][k], bs[k][tx], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc;
}

#define RED_THREADS 256

// partial[group] = sum of the group's RED_THREADS elements of in (0 past n), by a tree in local
// memory with a barrier per level. Launch with a local size of RED_THREADS.
__kernel void bench_block_reduce(__global const float* in, __global float* partial, uint n) {
    __local float s[RED_THREADS];
    uint t = get_local_id(0), i = get_group_id(0) * RED_THREADS + t;
    s[t] = i < n ? in[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint stride = RED_THREADS / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) partial[get_group_id(0)] = s[0];
}

#define WARP 32
#define WARP_GROUP_MAX 256

// partial[w] = wrapping sum of the 32 elements of each aligned run w of 32 work-items (0 past
// n). OpenCL C 1.2 has no shuffle and PoCL 3.1 offers no cl_khr_subgroups on the CPU, so each
// run halves through local memory with a barrier per level (offsets 16, 8, 4, 2, 1, as
// bench_warp_reduce's shfl.sync.down). The adds are on uint: signed overflow is undefined in
// OpenCL C, and the PTX's add.s32 wraps. Local size: a multiple of 32, at most WARP_GROUP_MAX.
__kernel void bench_warp_reduce(__global const int* in, __global int* partial, uint n) {
    __local uint s[WARP_GROUP_MAX];
    uint l = get_local_id(0), lane = l % WARP;
    size_t i = get_global_id(0);
    s[l] = i < n ? as_uint(in[i]) : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint offset = WARP / 2; offset > 0; offset >>= 1) {
        if (lane < offset) s[l] += s[l + offset];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0) partial[i / WARP] = as_int(s[l]);
}

#define BLUR_TILE 16

// The weight of tap (dy, dx) of the 3x3 binomial filter [1 2 1; 2 4 2; 1 2 1] / 16.
inline float blur_weight(int dy, int dx) {
    return (float)((2 - abs(dy)) * (2 - abs(dx))) * 0.0625f;
}

// out = in (w x h, row-major) filtered by the 3x3 binomial blur, coordinates clamped into the
// image at the borders; 16x16 work-items per group, each group staging its tile and a one-pixel
// halo in local memory (bench_blur of bench.cu). The global size is the CUDA grid's, rounded up
// to whole tiles.
__kernel void bench_blur(__global const float* in, __global float* out, uint w, uint h) {
    __local float tile[BLUR_TILE + 2][BLUR_TILE + 2];
    uint lx = get_local_id(0), ly = get_local_id(1);
    int x0 = (int)(get_group_id(0) * BLUR_TILE) - 1, y0 = (int)(get_group_id(1) * BLUR_TILE) - 1;
    for (uint ty = ly; ty < BLUR_TILE + 2; ty += BLUR_TILE) {
        int y = clamp(y0 + (int)ty, 0, (int)h - 1);
        for (uint tx = lx; tx < BLUR_TILE + 2; tx += BLUR_TILE) {
            int x = clamp(x0 + (int)tx, 0, (int)w - 1);
            tile[ty][tx] = in[(uint)y * w + (uint)x];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint x = get_group_id(0) * BLUR_TILE + lx, y = get_group_id(1) * BLUR_TILE + ly;
    if (x < w && y < h) {
        float acc = 0.0f;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++)
                acc = fma(blur_weight(dy, dx), tile[ly + 1 + dy][lx + 1 + dx], acc);
        out[y * w + x] = acc;
    }
}

#define NORM_THREADS 256

// The sum of v over the work-group (NORM_THREADS items) by bench_block_reduce's tree; every
// item gets it, and s is free again when it returns.
inline float block_sum(float v, __local float* s) {
    uint t = get_local_id(0);
    s[t] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint stride = NORM_THREADS / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float total = s[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

// Layer normalisation of each row of x (rows x cols), one group of NORM_THREADS items per row:
// mean and variance by block reductions, then y = fma((x - mean) * rstd, gamma, beta) with
// rstd = 1 / sqrt(var + eps) (bench_layernorm of bench.cu, in its order).
__kernel void bench_layernorm(__global const float* x, __global const float* gamma,
                              __global const float* beta, __global float* y, uint cols,
                              float eps) {
    __local float s[NORM_THREADS];
    __global const float* row = x + (size_t)get_group_id(0) * cols;
    __global float* out = y + (size_t)get_group_id(0) * cols;
    uint t = get_local_id(0);
    float sum = 0.0f;
    for (uint j = t; j < cols; j += NORM_THREADS) sum += row[j];
    float mean = block_sum(sum, s) / (float)cols;
    float sq = 0.0f;
    for (uint j = t; j < cols; j += NORM_THREADS) {
        float d = row[j] - mean;
        sq = fma(d, d, sq);
    }
    float rstd = 1.0f / sqrt(block_sum(sq, s) / (float)cols + eps);
    for (uint j = t; j < cols; j += NORM_THREADS)
        out[j] = fma((row[j] - mean) * rstd, gamma[j], beta[j]);
}
