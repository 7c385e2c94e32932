//! Running compiled kernels: the context compiled code reads, the runtime functions it calls
//! (slow-path address resolution, atomics, clocks, faults, lane functions without native
//! code), and the block driver that resolves suspension points (barriers, warp collectives).

use super::analysis::PointKind;
use super::{JitKernel, KernelFn};
use crate::fault;
use crate::fault::Fault;
use crate::interp::mem::{self, BlockMem, Loc};
use crate::interp::sync::match_result;
use crate::interp::warp::{lanes, shfl_source, vote_result};
use crate::ir::{BarKind, Fn1, Fn2, Fn3, Inst, Op, ShflMode, Space, Src, WARP};
use crate::launch::Launch;

/// A thread's state word: the resume index in the low bits, this bit while it waits.
pub(crate) const WAIT: u32 = 1 << 31;
/// Set with the resume index by the vector code when it suspends a whole group: the group's
/// lanes stopped together, so when all four still carry it the group resumes without
/// checking that its uniform and stepped registers agree. Not part of the index.
pub(crate) const GROUP: u32 = 1 << 30;
/// Words of one stage buffer: a warp's 32 staged operands with 32 words of padding on each
/// side, so a shuffle's vector loads of lanes `l ± 31` stay inside (the last word holds a
/// vote's ballot or a reduction's result).
pub(crate) const STAGE_WORDS: usize = 96;
/// The state of a thread that exited.
pub(crate) const EXITED: u32 = u32::MAX;
/// Global ranges the compiled code checks inline before calling `resolve`.
pub(crate) const WAYS: usize = 4;
/// u64s per thread of suspension operands and collective results.
pub(crate) const COLL_WIDTH: usize = 4;

/// `sreg` codes.
pub(crate) const SREG_SMID: u32 = 0;
pub(crate) const SREG_CLOCK: u32 = 1;
pub(crate) const SREG_CLOCK64: u32 = 2;
pub(crate) const SREG_GLOBALTIMER: u32 = 3;

/// `fault` codes.
pub(crate) const FAULT_TRAP: u32 = 0;
pub(crate) const FAULT_RET: u32 = 1;
pub(crate) const FAULT_PARAM: u32 = 2;
pub(crate) const FAULT_END: u32 = 3;

/// What compiled code and the runtime functions share for one block. The fields up to
/// `faulted` are read by compiled code at fixed offsets.
#[repr(C)]
pub(crate) struct Ctx {
    pub(crate) params: *const u8,
    pub(crate) shared: *mut u8,
    pub(crate) local: *mut u8,
    pub(crate) tparam: *mut u8,
    pub(crate) spill: *mut u64,
    pub(crate) state: *mut u32,
    pub(crate) coll: *mut u64,
    pub(crate) ntid: [u64; 3],
    pub(crate) ctaid: [u64; 3],
    pub(crate) nctaid: [u64; 3],
    pub(crate) nwarps: u32,
    pub(crate) nsm: u32,
    pub(crate) dynamic_at: u64,
    pub(crate) dynamic_len: u64,
    /// `%dynamic_smem_size`: the bytes the launch asked for (`dynamic_len` rounds each
    /// request up to 16).
    pub(crate) dynamic_requested: u64,
    /// Threads in the block (the spill area's row length).
    pub(crate) nthreads: u64,
    /// Pinned global ranges: first address, end address, host pointer of the first byte.
    pub(crate) cache: [[u64; 3]; WAYS],
    /// Threads that exited (counted by compiled code that keeps state words).
    pub(crate) exits: u64,
    /// Threads that began waiting at a block barrier since the driver last released one,
    /// and whether any of those waits is not a plain `bar.sync 0`.
    pub(crate) waits: u64,
    pub(crate) odd_waits: u64,
    /// The threads `handed_lo..handed_hi` include every one the vector code left to the
    /// scalar code in this pass (empty: none).
    pub(crate) handed_lo: u64,
    pub(crate) handed_hi: u64,
    /// The two stage buffers of [`STAGE_WORDS`] for the warp collectives the vector code
    /// resolves (`lower/vector/staged.rs`): the one the next collective writes, and the one
    /// the last resolved collective was written in (swapped at each resolution).
    pub(crate) stage_write: *mut u32,
    pub(crate) stage_read: *mut u32,
    /// Per hoisted access site, host minus device address (`hoist.rs`), for the block's
    /// run on the vector function without their checks.
    pub(crate) hoist: [u64; super::hoist::MAX_SITES],
    /// Non-zero: the resume index of a barrier every group of the block waits at as a group,
    /// released by the driver without touching the state words (`run_threads`); the vector
    /// code resumes each group there whatever its state word says.
    pub(crate) resume: u64,
    /// Bit `min(i, 63)` for each resume index `i` at which the vector code suspended a whole
    /// group at a block barrier since the driver last cleared it.
    pub(crate) bar_points: u64,
    /// Set by a runtime function that recorded a fault.
    pub(crate) faulted: u64,
    next_way: usize,
    shared_len: usize,
    local_len: usize,
    tparam_len: usize,
    launch: *const Launch,
    fault: Option<Fault>,
    /// `bar.arrive`s per barrier id since it last completed, and the count they named.
    arrivals: [u32; 16],
    arrive_count: [u32; 16],
}

