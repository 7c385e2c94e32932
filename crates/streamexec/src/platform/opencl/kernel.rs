//! OpenCL kernels and their load-time signature check (`clGetKernelArgInfo`).

use std::any::Any;
use std::sync::Arc;

use opencl3::kernel::{
    CL_KERNEL_ARG_ADDRESS_CONSTANT, CL_KERNEL_ARG_ADDRESS_GLOBAL, CL_KERNEL_ARG_ADDRESS_LOCAL,
    Kernel,
};
use opencl3::program::Program;
use parking_lot::Mutex;

use super::status::{PLATFORM, cl_error, error_text};
use crate::error::{Error, Result};
use crate::interface::{KernelInterface, ParamCount};
use crate::types::ParamKind;

/// What `clGetKernelArgInfo` says about one parameter.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ClArg {
    /// `__global` or `__constant` pointer to `pointee`.
    Pointer { pointee: String },
    /// `__local` pointer.
    Local,
    /// A value of OpenCL type `ty`.
    Scalar { ty: String },
}

impl std::fmt::Display for ClArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClArg::Pointer { pointee } => write!(f, "__global {pointee}*"),
            ClArg::Local => write!(f, "__local pointer"),
            ClArg::Scalar { ty } => write!(f, "{ty}"),
        }
    }
}

/// Size in bytes of an OpenCL C scalar or vector type name, if it is one.
fn cl_type_size(ty: &str) -> Option<usize> {
    let ty = ty.trim().trim_start_matches("const ").trim();
    let base_len = ty.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (base, lanes) = ty.split_at(base_len);
    let lanes: usize = if lanes.is_empty() {
        1
    } else {
        lanes.parse().ok()?
    };
    let size = match base {
        "char" | "uchar" | "unsigned char" | "bool" => 1,
        "short" | "ushort" | "unsigned short" | "half" => 2,
        "int" | "uint" | "unsigned int" | "float" => 4,
        "long" | "ulong" | "unsigned long" | "double" | "size_t" | "ptrdiff_t" | "intptr_t"
        | "uintptr_t" => 8,
        _ => return None,
    };
    Some(size * if lanes == 3 { 4 } else { lanes })
}

/// The OpenCL names a Rust primitive may match; `None` for other types (checked by size).
fn cl_names_for(rust: &str) -> Option<&'static [&'static str]> {
    Some(match rust {
        "f32" => &["float"],
        "f64" => &["double"],
        "i8" => &["char"],
        "u8" => &["uchar", "unsigned char", "bool"],
        "i16" => &["short"],
        "u16" => &["ushort", "unsigned short", "half"],
        "i32" => &["int"],
        "u32" => &["uint", "unsigned int"],
        "i64" => &["long", "ptrdiff_t", "intptr_t"],
        "u64" => &["ulong", "unsigned long", "size_t", "uintptr_t"],
        _ => return None,
    })
}

/// Does a Rust value of `rust` (`size` bytes) fit OpenCL type `cl`? Built-in OpenCL types are
/// checked by name (primitives) or size (vectors); other names (typedefs, structs) cannot be
/// resolved from the argument info and are accepted.
fn scalar_matches(rust: &str, size: usize, cl: &str) -> bool {
    let cl = cl.trim().trim_start_matches("const ").trim();
    let Some(cl_size) = cl_type_size(cl) else {
        return true;
    };
    match cl_names_for(rust) {
        Some(names) => names.contains(&cl),
        None => cl_size == size,
    }
}

/// A loaded OpenCL kernel. `clSetKernelArg` is not thread-safe per kernel, so launches lock it.
pub(crate) struct OpenClKernel {
    name: String,
    pub(crate) kernel: Mutex<Kernel>,
    args: Vec<ClArg>,
    _program: Arc<Program>,
}

// SAFETY: the kernel object is only used under its Mutex; programs are thread-safe handles.
unsafe impl Send for OpenClKernel {}
// SAFETY: as above.
unsafe impl Sync for OpenClKernel {}

