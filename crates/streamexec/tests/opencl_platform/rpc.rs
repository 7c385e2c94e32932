//! The OpenCL C client (`MultiKernelLoaderSpec::with_rpc`) against the executor's server on
//! PoCL: every work-item's call of a typed user service gets its own reply, multi-packet
//! strings and `%s` reach the installed writer, and an unhandled opcode is an error reply.

use super::*;

use std::io::Write;

use bytemuck::{Pod, Zeroable};
use streamexec::rpc::Service;

/// A user service: the reply is an affine map of the request, plus the request echoed.
struct Affine3;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Req {
    x: u32,
    item: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable, Debug, PartialEq)]
struct Resp {
    y: u32,
    x: u32,
    item: u32,
}

const AFFINE_OPCODE: u32 = 0x5345_0001;

fn affine3(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(7)
}

impl Service for Affine3 {
    const OPCODE: u32 = AFFINE_OPCODE;
    type Request = Req;
    type Response = Resp;
    fn call(&self, r: Req) -> streamexec::rpc::Result<Resp> {
        Ok(Resp {
            y: affine3(r.x),
            x: r.x,
            item: r.item,
        })
    }
}

/// Each work-item sends `xs[i]` and writes the three reply words (or POISON when the reply
/// size is wrong) to `out[3i..3i+3]`.
const CALL_CL: &str = "
typedef struct { uint x; uint item; } req_t;
typedef struct { uint y; uint x; uint item; } resp_t;
__kernel void call(__global void *rpc, __global const uint *xs, __global uint *out, uint op) {
    uint i = get_global_id(0);
    req_t req = { xs[i], i };
    resp_t resp = { 0xDEADBEEF, 0xDEADBEEF, 0xDEADBEEF };
    se_rpc_port p = se_rpc_open(rpc, op);
    se_rpc_send_n_private(&p, &req, sizeof req);
    long got = se_rpc_recv_n_private(&p, &resp, sizeof resp);
    se_rpc_close(&p);
    if (got != (long)sizeof resp) resp.y = resp.x = resp.item = 0xDEADBEEF - 1;
    out[3 * i] = resp.y;
    out[3 * i + 1] = resp.x;
    out[3 * i + 2] = resp.item;
}";

type CallKernel = TypedKernel<(DevicePtr<u8>, DevicePtr<u32>, DevicePtr<u32>, u32)>;

/// The tests share the platform's executor and so its server's error log: the tests that read
/// the log run one at a time.
static SERVER_LOG: Mutex<()> = Mutex::new(());

fn rpc_kernel<A: KernelArgs>(exec: &StreamExecutor, src: &str, name: &str) -> TypedKernel<A> {
    exec.get_kernel(&cl_spec(A::ARITY, src, name).with_rpc())
        .unwrap_or_else(|e| panic!("loading `{name}` with RPC failed: {e}"))
}

