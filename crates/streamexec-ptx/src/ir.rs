//! The decoded, executable form of a PTX kernel: what [`decode_module`](super::decode_module)
//! produces from the syntax tree and the host platform's warp interpreter runs.
//!
//! Everything that can be decided once is decided here: registers are dense indices into a
//! per-thread file of 64-bit slots, labels are instruction indices, variables have byte offsets
//! in their state space, parameters have offsets in the parameter buffer, immediates are bits of
//! the instruction's type, and each opcode/modifier combination is one variant with its options
//! as plain fields. The interpreter never looks at a string.

use std::collections::HashMap;

/// Lanes per warp.
pub const WARP: usize = 32;

/// Shared-space addresses appear at `SHARED_WINDOW + offset` in the generic address space.
pub const SHARED_WINDOW: u64 = 0xA000_0000_0000_0000;
/// Local-space addresses appear at `LOCAL_WINDOW + offset` in the generic address space.
pub const LOCAL_WINDOW: u64 = 0xB000_0000_0000_0000;
/// Param-space addresses (kernel parameters, then call parameters) appear at
/// `PARAM_WINDOW + offset` (`cvta.param`).
pub const PARAM_WINDOW: u64 = 0xC000_0000_0000_0000;
/// A `.func`'s address (`mov.u64 %rd, f;`, for indirect calls) is `FUNC_WINDOW` plus its
/// index among the module's functions: no memory is there.
pub const FUNC_WINDOW: u64 = 0xD000_0000_0000_0000;
/// Size of each window (addresses past it are not shared/local).
pub const WINDOW_BYTES: u64 = 1 << 32;
/// Param-space addresses of per-thread call parameters start here (kernel parameters at 0).
pub const THREAD_PARAM_BASE: u64 = 0x8000_0000;

/// A value type as instructions use it. Bit types (`.b32`) read as unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// `.u8` / `.b8`.
    U8,
    /// `.u16` / `.b16`.
    U16,
    /// `.u32` / `.b32`.
    U32,
    /// `.u64` / `.b64`.
    U64,
    /// `.s8`.
    S8,
    /// `.s16`.
    S16,
    /// `.s32`.
    S32,
    /// `.s64`.
    S64,
    /// `.f32`.
    F32,
    /// `.f64`.
    F64,
    /// `.pred`.
    Pred,
}

impl Ty {
    /// Width in bytes (predicates: 1).
    pub fn bytes(self) -> u32 {
        match self {
            Ty::U8 | Ty::S8 | Ty::Pred => 1,
            Ty::U16 | Ty::S16 => 2,
            Ty::U32 | Ty::S32 | Ty::F32 => 4,
            Ty::U64 | Ty::S64 | Ty::F64 => 8,
        }
    }
    /// Signed integer.
    pub fn signed(self) -> bool {
        matches!(self, Ty::S8 | Ty::S16 | Ty::S32 | Ty::S64)
    }
    /// Floating point.
    pub fn float(self) -> bool {
        matches!(self, Ty::F32 | Ty::F64)
    }
    /// Integer (signed, unsigned or bits).
    pub fn int(self) -> bool {
        !self.float() && self != Ty::Pred
    }
    /// The value `bits` (low `bytes()` of them) extended to 64 bits by the type's signedness.
    #[inline(always)]
    pub fn extend(self, bits: u64) -> u64 {
        match self {
            Ty::U8 => bits as u8 as u64,
            Ty::U16 => bits as u16 as u64,
            Ty::U32 | Ty::F32 => bits as u32 as u64,
            Ty::S8 => bits as i8 as i64 as u64,
            Ty::S16 => bits as i16 as i64 as u64,
            Ty::S32 => bits as i32 as i64 as u64,
            Ty::U64 | Ty::S64 | Ty::F64 => bits,
            Ty::Pred => (bits != 0) as u64,
        }
    }
}

