//! CUDA graphs (the explicit API) on the CPU libcuda, through cudarc's raw `driver::sys` calls
//! against the `libcuda.so` that `scripts/build-libcuda.sh` builds (found through
//! `LD_LIBRARY_PATH`): graphs of memset, kernel, memcpy, host, empty, event and child-graph
//! nodes, instantiated and launched, relaunched with new kernel parameters, dependency order,
//! and the error cases. The kernel is `axpby` of kernels/clients.cu (kernels/ptx/clients.O3.ptx);
//! results are compared with a plain f64 loop on random inputs, and outputs start poisoned
//! (NaN) so an element nobody wrote fails.
//!
//! Without a loadable libcuda the tests print a note and pass, unless `STREAMEXEC_REQUIRE`
//! names `cuda`: then they fail. The checks of documented behaviour are written to hold on
//! NVIDIA's driver as well; those of this library's own choices (messages, refusals, strict
//! checks) run only on the CPU libcuda.

#[macro_use]
mod support;

use std::ffi::{CString, c_char, c_void};
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::sys::{
    self, CUDA_HOST_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D, CUDA_MEMSET_NODE_PARAMS,
    CUcontext, CUdeviceptr, CUevent, CUfunction, CUgraph, CUgraphExec, CUgraphNode,
    CUgraphNodeType, CUmemorytype, CUmodule, CUresult, CUstream,
};
use rand::RngExt;
use rand::rngs::StdRng;
use support::{check, last_error_detail};

/// A test's driver: device 0's primary context current on this thread, `axpby` loaded.
struct Env {
    ctx: CUcontext,
    module: CUmodule,
    axpby: CUfunction,
    /// True on streamexec's CPU libcuda (not NVIDIA's driver).
    cpu: bool,
}

impl Drop for Env {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            ok!(cuModuleUnload(self.module));
        }
    }
}

/// The driver for `test`, or `None` (after a note) where no libcuda loads and
/// `STREAMEXEC_REQUIRE` does not name `cuda`.
fn env(test: &str) -> Option<Env> {
    if !support::libcuda_loads(test) {
        return None;
    }
    ok!(cuInit(0));
    let mut dev = 0;
    ok!(cuDeviceGet(&mut dev, 0));
    let mut ctx = null_mut();
    ok!(cuDevicePrimaryCtxRetain(&mut ctx, dev));
    ok!(cuCtxSetCurrent(ctx));
    let mut name = [0 as c_char; 256];
    ok!(cuDeviceGetName(name.as_mut_ptr(), 256, dev));
    // SAFETY: cuDeviceGetName wrote a NUL-terminated name.
    let cpu = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .starts_with("streamexec");
    let (module, axpby) = load_axpby();
    Some(Env {
        ctx,
        module,
        axpby,
        cpu,
    })
}

/// kernels/clients.cu at -O3, loaded in the current context, and its `axpby`.
fn load_axpby() -> (CUmodule, CUfunction) {
    let ptx = CString::new(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kernels/ptx/clients.O3.ptx"
    )))
    .unwrap();
    let mut module = null_mut();
    ok!(cuModuleLoadData(&mut module, ptx.as_ptr().cast()));
    let mut f = null_mut();
    ok!(cuModuleGetFunction(&mut f, module, c"axpby".as_ptr()));
    (module, f)
}

fn alloc(bytes: usize) -> CUdeviceptr {
    let mut p = 0;
    ok!(cuMemAlloc_v2(&mut p, bytes));
    p
}

fn upload(dst: CUdeviceptr, v: &[f32]) {
    ok!(cuMemcpyHtoD_v2(dst, v.as_ptr().cast(), v.len() * 4));
}

fn download(src: CUdeviceptr, n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n];
    ok!(cuMemcpyDtoH_v2(v.as_mut_ptr().cast(), src, n * 4));
    v
}

fn random_f32s(rng: &mut StdRng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-100.0f32..100.0)).collect()
}

/// f32 arithmetic of a few operations against f64: a few ulps of the largest term.
fn f32_tol(scale: f64) -> f64 {
    scale * 4.0 * f64::from(f32::EPSILON) + 1e-30
}

/// Fails unless `got` is `want` within `tol(i)`; NaN (poison) always fails.
#[track_caller]
fn check_close(what: &str, got: &[f32], want: &[f64], tol: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= tol(i),
            "{what}: element {i} is {g}, the reference says {w} (tolerance {})",
            tol(i)
        );
    }
}

/// `axpby(n, a, x, b, y)`'s arguments: `y[i] = a * x[i] + b * y[i]`.
#[derive(Clone, Copy, Debug)]
struct Axpby {
    n: u32,
    a: f32,
    x: CUdeviceptr,
    b: f32,
    y: CUdeviceptr,
}

impl Axpby {
    /// One pointer per parameter, for `kernelParams`.
    fn ptrs(&mut self) -> [*mut c_void; 5] {
        [
            (&raw mut self.n).cast(),
            (&raw mut self.a).cast(),
            (&raw mut self.x).cast(),
            (&raw mut self.b).cast(),
            (&raw mut self.y).cast(),
        ]
    }

    /// The packed `.param` buffer (u32 at 0, f32 at 4, pointer at 8, f32 at 16, pointer at 24).
    fn packed(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(&self.n.to_ne_bytes());
        b[4..8].copy_from_slice(&self.a.to_ne_bytes());
        b[8..16].copy_from_slice(&self.x.to_ne_bytes());
        b[16..20].copy_from_slice(&self.b.to_ne_bytes());
        b[24..32].copy_from_slice(&self.y.to_ne_bytes());
        b
    }

    /// The f64 reference of `y` after the launch, from `x` and `y`'s contents before.
    fn reference(&self, x: &[f32], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let (a, b) = (f64::from(self.a), f64::from(self.b));
        let want = (0..x.len())
            .map(|i| a * f64::from(x[i]) + b * y[i])
            .collect();
        let tol = (0..x.len())
            .map(|i| f32_tol((a * f64::from(x[i])).abs() + (b * y[i]).abs()))
            .collect();
        (want, tol)
    }
}

