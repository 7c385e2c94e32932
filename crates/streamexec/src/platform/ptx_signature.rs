//! What the backends that load PTX (the host platform's PTX engine, the CUDA/HIP backend) share
//! about it: the check of a `TypedKernel`'s parameter kinds against a PTX entry's parameter list,
//! and the mapping of the front end's [`PtxError`] to [`Error::KernelLoad`].
//!
//! The PTX front end (`crate::ptx`) is a leaf that knows nothing of the runtime's argument
//! kinds or errors; this is where the two meet.

use crate::error::{Error, Result};
use crate::interface::ParamCount;
use crate::ptx::{PtxEntry, PtxError, PtxScalar};
use crate::types::ParamKind;

/// A PTX entry's parameter count for the executor's arity check: its `.param`s, plus any
/// number of `SharedMemory` arguments when it names dynamic shared memory (a launch attribute
/// in PTX, not a parameter).
pub(crate) fn param_count(entry: &PtxEntry) -> ParamCount {
    ParamCount {
        params: entry.params.len(),
        declared_by: format!("the PTX entry (line {})", entry.line),
        takes_dynamic_shared: entry.dynamic_shared,
    }
}

/// `platform`'s kernel-load error for `kernel` when its PTX cannot be read or decoded; the
/// detail is the front end's message (the PTX line and the function where known).
pub(crate) fn kernel_load_error(platform: &'static str, kernel: &str, e: PtxError) -> Error {
    Error::KernelLoad {
        platform,
        kernel: kernel.to_string(),
        detail: e.to_string(),
    }
}

/// Rust primitive names and the PTX type families that may receive them. Other types
/// (structs, arrays) are checked by size and alignment only.
fn family_ok(rust: &str, ty: PtxScalar) -> bool {
    let float = matches!(ty, PtxScalar::Float(_) | PtxScalar::Bits(_));
    let int = !matches!(ty, PtxScalar::Float(_));
    match rust {
        "f32" | "f64" => float,
        "i8" | "u8" | "i16" | "u16" | "i32" | "u32" | "i64" | "u64" | "isize" | "usize"
        | "bool" => int,
        _ => true,
    }
}

/// Checks a `TypedKernel`'s parameter kinds against a PTX entry. `SharedMemory` arguments are
/// not PTX parameters (dynamic shared memory is a launch attribute), so they are skipped.
pub(crate) fn check_signature(entry: &PtxEntry, expected: &[ParamKind]) -> Result<()> {
    let passed: Vec<&ParamKind> = expected
        .iter()
        .filter(|k| !matches!(k, ParamKind::SharedMemory { .. }))
        .collect();
    let mismatch = |detail: String| Error::SignatureMismatch {
        kernel: entry.name.clone(),
        detail,
    };
    if passed.len() != entry.params.len() {
        return Err(mismatch(format!(
            "the PTX entry (line {}) takes {} parameter(s), the TypedKernel passes {} \
             (SharedMemory arguments are launch attributes, not parameters)",
            entry.line,
            entry.params.len(),
            passed.len()
        )));
    }
    for (i, (kind, p)) in passed.iter().zip(&entry.params).enumerate() {
        let ok = match kind {
            ParamKind::Pointer { .. } => p.array.is_none() && p.size() == 8,
            ParamKind::Scalar {
                size,
                align,
                type_name,
            } => {
                p.size() == *size as u64
                    && p.align >= (*align as u64).min(p.size())
                    && (p.array.is_some() || family_ok(type_name, p.ty))
            }
            ParamKind::SharedMemory { .. } => true,
        };
        if !ok {
            return Err(mismatch(format!(
                "parameter {i}: the kernel declares `{p}` ({} bytes), the TypedKernel passes {kind}",
                p.size()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::parse_entries;

    fn kinds<T: crate::KernelArgs>() -> Vec<ParamKind> {
        T::signature()
    }

    #[test]
    fn signatures_are_checked_by_count_size_and_family() {
        use crate::{DevicePtr, SharedMemory};
        let e = &parse_entries(
            ".entry k(.param .u32 n, .param .f32 a, .param .u64 x, .param .align 8 .b8 s[16])",
        )
        .unwrap()[0];
        let ok = kinds::<(u32, f32, DevicePtr<f32>, [u64; 2])>();
        check_signature(e, &ok).unwrap();
        let with_shared = kinds::<(u32, f32, DevicePtr<f32>, SharedMemory<f32>, [u64; 2])>();
        check_signature(e, &with_shared).unwrap();
        for (bad, needle) in [
            (
                kinds::<(u32, f32, DevicePtr<f32>)>(),
                "takes 4 parameter(s)",
            ),
            (
                kinds::<(f32, f32, DevicePtr<f32>, [u64; 2])>(),
                "parameter 0",
            ),
            (
                kinds::<(u32, u32, DevicePtr<f32>, [u64; 2])>(),
                "parameter 1",
            ),
            (kinds::<(u32, f32, u32, [u64; 2])>(), "parameter 2"),
            (
                kinds::<(u32, f32, DevicePtr<f32>, [u64; 3])>(),
                "parameter 3",
            ),
        ] {
            let err = check_signature(e, &bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
    #[test]
    fn a_ptx_error_is_the_platforms_kernel_load_error_with_its_text() {
        let e = crate::ptx::parse_module(".entry k() {\n add.s32 %r1, %r2 %r3;\n}").unwrap_err();
        let text = e.to_string();
        match kernel_load_error("host", "want", e) {
            Error::KernelLoad {
                platform,
                kernel,
                detail,
            } => {
                assert_eq!((platform, kernel.as_str()), ("host", "want"));
                assert_eq!(detail, text);
                assert!(
                    detail.contains("PTX line 2") && detail.contains("`k`"),
                    "{detail}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
