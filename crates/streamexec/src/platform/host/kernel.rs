//! Native Rust kernels for the host platform, and what a running thread sees.
//!
//! A host kernel is a Rust closure `Fn(&ThreadCtx, Args)` run once per thread, with CUDA's
//! model: `ThreadCtx` gives the thread and block indices, `sync_threads` (a real barrier),
//! block-shared memory and checked access to device memory ([`Global`]). Device memory is
//! accessed with relaxed atomics, so threads that race do not cause undefined behaviour; an
//! out-of-bounds index ends the launch with an error naming the kernel, block and thread.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytemuck::Pod;

use corosensei::Yielder;

use super::launch::{AtBarrier, BlockState, Resume, fault};
use crate::error::{Error, Result};
use crate::interface::{KernelInterface, ParamCount};
use crate::ptx::device_bytes;
use crate::types::DevicePtr;
use crate::types::{Dim3, KernelArgs, PackedArg, ParamKind, SharedMemory};

/// A kernel bound to its arguments, ready to run once per thread.
pub(crate) type BoundKernel = Arc<dyn BlockBody>;

/// The two ways the block scheduler (`block.rs`) runs a bound kernel.
pub(crate) trait BlockBody: Send + Sync {
    /// One thread, on the context the scheduler built (a coroutine's, which can suspend at a
    /// barrier).
    fn thread(&self, ctx: &ThreadCtx<'_>);
    /// Plain-loop mode: threads `from..` of `block`, one after another as plain calls on the
    /// caller's stack, with no barrier possible (`sync_threads` faults). `current` holds the
    /// running thread's linear index, so a fault or panic unwinding out names it. The loop is
    /// compiled with the kernel closure, so no indirect call per thread.
    fn threads_from(&self, block: &BlockState<'_>, from: u32, current: &Cell<u32>);
}

/// [`BlockBody`] of a [`HostKernel`] closure `F` bound to arguments `A`.
struct Bound<F, A> {
    f: Arc<F>,
    args: A,
}

impl<F, A> BlockBody for Bound<F, A>
where
    A: KernelArgs,
    F: Fn(&ThreadCtx<'_>, A) + Send + Sync + 'static,
{
    fn thread(&self, ctx: &ThreadCtx<'_>) {
        (self.f)(ctx, self.args)
    }

    fn threads_from(&self, block: &BlockState<'_>, from: u32, current: &Cell<u32>) {
        let dim = block.launch.block;
        let n = dim.count() as u32;
        if from >= n {
            return;
        }
        // Thread indices step x fastest, then y, then z: no division per thread.
        let mut idx = dim.unlinear(from as u64);
        for tid in from..n {
            current.set(tid);
            let ctx = ThreadCtx::plain(block, tid, idx);
            (self.f)(&ctx, self.args);
            idx.x += 1;
            if idx.x == dim.x {
                idx.x = 0;
                idx.y += 1;
                if idx.y == dim.y {
                    idx.y = 0;
                    idx.z += 1;
                }
            }
        }
    }
}
type Binder = dyn Fn(&[PackedArg]) -> Option<BoundKernel> + Send + Sync;

/// A native Rust kernel, added to a spec with
/// [`add_host_kernel`](crate::MultiKernelLoaderSpec::add_host_kernel).
///
/// ```
/// use streamexec::{DevicePtr, HostKernel};
/// let k = HostKernel::new("add_mystery_value", |ctx, (x, out): (f32, DevicePtr<f32>)| {
///     if ctx.global_id_x() == 0 {
///         ctx.global(out).set(0, x + 123.0);
///     }
/// });
/// assert_eq!(k.signature().len(), 2);
/// ```
#[derive(Clone)]
pub struct HostKernel {
    name: Arc<str>,
    signature: Arc<[ParamKind]>,
    bind: Arc<Binder>,
}

impl HostKernel {
    /// A kernel called `name` that runs `f` once per thread.
    pub fn new<A, F>(name: &str, f: F) -> Self
    where
        A: KernelArgs,
        F: Fn(&ThreadCtx<'_>, A) + Send + Sync + 'static,
    {
        let f = Arc::new(f);
        let bind = move |args: &[PackedArg]| -> Option<BoundKernel> {
            let a = A::unpack(args, crate::types::Token::new())?;
            Some(Arc::new(Bound {
                f: f.clone(),
                args: a,
            }))
        };
        HostKernel {
            name: name.into(),
            signature: A::signature().into(),
            bind: Arc::new(bind),
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel's parameter list (from its `Args` type).
    pub fn signature(&self) -> &[ParamKind] {
        &self.signature
    }

    pub(crate) fn bind(&self, args: &[PackedArg]) -> Result<BoundKernel> {
        (self.bind)(args).ok_or_else(|| Error::SignatureMismatch {
            kernel: self.name.to_string(),
            detail: "the packed arguments do not unpack into the kernel's parameter types".into(),
        })
    }
}

impl std::fmt::Debug for HostKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HostKernel({}, {} params)",
            self.name,
            self.signature.len()
        )
    }
}

impl crate::types::InProcessKernel for HostKernel {
    fn name(&self) -> &str {
        &self.name
    }
    fn signature(&self) -> &[ParamKind] {
        &self.signature
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn same_kind(a: &ParamKind, b: &ParamKind) -> bool {
    match (a, b) {
        (ParamKind::SharedMemory { .. }, ParamKind::SharedMemory { .. }) => true,
        _ => a == b,
    }
}

impl KernelInterface for HostKernel {
    fn name(&self) -> &str {
        &self.name
    }
    fn param_count(&self) -> Option<ParamCount> {
        Some(ParamCount {
            params: self.signature.len(),
            declared_by: "the host kernel".into(),
            takes_dynamic_shared: false,
        })
    }
    fn verify_signature(&self, expected: &[ParamKind]) -> Result<()> {
        let mismatch = |detail: String| Error::SignatureMismatch {
            kernel: self.name.to_string(),
            detail,
        };
        if expected.len() != self.signature.len() {
            return Err(mismatch(format!(
                "the host kernel takes {} parameter(s), the launch passes {}",
                self.signature.len(),
                expected.len()
            )));
        }
        for (i, (want, have)) in expected.iter().zip(self.signature.iter()).enumerate() {
            if !same_kind(want, have) {
                return Err(mismatch(format!(
                    "argument {i}: the kernel takes {have}, the launch passes {want}"
                )));
            }
        }
        Ok(())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// What one thread of a running host kernel sees. Not `Send`: it lives on its block's thread.
pub struct ThreadCtx<'a> {
    block: &'a BlockState<'a>,
    /// The thread's coroutine; `None` in plain-loop mode, where a barrier is divergence.
    yielder: Option<&'a Yielder<Resume, AtBarrier>>,
    thread_idx: Dim3,
    linear_tid: u32,
    shared_cursor: Cell<usize>,
    _not_send: PhantomData<*const ()>,
}

impl<'a> ThreadCtx<'a> {
    /// Thread `linear_tid` running on a coroutine (it can wait at barriers).
    pub(crate) fn new(
        block: &'a BlockState<'a>,
        yielder: &'a Yielder<Resume, AtBarrier>,
        linear_tid: u32,
    ) -> Self {
        let idx = block.launch.block.unlinear(linear_tid as u64);
        Self::with(block, Some(yielder), linear_tid, idx)
    }

    /// Thread `linear_tid` (at `thread_idx`) in plain-loop mode.
    #[inline]
    fn plain(block: &'a BlockState<'a>, linear_tid: u32, thread_idx: Dim3) -> Self {
        Self::with(block, None, linear_tid, thread_idx)
    }

    #[inline]
    fn with(
        block: &'a BlockState<'a>,
        yielder: Option<&'a Yielder<Resume, AtBarrier>>,
        linear_tid: u32,
        thread_idx: Dim3,
    ) -> Self {
        ThreadCtx {
            block,
            yielder,
            thread_idx,
            linear_tid,
            shared_cursor: Cell::new(block.launch.dynamic_bytes),
            _not_send: PhantomData,
        }
    }

    /// `threadIdx`.
    #[inline]
    pub fn thread_idx(&self) -> Dim3 {
        self.thread_idx
    }
    /// `blockIdx`.
    #[inline]
    pub fn block_idx(&self) -> Dim3 {
        self.block.block_idx
    }
    /// `blockDim`.
    #[inline]
    pub fn block_dim(&self) -> Dim3 {
        self.block.launch.block
    }
    /// `gridDim`.
    #[inline]
    pub fn grid_dim(&self) -> Dim3 {
        self.block.launch.grid
    }
    /// `blockIdx.x * blockDim.x + threadIdx.x`.
    #[inline]
    pub fn global_id_x(&self) -> usize {
        self.block.block_idx.x as usize * self.block.launch.block.x as usize
            + self.thread_idx.x as usize
    }
    /// Threads along x in the whole grid (`gridDim.x * blockDim.x`), the grid-stride step.
    #[inline]
    pub fn grid_size_x(&self) -> usize {
        self.block.launch.grid.x as usize * self.block.launch.block.x as usize
    }
    /// Linear thread index inside the block (x fastest).
    #[inline]
    pub fn linear_thread_idx(&self) -> u32 {
        self.linear_tid
    }
    /// Threads per warp on the host platform (32, as CUDA).
    pub const WARP_SIZE: u32 = 32;
    /// Lane inside the warp.
    #[inline]
    pub fn lane_id(&self) -> u32 {
        self.linear_tid % Self::WARP_SIZE
    }
    /// Warp inside the block.
    #[inline]
    pub fn warp_id(&self) -> u32 {
        self.linear_tid / Self::WARP_SIZE
    }

    /// `__syncthreads()`: waits until every thread of the block has reached this barrier.
    /// Shared-memory writes before it are visible to every thread after it. A barrier that
    /// some thread of the block never reaches ends the launch with a "barrier divergence" error.
    pub fn sync_threads(&self) {
        self.block.barrier(self.linear_tid, self.yielder);
    }

    /// `__threadfence()`: orders this thread's device-memory accesses (a sequentially
    /// consistent fence).
    pub fn thread_fence(&self) {
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// `__shared__ T name[len]`: block-shared memory, zeroed at block start. Every thread that
    /// makes the same sequence of `shared_array` calls gets the same arrays. Asking for more than
    /// the device's shared memory per block ends the launch with an error.
    pub fn shared_array<T: Pod>(&self, len: usize) -> &[Cell<T>] {
        let align = std::mem::align_of::<T>().max(1);
        let start = self.shared_cursor.get().next_multiple_of(align);
        let end = len
            .checked_mul(std::mem::size_of::<T>())
            .and_then(|b| b.checked_add(start))
            .filter(|&e| e <= self.block.launch.shared_limit);
        let Some(end) = end else {
            fault(format!(
                "shared_array::<{}>({len}) needs more than the {} bytes of shared memory per block \
                 ({} of them dynamic)",
                std::any::type_name::<T>(),
                self.block.launch.shared_limit,
                self.block.launch.dynamic_bytes
            ))
        };
        self.shared_cursor.set(end);
        self.block.shared_slice(start, len)
    }

    /// The block's region for a [`SharedMemory`] kernel argument (CUDA `extern __shared__`).
    pub fn shared_param<T: Pod>(&self, param: SharedMemory<T>) -> &[Cell<T>] {
        self.block
            .shared_slice(param.offset() as usize, param.len())
    }

    /// Device memory behind `ptr`, for this launch. A pointer that refers to no live memory of
    /// this executor ends the launch with an error.
    #[inline]
    pub fn global<T: Pod>(&self, ptr: DevicePtr<T>) -> Global<'_, T> {
        let bytes = ptr.len() as u64 * std::mem::size_of::<T>() as u64;
        match self.block.launch.resolve(ptr.address(), bytes) {
            Some(p) if (p as usize).is_multiple_of(std::mem::align_of::<T>()) => Global {
                ptr: p,
                len: ptr.len(),
                _life: PhantomData,
            },
            p => bad_global(ptr, p.is_some()),
        }
    }
}

/// The fault of a `ThreadCtx::global` pointer that is misaligned (`resolved`) or refers to no
/// live memory; cold, so the hot path of `global` stays small enough to inline.
#[cold]
#[inline(never)]
fn bad_global<T: Pod>(ptr: DevicePtr<T>, resolved: bool) -> ! {
    if resolved {
        fault(format!(
            "{ptr:?} is not aligned for {}",
            std::any::type_name::<T>()
        ))
    }
    fault(format!(
        "{ptr:?} does not refer to live memory of this executor (freed, or from another \
         executor)"
    ))
}

/// A kernel's view of device memory: `len` elements of `T`, bounds-checked.
pub struct Global<'a, T> {
    ptr: *mut u8,
    len: usize,
    _life: PhantomData<(&'a (), T)>,
}

impl<T> Clone for Global<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Global<'_, T> {}

impl<T: Pod> Global<'_, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn at(&self, i: usize, what: &'static str) -> *mut u8 {
        if i >= self.len {
            out_of_bounds::<T>(what, i, self.len, self.ptr as usize);
        }
        // SAFETY: i < len, and the launch pinned `len` elements at `ptr`.
        unsafe { self.ptr.add(i * std::mem::size_of::<T>()) }
    }

    /// Element `i`.
    #[inline]
    pub fn get(&self, i: usize) -> T {
        let p = self.at(i, "read");
        // SAFETY: `at` checked bounds, `global` checked alignment; the allocation is pinned for
        // the launch.
        unsafe { device_bytes::load_aligned(p) }
    }

    /// Sets element `i`.
    #[inline]
    pub fn set(&self, i: usize, v: T) {
        let p = self.at(i, "write");
        // SAFETY: as in `get`.
        unsafe { device_bytes::store_aligned(p, v) }
    }

    /// Bounds check of elements `start..start + len`.
    fn range(&self, start: usize, len: usize, what: &'static str) -> *mut u8 {
        match start.checked_add(len) {
            Some(end) if end <= self.len => {}
            _ => out_of_bounds::<T>(
                what,
                start.saturating_add(len).max(1) - 1,
                self.len,
                self.ptr as usize,
            ),
        }
        // SAFETY: the range is in bounds of the `len` elements the launch pinned at `ptr`.
        unsafe { self.ptr.add(start * std::mem::size_of::<T>()) }
    }

    /// Copies elements `start..start + out.len()` into `out`: one bounds check and a word-wide
    /// copy. The fast way for a host kernel to work on a contiguous run: read a chunk, compute
    /// on the plain slice (which the compiler vectorises), write it back with
    /// [`write_slice`](Self::write_slice).
    pub fn read_slice(&self, start: usize, out: &mut [T]) {
        let p = self.range(start, out.len(), "read_slice");
        // SAFETY: `range` checked that `out.len()` elements at `p` are pinned device memory.
        unsafe { device_bytes::load_bytes(bytemuck::cast_slice_mut(out), p) }
    }

    /// Elements `start..start + len` as a plain slice, for vectorised reads.
    ///
    /// # Safety
    /// While the slice lives, no thread of any launch or stream may write these elements
    /// (plain reads racing a write are undefined behaviour). Bounds are still checked.
    pub unsafe fn as_slice_unchecked(&self, start: usize, len: usize) -> &[T] {
        let p = self.range(start, len, "as_slice_unchecked");
        // SAFETY: in bounds and aligned (checked by `range` and `ThreadCtx::global`); the
        // caller guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(p as *const T, len) }
    }

    /// Elements `start..start + len` as a plain mutable slice, for vectorised updates.
    ///
    /// # Safety
    /// While the slice lives, no other thread of any launch or stream may read or write these
    /// elements (the usual exclusive-access rule of `&mut`). Bounds are still checked.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice_unchecked(&self, start: usize, len: usize) -> &mut [T] {
        let p = self.range(start, len, "as_mut_slice_unchecked");
        // SAFETY: in bounds and aligned; the caller guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(p as *mut T, len) }
    }

    /// Copies `data` into elements `start..start + data.len()`.
    pub fn write_slice(&self, start: usize, data: &[T]) {
        let p = self.range(start, data.len(), "write_slice");
        // SAFETY: as in `read_slice`.
        unsafe { device_bytes::store_bytes(p, bytemuck::cast_slice(data)) }
    }
}

/// The fault of an out-of-bounds access. Kept out of line and cold, so the hot `get`/`set` path
/// does not spill the message's arguments on every access.
#[cold]
#[inline(never)]
fn out_of_bounds<T>(what: &str, i: usize, len: usize, addr: usize) -> ! {
    fault(format!(
        "{what} of element {i} past the end of a {len}-element buffer of {} at {addr:#x}",
        std::any::type_name::<T>()
    ))
}

/// The read-modify-write operations of CUDA's `atomic*` functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// `atomicAdd`.
    Add,
    /// `atomicSub`.
    Sub,
    /// `atomicMin`.
    Min,
    /// `atomicMax`.
    Max,
    /// `atomicExch`.
    Exch,
    /// `atomicAnd` (floats: on the bit pattern).
    And,
    /// `atomicOr` (floats: on the bit pattern).
    Or,
    /// `atomicXor` (floats: on the bit pattern).
    Xor,
}

/// Element types with device atomics: `u32`, `i32`, `u64`, `i64`, `f32`, `f64`.
pub trait AtomicElement: Pod + sealed::Sealed {
    /// Applies `op` with `v` at `p`; returns the old value.
    ///
    /// # Safety
    /// `p` must be valid, aligned device memory for `Self`.
    #[doc(hidden)]
    unsafe fn rmw(p: *mut u8, op: AtomicOp, v: Self) -> Self;
    /// Compare-and-swap at `p`; returns the old value.
    ///
    /// # Safety
    /// As `rmw`.
    #[doc(hidden)]
    unsafe fn cas(p: *mut u8, current: Self, new: Self) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
    impl Sealed for u64 {}
    impl Sealed for i64 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

const ORD: Ordering = Ordering::Relaxed;

macro_rules! int_atomic {
    ($t:ty) => {
        impl AtomicElement for $t {
            unsafe fn rmw(p: *mut u8, op: AtomicOp, v: $t) -> $t {
                // SAFETY: valid and aligned per the contract.
                let a = unsafe { device_bytes::atomic::<$t>(p) };
                match op {
                    AtomicOp::Add => a.fetch_add(v, ORD),
                    AtomicOp::Sub => a.fetch_sub(v, ORD),
                    AtomicOp::Min => a.fetch_min(v, ORD),
                    AtomicOp::Max => a.fetch_max(v, ORD),
                    AtomicOp::Exch => a.swap(v, ORD),
                    AtomicOp::And => a.fetch_and(v, ORD),
                    AtomicOp::Or => a.fetch_or(v, ORD),
                    AtomicOp::Xor => a.fetch_xor(v, ORD),
                }
            }
            unsafe fn cas(p: *mut u8, current: $t, new: $t) -> $t {
                // SAFETY: valid and aligned per the contract.
                let a = unsafe { device_bytes::atomic::<$t>(p) };
                match a.compare_exchange(current, new, ORD, ORD) {
                    Ok(v) | Err(v) => v,
                }
            }
        }
    };
}

int_atomic!(u32);
int_atomic!(i32);
int_atomic!(u64);
int_atomic!(i64);

macro_rules! float_atomic {
    ($t:ty, $bits:ty) => {
        impl AtomicElement for $t {
            unsafe fn rmw(p: *mut u8, op: AtomicOp, v: $t) -> $t {
                // SAFETY: valid and aligned per the contract.
                let a = unsafe { device_bytes::atomic::<$bits>(p) };
                let f = |old: $t| -> $t {
                    match op {
                        AtomicOp::Add => old + v,
                        AtomicOp::Sub => old - v,
                        AtomicOp::Min => old.min(v),
                        AtomicOp::Max => old.max(v),
                        AtomicOp::Exch => v,
                        AtomicOp::And => <$t>::from_bits(old.to_bits() & v.to_bits()),
                        AtomicOp::Or => <$t>::from_bits(old.to_bits() | v.to_bits()),
                        AtomicOp::Xor => <$t>::from_bits(old.to_bits() ^ v.to_bits()),
                    }
                };
                let old = a.fetch_update(ORD, ORD, |b| Some(f(<$t>::from_bits(b)).to_bits()));
                <$t>::from_bits(old.unwrap_or_else(|b| b))
            }
            unsafe fn cas(p: *mut u8, current: $t, new: $t) -> $t {
                // SAFETY: valid and aligned per the contract.
                let a = unsafe { device_bytes::atomic::<$bits>(p) };
                match a.compare_exchange(current.to_bits(), new.to_bits(), ORD, ORD) {
                    Ok(v) | Err(v) => <$t>::from_bits(v),
                }
            }
        }
    };
}

float_atomic!(f32, u32);
float_atomic!(f64, u64);

impl<T: AtomicElement> Global<'_, T> {
    fn atomic_at(&self, i: usize) -> *mut u8 {
        let p = self.at(i, "atomic");
        if !(p as usize).is_multiple_of(std::mem::align_of::<T>()) {
            fault(format!(
                "misaligned atomic on element {i} at {:#x}",
                p as usize
            ));
        }
        p
    }
    /// Atomically applies `op` with `v` to element `i`; returns the old value.
    pub fn atomic(&self, i: usize, op: AtomicOp, v: T) -> T {
        let p = self.atomic_at(i);
        // SAFETY: bounds and alignment checked; the allocation is pinned for the launch.
        unsafe { T::rmw(p, op, v) }
    }
    /// `atomicAdd`; returns the old value.
    pub fn atomic_add(&self, i: usize, v: T) -> T {
        self.atomic(i, AtomicOp::Add, v)
    }
    /// `atomicMin`; returns the old value.
    pub fn atomic_min(&self, i: usize, v: T) -> T {
        self.atomic(i, AtomicOp::Min, v)
    }
    /// `atomicMax`; returns the old value.
    pub fn atomic_max(&self, i: usize, v: T) -> T {
        self.atomic(i, AtomicOp::Max, v)
    }
    /// `atomicExch`; returns the old value.
    pub fn atomic_exch(&self, i: usize, v: T) -> T {
        self.atomic(i, AtomicOp::Exch, v)
    }
    /// `atomicCAS`: stores `new` if element `i` equals `current`; returns the old value.
    pub fn atomic_cas(&self, i: usize, current: T, new: T) -> T {
        let p = self.atomic_at(i);
        // SAFETY: as in `atomic`.
        unsafe { T::cas(p, current, new) }
    }
}
