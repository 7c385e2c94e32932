// Forging path closed: pushing a ready-made `PackedArg` into a run-time argument list.
// `ArgList::packed` is gone; `ArgList::arg` packs a `KernelParam` itself.
use streamexec::*;

fn replay(recorded: &ArgList) -> ArgList {
    let mut list = ArgList::new();
    for a in recorded.as_slice() {
        list = list.packed(a.clone());
    }
    list
}

fn main() {}
