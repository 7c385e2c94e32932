//! A kernel prints through the executor's RPC server: `puts` and a `printf` with an integer and
//! a float, formatted on the host.
//!
//! `cargo run --example rpc_hello -- --platform host`

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
    if name != "host" {
        return Err(Error::unsupported(
            name,
            "rpc_hello",
            "this example's kernel is a host kernel; the OpenCL C client is not written yet",
        ));
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
    let mut stream = executor.create_stream()?;
    stream
        .then_launch_with_rpc(
            ThreadDim::new(32, 1, 1),
            BlockDim::default(),
            &kernel,
            (2.5,),
        )
        .block_host_until_done()
}