impl Ctx {
    /// The block's memories as the engine's memory functions take them.
    ///
    /// # Safety
    /// The pointers must be the driver's live buffers of the recorded lengths, with no other
    /// reference to them while the result lives (compiled code is stopped in a call).
    unsafe fn block_mem(&self) -> BlockMem<'static> {
        // SAFETY: the caller's contract; the buffers outlive the call that uses the result.
        unsafe {
            let l = &*self.launch;
            BlockMem {
                shared: std::slice::from_raw_parts_mut(self.shared, self.shared_len),
                static_shared: l.prog.static_shared_bytes as usize,
                dynamic_at: self.dynamic_at as usize,
                dynamic_len: self.dynamic_len as usize,
                local: std::slice::from_raw_parts_mut(self.local, self.local_len),
                local_bytes: l.prog.local_bytes as usize,
                tparam: std::slice::from_raw_parts_mut(self.tparam, self.tparam_len),
                tparam_bytes: l.prog.thread_param_bytes as usize,
            }
        }
    }

    fn record(&mut self, pc: u32, t: u64, msg: String) {
        self.fault = Some(Fault {
            pc,
            lane: t as u32,
            msg,
        });
        self.faulted = 1;
    }
}

pub(crate) fn space_code(s: Space) -> u32 {
    match s {
        Space::Global => 0,
        Space::Shared => 1,
        Space::Local => 2,
        Space::Param => 3,
        Space::Generic => 4,
    }
}

fn space_of(c: u32) -> Space {
    match c {
        0 => Space::Global,
        1 => Space::Shared,
        2 => Space::Local,
        3 => Space::Param,
        _ => Space::Generic,
    }
}

/// The slow path of an access: full resolution as the interpreter does it (a global range
/// found is remembered in the inline cache); null after recording the fault.
pub(crate) extern "C" fn resolve(
    ctx: *mut Ctx,
    space: u32,
    addr: u64,
    total: u64,
    write: u32,
    t: u64,
    pc: u32,
) -> *mut u8 {
    // SAFETY: compiled code passes the driver's context, which nothing else touches during
    // the call.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as above; the launch outlives the block.
    let l = unsafe { &*ctx.launch };
    // SAFETY: the driver's buffers, not referenced elsewhere during this call.
    let m = unsafe { ctx.block_mem() };
    match mem::locate(l, &m, space_of(space), addr, total, t as usize, write != 0) {
        Ok(loc) => match loc {
            Loc::Global(p) => {
                if let Some((lo, hi, host)) = l.global(addr, total) {
                    ctx.cache[ctx.next_way] = [lo, hi, host as u64];
                    ctx.next_way = (ctx.next_way + 1) % WAYS;
                }
                p
            }
            Loc::Shared(i) => ctx.shared.wrapping_add(i),
            Loc::Local(i) => ctx.local.wrapping_add(i),
            Loc::TParam(i) => ctx.tparam.wrapping_add(i),
            Loc::KParam(i) => ctx.params.wrapping_add(i) as *mut u8,
        },
        Err(msg) => {
            ctx.record(pc, t, msg);
            std::ptr::null_mut()
        }
    }
}

/// The host pointers of a vector group's per-lane access: lane `j` (thread `t0 + j`) at
/// `addrs[j]` into `out[j]`, in lane order, through the cached ranges or [`resolve`]. At the
/// first lane that faults its pointer is null, the fault is recorded and 1 returned (the
/// lanes before it keep theirs, so a store still happens for them as on the scalar code).
pub(crate) extern "C" fn group_access(
    ctx: *mut Ctx,
    space: u32,
    addrs: *const u64,
    total: u64,
    write: u32,
    t0: u64,
    pc: u32,
    out: *mut u64,
) -> u32 {
    use super::vector::LANES;
    for j in 0..LANES {
        // SAFETY: compiled code passes two stack arrays of `LANES` u64s.
        let a = unsafe { *addrs.add(j) };
        let cached = (space_of(space) == Space::Global || space_of(space) == Space::Generic)
            && a % total == 0;
        let hit = cached
            .then(|| {
                // SAFETY: as in `resolve`.
                unsafe { &(*ctx).cache }
                    .iter()
                    .find(|[lo, hi, _]| a >= *lo && a < *hi && hi - a >= total)
                    .map(|[lo, _, host]| (host + (a - lo)) as *mut u8)
            })
            .flatten();
        let p = hit.unwrap_or_else(|| resolve(ctx, space, a, total, write, t0 + j as u64, pc));
        // SAFETY: as above.
        unsafe { *out.add(j) = p as u64 };
        if p.is_null() {
            return 1;
        }
    }
    0
}

