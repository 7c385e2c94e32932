//! Kernels: launch geometry, kernel parameters, typed and untyped kernel handles.
//!
//! A [`TypedKernel<Args>`] can only be launched with a value of exactly `Args`, so a wrong
//! argument count or type is a compile error. `Args` is a tuple of [`KernelParam`]s (up to 16):
//! `Pod` scalars, [`DevicePtr<T>`](crate::DevicePtr) and [`SharedMemory<T>`] (a dynamic
//! shared-memory size). At load time the backend compares [`KernelArgs::signature`] with the
//! kernel's own parameter list where the format carries one.

use std::marker::PhantomData;
use std::sync::Arc;

use bytemuck::Pod;

use crate::executor::StreamExecutor;
use crate::memory::DevicePtr;
use crate::platform::interface::{DeviceAddress, KernelInterface};

/// Three extents, as CUDA's `dim3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Fastest-varying extent.
    pub x: u32,
    /// Middle extent.
    pub y: u32,
    /// Slowest-varying extent.
    pub z: u32,
}

impl Dim3 {
    /// A `Dim3` from its three extents.
    pub const fn new(x: u32, y: u32, z: u32) -> Self {
        Dim3 { x, y, z }
    }

    /// `x * y * z`.
    pub const fn count(&self) -> u64 {
        self.x as u64 * self.y as u64 * self.z as u64
    }

    /// Row-major linear index of `idx` inside `self` (x fastest).
    pub const fn linear(&self, idx: Dim3) -> u64 {
        (idx.z as u64 * self.y as u64 + idx.y as u64) * self.x as u64 + idx.x as u64
    }

    /// Inverse of [`Dim3::linear`].
    pub const fn unlinear(&self, i: u64) -> Dim3 {
        let x = (i % self.x as u64) as u32;
        let rest = i / self.x as u64;
        Dim3 {
            x,
            y: (rest % self.y as u64) as u32,
            z: (rest / self.y as u64) as u32,
        }
    }
}

impl Default for Dim3 {
    fn default() -> Self {
        Dim3::new(1, 1, 1)
    }
}

impl std::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({}, {}, {})", self.x, self.y, self.z)
    }
}

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

/// What one kernel parameter is, as far as the loader can check it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A value passed by copy.
    Scalar {
        /// Size in bytes.
        size: usize,
        /// Alignment in bytes.
        align: usize,
        /// Rust type name, for messages.
        type_name: &'static str,
    },
    /// A pointer to device (global) memory.
    Pointer {
        /// Size of the pointee in bytes.
        elem_size: usize,
        /// Rust pointee type name, for messages.
        type_name: &'static str,
    },
    /// A dynamic shared-memory region (CUDA `extern __shared__`, OpenCL `__local`).
    SharedMemory {
        /// Size of one element in bytes.
        elem_size: usize,
    },
}

impl std::fmt::Display for ParamKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamKind::Scalar {
                size, type_name, ..
            } => write!(f, "{type_name} ({size} bytes)"),
            ParamKind::Pointer { type_name, .. } => write!(f, "DevicePtr<{type_name}>"),
            ParamKind::SharedMemory { elem_size } => {
                write!(f, "SharedMemory (elements of {elem_size} bytes)")
            }
        }
    }
}

/// One kernel argument, packed for a backend.
#[derive(Clone, Debug, PartialEq)]
pub enum PackedArg {
    /// Bytes of a scalar, in the host's byte order.
    Scalar {
        /// The value's bytes.
        bytes: Vec<u8>,
        /// What it is.
        kind: ParamKind,
    },
    /// A device pointer.
    Pointer {
        /// Device address of the first element.
        addr: DeviceAddress,
        /// Bytes reachable from `addr`.
        bytes: u64,
        /// Id of the executor that owns the memory.
        owner: u64,
        /// What it points to.
        kind: ParamKind,
    },
    /// A dynamic shared-memory region.
    SharedMemory {
        /// Bytes requested.
        bytes: u64,
        /// Offset inside the block's dynamic region; filled in by the backend.
        offset: u64,
    },
}

/// A type that can be one kernel parameter.
///
/// Implemented for every [`Pod`] type (scalars, arrays, `#[repr(C)]` structs), for
/// [`DevicePtr<T>`] and for [`SharedMemory<T>`].
pub trait KernelParam: Copy + Send + Sync + 'static {
    /// What the loader checks this parameter against.
    fn kind() -> ParamKind;
    /// Pack for a backend.
    fn pack(&self) -> PackedArg;
    /// Unpack what [`KernelParam::pack`] produced; `None` if `arg` is of another kind.
    fn unpack(arg: &PackedArg) -> Option<Self>;
}

