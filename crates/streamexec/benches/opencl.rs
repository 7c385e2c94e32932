//! OpenCL-platform overheads, each next to the same work done with raw `opencl3` calls in the
//! same run (its own context and in-order queue on the same device):
//!
//! - `opencl_launch_empty`: `__kernel void empty() {}` on 1 work-item (1×1), through a stream
//!   (`then_launch` + `block_host_until_done`) vs `ExecuteKernel::enqueue_nd_range` +
//!   `Event::wait`, and vs `CommandQueue::enqueue_nd_range_kernel` + `CommandQueue::finish`.
//! - `opencl_launch_buffers`: `axpy` on 1024 floats (4 work-groups of 256) with two buffer
//!   arguments, through a stream vs `CommandQueue::enqueue_nd_range_kernel` + `finish` on
//!   plain buffers: what a launch that writes device memory costs (on CPU devices, streamexec
//!   checks the buffers' red zones after it, see `opencl/red_zone.rs`).
//! - `opencl_copy_h2d_64MiB` / `opencl_copy_d2h_64MiB`: `then_memcpy_h2d` / `then_memcpy_d2h`
//!   between `StreamExecutor::allocate_host` memory and `DeviceMemory<u8>`, vs
//!   `enqueue_write_buffer` / `enqueue_read_buffer` into a plain `Buffer<u8>` from
//!   - `opencl3_pinned`: the mapped pointer of a `CL_MEM_ALLOC_HOST_PTR` buffer (the same kind
//!     of host memory `allocate_host` should hand out), non-blocking + `Event::wait`;
//!   - `opencl3_vec`: a pageable `Vec<u8>`, blocking.
//!
//! Every result is checked once before timing. When the `opencl` platform or an OpenCL driver
//! is missing, each group prints why and is skipped.
//!
//! Run with `cargo bench --bench opencl --features opencl`.

use std::ptr;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use opencl3::command_queue::{CL_BLOCKING, CL_NON_BLOCKING, CommandQueue};
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_ALL, Device};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{
    Buffer, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE, ClMem,
};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::cl_mem;
use streamexec::{DevicePtr, MultiKernelLoaderSpec, PlatformManager, StreamExecutor, TypedKernel};

const COPY_BYTES: usize = 64 << 20;
const EMPTY_SRC: &str = "__kernel void empty() {}";
const AXPY_SRC: &str = "__kernel void axpy(__global float* y, __global const float* x, float a) {
    size_t i = get_global_id(0);
    y[i] += a * x[i];
}";
const AXPY_LEN: usize = 1024;

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 11)) as u8
}

/// Raw opencl3 objects: a context and an in-order queue of their own on one device.
struct Raw {
    context: Context,
    queue: CommandQueue,
}

impl Raw {
    /// The device called `name` on any platform, else the first device found.
    fn open(name: &str) -> Result<Raw, String> {
        let platforms = get_platforms().map_err(|e| format!("clGetPlatformIDs: {e}"))?;
        let devices: Vec<Device> = platforms
            .iter()
            .filter_map(|p| p.get_devices(CL_DEVICE_TYPE_ALL).ok())
            .flatten()
            .map(Device::new)
            .collect();
        let device = devices
            .iter()
            .find(|d| d.name().is_ok_and(|n| n == name))
            .or(devices.first())
            .copied()
            .ok_or("no OpenCL device found")?;
        let context = Context::from_device(&device).map_err(|e| format!("clCreateContext: {e}"))?;
        // Properties 0: an in-order queue without profiling.
        let queue = CommandQueue::create_default_with_properties(&context, 0, 0)
            .map_err(|e| format!("clCreateCommandQueueWithProperties: {e}"))?;
        Ok(Raw { context, queue })
    }

    fn buffer(&self, flags: u64, len: usize) -> Buffer<u8> {
        // SAFETY: no host pointer is passed, so the driver allocates the storage.
        unsafe { Buffer::<u8>::create(&self.context, flags, len, ptr::null_mut()) }
            .expect("clCreateBuffer")
    }
}

/// A `CL_MEM_ALLOC_HOST_PTR` buffer kept mapped for reading and writing: the usual way to get
/// page-locked host memory from OpenCL. Unmapped when dropped.
struct MappedHost<'q> {
    queue: &'q CommandQueue,
    buffer: Buffer<u8>,
    ptr: *mut u8,
    len: usize,
}