/// `atom`/`red` at `addr` for thread `t`: the old value (extended), or a recorded fault.
pub(crate) extern "C" fn atom(
    ctx: *mut Ctx,
    inst: *const Inst,
    addr: u64,
    b: u64,
    c: u64,
    t: u64,
    pc: u32,
) -> u64 {
    // SAFETY: as in `resolve`; `inst` points into the program the kernel keeps alive.
    let (ctx, inst) = unsafe { (&mut *ctx, &*inst) };
    let Op::Atom { space, op, ty, .. } = &inst.op else {
        ctx.record(pc, t, "internal error: not an atomic instruction".into());
        return 0;
    };
    // SAFETY: as in `resolve`.
    let l = unsafe { &*ctx.launch };
    // SAFETY: as in `resolve`.
    let mut m = unsafe { ctx.block_mem() };
    let size = ty.bytes() as u64;
    let loc = match mem::locate(l, &m, *space, addr, size, t as usize, true) {
        Ok(loc @ (Loc::Global(_) | Loc::Shared(_))) => loc,
        Ok(_) => {
            ctx.record(
                pc,
                t,
                format!("atomic on address {addr:#x}, which is not global or shared memory"),
            );
            return 0;
        }
        Err(msg) => {
            ctx.record(pc, t, msg);
            return 0;
        }
    };
    ty.extend(mem::atomic(&mut m, loc, *op, *ty, b, c))
}

/// A call of a served function (`vprintf`, `malloc`, ...; `services.rs`) by thread `t`; a
/// failure is recorded as its fault.
pub(crate) extern "C" fn service(ctx: *mut Ctx, inst: *const Inst, t: u64, pc: u32) {
    // SAFETY: as in `atom`.
    let (ctx, inst) = unsafe { (&mut *ctx, &*inst) };
    let Op::Service(call) = &inst.op else {
        ctx.record(pc, t, "internal error: not a service call".into());
        return;
    };
    // SAFETY: as in `resolve`.
    let l = unsafe { &*ctx.launch };
    // SAFETY: as in `resolve`.
    let mut m = unsafe { ctx.block_mem() };
    let c = ctx.ctaid;
    let block = crate::Dim3::new(c[0] as u32, c[1] as u32, c[2] as u32);
    if let Err(msg) = crate::service_call::run(l, &mut m, t as usize, block, t as u32, call) {
        ctx.record(pc, t, msg);
    }
}

/// Special registers that are not plain values of the block.
pub(crate) extern "C" fn sreg(ctx: *mut Ctx, code: u32, _t: u64) -> u64 {
    // SAFETY: as in `resolve`.
    let l = unsafe { &*(*ctx).launch };
    match code {
        SREG_SMID => rayon::current_thread_index().unwrap_or(0) as u64,
        SREG_CLOCK => l.start.elapsed().as_nanos() as u32 as u64,
        SREG_CLOCK64 => l.start.elapsed().as_nanos() as u64,
        _ => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    }
}

/// Records a fault raised by compiled code itself.
pub(crate) extern "C" fn fault(ctx: *mut Ctx, code: u32, t: u64, pc: u32, extra: u64) {
    // SAFETY: as in `resolve`.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as in `resolve`.
    let l = unsafe { &*ctx.launch };
    let msg = match code {
        FAULT_TRAP => "trap".to_string(),
        FAULT_RET => "ret with no pending call".to_string(),
        FAULT_PARAM => format!(
            "load past the {} bytes of kernel parameters at {extra:#x}",
            l.params.len()
        ),
        _ => "ran past the end of the code".to_string(),
    };
    ctx.record(pc, t, msg);
}

/// `bar.arrive id, count` of thread `t`: counted in for the driver, which completes the
/// barrier with the threads that wait at it.
pub(crate) extern "C" fn bar_arrive(ctx: *mut Ctx, id: u64, count: u64, t: u64, pc: u32) {
    // SAFETY: as in `resolve`.
    let ctx = unsafe { &mut *ctx };
    if id >= 16 {
        ctx.record(pc, t, format!("barrier id {id} is not in 0..16"));
        return;
    }
    ctx.arrivals[id as usize] += 1;
    ctx.arrive_count[id as usize] = count as u32;
}

/// `nanosleep`, as the interpreter waits.
pub(crate) extern "C" fn nanosleep(ns: u64) {
    crate::interp::exec::nanosleep(ns as u32 as u64);
}

/// Lane functions without native code, called through the C ABI.
pub(crate) extern "C" fn call1(f: usize, a: u64) -> u64 {
    // SAFETY: compiled code passes only `Fn1` values of the program here.
    let f: Fn1 = unsafe { std::mem::transmute::<usize, Fn1>(f) };
    f(a)
}

/// As [`call1`], two operands.
pub(crate) extern "C" fn call2(f: usize, a: u64, b: u64) -> u64 {
    // SAFETY: compiled code passes only `Fn2` values of the program here.
    let f: Fn2 = unsafe { std::mem::transmute::<usize, Fn2>(f) };
    f(a, b)
}

/// As [`call1`], three operands.
pub(crate) extern "C" fn call3(f: usize, a: u64, b: u64, c: u64) -> u64 {
    // SAFETY: compiled code passes only `Fn3` values of the program here.
    let f: Fn3 = unsafe { std::mem::transmute::<usize, Fn3>(f) };
    f(a, b, c)
}

/// `bfi`.
pub(crate) extern "C" fn bfi(wide: u64, a: u64, b: u64, c: u64, e: u64) -> u64 {
    crate::alu::bfi(wide != 0, a, b, c, e)
}

