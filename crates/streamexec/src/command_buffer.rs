//! `CommandBuffer`: a sequence of stream operations recorded and validated once, then submitted
//! to any stream of its executor any number of times (CUDA graphs, XLA's command buffers).
//!
//! Everything a stream would check at enqueue time (ownership, bounds, live allocations,
//! launch limits, signatures) is checked when a command is recorded or updated, never at a
//! replay. Every allocation a command touches is *pinned* while the buffer lives: dropping its
//! `DeviceMemory` makes it dead to every later check at once, but its memory is only
//! deallocated once the buffer (and every replay queued from it) is done with it, so no safe
//! code can make a replay touch freed memory. `mem::forget` on a buffer leaks its pins, never
//! frees early.
//!
//! On finalize the backend may turn the list into its own replayable object (a CUDA graph, a
//! host op list run as one queued operation); otherwise a submit replays the list through the
//! stream's ordinary operations. Either way a failure inside a replay fails the submitting
//! stream as any operation does.
//!
//! ```
//! use streamexec::*;
//!
//! # fn main() -> streamexec::Result<()> {
//! let exec = PlatformManager::platform_with_name("host")?.executor_for_device(0)?;
//! let spec = MultiKernelLoaderSpec::new(4).add_host_kernel(HostKernel::new(
//!     "scale_add",
//!     |ctx, (x, n, mul, add): (DevicePtr<u32>, u32, u32, u32)| {
//!         let i = ctx.global_id_x();
//!         if i < n as usize {
//!             let x = ctx.global(x);
//!             x.set(i, x.get(i) * mul + add);
//!         }
//!     },
//! ));
//! let kernel: TypedKernel<(DevicePtr<u32>, u32, u32, u32)> = exec.get_kernel(&spec)?;
//! let x = exec.copy_to_device(&[1u32; 64])?;
//! let mut cb = exec.create_command_buffer();
//! let step = cb.launch(64, 1, &kernel, (x.ptr(), 64, 2, 1))?;
//! cb.finalize()?;
//! let mut stream = exec.create_stream()?;
//! stream.then_submit(&cb).then_submit(&cb); // 1 → 3 → 7
//! cb.update(&step, (x.ptr(), 64, 10, 0))?;
//! stream.then_submit(&cb).block_host_until_done()?; // 7 → 70
//! assert_eq!(exec.copy_to_vec(&x)?, vec![70; 64]);
//! # Ok(())
//! # }
//! ```

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytemuck::Pod;

use crate::error::{Error, Result};
use crate::event::Event;
use crate::executor::{AllocationPin, StreamExecutor};
use crate::interface::{Command, CommandBufferInterface};
use crate::kernel::{Kernel, TypedKernel};
use crate::memory::DeviceSlice;
use crate::stream::{Stream, check_d2d_len, check_launch, check_words, run_caught};
use crate::types::{ArgList, ArgView, BlockDim, KernelArgs, PackedArg, ThreadDim};

/// A recorded sequence of stream operations; see the module docs. Made by
/// [`StreamExecutor::create_command_buffer`]; submitted with [`Stream::then_submit`].
pub struct CommandBuffer {
    exec: StreamExecutor,
    /// Process-unique, so that a [`LaunchCommand`] is only taken by the buffer that made it.
    id: u64,
    recorded: Vec<Recorded>,
    /// The backend's replayable form, made by `finalize` (`None`: plain replay).
    backend: Option<Box<dyn CommandBufferInterface>>,
    finalized: bool,
}

/// One command and the allocations it keeps pinned.
#[derive(Clone)]
struct Recorded {
    command: Command,
    pins: Vec<Arc<AllocationPin>>,
    /// For launches: the kernel, to check updated arguments against.
    kernel: Option<Kernel>,
}

/// A launch recorded in a [`CommandBuffer`], whose arguments
/// [`CommandBuffer::update`] can replace; `Args` is the kernel's argument tuple (`ArgList` for
/// an untyped launch).
pub struct LaunchCommand<Args> {
    buffer: u64,
    index: usize,
    _args: PhantomData<fn(Args)>,
}

impl<Args> Clone for LaunchCommand<Args> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Args> Copy for LaunchCommand<Args> {}

impl<Args> std::fmt::Debug for LaunchCommand<Args> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LaunchCommand(#{} of buffer {})",
            self.index, self.buffer
        )
    }
}