fn call_all(exec: &StreamExecutor, k: &CallKernel, xs: &[u32], local: u32, op: u32) -> Vec<u32> {
    let rpc = exec.rpc().unwrap();
    let n = xs.len();
    let dxs = exec.copy_to_device(xs).unwrap();
    let out = exec.copy_to_device(&vec![POISON_U32; 3 * n]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_launch_with_rpc(
        local,
        n as u32 / local,
        k,
        (rpc.block().unwrap(), dxs.ptr(), out.ptr(), op),
    )
    .block_host_until_done()
    .unwrap();
    exec.copy_to_vec(&out).unwrap()
}

#[test]
fn every_work_item_gets_its_own_reply_from_a_user_service() {
    let exec = opencl_or_skip!("rpc_user_service");
    let _log = SERVER_LOG.lock().unwrap_or_else(|e| e.into_inner());
    let mut r = rng("rpc_user_service");
    let rpc = exec.rpc().unwrap();
    rpc.server().register_service(Affine3).unwrap();
    let k: CallKernel = rpc_kernel(&exec, CALL_CL, "call");
    // 8 work-items in two groups; then 256 (more callers than the 64 ports) in groups of 16.
    for (n, local) in [(8usize, 4u32), (256, 16)] {
        let xs = random_u32s(&mut r, n, u32::MAX);
        let got = call_all(&exec, &k, &xs, local, AFFINE_OPCODE);
        for (i, &x) in xs.iter().enumerate() {
            assert_eq!(
                got[3 * i..3 * i + 3],
                [affine3(x), x, i as u32],
                "work-item {i} of {n}"
            );
        }
    }
    assert_eq!(rpc.server().take_errors(), Vec::<String>::new());
}

#[test]
fn an_unhandled_opcode_is_an_error_reply_not_a_hang() {
    let exec = opencl_or_skip!("rpc_unhandled");
    let _log = SERVER_LOG.lock().unwrap_or_else(|e| e.into_inner());
    let mut r = rng("rpc_unhandled");
    let rpc = exec.rpc().unwrap();
    let k: CallKernel = rpc_kernel(&exec, CALL_CL, "call");
    let xs = random_u32s(&mut r, 4, u32::MAX);
    let got = call_all(&exec, &k, &xs, 2, 0x5345_0FFF);
    assert_eq!(
        got,
        vec![0xDEAD_BEEF - 1; 12],
        "recv_n returned -1 on every item"
    );
    let errors = rpc.server().take_errors();
    assert!(
        errors.len() == 4 && errors.iter().all(|e| e.contains("0x53450fff")),
        "{errors:?}"
    );
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Long strings (several packets each), `%s`, `%ld`, a negative float and a subnormal one.
const PRINT_CL: &str = "
__kernel void print(__global void *rpc, float x, long big, __global int *ret) {
    long n = se_rpc_puts(rpc,
        \"a long line that needs more than one packet: 0123456789abcdefghijklmnopqrstuvwxyz\");
    se_rpc_args a = se_rpc_args_new();
    se_rpc_arg_str(&a, \"strings\");
    se_rpc_arg_long(&a, big);
    se_rpc_arg_float(&a, x);
    se_rpc_arg_float(&a, 1.0e-40f);
    se_rpc_arg_int(&a, -5);
    ret[0] = (int)n;
    ret[1] = se_rpc_printf(rpc, \"%s %ld %.3f %.3e %d\\n\", &a);
}";

#[test]
fn puts_and_printf_reach_the_installed_writer() {
    let exec = opencl_or_skip!("rpc_print");
    let rpc = exec.rpc().unwrap();
    let out = Capture::default();
    rpc.set_stdout(Some(Box::new(out.clone())));
    let k: TypedKernel<(DevicePtr<u8>, f32, i64, DevicePtr<i32>)> =
        rpc_kernel(&exec, PRINT_CL, "print");
    let ret = exec.copy_to_device(&[POISON_U32 as i32; 2]).unwrap();
    let mut s = exec.create_stream().unwrap();
    s.then_launch_with_rpc(1, 1, &k, (rpc.block().unwrap(), -2.5, -1 << 40, ret.ptr()))
        .block_host_until_done()
        .unwrap();
    rpc.set_stdout(None);
    let line1 =
        "a long line that needs more than one packet: 0123456789abcdefghijklmnopqrstuvwxyz\n";
    let line2 = format!(
        "strings {} -2.500 {:.3e} -5\n",
        -1i64 << 40,
        f64::from(1.0e-40f32)
    );
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text, format!("{line1}{line2}"));
    assert_eq!(
        exec.copy_to_vec(&ret).unwrap(),
        [line1.len() as i32, line2.len() as i32]
    );
}

#[test]
fn rpc_needs_source_text_and_the_host_block_is_its_own_allocation() {
    let exec = opencl_or_skip!("rpc_binary");
    let spec = MultiKernelLoaderSpec::new(1)
        .add_opencl_binary_in_memory(&[0u8; 16], "k")
        .with_rpc();
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    assert!(
        kernel_load_detail(&e).contains("needs OpenCL C text"),
        "{e}"
    );
    let host = PlatformManager::platform_with_name("host")
        .unwrap()
        .executor_for_device(0)
        .unwrap();
    // The host's block is a live allocation of the host executor (its PTX engine's warps
    // reach it through `__llvm_rpc_client`), not an OpenCL buffer.
    let block = host.rpc().unwrap().block().unwrap();
    assert_eq!(block.address().raw(), host.rpc().unwrap().buffer_address());
}