/// Per-worker buffers of a block, reused by the worker's next block.
#[derive(Default)]
struct Buffers {
    shared: Vec<u8>,
    local: Vec<u8>,
    tparam: Vec<u8>,
    spill: Vec<u64>,
    state: Vec<u32>,
    coll: Vec<u64>,
    stage: Vec<u32>,
    /// The device ranges the last block of launch `cache_launch` found: pinned until that
    /// launch ends, so the next block of the same launch on this worker starts with them.
    cache: [[u64; 3]; WAYS],
    cache_launch: u64,
    next_way: usize,
    /// The hoisted accesses' forms (`hoist.rs`) for the launch and plan `forms_of` names.
    forms: Option<super::hoist::Forms>,
    forms_of: (u64, usize),
}

thread_local! {
    static BUFFERS: std::cell::RefCell<Buffers> = std::cell::RefCell::new(Buffers::default());
}

/// Runs block `b` (linear index) of a launch with the compiled kernel `k`, on this worker's
/// buffers (borrowed in place: moving them in and out cost about 100 instructions a block).
pub(crate) fn run_block(l: &Launch, k: &JitKernel, b: u64) -> Result<(), String> {
    BUFFERS.with(|c| match c.try_borrow_mut() {
        Ok(mut bufs) => run_block_in(l, k, b, &mut bufs),
        // A block run while another runs on this thread (no runtime function does that
        // today) gets buffers of its own.
        Err(_) => run_block_in(l, k, b, &mut Buffers::default()),
    })
}

fn run_block_in(l: &Launch, k: &JitKernel, b: u64, bufs: &mut Buffers) -> Result<(), String> {
    let block_idx = l.grid.unlinear(b);
    let prog = &*l.prog;
    let n = l.block.count() as usize;
    let static_shared = prog.static_shared_bytes as usize;
    let dynamic_at = static_shared.next_multiple_of(16);
    // Shared memory starts zeroed, as the interpreter's; local and call-parameter memory
    // keep stale bytes (PTX leaves them undefined).
    bufs.shared.clear();
    bufs.shared.resize(dynamic_at + l.dynamic_bytes, 0);
    bufs.local.resize(n * prog.local_bytes as usize, 0);
    bufs.tparam.resize(n * prog.thread_param_bytes as usize, 0);
    bufs.spill.resize(n * k.spill_slots, 0);
    // Zeroed by `run_threads` where they are read (a stateless kernel needs none zeroed).
    bufs.state.resize(n, 0);
    bufs.coll.resize(n * COLL_WIDTH, 0);
    bufs.stage.resize(2 * STAGE_WORDS, 0);
    let dims = |d: crate::dim::Dim3| [d.x as u64, d.y as u64, d.z as u64];
    let nwarps = n.div_ceil(WARP);
    let mut ctx = Ctx {
        params: l.params.as_ptr(),
        shared: bufs.shared.as_mut_ptr(),
        local: bufs.local.as_mut_ptr(),
        tparam: bufs.tparam.as_mut_ptr(),
        spill: bufs.spill.as_mut_ptr(),
        state: bufs.state.as_mut_ptr(),
        coll: bufs.coll.as_mut_ptr(),
        ntid: dims(l.block),
        ctaid: dims(block_idx),
        nctaid: dims(l.grid),
        nwarps: nwarps as u32,
        nsm: l.nsm,
        dynamic_at: dynamic_at as u64,
        dynamic_len: l.dynamic_bytes as u64,
        dynamic_requested: l.dynamic_requested as u64,
        nthreads: n as u64,
        cache: if bufs.cache_launch == l.id {
            bufs.cache
        } else {
            // A worker's first block of a launch starts with the ranges the arguments
            // pinned (compiled code may read the cache once per call).
            let mut c = [[u64::MAX, 0, 0]; WAYS];
            for (way, p) in c.iter_mut().zip(&l.pins) {
                *way = [p.address(), p.address() + p.len(), p.as_ptr() as u64];
            }
            c
        },
        exits: 0,
        waits: 0,
        odd_waits: 0,
        handed_lo: u64::MAX,
        handed_hi: 0,
        stage_write: bufs.stage.as_mut_ptr(),
        // SAFETY: the second of the two buffers `bufs.stage` was sized for above.
        stage_read: unsafe { bufs.stage.as_mut_ptr().add(STAGE_WORDS) },
        hoist: [0; super::hoist::MAX_SITES],
        resume: 0,
        bar_points: 0,
        faulted: 0,
        next_way: if bufs.cache_launch == l.id {
            bufs.next_way
        } else {
            l.pins.len().min(WAYS) % WAYS
        },
        shared_len: bufs.shared.len(),
        local_len: bufs.local.len(),
        tparam_len: bufs.tparam.len(),
        launch: l,
        fault: None,
        arrivals: [0; 16],
        arrive_count: [0; 16],
    };
    let call = |ctx: &mut Ctx, f: KernelFn, lo: usize, hi: usize| -> Result<(), String> {
        // SAFETY: `f` is one of the compiled functions of `l.prog`; `ctx` describes this
        // block's buffers (sized above for `n` threads, `lo..hi` within them), which are not
        // touched otherwise until the call returns.
        let status = unsafe { f(ctx, lo as u32, hi as u32) };
        if status == 0 {
            return Ok(());
        }
        let f = ctx.fault.take().unwrap_or(Fault {
            pc: 0,
            lane: lo as u32,
            msg: "internal error: a fault without a cause".into(),
        });
        Err(fault::fault_detail(l, block_idx, &f))
    };
    // The launch's forms of the hoisted accesses (once per launch and worker), then this
    // block's check of them.
    let hoisted = match &k.hoisted {
        Some((_, plan)) => {
            let key = (l.id, plan as *const _ as usize);
            if bufs.forms_of != key {
                bufs.forms = plan.forms(l);
                bufs.forms_of = key;
            }
            let env = super::hoist::BlockEnv {
                ctaid: ctx.ctaid,
                shared: ctx.shared as u64,
                dynamic_at: ctx.dynamic_at,
            };
            let deltas = bufs.forms.as_mut().and_then(|f| f.block(l, &env));
            deltas.inspect(|d| ctx.hoist = *d).is_some()
        }
        None => false,
    };
    let r = run_threads(k, hoisted, l, block_idx, &mut ctx, n, call);
    bufs.cache = ctx.cache;
    bufs.next_way = ctx.next_way;
    bufs.cache_launch = l.id;
    r
}

