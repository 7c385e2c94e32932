//! One warp: 32 lanes with a PC each, run in lock-step groups.
//!
//! Scheduling is "minimum PC first": the warp runs the group of runnable lanes whose PC is
//! the lowest, one instruction for all of them at once. Lanes that branch apart wait at their
//! own PCs and join the running group as soon as it reaches the same PC, which for the
//! structured code compilers emit is the reconvergence point. Lanes leave the runnable set
//! when they exit or wait at a barrier; the warp returns to the block scheduler when no lane
//! is runnable.

use super::race::RaceBlock;
use crate::dim::Dim3;
pub(crate) use crate::fault::Fault;
use crate::ir::{Inst, Program, ShflMode, Src, Sreg, VoteMode, WARP};
use crate::launch::Launch;

/// Iterates the set bits of a lane mask.
#[inline(always)]
pub(crate) fn lanes(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            None
        } else {
            let l = m.trailing_zeros() as usize;
            m &= m - 1;
            Some(l)
        }
    })
}

/// The lane whose `a` lane `lane` of group `group` gets from `shfl.sync` in `mode` with operands
/// `b` (lane or delta) and `c` (clamp and segment mask), and whether the computed index is in
/// range. An index out of range, or naming a lane that is not one of `members` or did not
/// arrive in `group`, gives the lane itself (its own value).
// Inlined: the JIT's driver calls it for each lane of every whole-warp shuffle.
#[inline(always)]
pub(crate) fn shfl_source(
    mode: ShflMode,
    lane: usize,
    b: u64,
    c: u64,
    members: u32,
    group: u32,
) -> (usize, bool) {
    let bv = b as u32 & 31;
    let cv = c as u32;
    let clamp = cv & 31;
    let seg = (cv >> 8) & 31;
    let l = lane as i32;
    let max_lane = ((lane as u32 & seg) | (clamp & !seg)) as i32;
    let min_lane = (lane as u32 & seg) as i32;
    let (j, ok) = match mode {
        ShflMode::Up => {
            let j = l - bv as i32;
            (j, j >= max_lane)
        }
        ShflMode::Down => {
            let j = l + bv as i32;
            (j, j <= max_lane)
        }
        ShflMode::Bfly => {
            let j = l ^ bv as i32;
            (j, j <= max_lane)
        }
        ShflMode::Idx => {
            let j = min_lane | (bv & !seg) as i32;
            (j, j <= max_lane)
        }
    };
    let arrived = members & group;
    if ok && (0..WARP as i32).contains(&j) && arrived & (1 << j) != 0 {
        (j as usize, ok)
    } else {
        (lane, ok)
    }
}

/// `vote.sync`'s result for a lane of `group` with `members`, from every lane's predicate
/// operand `preds` (nonzero is true; `neg` negates it).
pub(crate) fn vote_result(
    mode: VoteMode,
    neg: bool,
    preds: &[u64; WARP],
    members: u32,
    group: u32,
) -> u64 {
    let active = members & group;
    let ballot = lanes(active)
        .filter(|&k| (preds[k] != 0) != neg)
        .fold(0u32, |m, k| m | 1 << k);
    match mode {
        VoteMode::Ballot => ballot as u64,
        VoteMode::All => (ballot == active) as u64,
        VoteMode::Any => (ballot != 0) as u64,
        VoteMode::Uni => (ballot == 0 || ballot == active) as u64,
    }
}

/// The barrier state of a block: per barrier id, arrivals and what they wait for.
#[derive(Default)]
pub(crate) struct Barriers {
    /// Threads that arrived in the current generation.
    pub(crate) arrived: [u32; 16],
    /// Thread count the barrier waits for (0: the whole block).
    pub(crate) expected: [u32; 16],
    /// Completed generations.
    pub(crate) generation: [u32; 16],
    /// `bar.red` in the current generation: true predicates, threads.
    pub(crate) red: [(u32, u32); 16],
    /// `bar.red` of the last completed generation.
    pub(crate) result: [(u32, u32); 16],
}

/// What every warp of a block shares and does not change while the block runs.
pub(crate) struct Env<'a> {
    pub(crate) l: &'a Launch,
    pub(crate) prog: &'a Program,
    pub(crate) code: &'a [Inst],
    pub(crate) block_idx: Dim3,
    pub(crate) nwarps: u32,
}

/// Block-wide mutable state: shared memory, barrier counts, race records.
pub(crate) struct BlockShared {
    pub(crate) shared: Vec<u8>,
    pub(crate) static_shared: usize,
    pub(crate) dynamic_at: usize,
    pub(crate) dynamic_len: usize,
    /// Arrivals at each barrier id.
    pub(crate) bars: Barriers,
    pub(crate) race: Option<Box<RaceBlock>>,
}

