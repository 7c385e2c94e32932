// Compile check of include/streamexec_rpc.h for AMDGPU (scripts/test.sh runs it with clang-19,
// HIP device-only, no ROCm device libraries needed).
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#include "streamexec_rpc.h"

__global__ void hello(int i, double x) {
  se_rpc_puts("Hello world!");
  struct { int i; int pad; double x; } args = {i, 0, x};
  se_rpc_printf("i=%d x=%f\n", &args, sizeof(args));
}
