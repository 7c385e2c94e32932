// A pointer to u32 where the kernel takes a pointer to f32 must not compile.
use streamexec::*;

fn launch(stream: &mut Stream, kernel: &TypedKernel<(f32, DevicePtr<f32>)>, out: &DeviceMemory<u32>) {
    stream.then_launch(ThreadDim::default(), BlockDim::default(), kernel, (42.5, out.ptr()));
}

fn main() {}