/// Overwrites the argument values behind `ptrs` (NaN scalars, NULL pointers), as a caller may
/// once the driver has copied them.
fn scribble(ptrs: &[*mut c_void; 5]) {
    // SAFETY: `ptrs` point into a live `Axpby` (u32, f32, u64, f32, u64).
    unsafe {
        *ptrs[1].cast::<f32>() = f32::NAN;
        *ptrs[2].cast::<u64>() = 0;
        *ptrs[3].cast::<f32>() = f32::NAN;
        *ptrs[4].cast::<u64>() = 0;
    }
}

/// A `CU_LAUNCH_PARAM_END`-terminated `extra` list naming `buf` and its `size`.
fn extra_list(buf: &mut [u8], size: &mut usize) -> [*mut c_void; 5] {
    let key = std::ptr::without_provenance_mut::<c_void>;
    [
        key(1), // CU_LAUNCH_PARAM_BUFFER_POINTER
        buf.as_mut_ptr().cast(),
        key(2), // CU_LAUNCH_PARAM_BUFFER_SIZE
        (size as *mut usize).cast(),
        key(0), // CU_LAUNCH_PARAM_END
    ]
}

/// Kernel node parameters for `axpby` over `n` elements (blocks of 128).
fn kernel_params(
    f: CUfunction,
    n: u32,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUDA_KERNEL_NODE_PARAMS {
    CUDA_KERNEL_NODE_PARAMS {
        func: f,
        gridDimX: n.div_ceil(128),
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: 128,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: params,
        extra,
        kern: null_mut(),
        ctx: null_mut(),
    }
}

/// A 2-D copy of `width` bytes × `height` rows between linear memory.
#[allow(clippy::too_many_arguments)]
fn copy_2d(
    src_type: CUmemorytype,
    src: u64,
    src_pitch: usize,
    dst_type: CUmemorytype,
    dst: u64,
    dst_pitch: usize,
    width: usize,
    height: usize,
) -> CUDA_MEMCPY3D {
    let host = |t: CUmemorytype, _: u64| t == CUmemorytype::CU_MEMORYTYPE_HOST;
    CUDA_MEMCPY3D {
        srcXInBytes: 0,
        srcY: 0,
        srcZ: 0,
        srcLOD: 0,
        srcMemoryType: src_type,
        srcHost: if host(src_type, src) {
            src as *const c_void
        } else {
            null()
        },
        srcDevice: if host(src_type, src) { 0 } else { src },
        srcArray: null_mut(),
        reserved0: null_mut(),
        srcPitch: src_pitch,
        srcHeight: height,
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: dst_type,
        dstHost: if host(dst_type, dst) {
            dst as *mut c_void
        } else {
            null_mut()
        },
        dstDevice: if host(dst_type, dst) { 0 } else { dst },
        dstArray: null_mut(),
        reserved1: null_mut(),
        dstPitch: dst_pitch,
        dstHeight: height,
        WidthInBytes: width,
        Height: height,
        Depth: 1,
    }
}

fn memset_params(dst: CUdeviceptr, value: u32, elem: u32, width: usize) -> CUDA_MEMSET_NODE_PARAMS {
    CUDA_MEMSET_NODE_PARAMS {
        dst,
        pitch: 0,
        value,
        elementSize: elem,
        width,
        height: 1,
    }
}

fn host_params(f: unsafe extern "C" fn(*mut c_void), data: *const c_void) -> CUDA_HOST_NODE_PARAMS {
    CUDA_HOST_NODE_PARAMS {
        fn_: Some(f),
        userData: data.cast_mut(),
    }
}

fn create_graph() -> CUgraph {
    let mut g = null_mut();
    ok!(cuGraphCreate(&mut g, 0));
    g
}

fn instantiate(g: CUgraph) -> CUgraphExec {
    let mut x = null_mut();
    ok!(cuGraphInstantiateWithFlags(&mut x, g, 0));
    x
}

fn current_ctx() -> CUcontext {
    let mut c = null_mut();
    ok!(cuCtxGetCurrent(&mut c));
    c
}

fn node_type(n: CUgraphNode) -> CUgraphNodeType {
    let mut t = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
    ok!(cuGraphNodeGetType(n, &mut t));
    t
}

/// A host function that holds its stream until the `AtomicBool` behind `data` is set; `data`
/// is an `Arc::into_raw` whose reference the function takes over.
unsafe extern "C" fn hold_until_open(data: *mut c_void) {
    // SAFETY: `data` came from `Arc::into_raw` and is handed to this one call.
    let gate = unsafe { Arc::from_raw(data.cast::<AtomicBool>().cast_const()) };
    while !gate.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Holds `stream` (a host function waiting) until the returned gate is set.
fn hold(stream: CUstream) -> Arc<AtomicBool> {
    let gate = Arc::new(AtomicBool::new(false));
    let held = Arc::into_raw(gate.clone()).cast_mut().cast();
    // SAFETY: the function takes over one reference to the gate and makes no driver calls.
    let r = unsafe { sys::cuLaunchHostFunc(stream, Some(hold_until_open), held) };
    if r != CUresult::CUDA_SUCCESS {
        // SAFETY: the failed launch did not take the reference over.
        drop(unsafe { Arc::from_raw(held.cast::<AtomicBool>().cast_const()) });
        panic!("cuLaunchHostFunc: {r:?}");
    }
    gate
}

/// What the snapshot host node reads: a pinned host buffer, and every copy of it taken.
struct Snapshots {
    host: *mut f32,
    len: usize,
    taken: Mutex<Vec<Vec<f32>>>,
}

/// Host node: keeps a copy of the buffer and poisons it (NaN) for the next launch.
unsafe extern "C" fn snapshot(data: *mut c_void) {
    // SAFETY: `data` is a `Snapshots` that outlives every launch (the test synchronizes).
    let s = unsafe { &*data.cast::<Snapshots>() };
    // SAFETY: `host` holds `len` floats (pinned, from cuMemAllocHost).
    let h = unsafe { std::slice::from_raw_parts_mut(s.host, s.len) };
    s.taken.lock().unwrap().push(h.to_vec());
    h.fill(f32::NAN);
}

/// memset → kernel → 2-D device-to-device copy → device-to-host copy → host node, launched
/// three times (the third on another stream) while the first stream is held, with
/// `cuGraphExecKernelNodeSetParams` changing a scalar and a pointer between launches: each
/// launch sees its own parameters, launches of one executable graph run in order, and edits
/// of the graph after instantiation change nothing.
#[test]
fn pipeline_relaunched_with_new_kernel_params() {
    let Some(env) = env("pipeline_relaunched_with_new_kernel_params") else {
        return;
    };
    let mut rng = support::rng("pipeline_relaunched_with_new_kernel_params");
    let (w, h) = (rng.random_range(40..80usize), rng.random_range(20..40usize));
    let pad = rng.random_range(1..5usize);
    let (n, zw) = (w * h, w + pad);
    let (x1, x2) = (random_f32s(&mut rng, n), random_f32s(&mut rng, n));
    let (x1_d, x2_d, y_d, z_d) = (alloc(n * 4), alloc(n * 4), alloc(n * 4), alloc(h * zw * 4));
    upload(x1_d, &x1);
    upload(x2_d, &x2);
    upload(y_d, &vec![f32::NAN; n]);
    upload(z_d, &vec![f32::NAN; h * zw]);
    let mut host: *mut c_void = null_mut();
    ok!(cuMemAllocHost_v2(&mut host, h * zw * 4));
    let snaps = Snapshots {
        host: host.cast(),
        len: h * zw,
        taken: Mutex::new(Vec::new()),
    };
    // SAFETY: `host` holds `h * zw` floats.
    unsafe { std::slice::from_raw_parts_mut(snaps.host, snaps.len) }.fill(f32::NAN);
    let c0 = rng.random_range(-10.0f32..10.0);

    let g = create_graph();
    let ctx = current_ctx();
    let mut memset = null_mut();
    let p = memset_params(y_d, c0.to_bits(), 4, n);
    ok!(cuGraphAddMemsetNode(&mut memset, g, null(), 0, &p, ctx));
    let mut args = Axpby {
        n: n as u32,
        a: rng.random_range(-4.0f32..4.0),
        x: x1_d,
        b: rng.random_range(-4.0f32..4.0),
        y: y_d,
    };
    let first = args;
    let mut ptrs = args.ptrs();
    let p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), null_mut());
    let mut kernel = null_mut();
    ok!(cuGraphAddKernelNode_v2(&mut kernel, g, &memset, 1, &p));
    // The values were copied when the node was added.
    scribble(&ptrs);
    let p = copy_2d(
        CUmemorytype::CU_MEMORYTYPE_DEVICE,
        y_d,
        w * 4,
        CUmemorytype::CU_MEMORYTYPE_DEVICE,
        z_d,
        zw * 4,
        w * 4,
        h,
    );
    let mut d2d = null_mut();
    ok!(cuGraphAddMemcpyNode(&mut d2d, g, &kernel, 1, &p, ctx));
    let p = copy_2d(
        CUmemorytype::CU_MEMORYTYPE_DEVICE,
        z_d,
        0,
        CUmemorytype::CU_MEMORYTYPE_HOST,
        host as u64,
        0,
        h * zw * 4,
        1,
    );
    let mut d2h = null_mut();
    ok!(cuGraphAddMemcpyNode(&mut d2h, g, &d2d, 1, &p, ctx));
    let p = host_params(snapshot, (&raw const snaps).cast());
    let mut host_node = null_mut();
    ok!(cuGraphAddHostNode(&mut host_node, g, &d2h, 1, &p));

    use CUgraphNodeType as T;
    let mut nodes = [null_mut(); 7];
    let mut count = nodes.len();
    ok!(cuGraphGetNodes(g, nodes.as_mut_ptr(), &mut count));
    assert_eq!(count, 5);
    assert_eq!(nodes[..5], [memset, kernel, d2d, d2h, host_node]);
    assert!(
        nodes[5].is_null() && nodes[6].is_null(),
        "unused entries are NULL"
    );
    let types: Vec<T> = nodes[..5].iter().map(|&n| node_type(n)).collect();
    assert_eq!(
        types,
        [
            T::CU_GRAPH_NODE_TYPE_MEMSET,
            T::CU_GRAPH_NODE_TYPE_KERNEL,
            T::CU_GRAPH_NODE_TYPE_MEMCPY,
            T::CU_GRAPH_NODE_TYPE_MEMCPY,
            T::CU_GRAPH_NODE_TYPE_HOST
        ]
    );

    // The node keeps its own copies of the argument values.
    // SAFETY: all-zero is a valid CUDA_KERNEL_NODE_PARAMS (integers and pointers).
    let mut got: CUDA_KERNEL_NODE_PARAMS = unsafe { std::mem::zeroed() };
    ok!(cuGraphKernelNodeGetParams_v2(kernel, &mut got));
    assert_eq!(
        (got.func, got.gridDimX, got.blockDimX, got.sharedMemBytes),
        (env.axpby, (n as u32).div_ceil(128), 128, 0)
    );
    // SAFETY: `kernelParams` holds one pointer per parameter of axpby, owned by the node.
    let (a, x) = unsafe {
        (
            *(*got.kernelParams.add(1)).cast::<f32>(),
            *(*got.kernelParams.add(2)).cast::<u64>(),
        )
    };
    assert_eq!((a, x), (first.a, first.x));

    let exec = instantiate(g);
    // Edits after instantiation do not reach the executable graph: x1 zeroed first would
    // change every result.
    let p = memset_params(x1_d, 0, 4, n);
    let mut late = null_mut();
    ok!(cuGraphAddMemsetNode(&mut late, g, null(), 0, &p, ctx));

    let (mut s1, mut s2) = (null_mut(), null_mut());
    // Non-blocking (1), so the held stream does not hold the other tests' legacy stream.
    ok!(cuStreamCreate(&mut s1, 1));
    ok!(cuStreamCreate(&mut s2, 1));
    ok!(cuGraphUpload(exec, s1));
    let mut capturing = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE;
    ok!(cuStreamIsCapturing(s1, &mut capturing));
    assert_eq!(
        capturing,
        sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
    );
    let gate = hold(s1);
    let mut launched = vec![first];
    ok!(cuGraphLaunch(exec, s1));
    // Launch 2: a new scalar and a new pointer.
    let mut second = Axpby {
        a: rng.random_range(-4.0f32..4.0),
        x: x2_d,
        ..first
    };
    let mut ptrs = second.ptrs();
    let p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), null_mut());
    ok!(cuGraphExecKernelNodeSetParams_v2(exec, kernel, &p));
    launched.push(second);
    scribble(&ptrs); // copied by SetParams
    ok!(cuGraphLaunch(exec, s1));
    // Launch 3, on another (non-blocking) stream, through `extra`: it still runs after launch 2.
    let third = Axpby {
        a: rng.random_range(-4.0f32..4.0),
        b: rng.random_range(-4.0f32..4.0),
        x: x1_d,
        ..first
    };
    let mut buf = third.packed();
    let mut size = buf.len();
    let mut extra = extra_list(&mut buf, &mut size);
    let p = kernel_params(env.axpby, n as u32, null_mut(), extra.as_mut_ptr());
    ok!(cuGraphExecKernelNodeSetParams_v2(exec, kernel, &p));
    launched.push(third);
    ok!(cuGraphLaunch(exec, s2));
    // Nothing has run yet; the executable graph and the graph may go while launches are queued.
    assert!(snaps.taken.lock().unwrap().is_empty(), "the stream is held");
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g));
    gate.store(true, Ordering::Release);
    ok!(cuStreamSynchronize(s2));
    ok!(cuStreamSynchronize(s1));

    let taken = snaps.taken.lock().unwrap().clone();
    assert_eq!(taken.len(), 3, "one snapshot per launch");
    for (k, (got, args)) in taken.iter().zip(&launched).enumerate() {
        let x = if args.x == x1_d { &x1 } else { &x2 };
        let (want, tol) = args.reference(x, &vec![f64::from(c0); n]);
        for r in 0..h {
            let row = &got[r * zw..(r + 1) * zw];
            check_close(
                &format!("launch {} ({args:?}), row {r}", k + 1),
                &row[..w],
                &want[r * w..(r + 1) * w],
                |i| tol[r * w + i],
            );
            assert!(
                row[w..].iter().all(|v| v.is_nan()),
                "launch {}: row {r}'s padding was written",
                k + 1
            );
        }
    }
    // The last launch's y is on the device as well.
    let (want, tol) = third.reference(&x1, &vec![f64::from(c0); n]);
    check_close("y after launch 3", &download(y_d, n), &want, |i| tol[i]);

    ok!(cuStreamDestroy_v2(s1));
    ok!(cuStreamDestroy_v2(s2));
    ok!(cuMemFreeHost(host));
    for p in [x1_d, x2_d, y_d, z_d] {
        ok!(cuMemFree_v2(p));
    }
    drop(env);
}

