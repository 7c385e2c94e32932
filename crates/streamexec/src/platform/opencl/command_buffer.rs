//! OpenCL command buffers on `cl_khr_command_buffer` (`khr_command_buffer.rs`).
//!
//! # Segments
//!
//! A cl command buffer holds device commands only: launches, copies between two `cl_mem`
//! buffers, fills of a buffer. The list is split into parts: each run of such commands becomes
//! one *native* part (one finalized cl command buffer, its commands chained by sync points, so
//! they run in order whatever the driver does without them); every other command (a host
//! callback, an event wait, a copy or fill touching SVM) is a *stream* part, replayed through
//! the stream's ordinary methods between them. Zero-length copies and fills are dropped (the
//! stream's methods do nothing for them either).
//!
//! # Submitting
//!
//! A native part is enqueued with `clEnqueueCommandBufferKHR` on the submitting stream's queue,
//! through the stream's own submission path (`StreamShared::submit`), so a stream in deferred
//! mode (after a host callback) keeps its order; the event is tracked like any command's. The
//! buffer is recorded against a private queue of the executor with the streams' queue
//! properties, and each enqueue substitutes the stream's queue, which extension version 0.9.x
//! allows for a queue of the same device and properties (and PoCL 3.1 does: the replay's event
//! belongs to the stream's queue and orders with its other commands). Each enqueue keeps its
//! version of the part (the allocations it touches, the cl command buffer, its kernels and
//! sub-buffers) alive until its event completes, so dropping the `CommandBuffer`, or freeing
//! memory, after a submit is safe.
//!
//! A device without `CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR` refuses to enqueue a
//! cl command buffer whose earlier enqueue is still pending (`CL_INVALID_OPERATION`): a part
//! then records another cl command buffer of the same commands and keeps it (up to
//! [`POOL_MAX`]) for later submits, trying each before recording again.
//!
//! # Kernel arguments: one private kernel per recorded launch
//!
//! The extension captures a launch's arguments when it is recorded. PoCL 3.1 does not: it
//! copies the kernel's arguments at each `clEnqueueCommandBufferKHR` (two launches of one
//! kernel recorded with different arguments both run with the last ones, and arguments set
//! after finalize reach the replay). So each recorded launch gets its own `clCloneKernel` copy,
//! made under the kernel's lock, whose arguments are set once and never touched again; it
//! lives as long as the cl command buffer.
//!
//! # Red zones
//!
//! On devices with red zones (`red_zone.rs`) each replay of a native part is followed by one
//! check of the buffers its launches take, so an out-of-bounds write inside a command buffer
//! fails the stream as it does for a plain launch.
//!
//! # Updates
//!
//! PoCL 3.1 has no `cl_khr_command_buffer_mutable_dispatch`, so `update_launch` re-records the
//! native part holding the launch into a new finalized cl command buffer (a new *version*),
//! which later submits use; replays already enqueued keep the old version, alive until their
//! events complete.

use std::sync::Arc;

use cl3::ext::cl_sync_point_khr;
use opencl3::error_codes::CL_INVALID_OPERATION;
use opencl3::types::cl_kernel;
use parking_lot::Mutex;

use super::device::OpenClExecutor;
use super::kernel::OpenClKernel;
use super::khr_command_buffer::{ClCommandBuffer, CommandBufferSupport};
use super::memory::{ClAlloc, keep_until_complete};
use super::queue::StreamShared;
use super::red_zone_check::{self, CheckJob};
use super::status::{PLATFORM, cl_error, error_text};
use super::stream::{
    ArgKeep, OpenClStream, ResolvedArgs, pointer_args, resolve_args, set_kernel_args, work_sizes,
};
use crate::error::{Error, Result};
use crate::interface::{Command, CommandBufferInterface, KernelInterface, StreamInterface};
use crate::platform::downcast::{downcast, downcast_arc};
use crate::types::{LaunchDims, PackedArg};

