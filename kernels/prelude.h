// Minimal CUDA prelude for clang's CUDA mode without the CUDA SDK (-nocudainc -nocudalib):
// the execution-space attributes and the built-in index variables (threadIdx, blockIdx, ...).
#pragma once
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __host__ __attribute__((host))
#define __noinline__ __attribute__((noinline))
#define __forceinline__ __attribute__((always_inline))
#include <__clang_cuda_builtin_vars.h>
// __syncthreads is a clang builtin in CUDA mode.

