//! The text of a launch's failure: a fault naming block, thread, kernel and PTX line, a data
//! race naming both accesses, barrier divergence. Both engines report through here, so a
//! kernel fails with the same words on either.

use crate::dim::Dim3;
use crate::interp::race::{Access, Race};
use crate::launch::Launch;

/// A lane's fault: the instruction index, the thread (linear index in the block), the cause.
#[derive(Debug)]
pub(crate) struct Fault {
    pub(crate) pc: u32,
    pub(crate) lane: u32,
    pub(crate) msg: String,
}

fn thread(l: &Launch, tid: u32) -> Dim3 {
    l.block.unlinear(tid as u64)
}

fn where_(l: &Launch, pc: u32) -> String {
    match l.prog.source.get(pc as usize) {
        Some((line, text)) => format!("line {line} `{text}`"),
        None => format!("instruction {pc}"),
    }
}

pub(crate) fn fault_detail(l: &Launch, block: Dim3, f: &Fault) -> String {
    format!(
        "block {block} thread {} (kernel `{}`, {}): {}",
        thread(l, f.lane),
        l.kernel,
        where_(l, f.pc),
        f.msg
    )
}

fn kind(a: &Access) -> &'static str {
    match (a.atomic, a.write) {
        (true, _) => "atomic",
        (false, true) => "write",
        (false, false) => "read",
    }
}

pub(crate) fn race_detail(l: &Launch, block: Dim3, r: &Race) -> String {
    let first_block = r.other_block.map_or(block, |b| l.grid.unlinear(b));
    format!(
        "data race on {} memory at {:#x} in kernel `{}`: block {first_block} thread {} {} at {} \
         and block {block} thread {} {} at {} are not ordered by a barrier",
        r.space,
        r.addr,
        l.kernel,
        thread(l, r.first.tid),
        kind(&r.first),
        where_(l, r.first.pc),
        thread(l, r.second.tid),
        kind(&r.second),
        where_(l, r.second.pc),
    )
}

/// The barrier-divergence error: `waiting` threads wait (`waiter`: one of them and its barrier
/// instruction), none can be released; `exited`: a thread that exited, if any.
pub(crate) fn divergence(
    l: &Launch,
    block: Dim3,
    waiting: u32,
    (t, pc): (u32, u32),
    exited: Option<u32>,
    nthreads: u32,
) -> String {
    let why = match exited {
        Some(e) => format!("thread {} exited without reaching it", thread(l, e)),
        None => "the other threads wait at a different barrier".into(),
    };
    format!(
        "barrier divergence in block {block} of kernel `{}`: {waiting} of {nthreads} threads wait \
         at a barrier (e.g. thread {} at {}), but {why}; every thread of a block must reach \
         every barrier",
        l.kernel,
        thread(l, t),
        where_(l, pc)
    )
}
