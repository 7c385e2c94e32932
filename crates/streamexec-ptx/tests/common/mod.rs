//! What the engine's tests share: a small device over the crate's own API (an allocation
//! table, a pool, the engine and race-check switches), typed kernels and launches in the shape
//! of streamexec's (so a test reads the same here and there), poisoned buffers, the download
//! digest of `scripts/ptx-engines-agree.sh`, float comparisons and directed rounding references
//! for `cvt`.
#![allow(dead_code, unused_imports)]

pub mod half;

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use bytemuck::Pod;
use streamexec_ptx::{AllocTable, Arg, Dim3, Kernel, LaunchConfig, Module, Pinned};
pub use streamexec_ptx::{Error, PtxEngine, Result};
pub use streamexec_test_support::*;

/// The race checker is a per-device switch and every test of a binary shares the device:
/// tests that turn it on take this for writing, every other launch for reading.
pub static RACE_CHECK: RwLock<()> = RwLock::new(());

/// A device: memory (an allocation table), a pool for blocks, and the engine switches. Cheap to
/// clone; every clone is the same device.
#[derive(Clone)]
pub struct Device(Arc<Inner>);

struct Inner {
    table: Arc<AllocTable>,
    pool: rayon::ThreadPool,
    engine: parking_lot::Mutex<PtxEngine>,
    race: AtomicBool,
    /// Loaded modules by text, as an executor caches them.
    modules: parking_lot::Mutex<Vec<Arc<Module>>>,
}

/// The device every test of a binary shares (its engine starts as `STREAMEXEC_PTX_ENGINE`
/// says).
pub fn host() -> Device {
    static DEVICE: std::sync::OnceLock<Device> = std::sync::OnceLock::new();
    DEVICE
        .get_or_init(|| {
            let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
            Device(Arc::new(Inner {
                table: Arc::new(AllocTable::default()),
                pool: rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .expect("a rayon pool"),
                engine: parking_lot::Mutex::new(
                    PtxEngine::from_env().expect("STREAMEXEC_PTX_ENGINE"),
                ),
                race: AtomicBool::new(false),
                modules: Default::default(),
            }))
        })
        .clone()
}

impl Device {
    /// `data` in a new allocation.
    pub fn copy_to_device<T: Pod>(&self, data: &[T]) -> Result<DeviceMemory<T>> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let addr = self
            .0
            .table
            .allocate(bytes.len() as u64)
            .ok_or(Error::OutOfMemory {
                bytes: bytes.len() as u64,
            })?;
        self.0.table.write(addr, bytes).expect("just allocated");
        Ok(DeviceMemory {
            device: self.clone(),
            addr,
            len: data.len(),
            _t: PhantomData,
        })
    }

    /// The allocation's contents.
    pub fn copy_to_vec<T: Pod>(&self, m: &DeviceMemory<T>) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); m.len];
        let table = &self.0.table;
        table
            .read(m.addr, bytemuck::cast_slice_mut(&mut out))
            .expect("live memory");
        Ok(out)
    }

    /// Overwrites `dst` with `src` (the same length).
    pub fn synchronous_memcpy_h2d<T: Pod>(&self, src: &[T], dst: &DeviceMemory<T>) -> Result<()> {
        assert_eq!(src.len(), dst.len, "synchronous_memcpy_h2d: lengths differ");
        let table = &self.0.table;
        table
            .write(dst.addr, bytemuck::cast_slice(src))
            .expect("live memory");
        Ok(())
    }

    /// Later launches run the data-race checker (or not).
    pub fn set_race_check(&self, on: bool) -> Result<()> {
        self.0.race.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Later launches run on `engine`.
    pub fn set_ptx_engine(&self, engine: PtxEngine) -> Result<()> {
        *self.0.engine.lock() = engine;
        Ok(())
    }

    /// The device's memory.
    pub fn table(&self) -> &Arc<AllocTable> {
        &self.0.table
    }

    /// Loads `spec`'s entry (a module is loaded once per text), checking that the entry
    /// declares `A::ARITY` parameters.
    pub fn get_kernel<A: KernelArgs>(&self, spec: &Spec) -> Result<TypedKernel<A>> {
        let kernel = self.get_untyped_kernel(spec)?;
        let declared = kernel
            .entry()
            .map_or(A::ARITY - A::SHARED, |e| e.params.len());
        if declared != A::ARITY - A::SHARED {
            return Err(Error::Signature {
                kernel: spec.name.clone(),
                detail: format!(
                    "the kernel takes {} arguments, the entry declares {declared} parameter(s)",
                    A::ARITY
                ),
            });
        }
        Ok(TypedKernel {
            kernel,
            _a: PhantomData,
        })
    }

    /// Loads `spec`'s entry without a type.
    pub fn get_untyped_kernel(&self, spec: &Spec) -> Result<Kernel> {
        let mut modules = self.0.modules.lock();
        let module = match modules.iter().find(|m| m.text() == spec.text) {
            Some(m) => m.clone(),
            None => {
                let m = Module::load(&spec.text, &self.0.table)?;
                modules.push(m.clone());
                m
            }
        };
        module.kernel(&spec.name)
    }

    /// A stream: launches in order, the first error kept.
    pub fn create_stream(&self) -> Result<Stream> {
        Ok(Stream {
            device: self.clone(),
            status: Ok(()),
        })
    }

    fn launch<A: KernelArgs>(
        &self,
        threads: Dim3,
        blocks: Dim3,
        k: &TypedKernel<A>,
        args: A,
    ) -> Result<()> {
        let engine = *self.0.engine.lock();
        self.launch_with(engine, threads, blocks, k, args)
    }

    fn launch_with<A: KernelArgs>(
        &self,
        engine: PtxEngine,
        threads: Dim3,
        blocks: Dim3,
        k: &TypedKernel<A>,
        args: A,
    ) -> Result<()> {
        let owned = args.args(self)?;
        let args: Vec<Arg<'_>> = owned.iter().map(OwnedArg::as_arg).collect();
        let config = LaunchConfig {
            grid: blocks,
            block: threads,
            engine,
            race_check: self.0.race.load(Ordering::Relaxed),
            ..LaunchConfig::default()
        };
        k.kernel.launch(&self.0.pool, &config, &args)
    }
}

