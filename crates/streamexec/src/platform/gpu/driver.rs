//! The driver surface the shared backend runs on: the [`Driver`] trait (one device of a
//! CUDA-like driver: memory, streams, events, async copies, modules, launches, peers), the raw
//! handle types it passes around, and the vendor libraries bound to one device: [`GpuBlas`],
//! [`GpuFftPlan`] and [`GpuDnn`] (with the [`DnnCall`] it runs).
//! `cuda/driver.rs` and `hip/driver.rs` implement it; `mock.rs` simulates it for tests.

use std::ffi::c_void;

use crate::error::Result;
use crate::interface::dnn::{
    Activation, BatchNormProblem, ConvProblem, PoolProblem, SoftmaxAlgorithm, SoftmaxMode,
    TensorDesc,
};
use crate::types::DeviceDescription;
use crate::types::MultiKernelLoaderSpec;

/// A driver stream handle (`CUstream`, `hipStream_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawStream(pub usize);
/// A driver event handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawEvent(pub usize);
/// A loaded module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawModule(pub usize);
/// A kernel function in a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawFunction(pub usize);

/// A driver graph (`CUgraph`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawGraph(pub usize);
/// An instantiated graph (`CUgraphExec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawGraphExec(pub usize);
/// A node of a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawGraphNode(pub usize);

/// A kernel launch as a graph node's parameters.
pub(crate) struct KernelNode<'a> {
    /// The function.
    pub f: RawFunction,
    /// Blocks per grid.
    pub grid: [u32; 3],
    /// Threads per block.
    pub block: [u32; 3],
    /// Dynamic shared memory.
    pub shared_bytes: u32,
    /// One pointer per kernel parameter (as for `Driver::launch`).
    pub params: &'a mut [*mut c_void],
}

/// One node of a graph chain (`Driver::graph_chain`).
pub(crate) enum GraphNode<'a> {
    /// A kernel launch.
    Kernel(KernelNode<'a>),
    /// A byte fill.
    MemsetD8 { dst: u64, value: u8, bytes: usize },
    /// A 32-bit fill of `count` words.
    MemsetD32 { dst: u64, value: u32, count: usize },
    /// A device-to-device copy.
    MemcpyD2D { src: u64, dst: u64, bytes: usize },
}

/// A kernel image chosen from a spec, ready for the driver's module loader.
pub(crate) struct ModuleImage {
    /// The bytes the loader takes (PTX text is NUL-terminated).
    pub bytes: Vec<u8>,
    /// Entry point name.
    pub kernel_name: String,
    /// PTX text, when the image is PTX: its `.entry` parameter lists verify signatures.
    pub ptx: Option<String>,
    /// What was chosen, for messages (`PTX for sm_80`, `cubin`, ...).
    pub what: String,
}

/// A vendor BLAS bound to one device (cuBLAS); each call runs on driver stream `s`.
pub(crate) trait GpuBlas: Send + Sync {
    /// GEMM / strided-batched GEMM.
    fn gemm(&self, s: RawStream, c: &crate::interface::blas::GemmCall) -> Result<()>;
    /// GEMV.
    fn gemv(&self, s: RawStream, c: &crate::interface::blas::GemvCall) -> Result<()>;
    /// Level 1.
    fn level1(&self, s: RawStream, c: &crate::interface::blas::Level1Call) -> Result<()>;
}

/// A vendor FFT plan (cuFFT) of one device; each execution runs on driver stream `s`.
pub(crate) trait GpuFftPlan: Send + Sync {
    /// Enqueues one execution (all batches) from device address `input` to `output` (equal
    /// for in place). The caller checked the operands against the plan's layouts.
    fn execute(
        &self,
        s: RawStream,
        direction: crate::interface::fft::FftDirection,
        input: u64,
        output: u64,
    ) -> Result<()>;
}

