//! What the decoder picks per instruction: the monomorphized lane function for an
//! opcode/type/modifier combination (from [`alu`](crate::alu)), modifier and type parsing, and
//! special register names.

use crate::alu::*;
use crate::ir::{Cmp, Fn1, Fn2, Fn3, Sreg, Ty};

/// The special register `name` (`%tid.x`, `%laneid`, ...).
pub(super) fn sreg(name: &str) -> Option<Sreg> {
    let (base, comp) = match name.rsplit_once('.') {
        Some((b, c)) => (b, Some(c)),
        None => (name, None),
    };
    let axis = |c: Option<&str>| match c {
        Some("x") => Some(0u8),
        Some("y") => Some(1),
        Some("z") => Some(2),
        _ => None,
    };
    Some(match (base, comp) {
        ("%tid", c) => Sreg::Tid(axis(c)?),
        ("%ntid", c) => Sreg::Ntid(axis(c)?),
        ("%ctaid", c) => Sreg::Ctaid(axis(c)?),
        ("%nctaid", c) => Sreg::Nctaid(axis(c)?),
        ("%laneid", None) => Sreg::Laneid,
        ("%warpid", None) => Sreg::Warpid,
        ("%nwarpid", None) => Sreg::Nwarpid,
        ("%smid", None) => Sreg::Smid,
        ("%nsmid", None) => Sreg::Nsmid,
        ("%clock", None) => Sreg::Clock,
        ("%clock64", None) => Sreg::Clock64,
        ("%globaltimer", None) => Sreg::Globaltimer,
        ("%lanemask_eq", None) => Sreg::Lanemask(Cmp::Eq),
        ("%lanemask_lt", None) => Sreg::Lanemask(Cmp::Lt),
        ("%lanemask_le", None) => Sreg::Lanemask(Cmp::Le),
        ("%lanemask_gt", None) => Sreg::Lanemask(Cmp::Gt),
        ("%lanemask_ge", None) => Sreg::Lanemask(Cmp::Ge),
        ("%dynamic_smem_size", None) => Sreg::DynamicSmem,
        ("%total_smem_size", None) => Sreg::TotalSmem,
        ("%gridid", None) => Sreg::Gridid,
        // Launches have no clusters: every block is a cluster of one.
        ("%clusterid", c) => Sreg::Ctaid(axis(c)?),
        ("%nclusterid", c) => Sreg::Nctaid(axis(c)?),
        ("%cluster_ctaid", c) => axis(c).map(|_| Sreg::Const(0))?,
        ("%cluster_nctaid", c) => axis(c).map(|_| Sreg::Const(1))?,
        ("%cluster_ctarank", None) | ("%is_explicit_cluster", None) => Sreg::Const(0),
        ("%cluster_nctarank", None) => Sreg::Const(1),
        ("%aggr_smem_size", None) => Sreg::TotalSmem,
        _ => return None,
    })
}

pub(super) fn parse_ty(s: &str) -> Option<Ty> {
    Some(match s {
        "u8" | "b8" => Ty::U8,
        "u16" | "b16" => Ty::U16,
        "u32" | "b32" => Ty::U32,
        "u64" | "b64" => Ty::U64,
        "s8" => Ty::S8,
        "s16" => Ty::S16,
        "s32" => Ty::S32,
        "s64" => Ty::S64,
        "f32" => Ty::F32,
        "f64" => Ty::F64,
        "pred" => Ty::Pred,
        _ => return None,
    })
}

/// Modifiers not yet consumed.
pub(super) struct Mods<'a> {
    pub(super) list: Vec<&'a str>,
}