/// A kernel to load: an entry of a PTX text, and the arity the caller expects.
pub struct Spec {
    text: String,
    name: String,
}

impl Spec {
    /// A spec (the arity is checked by `get_kernel` against the Rust type instead).
    pub fn new(_arity: usize) -> Self {
        Spec {
            text: String::new(),
            name: String::new(),
        }
    }

    /// Entry `name` of `text`.
    pub fn add_cuda_ptx_in_memory(mut self, text: &str, name: &str) -> Self {
        self.text = text.to_string();
        self.name = name.to_string();
        self
    }
}

/// An allocation of `len` elements of `T`; freed on drop.
pub struct DeviceMemory<T> {
    device: Device,
    addr: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> DeviceMemory<T> {
    /// A pointer argument to the whole allocation.
    pub fn ptr(&self) -> DevicePtr<T> {
        DevicePtr {
            addr: self.addr,
            len: self.len,
            _t: PhantomData,
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The device address of the first element.
    pub fn address(&self) -> u64 {
        self.addr
    }
}

impl<T> Drop for DeviceMemory<T> {
    fn drop(&mut self) {
        self.device.0.table.free(self.addr);
    }
}

/// A kernel's pointer argument.
pub struct DevicePtr<T> {
    addr: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}

/// Dynamic shared memory of `n` elements of `T` (a launch attribute, not a parameter).
pub struct SharedMemory<T> {
    n: usize,
    _t: PhantomData<T>,
}

impl<T> SharedMemory<T> {
    /// `n` elements.
    pub fn new(n: usize) -> Self {
        SharedMemory { n, _t: PhantomData }
    }
}

/// An argument with its pinned memory.
pub enum OwnedArg {
    Scalar(Vec<u8>),
    Pointer(Pinned),
    Shared(u64),
}

impl OwnedArg {
    fn as_arg(&self) -> Arg<'_> {
        match self {
            OwnedArg::Scalar(b) => Arg::Scalar(b),
            OwnedArg::Pointer(p) => Arg::Pointer(p.clone()),
            OwnedArg::Shared(n) => Arg::SharedMemory(*n),
        }
    }
}

/// One argument of a typed kernel.
pub trait Param {
    /// 1 for dynamic shared memory (not a PTX parameter).
    const SHARED: usize = 0;
    /// The engine's argument.
    fn arg(&self, device: &Device) -> Result<OwnedArg>;
}

macro_rules! scalar_param {
    ($($t:ty),*) => {$(
        impl Param for $t {
            fn arg(&self, _: &Device) -> Result<OwnedArg> {
                Ok(OwnedArg::Scalar(bytemuck::bytes_of(self).to_vec()))
            }
        }
    )*};
}
scalar_param!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

impl<T: Pod, const N: usize> Param for [T; N] {
    fn arg(&self, _: &Device) -> Result<OwnedArg> {
        Ok(OwnedArg::Scalar(bytemuck::cast_slice(self).to_vec()))
    }
}

impl<T> Param for DevicePtr<T> {
    fn arg(&self, device: &Device) -> Result<OwnedArg> {
        let bytes = (self.len * std::mem::size_of::<T>()) as u64;
        device
            .0
            .table
            .resolve(self.addr, bytes)
            .map(OwnedArg::Pointer)
            .ok_or_else(|| Error::InvalidArgument {
                operation: "launch".into(),
                detail: format!("{:#x} is not live memory", self.addr),
            })
    }
}

impl<T> Param for SharedMemory<T> {
    const SHARED: usize = 1;
    fn arg(&self, _: &Device) -> Result<OwnedArg> {
        Ok(OwnedArg::Shared((self.n * std::mem::size_of::<T>()) as u64))
    }
}

/// A tuple of kernel arguments.
pub trait KernelArgs {
    /// Arguments.
    const ARITY: usize;
    /// Of which dynamic shared memory.
    const SHARED: usize;
    /// The engine's arguments.
    fn args(&self, device: &Device) -> Result<Vec<OwnedArg>>;
}

macro_rules! kernel_args {
    ($n:expr; $($p:ident $i:tt),*) => {
        impl<$($p: Param),*> KernelArgs for ($($p,)*) {
            const ARITY: usize = $n;
            const SHARED: usize = 0 $(+ $p::SHARED)*;
            #[allow(unused_variables)]
            fn args(&self, device: &Device) -> Result<Vec<OwnedArg>> {
                Ok(vec![$(self.$i.arg(device)?),*])
            }
        }
    };
}
kernel_args!(0;);
kernel_args!(1; A 0);
kernel_args!(2; A 0, B 1);
kernel_args!(3; A 0, B 1, C 2);
kernel_args!(4; A 0, B 1, C 2, D 3);
kernel_args!(5; A 0, B 1, C 2, D 3, E 4);
kernel_args!(6; A 0, B 1, C 2, D 3, E 4, F 5);
kernel_args!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
kernel_args!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
kernel_args!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
kernel_args!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
kernel_args!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
kernel_args!(12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// A kernel whose arguments are the tuple `A`.
pub struct TypedKernel<A> {
    kernel: Kernel,
    _a: PhantomData<fn(A)>,
}

impl<A> TypedKernel<A> {
    /// The entry's name.
    pub fn name(&self) -> &str {
        self.kernel.name()
    }
}

/// Launches in order; the first error is kept and later launches are skipped.
pub struct Stream {
    device: Device,
    status: Result<()>,
}

impl Stream {
    /// Launches `kernel` (unless an earlier launch failed).
    pub fn then_launch<A: KernelArgs>(
        &mut self,
        threads: impl Into<Dim3>,
        blocks: impl Into<Dim3>,
        kernel: &TypedKernel<A>,
        args: A,
    ) -> &mut Self {
        if self.status.is_ok() {
            self.status = self
                .device
                .launch(threads.into(), blocks.into(), kernel, args);
        }
        self
    }

    /// The first error, if any.
    pub fn block_host_until_done(&mut self) -> Result<()> {
        self.status.clone()
    }

    /// The first error, if any (nothing runs asynchronously here).
    pub fn status(&self) -> Result<()> {
        self.status.clone()
    }
}

/// The committed PTX of the repository (clang-19's builds of `kernels/*.cu` and of streamexec's
/// built-in `crates/streamexec/kernels/*.cu`), sorted.
pub fn committed_ptx() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in ["kernels/ptx", "crates/streamexec/kernels/ptx"] {
        for f in std::fs::read_dir(root.join(dir)).expect("the committed PTX") {
            let path = f.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "ptx") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Loads entry `name` of `ptx` as a typed kernel; panics with the loader's message.
pub fn load<A: KernelArgs>(exec: &Device, ptx: &str, name: &str) -> TypedKernel<A> {
    let spec = Spec::new(A::ARITY).add_cuda_ptx_in_memory(ptx, name);
    exec.get_kernel(&spec)
        .unwrap_or_else(|e| panic!("loading PTX entry `{name}`: {e}"))
}

/// Directives that open every hand-written test module.
pub const HEADER: &str = ".version 7.0\n.target sm_70\n.address_size 64\n";

/// Loads entry `name` of `body` (a module without its `.version`/`.target` lines).
pub fn ptx_kernel<A: KernelArgs>(exec: &Device, body: &str, name: &str) -> TypedKernel<A> {
    load(exec, &format!("{HEADER}{body}"), name)
}

/// The text of the fault a launch must have ended with.
pub fn fault_text(r: Result<()>) -> String {
    match r {
        Err(e @ Error::Fault { .. }) => e.to_string(),
        other => panic!("expected a fault, got {other:?}"),
    }
}

/// One launch on a fresh stream, waited for; the stream's status.
pub fn launch<A: KernelArgs>(
    exec: &Device,
    threads: impl Into<Dim3>,
    blocks: impl Into<Dim3>,
    kernel: &TypedKernel<A>,
    args: A,
) -> Result<()> {
    let _shared = RACE_CHECK.read().unwrap_or_else(|p| p.into_inner());
    let mut stream = exec.create_stream()?;
    stream
        .then_launch(threads, blocks, kernel, args)
        .block_host_until_done()
}

/// One launch on `engine`, whatever the device's switch says: for tests that run both engines
/// in one process and compare them.
pub fn launch_on<A: KernelArgs>(
    exec: &Device,
    engine: PtxEngine,
    threads: impl Into<Dim3>,
    blocks: impl Into<Dim3>,
    kernel: &TypedKernel<A>,
    args: A,
) -> Result<()> {
    let _shared = RACE_CHECK.read().unwrap_or_else(|p| p.into_inner());
    exec.launch_with(engine, threads.into(), blocks.into(), kernel, args)
}

/// The engines a test compares: the JIT (where the crate has it) and the interpreter.
pub fn engines() -> Vec<PtxEngine> {
    if cfg!(feature = "jit") {
        vec![PtxEngine::Jit, PtxEngine::Interpreter]
    } else {
        vec![PtxEngine::Interpreter]
    }
}

/// `launch`, panicking with the stream's error.
pub fn run<A: KernelArgs>(
    exec: &Device,
    threads: impl Into<Dim3>,
    blocks: impl Into<Dim3>,
    kernel: &TypedKernel<A>,
    args: A,
) {
    let threads = threads.into();
    let blocks = blocks.into();
    launch(exec, threads, blocks, kernel, args).unwrap_or_else(|e| {
        panic!(
            "launch of `{}` ({:?} threads × {:?} blocks): {e}",
            kernel.name(),
            threads,
            blocks
        )
    })
}

/// Waits (60 s at most) until the JIT's optimized compile of kernel `name` has finished.
#[cfg(feature = "jit")]
pub fn wait_for_optimized(name: &str) {
    let name = format!("{name} (optimized)");
    let start = std::time::Instant::now();
    while !streamexec_ptx::jit_compile_times()
        .iter()
        .any(|(k, _)| *k == name)
    {
        assert!(start.elapsed().as_secs() < 60, "no `{name}` after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `data` on the device.
pub fn upload<T: Pod>(exec: &Device, data: &[T]) -> DeviceMemory<T> {
    exec.copy_to_device(data).expect("copy to device")
}

/// `n` elements of `poison` on the device (an output the kernel must overwrite).
pub fn poisoned<T: Pod>(exec: &Device, n: usize, poison: T) -> DeviceMemory<T> {
    upload(exec, &vec![poison; n])
}

/// The device buffer's contents.
///
/// With `STREAMEXEC_PTX_DIGEST=FILE` each download also appends `test#n hash` to `FILE` (the
/// test's thread name, its n-th download, a hash of the bytes): `scripts/ptx-engines-agree.sh`
/// runs a test binary on each PTX engine with one seed and checks that the files agree, i.e.
/// that every output is bit-identical on the JIT and the interpreter.
pub fn download<T: Pod>(exec: &Device, mem: &DeviceMemory<T>) -> Vec<T> {
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
