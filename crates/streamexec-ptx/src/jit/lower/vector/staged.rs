//! Warp collectives resolved inside the vector function, without a return to the block
//! driver: `shfl.sync` with immediate offset and clamp, `vote.sync`, `redux.sync`, and
//! `activemask`, each with the whole warp as its member mask (`run::staged`).
//!
//! The driver runs a kernel with warp collectives one warp per call of the vector function.
//! A group that reaches such a collective suspends as for any (live registers stored, state
//! `WAIT | GROUP | point`), but stores its `a` lanes in the warp's stage, lane-indexed,
//! instead of the operand rows. The warp's last group then looks at the 32 state words: when
//! all wait in this same group suspension, every lane has arrived with the full mask, so the
//! result is fixed. For a vote it computes the ballot once, for a reduction its result, into
//! the stage. It swaps the stage buffers and restarts the group loop at the warp's first
//! group with the point in `VLower::restart`: each group of that pass resumes there directly
//! (as a whole group, its state word unread and rewritten at its next stop) and takes its
//! result from the stage: a shuffle's with vector loads (one for `up`/`down` over the whole
//! warp), the source and predicate `shfl_source` gives with the warp arrived; a vote's from
//! the ballot (`vote_result` with every lane active), a reduction's from its result;
//! `activemask` is the whole warp. Anything else (a partial warp, lanes elsewhere or on the
//! scalar code) falls back to the driver, which first writes the waiting groups' rows from the
//! stage (`run::unstage`).
//!
//! Two stage buffers alternate (`Ctx::stage_write`, `stage_read`, swapped at each
//! resolution): groups that resumed first run on to the warp's next collective and write its
//! operands while later groups still read the previous one's.

use super::*;
use crate::ir::{ReduxOp, ShflMode, VoteMode};

/// A warp collective the vector code resolves itself.
#[derive(Clone, Copy)]
pub(super) enum Staged {
    /// `shfl.sync` with the immediate `b & 31`, and `c`'s clamp (bits 0..5) and segment
    /// mask (bits 8..13).
    Shfl {
        mode: ShflMode,
        b: i32,
        clamp: i32,
        seg: i32,
    },
    Vote {
        mode: VoteMode,
        neg: bool,
    },
    Redux(ReduxOp),
    Activemask,
}

impl Staged {
    /// The collective at `op` when `run::staged` says the vector code resolves it.
    pub(super) fn of(op: &Op) -> Option<Staged> {
        if !run::staged(op) {
            return None;
        }
        match op {
            Op::Shfl {
                mode,
                b: Src::Imm(b),
                c: Src::Imm(c),
                ..
            } => Some(Staged::Shfl {
                mode: *mode,
                b: (*b as u32 & 31) as i32,
                clamp: (*c as u32 & 31) as i32,
                seg: ((*c as u32 >> 8) & 31) as i32,
            }),
            Op::Vote { mode, neg, .. } => Some(Staged::Vote {
                mode: *mode,
                neg: *neg,
            }),
            Op::Redux { op, .. } => Some(Staged::Redux(*op)),
            Op::Activemask { .. } => Some(Staged::Activemask),
            _ => None,
        }
    }
}

/// Bytes from a stage buffer's start to lane 0's word.
const LANE0: i64 = 32 * 4;
/// Bytes from a stage buffer's start to the word that holds a vote's ballot or a reduction's
/// result (padding no shuffle load reaches: those end at lane `31 + 31`).
const WHOLE: i32 = 95 * 4;

