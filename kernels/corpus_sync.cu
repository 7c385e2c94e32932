// PTX corpus, part 2: barriers, warp-level operations and atomics. Compiled to
// kernels/ptx/corpus_sync.{O0,O3}.ptx by scripts/gen-ptx.sh; see crates/streamexec-ptx/tests/corpus.rs.
//
// What the PTX exercises:
//   block_reduce_sum      static .shared array, st/ld.shared.u32, bar.sync 0 in a loop, shr
//   block_reduce_f32_dyn  `.extern .shared` (dynamic shared memory, launch attribute), add.f32
//   warp_reduce_sum       shfl.sync.down.b32, %laneid-style masking (tid & 31), no barrier
//   vote_any_all          vote.sync.any.pred / vote.sync.all.pred / vote.sync.ballot.b32, selp
//   ballot_compact        vote.sync.ballot.b32, popc.b32, %lanemask_lt, atom.global.add.u32,
//                         shfl.sync.idx.b32 (broadcast of the warp's base)
//   histogram             atom.shared.add.u32 + atom.global.add.u32 (generic atom.add at -O0),
//                         grid-stride loop, rem.u32, bar.sync around the shared phase
//   cas_max_f32           atom.global.cas.b32 loop on float bits, setp on f32, mov.b32 f32<->b32
//   atomics_misc          atom.{max,min}.s32, atom.{inc,dec}.u32 (wrap), atom.exch.b32,
//                         atom.{and,or,xor}.b32, atom.add.u64, atom.add.f32, atom.add.f64,
//                         atom.{max,min}.u32, atom.{max,min}.s64
//   scan_inclusive        Hillis-Steele block scan, double-buffered .shared, bar.sync per step
#include "prelude.h"

#define RED_THREADS 128
// out[blockIdx.x] = sum of this block's RED_THREADS elements of in (0 past n).
// Launch with blockDim.x == RED_THREADS.
extern "C" __global__ void block_reduce_sum(const int* in, int* out, int n) {
    __shared__ int s[RED_THREADS];
    int t = threadIdx.x, i = blockIdx.x * RED_THREADS + t;
    s[t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int stride = RED_THREADS / 2; stride > 0; stride >>= 1) {
        if (t < stride) s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

// Same tree on floats in dynamic shared memory: launch with blockDim.x a power of two and
// blockDim.x floats of dynamic shared memory.
extern "C" __global__ void block_reduce_f32_dyn(const float* in, float* out, int n) {
    extern __shared__ float sdata[];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    sdata[t] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) sdata[t] += sdata[t + stride];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = sdata[0];
}

// out[w] = sum of the 32 elements of global warp w (0 past n). blockDim.x: a multiple of 32.
extern "C" __global__ void warp_reduce_sum(const int* in, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(__FULL_MASK, v, offset);
    if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

// Per global warp w: out[3w] = any(in > limit), out[3w+1] = all(in > limit),
// out[3w+2] = ballot(in > limit) (lanes past n vote false). blockDim.x: a multiple of 32.
extern "C" __global__ void vote_any_all(const int* in, int* out, int n, int limit) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int p = i < n && in[i] > limit;
    int any = __any_sync(__FULL_MASK, p);
    int all = __all_sync(__FULL_MASK, p);
    unsigned ballot = __ballot_sync(__FULL_MASK, p);
    if ((threadIdx.x & 31) == 0) {
        out[3 * (i / 32)] = any;
        out[3 * (i / 32) + 1] = all;
        out[3 * (i / 32) + 2] = (int)ballot;
    }
}

// Stream compaction: every in[i] > 0 (i < n) lands in out[0..*count), in order inside a warp,
// warps in any order. blockDim.x: a multiple of 32.
extern "C" __global__ void ballot_compact(const int* in, int* out, unsigned* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    int keep = v > 0;
    unsigned ballot = __ballot_sync(__FULL_MASK, keep);
    unsigned base = 0;
    if ((threadIdx.x & 31) == 0) base = atomicAdd(count, (unsigned)__popc(ballot));
    base = (unsigned)__shfl_sync(__FULL_MASK, (int)base, 0);
    if (keep) out[base + __popc(ballot & __lanemask_lt())] = v;
}

#define HIST_MAX_BINS 64
// bins[v % nbins] += 1 for each v in in[0..n); nbins <= HIST_MAX_BINS. Per-block counts in
// shared memory, then one global atomic per bin and block.
extern "C" __global__ void histogram(const unsigned* in, unsigned* bins, int n, int nbins) {
    __shared__ unsigned local[HIST_MAX_BINS];
    for (int b = threadIdx.x; b < nbins; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[in[i] % (unsigned)nbins], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < nbins; b += blockDim.x)
        if (local[b]) atomicAdd(&bins[b], local[b]);
}

// *out = max(*out, max of in[0..n)) with an atomicCAS loop on the float's bits.
extern "C" __global__ void cas_max_f32(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = in[i];
    unsigned* addr = (unsigned*)out;
    unsigned old = *addr;
    while (__builtin_bit_cast(float, old) < v) {
        unsigned seen = atomicCAS(addr, old, __builtin_bit_cast(unsigned, v));
        if (seen == old) break;
        old = seen;
    }
}

// Every thread i < n applies one atomic of each kind with in[i]:
//   r[0] max, r[1] min, r[2] inc(wrap 17), r[3] dec(wrap 17), r[4] exch (old -> olds[i]),
//   r[5] and, r[6] or, r[7] xor, r[8] max unsigned, r[9] min unsigned;
//   r64[0] += (u64)in[i] << 20, r64[1] max s64, r64[2] min s64 (of in[i] * 2^33);
//   rf[0] += (float)(in[i] & 1023) (f32 add), rd[0] += in[i] (f64 add).
extern "C" __global__ void atomics_misc(const int* in, int n, int* r, int* olds,
                                        unsigned long long* r64, float* rf, double* rd) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v = in[i];
    atomicMax(&r[0], v);
    atomicMin(&r[1], v);
    atomicInc((unsigned*)&r[2], 17u);
    atomicDec((unsigned*)&r[3], 17u);
    olds[i] = atomicExch(&r[4], v);
    atomicAnd(&r[5], v);
    atomicOr(&r[6], v);
    atomicXor(&r[7], v);
    atomicMax((unsigned*)&r[8], (unsigned)v);
    atomicMin((unsigned*)&r[9], (unsigned)v);
    atomicAdd(&r64[0], (unsigned long long)(unsigned)v << 20);
    atomicMax((long long*)&r64[1], (long long)v * 8589934592ll);
    atomicMin((long long*)&r64[2], (long long)v * 8589934592ll);
    atomicAdd(&rf[0], (float)(v & 1023));
    atomicAdd(&rd[0], (double)v);
}

#define SCAN_MAX 256
// Inclusive prefix sum of each block's blockDim.x elements (blockDim.x <= SCAN_MAX): out[i] =
// in[b*B] + ... + in[i] within block b. Hillis-Steele with two shared buffers.
extern "C" __global__ void scan_inclusive(const int* in, int* out, int n) {
    __shared__ int buf[2][SCAN_MAX];
    int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    int cur = 0;
    buf[cur][t] = i < n ? in[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < (int)blockDim.x; offset <<= 1) {
        int v = buf[cur][t];
        if (t >= offset) v += buf[cur][t - offset];
        buf[1 - cur][t] = v;
        cur = 1 - cur;
        __syncthreads();
    }
    if (i < n) out[i] = buf[cur][t];
}
