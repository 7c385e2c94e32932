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
//!
//! ## How the executor serves
//!
//! - **Executor server.** Created on first `StreamExecutor::rpc()` (`Unsupported` where the backend
//!   reports no `RpcCapability`), owned by the executor, stopped and joined when the executor
//!   drops. Its waiting policy : every pending port's handler runs as a call (`calls.rs`, one
//!   coroutine each, on the server thread). A call waiting for its client spins while no other port
//!   has work (checked every 64 spins, at most 4096), then suspends, so with more spinning clients
//!   than cores the thread serves whichever clients are running. Nothing sleeps or yields while
//!   calls are in flight, except a park when every call waits on an in-process client (which wakes
//!   it) or on an external event (an MPI request, `calls::pause`), and a 50 µs park one pass in 64
//!   once no call has moved for 1 ms (`STALL`): its clients are then off the CPU, and a nice −20
//!   thread's yield does not hand its core to them (MPI ranks with spin-only OpenCL work-items on 2
//!   cores took minutes per 10 000 calls before). Idle, it spins 50 µs, then parks for 20 µs
//!   doubling to a cap: 100 µs while a kernel is marked in flight or the doorbell has rung, 1 ms,
//!   10 ms after 100 ms of quiet: the bound for clients that cannot wake it. In the current layout
//!   `Server::build` fills in the doorbell (`value` → the counter at byte 32, `mailbox` → byte 40,
//!   both in the doorbell's padding, `event_id` 0); clients ring it in `open`, the server's close
//!   takes a ring back, and a count above the port count is ignored as garbage. The thread asks for
//!   nice −20 (`STREAMEXEC_RPC_SERVER_NICE`), which only root or `CAP_SYS_NICE` gets: spinning
//!   clients would otherwise hold it to a fair share of a core. Handlers therefore run interleaved
//!   on one thread: a handler must not hold a lock across a port operation that another call takes.
//!   `Server::poll` (no coroutines) keeps one call at a time, waiting with `Wait::Serve` (spin,
//!   then yield now and then). Memory, by the capability: an `InternalAllocator` unified allocation
//!   (SVM on OpenCL, mapped pinned memory on CUDA/HIP, a live allocation of the executor on host),
//!   with the device lock bitmap after the block where the client keeps it there (OpenCL); plain
//!   memory for a backend whose clients are all in-process (none now). `MALLOC`/`FREE` go through
//!   the executor's `InternalAllocator`, and `FREE` frees only what `MALLOC` handed out. Device
//!   `FILE*` values are handles into a table, so a garbage handle is an error result; `HOST_CALL`
//!   only calls registered functions; `SYSTEM` returns -1.
//! - **Clients.** Host kernels call through `ExecutorRpc::client()`. OpenCL kernels get the C
//!   client prepended (`MultiKernelLoaderSpec::with_rpc`) and take the block as an argument
//!   (`ExecutorRpc::block()`). CUDA/HIP modules that define `__llvm_rpc_client`, and PTX modules
//!   that do on the host platform's PTX engine, get a client image written into it at load (the
//!   symbol's size picks the layout, the warp size is the lane size; a module needing another
//!   layout than the running server is refused), and their kernels are RPC launches from plain
//!   `then_launch`.
//! - **Host: one server for both kinds of client.** The host capability is the CUDA one: lane size
//!   32 (the engine's warp, which the header's client sends whole through one port), the block in
//!   `allocate_unified` memory (a live allocation, so the engine's checked loads reach it), locks
//!   in `__llvm_rpc_client`. Rust host kernels use the same block through the in-process client,
//!   which opens one-lane masks (`Client::open` = lane 0) on 32-lane ports and still wakes the
//!   server. Chosen over a second, lane-1 server for Rust kernels: one server thread, one set of
//!   handlers and writers (`set_stdout` covers both), one `exit` attribution, and either may start
//!   it first (the layout is the only thing a module can disagree on). The cost: 2 KiB of packet
//!   slots per port instead of 64 B, and a 32-entry lane vector in `recv_n`/`recv_and_send` per
//!   call; `benches/rpc.rs` builds its own lane-1 servers and does not measure this. PTX warps that
//!   wait spin with `nanosleep`, which gives the block's thread away (`exec.rs`), so the server
//!   thread gets a core.
//! - **Port ranges** (where locks live in `__llvm_rpc_client`: host, CUDA, HIP). Each image carries
//!   its own lock bitmap, so two client halves over one block could take the same port. The
//!   executor's block has `RANGES` (16) × `RANGE_PORTS` (64) ports: the in-process client opens
//!   only the first range (`Process::set_ports`), and each module's image is written with
//!   `port_count` = 64 and its mailbox, header and packet pointers moved to the start of the next
//!   free range (`Geometry::client_image_ports`; the doorbell stays the block's). No two halves
//!   share a port, so no lock is shared. The server scans only ports up to the last range handed
//!   out (`Process::scan_up_to`), so a block with one module costs two ranges of scanning, not
//!   sixteen. A 16th RPC module on one executor is refused at load (modules stay loaded as long as
//!   their executor). `Client::from_image` reads a ranged image back
//!   (`Geometry::parse_client_image`). A spec with `with_foreign_rpc_client()` leaves the symbol
//!   alone and starts nothing: the CPU libcuda loads its modules on the host executor that way,
//!   because the cuda executor above it owns the server (otherwise each live copy of an RPC module
//!   would take a range of the inner executor, and its server would be a second one).
//! - **Emissary device side** (wire format: docs/mpi.md). A stub packs `api, function, argc, flags`
//!   and 16-byte records (value / device pointer / host pointer) into one buffer in the caller's
//!   local memory and makes one `OFFLOAD_EMISSARY` round trip: open, `send_n`, one reply packet per
//!   lane, close. On CUDA/HIP the lanes that call together (the active mask at the call) share the
//!   port, each with its own buffer length; lanes that diverged before the call may arrive apart
//!   and then make a port each. Reply status != 0, or the server's error reply (mapped to
//!   `HOST_ERROR`), makes an MPI stub return `MPI_ERR_OTHER` and write no out-parameter;
//!   out-parameters are written by the stub, never by the host. The OpenCL stubs take the RPC block
//!   first and send pointers as the kernel sees them, so MPI buffers there are unified (SVM)
//!   memory. `tests/emissary_stubs/` checks every lane's buffer byte-exactly against a mock handler
//!   on `cuda` (CPU libcuda) and `opencl`. `se_rpc_ballot`/`se_rpc_bcast` put a `bar.warp.sync`
//!   before `vote.sync`/`shfl.sync`: the PTX engine runs those over the lanes that arrived together
//!   rather than waiting for the whole member mask, and a warp streaming different lengths
//!   deadlocked without it.
//! - **Exit attribution** (`executor_rpc/launches.rs`): the protocol's EXIT/ABORT handlers tell an
//!   `ExitObserver` when the handshake has been received (before the reply that releases the
//!   kernel, so the kernel is still running) and when the status arrives; the executor's `Launches`
//!   is that observer. A host callback marks an RPC launch running just before its kernel and its
//!   completion callback ends it. With one running RPC launch an exit is charged to it exactly;
//!   with several, each fails and the message says the exit may have come from any of them. Non-RPC
//!   launches are never charged.