impl OpenClKernel {
    pub(crate) fn new(program: Arc<Program>, name: &str) -> Result<Self> {
        let load_err = |detail: String| Error::KernelLoad {
            platform: PLATFORM,
            kernel: name.to_string(),
            detail,
        };
        if name.contains('\0') || name.is_empty() {
            return Err(load_err(
                "the kernel name is empty or contains a NUL byte".into(),
            ));
        }
        let kernel = Kernel::create(&program, name).map_err(|e| {
            load_err(format!(
                "no kernel named `{name}` in the program ({}); the program has: {}",
                error_text(e.0),
                program.kernel_names()
            ))
        })?;
        let count = kernel
            .num_args()
            .map_err(|e| cl_error("clGetKernelInfo(NUM_ARGS)", e.0))? as usize;
        // Argument info exists when the program was built from source with -cl-kernel-arg-info
        // (which the loader passes); for binaries it is up to the driver.
        let args = (0..count as u32)
            .map(|i| {
                let q = kernel.get_arg_address_qualifier(i).ok()?;
                let ty = kernel.get_arg_type_name(i).ok()?;
                let ty = ty.trim_end_matches('\0').trim().to_string();
                Some(match q {
                    CL_KERNEL_ARG_ADDRESS_GLOBAL | CL_KERNEL_ARG_ADDRESS_CONSTANT => {
                        ClArg::Pointer {
                            pointee: ty.trim_end_matches('*').trim().to_string(),
                        }
                    }
                    CL_KERNEL_ARG_ADDRESS_LOCAL => ClArg::Local,
                    _ => ClArg::Scalar { ty },
                })
            })
            .collect::<Option<Vec<_>>>()
            // Without it nothing says which parameters are buffers: a scalar passed where the
            // kernel takes one would reach clSetKernelArg as a garbage cl_mem handle, which the
            // driver dereferences. Refuse, rather than trust the launch.
            .ok_or_else(|| {
                load_err(
                    "the OpenCL program carries no kernel argument info, so the parameters' \
                     kinds cannot be checked (a scalar passed for a buffer parameter would be \
                     handed to the driver as a memory object); load the OpenCL C source, or \
                     build the binary from source with -cl-kernel-arg-info"
                        .into(),
                )
            })?;
        Ok(OpenClKernel {
            name: name.into(),
            kernel: Mutex::new(kernel),
            args,
            _program: program,
        })
    }
}

impl KernelInterface for OpenClKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn param_count(&self) -> Option<ParamCount> {
        Some(ParamCount {
            params: self.args.len(),
            declared_by: "the OpenCL kernel".into(),
            takes_dynamic_shared: false,
        })
    }

    fn verify_signature(&self, expected: &[ParamKind]) -> Result<()> {
        let mismatch = |detail: String| Error::SignatureMismatch {
            kernel: self.name.clone(),
            detail,
        };
        let args = &self.args;
        if args.len() != expected.len() {
            return Err(mismatch(format!(
                "the OpenCL kernel takes {} parameter(s), the launch passes {}",
                args.len(),
                expected.len()
            )));
        }
        for (i, (want, have)) in expected.iter().zip(args).enumerate() {
            let ok = match (want, have) {
                (
                    ParamKind::Pointer {
                        elem_size,
                        type_name,
                    },
                    ClArg::Pointer { pointee },
                ) => scalar_matches(type_name, *elem_size, pointee),
                (ParamKind::SharedMemory { .. }, ClArg::Local) => true,
                (
                    ParamKind::Scalar {
                        size, type_name, ..
                    },
                    ClArg::Scalar { ty },
                ) => scalar_matches(type_name, *size, ty),
                _ => false,
            };
            if !ok {
                return Err(mismatch(format!(
                    "argument {i}: the OpenCL kernel takes `{have}`, the launch passes {want}"
                )));
            }
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencl_type_sizes_and_matches() {
        assert_eq!(cl_type_size("float4"), Some(16));
        assert_eq!(cl_type_size("uint"), Some(4));
        assert_eq!(cl_type_size("double3"), Some(32));
        assert_eq!(cl_type_size("my_struct"), None);
        assert!(scalar_matches("f32", 4, "float"));
        assert!(!scalar_matches("f32", 4, "uint"));
        assert!(scalar_matches("u32", 4, "unsigned int"));
        assert!(scalar_matches("[f32; 4]", 16, "float4"));
        assert!(!scalar_matches("[f32; 3]", 12, "float4"));
        assert!(scalar_matches("my::Pod", 24, "my_struct"));
        assert!(
            scalar_matches("f32", 4, "real"),
            "typedefs cannot be resolved: accepted"
        );
    }
}
