//! `shfl.sync` resolved inside the vector function, without a return to the block driver.
//!
//! The driver runs a kernel with warp collectives one warp per call of the vector function.
//! A group that reaches a `shfl.sync` whose lane offset, clamp and member mask are immediates
//! (the mask the whole warp: `run::staged_shfl`) suspends as for any collective (live
//! registers stored, state `WAIT | GROUP | point`), but stores its `a` lanes in the warp's
//! stage, lane-indexed, instead of the operand rows. The warp's last group then looks at the
//! 32 state words: when all wait in this same group suspension, every lane has arrived with
//! the full mask, so the shuffle's result is fixed. It marks the 32 states `FAST | GROUP |
//! point`, swaps the stage buffers and restarts the group loop at the warp's first group: each
//! group resumes through the dispatch and reads its result from the stage with vector loads
//! (one for `up`/`down` over the whole warp), the source and predicate `shfl_source` gives
//! with the warp arrived. Anything else (a partial warp, lanes elsewhere or on the scalar
//! code) falls back to the driver, which first writes the waiting groups' rows from the stage
//! (`run::unstage`).
//!
//! Two stage buffers alternate (`Ctx::stage_write`, `stage_read`, swapped at each
//! resolution): groups that resumed first run on to the warp's next shuffle and write its
//! operands while later groups still read the previous one's.

use super::*;
use crate::ir::ShflMode;
use crate::jit::run::FAST;

/// A `shfl.sync` the vector code resolves itself: mode and the immediate `b` and `c`.
#[derive(Clone, Copy)]
pub(super) struct FastShfl {
    mode: ShflMode,
    /// The lane offset or index (`b & 31`).
    b: i32,
    /// `c`'s clamp (bits 0..5) and segment mask (bits 8..13).
    clamp: i32,
    seg: i32,
}

impl FastShfl {
    /// The shuffle at `op` when its `b`, `c` and member mask are immediates and the mask
    /// names the whole warp.
    pub(super) fn of(op: &Op) -> Option<FastShfl> {
        let Op::Shfl {
            mode,
            b: Src::Imm(b),
            c: Src::Imm(c),
            ..
        } = op
        else {
            return None;
        };
        run::staged_shfl(op).then_some(FastShfl {
            mode: *mode,
            b: (*b as u32 & 31) as i32,
            clamp: (*c as u32 & 31) as i32,
            seg: ((*c as u32 >> 8) & 31) as i32,
        })
    }
}

/// Bytes from a stage buffer's start to lane 0's word.
const LANE0: i64 = 32 * 4;

