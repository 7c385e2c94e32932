//! Every executor's RPC server: created on first use, in memory the backend provides, on a
//! thread that parks while nothing may call it, stopped and joined when the executor drops.
//!
//! Memory per platform comes from `StreamExecutorInterface::allocate_unified` (ordinary memory
//! on host, fine-grained SVM on OpenCL); a backend without it (CUDA/HIP until they implement it
//! with pinned device-mapped memory) gets `Unsupported`.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use parking_lot::Mutex;

use super::Client;
use super::layout::Layout;
use super::server::{Server, ServerThread};
use crate::error::{Error, Result};
use crate::executor::{OwnedAllocation, StreamExecutor};
use crate::kernel::TypedKernel;
use crate::stream::Stream;
use crate::types::DeviceAddress;
use crate::types::DevicePtr;
use crate::types::{BlockDim, KernelArgs, ThreadDim};

/// Ports of an executor's server (each is one warp's worth of concurrent calls).
pub const EXECUTOR_PORTS: usize = 64;

/// An executor's RPC server.
pub struct ExecutorRpc {
    thread: ServerThread,
    /// The block as a kernel argument (`None` on host, whose kernels use [`Client`]).
    block: Option<DevicePtr<u8>>,
    /// Device addresses of `__llvm_rpc_client` symbols already written (one per module).
    written: Mutex<HashSet<u64>>,
}

/// The name of the global through which LLVM GPU libc device code finds its RPC client.
pub const CLIENT_SYMBOL: &str = "__llvm_rpc_client";

/// The layout and lane size an executor's server gets when nothing asks for another: the
/// current layout; lane size 1 for host and OpenCL clients (one thread or work-item is one
/// client), the device's warp size on CUDA/HIP (one warp or wavefront is one client).
fn default_config(exec: &StreamExecutor) -> (Layout, usize) {
    let lane = match exec.platform_name() {
        "host" | "opencl" => 1,
        _ => exec.description().warp_size as usize,
    };
    (Layout::Current, lane)
}

impl ExecutorRpc {
    pub(crate) fn start(exec: &StreamExecutor, layout: Layout, lane_size: usize) -> Result<Self> {
        let alloc = exec.internal_allocator();
        let platform = exec.platform_name();
        let host = platform == "host";
        // OpenCL clients keep their port locks in the same block, after the protocol's bytes;
        // CUDA/HIP clients keep theirs in `__llvm_rpc_client`.
        let locks = if platform == "opencl" {
            super::opencl::lock_bytes()
        } else {
            0
        };
        let server = if host {
            // Host kernels are in-process clients: plain memory, and they wake the thread.
            Server::new(layout, EXECUTOR_PORTS, lane_size)?
        } else {
            let geo = super::layout::Geometry::new(layout, EXECUTOR_PORTS, lane_size)?;
            let (block, host) = alloc.allocate_unified((geo.allocation_size() + locks) as u64)?;
            let device = block.address().raw();
            // SAFETY: `allocate_unified` gives zeroed, host-coherent bytes for the block and the
            // locks after it, 64-byte aligned, kept alive (and registered as live) by `block`,
            // which the server drops only after the halves that point into it.
            unsafe {
                Server::with_owner(
                    layout,
                    EXECUTOR_PORTS,
                    lane_size,
                    host,
                    device,
                    Box::new(block),
                )?
            }
        };
        let block = (!host).then(|| {
            let bytes = server.geometry().allocation_size() + locks;
            DevicePtr::from_parts(
                DeviceAddress::new(server.device_address()),
                bytes,
                exec.id(),
            )
        });
        // MALLOC'd memory is owned here, by address; FREE releases only what MALLOC gave out,
        // so a device that frees a garbage address cannot free memory it does not own.
        let mallocs: std::sync::Arc<Mutex<HashMap<u64, OwnedAllocation>>> = Default::default();
        let (m, f) = (mallocs.clone(), mallocs);
        server.set_allocator((
            Box::new(move |bytes| {
                let a = alloc.allocate(bytes)?;
                let addr = a.address().raw();
                m.lock().insert(addr, a);
                Ok(addr)
            }),
            Box::new(move |addr| {
                if f.lock().remove(&addr).is_none() {
                    eprintln!(
                        "streamexec rpc: FREE of {addr:#x}, which MALLOC did not hand out; ignored"
                    );
                }
            }),
        ));
        Ok(ExecutorRpc {
            thread: server.spawn(),
            block,
            written: Mutex::new(HashSet::new()),
        })
    }