impl<'a> Mods<'a> {
    pub(super) fn has(&mut self, m: &str) -> bool {
        match self.list.iter().position(|x| *x == m) {
            Some(p) => {
                self.list.remove(p);
                true
            }
            None => false,
        }
    }
    pub(super) fn one_of(&mut self, opts: &[&'a str]) -> Option<&'a str> {
        let p = self.list.iter().position(|x| opts.contains(x))?;
        Some(self.list.remove(p))
    }
    /// Removes and returns every type modifier, in order.
    pub(super) fn types(&mut self) -> Vec<Ty> {
        let mut out = Vec::new();
        self.list.retain(|m| match parse_ty(m) {
            Some(t) => {
                out.push(t);
                false
            }
            None => true,
        });
        out
    }
    /// Drops modifiers that do not change results on the host (caching, ordering scopes).
    pub(super) fn drop_ignorable(&mut self) {
        const IGN: &[&str] = &[
            "volatile", "relaxed", "acquire", "release", "acq_rel", "weak", "sys", "gpu", "cta",
            "nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "uni", "aligned", "sc", "mmio",
        ];
        self.list
            .retain(|m| !IGN.contains(m) && !m.starts_with("L1::") && !m.starts_with("L2::"));
    }
}

macro_rules! int_fn {
    ($ty:expr, $f:ident $(, $c:tt)*) => {
        match $ty {
            Ty::U8 => Some($f::<u8 $(, $c)*> as _),
            Ty::U16 => Some($f::<u16 $(, $c)*> as _),
            Ty::U32 => Some($f::<u32 $(, $c)*> as _),
            Ty::U64 => Some($f::<u64 $(, $c)*> as _),
            Ty::S8 => Some($f::<i8 $(, $c)*> as _),
            Ty::S16 => Some($f::<i16 $(, $c)*> as _),
            Ty::S32 => Some($f::<i32 $(, $c)*> as _),
            Ty::S64 => Some($f::<i64 $(, $c)*> as _),
            _ => None,
        }
    };
}

macro_rules! flt_fn {
    ($ty:expr, $f:ident $(, $c:tt)*) => {
        match $ty {
            Ty::F32 => Some($f::<f32 $(, $c)*> as _),
            Ty::F64 => Some($f::<f64 $(, $c)*> as _),
            _ => None,
        }
    };
}

/// Picks `$f::<F, R, FTZ, SAT>` for run-time `r`, `ftz`, `sat`.
macro_rules! rfs {
    ($ty:expr, $f:ident, $r:expr, $ftz:expr, $sat:expr) => {
        match ($r, $ftz, $sat) {
            (0, false, false) => flt_fn!($ty, $f, 0, false, false),
            (1, false, false) => flt_fn!($ty, $f, 1, false, false),
            (2, false, false) => flt_fn!($ty, $f, 2, false, false),
            (3, false, false) => flt_fn!($ty, $f, 3, false, false),
            (0, true, false) => flt_fn!($ty, $f, 0, true, false),
            (1, true, false) => flt_fn!($ty, $f, 1, true, false),
            (2, true, false) => flt_fn!($ty, $f, 2, true, false),
            (3, true, false) => flt_fn!($ty, $f, 3, true, false),
            (0, false, true) => flt_fn!($ty, $f, 0, false, true),
            (1, false, true) => flt_fn!($ty, $f, 1, false, true),
            (2, false, true) => flt_fn!($ty, $f, 2, false, true),
            (3, false, true) => flt_fn!($ty, $f, 3, false, true),
            (0, true, true) => flt_fn!($ty, $f, 0, true, true),
            (1, true, true) => flt_fn!($ty, $f, 1, true, true),
            (2, true, true) => flt_fn!($ty, $f, 2, true, true),
            _ => flt_fn!($ty, $f, 3, true, true),
        }
    };
}

/// Picks `$f::<F, R, FTZ>`.
macro_rules! rf {
    ($ty:expr, $f:ident, $r:expr, $ftz:expr) => {
        match ($r, $ftz) {
            (0, false) => flt_fn!($ty, $f, 0, false),
            (1, false) => flt_fn!($ty, $f, 1, false),
            (2, false) => flt_fn!($ty, $f, 2, false),
            (3, false) => flt_fn!($ty, $f, 3, false),
            (0, true) => flt_fn!($ty, $f, 0, true),
            (1, true) => flt_fn!($ty, $f, 1, true),
            (2, true) => flt_fn!($ty, $f, 2, true),
            _ => flt_fn!($ty, $f, 3, true),
        }
    };
}

/// Picks `$f::<F, K, FTZ>` for a const `K`.
macro_rules! kf {
    ($ty:expr, $f:ident, $k:expr, $ftz:expr) => {
        if $ftz {
            flt_fn!($ty, $f, $k, true)
        } else {
            flt_fn!($ty, $f, $k, false)
        }
    };
}

pub(super) fn int_cmp(c: Cmp, ty: Ty) -> Option<Fn2> {
    match c {
        Cmp::Eq => int_fn!(ty, icmp, 0),
        Cmp::Ne => int_fn!(ty, icmp, 1),
        Cmp::Lt => int_fn!(ty, icmp, 2),
        Cmp::Le => int_fn!(ty, icmp, 3),
        Cmp::Gt => int_fn!(ty, icmp, 4),
        Cmp::Ge => int_fn!(ty, icmp, 5),
        _ => None,
    }
}

pub(super) fn flt_cmp(c: Cmp, ty: Ty, ftz: bool) -> Option<Fn2> {
    macro_rules! c {
        ($k:expr) => {
            kf!(ty, fcmp, $k, ftz)
        };
    }
    match c {
        Cmp::Eq => c!(0),
        Cmp::Ne => c!(1),
        Cmp::Lt => c!(2),
        Cmp::Le => c!(3),
        Cmp::Gt => c!(4),
        Cmp::Ge => c!(5),
        Cmp::Equ => c!(6),
        Cmp::Neu => c!(7),
        Cmp::Ltu => c!(8),
        Cmp::Leu => c!(9),
        Cmp::Gtu => c!(10),
        Cmp::Geu => c!(11),
        Cmp::Num => c!(12),
        Cmp::Nan => c!(13),
    }
}

pub(super) fn parse_cmp(s: &str) -> Option<(Cmp, Option<bool>)> {
    // The bool says the comparison forces unsigned (lo/ls/hi/hs).
    Some(match s {
        "eq" => (Cmp::Eq, None),
        "ne" => (Cmp::Ne, None),
        "lt" => (Cmp::Lt, None),
        "le" => (Cmp::Le, None),
        "gt" => (Cmp::Gt, None),
        "ge" => (Cmp::Ge, None),
        "lo" => (Cmp::Lt, Some(true)),
        "ls" => (Cmp::Le, Some(true)),
        "hi" => (Cmp::Gt, Some(true)),
        "hs" => (Cmp::Ge, Some(true)),
        "equ" => (Cmp::Equ, None),
        "neu" => (Cmp::Neu, None),
        "ltu" => (Cmp::Ltu, None),
        "leu" => (Cmp::Leu, None),
        "gtu" => (Cmp::Gtu, None),
        "geu" => (Cmp::Geu, None),
        "num" => (Cmp::Num, None),
        "nan" => (Cmp::Nan, None),
        _ => return None,
    })
}

pub(super) fn unsigned_of(t: Ty) -> Ty {
    match t {
        Ty::S8 => Ty::U8,
        Ty::S16 => Ty::U16,
        Ty::S32 => Ty::U32,
        Ty::S64 => Ty::U64,
        t => t,
    }
}

pub(super) fn wide_of(t: Ty) -> Option<Ty> {
    Some(match t {
        Ty::U16 => Ty::U32,
        Ty::U32 => Ty::U64,
        Ty::S16 => Ty::S32,
        Ty::S32 => Ty::S64,
        _ => return None,
    })
}

pub(super) fn mul_wide(t: Ty) -> Option<Fn2> {
    Some(match t {
        Ty::U16 => imul_wide::<u16, u32>,
        Ty::U32 => imul_wide::<u32, u64>,
        Ty::S16 => imul_wide::<i16, i32>,
        Ty::S32 => imul_wide::<i32, i64>,
        _ => return None,
    })
}

pub(super) fn mad_wide(t: Ty) -> Option<Fn3> {
    Some(match t {
        Ty::U16 => imad_wide::<u16, u32>,
        Ty::U32 => imad_wide::<u32, u64>,
        Ty::S16 => imad_wide::<i16, i32>,
        Ty::S32 => imad_wide::<i32, i64>,
        _ => return None,
    })
}

pub(super) fn cvt_fn(d: Ty, s: Ty, r: u8, ir: u8, ftz: bool, sat: bool) -> Option<Fn1> {
    macro_rules! ii {
        ($S:ty) => {
            if sat {
                int_fn!(d, cvt_ii_to, $S, true)
            } else {
                int_fn!(d, cvt_ii_to, $S, false)
            }
        };
    }
    macro_rules! fi {
        ($S:ty) => {
            match (ir, ftz) {
                (1, false) => int_fn!(d, cvt_fi_to, $S, 1, false),
                (3, false) => int_fn!(d, cvt_fi_to, $S, 3, false),
                (4, false) => int_fn!(d, cvt_fi_to, $S, 4, false),
                (_, false) => int_fn!(d, cvt_fi_to, $S, 2, false),
                (1, true) => int_fn!(d, cvt_fi_to, $S, 1, true),
                (3, true) => int_fn!(d, cvt_fi_to, $S, 3, true),
                (4, true) => int_fn!(d, cvt_fi_to, $S, 4, true),
                (_, true) => int_fn!(d, cvt_fi_to, $S, 2, true),
            }
        };
    }
    macro_rules! iff {
        ($S:ty) => {
            match (r, sat) {
                (0, false) => flt_fn!(d, cvt_if_to, $S, 0, false),
                (1, false) => flt_fn!(d, cvt_if_to, $S, 1, false),
                (2, false) => flt_fn!(d, cvt_if_to, $S, 2, false),
                (3, false) => flt_fn!(d, cvt_if_to, $S, 3, false),
                (0, true) => flt_fn!(d, cvt_if_to, $S, 0, true),
                (1, true) => flt_fn!(d, cvt_if_to, $S, 1, true),
                (2, true) => flt_fn!(d, cvt_if_to, $S, 2, true),
                _ => flt_fn!(d, cvt_if_to, $S, 3, true),
            }
        };
    }
    macro_rules! ff {
        ($S:ty) => {{
            let key = (r, ir, ftz, sat);
            macro_rules! one {
                ($r:expr, $ir:expr) => {
                    match (ftz, sat) {
                        (false, false) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, false, false),
                        (true, false) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, true, false),
                        (false, true) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, false, true),
                        (true, true) => flt_fn!(d, cvt_ff_to, $S, $r, $ir, true, true),
                    }
                };
            }
            match (key.0, key.1) {
                (_, 1) => one!(0, 1),
                (_, 2) => one!(0, 2),
                (_, 3) => one!(0, 3),
                (_, 4) => one!(0, 4),
                (1, _) => one!(1, 0),
                (2, _) => one!(2, 0),
                (3, _) => one!(3, 0),
                _ => one!(0, 0),
            }
        }};
    }
    match s {
        Ty::U8 if d.int() => ii!(u8),
        Ty::U16 if d.int() => ii!(u16),
        Ty::U32 if d.int() => ii!(u32),
        Ty::U64 if d.int() => ii!(u64),
        Ty::S8 if d.int() => ii!(i8),
        Ty::S16 if d.int() => ii!(i16),
        Ty::S32 if d.int() => ii!(i32),
        Ty::S64 if d.int() => ii!(i64),
        Ty::F32 if d.int() => fi!(f32),
        Ty::F64 if d.int() => fi!(f64),
        Ty::U8 => iff!(u8),
        Ty::U16 => iff!(u16),
        Ty::U32 => iff!(u32),
        Ty::U64 => iff!(u64),
        Ty::S8 => iff!(i8),
        Ty::S16 => iff!(i16),
        Ty::S32 => iff!(i32),
        Ty::S64 => iff!(i64),
        Ty::F32 => ff!(f32),
        Ty::F64 => ff!(f64),
        Ty::Pred => None,
    }
}

