//! Every executor's RPC server: the glue between the protocol (`crate::rpc`, which knows no
//! platform, executor or stream) and the handles. Created on first use, from what the backend
//! reports ([`RpcCapability`]: lane size, where the block and the device side's locks live),
//! on a thread that parks while nothing may call it, stopped and joined when the executor
//! drops.
//!
//! - this file: [`ExecutorRpc`] and the executor side (`StreamExecutor::rpc`, attaching a
//!   module's `__llvm_rpc_client`);
//! - `emissary_memory.rs`: emissary pointer arguments resolved against the executor's
//!   allocations (in place or staged);
//! - `launches.rs`: RPC launches (`Stream::then_launch_with_rpc`) and which of them an
//!   `exit`/`abort` is charged to.

mod emissary_memory;
mod launches;

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use parking_lot::Mutex;

use self::launches::Launches;
use crate::error::{Error, Result};
use crate::executor::{OwnedAllocation, StreamExecutor};
use crate::rpc::{CLIENT_SYMBOL, Client, EXECUTOR_PORTS, Geometry, Layout, Server, ServerThread};
use crate::types::{DeviceAddress, DevicePtr, RpcBlockMemory, RpcCapability, RpcLockPlacement};

/// An executor's RPC server.
pub struct ExecutorRpc {
    thread: ServerThread,
    /// The block as a kernel argument (`None` for in-process clients, which use [`Client`]).
    block: Option<DevicePtr<u8>>,
    /// Device addresses of `__llvm_rpc_client` symbols already written (one per module).
    written: Mutex<HashSet<u64>>,
    /// The RPC launches of this executor, which `exit`/`abort` calls are charged to.
    launches: Arc<Launches>,
    /// The executor's platform, for messages.
    platform: &'static str,
}

impl ExecutorRpc {
    /// Starts the server of `exec` in the `layout` with the backend's capability `cap`.
    fn start(exec: &StreamExecutor, cap: RpcCapability, layout: Layout) -> Result<Self> {
        let alloc = exec.internal_allocator();
        let geo = Geometry::new(layout, EXECUTOR_PORTS, cap.lane_size)?;
        // Device clients that keep their port locks in the block get room after the protocol's
        // bytes; the others keep theirs in `__llvm_rpc_client` or in the server object.
        let locks = match cap.locks {
            RpcLockPlacement::AfterBlock => geo.lock_bitmap_bytes(),
            RpcLockPlacement::InServer | RpcLockPlacement::ClientSymbol => 0,
        };
        let (server, block) = match cap.block {
            RpcBlockMemory::InProcess => {
                if locks != 0 {
                    return Err(Error::Rpc {
                        detail: format!(
                            "the {} backend reports in-process RPC clients with their locks \
                             after the block, which has no device allocation to hold them",
                            exec.platform_name()
                        ),
                    });
                }
                // In-process clients: plain memory, and they wake the thread.
                (Server::new(layout, EXECUTOR_PORTS, cap.lane_size)?, None)
            }
            RpcBlockMemory::Unified => {
                let bytes = geo.allocation_size() + locks;
                let (owned, host) = alloc.allocate_unified(bytes as u64)?;
                let (device, id) = (owned.address(), owned.id());
                // SAFETY: `allocate_unified` gives zeroed, host-coherent bytes for the block and
                // the locks after it, 64-byte aligned, kept alive (and registered as live) by
                // `owned`, which the server drops only after the halves that point into it.
                let server = unsafe {
                    Server::with_owner(
                        layout,
                        EXECUTOR_PORTS,
                        cap.lane_size,
                        host,
                        device.raw(),
                        Box::new(owned),
                    )?
                };
                let block = DevicePtr::from_parts(device, bytes, exec.id(), id);
                (server, Some(block))
            }
        };
        // MALLOC'd memory is owned here, by address; FREE releases only what MALLOC gave out,
        // so a device that frees a garbage address cannot free memory it does not own.
        let mallocs: Arc<Mutex<HashMap<u64, OwnedAllocation>>> = Default::default();
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
        let launches = Arc::new(Launches::default());
        server.set_exit_observer(Some(launches.clone()));
        server.set_emissary_memory(Arc::new(emissary_memory::ExecutorMemory {
            exec: exec.downgrade(),
        }));
        Ok(ExecutorRpc {
            thread: server.spawn(),
            block,
            written: Mutex::new(HashSet::new()),
            launches,
            platform: exec.platform_name(),
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
                self.platform,
                "ExecutorRpc::block",
                format!(
                    "{} kernels call the server through ExecutorRpc::client()",
                    self.platform
                ),
            )
        })
    }

    /// The device address of the shared block (the OpenCL client's buffer argument).
    pub fn buffer_address(&self) -> u64 {
        self.server().device_address()
    }
}

impl StreamExecutor {
    /// This executor's RPC server, started on first use: the current layout, lane size 1 on
    /// host and OpenCL, the warp size on CUDA/HIP (unless a module's `__llvm_rpc_client`
    /// started it first with its own layout). `Unsupported` on a platform without
    /// device-initiated RPC.
    pub fn rpc(&self) -> Result<&ExecutorRpc> {
        if let Some(r) = self.rpc_cell().get() {
            return Ok(r);
        }
        let cap = self.rpc_capability()?;
        self.rpc_with(cap, Layout::Current)
    }

    /// What the backend reports about its device RPC clients; `Unsupported` when it has none.
    fn rpc_capability(&self) -> Result<RpcCapability> {
        self.interface().rpc_capability().ok_or_else(|| {
            Error::unsupported(
                self.platform_name(),
                "StreamExecutor::rpc",
                "this platform's kernels cannot call the host; run kernels that use RPC on the \
                 host, OpenCL, CUDA or HIP platform",
            )
        })
    }

    /// The server, started with `layout` and the capability's lane size if it is not running
    /// yet; an error when it already runs with another layout or lane size (one block serves
    /// one kind of client).
    fn rpc_with(&self, cap: RpcCapability, layout: Layout) -> Result<&ExecutorRpc> {
        let cell = self.rpc_cell();
        if cell.get().is_none() {
            // A racing first call may also start one; the loser's server stops when it drops.
            let _ = cell.set(ExecutorRpc::start(self, cap, layout)?);
        }
        let rpc = cell.get().expect("set above"); // ok: `set` above or by a racing caller
        let running = rpc.config();
        let lane_size = cap.lane_size;
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
    /// with the layout that size implies and the backend's lane size (the device's warp size),
    /// and write the client image into the symbol, as LLVM's loaders do.
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
        let rpc = self
            .rpc_capability()
            .and_then(|cap| self.rpc_with(cap, layout))
            .map_err(|e| fail(format!("`{CLIENT_SYMBOL}`: {e}")))?;
        rpc.write_client(self, symbol)
    }
}
