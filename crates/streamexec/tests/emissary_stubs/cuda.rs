//! The CUDA C stubs (include/streamexec_mpi.h) in kernels/emissary_mpi.cu, compiled by clang-19
//! to PTX (kernels/ptx/emissary_mpi.O0.ptx and .O3.ptx), on the `cuda` platform (the project's
//! CPU libcuda where no GPU is): 32-lane warps share a port.

use streamexec::{DevicePtr, KernelArgs, MultiKernelLoaderSpec, StreamExecutor, TypedKernel};

use super::scenarios::{self, Platform};
use super::{Rec, View, executor, serial};

const PTX_O3: &str = include_str!("../../../../kernels/ptx/emissary_mpi.O3.ptx");
const PTX_O0: &str = include_str!("../../../../kernels/ptx/emissary_mpi.O0.ptx");

struct Cuda {
    exec: StreamExecutor,
    ptx: &'static str,
}

type P = DevicePtr<i32>;

impl Cuda {
    fn kernel<A: KernelArgs>(&self, name: &str) -> TypedKernel<A> {
        let spec = MultiKernelLoaderSpec::new(A::ARITY).add_cuda_ptx_in_memory(self.ptx, name);
        self.exec
            .get_kernel(&spec)
            .unwrap_or_else(|e| panic!("loading `{name}`: {e}"))
    }
    fn launch<A: KernelArgs>(&self, name: &str, (threads, blocks): (u32, u32), args: A) {
        let k: TypedKernel<A> = self.kernel(name);
        self.exec
            .create_stream()
            .unwrap()
            .then_launch(threads, blocks, &k, args)
            .block_host_until_done()
            .unwrap_or_else(|e| panic!("`{name}`: {e}"));
    }
}

impl Platform for Cuda {
    fn exec(&self) -> &StreamExecutor {
        &self.exec
    }
    fn warp(&self) -> usize {
        32
    }
    fn grid(&self) -> (u32, u32) {
        (64, 2)
    }
    fn float_rec(&self, t: usize, k: usize) -> Rec {
        Rec {
            kind: 0,
            size: 8,
            value: (t as f64 + 0.25 * k as f64).to_bits(),
        }
    }
    fn send_recv(&self, buf: &View, errors: &View, n: i32) {
        let args: (P, P, i32) = (buf.mem.ptr(), errors.mem.ptr(), n);
        self.launch("mpi_send_recv", self.grid(), args);
    }
    fn allreduce(&self, threads: u32, data: &View, sum: &View, errors: &View, n: i32) {
        let args: (P, P, P, i32) = (data.mem.ptr(), sum.mem.ptr(), errors.mem.ptr(), n);
        self.launch("mpi_allreduce", (threads, 1), args);
    }
    fn every_stub(&self, buf: &View, out: &View) {
        let args: (P, P) = (buf.mem.ptr(), out.mem.ptr());
        self.launch("mpi_every_stub", self.grid(), args);
    }
    fn odd_lanes(&self, buf: &View, out: &View) {
        let args: (P, P) = (buf.mem.ptr(), out.mem.ptr());
        self.launch("mpi_odd_lanes", self.grid(), args);
    }
    fn generic(&self, hbuf: &View, out: &View<u64>) {
        let args: (P, DevicePtr<u64>) = (hbuf.mem.ptr(), out.mem.ptr());
        self.launch("emissary_generic", self.grid(), args);
    }
}

/// The platform with the module loaded (its `__llvm_rpc_client` starts the executor's server
/// in the layout the module has, before the mock is installed), or `None` when cuda is absent.
fn cuda(test: &str, ptx: &'static str) -> Option<Cuda> {
    let exec = executor("cuda", test)?;
    let c = Cuda { exec, ptx };
    let _: TypedKernel<(P, P)> = c.kernel("mpi_odd_lanes");
    Some(c)
}

macro_rules! cuda_tests {
    ($($name:ident: $ptx:expr => $body:expr;)*) => {$(
        #[test]
        fn $name() {
            let _serial = serial();
            let Some(p) = cuda(stringify!($name), $ptx) else { return };
            #[allow(clippy::redundant_closure_call)]
            ($body)(&p);
        }
    )*};
}

cuda_tests! {
    cuda_every_stub_sends_the_spec_buffers_and_writes_the_replies: PTX_O3 =>
        |p: &Cuda| scenarios::every_stub_ok(p);
    cuda_every_stub_at_o0: PTX_O0 => |p: &Cuda| scenarios::every_stub_ok(p);
    cuda_a_failed_status_is_mpi_err_other: PTX_O3 => |p: &Cuda| scenarios::every_stub_status_fails(p);
    cuda_a_failing_handler_is_mpi_err_other: PTX_O3 => |p: &Cuda| scenarios::every_stub_handler_fails(p);
    cuda_divergent_lanes_share_one_port: PTX_O3 => |p: &Cuda| scenarios::odd_lanes(p);
    cuda_generic_calls_carry_every_record_kind: PTX_O3 => |p: &Cuda| scenarios::generic(p, true);
    cuda_generic_calls_at_o0: PTX_O0 => |p: &Cuda| scenarios::generic(p, false);
    cuda_seed_example_sends_and_receives: PTX_O3 => |p: &Cuda| scenarios::send_recv(p);
    cuda_allreduce_checks_the_sums: PTX_O3 => |p: &Cuda| {
        scenarios::allreduce(p, 64, false);
        scenarios::allreduce(p, 64, true);
    };
}
