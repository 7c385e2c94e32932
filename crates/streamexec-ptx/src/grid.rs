//! A grid's blocks, in parallel on the caller's rayon pool, each on the JIT's compiled code or
//! the interpreter.

use parking_lot::Mutex;

use crate::launch::Launch;

/// The compiled kernel a launch runs, or `None` for the interpreter.
#[cfg(feature = "jit")]
pub(crate) type Compiled<'a> = Option<&'a crate::jit::JitKernel>;
/// Without the JIT every launch is interpreted.
#[cfg(not(feature = "jit"))]
pub(crate) type Compiled<'a> = Option<std::convert::Infallible>;

/// Runs every block on `pool`; the failure of the lowest-numbered failing block.
pub(crate) fn run_grid(
    pool: &rayon::ThreadPool,
    l: &Launch,
    jit: Compiled<'_>,
) -> Result<(), String> {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    // An engine bug must not take the stream worker down: a panic is the block's error.
    let one = |b: u64| {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match jit {
            #[cfg(feature = "jit")]
            Some(k) => crate::jit::run_block(l, k, b),
            #[cfg(not(feature = "jit"))]
            Some(never) => match never {},
            None => crate::interp::block::run_block(l, b),
        }));
        run.unwrap_or_else(|p| {
            Err(format!(
                "internal error of the PTX engine in block {} of `{}`: {}",
                l.grid.unlinear(b),
                l.kernel,
                crate::error::panic_message(p.as_ref())
            ))
        })
    };
    let total = l.grid.count();
    if l.cooperative && total > 1 {
        return run_cooperative(l, &one);
    }
    if total == 1 {
        // One block runs here, on the stream's worker: handing it to the pool and waiting
        // costs more than a small block.
        return one(0);
    }
    let failed = AtomicBool::new(false);
    let first: Mutex<Option<(u64, String)>> = Mutex::new(None);
    pool.install(|| {
        (0..total).into_par_iter().for_each(|b| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            if let Err(msg) = one(b) {
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

/// A cooperative grid: every block on a scoped thread of its own, so that blocks waiting for
/// each other all make progress. The first block to fail abandons the grid (the waiting
/// blocks' `nanosleep` then fails them too) and its failure is the launch's.
fn run_cooperative(
    l: &Launch,
    one: &(dyn Fn(u64) -> Result<(), String> + Sync),
) -> Result<(), String> {
    use std::sync::atomic::Ordering;
    let first: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|s| {
        for b in 0..l.grid.count() {
            let first = &first;
            let run = move || {
                if let Err(msg) = one(b)
                    && !l.abandoned.swap(true, Ordering::SeqCst)
                {
                    *first.lock() = Some(msg);
                }
            };
            let started = std::thread::Builder::new()
                .name(format!("ptx-coop-{b}"))
                .spawn_scoped(s, run);
            if let Err(e) = started {
                if !l.abandoned.swap(true, Ordering::SeqCst) {
                    *first.lock() = Some(format!(
                        "the cooperative launch could not start a thread for block {}: {e}",
                        l.grid.unlinear(b)
                    ));
                }
                break;
            }
        }
    });
    match first.into_inner() {
        Some(msg) => Err(msg),
        None => Ok(()),
    }
}
