// Forging path closed: turning a packed argument back into a `DevicePtr` with
// `KernelParam::unpack`, and packing one with `KernelParam::pack`, from user code. Both now
// live on a sealed supertrait that user code cannot name.
use streamexec::interface::PackedArg;
use streamexec::*;

fn repack(list: &ArgList) -> Option<DevicePtr<f32>> {
    <DevicePtr<f32> as KernelParam>::unpack(&list.as_slice()[0])
}

fn pack(ptr: DevicePtr<f32>) -> PackedArg {
    ptr.pack()
}

fn main() {}
