// A generated launcher given host memory (a slice) where the kernel takes a device pointer: a
// compile error, not a host address handed to the device.
mod kernels {
    include!("../../../../examples/typed-kernels/kernels/prebuilt/kernels.rs");
}

fn launch(stream: &mut streamexec::Stream, host: &[f32]) {
    kernels::add_mystery_value::launch(stream, 1, 1, 42.5, host);
}

fn main() {}
