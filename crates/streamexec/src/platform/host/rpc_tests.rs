//! PTX built against LLVM's GPU libc (`include/streamexec_rpc.h`, a module defining
//! `__llvm_rpc_client`) calling the host executor's RPC server through its PTX engine, next to
//! Rust host kernels calling through `ExecutorRpc::client` on the same executor: output checked
//! line for line against what the program prints, in both orders of first use, with two modules
//! and the in-process client calling at once on ports of their own.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};

use super::{HostExecutor, HostKernel, describe};
use crate::executor_rpc::{RANGE_PORTS, RANGES};
use crate::rpc::{Geometry, Layout, PrintfArg};
use crate::{BlockDim, MultiKernelLoaderSpec, StreamExecutor, ThreadDim, TypedKernel};

const HELLO: &str = include_str!("../../../../../kernels/ptx/rpc_hello.O3.ptx");
const HELLO_O0: &str = include_str!("../../../../../kernels/ptx/rpc_hello.O0.ptx");
const HELLO_PRE: &str = include_str!("../../../../../kernels/ptx/rpc_hello.pre_doorbell.O3.ptx");
const HELLO_PRE_O0: &str = include_str!("../../../../../kernels/ptx/rpc_hello.pre_doorbell.O0.ptx");

/// A host executor of its own (not the platform's shared one), so its server starts here.
fn fresh() -> StreamExecutor {
    StreamExecutor::new(
        "host",
        0,
        HostExecutor::new(describe(0), &Default::default()).unwrap(),
    )
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Lines as a multiset: calls of different warps and threads may come in any order, but each
/// call's output is one write.
fn counted(text: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        *m.entry(l.to_string()).or_insert(0) += 1;
    }
    m
}

/// What `hello(x)` prints for one block of `threads` threads (a multiple of 32): thread 0
/// prints the greeting, then every thread one line (numbered by `threadIdx.x`).
fn hello_lines(x: f32, threads: u32) -> String {
    let mut want = format!("Hello world!\nanswer=42 x={:.2}\n", f64::from(x));
    for t in 0..threads {
        want += &format!(
            "lane {t:2} of the warp, one RPC port for all 32: {}, x*lane={:.2}\n",
            if t % 2 == 1 { "odd" } else { "even" },
            f64::from(x * t as f32)
        );
    }
    want
}

fn load_hello(exec: &StreamExecutor, ptx: &str) -> TypedKernel<(f32,)> {
    let spec = MultiKernelLoaderSpec::new(1).add_cuda_ptx_in_memory(ptx, "hello");
    exec.get_kernel(&spec).unwrap()
}

/// A host kernel whose thread `i` prints `rust <tag> <i>` through the in-process client.
fn rust_printer(exec: &StreamExecutor, tag: i32) -> TypedKernel<(u32,)> {
    let client = exec.rpc().unwrap().client();
    let spec = MultiKernelLoaderSpec::new(1).add_host_kernel(HostKernel::new(
        "printer",
        move |ctx, (n,): (u32,)| {
            let i = ctx.global_id_x();
            if i < n as usize {
                client
                    .printf(
                        "rust %d %d\n",
                        &[PrintfArg::Int(tag), PrintfArg::Int(i as i32)],
                    )
                    .expect("rpc printf");
            }
        },
    ));
    exec.get_kernel(&spec).unwrap()
}

fn rust_lines(tag: i32, n: u32) -> String {
    (0..n).map(|i| format!("rust {tag} {i}\n")).collect()
}

#[test]
fn rpc_hello_ptx_prints_on_the_host_in_both_layouts_and_opt_levels() {
    for (ptx, layout) in [
        (HELLO, Layout::Current),
        (HELLO_O0, Layout::Current),
        (HELLO_PRE, Layout::PreDoorbell),
        (HELLO_PRE_O0, Layout::PreDoorbell),
    ] {
        let exec = fresh();
        let k = load_hello(&exec, ptx);
        assert!(
            k.kernel.rpc,
            "a module with `__llvm_rpc_client` launches with RPC"
        );
        let rpc = exec.rpc().unwrap();
        assert_eq!(
            rpc.config(),
            (layout, 32),
            "the engine's warp is one client"
        );
        let out = Capture::default();
        rpc.set_stdout(Some(Box::new(out.clone())));
        let x = 2.5;
        exec.create_stream()
            .unwrap()
            .then_launch(ThreadDim::new(32, 1, 1), BlockDim::default(), &k, (x,))
            .block_host_until_done()
            .unwrap();
        // One warp: the order is the program's (one port at a time).
        assert_eq!(out.text(), hello_lines(x, 32), "{layout:?}");
        assert!(rpc.server().take_errors().is_empty());
    }
}