impl VLower<'_, '_, '_> {
    /// The current group's `a` lanes (`operands[0]`) into the stage buffer the next
    /// collective writes, then (the warp's last group) the check that the whole warp waits
    /// here and, if so, the restart of the warp's groups (`VLower::restart`). `state`: the
    /// state the group just stored. Ends the current block.
    pub(super) fn stage(&mut self, c: Staged, operands: &[VVal], state: u32) {
        let ctx = self.lw.u.ctx;
        let buf = self.b().ins().load(I64, flags(), ctx, off!(stage_write));
        let t = self.use_var(self.lw.t);
        if let Some(a) = operands.first() {
            let x = self.i32x4(*a);
            let lane = self.b().ins().band_imm_s(t, 31);
            let at = self.b().ins().ishl_imm_s(lane, 2);
            let p = self.b().ins().iadd(buf, at);
            self.b()
                .ins()
                .store(vflags().with_notrap(), x, p, LANE0 as i32);
        }
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
        // Every group of the pass this starts resumes here (`VLower::restart`), whatever its
        // state word says; each writes its own again before the pass ends.
        let index = self.b().ins().iconst(I32, (state & !(WAIT | GROUP)) as i64);
        let restart = self.restart.expect("a kernel with warp collectives");
        self.lw.b.def_var(restart, index);
        match c {
            Staged::Vote { neg, .. } => self.ballot(buf, neg),
            Staged::Redux(op) => self.reduce(buf, op),
            _ => {}
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

    /// The warp's staged operands in `buf`: one `i32x4` per group, in lane order.
    fn staged_groups(&mut self, buf: Value) -> Vec<Value> {
        let f = vflags().with_notrap();
        (0..crate::ir::WARP / LANES)
            .map(|k| {
                let at = (LANE0 as usize + k * LANES * 4) as i32;
                self.b().ins().load(I32X4, f, buf, at)
            })
            .collect()
    }

    /// The warp's ballot of the staged predicates in `buf` (complemented with `neg`), into
    /// its ballot word: four lanes' sign bits per group.
    fn ballot(&mut self, buf: Value, neg: bool) {
        let zero = self.b().ins().iconst(I32, 0);
        let zero = self.b().ins().splat(I32X4, zero);
        let cc = if neg { IntCC::Equal } else { IntCC::NotEqual };
        let mut ballot: Option<Value> = None;
        for (k, x) in self.staged_groups(buf).into_iter().enumerate() {
            let m = self.b().ins().icmp(cc, x, zero);
            let bits = self.b().ins().vhigh_bits(I32, m);
            let bits = self.b().ins().ishl_imm_s(bits, (k * LANES) as i64);
            ballot = Some(match ballot {
                Some(b) => self.b().ins().bor(b, bits),
                None => bits,
            });
        }
        let ballot = ballot.expect("a warp has groups");
        self.b().ins().store(flags(), ballot, buf, WHOLE);
    }

    /// The reduction `op` of the warp's staged values in `buf`, into its result word: the
    /// eight groups' vectors lane by lane, then the four lanes (the operations are
    /// associative and commutative on integers, so the order is free).
    fn reduce(&mut self, buf: Value, op: ReduxOp) {
        let apply = |me: &mut Self, x: Value, y: Value| {
            let b = me.b();
            match op {
                ReduxOp::Add => b.ins().iadd(x, y),
                ReduxOp::Min { signed: false } => b.ins().umin(x, y),
                ReduxOp::Min { signed: true } => b.ins().smin(x, y),
                ReduxOp::Max { signed: false } => b.ins().umax(x, y),
                ReduxOp::Max { signed: true } => b.ins().smax(x, y),
                ReduxOp::And => b.ins().band(x, y),
                ReduxOp::Or => b.ins().bor(x, y),
                ReduxOp::Xor => b.ins().bxor(x, y),
            }
        };
        let groups = self.staged_groups(buf);
        let mut acc = groups[0];
        for x in &groups[1..] {
            acc = apply(self, acc, *x);
        }
        let mut r = self.b().ins().extractlane(acc, 0);
        for lane in 1..LANES as u8 {
            let x = self.b().ins().extractlane(acc, lane);
            r = apply(self, r, x);
        }
        self.b().ins().store(flags(), r, buf, WHOLE);
    }

    /// The resumed group's result and predicate (0/1 lanes; zero where there is none).
    pub(super) fn staged_result(&mut self, c: Staged) -> (Value, Value) {
        let k = |me: &mut Self, v: i32| {
            let c = me.b().ins().iconst(I32, v as i64);
            me.b().ins().splat(I32X4, c)
        };
        match c {
            Staged::Shfl {
                mode,
                b,
                clamp,
                seg,
            } => self.shfl_result(mode, b, clamp, seg),
            Staged::Vote { mode, .. } => {
                // `vote_result` with all 32 lanes active.
                let ctx = self.lw.u.ctx;
                let buf = self.b().ins().load(I64, flags(), ctx, off!(stage_read));
                let ballot = self.b().ins().load(I32, flags(), buf, WHOLE);
                let r = match mode {
                    VoteMode::Ballot => ballot,
                    VoteMode::All | VoteMode::Any | VoteMode::Uni => {
                        let all = self.b().ins().icmp_imm_s(IntCC::Equal, ballot, -1);
                        let none = self.b().ins().icmp_imm_s(IntCC::Equal, ballot, 0);
                        let p = match mode {
                            VoteMode::All => all,
                            VoteMode::Any => self.b().ins().icmp_imm_s(IntCC::Equal, none, 0),
                            _ => self.b().ins().bor(all, none),
                        };
                        self.b().ins().uextend(I32, p)
                    }
                };
                let x = self.b().ins().splat(I32X4, r);
                (x, k(self, 0))
            }
            Staged::Redux(_) => {
                let ctx = self.lw.u.ctx;
                let buf = self.b().ins().load(I64, flags(), ctx, off!(stage_read));
                let r = self.b().ins().load(I32, flags(), buf, WHOLE);
                let x = self.b().ins().splat(I32X4, r);
                (x, k(self, 0))
            }
            Staged::Activemask => (k(self, -1), k(self, 0)),
        }
    }

    /// A shuffle's result and predicate, as `shfl_source` gives them with the whole warp
    /// arrived: lane `l` reads lane `j` when `j` passes the clamp test and lies in the warp,
    /// else its own `a`; the predicate is the clamp test.
    fn shfl_result(&mut self, mode: ShflMode, sb: i32, sclamp: i32, sseg: i32) -> (Value, Value) {
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
        let (seg, clamp, b) = (k(self, sseg), k(self, sclamp & !sseg), k(self, sb));
        let low = self.b().ins().band(l, seg);
        let max = self.b().ins().bor(low, clamp);
        let j = match mode {
            ShflMode::Up => self.b().ins().isub(l, b),
            ShflMode::Down => self.b().ins().iadd(l, b),
            ShflMode::Bfly => self.b().ins().bxor(l, b),
            ShflMode::Idx => {
                let hi = k(self, sb & !sseg);
                self.b().ins().bor(low, hi)
            }
        };
        // The clamp test implies `0 <= j < 32` (`shfl_source`'s other condition): `max` lies
        // in 0..32, `up` tests `j >= max` and can only go down from `l`, the other modes test
        // `j <= max` and give no negative `j`.
        let take = match mode {
            ShflMode::Up => self.b().ins().icmp(IntCC::SignedGreaterThanOrEqual, j, max),
            _ => self.b().ins().icmp(IntCC::SignedLessThanOrEqual, j, max),
        };
        let other = match mode {
            // Lanes `l ± b` of the group are consecutive: one load (the padding keeps it
            // inside the buffer).
            ShflMode::Up | ShflMode::Down if sseg == 0 => {
                let d = if mode == ShflMode::Up { -sb } else { sb };
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
