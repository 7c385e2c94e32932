//! Command buffers in the plugin interface: the validated command list a backend may turn into
//! its own replayable object (a CUDA graph, a host op list), and the trait of that object.
//!
//! A backend that has nothing better returns `Ok(None)` from
//! `StreamExecutorInterface::create_command_buffer`; the handle layer then replays the list
//! through the ordinary [`StreamInterface`] methods (still without re-validating it).

use std::any::Any;
use std::sync::Arc;

use super::{EventInterface, KernelInterface, StreamInterface};
use crate::error::Result;
use crate::types::{DeviceAddress, LaunchDims, PackedArg};

/// A host function a command buffer runs at every replay; its `Err` fails the stream.
pub type ReplayCallbackFn = Arc<dyn Fn() -> Result<()> + Send + Sync + 'static>;

/// One recorded command. Every range and kernel in it was validated by the handle layer when
/// it was recorded (or updated), and the memory it names stays allocated while the command
/// buffer lives.
#[derive(Clone)]
pub enum Command {
    /// A kernel launch (as `StreamInterface::launch`).
    Launch {
        /// The kernel, loaded by this executor.
        kernel: Arc<dyn KernelInterface>,
        /// Its geometry and dynamic shared memory.
        dims: LaunchDims,
        /// Its packed arguments.
        args: Vec<PackedArg>,
    },
    /// A device-to-device copy of `bytes` (as `StreamInterface::memcpy_d2d`).
    MemcpyD2D {
        /// Source.
        src: DeviceAddress,
        /// Destination.
        dst: DeviceAddress,
        /// Length in bytes.
        bytes: u64,
    },
    /// Sets `bytes` bytes to `value` (as `StreamInterface::memset8`).
    Memset8 {
        /// First byte.
        dst: DeviceAddress,
        /// The byte.
        value: u8,
        /// Length in bytes.
        bytes: u64,
    },
    /// Sets `count` 32-bit words to `value` (as `StreamInterface::memset32`).
    Memset32 {
        /// First word (4-byte aligned).
        dst: DeviceAddress,
        /// The word.
        value: u32,
        /// Number of words.
        count: u64,
    },
    /// A host function, run in order at every replay.
    HostCallback(ReplayCallbackFn),
    /// Later commands wait for the most recent record of the event at the time of each submit
    /// (as `StreamInterface::wait_event`).
    WaitEvent(Arc<dyn EventInterface>),
}

impl Command {
    /// Enqueues this command alone on `stream` through its ordinary methods (plain replay, and
    /// the commands a backend's replayable form cannot hold).
    ///
    /// # Safety
    /// As [`CommandBufferInterface`]: the command was validated at record (or update) time and
    /// its memory stays allocated until the enqueued operation is done with it.
    pub unsafe fn enqueue_on(&self, stream: &dyn StreamInterface) -> Result<()> {
        match self {
            // SAFETY: the caller's guarantee (kernel, geometry and arguments checked, memory
            // kept allocated); a free after this enqueue is deferred past it by the backend.
            Command::Launch { kernel, dims, args } => unsafe { stream.launch(kernel, dims, args) },
            // SAFETY: as above, for both ranges.
            Command::MemcpyD2D { src, dst, bytes } => unsafe {
                stream.memcpy_d2d(*src, *dst, *bytes)
            },
            // SAFETY: as above.
            Command::Memset8 { dst, value, bytes } => unsafe {
                stream.memset8(*dst, *value, *bytes)
            },
            // SAFETY: as above.
            Command::Memset32 { dst, value, count } => unsafe {
                stream.memset32(*dst, *value, *count)
            },
            Command::HostCallback(f) => {
                let f = f.clone();
                stream.host_callback(Box::new(move || f()))
            }
            Command::WaitEvent(e) => stream.wait_event(e),
        }
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Launch { kernel, dims, .. } => write!(
                f,
                "launch `{}` ({} × {})",
                kernel.name(),
                dims.threads.0,
                dims.blocks.0
            ),
            Command::MemcpyD2D { bytes, .. } => write!(f, "memcpy_d2d ({bytes} bytes)"),
            Command::Memset8 { bytes, .. } => write!(f, "memset ({bytes} bytes)"),
            Command::Memset32 { count, .. } => write!(f, "memset32 ({count} words)"),
            Command::HostCallback(_) => f.write_str("host callback"),
            Command::WaitEvent(_) => f.write_str("wait for event"),
        }
    }
}

/// A backend's replayable form of a command list (`create_command_buffer`).
///
/// # Safety (the `unsafe` methods)
/// The caller guarantees what it guaranteed for the list: every range lies in memory of this
/// executor kept allocated while this object lives, kernels were loaded by it, and geometry
/// and arguments were checked.
pub trait CommandBufferInterface: Send + Sync {
    /// Enqueues one replay of the whole list on `stream` (a stream of this executor): later
    /// work on the stream waits for it, and a failure inside fails the stream. Replays already
    /// enqueued are unaffected by later updates, and by dropping this object.
    ///
    /// # Safety
    /// See the trait.
    unsafe fn submit(&self, stream: &dyn StreamInterface) -> Result<()>;

    /// Replaces the arguments of command `index` (a `Command::Launch`) for later submits.
    ///
    /// # Safety
    /// `args` were checked against the kernel as at record time, and their pointers lie in
    /// memory kept allocated while this object lives.
    unsafe fn update_launch(&self, index: usize, args: &[PackedArg]) -> Result<()>;

    /// How the backend replays (`"CUDA graph"`, `"host op list"`, ...), for messages and tests.
    fn kind(&self) -> &'static str;

    /// The backend object, for downcasting inside the backend.
    fn as_any(&self) -> &dyn Any;
}