impl<T: Pod + Send + Sync> KernelParam for T {
    fn kind() -> ParamKind {
        ParamKind::Scalar {
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }
    fn pack(&self) -> PackedArg {
        PackedArg::Scalar {
            bytes: bytemuck::bytes_of(self).to_vec(),
            kind: Self::kind(),
        }
    }
    fn unpack(arg: &PackedArg) -> Option<Self> {
        match arg {
            PackedArg::Scalar { bytes, .. } if bytes.len() == std::mem::size_of::<T>() => {
                Some(bytemuck::pod_read_unaligned(bytes))
            }
            _ => None,
        }
    }
}

impl<T: Pod + Send + Sync> KernelParam for DevicePtr<T> {
    fn kind() -> ParamKind {
        ParamKind::Pointer {
            elem_size: std::mem::size_of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }
    fn pack(&self) -> PackedArg {
        PackedArg::Pointer {
            addr: self.address(),
            bytes: self.len() as u64 * std::mem::size_of::<T>() as u64,
            owner: self.owner(),
            kind: Self::kind(),
        }
    }
    fn unpack(arg: &PackedArg) -> Option<Self> {
        match arg {
            PackedArg::Pointer {
                addr, bytes, owner, ..
            } => {
                let size = std::mem::size_of::<T>().max(1) as u64;
                Some(DevicePtr::from_parts(
                    *addr,
                    (bytes / size) as usize,
                    *owner,
                ))
            }
            _ => None,
        }
    }
}

/// A dynamic shared-memory argument: `len` elements of `T` per block.
///
/// CUDA passes the total as the launch's dynamic shared bytes, OpenCL as a `__local` argument;
/// host kernels reach it with `ThreadCtx::shared_param`.
pub struct SharedMemory<T> {
    len: usize,
    offset: u64,
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for SharedMemory<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedMemory<T> {}
impl<T> std::fmt::Debug for SharedMemory<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedMemory<{}>[{}]",
            std::any::type_name::<T>(),
            self.len
        )
    }
}

impl<T: Pod> SharedMemory<T> {
    /// `len` elements per block.
    pub fn new(len: usize) -> Self {
        SharedMemory {
            len,
            offset: 0,
            _elem: PhantomData,
        }
    }
    /// Elements per block.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when no element is requested.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes per block.
    pub fn size_bytes(&self) -> u64 {
        self.len as u64 * std::mem::size_of::<T>() as u64
    }
    /// Byte offset inside the block's dynamic shared region (set by the backend at launch).
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl<T: Pod + Send + Sync> KernelParam for SharedMemory<T> {
    fn kind() -> ParamKind {
        ParamKind::SharedMemory {
            elem_size: std::mem::size_of::<T>(),
        }
    }
    fn pack(&self) -> PackedArg {
        PackedArg::SharedMemory {
            bytes: self.size_bytes(),
            offset: self.offset,
        }
    }
    fn unpack(arg: &PackedArg) -> Option<Self> {
        match arg {
            PackedArg::SharedMemory { bytes, offset } => Some(SharedMemory {
                len: (bytes / std::mem::size_of::<T>().max(1) as u64) as usize,
                offset: *offset,
                _elem: PhantomData,
            }),
            _ => None,
        }
    }
}

/// A tuple of kernel parameters: the `Args` of a [`TypedKernel`].
pub trait KernelArgs: Copy + Send + Sync + 'static {
    /// Number of parameters.
    const ARITY: usize;
    /// One [`ParamKind`] per parameter, in order.
    fn signature() -> Vec<ParamKind>;
    /// Pack every parameter, in order.
    fn pack(&self) -> Vec<PackedArg>;
    /// Unpack; `None` when the count or a kind does not match.
    fn unpack(args: &[PackedArg]) -> Option<Self>;
}

macro_rules! tuple_args {
    ($n:expr; $($t:ident $i:tt),*) => {
        impl<$($t: KernelParam),*> KernelArgs for ($($t,)*) {
            const ARITY: usize = $n;
            fn signature() -> Vec<ParamKind> {
                vec![$($t::kind()),*]
            }
            fn pack(&self) -> Vec<PackedArg> {
                vec![$(self.$i.pack()),*]
            }
            #[allow(unused_variables)]
            fn unpack(args: &[PackedArg]) -> Option<Self> {
                if args.len() != $n {
                    return None;
                }
                Some(($($t::unpack(&args[$i])?,)*))
            }
        }
    };
}

