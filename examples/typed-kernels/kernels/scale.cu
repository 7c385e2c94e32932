// A template kernel: v[i] *= factor. build.rs asks for scale<float> and scale<double>.
template <typename T>
__global__ void scale(T *v, T factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        v[i] *= factor;
    }
}
