//! The standalone RPC server and the in-process client: round trips in both layouts, send_n /
//! recv_n of every size, 32-lane warps with partial masks, error replies, shutdown, and a
//! 256-thread stress test.

use streamexec_test_support as common;

use rand::{Rng, RngExt};
use streamexec_rpc::Error;
use streamexec_rpc::{
    Client, Layout, Port, RPC_ERROR, RPC_UNHANDLED_OPCODE, Server, Wait, error_reply,
};

const ECHO: u32 = 0x1234_0001;
const INCREMENT: u32 = 0x1234_0002;

/// Echoes every lane's stream back.
fn echo(port: &mut Port<'_>) -> streamexec_rpc::Result<()> {
    let lanes = port.recv_n()?;
    port.send_n(|l| &lanes[l])
}

fn server(layout: Layout, ports: usize, lanes: usize) -> Server {
    let s = Server::new(layout, ports, lanes).unwrap();
    s.register(ECHO, echo);
    s.register(INCREMENT, |port| {
        port.recv_and_send(|_, p| {
            for w in p.iter_mut() {
                *w = w.wrapping_add(1)
            }
        })
    });
    s
}

fn random_bytes(rng: &mut impl Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

#[test]
fn both_layouts_round_trip_packets_and_streams() {
    let mut rng = common::rng("both_layouts_round_trip_packets_and_streams");
    for layout in [Layout::Current, Layout::PreDoorbell] {
        let thread = server(layout, 4, 1).spawn().unwrap();
        let client = thread.client();
        for _ in 0..20 {
            let req: [u64; 8] = rng.random();
            let got = client.call_packet(INCREMENT, req).unwrap();
            assert_eq!(got, req.map(|w| w.wrapping_add(1)), "{layout:?}");
        }
        // Every size around the packet boundaries, then random ones.
        let sizes = (0..200).chain([1000, 4095, 4096, 4097, rng.random_range(0..100_000)]);
        for n in sizes {
            let data = random_bytes(&mut rng, n);
            let got = client.call(ECHO, &data).unwrap();
            assert_eq!(got, data, "{layout:?}, {n} bytes");
        }
        thread.stop();
    }
}

#[test]
fn the_client_image_points_into_the_buffer() {
    for (layout, size, first_ptr) in [(Layout::Current, 2096, 8), (Layout::PreDoorbell, 552, 8)] {
        let s = Server::new(layout, 64, 32).unwrap();
        let img = s.client_image();
        assert_eq!(img.len(), size);
        assert_eq!(u32::from_le_bytes(img[0..4].try_into().unwrap()), 64);
        let p = u64::from_le_bytes(img[first_ptr..first_ptr + 8].try_into().unwrap());
        assert_eq!(
            p,
            s.buffer() as u64,
            "{layout:?}: first pointer is the block"
        );
        assert_eq!(s.buffer() as usize % 64, 0);
        assert_eq!(s.allocation_size(), s.geometry().allocation_size());
    }
}

#[test]
fn a_32_lane_warp_with_partial_masks() {
    let mut rng = common::rng("a_32_lane_warp_with_partial_masks");
    let thread = server(Layout::Current, 2, 32).spawn().unwrap();
    let client = thread.client();
    for round in 0..40 {
        let mask: u64 = match round {
            0 => 1,
            1 => 0xFFFF_FFFF,
            2 => 0x8000_0000,
            _ => rng.random::<u32>() as u64 | 1 << rng.random_range(0..32),
        };
        let data: Vec<Vec<u8>> = (0..32)
            .map(|_| {
                let n = rng.random_range(0..600);
                random_bytes(&mut rng, n)
            })
            .collect();
        let mut port = client.open_lanes(ECHO, mask).unwrap();
        assert_eq!(port.mask(), mask);
        port.send_n(|l| &data[l]).unwrap();
        let got = port.recv_n().unwrap();
        drop(port);
        for lane in 0..32 {
            if mask >> lane & 1 == 1 {
                assert_eq!(got[lane], data[lane], "mask {mask:#x} lane {lane}");
            } else {
                assert!(got[lane].is_empty(), "inactive lane {lane} got data");
            }
        }
        // Packets: inactive lanes are neither filled nor handed to `use`.
        let mut port = client.open_lanes(INCREMENT, mask).unwrap();
        let mut seen = 0u64;
        let mut values = [0u64; 32];
        port.send_and_recv(
            |l, p| p[2] = 1000 + l as u64,
            |l, p| {
                seen |= 1 << l;
                values[l] = p[2];
            },
        )
        .unwrap();
        assert_eq!(seen, mask);
        for l in (0..32).filter(|l| mask >> l & 1 == 1) {
            assert_eq!(values[l], 1001 + l as u64);
        }
    }
    assert!(client.open_lanes(ECHO, 0).is_err(), "empty mask");
    assert!(client.open_lanes(ECHO, 1 << 32).is_err(), "lane past 32");
}

#[test]
fn an_unknown_opcode_gets_an_error_reply_and_a_log_line() {
    let thread = server(Layout::Current, 2, 1).spawn().unwrap();
    let client = thread.client();
    let err = client.call_packet(0x4242_0000, [1; 8]).unwrap_err();
    assert!(
        matches!(&err, Error::Rpc { detail } if detail.contains("RPC_UNHANDLED_OPCODE")),
        "{err}"
    );
    // A multi-packet request of an unknown opcode drains without hanging the client.
    let err = client.call(0x4242_0001, &[7u8; 1000]).unwrap_err();
    assert!(err.to_string().contains("RPC_UNHANDLED_OPCODE"), "{err}");
    // The raw reply carries the status in word 0.
    let mut port = client.open(0x4242_0002).unwrap();
    let mut reply = [0u64; 8];
    port.send_and_recv(|_, _| {}, |_, p| reply = *p).unwrap();
    drop(port);
    assert_eq!(error_reply(&reply), Some(RPC_UNHANDLED_OPCODE));
    assert_eq!(reply[0], u64::from(RPC_UNHANDLED_OPCODE));
    let log = thread.take_errors();
    assert!(log.iter().any(|l| l.contains("0x42420000")), "{log:?}");
    // The server still works.
    assert_eq!(client.call(ECHO, b"still here").unwrap(), b"still here");
}

#[test]
fn a_handler_that_panics_or_fails_gets_an_error_reply() {
    let thread = server(Layout::PreDoorbell, 2, 1).spawn().unwrap();
    thread.register(0x5000_0001, |port| {
        port.recv(|_, _| {})?;
        panic!("handler bug")
    });
    thread.register(0x5000_0002, |port| {
        port.recv(|_, _| {})?;
        Err(Error::Rpc {
            detail: "no such thing".into(),
        })
    });
    let client = thread.client();
    for op in [0x5000_0001, 0x5000_0002] {
        let mut port = client.open(op).unwrap();
        let mut reply = [0u64; 8];
        port.send_and_recv(|_, p| p[0] = 5, |_, p| reply = *p)
            .unwrap();
        assert_eq!(error_reply(&reply), Some(RPC_ERROR));
    }
    let log = thread.take_errors();
    assert!(log.iter().any(|l| l.contains("handler bug")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("no such thing")), "{log:?}");
    assert_eq!(client.call(ECHO, b"ok").unwrap(), b"ok");
}

#[test]
fn poll_serves_every_pending_port_once() {
    let s = server(Layout::Current, 8, 1);
    let client = s.client();
    assert_eq!(s.poll().unwrap(), 0);
    let mut ports: Vec<_> = (0..3).map(|_| client.open(INCREMENT).unwrap()).collect();
    for p in &mut ports {
        p.send(|_, p| p[0] = 1).unwrap();
    }
    assert_eq!(s.poll().unwrap(), 3);
    for p in &mut ports {
        let mut got = 0;
        p.recv(|_, p| got = p[0]).unwrap();
        assert_eq!(got, 2);
    }
    drop(ports);
    assert_eq!(s.poll().unwrap(), 0);
}

#[test]
fn a_client_waiting_on_a_stopped_server_fails_instead_of_hanging() {
    let s = server(Layout::Current, 1, 1);
    let client = s.client();
    let waiter = std::thread::spawn(move || client.call_packet(INCREMENT, [0; 8]));
    std::thread::sleep(std::time::Duration::from_millis(50));
    drop(s); // never polled
    let err = waiter.join().unwrap().unwrap_err();
    assert!(err.to_string().contains("shut down"), "{err}");
}

#[test]
fn bad_geometry_and_memory_are_errors() {
    assert!(Server::new(Layout::Current, 0, 1).is_err());
    assert!(Server::new(Layout::PreDoorbell, 5000, 1).is_err());
    assert!(Server::new(Layout::Current, 1, 8).is_err());
    // SAFETY: rejected before the pointer is used.
    let r = unsafe { Server::with_memory(Layout::Current, 1, 1, 3 as *mut u8, 3) };
    assert!(r.is_err());
}

#[test]
fn with_memory_uses_the_callers_block() {
    let s0 = Server::new(Layout::PreDoorbell, 2, 1).unwrap();
    let mut block = vec![0xAAu64; s0.allocation_size() / 8 + 1];
    let base = block.as_mut_ptr() as *mut u8;
    // SAFETY: `block` outlives the server and is not touched while it lives.
    let s = unsafe { Server::with_memory(Layout::PreDoorbell, 2, 1, base, 0x1000) }.unwrap();
    s.register(ECHO, echo);
    assert_eq!(s.buffer(), base);
    assert_eq!(s.device_address(), 0x1000);
    let t = s.spawn().unwrap();
    assert_eq!(t.client().call(ECHO, &[9; 300]).unwrap(), vec![9; 300]);
    t.stop();
}

/// 256 client threads × 200 calls through send_n / recv_n, echoed and verified byte for byte.
/// One call in 50 draws its size from 0..=64 KiB, the others from 0..=256 B: the debug build
/// moves only a few MB/s through 64-byte hand-offs on this 2-core VM.
#[test]
fn stress_256_threads_200_calls_each() {
    stress(Clients::InProcess, 256, 200, 50);
}

/// 64 clients that only spin (as GPU lanes and LLVM's own client do: they never yield, sleep or
/// wake the server), far more than this machine's cores, × 20 calls each of uniform 0..=64 KiB,
/// every byte checked. Run by the README's test command in a release build (`cargo test
/// --release --test rpc -- --ignored`); a debug build takes minutes.
#[test]
#[ignore]
fn stress_spinning_clients_uniform_sizes() {
    stress(Clients::Spinning, 64, 20, 1);
}

/// Who calls in `stress`.
#[derive(Clone, Copy)]
enum Clients {
    /// The server's in-process client (parks, wakes the server).
    InProcess,
    /// A client over the client image that only spins.
    Spinning,
}

fn stress(kind: Clients, threads: usize, calls: usize, large_one_in: u32) {
    let seed: u64 = common::rng("stress").random();
    let thread = server(Layout::Current, 64, 1).spawn().unwrap();
    let client = match kind {
        Clients::InProcess => thread.client(),
        // SAFETY: the block is the server's own host memory, alive until `thread` drops after
        // the calls; this is the only client half over it.
        Clients::Spinning => unsafe {
            Client::from_image_waiting(&thread.client_image(), 1, Wait::Spin).unwrap()
        },
    };
    let bytes = std::sync::atomic::AtomicU64::new(0);
    let t0 = std::time::Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            let client = client.clone();
            let bytes = &bytes;
            scope.spawn(move || {
                use rand::SeedableRng;
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ t as u64);
                for c in 0..calls {
                    let max = if rng.random_ratio(1, large_one_in) {
                        64 * 1024
                    } else {
                        256
                    };
                    let n = rng.random_range(0..=max);
                    let mut data = vec![0u8; n];
                    rng.fill_bytes(&mut data);
                    let got = client.call(ECHO, &data).unwrap();
                    assert!(got == data, "thread {t} call {c}: {n} bytes differ");
                    bytes.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    eprintln!(
        "stress: {} KiB echoed in {:?}",
        bytes.into_inner() / 1024,
        t0.elapsed()
    );
    assert!(thread.take_errors().is_empty());
}

/// A client that cannot wake the server (one over the client image, as a device is) is served
/// by a server thread that has been idle long enough to park for its longest, with no kernel
/// marked in flight; it rings the doorbell, which the server fills in and takes back.
#[test]
fn a_client_that_cannot_wake_the_server_is_served_by_an_idle_server() {
    let thread = server(Layout::Current, 8, 1).spawn().unwrap();
    let base = thread.buffer();
    let word = |off: usize| {
        // SAFETY: the block is 8-aligned host memory of the running server, at least 64 bytes,
        // and its doorbell words are only accessed atomically.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(base.add(off) as *mut u64) }
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let dev = thread.device_address();
    assert_eq!((word(0), word(8), word(16)), (dev + 32, dev + 40, 0));
    std::thread::sleep(std::time::Duration::from_millis(300));
    for wait in [Wait::Spin, Wait::GiveWay] {
        // SAFETY: as in `stress`; one client half at a time.
        let client =
            unsafe { Client::from_image_waiting(&thread.client_image(), 1, wait) }.unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            let got = client.call(ECHO, &[7; 1000]);
            let _ = tx.send((got, t0.elapsed()));
        });
        let (got, took) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the idle server never served a client that cannot wake it");
        assert_eq!(got.unwrap(), vec![7; 1000]);
        eprintln!("{wait:?} client served by an idle server in {took:?}");
        assert_eq!(word(32), 0, "every ring taken back");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}