/// Host node: appends the byte behind `data` to [`ORDER`].
unsafe extern "C" fn log_order(data: *mut c_void) {
    ORDER.lock().unwrap().push(data as usize as u8);
}

static ORDER: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// A diamond A → B, A → C, (B, C) → D: of kernels on data (D adds what B and C computed from
/// what A set), and of host nodes logging their order, added as A, C, B, D.
#[test]
fn diamond_dependencies_are_honoured() {
    let Some(env) = env("diamond_dependencies_are_honoured") else {
        return;
    };
    let mut rng = support::rng("diamond_dependencies_are_honoured");
    let n = rng.random_range(1000..3000usize);
    let ctx = current_ctx();
    let (y1, y2) = (random_f32s(&mut rng, n), random_f32s(&mut rng, n));
    let (x_d, y1_d, y2_d) = (alloc(n * 4), alloc(n * 4), alloc(n * 4));
    upload(x_d, &vec![f32::NAN; n]);
    upload(y1_d, &y1);
    upload(y2_d, &y2);
    let v = rng.random_range(-4.0f32..4.0);

    let g = create_graph();
    let mut a = null_mut();
    ok!(cuGraphAddMemsetNode(
        &mut a,
        g,
        null(),
        0,
        &memset_params(x_d, v.to_bits(), 4, n),
        ctx
    ));
    let add = |args: &mut Axpby, deps: &[CUgraphNode]| {
        let mut ptrs = args.ptrs();
        let p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), null_mut());
        let mut node = null_mut();
        ok!(cuGraphAddKernelNode_v2(
            &mut node,
            g,
            deps.as_ptr(),
            deps.len(),
            &p
        ));
        node
    };
    let mut c_args = Axpby {
        n: n as u32,
        a: rng.random_range(-4.0f32..4.0),
        x: x_d,
        b: rng.random_range(-4.0f32..4.0),
        y: y2_d,
    };
    let c = add(&mut c_args, &[a]);
    let mut b_args = Axpby {
        a: rng.random_range(-4.0f32..4.0),
        b: rng.random_range(-4.0f32..4.0),
        y: y1_d,
        ..c_args
    };
    let b = add(&mut b_args, &[a]);
    let mut d_args = Axpby {
        a: 1.0,
        x: y2_d,
        b: 1.0,
        ..b_args
    };
    let d = add(&mut d_args, &[b, c]);
    let mut roots = [null_mut(); 2];
    let mut count = 2;
    ok!(cuGraphGetRootNodes(g, roots.as_mut_ptr(), &mut count));
    assert_eq!((count, roots[0]), (1, a));
    let mut deps = [null_mut(); 2];
    let mut count = 0;
    ok!(cuGraphNodeGetDependencies(d, null_mut(), &mut count));
    assert_eq!(count, 2);
    ok!(cuGraphNodeGetDependencies(d, deps.as_mut_ptr(), &mut count));
    assert_eq!(deps, [b, c]);
    let exec = instantiate(g);
    ok!(cuGraphLaunch(exec, null_mut()));
    ok!(cuCtxSynchronize());
    let y1 = |i: usize| f64::from(y1[i]);
    let y2 = |i: usize| f64::from(y2[i]);
    let (vf, ba, bb, ca, cb) = (
        f64::from(v),
        f64::from(b_args.a),
        f64::from(b_args.b),
        f64::from(c_args.a),
        f64::from(c_args.b),
    );
    let want: Vec<f64> = (0..n)
        .map(|i| (ba * vf + bb * y1(i)) + (ca * vf + cb * y2(i)))
        .collect();
    check_close("diamond: y1", &download(y1_d, n), &want, |i| {
        f32_tol((ba * vf).abs() + (bb * y1(i)).abs() + (ca * vf).abs() + (cb * y2(i)).abs()) * 2.0
    });
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g));

    // The order of host nodes, over two launches.
    let g = create_graph();
    let node = |id: u8, deps: &[CUgraphNode]| {
        let mut h = null_mut();
        let p = host_params(log_order, id as usize as *const c_void);
        ok!(cuGraphAddHostNode(&mut h, g, deps.as_ptr(), deps.len(), &p));
        h
    };
    let ha = node(b'A', &[]);
    let hc = node(b'C', &[ha]);
    let hb = node(b'B', &[ha]);
    node(b'D', &[hb, hc]);
    let exec = instantiate(g);
    ORDER.lock().unwrap().clear();
    ok!(cuGraphLaunch(exec, null_mut()));
    ok!(cuGraphLaunch(exec, null_mut()));
    ok!(cuCtxSynchronize());
    let order = ORDER.lock().unwrap().clone();
    assert_eq!(order.len(), 8, "{order:?}");
    for run in order.chunks(4) {
        assert_eq!((run[0], run[3]), (b'A', b'D'), "{order:?}");
        let mut mid = [run[1], run[2]];
        mid.sort_unstable();
        assert_eq!(mid, [b'B', b'C'], "{order:?}");
    }
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g));
    for p in [x_d, y1_d, y2_d] {
        ok!(cuMemFree_v2(p));
    }
    drop(env);
}

