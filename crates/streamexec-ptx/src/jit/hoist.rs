//! Range checks hoisted out of the group loop: device and shared accesses whose address is
//! an affine function of the thread index, checked once per block instead of once per group.
//!
//! A *site* is a vector-eligible `ld`/`st` (one 4- or 8-byte element, global or shared
//! memory) through a register whose lanes step by the element size, where that register is
//! built only from `%tid`, `%ntid`, `%ctaid`, `%nctaid`, kernel parameters and constants by
//! integer `add`, `sub`, `mul.lo`, `shl` by a constant, `mul.wide`, `mad.lo`, `mad.wide`,
//! integer `cvt`, `mov` and `cvta` of global memory. Every register on the way has one
//! unguarded definition (or several that are the same instruction) and is never read before
//! it is written, so each thread sees the same value at every execution of the site: the
//! plan's expression, evaluated with exact integers.
//!
//! Once per launch (and worker) the driver evaluates each site's expression as an affine
//! form in `(tid, ctaid)` ([`Plan::forms`]). Every intermediate value must stay within
//! `[0, 2^(w-1))` for each width `w` it is computed or read at, at every corner of the grid:
//! an affine form takes its extremes at the corners, so then no lane function wraps and zero-
//! and sign-extension agree in every thread. Before each block ([`Forms::block`]): when every
//! site's address range over the block lies, aligned, in one pinned device range (or in
//! shared memory), the driver runs the block's groups on a second vector function whose
//! sites load and store through `address + delta` with no check at all
//! (`lower/vector/mem.rs`); otherwise on the checked one. Both functions share spill slots,
//! states and hand-over entries, so nothing else changes: faults of the checked code, the
//! scalar code and other accesses stay exact.

use std::collections::HashMap;

use crate::ir::{Inst, Op, Program, Space, Src, Sreg, THREAD_PARAM_BASE};
use crate::jit::native::{self, N};
use crate::launch::Launch;

/// Sites a plan holds at most (the context's `hoist` array).
pub(crate) const MAX_SITES: usize = 16;

/// How deep a site's expression may nest.
const MAX_DEPTH: u32 = 24;

/// A value of a site's expression.
#[derive(Clone, Copy, Debug)]
enum Node {
    Const(u64),
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    /// A kernel parameter's bytes `at..at + bytes`, zero-extended.
    Param {
        at: u32,
        bytes: u32,
    },
    /// `a + b`, `a - b`, `a * b`, `a * b + c`, `a` (each operand read at its width; the
    /// result at `bits`).
    Add([(usize, u8); 2], u8),
    Sub([(usize, u8); 2], u8),
    Mul([(usize, u8); 2], u8),
    Mad([(usize, u8); 3], u8),
    Id((usize, u8), u8),
}

/// One hoisted access.
#[derive(Clone, Debug)]
pub(crate) struct Site {
    /// The instruction.
    pub(crate) pc: u32,
    space: Space,
    /// The element size (the lanes' step) and the address's constant offset.
    size: u64,
    offset: i64,
    /// The base register's value.
    root: usize,
}

/// The hoisted sites of a kernel and their expressions.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub(crate) sites: Vec<Site>,
    nodes: Vec<Node>,
}

/// Variables of an affine form: `%tid.{x,y,z}`, then `%ctaid.{x,y,z}`.
const VARS: usize = 6;

/// `c + k · (tid, ctaid)` with exact integers.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Aff {
    c: i128,
    k: [i128; VARS],
}

impl Aff {
    fn constant(c: i128) -> Aff {
        Aff { c, k: [0; VARS] }
    }

    fn var(v: usize) -> Aff {
        let mut k = [0; VARS];
        k[v] = 1;
        Aff { c: 0, k }
    }

    /// The least and greatest value over the box `0 <= v < n[v]`.
    fn bounds(&self, n: &[u64; VARS]) -> (i128, i128) {
        let (mut lo, mut hi) = (self.c, self.c);
        for (k, n) in self.k.iter().zip(n) {
            let far = k * (n.max(&1) - 1) as i128;
            lo += far.min(0);
            hi += far.max(0);
        }
        (lo, hi)
    }

