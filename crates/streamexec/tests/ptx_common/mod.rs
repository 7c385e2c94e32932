//! Helpers shared by the PTX-on-host tests (tests/ptx_corpus.rs, tests/ptx_instructions.rs):
//! the host executor, PTX loading and launching, poisoned buffers, float comparisons and
//! directed rounding references for `cvt`.
#![allow(dead_code)]

use std::sync::RwLock;

use bytemuck::Pod;
use streamexec::{
    BlockDim, DeviceMemory, KernelArgs, MultiKernelLoaderSpec, PlatformManager, Result,
    StreamExecutor, ThreadDim, TypedKernel,
};

/// The race checker is a per-executor switch and every test of a binary shares the host
/// executor: tests that turn it on take this for writing, every other launch for reading.
pub static RACE_CHECK: RwLock<()> = RwLock::new(());

/// Device 0 of the host platform.
pub fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .expect("the host platform is always available")
}

/// Loads entry `name` of `ptx` as a typed kernel; panics with the loader's message.
pub fn load<A: KernelArgs>(exec: &StreamExecutor, ptx: &str, name: &str) -> TypedKernel<A> {
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(ptx, name);
    exec.get_kernel(&spec)
        .unwrap_or_else(|e| panic!("loading PTX entry `{name}` on host: {e}"))
}

/// Directives that open every hand-written test module.
pub const HEADER: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";

/// Loads entry `name` of `body` (a module without its `.version`/`.target` lines).
pub fn ptx_kernel<A: KernelArgs>(exec: &StreamExecutor, body: &str, name: &str) -> TypedKernel<A> {
    load(exec, &format!("{HEADER}{body}"), name)
}

/// The text of the `KernelFault` a launch must have ended with.
pub fn fault_text(r: Result<()>) -> String {
    match r {
        Err(e @ streamexec::Error::KernelFault { .. }) => e.to_string(),
        other => panic!("expected a KernelFault, got {other:?}"),
    }
}

/// One launch on a fresh stream, waited for; the stream's status.
pub fn launch<A: KernelArgs>(
    exec: &StreamExecutor,
    threads: impl Into<ThreadDim>,
    blocks: impl Into<BlockDim>,
    kernel: &TypedKernel<A>,
    args: A,
) -> Result<()> {
    let _shared = RACE_CHECK.read().unwrap_or_else(|p| p.into_inner());
    let mut stream = exec.create_stream()?;
    stream
        .then_launch(threads, blocks, kernel, args)
        .block_host_until_done()
}

/// `launch`, panicking with the stream's error.
pub fn run<A: KernelArgs>(
    exec: &StreamExecutor,
    threads: impl Into<ThreadDim>,
    blocks: impl Into<BlockDim>,
    kernel: &TypedKernel<A>,
    args: A,
) {
    let threads = threads.into();
    let blocks = blocks.into();
    launch(exec, threads, blocks, kernel, args).unwrap_or_else(|e| {
        panic!(
            "launch of `{}` ({:?} threads × {:?} blocks): {e}",
            kernel.name(),
            threads.0,
            blocks.0
        )
    })
}

/// `data` on the device.
pub fn upload<T: Pod>(exec: &StreamExecutor, data: &[T]) -> DeviceMemory<T> {
    exec.copy_to_device(data).expect("copy to device")
}

/// `n` elements of `poison` on the device (an output the kernel must overwrite).
pub fn poisoned<T: Pod>(exec: &StreamExecutor, n: usize, poison: T) -> DeviceMemory<T> {
    upload(exec, &vec![poison; n])
}

/// The device buffer's contents.
///
/// With `STREAMEXEC_PTX_DIGEST=FILE` each download also appends `test#n hash` to `FILE` (the
/// test's thread name, its n-th download, a hash of the bytes): `scripts/ptx-engines-agree.sh`
/// runs a test binary on each PTX engine with one seed and checks that the files agree, i.e.
/// that every output is bit-identical on the JIT and the interpreter.
pub fn download<T: Pod>(exec: &StreamExecutor, mem: &DeviceMemory<T>) -> Vec<T> {
    let v = exec.copy_to_vec(mem).expect("copy to host");
    if let Ok(path) = std::env::var("STREAMEXEC_PTX_DIGEST") {
        digest(&path, bytemuck::cast_slice(&v));
    }
    v
}

