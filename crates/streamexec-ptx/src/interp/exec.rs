//! The instruction loop: runs a warp's lowest-PC group until no lane of the warp can run
//! (all exited or waiting at a barrier), or a lane faults.

use super::mem::{self, BlockMem, Loc};
use super::race::{Access, RaceBlock};
use super::warp::{BlockShared, Env, Warp, lanes};
use crate::fault::Fault;
use crate::ir::{
    Addr, BoolOp, LOCAL_WINDOW, Op, PARAM_WINDOW, SHARED_WINDOW, Space, Src, THREAD_PARAM_BASE,
    WARP, WINDOW_BYTES,
};

/// Back-edges a group may take while other runnable lanes of its warp wait at higher PCs
/// before those lanes get a turn.
const SPIN_ROUNDS: u32 = 1 << 12;

/// `nanosleep` requests from this long on put the host thread to sleep; shorter ones only
/// yield it. A device-side RPC client waits for the server with `nanosleep` in its spin loop
/// (`include/streamexec_rpc.h` asks for 64 ns), and what matters there is that the server
/// thread gets a CPU when the spinning threads outnumber the cores: `yield_now` does that at
/// once. A real sleep would too, but Linux rounds a short sleep up to its timer slack
/// (about 50 µs, so ~55 µs in all), which would add that to every RPC hand-off; from 50 µs on
/// the slack is in proportion and sleeping is the better way to wait.
const NANOSLEEP_SLEEP_FROM_NS: u64 = 50_000;
/// PTX caps one `nanosleep` at 1 ms.
const NANOSLEEP_MAX_NS: u64 = 1_000_000;

/// Waits about `ns` nanoseconds (PTX allows anything in `0..=2 * ns`), giving the CPU away.
pub(crate) fn nanosleep(ns: u64) {
    if ns >= NANOSLEEP_SLEEP_FROM_NS {
        std::thread::sleep(std::time::Duration::from_nanos(ns.min(NANOSLEEP_MAX_NS)));
    } else {
        std::thread::yield_now();
    }
}

/// Records a shared or global access for the race checker (when it is on).
#[inline(always)]
fn record(
    race: &mut Option<Box<RaceBlock>>,
    loc: Loc,
    bytes: usize,
    acc: Access,
) -> Result<(), String> {
    let Some(r) = race.as_mut() else {
        return Ok(());
    };
    match loc {
        Loc::Global(p) => r.global(p as u64, bytes, acc),
        Loc::Shared(i) => r.shared(i as u64, bytes, acc),
        _ => Ok(()),
    }
}

/// Lane `l`'s access of `bytes` at `addr`: resolved (bounds, alignment, mapping) and recorded
/// for the race checker, or the fault that ends the launch.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn resolve_and_record(
    res: &mut mem::Resolver,
    env: &Env<'_>,
    m: &BlockMem<'_>,
    race: &mut Option<Box<RaceBlock>>,
    space: Space,
    addr: u64,
    bytes: u64,
    l: usize,
    acc: Access,
) -> Result<Loc, Fault> {
    let fault = |msg| Fault {
        pc: acc.pc,
        lane: acc.tid,
        msg,
    };
    let loc = res
        .at(env.l, m, space, addr, bytes, l, acc.write)
        .map_err(fault)?;
    record(race, loc, bytes as usize, acc).map_err(fault)?;
    Ok(loc)
}

/// The block's memory as the memory functions see it, and the block's race recorder.
#[inline(always)]
fn block_mem<'a>(
    sh: &'a mut BlockShared,
    local: &'a mut [u8],
    tparam: &'a mut [u8],
    env: &Env<'_>,
) -> (BlockMem<'a>, &'a mut Option<Box<RaceBlock>>) {
    let m = BlockMem {
        shared: &mut sh.shared,
        static_shared: sh.static_shared,
        dynamic_at: sh.dynamic_at,
        dynamic_len: sh.dynamic_len,
        local,
        local_bytes: env.prog.thread_local_bytes(),
        tparam,
        tparam_bytes: env.prog.thread_param_bytes as usize,
    };
    (m, &mut sh.race)
}

