//! kernels/corpus_faults.cu: the race checker, out-of-bounds stores, divergent barriers.

use super::*;

/// The stream error of a launch that must fault: a `Fault` naming `kernel`.
fn expect_fault(err: common::Result<()>, kernel: &str, what: &str) -> String {
    match err {
        Err(Error::Fault { kernel: k, detail }) => {
            assert_eq!(k, kernel, "{what}: {detail}");
            detail
        }
        other => panic!("{what}: expected a Fault from `{kernel}`, got {other:?}"),
    }
}

#[test]
fn race_checker_flags_racy_kernels_and_passes_their_twins() {
    let exec = host();
    let mut rng = common::rng("race_checker_flags_racy_kernels_and_passes_their_twins");
    // Every other test of this binary waits while the checker is on (it is per executor).
    let _only = RACE_CHECK.write().unwrap_or_else(|p| p.into_inner());
    let launch_here = |k: &common::TypedKernel<(P<i32>, P<i32>)>, t: u32, a: P<i32>, b: P<i32>| {
        let mut s = exec.create_stream().unwrap();
        s.then_launch(t, 1, k, (a, b)).block_host_until_done()
    };
    for (opt, ptx) in FAULTS {
        let racy = load::<(P<i32>, P<i32>)>(&exec, ptx, "racy_shared_sum");
        let twin = load::<(P<i32>, P<i32>)>(&exec, ptx, "atomic_shared_sum");
        let x = ints(&mut rng, 64, -100, 100);
        let dx = upload(&exec, &x);

        // Checker off: the racy kernel runs (its sum is unspecified).
        exec.set_race_check(false).unwrap();
        let out = poisoned(&exec, 1, POISON_I32);
        launch_here(&racy, 64, dx.ptr(), out.ptr()).unwrap_or_else(|e| panic!("{opt}: {e}"));

        exec.set_race_check(true)
            .expect("the host platform has a race checker");
        let out = poisoned(&exec, 1, POISON_I32);
        let detail = expect_fault(
            launch_here(&racy, 64, dx.ptr(), out.ptr()),
            "racy_shared_sum",
            opt,
        );
        assert!(detail.starts_with("data race"), "{opt}: {detail}");

        let out = poisoned(&exec, 1, POISON_I32);
        launch_here(&twin, 64, dx.ptr(), out.ptr())
            .unwrap_or_else(|e| panic!("{opt} atomic twin: {e}"));
        assert_eq!(
            download(&exec, &out),
            [x.iter().sum::<i32>()],
            "{opt} atomic twin"
        );

        // Global memory: thread t reads a[t + 32] that thread t + 32 writes.
        let racy = load::<(P<i32>,)>(&exec, ptx, "racy_neighbour");
        let twin = load::<(P<i32>,)>(&exec, ptx, "synced_neighbour");
        let a = ints(&mut rng, 96, -1000, 1000);
        let da = upload(&exec, &a);
        let mut s = exec.create_stream().unwrap();
        let r = s
            .then_launch(64, 1, &racy, (da.ptr(),))
            .block_host_until_done();
        let detail = expect_fault(r, "racy_neighbour", opt);
        assert!(detail.starts_with("data race"), "{opt}: {detail}");
        let da = upload(&exec, &a);
        let mut s = exec.create_stream().unwrap();
        s.then_launch(64, 1, &twin, (da.ptr(),))
            .block_host_until_done()
            .unwrap_or_else(|e| panic!("{opt} synced_neighbour: {e}"));
        let want: Vec<i32> = (0..96)
            .map(|i| if i < 64 { a[i + 32] + 1 } else { a[i] })
            .collect();
        assert_eq!(download(&exec, &da), want, "{opt} synced_neighbour");
    }
    exec.set_race_check(false).unwrap();
}