tuple_args!(0;);
tuple_args!(1; A 0);
tuple_args!(2; A 0, B 1);
tuple_args!(3; A 0, B 1, C 2);
tuple_args!(4; A 0, B 1, C 2, D 3);
tuple_args!(5; A 0, B 1, C 2, D 3, E 4);
tuple_args!(6; A 0, B 1, C 2, D 3, E 4, F 5);
tuple_args!(7; A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_args!(8; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_args!(9; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_args!(10; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_args!(11; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_args!(12; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);
tuple_args!(13; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12);
tuple_args!(14; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13);
tuple_args!(15; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14);
tuple_args!(16; A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15);

/// Argument list for a kernel whose signature is known only at run time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArgList {
    pub(crate) args: Vec<PackedArg>,
}

impl ArgList {
    /// An empty list.
    pub fn new() -> Self {
        ArgList::default()
    }
    /// Appends any kernel parameter (a `Pod` scalar, a `DevicePtr`, a `SharedMemory`).
    pub fn arg<P: KernelParam>(mut self, p: P) -> Self {
        self.args.push(p.pack());
        self
    }
    /// Appends an already-packed argument.
    pub fn packed(mut self, p: PackedArg) -> Self {
        self.args.push(p);
        self
    }
    /// The packed arguments.
    pub fn as_slice(&self) -> &[PackedArg] {
        &self.args
    }
    /// The kinds of the arguments, for signature checks.
    pub fn kinds(&self) -> Vec<ParamKind> {
        self.args
            .iter()
            .map(|a| match a {
                PackedArg::Scalar { kind, .. } | PackedArg::Pointer { kind, .. } => *kind,
                PackedArg::SharedMemory { .. } => ParamKind::SharedMemory { elem_size: 1 },
            })
            .collect()
    }
}

/// A loaded kernel whose argument types are checked at run time ([`ArgList`]).
#[derive(Clone)]
pub struct Kernel {
    pub(crate) exec: StreamExecutor,
    pub(crate) inner: Arc<dyn KernelInterface>,
    /// Its module defines `__llvm_rpc_client`: every launch is an RPC launch.
    pub(crate) rpc: bool,
}

impl Kernel {
    /// The kernel's name in its module.
    pub fn name(&self) -> &str {
        self.inner.name()
    }
    /// The executor it was loaded on.
    pub fn executor(&self) -> &StreamExecutor {
        &self.exec
    }
    /// The backend's handle.
    pub fn interface(&self) -> &Arc<dyn KernelInterface> {
        &self.inner
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Kernel({} on {})",
            self.name(),
            self.exec.platform_name()
        )
    }
}

/// A loaded kernel that can only be launched with arguments of type `Args`.
pub struct TypedKernel<Args: KernelArgs> {
    pub(crate) kernel: Kernel,
    _args: PhantomData<fn(Args)>,
}

impl<Args: KernelArgs> Clone for TypedKernel<Args> {
    fn clone(&self) -> Self {
        TypedKernel {
            kernel: self.kernel.clone(),
            _args: PhantomData,
        }
    }
}

impl<Args: KernelArgs> std::fmt::Debug for TypedKernel<Args> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TypedKernel<{}>({})",
            std::any::type_name::<Args>(),
            self.kernel.name()
        )
    }
}

impl<Args: KernelArgs> TypedKernel<Args> {
    pub(crate) fn new(kernel: Kernel) -> Self {
        TypedKernel {
            kernel,
            _args: PhantomData,
        }
    }
    /// The kernel's name in its module.
    pub fn name(&self) -> &str {
        self.kernel.name()
    }
    /// The untyped handle.
    pub fn untyped(&self) -> &Kernel {
        &self.kernel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::interface::DeviceAddress;

    #[test]
    fn dim3_linear_round_trips() {
        let d = Dim3::new(7, 5, 3);
        for i in 0..d.count() {
            assert_eq!(d.linear(d.unlinear(i)), i);
        }
        assert_eq!(d.unlinear(7 * 5 + 7 + 2), Dim3::new(2, 1, 1));
    }

    #[test]
    fn args_pack_and_unpack() {
        type A = (f32, DevicePtr<f32>, u64, SharedMemory<u32>, [u8; 3]);
        let p = DevicePtr::<f32>::from_parts(DeviceAddress(0x1000), 10, 4);
        let args: A = (1.5, p, u64::MAX, SharedMemory::new(64), [1, 2, 3]);
        let packed = args.pack();
        assert_eq!(packed.len(), A::ARITY);
        assert_eq!(A::signature().len(), 5);
        let back = A::unpack(&packed).unwrap();
        assert_eq!(back.0, 1.5);
        assert_eq!(
            (back.1.address(), back.1.len(), back.1.owner()),
            (DeviceAddress(0x1000), 10, 4)
        );
        assert_eq!(back.2, u64::MAX);
        assert_eq!(back.3.len(), 64);
        assert_eq!(back.4, [1, 2, 3]);
        assert!(<(u32, u32)>::unpack(&packed).is_none(), "arity mismatch");
        assert!(
            <(DevicePtr<f32>,)>::unpack(&packed[..1]).is_none(),
            "kind mismatch"
        );
        assert!(<(u64,)>::unpack(&packed[..1]).is_none(), "size mismatch");
    }
}
