//! A client we did not write on the CPU libcuda: cudarc's own safe API (`CudaContext`,
//! `CudaStream`, `CudaModule`, the launch builder, events) against the `libcuda.so` that
//! `scripts/build-libcuda.sh` builds, found through `LD_LIBRARY_PATH` as NVIDIA's driver would
//! be. The kernels are kernels/clients.cu as clang-19 compiled them (kernels/ptx/clients.O3.ptx
//! and .O0.ptx, loaded as PTX text); every result is compared with a plain f64 loop on random
//! inputs, and outputs start poisoned (NaN) so an element nobody wrote fails.
//!
//! Without a loadable libcuda the tests print a note and pass, unless `STREAMEXEC_REQUIRE`
//! names `cuda`: then they fail. On a machine with NVIDIA's driver they run on the GPU.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use rand::RngExt;
use support::random_f32s;

const PTX: &[(&str, &str)] = &[
    (
        "O3",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../kernels/ptx/clients.O3.ptx"
        )),
    ),
    (
        "O0",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../kernels/ptx/clients.O0.ptx"
        )),
    ),
];

/// `struct Affine { double scale; int offset; }` of kernels/clients.cu, passed by value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Affine {
    scale: f64,
    offset: i32,
}
// SAFETY: plain `repr(C)` data with the layout of the CUDA C struct (16 bytes, align 8).
unsafe impl DeviceRepr for Affine {}

/// The primary context of device 0, or `None` (after a note) where no libcuda loads and
/// `STREAMEXEC_REQUIRE` does not name `cuda`.
fn context(test: &str) -> Option<Arc<CudaContext>> {
    if !support::libcuda_loads(test) {
        return None;
    }
    Some(CudaContext::new(0).expect("CudaContext::new(0)"))
}

/// Whether the library is streamexec's CPU libcuda (not NVIDIA's driver).
fn is_cpu_libcuda(ctx: &CudaContext) -> bool {
    ctx.name().unwrap().starts_with("streamexec")
}

fn module(ctx: &Arc<CudaContext>, ptx: &str) -> Arc<CudaModule> {
    ctx.load_module(Ptx::from_src(ptx))
        .expect("load_module(Ptx::from_src)")
}

/// Fails unless `got` is `want` (an f64 reference) within `tol(i)`; NaN (poison) always fails.
fn check(what: &str, got: &[f64], want: &[f64], tol: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol(i),
            "{what}: element {i} is {g}, the reference says {w} (tolerance {})",
            tol(i)
        );
    }
}

/// Fails at the first element where `got` and `want` differ (bit for bit where they are f32).
fn same<T: PartialEq + std::fmt::Debug>(what: &str, got: &[T], want: &[T]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: element {i} is {:?}, expected {:?}",
            got[i], want[i]
        );
    }
}

fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// f32 arithmetic of a few operations against f64: a few ulps of the largest term.
fn f32_tol(scale: f64) -> f64 {
    scale * 4.0 * f64::from(f32::EPSILON) + 1e-30
}

/// One launch of `axpby(n, a, x, b, y)` on `stream`.
fn launch_axpby(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    a: f32,
    x: &CudaSlice<f32>,
    b: f32,
    y: &mut CudaSlice<f32>,
) {
    let n = x.len() as u32;
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(128), 1, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: the arguments match axpby's parameters (u32, f32, f32*, f32, f32*), both buffers
    // hold `n` elements.
    unsafe {
        stream
            .launch_builder(f)
            .arg(&n)
            .arg(&a)
            .arg(x)
            .arg(&b)
            .arg(y)
            .launch(cfg)
    }
    .expect("launch axpby");
}

