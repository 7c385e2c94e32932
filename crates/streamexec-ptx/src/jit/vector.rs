//! What the vector code needs to know about a kernel: which registers are the same in every
//! lane of a group (uniform: kept as one scalar) and, for the others, how their 64-bit slots
//! are shaped (32-bit values zero- or sign-extended, kept as one `i32x4`; anything else as
//! two `i64x2`).
//!
//! The vector function runs `LANES` consecutive threads of a block row at once, always all
//! of them together: where they would part (a branch some take and some do not, a guard
//! that holds for some) or where an instruction has no vector form, it hands the group to
//! the scalar function, which continues each thread on its own. So the vector code never
//! needs masks, and a register written from uniform operands is the same in every lane.

use crate::ir::{Addr, BarKind, Op, Program, Space, Src, Sreg, THREAD_PARAM_BASE, Ty};
use crate::jit::native::{self, N};

pub(crate) use super::stride::LANES;

/// The shape of a register's 64-bit slot over all its definitions, a join lattice:
/// `None` (never written) < `Small` (0..2^31: both extensions agree) < `Z32`, `S32`
/// (the low 32 bits zero- or sign-extended) < `W64` (anything).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    None,
    Small,
    Z32,
    S32,
    W64,
}

impl Class {
    fn join(self, o: Class) -> Class {
        use Class::*;
        match (self, o) {
            (None, x) | (x, None) => x,
            (Small, x) | (x, Small) => x,
            (a, b) if a == b => a,
            _ => W64,
        }
    }

    /// The class of a 64-bit immediate.
    pub(crate) fn of_imm(v: u64) -> Class {
        if v < 1 << 31 {
            Class::Small
        } else if v >> 32 == 0 {
            Class::Z32
        } else if v == v as u32 as i32 as i64 as u64 {
            Class::S32
        } else {
            Class::W64
        }
    }

    /// A 32-bit class extended with sign (`S32`) rather than zeros.
    pub(crate) fn signed(ext_signed: bool) -> Class {
        if ext_signed { Class::S32 } else { Class::Z32 }
    }
}

/// Per register: varying across a group, the slot's class, and for registers whose lanes
/// step by a constant, the step and the known trailing zeros of lane 0 (`jit/stride.rs`).
pub(crate) struct Shape {
    pub(crate) varying: Vec<bool>,
    pub(crate) class: Vec<Class>,
    pub(crate) steps: Vec<Option<(i64, u32)>>,
}

/// Whether an `ld`/`st` of `n` elements of `ty` in `space` moves a group's lanes as one
/// vector access when they are consecutive (else lane by lane).
pub(crate) fn vector_access(space: Space, ty: Ty, n: usize) -> bool {
    n == 1
        && matches!(space, Space::Global | Space::Shared)
        && matches!(
            ty,
            Ty::U32 | Ty::S32 | Ty::F32 | Ty::U64 | Ty::S64 | Ty::F64
        )
}

/// Why a kernel gets no vector function (it runs on the scalar one alone).
pub(crate) fn refuse(prog: &Program) -> Option<&'static str> {
    for i in &prog.code {
        match &i.op {
            Op::Call(_) | Op::CallIndirect { .. } => return Some("it calls functions"),
            Op::WarpSync { .. } => return Some("it has `bar.warp.sync`"),
            Op::Nanosleep { .. } => return Some("it spin-waits"),
            _ => {}
        }
    }
    None
}

/// Whether special register `s` differs between the lanes of a group (consecutive
/// `tid.x`, the same `tid.y`, `tid.z` and warp).
pub(crate) fn sreg_varying(s: Sreg) -> bool {
    matches!(s, Sreg::Tid(0) | Sreg::Laneid | Sreg::Lanemask(_))
}

fn sreg_class(s: Sreg) -> Class {
    match s {
        Sreg::Clock64 | Sreg::Globaltimer | Sreg::Gridid => Class::W64,
        Sreg::LocalAddr(v) => Class::of_imm(v),
        Sreg::Const(v) => Class::of_imm(v as u64),
        _ => Class::Z32,
    }
}

/// Whether a memory access reads or writes per-thread memory whatever its address (local
/// memory, call parameters, or a generic address that may be either).
pub(crate) fn per_thread(space: Space, addr: &Addr) -> bool {
    match space {
        Space::Local | Space::Generic => true,
        Space::Param => addr.base.is_some() || addr.offset as u64 >= THREAD_PARAM_BASE,
        Space::Global | Space::Shared => false,
    }
}

