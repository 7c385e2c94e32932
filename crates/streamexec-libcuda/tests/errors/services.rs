//! What kernels call outside their module (`kernels/services.cu`): `printf` reaches stdout at
//! synchronisation points with CUDA's formatting, a failed device `assert` is the context's
//! sticky `CUDA_ERROR_ASSERT` with CUDA's message on stderr, `malloc`/`free` draw from a heap
//! `cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE)` sizes. Output is checked in child processes (on
//! each engine), which is where it can be captured.

use super::*;

const SERVICES_PTX: &str = include_str!("../../../../kernels/ptx/services.O3.ptx");
const LIMIT_MALLOC_HEAP: sys::CUlimit = sys::CUlimit::CU_LIMIT_MALLOC_HEAP_SIZE;

/// Runs `test` in a child of this binary with `engine`; its stdout and stderr.
fn child_output(test: &str, engine: &str, extra: &[(&str, &str)]) -> (String, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, test)
        .env("STREAMEXEC_PTX_ENGINE", engine)
        .env_remove("STREAMEXEC_CUDA_DEVICES")
        .envs(extra.iter().copied())
        .output()
        .expect("running the test binary as a child");
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "child `{test}` failed:\n{o}{e}");
    assert!(
        o.contains("1 passed"),
        "child `{test}` ran no test:\n{o}{e}"
    );
    (o, e)
}

fn mark(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|_| out.flush()).unwrap();
}

