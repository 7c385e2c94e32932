//! Kernels calling MPI through the Emissary layer, run by `mpirun -n N` (scripts/test-mpi.sh):
//! every rank runs the same cases in the same order and exits non-zero on a failure.
//! Native host kernels (`KernelMpi`) here; PTX from CUDA C and OpenCL C in `device.rs`.

use streamexec::mpi::{KernelMpi, Mpi, ReduceOp};
use streamexec::*;

type Case = fn(&Ctx) -> Result<()>;

struct Ctx {
    comm: streamexec::mpi::Communicator,
    rank: i32,
    size: i32,
}

fn host() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap()
}

/// The seed example with native host kernels: on rank 0 thread i sets buf[i] = -i and sends
/// it with tag i; on rank 1 thread i receives tag i and counts an error unless buf[i] == -i.
fn seed_send_recv_host_kernels(c: &Ctx) -> Result<()> {
    let exec = host();
    c.comm.serve_kernels(&exec)?;
    let mpi = std::sync::Arc::new(KernelMpi::new(exec.rpc()?.client()));
    // The seed's 5000 threads run as PTX in examples/emissary_mpi.rs; fewer here.
    let n = 1000;
    let buf = exec.copy_to_device(&vec![i32::MIN; n])?;
    let errors = exec.copy_to_device(&[0i32])?;
    let m = mpi.clone();
    let spec = MultiKernelLoaderSpec::new(3).add_host_kernel(HostKernel::new(
        "seed",
        move |ctx, (buf, errors, n): (DevicePtr<i32>, DevicePtr<i32>, i32)| {
            let i = ctx.global_id_x();
            if i >= n as usize {
                return;
            }
            let rank = m.rank().expect("MPI_Comm_rank");
            let g = ctx.global(buf);
            if rank == 0 {
                g.set(i, -(i as i32));
                m.send(buf, i..i + 1, 1, i as i32).expect("MPI_Send");
            } else if rank == 1 {
                m.recv(buf, i..i + 1, 0, i as i32).expect("MPI_Recv");
                if g.get(i) != -(i as i32) {
                    ctx.global(errors).atomic_add(0, 1);
                }
            }
        },
    ));
    let k: TypedKernel<(DevicePtr<i32>, DevicePtr<i32>, i32)> = exec.get_kernel(&spec)?;
    exec.create_stream()?
        .then_launch_with_rpc(
            ThreadDim::new(128, 1, 1),
            BlockDim::new(n.div_ceil(128) as u32, 1, 1),
            &k,
            (buf.ptr(), errors.ptr(), n as i32),
        )
        .block_host_until_done()?;
    let got = exec.copy_to_vec(&buf)?;
    let errs = exec.copy_to_vec(&errors)?[0];
    if c.rank <= 1 {
        let want: Vec<i32> = (0..n as i32).map(|i| -i).collect();
        check(got == want, "every element is -i on ranks 0 and 1")?;
        check(errs == 0, &format!("rank {} counted {errs} errors", c.rank))?;
    }
    Ok(())
}

/// Random i64s per rank (seeded by the rank, so every rank can rebuild every other's).
fn rank_data(rank: i32, n: usize) -> Vec<i64> {
    use rand::{RngExt, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xE515_0000 + rank as u64);
    (0..n)
        .map(|_| rng.random_range(-1_000_000_000_000..1_000_000_000_000))
        .collect()
}

/// One thread of a host kernel all-reduces 1000 random i64s per rank (sum into `out`, then
/// max in place); every element is checked against a plain loop over every rank's data.
fn allreduce_host_kernel(c: &Ctx) -> Result<()> {
    let exec = host();
    c.comm.serve_kernels(&exec)?;
    let mpi = std::sync::Arc::new(KernelMpi::new(exec.rpc()?.client()));
    let n = 1000usize;
    let data = exec.copy_to_device(&rank_data(c.rank, n))?;
    let out = exec.copy_to_device(&vec![i64::MIN; n])?;
    let m = mpi.clone();
    let spec = MultiKernelLoaderSpec::new(2).add_host_kernel(HostKernel::new(
        "allreduce",
        move |ctx, (data, out): (DevicePtr<i64>, DevicePtr<i64>)| {
            if ctx.thread_idx().x == 0 {
                m.all_reduce(Some(data), out, 0..n, ReduceOp::Sum)
                    .expect("MPI_Allreduce");
                m.all_reduce(None, data, 0..n, ReduceOp::Max)
                    .expect("MPI_Allreduce in place");
            }
        },
    ));
    let k: TypedKernel<(DevicePtr<i64>, DevicePtr<i64>)> = exec.get_kernel(&spec)?;
    exec.create_stream()?
        .then_launch_with_rpc(
            ThreadDim::new(64, 1, 1),
            BlockDim::new(1, 1, 1),
            &k,
            (data.ptr(), out.ptr()),
        )
        .block_host_until_done()?;
    let all: Vec<Vec<i64>> = (0..c.size).map(|r| rank_data(r, n)).collect();
    let sum: Vec<i64> = (0..n).map(|i| all.iter().map(|d| d[i]).sum()).collect();
    let max: Vec<i64> = (0..n)
        .map(|i| all.iter().map(|d| d[i]).max().unwrap())
        .collect();
    check(exec.copy_to_vec(&out)? == sum, "allreduce sum")?;
    check(exec.copy_to_vec(&data)? == max, "allreduce max in place")?;
    Ok(())
}

