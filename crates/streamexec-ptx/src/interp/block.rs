//! One block on the interpreter: its warps run on one host thread, each until it cannot go
//! on; barriers release when every thread they wait for has arrived.

use super::race::RaceBlock;
use super::warp::{BlockShared, Env, Warp, lanes};
use crate::dim::Dim3;
use crate::fault::{divergence, fault_detail, race_detail};
use crate::ir::WARP;
use crate::launch::Launch;

/// Runs block `b` (linear index) to completion.
pub(crate) fn run_block(l: &Launch, b: u64) -> Result<(), String> {
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
        bars: Default::default(),
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
        for w in warps.iter_mut() {
            released |= w.release(&env, &sh.bars);
        }
        if !released && l.race.is_none() && complete_with_exited(&mut sh.bars, warps, nthreads) {
            for w in warps.iter_mut() {
                released |= w.release(&env, &sh.bars);
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
    crate::launch::WARP_INSTRUCTIONS.fetch_add(steps, std::sync::atomic::Ordering::Relaxed);
    if let (Some(grid), Some(rb)) = (&l.race, &sh.race)
        && let Some(r) = grid.finish_block(b, rb)
    {
        return Err(race_detail(l, block_idx, &r));
    }
    Ok(())
}

/// With every thread waiting at a barrier or exited: completes each whole-block barrier whose
/// waiters and the exited threads make up the block, as the hardware does (exited threads
/// count as arrived: `if (i >= n) return; ... __syncthreads();`). True if one completed. The
/// race checker (a checker mode) reports such a barrier as divergence instead.
fn complete_with_exited(bars: &mut super::warp::Barriers, warps: &[Warp], nthreads: u32) -> bool {
    let gone: u32 = warps.iter().map(|w| (w.exited & w.live).count_ones()).sum();
    if gone == 0 {
        return false;
    }
    let mut any = false;
    for b in 0..bars.arrived.len() {
        if bars.arrived[b] > 0 && bars.expected[b] == 0 && bars.arrived[b] + gone >= nthreads {
            bars.generation[b] = bars.generation[b].wrapping_add(1);
            bars.result[b] = std::mem::take(&mut bars.red[b]);
            bars.arrived[b] = 0;
            any = true;
        }
    }
    any
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
