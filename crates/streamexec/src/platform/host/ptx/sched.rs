//! Block and grid scheduling: a block's warps run on one host thread, each until it cannot
//! go on; barriers release when every thread they wait for has arrived; blocks run in
//! parallel on the executor's rayon pool.

use parking_lot::Mutex;

use super::Launch;
use super::race::{Access, Race, RaceBlock};
use super::warp::Fault;
use super::warp::{BlockShared, Env, Warp, lanes};
use crate::ptx::ir::WARP;
use crate::types::Dim3;

fn thread(l: &Launch, tid: u32) -> Dim3 {
    l.block.unlinear(tid as u64)
}

fn where_(l: &Launch, pc: u32) -> String {
    match l.prog.source.get(pc as usize) {
        Some((line, text)) => format!("line {line} `{text}`"),
        None => format!("instruction {pc}"),
    }
}

pub(super) fn fault_detail(l: &Launch, block: Dim3, f: &Fault) -> String {
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

fn race_detail(l: &Launch, block: Dim3, r: &Race) -> String {
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

/// Runs block `b` (linear index) to completion.
pub(super) fn run_block(l: &Launch, b: u64) -> Result<(), String> {
    let block_idx = l.grid.unlinear(b);
    let prog = &*l.prog;
    let nthreads = l.block.count() as u32;
    let nwarps = nthreads.div_ceil(WARP as u32);
    let static_shared = prog.static_shared_bytes as usize;
    let dynamic_at = static_shared.next_multiple_of(16);
    let mut sh = BlockShared {
        shared: vec![0; dynamic_at + l.dynamic_bytes],
        static_shared,
        dynamic_at,
        dynamic_len: l.dynamic_bytes,
        arrived: [0; 16],
        expected: [0; 16],
        race: l.race.as_ref().map(|_| Box::<RaceBlock>::default()),
    };
    let mut warps: Vec<Warp> = POOL.with(|p| {
        let mut pool = p.take();
        let mut out = Vec::with_capacity(nwarps as usize);
        for w in 0..nwarps {
            out.push(match pool.pop() {
                Some(old) => old.reuse(w, nthreads, prog),
                None => Warp::new(w, nthreads, prog),
            });
        }
        out
    });
    let result = run_warps(l, b, block_idx, &mut sh, &mut warps, nthreads);
    POOL.with(|p| {
        let mut pool = p.take();
        pool.append(&mut warps);
        p.replace(pool);
    });
    result
}

thread_local! {
    /// Finished warps of this worker, reused by its next block.
    static POOL: std::cell::Cell<Vec<Warp>> = const { std::cell::Cell::new(Vec::new()) };
}

fn run_warps(
    l: &Launch,
    b: u64,
    block_idx: Dim3,
    sh: &mut BlockShared,
    warps: &mut [Warp],
    nthreads: u32,
) -> Result<(), String> {
    let prog = &*l.prog;
    let nwarps = warps.len() as u32;
    let env = Env {
        l,
        prog,
        code: &prog.code,
        block_idx,
        nwarps,
    };
    loop {
        for w in warps.iter_mut() {
            if w.runnable() == 0 {
                continue;
            }
            if let Err(f) = w.run(&env, sh) {
                if let Some(r) = sh.race.as_ref().and_then(|r| r.found.as_ref()) {
                    return Err(race_detail(l, block_idx, r));
                }
                return Err(fault_detail(l, block_idx, &f));
            }
        }
        let waiting: u32 = warps.iter().map(|w| w.at_bar.count_ones()).sum();
        if waiting == 0 {
            break;
        }
        let mut released = false;
        for id in 0..16 {
            let want = match sh.expected[id] {
                0 => nthreads,
                n => n,
            };
            if sh.arrived[id] > 0 && sh.arrived[id] >= want {
                for w in warps.iter_mut() {
                    let mut m = 0;
                    for lane in lanes(w.at_bar) {
                        if w.bar_id[lane] as usize == id {
                            m |= 1 << lane;
                        }
                    }
                    w.at_bar &= !m;
                }
                sh.arrived[id] = 0;
                released = true;
            }
        }
        if !released {
            return Err(deadlock(l, block_idx, warps, nthreads));
        }
        if let Some(r) = sh.race.as_mut() {
            r.barrier();
        }
    }
    let steps: u64 = warps.iter().map(|w| w.step).sum();
    super::WARP_INSTRUCTIONS.fetch_add(steps, std::sync::atomic::Ordering::Relaxed);
    if let (Some(grid), Some(rb)) = (&l.race, &sh.race)
        && let Some(r) = grid.finish_block(b, rb)
    {
        return Err(race_detail(l, block_idx, &r));
    }
    Ok(())
}

fn deadlock(l: &Launch, block: Dim3, warps: &[Warp], nthreads: u32) -> String {
    let mut waiter = None;
    let mut exited = None;
    let mut waiting = 0;
    for w in warps {
        for lane in lanes(w.at_bar) {
            waiting += 1;
            waiter.get_or_insert((
                w.id * WARP as u32 + lane as u32,
                w.pc[lane].saturating_sub(1),
            ));
        }
        if let Some(lane) = lanes(w.exited & w.live).next() {
            exited.get_or_insert(w.id * WARP as u32 + lane as u32);
        }
    }
    divergence(
        l,
        block,
        waiting,
        waiter.unwrap_or((0, 0)),
        exited,
        nthreads,
    )
}

/// The barrier-divergence error: `waiting` threads wait (`waiter`: one of them and its barrier
/// instruction), none can be released; `exited`: a thread that exited, if any.
pub(super) fn divergence(
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

/// Runs every block on `pool`; the failure of the lowest-numbered failing block.
pub(super) fn run_grid(pool: &rayon::ThreadPool, l: &Launch) -> Result<(), String> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    // An engine bug must not take the stream worker down: a panic is the block's error.
    let one = |b: u64| {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &l.jit {
            Some(k) => super::jit::run_block(l, k, b),
            None => run_block(l, b),
        }));
        run.unwrap_or_else(|p| {
            Err(format!(
                "internal error of the PTX engine in block {} of `{}`: {}",
                l.grid.unlinear(b),
                l.kernel,
                crate::error::panic_message(p.as_ref())
            ))
        })
    };
    let total = l.grid.count();
    if total == 1 {
        // One block runs here, on the stream's worker: handing it to the pool and waiting
        // costs more than a small block.
        return one(0);
    }
    let failed = AtomicBool::new(false);
    let first: Mutex<Option<(u64, String)>> = Mutex::new(None);
    pool.install(|| {
        (0..total).into_par_iter().for_each(|b| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            if let Err(msg) = one(b) {
                failed.store(true, Ordering::Relaxed);
                let mut first = first.lock();
                if first.as_ref().is_none_or(|(fb, _)| b < *fb) {
                    *first = Some((b, msg));
                }
            }
        })
    });
    match first.into_inner() {
        Some((_, msg)) => Err(msg),
        None => Ok(()),
    }
}
