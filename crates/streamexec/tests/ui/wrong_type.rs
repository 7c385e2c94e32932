// A u32 where the kernel takes a device pointer must not compile.
use streamexec::*;

fn launch(stream: &mut Stream, kernel: &TypedKernel<(f32, DevicePtr<f32>)>) {
    stream.then_launch(ThreadDim::default(), BlockDim::default(), kernel, (42.5, 7u32));
}

fn main() {}