/// Runs the block's threads to their end, resolving suspension points between calls.
fn run_threads(
    k: &JitKernel,
    hoisted: bool,
    l: &Launch,
    block_idx: crate::dim::Dim3,
    ctx: &mut Ctx,
    n: usize,
    call: impl Fn(&mut Ctx, KernelFn, usize, usize) -> Result<(), String>,
) -> Result<(), String> {
    let nwarps = n.div_ceil(WARP);
    // The vector code runs groups of `LANES` threads that share `tid.y`/`tid.z`; threads it
    // hands over, and every thread of other block shapes, run on the scalar code.
    let vector = k
        .vfunc
        .filter(|_| (l.block.x as usize).is_multiple_of(super::vector::LANES))
        .map(|v| match k.hoisted {
            // The block's hoisted accesses are all proven in range: the function without
            // their checks runs its groups.
            Some((h, _)) if hoisted => h,
            _ => v,
        });
    if let (Some(v), false) = (vector, k.has_points) {
        // No barriers: the vector code runs every group from the top; the scalar code runs
        // only the threads groups handed over (the others' states say exited).
        // SAFETY: the driver's buffer of `n` state words; compiled code is not running.
        unsafe { std::slice::from_raw_parts_mut(ctx.state, n) }.fill(EXITED);
        (ctx.handed_lo, ctx.handed_hi) = (u64::MAX, 0);
        call(ctx, v, 0, n)?;
        if ctx.handed_lo < ctx.handed_hi {
            call(ctx, k.func, ctx.handed_lo as usize, ctx.handed_hi as usize)?;
        }
        return Ok(());
    }
    // Every thread starts at the top (the scalar code of a kernel with a vector function
    // reads its state word even in one pass).
    // SAFETY: the driver's buffer of `n` state words; compiled code is not running.
    unsafe { std::slice::from_raw_parts_mut(ctx.state, n) }.fill(0);
    if k.resumes.is_empty() && vector.is_none() {
        // No barriers or collectives: one pass runs every thread to its end.
        return call(ctx, k.func, 0, n);
    }
    let mut groups_only = false;
    loop {
        if k.has_warp_points {
            for w in 0..nwarps {
                let (lo, hi) = (w * WARP, ((w + 1) * WARP).min(n));
                loop {
                    // The vector code runs the warp's groups it can; the scalar code the
                    // lanes it hands over (or every lane, without vector code).
                    let (slo, shi) = match vector {
                        Some(v) => {
                            (ctx.handed_lo, ctx.handed_hi) = (u64::MAX, 0);
                            call(ctx, v, lo, hi)?;
                            (ctx.handed_lo as usize, ctx.handed_hi as usize)
                        }
                        None => (lo, hi),
                    };
                    if slo < shi {
                        call(ctx, k.func, slo, shi)?;
                    }
                    if !warp_points(k, l, ctx, lo, hi) {
                        break;
                    }
                }
            }
        } else {
            let (lo, hi) = match vector {
                Some(v) => {
                    (ctx.handed_lo, ctx.handed_hi) = (u64::MAX, 0);
                    call(ctx, v, 0, n)?;
                    (ctx.handed_lo as usize, ctx.handed_hi as usize)
                }
                None => (0, n),
            };
            if lo < hi {
                call(ctx, k.func, lo, hi)?;
            }
            // Only the vector code ran this pass: every thread that waits now was suspended
            // there, with its group.
            groups_only = vector.is_some() && lo >= hi;
        }
        ctx.resume = 0;
        let points = std::mem::take(&mut ctx.bar_points);
        if ctx.exits == n as u64 {
            return Ok(());
        }
        let (waits, odd) = (ctx.waits, ctx.odd_waits);
        ctx.waits = 0;
        ctx.odd_waits = 0;
        if odd == 0 && waits + ctx.exits == n as u64 && ctx.arrivals.iter().all(|a| *a == 0) {
            if groups_only && waits == n as u64 && points.count_ones() == 1 && points >> 63 == 0 {
                // Every group waits at the same `bar.sync 0`: the next pass resumes them all
                // there as groups, and their state words (which say so, but `WAIT`) are left
                // as they are; each group writes its own again before that pass ends.
                ctx.resume = points.trailing_zeros() as u64;
                continue;
            }
            // Every thread left waits at a plain `bar.sync 0` (exited ones count as arrived,
            // as in `barriers`): release them all without the full scan.
            // SAFETY: the driver's buffer of `n` state words; compiled code is not running.
            let state = unsafe { std::slice::from_raw_parts_mut(ctx.state, n) };
            for s in state.iter_mut() {
                // Branch-free, so the loop vectorises.
                *s &= if *s == EXITED { u32::MAX } else { !WAIT };
            }
            continue;
        }
        if !barriers(k, l, block_idx, ctx, n)? {
            return Ok(());
        }
    }
}

