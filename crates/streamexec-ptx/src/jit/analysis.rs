//! What the compiler needs to know about a program before it emits code: which registers an
//! instruction reads and writes, where basic blocks start, which instructions suspend a thread
//! (block barriers and warp collectives), which registers are live across them, and whether
//! the compiler supports the program at all.

use crate::ir::{BarKind, Inst, Op, Program, Src};

/// Why the compiler leaves a program to the interpreter.
pub(crate) type Unsupported = String;

/// How a suspension point is resolved by the block driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PointKind {
    /// `bar.sync`: every thread of the block (or the count) arrives first.
    Barrier,
    /// `shfl.sync`, `vote.sync`, `match.sync`, `activemask`: the lanes of a warp that wait at it together.
    Warp,
    /// Not a wait: a thread the vector code handed to the scalar code continues at this
    /// instruction (its live registers are in the spill area).
    Entry,
}

/// A place where a thread stops and the driver takes over: its kind, and the
/// registers live after it (saved per thread, restored when the thread resumes).
#[derive(Clone, Debug)]
pub(crate) struct Point {
    pub(crate) kind: PointKind,
    pub(crate) live: Vec<u32>,
}

/// The analysis result.
pub(crate) struct Analysis {
    /// Instructions that start a basic block.
    pub(crate) leader: Vec<bool>,
    /// Suspension points; a thread's resume index `k` (1-based) continues after `points[k-1]`.
    pub(crate) points: Vec<Point>,
    /// Index into `points` of each suspending instruction.
    pub(crate) point_at: std::collections::HashMap<u32, usize>,
    /// Registers live on entry to each instruction.
    live_in: Vec<Bits>,
    /// The program has warp collectives (the driver then runs warps one at a time).
    pub(crate) has_warp_points: bool,
    /// The program waits in `nanosleep` (a spin-waiting RPC client): `Auto` interprets it.
    pub(crate) prefers_interpreter: bool,
}

fn src_reg(s: &Src, out: &mut Vec<u32>) {
    if let Src::Reg(r) = s {
        out.push(*r);
    }
}

/// Registers `inst` reads and writes (the carry flag is `carry`). A guarded instruction also
/// reads its guard; its writes may not happen, which `analyze` accounts for.
pub(crate) fn uses_defs(inst: &Inst, carry: u32) -> (Vec<u32>, Vec<u32>) {
    let (mut u, mut d) = (Vec::new(), Vec::new());
    if let Some((g, _)) = inst.guard {
        u.push(g);
    }
    match &inst.op {
        Op::Un { d: x, a, .. } => {
            src_reg(a, &mut u);
            d.push(*x);
        }
        Op::Bin { d: x, a, b, .. } => {
            src_reg(a, &mut u);
            src_reg(b, &mut u);
            d.push(*x);
        }
        Op::Tern { d: x, a, b, c, .. } | Op::Lop3 { d: x, a, b, c, .. } => {
            for s in [a, b, c] {
                src_reg(s, &mut u);
            }
            d.push(*x);
        }
        Op::Bfi {
            d: x, a, b, c, e, ..
        } => {
            for s in [a, b, c, e] {
                src_reg(s, &mut u);
            }
            d.push(*x);
        }
        Op::Carry {
            d: x,
            a,
            b,
            cin,
            cout,
            ..
        } => {
            src_reg(a, &mut u);
            src_reg(b, &mut u);
            if *cin {
                u.push(carry);
            }
            d.push(*x);
            if *cout {
                d.push(carry);
            }
        }
        Op::MadCarry {
            d: x,
            a,
            b,
            c,
            cin,
            cout,
            ..
        } => {
            for s in [a, b, c] {
                src_reg(s, &mut u);
            }
            if *cin {
                u.push(carry);
            }
            d.push(*x);
            if *cout {
                d.push(carry);
            }
        }
        Op::Setp {
            p, q, a, b, comb, ..
        } => {
            src_reg(a, &mut u);
            src_reg(b, &mut u);
            if let Some((_, s, _)) = comb {
                src_reg(s, &mut u);
            }
            d.push(*p);
            d.extend(q);
        }
        Op::Cvta { d: x, a, .. } => {
            src_reg(a, &mut u);
            d.push(*x);
        }
        Op::Ld { d: xs, n, addr, .. } => {
            u.extend(addr.base);
            d.extend(xs.iter().take(*n as usize).filter(|r| **r != u32::MAX));
        }
        Op::St { s, n, addr, .. } => {
            u.extend(addr.base);
            for x in s.iter().take(*n as usize) {
                src_reg(x, &mut u);
            }
        }
        Op::Atom {
            d: x, addr, b, c, ..
        } => {
            u.extend(addr.base);
            src_reg(b, &mut u);
            src_reg(c, &mut u);
            d.extend(x);
        }
        Op::Bar { id, count, kind } => {
            src_reg(id, &mut u);
            if let Some(c) = count {
                src_reg(c, &mut u);
            }
            if let BarKind::Red { d: x, c, .. } = kind {
                src_reg(c, &mut u);
                d.push(*x);
            }
        }
        Op::Redux { d: x, a, mask, .. } => {
            src_reg(a, &mut u);
            src_reg(mask, &mut u);
            d.push(*x);
        }
        Op::Match {
            d: x, p, a, mask, ..
        } => {
            src_reg(a, &mut u);
            src_reg(mask, &mut u);
            d.push(*x);
            d.extend(p);
        }
        Op::WarpSync { mask } => src_reg(mask, &mut u),
        Op::Nanosleep { t } => src_reg(t, &mut u),
        Op::Shfl {
            d: x,
            p,
            a,
            b,
            c,
            mask,
            ..
        } => {
            for s in [a, b, c, mask] {
                src_reg(s, &mut u);
            }
            d.push(*x);
            d.extend(p);
        }
        Op::Vote { d: x, a, mask, .. } => {
            src_reg(a, &mut u);
            src_reg(mask, &mut u);
            d.push(*x);
        }
        Op::Activemask { d: x } => d.push(*x),
        Op::Bra { .. } | Op::Call(_) | Op::Ret | Op::Exit | Op::Nop | Op::Trap | Op::Service(_) => {
        }
        Op::CallIndirect { reg, .. } => u.push(*reg),
    }
    (u, d)
}

