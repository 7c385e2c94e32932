//! OpenCL-platform specifics: compiler logs, kernel lookup, signatures from
//! `clGetKernelArgInfo`, device limits, sub-buffers, build options, program binaries, profiling
//! timers and host callbacks in stream order.
//!
//! Each error test asserts the exact `Error` variant and the useful part of its message, then
//! shows that the executor (and a fresh stream) still works by running a correct operation.
//! Without a usable OpenCL platform every test prints a skip message and passes, unless
//! `STREAMEXEC_REQUIRE` names `opencl`, in which case it fails.
#![cfg(feature = "opencl")]

#[path = "../common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use streamexec::{
    BlockDim, DevicePtr, Error, HostMemory, KernelArgs, MultiKernelLoaderSpec, PlatformManager,
    SharedMemory, StreamExecutor, ThreadDim, TypedKernel,
};

use common::{POISON_F32, POISON_F32_BITS, POISON_U32, random_f32s, random_u32s, rng};

/// Device 0 of the OpenCL platform, or `None` (after a skip message) when it is unavailable.
/// Panics instead when `STREAMEXEC_REQUIRE` names `opencl`.
fn opencl(test: &str) -> Option<StreamExecutor> {
    let required = common::required_platforms().iter().any(|p| p == "opencl");
    match PlatformManager::platform_with_name("opencl").and_then(|p| p.executor_for_device(0)) {
        Ok(exec) => {
            assert_eq!(exec.platform_name(), "opencl");
            Some(exec)
        }
        Err(e) => {
            assert!(
                !required,
                "STREAMEXEC_REQUIRE names `opencl` but it is unavailable: {e}"
            );
            eprintln!("{test}: skipping, the opencl platform is unavailable: {e}");
            None
        }
    }
}

macro_rules! opencl_or_skip {
    ($test:expr) => {
        match opencl($test) {
            Some(exec) => exec,
            None => return,
        }
    };
}

/// A spec holding only OpenCL C text.
fn cl_spec(arity: usize, source: &str, name: &str) -> MultiKernelLoaderSpec {
    MultiKernelLoaderSpec::new(arity).add_opencl_text_in_memory(source, name)
}

fn load<A: KernelArgs>(exec: &StreamExecutor, source: &str, name: &str) -> TypedKernel<A> {
    exec.get_kernel(&cl_spec(A::ARITY, source, name))
        .unwrap_or_else(|e| panic!("loading `{name}` failed: {e}"))
}

/// Launches on a fresh stream and waits.
fn run<A: KernelArgs>(
    exec: &StreamExecutor,
    threads: impl Into<ThreadDim>,
    blocks: impl Into<BlockDim>,
    k: &TypedKernel<A>,
    args: A,
) -> streamexec::Result<()> {
    let mut s = exec.create_stream()?;
    s.then_launch(threads, blocks, k, args);
    s.block_host_until_done()
}

const AFFINE_CL: &str = "
__kernel void affine(__global uint* x, uint n, uint mul, uint add) {
    uint i = get_global_id(0);
    if (i < n) x[i] = x[i] * mul + add;
}";

type Affine = TypedKernel<(DevicePtr<u32>, u32, u32, u32)>;

fn affine_ref(x: &[u32], mul: u32, add: u32) -> Vec<u32> {
    x.iter()
        .map(|v| v.wrapping_mul(mul).wrapping_add(add))
        .collect()
}

/// Loads and runs a correct kernel on a fresh stream and checks its result: the executor is
/// still usable after whatever failed before.
fn assert_still_usable(exec: &StreamExecutor, r: &mut StdRng) {
    let k: Affine = load(exec, AFFINE_CL, "affine");
    let n = 1000usize;
    let data = random_u32s(r, n, u32::MAX);
    let ma = random_u32s(r, 2, u32::MAX);
    let dev = exec.copy_to_device(&data).unwrap();
    run(exec, 64, 16, &k, (dev.ptr(), n as u32, ma[0], ma[1])).unwrap();
    assert_eq!(
        exec.copy_to_vec(&dev).unwrap(),
        affine_ref(&data, ma[0], ma[1]),
        "a correct kernel after the failure"
    );
}

fn kernel_load_detail(e: &Error) -> &str {
    match e {
        Error::KernelLoad { detail, .. } => detail,
        other => panic!("expected Error::KernelLoad, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Compiler errors
// ---------------------------------------------------------------------------------------------

/// A temporary directory, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!(
            "streamexec-opencl-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Sums each work-group through a `__local` parameter.
const LOCAL_SUM_CL: &str = "
__kernel void local_sum(__global const uint* in, __global uint* out, __local uint* sh) {
    uint t = get_local_id(0);
    uint bd = get_local_size(0);
    sh[t] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t == 0) {
        uint s = 0;
        for (uint k = 0; k < bd; ++k) s += sh[k];
        out[get_group_id(0)] = s;
    }
}";

// After the helpers and the `opencl_or_skip!` macro, which the modules use.
mod launch_and_memory;
mod loading;
mod red_zones;
mod rpc;
