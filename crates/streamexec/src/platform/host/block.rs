//! Running a grid on the host: blocks in parallel on the executor's rayon pool; inside a
//! block, threads as stackful coroutines (corosensei) so `sync_threads` is a real barrier --
//! but only when the block needs one.
//!
//! Each block starts with thread 0 alone on a coroutine. If thread 0 exits without calling
//! `sync_threads`, no other thread of the block can legally reach a barrier (thread 0 would
//! never arrive: divergence), so threads 1.. run in **plain-loop mode**: one after another as
//! plain calls on the worker's own stack, in a loop compiled with the kernel closure,
//! with one `catch_unwind` for the whole loop. A thread that calls `sync_threads` in that mode
//! faults with "barrier divergence" naming it, like any other kernel fault. This is how a
//! CUDA-style one-element-per-thread kernel runs: one coroutine switch per block, then a loop.
//!
//! If thread 0 does reach a barrier, the block switches to one coroutine per thread: thread 0
//! stays suspended at the barrier, threads 1.. start on their own coroutines, and each barrier
//! releases once every thread of the block has arrived. A barrier that a thread never reaches
//! (it exited, or it reached a barrier only after an earlier thread had exited without it)
//! fails the launch with "barrier divergence" instead of hanging. Coroutine stacks and the
//! shared-memory buffer are pooled per worker thread; only the bytes a block handed out are
//! zeroed for the next one.
//!
//! The state threads share with the scheduler (the launch, the block's shared memory and
//! barrier, faults) is in `launch.rs`; what a thread sees (`ThreadCtx`) is in `kernel.rs`.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use parking_lot::Mutex;

use super::kernel::{BoundKernel, ThreadCtx};
use super::launch::{AbortUnwind, AtBarrier, BlockState, KernelFault, LaunchCtx, Resume};
use crate::error::panic_message;
use crate::types::Dim3;

/// Stack size of one host-kernel thread. Pages are committed only when touched.
pub(crate) const THREAD_STACK_BYTES: usize = 256 * 1024;

/// How a thread ended.
enum ThreadEnd {
    Done,
    Failed(String),
    Aborted,
}

type ThreadCoroutine = Coroutine<Resume, AtBarrier, ThreadEnd, DefaultStack>;

struct WorkerCache {
    stacks: Vec<DefaultStack>,
    shared: Vec<u128>,
    shared_dirty: usize,
}

thread_local! {
    static CACHE: RefCell<WorkerCache> =
        const { RefCell::new(WorkerCache { stacks: Vec::new(), shared: Vec::new(), shared_dirty: 0 }) };
}

fn take_stack(pool: &mut Vec<DefaultStack>) -> Result<DefaultStack, String> {
    match pool.pop() {
        Some(s) => Ok(s),
        None => DefaultStack::new(THREAD_STACK_BYTES)
            .map_err(|e| format!("cannot allocate a {THREAD_STACK_BYTES}-byte thread stack: {e}")),
    }
}

fn run_thread(
    state: &BlockState<'_>,
    body: &BoundKernel,
    y: &Yielder<Resume, AtBarrier>,
    tid: u32,
) -> ThreadEnd {
    let ctx = ThreadCtx::new(state, y, tid);
    match catch_unwind(AssertUnwindSafe(|| body.thread(&ctx))) {
        Ok(()) => ThreadEnd::Done,
        Err(p) => unwound(state, tid, p),
    }
}

/// How thread `tid` ended, from the payload it unwound with.
fn unwound(state: &BlockState<'_>, tid: u32, p: Box<dyn std::any::Any + Send>) -> ThreadEnd {
    if p.is::<AbortUnwind>() {
        return ThreadEnd::Aborted;
    }
    let where_ = format!(
        "block {} thread {}",
        state.block_idx,
        state.launch.block.unlinear(tid as u64)
    );
    match p.downcast::<KernelFault>() {
        Ok(f) => ThreadEnd::Failed(format!("{where_}: {}", f.0)),
        Err(p) => ThreadEnd::Failed(format!("{where_} panicked: {}", panic_message(p.as_ref()))),
    }
}

/// Plain-loop mode: threads `from..` of the block, on this stack (see the module docs).
fn plain_loop(state: &BlockState<'_>, kernel: &BoundKernel, from: u32) -> Result<(), String> {
    let current = Cell::new(from);
    match catch_unwind(AssertUnwindSafe(|| {
        kernel.threads_from(state, from, &current)
    })) {
        Ok(()) => Ok(()),
        Err(p) => match unwound(state, current.get(), p) {
            ThreadEnd::Failed(msg) => Err(msg),
            // Nothing sends an abort to a thread that is not on a coroutine.
            ThreadEnd::Done | ThreadEnd::Aborted => Err("block aborted".into()),
        },
    }
}

/// Runs block `block_idx` of `launch` (running `body` per thread) to completion; `Err` carries
/// the first failure's message.
pub(crate) fn run_block(
    launch: &LaunchCtx,
    body: &BoundKernel,
    block_idx: Dim3,
) -> Result<(), String> {
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let WorkerCache {
            stacks,
            shared,
            shared_dirty,
        } = &mut *cache;
        let words = launch.shared_limit.div_ceil(16);
        if shared.len() < words {
            shared.resize(words, 0);
        }
        let dirty = (*shared_dirty).min(shared.len());
        shared[..dirty].fill(0);
        *shared_dirty = words;
        let state = BlockState::new(
            launch,
            block_idx,
            Cell::from_mut(&mut shared[..words]).as_slice_of_cells(),
        );
        let result = schedule(&state, body, stacks);
        *shared_dirty = state.shared_used().div_ceil(16);
        result
    })
}