/// How many cl command buffers one version of a part keeps for a device without simultaneous
/// use; past that, a submit that finds them all pending records one for itself alone.
pub(super) const POOL_MAX: usize = 8;

const FINALIZE: &str = "CommandBuffer::finalize";
const UPDATE: &str = "CommandBuffer::update";

/// A command of a native part, its memory resolved to allocations (kept alive by it).
#[derive(Clone)]
enum DeviceOp {
    Launch {
        kernel: Arc<OpenClKernel>,
        dims: LaunchDims,
        args: Vec<PackedArg>,
        resolved: ResolvedArgs,
    },
    Copy {
        src: (Arc<ClAlloc>, usize),
        dst: (Arc<ClAlloc>, usize),
        bytes: usize,
    },
    Fill {
        dst: (Arc<ClAlloc>, usize),
        pattern: Vec<u8>,
        bytes: usize,
    },
}

/// A kernel object private to one recorded launch; released on drop.
struct PrivateKernel(cl_kernel);

// SAFETY: an OpenCL kernel handle whose arguments are set before it is shared and never again.
unsafe impl Send for PrivateKernel {}
// SAFETY: as above; nothing mutates it once shared.
unsafe impl Sync for PrivateKernel {}

impl Drop for PrivateKernel {
    fn drop(&mut self) {
        // SAFETY: our reference from clCloneKernel, released once; OpenCL keeps the kernel for
        // commands still using it.
        let _ = unsafe { opencl3::kernel::release_kernel(self.0) };
    }
}

/// One finalized cl command buffer and what its commands use beyond the allocations.
struct Recording {
    // Declared first, so released before the kernels and sub-buffers its commands name.
    cb: ClCommandBuffer,
    _kernels: Vec<PrivateKernel>,
    _args: Vec<ArgKeep>,
}

/// One version of a native part: its commands and their recordings.
struct Version {
    ops: Vec<DeviceOp>,
    /// Finalized recordings of `ops`; one when the device allows simultaneous use.
    pool: Mutex<Vec<Arc<Recording>>>,
}

/// A run of device commands replayed as one cl command buffer.
struct NativePart {
    /// The version later submits use; `update_launch` replaces it.
    current: Mutex<Arc<Version>>,
}

enum Part {
    Native(NativePart),
    /// Replayed through the stream's ordinary methods.
    Stream(Command),
}

/// Where command `i` of the list went.
#[derive(Clone, Copy)]
enum Slot {
    /// Op `op` of native part `part`.
    Native { part: usize, op: usize },
    /// A stream part, or dropped (zero length).
    Other,
}

/// A finalized OpenCL command buffer; see the module docs.
pub(crate) struct OpenClCommandBuffer {
    exec: Arc<OpenClExecutor>,
    support: Arc<CommandBufferSupport>,
    parts: Vec<Part>,
    slots: Vec<Slot>,
}

/// What becomes of one command.
enum Classified {
    /// An op of a native part.
    Device(DeviceOp),
    /// A stream part.
    Stream,
    /// Dropped: a zero-length copy or fill.
    Nothing,
}

fn launch_op(
    exec: &OpenClExecutor,
    kernel: &Arc<dyn KernelInterface>,
    dims: &LaunchDims,
    args: &[PackedArg],
    what: &str,
) -> Result<DeviceOp> {
    let kernel: Arc<OpenClKernel> =
        downcast_arc(kernel, kernel.as_any(), "a kernel in the command buffer")?;
    let resolved = resolve_args(exec, &kernel, args, what)?;
    Ok(DeviceOp::Launch {
        kernel,
        dims: *dims,
        args: args.to_vec(),
        resolved,
    })
}