impl<'q> MappedHost<'q> {
    fn new(raw: &'q Raw, len: usize) -> Self {
        let buffer = raw.buffer(CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, len);
        let mut mapped: cl_mem = ptr::null_mut();
        // SAFETY: a blocking map of the whole buffer, which lives as long as `self`.
        unsafe {
            raw.queue.enqueue_map_buffer(
                &buffer,
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                len,
                &mut mapped,
                &[],
            )
        }
        .expect("clEnqueueMapBuffer")
        .wait()
        .expect("map wait");
        assert!(!mapped.is_null(), "clEnqueueMapBuffer returned null");
        MappedHost {
            queue: &raw.queue,
            buffer,
            ptr: mapped.cast(),
            len,
        }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping covers `len` bytes and stays valid until `drop`; commands that
        // use it are waited for before the borrow ends.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for MappedHost<'_> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is the pointer the map returned, and no command still uses it.
        let unmapped = unsafe {
            self.queue
                .enqueue_unmap_mem_object(self.buffer.get(), self.ptr.cast(), &[])
        };
        if let Ok(event) = unmapped {
            let _ = event.wait();
        }
    }
}

/// The streamexec `opencl` executor and a raw opencl3 setup on the same device, or `None`
/// after printing why `group` is skipped.
fn open(group: &str) -> Option<(StreamExecutor, Raw)> {
    let exec = match PlatformManager::platform_with_name("opencl")
        .and_then(|p| p.executor_for_device(0))
    {
        Ok(exec) => exec,
        Err(e) => {
            println!("{group}: skipped, the streamexec opencl platform is unavailable: {e}");
            return None;
        }
    };
    match Raw::open(&exec.description().name) {
        Ok(raw) => Some((exec, raw)),
        Err(e) => {
            println!("{group}: skipped, raw opencl3 setup failed: {e}");
            None
        }
    }
}

fn launch_empty(c: &mut Criterion) {
    let Some((exec, raw)) = open("opencl_launch_empty") else {
        return;
    };

    let spec = MultiKernelLoaderSpec::new(0).add_opencl_text_in_memory(EMPTY_SRC, "empty");
    let kernel: TypedKernel<()> = exec.get_kernel(&spec).expect("load empty kernel");
    let mut stream = exec.create_stream().expect("stream");

    let program = Program::create_and_build_from_source(&raw.context, EMPTY_SRC, "")
        .expect("build empty kernel");
    let raw_kernel = Kernel::create(&program, "empty").expect("clCreateKernel");
    let one: usize = 1;

    let se_launch = |stream: &mut streamexec::Stream| {
        stream
            .then_launch(1, 1, &kernel, ())
            .block_host_until_done()
            .expect("streamexec empty launch")
    };
    let ek_launch = || {
        // SAFETY: `empty` takes no arguments.
        unsafe {
            ExecuteKernel::new(&raw_kernel)
                .set_global_work_size(1)
                .set_local_work_size(1)
                .enqueue_nd_range(&raw.queue)
        }
        .expect("clEnqueueNDRangeKernel")
        .wait()
        .expect("clWaitForEvents")
    };
    let nd_launch = || {
        // SAFETY: `empty` takes no arguments; the sizes point to one `usize` each.
        let event = unsafe {
            raw.queue
                .enqueue_nd_range_kernel(raw_kernel.get(), 1, ptr::null(), &one, &one, &[])
        }
        .expect("clEnqueueNDRangeKernel");
        raw.queue.finish().expect("clFinish");
        drop(event);
    };

    // Check once that each path launches and completes.
    se_launch(&mut stream);
    ek_launch();
    nd_launch();

    let mut group = c.benchmark_group("opencl_launch_empty");
    configure(&mut group);
    group.bench_function("streamexec", |b| b.iter(|| se_launch(&mut stream)));
    group.bench_function("opencl3_execute_kernel_wait", |b| b.iter(ek_launch));
    group.bench_function("opencl3_enqueue_finish", |b| b.iter(nd_launch));
    group.finish();
}