/// A special register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sreg {
    /// `%tid.{x,y,z}` (component 0..3).
    Tid(u8),
    /// `%ntid`.
    Ntid(u8),
    /// `%ctaid`.
    Ctaid(u8),
    /// `%nctaid`.
    Nctaid(u8),
    /// `%laneid`.
    Laneid,
    /// `%warpid`.
    Warpid,
    /// `%nwarpid`.
    Nwarpid,
    /// `%smid`: the host worker thread running the block.
    Smid,
    /// `%nsmid`.
    Nsmid,
    /// `%clock` (low 32 bits of nanoseconds since the launch began).
    Clock,
    /// `%clock64`.
    Clock64,
    /// `%globaltimer`: nanoseconds since the Unix epoch.
    Globaltimer,
    /// `%lanemask_eq` .. `%lanemask_ge`.
    Lanemask(Cmp),
    /// `%dynamic_smem_size`.
    DynamicSmem,
    /// `%total_smem_size`.
    TotalSmem,
    /// `%gridid`.
    Gridid,
    /// The address of a `.local` variable (the value, in its space or generic): each recursive
    /// activation of a function has its own local memory, `Program::local_bytes` further on
    /// per call depth, so the value adds the lane's frame base.
    LocalAddr(u64),
    /// A value fixed for every launch: the cluster registers of a launch without clusters
    /// (`%cluster_ctaid` 0, `%cluster_nctaid` 1, `%cluster_ctarank` 0, `%cluster_nctarank` 1,
    /// `%is_explicit_cluster` 0).
    Const(u32),
}

impl Sreg {
    /// The same value in every lane of a warp (computed once per instruction).
    pub fn uniform(self) -> bool {
        !matches!(
            self,
            Sreg::Tid(_)
                | Sreg::Laneid
                | Sreg::Lanemask(_)
                | Sreg::Clock
                | Sreg::Clock64
                | Sreg::Globaltimer
                | Sreg::LocalAddr(_)
        )
    }
}

/// An instruction source operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Src {
    /// A register slot.
    Reg(u32),
    /// Immediate bits, already in the instruction's type.
    Imm(u64),
    /// A special register.
    Sreg(Sreg),
}

/// A state space of a memory access after decoding (`.const` data lives in device memory,
/// so it decodes to `Global`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// Device memory.
    Global,
    /// The block's shared memory.
    Shared,
    /// The thread's local memory.
    Local,
    /// Kernel parameters (below [`THREAD_PARAM_BASE`]) or the thread's call parameters.
    Param,
    /// Generic addresses: the shared and local windows, else device memory.
    Generic,
}

/// `[base + offset]`; a symbol is folded into `offset`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Addr {
    /// Register holding the base address.
    pub base: Option<u32>,
    /// Byte offset (or the whole address).
    pub offset: i64,
}

/// A comparison (`setp`, `%lanemask_*`). Integer signedness comes from the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `eq`.
    Eq,
    /// `ne`.
    Ne,
    /// `lt` / `lo`.
    Lt,
    /// `le` / `ls`.
    Le,
    /// `gt` / `hi`.
    Gt,
    /// `ge` / `hs`.
    Ge,
    /// `equ` (true if either is NaN).
    Equ,
    /// `neu`.
    Neu,
    /// `ltu`.
    Ltu,
    /// `leu`.
    Leu,
    /// `gtu`.
    Gtu,
    /// `geu`.
    Geu,
    /// `num`: neither is NaN.
    Num,
    /// `nan`: either is NaN.
    Nan,
}

/// `.and .or .xor` combining a comparison with a predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoolOp {
    /// `.and`.
    And,
    /// `.or`.
    Or,
    /// `.xor`.
    Xor,
}

/// A function computing one lane's result from operand bits.
pub type Fn1 = fn(u64) -> u64;
/// Two operands.
pub type Fn2 = fn(u64, u64) -> u64;
/// Three operands.
pub type Fn3 = fn(u64, u64, u64) -> u64;

/// Atomic operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomOp {
    /// `add`.
    Add,
    /// `min`.
    Min,
    /// `max`.
    Max,
    /// `exch`.
    Exch,
    /// `cas` (compare `b`, swap in `c`).
    Cas,
    /// `inc`: `old >= b ? 0 : old + 1`.
    Inc,
    /// `dec`: `old == 0 || old > b ? b : old - 1`.
    Dec,
    /// `and`.
    And,
    /// `or`.
    Or,
    /// `xor`.
    Xor,
    /// `add.noftz` of halves (`.f16`, `.bf16` with `bf`; pairs with `x2`), rounded to nearest.
    AddHalf { bf: bool, x2: bool },
}

/// What a thread does at a block barrier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BarKind {
    /// `bar.sync`: arrive, and wait until the barrier completes.
    Sync,
    /// `bar.arrive`: arrive and go on.
    Arrive,
    /// `bar.red.op`: arrive with the predicate `c` (negated with `neg`), wait, then `d` is the
    /// reduction over the threads that arrived.
    Red {
        op: BarRed,
        d: u32,
        c: Src,
        neg: bool,
    },
}

/// The reduction of `bar.red`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarRed {
    /// `.popc.u32`: how many predicates were true.
    Popc,
    /// `.and.pred`: all were true.
    And,
    /// `.or.pred`: any was true.
    Or,
}