fn classify(exec: &OpenClExecutor, c: &Command) -> Result<Classified> {
    Ok(match c {
        Command::Launch { kernel, dims, args } => {
            Classified::Device(launch_op(exec, kernel, dims, args, FINALIZE)?)
        }
        Command::MemcpyD2D { src, dst, bytes } => {
            let s = exec.resolve(*src, *bytes, FINALIZE)?;
            let d = exec.resolve(*dst, *bytes, FINALIZE)?;
            if *bytes == 0 {
                Classified::Nothing
            } else if s.0.buffer().is_some() && d.0.buffer().is_some() {
                Classified::Device(DeviceOp::Copy {
                    src: s,
                    dst: d,
                    bytes: *bytes as usize,
                })
            } else {
                Classified::Stream
            }
        }
        Command::Memset8 { dst, value, bytes } => fill_op(exec, *dst, vec![*value], *bytes)?,
        Command::Memset32 { dst, value, count } => {
            fill_op(exec, *dst, value.to_ne_bytes().to_vec(), count * 4)?
        }
        Command::HostCallback(_) | Command::WaitEvent(_) => Classified::Stream,
    })
}

fn fill_op(
    exec: &OpenClExecutor,
    dst: crate::types::DeviceAddress,
    pattern: Vec<u8>,
    bytes: u64,
) -> Result<Classified> {
    let d = exec.resolve(dst, bytes, FINALIZE)?;
    Ok(if bytes == 0 {
        Classified::Nothing
    } else if d.0.buffer().is_some() {
        Classified::Device(DeviceOp::Fill {
            dst: d,
            pattern,
            bytes: bytes as usize,
        })
    } else {
        Classified::Stream
    })
}

impl Version {
    fn new(ops: Vec<DeviceOp>, support: &CommandBufferSupport, what: &str) -> Result<Self> {
        let v = Version {
            ops,
            pool: Mutex::new(Vec::new()),
        };
        let first = v.record(support, what)?;
        v.pool.lock().push(Arc::new(first));
        Ok(v)
    }

    /// Records and finalizes a cl command buffer of `ops`, each after the one before.
    fn record(&self, support: &CommandBufferSupport, what: &str) -> Result<Recording> {
        let cb = support.create()?;
        let mut kernels = Vec::new();
        let mut keeps = Vec::new();
        let mut last: Option<cl_sync_point_khr> = None;
        for (i, op) in self.ops.iter().enumerate() {
            let recorded = match op {
                DeviceOp::Launch {
                    kernel,
                    dims,
                    args,
                    resolved,
                } => {
                    let name = kernel.name();
                    let private = {
                        let guard = kernel.kernel.lock();
                        opencl3::kernel::clone_kernel(guard.get())
                            .map(PrivateKernel)
                            .map_err(|e| cl_error("clCloneKernel", e))?
                    };
                    // SAFETY: the clone is ours alone; the signature was checked at record
                    // time and `resolved` is `resolve_args` of `args`.
                    let keep =
                        unsafe { set_kernel_args(private.0, name, what, args, resolved.clone())? };
                    let (global, local) = work_sizes(dims);
                    // SAFETY: every argument of the private kernel is set and never set again;
                    // `keep` and the kernel live as long as the cl command buffer.
                    let r = unsafe { support.nd_range(&cb, private.0, &global, &local, last) };
                    kernels.push(private);
                    keeps.push(keep);
                    r.map_err(|e| Error::LaunchConfig {
                        platform: PLATFORM,
                        kernel: name.to_string(),
                        detail: format!(
                            "clCommandNDRangeKernelKHR failed: {} ({e}) while recording \
                             command {i} of a command buffer",
                            error_text(e)
                        ),
                    })
                }
                DeviceOp::Copy { src, dst, bytes } => {
                    let (s, d) = (buffer_of(&src.0)?, buffer_of(&dst.0)?);
                    // SAFETY: both ranges were resolved inside live buffers, which this
                    // version (and so every enqueue of the recording) keeps alive.
                    unsafe { support.copy_buffer(&cb, (s, src.1), (d, dst.1), *bytes, last) }
                        .map_err(|e| cl_error("clCommandCopyBufferKHR", e))
                }
                DeviceOp::Fill {
                    dst,
                    pattern,
                    bytes,
                } => {
                    let d = buffer_of(&dst.0)?;
                    // SAFETY: the range was resolved inside a live buffer, kept alive as
                    // above; the handle layer checked the alignment of 32-bit fills.
                    unsafe { support.fill_buffer(&cb, d, pattern, dst.1, *bytes, last) }
                        .map_err(|e| cl_error("clCommandFillBufferKHR", e))
                }
            };
            last = Some(recorded?);
        }
        support.finalize(&cb)?;
        Ok(Recording {
            cb,
            _kernels: kernels,
            _args: keeps,
        })
    }

