// PTX corpus, part 1: elementwise kernels, matrix multiply and transpose. Compiled to
// kernels/ptx/corpus_basic.{O0,O3}.ptx by scripts/gen-ptx.sh; crates/streamexec-ptx/tests/corpus.rs runs both
// builds on the host platform's PTX engine against Rust references.
//
// What the PTX exercises (besides ld.param, cvta.to.global, mad.lo / mul.wide index math, setp,
// bra, ret everywhere; -O0 adds the %SP local depot with cvta.local + generic ld/st):
//   vadd_i32 / vadd_f32 / vadd_f64   ld/st.global.{u32,f32,f64}, add.s32, add(.rn).f32/.f64
//   saxpy                            mul + add or fma.rn.f32 (contraction is the compiler's choice)
//   grid_stride_scale                loop with a data-independent trip count, %nctaid.x, mul.lo.s32
//   matmul_naive                     2-D grid (%ctaid.y, %ntid.y, %tid.y), inner loop, f32 fma
//   matmul_tiled                     .shared arrays, ld/st.shared.f32, bar.sync 0 in a loop
//   transpose_shared                 .shared [TILE][TILE+1] padding, 2-D blocks, bar.sync
#include "prelude.h"

extern "C" __global__ void vadd_i32(const int* a, const int* b, int* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void vadd_f32(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void vadd_f64(const double* a, const double* b, double* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// y = a * x + y
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// y[i] = x[i] * k + i, for every i < n, whatever the launch shape.
extern "C" __global__ void grid_stride_scale(int n, int k, const int* x, int* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = x[i] * k + i;
}

// C (m×n) = A (m×k) · B (k×n), row-major; one thread per element of C, 2-D grid.
extern "C" __global__ void matmul_naive(const float* A, const float* B, float* C, int m, int n,
                                        int k) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (int p = 0; p < k; p++) acc += A[row * k + p] * B[p * n + col];
    C[row * n + col] = acc;
}

#define MM_TILE 8
// Same product with MM_TILE×MM_TILE tiles staged in shared memory; launch with
// blockDim = (MM_TILE, MM_TILE). Sizes need not be multiples of the tile.
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int m, int n,
                                        int k) {
    __shared__ float As[MM_TILE][MM_TILE];
    __shared__ float Bs[MM_TILE][MM_TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * MM_TILE + ty;
    int col = blockIdx.x * MM_TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < (k + MM_TILE - 1) / MM_TILE; t++) {
        int ak = t * MM_TILE + tx, bk = t * MM_TILE + ty;
        As[ty][tx] = (row < m && ak < k) ? A[row * k + ak] : 0.0f;
        Bs[ty][tx] = (bk < k && col < n) ? B[bk * n + col] : 0.0f;
        __syncthreads();
        for (int p = 0; p < MM_TILE; p++) acc += As[ty][p] * Bs[p][tx];
        __syncthreads();
    }
    if (row < m && col < n) C[row * n + col] = acc;
}

#define TR_TILE 8
// out (cols×rows) = transpose of in (rows×cols); blockDim = (TR_TILE, TR_TILE), the tile is
// padded by one column so a column read does not hit one shared bank.
extern "C" __global__ void transpose_shared(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TR_TILE][TR_TILE + 1];
    int x = blockIdx.x * TR_TILE + threadIdx.x;
    int y = blockIdx.y * TR_TILE + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * TR_TILE + threadIdx.x;
    y = blockIdx.x * TR_TILE + threadIdx.y;
    if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}
