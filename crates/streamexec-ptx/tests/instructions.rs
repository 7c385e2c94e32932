//! Per-instruction randomized tests of the host PTX engine, in the style of GPU Ocelot's
//! TestPTXAssembly: for each (opcode, type, modifiers) cell a generator writes a kernel that
//! loads operands a, b, c from global arrays at the lane's global index, runs the one
//! instruction and stores the result; the lanes' inputs mix edge values (0, ±1, MIN, MAX, NaN,
//! ±inf, denormals, ties, shift counts at and past the width) with random ones
//! (`STREAMEXEC_TEST_SEED` replays a run), and every result is compared with a Rust reference:
//! integers exactly, correctly rounded float operations bit-exactly (any NaN matches any NaN),
//! `.approx` operations within the bound stated at the cell.
//!
//! Every operand and result lives in an 8-byte slot; a result narrower than 8 bytes must leave
//! the slot's other bytes poisoned, so the store width is checked too. Lanes past `n` must not
//! write. All mismatches of a family are collected and reported together.
//!
//! PTX semantics are cited from the PTX ISA ("Parallel Thread Execution ISA", NVIDIA) sections
//! named at each reference.

mod common;

use common::{Device, DevicePtr};
use rand::RngExt;
use rand::rngs::StdRng;

use common::*;

#[path = "instructions/cvt.rs"]
mod cvt;
#[path = "instructions/float.rs"]
mod float;
#[path = "instructions/half.rs"]
mod half;
#[path = "instructions/int.rs"]
mod int;

/// An operand or result type of one cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    U8,
    S8,
    U16,
    S16,
    U32,
    S32,
    B32,
    U64,
    S64,
    B64,
    F32,
    F64,
    /// A predicate: stored as a u32 0/1.
    Pred,
}

impl Ty {
    pub fn bits(self) -> u32 {
        match self {
            Ty::U8 | Ty::S8 => 8,
            Ty::U16 | Ty::S16 => 16,
            Ty::U32 | Ty::S32 | Ty::B32 | Ty::F32 | Ty::Pred => 32,
            Ty::U64 | Ty::S64 | Ty::B64 | Ty::F64 => 64,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Ty::U8 => "u8",
            Ty::S8 => "s8",
            Ty::U16 => "u16",
            Ty::S16 => "s16",
            Ty::U32 => "u32",
            Ty::S32 => "s32",
            Ty::B32 => "b32",
            Ty::U64 => "u64",
            Ty::S64 => "s64",
            Ty::B64 => "b64",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
            Ty::Pred => "pred",
        }
    }
    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    pub fn is_float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }
    /// Register `i` of this type's register class (8-bit values live in 16-bit registers).
    fn reg(self, i: usize) -> String {
        let class = match self {
            Ty::U8 | Ty::S8 | Ty::U16 | Ty::S16 => "h",
            Ty::U32 | Ty::S32 | Ty::B32 => "r",
            Ty::U64 | Ty::S64 | Ty::B64 => "rd",
            Ty::F32 => "f",
            Ty::F64 => "fd",
            Ty::Pred => "p",
        };
        format!("%{class}{i}")
    }
    /// The mask of the bits a value of this type occupies in its slot.
    pub fn mask(self) -> u64 {
        match self.bits() {
            64 => u64::MAX,
            b => (1u64 << b) - 1,
        }
    }
}

/// Sign-extends the low `bits` of `v`.
pub fn sx(v: u64, bits: u32) -> i64 {
    ((v << (64 - bits)) as i64) >> (64 - bits)
}

/// The value of slot bits `v` as an integer of type `t` (sign- or zero-extended).
pub fn ival(v: u64, t: Ty) -> i128 {
    if t.signed() {
        sx(v, t.bits()) as i128
    } else {
        (v & t.mask()) as i128
    }
}

pub fn f32v(v: u64) -> f32 {
    f32::from_bits(v as u32)
}
pub fn f64v(v: u64) -> f64 {
    f64::from_bits(v)
}
pub fn of32(x: f32) -> u64 {
    x.to_bits() as u64
}
pub fn of64(x: f64) -> u64 {
    x.to_bits()
}

