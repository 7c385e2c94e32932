//! MPI from kernels: [`Communicator::serve_kernels`] puts the MPI Emissary API on an
//! executor's RPC server, and [`KernelMpi`] is the device side for native host kernels (the
//! Rust counterpart of `include/streamexec_mpi.h` and the OpenCL C stubs): each call is one
//! emissary round trip, served on the server thread as a device's would be.

use std::ops::Range;

use super::emissary::{self, DEVICE_MPI_IN_PLACE, function as f};
use super::{Communicator, MpiElement, ReduceOp};
use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::rpc::{Client, EMISSARY_API_MPI, EmissaryArg, EmissaryReply};
use crate::types::DevicePtr;

impl Communicator {
    /// Lets kernels of `executor` call MPI on this communicator (their `MPI_COMM_WORLD`):
    /// registers the MPI Emissary API on the executor's RPC server (starting it, in the current
    /// layout, if no module has). Kernels then call the stubs of `include/streamexec_mpi.h`
    /// (CUDA C), the OpenCL C ones (`MultiKernelLoaderSpec::with_mpi`) or [`KernelMpi`].
    pub fn serve_kernels(&self, executor: &StreamExecutor) -> Result<()> {
        Ok(executor
            .rpc()?
            .server()
            .register_emissary(emissary::api(self))?)
    }
}

/// The device ABI's op handle.
fn device_op(op: ReduceOp) -> i32 {
    match op {
        ReduceOp::Sum => 1,
        ReduceOp::Prod => 2,
        ReduceOp::Min => 3,
        ReduceOp::Max => 4,
    }
}

/// What a receive reports (`MPI_Status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpiStatus {
    /// The sender's rank.
    pub source: i32,
    /// The message's tag.
    pub tag: i32,
    /// The status's error field.
    pub error: i32,
    /// Bytes received.
    pub bytes: usize,
}

/// A started `isend`/`irecv`; [`KernelMpi::wait`] completes it.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an MPI request must be waited for"]
pub struct MpiRequest(u64);

/// MPI for native host kernels: capture one (built from the executor's
/// [`ExecutorRpc::client`](crate::ExecutorRpc::client)) in the kernel's closure. Buffers are
/// device memory of the kernel's executor, named by pointer and element range. The wait for
/// the server is a device's (the thread spins, then gives the CPU away); an MPI error or a
/// refused call is an `Err` naming the call.
pub struct KernelMpi {
    client: Client,
}

fn ptr_arg<T>(buf: DevicePtr<T>, range: &Range<usize>, call: &str) -> Result<(EmissaryArg, i32)> {
    if range.start > range.end || range.end > buf.len() {
        return Err(Error::invalid(
            format!("KernelMpi::{call}"),
            format!(
                "elements {range:?} are not inside the {}-element buffer",
                buf.len()
            ),
        ));
    }
    let count = i32::try_from(range.len()).map_err(|_| {
        Error::invalid(
            format!("KernelMpi::{call}"),
            format!("{} elements exceed MPI's int count", range.len()),
        )
    })?;
    let addr = buf.address().raw() + (range.start * std::mem::size_of::<T>()) as u64;
    Ok((EmissaryArg::Device(addr), count))
}

const WORLD: EmissaryArg = EmissaryArg::Value { size: 4, bits: 0 };

impl KernelMpi {
    /// MPI through `client` (the kernel's executor's RPC client).
    pub fn new(client: Client) -> Self {
        KernelMpi { client }
    }

    fn call(&self, function: u32, name: &str, args: &[EmissaryArg]) -> Result<EmissaryReply> {
        let r = self.client.emissary(EMISSARY_API_MPI, function, args)?;
        if r.ret != 0 {
            return Err(Error::Rpc {
                detail: format!("{name} returned MPI error {}", r.ret),
            });
        }
        Ok(r)
    }

    /// `MPI_Comm_rank(MPI_COMM_WORLD)`.
    pub fn rank(&self) -> Result<i32> {
        Ok(self.call(f::COMM_RANK, "MPI_Comm_rank", &[WORLD])?.outs[0] as i32)
    }

    /// `MPI_Comm_size(MPI_COMM_WORLD)`.
    pub fn size(&self) -> Result<i32> {
        Ok(self.call(f::COMM_SIZE, "MPI_Comm_size", &[WORLD])?.outs[0] as i32)
    }

    fn p2p_args<T: MpiElement>(
        buf: DevicePtr<T>,
        range: &Range<usize>,
        peer: i32,
        tag: i32,
        call: &str,
    ) -> Result<[EmissaryArg; 6]> {
        let (p, count) = ptr_arg(buf, range, call)?;
        Ok([
            p,
            EmissaryArg::i32(count),
            EmissaryArg::i32(T::DEVICE_DATATYPE),
            EmissaryArg::i32(peer),
            EmissaryArg::i32(tag),
            WORLD,
        ])
    }

