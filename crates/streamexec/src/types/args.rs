//! Kernel parameters: what a kernel takes ([`ParamKind`]), how an argument travels to a backend
//! ([`PackedArg`]), and the types that can be arguments ([`KernelParam`], tuples of them as
//! [`KernelArgs`], [`DevicePtr`], [`SharedMemory`], run-time [`ArgList`]s).
//!
//! Packing is sealed: only this crate turns a value into a [`PackedArg`], so a pointer argument
//! always carries an address, length, owner and allocation that a `DeviceMemory` handed out.
//! Whether that allocation is still alive and belongs to the launching executor is checked at
//! launch.

use std::marker::PhantomData;

use bytemuck::Pod;

use super::address::DeviceAddress;

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

/// One kernel argument, packed for a backend. Made only by this crate (from a
/// [`KernelParam`]); backends read it through [`view`](Self::view).
#[derive(Clone, Debug, PartialEq)]
pub struct PackedArg(Packed);

#[derive(Clone, Debug, PartialEq)]
enum Packed {
    Scalar {
        bytes: Vec<u8>,
        kind: ParamKind,
    },
    Pointer {
        addr: DeviceAddress,
        bytes: u64,
        owner: u64,
        alloc: u64,
        kind: ParamKind,
    },
    SharedMemory {
        bytes: u64,
        offset: u64,
    },
}

/// A backend's read-only view of a [`PackedArg`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgView<'a> {
    /// The bytes of a scalar, in the host's byte order.
    Scalar(&'a [u8]),
    /// A device pointer: its address and the bytes reachable from it.
    Pointer {
        /// Device address of the first element.
        addr: DeviceAddress,
        /// Bytes reachable from `addr`.
        bytes: u64,
    },
    /// A dynamic shared-memory region of `bytes` bytes per block.
    SharedMemory {
        /// Bytes requested.
        bytes: u64,
        /// Offset inside the block's dynamic region (0 until a backend places it).
        offset: u64,
    },
}

impl PackedArg {
    /// What the argument holds.
    pub fn view(&self) -> ArgView<'_> {
        match &self.0 {
            Packed::Scalar { bytes, .. } => ArgView::Scalar(bytes),
            Packed::Pointer { addr, bytes, .. } => ArgView::Pointer {
                addr: *addr,
                bytes: *bytes,
            },
            Packed::SharedMemory { bytes, offset } => ArgView::SharedMemory {
                bytes: *bytes,
                offset: *offset,
            },
        }
    }

    /// The parameter kind it was packed as (`SharedMemory` reports element size 1: the
    /// element type is not carried).
    pub fn kind(&self) -> ParamKind {
        match &self.0 {
            Packed::Scalar { kind, .. } | Packed::Pointer { kind, .. } => *kind,
            Packed::SharedMemory { .. } => ParamKind::SharedMemory { elem_size: 1 },
        }
    }

    /// Where a pointer argument's memory comes from: the id of the executor that owns it and
    /// the id of the allocation inside it.
    pub(crate) fn origin(&self) -> Option<(u64, u64)> {
        match &self.0 {
            Packed::Pointer { owner, alloc, .. } => Some((*owner, *alloc)),
            _ => None,
        }
    }

    /// A pointer argument a backend builds for its own kernels (canned operations) from a
    /// range the caller validated.
    #[cfg(any(feature = "cuda", feature = "hip", feature = "opencl"))]
    pub(crate) fn backend_pointer(
        addr: DeviceAddress,
        bytes: u64,
        elem_size: usize,
        type_name: &'static str,
    ) -> PackedArg {
        PackedArg(Packed::Pointer {
            addr,
            bytes,
            owner: 0,
            alloc: 0,
            kind: ParamKind::Pointer {
                elem_size,
                type_name,
            },
        })
    }

    /// A shared-memory argument placed at `offset` in the block's dynamic region (what a
    /// backend hands to a host kernel); other arguments are returned unchanged.
    pub(crate) fn placed_at(&self, offset: u64) -> PackedArg {
        match &self.0 {
            Packed::SharedMemory { bytes, .. } => PackedArg(Packed::SharedMemory {
                bytes: *bytes,
                offset,
            }),
            _ => self.clone(),
        }
    }
}

pub(crate) mod sealed {
    use super::PackedArg;

    /// Only this crate can make one. Code outside cannot name the sealed traits, but it can
    /// still call their methods through a `P: KernelParam` bound (supertrait methods are
    /// reachable through bounds); `unpack` takes a token so that it cannot, because unpacking
    /// could retype a pointer argument (a `DevicePtr<u8>` one byte in as a `DevicePtr<f32>`).
    /// `pack` needs none: it yields what `ArgList::arg` does.
    #[derive(Clone, Copy)]
    pub struct Token(());

