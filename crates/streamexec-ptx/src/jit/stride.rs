//! Registers whose lanes step by a constant: in every group, lane `j`'s 64-bit slot is lane
//! 0's plus `j * s` (modulo 2^64) for an `s` known when the kernel compiles (`%tid.x` steps by
//! 1, `mul.wide.u32 %rd, %r, 4` of it by 4, a pointer plus that by 4 again). The vector code
//! keeps such a register as lane 0's scalar alone, computes it with scalar instructions, and
//! knows without a run-time test that accesses through it touch consecutive elements.
//!
//! The claim holds for groups that entered the vector code together and stayed together
//! (the vector code never runs lanes apart). Lanes that come back to a group from the scalar
//! code, after a barrier, may have taken different paths there: the group's resume checks
//! the claim on their spilled slots before it trusts it (`lower/vector/mod.rs`).
//!
//! A 32-bit result is kept only when its lanes provably neither wrap nor cross 2^31: then
//! both its zero- and sign-extended slots step by `s` too. The proof uses the trailing zeros
//! of lane 0's value: a group's first `%tid.x` is a multiple of [`LANES`] (the vector code
//! runs only blocks whose `ntid.x` is one), so `%ctaid.x * %ntid.x + %tid.x` qualifies.

use crate::ir::{Op, Program, Src, Sreg};
use crate::jit::native::{self, N};

/// Threads a group of the vector code runs at once: one 128-bit vector of 32-bit lanes.
pub(crate) const LANES: usize = 4;

/// What is known of a register's lanes: lane `j` = lane 0 + `j * s`, and lane 0 has at
/// least `tz` trailing zero bits.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lanes {
    /// No definition seen yet.
    None,
    Step {
        s: i64,
        tz: u32,
    },
    /// Anything.
    Any,
}

use Lanes::{Any, None as Unset, Step};

impl Lanes {
    fn join(self, o: Lanes) -> Lanes {
        match (self, o) {
            (Unset, x) | (x, Unset) => x,
            (Step { s: a, tz: x }, Step { s: b, tz: y }) if a == b => Step { s: a, tz: x.min(y) },
            _ => Any,
        }
    }

    fn uniform(tz: u32) -> Lanes {
        Step { s: 0, tz }
    }

    /// A 32-bit result whose low 32 bits step by `s` (mod 2^32) from a lane 0 with `tz`
    /// trailing zeros: kept when no lane wraps or crosses 2^31 (so both extensions of the
    /// slot step by `s` too).
    fn narrow(s: i64, tz: u32) -> Lanes {
        let s32 = s as u32 as u64;
        let m = tz.min(31);
        if s32 == 0 {
            Lanes::uniform(tz.min(32))
        } else if s32 < 1 << 31 && (LANES as u64 - 1) * s32 < 1 << m {
            Step {
                s: s32 as i64,
                tz: tz.min(32),
            }
        } else {
            Any
        }
    }

    /// The low 32 bits, extended exactly (for a widening `cvt` or `mul.wide`): `(s, tz)`
    /// when they neither wrap nor cross 2^31 between the lanes.
    fn wide(self) -> Option<(i64, u32)> {
        match self {
            Step { s, tz } => match Lanes::narrow(s, tz) {
                Step { s, tz } => Some((s, tz)),
                _ => None,
            },
            _ => None,
        }
    }
}

fn tz_of(v: u64) -> u32 {
    v.trailing_zeros()
}

/// Per register: `Some((s, tz))` when its lanes step by `s` (0 for uniform registers) and
/// lane 0 has at least `tz` trailing zero bits. `live_in` are the registers a kernel may read
/// before writing them: they start as zero in every lane, which is one more definition
/// (uniform).
pub(crate) fn strides(
    prog: &Program,
    varying: &[bool],
    live_in: &[u32],
) -> Vec<Option<(i64, u32)>> {
    let n = prog.regs as usize;
    let mut at = vec![Unset; n];
    for r in live_in {
        at[*r as usize] = Lanes::uniform(64);
    }
    let mut changed = true;
    while changed {
        changed = false;
        for i in &prog.code {
            let (_, defs) = super::analysis::uses_defs(i, prog.carry_reg);
            if defs.is_empty() {
                continue;
            }
            let r = transfer(&i.op, &at);
            for d in defs {
                let d = d as usize;
                // A uniform register is uniform whatever the rules above could prove.
                let r = match (varying[d], r) {
                    (false, Step { s: 0, tz }) => Lanes::uniform(tz),
                    (false, _) => Lanes::uniform(0),
                    (true, r) => r,
                };
                let j = at[d].join(r);
                if j != at[d] {
                    at[d] = j;
                    changed = true;
                }
            }
        }
    }
    at.into_iter()
        .map(|x| match x {
            Step { s, tz } => Some((s, tz)),
            _ => Option::None,
        })
        .collect()
}