impl BarRed {
    /// The result from the count of true predicates and the count of threads.
    pub fn result(self, popc: u32, n: u32) -> u64 {
        match self {
            BarRed::Popc => popc as u64,
            BarRed::And => (popc == n) as u64,
            BarRed::Or => (popc != 0) as u64,
        }
    }
}

/// `match.sync` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchMode {
    /// `.any`: each lane gets the mask of the lanes holding its value.
    Any,
    /// `.all`: the mask of every lane if all hold the same value (else 0), and that as `p`.
    All,
}

/// `redux.sync` operation (on the lanes' 32-bit values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduxOp {
    /// `.add.{u32,s32}` (wrapping).
    Add,
    /// `.min.u32` / `.min.s32` (`signed`).
    Min { signed: bool },
    /// `.max.u32` / `.max.s32`.
    Max { signed: bool },
    /// `.and.b32`.
    And,
    /// `.or.b32`.
    Or,
    /// `.xor.b32`.
    Xor,
}

impl ReduxOp {
    /// The reduction of `vals`.
    pub fn fold(self, vals: impl Iterator<Item = u32>) -> u32 {
        let mut it = vals;
        let Some(first) = it.next() else {
            return 0;
        };
        it.fold(first, |x, y| match self {
            ReduxOp::Add => x.wrapping_add(y),
            ReduxOp::Min { signed: false } => x.min(y),
            ReduxOp::Max { signed: false } => x.max(y),
            ReduxOp::Min { signed: true } => (x as i32).min(y as i32) as u32,
            ReduxOp::Max { signed: true } => (x as i32).max(y as i32) as u32,
            ReduxOp::And => x & y,
            ReduxOp::Or => x | y,
            ReduxOp::Xor => x ^ y,
        })
    }
}

/// `shfl.sync` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShflMode {
    /// `.up`.
    Up,
    /// `.down`.
    Down,
    /// `.bfly`.
    Bfly,
    /// `.idx`.
    Idx,
}

/// `vote.sync` mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteMode {
    /// `.all`.
    All,
    /// `.any`.
    Any,
    /// `.uni`.
    Uni,
    /// `.ballot.b32`.
    Ballot,
}

/// A byte copy between per-thread parameter slots (call arguments and return values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamCopy {
    /// Source offset in the thread's parameter buffer.
    pub from: u32,
    /// Destination offset.
    pub to: u32,
    /// Bytes.
    pub len: u32,
}

/// A call site.
#[derive(Clone, Debug, PartialEq)]
pub struct CallSite {
    /// First instruction of the callee.
    pub target: u32,
    /// Argument copies done at the call.
    pub args: Vec<ParamCopy>,
    /// Return-value copies done when the callee returns.
    pub rets: Vec<ParamCopy>,
    /// In a function that can re-enter itself (recursion): the caller's frame, saved before
    /// the arguments are copied and restored before the return values are.
    pub save: Option<std::sync::Arc<Frame>>,
}

/// The per-thread state of one activation of a function that a call saves: ranges
/// (`start..end`) of register slots and of call-parameter bytes. Local memory is not part of
/// it: each activation has its own (`Program::local_frames`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Register slots.
    pub regs: (u32, u32),
    /// Call-parameter bytes (the function's parameters and return values, and the `.param`
    /// variables it declares).
    pub tparam: Vec<(u32, u32)>,
}

impl Frame {
    /// Bytes a saved copy takes.
    pub fn bytes(&self) -> usize {
        let len = |(a, b): (u32, u32)| b.saturating_sub(a) as usize;
        8 * len(self.regs) + self.tparam.iter().map(|r| len(*r)).sum::<usize>()
    }
}