/// A receive nobody sends to fails after the communicator's timeout (0.5 s here) instead of
/// hanging: the kernel's call returns an error, the server logs why, and the same server then
/// serves the next call.
fn a_receive_without_a_sender_times_out(c: &Ctx) -> Result<()> {
    let exec = host();
    c.comm
        .with_timeout(std::time::Duration::from_millis(500))
        .serve_kernels(&exec)?;
    let rpc = exec.rpc()?;
    let mpi = KernelMpi::new(rpc.client());
    let buf = exec.copy_to_device(&[7i32; 4])?;
    let from = (c.rank + 1) % c.size;
    let e = match mpi.recv(buf.ptr(), 0..4, from, 999) {
        Ok(s) => return check(false, &format!("a receive nobody sent completed: {s:?}")),
        Err(e) => e,
    };
    check(
        e.to_string().contains("HostError"),
        &format!("the kernel's error: {e}"),
    )?;
    let log = rpc.server().take_errors();
    check(
        log.iter()
            .any(|m| m.contains("MPI_Recv") && m.contains("not complete after 0.5 s")),
        &format!("the server's log: {log:?}"),
    )?;
    check(exec.copy_to_vec(&buf)? == [7; 4], "the buffer is untouched")?;
    check(mpi.rank()? == c.rank, "the server goes on serving")
}

/// Calls the MPI table cannot serve get an error reply and a logged reason, never a crash:
/// an unknown function index, the wrong argument count, an unknown datatype, a pointer outside
/// the executor's memory.
fn malformed_mpi_calls_are_refused(c: &Ctx) -> Result<()> {
    use streamexec::rpc::{EMISSARY_API_MPI, EmissaryArg as A};
    let exec = host();
    c.comm.serve_kernels(&exec)?;
    let rpc = exec.rpc()?;
    let client = rpc.client();
    let buf = exec.copy_to_device(&[0i32; 4])?;
    let p = A::Device(buf.ptr().address().raw());
    let cases: Vec<(u32, Vec<A>, &str, &str)> = vec![
        (99, vec![], "UnknownFunction", "function 99 of API `MPI`"),
        (
            1,
            vec![p, A::i32(1)],
            "BadArguments",
            "takes 6 arguments; the call sent 2",
        ),
        (
            1,
            vec![p, A::i32(1), A::i32(42), A::i32(0), A::i32(0), A::i32(0)],
            "HostError",
            "datatype handle 42",
        ),
        (
            1,
            vec![
                A::Device(8),
                A::i32(1),
                A::i32(3),
                A::i32(0),
                A::i32(0),
                A::i32(0),
            ],
            "BadPointer",
            "not inside one live allocation",
        ),
        (
            1,
            vec![p, A::i32(1), A::i32(3), A::i32(0), A::i32(0), A::i32(5)],
            "HostError",
            "communicator handle 5",
        ),
    ];
    for (function, args, status, why) in cases {
        let e = match client.emissary(EMISSARY_API_MPI, function, &args) {
            Ok(r) => return check(false, &format!("function {function} was served: {r:?}")),
            Err(e) => e,
        };
        check(
            e.to_string().contains(status),
            &format!("{e} should say {status}"),
        )?;
        let log = rpc.server().take_errors();
        check(
            log.len() == 1 && log[0].contains(why),
            &format!("the log {log:?} should say {why:?}"),
        )?;
    }
    Ok(())
}

fn check(ok: bool, what: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Rpc {
            detail: format!("check failed: {what}"),
        })
    }
}

fn main() {
    let mpi = Mpi::init().expect("Mpi::init");
    let c = Ctx {
        comm: mpi.world(),
        rank: mpi.rank(),
        size: mpi.size(),
    };
    let cases: &[(&str, Case)] = &[
        ("seed_send_recv_host_kernels", seed_send_recv_host_kernels),
        ("allreduce_host_kernel", allreduce_host_kernel),
        (
            "a_receive_without_a_sender_times_out",
            a_receive_without_a_sender_times_out,
        ),
        (
            "malformed_mpi_calls_are_refused",
            malformed_mpi_calls_are_refused,
        ),
    ];
    let mut failed = 0;
    for (name, case) in cases {
        let t = std::time::Instant::now();
        match case(&c) {
            Ok(()) => println!(
                "R{}: ok {name} ({:.2} s)",
                c.rank,
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                failed += 1;
                println!("R{}: FAILED {name}: {e}", c.rank);
            }
        }
    }
    drop(mpi);
    std::process::exit(i32::from(failed > 0));
}