/// Host node: sets the `AtomicBool` behind `data`.
unsafe extern "C" fn set_flag(data: *mut c_void) {
    // SAFETY: `data` is an `AtomicBool` that outlives the launch (the test synchronizes).
    unsafe { &*data.cast::<AtomicBool>() }.store(true, Ordering::Release);
}

/// A child graph (host-to-device copy from pageable memory → kernel) in a parent (empty →
/// child → device-to-host copy → event record): the child is cloned when added, so nodes added
/// to it later, or destroying it, change nothing. Then an event wait node holding a graph on
/// one stream until a record on another.
#[test]
fn child_graph_clone_and_event_nodes() {
    let Some(env) = env("child_graph_clone_and_event_nodes") else {
        return;
    };
    let mut rng = support::rng("child_graph_clone_and_event_nodes");
    let n = rng.random_range(1000..3000usize);
    let ctx = current_ctx();
    let (x, y0) = (random_f32s(&mut rng, n), random_f32s(&mut rng, n));
    let (x_d, y_d) = (alloc(n * 4), alloc(n * 4));
    upload(x_d, &vec![f32::NAN; n]);
    upload(y_d, &y0);
    let mut out = vec![f32::NAN; n];

    let child = create_graph();
    let mut h2d = null_mut();
    let p = copy_2d(
        CUmemorytype::CU_MEMORYTYPE_HOST,
        x.as_ptr() as u64,
        0,
        CUmemorytype::CU_MEMORYTYPE_DEVICE,
        x_d,
        0,
        n * 4,
        1,
    );
    ok!(cuGraphAddMemcpyNode(&mut h2d, child, null(), 0, &p, ctx));
    let mut args = Axpby {
        n: n as u32,
        a: rng.random_range(-4.0f32..4.0),
        x: x_d,
        b: rng.random_range(-4.0f32..4.0),
        y: y_d,
    };
    let mut ptrs = args.ptrs();
    let p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), null_mut());
    let mut k = null_mut();
    ok!(cuGraphAddKernelNode_v2(&mut k, child, &h2d, 1, &p));

    let parent = create_graph();
    let mut empty = null_mut();
    ok!(cuGraphAddEmptyNode(&mut empty, parent, null(), 0));
    let mut child_node = null_mut();
    ok!(cuGraphAddChildGraphNode(
        &mut child_node,
        parent,
        &empty,
        1,
        child
    ));
    assert_eq!(
        node_type(child_node),
        CUgraphNodeType::CU_GRAPH_NODE_TYPE_GRAPH
    );
    // Added to the child after the clone: would poison y.
    let mut late = null_mut();
    let p = memset_params(y_d, f32::NAN.to_bits(), 4, n);
    ok!(cuGraphAddMemsetNode(&mut late, child, &k, 1, &p, ctx));
    ok!(cuGraphDestroy(child));
    let p = copy_2d(
        CUmemorytype::CU_MEMORYTYPE_UNIFIED,
        y_d,
        0,
        CUmemorytype::CU_MEMORYTYPE_HOST,
        out.as_mut_ptr() as u64,
        0,
        n * 4,
        1,
    );
    let mut d2h = null_mut();
    ok!(cuGraphAddMemcpyNode(
        &mut d2h,
        parent,
        &child_node,
        1,
        &p,
        ctx
    ));
    let mut ev: CUevent = null_mut();
    ok!(cuEventCreate(&mut ev, 0));
    let mut rec = null_mut();
    ok!(cuGraphAddEventRecordNode(&mut rec, parent, &d2h, 1, ev));
    let exec = instantiate(parent);
    let mut s = null_mut();
    ok!(cuStreamCreate(&mut s, 1));
    ok!(cuGraphLaunch(exec, s));
    ok!(cuEventSynchronize(ev));
    let (want, tol) = args.reference(&x, &y0.iter().map(|&v| f64::from(v)).collect::<Vec<_>>());
    check_close("child graph: y", &out, &want, |i| tol[i]);
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(parent));

    // An event wait node: the graph on `s` waits for a record on `s1`, held by a gate.
    let mut s1 = null_mut();
    ok!(cuStreamCreate(&mut s1, 1));
    let gate = hold(s1);
    let mut ev2: CUevent = null_mut();
    ok!(cuEventCreate(&mut ev2, 0));
    ok!(cuEventRecord(ev2, s1));
    let g = create_graph();
    let mut wait = null_mut();
    ok!(cuGraphAddEventWaitNode(&mut wait, g, null(), 0, ev2));
    let flag = AtomicBool::new(false);
    let mut set = null_mut();
    let p = host_params(set_flag, (&raw const flag).cast());
    ok!(cuGraphAddHostNode(&mut set, g, &wait, 1, &p));
    let exec = instantiate(g);
    ok!(cuGraphLaunch(exec, s));
    std::thread::sleep(Duration::from_millis(30));
    assert!(
        !flag.load(Ordering::Acquire),
        "the host node ran before the event it waits for"
    );
    gate.store(true, Ordering::Release);
    ok!(cuStreamSynchronize(s));
    assert!(flag.load(Ordering::Acquire));
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g));
    for e in [ev, ev2] {
        ok!(cuEventDestroy_v2(e));
    }
    for s in [s, s1] {
        ok!(cuStreamDestroy_v2(s));
    }
    for p in [x_d, y_d] {
        ok!(cuMemFree_v2(p));
    }
    drop(env);
}