/// One decoded operation. Field names follow the PTX manual's operand names: `d` (and `p`, `q`)
/// destination register slots, `a` `b` `c` `e` sources, in instruction order.
#[allow(missing_docs)]
#[derive(Clone, Debug)]
pub enum Op {
    /// `d = f(a)` lane by lane (mov, neg, not, cvt, sqrt, popc, ...).
    Un { f: Fn1, d: u32, a: Src },
    /// `d = f(a, b)`.
    Bin { f: Fn2, d: u32, a: Src, b: Src },
    /// `d = f(a, b, c)` (mad, fma, selp, bfe, prmt, ...).
    Tern {
        f: Fn3,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `bfi d, a, b, c, e` (four sources).
    Bfi {
        wide: bool,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
        e: Src,
    },
    /// `lop3.b32 d, a, b, c, lut`: any three-input bitwise function.
    Lop3 {
        lut: u8,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    /// Carry-chain add/sub: `d = a ± b (± cc)`, optionally writing the carry.
    Carry {
        sub: bool,
        wide: bool,
        cin: bool,
        cout: bool,
        d: u32,
        a: Src,
        b: Src,
    },
    /// `mad.cc` / `madc`: `d = lo(a*b) + c (+ cc)`.
    MadCarry {
        hi: bool,
        wide: bool,
        signed: bool,
        cin: bool,
        cout: bool,
        d: u32,
        a: Src,
        b: Src,
        c: Src,
    },
    /// `setp.cmp[.bop].ty p[|q], a, b[, {!}c]`.
    Setp {
        f: Fn2,
        p: u32,
        q: Option<u32>,
        a: Src,
        b: Src,
        comb: Option<(BoolOp, Src, bool)>,
        /// Packed halves (`setp.f16x2`): `q` is this comparison (of the upper halves) combined
        /// with `c`, instead of the complement of `f`'s.
        hi: Option<Fn2>,
    },
    /// `cvta[.to].space d, a`.
    Cvta {
        to: bool,
        space: Space,
        d: u32,
        a: Src,
    },
    /// Load of `n` elements of `ty` into `d[..n]`.
    Ld {
        space: Space,
        ty: Ty,
        n: u8,
        d: [u32; 4],
        addr: Addr,
    },
    /// Store of `n` elements.
    St {
        space: Space,
        ty: Ty,
        n: u8,
        s: [Src; 4],
        addr: Addr,
    },
    /// `atom` (`d: Some`) or `red` (`d: None`).
    Atom {
        space: Space,
        op: AtomOp,
        ty: Ty,
        d: Option<u32>,
        addr: Addr,
        b: Src,
        c: Src,
    },
    /// Branch.
    Bra { target: u32 },
    /// `call` of a `.func` in this module.
    Call(Box<CallSite>),
    /// `call` through a function address in register `reg`: one call site per function of
    /// the module whose signature fits the call, keyed by its address (`FUNC_WINDOW + index`).
    CallIndirect {
        /// The register holding the function's address.
        reg: u32,
        /// (function address, call site) for each function the call may reach.
        sites: Box<[(u64, CallSite)]>,
    },
    /// `ret` (from a `.func`, else like `exit`).
    Ret,
    /// `exit`.
    Exit,
    /// A block barrier with an id and an optional thread count: `bar.sync` / `barrier.sync`,
    /// `bar.arrive`, `bar.red` (see [`BarKind`]).
    Bar {
        id: Src,
        count: Option<Src>,
        kind: BarKind,
    },
    /// `bar.warp.sync mask`: the executing lanes wait until every lane of `mask` that has not
    /// exited reaches this instruction, then go on together (a warp that diverged around a
    /// spin loop reconverges here).
    WarpSync { mask: Src },
    /// `membar`, `fence`: ordering points with nothing to do here.
    Nop,
    /// `nanosleep.u32 t`: the warp waits about `t` nanoseconds (the largest `t` of the
    /// executing lanes, at most 1 ms), giving its host thread's CPU away meanwhile.
    Nanosleep { t: Src },
    /// `shfl.sync`.
    Shfl {
        mode: ShflMode,
        d: u32,
        p: Option<u32>,
        a: Src,
        b: Src,
        c: Src,
        /// The member mask: the lanes this one waits for and may read from
        /// (`interp/collective.rs`).
        mask: Src,
    },
    /// `vote.sync`.
    Vote {
        mode: VoteMode,
        d: u32,
        a: Src,
        neg: bool,
        mask: Src,
    },
    /// `match.{any,all}.sync.{b32,b64} d[|p], a, mask`.
    Match {
        mode: MatchMode,
        d: u32,
        p: Option<u32>,
        a: Src,
        mask: Src,
        /// `.b64` (else only the low 32 bits of `a` are compared).
        wide: bool,
    },
    /// `redux.sync.op.type d, a, mask`.
    Redux {
        op: ReduxOp,
        d: u32,
        a: Src,
        mask: Src,
    },
    /// `activemask.b32`.
    Activemask { d: u32 },
    /// `trap`: ends the launch with a fault.
    Trap,
    /// A call of a function the launcher serves (`vprintf`, `malloc`, `free`,
    /// `__assertfail`; `services.rs`).
    Service(Box<ServiceCall>),
}

/// A call of a served function: where its arguments and return value are in the caller's
/// call-parameter space.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceCall {
    /// Which function.
    pub service: Service,
    /// Each argument's (offset, bytes) in the thread's call-parameter space.
    pub args: Vec<(u32, u32)>,
    /// The return value's (offset, bytes), if it has one.
    pub ret: Option<(u32, u32)>,
}

/// An operation with its guard.
#[derive(Clone, Debug)]
pub struct Inst {
    /// The operation.
    pub op: Op,
    /// `@p` / `@!p`: predicate register and whether it is negated.
    pub guard: Option<(u32, bool)>,
}

/// One kernel parameter's place in the parameter buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSlot {
    /// Name.
    pub name: String,
    /// Byte offset.
    pub offset: u32,
    /// Byte size.
    pub size: u32,
}

