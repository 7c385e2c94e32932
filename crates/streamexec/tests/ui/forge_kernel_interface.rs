// Forging path closed: reaching the backend kernel object behind a `Kernel` (to hand it to a
// backend stream with arguments no check has seen). `Kernel::interface()` no longer exists.
use streamexec::*;

fn backend_name(kernel: &Kernel) -> String {
    kernel.interface().name().to_string()
}

fn main() {}