/// Instructions control may reach right after `pc` (calls: the callee and the return site;
/// returns: every return site, an over-approximation that keeps liveness sound).
fn successors(code: &[Inst], pc: usize, return_sites: &[u32], out: &mut Vec<u32>) {
    let next = pc as u32 + 1;
    let guarded = code[pc].guard.is_some();
    match &code[pc].op {
        Op::Bra { target } => {
            out.push(*target);
            if guarded {
                out.push(next);
            }
        }
        Op::Call(site) => {
            out.push(site.target);
            out.push(next);
        }
        Op::Ret => {
            out.extend_from_slice(return_sites);
            if guarded {
                out.push(next);
            }
        }
        Op::Exit | Op::Trap => {
            if guarded {
                out.push(next);
            }
        }
        _ => out.push(next),
    }
    out.retain(|s| (*s as usize) < code.len());
}

/// A fixed-size bit set over register slots.
#[derive(Clone, PartialEq)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    /// Whether register `i` is in the set.
    pub(crate) fn has(&self, i: u32) -> bool {
        self.0
            .get(i as usize / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
    fn intersect(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a &= *b;
        }
    }
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: u32) {
        self.0[i as usize / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: u32) {
        self.0[i as usize / 64] &= !(1 << (i % 64));
    }
    fn union(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a |= *b;
        }
    }
    fn minus(&mut self, o: &Bits) {
        for (a, b) in self.0.iter_mut().zip(&o.0) {
            *a &= !*b;
        }
    }
    fn ones(&self) -> Vec<u32> {
        let mut v = Vec::new();
        for (w, bits) in self.0.iter().enumerate() {
            let mut b = *bits;
            while b != 0 {
                v.push(w as u32 * 64 + b.trailing_zeros());
                b &= b - 1;
            }
        }
        v
    }
}