/// The class a recognised lane function's result has.
pub(crate) fn fn_class(f: usize, args: &[Class]) -> Class {
    let narrow = |bits: u8, signed: bool| {
        if bits >= 64 {
            Class::W64
        } else {
            Class::signed(signed)
        }
    };
    match native::kind(f) {
        Some(N::Bin { bits, signed, .. })
        | Some(N::MadLo { bits, signed })
        | Some(N::Shift { bits, signed, .. }) => narrow(bits, signed),
        Some(N::Cmp { .. }) | Some(N::FCmp { .. }) | Some(N::PBin { .. }) => Class::Small,
        Some(N::MulWide { bits, signed }) | Some(N::MadWide { bits, signed }) => {
            narrow(bits * 2, signed)
        }
        Some(N::CvtII { dbits, dsigned, .. }) => narrow(dbits, dsigned),
        Some(N::FArith { f64, .. })
        | Some(N::Fma { f64 })
        | Some(N::Sqrt { f64 })
        | Some(N::Rcp { f64 })
        | Some(N::CvtIF { f64, .. }) => {
            if f64 {
                Class::W64
            } else {
                Class::Z32
            }
        }
        Some(N::Selp) => args[0].join(args[1]),
        Some(N::Mov) => args[0],
        None => Class::W64,
    }
}

fn ld_class(ty: Ty) -> Class {
    match ty {
        Ty::U8 | Ty::U16 | Ty::U32 | Ty::F32 => Class::Z32,
        Ty::S8 | Ty::S16 | Ty::S32 => Class::S32,
        Ty::Pred => Class::Small,
        _ => Class::W64,
    }
}

/// Computes the shape of every register. `live_in`: the registers the kernel may read before
/// writing them. The steps sharpen the uniform analysis (a comparison of a stepped register
/// with a constant can give every lane the same answer), so it runs twice.
pub(crate) fn shape(prog: &Program, live_in: &[u32]) -> Shape {
    let (varying, _) = varying_and_class(prog, None);
    let steps = super::stride::strides(prog, &varying, live_in);
    let (varying, class) = varying_and_class(prog, Some(&steps));
    let steps = super::stride::strides(prog, &varying, live_in);
    Shape {
        varying,
        class,
        steps,
    }
}

/// Whether `setp` with comparison `f` of `a` and `b` gives every lane of a group the same
/// answer because one side is a constant and the other a register whose lanes step upward
/// without wrapping inside an aligned range that the constant's threshold cannot split
/// (`%tid.x > 127`: lanes `4k..4k+3` are all above or all below).
fn same_in_group(f: usize, a: &Src, b: &Src, steps: &[Option<(i64, u32)>]) -> bool {
    let Some(N::Cmp { c, bits, .. }) = native::kind(f) else {
        return false;
    };
    let step = |s: &Src| match s {
        Src::Reg(r) => steps[*r as usize],
        _ => None,
    };
    // `x OP k` with the register first; `k OP x` is `x OP' k`.
    let (x, k, c) = match (step(a), b, step(b), a) {
        (Some(x), Src::Imm(k), _, _) => (x, *k, c),
        (_, _, Some(x), Src::Imm(k)) => (x, *k, [0, 1, 4, 5, 2, 3][c as usize]),
        _ => return false,
    };
    cmp_same_in_group(c, bits, x, k)
}

/// [`same_in_group`] for `x OP k` with comparison number `c` (`native::int_cc`) on `bits`-bit
/// values, `x`'s lanes stepping by `s` from a lane 0 with `tz` trailing zero bits.
fn cmp_same_in_group(c: u8, bits: u8, (s, tz): (i64, u32), k: u64) -> bool {
    if s == 0 {
        return true;
    }
    // The threshold where `x OP k` flips: `x >= t` (or its complement).
    let t = match c {
        2 | 5 => k,                 // lt, ge
        3 | 4 => k.wrapping_add(1), // le, gt
        _ => return false,          // eq, ne: at most one lane equals k
    };
    // Lanes `x0 .. x0 + 3s` lie in one aligned block of 2^m values (so they neither wrap nor
    // cross the sign bit), and `t` is a block boundary.
    let m = tz.min(bits as u32 - 1);
    s > 0 && ((LANES as u64 - 1) * s as u64) < 1 << m && t & ((1 << m) - 1) == 0
}