mod emissary_memory;
mod launches;

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use parking_lot::Mutex;

use self::launches::Launches;
use crate::error::{Error, Result};
use crate::executor::{OwnedAllocation, StreamExecutor};
use crate::rpc::{CLIENT_SYMBOL, Client, EXECUTOR_PORTS, Geometry, Layout, Server, ServerThread};
use crate::types::{DeviceAddress, DevicePtr, RpcBlockMemory, RpcCapability, RpcLockPlacement};

/// Ports of one client half of an executor whose device clients keep their port locks in
/// `__llvm_rpc_client`: the in-process client ([`ExecutorRpc::client`]) has the first range,
/// each module's image one of the others, so no two lock bitmaps guard the same port.
pub(crate) const RANGE_PORTS: usize = crate::rpc::EXECUTOR_PORTS;
/// Ranges of such an executor's block: the in-process client's and one per RPC module.
pub(crate) const RANGES: usize = 16;

/// The client images written into modules.
#[derive(Default)]
struct Images {
    /// Symbol address → the first port of its range (0 for whole-block images).
    written: HashMap<u64, usize>,
    /// Ranges handed out (the in-process client's included).
    ranges: usize,
}

/// An executor's RPC server.
pub struct ExecutorRpc {
    thread: ServerThread,
    /// The block as a kernel argument (`None` for in-process clients, which use [`Client`]).
    block: Option<DevicePtr<u8>>,
    /// The `__llvm_rpc_client` symbols written so far (one per module) and their ports.
    images: Mutex<Images>,
    /// Each client half gets its own `RANGE_PORTS` ports (device clients that keep their
    /// locks in `__llvm_rpc_client`); otherwise every image sees the whole block.
    ranges: bool,
    /// The RPC launches of this executor, which `exit`/`abort` calls are charged to.
    launches: Arc<Launches>,
    /// The executor's platform, for messages.
    platform: &'static str,
}