    impl Token {
        pub(crate) const fn new() -> Token {
            Token(())
        }
    }

    /// Packing and unpacking, which only this crate does.
    pub trait Packable: Sized {
        /// Pack for a backend.
        fn pack(&self) -> PackedArg;
        /// Unpack what [`pack`](Packable::pack) produced; `None` if `arg` is of another kind.
        fn unpack(arg: &PackedArg, token: Token) -> Option<Self>;
    }

    /// Packing a whole argument tuple.
    pub trait PackableArgs: Sized {
        /// Pack every parameter, in order.
        fn pack(&self) -> Vec<PackedArg>;
        /// Unpack; `None` when the count or a kind does not match.
        fn unpack(args: &[PackedArg], token: Token) -> Option<Self>;
    }
}
pub(crate) use sealed::{Packable, PackableArgs, Token};

/// A type that can be one kernel parameter: every [`Pod`] type (scalars, arrays, `#[repr(C)]`
/// structs), [`DevicePtr<T>`] and [`SharedMemory<T>`]. Sealed: the crate packs arguments itself.
pub trait KernelParam: Packable + Copy + Send + Sync + 'static {
    /// What the loader checks this parameter against.
    fn kind() -> ParamKind;
}

impl<T: Pod + Send + Sync> Packable for T {
    fn pack(&self) -> PackedArg {
        PackedArg(Packed::Scalar {
            bytes: bytemuck::bytes_of(self).to_vec(),
            kind: <T as KernelParam>::kind(),
        })
    }
    fn unpack(arg: &PackedArg, _: Token) -> Option<Self> {
        match &arg.0 {
            Packed::Scalar { bytes, .. } if bytes.len() == std::mem::size_of::<T>() => {
                Some(bytemuck::pod_read_unaligned(bytes))
            }
            _ => None,
        }
    }
}

impl<T: Pod + Send + Sync> KernelParam for T {
    fn kind() -> ParamKind {
        ParamKind::Scalar {
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
            type_name: std::any::type_name::<T>(),
        }
    }
}

/// A device pointer as a kernel receives it: address, element count, owning executor.
///
/// `Copy` and without a lifetime, as a pointer in a CUDA kernel's argument list is; it cannot be
/// made from bytes or numbers, only from device memory. At launch every pointer argument must
/// lie inside a live allocation of the launching executor, or the launch fails.
pub struct DevicePtr<T> {
    addr: DeviceAddress,
    len: usize,
    owner: u64,
    /// The allocation it points into (process-unique), so a pointer that outlived its memory is
    /// refused even when a new allocation took the same addresses.
    alloc: u64,
    _elem: PhantomData<fn() -> T>,
}

impl<T> Clone for DevicePtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DevicePtr<T> {}

impl<T> std::fmt::Debug for DevicePtr<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DevicePtr<{}>[{}] at {}",
            std::any::type_name::<T>(),
            self.len,
            self.addr
        )
    }
}

impl<T> DevicePtr<T> {
    pub(crate) fn from_parts(addr: DeviceAddress, len: usize, owner: u64, alloc: u64) -> Self {
        DevicePtr {
            addr,
            len,
            owner,
            alloc,
            _elem: PhantomData,
        }
    }
    /// Device address of element 0.
    pub fn address(&self) -> DeviceAddress {
        self.addr
    }
    /// Number of elements reachable.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when no element is reachable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Id of the executor that owns the memory.
    pub fn owner(&self) -> u64 {
        self.owner
    }
    /// Id of the allocation it points into.
    #[cfg(test)]
    pub(crate) fn allocation(&self) -> u64 {
        self.alloc
    }
    /// Pointer to element `n`, with `len - n` elements; `None` past the end.
    pub fn offset(&self, n: usize) -> Option<DevicePtr<T>> {
        (n <= self.len).then(|| {
            DevicePtr::from_parts(
                self.addr.offset((n * std::mem::size_of::<T>()) as u64),
                self.len - n,
                self.owner,
                self.alloc,
            )
        })
    }
}