fn advance(loc: Loc, by: usize) -> Loc {
    match loc {
        Loc::Global(p) => Loc::Global(p.wrapping_add(by)),
        Loc::Shared(i) => Loc::Shared(i + by),
        Loc::Local(i) => Loc::Local(i + by),
        Loc::KParam(i) => Loc::KParam(i + by),
        Loc::TParam(i) => Loc::TParam(i + by),
    }
}

impl Warp {
    /// A source operand for every lane of `mask` (other lanes: unspecified).
    #[inline(always)]
    fn fetch(&self, env: &Env<'_>, s: Src, mask: u32) -> [u64; WARP] {
        match s {
            Src::Reg(r) => {
                let row: Option<&[u64; WARP]> = self.regs
                    [r as usize * WARP..r as usize * WARP + WARP]
                    .try_into()
                    .ok();
                row.copied().unwrap_or([0; WARP])
            }
            Src::Imm(v) => [v; WARP],
            Src::Sreg(sr) if sr.uniform() => {
                [self.val(env, s, lanes(mask).next().unwrap_or(0)); WARP]
            }
            Src::Sreg(_) => {
                let mut o = [0u64; WARP];
                for l in lanes(mask) {
                    o[l] = self.val(env, s, l);
                }
                o
            }
        }
    }

    /// Register `r`'s slots for all lanes.
    #[inline(always)]
    fn row(&mut self, r: u32) -> &mut [u64] {
        &mut self.regs[r as usize * WARP..r as usize * WARP + WARP]
    }

    /// Each lane's effective address.
    #[inline(always)]
    fn addresses(&self, addr: &Addr, space: Space, mask: u32) -> [u64; WARP] {
        let mut out = [addr.offset as u64; WARP];
        if let Some(r) = addr.base {
            let row = &self.regs[r as usize * WARP..r as usize * WARP + WARP];
            for l in lanes(mask) {
                out[l] = row[l].wrapping_add(addr.offset as u64);
            }
        } else if self.lbase != [0; WARP]
            && (space == Space::Local
                || (space == Space::Generic
                    && (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_BYTES).contains(&out[0])))
        {
            // A `.local` variable named in the address: in the lane's own activation.
            for l in lanes(mask) {
                out[l] = out[l].wrapping_add(self.lbase[l] as u64);
            }
        }
        out
    }

    /// Runs until every lane has exited or waits at a block barrier: whenever no lane can run
    /// and some wait at a warp collective, one group of them is resolved (`collective.rs`).
    pub(crate) fn run(&mut self, env: &Env<'_>, sh: &mut BlockShared) -> Result<(), Fault> {
        loop {
            self.run_lanes(env, sh)?;
            if self.at_coll == 0 {
                return Ok(());
            }
            self.resolve_waiting(env)?;
        }
    }

