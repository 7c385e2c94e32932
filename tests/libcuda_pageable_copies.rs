//! Asynchronous copies with pageable host memory behave as NVIDIA's driver documents them (API
//! synchronization behavior): a host-to-device copy has read the host bytes when it returns,
//! and a copy into pageable host memory has completed when it returns, even while the stream
//! is still busy. cudarc's `memcpy_htod`/`clone_htod`/`clone_dtoh` rely on it (they hand
//! plain `Vec`s to `cuMemcpy*Async` and return without synchronizing).
//!
//! Runs with any libcuda on the library path (the CPU one from `scripts/build-libcuda.sh`);
//! skips with a note without one, and fails then when `STREAMEXEC_REQUIRE` names `cuda`.
#![cfg(feature = "cuda")]

#[path = "common/mod.rs"]
mod common;

use std::ffi::c_void;
use std::time::Duration;

use cudarc::driver::CudaContext;
use cudarc::driver::result::stream::launch_host_function;

use common::{POISON_U32, random_u32s, rng};

fn available(test: &str) -> bool {
    // SAFETY: only tries to dlopen the library names cudarc would use.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return true;
    }
    assert!(
        !common::required_platforms().iter().any(|r| r == "cuda"),
        "STREAMEXEC_REQUIRE names `cuda` but {test} found no libcuda"
    );
    eprintln!("{test}: skipped: no libcuda on the library path");
    false
}

/// A host function that keeps its stream busy for a while.
unsafe extern "C" fn busy(_: *mut c_void) {
    std::thread::sleep(Duration::from_millis(150));
}

#[test]
fn pageable_sources_are_staged_and_pageable_destinations_complete_before_return() {
    let test = "pageable_sources_are_staged_and_pageable_destinations_complete_before_return";
    if !available(test) {
        return;
    }
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let mut r = rng(test);
    let n = 4096;
    let want = random_u32s(&mut r, n, u32::MAX);
    let mut dev = stream.alloc_zeros::<u32>(n).unwrap();

    // The stream is busy when the copy is issued; the source is overwritten right after the
    // call: the device must get the bytes as they were at the call.
    // SAFETY: `busy` ignores its argument and calls no driver function.
    unsafe { launch_host_function(stream.cu_stream(), busy, std::ptr::null_mut()) }.unwrap();
    let mut host = want.clone();
    stream.memcpy_htod(&host, &mut dev).unwrap();
    host.fill(POISON_U32);
    drop(host);

    // Busy again; `clone_dtoh` returns a fresh Vec without synchronizing: it must already hold
    // the device's bytes.
    // SAFETY: as above.
    unsafe { launch_host_function(stream.cu_stream(), busy, std::ptr::null_mut()) }.unwrap();
    let got = stream.clone_dtoh(&dev).unwrap();
    assert_eq!(got, want);
}
