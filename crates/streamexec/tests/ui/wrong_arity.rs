// Three arguments to a kernel of two parameters must not compile.
use streamexec::*;

fn launch(stream: &mut Stream, kernel: &TypedKernel<(f32, DevicePtr<f32>)>, out: &DeviceMemory<f32>) {
    stream.then_launch(ThreadDim::default(), BlockDim::default(), kernel, (42.5, out.ptr(), 7u32));
}

fn main() {}
