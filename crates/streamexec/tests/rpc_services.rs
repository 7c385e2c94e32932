//! The built-in and user services through an executor's server (host platform): output to an
//! installed writer, printf, exit failing the stream, typed services, the Emissary dispatcher,
//! host calls, malloc, files, and an idle server costing no CPU.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use bytemuck::{Pod, Zeroable};
use rand::RngExt;
use streamexec::rpc::{self, Client, PrintfArg, Server, Service, opcode};
use streamexec::*;

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

fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap()
}

/// Tests in this file share the host executor (and its server); one kernel at a time, so an
/// `exit` is seen by the stream that launched it.
static ONE_KERNEL: Mutex<()> = Mutex::new(());

fn run_kernel(exec: &StreamExecutor, f: impl Fn(&Client) + Send + Sync + 'static) -> Result<()> {
    let _one = ONE_KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let client = exec.rpc().unwrap().client();
    let spec = MultiKernelLoaderSpec::new(1).add_host_kernel(HostKernel::new(
        "rpc_kernel",
        move |ctx, (_x,): (u32,)| {
            if ctx.global_id_x() == 0 {
                f(&client)
            }
        },
    ));
    let kernel: TypedKernel<(u32,)> = exec.get_kernel(&spec).unwrap();
    let mut stream = exec.create_stream().unwrap();
    stream
        .then_launch_with_rpc(ThreadDim::new(4, 1, 1), BlockDim::default(), &kernel, (0,))
        .block_host_until_done()
}

#[test]
fn kernel_output_goes_to_the_installed_writer() {
    let mut rng = common::rng("kernel_output_goes_to_the_installed_writer");
    let exec = host();
    let (out, err) = (Capture::default(), Capture::default());
    let rpc = exec.rpc().unwrap();
    rpc.set_stdout(Some(Box::new(out.clone())));
    rpc.set_stderr(Some(Box::new(err.clone())));
    let (i, f): (i32, f64) = (rng.random_range(-1000..1000), rng.random_range(-10.0..10.0));
    let expected = format!("Hello world!\ni={i} f={f:.3} s=<abc> {:>5}|\n", "x");
    run_kernel(&exec, move |c| {
        assert_eq!(c.puts("Hello world!").unwrap(), 13);
        let n = c
            .printf(
                "i=%d f=%.3f s=<%s> %5s|\n",
                &[
                    PrintfArg::Int(i),
                    PrintfArg::Double(f),
                    PrintfArg::Str("abc"),
                    PrintfArg::Str("x"),
                ],
            )
            .unwrap();
        assert!(n > 0);
        c.write_stderr(b"to stderr").unwrap();
    })
    .unwrap();
    assert_eq!(out.text(), expected);
    assert_eq!(err.text(), "to stderr");
    rpc.set_stdout(None);
    rpc.set_stderr(None);
}

#[test]
fn exit_fails_the_launching_stream_and_the_process_lives() {
    let exec = host();
    let err = run_kernel(&exec, |c| c.exit(3).unwrap()).unwrap_err();
    assert!(err.to_string().contains("exit(3)"), "{err}");
    run_kernel(&exec, |c| c.noop().unwrap()).unwrap();
}

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Req {
    a: [f64; 20],
    k: u32,
    _pad: u32,
}

struct Scale;

impl Service for Scale {
    const OPCODE: u32 = 0x5500_0001;
    type Request = Req;
    type Response = [f64; 20];
    fn call(&self, r: Req) -> rpc::Result<[f64; 20]> {
        if r.k == 0 {
            return Err(rpc::Error::Rpc {
                detail: "k must not be 0".into(),
            });
        }
        Ok(r.a.map(|x| x * f64::from(r.k)))
    }
}

struct Reserved;

impl Service for Reserved {
    const OPCODE: u32 = opcode::libc(100);
    type Request = u32;
    type Response = u32;
    fn call(&self, r: u32) -> rpc::Result<u32> {
        Ok(r)
    }
}