    fn is_const(&self) -> bool {
        self.k == [0; VARS]
    }
}

/// A plan evaluated for one launch: per site, its address as `c + k · ctaid` plus the
/// least and greatest contribution of the thread index, all aligned to the element size.
pub(crate) struct Forms {
    sites: Vec<Form>,
}

struct Form {
    c: i128,
    k: [i128; 3],
    /// The thread index's part of the address over the block: `(least, greatest)`.
    tid: (i128, i128),
    space: Space,
    size: u64,
    /// Where the accesses land in every block, when that does not depend on the block.
    fixed: Option<Place>,
    /// The device range the last block found: first address, end, host minus device.
    last: (u64, u64, u64),
    /// When only `%ctaid.x` moves the address: the blocks `lo..=hi` (by `%ctaid.x`) whose
    /// accesses all lie in `last`'s range, so a block there needs two compares.
    span: (u64, u64),
}

/// Where a block's accesses at a site land.
#[derive(Clone, Copy)]
enum Place {
    /// Device memory, at host minus device address.
    Device(u64),
    /// The static or the dynamic shared memory.
    Static,
    Dynamic,
    /// Not provably in one range.
    Nowhere,
}

/// What a block's check reads besides the launch: its index and shared memory.
pub(crate) struct BlockEnv {
    pub(crate) ctaid: [u64; 3],
    /// The block's shared memory (static part first, the dynamic part at `dynamic_at`).
    pub(crate) shared: u64,
    pub(crate) dynamic_at: u64,
}

impl Form {
    /// Where the accesses to `[lo, end)` land (`last` caches the device range found).
    fn place(&mut self, l: &Launch, lo: i128, hi: i128) -> Place {
        if lo < 0 || hi >= 1 << 63 {
            return Place::Nowhere;
        }
        let (lo, end) = (lo as u64, hi as u64 + self.size);
        let dyn_lo = crate::DYNAMIC_SHARED_BASE;
        match self.space {
            Space::Global => {
                let last = &mut self.last;
                if !(lo >= last.0 && end <= last.1) {
                    let Some((first, stop, host)) = l.global(lo, end - lo) else {
                        return Place::Nowhere;
                    };
                    *last = (first, stop, (host as u64).wrapping_sub(first));
                }
                Place::Device(last.2)
            }
            Space::Shared if end <= l.prog.static_shared_bytes as u64 => Place::Static,
            Space::Shared if lo >= dyn_lo && end - dyn_lo <= l.dynamic_bytes as u64 => {
                Place::Dynamic
            }
            _ => Place::Nowhere,
        }
    }

    /// The blocks (by `%ctaid.x`, the address's only block term, `kx` per block) whose
    /// accesses all lie in the range `last`: `lo..=hi`, empty if none.
    fn blocks_in_last(&self, kx: i128) -> (u64, u64) {
        let (first, stop) = (self.last.0 as i128, (self.last.1 as i128).min(1 << 63));
        // Block `b` touches `[c + tid.0 + kx b, c + tid.1 + size + kx b)`.
        let (lo0, end0) = (self.c + self.tid.0, self.c + self.tid.1 + self.size as i128);
        let (lo, hi) = if kx > 0 {
            (
                (first - lo0 + kx - 1).div_euclid(kx),
                (stop - end0).div_euclid(kx),
            )
        } else {
            let m = -kx;
            (
                (end0 - stop + m - 1).div_euclid(m),
                (lo0 - first).div_euclid(m),
            )
        };
        let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
        match (lo.max(0), hi) {
            (lo, hi) if lo <= hi && hi >= 0 => (clamp(lo), clamp(hi)),
            _ => (1, 0),
        }
    }
}

