//! `cuLaunchKernel`: the geometry and shared memory are checked against the device's limits,
//! the parameters are read with the sizes of the PTX entry's `.param` list (from
//! `kernelParams`, one pointer per parameter, or from one `extra` buffer laid out with each
//! parameter at its aligned offset), and the launch is enqueued on the stream. A graph's kernel
//! node is the same checked [`KernelLaunch`], made when the node is added.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use cudarc::driver::sys::{CUevent, CUfunction, CUlaunchConfig, CUresult, CUstream};
use streamexec::{ArgList, BlockDim, SharedMemory, ThreadDim};

use crate::context::resolve_in;
use crate::device::SHARED_PER_BLOCK;
use crate::driver::driver;
use crate::entry::{CuErr, CuResult, invalid, put};
use crate::module::{Function, function};

/// `CU_LAUNCH_PARAM_END`, `CU_LAUNCH_PARAM_BUFFER_POINTER`, `CU_LAUNCH_PARAM_BUFFER_SIZE`.
const PARAM_END: usize = 0;
const PARAM_BUFFER_POINTER: usize = 1;
const PARAM_BUFFER_SIZE: usize = 2;

/// Offsets of each parameter in a packed buffer, and the buffer's size.
fn layout(entry: &streamexec::ptx::PtxEntry) -> (Vec<(usize, usize, usize)>, usize) {
    let mut at = 0usize;
    let mut v = Vec::new();
    for p in &entry.params {
        let (size, align) = (p.size() as usize, (p.align as usize).max(1));
        at = at.next_multiple_of(align);
        v.push((at, size, align));
        at += size;
    }
    (v, at)
}

/// Each parameter's bytes, copied from `kernelParams` or `extra` (sizes from the `.param` list).
///
/// # Safety
/// As `cuLaunchKernel`'s contract: each parameter pointer is valid for its parameter's size;
/// `extra` is a `CU_LAUNCH_PARAM_END`-terminated list whose buffer holds the given size.
unsafe fn argument_bytes(
    entry: &streamexec::ptx::PtxEntry,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<Vec<Vec<u8>>> {
    let (slots, total) = layout(entry);
    if !params.is_null() && !extra.is_null() {
        return Err(invalid("pass kernelParams or extra, not both"));
    }
    if !params.is_null() {
        let mut out = Vec::with_capacity(slots.len());
        for (i, &(_, size, _)) in slots.iter().enumerate() {
            // SAFETY: the caller's contract: one pointer per parameter.
            let p = unsafe { *params.add(i) };
            if p.is_null() {
                return Err(invalid(format!(
                    "kernelParams[{i}] (parameter `{}`) is NULL",
                    entry.params[i].name
                )));
            }
            // SAFETY: the caller's contract: `p` is valid for the parameter's size.
            out.push(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) }.to_vec());
        }
        return Ok(out);
    }
    if extra.is_null() {
        if slots.is_empty() {
            return Ok(Vec::new());
        }
        return Err(invalid(format!(
            "kernel `{}` takes {} parameter(s), and both kernelParams and extra are NULL",
            entry.name,
            slots.len()
        )));
    }
    let (mut buf, mut size) = (None, None);
    for i in (0..).step_by(2) {
        // SAFETY: the caller's contract: pairs up to CU_LAUNCH_PARAM_END.
        let key = unsafe { *extra.add(i) } as usize;
        match key {
            PARAM_END => break,
            PARAM_BUFFER_POINTER => {
                // SAFETY: as above.
                buf = Some(unsafe { *extra.add(i + 1) });
            }
            PARAM_BUFFER_SIZE => {
                // SAFETY: as above; the value points to a size_t.
                let p = unsafe { *extra.add(i + 1) }.cast::<usize>();
                if p.is_null() {
                    return Err(invalid("CU_LAUNCH_PARAM_BUFFER_SIZE points to NULL"));
                }
                // SAFETY: non-null, the caller's contract.
                size = Some(unsafe { p.read_unaligned() });
            }
            other => return Err(invalid(format!("extra holds unknown key {other:#x}"))),
        }
        if i > 64 {
            return Err(invalid("extra is not terminated by CU_LAUNCH_PARAM_END"));
        }
    }
    let (Some(buf), Some(size)) = (buf, size) else {
        return Err(invalid(
            "extra needs CU_LAUNCH_PARAM_BUFFER_POINTER and CU_LAUNCH_PARAM_BUFFER_SIZE",
        ));
    };
    if size != total {
        return Err(invalid(format!(
            "the parameter buffer has {size} bytes; kernel `{}` takes {total}",
            entry.name
        )));
    }
    if buf.is_null() && total > 0 {
        return Err(invalid("CU_LAUNCH_PARAM_BUFFER_POINTER is NULL"));
    }
    Ok(slots
        .iter()
        .map(|&(off, len, _)| {
            // SAFETY: the caller's contract: the buffer holds `size` == `total` bytes.
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>().add(off), len) }.to_vec()
        })
        .collect())
}