    /// Writes the server's client image into a module's `__llvm_rpc_client` at `symbol`, once
    /// per symbol (a second write could clear the lock bitmap under running kernels).
    fn write_client(&self, exec: &StreamExecutor, symbol: DeviceAddress) -> Result<()> {
        let mut written = self.written.lock();
        if written.contains(&symbol.raw()) {
            return Ok(());
        }
        let image = self.server().client_image();
        // SAFETY: the backend reported `symbol` as a global of the module it loaded on this
        // executor (modules live as long as the executor), and the layout was chosen from that
        // global's size, which is exactly the image's size.
        unsafe { exec.interface().memcpy_h2d_sync(&image, symbol)? };
        written.insert(symbol.raw());
        Ok(())
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

    /// The block's layout and lane size.
    pub fn config(&self) -> (Layout, usize) {
        let g = self.server().geometry();
        (g.layout, g.lane_size)
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

/// Marks an RPC launch in flight until dropped: the server thread polls meanwhile, and an
/// `exit`/`abort` served while it runs is charged to it.
struct InFlight {
    server: Server,
    launch: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.server.end_launch(self.launch);
        self.server.end_kernel();
    }
}

impl StreamExecutor {
    /// This executor's RPC server, started on first use: the current layout, lane size 1 on
    /// host and OpenCL, the warp size on CUDA/HIP (unless a module's `__llvm_rpc_client`
    /// started it first with its own layout).
    pub fn rpc(&self) -> Result<&ExecutorRpc> {
        if let Some(r) = self.rpc_cell().get() {
            return Ok(r);
        }
        let (layout, lane) = default_config(self);
        self.rpc_with(layout, lane)
    }

    /// The server, started with `layout` and `lane_size` if it is not running yet; an error
    /// when it already runs with another layout or lane size (one block serves one kind of
    /// client).
    fn rpc_with(&self, layout: Layout, lane_size: usize) -> Result<&ExecutorRpc> {
        let cell = self.rpc_cell();
        if cell.get().is_none() {
            // A racing first call may also start one; the loser's server stops when it drops.
            let _ = cell.set(ExecutorRpc::start(self, layout, lane_size)?);
        }
        let rpc = cell.get().expect("set above"); // ok: `set` above or by a racing caller
        let running = rpc.config();
        if running != (layout, lane_size) {
            return Err(Error::Rpc {
                detail: format!(
                    "the executor's RPC server already runs with the {:?} layout and lane size \
                     {}, and this module needs the {layout:?} layout and lane size {lane_size}; \
                     one executor serves device code of one LLVM libc revision (load such \
                     modules before calling StreamExecutor::rpc, which starts the default \
                     server, or use another executor)",
                    running.0, running.1
                ),
            });
        }
        Ok(rpc)
    }

    /// A loaded module defines `__llvm_rpc_client` (`size` bytes at `symbol`): start the server
    /// with the layout that size implies and the device's warp size as lane size, and write
    /// the client image into the symbol, as LLVM's loaders do.
    pub(crate) fn attach_rpc_client(
        &self,
        kernel: &str,
        symbol: DeviceAddress,
        size: usize,
    ) -> Result<()> {
        let fail = |detail: String| Error::KernelLoad {
            platform: self.platform_name().into(),
            kernel: kernel.into(),
            detail,
        };
        let layout = Layout::from_client_size(size).ok_or_else(|| {
            fail(format!(
                "the module's `{CLIENT_SYMBOL}` has {size} bytes, a layout streamexec does not \
                 know: it accepts {} bytes (current LLVM libc, with the doorbell) and {} bytes \
                 (LLVM 20 to 22, before the doorbell); rebuild the device code against one of \
                 those",
                Layout::Current.client_image_size(),
                Layout::PreDoorbell.client_image_size()
            ))
        })?;
        let lane = self.description().warp_size as usize;
        let rpc = self
            .rpc_with(layout, lane)
            .map_err(|e| fail(format!("`{CLIENT_SYMBOL}`: {e}")))?;
        rpc.write_client(self, symbol)
    }
}

impl Stream {
    /// `then_launch` for a kernel that may call the executor's RPC server: the server thread
    /// polls while the kernel runs, and an `exit`/`abort` the kernel sent fails this stream.
    /// Kernels of a CUDA/HIP module that defines `__llvm_rpc_client` launch this way from
    /// plain `then_launch` too.
    pub fn then_launch_with_rpc<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> &mut Self {
        let (threads, blocks) = (threads.into(), blocks.into());
        self.with_rpc(kernel.name(), |s| {
            s.launch_typed(threads, blocks, kernel, args);
        })
    }

    /// Runs `launch` (which enqueues one kernel) as an RPC launch: the server polls from now
    /// until the kernel is done; a host callback just before the kernel marks it running and
    /// one after it charges the `exit`/`abort` calls served meanwhile to this stream.
    pub(crate) fn with_rpc(&mut self, name: &str, launch: impl FnOnce(&mut Self)) -> &mut Self {
        let server = match self.executor().rpc() {
            Ok(r) => r.server().view(),
            Err(e) => return self.then_host_callback_with_status(move || Err(e)),
        };
        server.begin_kernel();
        let launch_id = server.new_launch(name);
        let guard = InFlight {
            server,
            launch: launch_id,
        };
        let start = guard.server.view();
        self.then_host_callback_with_status(move || {
            start.start_launch(launch_id);
            Ok(())
        });
        launch(self);
        self.then_host_callback_with_status(move || {
            let exit = guard.server.finish_launch(guard.launch);
            drop(guard);
            exit.map_or(Ok(()), Err)
        })
    }
}
