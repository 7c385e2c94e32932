//! The shared CUDA/HIP backend, driven through the user API over the simulated driver of
//! `mock.rs`: results against a plain-loop reference, stream ordering, the error model in both
//! submission modes, events across streams, and frees under queued work.

use std::sync::Arc;
use std::time::Duration;

use super::GpuExecutor;
use super::mock::{KERNELS_PTX, MockDriver, MockMemory};
use crate::{DevicePtr, Error, EventStatus, MultiKernelLoaderSpec, StreamExecutor, TypedKernel};

type Affine = TypedKernel<(DevicePtr<u32>, u32, u32, u32)>;

fn executor() -> (StreamExecutor, Arc<MockMemory>) {
    let drv = MockDriver::new();
    let mem = drv.mem.clone();
    let iface = GpuExecutor::new(drv).unwrap();
    (StreamExecutor::new("mock", 0, iface), mem)
}

fn kernel<A: crate::KernelArgs>(exec: &StreamExecutor, name: &str) -> TypedKernel<A> {
    let arity = A::ARITY;
    exec.get_kernel(&MultiKernelLoaderSpec::new(arity).add_cuda_ptx_in_memory(KERNELS_PTX, name))
        .unwrap()
}

fn affine_ref(x: &mut [u32], mul: u32, add: u32) {
    x.iter_mut()
        .for_each(|v| *v = v.wrapping_mul(mul).wrapping_add(add));
}

/// Deterministic pseudo-random words (xorshift), seeded per test.
fn words(seed: u64, n: usize) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u32
        })
        .collect()
}

#[test]
fn copies_fills_and_launches_run_in_stream_order() {
    let (exec, mem) = executor();
    let k: Affine = kernel(&exec, "affine");
    let data = words(1, 1000);
    let mut host = exec.allocate_host::<u32>(data.len()).unwrap();
    host.as_mut_slice().copy_from_slice(&data);
    let mut dev = exec.allocate_array::<u32>(data.len()).unwrap();
    let mut out = exec.allocate_host::<u32>(data.len()).unwrap();
    out.as_mut_slice().fill(0xdead_beef);
    let mut s = exec.create_stream().unwrap();
    s.then_memcpy_h2d(&host, &mut dev)
        .then_launch(256, 4, &k, (dev.ptr(), 1000, 3, 7))
        .then_launch(256, 4, &k, (dev.ptr(), 500, 5, 1))
        .then_memcpy_d2h(&dev, &mut out)
        .block_host_until_done()
        .unwrap();
    let mut want = data.clone();
    affine_ref(&mut want, 3, 7);
    affine_ref(&mut want[..500], 5, 1);
    assert_eq!(out.as_slice(), &want[..]);

    let other = exec.copy_to_device(&vec![0u32; 1000]).unwrap();
    s.then_memset32(&dev, 0x0102_0304)
        .then_memcpy_d2d(&dev, &other)
        .then_memset(dev.slice(..10).unwrap(), 0xab)
        .block_host_until_done()
        .unwrap();
    assert_eq!(exec.copy_to_vec(&other).unwrap(), vec![0x0102_0304; 1000]);
    let got = exec.copy_to_vec(&dev).unwrap();
    assert!(
        got[..10].iter().all(|&v| v == 0xabab_abab) && got[10..].iter().all(|&v| v == 0x0102_0304)
    );
    assert!(
        mem.violations.lock().is_empty(),
        "{:?}",
        mem.violations.lock()
    );
}

#[test]
fn a_failed_callback_skips_the_rest_and_events_recorded_after_it_fail() {
    let (exec, mem) = executor();
    let k: Affine = kernel(&exec, "affine");
    let dev = exec.copy_to_device(&[1u32; 64]).unwrap();
    let ev = exec.create_event().unwrap();
    let mut s = exec.create_stream().unwrap();
    let boom = Error::HostCallback {
        detail: "boom".into(),
    };
    let b = boom.clone();
    s.then_launch(64, 1, &k, (dev.ptr(), 64, 2, 0))
        .then_host_callback_with_status(move || Err(b))
        .then_launch(64, 1, &k, (dev.ptr(), 64, 100, 0))
        .then_record_event(&ev);
    assert_eq!(s.block_host_until_done().unwrap_err(), boom);
    assert_eq!(
        exec.copy_to_vec(&dev).unwrap(),
        vec![2u32; 64],
        "the launch after the failure ran"
    );
    assert_eq!(ev.synchronize().unwrap_err(), boom);
    assert!(matches!(ev.status(), EventStatus::Error(_)));
    let mut w = exec.create_stream().unwrap();
    let err = w.then_wait_for(&ev).block_host_until_done().unwrap_err();
    assert!(matches!(err, Error::DependencyFailed { .. }), "{err}");
    assert!(mem.violations.lock().is_empty());
}