fn launch_buffers(c: &mut Criterion) {
    let Some((exec, raw)) = open("opencl_launch_buffers") else {
        return;
    };
    let spec = MultiKernelLoaderSpec::new(3).add_opencl_text_in_memory(AXPY_SRC, "axpy");
    let kernel: TypedKernel<(DevicePtr<f32>, DevicePtr<f32>, f32)> =
        exec.get_kernel(&spec).expect("load axpy");
    let mut stream = exec.create_stream().expect("stream");
    let x: Vec<f32> = (0..AXPY_LEN).map(|i| i as f32).collect();
    let dy = exec.copy_to_device(&vec![0f32; AXPY_LEN]).expect("y");
    let dx = exec.copy_to_device(&x).expect("x");

    let program =
        Program::create_and_build_from_source(&raw.context, AXPY_SRC, "").expect("build axpy");
    let raw_kernel = Kernel::create(&program, "axpy").expect("clCreateKernel");
    let ry = raw.buffer(CL_MEM_READ_WRITE, AXPY_LEN * 4);
    let rx = raw.buffer(CL_MEM_READ_WRITE, AXPY_LEN * 4);
    let a = 0f32;
    // SAFETY: two cl_mem handles and a float, as `axpy` declares.
    unsafe {
        raw_kernel.set_arg(0, &ry.get()).expect("arg 0");
        raw_kernel.set_arg(1, &rx.get()).expect("arg 1");
        raw_kernel.set_arg(2, &a).expect("arg 2");
    }
    let (global, local) = (AXPY_LEN, 256usize);

    let se_launch = |stream: &mut streamexec::Stream| {
        stream
            .then_launch(256, 4, &kernel, (dy.ptr(), dx.ptr(), 0.0))
            .block_host_until_done()
            .expect("streamexec axpy launch")
    };
    let nd_launch = || {
        // SAFETY: every argument is set; the sizes point to one `usize` each.
        let event = unsafe {
            raw.queue.enqueue_nd_range_kernel(
                raw_kernel.get(),
                1,
                ptr::null(),
                &global,
                &local,
                &[],
            )
        }
        .expect("clEnqueueNDRangeKernel");
        raw.queue.finish().expect("clFinish");
        drop(event);
    };

    // Check once that each path launches and completes (a = 1 once, then 0: y stays x).
    stream
        .then_launch(256, 4, &kernel, (dy.ptr(), dx.ptr(), 1.0))
        .block_host_until_done()
        .expect("streamexec axpy launch");
    se_launch(&mut stream);
    assert_eq!(exec.copy_to_vec(&dy).expect("read y"), x, "axpy computed y");
    nd_launch();

    let mut group = c.benchmark_group("opencl_launch_buffers");
    configure(&mut group);
    group.bench_function("streamexec", |b| b.iter(|| se_launch(&mut stream)));
    group.bench_function("opencl3_enqueue_finish", |b| b.iter(nd_launch));
    group.finish();
}

fn copy_h2d(c: &mut Criterion) {
    let Some((exec, raw)) = open("opencl_copy_h2d_64MiB") else {
        return;
    };
    let expected: Vec<u8> = (0..COPY_BYTES).map(pattern).collect();

    // streamexec: allocate_host memory into DeviceMemory<u8>.
    let mut stream = exec.create_stream().expect("stream");
    let mut se_src = exec.allocate_host::<u8>(COPY_BYTES).expect("host memory");
    se_src.as_mut_slice().copy_from_slice(&expected);
    let se_dst = exec
        .allocate_array::<u8>(COPY_BYTES)
        .expect("device memory");

    // Raw: a mapped CL_MEM_ALLOC_HOST_PTR buffer and a Vec, into a plain Buffer<u8>.
    let mut pinned = MappedHost::new(&raw, COPY_BYTES);
    pinned.as_mut_slice().copy_from_slice(&expected);
    let vec_src = expected.clone();
    let mut raw_dst = raw.buffer(CL_MEM_READ_WRITE, COPY_BYTES);
    let mut readback = vec![0u8; COPY_BYTES];

    // Check each path once.
    stream
        .then_memcpy_h2d(&se_src, &se_dst)
        .block_host_until_done()
        .expect("streamexec h2d copy");
    let got = exec.copy_to_vec(&se_dst).expect("streamexec d2h check");
    assert!(got == expected, "then_memcpy_h2d copied the wrong bytes");
    drop(got);
    for (name, src) in [("pinned", pinned.as_slice()), ("vec", &vec_src[..])] {
        readback.fill(0);
        // SAFETY: blocking calls; `src`, `readback` and `raw_dst` are all COPY_BYTES long.
        unsafe {
            raw.queue
                .enqueue_write_buffer(&mut raw_dst, CL_BLOCKING, 0, src, &[])
                .expect("clEnqueueWriteBuffer");
            raw.queue
                .enqueue_read_buffer(&raw_dst, CL_BLOCKING, 0, &mut readback, &[])
                .expect("clEnqueueReadBuffer");
        }
        assert!(
            readback == expected,
            "raw h2d from {name} copied the wrong bytes"
        );
    }
    drop(readback);

    let mut group = c.benchmark_group("opencl_copy_h2d_64MiB");
    configure(&mut group);
    group.throughput(Throughput::Bytes(COPY_BYTES as u64));
    group.bench_function("streamexec", |b| {
        b.iter(|| {
            stream
                .then_memcpy_h2d(&se_src, &se_dst)
                .block_host_until_done()
                .expect("streamexec h2d copy")
        })
    });
    group.bench_function("opencl3_pinned", |b| {
        b.iter(|| {
            // SAFETY: the mapped source outlives the copy, which is waited for.
            unsafe {
                raw.queue.enqueue_write_buffer(
                    &mut raw_dst,
                    CL_NON_BLOCKING,
                    0,
                    pinned.as_slice(),
                    &[],
                )
            }
            .expect("clEnqueueWriteBuffer")
            .wait()
            .expect("clWaitForEvents")
        })
    });
    group.bench_function("opencl3_vec", |b| {
        b.iter(|| {
            // SAFETY: a blocking write from a live Vec of the buffer's size.
            unsafe {
                raw.queue
                    .enqueue_write_buffer(&mut raw_dst, CL_BLOCKING, 0, &vec_src, &[])
            }
            .expect("clEnqueueWriteBuffer")
        })
    });
    group.finish();
    drop(pinned);
}

