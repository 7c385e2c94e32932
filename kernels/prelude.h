// Minimal CUDA prelude for clang's CUDA mode without the CUDA SDK (-nocudainc -nocudalib):
// the execution-space attributes and the built-in index variables (threadIdx, blockIdx, ...).
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __host__ __attribute__((host))
#define __noinline__ __attribute__((noinline))
#define __forceinline__ __attribute__((always_inline))
#include <__clang_cuda_builtin_vars.h>
// __syncthreads is a clang builtin in CUDA mode.


// ---- Warp, vote and atomic functions of the CUDA API, over clang's NVPTX builtins ----
// (added for the PTX corpus, kernels/corpus_*.cu; the names and argument orders are CUDA's).
// always_inline, so -O0 builds emit the instruction in place instead of a `.func` call.
#define __FULL_MASK 0xffffffffu
#define __SE_INL static __device__ __forceinline__

__SE_INL void __threadfence() { __nvvm_membar_gl(); }
__SE_INL void __threadfence_block() { __nvvm_membar_cta(); }
// bar.warp.sync: the lanes of `m` wait for each other here (reconvergence after divergence).
__SE_INL void __syncwarp(unsigned m = __FULL_MASK) { __nvvm_bar_warp_sync(m); }

// shfl.sync: the `c` operand is 0x1f (clamp at lane 31) for down/idx/bfly and 0 for up.
__SE_INL int __shfl_down_sync(unsigned m, int v, unsigned d) { return __nvvm_shfl_sync_down_i32(m, v, d, 0x1f); }
__SE_INL float __shfl_down_sync(unsigned m, float v, unsigned d) { return __nvvm_shfl_sync_down_f32(m, v, d, 0x1f); }
__SE_INL int __shfl_up_sync(unsigned m, int v, unsigned d) { return __nvvm_shfl_sync_up_i32(m, v, d, 0); }
__SE_INL int __shfl_xor_sync(unsigned m, int v, int lanes) { return __nvvm_shfl_sync_bfly_i32(m, v, lanes, 0x1f); }
__SE_INL int __shfl_sync(unsigned m, int v, int lane) { return __nvvm_shfl_sync_idx_i32(m, v, lane, 0x1f); }

// vote.sync
__SE_INL unsigned __ballot_sync(unsigned m, int p) { return __nvvm_vote_ballot_sync(m, p != 0); }
__SE_INL int __any_sync(unsigned m, int p) { return __nvvm_vote_any_sync(m, p != 0); }
__SE_INL int __all_sync(unsigned m, int p) { return __nvvm_vote_all_sync(m, p != 0); }
__SE_INL unsigned __activemask() { return __nvvm_activemask(); }
__SE_INL int __popc(unsigned x) { return __builtin_popcount(x); }
__SE_INL unsigned __lanemask_lt() { return __nvvm_read_ptx_sreg_lanemask_lt(); }

// atom.* (generic addresses; clang -O3 turns them into atom.global/atom.shared when it can)
__SE_INL int atomicAdd(int* p, int v) { return __nvvm_atom_add_gen_i(p, v); }
__SE_INL unsigned atomicAdd(unsigned* p, unsigned v) { return (unsigned)__nvvm_atom_add_gen_i((int*)p, (int)v); }
__SE_INL unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return (unsigned long long)__nvvm_atom_add_gen_ll((long long*)p, (long long)v);
}
__SE_INL float atomicAdd(float* p, float v) { return __nvvm_atom_add_gen_f(p, v); }
__SE_INL double atomicAdd(double* p, double v) { return __nvvm_atom_add_gen_d(p, v); }
__SE_INL int atomicCAS(int* p, int cmp, int v) { return __nvvm_atom_cas_gen_i(p, cmp, v); }
__SE_INL unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
    return (unsigned)__nvvm_atom_cas_gen_i((int*)p, (int)cmp, (int)v);
}
__SE_INL unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
    return (unsigned long long)__nvvm_atom_cas_gen_ll((long long*)p, (long long)cmp, (long long)v);
}
__SE_INL int atomicExch(int* p, int v) { return __nvvm_atom_xchg_gen_i(p, v); }
__SE_INL int atomicMax(int* p, int v) { return __nvvm_atom_max_gen_i(p, v); }
__SE_INL int atomicMin(int* p, int v) { return __nvvm_atom_min_gen_i(p, v); }
__SE_INL unsigned atomicMax(unsigned* p, unsigned v) { return __nvvm_atom_max_gen_ui(p, v); }
__SE_INL unsigned atomicMin(unsigned* p, unsigned v) { return __nvvm_atom_min_gen_ui(p, v); }
__SE_INL long long atomicMax(long long* p, long long v) { return __nvvm_atom_max_gen_ll(p, v); }
__SE_INL long long atomicMin(long long* p, long long v) { return __nvvm_atom_min_gen_ll(p, v); }
__SE_INL int atomicAnd(int* p, int v) { return __nvvm_atom_and_gen_i(p, v); }
__SE_INL int atomicOr(int* p, int v) { return __nvvm_atom_or_gen_i(p, v); }
__SE_INL int atomicXor(int* p, int v) { return __nvvm_atom_xor_gen_i(p, v); }
// PTX wrap semantics: inc gives (old >= b) ? 0 : old + 1; dec gives (old == 0 || old > b) ? b : old - 1.
__SE_INL unsigned atomicInc(unsigned* p, unsigned b) { return __nvvm_atom_inc_gen_ui(p, b); }
__SE_INL unsigned atomicDec(unsigned* p, unsigned b) { return __nvvm_atom_dec_gen_ui(p, b); }