impl Analysis {
    /// For the vector code (which has no calls): per instruction, the registers whose spill
    /// slots hold their values on every path there, from a group's start (none) or from a
    /// barrier's or warp collective's resume (the live registers it reloads). A suspend or hand-over there need
    /// not store them again.
    pub(crate) fn stored(&self, prog: &Program) -> Vec<Bits> {
        let code = &prog.code;
        let regs = prog.regs as usize;
        // `None`: not reached yet (every register, for the intersection).
        let mut at: Vec<Option<Bits>> = vec![None; code.len()];
        if let Some(first) = at.first_mut() {
            *first = Some(Bits::new(regs));
        }
        let mut succ = Vec::new();
        let mut changed = true;
        while changed {
            changed = false;
            for pc in 0..code.len() {
                let Some(mut out) = at[pc].clone() else {
                    continue;
                };
                match (&code[pc].op, self.point_at.get(&(pc as u32))) {
                    (
                        Op::Bar { .. }
                        | Op::Shfl { .. }
                        | Op::Vote { .. }
                        | Op::Redux { .. }
                        | Op::Match { .. }
                        | Op::Activemask { .. },
                        Some(k),
                    ) => {
                        // The resume reloads the live registers; the instruction's results
                        // come from the driver.
                        out = Bits::new(regs);
                        for r in &self.points[*k].live {
                            out.set(*r);
                        }
                        for r in uses_defs(&code[pc], prog.carry_reg).1 {
                            out.clear(r);
                        }
                    }
                    _ => {
                        for r in uses_defs(&code[pc], prog.carry_reg).1 {
                            out.clear(r);
                        }
                    }
                }
                succ.clear();
                successors(code, pc, &[], &mut succ);
                for s in &succ {
                    let slot = &mut at[*s as usize];
                    match slot {
                        None => {
                            *slot = Some(out.clone());
                            changed = true;
                        }
                        Some(x) => {
                            let before = x.clone();
                            x.intersect(&out);
                            changed |= *x != before;
                        }
                    }
                }
            }
        }
        at.into_iter()
            .map(|x| x.unwrap_or_else(|| Bits::new(regs)))
            .collect()
    }

    /// For the vector code (which has no calls): per instruction, the registers it or a later
    /// one may read before they are written, on paths that reach no suspension point first.
    /// Reads include the stores of a suspension or hand-over: the live registers the spill
    /// area may not hold there (`stored`, from [`Self::stored`]), which they store from the
    /// group's variables (a hand-over may happen at any instruction). A group's resume
    /// reloads only these of its live registers: the others are neither read nor stored
    /// before the next suspension, so their spill slots keep them until a later resume.
    pub(crate) fn needed(&self, prog: &Program, stored: &[Bits]) -> Vec<Bits> {
        let code = &prog.code;
        let regs = prog.regs as usize;
        let ud: Vec<(Vec<u32>, Vec<u32>)> =
            code.iter().map(|i| uses_defs(i, prog.carry_reg)).collect();
        // Per instruction, what a hand-over there, or the suspension there, stores from the
        // variables: the live registers the spill area may not hold.
        let from_vars: Vec<Bits> = (0..code.len())
            .map(|pc| {
                let mut b = self.live_in[pc].clone();
                if let Some(k) = self.point_at.get(&(pc as u32)) {
                    for r in &self.points[*k].live {
                        b.set(*r);
                    }
                }
                if let Some(s) = stored.get(pc) {
                    b.minus(s);
                }
                b
            })
            .collect();
        let mut need = vec![Bits::new(regs); code.len()];
        let mut succ = Vec::new();
        let mut changed = true;
        while changed {
            changed = false;
            for pc in (0..code.len()).rev() {
                let mut out = Bits::new(regs);
                // A suspension point stores what the spill area lacks and reloads at its
                // resume: what follows it is not read from here.
                if !self.point_at.contains_key(&(pc as u32)) {
                    succ.clear();
                    successors(code, pc, &[], &mut succ);
                    for s in &succ {
                        out.union(&need[*s as usize]);
                    }
                }
                through(&mut out, code[pc].guard.is_some(), &ud[pc]);
                out.union(&from_vars[pc]);
                if out != need[pc] {
                    need[pc] = out;
                    changed = true;
                }
            }
        }
        need
    }

    /// The registers live on entry to instruction `pc` (none past the end).
    pub(crate) fn live_at(&self, pc: u32) -> Vec<u32> {
        self.live_in
            .get(pc as usize)
            .map_or_else(Vec::new, Bits::ones)
    }
}