impl VLower<'_, '_, '_> {
    /// The current group's `a` lanes into the stage buffer the next shuffle writes, then
    /// (the warp's last group) the check that the whole warp waits here and, if so, the
    /// restart of the warp's groups in `FAST` state. `state`: the state the group just
    /// stored. Ends the current block.
    pub(super) fn shfl_stage(&mut self, a: VVal, state: u32) {
        let x = self.i32x4(a);
        let ctx = self.lw.u.ctx;
        let buf = self.b().ins().load(I64, flags(), ctx, off!(stage_write));
        let t = self.use_var(self.lw.t);
        let lane = self.b().ins().band_imm_s(t, 31);
        let at = self.b().ins().ishl_imm_s(lane, 2);
        let p = self.b().ins().iadd(buf, at);
        self.b()
            .ins()
            .store(vflags().with_notrap(), x, p, LANE0 as i32);
        // The warp's last group of a call that runs exactly one whole warp.
        let (begin, end) = (self.begin, self.end);
        let next = self.lw.next;
        let t4 = self.b().ins().iadd_imm_s(t, LANES as i64);
        let last = self.b().ins().icmp(IntCC::Equal, t4, end);
        let len = self.b().ins().isub(end, begin);
        let whole = self
            .b()
            .ins()
            .icmp_imm_s(IntCC::Equal, len, crate::ir::WARP as i64);
        let both = self.b().ins().band(last, whole);
        let check = self.b().create_block();
        self.b().ins().brif(both, check, &[], next, &[]);
        self.b().switch_to_block(check);
        let f = vflags().with_notrap();
        let states = self.lw.u.get(self.lw.b, off!(state));
        let at = self.b().ins().ishl_imm_s(begin, 2);
        let sp = self.b().ins().iadd(states, at);
        let want = self.b().ins().iconst(I32, state as i64);
        let want = self.b().ins().splat(I32X4, want);
        let mut all: Option<Value> = None;
        for k in 0..crate::ir::WARP / LANES {
            let s = self.b().ins().load(I32X4, f, sp, (k * LANES * 4) as i32);
            let e = self.b().ins().icmp(IntCC::Equal, s, want);
            all = Some(match all {
                Some(x) => self.b().ins().band(x, e),
                None => e,
            });
        }
        let all = all.expect("a warp has groups");
        let ok = self.b().ins().vall_true(all);
        let go = self.b().create_block();
        self.b().ins().brif(ok, go, &[], next, &[]);
        self.b().switch_to_block(go);
        let resumed = self.b().ins().iconst(I32, ((state & !WAIT) | FAST) as i64);
        let resumed = self.b().ins().splat(I32X4, resumed);
        for k in 0..crate::ir::WARP / LANES {
            self.b().ins().store(f, resumed, sp, (k * LANES * 4) as i32);
        }
        let read = self.b().ins().load(I64, flags(), ctx, off!(stage_read));
        self.b().ins().store(flags(), buf, ctx, off!(stage_read));
        self.b().ins().store(flags(), read, ctx, off!(stage_write));
        // Back to the warp's first group, whose coordinates the entry computed.
        self.lw.b.def_var(self.lw.t, begin);
        for (v, x) in self.lw.tid.into_iter().zip(self.tid0) {
            self.lw.b.def_var(v, x);
        }
        let body = self.body;
        self.b().ins().jump(body, &[]);
    }

    /// The resumed group's shuffle result and predicate (0/1 lanes), as `shfl_source` gives
    /// them with the whole warp arrived: lane `l` reads lane `j` when `j` passes the clamp
    /// test and lies in the warp, else its own `a`; the predicate is the clamp test.
    pub(super) fn shfl_result(&mut self, s: FastShfl) -> (Value, Value) {
        let ctx = self.lw.u.ctx;
        let buf = self.b().ins().load(I64, flags(), ctx, off!(stage_read));
        let t = self.use_var(self.lw.t);
        let lane0 = self.b().ins().band_imm_s(t, 31);
        let at = self.b().ins().ishl_imm_s(lane0, 2);
        let p = self.b().ins().iadd(buf, at);
        let f = vflags().with_notrap();
        let own = self.b().ins().load(I32X4, f, p, LANE0 as i32);
        let l = self.plus_iota(lane0);
        let k = |me: &mut Self, v: i32| {
            let c = me.b().ins().iconst(I32, v as i64);
            me.b().ins().splat(I32X4, c)
        };
        let (seg, clamp, b) = (k(self, s.seg), k(self, s.clamp & !s.seg), k(self, s.b));
        let low = self.b().ins().band(l, seg);
        let max = self.b().ins().bor(low, clamp);
        let j = match s.mode {
            ShflMode::Up => self.b().ins().isub(l, b),
            ShflMode::Down => self.b().ins().iadd(l, b),
            ShflMode::Bfly => self.b().ins().bxor(l, b),
            ShflMode::Idx => {
                let hi = k(self, s.b & !s.seg);
                self.b().ins().bor(low, hi)
            }
        };
        // The clamp test implies `0 <= j < 32` (`shfl_source`'s other condition): `max` lies
        // in 0..32, `up` tests `j >= max` and can only go down from `l`, the other modes test
        // `j <= max` and give no negative `j`.
        let take = match s.mode {
            ShflMode::Up => self.b().ins().icmp(IntCC::SignedGreaterThanOrEqual, j, max),
            _ => self.b().ins().icmp(IntCC::SignedLessThanOrEqual, j, max),
        };
        let other = match s.mode {
            // Lanes `l ± b` of the group are consecutive: one load (the padding keeps it
            // inside the buffer).
            ShflMode::Up | ShflMode::Down if s.seg == 0 => {
                let d = if s.mode == ShflMode::Up { -s.b } else { s.b };
                self.b()
                    .ins()
                    .load(I32X4, f, p, (LANE0 + 4 * d as i64) as i32)
            }
            _ => {
                // Any other source pattern: one load per lane, from the source lane when
                // taken (else the lane's own word, which the select discards).
                let src = self.b().ins().bitselect(take, j, l);
                let mut v = own;
                for lane in 0..LANES as u8 {
                    let x = self.b().ins().extractlane(src, lane);
                    let x = self.b().ins().sextend(I64, x);
                    let x = self.b().ins().ishl_imm_s(x, 2);
                    let q = self.b().ins().iadd(buf, x);
                    let w = self.b().ins().load(I32, flags(), q, LANE0 as i32);
                    v = self.b().ins().insertlane(v, w, lane);
                }
                v
            }
        };
        let x = self.b().ins().bitselect(take, other, own);
        let one = k(self, 1);
        let pred = self.b().ins().band(take, one);
        (x, pred)
    }
}