impl Forms {
    /// For each site, host address minus device address for every access the site can
    /// make in this block, when all of them lie aligned in one range of memory; `None` when
    /// any site's cannot be proven so (the block then runs on the checked code).
    pub(crate) fn block(&mut self, l: &Launch, env: &BlockEnv) -> Option<[u64; MAX_SITES]> {
        let mut out = [0u64; MAX_SITES];
        for (k, f) in self.sites.iter_mut().enumerate() {
            let place = match f.fixed {
                Some(p) => p,
                None if (f.span.0..=f.span.1).contains(&env.ctaid[0]) => Place::Device(f.last.2),
                None => {
                    let mut c = f.c;
                    for d in 0..3 {
                        c += f.k[d] * env.ctaid[d] as i128;
                    }
                    let p = f.place(l, c + f.tid.0, c + f.tid.1);
                    if let (Place::Device(_), [kx, 0, 0]) = (p, f.k) {
                        f.span = f.blocks_in_last(kx);
                    }
                    p
                }
            };
            out[k] = match place {
                Place::Device(delta) => delta,
                Place::Static => env.shared,
                Place::Dynamic => {
                    (env.shared + env.dynamic_at).wrapping_sub(crate::DYNAMIC_SHARED_BASE)
                }
                Place::Nowhere => return None,
            };
        }
        Some(out)
    }
}

impl Plan {
    /// The sites of `prog` among the registers whose lanes step (`steps`, from
    /// `vector::shape`), with `live_in` the registers read before written.
    pub(crate) fn of(prog: &Program, steps: &[Option<(i64, u32)>], live_in: &[u32]) -> Plan {
        let mut defs: Vec<Vec<u32>> = vec![Vec::new(); prog.regs as usize];
        for (pc, i) in prog.code.iter().enumerate() {
            for d in super::analysis::uses_defs(i, prog.carry_reg).1 {
                defs[d as usize].push(pc as u32);
            }
        }
        // A register read before written holds 0 at first: a definition of its own.
        for r in live_in {
            defs[*r as usize].push(u32::MAX);
        }
        let mut b = Builder {
            prog,
            defs,
            memo: HashMap::new(),
            plan: Plan::default(),
        };
        for (pc, i) in prog.code.iter().enumerate() {
            if b.plan.sites.len() == MAX_SITES {
                break;
            }
            let (space, ty, n, addr) = match &i.op {
                Op::Ld {
                    space, ty, n, addr, ..
                }
                | Op::St {
                    space, ty, n, addr, ..
                } => (*space, *ty, *n, addr),
                _ => continue,
            };
            let size = ty.bytes() as u64;
            let eligible = super::vector::vector_access(space, ty, n as usize);
            let Some(r) = addr.base.filter(|_| eligible) else {
                continue;
            };
            if steps.get(r as usize).copied().flatten().map(|s| s.0) != Some(size as i64) {
                continue;
            }
            if let Some(root) = b.reg(r, 0) {
                b.plan.sites.push(Site {
                    pc: pc as u32,
                    space,
                    size,
                    offset: addr.offset,
                    root,
                });
            }
        }
        b.plan
    }