/// `cuGraphAddKernelNode` (the CUDA 11 name, `CUDA_KERNEL_NODE_PARAMS_v1`) as NVIDIA's driver
/// exports it next to `_v2`.
type AddKernelNodeV1 = unsafe extern "C" fn(
    *mut CUgraphNode,
    CUgraph,
    *const CUgraphNode,
    usize,
    *const sys::CUDA_KERNEL_NODE_PARAMS_v1,
) -> CUresult;

/// `cuGraphExecMemsetNodeSetParams` and `cuGraphExecMemcpyNodeSetParams` (1-D nodes, new
/// values and pointers for later launches), `cuGraphInstantiateWithParams`, and the CUDA 11
/// `cuGraphAddKernelNode`.
#[test]
fn memset_and_memcpy_updates_and_other_entry_points() {
    let Some(env) = env("memset_and_memcpy_updates_and_other_entry_points") else {
        return;
    };
    let mut rng = support::rng("memset_and_memcpy_updates_and_other_entry_points");
    let n = rng.random_range(500..1500usize);
    let ctx = current_ctx();
    let (y1_d, y2_d, out1_d, out2_d) = (alloc(n * 4), alloc(n * 4), alloc(n * 4), alloc(n * 4));
    for p in [y1_d, y2_d, out1_d, out2_d] {
        upload(p, &vec![f32::NAN; n]);
    }
    let (v1, v2) = (
        rng.random_range(-9.0f32..9.0),
        rng.random_range(-9.0f32..9.0),
    );
    let g = create_graph();
    let mut m = null_mut();
    ok!(cuGraphAddMemsetNode(
        &mut m,
        g,
        null(),
        0,
        &memset_params(y1_d, v1.to_bits(), 4, n),
        ctx
    ));
    let copy = |src, dst| {
        copy_2d(
            CUmemorytype::CU_MEMORYTYPE_DEVICE,
            src,
            0,
            CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dst,
            0,
            n * 4,
            1,
        )
    };
    let mut c = null_mut();
    ok!(cuGraphAddMemcpyNode(
        &mut c,
        g,
        &m,
        1,
        &copy(y1_d, out1_d),
        ctx
    ));
    // The CUDA 11 kernel node entry point: out1 = 2 * y1 + 0.5 * out1, after the copy.
    // SAFETY: the symbol has this signature (cuda.h declares it with the v1 struct).
    let add_v1 = unsafe { sys::culib().get::<AddKernelNodeV1>(b"cuGraphAddKernelNode\0") }
        .map(|f| *f)
        .expect("libcuda exports cuGraphAddKernelNode");
    let mut args = Axpby {
        n: n as u32,
        a: 2.0,
        x: y1_d,
        b: 0.5,
        y: out1_d,
    };
    let mut ptrs = args.ptrs();
    let v2p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), null_mut());
    let p = sys::CUDA_KERNEL_NODE_PARAMS_v1 {
        func: v2p.func,
        gridDimX: v2p.gridDimX,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: v2p.blockDimX,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: 0,
        kernelParams: v2p.kernelParams,
        extra: null_mut(),
    };
    let mut k = null_mut();
    // SAFETY: valid pointers, `kernelParams` one per parameter of axpby.
    let r = unsafe { add_v1(&mut k, g, &c, 1, &p) };
    check(r, CUresult::CUDA_SUCCESS, "cuGraphAddKernelNode (v1)");
    assert_eq!(node_type(k), CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL);

    // cuGraphInstantiateWithParams, uploading on a stream.
    let mut s = null_mut();
    ok!(cuStreamCreate(&mut s, 1));
    let mut ip = sys::CUDA_GRAPH_INSTANTIATE_PARAMS {
        flags: 2, // CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
        hUploadStream: s,
        hErrNode_out: null_mut(),
        result_out: sys::CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_ERROR,
    };
    let mut exec = null_mut();
    ok!(cuGraphInstantiateWithParams(&mut exec, g, &mut ip));
    assert_eq!(
        ip.result_out,
        sys::CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_SUCCESS
    );
    ok!(cuGraphLaunch(exec, s));
    ok!(cuStreamSynchronize(s));
    let want = 2.0 * f64::from(v1) + 0.5 * f64::from(v1);
    check_close(
        "launch 1: out1",
        &download(out1_d, n),
        &vec![want; n],
        |_| f32_tol(want.abs() * 2.0),
    );

    // Launch 2: the memset sets y2 to v2, the copy goes y2 → out2 (the kernel still reads y1
    // and writes out1, from v2 now in neither: it sees y1 = v1, out1 = 2.5 v1).
    ok!(cuGraphExecMemsetNodeSetParams(
        exec,
        m,
        &memset_params(y2_d, v2.to_bits(), 4, n),
        ctx
    ));
    ok!(cuGraphExecMemcpyNodeSetParams(
        exec,
        c,
        &copy(y2_d, out2_d),
        ctx
    ));
    ok!(cuGraphLaunch(exec, s));
    ok!(cuStreamSynchronize(s));
    assert!(download(y2_d, n).iter().all(|&v| v == v2), "y2 = {v2}");
    assert!(download(out2_d, n).iter().all(|&v| v == v2), "out2 = {v2}");
    let want2 = 2.0 * f64::from(v1) + 0.5 * want;
    check_close(
        "launch 2: out1",
        &download(out1_d, n),
        &vec![want2; n],
        |_| f32_tol(want2.abs() * 2.0),
    );
    // Updates of the wrong node type; the graph's nodes are unchanged.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphExecMemsetNodeSetParams(exec, c, &memset_params(y2_d, 0, 4, n), ctx)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphExecMemcpyNodeSetParams(exec, k, &copy(y2_d, out2_d), ctx)
    );
    if env.cpu {
        // A 2-D memset may not replace a 1-D one.
        let mut p2 = memset_params(y2_d, 0, 4, n / 2);
        (p2.height, p2.pitch) = (2, n / 2 * 4);
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuGraphExecMemsetNodeSetParams(exec, m, &p2, ctx)
        );
        let mut bad = sys::CUDA_GRAPH_INSTANTIATE_PARAMS { flags: 4, ..ip };
        let mut x2 = null_mut();
        expect!(
            CUDA_ERROR_NOT_SUPPORTED,
            cuGraphInstantiateWithParams(&mut x2, g, &mut bad)
        );
        assert_ne!(
            bad.result_out,
            sys::CUgraphInstantiateResult::CUDA_GRAPH_INSTANTIATE_SUCCESS
        );
    }
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g));
    ok!(cuStreamDestroy_v2(s));
    for p in [y1_d, y2_d, out1_d, out2_d] {
        ok!(cuMemFree_v2(p));
    }
    drop(env);
}