fn check_geometry(
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    max_shared: i32,
) -> CuResult<()> {
    if grid.contains(&0) || block.contains(&0) {
        return Err(invalid(format!(
            "a zero dimension: grid {grid:?}, block {block:?}"
        )));
    }
    let limits = [1024, 1024, 64];
    let threads: u64 = block.iter().map(|&b| u64::from(b)).product();
    if block.iter().zip(limits).any(|(&b, l)| b > l) || threads > 1024 {
        return Err(invalid(format!(
            "block {block:?} exceeds the device's limits (1024 × 1024 × 64, 1024 threads)"
        )));
    }
    if grid[0] > i32::MAX as u32 || grid[1] > 65535 || grid[2] > 65535 {
        return Err(invalid(format!(
            "grid {grid:?} exceeds the device's limits (2147483647 × 65535 × 65535)"
        )));
    }
    if shared as i64 > i64::from(max_shared.min(SHARED_PER_BLOCK)) {
        return Err(invalid(format!(
            "{shared} bytes of dynamic shared memory exceed the kernel's limit of {max_shared} \
             (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)"
        )));
    }
    Ok(())
}

/// A checked kernel launch: what `cuLaunchKernel` enqueues, and what a graph's kernel node
/// holds (its argument values copied when the node is added, as CUDA does).
pub(crate) struct KernelLaunch {
    pub(crate) func: Arc<Function>,
    pub(crate) grid: [c_uint; 3],
    pub(crate) block: [c_uint; 3],
    pub(crate) shared: c_uint,
    /// Each parameter's bytes.
    params: Vec<Vec<u8>>,
    /// The address of each of `params`' buffers (a `kernelParams` array for
    /// `cuGraphKernelNodeGetParams`; the buffers never move).
    param_ptrs: Box<[usize]>,
    args: ArgList,
    /// A cooperative launch (every block resident at once).
    cooperative: bool,
}

