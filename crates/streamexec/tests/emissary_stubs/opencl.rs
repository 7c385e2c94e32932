//! The OpenCL C stubs (`MultiKernelLoaderSpec::with_mpi`) in kernels/cl/emissary_mpi.cl on the
//! `opencl` platform (PoCL here): every work-item is its own lane-size-1 client.

use streamexec::{DevicePtr, KernelArgs, MultiKernelLoaderSpec, StreamExecutor, TypedKernel};

use super::scenarios::{self, Platform};
use super::{Rec, View, executor, serial};

const CL: &str = include_str!("../../../../kernels/cl/emissary_mpi.cl");

struct OpenCl {
    exec: StreamExecutor,
}

type P = DevicePtr<i32>;
type Rpc = DevicePtr<u8>;

impl OpenCl {
    fn launch<A: KernelArgs>(&self, name: &str, (threads, blocks): (u32, u32), args: A) {
        let spec = MultiKernelLoaderSpec::new(A::ARITY)
            .add_opencl_text_in_memory(CL, name)
            .with_mpi();
        let k: TypedKernel<A> = self
            .exec
            .get_kernel(&spec)
            .unwrap_or_else(|e| panic!("loading `{name}`: {e}"));
        self.exec
            .create_stream()
            .unwrap()
            .then_launch_with_rpc(threads, blocks, &k, args)
            .block_host_until_done()
            .unwrap_or_else(|e| panic!("`{name}`: {e}"));
    }
    fn rpc(&self) -> Rpc {
        self.exec.rpc().unwrap().block().unwrap()
    }
}

impl Platform for OpenCl {
    fn exec(&self) -> &StreamExecutor {
        &self.exec
    }
    fn warp(&self) -> usize {
        1
    }
    fn grid(&self) -> (u32, u32) {
        (8, 3)
    }
    fn float_rec(&self, t: usize, k: usize) -> Rec {
        Rec {
            kind: 0,
            size: 4,
            value: u64::from((t as f32 + 0.25 * k as f32).to_bits()),
        }
    }
    fn send_recv(&self, buf: &View, errors: &View, n: i32) {
        let args: (Rpc, P, P, i32) = (self.rpc(), buf.mem.ptr(), errors.mem.ptr(), n);
        self.launch("mpi_send_recv", self.grid(), args);
    }
    fn allreduce(&self, threads: u32, data: &View, sum: &View, errors: &View, n: i32) {
        let args: (Rpc, P, P, P, i32) = (
            self.rpc(),
            data.mem.ptr(),
            sum.mem.ptr(),
            errors.mem.ptr(),
            n,
        );
        self.launch("mpi_allreduce", (threads, 1), args);
    }
    fn every_stub(&self, buf: &View, out: &View) {
        let args: (Rpc, P, P) = (self.rpc(), buf.mem.ptr(), out.mem.ptr());
        self.launch("mpi_every_stub", self.grid(), args);
    }
    fn odd_lanes(&self, buf: &View, out: &View) {
        let args: (Rpc, P, P) = (self.rpc(), buf.mem.ptr(), out.mem.ptr());
        self.launch("mpi_odd_lanes", self.grid(), args);
    }
    fn generic(&self, hbuf: &View, out: &View<u64>) {
        let args: (Rpc, P, DevicePtr<u64>) = (self.rpc(), hbuf.mem.ptr(), out.mem.ptr());
        self.launch("emissary_generic", self.grid(), args);
    }
}

macro_rules! opencl_tests {
    ($($name:ident => $body:expr;)*) => {$(
        #[test]
        fn $name() {
            let _serial = serial();
            let Some(exec) = executor("opencl", stringify!($name)) else { return };
            #[allow(clippy::redundant_closure_call)]
            ($body)(&OpenCl { exec });
        }
    )*};
}

opencl_tests! {
    opencl_every_stub_sends_the_spec_buffers_and_writes_the_replies =>
        |p: &OpenCl| scenarios::every_stub_ok(p);
    opencl_a_failed_status_is_mpi_err_other => |p: &OpenCl| scenarios::every_stub_status_fails(p);
    opencl_a_failing_handler_is_mpi_err_other => |p: &OpenCl| scenarios::every_stub_handler_fails(p);
    opencl_only_the_odd_work_items_call => |p: &OpenCl| scenarios::odd_lanes(p);
    opencl_generic_calls_carry_every_record_kind => |p: &OpenCl| scenarios::generic(p, false);
    opencl_seed_example_sends_and_receives => |p: &OpenCl| scenarios::send_recv(p);
    opencl_allreduce_checks_the_sums => |p: &OpenCl| {
        scenarios::allreduce(p, 16, false);
        scenarios::allreduce(p, 16, true);
    };
}