/// How a cell's result is compared with the reference.
#[derive(Clone, Copy, Debug)]
pub enum Cmp {
    /// The result bits, exactly.
    Exact,
    /// Bit-exact float, any NaN for any NaN.
    Float,
    /// Equal as floats (so +0 == -0), any NaN for any NaN.
    FloatNumeric,
    /// |got - want| <= tol * max(1, |want|) (absolute below 1, relative above); inf/NaN exact.
    Within(f64),
    /// Halves (`.bf16` with `bf`) in each 16 bits of the result, bit-exact, any NaN for any
    /// NaN.
    Half { bf: bool },
}

/// How the inputs of one operand are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gen {
    /// Edge values and random bits of the type.
    Any,
    /// A shift amount or bit position: 0..=width+2, and huge values.
    Shift,
    /// Positive normal floats in [2^-60, 2^60] (domain of the .approx cells).
    PositiveNormal,
    /// Floats in [-60, 60] (ex2).
    Small,
    /// Halves (`.bf16` with `bf`) in each 16 bits of the operand: edge values, random bits,
    /// moderate values.
    Half { bf: bool },
}

/// The operand slots a, b, c of one lane.
pub type Slots = [u64; 3];
type Valid = dyn Fn(&Slots) -> bool;

/// One instruction under test.
pub struct Cell {
    /// The instruction with `{d}`, `{a}`, `{b}`, `{c}` for the registers, e.g.
    /// `"add.s32 {d}, {a}, {b}"`.
    pub text: String,
    pub dst: Ty,
    pub srcs: Vec<(Ty, Gen)>,
    /// The expected result bits (in the destination's low bits) from the operand slots.
    pub reference: Box<dyn Fn(&Slots) -> u64>,
    pub cmp: Cmp,
    /// Inputs the cell does not define (e.g. a zero divisor) are redrawn.
    pub valid: Option<Box<Valid>>,
}

impl Cell {
    pub fn new(
        text: impl Into<String>,
        dst: Ty,
        srcs: &[Ty],
        reference: impl Fn(&[u64; 3]) -> u64 + 'static,
    ) -> Self {
        let cmp = if dst.is_float() {
            Cmp::Float
        } else {
            Cmp::Exact
        };
        Cell {
            text: text.into(),
            dst,
            srcs: srcs.iter().map(|&t| (t, Gen::Any)).collect(),
            reference: Box::new(reference),
            cmp,
            valid: None,
        }
    }
    pub fn cmp(mut self, cmp: Cmp) -> Self {
        self.cmp = cmp;
        self
    }
    pub fn input(mut self, operand: usize, g: Gen) -> Self {
        self.srcs[operand].1 = g;
        self
    }
    /// Operands a and b drawn as halves (`.bf16` with `bf`).
    pub fn halves(self, bf: bool) -> Self {
        self.input(0, Gen::Half { bf }).input(1, Gen::Half { bf })
    }
    pub fn valid(mut self, f: impl Fn(&[u64; 3]) -> bool + 'static) -> Self {
        self.valid = Some(Box::new(f));
        self
    }