fn copy_d2h(c: &mut Criterion) {
    let Some((exec, raw)) = open("opencl_copy_d2h_64MiB") else {
        return;
    };
    let expected: Vec<u8> = (0..COPY_BYTES).map(pattern).collect();

    // streamexec: DeviceMemory<u8> into allocate_host memory.
    let mut stream = exec.create_stream().expect("stream");
    let se_src = exec.copy_to_device(&expected).expect("device memory");
    let mut se_dst = exec.allocate_host::<u8>(COPY_BYTES).expect("host memory");

    // Raw: a plain Buffer<u8> into a mapped CL_MEM_ALLOC_HOST_PTR buffer and into a Vec.
    let mut raw_src = raw.buffer(CL_MEM_READ_WRITE, COPY_BYTES);
    // SAFETY: a blocking write of COPY_BYTES bytes into a COPY_BYTES buffer.
    unsafe {
        raw.queue
            .enqueue_write_buffer(&mut raw_src, CL_BLOCKING, 0, &expected, &[])
    }
    .expect("clEnqueueWriteBuffer");
    let mut pinned = MappedHost::new(&raw, COPY_BYTES);
    let mut vec_dst = vec![0u8; COPY_BYTES];

    // Check each path once.
    stream
        .then_memcpy_d2h(&se_src, &mut se_dst)
        .block_host_until_done()
        .expect("streamexec d2h copy");
    assert!(
        se_dst.as_slice() == &expected[..],
        "then_memcpy_d2h copied the wrong bytes"
    );
    for (name, dst) in [("pinned", pinned.as_mut_slice()), ("vec", &mut vec_dst[..])] {
        dst.fill(0);
        // SAFETY: a blocking read of COPY_BYTES bytes into a COPY_BYTES slice.
        unsafe {
            raw.queue
                .enqueue_read_buffer(&raw_src, CL_BLOCKING, 0, dst, &[])
        }
        .expect("clEnqueueReadBuffer");
        assert!(
            *dst == expected[..],
            "raw d2h into {name} copied the wrong bytes"
        );
    }

    let mut group = c.benchmark_group("opencl_copy_d2h_64MiB");
    configure(&mut group);
    group.throughput(Throughput::Bytes(COPY_BYTES as u64));
    group.bench_function("streamexec", |b| {
        b.iter(|| {
            stream
                .then_memcpy_d2h(&se_src, &mut se_dst)
                .block_host_until_done()
                .expect("streamexec d2h copy")
        })
    });
    group.bench_function("opencl3_pinned", |b| {
        b.iter(|| {
            // SAFETY: the mapped destination outlives the copy, which is waited for.
            unsafe {
                raw.queue.enqueue_read_buffer(
                    &raw_src,
                    CL_NON_BLOCKING,
                    0,
                    pinned.as_mut_slice(),
                    &[],
                )
            }
            .expect("clEnqueueReadBuffer")
            .wait()
            .expect("clWaitForEvents")
        })
    });
    group.bench_function("opencl3_vec", |b| {
        b.iter(|| {
            // SAFETY: a blocking read into a live Vec of the buffer's size.
            unsafe {
                raw.queue
                    .enqueue_read_buffer(&raw_src, CL_BLOCKING, 0, &mut vec_dst, &[])
            }
            .expect("clEnqueueReadBuffer")
        })
    });
    group.finish();
    drop(pinned);
}

criterion_group!(benches, launch_empty, launch_buffers, copy_h2d, copy_d2h);
criterion_main!(benches);
