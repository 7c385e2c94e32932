//! `__llvm_rpc_client` on the shared CUDA/HIP backend, over the simulated driver: the executor
//! writes the server's client image into the module's symbol (layout from the symbol's size,
//! lane size from the warp size, the block in mapped memory), and mock device code then plays
//! the device: it reads the symbol, finds the block through it, and calls the server as a
//! 32- or 64-lane warp while the kernel runs from a plain `then_launch`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::GpuExecutor;
use super::mock::{DeviceCode, KERNELS_PTX, MockDriver};
use crate::executor_rpc::RANGE_PORTS;
use crate::rpc::{CLIENT_SYMBOL, Client, Layout, PrintfArg, Service, opcode};
use crate::{Error, MultiKernelLoaderSpec, StreamExecutor, TypedKernel};

/// PTX of a module built against LLVM's GPU libc: a kernel and the client global.
fn rpc_ptx(kernel: &str, symbol_bytes: usize) -> String {
    format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n\
         .visible .global .align 8 .b8 {CLIENT_SYMBOL}[{symbol_bytes}];\n\
         .visible .entry {kernel}(.param .u32 x) {{ ret; }}\n"
    )
}

fn executor(
    warp: u32,
    code: &[(&str, DeviceCode)],
) -> (StreamExecutor, Arc<super::mock::MockMemory>) {
    let drv = MockDriver::mapped(warp);
    for (name, c) in code {
        drv.set_device_code(name, c.clone());
    }
    let mem = drv.mem.clone();
    (
        StreamExecutor::new("mock", 0, GpuExecutor::new(drv).unwrap()),
        mem,
    )
}

fn load(
    exec: &StreamExecutor,
    kernel: &str,
    symbol_bytes: usize,
) -> crate::Result<TypedKernel<(u32,)>> {
    let spec = MultiKernelLoaderSpec::new(1)
        .add_cuda_ptx_in_memory(&rpc_ptx(kernel, symbol_bytes), kernel);
    exec.get_kernel(&spec)
}

/// The symbol's bytes as the device sees them.
fn symbol_bytes(exec: &StreamExecutor, k: &TypedKernel<(u32,)>) -> Vec<u8> {
    let (addr, n) = k.kernel.inner.rpc_client_symbol().unwrap();
    let mut out = vec![0xA5u8; n];
    // SAFETY: the backend reported `n` bytes of a module global at `addr`; modules live as long
    // as the executor.
    unsafe { exec.interface().memcpy_d2h_sync(addr, &mut out) }.unwrap();
    out
}

/// A client over `image` that gives up after a minute instead of hanging a broken test.
fn device_client(image: &[u8], lanes: usize) -> crate::Result<Client> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        s.store(true, Ordering::Relaxed);
    });
    // SAFETY: the mock maps host memory at its own address (UVA), and the executor keeps the
    // block alive while its kernels run; nothing else drives the block's client side.
    Ok(unsafe { Client::from_image_with_stop(image, lanes, Some(stop)) }?)
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

/// Deterministic per-lane test data (xorshift).
fn lane_bytes(seed: u64, lane: usize) -> Vec<u8> {
    let mut s = (seed ^ (lane as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    let n = (s % 300) as usize;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            b'a' + (s % 26) as u8
        })
        .collect()
}

#[test]
fn the_symbol_gets_the_client_image_for_both_layouts_and_warp_sizes() {
    for (warp, layout, bytes) in [
        (32, Layout::Current, 2096),
        (32, Layout::PreDoorbell, 552),
        (64, Layout::Current, 2096),
        (64, Layout::PreDoorbell, 552),
    ] {
        let (exec, _) = executor(warp, &[]);
        let k = load(&exec, "main", bytes).unwrap();
        assert!(k.kernel.rpc, "kernels of the module are RPC launches");
        let rpc = exec.rpc().unwrap();
        assert_eq!(rpc.config(), (layout, warp as usize));
        // The module's image sees the first range after the in-process client's.
        let (addr, _) = k.kernel.inner.rpc_client_symbol().unwrap();
        assert_eq!(rpc.image_first_port(addr), Some(RANGE_PORTS));
        let image = rpc.server().geometry().client_image_ports(
            rpc.server().device_address(),
            RANGE_PORTS,
            RANGE_PORTS,
        );
        assert_eq!(image.len(), bytes);
        assert_eq!(symbol_bytes(&exec, &k), image, "{layout:?} warp {warp}");
        // The block is the mapped allocation the image points at.
        let (_, first, _, _) =
            crate::rpc::Geometry::parse_client_image(&image, warp as usize).unwrap();
        assert_eq!(first, rpc.server().device_address());
        assert_eq!(
            rpc.server().buffer() as u64,
            first,
            "mapped at its host address"
        );
        // A second kernel of the same module neither fails nor rewrites anything.
        load(&exec, "main", bytes).unwrap();
    }
}

