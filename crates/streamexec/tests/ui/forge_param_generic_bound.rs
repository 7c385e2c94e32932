// Forging path closed: calling the sealed supertrait's `unpack` through a generic
// `P: KernelParam` bound, which reaches supertrait methods without naming the trait. Here it
// would retype the `DevicePtr<u8>` one byte into a buffer as a misaligned `DevicePtr<f32>`, a
// pointer no `DeviceMemory<f32>` handed out. `unpack` takes a token that user code can neither
// name nor make.
use streamexec::interface::PackedArg;
use streamexec::*;

fn retype<P: KernelParam>(arg: &PackedArg) -> Option<P> {
    P::unpack(arg)
}

fn retype_with_token<P: KernelParam>(arg: &PackedArg) -> Option<P> {
    P::unpack(arg, streamexec::types::args::sealed::Token(()))
}

fn misaligned(bytes: &DeviceMemory<u8>) -> Option<DevicePtr<f32>> {
    retype(&ArgList::new().arg(bytes.ptr().offset(1)?).as_slice()[0])
}

fn main() {}