#[test]
fn device_queries() {
    let Some(ctx) = context("device_queries") else {
        return;
    };
    assert!(CudaContext::device_count().unwrap() >= 1);
    assert!(ctx.is_primary());
    assert_eq!(ctx.ordinal(), 0);
    // CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0 on the CPU library, so cudarc allocates
    // with cuMemAlloc and frees with cuMemFree (never cuMemAllocAsync, which it refuses).
    let pools = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
        .unwrap();
    assert_eq!(ctx.has_async_alloc(), pools > 0);
    let warp = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_WARP_SIZE)
        .unwrap();
    assert_eq!(warp, 32);
    let (major, minor) = ctx.compute_capability().unwrap();
    assert_eq!(
        major,
        ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .unwrap()
    );
    let name = ctx.name().unwrap();
    assert!(!name.is_empty());
    if is_cpu_libcuda(&ctx) {
        assert!(
            !ctx.has_async_alloc(),
            "the CPU libcuda offers no memory pools"
        );
        let want = std::env::var("STREAMEXEC_CUDA_CC")
            .ok()
            .and_then(|v| {
                let (a, b) = v.trim().split_once('.')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .unwrap_or((7, 0));
        assert_eq!((major, minor), want, "{name}");
    } else {
        assert!(major >= 7, "{name}: the PTX targets sm_70");
    }
    let total = ctx.total_mem().unwrap();
    let (free, total2) = ctx.mem_get_info().unwrap();
    assert!(total > 0 && total2 == total && free <= total);
    ctx.uuid().unwrap();
    ctx.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// axpby on the default stream and on a new stream, at -O3 and -O0: copies in with
/// `clone_htod`/`memcpy_stod`, out with `clone_dtoh`/`memcpy_dtov`.
#[test]
#[allow(deprecated)] // memcpy_stod / memcpy_dtov: cudarc's older names, still public API
fn axpby_on_default_and_new_stream() {
    let Some(ctx) = context("axpby_on_default_and_new_stream") else {
        return;
    };
    let mut rng = support::rng("axpby_on_default_and_new_stream");
    for (opt, ptx) in PTX {
        let m = module(&ctx, ptx);
        let f = m.load_function("axpby").unwrap();
        for stream in [ctx.default_stream(), ctx.new_stream().unwrap()] {
            let n = rng.random_range(1000..3000usize);
            let (x, y) = (random_f32s(&mut rng, n), random_f32s(&mut rng, n));
            let (a, b) = (
                rng.random_range(-4.0f32..4.0),
                rng.random_range(-4.0f32..4.0),
            );
            let x_d = stream.clone_htod(&x).unwrap();
            let mut y_d = stream.memcpy_stod(&y).unwrap();
            launch_axpby(&stream, &f, a, &x_d, b, &mut y_d);
            let got = stream.clone_dtoh(&y_d).unwrap();
            let got_old = stream.memcpy_dtov(&y_d).unwrap();
            same(&format!("{opt}: memcpy_dtov vs clone_dtoh"), &got_old, &got);
            let want: Vec<f64> = (0..n)
                .map(|i| f64::from(a) * f64::from(x[i]) + f64::from(b) * f64::from(y[i]))
                .collect();
            let tol = |i: usize| {
                f32_tol(
                    (f64::from(a) * f64::from(x[i])).abs() + (f64::from(b) * f64::from(y[i])).abs(),
                )
            };
            check(&format!("axpby {opt}"), &widen(&got), &want, tol);
            // x is untouched.
            same(&format!("{opt}: x"), &stream.clone_dtoh(&x_d).unwrap(), &x);
        }
    }
    ctx.check_err().unwrap();
}

/// A `__constant__` table written through `CudaModule::get_global`, a struct passed by value,
/// and `alloc_zeros`/`memset_zeros`.
#[test]
fn constant_memory_struct_params_and_zeroing() {
    let Some(ctx) = context("constant_memory_struct_params_and_zeroing") else {
        return;
    };
    let mut rng = support::rng("constant_memory_struct_params_and_zeroing");
    let stream = ctx.new_stream().unwrap();
    for (opt, ptx) in PTX {
        let m = module(&ctx, ptx);
        let n = rng.random_range(500..2000usize);
        let cfg = LaunchConfig {
            grid_dim: ((n as u32).div_ceil(64), 1, 1),
            block_dim: (64, 1, 1),
            shared_mem_bytes: 0,
        };

        // poly: coefficients in constant memory.
        let coeffs: Vec<f32> = (0..4).map(|_| rng.random_range(-2.0f32..2.0)).collect();
        {
            let mut sym = m.get_global("poly_coeffs", &stream).unwrap();
            assert_eq!(sym.len(), 16, "{opt}: poly_coeffs is float[4]");
            // SAFETY: 16 bytes hold 4 f32.
            let mut sym_f32 = unsafe { sym.transmute_mut::<f32>(4) }.unwrap();
            stream.memcpy_htod(&coeffs, &mut sym_f32).unwrap();
            let back = stream.clone_dtoh(&sym_f32).unwrap();
            same(&format!("{opt}: poly_coeffs read back"), &back, &coeffs);
        }
        let x: Vec<f32> = (0..n).map(|_| rng.random_range(-3.0f32..3.0)).collect();
        let x_d = stream.clone_htod(&x).unwrap();
        let mut out = stream.clone_htod(&vec![f32::NAN; n]).unwrap();
        let poly = m.load_function("poly").unwrap();
        let n32 = n as u32;
        // SAFETY: poly(const float*, float*, unsigned) with `n` elements in each buffer.
        unsafe {
            stream
                .launch_builder(&poly)
                .arg(&x_d)
                .arg(&mut out)
                .arg(&n32)
                .launch(cfg)
        }
        .unwrap();
        let got = stream.clone_dtoh(&out).unwrap();
        let c: Vec<f64> = widen(&coeffs);
        let want: Vec<f64> = x
            .iter()
            .map(|&v| {
                let v = f64::from(v);
                ((c[3] * v + c[2]) * v + c[1]) * v + c[0]
            })
            .collect();
        let tol = |i: usize| {
            let v = f64::from(x[i]).abs();
            f32_tol(((c[3].abs() * v + c[2].abs()) * v + c[1].abs()) * v + c[0].abs())
        };
        check(&format!("poly {opt}"), &widen(&got), &want, tol);

        // affine_struct: a 16-byte struct by value, then int and double buffers.
        let t = Affine {
            scale: rng.random_range(-1e3..1e3),
            offset: rng.random_range(-1_000_000..1_000_000),
        };
        let ints: Vec<i32> = (0..n)
            .map(|_| rng.random_range(-1 << 30..1 << 30))
            .collect();
        let ints_d = stream.clone_htod(&ints).unwrap();
        let mut doubles = stream.alloc_zeros::<f64>(n).unwrap();
        assert!(
            stream
                .clone_dtoh(&doubles)
                .unwrap()
                .iter()
                .all(|&v| v == 0.0),
            "{opt}: alloc_zeros"
        );
        stream
            .memcpy_htod(&vec![f64::NAN; n], &mut doubles)
            .unwrap();
        let f = m.load_function("affine_struct").unwrap();
        // SAFETY: affine_struct(Affine, const int*, double*, unsigned), `n` elements each.
        unsafe {
            stream
                .launch_builder(&f)
                .arg(&t)
                .arg(&ints_d)
                .arg(&mut doubles)
                .arg(&n32)
                .launch(cfg)
        }
        .unwrap();
        let got = stream.clone_dtoh(&doubles).unwrap();
        let want: Vec<f64> = ints
            .iter()
            .map(|&v| f64::from(v) * t.scale + f64::from(t.offset))
            .collect();
        check(&format!("affine_struct {opt}"), &got, &want, |i| {
            (f64::from(ints[i]) * t.scale).abs() * 4.0 * f64::EPSILON + 1e-9
        });

        // memset_zeros over the results.
        stream.memset_zeros(&mut doubles).unwrap();
        assert!(
            stream
                .clone_dtoh(&doubles)
                .unwrap()
                .iter()
                .all(|&v| v == 0.0),
            "{opt}: memset_zeros"
        );
    }
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// Dynamic shared memory (`shared_mem_bytes`) and a launch timed by the builder's own events.
#[test]
fn dynamic_shared_memory_and_launch_events() {
    let Some(ctx) = context("dynamic_shared_memory_and_launch_events") else {
        return;
    };
    let mut rng = support::rng("dynamic_shared_memory_and_launch_events");
    let stream = ctx.default_stream();
    for (opt, ptx) in PTX {
        let m = module(&ctx, ptx);
        let f = m.load_function("block_sum").unwrap();
        let block = 1u32 << rng.random_range(5..9u32);
        let n = rng.random_range(2000..6000usize);
        let blocks = (n as u32).div_ceil(block);
        let x = random_f32s(&mut rng, n);
        let x_d = stream.clone_htod(&x).unwrap();
        let mut sums = stream.alloc_zeros::<f64>(blocks as usize).unwrap();
        stream
            .memcpy_htod(&vec![f64::NAN; blocks as usize], &mut sums)
            .unwrap();
        let n32 = n as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: block * 8,
        };
        let mut builder = stream.launch_builder(&f);
        builder.arg(&x_d).arg(&mut sums).arg(&n32);
        builder.record_kernel_launch(CUevent_flags::CU_EVENT_DEFAULT);
        // SAFETY: block_sum(const float*, double*, unsigned) with `blocks` outputs and
        // `block` doubles of dynamic shared memory.
        let events = unsafe { builder.launch(cfg) }.unwrap();
        let (start, end) = events.expect("record_kernel_launch gives two events");
        let ms = start.elapsed_ms(&end).unwrap();
        assert!(ms.is_finite() && ms >= 0.0, "{opt}: elapsed {ms} ms");
        assert!(end.is_complete());
        let got = stream.clone_dtoh(&sums).unwrap();
        let want: Vec<f64> = x
            .chunks(block as usize)
            .map(|c| c.iter().map(|&v| f64::from(v)).sum())
            .collect();
        check(
            &format!("block_sum {opt} (block {block})"),
            &got,
            &want,
            |b| {
                let chunk = &x[b * block as usize..((b + 1) * block as usize).min(n)];
                chunk.iter().map(|&v| f64::from(v).abs()).sum::<f64>() * 1e-14
            },
        );
    }
    ctx.check_err().unwrap();
}

/// Two non-blocking streams ordered only by events (cudarc's own tracking turned off): a chain
/// of launches on one, `join`/`wait` on the other, a dependent launch there, event timing.
#[test]
fn two_streams_ordered_by_events() {
    let Some(ctx) = context("two_streams_ordered_by_events") else {
        return;
    };
    // SAFETY: every cross-stream use below is ordered with `join`/`wait`, and every buffer
    // outlives the work that uses it (synchronize before drop).
    unsafe { ctx.disable_event_tracking() };
    let mut rng = support::rng("two_streams_ordered_by_events");
    let m = module(&ctx, PTX[0].1);
    let axpby = m.load_function("axpby").unwrap();
    let s1 = ctx.new_stream().unwrap();
    let s2 = ctx.new_stream().unwrap();
    let n = rng.random_range(20_000..30_000usize);
    let (x, y0) = (random_f32s(&mut rng, n), random_f32s(&mut rng, n));
    let x_d = s1.clone_htod(&x).unwrap();
    let mut y_d = s1.clone_htod(&y0).unwrap();
    let start = s1
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    // Several launches on s1: y = a*x + b*y each time (b small keeps the values bounded).
    let steps: Vec<(f32, f32)> = (0..6)
        .map(|_| {
            (
                rng.random_range(-2.0f32..2.0),
                rng.random_range(-0.5f32..0.5),
            )
        })
        .collect();
    for &(a, b) in &steps {
        launch_axpby(&s1, &axpby, a, &x_d, b, &mut y_d);
    }
    let end = s1
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .unwrap();
    // s2 reads y only after s1's chain: join (record + wait) and, for the second buffer, an
    // explicit wait on the end event.
    s2.join(&s1).unwrap();
    s2.wait(&end).unwrap();
    // z starts poisoned, takes a copy of y (device to device on s2), then z = 0 * x + a2 * z.
    let mut z_d = s2.clone_htod(&vec![f32::NAN; n]).unwrap();
    let a2 = rng.random_range(-2.0f32..2.0);
    s2.memcpy_dtod(&y_d, &mut z_d).unwrap();
    launch_axpby(&s2, &axpby, 0.0, &x_d, a2, &mut z_d);
    let z = s2.clone_dtoh(&z_d).unwrap();
    s2.synchronize().unwrap();
    let ms = start.elapsed_ms(&end).unwrap();
    assert!(ms.is_finite() && ms >= 0.0, "elapsed {ms} ms");
    assert!(start.is_complete() && end.is_complete());

    // The f64 reference of the chain, with a tolerance that follows the error growth.
    let mut want = widen(&y0);
    let mut err = vec![0.0f64; n];
    for &(a, b) in &steps {
        for i in 0..n {
            let ax = f64::from(a) * f64::from(x[i]);
            let by = f64::from(b) * want[i];
            err[i] = f32_tol(ax.abs() + by.abs() + want[i].abs()) + err[i] * f64::from(b).abs();
            want[i] = ax + by;
        }
    }
    let want_z: Vec<f64> = want.iter().map(|&v| f64::from(a2) * v).collect();
    check("two streams", &widen(&z), &want_z, |i| {
        err[i] * f64::from(a2).abs() + f32_tol((f64::from(a2) * want[i]).abs())
    });
    // y on s1 is the chain's result as well.
    let y = s1.clone_dtoh(&y_d).unwrap();
    check("two streams: y", &widen(&y), &want, |i| err[i]);
    drop((x_d, y_d, z_d));
    ctx.check_err().unwrap();
}

/// A host function that holds its stream until the `AtomicBool` behind `data` is set; `data`
/// is an `Arc::into_raw` whose reference the function takes over.
unsafe extern "C" fn hold_until_open(data: *mut std::ffi::c_void) {
    // SAFETY: `data` came from `Arc::into_raw` and is handed to this one call.
    let gate = unsafe { Arc::from_raw(data.cast::<AtomicBool>().cast_const()) };
    while !gate.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// cudarc hands the driver borrowed pageable `Vec`s and relies on what NVIDIA's driver does
/// with them: an asynchronous copy from pageable memory is staged before the call returns (the
/// caller may overwrite or free the source at once), and one to pageable memory returns only
/// once it is done (`clone_dtoh` returns the `Vec` without synchronizing). A stream held by a
/// host function makes both deterministic.
#[test]
fn pageable_copies_are_staged_and_waited_for() {
    let Some(ctx) = context("pageable_copies_are_staged_and_waited_for") else {
        return;
    };
    let mut rng = support::rng("pageable_copies_are_staged_and_waited_for");
    let stream = ctx.new_stream().unwrap();
    let n = rng.random_range(1000..5000usize);
    let mut dev = stream.alloc_zeros::<f32>(n).unwrap();

    // The gate opens 50 ms after `go` is sent, or at once if the test fails before that.
    let gate = Arc::new(AtomicBool::new(false));
    let (go, go_rx) = std::sync::mpsc::channel::<()>();
    let opener = {
        let gate = gate.clone();
        std::thread::spawn(move || {
            if go_rx.recv().is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
            gate.store(true, Ordering::Release);
        })
    };
    let held = Arc::into_raw(gate.clone()).cast_mut().cast();
    // SAFETY: the function takes over one reference to the gate and makes no driver calls.
    let launched = unsafe {
        cudarc::driver::result::stream::launch_host_function(
            stream.cu_stream(),
            hold_until_open,
            held,
        )
    };
    if let Err(e) = launched {
        // SAFETY: the failed launch did not take the reference over.
        drop(unsafe { Arc::from_raw(held.cast::<AtomicBool>().cast_const()) });
        panic!("cuLaunchHostFunc: {e:?}");
    }
    let done = stream.record_event(None).unwrap();
    assert_eq!(done.try_is_complete(), Ok(false), "the stream is held");

    // Host to device from a Vec that is overwritten and freed right after the call.
    let mut src = random_f32s(&mut rng, n);
    let kept = src.clone();
    stream.memcpy_htod(&src, &mut dev).unwrap();
    src.fill(f32::NAN);
    drop(src);

    // Device to host into a new Vec: returns only once the copy (behind the gate) is done.
    go.send(()).unwrap();
    let got = stream.clone_dtoh(&dev).unwrap();
    assert!(
        gate.load(Ordering::Acquire),
        "clone_dtoh returned before its copy ran"
    );
    same("pageable round trip", &got, &kept);
    opener.join().unwrap();
    stream.synchronize().unwrap();
    assert_eq!(done.try_is_complete(), Ok(true));
    ctx.check_err().unwrap();
}