    /// Runs until no lane can run.
    fn run_lanes(&mut self, env: &Env<'_>, sh: &mut BlockShared) -> Result<(), Fault> {
        if self.group == 0 && !self.reselect() {
            return Ok(());
        }
        let code = env.code;
        loop {
            let pc = self.group_pc;
            let Some(inst) = code.get(pc as usize) else {
                return Err(self.fault(
                    lanes(self.group).next().unwrap_or(0),
                    "ran past the end of the code".into(),
                ));
            };
            let mask = match inst.guard {
                None => self.group,
                Some((r, neg)) => {
                    let mut m = 0;
                    for l in lanes(self.group) {
                        if (self.get(r, l) != 0) != neg {
                            m |= 1 << l;
                        }
                    }
                    m
                }
            };
            self.step += 1;
            match &inst.op {
                Op::Un { f, d, a } => {
                    let av = self.fetch(env, *a, mask);
                    let row = self.row(*d);
                    for l in lanes(mask) {
                        row[l] = f(av[l]);
                    }
                }
                Op::Bin { f, d, a, b } => {
                    let (av, bv) = (self.fetch(env, *a, mask), self.fetch(env, *b, mask));
                    let row = self.row(*d);
                    for l in lanes(mask) {
                        row[l] = f(av[l], bv[l]);
                    }
                }
                Op::Tern { f, d, a, b, c } => {
                    let (av, bv) = (self.fetch(env, *a, mask), self.fetch(env, *b, mask));
                    let cv = self.fetch(env, *c, mask);
                    let row = self.row(*d);
                    for l in lanes(mask) {
                        row[l] = f(av[l], bv[l], cv[l]);
                    }
                }
                Op::Lop3 { lut, d, a, b, c } => {
                    let (av, bv) = (self.fetch(env, *a, mask), self.fetch(env, *b, mask));
                    let cv = self.fetch(env, *c, mask);
                    let row = self.row(*d);
                    for l in lanes(mask) {
                        let mut r = 0u32;
                        for bit in 0..32 {
                            let idx = (((av[l] >> bit) & 1) << 2)
                                | (((bv[l] >> bit) & 1) << 1)
                                | ((cv[l] >> bit) & 1);
                            r |= (((*lut as u32) >> idx) & 1) << bit;
                        }
                        row[l] = r as u64;
                    }
                }
                Op::Bfi {
                    wide,
                    d,
                    a,
                    b,
                    c,
                    e,
                } => {
                    for l in lanes(mask) {
                        let v = crate::alu::bfi(
                            *wide,
                            self.val(env, *a, l),
                            self.val(env, *b, l),
                            self.val(env, *c, l),
                            self.val(env, *e, l),
                        );
                        self.set(*d, l, v);
                    }
                }
                Op::Carry {
                    sub,
                    wide,
                    cin,
                    cout,
                    d,
                    a,
                    b,
                } => {
                    let cr = env.prog.carry_reg;
                    for l in lanes(mask) {
                        let cc = if *cin { self.get(cr, l) & 1 } else { 0 } as u128;
                        let m: u128 = if *wide {
                            u64::MAX as u128
                        } else {
                            u32::MAX as u128
                        };
                        let (x, y) = (
                            self.val(env, *a, l) as u128 & m,
                            self.val(env, *b, l) as u128 & m,
                        );
                        let (r, c) = if *sub {
                            (x.wrapping_sub(y + cc) & m, (x < y + cc) as u64)
                        } else {
                            let s = x + y + cc;
                            (s & m, (s > m) as u64)
                        };
                        self.set(*d, l, r as u64);
                        if *cout {
                            self.set(cr, l, c);
                        }
                    }
                }
                Op::MadCarry {
                    hi,
                    wide,
                    signed,
                    cin,
                    cout,
                    d,
                    a,
                    b,
                    c,
                } => {
                    let cr = env.prog.carry_reg;
                    for l in lanes(mask) {
                        let bits = if *wide { 64 } else { 32 };
                        let m: u128 = if *wide {
                            u64::MAX as u128
                        } else {
                            u32::MAX as u128
                        };
                        let ext = |v: u64| -> i128 {
                            let v = v as u128 & m;
                            if *signed && v >> (bits - 1) & 1 == 1 {
                                v as i128 - (1i128 << bits)
                            } else {
                                v as i128
                            }
                        };
                        let p = ext(self.val(env, *a, l)).wrapping_mul(ext(self.val(env, *b, l)));
                        let part = (if *hi { p >> bits } else { p }) as u128 & m;
                        let cc = if *cin { self.get(cr, l) & 1 } else { 0 } as u128;
                        let s = part + (self.val(env, *c, l) as u128 & m) + cc;
                        self.set(*d, l, (s & m) as u64);
                        if *cout {
                            self.set(cr, l, (s > m) as u64);
                        }
                    }
                }
                Op::Setp {
                    f,
                    p,
                    q,
                    a,
                    b,
                    comb,
                    hi,
                } => {
                    for l in lanes(mask) {
                        let (av, bv) = (self.val(env, *a, l), self.val(env, *b, l));
                        let c = f(av, bv) != 0;
                        let nc = hi.map_or(!c, |h| h(av, bv) != 0);
                        let (x, y) = match comb {
                            None => (c, nc),
                            Some((op, s, neg)) => {
                                let pv = (self.val(env, *s, l) != 0) != *neg;
                                let f = |v: bool| match op {
                                    BoolOp::And => v && pv,
                                    BoolOp::Or => v || pv,
                                    BoolOp::Xor => v != pv,
                                };
                                (f(c), f(nc))
                            }
                        };
                        self.set(*p, l, x as u64);
                        if let Some(q) = q {
                            self.set(*q, l, y as u64);
                        }
                    }
                }
                Op::Cvta { to, space, d, a } => {
                    let window = match space {
                        Space::Shared => SHARED_WINDOW,
                        Space::Local => LOCAL_WINDOW,
                        Space::Param => PARAM_WINDOW,
                        _ => 0,
                    };
                    for l in lanes(mask) {
                        let v = self.val(env, *a, l);
                        self.set(
                            *d,
                            l,
                            if *to {
                                v.wrapping_sub(window)
                            } else {
                                v.wrapping_add(window)
                            },
                        );
                    }
                }
                Op::Ld {
                    space,
                    ty,
                    n,
                    d,
                    addr,
                } => {
                    let (size, n) = (ty.bytes() as usize, *n as usize);
                    let total = size * n;
                    let kparam = *space == Space::Param && addr.base.is_none();
                    if kparam && (addr.offset as u64) < THREAD_PARAM_BASE {
                        // A kernel parameter: the same bytes for every lane, read once.
                        let at = addr.offset as u64;
                        let first = lanes(mask).next().unwrap_or(0);
                        if at.saturating_add(total as u64) > env.l.params.len() as u64 {
                            return Err(self.fault(
                                first,
                                format!(
                                    "load past the {} bytes of kernel parameters at {at:#x}",
                                    env.l.params.len()
                                ),
                            ));
                        }
                        for (k, dk) in d.iter().enumerate().take(n) {
                            let v = ty.extend(mem::read_param(env.l, at as usize + k * size, size));
                            if *dk != u32::MAX {
                                for l in lanes(mask) {
                                    self.set(*dk, l, v);
                                }
                            }
                        }
                    } else {
                        let addrs = self.addresses(addr, *space, mask);
                        let mut res = std::mem::replace(&mut self.res, mem::Resolver::new());
                        let (wid, step, gpc) = (self.id, self.step, pc);
                        {
                            let (m, race) = block_mem(sh, &mut self.local, &mut self.tparam, env);
                            for l in lanes(mask) {
                                let tid = wid * WARP as u32 + l as u32;
                                let loc = resolve_and_record(
                                    &mut res,
                                    env,
                                    &m,
                                    race,
                                    *space,
                                    addrs[l],
                                    total as u64,
                                    l,
                                    Access {
                                        tid,
                                        step,
                                        pc: gpc,
                                        write: false,
                                        atomic: false,
                                    },
                                )?;
                                for (k, dk) in d.iter().enumerate().take(n) {
                                    let v = ty.extend(mem::load(
                                        env.l,
                                        &m,
                                        advance(loc, k * size),
                                        size,
                                    ));
                                    if *dk != u32::MAX {
                                        self.regs[*dk as usize * WARP + l] = v;
                                    }
                                }
                            }
                        }
                        self.res = res;
                    }
                }
                Op::St {
                    space,
                    ty,
                    n,
                    s,
                    addr,
                } => {
                    let (size, n) = (ty.bytes() as usize, *n as usize);
                    let total = size * n;
                    let addrs = self.addresses(addr, *space, mask);
                    let mut res = std::mem::replace(&mut self.res, mem::Resolver::new());
                    let (wid, step, gpc) = (self.id, self.step, pc);
                    let (mut m, race) = block_mem(sh, &mut self.local, &mut self.tparam, env);
                    for l in lanes(mask) {
                        let tid = wid * WARP as u32 + l as u32;
                        let loc = resolve_and_record(
                            &mut res,
                            env,
                            &m,
                            race,
                            *space,
                            addrs[l],
                            total as u64,
                            l,
                            Access {
                                tid,
                                step,
                                pc: gpc,
                                write: true,
                                atomic: false,
                            },
                        )?;
                        for (k, sk) in s.iter().enumerate().take(n) {
                            let v = match *sk {
                                Src::Reg(r) => self.regs[r as usize * WARP + l],
                                Src::Imm(v) => v,
                                Src::Sreg(_) => 0, // the decoder rejects these
                            };
                            mem::store(&mut m, advance(loc, k * size), size, v);
                        }
                    }
                    self.res = res;
                }
                Op::Atom {
                    space,
                    op,
                    ty,
                    d,
                    addr,
                    b,
                    c,
                } => {
                    let size = ty.bytes() as usize;
                    let addrs = self.addresses(addr, *space, mask);
                    let mut res = std::mem::replace(&mut self.res, mem::Resolver::new());
                    let mut olds = [0u64; WARP];
                    let (wid, step, gpc) = (self.id, self.step, pc);
                    for l in lanes(mask) {
                        let (bv, cv) = (self.val(env, *b, l), self.val(env, *c, l));
                        let tid = wid * WARP as u32 + l as u32;
                        let (mut m, race) = block_mem(sh, &mut self.local, &mut self.tparam, env);
                        let at = addrs[l];
                        let loc = res
                            .at(env.l, &m, *space, at, size as u64, l, true)
                            .map_err(|msg| Fault {
                                pc: gpc,
                                lane: tid,
                                msg,
                            })?;
                        if !matches!(loc, Loc::Global(_) | Loc::Shared(_)) {
                            return Err(Fault {
                                pc: gpc,
                                lane: tid,
                                msg: format!(
                                    "atomic on address {at:#x}, which is not global or shared memory"
                                ),
                            });
                        }
                        record(
                            race,
                            loc,
                            size,
                            Access {
                                tid,
                                step,
                                pc: gpc,
                                write: true,
                                atomic: true,
                            },
                        )
                        .map_err(|msg| Fault {
                            pc: gpc,
                            lane: tid,
                            msg,
                        })?;
                        olds[l] = mem::atomic(&mut m, loc, *op, *ty, bv, cv);
                    }
                    self.res = res;
                    if let Some(d) = d {
                        for l in lanes(mask) {
                            self.set(*d, l, ty.extend(olds[l]));
                        }
                    }
                }
                Op::Bra { target } => {
                    let rest = self.group & !mask;
                    if rest == 0 && *target <= pc && self.others_min != u32::MAX {
                        // The whole group loops while other lanes wait further on: a spin
                        // loop may be waiting for them (a lock holder), so after many
                        // rounds they get to run for a while.
                        self.spins += 1;
                        if self.spins >= SPIN_ROUNDS {
                            self.group_pc = *target;
                            self.defer_group();
                            continue;
                        }
                    } else if rest == 0 && *target <= pc && self.at_coll != 0 {
                        // The group loops while the only other lanes that could go on wait
                        // at a collective, which resolves when the warp is quiescent: the
                        // spin escape (`collective.rs`) lets a complete one go first.
                        self.spins += 1;
                        if self.spins >= SPIN_ROUNDS {
                            self.spins = 0;
                            self.group_pc = *target;
                            if self.resolve_early(env) {
                                self.defer_group();
                                continue;
                            }
                        }
                    }
                    if rest == 0 {
                        self.goto(*target);
                    } else if mask == 0 {
                        self.goto(pc + 1);
                    } else {
                        self.split(mask, *target);
                    }
                    if self.group == 0 && !self.reselect() {
                        return Ok(());
                    }
                    continue;
                }
                Op::Call(site) => {
                    for l in lanes(mask) {
                        self.call_lane(env, l, pc, site)?;
                    }
                    if mask == self.group {
                        self.goto(site.target);
                    } else if mask == 0 {
                        self.goto(pc + 1);
                    } else {
                        self.split(mask, site.target);
                    }
                    if self.group == 0 && !self.reselect() {
                        return Ok(());
                    }
                    continue;
                }
                Op::CallIndirect { reg, sites } => {
                    // Each lane calls the function its register names; lanes that call
                    // different functions diverge until they return.
                    for l in lanes(self.group) {
                        if mask & (1 << l) == 0 {
                            self.pc[l] = pc + 1;
                            continue;
                        }
                        let at = self.get(*reg, l);
                        let Some(k) = sites.iter().position(|(a, _)| *a == at) else {
                            return Err(self.fault(
                                l,
                                format!(
                                    "indirect call to {at:#x}, which is no function of this \
                                     module with the call's parameters"
                                ),
                            ));
                        };
                        self.call_lane_at(env, l, pc, k as u32, &sites[k].1)?;
                        self.pc[l] = sites[k].1.target;
                    }
                    self.group = 0;
                    if !self.reselect() {
                        return Ok(());
                    }
                    continue;
                }
                Op::Ret => {
                    for l in lanes(self.group) {
                        self.pc[l] = if mask & (1 << l) == 0 {
                            pc + 1
                        } else {
                            self.ret_lane(env, l)?
                        };
                    }
                    self.group = 0;
                    if !self.reselect() {
                        return Ok(());
                    }
                    continue;
                }
                Op::Exit => {
                    self.exited |= mask;
                    self.group &= !mask;
                    if self.group == 0 {
                        if !self.reselect() {
                            return Ok(());
                        }
                        continue;
                    }
                }
                Op::Service(call) => {
                    for l in lanes(mask) {
                        let tid = self.id * WARP as u32 + l as u32;
                        let (mut m, _) = block_mem(sh, &mut self.local, &mut self.tparam, env);
                        let r =
                            crate::service_call::run(env.l, &mut m, l, env.block_idx, tid, call);
                        if let Err(msg) = r {
                            return Err(self.fault(l, msg));
                        }
                    }
                }
                Op::Trap => {
                    if mask != 0 {
                        return Err(self.fault(lanes(mask).next().unwrap_or(0), "trap".into()));
                    }
                }
                Op::Bar { id, count, kind } => {
                    if mask != 0 && self.arrive(env, sh, mask, pc, *id, *count, *kind)? {
                        self.group &= !mask;
                        if self.group == 0 {
                            if !self.reselect() {
                                return Ok(());
                            }
                            continue;
                        }
                    }
                }
                Op::Nop => std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst),
                Op::Nanosleep { t } => {
                    // The lanes run in lock-step: the warp waits once, as long as the longest
                    // request of its executing lanes.
                    if let Some(ns) = lanes(mask).map(|l| self.val(env, *t, l) as u32).max() {
                        if env.l.abandoned.load(std::sync::atomic::Ordering::Relaxed) {
                            return Err(self.fault(
                                lanes(mask).next().unwrap_or(0),
                                "stopped waiting: another block of the cooperative grid failed"
                                    .into(),
                            ));
                        }
                        nanosleep(ns as u64);
                    }
                }
                Op::Shfl { .. }
                | Op::Vote { .. }
                | Op::Match { .. }
                | Op::Redux { .. }
                | Op::Activemask { .. }
                | Op::WarpSync { .. } => {
                    // The executing lanes wait there until the warp resolves them
                    // (`collective.rs`); the others go on.
                    if mask != 0 {
                        self.wait_at_collective(pc, mask);
                        if !self.reselect() {
                            return Ok(());
                        }
                        continue;
                    }
                }
            }
            // Straight-line instruction: the group moves on together.
            self.goto(pc + 1);
            if self.deferred != 0 {
                self.defer_left = self.defer_left.saturating_sub(1);
                if self.defer_left == 0 {
                    self.deferred = 0;
                    self.reselect();
                }
            }
        }
    }
}