/// Host node: a driver call, whose result goes into the `AtomicU32` behind `data`.
unsafe extern "C" fn call_driver(data: *mut c_void) {
    // SAFETY: a driver call with no pointers.
    let r = unsafe { sys::cuCtxSynchronize() };
    // SAFETY: `data` is an `AtomicU32` that outlives the launch (the test synchronizes).
    unsafe { &*data.cast::<AtomicU32>() }.store(r as u32, Ordering::Release);
}

/// What the driver API documents as errors, and this library's refusals; afterwards the
/// graphs still work.
#[test]
fn errors_are_reported() {
    let Some(env) = env("errors_are_reported") else {
        return;
    };
    let n = 256usize;
    let ctx = current_ctx();
    let (x_d, y_d) = (alloc(n * 4), alloc(n * 4));
    upload(x_d, &vec![1.0; n]);
    upload(y_d, &vec![2.0; n]);

    expect!(CUDA_ERROR_INVALID_VALUE, cuGraphCreate(null_mut(), 0));
    let mut g = null_mut();
    expect!(CUDA_ERROR_INVALID_VALUE, cuGraphCreate(&mut g, 1));
    let (g1, g2) = (create_graph(), create_graph());
    let mut e1 = null_mut();
    ok!(cuGraphAddEmptyNode(&mut e1, g1, null(), 0));
    let mut e2 = null_mut();
    // A node of another graph as a dependency.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddEmptyNode(&mut e2, g2, &e1, 1)
    );
    // dependencies NULL with a count.
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddEmptyNode(&mut e2, g2, null(), 1)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddEmptyNode(null_mut(), g2, null(), 0)
    );

    // Kernel nodes: `extra` of the wrong size, kernelParams and extra both, NULL params.
    let mut args = Axpby {
        n: n as u32,
        a: 3.0,
        x: x_d,
        b: 0.5,
        y: y_d,
    };
    let mut buf = args.packed();
    let mut size = buf.len() - 8;
    let mut extra = extra_list(&mut buf, &mut size);
    let mut k = null_mut();
    let p = kernel_params(env.axpby, n as u32, null_mut(), extra.as_mut_ptr());
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddKernelNode_v2(&mut k, g1, null(), 0, &p)
    );
    if env.cpu {
        assert!(
            last_error_detail().contains("the parameter buffer has 24 bytes"),
            "{}",
            last_error_detail()
        );
    }
    let mut ptrs = args.ptrs();
    let p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), extra.as_mut_ptr());
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddKernelNode_v2(&mut k, g1, null(), 0, &p)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddKernelNode_v2(&mut k, g1, null(), 0, null())
    );
    // The right size through `extra` is a kernel node.
    // SAFETY: `extra[3]` points at `size`.
    unsafe { *extra[3].cast::<usize>() = buf.len() };
    let p = kernel_params(env.axpby, n as u32, null_mut(), extra.as_mut_ptr());
    ok!(cuGraphAddKernelNode_v2(&mut k, g1, &e1, 1, &p));

    // Memset and memcpy nodes.
    let mut m = null_mut();
    let bad = memset_params(x_d, 0, 3, n);
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddMemsetNode(&mut m, g1, null(), 0, &bad, ctx)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddMemsetNode(&mut m, g1, null(), 0, null(), ctx)
    );
    let p = memset_params(y_d, 0, 4, n);
    ok!(cuGraphAddMemsetNode(&mut m, g1, &k, 1, &p, ctx));
    let mut copy = copy_2d(
        CUmemorytype::CU_MEMORYTYPE_DEVICE,
        x_d,
        0,
        CUmemorytype::CU_MEMORYTYPE_DEVICE,
        y_d,
        0,
        n * 4,
        1,
    );
    let mut c = null_mut();
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddMemcpyNode(&mut c, g1, null(), 0, null(), ctx)
    );
    let mut h = null_mut();
    let p = CUDA_HOST_NODE_PARAMS {
        fn_: None,
        userData: null_mut(),
    };
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphAddHostNode(&mut h, g1, null(), 0, &p)
    );

    let mut x = null_mut();
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphInstantiateWithFlags(null_mut(), g1, 0)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphInstantiateWithFlags(&mut x, g1, 0x100)
    );
    let exec = instantiate(g1);
    // SetParams on a memset node, and with a node of another graph.
    let mut ptrs = args.ptrs();
    let p = kernel_params(env.axpby, n as u32, ptrs.as_mut_ptr(), null_mut());
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphExecKernelNodeSetParams_v2(exec, m, &p)
    );
    let mut other = null_mut();
    ok!(cuGraphAddEmptyNode(&mut other, g2, null(), 0));
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphExecKernelNodeSetParams_v2(exec, other, &p)
    );
    expect!(
        CUDA_ERROR_INVALID_VALUE,
        cuGraphExecKernelNodeSetParams_v2(exec, k, null())
    );
    // The executable graph still runs what it was made with: y = 3 * 1 + 0.5 * 2, then zero.
    ok!(cuGraphLaunch(exec, null_mut()));
    ok!(cuCtxSynchronize());
    assert!(download(y_d, n).iter().all(|&v| v == 0.0));
    ok!(cuGraphExecKernelNodeSetParams_v2(exec, k, &p));

    if env.cpu {
        // This library's refusals and strict checks.
        let mut t = null_mut();
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuGraphAddEmptyNode(&mut t, g1, [e1, e1].as_ptr(), 2)
        );
        copy.Depth = 2;
        expect!(
            CUDA_ERROR_NOT_SUPPORTED,
            cuGraphAddMemcpyNode(&mut c, g1, null(), 0, &copy, ctx)
        );
        assert!(
            last_error_detail().contains("3-D"),
            "{}",
            last_error_detail()
        );
        copy.Depth = 1;
        copy.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_ARRAY;
        expect!(
            CUDA_ERROR_NOT_SUPPORTED,
            cuGraphAddMemcpyNode(&mut c, g1, null(), 0, &copy, ctx)
        );
        copy.srcMemoryType = CUmemorytype::CU_MEMORYTYPE_DEVICE;
        copy.WidthInBytes = n * 4 + 4;
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuGraphAddMemcpyNode(&mut c, g1, null(), 0, &copy, ctx)
        );
        let past_end = memset_params(y_d + 4, 0, 4, n);
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuGraphAddMemsetNode(&mut m, g1, null(), 0, &past_end, ctx)
        );
        expect!(
            CUDA_ERROR_NOT_SUPPORTED,
            cuGraphInstantiateWithFlags(&mut x, g1, 4) // DEVICE_LAUNCH
        );
        // A host node's driver calls are refused.
        let seen = AtomicU32::new(u32::MAX);
        let gh = create_graph();
        let p = host_params(call_driver, (&raw const seen).cast());
        ok!(cuGraphAddHostNode(&mut h, gh, null(), 0, &p));
        let xh = instantiate(gh);
        ok!(cuGraphLaunch(xh, null_mut()));
        ok!(cuCtxSynchronize());
        assert_eq!(
            seen.load(Ordering::Acquire),
            CUresult::CUDA_ERROR_NOT_PERMITTED as u32
        );
        // Destroyed handles.
        ok!(cuGraphExecDestroy(xh));
        ok!(cuGraphDestroy(gh));
        expect!(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(xh, null_mut()));
        expect!(CUDA_ERROR_INVALID_VALUE, cuGraphExecDestroy(xh));
        expect!(CUDA_ERROR_INVALID_VALUE, cuGraphDestroy(gh));
        expect!(
            CUDA_ERROR_INVALID_VALUE,
            cuGraphAddEmptyNode(&mut t, g1, &h, 1)
        );
        // Freed memory under a memset node: the launch is refused, nothing enqueued.
        let z_d = alloc(64);
        let gz = create_graph();
        let p = memset_params(z_d, 0, 1, 64);
        ok!(cuGraphAddMemsetNode(&mut m, gz, null(), 0, &p, ctx));
        let xz = instantiate(gz);
        ok!(cuMemFree_v2(z_d));
        expect!(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(xz, null_mut()));
        ok!(cuGraphExecDestroy(xz));
        ok!(cuGraphDestroy(gz));
    }

    // After all that, the executable graph runs with its new parameters.
    ok!(cuGraphLaunch(exec, null_mut()));
    ok!(cuCtxSynchronize());
    assert!(download(y_d, n).iter().all(|&v| v == 0.0));
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g1));
    ok!(cuGraphDestroy(g2));
    ok!(cuCtxSynchronize());
    for p in [x_d, y_d] {
        ok!(cuMemFree_v2(p));
    }
    drop(env);
}

