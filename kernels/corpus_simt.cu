// PTX corpus, part 6: SIMT control flow as a vectorizing JIT meets it (lanes of a warp that
// loop, leave and meet again; partial member masks; odd block shapes). Compiled to
// kernels/ptx/corpus_simt.{O0,O3}.ptx by scripts/gen-ptx.sh; see
// crates/streamexec-ptx/tests/corpus/simt.rs.
//
// What the PTX exercises:
//   divergent_trips     per-lane trip counts from data, a data-dependent branch in the loop,
//                       activemask in every iteration, shfl.sync.bfly after the loop
//   early_exit          ret of some lanes, then shfl.sync.idx under the survivors' mask and
//                       more data-dependent work for them
//   stencil_passes      bar.sync inside a loop with a uniform trip count, double-buffered
//                       .shared tiles (a multi-pass 1-D stencil)
//   partial_masks       activemask in a divergent branch, shfl.sync.down/idx under it,
//                       vote.sync.ballot with a partial mask on the other side
//   half_warp_masks     lanes of one instruction with different member masks (two halves):
//                       vote.sync.ballot/all/any, shfl.sync.idx with a 16-lane segment,
//                       match.any.sync
//   call_site_shfl      one shfl.sync in a .func reached from two call sites by different lanes
//   shared_hist_2d      2-D blocks (blockDim.x 7), atom.shared.add/max then atom.global.add/max
//   grid_stride_dot     a grid-stride loop over many elements with few blocks, a block
//                       reduction (shfl.sync.down, .shared, bar.sync), atom.global.add
//   block_shape_ids     3-D and odd 1-D blocks: %tid.{x,y,z}, partial warps' ballot and
//                       activemask, atom.shared.add
//   guarded_axpy        i < n guards with odd n, one f32 multiply per element
#include "prelude.h"

// Per thread i < n: out[2i] = a hash iterated cnt[i] times from x[i], adding in each round how
// many lanes of the warp are still looping; out[2i+1] = the warp's total trip count.
// blockDim.x: a multiple of 32 (lanes past n loop 0 times).
extern "C" __global__ void divergent_trips(const unsigned* cnt, const unsigned* x, unsigned* out,
                                           int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned c = i < n ? cnt[i] : 0;
    unsigned acc = i < n ? x[i] : 0;
    for (unsigned k = 0; k < c; k++) {
        acc = acc * 1664525u + 1013904223u + k;
        if (acc & 1) acc ^= acc >> 7;
        acc += (unsigned)__popc(__activemask());
    }
    unsigned total = c;
    for (int o = 16; o > 0; o >>= 1) total += (unsigned)__shfl_xor_sync(__FULL_MASK, (int)total, o);
    if (i < n) {
        out[2 * i] = acc;
        out[2 * i + 1] = total;
    }
}

// Lanes with x[i] < 0 (or i >= n) store -x[i] and return. The others, whose mask a ballot took
// before, sum their values with one broadcast per survivor, then run x[i] % 8 more rounds:
// out[i] = that sum * 3 + x[i] % 8 + the rounds' result.
extern "C" __global__ void early_exit(const int* x, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? x[i] : -1;
    unsigned keep = __ballot_sync(__FULL_MASK, v >= 0);
    if (v < 0) {
        if (i < n) out[i] = -v;
        return;
    }
    int sum = 0;
    for (unsigned m = keep; m != 0; m &= m - 1) sum += __shfl_sync(keep, v, __builtin_ctz(m));
    int r = 0;
    for (int k = 0; k < v % 8; k++) r = r * 5 + k;
    out[i] = sum * 3 + v % 8 + r;
}

#define ST_MAX 256
// passes rounds of v' = (left + 2 v + right) >> 2 over each block's tile (blockDim.x <=
// ST_MAX), cells outside the tile or at or past n taken as 0: out[i] = the tile's cell after the
// last round.
extern "C" __global__ void stencil_passes(const unsigned* in, unsigned* out, int n, int passes) {
    __shared__ unsigned buf[2][ST_MAX + 2];
    int t = threadIdx.x, b = blockDim.x, i = blockIdx.x * b + t;
    buf[0][t + 1] = i < n ? in[i] : 0;
    if (t == 0) {
        buf[0][0] = buf[1][0] = 0;
        buf[0][b + 1] = buf[1][b + 1] = 0;
    }
    __syncthreads();
    int cur = 0;
    for (int p = 0; p < passes; p++) {
        unsigned v = (buf[cur][t] + 2 * buf[cur][t + 1] + buf[cur][t + 2]) >> 2;
        buf[1 - cur][t + 1] = i < n ? v : 0;
        cur = 1 - cur;
        __syncthreads();
    }
    if (i < n) out[i] = buf[cur][t + 1];
}

// Per thread i (blockDim.x: a multiple of 32; x[i] for every thread): odd lanes (odd x[i]) take
// the branch: out[4i] = x[i] plus the next odd lane's x if that lane is the next lane,
// out[4i+1] = x of the branch's first lane, out[4i+2] = ballot of x > 0 among the odd lanes,
// out[4i+3] = the branch's active mask. Even lanes: out[4i+2] = ballot of x > 0 among the
// even lanes (a mask from an earlier full ballot), the rest 0.
extern "C" __global__ void partial_masks(const int* x, unsigned* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31;
    int v = x[i];
    unsigned odd = __ballot_sync(__FULL_MASK, v & 1);
    unsigned r0 = 0, r1 = 0, r2, r3 = 0;
    if (v & 1) {
        unsigned m = __activemask();
        int down = __shfl_down_sync(m, v, 1);
        r0 = (unsigned)v + (lane < 31 && (m >> (lane + 1) & 1) ? (unsigned)down : 0u);
        r1 = (unsigned)__shfl_sync(m, v, __builtin_ctz(m));
        r2 = __ballot_sync(m, v > 0);
        r3 = m;
    } else {
        r2 = __ballot_sync(~odd, v > 0);
    }
    out[4 * i] = r0;
    out[4 * i + 1] = r1;
    out[4 * i + 2] = r2;
    out[4 * i + 3] = r3;
}

