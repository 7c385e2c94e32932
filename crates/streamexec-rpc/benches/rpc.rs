//! RPC costs, each next to a crossbeam channel pair (request channel + per-client reply
//! channel, one responder thread) in the same run:
//!
//! - `round_trip`: one client thread, an empty request and reply (one packet each way).
//! - `throughput/{1,8,64}`: that many client threads calling at once (each gets its own port;
//!   the server has 64), reported per call.
//!
//! - `spin_clients/{1,2,4,8,32}`: that many clients that only spin (as GPU lanes and LLVM's
//!   own client do: no notify, no yield, no sleep), each echoing 0..=5000 random bytes per call
//!   (every byte checked), per call; against the same clients served by a thread that calls
//!   `poll` in a loop and never parks (the best polling server we can build from the same
//!   protocol code).
//!
//! - `spin_clients_loaded/1`: one such client while another process (`sh` in a busy loop, started
//!   by the bench as a shell's background job would be) keeps one core busy; `ours/1` against
//!   `polling/1`. The longest single call of each (but the first of each batch) is written to
//!   `<criterion dir>/spin_clients_loaded/longest_call.json` (for `scripts/bench-report.py`).
//!
//! Run with `cargo bench --bench rpc`.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use crossbeam_channel::{Sender, bounded, unbounded};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use streamexec_rpc::{Client, Layout, Port, Server, ServerThread, Wait};

const OP: u32 = 0x5500_0000;
const ECHO: u32 = 0x5500_0001;

fn echo(port: &mut Port<'_>) -> streamexec_rpc::Result<()> {
    let lanes = port.recv_n()?;
    port.send_n(|l| &lanes[l])
}

/// A spin-only client of `server`, as a device would be (from the client image).
fn spin_client(server: &Server) -> Client {
    // SAFETY: the block is host memory that the server keeps alive for the whole bench; the
    // bench's spin clients are the only users of its client side.
    unsafe { Client::from_image_waiting(&server.client_image(), 1, Wait::Spin) }.expect("client")
}

/// 64 messages of 0..=5000 pseudo-random bytes (xorshift), different per client.
fn messages(seed: u64) -> Vec<Vec<u8>> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..64)
        .map(|_| {
            let n = (next() % 5001) as usize;
            (0..n).map(|_| next() as u8).collect()
        })
        .collect()
}

fn echo_calls(c: &Client, msgs: &[Vec<u8>], n: u64) {
    for i in 0..n as usize {
        let m = &msgs[i % msgs.len()];
        assert!(c.call(ECHO, m).expect("rpc") == *m, "echo differs");
    }
}

/// As [`echo_calls`], timing each call: the longest but the first. The first call of a batch
/// follows criterion's pause between samples, long enough for an idle server to be in its
/// longest park (10 ms for clients that cannot wake it), which is not a stall under load.
fn echo_calls_longest(c: &Client, msgs: &[Vec<u8>], n: u64) -> Duration {
    let mut longest = Duration::ZERO;
    for i in 0..n as usize {
        let m = &msgs[i % msgs.len()];
        let start = Instant::now();
        let got = c.call(ECHO, m).expect("rpc");
        if i > 0 {
            longest = longest.max(start.elapsed());
        }
        assert!(got == *m, "echo differs");
    }
    longest
}

/// Another process keeping one core busy while it lives (killed by pid on drop).
struct Burner(std::process::Child);

impl Burner {
    fn start() -> Self {
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("sh");
        // Let it reach the CPU before the clients start.
        std::thread::sleep(Duration::from_millis(100));
        Burner(child)
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Where criterion writes this bench's data (as `scripts/bench-report.py` finds it).
fn criterion_dir() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("CRITERION_HOME") {
        return d.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        std::path::PathBuf::from,
    );
    target.join("criterion")
}

/// A server driven by a thread that polls without ever parking or sleeping.
struct PollingServer {
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl PollingServer {
    fn new() -> Self {
        let server = Arc::new(Server::new(Layout::Current, 64, 1).expect("server"));
        server.register(ECHO, echo);
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (server.clone(), stop.clone());
        let join = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if s.poll().expect("poll") == 0 {
                    std::hint::spin_loop();
                }
            }
        });
        PollingServer {
            server,
            stop,
            join: Some(join),
        }
    }
}

impl Drop for PollingServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

fn rpc_server() -> ServerThread {
    let s = Server::new(Layout::Current, 64, 1).expect("server");
    s.register(OP, |port| port.recv_and_send(|_, p| p[0] += 1));
    s.spawn().unwrap()
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

    let ours = {
        let s = Server::new(Layout::Current, 64, 1).expect("server");
        s.register(ECHO, echo);
        s.spawn().unwrap()
    };
    let ours_client = spin_client(&ours);
    let mut g = c.benchmark_group("spin_clients");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for threads in [1u64, 2, 4, 8, 32] {
        let mut run = |name: &str, client: &Client| {
            let clients: Vec<(Client, Vec<Vec<u8>>)> = (0..threads)
                .map(|t| (client.clone(), messages(t + 1)))
                .collect();
            g.bench_function(format!("{name}/{threads}"), |b| {
                b.iter_custom(|n| {
                    let per = n.div_ceil(threads);
                    let start = Instant::now();
                    std::thread::scope(|s| {
                        for (c, m) in &clients {
                            s.spawn(move || echo_calls(c, m, per));
                        }
                    });
                    start.elapsed()
                })
            });
        };
        // The polling server's thread exists only while it is measured: it never parks, so it
        // would take a core from the other runs. One client half per block (its lock bitmap
        // is the clients' only port arbitration).
        let polling = PollingServer::new();
        run("polling", &spin_client(&polling.server));
        drop(polling);
        run("ours", &ours_client);
    }
    g.finish();

    // One spinning client while another process keeps a core busy. Each case's longest call
    // goes to longest_call.json next to criterion's data.
    let burner = Burner::start();
    let mut longest = std::collections::BTreeMap::new();
    let mut g = c.benchmark_group("spin_clients_loaded");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    let msgs = messages(1);
    let mut run =
        |name: &str, client: &Client, longest: &mut std::collections::BTreeMap<String, f64>| {
            let mut worst = Duration::ZERO;
            g.bench_function(format!("{name}/1"), |b| {
                b.iter_custom(|n| {
                    let start = Instant::now();
                    worst = worst.max(echo_calls_longest(client, &msgs, n));
                    start.elapsed()
                })
            });
            longest.insert(format!("{name}/1"), worst.as_secs_f64() * 1e9);
        };
    let polling = PollingServer::new();
    run("polling", &spin_client(&polling.server), &mut longest);
    drop(polling);
    run("ours", &ours_client, &mut longest);
    g.finish();
    drop(burner);
    let dir = criterion_dir().join("spin_clients_loaded");
    if std::fs::create_dir_all(&dir).is_ok() {
        let json = longest
            .iter()
            .map(|(k, v)| format!("\"{k}\": {v:.0}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = std::fs::write(dir.join("longest_call.json"), format!("{{{json}}}\n"));
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