// Destination-first adaptors so the type dispatch macros can fix the source type.
#[inline(never)]
pub(crate) fn cvt_ii_to<D: Int, S: Int, const SAT: bool>(a: u64) -> u64 {
    cvt_ii::<S, D, SAT>(a)
}
pub(super) fn cvt_fi_to<D: Int, S: Float, const IR: u8, const FTZ: bool>(a: u64) -> u64 {
    cvt_fi::<S, D, IR, FTZ>(a)
}
pub(crate) fn cvt_if_to<D: Float, S: Int, const R: u8, const SAT: bool>(a: u64) -> u64 {
    cvt_if::<S, D, R, SAT>(a)
}
pub(super) fn cvt_ff_to<
    D: Float,
    S: Float,
    const R: u8,
    const IR: u8,
    const FTZ: bool,
    const SAT: bool,
>(
    a: u64,
) -> u64 {
    cvt_ff::<S, D, R, IR, FTZ, SAT>(a)
}

/// `set`'s value: `V` for a true predicate, else 0.
pub(super) fn set_value<const V: u64>(p: u64) -> u64 {
    if p != 0 { V } else { 0 }
}

/// `set`'s value on pairs: `V` in each half whose predicate (`lo`, `hi`) is true.
pub(super) fn set_pair<const V: u64>(lo: u64, hi: u64) -> u64 {
    set_value::<V>(hi) << 16 | set_value::<V>(lo)
}

