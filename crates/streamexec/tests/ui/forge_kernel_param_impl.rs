// Forging path closed: implementing `KernelParam` for a user type that claims to be a device
// pointer (`kind()` says `Pointer`) while carrying any number. `KernelParam` is sealed: its
// supertrait, which packs the argument, is private to the crate.
use streamexec::interface::ParamKind;
use streamexec::*;

#[derive(Clone, Copy)]
struct RawPtr {
    addr: u64,
}

impl KernelParam for RawPtr {
    fn kind() -> ParamKind {
        ParamKind::Pointer { elem_size: 4, type_name: "f32" }
    }
}

fn main() {
    let _ = ArgList::new().arg(RawPtr { addr: 0x1000 });
}