    /// The cell's kernel, entry `cell`: (a, b, c, d: u64 slot arrays, n: u32).
    pub fn ptx(&self) -> String {
        let mut body = String::new();
        let names = ["a", "b", "c"];
        let mut regs = Vec::new();
        for (i, (t, _)) in self.srcs.iter().enumerate() {
            let addr = format!("%rd{}", 3 + 2 * i);
            if *t == Ty::Pred {
                body += &format!("\tld.global.u32 %r{}, [{addr}];\n", 20 + i);
                body += &format!("\tsetp.ne.u32 %p{}, %r{}, 0;\n", 10 + i, 20 + i);
            } else {
                body += &format!("\tld.global.{} {}, [{addr}];\n", t.name(), t.reg(10 + i));
            }
            regs.push((names[i], t.reg(10 + i)));
        }
        let mut text = self.text.replace("{d}", &self.dst.reg(15));
        for (name, reg) in &regs {
            text = text.replace(&format!("{{{name}}}"), reg);
        }
        body += &format!("\t{text};\n");
        if self.dst == Ty::Pred {
            body += "\tselp.u32 %r31, 1, 0, %p15;\n\tst.global.u32 [%rd9], %r31;\n";
        } else {
            body += &format!(
                "\tst.global.{} [%rd9], {};\n",
                self.dst.name(),
                self.dst.reg(15)
            );
        }
        format!(
            ".version 7.0\n.target sm_70\n.address_size 64\n\n\
             .visible .entry cell(\n\t.param .u64 pa,\n\t.param .u64 pb,\n\t.param .u64 pc,\n\
             \t.param .u64 pd,\n\t.param .u32 pn\n)\n{{\n\
             \t.reg .pred %p<32>;\n\t.reg .b16 %h<32>;\n\t.reg .b32 %r<32>;\n\
             \t.reg .b64 %rd<32>;\n\t.reg .f32 %f<32>;\n\t.reg .f64 %fd<32>;\n\n\
             \tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %ntid.x;\n\tmov.u32 %r3, %tid.x;\n\
             \tmad.lo.s32 %r4, %r1, %r2, %r3;\n\tld.param.u32 %r5, [pn];\n\
             \tsetp.ge.u32 %p1, %r4, %r5;\n\t@%p1 bra $DONE;\n\tmul.wide.u32 %rd1, %r4, 8;\n\
             \tld.param.u64 %rd2, [pa];\n\tcvta.to.global.u64 %rd3, %rd2;\n\tadd.s64 %rd3, %rd3, %rd1;\n\
             \tld.param.u64 %rd4, [pb];\n\tcvta.to.global.u64 %rd5, %rd4;\n\tadd.s64 %rd5, %rd5, %rd1;\n\
             \tld.param.u64 %rd6, [pc];\n\tcvta.to.global.u64 %rd7, %rd6;\n\tadd.s64 %rd7, %rd7, %rd1;\n\
             \tld.param.u64 %rd8, [pd];\n\tcvta.to.global.u64 %rd9, %rd8;\n\tadd.s64 %rd9, %rd9, %rd1;\n\
             {body}$DONE:\n\tret;\n}}\n"
        )
    }
}

/// Edge values of a type, as slot bits.
fn edges(t: Ty) -> Vec<u64> {
    match t {
        Ty::F32 => [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            0.5,
            1.5,
            2.5,
            -2.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            -f32::from_bits(0x007F_FFFF),
            2147483648.0,
            -2147483904.0,
            4294967296.0,
            16777217.0,
            3.0,
        ]
        .iter()
        .map(|&x| of32(x))
        .collect(),
        Ty::F64 => [
            0.0f64,
            -0.0,
            1.0,
            -1.0,
            0.5,
            1.5,
            2.5,
            -2.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            -f64::from_bits(0x000F_FFFF_FFFF_FFFF),
            2147483647.5,
            -9.223372036854777e18,
            1.8446744073709552e19,
            1e-40,
            3.4028235677973366e38,
        ]
        .iter()
        .map(|&x| of64(x))
        .collect(),
        Ty::Pred => vec![0, 1],
        _ => {
            let bits = t.bits();
            let min = if t.signed() { 1u64 << (bits - 1) } else { 0 };
            let max = if t.signed() { t.mask() >> 1 } else { t.mask() };
            let m = t.mask();
            vec![
                0,
                1,
                2,
                m,
                m - 1,
                min,
                min.wrapping_add(1) & m,
                max,
                max - 1,
                7,
                0x55 & m,
            ]
        }
    }
}