/// The instruction a thread whose state word is `s` waits at, when that is a warp
/// collective (`WAIT` set, the resume index of a warp point).
fn warp_wait(k: &JitKernel, s: u32) -> Option<u32> {
    if s == EXITED || s & WAIT == 0 {
        return None;
    }
    match ((s & !(WAIT | GROUP)) as usize)
        .checked_sub(1)
        .and_then(|i| k.resumes.get(i))
    {
        Some(&(pc, PointKind::Warp)) => Some(pc),
        _ => None,
    }
}

/// Whether the vector code keeps this warp collective's operand `a` in the warp's stage
/// instead of the operand rows and may resolve it itself (`lower/vector/staged.rs`): a
/// `shfl.sync` with immediate `b` and `c`, a `vote.sync` or a `redux.sync`, whose member mask
/// is the immediate whole warp; `activemask`.
pub(crate) fn staged(op: &Op) -> bool {
    let full = |m: &Src| matches!(m, Src::Imm(m) if *m as u32 == u32::MAX);
    match op {
        Op::Shfl { b, c, mask, .. } => matches!((b, c), (Src::Imm(_), Src::Imm(_))) && full(mask),
        Op::Vote { mask, .. } | Op::Redux { mask, .. } => full(mask),
        Op::Activemask { .. } => true,
        _ => false,
    }
}

/// The id of a `bar.sync` with an immediate id and no thread count. Compiled code writes no
/// operand row when it waits there (the driver reads the id from the instruction): the
/// usual `__syncthreads()` costs no stores for it.
pub(crate) fn fixed_barrier(op: &Op) -> Option<u64> {
    match op {
        Op::Bar {
            id: Src::Imm(id),
            count: None,
            kind: BarKind::Sync,
        } => Some(*id),
        _ => None,
    }
}

/// Writes the operand rows (`a, b, c, mask` for a shuffle, `a, mask` for the others) of the
/// lanes of a warp that wait as vector groups at a staged collective: `a` from the stage
/// buffer they wrote (`stage_write`: no resolution swapped the buffers since, as that would
/// have resumed them), the others the instruction's immediates.
fn unstage(k: &JitKernel, l: &Launch, ctx: &Ctx, state: &[u32], coll: &mut [u64]) {
    // SAFETY: one of the driver's two stage buffers; compiled code is not running.
    let stage = unsafe { std::slice::from_raw_parts(ctx.stage_write, STAGE_WORDS) };
    let buf = &stage[32..][..WARP];
    for (lane, s) in state.iter().enumerate() {
        let Some(pc) = warp_wait(k, *s).filter(|_| *s & GROUP != 0) else {
            continue;
        };
        let op = &l.prog.code[pc as usize].op;
        if !staged(op) {
            continue;
        }
        let row = &mut coll[lane * COLL_WIDTH..][..COLL_WIDTH];
        match op {
            Op::Shfl {
                b: Src::Imm(b),
                c: Src::Imm(c),
                mask: Src::Imm(m),
                ..
            } => row.copy_from_slice(&[buf[lane] as u64, *b, *c, *m]),
            Op::Vote {
                mask: Src::Imm(m), ..
            }
            | Op::Redux {
                mask: Src::Imm(m), ..
            } => row[..2].copy_from_slice(&[buf[lane] as u64, *m]),
            _ => {}
        }
    }
}

