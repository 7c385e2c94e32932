// PTX corpus, part 4: kernels that must fail, for the host engine's checks. Compiled to
// kernels/ptx/corpus_faults.{O0,O3}.ptx by scripts/gen-ptx.sh; see crates/streamexec-ptx/tests/corpus.rs.
//
//   racy_shared_sum      every thread does `s += in[t]` on one .shared word without atomics:
//                        ld.shared/st.shared from all warps between two bar.sync -> data race
//   atomic_shared_sum    its race-free twin: atom.shared.add.u32 (atomics do not race)
//   racy_neighbour       thread t reads a[t + 32] while thread t + 32 (another warp) writes it
//   synced_neighbour     its race-free twin: the read and the write are split by bar.sync
//   oob_store            writes out[i] for every launched thread, no `i < n` guard
//   barrier_divergent    bar.sync reached by threads 0..15 only (part of warp 0)
//   barrier_deadlock     warp 0 waits at barrier 0 (bar.sync 0), warp 1 at barrier 1
//                        (barrier.sync 1), each for all 64 threads: neither can complete
#include "prelude.h"

extern "C" __global__ void racy_shared_sum(const int* in, int* out) {
    __shared__ int s;
    if (threadIdx.x == 0) s = 0;
    __syncthreads();
    s += in[threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s;
}

extern "C" __global__ void atomic_shared_sum(const int* in, int* out) {
    __shared__ int s;
    if (threadIdx.x == 0) s = 0;
    __syncthreads();
    atomicAdd(&s, in[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) out[0] = s;
}

// One block of n threads over a[0..n+32).
extern "C" __global__ void racy_neighbour(int* a) {
    int t = threadIdx.x;
    a[t] = a[t + 32] + 1;
}

extern "C" __global__ void synced_neighbour(int* a) {
    int t = threadIdx.x;
    int v = a[t + 32];
    __syncthreads();
    a[t] = v + 1;
}

extern "C" __global__ void oob_store(int* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = i;
}

extern "C" __global__ void barrier_divergent(int* out) {
    if (threadIdx.x < 16) __syncthreads();
    out[threadIdx.x] = threadIdx.x;
}

// Whole warps on different named barriers: a deadlock whatever the engine's rules for exited
// threads or for partial warps at a barrier. Launch with 64 threads.
extern "C" __global__ void barrier_deadlock(int* out) {
    if (threadIdx.x < 32) __syncthreads();
    else __nvvm_barrier_sync(1);
    out[threadIdx.x] = threadIdx.x;
}
