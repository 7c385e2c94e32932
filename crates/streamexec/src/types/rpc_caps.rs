//! What a backend reports about how device code of one of its executors reaches that
//! executor's RPC server (`StreamExecutorInterface::rpc_capability`). The RPC glue starts the
//! executor's server from this alone; it never asks which platform it runs on.

/// How device code of one executor calls its RPC server: how many lanes one client is, where
/// the shared block lives, and where the device side keeps its port locks.
///
/// | backend | `lane_size` | `block` | `locks` |
/// |---|---|---|---|
/// | host | 32 (a PTX engine warp; Rust host kernels open one lane) | [`Unified`](RpcBlockMemory::Unified) (an allocation of the executor) | [`ClientSymbol`](RpcLockPlacement::ClientSymbol) |
/// | OpenCL | 1 (a work-item) | [`Unified`](RpcBlockMemory::Unified) (SVM) | [`AfterBlock`](RpcLockPlacement::AfterBlock) |
/// | CUDA / HIP | the warp size | [`Unified`](RpcBlockMemory::Unified) (mapped pinned memory) | [`ClientSymbol`](RpcLockPlacement::ClientSymbol) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcCapability {
    /// Packet slots per port: 1 where each thread or work-item is a client of its own, the
    /// warp (wavefront) size where a whole warp is one client.
    pub lane_size: usize,
    /// Where the shared block lives.
    pub block: RpcBlockMemory,
    /// Where the device side's port locks live.
    pub locks: RpcLockPlacement,
}

/// Where an executor's shared RPC block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcBlockMemory {
    /// Plain process memory, for a backend whose clients are all in-process (calling through
    /// `ExecutorRpc::client`, which wakes the server thread when it hands it a port). There is
    /// no block to pass to a kernel. (The host platform uses [`Unified`](Self::Unified), so
    /// that its PTX engine reaches the block too.)
    InProcess,
    /// Unified memory from `StreamExecutorInterface::allocate_unified` (fine-grained SVM on
    /// OpenCL, mapped page-locked host memory on CUDA/HIP, a live allocation on host): devices
    /// reach it at its device address and cannot wake anything, so the server polls while an
    /// RPC launch runs.
    Unified,
}

/// Where the device side of an executor's RPC block keeps its port lock bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcLockPlacement {
    /// In the server object: the clients are the server's own in-process client half.
    InServer,
    /// In the same allocation, right after the protocol's bytes (the OpenCL C client), so every
    /// kernel of the executor shares one set of locks.
    AfterBlock,
    /// Inside the module's `__llvm_rpc_client` global, written from the server's client image
    /// when the module loads (CUDA/HIP device code built against LLVM's GPU libc, and such PTX
    /// on the host's PTX engine). Each module's image then gets a range of ports of its own.
    ClientSymbol,
}