fn schedule(
    state: &BlockState<'_>,
    kernel: &BoundKernel,
    stacks: &mut Vec<DefaultStack>,
) -> Result<(), String> {
    let n = state.launch.block.count() as u32;
    let body = move |y: &Yielder<Resume, AtBarrier>, _: Resume| run_thread(state, kernel, y, 0);
    // SAFETY: the coroutine borrows `state` and `kernel`, which outlive it: every coroutine made
    // here is driven to completion (or dropped, unwinding it) before `schedule` returns.
    let mut first = unsafe { ThreadCoroutine::with_stack_unchecked(take_stack(stacks)?, body) };
    match first.resume(Resume::Go) {
        CoroutineResult::Return(end) => {
            stacks.push(first.into_stack());
            match end {
                ThreadEnd::Done => plain_loop(state, kernel, 1),
                ThreadEnd::Failed(msg) => Err(msg),
                // Nothing aborts thread 0 before it reaches a barrier.
                ThreadEnd::Aborted => Err("block aborted".into()),
            }
        }
        CoroutineResult::Yield(AtBarrier) => fiber_schedule(state, kernel, first, n, stacks),
    }
}

/// One coroutine per thread; thread 0 (`first`) is already waiting at a barrier.
fn fiber_schedule(
    state: &BlockState<'_>,
    kernel: &BoundKernel,
    first: ThreadCoroutine,
    n: u32,
    stacks: &mut Vec<DefaultStack>,
) -> Result<(), String> {
    let mut threads: Vec<Option<ThreadCoroutine>> = Vec::with_capacity(n as usize);
    threads.push(Some(first));
    let mut failure: Option<String> = None;
    for tid in 1..n {
        let body =
            move |y: &Yielder<Resume, AtBarrier>, _: Resume| run_thread(state, kernel, y, tid);
        match take_stack(stacks) {
            // SAFETY: as in `schedule`: every coroutine is finished before this returns.
            Ok(stack) => threads.push(Some(unsafe {
                ThreadCoroutine::with_stack_unchecked(stack, body)
            })),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let mut waiting = vec![false; threads.len()];
    waiting[0] = true;
    let mut to_run: Vec<usize> = (1..threads.len()).collect();
    let mut exited_first: Option<u32> = None;
    while failure.is_none() {
        for &t in &to_run {
            let Some(co) = threads[t].as_mut() else {
                continue;
            };
            match co.resume(Resume::Go) {
                CoroutineResult::Yield(AtBarrier) => waiting[t] = true,
                CoroutineResult::Return(end) => {
                    if let Some(co) = threads[t].take() {
                        stacks.push(co.into_stack());
                    }
                    exited_first.get_or_insert(t as u32);
                    if let ThreadEnd::Failed(msg) = end {
                        failure = Some(msg);
                        break;
                    }
                }
            }
        }
        if failure.is_some() {
            break;
        }
        let at_barrier = waiting.iter().filter(|w| **w).count();
        if at_barrier == 0 {
            return Ok(());
        }
        if at_barrier < n as usize {
            let waiter = waiting.iter().position(|w| *w).unwrap_or(0) as u32; // ok: at_barrier > 0
            let b = state.launch.block;
            failure = Some(format!(
                "barrier divergence in block {}: thread {} waits at sync_threads but thread {} \
                 exited without reaching it; every thread of a block must reach every barrier",
                state.block_idx,
                b.unlinear(waiter as u64),
                b.unlinear(exited_first.unwrap_or(0) as u64)
            ));
            break;
        }
        to_run = (0..threads.len()).collect();
        waiting.iter_mut().for_each(|w| *w = false);
    }
    // Abort every thread still suspended: each unwinds its own stack and returns.
    for slot in threads.iter_mut() {
        match slot.take() {
            Some(mut co) if co.started() => {
                while let CoroutineResult::Yield(AtBarrier) = co.resume(Resume::Abort) {}
                stacks.push(co.into_stack());
            }
            // Never started: dropping it only drops its closure.
            _ => {}
        }
    }
    Err(failure.unwrap_or_else(|| "block aborted".into()))
}

/// Runs every block of `launch` on `pool`, `body` once per thread; the failure of the
/// lowest-numbered failing block.
pub(crate) fn run_grid(
    pool: &rayon::ThreadPool,
    launch: &LaunchCtx,
    body: &BoundKernel,
) -> Result<(), String> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    let total = launch.grid.count();
    if total == 1 {
        // One block runs here, on the stream's worker: handing it to the pool and waiting
        // costs more than a small block.
        return run_block(launch, body, launch.grid.unlinear(0));
    }
    let failed = AtomicBool::new(false);
    let first: Mutex<Option<(u64, String)>> = Mutex::new(None);
    pool.install(|| {
        (0..total).into_par_iter().for_each(|b| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            if let Err(msg) = run_block(launch, body, launch.grid.unlinear(b)) {
                failed.store(true, Ordering::Relaxed);
                let mut first = first.lock();
                if first.as_ref().is_none_or(|(fb, _)| b < *fb) {
                    *first = Some((b, msg));
                }
            }
        })
    });
    match first.into_inner() {
        Some((_, msg)) => Err(msg),
        None => Ok(()),
    }
}