pub(super) fn pack2<const W: u32>(a: u64, b: u64) -> u64 {
    let m = (1u64 << W) - 1;
    (a & m) | ((b & m) << W)
}
pub(super) fn unpack<const SHIFT: u32, const W: u32>(a: u64) -> u64 {
    (a >> SHIFT) & ((1u64 << W) - 1)
}

/// `shf.{l,r}.{wrap,clamp}.b32 d, a, b, c`: funnel shift of the 64-bit `b:a` by `c`.
pub(super) fn funnel<const LEFT: bool, const WRAP: bool>(a: u64, b: u64, c: u64) -> u64 {
    let n = if WRAP {
        (c as u32) & 31
    } else {
        (c as u32).min(32)
    };
    let v = ((b as u32 as u64) << 32) | (a as u32 as u64);
    if LEFT {
        ((v << n) >> 32) as u32 as u64
    } else {
        (v >> n) as u32 as u64
    }
}

pub(super) fn isad<I: Int>(a: u64, b: u64, c: u64) -> u64 {
    let (x, y) = (I::from_bits(a).wide(), I::from_bits(b).wide());
    I::from_wide((x - y).abs() + I::from_bits(c).wide()).to_bits()
}

pub(super) use {flt_fn, int_fn, kf, rf, rfs};

/// `isspacep` of a window: whether the generic address `a` lies in the window at `W`.
pub(super) fn in_window<const W: u64>(a: u64, _: u64) -> u64 {
    (a.wrapping_sub(W) < crate::ir::WINDOW_BYTES) as u64
}

/// `isspacep.global` / `.const`: whether the generic address `a` lies in no window.
pub(super) fn in_device_memory(a: u64, b: u64) -> u64 {
    use crate::ir::{LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW};
    (in_window::<SHARED_WINDOW>(a, b)
        | in_window::<LOCAL_WINDOW>(a, b)
        | in_window::<PARAM_WINDOW>(a, b)
        == 0) as u64
}