fn src(s: &Src, at: &[Lanes]) -> Lanes {
    match s {
        // `Unset`: not yet defined on this pass (optimistic; the fixed point corrects it).
        Src::Reg(r) => at[*r as usize],
        Src::Imm(v) => Lanes::uniform(tz_of(*v)),
        Src::Sreg(Sreg::Tid(0) | Sreg::Laneid) => Step {
            s: 1,
            tz: LANES.trailing_zeros(),
        },
        Src::Sreg(Sreg::Ntid(0)) => Lanes::uniform(LANES.trailing_zeros()),
        Src::Sreg(Sreg::Const(v)) => Lanes::uniform(tz_of(*v as u64)),
        Src::Sreg(Sreg::Lanemask(_)) => Any,
        Src::Sreg(_) => Lanes::uniform(0),
    }
}

fn imm(s: &Src) -> Option<u64> {
    match s {
        Src::Imm(v) => Some(*v),
        _ => Option::None,
    }
}

/// `a * b` where one side is a constant (or both uniform): `(s, tz)`.
fn mul(a: (&Src, Lanes), b: (&Src, Lanes)) -> Option<(i64, u32)> {
    match (a.1, b.1) {
        (Step { s: 0, tz: x }, Step { s: 0, tz: y }) => Some((0, (x + y).min(64))),
        (Step { s, tz }, _) if imm(b.0).is_some() => {
            let c = imm(b.0)?;
            Some((s.wrapping_mul(c as i64), (tz + tz_of(c)).min(64)))
        }
        (_, Step { s, tz }) if imm(a.0).is_some() => {
            let c = imm(a.0)?;
            Some((s.wrapping_mul(c as i64), (tz + tz_of(c)).min(64)))
        }
        _ => Option::None,
    }
}

/// `mul.wide` of 32-bit sides, each extended exactly (a constant side below 2^31, whose two
/// extensions agree).
fn mul_wide(a: (&Src, Lanes), b: (&Src, Lanes)) -> Option<(i64, u32)> {
    let small = |s: &Src| imm(s).is_none_or(|c| c < 1 << 31);
    if !small(a.0) || !small(b.0) {
        return Option::None;
    }
    let w = |x: Lanes| x.wide().map_or(Any, |(s, tz)| Step { s, tz });
    mul((a.0, w(a.1)), (b.0, w(b.1)))
}