    /// The red-zone check of the buffers this part's launches take (`red_zone.rs`), run
    /// behind each replay; `None` when none has red zones.
    fn red_zone_check(&self, shared: &StreamShared) -> Option<CheckJob> {
        let mut all: Option<CheckJob> = None;
        for op in &self.ops {
            if let DeviceOp::Launch {
                kernel,
                args,
                resolved,
                ..
            } = op
                && let Some(job) =
                    CheckJob::new(kernel.name(), pointer_args(args, resolved), shared)
            {
                match &mut all {
                    Some(a) => a.extend(job),
                    None => all = Some(job),
                }
            }
        }
        all
    }

    /// Enqueues one replay on `shared`'s queue (from the stream's submission path).
    fn enqueue(
        self: &Arc<Self>,
        support: &CommandBufferSupport,
        shared: &StreamShared,
    ) -> Result<()> {
        let queue = shared.queue.get();
        let mut pool = self.pool.lock();
        for rec in pool.iter() {
            // SAFETY: `track` keeps this version and the recording alive until the event
            // completes.
            match unsafe { support.enqueue(&rec.cb, queue) } {
                Ok(ev) => {
                    self.track(shared, ev, rec.clone());
                    return Ok(());
                }
                // Still pending, and the device has no simultaneous use: try the next one.
                Err(CL_INVALID_OPERATION) if !support.simultaneous => continue,
                Err(e) => return Err(cl_error("clEnqueueCommandBufferKHR", e)),
            }
        }
        // Every recording is pending: record another.
        let rec = Arc::new(self.record(support, "then_submit")?);
        // SAFETY: as above.
        let ev = unsafe { support.enqueue(&rec.cb, queue) }
            .map_err(|e| cl_error("clEnqueueCommandBufferKHR", e))?;
        if pool.len() < POOL_MAX {
            pool.push(rec.clone());
        }
        drop(pool);
        self.track(shared, ev, rec);
        Ok(())
    }

    fn track(
        self: &Arc<Self>,
        shared: &StreamShared,
        raw: opencl3::types::cl_event,
        rec: Arc<Recording>,
    ) {
        let ev = shared.track(raw);
        keep_until_complete(&ev, Box::new((self.clone(), rec)));
    }
}

fn buffer_of(a: &ClAlloc) -> Result<opencl3::types::cl_mem> {
    a.buffer().ok_or_else(|| {
        Error::invalid(
            FINALIZE,
            "an SVM allocation in a recorded copy or fill (they replay through the stream); \
             this is a bug in the OpenCL backend",
        )
    })
}

impl OpenClCommandBuffer {
    /// Splits `commands` into parts and records every native one.
    pub(crate) fn new(
        exec: Arc<OpenClExecutor>,
        support: Arc<CommandBufferSupport>,
        commands: &[Command],
    ) -> Result<Self> {
        let mut parts = Vec::new();
        let mut slots = Vec::with_capacity(commands.len());
        let mut run: Vec<DeviceOp> = Vec::new();
        let close = |run: &mut Vec<DeviceOp>, parts: &mut Vec<Part>| -> Result<()> {
            if !run.is_empty() {
                let v = Version::new(std::mem::take(run), &support, FINALIZE)?;
                parts.push(Part::Native(NativePart {
                    current: Mutex::new(Arc::new(v)),
                }));
            }
            Ok(())
        };
        for c in commands {
            match classify(&exec, c)? {
                Classified::Device(op) => {
                    slots.push(Slot::Native {
                        part: parts.len(),
                        op: run.len(),
                    });
                    run.push(op);
                }
                Classified::Stream => {
                    close(&mut run, &mut parts)?;
                    slots.push(Slot::Other);
                    parts.push(Part::Stream(c.clone()));
                }
                Classified::Nothing => slots.push(Slot::Other),
            }
        }
        close(&mut run, &mut parts)?;
        Ok(OpenClCommandBuffer {
            exec,
            support,
            parts,
            slots,
        })
    }