/// Resolves one group of lanes of the warp `lo..hi` waiting at a warp collective, by the
/// interpreter's rules (`interp/collective.rs`): called when every thread of the warp has
/// exited or waits (the state in which the interpreter resolves too), it resolves the
/// lowest-PC group whose members all wait in it, else the lowest-PC group; each lane's result
/// covers its member mask's lanes that arrived. Lanes of one instruction form one group
/// whatever inlined copy they wait in. False when no lane waits at a collective, so every
/// thread the barrier release sees waits at a barrier or has exited.
fn warp_points(k: &JitKernel, l: &Launch, ctx: &mut Ctx, lo: usize, hi: usize) -> bool {
    use crate::interp::collective::Waiters;
    use crate::interp::sync::redux_result;
    // SAFETY: the driver's buffers of `n >= hi` threads; compiled code is not running.
    let state = unsafe { std::slice::from_raw_parts_mut(ctx.state, hi) };
    // SAFETY: as above, `COLL_WIDTH` u64s per thread.
    let coll = unsafe { std::slice::from_raw_parts_mut(ctx.coll, hi * COLL_WIDTH) };
    // The common end: no lane waits (branch-free, so the scan vectorises).
    if state[lo..hi]
        .iter()
        .fold(0, |w, s| w | (*s != EXITED && *s & WAIT != 0) as u32)
        == 0
    {
        return false;
    }
    if k.vfunc.is_some() {
        unstage(k, l, ctx, &state[lo..hi], &mut coll[lo * COLL_WIDTH..]);
    }
    if whole_warp_shuffle(k, l, &mut state[lo..hi], &mut coll[lo * COLL_WIDTH..]) {
        return true;
    }
    let operand = |lane: usize, j: usize| coll[(lo + lane) * COLL_WIDTH + j];
    // Where the member mask sits in a waiting thread's operand row (`lower/` stores
    // `a, b, c, mask` for `shfl`, `a, mask` for the others; `activemask` has none).
    let mask_at = |op: &Op| match op {
        Op::Shfl { .. } => Some(3),
        Op::Vote { .. } | Op::Match { .. } | Op::Redux { .. } => Some(1),
        _ => None,
    };
    let live = hi - lo;
    let mut w = Waiters {
        waiting: 0,
        pc: [0; WARP],
        members: [0; WARP],
        // Lanes past the block's last thread do not exist.
        gone: if live >= WARP {
            0
        } else {
            !((1u32 << live) - 1)
        },
    };
    for (lane, s) in state[lo..hi].iter().enumerate() {
        if *s == EXITED {
            w.gone |= 1 << lane;
            continue;
        }
        let Some(pc) = warp_wait(k, *s) else {
            continue;
        };
        w.waiting |= 1 << lane;
        w.pc[lane] = pc;
        if let Some(j) = l.prog.code.get(pc as usize).and_then(|i| mask_at(&i.op)) {
            w.members[lane] = operand(lane, j) as u32;
        }
    }
    let Some((pc, group, _complete)) = w.pick() else {
        return false;
    };
    let mut a = [0u64; WARP];
    for lane in lanes(group) {
        a[lane] = operand(lane, 0);
    }
    let m = &w.members;
    let mut out = [(0u64, 0u64); WARP];
    for lane in lanes(group) {
        out[lane] = match &l.prog.code[pc as usize].op {
            Op::Shfl { mode, .. } => {
                let (b, c) = (operand(lane, 1), operand(lane, 2));
                let (j, ok) = shfl_source(*mode, lane, b, c, m[lane], group);
                (a[j] & 0xFFFF_FFFF, ok as u64)
            }
            Op::Vote { mode, neg, .. } => (vote_result(*mode, *neg, &a, m[lane], group), 0),
            Op::Redux { op, .. } => (redux_result(*op, &a, m[lane], group), 0),
            Op::Match { mode, wide, .. } => match_result(*mode, *wide, &a, m[lane], group, lane),
            // `activemask`: the lanes that arrived.
            _ => (group as u64, 0),
        };
    }
    for lane in lanes(group) {
        coll[(lo + lane) * COLL_WIDTH] = out[lane].0;
        coll[(lo + lane) * COLL_WIDTH + 1] = out[lane].1;
        // Each thread resumes from its own suspension (its inlined copy of the instruction).
        state[lo + lane] &= !WAIT;
    }
    true
}

/// [`warp_points`] for its commonest case, in one pass: all 32 lanes of the warp wait in the
/// same suspension of a `shfl.sync`. Then they form the only group, and every lane's result is
/// what the general rule gives (`shfl_source` with the whole warp arrived). False, touching
/// nothing, in every other case.
fn whole_warp_shuffle(k: &JitKernel, l: &Launch, state: &mut [u32], coll: &mut [u64]) -> bool {
    let s0 = state[0];
    if state.len() != WARP || state.iter().any(|s| *s != s0) {
        return false;
    }
    let Some(pc) = warp_wait(k, s0) else {
        return false;
    };
    let Some(Op::Shfl { mode, .. }) = l.prog.code.get(pc as usize).map(|i| &i.op) else {
        return false;
    };
    let mut a = [0u64; WARP];
    for (lane, v) in a.iter_mut().enumerate() {
        *v = coll[lane * COLL_WIDTH] & 0xFFFF_FFFF;
    }
    // One loop per mode, so that each compiles without the per-lane `match`.
    fn resolve(coll: &mut [u64], a: &[u64; WARP], source: impl Fn(usize, &[u64]) -> (usize, bool)) {
        for (lane, row) in coll.chunks_exact_mut(COLL_WIDTH).take(WARP).enumerate() {
            let (j, ok) = source(lane, row);
            row[0] = a[j];
            row[1] = ok as u64;
        }
    }
    // `a, b, c, mask` in a row, as `lower/` stores a waiting `shfl`'s operands.
    let all = u32::MAX;
    match *mode {
        ShflMode::Up => resolve(coll, &a, |lane, r| {
            shfl_source(ShflMode::Up, lane, r[1], r[2], r[3] as u32, all)
        }),
        ShflMode::Down => resolve(coll, &a, |lane, r| {
            shfl_source(ShflMode::Down, lane, r[1], r[2], r[3] as u32, all)
        }),
        ShflMode::Bfly => resolve(coll, &a, |lane, r| {
            shfl_source(ShflMode::Bfly, lane, r[1], r[2], r[3] as u32, all)
        }),
        ShflMode::Idx => resolve(coll, &a, |lane, r| {
            shfl_source(ShflMode::Idx, lane, r[1], r[2], r[3] as u32, all)
        }),
    }
    for s in state.iter_mut() {
        *s &= !WAIT;
    }
    true
}

