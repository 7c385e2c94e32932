//! Loaded kernels: the untyped [`Kernel`] (launched with a run-time `ArgList`) and
//! [`TypedKernel<Args>`], which can only be launched with a value of exactly `Args`, so a wrong
//! argument count or type is a compile error. `Args` is a tuple of `KernelParam`s (up to 16):
//! `Pod` scalars, `DevicePtr<T>` and `SharedMemory<T>`. At load time the backend compares
//! `KernelArgs::signature` with the kernel's own parameter list where the format carries one.
//!
//! **One arity rule** ([`check_arity`]), on every platform, for typed and untyped loads: the
//! loader spec's arity (`MultiKernelLoaderSpec::new(arity)`) is the kernel's own parameter
//! count, and a `TypedKernel`'s `Args` has that many arguments; otherwise the load is
//! `SignatureMismatch`. `SharedMemory` arguments count, except that where dynamic shared memory
//! is a launch attribute rather than a parameter (PTX) a kernel that names dynamic shared memory
//! takes any number of them beyond its `.param`s.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::executor::StreamExecutor;
use crate::interface::{KernelInterface, ParamCount};
use crate::memory::DeviceSlice;
use crate::types::{KernelArgs, MultiKernelLoaderSpec};

/// The arity rule: `spec`'s arity against the loaded kernel's own parameter count, where the
/// backend reports one.
pub(crate) fn check_arity(
    spec: &MultiKernelLoaderSpec,
    kernel: &dyn KernelInterface,
) -> Result<()> {
    let Some(ParamCount {
        params,
        declared_by,
        takes_dynamic_shared,
    }) = kernel.param_count()
    else {
        return Ok(());
    };
    let arity = spec.arity();
    if arity == params || (takes_dynamic_shared && arity > params) {
        return Ok(());
    }
    let shared = if takes_dynamic_shared {
        ", plus SharedMemory arguments for its dynamic shared memory"
    } else {
        ""
    };
    Err(Error::SignatureMismatch {
        kernel: kernel.name().to_string(),
        detail: format!(
            "the loader spec declares {arity} parameter(s) but {declared_by} takes \
             {params} parameter(s){shared}; give MultiKernelLoaderSpec::new the kernel's \
             parameter count"
        ),
    })
}

/// A loaded kernel whose argument types are checked at run time ([`ArgList`](crate::ArgList)).
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
    /// The bytes of the module-scope variable `name` (a PTX `.global` or `.const`) of this
    /// kernel's module, for copies to and from it (`cuModuleGetGlobal`); `None` when the module
    /// has no such variable or the platform cannot tell (only the host platform's PTX engine
    /// can today). The memory is not an allocation of the executor: a `DevicePtr` made from
    /// this slice is refused at launch (kernels of the module reach the variable by name).
    pub fn module_global(&self, name: &str) -> Option<DeviceSlice<'_, u8>> {
        let (addr, bytes) = self.inner.module_global(name)?;
        let len = usize::try_from(bytes).ok()?;
        // Allocation id 0 is never live, so the slice cannot become a launch argument.
        Some(DeviceSlice::from_raw(addr, len, self.exec.id(), 0))
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