    /// The sites' forms for launch `l`, when every value on the way stays in range in every
    /// thread of the grid.
    pub(crate) fn forms(&self, l: &Launch) -> Option<Forms> {
        let mut n = [0u64; VARS];
        n[..3].copy_from_slice(&dims(l.block));
        n[3..].copy_from_slice(&dims(l.grid));
        // One block: the box the thread index spans.
        let mut block = [1u64; VARS];
        block[..3].copy_from_slice(&n[..3]);
        let mut vals: Vec<Option<Aff>> = vec![None; self.nodes.len()];
        let sites = self
            .sites
            .iter()
            .map(|s| {
                let v = self.eval(s.root, l, &n, &mut vals)?;
                let a = Aff {
                    c: v.c + s.offset as i128,
                    k: v.k,
                };
                // Aligned everywhere when the constant and every step are.
                let sz = s.size as i128;
                if a.c.rem_euclid(sz) != 0 || a.k.iter().any(|k| k % sz != 0) {
                    return None;
                }
                let mut t = Aff::constant(0);
                t.k[..3].copy_from_slice(&a.k[..3]);
                let mut f = Form {
                    c: a.c,
                    k: [a.k[3], a.k[4], a.k[5]],
                    tid: t.bounds(&block),
                    space: s.space,
                    size: s.size,
                    fixed: None,
                    last: (u64::MAX, 0, 0),
                    span: (1, 0),
                };
                if f.k == [0; 3] {
                    // The same addresses in every block: placed once for the launch (if
                    // nowhere, no block passes; a guarded `s[t + stride]` can be so).
                    match f.place(l, f.c + f.tid.0, f.c + f.tid.1) {
                        Place::Nowhere => return None,
                        p => f.fixed = Some(p),
                    }
                }
                Some(f)
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Forms { sites })
    }

    /// Node `i`'s affine form, when every value on the way stays in range over the grid
    /// `n` (threads per block, blocks).
    fn eval(&self, i: usize, l: &Launch, n: &[u64; VARS], vals: &mut [Option<Aff>]) -> Option<Aff> {
        if let Some(v) = vals[i] {
            return Some(v);
        }
        let read = |me: &Self, (j, bits): (usize, u8), vals: &mut [Option<Aff>]| {
            let v = me.eval(j, l, n, vals)?;
            fits(&v, bits, n).then_some(v)
        };
        let (v, bits) = match self.nodes[i] {
            Node::Const(c) => (Aff::constant(c as i128), 64),
            Node::Tid(d) => (Aff::var(d as usize), 64),
            Node::Ctaid(d) => (Aff::var(3 + d as usize), 64),
            Node::Ntid(d) => (Aff::constant(n[d as usize] as i128), 64),
            Node::Nctaid(d) => (Aff::constant(n[3 + d as usize] as i128), 64),
            Node::Param { at, bytes } => {
                let p = l.params.get(at as usize..(at + bytes) as usize)?;
                let mut le = [0u8; 8];
                le[..p.len()].copy_from_slice(p);
                // At its own width: a signed 32-bit parameter's slot is sign-extended.
                (
                    Aff::constant(u64::from_le_bytes(le) as i128),
                    8 * bytes as u8,
                )
            }
            Node::Add([a, b], bits) => {
                let (a, b) = (read(self, a, vals)?, read(self, b, vals)?);
                (add(&a, &b, 1), bits)
            }
            Node::Sub([a, b], bits) => {
                let (a, b) = (read(self, a, vals)?, read(self, b, vals)?);
                (add(&a, &b, -1), bits)
            }
            Node::Mul([a, b], bits) => {
                let (a, b) = (read(self, a, vals)?, read(self, b, vals)?);
                (mul(&a, &b)?, bits)
            }
            Node::Mad([a, b, c], bits) => {
                let (a, b, c) = (
                    read(self, a, vals)?,
                    read(self, b, vals)?,
                    read(self, c, vals)?,
                );
                (add(&mul(&a, &b)?, &c, 1), bits)
            }
            Node::Id(a, bits) => (read(self, a, vals)?, bits),
        };
        if !fits(&v, bits, n) {
            return None;
        }
        vals[i] = Some(v);
        Some(v)
    }
}

/// Whether `v` lies in `[0, 2^(bits-1))` over the grid: no wrap at `bits`, and both
/// extensions of it agree.
fn fits(v: &Aff, bits: u8, n: &[u64; VARS]) -> bool {
    let (lo, hi) = v.bounds(n);
    lo >= 0 && hi < 1i128 << (bits - 1)
}

fn dims(d: crate::dim::Dim3) -> [u64; 3] {
    [d.x as u64, d.y as u64, d.z as u64]
}

fn add(a: &Aff, b: &Aff, sign: i128) -> Aff {
    Aff {
        c: a.c + sign * b.c,
        k: std::array::from_fn(|d| a.k[d] + sign * b.k[d]),
    }
}

/// `a * b` when one side is the same in every thread of the grid (operands are below
/// 2^63, so the product fits).
fn mul(a: &Aff, b: &Aff) -> Option<Aff> {
    let (v, s) = match (a.is_const(), b.is_const()) {
        (true, _) => (b, a.c),
        (_, true) => (a, b.c),
        _ => return None,
    };
    Some(Aff {
        c: v.c * s,
        k: v.k.map(|k| k * s),
    })
}

/// Builds a plan's nodes from registers' single definitions.
struct Builder<'p> {
    prog: &'p Program,
    /// Per register: the PCs of its definitions (`u32::MAX` for a live-in).
    defs: Vec<Vec<u32>>,
    memo: HashMap<u32, Option<usize>>,
    plan: Plan,
}

