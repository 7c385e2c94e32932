//! A kernel prints through the executor's RPC server: `puts` and a `printf` with an integer and
//! a float, formatted on the host.
//!
//! `cargo run --example rpc_hello -- --platform host` (a Rust host kernel with the in-process
//! client), `-- --platform opencl` (an OpenCL C kernel with the embedded OpenCL C client) or
//! `-- --platform cuda` (CUDA C compiled by clang with `include/streamexec_rpc.h`,
//! `kernels/rpc_hello.cu`: its module defines `__llvm_rpc_client`, which the executor fills in
//! at load, and the whole warp prints one line per lane after the greeting). On cuda,
//! `--pre-doorbell` loads the same program built for the older RPC layout (552-byte client,
//! `-DSTREAMEXEC_RPC_PRE_DOORBELL`) instead of the current one (2096 bytes).

use streamexec::rpc::PrintfArg;
use streamexec::*;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let name = args
        .iter()
        .position(|a| a == "--platform")
        .and_then(|i| args.get(i + 1))
        .map_or("host", String::as_str);
    let executor = PlatformManager::platform_with_name(name)?.executor_for_device(0)?;
    if executor.platform_name() == "cuda" {
        // Loading the module starts the executor's server in the layout its
        // `__llvm_rpc_client` has and writes the client into it; its launches are RPC launches.
        let ptx = if args.iter().any(|a| a == "--pre-doorbell") {
            CUDA_HELLO_PRE_DOORBELL
        } else {
            CUDA_HELLO
        };
        let spec = MultiKernelLoaderSpec::new(1).add_cuda_ptx_in_memory(ptx, "hello");
        let kernel: TypedKernel<(f32,)> = executor.get_kernel(&spec)?;
        let (layout, lanes) = executor.rpc()?.config();
        eprintln!(
            "rpc_hello: the cuda executor's RPC server runs the {layout:?} layout, {lanes} lanes"
        );
        return executor
            .create_stream()?
            .then_launch(
                ThreadDim::new(32, 1, 1),
                BlockDim::default(),
                &kernel,
                (2.5,),
            )
            .block_host_until_done();
    }
    let rpc = executor.rpc()?;
    let mut stream = executor.create_stream()?;
    if name != "host" {
        // The spec's `with_rpc` puts the OpenCL C client (`se_rpc_*`) in front of this source.
        let spec = MultiKernelLoaderSpec::new(2)
            .add_opencl_text_in_memory(OPENCL_HELLO, "hello")
            .with_rpc();
        let kernel: TypedKernel<(DevicePtr<u8>, f32)> = executor.get_kernel(&spec)?;
        return stream
            .then_launch_with_rpc(
                ThreadDim::new(32, 1, 1),
                BlockDim::default(),
                &kernel,
                (rpc.block()?, 2.5),
            )
            .block_host_until_done();
    }
    let client = rpc.client();
    let spec = MultiKernelLoaderSpec::new(1).add_host_kernel(HostKernel::new(
        "hello",
        move |ctx, (x,): (f32,)| {
            if ctx.global_id_x() == 0 {
                client.puts("Hello world!").expect("rpc puts");
                client
                    .printf(
                        "answer=%d x=%.2f\n",
                        &[PrintfArg::Int(42), PrintfArg::Double(f64::from(x))],
                    )
                    .expect("rpc printf");
            }
        },
    ));
    let kernel: TypedKernel<(f32,)> = executor.get_kernel(&spec)?;
    stream
        .then_launch_with_rpc(
            ThreadDim::new(32, 1, 1),
            BlockDim::default(),
            &kernel,
            (2.5,),
        )
        .block_host_until_done()
}

/// The OpenCL kernel: `rpc` is the executor's shared block (`ExecutorRpc::block`).
const OPENCL_HELLO: &str = r#"
__kernel void hello(__global void *rpc, float x) {
    if (get_global_id(0) == 0) {
        se_rpc_puts(rpc, "Hello world!");
        se_rpc_args a = se_rpc_args_new();
        se_rpc_arg_int(&a, 42);
        se_rpc_arg_float(&a, x);
        se_rpc_printf(rpc, "answer=%d x=%.2f\n", &a);
    }
}
"#;

/// `kernels/rpc_hello.cu` compiled by clang-19 (`scripts/gen-ptx.sh`), current layout.
const CUDA_HELLO: &str = include_str!("../kernels/ptx/rpc_hello.O3.ptx");
/// The same with `-DSTREAMEXEC_RPC_PRE_DOORBELL`.
const CUDA_HELLO_PRE_DOORBELL: &str = include_str!("../kernels/ptx/rpc_hello.pre_doorbell.O3.ptx");