/// A warp's state.
pub(crate) struct Warp {
    pub(crate) id: u32,
    /// Register file, `regs[r * 32 + lane]`.
    pub(crate) regs: Vec<u64>,
    pub(crate) pc: [u32; WARP],
    /// Lanes that exist (the last warp of a block may be partial).
    pub(crate) live: u32,
    pub(crate) exited: u32,
    pub(crate) at_bar: u32,
    /// Lanes waiting at a warp collective (`collective.rs`); `pc` holds its instruction.
    pub(crate) at_coll: u32,
    pub(crate) bar_id: [u8; WARP],
    /// The generation of its barrier each waiting lane waits to complete.
    pub(crate) bar_gen: [u32; WARP],
    /// The running group and its PC (its lanes' `pc` entries are stale while it runs).
    pub(crate) group: u32,
    pub(crate) group_pc: u32,
    /// Lowest PC of runnable lanes outside the group.
    pub(crate) others_min: u32,
    /// Per-lane call stacks: the PC of each pending `call` and its call site (indirect calls
    /// have several).
    pub(crate) stacks: Vec<Vec<(u32, u32)>>,
    /// Per-lane saved frames of recursive functions (`call.rs`), as bytes.
    pub(crate) frames: Vec<Vec<u8>>,
    pub(crate) local: Vec<u8>,
    /// Each lane's local frame base: 0, plus `local_bytes` per pending recursive call.
    pub(crate) lbase: [u32; WARP],
    pub(crate) tparam: Vec<u8>,
    /// Warp instructions executed (orders accesses for the race checker).
    pub(crate) step: u64,
    /// Back-edges taken by the group while other lanes waited (see `SPIN_ROUNDS`).
    pub(crate) spins: u32,
    /// Lanes set aside so that others can run, and for how many more instructions.
    pub(crate) deferred: u32,
    pub(crate) defer_left: u32,
    /// The device range this warp's last global access hit: kept across instructions (the
    /// launch pins it until the grid ends; a reused warp starts with none).
    pub(crate) res: super::mem::Resolver,
}

impl Warp {
    pub(crate) fn new(id: u32, threads: u32, prog: &Program) -> Warp {
        let first = id * WARP as u32;
        let n = (threads - first).min(WARP as u32);
        let live = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        Warp {
            id,
            regs: vec![0; prog.regs as usize * WARP],
            pc: [0; WARP],
            live,
            exited: 0,
            at_bar: 0,
            at_coll: 0,
            bar_id: [0; WARP],
            bar_gen: [0; WARP],
            group: 0,
            group_pc: 0,
            others_min: u32::MAX,
            stacks: Vec::new(),
            frames: Vec::new(),
            local: vec![0; prog.thread_local_bytes() * WARP],
            lbase: [0; WARP],
            tparam: vec![0; prog.thread_param_bytes as usize * WARP],
            step: 0,
            spins: 0,
            deferred: 0,
            defer_left: 0,
            res: super::mem::Resolver::new(),
        }
    }

    /// Makes a finished warp (from this worker's pool) warp `id` of a new block, keeping its
    /// buffers: registers and local memory keep stale values, which PTX leaves undefined
    /// until written (zeroing them cost a fifth of a small kernel's time).
    pub(crate) fn reuse(mut self, id: u32, threads: u32, prog: &Program) -> Warp {
        let fresh = Warp::new_empty(id, threads);
        self.regs.resize(prog.regs as usize * WARP, 0);
        self.local.resize(prog.thread_local_bytes() * WARP, 0);
        self.tparam
            .resize(prog.thread_param_bytes as usize * WARP, 0);
        self.stacks.iter_mut().for_each(Vec::clear);
        self.frames.iter_mut().for_each(Vec::clear);
        Warp {
            regs: self.regs,
            local: self.local,
            lbase: [0; WARP],
            tparam: self.tparam,
            stacks: self.stacks,
            frames: self.frames,
            ..fresh
        }
    }

    fn new_empty(id: u32, threads: u32) -> Warp {
        let first = id * WARP as u32;
        let n = (threads - first).min(WARP as u32);
        let live = if n == 32 { u32::MAX } else { (1u32 << n) - 1 };
        Warp {
            id,
            regs: Vec::new(),
            pc: [0; WARP],
            live,
            exited: 0,
            at_bar: 0,
            at_coll: 0,
            bar_id: [0; WARP],
            bar_gen: [0; WARP],
            group: 0,
            group_pc: 0,
            others_min: u32::MAX,
            stacks: Vec::new(),
            frames: Vec::new(),
            local: Vec::new(),
            lbase: [0; WARP],
            tparam: Vec::new(),
            step: 0,
            spins: 0,
            deferred: 0,
            defer_left: 0,
            res: super::mem::Resolver::new(),
        }
    }