fn draw(rng: &mut StdRng, t: Ty, g: Gen, i: usize) -> u64 {
    if t == Ty::Pred {
        return rng.random_range(0..2);
    }
    let e = edges(t);
    match g {
        Gen::Half { bf } => {
            let mut v = 0u64;
            for k in 0..(t.bits() / 16) {
                v |= (half::draw_half(rng, bf, i) as u64) << (16 * k);
            }
            v
        }
        Gen::Shift => {
            let w = t.bits().max(32) as u64;
            if rng.random_bool(0.8) {
                rng.random_range(0..=w + 2)
            } else {
                [64, 100, 255, 256, 0xFFFF_FFFF][rng.random_range(0..5)]
            }
        }
        Gen::PositiveNormal => {
            let x: f64 = 2f64.powf(rng.random_range(-60.0..60.0));
            if t == Ty::F32 {
                of32(x as f32)
            } else {
                of64(x)
            }
        }
        Gen::Small => {
            let x: f64 = rng.random_range(-60.0..60.0);
            if t == Ty::F32 {
                of32(x as f32)
            } else {
                of64(x)
            }
        }
        Gen::Any => {
            // The first lanes walk the edge values (operand a fastest), then random.
            if i < e.len() * e.len() && rng.random_bool(0.7) {
                e[rng.random_range(0..e.len())]
            } else if t.is_float() && rng.random_bool(0.5) {
                let x: f64 = rng.random_range(-1e4..1e4);
                if t == Ty::F32 {
                    of32(x as f32)
                } else {
                    of64(x)
                }
            } else if !t.is_float() && rng.random_bool(0.3) {
                (rng.random_range(-300i64..300) as u64) & t.mask()
            } else {
                rng.random::<u64>() & t.mask()
            }
        }
    }
}

/// Lanes per cell, and the launch: 2 blocks of 128 threads (the last 6 lanes idle).
const LANES: usize = 250;
const SLOTS: usize = 256;
const SLOT_POISON: u64 = 0xA5A5_A5A5_A5A5_A5A5;

fn compare(cmp: Cmp, dst: Ty, got: u64, want: u64) -> bool {
    let (got, want) = (got & dst.mask(), want & dst.mask());
    let (g, w) = if dst == Ty::F32 {
        (f32v(got) as f64, f32v(want) as f64)
    } else {
        (f64v(got), f64v(want))
    };
    match cmp {
        Cmp::Half { bf } => (0..dst.bits() / 16).all(|k| {
            let (g, w) = ((got >> (16 * k)) as u16, (want >> (16 * k)) as u16);
            g == w || (common::half::is_nan(g, bf) && common::half::is_nan(w, bf))
        }),
        Cmp::Exact => got == want,
        Cmp::Float if dst == Ty::F32 => same_f32(f32v(got), f32v(want)),
        Cmp::Float => same_f64(f64v(got), f64v(want)),
        Cmp::FloatNumeric => (g.is_nan() && w.is_nan()) || g == w,
        Cmp::Within(tol) => {
            if !w.is_finite() || !g.is_finite() {
                (g.is_nan() && w.is_nan()) || g == w
            } else {
                (g - w).abs() <= tol * w.abs().max(1.0)
            }
        }
    }
}

/// One lane's operand slots: drawn until the cell defines them, with the bits above each
/// operand's width filled with poison the instruction must ignore.
fn draw_lane(rng: &mut StdRng, cell: &Cell, lane: usize) -> Slots {
    loop {
        let mut v = [0u64; 3];
        for (k, (t, g)) in cell.srcs.iter().enumerate() {
            v[k] = draw(rng, *t, *g, lane);
        }
        if cell.valid.as_ref().is_none_or(|f| f(&v)) {
            for (k, (t, _)) in cell.srcs.iter().enumerate() {
                if t.bits() < 64 && *t != Ty::Pred {
                    v[k] |= SLOT_POISON & !t.mask();
                }
            }
            return v;
        }
    }
}