#[test]
fn a_module_without_the_symbol_starts_no_server() {
    let (exec, _) = executor(32, &[]);
    let spec = MultiKernelLoaderSpec::new(4).add_cuda_ptx_in_memory(KERNELS_PTX, "affine");
    let k: TypedKernel<(crate::DevicePtr<u32>, u32, u32, u32)> = exec.get_kernel(&spec).unwrap();
    assert!(!k.kernel.rpc);
    let dev = exec.allocate_array::<u32>(4).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_launch(4, 1, &k, (dev.ptr(), 4, 2, 1))
        .block_host_until_done()
        .unwrap();
    let mut out = [0u32; 4];
    exec.synchronous_memcpy_d2h(&dev, &mut out).unwrap();
    assert_eq!(out, [1; 4]);
    assert!(exec.rpc_cell().get().is_none(), "no server was started");
}

#[test]
fn an_unknown_symbol_size_is_refused_naming_the_accepted_ones() {
    let (exec, _) = executor(32, &[]);
    let err = load(&exec, "main", 96).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::KernelLoad { .. }), "{err:?}");
    for part in [CLIENT_SYMBOL, "96 bytes", "2096", "552"] {
        assert!(msg.contains(part), "`{part}` missing from: {msg}");
    }
    assert!(exec.rpc_cell().get().is_none());
}

#[test]
fn a_second_layout_on_one_executor_is_refused() {
    let (exec, _) = executor(32, &[]);
    load(&exec, "a", 2096).unwrap();
    let err = load(&exec, "b", 552).unwrap_err().to_string();
    assert!(
        err.contains("Current") && err.contains("PreDoorbell") && err.contains(CLIENT_SYMBOL),
        "{err}"
    );
    // The default server of a GPU executor already has the warp's lane size.
    let (exec, _) = executor(64, &[]);
    assert_eq!(exec.rpc().unwrap().config(), (Layout::Current, 64));
    load(&exec, "a", 2096).unwrap();
    let err = load(&exec, "b", 552).unwrap_err().to_string();
    assert!(err.contains("lane size 64"), "{err}");
}

/// A typed user service: a weighted sum of four words.
struct Weighted;
impl Service for Weighted {
    const OPCODE: u32 = 0x5E00_0001;
    type Request = [u32; 4];
    type Response = u64;
    fn call(&self, r: [u32; 4]) -> crate::rpc::Result<u64> {
        Ok(r.iter()
            .enumerate()
            .map(|(i, &w)| (i as u64 + 1) * u64::from(w))
            .sum())
    }
}

fn warp_code(lanes: usize, seed: u64) -> DeviceCode {
    Arc::new(move |image: &[u8]| {
        let client = device_client(image, lanes)?;
        // Every lane writes its own bytes (one port, one call for the warp).
        let full = if lanes == 64 {
            u64::MAX
        } else {
            (1u64 << lanes) - 1
        };
        let data: Vec<Vec<u8>> = (0..lanes).map(|l| lane_bytes(seed, l)).collect();
        let mut port = client.open_lanes(opcode::WRITE_TO_STDOUT, full)?;
        port.send_n(|l| &data[l])?;
        let mut counts = vec![u64::MAX; lanes];
        port.recv(|l, p| counts[l] = p[0])?;
        drop(port);
        for l in 0..lanes {
            if counts[l] != data[l].len() as u64 {
                return Err(Error::Rpc {
                    detail: format!("lane {l}: wrote {} of {}", counts[l], data[l].len()),
                });
            }
        }
        // printf from lane 0.
        client.printf(
            "|%d %s %.2f|\n",
            &[
                PrintfArg::Int(-42),
                PrintfArg::Str("warp"),
                PrintfArg::Double(2.5),
            ],
        )?;
        // The typed user service from odd lanes only.
        let mask = full & 0xAAAA_AAAA_AAAA_AAAA;
        let reqs: Vec<[u32; 4]> = (0..lanes as u32)
            .map(|l| [l, l * 3 + 1, seed as u32 ^ l, 7])
            .collect();
        let mut port = client.open_lanes(Weighted::OPCODE, mask)?;
        port.send_n(|l| bytemuck::bytes_of(&reqs[l]))?;
        let got = port.recv_n()?;
        for l in 0..lanes {
            let expect = if mask >> l & 1 == 1 {
                bytemuck::bytes_of(&Weighted.call(reqs[l]).unwrap()).to_vec()
            } else {
                Vec::new()
            };
            if got[l] != expect {
                return Err(Error::Rpc {
                    detail: format!("lane {l}: service replied {:?}", got[l]),
                });
            }
        }
        Ok(())
    })
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a minute under Miri (32 lanes of simulated device code through the server); the RPC memory code is Miri-checked by rpc::tests"
)]
fn device_code_writes_prints_and_calls_a_service_through_the_written_image() {
    for (warp, bytes) in [(32, 2096), (32, 552), (64, 2096)] {
        let seed = 0x5EED ^ bytes as u64 ^ warp as u64;
        let (exec, _) = executor(warp, &[("main", warp_code(warp as usize, seed))]);
        let k = load(&exec, "main", bytes).unwrap();
        let rpc = exec.rpc().unwrap();
        let out = Capture::default();
        rpc.set_stdout(Some(Box::new(out.clone())));
        rpc.server().register_service(Weighted).unwrap();
        let mut s = exec.create_stream().unwrap();
        // A plain launch: the module's symbol makes it an RPC launch (the server polls).
        s.then_launch(32, 1, &k, (0,))
            .block_host_until_done()
            .unwrap();
        let mut expected: Vec<u8> = (0..warp as usize)
            .flat_map(|l| lane_bytes(seed, l))
            .collect();
        expected.extend_from_slice(b"|-42 warp 2.50|\n");
        let got = out.0.lock().unwrap().clone();
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "warp {warp}, {bytes}-byte symbol"
        );
        assert!(rpc.server().take_errors().is_empty());
    }
}