impl Builder<'_> {
    fn push(&mut self, n: Node) -> usize {
        self.plan.nodes.push(n);
        self.plan.nodes.len() - 1
    }

    /// Register `r`'s node, when its one definition is one of the plan's operations.
    fn reg(&mut self, r: u32, depth: u32) -> Option<usize> {
        if let Some(m) = self.memo.get(&r) {
            return *m;
        }
        let node = self.def(r, depth);
        self.memo.insert(r, node);
        node
    }

    fn def(&mut self, r: u32, depth: u32) -> Option<usize> {
        let pcs = &self.defs[r as usize];
        let at = |pc: u32| self.prog.code.get(pc as usize);
        let inst: &Inst = at(*pcs.first()?)?;
        if depth > MAX_DEPTH || inst.guard.is_some() {
            return None;
        }
        // Several definitions only when they are the same instruction (`tx = threadIdx.x`
        // at each entry of a loop): the register holds one value either way.
        let same = |pc: &u32| at(*pc).is_some_and(|i| format!("{i:?}") == format!("{inst:?}"));
        if pcs.len() > 1 && !pcs[1..].iter().all(same) {
            return None;
        }
        let d = depth + 1;
        match &inst.op {
            Op::Un { f, a, .. } => match native::kind(*f as usize)? {
                N::Mov => self.src(a, d),
                N::CvtII { sbits, dbits, .. }
                    if matches!(sbits, 32 | 64) && matches!(dbits, 32 | 64) =>
                {
                    let a = self.src(a, d)?;
                    Some(self.push(Node::Id((a, sbits), dbits)))
                }
                _ => None,
            },
            Op::Bin { f, a, b, .. } => {
                let kind = native::kind(*f as usize)?;
                match kind {
                    N::Bin { k, bits, .. } if k <= 2 && matches!(bits, 32 | 64) => {
                        let (a, b) = (self.src(a, d)?, self.src(b, d)?);
                        let ops = [(a, bits), (b, bits)];
                        Some(self.push(match k {
                            0 => Node::Add(ops, bits),
                            1 => Node::Sub(ops, bits),
                            _ => Node::Mul(ops, bits),
                        }))
                    }
                    N::Shift {
                        left: true, bits, ..
                    } if matches!(bits, 32 | 64) => {
                        let m = match b {
                            Src::Imm(m) if *m < bits as u64 - 1 => *m,
                            _ => return None,
                        };
                        let a = self.src(a, d)?;
                        let c = self.push(Node::Const(1 << m));
                        Some(self.push(Node::Mul([(a, bits), (c, 64)], bits)))
                    }
                    N::MulWide { bits: 32, .. } => {
                        let (a, b) = (self.src(a, d)?, self.src(b, d)?);
                        Some(self.push(Node::Mul([(a, 32), (b, 32)], 64)))
                    }
                    _ => None,
                }
            }
            Op::Tern { f, a, b, c, .. } => {
                let (ab, cb, bits) = match native::kind(*f as usize)? {
                    N::MadLo { bits, .. } if matches!(bits, 32 | 64) => (bits, bits, bits),
                    N::MadWide { bits: 32, .. } => (32, 64, 64),
                    _ => return None,
                };
                let (a, b, c) = (self.src(a, d)?, self.src(b, d)?, self.src(c, d)?);
                Some(self.push(Node::Mad([(a, ab), (b, ab), (c, cb)], bits)))
            }
            // Global memory's window is 0: the conversion keeps the value.
            Op::Cvta {
                space: Space::Global,
                a,
                ..
            } => self.src(a, d),
            Op::Ld {
                space: Space::Param,
                ty,
                n: 1,
                addr,
                ..
            } if addr.base.is_none()
                && ty.int()
                && matches!(ty.bytes(), 4 | 8)
                && (addr.offset as u64) < THREAD_PARAM_BASE
                && addr.offset >= 0
                && addr.offset as u64 + ty.bytes() as u64 <= self.prog.param_bytes as u64 =>
            {
                Some(self.push(Node::Param {
                    at: addr.offset as u32,
                    bytes: ty.bytes(),
                }))
            }
            _ => None,
        }
    }

    fn src(&mut self, s: &Src, depth: u32) -> Option<usize> {
        let n = match *s {
            Src::Reg(r) => return self.reg(r, depth),
            Src::Imm(v) => Node::Const(v),
            Src::Sreg(Sreg::Tid(d)) if d < 3 => Node::Tid(d),
            Src::Sreg(Sreg::Ntid(d)) if d < 3 => Node::Ntid(d),
            Src::Sreg(Sreg::Ctaid(d)) if d < 3 => Node::Ctaid(d),
            Src::Sreg(Sreg::Nctaid(d)) if d < 3 => Node::Nctaid(d),
            Src::Sreg(Sreg::Const(v)) => Node::Const(v as u64),
            _ => return None,
        };
        Some(self.push(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `%ctaid.x * %ntid.x + %tid.x` on a grid of `blocks` blocks of `threads`.
    fn index(threads: u64, blocks: u64) -> (Aff, [u64; VARS]) {
        let mut k = [0; VARS];
        k[0] = 1;
        k[3] = threads as i128;
        (Aff { c: 0, k }, [threads, 1, 1, blocks, 1, 1])
    }

    #[test]
    fn a_value_fits_only_when_no_thread_of_the_grid_wraps_or_crosses_the_sign_bit() {
        // 2^31 threads in all: the last index is 2^31 - 1.
        let (i, n) = index(256, 1 << 23);
        assert!(fits(&i, 32, &n));
        assert!(fits(&i, 64, &n));
        // One block more reaches 2^31: a 32-bit read could see it negative.
        let (i, n) = index(256, (1 << 23) + 1);
        assert!(!fits(&i, 32, &n));
        assert!(fits(&i, 64, &n));
        // Four bytes per element: 2^33 at the end, too wide for 32 bits, fine in 64.
        let (i, n) = index(256, 1 << 23);
        let bytes = mul(&i, &Aff::constant(4)).unwrap();
        assert!(!fits(&bytes, 32, &n));
        assert!(fits(&bytes, 64, &n));
        // Thread 0 of block 0 at `i - 1` is below 0.
        let below = add(&i, &Aff::constant(1), -1);
        assert!(!fits(&below, 64, &n));
        // Counting down from the last index stays in range.
        let down = add(&Aff::constant((1 << 31) - 1), &i, -1);
        assert_eq!(down.bounds(&n), (0, (1 << 31) - 1));
        assert!(fits(&down, 32, &n));
    }

    /// The blocks a device range admits are exactly those whose every access lies in it.
    #[test]
    fn the_blocks_a_range_admits_are_those_whose_accesses_lie_in_it() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
            let size = [4u64, 8][next(2) as usize];
            let kx = (next(64) as i128 - 32) * size as i128;
            let threads = next(300) as i128;
            let first = next(1 << 20);
            let f = Form {
                c: next(1 << 21) as i128,
                k: [kx, 0, 0],
                tid: (0, threads * size as i128),
                space: Space::Global,
                size,
                fixed: None,
                last: (first, first + next(1 << 16), 0),
                span: (1, 0),
            };
            if kx == 0 {
                continue;
            }
            let (lo, hi) = f.blocks_in_last(kx);
            for b in 0..400u64 {
                let base = f.c + kx * b as i128;
                let inside = base + f.tid.0 >= f.last.0 as i128
                    && base + f.tid.1 + size as i128 <= f.last.1 as i128;
                assert_eq!(
                    (lo..=hi).contains(&b),
                    inside,
                    "block {b}, kx {kx}: {lo}..={hi}"
                );
            }
        }
    }

    #[test]
    fn a_product_is_affine_only_when_one_side_is_the_same_in_every_thread() {
        let (i, _) = index(128, 4);
        assert!(mul(&i, &i).is_none());
        let p = mul(&Aff::constant(8), &i).unwrap();
        assert_eq!(p.k[0], 8);
        assert_eq!(p.k[3], 8 * 128);
        assert_eq!(
            mul(&Aff::constant(3), &Aff::constant(5)),
            Some(Aff::constant(15))
        );
    }
}
