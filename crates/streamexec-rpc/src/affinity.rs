//! The server thread stepping off the core of a client it waits for (Linux; elsewhere nothing).
//!
//! A spinning client (a CPU thread running device code, LLVM's own client) cannot wake the
//! server; when the scheduler puts it on the server thread's core, the server (nice −20)
//! spinning there keeps it from running, and every hand-off of a call waits for a park. Once a
//! call stalls, the thread takes its own core out of its affinity mask, so the scheduler moves it
//! elsewhere and the client has the core; the mask is restored when the thread goes idle.

/// The thread's affinity mask as it started, and whether it is narrowed now.
pub(crate) struct StepAside {
    #[cfg(all(target_os = "linux", not(miri)))]
    full: Option<libc::cpu_set_t>,
    narrowed: bool,
}

impl StepAside {
    /// Reads the calling thread's mask (nothing to do with fewer than two CPUs in it).
    pub(crate) fn new() -> Self {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity(0) fills it
            // for the calling thread and reports failure through its return value.
            let full = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
                    && libc::CPU_COUNT(&set) >= 2)
                    .then_some(set)
            };
            StepAside {
                full,
                narrowed: false,
            }
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        StepAside { narrowed: false }
    }

    /// Leaves the core the thread runs on now (again at each stall: the client may have
    /// followed it).
    pub(crate) fn step_aside(&mut self) {
        #[cfg(all(target_os = "linux", not(miri)))]
        if let Some(full) = self.full {
            // SAFETY: sched_getcpu has no preconditions; CPU_CLR on a copy of a valid set with
            // an index below CPU_SETSIZE (checked); sched_setaffinity(0) changes only this
            // thread's mask and reports failure through its return value.
            unsafe {
                let cpu = libc::sched_getcpu();
                if cpu >= 0 && (cpu as usize) < libc::CPU_SETSIZE as usize {
                    let mut set = full;
                    libc::CPU_CLR(cpu as usize, &mut set);
                    if libc::CPU_COUNT(&set) > 0 {
                        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                        self.narrowed = true;
                    }
                }
            }
        }
    }

    /// Gives the thread its whole mask back.
    pub(crate) fn restore(&mut self) {
        #[cfg(all(target_os = "linux", not(miri)))]
        if let (Some(full), true) = (self.full, self.narrowed) {
            // SAFETY: as in `step_aside`; `full` is the mask the thread started with.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &full);
            }
            self.narrowed = false;
        }
    }
}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::StepAside;

    fn mask() -> libc::cpu_set_t {
        // SAFETY: as in `StepAside::new`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            set
        }
    }

    #[test]
    fn stepping_aside_leaves_the_current_core_and_restore_gives_the_mask_back() {
        // On a thread of its own: the test changes its thread's affinity.
        std::thread::spawn(|| {
            let full = mask();
            let mut aside = StepAside::new();
            // SAFETY: CPU_COUNT on a valid set.
            if unsafe { libc::CPU_COUNT(&full) } < 2 {
                aside.step_aside();
                assert!(!aside.narrowed, "one CPU: nothing to step aside to");
                return;
            }
            // SAFETY: sched_getcpu has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() } as usize;
            aside.step_aside();
            let narrowed = mask();
            // SAFETY: CPU_ISSET / CPU_COUNT on valid sets, indices below CPU_SETSIZE.
            unsafe {
                assert!(
                    !libc::CPU_ISSET(cpu, &narrowed),
                    "still allowed on CPU {cpu}"
                );
                assert_eq!(libc::CPU_COUNT(&narrowed), libc::CPU_COUNT(&full) - 1);
                // SAFETY: as above.
                assert_ne!(
                    libc::sched_getcpu() as usize,
                    cpu,
                    "still running on CPU {cpu}"
                );
            }
            aside.restore();
            let back = mask();
            // SAFETY: as above.
            unsafe {
                for c in 0..libc::CPU_SETSIZE as usize {
                    assert_eq!(
                        libc::CPU_ISSET(c, &back),
                        libc::CPU_ISSET(c, &full),
                        "CPU {c}"
                    );
                }
            }
        })
        .join()
        .unwrap();
    }
}
