//! What a device is and can do, as `deviceQuery` or `clinfo` print it.

/// A device's properties. Fields a platform cannot report are `None` or 0, never made up.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceDescription {
    /// Platform that owns the device (`host`, `opencl`, ...).
    pub platform: &'static str,
    /// Device ordinal within the platform.
    pub ordinal: usize,
    /// Marketing or model name.
    pub name: String,
    /// Vendor.
    pub vendor: String,
    /// Platform / runtime version string.
    pub platform_version: String,
    /// Driver version string.
    pub driver_version: String,
    /// Which driver library answers this device's calls, and from which file, so a program can
    /// tell NVIDIA's driver from streamexec's CPU libcuda: on CUDA
    /// `NVIDIA's driver (/usr/lib/x86_64-linux-gnu/libcuda.so.1)` or
    /// `streamexec's CPU libcuda 0.1.0 (/repo/target/libcuda/libcuda.so)`; on the other
    /// platforms what they load (the OpenCL ICD loader, libamdhip64) or that nothing is loaded.
    pub driver: String,
    /// Device memory in bytes.
    pub total_memory: u64,
    /// Compute units (SMs, CUs, CPU cores).
    pub compute_units: u32,
    /// Most threads in one block.
    pub max_threads_per_block: u32,
    /// Largest block extents (x, y, z).
    pub max_block_dims: [u32; 3],
    /// Largest grid extents in blocks (x, y, z).
    pub max_grid_dims: [u32; 3],
    /// Threads per warp / wavefront / sub-group.
    pub warp_size: u32,
    /// Shared (local) memory per block in bytes, static and dynamic together.
    pub shared_memory_per_block: u64,
    /// Clock rate in kHz, where known.
    pub clock_rate_khz: Option<u32>,
    /// CUDA compute capability (major, minor), where the platform has one.
    pub compute_capability: Option<(u32, u32)>,
    /// ISA name (`gfx90a`, `x86_64`, ...), where the platform has one.
    pub isa: Option<String>,
    /// Host and device share one address space (unified memory / fine-grained SVM).
    pub unified_memory: bool,
    /// The device can access page-locked host memory directly.
    pub host_mapped_memory: bool,
    /// Largest single allocation in bytes.
    pub max_allocation: u64,
    /// Most blocks a cooperative launch ([`Stream::then_launch_cooperative`]) may have; 0 where
    /// the platform has no cooperative launches.
    ///
    /// [`Stream::then_launch_cooperative`]: crate::Stream::then_launch_cooperative
    pub max_cooperative_blocks: u32,
}

impl std::fmt::Display for DeviceDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "n/a".to_string());
        writeln!(f, "  Device {}: {}", self.ordinal, self.name)?;
        writeln!(f, "    vendor:                  {}", self.vendor)?;
        writeln!(f, "    platform version:        {}", self.platform_version)?;
        writeln!(f, "    driver version:          {}", self.driver_version)?;
        writeln!(f, "    driver:                  {}", self.driver)?;
        writeln!(
            f,
            "    total memory:            {} MiB",
            self.total_memory >> 20
        )?;
        writeln!(
            f,
            "    max allocation:          {} MiB",
            self.max_allocation >> 20
        )?;
        writeln!(f, "    compute units:           {}", self.compute_units)?;
        writeln!(
            f,
            "    max threads per block:   {}",
            self.max_threads_per_block
        )?;
        let [bx, by, bz] = self.max_block_dims;
        writeln!(f, "    max block dims:          {bx} x {by} x {bz}")?;
        let [gx, gy, gz] = self.max_grid_dims;
        writeln!(f, "    max grid dims:           {gx} x {gy} x {gz}")?;
        writeln!(f, "    warp size:               {}", self.warp_size)?;
        writeln!(
            f,
            "    shared memory per block: {} KiB",
            self.shared_memory_per_block >> 10
        )?;
        let clock = self.clock_rate_khz.map(|k| format!("{} MHz", k / 1000));
        writeln!(f, "    clock:                   {}", opt(clock))?;
        let cc = self.compute_capability.map(|(a, b)| format!("{a}.{b}"));
        writeln!(f, "    compute capability:      {}", opt(cc))?;
        writeln!(f, "    ISA:                     {}", opt(self.isa.clone()))?;
        writeln!(f, "    unified memory:          {}", self.unified_memory)?;
        write!(
            f,
            "    host-mapped memory:      {}",
            self.host_mapped_memory
        )
    }
}
