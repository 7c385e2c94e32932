// A generated launcher called without the kernel's second parameter: a compile error.
mod kernels {
    include!("../../../../examples/typed-kernels/kernels/prebuilt/kernels.rs");
}

fn launch(stream: &mut streamexec::Stream) {
    kernels::add_mystery_value::launch(stream, 1, 1, 42.5);
}

fn main() {}