/// Releases the barriers whose threads have all arrived (those waiting, and those that went
/// on from `bar.arrive`), writing `bar.red`'s reduction for its waiters; false when every
/// thread has exited. A barrier that cannot be released is the interpreter's
/// barrier-divergence error.
fn barriers(
    k: &JitKernel,
    l: &Launch,
    block: crate::dim::Dim3,
    ctx: &mut Ctx,
    n: usize,
) -> Result<bool, String> {
    // SAFETY: the driver's buffers of `n` threads; compiled code is not running.
    let state = unsafe { std::slice::from_raw_parts_mut(ctx.state, n) };
    // SAFETY: as above.
    let coll = unsafe { std::slice::from_raw_parts_mut(ctx.coll, n * COLL_WIDTH) };
    let mut arrived = ctx.arrivals;
    let mut expected = ctx.arrive_count;
    // `bar.red`: true predicates and threads per barrier.
    let mut red = [(0u32, 0u32); 16];
    let mut waiter = None;
    let mut exited = None;
    let mut waiting = 0;
    let pc_of = |s: u32| {
        ((s & !(WAIT | GROUP)) as usize)
            .checked_sub(1)
            .and_then(|i| k.resumes.get(i))
            .map_or(0, |r| r.0)
    };
    let red_op = |pc: u32| match l.prog.code.get(pc as usize).map(|i| &i.op) {
        Some(Op::Bar {
            kind: BarKind::Red { op, .. },
            ..
        }) => Some(*op),
        _ => None,
    };
    // A waiting thread's barrier id and count: the instruction's for a fixed barrier (whose
    // row compiled code leaves unwritten), else its operand row's.
    let operands = |row: &[u64], pc: u32| {
        let fixed = l.prog.code.get(pc as usize).map(|i| &i.op);
        match fixed.and_then(fixed_barrier) {
            Some(id) => (id, 0),
            None => (row[0], row[1]),
        }
    };
    for (t, s) in state.iter().enumerate() {
        if *s == EXITED {
            exited.get_or_insert(t as u32);
            continue;
        }
        let pc = pc_of(*s);
        let (id, count) = operands(&coll[t * COLL_WIDTH..], pc);
        if id >= 16 {
            let f = Fault {
                pc,
                lane: t as u32,
                msg: format!("barrier id {id} is not in 0..16"),
            };
            return Err(fault::fault_detail(l, block, &f));
        }
        arrived[id as usize] += 1;
        expected[id as usize] = count as u32;
        if red_op(pc).is_some() {
            red[id as usize].0 += coll[t * COLL_WIDTH + 2] as u32;
            red[id as usize].1 += 1;
        }
        waiting += 1;
        waiter.get_or_insert((t as u32, pc));
    }
    let Some(waiter) = waiter else {
        return Ok(false);
    };
    let mut released = [false; 16];
    for id in 0..16 {
        let want = match expected[id] {
            0 => n as u32,
            c => c,
        };
        released[id] = arrived[id] > 0 && arrived[id] >= want;
        if released[id] {
            ctx.arrivals[id] = 0;
        }
    }
    if !released.iter().any(|r| *r) && exited.is_some() {
        // As on the hardware, threads that exited count as arrived at a whole-block barrier
        // (`if (i >= n) return; ... __syncthreads();`): with every other thread stopped, such a
        // barrier completes. The interpreter's race checker reports it instead.
        let gone = state.iter().filter(|s| **s == EXITED).count() as u32;
        for id in 0..16 {
            released[id] = arrived[id] > 0 && expected[id] == 0 && arrived[id] + gone >= n as u32;
            if released[id] {
                ctx.arrivals[id] = 0;
            }
        }
    }
    if !released.iter().any(|r| *r) {
        return Err(fault::divergence(
            l, block, waiting, waiter, exited, n as u32,
        ));
    }
    for (s, row) in state.iter_mut().zip(coll.chunks_exact_mut(COLL_WIDTH)) {
        if *s == EXITED {
            continue;
        }
        let pc = pc_of(*s);
        let id = operands(row, pc).0 as usize;
        if !released[id] {
            continue;
        }
        if let Some(op) = red_op(pc) {
            row[0] = op.result(red[id].0, red[id].1);
        }
        *s &= !WAIT;
    }
    Ok(true)
}
