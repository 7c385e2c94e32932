// PTX corpus, part 5: forms that CUDA software beyond the basics makes its compilers emit.
// Compiled to kernels/ptx/corpus_forms.{O0,O3}.ptx by scripts/gen-ptx.sh; see
// crates/streamexec-ptx/tests/corpus.rs.
//
// What the PTX exercises:
//   half_ops        _Float16 (.b16 registers): add/sub/mul.f16 (no contraction), fma.rn.f16
//                   (__builtin_fmaf16), neg.f16, setp.*.f16, cvt.f32.f16, cvt.rn.f16.f32,
//                   cvt.rn.f16.s32, cvt.rzi.s32.f16, mov.b16 with a half's bits
//   half2_ops       two-element _Float16 vectors: add/mul/fma .f16x2 in .b32 registers (-O3),
//                   mov.b32 {lo, hi} packing and unpacking
//   bf16_convert    __bf16 <-> float (integer code on sm_70: shl, bfe, setp.nan)
//   block_vote      bar.red.popc.u32, bar.red.and.pred, bar.red.or.pred (__syncthreads_count,
//                   _and, _or)
//   named_pipeline  bar.arrive (inline asm) and barrier.sync with a thread count: a producer
//                   warp and a consumer warp hand a shared buffer back and forth
//   match_groups    match.any.sync.b32, match.all.sync.b64 with its predicate, match.any under
//                   divergence (the active lanes only), WARP_SZ (inline asm, as LLVM writes
//                   llvm.nvvm.read.ptx.sreg.warpsize)
//   recursive       a recursive .func with a local array in its frame, and mutual recursion;
//                   __launch_bounds__(64, 2): .maxntid 64, 1, 1 and .minnctapersm 2
#include "prelude.h"

typedef _Float16 half2_t __attribute__((ext_vector_type(2)));

static __device__ __forceinline__ _Float16 h(unsigned short b) { return __builtin_bit_cast(_Float16, b); }
static __device__ __forceinline__ unsigned short b(_Float16 x) { return __builtin_bit_cast(unsigned short, x); }

// Per element i < n: out[8i..8i+6] = x+y, x-y, x*y, fma(x, y, x+y), (x < y ? -x : x),
// (half)(3 * (float)x), (half)(i - 50); fout[i] = (float)x; iout[i] = (int)x.
extern "C" __global__ void half_ops(const unsigned short* a, const unsigned short* bb,
                                    unsigned short* out, float* fout, int* iout, int n) {
#pragma clang fp contract(off)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    _Float16 x = h(a[i]), y = h(bb[i]);
    _Float16 s = x + y;
    out[8 * i] = b(s);
    out[8 * i + 1] = b(x - y);
    out[8 * i + 2] = b(x * y);
    out[8 * i + 3] = b(__builtin_fmaf16(x, y, s));
    out[8 * i + 4] = b(x < y ? -x : x);
    float f = (float)x;
    out[8 * i + 5] = b((_Float16)(f * 3.0f));
    out[8 * i + 6] = b((_Float16)(i - 50));
    fout[i] = f;
    iout[i] = (int)x;
}

// Per pair i < n: out[2i] = x*y + x (fused), out[2i+1] = x + y, on two halves at once.
extern "C" __global__ void half2_ops(const unsigned* a, const unsigned* bb, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    half2_t x = __builtin_bit_cast(half2_t, a[i]), y = __builtin_bit_cast(half2_t, bb[i]);
    half2_t f;
    f.x = __builtin_fmaf16(x.x, y.x, x.x);
    f.y = __builtin_fmaf16(x.y, y.y, x.y);
    out[2 * i] = __builtin_bit_cast(unsigned, f);
    out[2 * i + 1] = __builtin_bit_cast(unsigned, x + y);
}

// Per element i < n: fout[i] = (float)bf16 a[i]; hout[i] = (__bf16)f[i].
extern "C" __global__ void bf16_convert(const unsigned short* a, const float* f, float* fout,
                                        unsigned short* hout, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    fout[i] = (float)__builtin_bit_cast(__bf16, a[i]);
    hout[i] = __builtin_bit_cast(unsigned short, (__bf16)f[i]);
}

// Per thread t of the grid: out[3t] = how many threads of its block have in > 0,
// out[3t+1] = all of them do, out[3t+2] = any has in > 100.
extern "C" __global__ void block_vote(const int* in, int* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[t];
    out[3 * t] = __nvvm_bar0_popc(v > 0);
    out[3 * t + 1] = __nvvm_bar0_and(v > 0);
    out[3 * t + 2] = __nvvm_bar0_or(v > 100);
}

// One block of 64 threads: warp 0 produces `rounds` rows of 32 values into shared memory,
// warp 1 consumes each: out[32r + lane] = 2 * (1000 r + lane + seed). Barrier 1 says "row
// ready" (the producer arrives, the consumer waits), barrier 2 "row consumed".
extern "C" __global__ void named_pipeline(int* out, int rounds, int seed) {
    __shared__ int row[32];
    int lane = threadIdx.x & 31;
    if (threadIdx.x < 32) {
        for (int r = 0; r < rounds; r++) {
            row[lane] = 1000 * r + lane + seed;
            asm volatile("bar.arrive 1, 64;" ::: "memory");
            __nvvm_barrier_sync_cnt(2, 64);
        }
    } else {
        for (int r = 0; r < rounds; r++) {
            __nvvm_barrier_sync_cnt(1, 64);
            out[32 * r + lane] = 2 * row[lane];
            asm volatile("bar.arrive 2, 64;" ::: "memory");
        }
    }
}

// Per thread t: out[4t] = lanes of its warp with the same in[t]; out[4t+1] = the warp's
// mask if every lane has the same in64[t], else 0; out[4t+2] = that predicate + WARP_SZ;
// out[4t+3] = among the lanes with odd in[t] only, those with the same value (0 for others).
extern "C" __global__ void match_groups(const int* in, const long long* in64, unsigned* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int pred;
    out[4 * t] = __nvvm_match_any_sync_i32(__FULL_MASK, in[t]);
    out[4 * t + 1] = __nvvm_match_all_sync_i64p(__FULL_MASK, in64[t], &pred);
    unsigned w;
    asm volatile("mov.u32 %0, WARP_SZ;" : "=r"(w));
    out[4 * t + 2] = pred + w;
    unsigned odd = 0;
    if (in[t] & 1) odd = __nvvm_match_any_sync_i32(__activemask(), in[t]);
    out[4 * t + 3] = odd;
}

// fib with a frame that must survive the recursive calls (a local array indexed at run time).
__device__ __noinline__ int fib(int n) {
    int keep[4];
    keep[n & 3] = 3 * n;
    if (n < 2) return n + keep[n & 3] - 3 * n;
    int r = fib(n - 1) + fib(n - 2);
    return r + keep[n & 3] - 3 * n;
}
__device__ __noinline__ int is_odd(unsigned n);
__device__ __noinline__ int is_even(unsigned n) { return n == 0 ? 1 : is_odd(n - 1); }
__device__ __noinline__ int is_odd(unsigned n) { return n == 0 ? 0 : is_even(n - 1); }

// Per thread t < n: out[2t] = fib(in[t]), out[2t+1] = in[t] is even (mutual recursion).
extern "C" __global__ void __attribute__((launch_bounds(64, 2))) recursive(const int* in, int* out, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    out[2 * t] = fib(in[t]);
    out[2 * t + 1] = is_even((unsigned)in[t]);
}
