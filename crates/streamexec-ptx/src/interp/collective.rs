//! Warp collectives (`shfl.sync`, `vote.sync`, `match.sync`, `redux.sync`, `activemask`,
//! `bar.warp.sync`): when the lanes waiting at one resolve, over which lanes its result is
//! computed, and what a lane gets where PTX leaves the result undefined. Both engines follow
//! these rules: the interpreter here, the JIT's block driver (`jit/run.rs`, `warp_points`)
//! through [`Waiters`] and the lane functions (`shfl_source` and `vote_result` in `warp.rs`,
//! `match_result` and `redux_result` in `sync.rs`), so the two agree bit for bit.
//!
//! # The rules
//!
//! PTX (sm_70 and later) says a `.sync` collective makes the executing thread wait until every
//! non-exited thread of its `membermask` has executed a corresponding instruction with the same
//! mask, and computes its result over the member threads. The engines implement that as:
//!
//! - **Arrival.** A lane that executes a collective (guard true) stops there. The lanes stopped
//!   at one instruction form its *group*. A lane's *members* are the lanes its member mask
//!   (read in that lane) names, less those that exited or do not exist: a full mask in the last
//!   warp of a 37-thread block names 27 lanes that never run. `activemask` has no member mask.
//! - **Resolution.** A warp runs its lanes until none can run: each has exited, waits at a block
//!   barrier or waits at a collective. That is the state in which the JIT's driver sees a warp
//!   after it ran the warp's threads one after another, so the interpreter resolves in the same
//!   state, and both then resolve one group ([`Waiters::pick`]): the lowest-PC *complete* one
//!   (every member of each of its lanes waits in it), else the lowest-PC group with the lanes
//!   that arrived. The lanes of that group go on and the warp runs again. An incomplete group
//!   resolves only when every other lane is stuck: its missing members wait at a block barrier
//!   (which on the hardware needs these lanes: a deadlock) or at another collective (the
//!   hardware lets such lanes pass, each instruction with the lanes that executed it). Going on
//!   with the arrived lanes is defined and cannot hang; the JIT's driver has no way to report a
//!   fault from there, so the interpreter does the same. Only `bar.warp.sync`, which the JIT
//!   does not compile, keeps its fault when a missing lane waits at a block barrier.
//! - **Results.** For lane `l` of group `G`, `A(l)` = members(l) ∩ `G`, the members that
//!   arrived. `vote` and `redux` are computed over `A(l)` ([`vote_result`], [`redux_result`];
//!   an empty `A(l)` gives ballot 0, `.all` true, `.any` false, `.uni` true, a reduction 0);
//!   `match.any` gives the lanes of `A(l)` holding `l`'s value, `match.all` gives `A(l)` and
//!   true when every lane of `A(l)` holds the same value, else 0 and false ([`match_result`]).
//!   `shfl` computes its source lane `j` as PTX says; `d` is `j`'s value if `j` is in `A(l)`,
//!   else `l`'s own value, as for an index out of range (PTX leaves a source that is inactive or
//!   outside the mask undefined); `p` says whether the index was in range, as PTX defines it
//!   ([`shfl_source`]). `activemask` gives `G`.
//! - **Undefined masks.** A lane whose own bit is not in its member mask (undefined in PTX) is
//!   treated like any other: it waits for its members and its result covers `A(l)`, without
//!   itself. Lanes that disagree on the mask each get the result over their own `A(l)`.
//! - **Spin escape (interpreter only).** A lane that spins (takes back-edges) while others wait
//!   at a collective keeps the warp from ever being quiescent. After `SPIN_ROUNDS` back-edges
//!   the interpreter resolves the lowest-PC complete group early (`Warp::resolve_early`), so an
//!   intra-warp producer/consumer (a lane waiting for a flag the group sets after a
//!   collective it is not a member of) finishes as on the hardware; the JIT spins forever there
//!   (its documented limit). A complete group's results depend only on its members' operands,
//!   so resolving it early changes nothing in a program that also finishes on the JIT, unless
//!   lanes disagree on the mask (undefined). `activemask`, whose result would depend on who
//!   arrives later, never resolves early.

use super::sync::{match_result, redux_result};
use super::warp::{Env, Warp, lanes, shfl_source, vote_result};
use crate::fault::Fault;
use crate::ir::{Op, Src, WARP};

/// The lanes of a warp as the resolution rule sees them.
pub(crate) struct Waiters {
    /// Lanes waiting at a collective.
    pub(crate) waiting: u32,
    /// The instruction each waiting lane waits at.
    pub(crate) pc: [u32; WARP],
    /// Each waiting lane's member mask as its operand says (`activemask`: 0).
    pub(crate) members: [u32; WARP],
    /// Lanes that exited or do not exist.
    pub(crate) gone: u32,
}

impl Waiters {
    /// The groups (instruction, lanes), lowest instruction first.
    pub(crate) fn groups(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut rest = self.waiting;
        std::iter::from_fn(move || {
            let pc = lanes(rest).map(|l| self.pc[l]).min()?;
            let g = lanes(rest)
                .filter(|&l| self.pc[l] == pc)
                .fold(0u32, |g, l| g | 1 << l);
            rest &= !g;
            Some((pc, g))
        })
    }

    /// Members of the lanes of group `g` that have not exited and do not wait in it.
    pub(crate) fn missing(&self, g: u32) -> u32 {
        lanes(g).fold(0, |m, l| m | self.members[l]) & !self.gone & !g
    }

    /// The group to resolve now, when no lane of the warp can run: the lowest-PC complete
    /// group, else the lowest-PC group; `(pc, lanes, complete)`, `None` when no lane waits.
    pub(crate) fn pick(&self) -> Option<(u32, u32, bool)> {
        let mut first = None;
        for (pc, g) in self.groups() {
            if self.missing(g) == 0 {
                return Some((pc, g, true));
            }
            first.get_or_insert((pc, g));
        }
        first.map(|(pc, g)| (pc, g, false))
    }
}

