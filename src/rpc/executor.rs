//! Every executor's RPC server: created on first use, in memory the backend provides, on a
//! thread that parks while nothing may call it, stopped and joined when the executor drops.
//!
//! Memory per platform comes from `StreamExecutorInterface::allocate_unified` (ordinary memory
//! on host, fine-grained SVM on OpenCL); a backend without it (CUDA/HIP until they implement it
//! with pinned device-mapped memory) gets `Unsupported`.

use std::io::Write;

use super::Client;
use super::layout::Layout;
use super::server::{Server, ServerThread};
use super::services::KernelExit;
use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::kernel::{BlockDim, KernelArgs, ThreadDim, TypedKernel};
use crate::memory::DevicePtr;
use crate::platform::interface::DeviceAddress;
use crate::stream::Stream;

/// Ports of an executor's server (each is one warp's worth of concurrent calls).
pub const EXECUTOR_PORTS: usize = 64;

/// An executor's RPC server.
pub struct ExecutorRpc {
    thread: ServerThread,
    /// The block as a kernel argument (`None` on host, whose kernels use [`Client`]).
    block: Option<DevicePtr<u8>>,
}

impl ExecutorRpc {
    pub(crate) fn start(exec: &StreamExecutor) -> Result<ExecutorRpc> {
        let iface = exec.interface().clone();
        let host = exec.platform_name() == "host";
        let server = if host {
            // Host kernels are in-process clients: plain memory, and they wake the thread.
            Server::new(Layout::Current, EXECUTOR_PORTS, 1)?
        } else {
            // Device clients keep their port locks in the same block, after the protocol's bytes.
            let locks = super::opencl::lock_bytes();
            Server::in_unified(iface.clone(), Layout::Current, EXECUTOR_PORTS, 1, locks)?
        };
        let block = (!host).then(|| {
            let bytes = server.geometry().allocation_size() + super::opencl::lock_bytes();
            DevicePtr::from_parts(DeviceAddress(server.device_address()), bytes, exec.id())
        });
        let (a, f) = (iface.clone(), iface);
        server.set_allocator((
            Box::new(move |bytes| a.allocate(bytes).map(|d| d.0)),
            Box::new(move |addr| f.deallocate(DeviceAddress(addr))),
        ));
        Ok(ExecutorRpc {
            thread: server.spawn(),
            block,
        })
    }

    /// The server (register handlers and services, read its log).
    pub fn server(&self) -> &Server {
        self.thread.server()
    }

    /// A client for host-platform kernels: capture it in the kernel's closure.
    pub fn client(&self) -> Client {
        self.thread.server().client()
    }

    /// Sends kernel stdout to `w` (`None`: the process's stdout).
    pub fn set_stdout(&self, w: Option<Box<dyn Write + Send>>) {
        self.server().set_stdout(w)
    }

    /// Sends kernel stderr to `w` (`None`: the process's stderr).
    pub fn set_stderr(&self, w: Option<Box<dyn Write + Send>>) {
        self.server().set_stderr(w)
    }

    /// The shared block as a kernel argument, for kernels built with the OpenCL client
    /// ([`MultiKernelLoaderSpec::with_rpc`](crate::MultiKernelLoaderSpec::with_rpc)): the
    /// kernel declares a `__global void *rpc` parameter and passes it to the `se_rpc_*` calls.
    /// Host kernels call through [`client`](Self::client) instead (`Unsupported` here).
    pub fn block(&self) -> Result<DevicePtr<u8>> {
        self.block.ok_or_else(|| {
            Error::unsupported(
                "host",
                "ExecutorRpc::block",
                "host kernels call the server through ExecutorRpc::client()",
            )
        })
    }

    /// The device address of the shared block (the OpenCL client's buffer argument).
    pub fn buffer_address(&self) -> u64 {
        self.server().device_address()
    }
}

/// Marks a kernel in flight until dropped: the server thread polls meanwhile.
struct InFlight(Server);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end_kernel();
    }
}

impl StreamExecutor {
    /// This executor's RPC server, started on first use.
    pub fn rpc(&self) -> Result<&ExecutorRpc> {
        let cell = self.rpc_cell();
        if let Some(r) = cell.get() {
            return Ok(r);
        }
        // A racing first call may also start one; the loser's server stops when it drops.
        let _ = cell.set(ExecutorRpc::start(self)?);
        Ok(cell.get().expect("set above")) // ok: `set` above or by a racing caller
    }
}

impl Stream {
    /// `then_launch` for a kernel that may call the executor's RPC server: the server thread
    /// polls while the kernel runs, and an `exit`/`abort` the kernel sent fails this stream.
    pub fn then_launch_with_rpc<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> &mut Self {
        let server = match self.executor().rpc() {
            Ok(r) => r.server().view(),
            Err(e) => return self.then_host_callback_with_status(move || Err(e)),
        };
        server.begin_kernel();
        let guard = InFlight(server);
        self.then_launch(threads, blocks, kernel, args);
        let name = kernel.name().to_string();
        self.then_host_callback_with_status(move || {
            let exits = guard.0.take_exits();
            drop(guard);
            match exits.first() {
                None => Ok(()),
                Some(KernelExit::Exit(code)) => Err(Error::Rpc {
                    detail: format!("kernel `{name}` called exit({code})"),
                }),
                Some(KernelExit::Abort) => Err(Error::Rpc {
                    detail: format!("kernel `{name}` called abort()"),
                }),
            }
        })
    }
}
