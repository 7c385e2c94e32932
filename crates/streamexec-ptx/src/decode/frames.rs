//! Recursion: which functions can re-enter themselves, and what a call made from one saves.
//!
//! Registers and call parameters have one fixed slot per thread, which serves every
//! activation of a function that is active once at a time. A function on a cycle of the call
//! graph can be active several times, so each call it makes saves the function's frame (its
//! registers, its parameter and return slots and the `.param` variables it declares) and its
//! return restores it, on the interpreter. Local memory is not copied: its addresses may be
//! passed to the callee (numba returns values through a pointer into the caller's frame), so
//! each activation gets local memory of its own at a frame base one `local_bytes` further per
//! call depth, which the addresses of `.local` variables include (`Sreg::LocalAddr`). The JIT
//! inlines calls and leaves such programs to the interpreter.

use std::collections::{HashMap, HashSet};

use super::ProgramBuilder;
use crate::ir::Frame;

impl ProgramBuilder<'_> {
    /// The frame of function `name`, whose body was decoded from the register and
    /// call-parameter cursors `before` up to the current ones.
    pub(super) fn frame_of(&self, name: &str, before: (u32, u64)) -> Frame {
        let mut tparam = vec![(before.1 as u32, self.tparam as u32)];
        if let Some(info) = self.funcs.get(name) {
            for (off, size) in info.params.iter().chain(&info.rets) {
                tparam.push((*off as u32, *off as u32 + size));
            }
        }
        tparam.retain(|(a, b)| a < b);
        Frame {
            regs: (before.0, self.regs),
            tparam,
        }
    }

    /// The functions that can call themselves, directly or through others.
    pub(super) fn recursive(&self) -> HashSet<String> {
        let mut callees: HashMap<&str, Vec<&str>> = HashMap::new();
        for (a, b) in &self.edges {
            callees.entry(a.as_str()).or_default().push(b.as_str());
        }
        let mut out = HashSet::new();
        for &f in callees.keys() {
            // Depth-first from f's callees: does any path lead back to f?
            let mut seen = HashSet::new();
            let mut stack: Vec<&str> = callees[f].clone();
            while let Some(g) = stack.pop() {
                if g == f {
                    out.insert(f.to_string());
                    break;
                }
                if seen.insert(g) {
                    stack.extend(callees.get(g).into_iter().flatten().copied());
                }
            }
        }
        out
    }
}
