//! A `fork()` child of a process that initialised the driver: every driver call there is
//! `CUDA_ERROR_NOT_INITIALIZED` (`cuInit` included), as CUDA answers, and none hangs on the
//! parent's worker threads (which the child does not have).

use std::time::{Duration, Instant};

use super::*;

/// What the child calls, in order, and the code CUDA gives each in such a child.
const CHILD_CALLS: &[(&str, CUresult)] = &[
    ("cuInit", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuDeviceGetCount", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuCtxGetCurrent", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuMemAlloc_v2", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuMemcpyDtoH_v2", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuStreamSynchronize", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuCtxSynchronize", CUresult::CUDA_ERROR_NOT_INITIALIZED),
    ("cuDriverGetVersion", CUresult::CUDA_SUCCESS),
];

/// In the forked child: makes the calls of [`CHILD_CALLS`] and writes their codes (u32 each)
/// to `fd`. Only raw driver calls and `write`; never returns.
fn child(fd: c_int, s: CUstream, d: CUdeviceptr) -> ! {
    let (mut n, mut ctx, mut p, mut v) = (0, null_mut(), 0, 0);
    let mut word = [0u8; 4];
    let codes = [
        cu!(cuInit(0)),
        cu!(cuDeviceGetCount(&mut n)),
        cu!(cuCtxGetCurrent(&mut ctx)),
        cu!(cuMemAlloc_v2(&mut p, 64)),
        cu!(cuMemcpyDtoH_v2(word.as_mut_ptr().cast(), d, 4)),
        cu!(cuStreamSynchronize(s)),
        cu!(cuCtxSynchronize()),
        cu!(cuDriverGetVersion(&mut v)),
    ];
    let bytes: Vec<u8> = codes
        .iter()
        .flat_map(|c| (*c as u32).to_ne_bytes())
        .collect();
    // SAFETY: `bytes` is valid for its length; `_exit` skips the parent's atexit handlers.
    unsafe {
        libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(0)
    }
}

#[test]
fn a_forked_child_is_not_initialized_and_never_hangs() {
    let Some(drv) = setup("a_forked_child_is_not_initialized_and_never_hangs") else {
        return;
    };
    let _ = &drv;
    // The parent has live streams with worker threads and work in flight.
    let s = stream();
    let module = load(PTX);
    let f = function(module, c"add_k");
    let n = 4096usize;
    let (din, dout) = (alloc(n * 4), alloc(n * 4));
    ok!(cuMemsetD32_v2(din, 5, n));
    launch_add(f, s, dout, din, 1, n as u32);
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: the child only makes driver calls, writes to the pipe and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: the read end is ours to close.
        unsafe { libc::close(fds[0]) };
        child(fds[1], s, dout);
    }
    // SAFETY: the write end is the child's now.
    unsafe { libc::close(fds[1]) };
    // Wait for the child with a deadline: a hang fails the test instead of hanging CI.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = 0;
    loop {
        // SAFETY: our child's pid; `status` is valid for a write.
        let w = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if w == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: our own child, still running.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
                libc::close(fds[0]);
            }
            panic!("the forked child hung in a driver call");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child died: status {status:#x}"
    );
    let mut buf = vec![0u8; CHILD_CALLS.len() * 4 + 1];
    // SAFETY: `buf` is valid for its length; the child has exited, so this does not block.
    let got = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: our read end.
    unsafe { libc::close(fds[0]) };
    assert_eq!(got, (CHILD_CALLS.len() * 4) as isize, "the child's report");
    for (i, (name, want)) in CHILD_CALLS.iter().enumerate() {
        let code = u32::from_ne_bytes(buf[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!(code, *want as u32, "{name} in the forked child");
    }
    // The parent goes on as before.
    ok!(cuStreamSynchronize(s));
    assert_eq!(download(dout, n), vec![6; n]);
    add_works(f, s, "a_forked_child_is_not_initialized_and_never_hangs");
    ok!(cuMemFree_v2(din));
    ok!(cuMemFree_v2(dout));
    ok!(cuModuleUnload(module));
    ok!(cuStreamDestroy_v2(s));
}
