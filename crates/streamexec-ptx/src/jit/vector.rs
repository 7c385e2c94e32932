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

/// Threads a group runs at once: one 128-bit vector of 32-bit lanes.
pub(crate) const LANES: usize = 4;

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

/// Per register: varying across a group, and the slot's class.
pub(crate) struct Shape {
    pub(crate) varying: Vec<bool>,
    pub(crate) class: Vec<Class>,
}

/// Why a kernel gets no vector function (it runs on the scalar one alone).
pub(crate) fn refuse(prog: &Program) -> Option<&'static str> {
    for i in &prog.code {
        match &i.op {
            Op::Call(_) | Op::CallIndirect { .. } => return Some("it calls functions"),
            Op::Shfl { .. }
            | Op::Vote { .. }
            | Op::Match { .. }
            | Op::Redux { .. }
            | Op::Activemask { .. }
            | Op::WarpSync { .. } => return Some("it has warp collectives"),
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

/// Computes the shape of every register (both analyses to a fixed point).
pub(crate) fn shape(prog: &Program) -> Shape {
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
                Op::Setp { a, b, comb, .. } => {
                    any |= vsrc(a, &varying) || vsrc(b, &varying);
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
    Shape { varying, class }
}
