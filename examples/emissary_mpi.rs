//! Kernels that call MPI (the Emissary APIs' own example): two ranks, a kernel of 5000
//! threads; on rank 0 thread `i` sets `buf[i] = -i` and calls `MPI_Send(&buf[i], 1, MPI_INT,
//! 1, i, comm)`; on rank 1 thread `i` calls `MPI_Recv(&buf[i], 1, MPI_INT, 0, i, comm, ...)`
//! and counts an error unless `buf[i] == -i`. Then one thread per rank all-reduces a buffer the
//! block filled, and every thread checks its elements.
//!
//! ```text
//! mpirun -n 2 cargo run --release --features mpi --example emissary_mpi -- --platform host
//! ```
//! - `host`: CUDA C compiled to PTX by clang (`kernels/emissary_mpi.cu` with
//!   `include/streamexec_mpi.h`), run by the host platform's PTX engine; buffers are used in
//!   place by the host side.
//! - `cuda`: the same PTX on the CUDA platform; device memory is staged by the host side.
//! - `opencl`: the OpenCL C kernels of `kernels/cl/emissary_mpi.cl` with the MPI stubs
//!   (`MultiKernelLoaderSpec::with_mpi`); buffers are unified (SVM) memory.
//!
//! Each rank prints its lines, and `rc` at the end is the number of errors its kernels counted
//! (0 when every element arrived and every call succeeded); the exit status is non-zero
//! otherwise.

use streamexec::mpi::Mpi;
use streamexec::*;

/// Threads of the send/receive kernel (the original's 5000).
const THREADS: usize = 5000;
/// Elements of the all-reduce.
const REDUCED: usize = 1000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args
        .iter()
        .position(|a| a == "--platform")
        .and_then(|i| args.get(i + 1))
        .map_or("host", String::as_str)
        .to_string();
    let t = std::time::Instant::now();
    let mpi = match Mpi::init() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("emissary_mpi: {e}");
            std::process::exit(2);
        }
    };
    let rank = mpi.rank();
    eprintln!("R{rank}: Mpi::init: {:.3} s", t.elapsed().as_secs_f64());
    println!(
        "R{rank}: Number of Ranks= {} Threads= {THREADS} Platform= {name}",
        mpi.size()
    );
    let rc = match run(&mpi, &name) {
        Ok(errors) => errors,
        Err(e) => {
            println!("R{rank}: error: {e}");
            -1
        }
    };
    println!("R{rank}: === PRE MPI_Finalize ===");
    let t = std::time::Instant::now();
    drop(mpi);
    eprintln!("R{rank}: finalize: {:.3} s", t.elapsed().as_secs_f64());
    println!("R{rank}: === POST MPI_Finalize === rc = {rc}");
    std::process::exit(i32::from(rc != 0));
}

/// A buffer: unified memory where kernels' pointers must be host addresses (OpenCL), device
/// memory elsewhere.
enum Buf {
    Device(DeviceMemory<i32>),
    Unified(UnifiedMemory<i32>),
}

impl Buf {
    fn new(exec: &StreamExecutor, len: usize) -> Result<Buf> {
        Ok(if exec.platform_name() == "opencl" {
            Buf::Unified(exec.allocate_unified(len)?)
        } else {
            Buf::Device(exec.allocate_zeroed_array(len)?)
        })
    }

    fn ptr(&self) -> DevicePtr<i32> {
        match self {
            Buf::Device(m) => m.ptr(),
            Buf::Unified(m) => m.ptr(),
        }
    }

    fn read(&self, exec: &StreamExecutor) -> Result<Vec<i32>> {
        match self {
            Buf::Device(m) => exec.copy_to_vec(m),
            Buf::Unified(m) => exec.copy_to_vec(m.as_device()),
        }
    }
}

type Ptr = DevicePtr<i32>;

