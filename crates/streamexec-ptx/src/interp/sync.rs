//! Block barriers (`bar.sync`, `bar.arrive`, `bar.red`) and `match.sync` on the interpreter.
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

    /// `match.{any,all}.sync`: the lanes of `mask` and of the member mask compare `a`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn match_sync(
        &mut self,
        env: &Env<'_>,
        mask: u32,
        mode: MatchMode,
        d: u32,
        p: Option<u32>,
        a: Src,
        members: Src,
        wide: bool,
    ) {
        let active = self.active(env, mask, members);
        let mut vals = [0u64; WARP];
        for l in lanes(active) {
            let v = self.val(env, a, l);
            vals[l] = if wide { v } else { v as u32 as u64 };
        }
        let out = match_result(mode, &vals, active);
        for l in lanes(mask) {
            let (dv, pv) = out[l];
            self.set(d, l, dv);
            if let Some(p) = p {
                self.set(p, l, pv);
            }
        }
    }
}

impl Warp {
    /// The lanes of `mask` that the member mask (read in the first of them) names.
    fn active(&self, env: &Env<'_>, mask: u32, members: Src) -> u32 {
        lanes(mask)
            .next()
            .map_or(0, |first| mask & self.val(env, members, first) as u32)
    }

    /// `redux.sync`: the lanes of `mask` and of the member mask reduce `a`.
    pub(super) fn redux(
        &mut self,
        env: &Env<'_>,
        mask: u32,
        op: ReduxOp,
        d: u32,
        a: Src,
        members: Src,
    ) {
        let active = self.active(env, mask, members);
        let r = op.fold(lanes(active).map(|l| self.val(env, a, l) as u32)) as u64;
        for l in lanes(mask) {
            self.set(d, l, r);
        }
    }
}

/// `match.sync`'s result per lane (`d`, and `p` of `.all`) over the `active` lanes' values.
pub(crate) fn match_result(mode: MatchMode, vals: &[u64; WARP], active: u32) -> [(u64, u64); WARP] {
    let mut out = [(0u64, 0u64); WARP];
    match mode {
        MatchMode::Any => {
            for l in lanes(active) {
                let same = lanes(active)
                    .filter(|&k| vals[k] == vals[l])
                    .fold(0u32, |m, k| m | 1 << k);
                out[l] = (same as u64, 0);
            }
        }
        MatchMode::All => {
            let first = lanes(active).next().unwrap_or(0);
            let all = lanes(active).all(|k| vals[k] == vals[first]);
            let r = if all { active as u64 } else { 0 };
            for l in lanes(active) {
                out[l] = (r, all as u64);
            }
        }
    }
    out
}
