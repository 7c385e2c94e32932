// StreamExecutor's seed kernel in OpenCL C, under the same name as the CUDA one: one generated
// module carries both formats.
__kernel void add_mystery_value(float x, __global float *out) {
    *out = x + 123.0f;
}

// The other kernels of kernels/*.cu in OpenCL C, named as their generated modules: OpenCL has
// no templates, so scale<float> is scale_float here. A `bool` cannot be an OpenCL kernel
// argument; `uchar` has the same Rust type in the argument tuple.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

typedef struct {
    float scale;
    double offset;
    int bias;
} Affine;

__kernel void affine(Affine p, uchar use_bias, __global const float *in, __global double *out,
                     uint n, __local float *staging) {
    uint i = get_global_id(0);
    if (i < n) {
        staging[get_local_id(0)] = in[i];
        out[i] = (double)p.scale * staging[get_local_id(0)] + p.offset + (use_bias ? p.bias : 0);
    }
}

__kernel void scale_float(__global float *v, float factor, int n) {
    int i = get_global_id(0);
    if (i < n) {
        v[i] *= factor;
    }
}

__kernel void scale_double(__global double *v, double factor, int n) {
    int i = get_global_id(0);
    if (i < n) {
        v[i] *= factor;
    }
}
