//! The opt-in data-race checker (`StreamExecutor::set_race_check(true)`).
//!
//! Rules, per byte of shared and global memory:
//! * Inside a block, accesses are compared between barriers (a barrier release starts a new
//!   epoch). Two accesses conflict when they come from different threads, at least one
//!   writes, they are not both atomic, and they are not ordered.
//! * Ordered means: the same thread, or two lanes of the same warp at *different* warp
//!   instructions (a warp runs its lanes in lock-step, so an earlier instruction's accesses
//!   complete before a later one's). Lanes of one warp at the *same* instruction are not
//!   ordered: two of them writing one byte is a race.
//! * Across blocks of one launch (global memory only), any two non-atomic accesses from
//!   different blocks, at least one a write, to the same byte race; atomics and fences are
//!   not taken as ordering.
//!
//! The first conflict found ends the launch with a `KernelFault` whose detail starts with
//! "data race". Each access costs hash-map updates per byte, so the checker is for testing.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::ir::WARP;

/// One recorded access.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    /// Linear thread index in the block.
    pub(crate) tid: u32,
    /// The warp's instruction counter.
    pub(crate) step: u64,
    /// Instruction index.
    pub(crate) pc: u32,
    pub(crate) write: bool,
    pub(crate) atomic: bool,
}

#[derive(Default, Clone, Copy)]
struct Cell {
    write: Option<Access>,
    reads: [Option<Access>; 2],
}

fn ordered(a: &Access, b: &Access) -> bool {
    a.tid == b.tid || (a.tid / WARP as u32 == b.tid / WARP as u32 && a.step != b.step)
}

fn conflict(prev: &Access, cur: &Access) -> bool {
    (prev.write || cur.write) && !(prev.atomic && cur.atomic) && !ordered(prev, cur)
}

/// A race between two accesses; formatted by the block scheduler.
#[derive(Debug)]
pub(crate) struct Race {
    pub(crate) space: &'static str,
    pub(crate) addr: u64,
    pub(crate) first: Access,
    pub(crate) second: Access,
    /// Block of the first access when it came from another block (linear index).
    pub(crate) other_block: Option<u64>,
}

/// One block's records.
#[derive(Default)]
pub(crate) struct RaceBlock {
    shared: HashMap<u64, Cell>,
    global: HashMap<u64, Cell>,
    /// Non-atomic global accesses over the whole block: (first write, first read) per byte.
    summary: HashMap<u64, (Option<Access>, Option<Access>)>,
    /// The first race found (the access that faulted reports it).
    pub(crate) found: Option<Race>,
}

fn record(
    map: &mut HashMap<u64, Cell>,
    space: &'static str,
    addr: u64,
    bytes: usize,
    acc: Access,
) -> Result<(), Race> {
    for a in addr..addr + bytes as u64 {
        let cell = map.entry(a).or_default();
        let mut hit = cell.write.filter(|w| conflict(w, &acc));
        if hit.is_none() && acc.write {
            hit = cell
                .reads
                .iter()
                .flatten()
                .copied()
                .find(|r| conflict(r, &acc));
        }
        if let Some(first) = hit {
            return Err(Race {
                space,
                addr: a,
                first,
                second: acc,
                other_block: None,
            });
        }
        if acc.write {
            cell.write = Some(acc);
        } else {
            match cell.reads {
                [None, _] => cell.reads[0] = Some(acc),
                [Some(r), None] if r.tid != acc.tid => cell.reads[1] = Some(acc),
                _ => {}
            }
        }
    }
    Ok(())
}

impl RaceBlock {
    /// Records a shared-memory access of `bytes` at shared offset `addr`.
    pub(crate) fn shared(&mut self, addr: u64, bytes: usize, acc: Access) -> Result<(), String> {
        record(&mut self.shared, "shared", addr, bytes, acc).map_err(|r| self.report(r))
    }

    /// Records a global-memory access.
    pub(crate) fn global(&mut self, addr: u64, bytes: usize, acc: Access) -> Result<(), String> {
        if !acc.atomic {
            for a in addr..addr + bytes as u64 {
                let e = self.summary.entry(a).or_default();
                if acc.write {
                    e.0.get_or_insert(acc);
                } else {
                    e.1.get_or_insert(acc);
                }
            }
        }
        record(&mut self.global, "global", addr, bytes, acc).map_err(|r| self.report(r))
    }

    fn report(&mut self, r: Race) -> String {
        self.found = Some(r);
        "data race".into()
    }

    /// A barrier released: a new epoch.
    pub(crate) fn barrier(&mut self) {
        self.shared.clear();
        self.global.clear();
    }
}

/// An access of a block (linear block index).
type BlockAccess = Option<(u64, Access)>;

/// Launch-wide records for races between blocks.
#[derive(Default)]
pub(crate) struct RaceGrid {
    /// Per byte: (block, first write), (block, first read).
    bytes: Mutex<HashMap<u64, (BlockAccess, BlockAccess)>>,
}

impl RaceGrid {
    /// Folds a finished block's global accesses in; the first cross-block conflict.
    pub(crate) fn finish_block(&self, block: u64, b: &RaceBlock) -> Option<Race> {
        let mut map = self.bytes.lock();
        let mut keys: Vec<&u64> = b.summary.keys().collect();
        keys.sort_unstable();
        for a in keys {
            let (w, r) = b.summary[a];
            let e = map.entry(*a).or_default();
            let other = |x: BlockAccess| x.filter(|(ob, _)| *ob != block);
            let hit = match (w, r) {
                (Some(w), _) => other(e.0).or(other(e.1)).map(|o| (o, w)),
                (None, Some(r)) => other(e.0).map(|o| (o, r)),
                _ => None,
            };
            if let Some(((ob, first), second)) = hit {
                return Some(Race {
                    space: "global",
                    addr: *a,
                    first,
                    second,
                    other_block: Some(ob),
                });
            }
            if let Some(w) = w {
                e.0.get_or_insert((block, w));
            }
            if let Some(r) = r {
                e.1.get_or_insert((block, r));
            }
        }
        None
    }
}
