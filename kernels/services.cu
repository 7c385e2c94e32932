// Kernels calling the functions CUDA's driver serves from outside a module: vprintf (printf),
// __assertfail (assert), malloc and free. Declared here as CUDA's headers declare them (this
// prelude has no CUDA headers). streamexec-ptx's tests/services.rs and libcuda's tests run them.
#include "prelude.h"
extern "C" __device__ int vprintf(const char*, const char*);
extern "C" __device__ void __assertfail(const char*, const char*, unsigned, const char*, unsigned long);
extern "C" __device__ void* malloc(unsigned long);
extern "C" __device__ void free(void*);

// printf's argument buffer: each argument at an offset aligned to its size.
struct PrintArgs { int i; double d; const char* s; long long l; unsigned u; int c; };  // %c takes an int

// One line per thread: "i=<i+tid> d=<d> s=<s> l=<l> u=<u> c=<c>"; `s` a device string argument.
extern "C" __global__ void print_values(int i, double d, long long l, unsigned u, const char* s) {
    PrintArgs a;
    a.i = i + (int)threadIdx.x;
    a.d = d;
    a.s = s;
    a.l = l;
    a.u = u;
    a.c = 'A' + (int)threadIdx.x;
    int n = vprintf("i=%d d=%.3f s=%s l=%lld u=%u c=%c\n", (const char*)&a);
    (void)n;
}

// Writes vprintf's result for a format with three arguments and one without.
extern "C" __global__ void print_count(int* out) {
    struct { int a; int b; double c; } args = {1, 2, 3.5};
    out[0] = vprintf("%d %d %g\n", (const char*)&args);
    out[1] = vprintf("no arguments\n", 0);
}

// Thread `bad` of block `bad_block` fails its assertion; every other thread writes 1.
extern "C" __global__ void assert_thread(int bad, int bad_block, int* out) {
    if ((int)threadIdx.x == bad && (int)blockIdx.x == bad_block)
        __assertfail("x != bad", "services.cu", 42, "assert_thread", 1);
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

// Each thread mallocs `n` bytes, writes its index at the start and 7 at the end, and stores
// the pointer (NULL when the heap is exhausted).
extern "C" __global__ void heap_alloc(unsigned long n, unsigned long long* out) {
    int* p = (int*)malloc(n);
    out[threadIdx.x] = (unsigned long long)p;
    if (p) {
        p[0] = (int)threadIdx.x;
        p[n / 4 - 1] = 7;
    }
}

// In a later launch: reads back what heap_alloc wrote (first and last word) and frees it.
extern "C" __global__ void heap_free(const unsigned long long* in, unsigned long n, int* vals) {
    int* p = (int*)in[threadIdx.x];
    vals[2 * threadIdx.x] = p[0];
    vals[2 * threadIdx.x + 1] = p[n / 4 - 1];
    free(p);
}