#[test]
fn typed_services_emissary_and_host_calls() {
    let mut rng = common::rng("typed_services_emissary_and_host_calls");
    let server = Server::new(rpc::Layout::Current, 4, 1).unwrap();
    server.register_service(Scale).unwrap();
    let e = server.register_service(Reserved).unwrap_err();
    assert!(e.to_string().contains("reserved"), "{e}");
    assert!(rpc::check_user_opcode(opcode::offload(7)).is_err());
    server
        .register_emissary(
            rpc::EmissaryApi::new(7, "scale").function(1, "mul", 2, |c| {
                let b = f64::from_bits(c.u64(1)?);
                Ok(rpc::EmissaryReply::ret(
                    (f64::from(c.i32(0)?) * b).to_bits() as i64,
                ))
            }),
        )
        .unwrap();
    extern "C" fn sum_bytes(p: *mut std::ffi::c_void) -> u64 {
        // SAFETY: the test passes a 16-byte blob.
        let b = unsafe { std::slice::from_raw_parts(p as *const u8, 16) };
        b.iter().map(|&x| u64::from(x)).sum()
    }
    let f = server.register_host_function(sum_bytes);
    let t = server.spawn().unwrap();
    let c = t.client();

    let req = Req {
        a: rng.random(),
        k: rng.random_range(1..100),
        _pad: 0,
    };
    let got = c.call_service::<Scale>(&req).unwrap();
    for (g, x) in got.iter().zip(req.a) {
        assert_eq!(*g, x * f64::from(req.k));
    }
    let bad = c.call_service::<Scale>(&Req { k: 0, ..req }).unwrap_err();
    assert!(bad.to_string().contains("RPC_ERROR"), "{bad}");

    let (a, b): (i32, f64) = (rng.random_range(-50..50), rng.random());
    let args = [rpc::EmissaryArg::i32(a), rpc::EmissaryArg::u64(b.to_bits())];
    let r = c.emissary(7, 1, &args).unwrap();
    assert_eq!(f64::from_bits(r.ret as u64), f64::from(a) * b);
    let e = c.emissary(7, 2, &args).unwrap_err();
    assert!(e.to_string().contains("UnknownFunction"), "{e}");
    let e = c.emissary(7, 1, &args[..1]).unwrap_err();
    assert!(e.to_string().contains("BadArguments"), "{e}");
    let logged = t.server().take_errors();
    assert!(
        logged
            .iter()
            .any(|m| m.contains("function 2 of API `scale`"))
            && logged
                .iter()
                .any(|m| m.contains("takes 2 arguments; the call sent 1")),
        "{logged:?}"
    );

    let blob: [u8; 16] = rng.random();
    let want: u64 = blob.iter().map(|&x| u64::from(x)).sum();
    assert_eq!(c.host_call(f, &blob).unwrap(), want);
    assert!(c.host_call(f + 1, &blob).is_err(), "unregistered pointer");
    let short = c.call(0x5500_0001, b"short").unwrap_err();
    assert!(short.to_string().contains("RPC_ERROR"), "{short}");
}

#[test]
fn malloc_gives_executor_memory() {
    let exec = host();
    let c = exec.rpc().unwrap().client();
    // Free memory is the system's: another process may free some meanwhile, so one of a few
    // tries must see the allocation take memory.
    let mut took = false;
    for _ in 0..5 {
        let before = exec.memory_usage().unwrap().free;
        let p = c.malloc(1 << 20).unwrap();
        assert_ne!(p, 0);
        took |= exec.memory_usage().unwrap().free <= before;
        c.free(p).unwrap();
        if took {
            break;
        }
    }
    assert!(took, "RPC malloc never took executor memory");
}