/// Launches kernel `name` with `args` (OpenCL kernels take the RPC block first).
fn launch<A>(exec: &StreamExecutor, name: &str, threads: u32, blocks: u32, args: A) -> Result<()>
where
    A: KernelArgs + PrependBlock,
{
    let mut stream = exec.create_stream()?;
    let (threads, blocks) = (ThreadDim::new(threads, 1, 1), BlockDim::new(blocks, 1, 1));
    if exec.platform_name() == "opencl" {
        let spec = MultiKernelLoaderSpec::new(A::ARITY + 1)
            .add_opencl_text_in_memory(OPENCL_KERNELS, name)
            .with_mpi();
        let k: TypedKernel<A::WithBlock> = exec.get_kernel(&spec)?;
        let args = args.with_block(exec.rpc()?.block()?);
        stream.then_launch_with_rpc(threads, blocks, &k, args)
    } else {
        // The module defines `__llvm_rpc_client`: its launches are RPC launches.
        let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(PTX, name);
        let k: TypedKernel<A> = exec.get_kernel(&spec)?;
        stream.then_launch(threads, blocks, &k, args)
    }
    .block_host_until_done()
}

/// Argument tuples of the example's kernels, and the same with the RPC block in front.
trait PrependBlock {
    type WithBlock: KernelArgs;
    fn with_block(self, block: DevicePtr<u8>) -> Self::WithBlock;
}

impl PrependBlock for (Ptr, Ptr, i32) {
    type WithBlock = (DevicePtr<u8>, Ptr, Ptr, i32);
    fn with_block(self, b: DevicePtr<u8>) -> Self::WithBlock {
        (b, self.0, self.1, self.2)
    }
}

impl PrependBlock for (Ptr, Ptr, Ptr, i32) {
    type WithBlock = (DevicePtr<u8>, Ptr, Ptr, Ptr, i32);
    fn with_block(self, b: DevicePtr<u8>) -> Self::WithBlock {
        (b, self.0, self.1, self.2, self.3)
    }
}

/// Runs both kernels; the number of errors they counted.
fn run(mpi: &Mpi, name: &str) -> Result<i32> {
    let rank = mpi.rank();
    let exec = PlatformManager::platform_with_name(name)?.executor_for_device(0)?;
    mpi.world().serve_kernels(&exec)?;

    let buf = Buf::new(&exec, THREADS)?;
    let errors = Buf::new(&exec, 1)?;
    let block = 128;
    let args = (buf.ptr(), errors.ptr(), THREADS as i32);
    let t = std::time::Instant::now();
    launch(
        &exec,
        "mpi_send_recv",
        block,
        THREADS.div_ceil(128) as u32,
        args,
    )?;
    eprintln!(
        "R{rank}: send/recv kernel: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    let send_recv_errors = errors.read(&exec)?[0];
    println!("R{rank}: MPI_Send/MPI_Recv kernel errors = {send_recv_errors}");

    let (data, sum, errors) = (
        Buf::new(&exec, REDUCED)?,
        Buf::new(&exec, REDUCED)?,
        Buf::new(&exec, 1)?,
    );
    let args = (data.ptr(), sum.ptr(), errors.ptr(), REDUCED as i32);
    let t = std::time::Instant::now();
    launch(&exec, "mpi_allreduce", 256, 1, args)?;
    eprintln!(
        "R{rank}: allreduce kernel: {:.3} s",
        t.elapsed().as_secs_f64()
    );
    // Every element again, here: the sum over ranks r of r * 1000 + i.
    let size = i64::from(mpi.size());
    let got = sum.read(&exec)?;
    let host_errors = (0..REDUCED)
        .filter(|&i| i64::from(got[i]) != 1000 * size * (size - 1) / 2 + size * i as i64)
        .count() as i32;
    let reduce_errors = errors.read(&exec)?[0] + host_errors;
    println!("R{rank}: MPI_Allreduce of {REDUCED} ints: errors = {reduce_errors}");
    Ok(send_recv_errors + reduce_errors)
}

/// `kernels/emissary_mpi.cu` compiled by clang-19 (`scripts/gen-ptx.sh`).
const PTX: &str = include_str!("../kernels/ptx/emissary_mpi.O3.ptx");
/// The same kernels in OpenCL C.
const OPENCL_KERNELS: &str = include_str!("../kernels/cl/emissary_mpi.cl");