    /// Lanes that can run now.
    pub(crate) fn runnable(&self) -> u32 {
        self.live & !self.exited & !self.at_bar & !self.at_coll
    }

    /// Writes the group's PC back to its lanes and picks the new lowest-PC group; false when
    /// no lane is runnable.
    pub(crate) fn reselect(&mut self) -> bool {
        for l in lanes(self.group) {
            self.pc[l] = self.group_pc;
        }
        self.spins = 0;
        let mut run = self.runnable() & !self.deferred;
        if run == 0 {
            self.deferred = 0;
            run = self.runnable();
        }
        if run == 0 {
            self.group = 0;
            return false;
        }
        let min = lanes(run).map(|l| self.pc[l]).min().unwrap_or(0);
        let mut g = 0;
        let mut other = u32::MAX;
        for l in lanes(run) {
            if self.pc[l] == min {
                g |= 1 << l;
            } else {
                other = other.min(self.pc[l]);
            }
        }
        self.group = g;
        self.group_pc = min;
        self.others_min = other;
        true
    }

    /// Sets the running group aside for a while and runs the other lanes (fairness for spin
    /// loops that wait on lanes at higher PCs).
    pub(crate) fn defer_group(&mut self) {
        self.deferred = self.group;
        self.defer_left = 1024;
        self.reselect();
    }

    /// Moves the whole group to `pc`, merging with lanes waiting there.
    #[inline(always)]
    pub(crate) fn goto(&mut self, pc: u32) {
        self.group_pc = pc;
        if pc >= self.others_min {
            self.reselect();
        }
    }

    /// Splits the group: `taken` lanes go to `target`, the rest to the next instruction.
    pub(crate) fn split(&mut self, taken: u32, target: u32) {
        let next = self.group_pc + 1;
        for l in lanes(self.group) {
            self.pc[l] = if taken & (1 << l) != 0 { target } else { next };
        }
        self.group = 0;
        self.reselect();
    }

    #[inline(always)]
    pub(crate) fn get(&self, r: u32, l: usize) -> u64 {
        self.regs[r as usize * WARP + l]
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, r: u32, l: usize, v: u64) {
        self.regs[r as usize * WARP + l] = v;
    }

    /// A source operand's value in lane `l`.
    #[inline(always)]
    pub(crate) fn val(&self, env: &Env<'_>, s: Src, l: usize) -> u64 {
        match s {
            Src::Reg(r) => self.get(r, l),
            Src::Imm(v) => v,
            Src::Sreg(s) => self.sreg(env, s, l),
        }
    }

    fn sreg(&self, env: &Env<'_>, s: Sreg, l: usize) -> u64 {
        let comp = |d: Dim3, c: u8| match c {
            0 => d.x,
            1 => d.y,
            _ => d.z,
        } as u64;
        let tid = self.id as u64 * WARP as u64 + l as u64;
        let block = env.l.block;
        let bit = 1u64 << l;
        match s {
            Sreg::Tid(0) if block.y == 1 && block.z == 1 => tid,
            Sreg::Tid(c) => comp(block.unlinear(tid), c),
            Sreg::Ntid(c) => comp(block, c),
            Sreg::Ctaid(c) => comp(env.block_idx, c),
            Sreg::Nctaid(c) => comp(env.l.grid, c),
            Sreg::Laneid => l as u64,
            Sreg::Warpid => self.id as u64,
            Sreg::Nwarpid => env.nwarps as u64,
            Sreg::Smid => rayon::current_thread_index().unwrap_or(0) as u64,
            Sreg::Nsmid => env.l.nsm as u64,
            Sreg::Clock => env.l.start.elapsed().as_nanos() as u32 as u64,
            Sreg::Clock64 => env.l.start.elapsed().as_nanos() as u64,
            Sreg::Globaltimer => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            Sreg::Lanemask(c) => {
                use crate::ir::Cmp;
                let m = match c {
                    Cmp::Eq => bit,
                    Cmp::Lt => bit - 1,
                    Cmp::Le => (bit << 1) - 1,
                    Cmp::Gt => !((bit << 1) - 1),
                    _ => !(bit - 1),
                };
                m & 0xFFFF_FFFF
            }
            Sreg::DynamicSmem => env.l.dynamic_requested as u64,
            Sreg::TotalSmem => (env.prog.static_shared_bytes as u64) + env.l.dynamic_bytes as u64,
            Sreg::Gridid => 0,
            Sreg::Const(v) => v as u64,
            Sreg::LocalAddr(a) => a.wrapping_add(self.lbase[l] as u64),
        }
    }

    /// The fault of lane `l` at the running instruction.
    pub(crate) fn fault(&self, l: usize, msg: String) -> Fault {
        Fault {
            pc: self.group_pc,
            lane: self.id * WARP as u32 + l as u32,
            msg,
        }
    }
}
