// Forging path closed: building a pointer argument by hand. `PackedArg` is an opaque struct
// (read through `view()`/`kind()`), not an enum whose `Pointer` variant user code can fill in
// with any address, length and owner.
use streamexec::interface::{PackedArg, ParamKind};
use streamexec::*;

fn whole_buffer(mem: &DeviceMemory<f32>) -> PackedArg {
    PackedArg::Pointer {
        addr: mem.address(),
        bytes: 1 << 30,
        owner: mem.executor().id(),
        kind: ParamKind::Pointer { elem_size: 4, type_name: "f32" },
    }
}

fn main() {}
