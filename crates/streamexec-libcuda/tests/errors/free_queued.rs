//! Freeing memory a queued kernel still uses: the kernel runs on it as CUDA's free waits for it
//! (numba-cuda frees temporaries right after launching on them).

use std::sync::atomic::AtomicBool;

use super::*;

/// Set by the test to let [`hold_stream`] return.
static RELEASE: AtomicBool = AtomicBool::new(false);

/// A host function that holds its stream until [`RELEASE`] is set (at most 30 s).
unsafe extern "C" fn hold_stream(_: *mut c_void) {
    let start = std::time::Instant::now();
    while !RELEASE.load(Ordering::Acquire) && start.elapsed().as_secs() < 30 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn memory_freed_under_a_queued_kernel_stays_until_it_ran() {
    let Some(_drv) = setup("memory_freed_under_a_queued_kernel_stays_until_it_ran") else {
        return;
    };
    let base = free_memory();
    let mut r = rng("memory_freed_under_a_queued_kernel_stays_until_it_ran");
    let m = load(PTX);
    let f = function(m, c"add_k");
    let s = stream();
    for round in 0..5 {
        let n = r.random_range(1..3000usize);
        let k = r.random::<u32>();
        let input = random_u32s(&mut r, n, u32::MAX);
        let (din, dout) = (alloc(n * 4), alloc(n * 4));
        upload(din, &input);
        ok!(cuMemsetD32_v2(dout, POISON_U32, n));
        let mut host = null_mut::<c_void>();
        ok!(cuMemHostAlloc(&mut host, n * 4, 0));
        // SAFETY: `host` has n u32s.
        unsafe { std::ptr::copy_nonoverlapping(input.as_ptr(), host.cast::<u32>(), n) };
        let dout2 = alloc(n * 4);
        RELEASE.store(false, Ordering::Release);
        ok!(cuLaunchHostFunc(s, Some(hold_stream), null_mut()));
        launch_add(f, s, dout, din, k, n as u32);
        launch_add(f, s, dout2, host as CUdeviceptr, k, n as u32);
        // Freed while both kernels wait behind the host function, which another thread
        // releases a little later (a free may wait for the context's work, as CUDA's does).
        let releaser = std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(20));
            RELEASE.store(true, Ordering::Release);
        });
        ok!(cuMemFreeHost(host));
        ok!(cuMemFree_v2(din));
        assert_eq!(free_memory(), base - 2 * n * 4, "freed for the count");
        releaser.join().expect("the releasing thread");
        ok!(cuStreamSynchronize(s));
        let want: Vec<u32> = input.iter().map(|x| x.wrapping_add(k)).collect();
        assert_eq!(
            download(dout, n),
            want,
            "round {round}: input freed after the launch"
        );
        assert_eq!(
            download(dout2, n),
            want,
            "round {round}: pinned input freed"
        );
        ok!(cuMemFree_v2(dout));
        ok!(cuMemFree_v2(dout2));
    }
    ok!(cuStreamDestroy_v2(s));
    ok!(cuModuleUnload(m));
    assert_eq!(free_memory(), base);
}