#[test]
fn printf_text_is_cudas_and_reaches_stdout_at_synchronisation() {
    const TEST: &str = "services::printf_text_is_cudas_and_reaches_stdout_at_synchronisation";
    if std::env::var(CHILD_VAR).as_deref() != Ok(TEST) {
        if !lib_available(TEST) {
            return;
        }
        for engine in ["interpreter", "jit"] {
            let mut r = rng(TEST);
            let (i, u) = (r.random::<i32>() / 2, r.random::<u32>());
            let d = (r.random::<f64>() - 0.5) * 1e4;
            let l = r.random::<i64>();
            let text: String = (0..1 + r.random_range(0..12))
                .map(|_| r.random_range(b'a'..=b'z') as char)
                .collect();
            let args = format!("{i} {d:e} {l} {u} {text}");
            let (out, _) = child_output(TEST, engine, &[("SERVICES_ARGS", &args)]);
            // (libtest's `test name ... ` may precede the first marker on its line.)
            let lines: Vec<&str> = out
                .lines()
                .filter_map(|l| l.find("MARK").map_or(Some(l), |at| Some(&l[at..])))
                .filter(|l| l.starts_with("i=") || l.starts_with("MARK"))
                .collect();
            // Nothing before the synchronisation; then each thread's line (any order).
            let (before, after) = (
                lines.iter().position(|l| *l == "MARK before sync"),
                lines.iter().position(|l| *l == "MARK after sync"),
            );
            let (Some(b), Some(a)) = (before, after) else {
                panic!("{engine}: markers missing:\n{out}");
            };
            assert_eq!(
                b, 0,
                "{engine}: printf text before the synchronisation:\n{out}"
            );
            let mut got: Vec<&str> = lines[b + 1..a].to_vec();
            got.sort_unstable();
            let mut want: Vec<String> = (0..6)
                .map(|t| {
                    let c = (b'A' + (t % 3) as u8) as char;
                    format!("i={} d={d:.3} s={text} l={l} u={u} c={c}", i + (t % 3))
                })
                .collect();
            want.sort_unstable();
            assert_eq!(got, want, "{engine}");
            assert_eq!(lines.len(), a + 1, "{engine}: text after the last marker");
        }
        return;
    }
    let Some(_drv) = setup(TEST) else { return };
    let v: Vec<String> = std::env::var("SERVICES_ARGS")
        .unwrap()
        .split(' ')
        .map(str::to_string)
        .collect();
    let i: i32 = v[0].parse().unwrap();
    let d: f64 = v[1].parse().unwrap();
    let l: i64 = v[2].parse().unwrap();
    let u: u32 = v[3].parse().unwrap();
    let s = CString::new(v[4].clone()).unwrap();
    let dev_s = alloc(s.as_bytes_with_nul().len());
    ok!(cuMemcpyHtoD_v2(
        dev_s,
        s.as_ptr().cast(),
        s.as_bytes_with_nul().len()
    ));
    let m = load(SERVICES_PTX);
    let f = function(m, c"print_values");
    let (mut pi, mut pd, mut pl, mut pu, mut ps) = (i, d, l, u, dev_s);
    let mut params = [
        (&raw mut pi).cast::<c_void>(),
        (&raw mut pd).cast(),
        (&raw mut pl).cast(),
        (&raw mut pu).cast(),
        (&raw mut ps).cast(),
    ];
    ok!(cuLaunchKernel(
        f,
        2,
        1,
        1,
        3,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    // The kernel has run (an event wait is not a flush point in this test's view: the
    // stream query reports done) but its text waits for a synchronisation.
    while cu!(cuStreamQuery(null_mut())) == CUresult::CUDA_ERROR_NOT_READY {
        std::thread::yield_now();
    }
    mark("MARK before sync");
    ok!(cuCtxSynchronize());
    mark("MARK after sync");
    // vprintf returns the argument count (3 and 0), as CUDA's.
    let out = alloc(8);
    let mut po = out;
    let mut params = [(&raw mut po).cast::<c_void>()];
    ok!(cuLaunchKernel(
        function(m, c"print_count"),
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    assert_eq!(download(out, 2), vec![3, 0]);
    ok!(cuModuleUnload(m));
    ok!(cuMemFree_v2(out));
    ok!(cuMemFree_v2(dev_s));
}

#[test]
fn a_device_assert_is_the_contexts_sticky_cuda_error_assert() {
    const TEST: &str = "services::a_device_assert_is_the_contexts_sticky_cuda_error_assert";
    if std::env::var(CHILD_VAR).as_deref() != Ok(TEST) {
        if !lib_available(TEST) {
            return;
        }
        for engine in ["interpreter", "jit"] {
            let (_, err) = child_output(TEST, engine, &[]);
            let want = "services.cu:42: assert_thread: block: [2,0,0], thread: [1,0,0] \
                        Assertion `x != bad` failed.";
            assert!(
                err.lines().any(|l| l == want),
                "{engine}: CUDA's assertion text missing from stderr:\n{err}"
            );
        }
        return;
    }
    let Some(drv) = setup(TEST) else { return };
    let c = created_context();
    let m = load(SERVICES_PTX);
    let f = function(m, c"assert_thread");
    let out = alloc(4 * 12);
    let (mut bad, mut bad_block, mut po) = (1i32, 2i32, out);
    let mut params = [
        (&raw mut bad).cast::<c_void>(),
        (&raw mut bad_block).cast(),
        (&raw mut po).cast(),
    ];
    ok!(cuLaunchKernel(
        f,
        3,
        1,
        1,
        4,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    expect!(CUDA_ERROR_ASSERT, cuCtxSynchronize());
    // Sticky, as CUDA's.
    expect!(CUDA_ERROR_ASSERT, cuCtxSynchronize());
    let mut q = 0;
    expect!(CUDA_ERROR_ASSERT, cuMemAlloc_v2(&mut q, 64));
    // Other contexts are not poisoned.
    ok!(cuCtxPushCurrent_v2(drv.primary));
    ok!(cuCtxSynchronize());
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    ok!(cuCtxDestroy_v2(c));
}

#[test]
fn kernels_malloc_from_a_heap_cu_ctx_set_limit_sizes() {
    let Some(_drv) = setup("kernels_malloc_from_a_heap_cu_ctx_set_limit_sizes") else {
        return;
    };
    let mut limit = 0usize;
    ok!(cuCtxGetLimit(&mut limit, LIMIT_MALLOC_HEAP));
    assert_eq!(limit, 8 << 20, "CUDA's default heap");
    // Room for three 64-byte blocks; five threads ask.
    ok!(cuCtxSetLimit(LIMIT_MALLOC_HEAP, 3 * 64 + 10));
    ok!(cuCtxGetLimit(&mut limit, LIMIT_MALLOC_HEAP));
    assert_eq!(limit, 3 * 64 + 10);
    let m = load(SERVICES_PTX);
    let ptrs = alloc(5 * 8);
    upload(ptrs, &[POISON_U32; 10]);
    let (mut n, mut pp) = (64u64, ptrs);
    let mut params = [(&raw mut n).cast::<c_void>(), (&raw mut pp).cast()];
    ok!(cuLaunchKernel(
        function(m, c"heap_alloc"),
        1,
        1,
        1,
        5,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    let raw = download(ptrs, 10);
    let p: Vec<u64> = raw
        .chunks(2)
        .map(|w| w[0] as u64 | (w[1] as u64) << 32)
        .collect();
    let live: Vec<usize> = (0..5).filter(|&t| p[t] != 0).collect();
    assert_eq!(live.len(), 3, "{p:x?}");
    // The heap cannot be resized while kernels hold its memory.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuCtxSetLimit(LIMIT_MALLOC_HEAP, 1 << 20)
    );
    // A later launch reads what the first wrote and frees it.
    let compact: Vec<u32> = live
        .iter()
        .flat_map(|&t| [p[t] as u32, (p[t] >> 32) as u32])
        .collect();
    let ins = alloc(3 * 8);
    upload(ins, &compact);
    let vals = alloc(3 * 8);
    let (mut pi, mut n2, mut pv) = (ins, 64u64, vals);
    let mut params = [
        (&raw mut pi).cast::<c_void>(),
        (&raw mut n2).cast(),
        (&raw mut pv).cast(),
    ];
    ok!(cuLaunchKernel(
        function(m, c"heap_free"),
        1,
        1,
        1,
        3,
        1,
        1,
        0,
        null_mut(),
        params.as_mut_ptr(),
        null_mut()
    ));
    let want: Vec<u32> = live.iter().flat_map(|&t| [t as u32, 7]).collect();
    assert_eq!(download(vals, 6), want);
    ok!(cuCtxSetLimit(LIMIT_MALLOC_HEAP, 8 << 20));
    for a in [ptrs, ins, vals] {
        ok!(cuMemFree_v2(a));
    }
    ok!(cuModuleUnload(m));
}

/// `trap` ends the launch: the context's sticky `CUDA_ERROR_LAUNCH_FAILED`, as CUDA's.
#[test]
fn trap_is_a_sticky_launch_failure() {
    let Some(drv) = setup("trap_is_a_sticky_launch_failure") else {
        return;
    };
    let c = created_context();
    let m = load(
        ".version 7.0\n.target sm_70\n.address_size 64\n\
         .visible .entry stop()\n{\n\ttrap;\n\tret;\n}\n",
    );
    ok!(cuLaunchKernel(
        function(m, c"stop"),
        1,
        1,
        1,
        1,
        1,
        1,
        0,
        null_mut(),
        null_mut(),
        null_mut()
    ));
    expect!(CUDA_ERROR_LAUNCH_FAILED, cuCtxSynchronize());
    expect!(CUDA_ERROR_LAUNCH_FAILED, cuCtxSynchronize());
    assert!(last_fault().contains("trap"), "{}", last_fault());
    ok!(cuCtxPushCurrent_v2(drv.primary));
    ok!(cuCtxSynchronize());
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    ok!(cuCtxDestroy_v2(c));
}