/// The uniform and class analyses to a fixed point (`steps`: see [`same_in_group`]).
fn varying_and_class(
    prog: &Program,
    steps: Option<&[Option<(i64, u32)>]>,
) -> (Vec<bool>, Vec<Class>) {
    let n = prog.regs as usize;
    let mut varying = vec![false; n];
    let mut class = vec![Class::None; n];
    let mut changed = true;
    while changed {
        changed = false;
        for i in &prog.code {
            let vsrc = |s: &Src, v: &[bool]| match s {
                Src::Reg(r) => v[*r as usize],
                Src::Sreg(s) => sreg_varying(*s),
                Src::Imm(_) => false,
            };
            let csrc = |s: &Src, c: &[Class]| match s {
                Src::Reg(r) => c[*r as usize],
                Src::Sreg(s) => sreg_class(*s),
                Src::Imm(v) => Class::of_imm(*v),
            };
            // A guard that differs between lanes never makes a value vary: the vector code
            // runs a guarded instruction in all lanes or in none (else it hands over).
            let (uses, defs) = super::analysis::uses_defs(i, prog.carry_reg);
            let mut any = uses
                .iter()
                .any(|r| Some(*r) != i.guard.map(|g| g.0) && varying[*r as usize]);
            let mut cls = Class::W64;
            match &i.op {
                Op::Un { f, a, .. } => {
                    any |= vsrc(a, &varying);
                    cls = fn_class(*f as usize, &[csrc(a, &class)]);
                }
                Op::Bin { f, a, b, .. } => {
                    any |= vsrc(a, &varying) || vsrc(b, &varying);
                    cls = fn_class(*f as usize, &[csrc(a, &class), csrc(b, &class)]);
                }
                Op::Tern { f, a, b, c, .. } => {
                    any |= vsrc(a, &varying) || vsrc(b, &varying) || vsrc(c, &varying);
                    cls = fn_class(
                        *f as usize,
                        &[csrc(a, &class), csrc(b, &class), csrc(c, &class)],
                    );
                }
                Op::Lop3 { a, b, c, .. } => {
                    any |= vsrc(a, &varying) || vsrc(b, &varying) || vsrc(c, &varying);
                    cls = Class::Z32;
                }
                Op::Setp { f, a, b, comb, .. } => {
                    // The operands alone decide (the guard does not, as above).
                    any = !steps.is_some_and(|st| same_in_group(*f as usize, a, b, st))
                        && (vsrc(a, &varying) || vsrc(b, &varying));
                    if let Some((_, s, _)) = comb {
                        any |= vsrc(s, &varying);
                    }
                    cls = Class::Small;
                }
                Op::Ld {
                    space, ty, addr, ..
                } => {
                    any |= per_thread(*space, addr);
                    cls = ld_class(*ty);
                }
                Op::St { s, .. } => {
                    for x in s {
                        any |= vsrc(x, &varying);
                    }
                }
                Op::Atom { .. }
                | Op::Bar {
                    kind: BarKind::Red { .. },
                    ..
                } => any = true,
                Op::Cvta { a, .. } => any |= vsrc(a, &varying),
                // Other groups' lanes take part: varying; `b32` values (masks, a 32-bit
                // reduction) and predicates, zero-extended in their slots.
                Op::Shfl { .. }
                | Op::Vote { .. }
                | Op::Redux { .. }
                | Op::Match { .. }
                | Op::Activemask { .. } => {
                    any = true;
                    cls = Class::Z32;
                }
                _ => any = true,
            }
            for d in defs {
                let d = d as usize;
                if any && !varying[d] {
                    varying[d] = true;
                    changed = true;
                }
                let c = class[d].join(cls);
                if c != class[d] {
                    class[d] = c;
                    changed = true;
                }
            }
        }
    }
    (varying, class)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the rule says "the same in every lane", it is, for every lane 0 it allows.
    #[test]
    fn comparisons_said_uniform_are_uniform_in_every_group() {
        let cmp = |c: u8, signed: bool, x: u32, k: u32| {
            let (a, b) = (x as i32, k as i32);
            match (c, signed) {
                (2, true) => a < b,
                (3, true) => a <= b,
                (4, true) => a > b,
                (5, true) => a >= b,
                (2, false) => x < k,
                (3, false) => x <= k,
                (4, false) => x > k,
                _ => x >= k,
            }
        };
        let mut said = 0;
        for c in 2..=5u8 {
            for (s, tz) in [(1i64, 2u32), (2, 3), (4, 4), (1, 3), (2, 2), (3, 4)] {
                for k in [
                    0u32,
                    1,
                    3,
                    4,
                    7,
                    8,
                    127,
                    128,
                    0x7fff_ffff,
                    0x8000_0000,
                    u32::MAX,
                ] {
                    if !cmp_same_in_group(c, 32, (s, tz), k as u64) {
                        continue;
                    }
                    said += 1;
                    let step = 1u32 << tz;
                    let firsts = (0..if cfg!(miri) { 4u32 } else { 64 })
                        .map(|i| i * step)
                        .chain(
                            [0x7fff_ffffu32, 0xffff_ffff]
                                .map(|e| (e & !(step - 1)).wrapping_sub(step)),
                        );
                    for x0 in firsts.chain([0x7fff_ffff & !(step - 1), !(step - 1)]) {
                        for signed in [false, true] {
                            let lanes: Vec<bool> = (0..LANES as u32)
                                .map(|j| cmp(c, signed, x0 + j * s as u32, k))
                                .collect();
                            assert!(
                                lanes.iter().all(|v| *v == lanes[0]),
                                "c {c} s {s} tz {tz} k {k:#x} x0 {x0:#x} {signed}: {lanes:?}"
                            );
                        }
                    }
                }
            }
        }
        assert!(said > 20, "{said}");
        // The reduction's `t > 127` is uniform; `t > 1` and `t == 4` are not.
        assert!(cmp_same_in_group(4, 32, (1, 2), 127));
        assert!(!cmp_same_in_group(4, 32, (1, 2), 1));
        assert!(!cmp_same_in_group(0, 32, (1, 2), 4));
    }
}
