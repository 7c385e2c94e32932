// Forging path closed: making a `DeviceAddress` from a number. Its field is private (the
// constructor is crate-private), so safe code cannot name an address no allocator returned.
use streamexec::*;

fn is_at_base(mem: &DeviceMemory<f32>) -> bool {
    mem.address() == DeviceAddress(0x1000)
}

fn main() {}