    /// The number of native parts (cl command buffers) and stream parts, for tests.
    #[cfg(all(test, not(miri)))]
    fn shape(&self) -> (usize, usize) {
        let native = self
            .parts
            .iter()
            .filter(|p| matches!(p, Part::Native(_)))
            .count();
        (native, self.parts.len() - native)
    }
}

impl CommandBufferInterface for OpenClCommandBuffer {
    unsafe fn submit(&self, stream: &dyn StreamInterface) -> Result<()> {
        let cl = stream
            .native()
            .ok_or_else(|| Error::invalid("then_submit", "not an OpenCL stream"))
            .and_then(|s| downcast::<OpenClStream>(s, "the stream passed to then_submit"))?;
        if !Arc::ptr_eq(cl.executor(), &self.exec) {
            return Err(Error::invalid(
                "then_submit",
                "the stream belongs to another OpenCL device than the command buffer; record \
                 it on the stream's executor",
            ));
        }
        for part in &self.parts {
            match part {
                // SAFETY: the caller's guarantee for the list (see the trait).
                Part::Stream(c) => unsafe { c.enqueue_on(stream)? },
                Part::Native(p) => {
                    let version = p.current.lock().clone();
                    let (support, shared) = (self.support.clone(), cl.shared().clone());
                    let native = self.exec.native_kernels;
                    cl.shared().submit(
                        Box::new(move || {
                            version.enqueue(&support, &shared)?;
                            match version.red_zone_check(&shared) {
                                Some(job) => red_zone_check::enqueue(&shared, job, native),
                                None => Ok(()),
                            }
                        }),
                        None,
                        false,
                    )?;
                }
            }
        }
        Ok(())
    }

    unsafe fn update_launch(&self, index: usize, args: &[PackedArg]) -> Result<()> {
        let not_launch = || Error::invalid(UPDATE, format!("command {index} is not a launch"));
        let Some(Slot::Native { part, op }) = self.slots.get(index).copied() else {
            return Err(not_launch());
        };
        let Some(Part::Native(p)) = self.parts.get(part) else {
            return Err(not_launch());
        };
        let mut current = p.current.lock();
        let mut ops = current.ops.clone();
        let Some(DeviceOp::Launch { kernel, dims, .. }) = ops.get(op) else {
            return Err(not_launch());
        };
        let (kernel, dims): (Arc<dyn KernelInterface>, LaunchDims) = (kernel.clone(), *dims);
        ops[op] = launch_op(&self.exec, &kernel, &dims, args, UPDATE)?;
        *current = Arc::new(Version::new(ops, &self.support, UPDATE)?);
        Ok(())
    }

    fn kind(&self) -> &'static str {
        "cl_khr_command_buffer"
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// These need an OpenCL driver, which Miri cannot load.
#[cfg(all(test, not(miri)))]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::types::{BlockDim, DevicePtr, ThreadDim};
    use crate::{ArgList, Kernel, MultiKernelLoaderSpec, PlatformManager, StreamExecutor};

    /// Device 0 of the OpenCL platform and its backend, or `None` (skipped) without OpenCL.
    fn opencl() -> Option<(StreamExecutor, Arc<OpenClExecutor>)> {
        let Ok(exec) =
            PlatformManager::platform_with_name(PLATFORM).and_then(|p| p.executor_for_device(0))
        else {
            eprintln!("skipping: no OpenCL device");
            return None;
        };
        let cl = exec
            .interface()
            .as_any()
            .downcast_ref::<OpenClExecutor>()?
            .me
            .upgrade()?;
        Some((exec, cl))
    }