fn transfer(op: &Op, at: &[Lanes]) -> Lanes {
    let step = |x: Option<(i64, u32)>, bits: u8| match x {
        Some((s, tz)) if bits == 32 => Lanes::narrow(s, tz),
        Some((s, tz)) if bits == 64 => Step { s, tz },
        _ => Any,
    };
    let both = |a: Lanes, b: Lanes, f: fn(i64, i64) -> i64| match (a, b) {
        (Step { s: x, tz: p }, Step { s: y, tz: q }) => Some((f(x, y), p.min(q))),
        _ => Option::None,
    };
    match op {
        Op::Un { f, a, .. } => {
            let x = src(a, at);
            if x == Unset {
                return Unset;
            }
            match native::kind(*f as usize) {
                Some(N::Mov) => x,
                Some(N::CvtII { sbits, dbits, .. }) => match (sbits, dbits, x) {
                    (_, _, Step { s: 0, tz }) => Lanes::uniform(tz.min(dbits as u32)),
                    (32, 64, x) => step(x.wide(), 64),
                    (32 | 64, 32, Step { s, tz }) => Lanes::narrow(s, tz),
                    (64, 64, x) => x,
                    _ => Any,
                },
                _ => uniform_or_any(&[x]),
            }
        }
        Op::Bin { f, a, b, .. } => {
            let (x, y) = (src(a, at), src(b, at));
            if x == Unset || y == Unset {
                return Unset;
            }
            match native::kind(*f as usize) {
                Some(N::Bin { k: 0, bits, .. }) => step(both(x, y, i64::wrapping_add), bits),
                Some(N::Bin { k: 1, bits, .. }) => step(both(x, y, i64::wrapping_sub), bits),
                Some(N::Bin { k: 2, bits, .. }) => step(mul((a, x), (b, y)), bits),
                Some(N::Shift {
                    left: true, bits, ..
                }) => match (x, imm(b)) {
                    (Step { s, tz }, Some(m)) if m < bits as u64 => step(
                        Some((s.wrapping_shl(m as u32), (tz + m as u32).min(64))),
                        bits,
                    ),
                    _ => uniform_or_any(&[x, y]),
                },
                Some(N::MulWide { bits: 32, .. }) => step(mul_wide((a, x), (b, y)), 64),
                _ => uniform_or_any(&[x, y]),
            }
        }
        Op::Tern { f, a, b, c, .. } => {
            let (x, y, z) = (src(a, at), src(b, at), src(c, at));
            if x == Unset || y == Unset || z == Unset {
                return Unset;
            }
            match native::kind(*f as usize) {
                Some(N::MadLo { bits, .. }) => {
                    let p = mul((a, x), (b, y)).map(|(s, tz)| Step { s, tz });
                    step(p.and_then(|p| both(p, z, i64::wrapping_add)), bits)
                }
                Some(N::MadWide { bits: 32, .. }) => {
                    let p = mul_wide((a, x), (b, y)).map(|(s, tz)| Step { s, tz });
                    step(p.and_then(|p| both(p, z, i64::wrapping_add)), 64)
                }
                _ => uniform_or_any(&[x, y, z]),
            }
        }
        // Adds a constant window (a multiple of 2^60, or 0 for global memory).
        Op::Cvta { a, .. } => match src(a, at) {
            Step { s, tz } => Step { s, tz: tz.min(60) },
            x => x,
        },
        _ => Any,
    }
}

/// Uniform when every operand is (trailing zeros unknown), else anything.
fn uniform_or_any(xs: &[Lanes]) -> Lanes {
    if xs.iter().all(|x| matches!(x, Step { s: 0, .. })) {
        Lanes::uniform(0)
    } else {
        Any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_keeps_only_steps_that_cannot_wrap_or_cross_the_sign_bit() {
        // Lane 0 a multiple of 4, steps of 1: lanes 4k..4k+3 never cross 2^31 or 2^32.
        assert_eq!(Lanes::narrow(1, 2), Step { s: 1, tz: 2 });
        // Steps of 2 need lane 0 a multiple of 8.
        assert_eq!(Lanes::narrow(2, 2), Any);
        assert_eq!(Lanes::narrow(2, 3), Step { s: 2, tz: 3 });
        // Nothing known of lane 0: 0x7fff_ffff + 1 crosses the sign bit.
        assert_eq!(Lanes::narrow(1, 0), Any);
        // Downward steps wrap below lane 0 = 0.
        assert_eq!(Lanes::narrow(-1, 40), Any);
        assert_eq!(Lanes::narrow(0, 0), Step { s: 0, tz: 0 });
        // Exhaustive on the boundaries for lane 0 = a multiple of 4 near 2^31 and 2^32.
        for x0 in [0x7fff_fffcu32, 0xffff_fffc, 0, 4] {
            for j in 0..4u32 {
                let v = x0 + j;
                assert_eq!(v as u64, x0 as u64 + j as u64, "zero-extended");
                assert_eq!(
                    v as i32 as i64,
                    x0 as i32 as i64 + j as i64,
                    "sign-extended"
                );
            }
        }
    }

    #[test]
    fn join_keeps_a_step_only_when_every_definition_has_it() {
        let a = Step { s: 4, tz: 3 };
        assert_eq!(a.join(Unset), a);
        assert_eq!(a.join(Step { s: 4, tz: 1 }), Step { s: 4, tz: 1 });
        assert_eq!(a.join(Step { s: 8, tz: 3 }), Any);
        assert_eq!(a.join(Any), Any);
    }
}