impl CommandBuffer {
    pub(crate) fn new(exec: StreamExecutor) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        CommandBuffer {
            exec,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            recorded: Vec::new(),
            backend: None,
            finalized: false,
        }
    }

    /// The executor it was made on; it is submitted to streams of this executor only.
    pub fn executor(&self) -> &StreamExecutor {
        &self.exec
    }

    /// Number of commands (a nested buffer counts as its commands).
    pub fn len(&self) -> usize {
        self.recorded.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.recorded.is_empty()
    }

    /// True once [`finalize`](Self::finalize) has succeeded.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// How a submit replays it: the backend's form (`"CUDA graph"`, `"host op list"`, ...) or
    /// `"plain replay"` (each command enqueued as a stream operation, unchecked).
    pub fn replay_kind(&self) -> &'static str {
        self.backend.as_ref().map_or("plain replay", |b| b.kind())
    }

    fn check_recording(&self, operation: &str) -> Result<()> {
        if self.finalized {
            return Err(Error::invalid(
                operation,
                "the command buffer is finalized; record into a new buffer (updating a \
                 recorded launch's arguments is still allowed)",
            ));
        }
        Ok(())
    }

    fn push(&mut self, command: Command, pins: Vec<Arc<AllocationPin>>) -> &mut Self {
        self.recorded.push(Recorded {
            command,
            pins,
            kernel: None,
        });
        self
    }

    /// Pins the allocation of slice `s`.
    fn pin_slice<T: Pod>(
        &self,
        s: &DeviceSlice<'_, T>,
        operation: &str,
    ) -> Result<Arc<AllocationPin>> {
        self.exec
            .pin_pointer(
                (s.owner(), s.allocation()),
                s.address(),
                s.size_bytes(),
                || operation.to_string(),
            )
            .map(Arc::new)
    }

    /// Checks a launch as `Stream::then_launch` does and pins every pointer argument.
    fn check_and_pin(
        &self,
        threads: ThreadDim,
        blocks: BlockDim,
        kernel: &Kernel,
        args: &[PackedArg],
        operation: &str,
    ) -> Result<(crate::types::LaunchDims, Vec<Arc<AllocationPin>>)> {
        if kernel.rpc {
            return Err(Error::unsupported(
                self.exec.platform_name(),
                operation,
                format!(
                    "`{}` is in a module that calls the host through RPC; RPC launches are not \
                     recorded (they need a server running): launch it on a stream",
                    kernel.name()
                ),
            ));
        }
        let mut pins = Vec::new();
        let dims = check_launch(
            &self.exec,
            threads,
            blocks,
            kernel,
            args,
            false,
            |i, a, addr, bytes| {
                let pin =
                    self.exec
                        .pin_pointer(a.origin().unwrap_or_default(), addr, bytes, || {
                            format!("{operation} of `{}` (argument {i})", kernel.name())
                        })?;
                pins.push(Arc::new(pin));
                Ok(())
            },
        )?;
        Ok((dims, pins))
    }

    fn record_launch<Args>(
        &mut self,
        threads: ThreadDim,
        blocks: BlockDim,
        kernel: &Kernel,
        args: Vec<PackedArg>,
    ) -> Result<LaunchCommand<Args>> {
        self.check_recording("CommandBuffer::launch")?;
        let (dims, pins) =
            self.check_and_pin(threads, blocks, kernel, &args, "CommandBuffer::launch")?;
        let index = self.recorded.len();
        self.recorded.push(Recorded {
            command: Command::Launch {
                kernel: kernel.inner.clone(),
                dims,
                args,
            },
            pins,
            kernel: Some(kernel.clone()),
        });
        Ok(LaunchCommand {
            buffer: self.id,
            index,
            _args: PhantomData,
        })
    }

    /// Records a launch of `kernel` on `blocks` × `threads` with `args`, checked as
    /// `Stream::then_launch` checks it; the handle lets [`update`](Self::update) replace the
    /// arguments later.
    pub fn launch<Args: KernelArgs>(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &TypedKernel<Args>,
        args: Args,
    ) -> Result<LaunchCommand<Args>> {
        self.record_launch(threads.into(), blocks.into(), &kernel.kernel, args.pack())
    }

    /// Records a launch with a run-time argument list, checked against the kernel's signature
    /// where the format carries one.
    pub fn launch_untyped(
        &mut self,
        threads: impl Into<ThreadDim>,
        blocks: impl Into<BlockDim>,
        kernel: &Kernel,
        args: &ArgList,
    ) -> Result<LaunchCommand<ArgList>> {
        kernel.inner.verify_signature(&args.kinds())?;
        self.record_launch(
            threads.into(),
            blocks.into(),
            kernel,
            args.as_slice().to_vec(),
        )
    }

    /// Records a device-to-device copy (same length).
    pub fn memcpy_d2d<'a, 'b, T: Pod>(
        &mut self,
        src: impl Into<DeviceSlice<'a, T>>,
        dst: impl Into<DeviceSlice<'b, T>>,
    ) -> Result<&mut Self> {
        const OP: &str = "CommandBuffer::memcpy_d2d";
        self.check_recording(OP)?;
        let (src, dst) = (src.into(), dst.into());
        check_d2d_len(src.len(), dst.len(), OP)?;
        let pins = vec![self.pin_slice(&src, OP)?, self.pin_slice(&dst, OP)?];
        let command = Command::MemcpyD2D {
            src: src.address(),
            dst: dst.address(),
            bytes: dst.size_bytes(),
        };
        Ok(self.push(command, pins))
    }

    /// Records setting every byte of `dst` to `value`.
    pub fn memset<'a, T: Pod>(
        &mut self,
        dst: impl Into<DeviceSlice<'a, T>>,
        value: u8,
    ) -> Result<&mut Self> {
        const OP: &str = "CommandBuffer::memset";
        self.check_recording(OP)?;
        let dst = dst.into();
        let pins = vec![self.pin_slice(&dst, OP)?];
        let command = Command::Memset8 {
            dst: dst.address(),
            value,
            bytes: dst.size_bytes(),
        };
        Ok(self.push(command, pins))
    }

    /// Records setting every 32-bit word of `dst` to `pattern` (size and address multiples
    /// of 4).
    pub fn memset32<'a, T: Pod>(
        &mut self,
        dst: impl Into<DeviceSlice<'a, T>>,
        pattern: u32,
    ) -> Result<&mut Self> {
        const OP: &str = "CommandBuffer::memset32";
        self.check_recording(OP)?;
        let dst = dst.into();
        check_words(&dst, OP)?;
        let pins = vec![self.pin_slice(&dst, OP)?];
        let command = Command::Memset32 {
            dst: dst.address(),
            value: pattern,
            count: dst.size_bytes() / 4,
        };
        Ok(self.push(command, pins))
    }

    /// Records a host function run at every replay, in order; a panic fails the stream.
    pub fn host_callback(&mut self, f: impl Fn() + Send + Sync + 'static) -> Result<&mut Self> {
        self.host_callback_with_status(move || {
            f();
            Ok(())
        })
    }

    /// As [`host_callback`](Self::host_callback); an `Err` from `f` fails the stream.
    pub fn host_callback_with_status(
        &mut self,
        f: impl Fn() -> Result<()> + Send + Sync + 'static,
    ) -> Result<&mut Self> {
        self.check_recording("CommandBuffer::host_callback")?;
        let command = Command::HostCallback(Arc::new(move || run_caught(&f)));
        Ok(self.push(command, Vec::new()))
    }

    /// Records a wait: at each replay, later commands wait for the most recent record of
    /// `event` made before that submit; if it failed, the stream fails.
    pub fn wait_for(&mut self, event: &Event) -> Result<&mut Self> {
        const OP: &str = "CommandBuffer::wait_for";
        self.check_recording(OP)?;
        if event.executor().platform_name() != self.exec.platform_name() {
            return Err(Error::invalid(
                OP,
                format!(
                    "the event belongs to the {} platform, the buffer to {}; synchronize across \
                     platforms on the host",
                    event.executor().platform_name(),
                    self.exec.platform_name()
                ),
            ));
        }
        Ok(self.push(Command::WaitEvent(event.inner.clone()), Vec::new()))
    }

    /// Records a copy of `other`'s commands as they are now (as CUDA's child graph nodes
    /// clone the child): later updates of `other` do not reach this buffer, and `other`'s
    /// launch handles do not name commands here.
    pub fn nested(&mut self, other: &CommandBuffer) -> Result<&mut Self> {
        const OP: &str = "CommandBuffer::nested";
        self.check_recording(OP)?;
        if !other.exec.same_as(&self.exec) {
            return Err(Error::invalid(
                OP,
                format!(
                    "the nested buffer was made on {:?}, this one on {:?}; record it on this \
                     executor",
                    other.exec, self.exec
                ),
            ));
        }
        self.recorded.extend(other.recorded.iter().cloned());
        Ok(self)
    }

    /// Ends recording and lets the backend build its replayable form. Submitting needs it;
    /// recording after it fails.
    pub fn finalize(&mut self) -> Result<()> {
        self.check_recording("CommandBuffer::finalize")?;
        let commands: Vec<Command> = self.recorded.iter().map(|r| r.command.clone()).collect();
        self.backend = self.exec.interface().create_command_buffer(&commands)?;
        self.finalized = true;
        Ok(())
    }

    /// Replaces the arguments of a recorded launch (new scalars, new pointers into live
    /// memory of this executor), checked as at record time; submits from now on use them,
    /// replays already queued keep the old ones. The launch's geometry and dynamic shared
    /// memory stay as recorded.
    pub fn update<Args: KernelArgs>(
        &mut self,
        launch: &LaunchCommand<Args>,
        args: Args,
    ) -> Result<()> {
        self.update_packed(launch.buffer, launch.index, args.pack())
    }

    /// As [`update`](Self::update), for a launch recorded with
    /// [`launch_untyped`](Self::launch_untyped): `args` must have the recorded kinds.
    pub fn update_untyped(
        &mut self,
        launch: &LaunchCommand<ArgList>,
        args: &ArgList,
    ) -> Result<()> {
        self.update_packed(launch.buffer, launch.index, args.as_slice().to_vec())
    }

    fn update_packed(&mut self, buffer: u64, index: usize, args: Vec<PackedArg>) -> Result<()> {
        const OP: &str = "CommandBuffer::update";
        if buffer != self.id {
            return Err(Error::invalid(
                OP,
                "the launch handle was made by another command buffer (a nested buffer's \
                 handles do not name the copies in its parent)",
            ));
        }
        let r = &self.recorded[index];
        let (
            Some(kernel),
            Command::Launch {
                dims, args: old, ..
            },
        ) = (&r.kernel, &r.command)
        else {
            unreachable!("launch handles index launch commands");
        };
        let (kernel, dims) = (kernel.clone(), *dims);
        if old.len() != args.len()
            || old
                .iter()
                .zip(&args)
                .any(|(o, n)| o.kind() != n.kind() || shared_bytes(o) != shared_bytes(n))
        {
            return Err(Error::invalid(
                OP,
                format!(
                    "the new arguments of `{}` differ in kind or dynamic shared memory from the \
                     recorded ones ({:?} vs {:?}); record a new launch for another signature \
                     or shape",
                    kernel.name(),
                    args.iter().map(PackedArg::kind).collect::<Vec<_>>(),
                    old.iter().map(PackedArg::kind).collect::<Vec<_>>()
                ),
            ));
        }
        let (dims, pins) = self.check_and_pin(dims.threads, dims.blocks, &kernel, &args, OP)?;
        if let Some(b) = &self.backend {
            // SAFETY: the arguments have the recorded kinds (checked above, and the kernel's
            // signature at record time) and every pointer is pinned in `pins`, which replace
            // the old pins only after the backend has the new arguments.
            unsafe { b.update_launch(index, &args)? };
        }
        let r = &mut self.recorded[index];
        r.pins = pins;
        r.command = Command::Launch {
            kernel: kernel.inner.clone(),
            dims,
            args,
        };
        Ok(())
    }

    /// Enqueues one replay on `stream` (the stream's enqueue step).
    fn submit_on(&self, stream: &Stream) -> Result<()> {
        const OP: &str = "then_submit";
        if !self.finalized {
            return Err(Error::invalid(
                OP,
                "the command buffer is not finalized; call finalize() after recording",
            ));
        }
        if !stream.executor().same_as(&self.exec) {
            return Err(Error::invalid(
                OP,
                format!(
                    "the command buffer was made on {:?}, the stream runs on {:?}; record it \
                     on the stream's executor",
                    self.exec,
                    stream.executor()
                ),
            ));
        }
        let s = stream.iface();
        if let Some(b) = &self.backend {
            // SAFETY: every command was validated at record or update time and its memory is
            // pinned while `self` lives; the backend keeps what a queued replay needs.
            return unsafe { b.submit(s) };
        }
        for r in &self.recorded {
            // SAFETY: the command was validated at record or update time (ranges inside live
            // memory of this executor, kernels of it, geometry and arguments checked), and its
            // allocations are pinned while `self` lives.
            unsafe { r.command.enqueue_on(s)? };
        }
        Ok(())
    }
}

/// Bytes of dynamic shared memory an argument asks for (0 for other kinds).
fn shared_bytes(a: &PackedArg) -> u64 {
    match a.view() {
        ArgView::SharedMemory { bytes, .. } => bytes,
        _ => 0,
    }
}

impl std::fmt::Debug for CommandBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandBuffer")
            .field("executor", &self.exec)
            .field(
                "commands",
                &self.recorded.iter().map(|r| &r.command).collect::<Vec<_>>(),
            )
            .field("finalized", &self.finalized)
            .field("replay", &self.replay_kind())
            .finish()
    }
}

impl StreamExecutor {
    /// A new, empty command buffer of this executor.
    pub fn create_command_buffer(&self) -> CommandBuffer {
        CommandBuffer::new(self.clone())
    }
}

impl Stream {
    /// Enqueues one replay of a finalized `buffer` (of this stream's executor): its commands
    /// run in order after earlier work, and later work waits for them; a failure inside fails
    /// this stream. Nothing is re-validated: that happened when the commands were recorded.
    pub fn then_submit(&mut self, buffer: &CommandBuffer) -> &mut Self {
        self.enqueue(|s| buffer.submit_on(s))
    }
}