impl KernelLaunch {
    /// Checks the geometry and shared memory against the device's and the function's limits
    /// and copies the arguments, as `cuLaunchKernel` does.
    ///
    /// # Safety
    /// `kernelParams` holds one valid pointer per kernel parameter, or `extra` is a valid
    /// `CU_LAUNCH_PARAM_END`-terminated list.
    pub(crate) unsafe fn new(
        func: Arc<Function>,
        grid: [c_uint; 3],
        block: [c_uint; 3],
        shared: c_uint,
        kernel_params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> CuResult<KernelLaunch> {
        check_geometry(grid, block, shared, *func.max_dynamic_shared.lock())?;
        // SAFETY: the caller's contract.
        let params = unsafe { argument_bytes(&func.entry, kernel_params, extra)? };
        let (slots, _) = layout(&func.entry);
        let mut args = ArgList::new();
        for (bytes, &(_, _, align)) in params.iter().zip(&slots) {
            args = args.arg_bytes(bytes, align);
        }
        if shared > 0 {
            args = args.arg(SharedMemory::<u8>::new(shared as usize));
        }
        let param_ptrs = params.iter().map(|p| p.as_ptr() as usize).collect();
        Ok(KernelLaunch {
            func,
            grid,
            block,
            shared,
            params,
            param_ptrs,
            args,
            cooperative: false,
        })
    }

    /// Makes this a cooperative launch, as `cuLaunchCooperativeKernel` does: its grid must fit
    /// on the device at once (the occupancy of its block size and shared memory times the
    /// multiprocessors), else `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE`.
    pub(crate) fn cooperative(mut self, multiprocessors: u32) -> CuResult<Self> {
        let threads = self.block.iter().map(|&v| v as u64).product::<u64>();
        let per_sm = blocks_per_sm(threads as c_int, self.shared as usize)? as u64;
        let most = per_sm * multiprocessors.max(1) as u64;
        let blocks = self.grid.iter().map(|&v| v as u64).product::<u64>();
        if blocks > most {
            return Err(CuErr::new(
                CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                format!(
                    "a cooperative launch of `{}` with {blocks} blocks: at most {most} blocks \
                     of {threads} threads ({per_sm} per multiprocessor, {multiprocessors} \
                     multiprocessors) are resident at once",
                    self.func.entry.name
                ),
            ));
        }
        self.cooperative = true;
        Ok(self)
    }

    /// Enqueues the launch on `se` (the arguments are packed now: later changes of this
    /// launch's owner do not reach it).
    pub(crate) fn issue(&self, se: &mut streamexec::Stream) {
        let (g, b) = (self.grid, self.block);
        let (threads, blocks) = (
            ThreadDim::new(b[0], b[1], b[2]),
            BlockDim::new(g[0], g[1], g[2]),
        );
        if self.cooperative {
            if let Some(barrier) = self.func.kernel.module_global(crate::link::GRID_BARRIER) {
                se.then_memset(barrier, 0);
            }
            se.then_launch_cooperative_untyped(threads, blocks, &self.func.kernel, &self.args);
        } else {
            se.then_launch_untyped(threads, blocks, &self.func.kernel, &self.args);
        }
    }

    /// Names the kernel in a `CUDA_ERROR_INVALID_VALUE` the stream reported for the launch.
    pub(crate) fn explain(&self, e: CuErr) -> CuErr {
        if e.code == CUresult::CUDA_ERROR_INVALID_VALUE {
            CuErr::new(
                e.code,
                format!("launching `{}`: {}", self.func.entry.name, e.detail),
            )
        } else {
            e
        }
    }

    /// A `kernelParams` array pointing at this launch's copies of the argument values (owned
    /// by it: valid while it lives); NULL for a kernel without parameters.
    pub(crate) fn kernel_params(&self) -> *mut *mut c_void {
        if self.params.is_empty() {
            return std::ptr::null_mut();
        }
        self.param_ptrs.as_ptr().cast_mut().cast()
    }
}

/// `cuLaunchKernel`.
///
/// # Safety
/// `kernelParams` holds one valid pointer per kernel parameter, or `extra` is a valid
/// `CU_LAUNCH_PARAM_END`-terminated list; the memory they point to is read before return.
#[allow(clippy::too_many_arguments)] // the C signature
pub(crate) unsafe fn cuLaunchKernel(
    f: CUfunction,
    gridDimX: c_uint,
    gridDimY: c_uint,
    gridDimZ: c_uint,
    blockDimX: c_uint,
    blockDimY: c_uint,
    blockDimZ: c_uint,
    sharedMemBytes: c_uint,
    hStream: CUstream,
    kernelParams: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe {
        launch(
            f,
            [gridDimX, gridDimY, gridDimZ],
            [blockDimX, blockDimY, blockDimZ],
            sharedMemBytes,
            hStream,
            kernelParams,
            extra,
            false,
        )
    }
}

/// `cuLaunchCooperativeKernel`: every block resident at once (each on a thread of its own),
/// so blocks may wait for each other; the grid must fit (see [`KernelLaunch::cooperative`]).
///
/// # Safety
/// As [`cuLaunchKernel`].
#[allow(clippy::too_many_arguments)] // the C signature
pub(crate) unsafe fn cuLaunchCooperativeKernel(
    f: CUfunction,
    gridDimX: c_uint,
    gridDimY: c_uint,
    gridDimZ: c_uint,
    blockDimX: c_uint,
    blockDimY: c_uint,
    blockDimZ: c_uint,
    sharedMemBytes: c_uint,
    hStream: CUstream,
    kernelParams: *mut *mut c_void,
) -> CuResult<()> {
    // SAFETY: the caller's contract.
    unsafe {
        launch(
            f,
            [gridDimX, gridDimY, gridDimZ],
            [blockDimX, blockDimY, blockDimZ],
            sharedMemBytes,
            hStream,
            kernelParams,
            std::ptr::null_mut(),
            true,
        )
    }
}

/// A launch of `f` on `hStream`, cooperative or not.
///
/// # Safety
/// As [`cuLaunchKernel`].
#[allow(clippy::too_many_arguments)]
unsafe fn launch(
    f: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    shared: c_uint,
    hStream: CUstream,
    kernelParams: *mut *mut c_void,
    extra: *mut *mut c_void,
    cooperative: bool,
) -> CuResult<()> {
    let (ctx, func) = function(f)?;
    let s = resolve_in(&ctx, hStream)?;
    // SAFETY: the caller's contract.
    let mut launch = unsafe { KernelLaunch::new(func, grid, block, shared, kernelParams, extra)? };
    if cooperative {
        let sms = crate::driver::driver()?.exec.description().compute_units;
        launch = launch.cooperative(sms)?;
    }
    s.enqueue(&ctx, |se| launch.issue(se))
        .map_err(|e| launch.explain(e))
}

/// What a launch attribute of `cuLaunchKernelEx` asks for, once checked.
enum LaunchAttr {
    /// A hint, or a setting the CPU engine meets as it is (priority, access policy, memory
    /// synchronization domain, carveout, programmatic serialization, a cluster of one block).
    Accepted,
    /// `CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT`: the event and its record flags.
    CompletionEvent(CUevent, c_uint),
    /// `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` set: a cooperative launch.
    Cooperative,
}

/// Checks launch attribute `id` with value `v` (the 64 bytes of `CUlaunchAttributeValue`).
fn launch_attr(id: u32, v: &[u8; 64]) -> CuResult<LaunchAttr> {
    let u32_at = |k: usize| u32::from_ne_bytes([v[k], v[k + 1], v[k + 2], v[k + 3]]);
    let not_supported = |what: &str| CuErr::new(CUresult::CUDA_ERROR_NOT_SUPPORTED, what);
    match id {
        // IGNORE, ACCESS_POLICY_WINDOW, SYNCHRONIZATION_POLICY, CLUSTER_SCHEDULING_POLICY_
        // PREFERENCE, PROGRAMMATIC_STREAM_SERIALIZATION (the launch is serialized anyway),
        // PRIORITY, MEM_SYNC_DOMAIN_MAP, MEM_SYNC_DOMAIN, PREFERRED_CLUSTER_DIMENSION (a
        // preference), PREFERRED_SHARED_MEMORY_CARVEOUT.
        0 | 1 | 3 | 5 | 6 | 8 | 9 | 10 | 11 | 14 => Ok(LaunchAttr::Accepted),
        2 if u32_at(0) == 0 => Ok(LaunchAttr::Accepted),
        2 => Ok(LaunchAttr::Cooperative),
        4 => {
            let dim = [u32_at(0), u32_at(4), u32_at(8)];
            if dim.iter().all(|&d| d <= 1) {
                Ok(LaunchAttr::Accepted)
            } else {
                Err(not_supported(&format!(
                    "CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION {dim:?}: thread-block clusters (sm_90)"
                )))
            }
        }
        7 => Err(not_supported(
            "CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT: programmatic dependent launch (sm_90)",
        )),
        12 => {
            let event = usize::from_ne_bytes(v[..8].try_into().unwrap_or_default());
            Ok(LaunchAttr::CompletionEvent(event as CUevent, u32_at(8)))
        }
        13 => Err(invalid(
            "CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE is for graph kernel nodes, not \
             launches",
        )),
        other => Err(invalid(format!("{other} is not a CUlaunchAttributeID"))),
    }
}

/// `cuLaunchKernelEx`: `cuLaunchKernel` with its geometry, shared memory and stream in
/// `config`, and launch attributes: hints are accepted, a launch-completion event is recorded
/// after the kernel (when its last block has run, so after its last block launched, as
/// CUDA promises), `CU_LAUNCH_ATTRIBUTE_COOPERATIVE` makes a cooperative launch, and clusters
/// of more than one block and programmatic events are `CUDA_ERROR_NOT_SUPPORTED`.
///
/// # Safety
/// `config` is valid for a read, its `attrs` for `numAttrs` entries; the parameters as for
/// `cuLaunchKernel`.
pub(crate) unsafe fn cuLaunchKernelEx(
    config: *const CUlaunchConfig,
    f: CUfunction,
    kernelParams: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CuResult<()> {
    crate::entry::non_null(config, "config")?;
    // SAFETY: non-null, valid for a read (the caller's contract); no enum fields.
    let c = unsafe { config.read() };
    let mut events = Vec::new();
    let mut cooperative = false;
    if c.numAttrs > 0 {
        crate::entry::non_null(c.attrs, "config->attrs")?;
    }
    for i in 0..c.numAttrs as usize {
        // SAFETY: `numAttrs` entries (the caller's contract). The id is read as an integer (a
        // value outside the enum is not undefined behaviour), the value as its 64 bytes.
        let (id, value) = unsafe {
            let a = c.attrs.add(i);
            (
                std::ptr::addr_of!((*a).id).cast::<u32>().read(),
                std::ptr::addr_of!((*a).value)
                    .cast::<[u8; 64]>()
                    .read_unaligned(),
            )
        };
        match launch_attr(id, &value)? {
            LaunchAttr::CompletionEvent(e, flags) => {
                crate::event::lookup(e)?;
                events.push((e, flags));
            }
            LaunchAttr::Cooperative => cooperative = true,
            LaunchAttr::Accepted => {}
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        launch(
            f,
            [c.gridDimX, c.gridDimY, c.gridDimZ],
            [c.blockDimX, c.blockDimY, c.blockDimZ],
            c.sharedMemBytes,
            c.hStream,
            kernelParams,
            extra,
            cooperative,
        )?;
    }
    for (e, flags) in events {
        crate::event::cuEventRecordWithFlags(e, c.hStream, flags)?;
    }
    Ok(())
}

/// Blocks of `block_size` threads and `shared` dynamic bytes one multiprocessor holds (2048
/// threads, 32 blocks and 96 KiB of shared memory per multiprocessor, as the attributes say).
fn blocks_per_sm(block_size: c_int, shared: usize) -> CuResult<c_int> {
    if !(1..=1024).contains(&block_size) {
        return Err(invalid(format!(
            "blockSize {block_size} is not in 1..=1024"
        )));
    }
    let by_threads = 2048 / block_size;
    let by_shared = (2 * SHARED_PER_BLOCK as usize)
        .checked_div(shared)
        .map_or(32, |n| n as c_int);
    Ok(by_threads.min(32).min(by_shared))
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`.
///
/// # Safety
/// `numBlocks` is null or valid for a write.
pub(crate) unsafe fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    numBlocks: *mut c_int,
    func: CUfunction,
    blockSize: c_int,
    dynamicSMemSize: usize,
) -> CuResult<()> {
    function(func)?;
    let n = blocks_per_sm(blockSize, dynamicSMemSize)?;
    // SAFETY: the caller's out-pointer.
    unsafe { put(numBlocks, n, "numBlocks") }
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`: the flags change nothing here.
///
/// # Safety
/// `numBlocks` is null or valid for a write.
pub(crate) unsafe fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    numBlocks: *mut c_int,
    func: CUfunction,
    blockSize: c_int,
    dynamicSMemSize: usize,
    flags: c_uint,
) -> CuResult<()> {
    if flags > 1 {
        return Err(invalid(format!(
            "{flags:#x} is not a CUoccupancy_flags value"
        )));
    }
    // SAFETY: same contract.
    unsafe {
        cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize, dynamicSMemSize)
    }
}

/// `cuOccupancyMaxPotentialBlockSize`: the largest block (up to `blockSizeLimit`) with the
/// highest occupancy; the per-size shared-memory callback is honoured.
///
/// # Safety
/// The out pointers are null or valid for writes; the callback is null or callable.
pub(crate) unsafe fn cuOccupancyMaxPotentialBlockSize(
    minGridSize: *mut c_int,
    blockSize: *mut c_int,
    func: CUfunction,
    blockSizeToDynamicSMemSize: cudarc::driver::sys::CUoccupancyB2DSize,
    dynamicSMemSize: usize,
    blockSizeLimit: c_int,
) -> CuResult<()> {
    function(func)?;
    let limit = if blockSizeLimit <= 0 {
        1024
    } else {
        blockSizeLimit.min(1024)
    };
    let mut best = (0, 32);
    for size in (32..=limit).rev().step_by(32) {
        let shared = match blockSizeToDynamicSMemSize {
            // SAFETY: the caller's callback, called with a block size as CUDA does.
            Some(f) => unsafe { f(size) },
            None => dynamicSMemSize,
        };
        if shared > SHARED_PER_BLOCK as usize {
            continue;
        }
        let threads = blocks_per_sm(size, shared)? * size;
        if threads > best.0 {
            best = (threads, size);
        }
    }
    let sms = driver()?.exec.description().compute_units.max(1) as c_int;
    let per_sm = blocks_per_sm(best.1, dynamicSMemSize.min(SHARED_PER_BLOCK as usize))?;
    // SAFETY: the caller's out-pointers.
    unsafe {
        put(minGridSize, per_sm.max(1) * sms, "minGridSize")?;
        put(blockSize, best.1, "blockSize")
    }
}

/// `cuOccupancyMaxPotentialBlockSizeWithFlags`: the flags change nothing here.
///
/// # Safety
/// As `cuOccupancyMaxPotentialBlockSize`.
pub(crate) unsafe fn cuOccupancyMaxPotentialBlockSizeWithFlags(
    minGridSize: *mut c_int,
    blockSize: *mut c_int,
    func: CUfunction,
    blockSizeToDynamicSMemSize: cudarc::driver::sys::CUoccupancyB2DSize,
    dynamicSMemSize: usize,
    blockSizeLimit: c_int,
    flags: c_uint,
) -> CuResult<()> {
    let _ = flags;
    // SAFETY: same contract.
    unsafe {
        cuOccupancyMaxPotentialBlockSize(
            minGridSize,
            blockSize,
            func,
            blockSizeToDynamicSMemSize,
            dynamicSMemSize,
            blockSizeLimit,
        )
    }
}

/// `cuOccupancyAvailableDynamicSMemPerBlock`.
///
/// # Safety
/// `dynamicSmemSize` is null or valid for a write.
pub(crate) unsafe fn cuOccupancyAvailableDynamicSMemPerBlock(
    dynamicSmemSize: *mut usize,
    func: CUfunction,
    numBlocks: c_int,
    blockSize: c_int,
) -> CuResult<()> {
    function(func)?;
    blocks_per_sm(blockSize, 0)?;
    if numBlocks <= 0 {
        return Err(invalid(format!("numBlocks {numBlocks} must be positive")));
    }
    let per_block = (2 * SHARED_PER_BLOCK / numBlocks).min(SHARED_PER_BLOCK);
    // SAFETY: the caller's out-pointer.
    unsafe { put(dynamicSmemSize, per_block as usize, "dynamicSmemSize") }
}