impl<T: Pod + Send + Sync> Packable for DevicePtr<T> {
    fn pack(&self) -> PackedArg {
        PackedArg(Packed::Pointer {
            addr: self.addr,
            bytes: self.len as u64 * std::mem::size_of::<T>() as u64,
            owner: self.owner,
            alloc: self.alloc,
            kind: <Self as KernelParam>::kind(),
        })
    }
    fn unpack(arg: &PackedArg, _: Token) -> Option<Self> {
        match &arg.0 {
            Packed::Pointer {
                addr,
                bytes,
                owner,
                alloc,
                ..
            } => {
                let size = std::mem::size_of::<T>().max(1) as u64;
                Some(DevicePtr::from_parts(
                    *addr,
                    (bytes / size) as usize,
                    *owner,
                    *alloc,
                ))
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

impl<T: Pod + Send + Sync> Packable for SharedMemory<T> {
    fn pack(&self) -> PackedArg {
        PackedArg(Packed::SharedMemory {
            bytes: self.size_bytes(),
            offset: self.offset,
        })
    }
    fn unpack(arg: &PackedArg, _: Token) -> Option<Self> {
        match &arg.0 {
            Packed::SharedMemory { bytes, offset } => Some(SharedMemory {
                len: (bytes / std::mem::size_of::<T>().max(1) as u64) as usize,
                offset: *offset,
                _elem: PhantomData,
            }),
            _ => None,
        }
    }
}

impl<T: Pod + Send + Sync> KernelParam for SharedMemory<T> {
    fn kind() -> ParamKind {
        ParamKind::SharedMemory {
            elem_size: std::mem::size_of::<T>(),
        }
    }
}

/// A tuple of kernel parameters (up to 16): the `Args` of a `TypedKernel`.
pub trait KernelArgs: PackableArgs + Copy + Send + Sync + 'static {
    /// Number of parameters.
    const ARITY: usize;
    /// One [`ParamKind`] per parameter, in order.
    fn signature() -> Vec<ParamKind>;
}

macro_rules! tuple_args {
    ($n:expr; $($t:ident $i:tt),*) => {
        impl<$($t: KernelParam),*> PackableArgs for ($($t,)*) {
            fn pack(&self) -> Vec<PackedArg> {
                vec![$(self.$i.pack()),*]
            }
            #[allow(unused_variables)]
            fn unpack(args: &[PackedArg], token: Token) -> Option<Self> {
                if args.len() != $n {
                    return None;
                }
                Some(($(<$t as Packable>::unpack(&args[$i], token)?,)*))
            }
        }
        impl<$($t: KernelParam),*> KernelArgs for ($($t,)*) {
            const ARITY: usize = $n;
            fn signature() -> Vec<ParamKind> {
                vec![$(<$t as KernelParam>::kind()),*]
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
    args: Vec<PackedArg>,
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
    /// Appends a by-value parameter given as raw bytes (host byte order) with its alignment:
    /// what a runtime that forwards C launch buffers (`cuLaunchKernel`'s `kernelParams`) has.
    /// The loader checks it by size and alignment only, like a struct; bytes are data, so this
    /// cannot make a pointer the launch would trust.
    pub fn arg_bytes(mut self, bytes: &[u8], align: usize) -> Self {
        self.args.push(PackedArg(Packed::Scalar {
            bytes: bytes.to_vec(),
            kind: ParamKind::Scalar {
                size: bytes.len(),
                align: align.max(1),
                type_name: "raw bytes",
            },
        }));
        self
    }
    /// The packed arguments.
    pub fn as_slice(&self) -> &[PackedArg] {
        &self.args
    }
    /// The kinds of the arguments, for signature checks.
    pub fn kinds(&self) -> Vec<ParamKind> {
        self.args.iter().map(PackedArg::kind).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_pack_and_unpack() {
        type A = (f32, DevicePtr<f32>, u64, SharedMemory<u32>, [u8; 3]);
        let p = DevicePtr::<f32>::from_parts(DeviceAddress::new(0x1000), 10, 4, 9);
        let args: A = (1.5, p, u64::MAX, SharedMemory::new(64), [1, 2, 3]);
        let packed = args.pack();
        assert_eq!(packed.len(), A::ARITY);
        assert_eq!(A::signature().len(), 5);
        let back = A::unpack(&packed, Token::new()).unwrap();
        assert_eq!(back.0, 1.5);
        assert_eq!(
            (back.1.address(), back.1.len(), back.1.owner()),
            (DeviceAddress::new(0x1000), 10, 4)
        );
        assert_eq!(back.2, u64::MAX);
        assert_eq!(back.3.len(), 64);
        assert_eq!(back.4, [1, 2, 3]);
        assert!(
            <(u32, u32)>::unpack(&packed, Token::new()).is_none(),
            "arity mismatch"
        );
        assert!(
            <(DevicePtr<f32>,)>::unpack(&packed[..1], Token::new()).is_none(),
            "kind mismatch"
        );
        assert!(
            <(u64,)>::unpack(&packed[..1], Token::new()).is_none(),
            "size mismatch"
        );
        assert_eq!(
            packed[1].view(),
            ArgView::Pointer {
                addr: DeviceAddress::new(0x1000),
                bytes: 40
            }
        );
        assert_eq!(packed[1].origin(), Some((4, 9)));
        assert_eq!(
            packed[3].placed_at(32).view(),
            ArgView::SharedMemory {
                bytes: 256,
                offset: 32
            }
        );
    }
}
