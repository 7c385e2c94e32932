//! The PTX front end (parser and decoder) and the JIT on arbitrary text: every input must give
//! `Ok` or `Err`, never a panic, a hang or unbounded recursion.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(module) = streamexec_ptx::parse_module(text) {
        // Laying out data and decoding for the host engine must refuse what it cannot run,
        // never panic.
        let _ = streamexec_ptx::check_decodes(&module, 0x1000_0000);
        // What decodes, the PTX JIT compiles or refuses with a reason, never a panic (the
        // compiler catches panics of its own, so look for "internal error" too).
        if let Ok(kernels) = streamexec_ptx::check_jit_compiles(&module, 0x1000_0000) {
            for (name, r) in kernels {
                if let Err(why) = r {
                    assert!(!why.contains("internal error"), "`{name}`: {why}");
                }
            }
        }
        // Printing what was parsed must not panic either.
        for f in &module.functions {
            for s in f.body.iter().flatten() {
                if let streamexec_ptx::ast::Statement::Inst(i) = s {
                    let _ = i.to_string();
                }
            }
        }
    }
    let _ = streamexec_ptx::parse_entries(text);
});