/// An entry's launch bounds (`.maxntid`, `.reqntid`, `.minnctapersm`), each extent list
/// padded with 1s to three.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchBounds {
    /// `.maxntid`: at most this product of threads per block.
    pub maxntid: Option<[u32; 3]>,
    /// `.reqntid`: exactly this block shape.
    pub reqntid: Option<[u32; 3]>,
    /// `.minnctapersm`: a hint to the register allocator; read and kept, not enforced.
    pub minnctapersm: Option<u32>,
}

/// A decoded `.entry` with every `.func` it calls.
#[derive(Clone, Debug)]
pub struct Program {
    /// Entry name.
    pub name: String,
    /// Instructions: the entry first (index 0 is its first instruction), then callees.
    pub code: Vec<Inst>,
    /// For each instruction: its 1-based PTX line and text, for error messages.
    pub source: Vec<(u32, String)>,
    /// Register slots per thread (the carry flag is the last).
    pub regs: u32,
    /// Register slot of the carry flag.
    pub carry_reg: u32,
    /// Kernel parameters in order.
    pub params: Vec<ParamSlot>,
    /// Bytes of the kernel parameter buffer.
    pub param_bytes: u32,
    /// Bytes of per-thread call parameter space.
    pub thread_param_bytes: u32,
    /// Bytes of per-thread local memory.
    pub local_bytes: u32,
    /// Activations whose local memory a thread holds at once: 1, or (for a program with
    /// recursion) the depth of recursive calls its frame stack allows.
    pub local_frames: u32,
    /// `.maxntid` / `.reqntid` / `.minnctapersm`, checked at launch.
    pub bounds: LaunchBounds,
    /// Bytes of static shared memory; dynamic (`.extern .shared`) shared memory starts at
    /// [`DYNAMIC_SHARED_BASE`](super::DYNAMIC_SHARED_BASE).
    pub static_shared_bytes: u32,
}

impl Program {
    /// Local memory bytes per thread: every activation's frame.
    pub fn thread_local_bytes(&self) -> usize {
        self.local_bytes as usize * self.local_frames.max(1) as usize
    }
}

/// Module-scope `.global` / `.const` data: an image to copy into device memory at load, with
/// each symbol's offset inside it.
#[derive(Clone, Debug, Default)]
pub struct ModuleData {
    /// Initial bytes.
    pub image: Vec<u8>,
    /// Alignment the image needs.
    pub align: u64,
    /// Relocations: at `image[at..at + 8]`, add the image's device base address.
    pub relocs: Vec<usize>,
    /// Symbol → offset in the image.
    pub symbols: HashMap<String, u64>,
    /// Symbol → size in bytes.
    pub sizes: HashMap<String, u64>,
}

/// A decoded module: one [`Program`] per `.entry`.
///
/// Programs reference module data by absolute device address, so decoding needs the address
/// where the data image ([`ModuleData`]) will live (`data_base`).
#[derive(Clone, Debug)]
pub struct DecodedModule {
    /// Kernels by name.
    pub programs: HashMap<String, std::sync::Arc<Program>>,
}

/// A function the launcher serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// `vprintf(.param .b64 fmt, .param .b64 args) -> .b32`.
    Vprintf,
    /// `malloc(.param .b64 size) -> .b64`.
    Malloc,
    /// `free(.param .b64 ptr)`.
    Free,
    /// `__assertfail(.param .b64 message, .param .b64 file, .param .b32 line,
    /// .param .b64 function, .param .b64 charSize)`.
    AssertFail,
}

impl Service {
    /// The service a function of this name is, with its parameter sizes and return size.
    pub(crate) fn named(name: &str) -> Option<(Service, &'static [u32], Option<u32>)> {
        Some(match name {
            "vprintf" => (Service::Vprintf, &[8, 8], Some(4)),
            "malloc" => (Service::Malloc, &[8], Some(8)),
            "free" => (Service::Free, &[8], None),
            "__assertfail" => (Service::AssertFail, &[8, 8, 4, 8, 8], None),
            _ => return None,
        })
    }
}