thread_local! {
    static DOWNLOADS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn digest(path: &str, bytes: &[u8]) {
    use std::io::Write;
    // FNV-1a over the bytes, then the length.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes
        .iter()
        .copied()
        .chain((bytes.len() as u64).to_le_bytes())
    {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    let n = DOWNLOADS.with(|c| {
        c.set(c.get() + 1);
        c.get()
    });
    let name = std::thread::current().name().unwrap_or("main").to_string();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open the digest file");
    // One write per line: O_APPEND keeps lines of parallel tests whole.
    f.write_all(format!("{name}#{n} {h:016x}\n").as_bytes())
        .expect("write the digest file");
}

/// Poison patterns that no tested operation produces by accident.
pub const POISON_I32: i32 = 0xDEAD_BEEFu32 as i32;
pub const POISON_I64: i64 = 0xDEAD_BEEF_DEAD_BEEFu64 as i64;
/// A NaN with a payload no arithmetic produces.
pub const POISON_F32: f32 = f32::from_bits(0x7FBA_DBAD);
pub const POISON_F64: f64 = f64::from_bits(0x7FF7_BADB_ADBA_DBAD);

/// Bit-identical, or both NaN (PTX does not promise a NaN payload).
pub fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.to_bits() != POISON_F32.to_bits())
}

/// Bit-identical, or both NaN.
pub fn same_f64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan() && a.to_bits() != POISON_F64.to_bits())
}

/// IEEE rounding direction of a PTX `.rn/.rz/.rm/.rp` (or `.rni/.rzi/.rmi/.rpi`) modifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Round {
    /// To nearest, ties to even.
    N,
    /// Toward zero.
    Z,
    /// Toward minus infinity.
    M,
    /// Toward plus infinity.
    P,
}

impl Round {
    pub const ALL: [Round; 4] = [Round::N, Round::Z, Round::M, Round::P];
    /// The float-result suffix: rn rz rm rp.
    pub fn float(self) -> &'static str {
        ["rn", "rz", "rm", "rp"][self as usize]
    }
    /// The integer-result suffix: rni rzi rmi rpi.
    pub fn int(self) -> &'static str {
        ["rni", "rzi", "rmi", "rpi"][self as usize]
    }
    /// `x` rounded to an integral value in this direction.
    pub fn integral(self, x: f64) -> f64 {
        match self {
            Round::N => x.round_ties_even(),
            Round::Z => x.trunc(),
            Round::M => x.floor(),
            Round::P => x.ceil(),
        }
    }
}

/// The exact value `x` (an integer below 2^64 in magnitude, or a float's exact value given as
/// `exact` below) rounded to f32 in direction `r`. `nearest` is the round-to-nearest result
/// (Rust's `as`, which rounds correctly), `cmp` compares a candidate with the exact value.
fn directed_f32(nearest: f32, r: Round, cmp: impl Fn(f32) -> std::cmp::Ordering) -> f32 {
    use std::cmp::Ordering::*;
    if nearest.is_nan() {
        return nearest;
    }
    match (r, cmp(nearest)) {
        (Round::N, _) | (_, Equal) => nearest,
        (Round::M, Greater) => nearest.next_down(),
        (Round::P, Less) => nearest.next_up(),
        (Round::Z, Greater) if nearest > 0.0 => nearest.next_down(),
        (Round::Z, Less) if nearest < 0.0 => nearest.next_up(),
        _ => nearest,
    }
}

fn directed_f64(nearest: f64, r: Round, cmp: impl Fn(f64) -> std::cmp::Ordering) -> f64 {
    use std::cmp::Ordering::*;
    if nearest.is_nan() {
        return nearest;
    }
    match (r, cmp(nearest)) {
        (Round::N, _) | (_, Equal) => nearest,
        (Round::M, Greater) => nearest.next_down(),
        (Round::P, Less) => nearest.next_up(),
        (Round::Z, Greater) if nearest > 0.0 => nearest.next_down(),
        (Round::Z, Less) if nearest < 0.0 => nearest.next_up(),
        _ => nearest,
    }
}

/// Compares a float holding an integral value (or ±inf) with an integer, exactly.
fn cmp_int(f: f64, v: i128) -> std::cmp::Ordering {
    if f.is_infinite() {
        return if f > 0.0 {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Less
        };
    }
    // Every f32/f64 at or above 2^24 / 2^53 is an integer and below 2^128 fits i128.
    (f as i128).cmp(&v)
}

/// An integer (i32/u32/i64/u64, widened) converted to f32 with rounding `r`.
pub fn int_to_f32(v: i128, r: Round) -> f32 {
    directed_f32(v as f32, r, |c| cmp_int(c as f64, v))
}

/// An integer converted to f64 with rounding `r`.
pub fn int_to_f64(v: i128, r: Round) -> f64 {
    directed_f64(v as f64, r, |c| cmp_int(c, v))
}

/// An f64 converted to f32 with rounding `r` (IEEE directed rounding; overflow goes to ±inf
/// or ±MAX as the direction says).
pub fn f64_to_f32(x: f64, r: Round) -> f32 {
    directed_f32(x as f32, r, |c| (c as f64).partial_cmp(&x).unwrap())
}
