//! One arity rule on every platform: the loader spec's arity, the kernel's own parameter count
//! and a `TypedKernel`'s `Args` agree, for typed and untyped loads, or the load is
//! `SignatureMismatch` naming the kernel and both counts.

use crate::{kernels, on_each_platform};
use streamexec::{DevicePtr, Error, MultiKernelLoaderSpec, StreamExecutor};

/// The specs of `saxpy` (4 parameters) declaring `arity` a platform may load: every format
/// (the platform picks its own: a native host kernel, OpenCL C, PTX) and, where the platform
/// runs PTX but prefers another format (host), PTX alone.
fn specs(exec: &StreamExecutor, arity: usize) -> Vec<(&'static str, MultiKernelLoaderSpec)> {
    let mut out = vec![("every format", kernels::saxpy_declaring(arity))];
    let ptx = MultiKernelLoaderSpec::new(4).add_cuda_ptx_in_memory(kernels::PTX, "saxpy");
    if exec.get_untyped_kernel(&ptx).is_ok() {
        out.push((
            "PTX only",
            MultiKernelLoaderSpec::new(arity).add_cuda_ptx_in_memory(kernels::PTX, "saxpy"),
        ));
    }
    out
}

/// `r` is `SignatureMismatch` for `saxpy` whose text names both counts.
fn assert_mismatch<T>(r: streamexec::Result<T>, declared: usize, other: &str, what: &str) {
    let Err(e) = r else {
        panic!("{what}: loaded, expected SignatureMismatch");
    };
    let text = e.to_string();
    assert!(
        matches!(e, Error::SignatureMismatch { .. })
            && text.contains("`saxpy`")
            && text.contains(&format!("declares {declared} parameter(s)"))
            && text.contains(other),
        "{what}: {text}"
    );
}

type SaxpyArgs = (u32, f32, DevicePtr<f32>, DevicePtr<f32>);

#[test]
fn the_spec_arity_must_be_the_kernel_parameter_count() {
    on_each_platform(|exec| {
        for (format, spec) in specs(exec, 4) {
            exec.get_untyped_kernel(&spec)
                .unwrap_or_else(|e| panic!("{format}: {e}"));
            exec.get_kernel::<SaxpyArgs>(&spec)
                .unwrap_or_else(|e| panic!("{format}: {e}"));
        }
        // More parameters than the kernel takes, untyped and typed (Args as the spec says).
        for (format, spec) in specs(exec, 7) {
            let what = format!("{format}, spec of 7, untyped");
            assert_mismatch(exec.get_untyped_kernel(&spec), 7, "takes 4", &what);
            let typed =
                exec.get_kernel::<(u32, f32, DevicePtr<f32>, DevicePtr<f32>, u32, u32, u32)>(&spec);
            let what = format!("{format}, spec of 7, typed");
            assert_mismatch(typed, 7, "takes 4", &what);
        }
        // Fewer.
        for (format, spec) in specs(exec, 2) {
            let what = format!("{format}, spec of 2, untyped");
            assert_mismatch(exec.get_untyped_kernel(&spec), 2, "takes 4", &what);
            let what = format!("{format}, spec of 2, typed");
            assert_mismatch(exec.get_kernel::<(u32, f32)>(&spec), 2, "takes 4", &what);
        }
    });
}

#[test]
fn typed_arguments_must_match_the_spec_arity() {
    on_each_platform(|exec| {
        for (format, spec) in specs(exec, 4) {
            let what = format!("{format}, 3 typed arguments for a spec of 4");
            let r = exec.get_kernel::<(u32, f32, DevicePtr<f32>)>(&spec);
            assert_mismatch(r, 4, "has 3", &what);
            let what = format!("{format}, 5 typed arguments for a spec of 4");
            let r = exec.get_kernel::<(u32, f32, DevicePtr<f32>, DevicePtr<f32>, u32)>(&spec);
            assert_mismatch(r, 4, "has 5", &what);
        }
    });
}