#[test]
fn many_warps_of_many_blocks_all_get_served() {
    let exec = fresh();
    let k = load_hello(&exec, HELLO);
    let out = Capture::default();
    exec.rpc().unwrap().set_stdout(Some(Box::new(out.clone())));
    let (x, blocks, threads) = (-1.25f32, 4u32, 64u32);
    exec.create_stream()
        .unwrap()
        .then_launch(
            ThreadDim::new(threads, 1, 1),
            BlockDim::new(blocks, 1, 1),
            &k,
            (x,),
        )
        .block_host_until_done()
        .unwrap();
    let want: String = (0..blocks).map(|_| hello_lines(x, threads)).collect();
    assert_eq!(counted(&out.text()), counted(&want));
}

/// A Rust host kernel with the in-process client and a PTX module on one executor: whichever
/// starts the server, both are served, each on its own ports.
#[test]
fn rust_and_ptx_clients_share_one_server_in_either_order() {
    for ptx_first in [false, true] {
        let exec = fresh();
        let (ptx, rust) = if ptx_first {
            let k = load_hello(&exec, HELLO);
            (k, rust_printer(&exec, 1))
        } else {
            let r = rust_printer(&exec, 1);
            (load_hello(&exec, HELLO), r)
        };
        let out = Capture::default();
        exec.rpc().unwrap().set_stdout(Some(Box::new(out.clone())));
        let mut s = exec.create_stream().unwrap();
        s.then_launch_with_rpc(
            ThreadDim::new(8, 1, 1),
            BlockDim::new(2, 1, 1),
            &rust,
            (16,),
        )
        .then_launch(ThreadDim::new(32, 1, 1), BlockDim::default(), &ptx, (0.5,))
        .then_launch_with_rpc(ThreadDim::new(8, 1, 1), BlockDim::new(2, 1, 1), &rust, (5,))
        .block_host_until_done()
        .unwrap();
        let text = out.text();
        let want = rust_lines(1, 16) + &hello_lines(0.5, 32) + &rust_lines(1, 5);
        // Launches of one stream run in order; threads of one launch in any.
        let (a, rest) = text.split_at(rust_lines(1, 16).len());
        let (b, c) = rest.split_at(hello_lines(0.5, 32).len());
        assert_eq!(
            counted(a),
            counted(&rust_lines(1, 16)),
            "ptx first: {ptx_first}"
        );
        assert_eq!(b, hello_lines(0.5, 32), "ptx first: {ptx_first}");
        assert_eq!(
            counted(c),
            counted(&rust_lines(1, 5)),
            "ptx first: {ptx_first}"
        );
        assert_eq!(text.len(), want.len());
    }
}

/// The image written into a module's `__llvm_rpc_client`, read back.
fn image_of(exec: &StreamExecutor, k: &TypedKernel<(f32,)>) -> (crate::DeviceAddress, Vec<u8>) {
    let (addr, n) = k.kernel.inner.rpc_client_symbol().unwrap();
    let mut bytes = vec![0u8; n];
    // SAFETY: the engine reported `n` bytes of the module's data at `addr`, which lives as
    // long as the executor's module cache.
    unsafe { exec.interface().memcpy_d2h_sync(addr, &mut bytes) }.unwrap();
    (addr, bytes)
}

