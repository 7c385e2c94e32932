//! RPC costs, each next to a crossbeam channel pair (request channel + per-client reply
//! channel, one responder thread) in the same run:
//!
//! - `round_trip`: one client thread, an empty request and reply (one packet each way).
//! - `throughput/{1,8,64}`: that many client threads calling at once (each gets its own port;
//!   the server has 64), reported per call.
//!
//! Run with `cargo bench --bench rpc`.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use crossbeam_channel::{Sender, bounded, unbounded};
use streamexec::rpc::{Client, Layout, Server, ServerThread};

const OP: u32 = 0x5500_0000;

fn rpc_server() -> ServerThread {
    let s = Server::new(Layout::Current, 64, 1).expect("server");
    s.register(OP, |port| port.recv_and_send(|_, p| p[0] += 1));
    s.spawn()
}

type Request = (u64, Sender<u64>);

fn channel_server() -> (Sender<Request>, std::thread::JoinHandle<()>) {
    let (tx, rx) = unbounded::<Request>();
    let h = std::thread::spawn(move || {
        for (v, reply) in rx {
            let _ = reply.send(v + 1);
        }
    });
    (tx, h)
}

fn rpc_calls(c: &Client, n: u64) {
    for i in 0..n {
        let r = c.call_packet(OP, [i, 0, 0, 0, 0, 0, 0, 0]).expect("rpc");
        assert_eq!(r[0], i + 1);
    }
}

fn channel_calls(tx: &Sender<Request>, n: u64) {
    let (rtx, rrx) = bounded(1);
    for i in 0..n {
        tx.send((i, rtx.clone())).expect("send");
        assert_eq!(rrx.recv().expect("recv"), i + 1);
    }
}

/// Runs `threads` clients doing `per_thread` calls each; returns the elapsed time, which
/// criterion divides by the total number of calls.
fn parallel(threads: u64, per_thread: u64, call: impl Fn(u64) + Sync) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| call(per_thread));
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let server = rpc_server();
    let client = server.client();
    let (tx, handle) = channel_server();

    let mut g = c.benchmark_group("round_trip");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    g.bench_function("rpc", |b| {
        b.iter_custom(|n| parallel(1, n, |k| rpc_calls(&client, k)))
    });
    g.bench_function("crossbeam", |b| {
        b.iter_custom(|n| parallel(1, n, |k| channel_calls(&tx, k)))
    });
    g.finish();

    let mut g = c.benchmark_group("throughput");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for threads in [1u64, 8, 64] {
        g.bench_function(format!("rpc/{threads}"), |b| {
            b.iter_custom(|n| parallel(threads, n.div_ceil(threads), |k| rpc_calls(&client, k)))
        });
        g.bench_function(format!("crossbeam/{threads}"), |b| {
            b.iter_custom(|n| parallel(threads, n.div_ceil(threads), |k| channel_calls(&tx, k)))
        });
    }
    g.finish();
    drop(tx);
    handle.join().expect("channel server");
}

criterion_group!(benches, bench);
criterion_main!(benches);
