// Parameter lists of every shape the PTX signature check must read: scalars of each width,
// floats, pointers, structs passed by value (PTX `.align N .b8 name[size]`), C++ mangling.
#include "prelude.h"

struct Pair { double a; int b; };            // 16 bytes, align 8
struct Rgb { unsigned char r, g, b; };       // 3 bytes, align 1
struct alignas(16) Quad { float v[4]; };     // 16 bytes, align 16

extern "C" __global__ void widths(char a, short b, int c, long long d, unsigned char e,
                                  unsigned short f, unsigned g, unsigned long long h, int* out) {
    out[0] = a + b + c + (int)d + e + f + (int)g + (int)h;
}

extern "C" __global__ void floats(float a, double b, float* out) { out[0] = a + (float)b; }

extern "C" __global__ void structs(Pair p, Rgb c, Quad q, double* out) {
    out[0] = p.a + p.b + c.r + c.g + c.b + q.v[0] + q.v[3];
}

extern "C" __global__ void no_params() {}

__global__ void mangled(int* out, int v) { out[0] = v; }
