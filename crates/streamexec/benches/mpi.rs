//! MPI costs (feature `mpi`), each next to plain host MPI in the same run:
//!
//! - `all_reduce_64MiB/{stream_host,stream_opencl,plain_host}`: a sum of 16 Mi f32 (64 MiB)
//!   across the ranks: `Stream::then_all_reduce` on device memory of the host platform (and of
//!   OpenCL where available), staged through host memory, against `MPI_Allreduce` of a host
//!   buffer of the same size.
//! - `ping_pong/{4B,64KiB}/{emissary_host,stream_host,plain_host}`: the round trip of a message
//!   from rank 0 to rank 1 and back. Device-initiated (`emissary_host`): one thread of a native
//!   host kernel on each rank loops `MPI_Send`/`MPI_Recv` through the Emissary layer
//!   ([`KernelMpi`], each call a round trip to the executor's RPC server, which calls MPI), one
//!   launch per measured batch. Host-initiated: `then_send` + `then_recv` on a stream of each
//!   rank, then `block_host_until_done` (`stream_host`), and `MPI_Send` + `MPI_Recv` of host
//!   memory (`plain_host`).
//! - `message_rate/{4B,64KiB}/{emissary_host,plain_host}`: rank 0 sends a batch of messages
//!   back to back, rank 1 receives them, and a zero-byte message from rank 1 ends the batch;
//!   device-initiated (a host kernel's loop, as above) against host `MPI_Send`/`MPI_Recv`.
//!
//! Run with `mpirun -n 2` (as root add `--allow-run-as-root`):
//! `cargo bench --features mpi --bench mpi --no-run`, then
//! `mpirun -n 2 --mca btl self,vader target/release/deps/mpi-<hash> --bench`.
//!
//! Criterion picks iteration counts as it goes, so only rank 0 runs it: before each measured
//! batch it broadcasts (bench, iterations) to the other ranks, which run the same batch in lock
//! step, and a final broadcast stops them.

use std::time::{Duration, Instant};

use criterion::Criterion;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{
    Communicator as _, CommunicatorCollectives as _, Destination as _, Root as _, Source as _,
};
use streamexec::mpi::{Communicator, KernelMpi, Mpi, ReduceOp};
use streamexec::{
    BlockDim, DeviceMemory, DevicePtr, HostKernel, MultiKernelLoaderSpec, PlatformManager, Stream,
    StreamExecutor, ThreadDim, TypedKernel,
};

/// 64 MiB of f32.
const REDUCE_LEN: usize = 16 << 20;

/// What rank 0 asks the others to run (the first word of the control broadcast).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bench {
    Stop,
    ReduceStream(usize),
    ReducePlain,
    PingPongStream(usize),
    PingPongPlain(usize),
    /// Device-initiated: a host kernel calling MPI through the Emissary layer.
    PingPongEmissary(usize),
    RateEmissary(usize),
    RatePlain(usize),
}

/// The control message: bench kind, its index (platform or message size), iterations.
fn encode(b: Bench, iters: u64) -> [u64; 3] {
    match b {
        Bench::Stop => [0, 0, iters],
        Bench::ReduceStream(p) => [1, p as u64, iters],
        Bench::ReducePlain => [2, 0, iters],
        Bench::PingPongStream(n) => [3, n as u64, iters],
        Bench::PingPongPlain(n) => [4, n as u64, iters],
        Bench::PingPongEmissary(n) => [5, n as u64, iters],
        Bench::RateEmissary(n) => [6, n as u64, iters],
        Bench::RatePlain(n) => [7, n as u64, iters],
    }
}

fn decode(m: [u64; 3]) -> (Bench, u64) {
    let i = m[1] as usize;
    let b = match m[0] {
        1 => Bench::ReduceStream(i),
        2 => Bench::ReducePlain,
        3 => Bench::PingPongStream(i),
        4 => Bench::PingPongPlain(i),
        5 => Bench::PingPongEmissary(i),
        6 => Bench::RateEmissary(i),
        7 => Bench::RatePlain(i),
        _ => Bench::Stop,
    };
    (b, m[2])
}

/// One platform's executor, stream and the all-reduce buffer.
struct Device {
    exec: StreamExecutor,
    stream: Stream,
    reduce: DeviceMemory<f32>,
}

