// OpenCL C kernels for examples/run_kernel.rs and its tests (tests/examples.rs).

// c[i] = a[i] + b[i] for i < n, one kernel per element type.
__kernel void vadd_i32(__global const int* a, __global const int* b, __global int* c, int n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
__kernel void vadd_u32(__global const uint* a, __global const uint* b, __global uint* c, int n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
__kernel void vadd_i64(__global const long* a, __global const long* b, __global long* c, int n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
__kernel void vadd_u64(__global const ulong* a, __global const ulong* b, __global ulong* c, int n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
__kernel void vadd_f32(__global const float* a, __global const float* b, __global float* c, int n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
__kernel void vadd_f64(__global const double* a, __global const double* b, __global double* c,
                       int n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}

// One scalar of every type, each stored (plus the work-item index) in its own buffer.
__kernel void scalars(__global int* oi, __global uint* ou, __global long* ol, __global ulong* oul,
                      __global float* of, __global double* od, int a, uint b, long c, ulong d,
                      float e, double f) {
    size_t i = get_global_id(0);
    oi[i] = a + (int)i;
    ou[i] = b + (uint)i;
    ol[i] = c + (long)i;
    oul[i] = d + (ulong)i;
    of[i] = e + (float)i;
    od[i] = f + (double)i;
}

// Reverses each work-group's slice of a[0..n) through __local memory (--shared-bytes).
__kernel void reverse_groups(__global int* a, int n, __local int* tmp) {
    size_t l = get_local_id(0), g = get_global_id(0), size = get_local_size(0);
    size_t base = g - l;
    if (g < n) tmp[l] = a[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    size_t src = size - 1 - l;
    if (g < n && base + src < n) a[g] = tmp[src];
}
