// What NVRTC predefines, beyond kernels/prelude.h (included before this file): the remaining
// CUDA keywords, NVRTC's macros and types, and the math functions that have an exact PTX
// instruction (sqrt.rn, fma.rn, cvt.rmi, ...), plus CUDA's documented approximate intrinsics
// (__sinf, __expf, __fdividef, rsqrtf, ...) over the PTX .approx instructions. Functions that
// CUDA computes in software (sinf, expf, logf, powf, ...) are not provided: a call to one is a
// compile error naming it. Written by libnvrtc (streamexec) next to the program's source.
#pragma once
#define __constant__ __attribute__((constant))
#define __managed__ __attribute__((managed))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __grid_constant__ __attribute__((grid_constant))
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#define __CUDACC_RTC__ 1
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define __CUDACC_VER_BUILD__ 0

typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;

#define __SE_MATH static __device__ __forceinline__
// Exact (correctly rounded, as CUDA's are).
__SE_MATH float sqrtf(float x) { return __builtin_sqrtf(x); }
__SE_MATH double sqrt(double x) { return __builtin_sqrt(x); }
__SE_MATH float sqrt(float x) { return __builtin_sqrtf(x); }
__SE_MATH float fabsf(float x) { return __builtin_fabsf(x); }
__SE_MATH double fabs(double x) { return __builtin_fabs(x); }
__SE_MATH float fabs(float x) { return __builtin_fabsf(x); }
__SE_MATH float fminf(float a, float b) { return __builtin_fminf(a, b); }
__SE_MATH float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
__SE_MATH double fmin(double a, double b) { return __builtin_fmin(a, b); }
__SE_MATH double fmax(double a, double b) { return __builtin_fmax(a, b); }
__SE_MATH float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__SE_MATH double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__SE_MATH float floorf(float x) { return __builtin_floorf(x); }
__SE_MATH float ceilf(float x) { return __builtin_ceilf(x); }
__SE_MATH float truncf(float x) { return __builtin_truncf(x); }
__SE_MATH float rintf(float x) { return __builtin_rintf(x); }
__SE_MATH double floor(double x) { return __builtin_floor(x); }
__SE_MATH double ceil(double x) { return __builtin_ceil(x); }
__SE_MATH double trunc(double x) { return __builtin_trunc(x); }
__SE_MATH double rint(double x) { return __builtin_rint(x); }
__SE_MATH float copysignf(float a, float b) { return __builtin_copysignf(a, b); }
__SE_MATH double copysign(double a, double b) { return __builtin_copysign(a, b); }
__SE_MATH float __saturatef(float x) { return __nvvm_saturate_f(x); }
// Approximate, as CUDA documents them.
__SE_MATH float rsqrtf(float x) { return __nvvm_rsqrt_approx_f(x); }
__SE_MATH float __fdividef(float a, float b) { return __nvvm_div_approx_f(a, b); }
__SE_MATH float __sinf(float x) { return __nvvm_sin_approx_f(x); }
__SE_MATH float __cosf(float x) { return __nvvm_cos_approx_f(x); }
__SE_MATH float __exp2f(float x) { return __nvvm_ex2_approx_f(x); }
__SE_MATH float __expf(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }
__SE_MATH float __log2f(float x) { return __nvvm_lg2_approx_f(x); }
__SE_MATH float __logf(float x) { return __nvvm_lg2_approx_f(x) * 0.6931471805599453f; }
// min/max overloads of the CUDA math API.
__SE_MATH int min(int a, int b) { return a < b ? a : b; }
__SE_MATH int max(int a, int b) { return a > b ? a : b; }
__SE_MATH unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
__SE_MATH unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
__SE_MATH long long min(long long a, long long b) { return a < b ? a : b; }
__SE_MATH long long max(long long a, long long b) { return a > b ? a : b; }
__SE_MATH unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
__SE_MATH unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
__SE_MATH float min(float a, float b) { return fminf(a, b); }
__SE_MATH float max(float a, float b) { return fmaxf(a, b); }
__SE_MATH double min(double a, double b) { return fmin(a, b); }
__SE_MATH double max(double a, double b) { return fmax(a, b); }
#undef __SE_MATH