/// One DNN operation for a vendor library, its operands as device addresses. The problem was
/// validated by `src/dnn/` and the operands checked against it (see `interface::dnn`).
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)] // The fields are `DnnSupport`'s arguments of the same names.
#[cfg_attr(not(any(feature = "cuda", test)), allow(dead_code))] // Read by cuDNN (and the mock).
pub(crate) enum DnnCall {
    ConvForward {
        p: ConvProblem,
        x: u64,
        w: u64,
        y: u64,
    },
    ConvBackwardData {
        p: ConvProblem,
        w: u64,
        dy: u64,
        dx: u64,
    },
    ConvBackwardFilter {
        p: ConvProblem,
        x: u64,
        dy: u64,
        dw: u64,
    },
    PoolForward {
        p: PoolProblem,
        x: u64,
        y: u64,
    },
    PoolBackward {
        p: PoolProblem,
        x: u64,
        y: u64,
        dy: u64,
        dx: u64,
    },
    ActivationForward {
        act: Activation,
        t: TensorDesc,
        x: u64,
        y: u64,
    },
    ActivationBackward {
        act: Activation,
        t: TensorDesc,
        x: u64,
        y: u64,
        dy: u64,
        dx: u64,
    },
    SoftmaxForward {
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        t: TensorDesc,
        x: u64,
        y: u64,
    },
    SoftmaxBackward {
        alg: SoftmaxAlgorithm,
        mode: SoftmaxMode,
        t: TensorDesc,
        y: u64,
        dy: u64,
        dx: u64,
    },
    BatchNormTraining {
        p: BatchNormProblem,
        x: u64,
        scale: u64,
        bias: u64,
        y: u64,
        running_mean: u64,
        running_var: u64,
        save_mean: u64,
        save_inv_std: u64,
    },
    BatchNormInference {
        p: BatchNormProblem,
        x: u64,
        scale: u64,
        bias: u64,
        mean: u64,
        var: u64,
        y: u64,
    },
    BatchNormBackward {
        p: BatchNormProblem,
        x: u64,
        dy: u64,
        scale: u64,
        save_mean: u64,
        save_inv_std: u64,
        dx: u64,
        dscale: u64,
        dbias: u64,
    },
    BiasAdd {
        t: TensorDesc,
        y: u64,
        bias: u64,
    },
}

/// A vendor DNN library bound to one device (cuDNN). Operations it has no form of, or no
/// form with the contract's semantics, run the built-in kernels instead (`gpu/dnn.rs`).
pub(crate) trait GpuDnn: Send + Sync {
    /// Whether [`run`](Self::run) serves `call` exactly as the contract says.
    fn supports(&self, call: &DnnCall) -> bool;
    /// Enqueues `call` (one it [`supports`](Self::supports)) on driver stream `s`.
    fn run(&self, s: RawStream, call: &DnnCall) -> Result<()>;
}

/// Host function run by the driver in stream order (releases what async copies borrowed).
pub(crate) type HostFn = Box<dyn FnOnce() + Send + 'static>;

