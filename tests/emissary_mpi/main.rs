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
    let n = 5000;
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

/// One thread of a host kernel all-reduces 1000 elements filled by the block; every element
/// is checked against the sum over ranks of (rank * 1000 + i), computed here in i64.
fn allreduce_host_kernel(c: &Ctx) -> Result<()> {
    let exec = host();
    c.comm.serve_kernels(&exec)?;
    let mpi = std::sync::Arc::new(KernelMpi::new(exec.rpc()?.client()));
    let n = 1000usize;
    let data = exec.copy_to_device(&vec![i64::MIN; n])?;
    let out = exec.copy_to_device(&vec![i64::MIN; n])?;
    let rank = i64::from(c.rank);
    let m = mpi.clone();
    let spec = MultiKernelLoaderSpec::new(2).add_host_kernel(HostKernel::new(
        "allreduce",
        move |ctx, (data, out): (DevicePtr<i64>, DevicePtr<i64>)| {
            let t = ctx.thread_idx().x as usize;
            for i in (t..n).step_by(ctx.block_dim().x as usize) {
                ctx.global(data).set(i, rank * 1000 + i as i64);
            }
            ctx.sync_threads();
            if t == 0 {
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
    let size = i64::from(c.size);
    let sum: Vec<i64> = (0..n as i64)
        .map(|i| (0..size).map(|r| r * 1000 + i).sum())
        .collect();
    let max: Vec<i64> = (0..n as i64).map(|i| (size - 1) * 1000 + i).collect();
    check(exec.copy_to_vec(&out)? == sum, "allreduce sum")?;
    check(exec.copy_to_vec(&data)? == max, "allreduce max in place")?;
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