#[test]
fn a_kernel_fault_is_the_streams_error() {
    let (exec, _) = executor();
    let k: TypedKernel<()> = kernel(&exec, "fault");
    let mut s = exec.create_stream().unwrap();
    let err = s
        .then_launch(1, 1, &k, ())
        .block_host_until_done()
        .unwrap_err();
    assert!(matches!(err, Error::KernelFault { .. }), "{err}");
}

#[test]
fn waits_order_streams_even_on_records_still_queued_behind_a_callback() {
    let (exec, mem) = executor();
    let k: Affine = kernel(&exec, "affine");
    let sleep: TypedKernel<(u32,)> = kernel(&exec, "sleep_ms");
    for deferred in [false, true] {
        let dev = exec.copy_to_device(&[1u32; 256]).unwrap();
        let out = exec.copy_to_device(&[0u32; 256]).unwrap();
        let ev = exec.create_event().unwrap();
        let mut a = exec.create_stream().unwrap();
        let mut b = exec.create_stream().unwrap();
        if deferred {
            // The callback puts `a` in deferred mode: its record is made by a worker later.
            a.then_host_callback(|| std::thread::sleep(Duration::from_millis(30)));
        }
        a.then_launch(1, 1, &sleep, (40,))
            .then_launch(256, 1, &k, (dev.ptr(), 256, 3, 0))
            .then_record_event(&ev);
        b.then_wait_for(&ev)
            .then_memcpy_d2d(&dev, &out)
            .block_host_until_done()
            .unwrap();
        assert_eq!(
            exec.copy_to_vec(&out).unwrap(),
            vec![3u32; 256],
            "deferred={deferred}"
        );
        a.block_host_until_done().unwrap();
        assert_eq!(ev.status(), EventStatus::Complete);
    }
    assert!(mem.violations.lock().is_empty());
}

#[test]
fn timers_measure_the_work_between_them() {
    let (exec, _) = executor();
    let sleep: TypedKernel<(u32,)> = kernel(&exec, "sleep_ms");
    let t = exec.create_timer().unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_start_timer(&t)
        .then_launch(1, 1, &sleep, (30,))
        .then_stop_timer(&t)
        .block_host_until_done()
        .unwrap();
    let d = t.elapsed().unwrap();
    assert!(d >= Duration::from_millis(29), "{d:?}");
}

#[test]
fn memory_freed_under_queued_work_outlives_that_work() {
    let (exec, mem) = executor();
    let k: Affine = kernel(&exec, "affine");
    let sleep: TypedKernel<(u32,)> = kernel(&exec, "sleep_ms");
    let mut s = exec.create_stream().unwrap();
    let mut t = exec.create_stream().unwrap();
    t.then_host_callback(|| ()); // a deferred stream too: its fence goes through the worker
    let before = mem.live();
    {
        let dev = exec.copy_to_device(&[5u32; 1024]).unwrap();
        s.then_launch(1, 1, &sleep, (50,))
            .then_launch(1024, 1, &k, (dev.ptr(), 1024, 2, 1));
        t.then_launch(1, 1, &sleep, (20,))
            .then_launch(1024, 1, &k, (dev.ptr(), 1024, 3, 1));
        // `dev` drops here with both launches still queued.
    }
    s.block_host_until_done().unwrap();
    t.block_host_until_done().unwrap();
    exec.synchronize_all().unwrap();
    assert!(
        mem.violations.lock().is_empty(),
        "{:?}",
        mem.violations.lock()
    );
    assert_eq!(
        mem.live(),
        before,
        "the parked allocation was freed once its fences completed"
    );

    // With mem::forget of the host side nothing dangles either: the copy holds its own lease.
    let host = exec.allocate_host::<u32>(256).unwrap();
    let dev = exec.allocate_array::<u32>(256).unwrap();
    s.then_launch(1, 1, &sleep, (20,))
        .then_memcpy_h2d(&host, &dev);
    std::mem::forget(host);
    s.block_host_until_done().unwrap();
    assert!(mem.violations.lock().is_empty());
}