/// One device of a CUDA-like driver. Every method makes the device current on the calling
/// thread itself, so callers on any thread (user, stream worker) need not.
///
/// # Safety
/// Implementations must return handles and device pointers that stay valid until passed to
/// the matching destroy/free call, and must report every driver failure as `Err`.
pub(crate) unsafe trait Driver: Send + Sync + Sized + 'static {
    /// Platform name (`cuda`, `hip`).
    const PLATFORM: &'static str;
    /// PTX of kernels/canned.cu (Philox fills, and BLAS where there is no vendor library)
    /// where the driver loads PTX.
    const CANNED_PTX: Option<&'static str> = None;
    /// PTX of kernels/fft.cu (the built-in FFT kernels) where the driver loads PTX; without
    /// it the executor has no FFT.
    const FFT_PTX: Option<&'static str> = None;
    /// PTX of kernels/dnn.cu (the built-in DNN kernels) where the driver loads PTX; without it
    /// the executor has no DNN.
    const DNN_PTX: Option<&'static str> = None;
    /// True when the platform has a vendor BLAS that [`blas`](Self::blas) may return.
    const HAS_BLAS: bool = false;

    /// The device's vendor BLAS (created on first use): `Ok(None)` where the library is not
    /// installed or the platform has none (BLAS then runs the built-in kernels of
    /// [`CANNED_PTX`](Self::CANNED_PTX), if any), `Err` where it is installed but fails.
    fn blas(&self) -> Result<Option<&dyn GpuBlas>> {
        Ok(None)
    }

    /// The vendor BLAS's name when its library is installed (checked without creating a
    /// handle), else why not: `Err(Some(why))` naming the missing library, `Err(None)` where
    /// the platform has no vendor BLAS in this build (the default).
    fn blas_library(&self) -> std::result::Result<&'static str, Option<String>> {
        Err(None)
    }

    /// The vendor FFT's name when its library is installed, else why not, as
    /// [`blas_library`](Self::blas_library): `Err(None)` (the default) where the platform has no
    /// vendor FFT in this build.
    fn fft_library(&self) -> std::result::Result<&'static str, Option<String>> {
        Err(None)
    }

    /// A vendor FFT plan for validated `desc`; only called where
    /// [`fft_library`](Self::fft_library) is `Ok`.
    fn fft_plan(&self, desc: &crate::interface::fft::FftPlanDesc) -> Result<Box<dyn GpuFftPlan>> {
        let _ = desc;
        Err(crate::error::Error::internal(format!(
            "{} has no vendor FFT plans",
            Self::PLATFORM
        )))
    }

    /// The vendor DNN's name when its library is installed, else why not, as
    /// [`blas_library`](Self::blas_library): `Err(None)` (the default) where the platform has no
    /// vendor DNN in this build.
    fn dnn_library(&self) -> std::result::Result<&'static str, Option<String>> {
        Err(None)
    }

    /// The device's vendor DNN (created on first use), as [`blas`](Self::blas): `Ok(None)`
    /// where its library is not installed, `Err` where it is but fails to start.
    fn dnn(&self) -> Result<Option<&dyn GpuDnn>> {
        Ok(None)
    }

    /// Opens device `ordinal` (already range-checked against the platform's device count).
    fn open(ordinal: usize) -> Result<Self>;
    /// The description of device `ordinal`, without opening it.
    fn describe_device(ordinal: usize) -> Result<DeviceDescription>;
    /// This device's description.
    fn describe(&self) -> Result<DeviceDescription>;
    /// Blocks until all work on the device (this context) is done.
    fn synchronize_device(&self) -> Result<()>;
    /// Free and total device memory.
    fn mem_info(&self) -> Result<(u64, u64)>;
    /// Device memory (`bytes` > 0).
    fn mem_alloc(&self, bytes: u64) -> Result<u64>;
    /// Frees device memory.
    ///
    /// # Safety
    /// `ptr` came from `mem_alloc` and no queued work uses it.
    unsafe fn mem_free(&self, ptr: u64) -> Result<()>;
    /// Page-locked host memory; `mapped` also maps it into the device's address space.
    fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<*mut u8>;
    /// Frees `host_alloc` memory.
    ///
    /// # Safety
    /// `ptr` came from `host_alloc` and nothing uses it any more.
    unsafe fn host_free(&self, ptr: *mut u8);
    /// The device address of mapped host memory.
    ///
    /// # Safety
    /// `ptr` came from `host_alloc(_, true)`.
    unsafe fn host_device_pointer(&self, ptr: *mut u8) -> Result<u64>;

    /// A new non-blocking stream.
    fn stream_create(&self) -> Result<RawStream>;
    /// Destroys a stream (after its work is done).
    ///
    /// # Safety
    /// `s` is live and not used afterwards.
    unsafe fn stream_destroy(&self, s: RawStream);
    /// Blocks until `s` is idle; the first asynchronous error of its work.
    fn stream_synchronize(&self, s: RawStream) -> Result<()>;
    /// Runs `f` on a driver thread once earlier work on `s` is done.
    fn launch_host_fn(&self, s: RawStream, f: HostFn) -> Result<()>;

    /// Async host-to-device copy.
    ///
    /// # Safety
    /// `src` stays readable for `bytes` until the copy is done; the device range is live.
    unsafe fn memcpy_htod_async(
        &self,
        dst: u64,
        src: *const u8,
        bytes: usize,
        s: RawStream,
    ) -> Result<()>;
    /// Async device-to-host copy.
    ///
    /// # Safety
    /// `dst` stays writable and unaliased for `bytes` until the copy is done.
    unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut u8,
        src: u64,
        bytes: usize,
        s: RawStream,
    ) -> Result<()>;
    /// Async device-to-device copy.
    ///
    /// # Safety
    /// Both ranges are live device memory.
    unsafe fn memcpy_dtod_async(
        &self,
        dst: u64,
        src: u64,
        bytes: usize,
        s: RawStream,
    ) -> Result<()>;
    /// True when this device can map `peer`'s memory.
    fn can_access_peer(&self, peer: &Self) -> Result<bool>;
    /// Maps `peer`'s memory into this device (already enabled is success).
    fn enable_peer_access(&self, peer: &Self) -> Result<()>;
    /// Async copy from `src` on device `src_dev` to `dst` on this device.
    ///
    /// # Safety
    /// Both ranges are live device memory of their devices.
    unsafe fn memcpy_peer_async(
        &self,
        dst: u64,
        src_dev: &Self,
        src: u64,
        bytes: usize,
        s: RawStream,
    ) -> Result<()>;
    /// Async byte fill.
    ///
    /// # Safety
    /// The range is live device memory.
    unsafe fn memset_d8_async(&self, dst: u64, value: u8, bytes: usize, s: RawStream)
    -> Result<()>;
    /// Async 32-bit fill of `count` words.
    ///
    /// # Safety
    /// The range is live, 4-byte aligned device memory.
    unsafe fn memset_d32_async(
        &self,
        dst: u64,
        value: u32,
        count: usize,
        s: RawStream,
    ) -> Result<()>;
    /// Synchronous host-to-device copy (does not wait for other streams).
    ///
    /// # Safety
    /// The device range is live.
    unsafe fn memcpy_htod(&self, dst: u64, src: &[u8]) -> Result<()>;
    /// Synchronous device-to-host copy.
    ///
    /// # Safety
    /// The device range is live.
    unsafe fn memcpy_dtoh(&self, dst: &mut [u8], src: u64) -> Result<()>;
    /// Synchronous byte fill.
    ///
    /// # Safety
    /// The device range is live.
    unsafe fn memset_d8(&self, dst: u64, value: u8, bytes: usize) -> Result<()>;

    /// A new event; `timing` enables elapsed-time queries.
    fn event_create(&self, timing: bool) -> Result<RawEvent>;
    /// Destroys an event.
    ///
    /// # Safety
    /// `e` is live and not used afterwards.
    unsafe fn event_destroy(&self, e: RawEvent);
    /// Records `e` on `s`.
    fn event_record(&self, e: RawEvent, s: RawStream) -> Result<()>;
    /// `Ok(true)` when the work before the last record is done.
    fn event_query(&self, e: RawEvent) -> Result<bool>;
    /// Blocks until the last record completes.
    fn event_synchronize(&self, e: RawEvent) -> Result<()>;
    /// Milliseconds between two completed records.
    fn event_elapsed_ms(&self, start: RawEvent, end: RawEvent) -> Result<f32>;
    /// Later work on `s` waits for the last record of `e`.
    fn stream_wait_event(&self, s: RawStream, e: RawEvent) -> Result<()>;

    /// The image of `spec` this device loads best; `NoSuitableFormat` if none.
    fn select_image(
        &self,
        spec: &MultiKernelLoaderSpec,
        description: &DeviceDescription,
    ) -> Result<ModuleImage>;
    /// Loads a module; errors carry the JIT log.
    fn module_load(&self, image: &ModuleImage) -> Result<RawModule>;
    /// Unloads a module.
    ///
    /// # Safety
    /// No queued launch uses its functions.
    unsafe fn module_unload(&self, m: RawModule);
    /// The kernel `name` of module `m`.
    fn module_function(&self, m: RawModule, name: &str) -> Result<RawFunction>;
    /// The device address and byte size of the global variable `name` in module `m`
    /// (`cuModuleGetGlobal`, `hipModuleGetGlobal`); `Ok(None)` when the module has none.
    fn module_global(&self, m: RawModule, name: &str) -> Result<Option<(u64, usize)>>;
    /// What a command buffer built from the driver's graphs is called (`kind()`).
    const GRAPH_KIND: &'static str = "driver graph";
    /// True where the driver has graphs (the `graph_*` methods below); command buffers then
    /// become graphs, else they replay as stream operations.
    fn has_graphs(&self) -> bool {
        false
    }
    /// Builds a graph of `nodes`, each depending on the one before (`cuGraphCreate`,
    /// `cuGraphAdd*Node`); the graph and each node's handle. `Unsupported` where the driver has
    /// no graphs (the default): command buffers then replay plainly.
    ///
    /// # Safety
    /// Kernel nodes as for [`launch`](Self::launch); every range is live device memory while
    /// the graph and its instantiations are used.
    unsafe fn graph_chain(
        &self,
        _nodes: &mut [GraphNode<'_>],
    ) -> Result<(RawGraph, Vec<RawGraphNode>)> {
        Err(crate::error::Error::unsupported(
            Self::PLATFORM,
            "CommandBuffer::finalize",
            "this driver has no graphs; command buffers replay as stream operations",
        ))
    }
    /// Instantiates `g` (`cuGraphInstantiateWithFlags`).
    ///
    /// # Safety
    /// `g` is a live graph of this driver.
    unsafe fn graph_instantiate(&self, _g: RawGraph) -> Result<RawGraphExec> {
        Err(crate::error::Error::unsupported(
            Self::PLATFORM,
            "CommandBuffer::finalize",
            "this driver has no graphs",
        ))
    }
    /// Launches `e` on `s` (`cuGraphLaunch`).
    ///
    /// # Safety
    /// `e` is live; the memory its nodes use is live until the launch is done.
    unsafe fn graph_launch(&self, _e: RawGraphExec, _s: RawStream) -> Result<()> {
        Err(crate::error::Error::unsupported(
            Self::PLATFORM,
            "then_submit",
            "this driver has no graphs",
        ))
    }
    /// New parameters for kernel node `n` of `e`, for later launches
    /// (`cuGraphExecKernelNodeSetParams`).
    ///
    /// # Safety
    /// As [`graph_chain`](Self::graph_chain) for the node; `n` is a kernel node of the graph
    /// `e` was instantiated from.
    unsafe fn graph_exec_kernel_params(
        &self,
        _e: RawGraphExec,
        _n: RawGraphNode,
        _node: KernelNode<'_>,
    ) -> Result<()> {
        Err(crate::error::Error::unsupported(
            Self::PLATFORM,
            "CommandBuffer::update",
            "this driver has no graphs",
        ))
    }
    /// Destroys a graph.
    ///
    /// # Safety
    /// `g` is live and not used afterwards (its instantiations stay valid).
    unsafe fn graph_destroy(&self, _g: RawGraph) {}
    /// Destroys an instantiated graph (launches already made finish).
    ///
    /// # Safety
    /// `e` is live and not used afterwards.
    unsafe fn graph_exec_destroy(&self, _e: RawGraphExec) {}

    /// Launches `f` on `s`.
    ///
    /// # Safety
    /// `params` points to one pointer per kernel parameter, each to a value of that
    /// parameter's size; device pointers among them are live until the launch is done.
    unsafe fn launch(
        &self,
        f: RawFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        s: RawStream,
        params: &mut [*mut c_void],
    ) -> Result<()>;

    /// [`launch`](Self::launch) as a cooperative grid (every block resident at once). Only
    /// drivers whose devices report `max_cooperative_blocks` are asked.
    ///
    /// # Safety
    /// As [`launch`](Self::launch).
    #[allow(clippy::too_many_arguments)]
    unsafe fn launch_cooperative(
        &self,
        _f: RawFunction,
        _grid: [u32; 3],
        _block: [u32; 3],
        _shared_bytes: u32,
        _s: RawStream,
        _params: &mut [*mut c_void],
    ) -> Result<()> {
        Err(crate::Error::unsupported(
            Self::PLATFORM,
            "a cooperative launch",
            "this driver has no cooperative launches",
        ))
    }
}
