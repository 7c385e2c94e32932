//! The OpenCL C twins of the PTX kernels (kernels/cl/bench.cl) on the first OpenCL device (PoCL
//! on the CPU where it is installed), through raw `opencl3` calls, so that what is timed is the
//! driver and its compiled kernel, with no streamexec layer on either side of the comparison.
//!
//! The program is built once when the device is opened (`build`, reported in the summary);
//! PoCL then compiles each kernel for its local size at the kernel's first enqueue, so the
//! first launch of each kernel is timed apart (`first_launches`) and kept out of the
//! measurements by the check launch before them. PoCL keeps compiled kernels in its cache
//! (`~/.cache/pocl`; `POCL_KERNEL_CACHE=0` turns it off), so after the first run both numbers
//! are mostly cache look-ups.

use std::ptr;
use std::time::{Duration, Instant};

use bytemuck::Pod;
use opencl3::command_queue::{CL_BLOCKING, CommandQueue};
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_ALL, Device};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE, ClMem};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use parking_lot::Mutex;

const SOURCE: &str = include_str!("../../../../kernels/cl/bench.cl");

/// `/` and `sqrt` rounded correctly, as the PTX's `div.rn.f32` / `sqrt.rn.f32` (OpenCL allows
/// 2.5 and 3 ulp by default), so the layer normalisation can match bit for bit.
const BUILD_OPTIONS: &str = "-cl-fp32-correctly-rounded-divide-sqrt";

/// An OpenCL device with an in-order queue and bench.cl built for it.
pub struct Pocl {
    /// The device's name and its platform's, for the log.
    pub name: String,
    /// The time `clBuildProgram` took for the whole of bench.cl.
    pub build: Duration,
    context: Context,
    queue: CommandQueue,
    program: Program,
    /// Each kernel's first launch (its check), by kernel name, in run order.
    first_launches: Mutex<Vec<(String, Duration)>>,
}

/// A kernel argument: a buffer (borrowed for as long as the launch that uses it lives) or a
/// scalar of the kernel's parameter type.
#[derive(Clone, Copy)]
pub enum Arg<'a> {
    Mem(&'a dyn ClMem),
    U32(u32),
    F32(f32),
}

impl<'a, T> From<&'a Buffer<T>> for Arg<'a> {
    fn from(b: &'a Buffer<T>) -> Arg<'a> {
        Arg::Mem(b)
    }
}

/// A kernel with its arguments set, and the launch shape of its CUDA twin (global size =
/// blocks x threads per dimension, local size = threads). It borrows its device and its
/// buffers, so neither can go while it can still run.
pub struct Launch<'a> {
    pocl: &'a Pocl,
    kernel: Kernel,
    global: [usize; 2],
    local: [usize; 2],
    dims: u32,
}

impl Pocl {
    /// The first device of the first platform that has one, with bench.cl built; `Err` says why
    /// there is none (no OpenCL library or platform, no device, a failed build).
    pub fn open() -> Result<Pocl, String> {
        let platforms = get_platforms().map_err(|e| format!("no OpenCL platform: {e}"))?;
        let (platform, id) = platforms
            .iter()
            .find_map(|p| Some((p, *p.get_devices(CL_DEVICE_TYPE_ALL).ok()?.first()?)))
            .ok_or("no OpenCL platform with a device")?;
        let device = Device::new(id);
        let name = format!(
            "{} on {}",
            device.name().unwrap_or_default(),
            platform.name().unwrap_or_default()
        );
        let context = Context::from_device(&device).map_err(|e| format!("clCreateContext: {e}"))?;
        // Properties 0: in order, no profiling (timing is the host's wall clock, as for the
        // engines).
        let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
            .map_err(|e| format!("clCreateCommandQueueWithProperties: {e}"))?;
        let start = Instant::now();
        let program = Program::create_and_build_from_source(&context, SOURCE, BUILD_OPTIONS)
            .map_err(|e| format!("building kernels/cl/bench.cl: {e}"))?;
        let build = start.elapsed();
        Ok(Pocl {
            name,
            build,
            context,
            queue,
            program,
            first_launches: Mutex::default(),
        })
    }