/// Two modules and the in-process client, all calling at once: each client half has its own
/// range of ports (its own lock bitmap never meets another's), and every call is served.
#[test]
fn two_modules_and_the_in_process_client_call_at_once_on_ports_of_their_own() {
    let exec = fresh();
    let a = load_hello(&exec, HELLO);
    // Another text is another module, with a `__llvm_rpc_client` of its own.
    let b = load_hello(&exec, &format!("{HELLO}\n// the second module\n"));
    let rust = rust_printer(&exec, 7);
    let rpc = exec.rpc().unwrap();
    let mut seen = Vec::new();
    for k in [&a, &b] {
        let (addr, image) = image_of(&exec, k);
        let (geo, base, first, count) = Geometry::parse_client_image(&image, 32).unwrap();
        assert_eq!(geo, rpc.server().geometry());
        assert_eq!(base, rpc.server().device_address());
        assert_eq!(count, RANGE_PORTS);
        assert_eq!(rpc.image_first_port(addr), Some(first));
        seen.push(first);
    }
    // The in-process client has the first range; the modules the next two.
    assert_eq!(seen, [RANGE_PORTS, 2 * RANGE_PORTS]);
    assert_eq!(rpc.server().geometry().port_count, RANGE_PORTS * RANGES);

    let out = Capture::default();
    rpc.set_stdout(Some(Box::new(out.clone())));
    let mut streams: Vec<_> = (0..3).map(|_| exec.create_stream().unwrap()).collect();
    let (blocks, threads) = (3u32, 64u32);
    streams[0].then_launch(
        ThreadDim::new(threads, 1, 1),
        BlockDim::new(blocks, 1, 1),
        &a,
        (1.5,),
    );
    streams[1].then_launch(
        ThreadDim::new(threads, 1, 1),
        BlockDim::new(blocks, 1, 1),
        &b,
        (-3.0,),
    );
    streams[2].then_launch_with_rpc(
        ThreadDim::new(16, 1, 1),
        BlockDim::new(4, 1, 1),
        &rust,
        (64,),
    );
    for s in &mut streams {
        s.block_host_until_done().unwrap();
    }
    let mut want = rust_lines(7, 64);
    for _ in 0..blocks {
        want += &hello_lines(1.5, threads);
        want += &hello_lines(-3.0, threads);
    }
    assert_eq!(counted(&out.text()), counted(&want));
    assert!(rpc.server().take_errors().is_empty());
}

/// Each module takes a range; when none is left the load fails with a message, and modules
/// already loaded keep working.
#[test]
fn a_module_past_the_last_range_fails_to_load_and_the_others_still_work() {
    let exec = fresh();
    let mut kernels = Vec::new();
    for m in 1..RANGES {
        kernels.push(load_hello(&exec, &format!("{HELLO}\n// module {m}\n")));
    }
    let spec = MultiKernelLoaderSpec::new(1)
        .add_cuda_ptx_in_memory(&format!("{HELLO}\n// one too many\n"), "hello");
    let e = exec.get_kernel::<(f32,)>(&spec).unwrap_err();
    assert!(e.to_string().contains("no ports left"), "{e}");
    let out = Capture::default();
    exec.rpc().unwrap().set_stdout(Some(Box::new(out.clone())));
    exec.create_stream()
        .unwrap()
        .then_launch(
            ThreadDim::new(32, 1, 1),
            BlockDim::default(),
            &kernels[RANGES - 2],
            (4.0,),
        )
        .block_host_until_done()
        .unwrap();
    assert_eq!(out.text(), hello_lines(4.0, 32));
}

/// A spec that says the module's `__llvm_rpc_client` is someone else's (the CPU libcuda, whose
/// cuda executor serves it) loads without a server and leaves the symbol alone, whatever its
/// size; without it, a size no layout has is refused.
#[test]
fn a_foreign_rpc_client_is_left_alone() {
    let ptx = ".version 7.0\n.target sm_70\n.address_size 64\n\
               .visible .global .align 8 .b8 __llvm_rpc_client[24];\n\
               .visible .entry k(.param .u32 x) { ret; }\n";
    let exec = fresh();
    let spec = MultiKernelLoaderSpec::new(1).add_cuda_ptx_in_memory(ptx, "k");
    let e = exec.get_kernel::<(u32,)>(&spec).unwrap_err();
    assert!(e.to_string().contains("has 24 bytes"), "{e}");
    let k: TypedKernel<(u32,)> = exec.get_kernel(&spec.with_foreign_rpc_client()).unwrap();
    assert!(!k.kernel.rpc);
    let (addr, n) = k.kernel.inner.rpc_client_symbol().unwrap();
    let mut bytes = vec![0xA5u8; n];
    // SAFETY: the module's 24-byte global, alive with the executor's module cache.
    unsafe { exec.interface().memcpy_d2h_sync(addr, &mut bytes) }.unwrap();
    assert_eq!(bytes, [0u8; 24]);
    // Nothing started the server: no image was written anywhere.
    let foreign = load_hello_foreign(&exec);
    assert!(!foreign.kernel.rpc);
    let (addr, image) = image_of(&exec, &foreign);
    assert!(image.iter().all(|&b| b == 0));
    assert_eq!(exec.rpc().unwrap().image_first_port(addr), None);
}

fn load_hello_foreign(exec: &StreamExecutor) -> TypedKernel<(f32,)> {
    let spec = MultiKernelLoaderSpec::new(1)
        .add_cuda_ptx_in_memory(HELLO, "hello")
        .with_foreign_rpc_client();
    exec.get_kernel(&spec).unwrap()
}
