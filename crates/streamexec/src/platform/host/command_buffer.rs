//! Host command buffers: the validated command list, prepared once, replayed as **one** queued
//! operation.
//!
//! A stream queues every operation alone (a hand-off to its worker thread each). This buffer
//! prepares its commands when it is made (and a launch again when it is updated): memory
//! pinned, kernel arguments bound, each command a closure that may run any number of times.
//! A submit queues a single operation that runs them in order and stops at the first
//! failure, which fails the stream. What cannot be prepared once is prepared at each submit,
//! on the submitting thread: PTX launches (the engine's launch state is per run) and event
//! waits (a wait is for the record current at the submit).

use std::sync::Arc;

use parking_lot::Mutex;

use super::device::HostExecutor;
use super::stream::{
    HostStream, ReplayFn, d2d_op, launch_op, memset8_op, memset32_op, replayable_launch, wait_op,
};
use crate::error::{Error, Result};
use crate::interface::{Command, CommandBufferInterface, StreamInterface};
use crate::platform::downcast::downcast;
use crate::platform::work_queue::RunFn;
use crate::types::PackedArg;

/// What a replay runs, step by step.
enum Step {
    Ready(ReplayFn),
    Once(RunFn),
}

/// The prepared commands of one buffer.
pub(crate) struct HostCommandBuffer {
    exec: Arc<HostExecutor>,
    /// Each command as recorded (or updated), and its prepared form: `None` for one prepared
    /// at each submit.
    prepared: Mutex<Vec<(Command, Option<ReplayFn>)>>,
}

/// `c` prepared once, where it can be.
///
/// # Safety
/// As `CommandBufferInterface::submit`.
unsafe fn prepare_once(exec: &HostExecutor, c: &Command) -> Result<Option<ReplayFn>> {
    Ok(match c {
        Command::Launch { kernel, dims, args } => replayable_launch(exec, kernel, dims, args)?,
        Command::MemcpyD2D { src, dst, bytes } => Some(Arc::new(d2d_op(exec, *src, *dst, *bytes)?)),
        Command::Memset8 { dst, value, bytes } => {
            Some(Arc::new(memset8_op(exec, *dst, *value, *bytes)?))
        }
        Command::Memset32 { dst, value, count } => {
            Some(Arc::new(memset32_op(exec, *dst, *value, *count)?))
        }
        Command::HostCallback(f) => Some(f.clone()),
        Command::WaitEvent(_) => None,
    })
}

impl HostCommandBuffer {
    /// Prepares `commands`.
    ///
    /// # Safety
    /// As `CommandBufferInterface::submit` for the commands.
    pub(crate) unsafe fn new(exec: Arc<HostExecutor>, commands: &[Command]) -> Result<Self> {
        let prepared = commands
            .iter()
            // SAFETY: the caller's guarantee for the list.
            .map(|c| Ok((c.clone(), unsafe { prepare_once(&exec, c) }?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(HostCommandBuffer {
            exec,
            prepared: Mutex::new(prepared),
        })
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
        let steps = self
            .prepared
            .lock()
            .iter()
            .map(|(c, prepared)| {
                Ok(match (prepared, c) {
                    (Some(f), _) => Step::Ready(f.clone()),
                    (None, Command::WaitEvent(e)) => {
                        Step::Once(wait_op(e, "a command buffer's wait", true)?)
                    }
                    (None, Command::Launch { kernel, dims, args }) => {
                        Step::Once(launch_op(&self.exec, kernel, dims, args)?)
                    }
                    (None, _) => {
                        return Err(Error::internal(
                            "then_submit: a host command left to prepare per submit",
                        ));
                    }
                })
            })
            .collect::<Result<Vec<Step>>>()?;
        stream.push_op(Box::new(move || {
            steps.into_iter().try_for_each(|s| match s {
                Step::Ready(f) => f(),
                Step::Once(f) => f(),
            })
        }))
    }

    unsafe fn update_launch(&self, index: usize, args: &[PackedArg]) -> Result<()> {
        let mut prepared = self.prepared.lock();
        let Some((Command::Launch { kernel, dims, .. }, _)) = prepared.get(index) else {
            return Err(Error::invalid(
                "CommandBuffer::update",
                format!("command {index} is not a launch"),
            ));
        };
        let command = Command::Launch {
            kernel: kernel.clone(),
            dims: *dims,
            args: args.to_vec(),
        };
        // SAFETY: the caller's guarantee for the new arguments. Replays already queued hold
        // the old prepared launch (an `Arc`), so they keep their arguments.
        let fresh = unsafe { prepare_once(&self.exec, &command) }?;
        prepared[index] = (command, fresh);
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "host op list"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
