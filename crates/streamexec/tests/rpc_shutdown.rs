//! Alone in its process: the host executor must really drop (no other test holds it).

use streamexec::rpc::opcode;
use streamexec::*;

/// The executor (and so its server) goes away while a kernel keeps calling it: the kernel's
/// calls fail with an error instead of hanging.
#[test]
fn executor_dropped_while_a_kernel_waits_on_rpc() {
    let exec = PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap();
    let client = exec.rpc().unwrap().client();
    let (tx, rx) = std::sync::mpsc::channel();
    let spec = MultiKernelLoaderSpec::new(1).add_host_kernel(HostKernel::new(
        "keeps_calling",
        move |_ctx, (_x,): (u32,)| {
            let r = loop {
                if let Err(e) = client.noop().and_then(|_| {
                    client
                        .call_packet(opcode::MALLOC, [8, 0, 0, 0, 0, 0, 0, 0])
                        .map(|_| ())
                }) {
                    break e;
                }
            };
            tx.send(r.to_string()).unwrap();
            panic!("rpc failed: {r}");
        },
    ));
    let kernel: TypedKernel<(u32,)> = exec.get_kernel(&spec).unwrap();
    let mut stream = exec.create_stream().unwrap();
    stream.then_launch(ThreadDim::default(), BlockDim::default(), &kernel, (0,));
    std::thread::sleep(std::time::Duration::from_millis(100));
    drop(stream);
    drop(kernel);
    drop(exec);
    let msg = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the kernel's rpc call must fail, not hang");
    assert!(msg.contains("shut down"), "{msg}");
}