    /// A read-write buffer holding `data`. A case's buffers are written only here: each is
    /// checked once, on its first launch, so inputs and poisoned outputs need no reset.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Buffer<T> {
        // SAFETY: no host pointer is passed, so the driver allocates the storage.
        let mut buf = unsafe {
            Buffer::<T>::create(
                &self.context,
                CL_MEM_READ_WRITE,
                data.len(),
                ptr::null_mut(),
            )
        }
        .expect("clCreateBuffer");
        // SAFETY: a blocking write of `data.len()` elements, the buffer's length.
        unsafe {
            self.queue
                .enqueue_write_buffer(&mut buf, CL_BLOCKING, 0, data, &[])
        }
        .expect("clEnqueueWriteBuffer");
        buf
    }

    /// The first `len` elements of `buf` (blocking, after the queue's earlier commands).
    pub fn read<T: Pod>(&self, buf: &Buffer<T>, len: usize) -> Vec<T> {
        let mut out = vec![T::zeroed(); len];
        // SAFETY: a blocking read into `out` of `len` elements; the caller asks for at most
        // the length it uploaded.
        unsafe {
            self.queue
                .enqueue_read_buffer(buf, CL_BLOCKING, 0, &mut out, &[])
        }
        .expect("clEnqueueReadBuffer");
        out
    }

    /// Kernel `name` of bench.cl with `args` set, launched on `blocks` x `threads` (1-D when
    /// both second dimensions are 1).
    ///
    /// The caller passes the arguments in the kernel's parameter order and types (buffers for
    /// `__global` pointers, `U32` for `uint`, `F32` for `float`), and buffers large enough for
    /// every access the kernel makes at that shape, as it does for the PTX twin.
    pub fn launch<'a>(
        &'a self,
        name: &str,
        args: &[Arg<'a>],
        threads: [usize; 2],
        blocks: [usize; 2],
    ) -> Result<Launch<'a>, String> {
        let kernel = Kernel::create(&self.program, name).map_err(|e| format!("{name}: {e}"))?;
        for (i, arg) in args.iter().enumerate() {
            // SAFETY: the size and the bit pattern of each argument are those of the kernel's
            // parameter `i` (the caller's duty above; OpenCL checks the size).
            let set = unsafe {
                match arg {
                    Arg::Mem(m) => kernel.set_arg(i as u32, &m.get()),
                    Arg::U32(v) => kernel.set_arg(i as u32, v),
                    Arg::F32(v) => kernel.set_arg(i as u32, v),
                }
            };
            set.map_err(|e| format!("{name}: clSetKernelArg({i}): {e}"))?;
        }
        let dims = if threads[1] == 1 && blocks[1] == 1 {
            1
        } else {
            2
        };
        Ok(Launch {
            pocl: self,
            kernel,
            global: [threads[0] * blocks[0], threads[1] * blocks[1]],
            local: threads,
            dims,
        })
    }

    /// Each kernel's first launch time, in run order.
    pub fn first_launches(&self) -> Vec<(String, Duration)> {
        self.first_launches.lock().clone()
    }
}

impl Launch<'_> {
    /// One launch: `clEnqueueNDRangeKernel` and `clFinish`.
    pub fn run(&self) -> Result<(), String> {
        let queue = &self.pocl.queue;
        // SAFETY: the kernel's arguments are set (`Pocl::launch`), and the size arrays have
        // `dims` entries.
        unsafe {
            queue.enqueue_nd_range_kernel(
                self.kernel.get(),
                self.dims,
                ptr::null(),
                self.global.as_ptr(),
                self.local.as_ptr(),
                &[],
            )
        }
        .map_err(|e| format!("clEnqueueNDRangeKernel: {e}"))?;
        queue.finish().map_err(|e| format!("clFinish: {e}"))
    }

    /// `run`, recording its time as the kernel's first launch if it is the first.
    pub fn run_first(&self) -> Result<(), String> {
        let start = Instant::now();
        self.run()?;
        let t = start.elapsed();
        let name = self.kernel.function_name().unwrap_or_default();
        let mut firsts = self.pocl.first_launches.lock();
        if !firsts.iter().any(|(n, _)| *n == name) {
            firsts.push((name, t));
        }
        Ok(())
    }
}