struct Ctx {
    /// Control traffic and the plain-MPI baselines (rsmpi's world).
    world: SimpleCommunicator,
    comm: Communicator,
    rank: i32,
    devices: Vec<(&'static str, Device)>,
    plain_send: Vec<f32>,
    plain_recv: Vec<f32>,
    emissary: Emissary,
}

/// The device-initiated side: a host executor serving MPI to its kernels, and the kernel.
struct Emissary {
    exec: StreamExecutor,
    stream: Stream,
    kernel: TypedKernel<(DevicePtr<u32>, u32, u32, u32)>,
}

/// Kernel modes.
const PING_PONG: u32 = 0;
const RATE: u32 = 1;

impl Emissary {
    fn new(comm: &Communicator) -> Emissary {
        let exec = PlatformManager::platform_with_name("host")
            .and_then(|p| p.executor_for_device(0))
            .expect("host executor");
        comm.serve_kernels(&exec).expect("serve_kernels");
        let mpi = KernelMpi::new(exec.rpc().expect("rpc").client());
        let rank = comm.rank();
        // One thread: `iters` round trips (PING_PONG) or messages (RATE) of `len` u32s.
        let k = HostKernel::new(
            "emissary_bench",
            move |_, (buf, len, iters, mode): (DevicePtr<u32>, u32, u32, u32)| {
                let (len, peer) = (len as usize, 1 - rank);
                for _ in 0..iters {
                    match (mode, rank) {
                        (PING_PONG, 0) => {
                            mpi.send(buf, 0..len, peer, 1).expect("send");
                            mpi.recv(buf, 0..len, peer, 2).expect("recv");
                        }
                        (PING_PONG, 1) => {
                            mpi.recv(buf, 0..len, peer, 1).expect("recv");
                            mpi.send(buf, 0..len, peer, 2).expect("send");
                        }
                        (_, 0) => mpi.send(buf, 0..len, peer, 3).expect("send"),
                        (_, 1) => drop(mpi.recv(buf, 0..len, peer, 3).expect("recv")),
                        _ => {}
                    }
                }
                // The end of a batch of messages: rank 1 has them all.
                if mode == RATE && rank <= 1 {
                    let ack = 0..0;
                    match rank {
                        0 => drop(mpi.recv(buf, ack, peer, 4).expect("ack")),
                        _ => mpi.send(buf, ack, peer, 4).expect("ack"),
                    }
                }
            },
        );
        let spec = MultiKernelLoaderSpec::new(4).add_host_kernel(k);
        let kernel = exec.get_kernel(&spec).expect("get_kernel");
        let stream = exec.create_stream().expect("create_stream");
        Emissary {
            exec,
            stream,
            kernel,
        }
    }

    fn run(&mut self, bytes: usize, iters: u64, mode: u32) {
        let buf = self
            .exec
            .allocate_zeroed_array::<u32>(bytes / 4)
            .expect("allocate");
        self.stream
            .then_launch_with_rpc(
                ThreadDim::new(1, 1, 1),
                BlockDim::new(1, 1, 1),
                &self.kernel,
                (buf.ptr(), (bytes / 4) as u32, iters as u32, mode),
            )
            .block_host_until_done()
            .expect("emissary kernel");
    }
}

impl Ctx {
    /// Runs `b` `iters` times on this rank; the time it took.
    fn run(&mut self, b: Bench, iters: u64) -> Duration {
        let start = Instant::now();
        match b {
            Bench::Stop => {}
            Bench::ReduceStream(p) => {
                let d = &mut self.devices[p].1;
                for _ in 0..iters {
                    d.stream
                        .then_all_reduce(&self.comm, &d.reduce, ReduceOp::Sum)
                        .block_host_until_done()
                        .expect("then_all_reduce");
                }
            }
            Bench::ReducePlain => {
                for _ in 0..iters {
                    self.world.all_reduce_into(
                        &self.plain_send[..],
                        &mut self.plain_recv[..],
                        SystemOperation::sum(),
                    );
                }
            }
            Bench::PingPongStream(bytes) => {
                let d = &mut self.devices[0].1;
                let buf = d
                    .exec
                    .allocate_zeroed_array::<u32>(bytes / 4)
                    .expect("allocate");
                let peer = 1 - self.rank;
                for _ in 0..iters {
                    if self.rank == 0 {
                        d.stream.then_send(&self.comm, &buf, peer, 1);
                        d.stream.then_recv(&self.comm, &buf, peer, 2);
                    } else if self.rank == 1 {
                        d.stream.then_recv(&self.comm, &buf, peer, 1);
                        d.stream.then_send(&self.comm, &buf, peer, 2);
                    }
                    d.stream.block_host_until_done().expect("ping-pong");
                }
            }
            Bench::PingPongEmissary(bytes) => self.emissary.run(bytes, iters, PING_PONG),
            Bench::RateEmissary(bytes) => self.emissary.run(bytes, iters, RATE),
            Bench::RatePlain(bytes) => {
                let mut buf = vec![0u32; bytes / 4];
                let peer = self.world.process_at_rank(1 - self.rank);
                for _ in 0..iters {
                    if self.rank == 0 {
                        peer.send_with_tag(&buf[..], 3);
                    } else if self.rank == 1 {
                        peer.receive_into_with_tag(&mut buf[..], 3);
                    }
                }
                let mut ack = [0u32; 0];
                if self.rank == 0 {
                    peer.receive_into_with_tag(&mut ack[..], 4);
                } else if self.rank == 1 {
                    peer.send_with_tag(&ack[..], 4);
                }
            }
            Bench::PingPongPlain(bytes) => {
                let mut buf = vec![0u32; bytes / 4];
                let peer = self.world.process_at_rank(1 - self.rank);
                for _ in 0..iters {
                    if self.rank == 0 {
                        peer.send_with_tag(&buf[..], 1);
                        peer.receive_into_with_tag(&mut buf[..], 2);
                    } else if self.rank == 1 {
                        peer.receive_into_with_tag(&mut buf[..], 1);
                        peer.send_with_tag(&buf[..], 2);
                    }
                }
            }
        }
        start.elapsed()
    }