/// A kernel fault inside a graph is its context's sticky error, as for any work (in a context
/// of its own, so the other tests' primary context stays usable).
#[test]
fn fault_in_a_graph_is_sticky() {
    let Some(env) = env("fault_in_a_graph_is_sticky") else {
        return;
    };
    if !env.cpu {
        eprintln!("fault_in_a_graph_is_sticky: skipped on NVIDIA's driver");
        return;
    }
    let mut ctx = null_mut();
    ok!(cuCtxCreate_v2(&mut ctx, 0, 0));
    let (_module, f) = load_axpby();
    let n = 64u32;
    let x_d = alloc(n as usize * 4);
    let mut args = Axpby {
        n,
        a: 1.0,
        x: x_d,
        b: 1.0,
        y: 0x10, // no allocation
    };
    let mut ptrs = args.ptrs();
    let p = kernel_params(f, n, ptrs.as_mut_ptr(), null_mut());
    let g = create_graph();
    let mut k = null_mut();
    ok!(cuGraphAddKernelNode_v2(&mut k, g, null(), 0, &p));
    let exec = instantiate(g);
    // Launching into the primary context's stream: its nodes run in `ctx` only.
    ok!(cuCtxPushCurrent_v2(env.ctx));
    expect!(CUDA_ERROR_NOT_SUPPORTED, cuGraphLaunch(exec, null_mut()));
    let mut popped = null_mut();
    ok!(cuCtxPopCurrent_v2(&mut popped));
    ok!(cuGraphLaunch(exec, null_mut()));
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
    expect!(CUDA_ERROR_ILLEGAL_ADDRESS, cuGraphLaunch(exec, null_mut()));
    ok!(cuGraphExecDestroy(exec));
    ok!(cuGraphDestroy(g));
    ok!(cuCtxDestroy_v2(ctx));
    ok!(cuCtxSetCurrent(env.ctx));
    drop(env);
}