impl ExecutorRpc {
    /// Starts the server of `exec` in the `layout` with the backend's capability `cap`.
    fn start(exec: &StreamExecutor, cap: RpcCapability, layout: Layout) -> Result<Self> {
        let alloc = exec.internal_allocator();
        // One lock bitmap per module image: a range of ports for each client half. The other
        // placements share one set of locks, so every client sees the whole block.
        let ranges = cap.locks == RpcLockPlacement::ClientSymbol;
        let ports = if ranges {
            RANGE_PORTS * RANGES
        } else {
            EXECUTOR_PORTS
        };
        let geo = Geometry::new(layout, ports, cap.lane_size)?;
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
                (Server::new(layout, ports, cap.lane_size)?, None)
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
                        ports,
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
        let mut images = Images::default();
        if ranges {
            // The first range is the in-process client's; the server looks at no other port
            // until a module's image gets one.
            server.confine_in_process_ports(0, RANGE_PORTS)?;
            images.ranges = 1;
        }
        Ok(ExecutorRpc {
            thread: server.spawn()?,
            block,
            images: Mutex::new(images),
            ranges,
            launches,
            platform: exec.platform_name(),
        })
    }

    /// Writes the server's client image into a module's `__llvm_rpc_client` at `symbol`, once
    /// per symbol (a second write could clear the lock bitmap under running kernels). Where
    /// client halves get ranges, the module gets the next free range of ports: its lock bitmap
    /// then guards ports no other module and no in-process client opens.
    fn write_client(
        &self,
        exec: &StreamExecutor,
        kernel: &str,
        symbol: DeviceAddress,
    ) -> Result<()> {
        let mut images = self.images.lock();
        if images.written.contains_key(&symbol.raw()) {
            return Ok(());
        }
        let (first, image) = if self.ranges {
            if images.ranges == RANGES {
                return Err(Error::KernelLoad {
                    platform: self.platform,
                    kernel: kernel.into(),
                    detail: format!(
                        "`{CLIENT_SYMBOL}`: this executor's RPC server already serves {} \
                         modules that define it, each on ports of its own, and has no ports \
                         left for another; load the RPC kernels from fewer modules (one module \
                         may hold many kernels) or use another executor",
                        RANGES - 1
                    ),
                });
            }
            let first = images.ranges * RANGE_PORTS;
            (first, self.server().client_image_ports(first, RANGE_PORTS)?)
        } else {
            (0, self.server().client_image())
        };
        // SAFETY: the backend reported `symbol` as a global of the module it loaded on this
        // executor (modules live as long as the executor), and the layout was chosen from that
        // global's size, which is exactly the image's size.
        unsafe { exec.interface().memcpy_h2d_sync(&image, symbol)? };
        images.written.insert(symbol.raw(), first);
        if self.ranges {
            images.ranges += 1;
        }
        Ok(())
    }

    /// The first port of the range the module image at `symbol` was given (0 where images
    /// see the whole block), or `None` when no image was written there.
    #[cfg(test)]
    pub(crate) fn image_first_port(&self, symbol: DeviceAddress) -> Option<usize> {
        self.images.lock().written.get(&symbol.raw()).copied()
    }

    /// The server (register handlers and services, read its log).
    pub fn server(&self) -> &Server {
        self.thread.server()
    }

    /// A client for host-platform kernels: capture it in the kernel's closure. It opens one
    /// lane of a port (ports are a warp wide where PTX warps call the same server), and only
    /// ports of its own range where modules' images keep their own locks.
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
    /// Host kernels call through [`client`](Self::client) instead; `Unsupported` where the
    /// block is plain process memory.
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
    /// OpenCL, the warp size on host (its PTX engine's warps), CUDA and HIP (unless a module's `__llvm_rpc_client`
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
            platform: self.platform_name(),
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
        rpc.write_client(self, kernel, symbol)
    }
}
