//! Block barriers (`bar.sync`, `bar.arrive`, `bar.red`) on the interpreter, and the lane
//! functions of `match.sync` and `redux.sync` (`collective.rs` says when they apply).
//!
//! A barrier completes the moment its thread count has arrived: its generation moves on, its
//! arrival count starts again from zero, and the result of a `bar.red` is kept for its
//! waiters. The block scheduler releases the lanes that wait at a generation that has passed
//! (`release`), writing the reduction into the destination of a `bar.red`.

use super::warp::{Barriers, BlockShared, Env, Warp, lanes};
use crate::fault::Fault;
use crate::ir::{BarKind, MatchMode, Op, ReduxOp, Src, WARP};

impl Warp {
    /// The lanes of `mask` arrive at barrier `id` (thread count `count`); true when they wait
    /// (`bar.sync`, `bar.red`) rather than go on (`bar.arrive`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn arrive(
        &mut self,
        env: &Env<'_>,
        sh: &mut BlockShared,
        mask: u32,
        pc: u32,
        id: Src,
        count: Option<Src>,
        kind: BarKind,
    ) -> Result<bool, Fault> {
        let first = lanes(mask).next().unwrap_or(0);
        let idv = self.val(env, id, first);
        if idv >= 16 {
            return Err(self.fault(first, format!("barrier id {idv} is not in 0..16")));
        }
        let cnt = count.map_or(0, |c| self.val(env, c, first) as u32);
        let b = idv as usize;
        let bars = &mut sh.bars;
        let n = mask.count_ones();
        bars.arrived[b] += n;
        bars.expected[b] = cnt;
        if let BarKind::Red { c, neg, .. } = kind {
            let popc = lanes(mask)
                .filter(|&l| (self.val(env, c, l) != 0) != neg)
                .count() as u32;
            bars.red[b].0 += popc;
            bars.red[b].1 += n;
        }
        let want = match cnt {
            0 => env.l.block.count().min(u32::MAX as u64) as u32,
            c => c,
        };
        let waits = kind != BarKind::Arrive;
        if waits {
            for l in lanes(mask) {
                self.pc[l] = pc + 1;
                self.bar_id[l] = b as u8;
                self.bar_gen[l] = bars.generation[b];
            }
            self.at_bar |= mask;
        }
        if bars.arrived[b] >= want {
            bars.generation[b] = bars.generation[b].wrapping_add(1);
            bars.result[b] = std::mem::take(&mut bars.red[b]);
            bars.arrived[b] = 0;
        }
        Ok(waits)
    }

    /// Releases the lanes waiting at a barrier generation that has completed; true if any.
    pub(crate) fn release(&mut self, env: &Env<'_>, bars: &Barriers) -> bool {
        let mut done = 0u32;
        for l in lanes(self.at_bar) {
            let b = self.bar_id[l] as usize;
            if self.bar_gen[l] == bars.generation[b] {
                continue;
            }
            done |= 1 << l;
            let at = self.pc[l].wrapping_sub(1) as usize;
            if let Some(Op::Bar {
                kind: BarKind::Red { op, d, .. },
                ..
            }) = env.code.get(at).map(|i| &i.op)
            {
                let (popc, n) = bars.result[b];
                self.set(*d, l, op.result(popc, n));
            }
        }
        self.at_bar &= !done;
        done != 0
    }
}

/// `redux.sync`'s result for a lane of `group` with `members`, over the low 32 bits of `vals`.
pub(crate) fn redux_result(op: ReduxOp, vals: &[u64; WARP], members: u32, group: u32) -> u64 {
    op.fold(lanes(members & group).map(|k| vals[k] as u32)) as u64
}

/// `match.sync`'s `(d, p)` for lane `lane` of `group` with `members`, comparing `vals` (all 64
/// bits if `wide`, else the low 32).
pub(crate) fn match_result(
    mode: MatchMode,
    wide: bool,
    vals: &[u64; WARP],
    members: u32,
    group: u32,
    lane: usize,
) -> (u64, u64) {
    let active = members & group;
    let v = |k: usize| if wide { vals[k] } else { vals[k] as u32 as u64 };
    match mode {
        MatchMode::Any => {
            let mine = v(lane);
            let same = lanes(active)
                .filter(|&k| v(k) == mine)
                .fold(0u32, |m, k| m | 1 << k);
            (same as u64, 0)
        }
        MatchMode::All => {
            let first = lanes(active).next().map(v);
            if lanes(active).all(|k| Some(v(k)) == first) {
                (active as u64, 1)
            } else {
                (0, 0)
            }
        }
    }
}