    /// `MPI_Send` of elements `range` of `buf` to rank `dest`.
    pub fn send<T: MpiElement>(
        &self,
        buf: DevicePtr<T>,
        range: Range<usize>,
        dest: i32,
        tag: i32,
    ) -> Result<()> {
        let args = Self::p2p_args(buf, &range, dest, tag, "send")?;
        self.call(f::SEND, "MPI_Send", &args).map(drop)
    }

    /// `MPI_Recv` into elements `range` of `buf` from rank `source` (-1: any source, any tag).
    pub fn recv<T: MpiElement>(
        &self,
        buf: DevicePtr<T>,
        range: Range<usize>,
        source: i32,
        tag: i32,
    ) -> Result<MpiStatus> {
        let args = Self::p2p_args(buf, &range, source, tag, "recv")?;
        Ok(status(&self.call(f::RECV, "MPI_Recv", &args)?))
    }

    /// `MPI_Isend`: the data is read until [`wait`](Self::wait).
    pub fn isend<T: MpiElement>(
        &self,
        buf: DevicePtr<T>,
        range: Range<usize>,
        dest: i32,
        tag: i32,
    ) -> Result<MpiRequest> {
        let args = Self::p2p_args(buf, &range, dest, tag, "isend")?;
        Ok(MpiRequest(self.call(f::ISEND, "MPI_Isend", &args)?.outs[0]))
    }

    /// `MPI_Irecv`: the data lands by [`wait`](Self::wait).
    pub fn irecv<T: MpiElement>(
        &self,
        buf: DevicePtr<T>,
        range: Range<usize>,
        source: i32,
        tag: i32,
    ) -> Result<MpiRequest> {
        let args = Self::p2p_args(buf, &range, source, tag, "irecv")?;
        Ok(MpiRequest(self.call(f::IRECV, "MPI_Irecv", &args)?.outs[0]))
    }

    /// `MPI_Wait`.
    pub fn wait(&self, request: MpiRequest) -> Result<MpiStatus> {
        let r = self.call(f::WAIT, "MPI_Wait", &[EmissaryArg::u64(request.0)])?;
        Ok(status(&r))
    }

    /// `MPI_Allreduce` of elements `range` of `send` into the same elements of `recv`; `send`
    /// `None` is `MPI_IN_PLACE` (the data is in `recv`).
    pub fn all_reduce<T: MpiElement>(
        &self,
        send: Option<DevicePtr<T>>,
        recv: DevicePtr<T>,
        range: Range<usize>,
        op: ReduceOp,
    ) -> Result<()> {
        let (r, count) = ptr_arg(recv, &range, "all_reduce")?;
        let s = match send {
            Some(s) => ptr_arg(s, &range, "all_reduce")?.0,
            None => EmissaryArg::Device(DEVICE_MPI_IN_PLACE),
        };
        let args = [
            s,
            r,
            EmissaryArg::i32(count),
            EmissaryArg::i32(T::DEVICE_DATATYPE),
            EmissaryArg::i32(device_op(op)),
            WORLD,
        ];
        self.call(f::ALLREDUCE, "MPI_Allreduce", &args).map(drop)
    }

    /// `MPI_Reduce` of elements `range` of `send` into `recv` on rank `root` (other ranks may
    /// pass `recv` `None`).
    pub fn reduce<T: MpiElement>(
        &self,
        send: DevicePtr<T>,
        recv: Option<DevicePtr<T>>,
        range: Range<usize>,
        op: ReduceOp,
        root: i32,
    ) -> Result<()> {
        let (s, count) = ptr_arg(send, &range, "reduce")?;
        let r = match recv {
            Some(r) => ptr_arg(r, &range, "reduce")?.0,
            None => EmissaryArg::Device(0),
        };
        let args = [
            s,
            r,
            EmissaryArg::i32(count),
            EmissaryArg::i32(T::DEVICE_DATATYPE),
            EmissaryArg::i32(device_op(op)),
            EmissaryArg::i32(root),
            WORLD,
        ];
        self.call(f::REDUCE, "MPI_Reduce", &args).map(drop)
    }

    /// `MPI_Bcast` of elements `range` of `buf` from rank `root`.
    pub fn broadcast<T: MpiElement>(
        &self,
        buf: DevicePtr<T>,
        range: Range<usize>,
        root: i32,
    ) -> Result<()> {
        let (p, count) = ptr_arg(buf, &range, "broadcast")?;
        let args = [
            p,
            EmissaryArg::i32(count),
            EmissaryArg::i32(T::DEVICE_DATATYPE),
            EmissaryArg::i32(root),
            WORLD,
        ];
        self.call(f::BCAST, "MPI_Bcast", &args).map(drop)
    }

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        self.call(f::BARRIER, "MPI_Barrier", &[WORLD]).map(drop)
    }
}

fn status(r: &EmissaryReply) -> MpiStatus {
    MpiStatus {
        source: r.outs[0] as i32,
        tag: r.outs[1] as i32,
        error: r.outs[2] as i32,
        bytes: r.outs[3] as u32 as usize,
    }
}
