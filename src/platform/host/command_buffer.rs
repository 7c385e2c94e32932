//! Host command buffers: the validated command list, replayed as **one** queued operation.
//!
//! A stream queues every operation alone (a hand-off to its worker thread each); a submit of
//! this buffer prepares every command's closure on the caller's thread (pinning memory and
//! packing kernel parameters, no checks above the backend's own) and queues them as a single
//! operation that runs them in order and stops at the first failure, which fails the stream.

use std::sync::Arc;

use parking_lot::Mutex;

use super::device::HostExecutor;
use super::stream::{HostStream, d2d_op, launch_op, memset8_op, memset32_op, wait_op};
use crate::error::{Error, Result};
use crate::interface::{Command, CommandBufferInterface, StreamInterface};
use crate::platform::downcast::downcast;
use crate::platform::work_queue::RunFn;
use crate::types::PackedArg;

/// The command list of one buffer; launches' arguments change under `update_launch`.
pub(crate) struct HostCommandBuffer {
    exec: Arc<HostExecutor>,
    commands: Mutex<Vec<Command>>,
}

impl HostCommandBuffer {
    pub(crate) fn new(exec: Arc<HostExecutor>, commands: &[Command]) -> Self {
        HostCommandBuffer {
            exec,
            commands: Mutex::new(commands.to_vec()),
        }
    }

    /// The closure of one command, made for one replay.
    ///
    /// # Safety
    /// As `CommandBufferInterface::submit`.
    unsafe fn prepare(&self, c: &Command) -> Result<RunFn> {
        let exec = &self.exec;
        match c {
            Command::Launch { kernel, dims, args } => launch_op(exec, kernel, dims, args),
            Command::MemcpyD2D { src, dst, bytes } => d2d_op(exec, *src, *dst, *bytes),
            Command::Memset8 { dst, value, bytes } => memset8_op(exec, *dst, *value, *bytes),
            Command::Memset32 { dst, value, count } => memset32_op(exec, *dst, *value, *count),
            Command::HostCallback(f) => {
                let f = f.clone();
                Ok(Box::new(move || f()))
            }
            Command::WaitEvent(e) => wait_op(e, "a command buffer's wait", true),
        }
    }
}

impl CommandBufferInterface for HostCommandBuffer {
    unsafe fn submit(&self, stream: &dyn StreamInterface) -> Result<()> {
        let stream = stream
            .native()
            .ok_or_else(|| Error::invalid("then_submit", "not a host stream"))
            .and_then(|s| downcast::<HostStream>(s, "the stream passed to then_submit"))?;
        if !Arc::ptr_eq(stream.executor(), &self.exec) {
            return Err(Error::invalid(
                "then_submit",
                "the stream belongs to another host device than the command buffer",
            ));
        }
        let ops = {
            let commands = self.commands.lock();
            commands
                .iter()
                // SAFETY: the caller's guarantee for the list (see the trait).
                .map(|c| unsafe { self.prepare(c) })
                .collect::<Result<Vec<RunFn>>>()?
        };
        stream.push_op(Box::new(move || ops.into_iter().try_for_each(|op| op())))
    }

    unsafe fn update_launch(&self, index: usize, args: &[PackedArg]) -> Result<()> {
        match self.commands.lock().get_mut(index) {
            Some(Command::Launch { args: old, .. }) => {
                *old = args.to_vec();
                Ok(())
            }
            _ => Err(Error::invalid(
                "CommandBuffer::update",
                format!("command {index} is not a launch"),
            )),
        }
    }

    fn kind(&self) -> &'static str {
        "host op list"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
