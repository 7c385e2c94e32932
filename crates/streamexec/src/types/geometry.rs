//! Launch geometry: CUDA's `dim3` and the two roles it plays, threads per block and blocks per
//! grid, and the geometry a backend receives with each launch.

/// Three extents, as CUDA's `dim3` (defined by the PTX engine's crate, which runs grids of
/// them).
pub use streamexec_ptx::Dim3;

macro_rules! dim_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
        pub struct $name(pub Dim3);

        impl $name {
            /// From three extents.
            pub const fn new(x: u32, y: u32, z: u32) -> Self {
                $name(Dim3::new(x, y, z))
            }
            /// Total count, `x * y * z`.
            pub const fn count(&self) -> u64 {
                self.0.count()
            }
        }
        impl From<u32> for $name {
            fn from(x: u32) -> Self {
                $name::new(x, 1, 1)
            }
        }
        impl From<(u32, u32)> for $name {
            fn from((x, y): (u32, u32)) -> Self {
                $name::new(x, y, 1)
            }
        }
        impl From<(u32, u32, u32)> for $name {
            fn from((x, y, z): (u32, u32, u32)) -> Self {
                $name::new(x, y, z)
            }
        }
    };
}

dim_type!(
    /// Threads per block (CUDA `blockDim`, OpenCL local size). Default 1×1×1.
    ThreadDim
);
dim_type!(
    /// Blocks per grid (CUDA `gridDim`, OpenCL global size / local size). Default 1×1×1.
    BlockDim
);

/// The geometry of one launch, as a backend receives it (already checked against the device's
/// limits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    /// Threads per block.
    pub threads: ThreadDim,
    /// Blocks per grid.
    pub blocks: BlockDim,
    /// Sum of every `SharedMemory` argument, in bytes per block.
    pub dynamic_shared_bytes: u64,
    /// Every block resident at once, so blocks may wait for each other (a grid-wide barrier):
    /// CUDA's cooperative launch.
    pub cooperative: bool,
}