#[test]
fn a_ptx_signature_mismatch_is_refused_at_load() {
    let (exec, _) = executor();
    let spec = MultiKernelLoaderSpec::new(4).add_cuda_ptx_in_memory(KERNELS_PTX, "affine");
    let err = exec
        .get_kernel::<(DevicePtr<u32>, u32, f32, u32)>(&spec)
        .unwrap_err();
    assert!(
        matches!(&err, Error::SignatureMismatch { .. }) && err.to_string().contains("parameter 2"),
        "{err}"
    );
    let spec = MultiKernelLoaderSpec::new(0).add_cuda_ptx_in_memory(KERNELS_PTX, "nope");
    let err = exec.get_untyped_kernel(&spec).unwrap_err().to_string();
    assert!(err.contains("affine, sleep_ms, fault"), "{err}");
}

#[test]
#[cfg_attr(
    miri,
    ignore = "the host platform reads /proc; Miri perturbs std's ln/sin/cos"
)]
fn philox_fills_pass_the_ptx_kernels_parameters_in_order() {
    let (exec, mem) = executor();
    let host = crate::PlatformManager::default_platform()
        .unwrap()
        .executor_for_device(0)
        .unwrap();
    let seed: Vec<u8> = (0..16).collect();
    // 5000 u32s need 5 blocks of 256 threads: the grid must cover every element.
    let fill = |e: &StreamExecutor| {
        let u = e.copy_to_device(&vec![0xdead_beef_u32; 5001]).unwrap();
        let f = e.copy_to_device(&vec![f32::NAN; 333]).unwrap();
        let d = e.copy_to_device(&vec![f64::NAN; 77]).unwrap();
        let g = e.copy_to_device(&vec![f64::NAN; 101]).unwrap();
        let mut s = e.create_stream().unwrap();
        s.then_set_rng_seed(&seed)
            .then_populate_rand_uniform(&u)
            .then_populate_rand_uniform(&f)
            .then_populate_rand_uniform(&d)
            .then_populate_rand_gaussian(1.5, 2.0, &g)
            .block_host_until_done()
            .unwrap();
        (
            e.copy_to_vec(&u).unwrap(),
            e.copy_to_vec(&f)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            e.copy_to_vec(&d)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
            e.copy_to_vec(&g)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(fill(&exec), fill(&host));
    assert!(mem.violations.lock().is_empty());
}

#[test]
fn blas_calls_run_in_stream_order_through_the_drivers_library() {
    use crate::interface::blas::Transpose;
    let drv = MockDriver::new();
    let (mem, canned) = (drv.mem.clone(), drv.canned_blas.clone());
    let exec = StreamExecutor::new("mock", 0, GpuExecutor::new(drv).unwrap());
    let (m, n, k) = (7usize, 5usize, 3usize);
    let a: Vec<f32> = words(11, m * k)
        .iter()
        .map(|&w| (w % 100) as f32 / 10.0)
        .collect();
    let b: Vec<f32> = words(12, k * n)
        .iter()
        .map(|&w| (w % 100) as f32 / 10.0)
        .collect();
    let (da, db) = (
        exec.copy_to_device(&a).unwrap(),
        exec.copy_to_device(&b).unwrap(),
    );
    let dc = exec.copy_to_device(&vec![f32::NAN; m * n]).unwrap();
    let mut s = exec.create_stream().unwrap();
    // Deferred mode: the GEMM must still run after the callback and before the copy back.
    s.then_host_callback(|| std::thread::sleep(Duration::from_millis(20)))
        .then_blas_gemm(
            Transpose::None,
            Transpose::None,
            m,
            n,
            k,
            2.0f32,
            &da,
            m,
            &db,
            k,
            0.0,
            &dc,
            m,
        )
        .block_host_until_done()
        .unwrap();
    let got = exec.copy_to_vec(&dc).unwrap();
    for j in 0..n {
        for i in 0..m {
            let want: f64 = (0..k)
                .map(|p| a[i + p * m] as f64 * b[p + j * k] as f64)
                .sum::<f64>()
                * 2.0;
            assert!(
                (got[i + j * m] as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
                "({i},{j})"
            );
        }
    }
    // What the library refuses fails the stream with its error.
    let err = s
        .then_blas_gemm(
            Transpose::Transpose,
            Transpose::None,
            m,
            n,
            k,
            1.0f32,
            &da,
            k,
            &db,
            k,
            0.0,
            &dc,
            m,
        )
        .block_host_until_done()
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    assert!(mem.violations.lock().is_empty());
    // With the library installed, the built-in kernels never run.
    assert!(canned.lock().is_empty());
}

/// FFT is decided at creation like BLAS: the mock driver has no vendor FFT, so `Auto` and
/// `Builtin` serve the built-in kernels (saying why) and `Vendor` is refused, naming FFT.
#[test]
fn fft_plugin_choice_serves_the_built_in_kernels_without_a_vendor_library() {
    use crate::interface::StreamExecutorInterface;
    use crate::types::{Plugin, PluginConfig, PluginFamily};
    for choice in [Plugin::Auto, Plugin::Builtin] {
        let config = PluginConfig::default().fft(choice);
        let iface = GpuExecutor::with_plugins(MockDriver::new(), &config).unwrap();
        let fft = iface.fft().expect("built-in FFT kernels");
        assert_eq!(fft.implementation(), "built-in kernels");
        let status = iface.plugin_status(PluginFamily::Fft).unwrap();
        assert_eq!(status.implementation, "built-in kernels", "{status}");
        let why = match choice {
            Plugin::Builtin => "Plugin::Builtin chosen",
            _ => "Plugin::Auto: mock has no vendor FFT plugin in this build",
        };
        assert_eq!(status.reason, why, "{status}");
    }
    let vendor = PluginConfig::default().fft(Plugin::Vendor);
    let err = GpuExecutor::with_plugins(MockDriver::new(), &vendor)
        .err()
        .expect("no vendor FFT on the mock driver")
        .to_string();
    assert!(err.contains("no vendor FFT plugin"), "{err}");
}

/// DNN is decided at creation like FFT: a vendor library, where installed, serves what it
/// supports (the mock's: f32 ReLU forward, checked against plain Rust on poisoned output) in
/// stream order, and every other operation falls back to the built-in kernels (the mock driver
/// has none, so the fallback's own `Unsupported` shows the route); `Vendor` without the library
/// is refused naming it, and `Builtin` bypasses it.
#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri (the simulated driver's stream threads)"
)]
fn dnn_vendor_library_serves_what_it_supports_and_the_rest_falls_back() {
    use crate::dnn::{Activation, DnnDataType, TensorDesc, TensorLayout};
    use crate::interface::StreamExecutorInterface;
    use crate::types::{Plugin, PluginConfig, PluginFamily};
    let iface = GpuExecutor::with_plugins(MockDriver::with_dnn_library(), &PluginConfig::default())
        .unwrap();
    let status = iface.plugin_status(PluginFamily::Dnn).unwrap();
    assert_eq!(status.implementation, "mock DNN", "{status}");
    assert_eq!(iface.dnn().unwrap().implementation(), "mock DNN");
    let exec = StreamExecutor::new("mock", 0, iface);

    let t = TensorDesc::new(DnnDataType::F32, TensorLayout::Nhwc, 2, 3, 4, 5).unwrap();
    let mut seed = 0x9e37_79b9_u32;
    let x: Vec<f32> = (0..t.elements())
        .map(|_| {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect();
    let dx = exec.copy_to_device(&x).unwrap();
    let dy = exec.copy_to_device(&vec![f32::NAN; x.len()]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_activation_forward(Activation::Relu, &t, &dx, &dy)
        .block_host_until_done()
        .unwrap();
    let mut got = vec![0f32; x.len()];
    exec.synchronous_memcpy_d2h(&dy, &mut got).unwrap();
    assert!(x.iter().any(|v| *v < 0.0) && x.iter().any(|v| *v > 0.0));
    for (i, (g, v)) in got.iter().zip(&x).enumerate() {
        assert_eq!(g.to_bits(), v.max(0.0).to_bits(), "element {i}");
    }

    let err = s
        .then_activation_forward(Activation::Sigmoid, &t, &dx, &dy)
        .block_host_until_done()
        .unwrap_err()
        .to_string();
    assert!(err.contains("no built-in DNN kernels"), "{err}");

    let vendor = PluginConfig::default().dnn(Plugin::Vendor);
    let err = GpuExecutor::with_plugins(MockDriver::new(), &vendor)
        .err()
        .expect("no vendor DNN library")
        .to_string();
    assert!(err.contains("mock DNN not installed"), "{err}");

    let builtin = PluginConfig::default().dnn(Plugin::Builtin);
    let forced = GpuExecutor::with_plugins(MockDriver::with_dnn_library(), &builtin).unwrap();
    assert!(
        forced.dnn().is_none(),
        "the mock driver has no built-in DNN kernels"
    );
    let status = forced.plugin_status(PluginFamily::Dnn).unwrap();
    assert!(
        status.reason.starts_with("Plugin::Builtin chosen"),
        "{status}"
    );
}
