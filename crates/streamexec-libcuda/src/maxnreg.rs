//! `CU_JIT_MAX_REGISTERS`: a register limit asked for when PTX is loaded or linked becomes a
//! `.maxnreg` directive on every `.entry` of the text, which is where PTX carries it, so that
//! `cuFuncGetAttribute(CU_FUNC_ATTRIBUTE_NUM_REGS)` reports at most that (the engine has no
//! registers to limit).

use std::ffi::{c_uint, c_void};

use cudarc::driver::sys::CUjit_option;

/// `CU_JIT_MAX_REGISTERS`.
const MAX_REGISTERS: u32 = 0;

/// The `CU_JIT_MAX_REGISTERS` value among `n` JIT options, if any (0: none).
///
/// # Safety
/// `options`/`values` are null or hold `n` entries.
pub(crate) unsafe fn max_registers(
    n: c_uint,
    options: *const CUjit_option,
    values: *const *mut c_void,
) -> Option<u32> {
    if n == 0 || options.is_null() || values.is_null() {
        return None;
    }
    // SAFETY: `n` entries each (the caller's contract); options read as integers, so a value
    // outside the enum is not undefined behaviour.
    let (opts, vals) = unsafe {
        (
            std::slice::from_raw_parts(options.cast::<u32>(), n as usize),
            std::slice::from_raw_parts(values, n as usize),
        )
    };
    // The value is an unsigned int stored in the pointer-sized slot.
    opts.iter()
        .zip(vals)
        .filter(|(o, _)| **o == MAX_REGISTERS)
        .map(|(_, v)| *v as usize as u32)
        .rfind(|&v| v != 0)
}

/// `text` with `.maxnreg n` before the body of every `.entry` (after its parameter list and
/// other directives). Comments and strings are not looked into: PTX has no strings, and a
/// brace or parenthesis in a comment between `.entry` and its body is not written by any
/// compiler.
pub(crate) fn with_maxnreg(text: &str, n: u32) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some(at) = rest.find(".entry") {
        let (head, tail) = rest.split_at(at);
        out.push_str(head);
        // The parameter list's closing parenthesis, then the body's brace.
        let body = tail
            .find('(')
            .and_then(|open| tail[open..].find(')').map(|c| open + c))
            .and_then(|close| tail[close..].find('{').map(|b| close + b));
        match body {
            Some(b) => {
                out.push_str(&tail[..b]);
                out.push_str(&format!(".maxnreg {n}\n"));
                rest = &tail[b..];
            }
            None => {
                out.push_str(tail);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_gets_the_directive_before_its_body() {
        let text = ".version 7.0\n.target sm_70\n.address_size 64\n\
                    .func f(.param .b32 a)\n{\n\tret;\n}\n\
                    .visible .entry k(\n\t.param .u64 p\n)\n.maxntid 64, 1, 1\n{\n\tret;\n}\n\
                    .visible .entry e()\n{\n\tret;\n}\n";
        let out = with_maxnreg(text, 38);
        assert_eq!(out.matches(".maxnreg 38\n{").count(), 2, "{out}");
        let m = streamexec::ptx::parse_module(&out).unwrap();
        for f in m.functions.iter().filter(|f| f.is_entry) {
            assert!(
                f.directives
                    .iter()
                    .any(|(d, v)| d == ".maxnreg" && v == &[38]),
                "{}: {:?}",
                f.name,
                f.directives
            );
        }
        let a = streamexec::ptx::kernel_attributes(&out, "k").unwrap();
        assert_eq!(a.registers, 1);
    }
}