/// Runs every cell, returns one line per failure (at most 3 lanes per cell).
pub fn run_cells(test: &str, cells: Vec<Cell>) {
    let exec: Device = host();
    let mut rng = common::rng(test);
    let mut failures = Vec::new();
    let total = cells.len();
    for cell in cells {
        let ptx = cell.ptx();
        let spec = common::Spec::new(5).add_cuda_ptx_in_memory(&ptx, "cell");
        type A = (
            DevicePtr<u64>,
            DevicePtr<u64>,
            DevicePtr<u64>,
            DevicePtr<u64>,
            u32,
        );
        let kernel = match exec.get_kernel::<A>(&spec) {
            Ok(k) => k,
            Err(e) => {
                failures.push(format!("`{}`: load failed: {e}", cell.text));
                continue;
            }
        };
        let mut ops = [vec![0u64; SLOTS], vec![0u64; SLOTS], vec![0u64; SLOTS]];
        for lane in 0..LANES {
            let v = draw_lane(&mut rng, &cell, lane);
            for (k, op) in ops.iter_mut().enumerate() {
                op[lane] = v[k];
            }
        }
        let bufs: Vec<_> = ops.iter().map(|o| upload(&exec, o)).collect();
        let out = poisoned(&exec, SLOTS, SLOT_POISON);
        let args = (
            bufs[0].ptr(),
            bufs[1].ptr(),
            bufs[2].ptr(),
            out.ptr(),
            LANES as u32,
        );
        if let Err(e) = launch(&exec, 128, 2, &kernel, args) {
            failures.push(format!("`{}`: launch failed: {e}", cell.text));
            continue;
        }
        let got = download(&exec, &out);
        let store_mask = if cell.dst == Ty::Pred {
            u32::MAX as u64
        } else {
            cell.dst.mask()
        };
        let mut bad = 0;
        for (lane, &g) in got.iter().enumerate() {
            if bad >= 3 {
                break;
            }
            if lane >= LANES || g & !store_mask != SLOT_POISON & !store_mask {
                if g != SLOT_POISON {
                    bad += 1;
                    failures.push(format!(
                        "`{}` lane {lane}: slot {g:#018x} written past n or past the result's bytes",
                        cell.text
                    ));
                }
                continue;
            }
            let v = [ops[0][lane], ops[1][lane], ops[2][lane]];
            let want = (cell.reference)(&v);
            if !compare(cell.cmp, cell.dst, g, want) {
                bad += 1;
                let m = |k: usize| cell.srcs.get(k).map_or(0, |s| s.0.mask());
                failures.push(format!(
                    "`{}` a={:#x} b={:#x} c={:#x}: got {:#x}, want {:#x}",
                    cell.text,
                    v[0] & m(0),
                    v[1] & m(1),
                    v[2] & m(2),
                    g & store_mask,
                    want & store_mask
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{test}: {} failure(s) over {total} cells:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every generated cell kernel parses with the PTX front end (no engine needed): one entry
/// `cell` with five parameters, holding the instruction under test.
#[test]
fn every_cell_kernel_parses() {
    use streamexec_ptx::ast::Statement;
    let families = [
        int::integer_arithmetic_cells(),
        int::bit_operations_cells(),
        int::compare_and_select_cells(),
        float::float_arithmetic_rn_cells(),
        float::float_approx_f32_cells(),
        cvt::cvt_int_to_int_cells(),
        cvt::cvt_int_to_float_cells(),
        cvt::cvt_float_to_int_cells(),
        cvt::cvt_float_to_float_cells(),
        half::half_arithmetic_cells(),
        half::half_compare_cells(),
        half::half_cvt_cells(),
    ];
    let mut count = 0;
    for cell in families.iter().flatten() {
        let ptx = cell.ptx();
        let m = streamexec_ptx::parse_module(&ptx)
            .unwrap_or_else(|e| panic!("`{}`: {e}\n{ptx}", cell.text));
        assert_eq!(m.functions.len(), 1, "`{}`", cell.text);
        let f = &m.functions[0];
        assert!(
            f.is_entry && f.name == "cell" && f.params.len() == 5,
            "`{}`",
            cell.text
        );
        let opcode = cell.text.split_whitespace().next().unwrap();
        let found = f
            .body
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|s| match s {
                Statement::Inst(i) => {
                    std::iter::once(i.opcode.as_str())
                        .chain(i.modifiers.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(".")
                        == opcode
                }
                _ => false,
            });
        assert!(found, "`{}`: instruction not in the parsed body", cell.text);
        count += 1;
    }
    assert_eq!(
        count, 727,
        "cells per family changed: update the README's count"
    );
}
