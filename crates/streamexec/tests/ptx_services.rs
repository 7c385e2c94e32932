//! What PTX kernels call outside their module on the host platform (`kernels/services.cu`):
//! `printf` formatted as C's (checked against Rust's `format!` of the same values), a device
//! `assert` as `Error::KernelAssert`, `malloc`/`free` from the executor's heap.

mod common;

use streamexec::{DevicePtr, Error, MultiKernelLoaderSpec, PlatformManager, PrintfOutput};
use streamexec::{StreamExecutor, TypedKernel};

use common::rng;
use rand::RngExt;

const PTX: &str = include_str!("../../../kernels/ptx/services.O3.ptx");

fn load<A: streamexec::KernelArgs>(exec: &StreamExecutor, name: &str) -> TypedKernel<A> {
    let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(PTX, name);
    exec.get_kernel(&spec).unwrap()
}

/// One test, since the executor (and its printf buffer and heap) is shared by the process.
#[test]
fn printf_assert_and_malloc_on_the_host_platform() {
    let exec = PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap();
    let services = exec.ptx_services().unwrap();
    services.set_printf_output(PrintfOutput::Buffered);
    let mut r = rng(module_path!());

    // printf: each thread's line, C's formatting.
    let (i, d, l, u) = (
        r.random::<i32>() / 2,
        (r.random::<f64>() - 0.5) * 1e5,
        r.random::<i64>(),
        r.random::<u32>(),
    );
    let text: String = (0..1 + r.random_range(0..16))
        .map(|_| r.random_range(b'a'..=b'z') as char)
        .collect();
    let s = exec.allocate_zeroed_array::<u8>(text.len() + 1).unwrap();
    exec.synchronous_memcpy_h2d(&format!("{text}\0").into_bytes(), &s)
        .unwrap();
    let k: TypedKernel<(i32, f64, i64, u32, DevicePtr<u8>)> = load(&exec, "print_values");
    let mut st = exec.create_stream().unwrap();
    st.then_launch(4, 2, &k, (i, d, l, u, s.ptr()));
    st.block_host_until_done().unwrap();
    let out = String::from_utf8(services.take_printf()).unwrap();
    let mut got: Vec<&str> = out.lines().collect();
    got.sort_unstable();
    let mut want: Vec<String> = (0..8)
        .map(|t| {
            let c = (b'A' + (t % 4) as u8) as char;
            format!("i={} d={d:.3} s={text} l={l} u={u} c={c}", i + (t % 4))
        })
        .collect();
    want.sort_unstable();
    assert_eq!(got, want);

    // vprintf's result: the argument count.
    let counts = exec.allocate_zeroed_array::<i32>(2).unwrap();
    let k: TypedKernel<(DevicePtr<i32>,)> = load(&exec, "print_count");
    st.then_launch(1, 1, &k, (counts.ptr(),));
    st.block_host_until_done().unwrap();
    let mut c = [-5i32; 2];
    exec.synchronous_memcpy_d2h(&counts, &mut c).unwrap();
    assert_eq!(c, [3, 0]);
    assert_eq!(services.take_printf(), b"1 2 3.5\nno arguments\n");

    // assert: the stream's error carries the assertion.
    let flags = exec.allocate_zeroed_array::<i32>(8).unwrap();
    let k: TypedKernel<(i32, i32, DevicePtr<i32>)> = load(&exec, "assert_thread");
    let mut st = exec.create_stream().unwrap();
    st.then_launch(4, 2, &k, (3, 1, flags.ptr()));
    let e = st.block_host_until_done().unwrap_err();
    let Error::KernelAssert {
        kernel, failure, ..
    } = &e
    else {
        panic!("{e}");
    };
    assert_eq!(kernel, "assert_thread");
    assert_eq!(
        (
            failure.message.as_str(),
            failure.file.as_str(),
            failure.line
        ),
        ("x != bad", "services.cu", 42)
    );
    assert!(
        e.to_string().ends_with(
            "services.cu:42: assert_thread: block: [1,0,0], thread: [3,0,0] Assertion \
             `x != bad` failed."
        ),
        "{e}"
    );

    // malloc: the heap's limit holds, its memory outlives the launch, free returns it.
    services.set_heap_limit(2 * 256);
    let ptrs = exec.allocate_zeroed_array::<u64>(4).unwrap();
    let k: TypedKernel<(u64, DevicePtr<u64>)> = load(&exec, "heap_alloc");
    let mut st = exec.create_stream().unwrap();
    st.then_launch(4, 1, &k, (256, ptrs.ptr()));
    st.block_host_until_done().unwrap();
    let mut p = [0u64; 4];
    exec.synchronous_memcpy_d2h(&ptrs, &mut p).unwrap();
    let live: Vec<u64> = p.iter().copied().filter(|&a| a != 0).collect();
    assert_eq!(live.len(), 2, "{p:x?}");
    assert_eq!(services.heap_used(), 512);
    let ins = exec.allocate_zeroed_array::<u64>(2).unwrap();
    exec.synchronous_memcpy_h2d(&live, &ins).unwrap();
    let vals = exec.allocate_zeroed_array::<i32>(4).unwrap();
    let k: TypedKernel<(DevicePtr<u64>, u64, DevicePtr<i32>)> = load(&exec, "heap_free");
    st.then_launch(2, 1, &k, (ins.ptr(), 256, vals.ptr()));
    st.block_host_until_done().unwrap();
    let mut v = [0i32; 4];
    exec.synchronous_memcpy_d2h(&vals, &mut v).unwrap();
    let want: Vec<i32> = (0..4)
        .filter(|&t| p[t] != 0)
        .flat_map(|t| [t as i32, 7])
        .collect();
    assert_eq!(v.to_vec(), want);
    assert_eq!(services.heap_used(), 0);
    services.set_heap_limit(8 << 20);
    services.set_printf_output(PrintfOutput::Immediate);
}