/// OPEN_FILE, WRITE_TO_STREAM, FTELL, FSEEK, READ_FROM_STREAM, FEOF, CLOSE_FILE, RENAME and
/// REMOVE, driven packet by packet as libc's client does.
#[test]
fn file_opcodes() {
    let mut rng = common::rng("file_opcodes");
    let t = Server::new(rpc::Layout::PreDoorbell, 2, 1)
        .unwrap()
        .spawn()
        .unwrap();
    let c = t.client();
    let dir = std::env::temp_dir().join(format!("streamexec-rpc-{}", rng.random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.txt");
    let cpath = |p: &std::path::Path| {
        let mut v = p.to_str().unwrap().as_bytes().to_vec();
        v.push(0);
        v
    };
    let open = |p: &[u8], mode: &[u8]| {
        let mut port = c.open(opcode::OPEN_FILE).unwrap();
        port.send_n(|_| p).unwrap();
        let mut h = 0;
        port.send_and_recv(
            |_, pk| {
                *pk = [0; 8];
                bytemuck::cast_slice_mut::<u64, u8>(pk)[..mode.len()].copy_from_slice(mode)
            },
            |_, pk| h = pk[0],
        )
        .unwrap();
        h
    };
    let word = |op: u32, w: [u64; 3]| {
        c.call_packet(op, [w[0], w[1], w[2], 0, 0, 0, 0, 0])
            .unwrap()[0]
    };
    let h = open(&cpath(&path), b"w+");
    assert!(h != 0 && h & 3 == 0);
    let data: Vec<u8> = (0..rng.random_range(1..3000))
        .map(|_| rng.random())
        .collect();
    let mut port = c.open(opcode::WRITE_TO_STREAM).unwrap();
    port.send(|_, p| p[0] = h).unwrap();
    port.send_n(|_| &data).unwrap();
    let mut n = 0;
    port.recv(|_, p| n = p[0]).unwrap();
    drop(port);
    assert_eq!(n, data.len() as u64);
    assert_eq!(word(opcode::FTELL, [h, 0, 0]), data.len() as u64);
    assert_eq!(word(opcode::FSEEK, [h, 0, 0]), 0);
    let mut port = c.open(opcode::READ_FROM_STREAM).unwrap();
    port.send(|_, p| {
        p[0] = 100_000;
        p[1] = h
    })
    .unwrap();
    let got = port.recv_n().unwrap();
    let mut count = 0;
    port.recv(|_, p| count = p[0]).unwrap();
    drop(port);
    assert_eq!(got[0], data);
    assert_eq!(count, data.len() as u64);
    assert_eq!(word(opcode::FEOF, [h, 0, 0]), 1);
    assert_eq!(word(opcode::CLOSE_FILE, [h, 0, 0]), 0);
    assert_eq!(
        word(opcode::CLOSE_FILE, [h, 0, 0]),
        u64::MAX,
        "closed twice"
    );
    assert_eq!(
        word(opcode::FTELL, [0x1234_5000, 0, 0]),
        u64::MAX,
        "garbage handle"
    );
    assert_eq!(std::fs::read(&path).unwrap(), data);
    let new = dir.join("b.txt");
    let mut port = c.open(opcode::RENAME).unwrap();
    let (old_c, new_c) = (cpath(&path), cpath(&new));
    port.send_n(|_| &old_c).unwrap();
    port.send_n(|_| &new_c).unwrap();
    let mut r = 1;
    port.recv(|_, p| r = p[0]).unwrap();
    drop(port);
    assert_eq!(r, 0);
    assert!(new.exists() && !path.exists());
    let mut port = c.open(opcode::REMOVE).unwrap();
    port.send_n(|_| &new_c).unwrap();
    port.recv(|_, p| r = p[0]).unwrap();
    drop(port);
    assert_eq!(r, 0);
    assert!(!new.exists());
    std::fs::remove_dir(&dir).unwrap();
}

/// API 21 for the pointer tests: `negate(ptr, n)` negates `n` i32s and answers whether they
/// were used in place (out value 0) and their old sum (the return value).
fn negate_api() -> rpc::EmissaryApi {
    rpc::EmissaryApi::new(21, "negate").function(1, "negate", 2, |c| {
        let n = c.i32(1)? as usize;
        let buf = c.buffer(0, 4 * n as u64)?;
        let mut sum = 0i64;
        for k in 0..n {
            // SAFETY: `buf` holds 4 * n bytes.
            unsafe {
                let p = buf.as_mut_ptr().add(4 * k).cast::<i32>();
                sum += i64::from(p.read_unaligned());
                p.write_unaligned(p.read_unaligned().wrapping_neg());
            }
        }
        let in_place = buf.is_in_place();
        buf.write_back()?;
        let mut r = rpc::EmissaryReply::ret(sum);
        r.outs[0] = u64::from(in_place);
        Ok(r)
    })
}

/// Emissary pointer arguments on every platform's server: device memory is used in place on
/// host and staged (copied in, then back) elsewhere; unified memory is in place at the address
/// kernels see; pointers outside live allocations, freed memory and overlong ranges are
/// refused with BAD_POINTER and the reason logged, and the server goes on.
#[test]
fn emissary_pointers_are_resolved_in_place_or_staged() {
    let mut rng = common::rng("emissary_pointers_are_resolved_in_place_or_staged");
    for exec in common::executors() {
        let name = exec.platform_name();
        let Ok(rpc) = exec.rpc() else {
            eprintln!("{name}: no RPC; skipped");
            continue;
        };
        rpc.server().register_emissary(negate_api()).unwrap();
        let client = rpc.client();
        let n = 257;
        let values: Vec<i32> = (0..n).map(|_| rng.random()).collect();
        let (lo, hi) = (rng.random_range(0..n / 2), rng.random_range(n / 2..n));
        let call = |addr: u64, count: usize| {
            client.emissary(
                21,
                1,
                &[
                    rpc::EmissaryArg::Device(addr),
                    rpc::EmissaryArg::i32(count as i32),
                ],
            )
        };
        let want_sum: i64 = values[lo..hi].iter().map(|&v| i64::from(v)).sum();
        let want: Vec<i32> = (0..n)
            .map(|k| {
                if (lo..hi).contains(&k) {
                    values[k].wrapping_neg()
                } else {
                    values[k]
                }
            })
            .collect();

        let dev = exec.copy_to_device(&values).unwrap();
        let r = call(dev.address().raw() + 4 * lo as u64, hi - lo).unwrap();
        assert_eq!(r.ret, want_sum, "{name}");
        assert_eq!(
            r.outs[0],
            u64::from(name == "host"),
            "{name}: in place on host only"
        );
        assert_eq!(
            exec.copy_to_vec(&dev).unwrap(),
            want,
            "{name}: device memory"
        );

        if let Ok(uni) = exec.allocate_unified::<i32>(n) {
            for (k, &v) in values.iter().enumerate() {
                uni.store(k, v);
            }
            // Where a kernel sees unified memory: its host address on OpenCL (SVM), its
            // device address elsewhere.
            let seen = if name == "opencl" {
                uni.host_ptr() as u64
            } else {
                uni.ptr().address().raw()
            };
            let r = call(seen + 4 * lo as u64, hi - lo).unwrap();
            assert_eq!(
                (r.ret, r.outs[0]),
                (want_sum, 1),
                "{name}: unified in place"
            );
            let got: Vec<i32> = (0..n).map(|k| uni.load(k)).collect();
            assert_eq!(got, want, "{name}: unified memory");
        }

        rpc.server().take_errors();
        let base = dev.address().raw();
        for (addr, count, why) in [
            (base + 4, n, "not inside one live allocation"),
            (8, 1, "not inside one live allocation"),
        ] {
            let e = call(addr, count).unwrap_err();
            assert!(e.to_string().contains("BadPointer"), "{name}: {e}");
            let logged = rpc.server().take_errors();
            assert!(
                logged.len() == 1 && logged[0].contains(why),
                "{name}: {logged:?}"
            );
        }
        drop(dev);
        let e = call(base, 1).unwrap_err();
        assert!(
            e.to_string().contains("BadPointer"),
            "{name}: freed memory: {e}"
        );
        rpc.server().take_errors();
    }
}

/// A whole warp in one round trip: the odd lanes of a 32-lane port each send their own buffer
/// (some malformed or naming a missing function); every lane gets its own reply, and the bad
/// lanes do not spoil the good ones.
#[test]
fn a_warp_of_emissary_calls_is_one_round_trip_with_a_reply_per_lane() {
    let mut rng = common::rng("a_warp_of_emissary_calls_is_one_round_trip_with_a_reply_per_lane");
    let server = Server::new(rpc::Layout::Current, 8, 32).unwrap();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    server
        .register_emissary(
            rpc::EmissaryApi::new(40, "mix").function(2, "mix", 2, move |c| {
                seen.lock().unwrap().push(c.lane());
                let (a, b) = (c.i32(0)?, c.u64(1)?);
                let mut r = rpc::EmissaryReply::ret(i64::from(a) * 3);
                r.outs = [b, b ^ 1, b ^ 2, b ^ 3, b ^ 4, c.lane() as u64];
                Ok(r)
            }),
        )
        .unwrap();
    let t = server.spawn().unwrap();
    let c = t.client();
    let mask: u64 = 0xAAAA_AAAA;
    let a: Vec<i32> = (0..32).map(|_| rng.random()).collect();
    let b: Vec<u64> = (0..32).map(|_| rng.random()).collect();
    let buffers: Vec<Vec<u8>> = (0..32)
        .map(|l| match l {
            5 => vec![0u8; 7],
            7 => rpc::encode_emissary(40, 9, &[]),
            _ => rpc::encode_emissary(
                40,
                2,
                &[rpc::EmissaryArg::i32(a[l]), rpc::EmissaryArg::u64(b[l])],
            ),
        })
        .collect();
    let mut port = c.open_lanes(opcode::OFFLOAD_EMISSARY, mask).unwrap();
    port.send_n(|l| &buffers[l]).unwrap();
    let mut replies = vec![[u64::MAX; 8]; 32];
    port.recv(|l, p| replies[l] = *p).unwrap();
    drop(port);
    for l in 0..32 {
        let want = match l {
            _ if mask >> l & 1 == 0 => [u64::MAX; 8],
            5 => [
                rpc::EmissaryStatus::BadArguments as u64,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ],
            7 => [
                rpc::EmissaryStatus::UnknownFunction as u64,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ],
            _ => {
                let x = b[l];
                [
                    0,
                    (i64::from(a[l]) * 3) as u64,
                    x,
                    x ^ 1,
                    x ^ 2,
                    x ^ 3,
                    x ^ 4,
                    l as u64,
                ]
            }
        };
        assert_eq!(replies[l], want, "lane {l}");
    }
    let want_lanes: Vec<usize> = (0..32)
        .filter(|l| mask >> l & 1 == 1 && *l != 5 && *l != 7)
        .collect();
    assert_eq!(
        *calls.lock().unwrap(),
        want_lanes,
        "lanes served in lane order"
    );
    let logged = t.server().take_errors();
    assert_eq!(logged.len(), 2, "{logged:?}");
}
