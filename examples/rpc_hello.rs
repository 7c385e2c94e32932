//! A kernel prints through the executor's RPC server: `puts` and a `printf` with an integer and
//! a float, formatted on the host.
//!
//! `cargo run --example rpc_hello -- --platform host` (a Rust host kernel with the in-process
//! client) or `-- --platform opencl` (an OpenCL C kernel with the embedded OpenCL C client).

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