    /// A fresh detection of the device's support (`simultaneous` as the test wants it).
    fn support(cl: &OpenClExecutor, simultaneous: bool) -> Arc<CommandBufferSupport> {
        let device = cl.context.devices()[0];
        let mut s =
            CommandBufferSupport::detect(device, &cl.context).expect("cl_khr_command_buffer");
        s.simultaneous = simultaneous;
        Arc::new(s)
    }

    fn affine(exec: &StreamExecutor) -> Kernel {
        exec.get_untyped_kernel(&MultiKernelLoaderSpec::new(4).add_opencl_text_in_memory(
            "__kernel void affine(__global uint* x, uint n, uint mul, uint add) {
                 uint i = get_global_id(0);
                 if (i < n) x[i] = x[i] * mul + add;
             }",
            "affine",
        ))
        .unwrap()
    }

    fn launch(k: &Kernel, ptr: DevicePtr<u32>, n: usize, mul: u32, add: u32) -> Command {
        let args = ArgList::new().arg(ptr).arg(n as u32).arg(mul).arg(add);
        Command::Launch {
            kernel: k.inner.clone(),
            dims: LaunchDims {
                threads: ThreadDim::from(64),
                blocks: BlockDim::from(n.div_ceil(64) as u32),
                dynamic_shared_bytes: 0,
                cooperative: false,
            },
            args: args.as_slice().to_vec(),
        }
    }

    fn affine_ref(x: &mut [u32], mul: u32, add: u32) {
        x.iter_mut()
            .for_each(|v| *v = v.wrapping_mul(mul).wrapping_add(add));
    }

    /// PoCL reports cl_khr_command_buffer 0.9.0 with simultaneous use: it is detected.
    #[test]
    fn pocl_command_buffers_are_detected() {
        let Some((exec, cl)) = opencl() else { return };
        let d = exec.description();
        eprintln!(
            "{} / {}: {:?}",
            d.platform_version,
            d.driver_version,
            cl.command_buffers.as_ref().map(|s| s.simultaneous)
        );
        if d.platform_version.contains("PoCL") {
            let s = cl
                .command_buffers
                .as_ref()
                .expect("PoCL has cl_khr_command_buffer");
            assert!(s.simultaneous, "PoCL reports simultaneous use");
        }
    }

    /// Without simultaneous use, a submit whose cl command buffers are all pending records
    /// another (PoCL refuses the pending one with CL_INVALID_OPERATION); every replay runs, in
    /// order. A user event holds the stream's queue so that every enqueue finds the earlier
    /// ones pending.
    #[test]
    fn without_simultaneous_use_a_pending_buffer_is_recorded_again() {
        let Some((exec, cl)) = opencl() else { return };
        const N: usize = 4096;
        const REPLAYS: usize = 20;
        let k = affine(&exec);
        let input: Vec<u32> = (0..N as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let x = exec.copy_to_device(&input).unwrap();
        let y = exec.copy_to_device(&vec![0xDEAD_BEEF_u32; N]).unwrap();
        let commands = [
            launch(&k, x.ptr(), N, 3, 1),
            Command::MemcpyD2D {
                src: x.address(),
                dst: y.address(),
                bytes: (N * 4) as u64,
            },
            launch(&k, y.ptr(), N, 5, 2),
        ];
        let cb = OpenClCommandBuffer::new(cl.clone(), support(&cl, false), &commands).unwrap();
        assert_eq!(cb.shape(), (1, 0));

        let mut stream = exec.create_stream().unwrap();
        let s = downcast::<OpenClStream>(stream.iface().native().unwrap(), "test").unwrap();
        let gate = opencl3::event::Event::new(
            opencl3::event::create_user_event(cl.context.get()).unwrap(),
        );
        s.shared().barrier_on(&gate).unwrap();
        for _ in 0..REPLAYS {
            // SAFETY: the commands' memory lives until the stream is done, waited for below.
            unsafe { cb.submit(stream.iface()).unwrap() };
        }
        let Part::Native(p) = &cb.parts[0] else {
            unreachable!()
        };
        let recorded = p.current.lock().pool.lock().len();
        assert_eq!(
            recorded, POOL_MAX,
            "every enqueue found the earlier ones pending"
        );
        opencl3::event::set_user_event_status(gate.get(), opencl3::event::CL_COMPLETE).unwrap();
        stream.block_host_until_done().unwrap();
        let mut wx = input.clone();
        for _ in 0..REPLAYS {
            affine_ref(&mut wx, 3, 1);
        }
        let mut wy = wx.clone();
        affine_ref(&mut wy, 5, 2);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), wx);
        assert_eq!(exec.copy_to_vec(&y).unwrap(), wy);
    }

    /// Host callbacks, event waits and SVM copies and fills split the list; zero-length
    /// commands vanish; launches with an SVM argument or a sub-buffer are recorded. Replayed,
    /// everything runs in order.
    #[test]
    fn the_list_splits_at_what_a_cl_command_buffer_cannot_hold() {
        let Some((exec, cl)) = opencl() else { return };
        if !exec.description().unified_memory {
            eprintln!("skipping: no fine-grained SVM");
            return;
        }
        const N: usize = 1000;
        let k = affine(&exec);
        let input: Vec<u32> = (0..N as u32).map(|i| i.wrapping_mul(40_503)).collect();
        let x = exec.copy_to_device(&input).unwrap();
        let y = exec.copy_to_device(&vec![0xDEAD_BEEF_u32; N]).unwrap();
        let u = exec.allocate_unified::<u32>(N).unwrap();
        let ua = u.as_device().address();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let ev = exec.create_event().unwrap();
        let bytes = (N * 4) as u64;
        let commands = [
            launch(&k, x.ptr(), N, 3, 1),
            Command::MemcpyD2D {
                src: x.address(),
                dst: y.address(),
                bytes,
            },
            Command::HostCallback(Arc::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })),
            Command::Memset32 {
                dst: x.address(),
                value: 7,
                count: 4,
            },
            Command::WaitEvent(ev.inner.clone()),
            // SVM: through the stream.
            Command::MemcpyD2D {
                src: y.address(),
                dst: ua,
                bytes,
            },
            Command::Memset8 {
                dst: x.address(),
                value: 0,
                bytes: 0,
            },
            launch(&k, u.ptr(), N, 5, 2),
            Command::Memset32 {
                dst: ua,
                value: 9,
                count: 2,
            },
            // A sub-buffer argument (at 256 bytes, a multiple of PoCL's base alignment).
            launch(&k, y.ptr().offset(64).unwrap(), N - 64, 1, 1000),
        ];
        let cb = OpenClCommandBuffer::new(cl.clone(), support(&cl, true), &commands).unwrap();
        // native [launch, copy] | callback | native [fill] | wait | svm copy | native [launch]
        // | svm fill | native [launch]
        assert_eq!(cb.shape(), (4, 4));
        let mut stream = exec.create_stream().unwrap();
        for _ in 0..2 {
            // SAFETY: the commands' memory lives until the stream is done, waited for below.
            unsafe { cb.submit(stream.iface()).unwrap() };
        }
        stream.block_host_until_done().unwrap();
        let (mut wx, mut wy) = (input.clone(), Vec::new());
        for _ in 0..2 {
            affine_ref(&mut wx, 3, 1);
            wy = wx.clone();
            wx[..4].fill(7);
        }
        let mut wu = wy.clone();
        affine_ref(&mut wy[64..], 1, 1000);
        affine_ref(&mut wu, 5, 2);
        wu[..2].fill(9);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(exec.copy_to_vec(&x).unwrap(), wx);
        assert_eq!(exec.copy_to_vec(&y).unwrap(), wy);
        assert_eq!((0..N).map(|i| u.load(i)).collect::<Vec<_>>(), wu);
    }
}