#[test]
fn out_of_bounds_store_is_a_kernel_fault_and_the_executor_stays_usable() {
    let exec = host();
    for (opt, ptx) in FAULTS {
        let k = load::<(P<i32>,)>(&exec, ptx, "oob_store");
        // 16 elements, 64 threads: threads 16..63 store past the end.
        let out = poisoned(&exec, 16, POISON_I32);
        let mut s = exec.create_stream().unwrap();
        let r = s
            .then_launch(32, 2, &k, (out.ptr(),))
            .block_host_until_done();
        let detail = expect_fault(r, "oob_store", opt);
        assert!(!detail.is_empty(), "{opt}");
        // The error sticks to that stream ...
        assert!(s.status().is_err(), "{opt}: the stream forgot its error");
        // ... and a new stream on the same executor works.
        let basic = load::<(P<i32>, P<i32>, P<i32>, i32)>(&exec, BASIC[1].1, "vadd_i32");
        let (a, b) = (upload(&exec, &[1, 2, 3]), upload(&exec, &[10, 20, 30]));
        let c = poisoned(&exec, 3, POISON_I32);
        run(&exec, 32, 1, &basic, (a.ptr(), b.ptr(), c.ptr(), 3));
        assert_eq!(
            download(&exec, &c),
            [11, 22, 33],
            "{opt}: executor unusable after a fault"
        );
        // In bounds, the same kernel is fine.
        let out = poisoned(&exec, 64, POISON_I32);
        run(&exec, 32, 2, &k, (out.ptr(),));
        assert_eq!(
            download(&exec, &out),
            (0..64).collect::<Vec<i32>>(),
            "{opt}"
        );
    }
}

/// Launches `kernel` (one `int*` parameter) on 64 threads on a watchdog thread, so a hang
/// fails the test instead of blocking it forever, and expects a `KernelFault`.
fn expect_barrier_fault(kernel: &'static str) {
    for (opt, ptx) in FAULTS {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let exec = host();
            let k = load::<(P<i32>,)>(&exec, ptx, kernel);
            let out = poisoned(&exec, 64, POISON_I32);
            // Not `launch`: a hung launch must not hold RACE_CHECK and block other tests.
            let mut s = exec.create_stream().unwrap();
            let r = s
                .then_launch(64, 1, &k, (out.ptr(),))
                .block_host_until_done();
            let _ = tx.send(r);
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{opt}: {kernel} did not finish in 120 s"));
        expect_fault(r, kernel, opt);
    }
}

/// `if (threadIdx.x < 16) __syncthreads();` with 64 threads: half of warp 0 at bar.sync, the
/// others go on and exit. As on the hardware, exited threads count as arrived, so the kernel
/// completes and every thread writes; the race checker (the checker mode) reports the barrier
/// as divergence instead.
#[test]
fn barrier_reached_by_some_threads_completes_and_the_checker_reports_it() {
    let exec = host();
    for (opt, ptx) in FAULTS {
        let k = load::<(P<i32>,)>(&exec, ptx, "barrier_divergent");
        let out = poisoned(&exec, 64, POISON_I32);
        launch(&exec, 64, 1, &k, (out.ptr(),)).unwrap_or_else(|e| panic!("{opt}: {e}"));
        assert_eq!(
            download(&exec, &out),
            (0..64).collect::<Vec<i32>>(),
            "{opt}"
        );
        let _only = RACE_CHECK.write().unwrap_or_else(|p| p.into_inner());
        exec.set_race_check(true).unwrap();
        let mut s = exec.create_stream().unwrap();
        let r = s
            .then_launch(64, 1, &k, (out.ptr(),))
            .block_host_until_done();
        exec.set_race_check(false).unwrap();
        let detail = expect_fault(r, "barrier_divergent", opt);
        assert!(
            detail.contains("barrier divergence") && detail.contains("exited"),
            "{opt}: {detail}"
        );
    }
}

/// Warp 0 at barrier 0, warp 1 at barrier 1: a deadlock, reported, not a hang.
#[test]
fn barrier_deadlock_is_a_kernel_fault_not_a_hang() {
    expect_barrier_fault("barrier_deadlock");
}