/// The member-mask operand of a collective (`activemask` has none).
fn member_operand(op: &Op) -> Option<Src> {
    match op {
        Op::Shfl { mask, .. }
        | Op::Vote { mask, .. }
        | Op::Match { mask, .. }
        | Op::Redux { mask, .. }
        | Op::WarpSync { mask } => Some(*mask),
        _ => None,
    }
}

impl Warp {
    /// The lanes of `mask` (the running group's lanes whose guard holds) reach the collective
    /// at `pc` and wait there; the group's other lanes go on after it. The group is empty
    /// afterwards: the caller picks the next one.
    pub(super) fn wait_at_collective(&mut self, pc: u32, mask: u32) {
        for l in lanes(self.group) {
            self.pc[l] = if mask & (1 << l) != 0 { pc } else { pc + 1 };
        }
        self.at_coll |= mask;
        self.group = 0;
    }

    fn waiters(&self, env: &Env<'_>) -> Waiters {
        let mut members = [0u32; WARP];
        for l in lanes(self.at_coll) {
            let op = env.code.get(self.pc[l] as usize).map(|i| &i.op);
            if let Some(m) = op.and_then(member_operand) {
                members[l] = self.val(env, m, l) as u32;
            }
        }
        Waiters {
            waiting: self.at_coll,
            pc: self.pc,
            members,
            gone: !self.live | self.exited,
        }
    }

    /// With no lane of the warp able to run and some waiting at a collective: resolves the
    /// group [`Waiters::pick`] chooses, whose lanes can run again. A `bar.warp.sync` whose
    /// missing lane waits at a block barrier is a fault (the warp cannot reconverge).
    pub(super) fn resolve_waiting(&mut self, env: &Env<'_>) -> Result<(), Fault> {
        let w = self.waiters(env);
        let Some((pc, g, complete)) = w.pick() else {
            return Ok(());
        };
        if !complete
            && let Some(Op::WarpSync { .. }) = env.code.get(pc as usize).map(|i| &i.op)
            && let Some(l) = lanes(w.missing(g) & self.at_bar).next()
        {
            let t = self.id * WARP as u32 + l as u32;
            return Err(Fault {
                pc,
                lane: self.id * WARP as u32 + lanes(g).next().unwrap_or(0) as u32,
                msg: format!(
                    "bar.warp.sync waits for thread {t}, which waits at a block barrier \
                     (bar.sync): the warp cannot reconverge"
                ),
            });
        }
        self.resolve_group(env, pc, g, &w.members);
        Ok(())
    }

    /// The spin escape (see the module docs): resolves the lowest-PC complete group other than
    /// an `activemask`; false if there is none.
    pub(super) fn resolve_early(&mut self, env: &Env<'_>) -> bool {
        let w = self.waiters(env);
        let early = w.groups().find(|&(pc, g)| {
            w.missing(g) == 0
                && !matches!(
                    env.code.get(pc as usize).map(|i| &i.op),
                    Some(Op::Activemask { .. })
                )
        });
        let Some((pc, g)) = early else {
            return false;
        };
        self.resolve_group(env, pc, g, &w.members);
        true
    }

    /// Computes the results of the collective at `pc` for its lanes `g` (every operand is read
    /// before a destination is written: `d` may be an operand) and lets them go on after it.
    fn resolve_group(&mut self, env: &Env<'_>, pc: u32, g: u32, members: &[u32; WARP]) {
        let Some(op) = env.code.get(pc as usize).map(|i| &i.op) else {
            return;
        };
        let mut a = [0u64; WARP];
        let mut out = [(0u64, 0u64); WARP];
        let (d, p) = match op {
            Op::Shfl {
                mode,
                d,
                p,
                a: s,
                b,
                c,
                ..
            } => {
                for l in lanes(g) {
                    a[l] = self.val(env, *s, l);
                }
                for l in lanes(g) {
                    let (bv, cv) = (self.val(env, *b, l), self.val(env, *c, l));
                    let (j, ok) = shfl_source(*mode, l, bv, cv, members[l], g);
                    out[l] = (a[j] & 0xFFFF_FFFF, ok as u64);
                }
                (Some(*d), *p)
            }
            Op::Vote {
                mode, d, a: s, neg, ..
            } => {
                for l in lanes(g) {
                    a[l] = self.val(env, *s, l);
                }
                for l in lanes(g) {
                    out[l].0 = vote_result(*mode, *neg, &a, members[l], g);
                }
                (Some(*d), None)
            }
            Op::Redux { op, d, a: s, .. } => {
                for l in lanes(g) {
                    a[l] = self.val(env, *s, l);
                }
                for l in lanes(g) {
                    out[l].0 = redux_result(*op, &a, members[l], g);
                }
                (Some(*d), None)
            }
            Op::Match {
                mode,
                d,
                p,
                a: s,
                wide,
                ..
            } => {
                for l in lanes(g) {
                    a[l] = self.val(env, *s, l);
                }
                for l in lanes(g) {
                    out[l] = match_result(*mode, *wide, &a, members[l], g, l);
                }
                (Some(*d), *p)
            }
            Op::Activemask { d } => {
                for l in lanes(g) {
                    out[l].0 = g as u64;
                }
                (Some(*d), None)
            }
            _ => (None, None),
        };
        for l in lanes(g) {
            if let Some(d) = d {
                self.set(d, l, out[l].0);
            }
            if let Some(p) = p {
                self.set(p, l, out[l].1);
            }
            self.pc[l] = pc + 1;
        }
        self.at_coll &= !g;
    }
}