    /// Rank 0: tells the others to run `b` `iters` times, runs it too; its own time.
    fn lead(&mut self, b: Bench, iters: u64) -> Duration {
        let mut m = encode(b, iters);
        self.world.process_at_rank(0).broadcast_into(&mut m[..]);
        self.run(b, iters)
    }

    /// Ranks other than 0: run what rank 0 broadcasts until it says stop.
    fn follow(&mut self) {
        loop {
            let mut m = [0u64; 3];
            self.world.process_at_rank(0).broadcast_into(&mut m[..]);
            let (b, iters) = decode(m);
            if b == Bench::Stop {
                return;
            }
            self.run(b, iters);
        }
    }
}

fn main() {
    let mpi = Mpi::init().expect("Mpi::init");
    let world = SimpleCommunicator::world();
    let rank = mpi.rank();
    if mpi.size() < 2 {
        eprintln!("benches/mpi.rs needs at least 2 ranks: run it with `mpirun -n 2`");
        std::process::exit(2);
    }
    let mut devices = Vec::new();
    for name in ["host", "opencl"] {
        // Every rank has the same platforms (one machine).
        let Ok(exec) =
            PlatformManager::platform_with_name(name).and_then(|p| p.executor_for_device(0))
        else {
            continue;
        };
        let reduce = exec
            .copy_to_device(&vec![1.0f32; REDUCE_LEN])
            .expect("copy_to_device");
        let stream = exec.create_stream().expect("create_stream");
        devices.push((
            name,
            Device {
                exec,
                stream,
                reduce,
            },
        ));
    }
    let emissary = Emissary::new(&mpi.world());
    let mut cx = Ctx {
        emissary,
        world,
        comm: mpi.world(),
        rank,
        devices,
        plain_send: vec![1.0; REDUCE_LEN],
        plain_recv: vec![0.0; REDUCE_LEN],
    };
    if rank != 0 {
        cx.follow();
        return;
    }

    let mut c = Criterion::default().configure_from_args();
    {
        let mut g = c.benchmark_group("all_reduce_64MiB");
        g.sample_size(10).measurement_time(Duration::from_secs(8));
        for p in 0..cx.devices.len() {
            let id = format!("stream_{}", cx.devices[p].0);
            g.bench_function(id, |b| {
                b.iter_custom(|n| cx.lead(Bench::ReduceStream(p), n))
            });
        }
        g.bench_function("plain_host", |b| {
            b.iter_custom(|n| cx.lead(Bench::ReducePlain, n))
        });
        g.finish();
    }
    for (label, bytes) in [("4B", 4usize), ("64KiB", 64 << 10)] {
        let mut g = c.benchmark_group(format!("ping_pong/{label}"));
        g.measurement_time(Duration::from_secs(3));
        g.bench_function("stream_host", |b| {
            b.iter_custom(|n| cx.lead(Bench::PingPongStream(bytes), n))
        });
        g.bench_function("emissary_host", |b| {
            b.iter_custom(|n| cx.lead(Bench::PingPongEmissary(bytes), n))
        });
        g.bench_function("plain_host", |b| {
            b.iter_custom(|n| cx.lead(Bench::PingPongPlain(bytes), n))
        });
        g.finish();
    }
    for (label, bytes) in [("4B", 4usize), ("64KiB", 64 << 10)] {
        let mut g = c.benchmark_group(format!("message_rate/{label}"));
        g.measurement_time(Duration::from_secs(3));
        g.bench_function("emissary_host", |b| {
            b.iter_custom(|n| cx.lead(Bench::RateEmissary(bytes), n))
        });
        g.bench_function("plain_host", |b| {
            b.iter_custom(|n| cx.lead(Bench::RatePlain(bytes), n))
        });
        g.finish();
    }
    cx.lead(Bench::Stop, 0);
    c.final_summary();
}