#[test]
fn an_exit_fails_the_stream_of_the_one_running_launch() {
    let code: DeviceCode = Arc::new(|image: &[u8]| Ok(device_client(image, 32)?.exit(7)?));
    let idle: DeviceCode = Arc::new(|_: &[u8]| Ok(()));
    let (exec, _) = executor(32, &[("quits", code), ("idle", idle)]);
    let quits = load(&exec, "quits", 2096).unwrap();
    let idle = load(&exec, "idle", 2096).unwrap();
    let mut s = exec.create_stream().unwrap();
    let err = s
        .then_launch(32, 1, &quits, (0,))
        .block_host_until_done()
        .unwrap_err()
        .to_string();
    assert!(err.contains("kernel `quits` called exit(7)"), "{err}");
    // Later launches, on this executor's other streams, are not charged with it.
    let mut t = exec.create_stream().unwrap();
    t.then_launch(32, 1, &idle, (0,))
        .block_host_until_done()
        .unwrap();
    assert!(exec.rpc().unwrap().server().take_exits().is_empty());
}

#[test]
fn an_exit_while_two_launches_run_fails_both_and_says_so() {
    use std::sync::mpsc::channel;
    let (started_tx, started_rx) = channel::<()>();
    let (done_tx, done_rx) = channel::<()>();
    let (started_rx, done_tx) = (Mutex::new(started_rx), Mutex::new(done_tx));
    let (started_tx, done_rx) = (Mutex::new(started_tx), Mutex::new(done_rx));
    // `waits` runs until `aborts` has aborted; `aborts` aborts once `waits` runs.
    let waits: DeviceCode = Arc::new(move |_: &[u8]| {
        started_tx.lock().unwrap().send(()).unwrap();
        done_rx
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_secs(60))
            .unwrap();
        Ok(())
    });
    let aborts: DeviceCode = Arc::new(move |image: &[u8]| {
        started_rx.lock().unwrap().recv().unwrap();
        let c = device_client(image, 32)?;
        let mut port = c.open(opcode::ABORT)?;
        port.send_and_recv(|_, _| {}, |_, _| {})?;
        port.send(|_, _| {})?;
        drop(port);
        done_tx.lock().unwrap().send(()).unwrap();
        Ok(())
    });
    let (exec, _) = executor(32, &[("waits", waits), ("aborts", aborts)]);
    let kw = load(&exec, "waits", 552).unwrap();
    let ka = load(&exec, "aborts", 552).unwrap();
    let (mut s1, mut s2) = (exec.create_stream().unwrap(), exec.create_stream().unwrap());
    s1.then_launch(1, 1, &kw, (0,));
    s2.then_launch(1, 1, &ka, (0,));
    for s in [&mut s1, &mut s2] {
        let err = s.block_host_until_done().unwrap_err().to_string();
        assert!(
            err.contains("called abort() while 2 RPC launches ran")
                && err.contains("`waits`")
                && err.contains("`aborts`"),
            "{err}"
        );
    }
}