// Lanes 0-15 and 16-31 of each warp use their own half as the member mask at the same
// instructions: out[5i] = ballot(x > 0), out[5i+1] = all(x > 0), out[5i+2] = any(x > 100),
// out[5i+3] = x of the half's first lane, out[5i+4] = the half's lanes with the same x & 3.
// blockDim.x: a multiple of 32.
extern "C" __global__ void half_warp_masks(const int* x, unsigned* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31;
    unsigned m = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    int v = x[i];
    out[5 * i] = __ballot_sync(m, v > 0);
    out[5 * i + 1] = __all_sync(m, v > 0);
    out[5 * i + 2] = __any_sync(m, v > 100);
    // c = 0x101f: 16-lane segments, so lane 0 of each half is the source.
    out[5 * i + 3] = (unsigned)__nvvm_shfl_sync_idx_i32(m, v, 0, 0x101f);
    out[5 * i + 4] = __nvvm_match_any_sync_i32(m, v & 3);
}

// One shuffle instruction reached from two call sites: odd lanes call with 2x, even lanes with
// x + 1; every lane gets lane 0's argument (x + 1 of lane 0): the lanes meet at the .func's
// shfl.sync whichever call brought them. out[i] = that, plus 1000 for odd lanes.
__device__ __noinline__ int from_lane0(int v) { return __shfl_sync(__FULL_MASK, v, 0); }
extern "C" __global__ void call_site_shfl(const int* x, int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i], r;
    if (i & 1) {
        r = from_lane0(2 * v) + 1000;
    } else {
        r = from_lane0(v + 1);
    }
    out[i] = r;
}

#define HB_MAX 32
// 2-D blocks over a rows x cols matrix m (row-major): per block, counts[v % nbins] and the
// largest v per bin in shared memory, then one global atomic add and max per bin and block.
// nbins <= HB_MAX; any blockDim.
extern "C" __global__ void shared_hist_2d(const unsigned* m, int rows, int cols, int nbins,
                                          unsigned* counts, unsigned* maxes) {
    __shared__ unsigned c[HB_MAX], mx[HB_MAX];
    int t = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
    for (int b = t; b < nbins; b += nt) c[b] = mx[b] = 0;
    __syncthreads();
    int r = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows && col < cols) {
        unsigned v = m[r * cols + col];
        atomicAdd(&c[v % (unsigned)nbins], 1u);
        atomicMax(&mx[v % (unsigned)nbins], v);
    }
    __syncthreads();
    for (int b = t; b < nbins; b += nt) {
        if (c[b]) {
            atomicAdd(&counts[b], c[b]);
            atomicMax(&maxes[b], mx[b]);
        }
    }
}

#define GS_THREADS 96
// y[i] = 3 x[i] + i % 7 for every i < n, each thread striding over the grid; *dot += the sum
// of x[i] * w[i] (mod 2^32): a block sum by warp shuffles and shared memory, one atomic per
// block. blockDim.x == GS_THREADS.
extern "C" __global__ void grid_stride_dot(const unsigned* x, const unsigned* w, unsigned* y,
                                           unsigned* dot, int n) {
    __shared__ unsigned warps[GS_THREADS / 32];
    unsigned s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = 3 * x[i] + (unsigned)(i % 7);
        s += x[i] * w[i];
    }
    for (int o = 16; o > 0; o >>= 1) s += (unsigned)__shfl_down_sync(__FULL_MASK, (int)s, o);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned b = 0;
        for (int k = 0; k < GS_THREADS / 32; k++) b += warps[k];
        atomicAdd(dot, b);
    }
}

// Any block shape (3-D, sizes not a multiple of 32 or 4), any grid. Per thread, at its global
// linear index g: out[5g] = tid.x | tid.y << 8 | tid.z << 16, out[5g+1] = linear tid in the
// block, out[5g+2] = ballot of odd x over its (maybe partial) warp, out[5g+3] = activemask,
// out[5g+4] = the block's sum of x.
extern "C" __global__ void block_shape_ids(const unsigned* x, unsigned* out) {
    __shared__ unsigned sum;
    unsigned t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    unsigned b = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    unsigned g = b * nt + t;
    unsigned v = x[g];
    if (t == 0) sum = 0;
    __syncthreads();
    atomicAdd(&sum, v);
    unsigned ballot = __ballot_sync(__FULL_MASK, v & 1);
    unsigned act = __activemask();
    __syncthreads();
    out[5 * g] = threadIdx.x | threadIdx.y << 8 | threadIdx.z << 16;
    out[5 * g + 1] = t;
    out[5 * g + 2] = ballot;
    out[5 * g + 3] = act;
    out[5 * g + 4] = sum;
}

// y[i] = a * x[i] and z[i] = x[i] as bits + i for i < n (one f32 rounding each).
extern "C" __global__ void guarded_axpy(const float* x, float* y, unsigned* z, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i];
        z[i] = __builtin_bit_cast(unsigned, x[i]) + (unsigned)i;
    }
}