/// Registers live after an instruction to those live before it: its definitions leave
/// (unless `guarded`: a guarded write may not happen), its uses join.
fn through(out: &mut Bits, guarded: bool, (uses, defs): &(Vec<u32>, Vec<u32>)) {
    if !guarded {
        for r in defs {
            out.clear(*r);
        }
    }
    for r in uses {
        out.set(*r);
    }
}

/// Analyses `prog`, or says why the compiler does not support it.
pub(crate) fn analyze(prog: &Program) -> Result<Analysis, Unsupported> {
    let code = &prog.code;
    let n = code.len();
    let mut leader = vec![false; n + 1];
    leader[0] = true;
    let mut return_sites = Vec::new();
    let mut point_pcs = Vec::new();
    let mut has_warp_points = false;
    let mut prefers_interpreter = false;
    for (pc, inst) in code.iter().enumerate() {
        let line = || match prog.source.get(pc) {
            Some((l, t)) => format!("line {l} `{t}`"),
            None => format!("instruction {pc}"),
        };
        match &inst.op {
            Op::Bra { target } => {
                leader[*target as usize] = true;
                leader[pc + 1] = true;
            }
            Op::CallIndirect { .. } => {
                return Err(format!(
                    "{}: an indirect call (calls through a function address run on the \
                     interpreter)",
                    line()
                ));
            }
            Op::Call(site) if site.save.is_some() => {
                return Err(format!(
                    "{}: a call in a recursive function (recursion runs on the interpreter)",
                    line()
                ));
            }
            Op::Call(site) => {
                leader[site.target as usize] = true;
                leader[pc + 1] = true;
                return_sites.push(pc as u32 + 1);
            }
            Op::Ret | Op::Exit | Op::Trap => leader[pc + 1] = true,
            // `bar.arrive` counts the thread in and goes on (a runtime call).
            Op::Bar {
                kind: BarKind::Arrive,
                ..
            } => {}
            Op::Bar { .. } => {
                leader[pc + 1] = true;
                point_pcs.push((pc as u32, PointKind::Barrier));
            }
            Op::Shfl { .. }
            | Op::Vote { .. }
            | Op::Match { .. }
            | Op::Redux { .. }
            | Op::Activemask { .. } => {
                leader[pc + 1] = true;
                has_warp_points = true;
                point_pcs.push((pc as u32, PointKind::Warp));
            }
            Op::WarpSync { .. } => {
                return Err(format!(
                    "{}: bar.warp.sync (lanes that wait for each other outside barriers)",
                    line()
                ));
            }
            Op::Nanosleep { .. } => prefers_interpreter = true,
            _ => {}
        }
    }
    // Backward liveness to a fixed point.
    let regs = prog.regs as usize;
    let mut live_in = vec![Bits::new(regs); n];
    let ud: Vec<(Vec<u32>, Vec<u32>)> = code.iter().map(|i| uses_defs(i, prog.carry_reg)).collect();
    let succ: Vec<Vec<u32>> = (0..n)
        .map(|pc| {
            let mut s = Vec::new();
            successors(code, pc, &return_sites, &mut s);
            s
        })
        .collect();
    let mut changed = true;
    let mut rounds = 0;
    while changed {
        changed = false;
        rounds += 1;
        if rounds > 10_000 {
            return Err("liveness did not converge".into());
        }
        for pc in (0..n).rev() {
            let mut out = Bits::new(regs);
            for s in &succ[pc] {
                out.union(&live_in[*s as usize]);
            }
            through(&mut out, code[pc].guard.is_some(), &ud[pc]);
            if out != live_in[pc] {
                live_in[pc] = out;
                changed = true;
            }
        }
    }
    let mut points = Vec::new();
    let mut point_at = std::collections::HashMap::new();
    for (pc, kind) in point_pcs {
        let after = pc as usize + 1;
        let live = if after < n {
            live_in[after].ones()
        } else {
            Vec::new()
        };
        point_at.insert(pc, points.len());
        points.push(Point { kind, live });
    }
    Ok(Analysis {
        leader,
        points,
        point_at,
        live_in,
        has_warp_points,
        prefers_interpreter,
    })
}
