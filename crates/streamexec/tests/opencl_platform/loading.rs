//! Loading: compiler logs, kernel lookup, signatures, files, binaries, build options.

use super::*;

#[test]
fn a_syntax_error_is_a_kernel_load_error_with_the_compiler_log() {
    let exec = opencl_or_skip!("syntax_error");
    let mut r = rng("syntax_error");
    let src = "__kernel void broken(__global uint* x) {
        x[get_global_id(0)] = undeclared_identifier_xyz + 1;
    }";
    let e = exec
        .get_kernel::<(DevicePtr<u32>,)>(&cl_spec(1, src, "broken"))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::KernelLoad { platform, kernel, .. }
            if *platform == "opencl" && kernel == "broken"),
        "{e:?}"
    );
    let detail = kernel_load_detail(&e);
    assert!(
        detail.contains("undeclared_identifier_xyz"),
        "the compiler log names the offending identifier: {msg}"
    );
    assert!(
        detail.to_ascii_lowercase().contains("error"),
        "the compiler log is included: {msg}"
    );

    // A missing semicolon, a different kind of syntax error, also reaches the user.
    let src = "__kernel void nosemi(__global uint* x) { x[0] = 1 }";
    let e = exec
        .get_untyped_kernel(&cl_spec(1, src, "nosemi"))
        .unwrap_err();
    assert!(
        kernel_load_detail(&e)
            .to_ascii_lowercase()
            .contains("error"),
        "{e}"
    );

    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 2. Kernel name not in the program
// ---------------------------------------------------------------------------------------------

#[test]
fn a_kernel_name_not_in_the_program_is_named_in_the_error() {
    let exec = opencl_or_skip!("missing_kernel_name");
    let mut r = rng("missing_kernel_name");
    let src = "
        __kernel void alpha_kernel(__global uint* x) { x[get_global_id(0)] = 1; }
        __kernel void beta_kernel(__global uint* x) { x[get_global_id(0)] = 2; }";
    let e = exec
        .get_kernel::<(DevicePtr<u32>,)>(&cl_spec(1, src, "gamma_kernel"))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, Error::KernelLoad { kernel, .. } if kernel == "gamma_kernel"),
        "{e:?}"
    );
    assert!(
        kernel_load_detail(&e).contains("gamma_kernel") || msg.contains("`gamma_kernel`"),
        "the message names the missing kernel: {msg}"
    );
    if !(msg.contains("alpha_kernel") && msg.contains("beta_kernel")) {
        eprintln!(
            "note: the error does not list the kernels the program has (alpha_kernel, \
             beta_kernel): {msg}"
        );
    }

    // Both kernels of the same program load under their own names and run.
    let a: TypedKernel<(DevicePtr<u32>,)> = load(&exec, src, "alpha_kernel");
    let b: TypedKernel<(DevicePtr<u32>,)> = load(&exec, src, "beta_kernel");
    let out = exec.copy_to_device(&[POISON_U32; 64]).unwrap();
    run(&exec, 32, 1, &a, (out.ptr(),)).unwrap();
    run(&exec, 16, 1, &b, (out.slice(32..64).unwrap().ptr(),)).unwrap();
    let got = exec.copy_to_vec(&out).unwrap();
    assert_eq!(&got[..32], &[1; 32][..]);
    assert_eq!(&got[32..48], &[2; 16][..]);
    assert_eq!(&got[48..], &[POISON_U32; 16][..]);

    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 3. Signatures from clGetKernelArgInfo
// ---------------------------------------------------------------------------------------------

fn mismatch_text(e: Error) -> String {
    match &e {
        Error::SignatureMismatch { .. } => e.to_string(),
        other => panic!("expected Error::SignatureMismatch, got {other:?}"),
    }
}

#[test]
fn argument_types_are_checked_at_load_time() {
    let exec = opencl_or_skip!("signature_check");
    let mut r = rng("signature_check");
    let src = "__kernel void scale2(__global float* x, uint n) {
        uint i = get_global_id(0);
        if (i < n) x[i] = x[i] * 2.0f;
    }";
    let spec = cl_spec(2, src, "scale2");

    // A float where the kernel takes a uint.
    let msg = mismatch_text(exec.get_kernel::<(DevicePtr<f32>, f32)>(&spec).unwrap_err());
    assert!(msg.contains("scale2"), "names the kernel: {msg}");
    assert!(msg.contains("argument 1"), "names argument 1: {msg}");
    assert!(msg.contains("uint"), "names the kernel's type: {msg}");
    assert!(msg.contains("f32"), "names the Rust type: {msg}");

    // The two arguments swapped: the first mismatch is argument 0.
    let msg = mismatch_text(exec.get_kernel::<(u32, DevicePtr<f32>)>(&spec).unwrap_err());
    assert!(msg.contains("argument 0"), "names argument 0: {msg}");
    assert!(msg.contains("float"), "names the kernel's type: {msg}");
    assert!(msg.contains("u32"), "names the Rust type: {msg}");

    // A pointer to the wrong element type.
    let msg = mismatch_text(exec.get_kernel::<(DevicePtr<u32>, u32)>(&spec).unwrap_err());
    assert!(msg.contains("argument 0"), "{msg}");
    let msg = mismatch_text(exec.get_kernel::<(DevicePtr<f64>, u32)>(&spec).unwrap_err());
    assert!(msg.contains("argument 0"), "{msg}");

    // The right signature loads and runs.
    let k: TypedKernel<(DevicePtr<f32>, u32)> = exec.get_kernel(&spec).unwrap();
    let xs = random_f32s(&mut r, 300);
    let dev = exec.copy_to_device(&xs).unwrap();
    run(&exec, 64, 5, &k, (dev.ptr(), 300)).unwrap();
    let want: Vec<u32> = xs.iter().map(|v| (v * 2.0).to_bits()).collect();
    let got: Vec<u32> = exec
        .copy_to_vec(&dev)
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(got, want);
    assert_still_usable(&exec, &mut r);
}

/// The check must not reject correct kernels: `__constant` and `const` pointers are device
/// pointers, vector types match arrays, and a `typedef` of a matching type (whose name the
/// checker cannot resolve) is not a mismatch.
#[test]
fn matching_signatures_with_qualifiers_vectors_and_typedefs_load() {
    let exec = opencl_or_skip!("signature_no_false_mismatch");
    let mut r = rng("signature_no_false_mismatch");
    let n = 256usize;
    let xs = random_f32s(&mut r, n);
    let dx = exec.copy_to_device(&xs).unwrap();
    let poison = vec![f32::from_bits(POISON_F32_BITS); n];

    // __constant and const __global pointers, a float4 pointer and a uint2 by value.
    let src = "__kernel void quals(__constant float* c, __global const float4* v,
                                   __global float* y, uint2 lim) {
        uint i = get_global_id(0);
        if (i < lim.x) y[i] = c[i] + ((__global const float*)v)[i] * (float)lim.y;
    }";
    type Quals = TypedKernel<(
        DevicePtr<f32>,
        DevicePtr<[f32; 4]>,
        DevicePtr<f32>,
        [u32; 2],
    )>;
    let k: Quals = load(&exec, src, "quals");
    let dv = exec.copy_to_device(groups_of_four(&xs).as_slice()).unwrap();
    let dy = exec.copy_to_device(&poison).unwrap();
    run(
        &exec,
        64,
        4,
        &k,
        (dx.ptr(), dv.ptr(), dy.ptr(), [n as u32, 3]),
    )
    .unwrap();
    let got = exec.copy_to_vec(&dy).unwrap();
    for (i, (g, x)) in got.iter().zip(&xs).enumerate() {
        assert_eq!(g.to_bits(), (x + x * 3.0).to_bits(), "element {i}");
    }

    // Typedef'd element and scalar types.
    let src = "typedef float real;
               typedef uint count_t;
               __kernel void typedefs(__global const real* x, __global real* y, count_t n) {
                   uint i = get_global_id(0);
                   if (i < n) y[i] = x[i] * 2.0f;
               }";
    let spec = cl_spec(3, src, "typedefs");
    let k: TypedKernel<(DevicePtr<f32>, DevicePtr<f32>, u32)> = exec
        .get_kernel(&spec)
        .unwrap_or_else(|e| panic!("a typedef of a matching type is rejected: {e}"));
    let dy = exec.copy_to_device(&poison).unwrap();
    run(&exec, 64, 4, &k, (dx.ptr(), dy.ptr(), n as u32)).unwrap();
    let got = exec.copy_to_vec(&dy).unwrap();
    for (i, (g, x)) in got.iter().zip(&xs).enumerate() {
        assert_eq!(g.to_bits(), (x * 2.0).to_bits(), "element {i}");
    }
}

/// `xs` as groups of four (its length is a multiple of 4).
fn groups_of_four(xs: &[f32]) -> Vec<[f32; 4]> {
    xs.chunks_exact(4)
        .map(|c| [c[0], c[1], c[2], c[3]])
        .collect()
}

#[test]
fn a_local_parameter_must_be_shared_memory() {
    let exec = opencl_or_skip!("local_signature");
    let mut r = rng("local_signature");
    let spec = cl_spec(3, LOCAL_SUM_CL, "local_sum");

    // `__local uint*` is not a global pointer ...
    let msg = mismatch_text(
        exec.get_kernel::<(DevicePtr<u32>, DevicePtr<u32>, DevicePtr<u32>)>(&spec)
            .unwrap_err(),
    );
    assert!(msg.contains("argument 2"), "{msg}");
    // ... nor a scalar ...
    let msg = mismatch_text(
        exec.get_kernel::<(DevicePtr<u32>, DevicePtr<u32>, u32)>(&spec)
            .unwrap_err(),
    );
    assert!(msg.contains("argument 2"), "{msg}");
    // ... and a `__global` pointer is not shared memory.
    let msg = mismatch_text(
        exec.get_kernel::<(DevicePtr<u32>, SharedMemory<u32>, SharedMemory<u32>)>(&spec)
            .unwrap_err(),
    );
    assert!(msg.contains("argument 1"), "{msg}");

    // SharedMemory<u32> matches, and the local buffer is sized by it.
    let k: TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, SharedMemory<u32>)> =
        exec.get_kernel(&spec).unwrap();
    let (bs, blocks) = (128usize, 7usize);
    let input = random_u32s(&mut r, bs * blocks, 1 << 20);
    let din = exec.copy_to_device(&input).unwrap();
    let dout = exec.copy_to_device(&vec![POISON_U32; blocks]).unwrap();
    run(
        &exec,
        bs as u32,
        blocks as u32,
        &k,
        (din.ptr(), dout.ptr(), SharedMemory::new(bs)),
    )
    .unwrap();
    let want: Vec<u32> = input.chunks(bs).map(|c| c.iter().sum()).collect();
    assert_eq!(exec.copy_to_vec(&dout).unwrap(), want);
    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 4. Launch limits
// ---------------------------------------------------------------------------------------------

#[test]
fn a_kernel_loads_from_opencl_text_on_disk() {
    let exec = opencl_or_skip!("text_on_disk");
    let mut r = rng("text_on_disk");
    let dir = TempDir::new("text");
    let path = dir.0.join("affine.cl");
    std::fs::write(&path, AFFINE_CL).unwrap();
    let spec = MultiKernelLoaderSpec::new(4).add_opencl_text_on_disk(&path, "affine");
    let k: Affine = exec.get_kernel(&spec).unwrap();
    let data = random_u32s(&mut r, 500, u32::MAX);
    let dev = exec.copy_to_device(&data).unwrap();
    run(&exec, 100, 5, &k, (dev.ptr(), 500, 3, 11)).unwrap();
    assert_eq!(exec.copy_to_vec(&dev).unwrap(), affine_ref(&data, 3, 11));

    // The file is read when the kernel is loaded: a missing one is an Io error with its path.
    let missing = dir.0.join("does-not-exist.cl");
    let spec = MultiKernelLoaderSpec::new(4).add_opencl_text_on_disk(&missing, "affine");
    let e = exec
        .get_kernel::<(DevicePtr<u32>, u32, u32, u32)>(&spec)
        .unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path.contains("does-not-exist.cl")),
        "{e:?}"
    );
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );
    let missing_bin = dir.0.join("does-not-exist.bin");
    let spec = MultiKernelLoaderSpec::new(4).add_opencl_binary_on_disk(&missing_bin, "affine");
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path.contains("does-not-exist.bin")),
        "{e:?}"
    );
    assert_still_usable(&exec, &mut r);
}

#[test]
fn a_garbage_binary_is_a_kernel_load_error_not_a_panic() {
    let exec = opencl_or_skip!("garbage_binary");
    let mut r = rng("garbage_binary");
    let spec = MultiKernelLoaderSpec::new(1).add_opencl_binary_in_memory(&[1, 2, 3, 4], "k");
    let e = exec.get_kernel::<(DevicePtr<u32>,)>(&spec).unwrap_err();
    assert!(
        matches!(&e, Error::KernelLoad { platform, kernel, .. }
            if *platform == "opencl" && kernel == "k"),
        "{e:?}"
    );
    // An empty binary, and garbage on disk, too.
    let spec = MultiKernelLoaderSpec::new(1).add_opencl_binary_in_memory(&[], "k");
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    assert!(matches!(e, Error::KernelLoad { .. }), "{e:?}");
    let dir = TempDir::new("garbage");
    let path = dir.0.join("garbage.bin");
    let noise: Vec<u8> = random_u32s(&mut r, 1024, 256)
        .into_iter()
        .map(|v| v as u8)
        .collect();
    std::fs::write(&path, &noise).unwrap();
    let spec = MultiKernelLoaderSpec::new(1).add_opencl_binary_on_disk(&path, "k");
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    assert!(matches!(e, Error::KernelLoad { .. }), "{e:?}");
    assert_still_usable(&exec, &mut r);
}

/// Builds `source` for the device named `device_name` with opencl3 directly and returns the
/// program binary; `None` if no OpenCL device has that name.
fn binary_for(device_name: &str, source: &str, options: &str) -> Option<Vec<u8>> {
    use opencl3::context::Context;
    use opencl3::device::{CL_DEVICE_TYPE_ALL, Device, get_all_devices};
    use opencl3::program::Program;
    let device = get_all_devices(CL_DEVICE_TYPE_ALL)
        .ok()?
        .into_iter()
        .map(Device::new)
        .find(|d| d.name().is_ok_and(|n| n == device_name))?;
    let context = Context::from_device(&device).expect("an OpenCL context");
    let program = Program::create_and_build_from_source(&context, source, options)
        .unwrap_or_else(|log| panic!("building with opencl3 directly failed: {log}"));
    program
        .get_binaries()
        .expect("program binaries")
        .into_iter()
        .next()
}

#[test]
fn a_kernel_loads_from_an_opencl_binary() {
    let exec = opencl_or_skip!("opencl_binary");
    let mut r = rng("opencl_binary");
    let name = exec.description().name.clone();
    let Some(binary) = binary_for(&name, AFFINE_CL, "-cl-kernel-arg-info") else {
        eprintln!("opencl_binary: no OpenCL device named `{name}` for opencl3; skipping");
        return;
    };
    let dir = TempDir::new("binary");
    let path = dir.0.join("affine.bin");
    std::fs::write(&path, &binary).unwrap();
    for spec in [
        MultiKernelLoaderSpec::new(4).add_opencl_binary_in_memory(&binary, "affine"),
        MultiKernelLoaderSpec::new(4).add_opencl_binary_on_disk(&path, "affine"),
    ] {
        let k: Affine = exec.get_kernel(&spec).unwrap();
        let data = random_u32s(&mut r, 777, u32::MAX);
        let ma = random_u32s(&mut r, 2, u32::MAX);
        let dev = exec.copy_to_device(&data).unwrap();
        run(&exec, 7, 111, &k, (dev.ptr(), 777, ma[0], ma[1])).unwrap();
        assert_eq!(
            exec.copy_to_vec(&dev).unwrap(),
            affine_ref(&data, ma[0], ma[1])
        );
    }
    // The name is still checked against a binary's kernels.
    let spec = MultiKernelLoaderSpec::new(4).add_opencl_binary_in_memory(&binary, "nope");
    let e = exec.get_untyped_kernel(&spec).unwrap_err();
    assert!(
        matches!(&e, Error::KernelLoad { .. }) && e.to_string().contains("nope"),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Build options
// ---------------------------------------------------------------------------------------------

const SCALE_CL: &str = "
__kernel void scale(__global const float* x, __global float* y, uint n) {
    uint i = get_global_id(0);
    if (i < n) y[i] = x[i] * SCALE;
}";

type Scale = TypedKernel<(DevicePtr<f32>, DevicePtr<f32>, u32)>;

fn check_scale(exec: &StreamExecutor, k: &Scale, r: &mut StdRng, factor: f32) {
    let n = 1003usize;
    let xs = random_f32s(r, n);
    let dx = exec.copy_to_device(&xs).unwrap();
    let dy = exec
        .copy_to_device(&vec![f32::from_bits(POISON_F32_BITS); n + 5])
        .unwrap();
    run(
        exec,
        64,
        (n as u32).div_ceil(64),
        k,
        (dx.ptr(), dy.ptr(), n as u32),
    )
    .unwrap();
    let got = exec.copy_to_vec(&dy).unwrap();
    for (i, (g, x)) in got.iter().zip(&xs).enumerate() {
        assert_eq!(
            g.to_bits(),
            (x * factor).to_bits(),
            "element {i}: {x} * {factor}"
        );
    }
    assert!(
        got[n..].iter().all(|v| v.to_bits() == POISON_F32_BITS),
        "nothing written past n"
    );
}

#[test]
fn build_options_from_the_spec_reach_the_compiler() {
    let exec = opencl_or_skip!("build_options");
    let mut r = rng("build_options");
    // Without the option the macro is undefined: the build fails and says so.
    let e = exec
        .get_kernel::<(DevicePtr<f32>, DevicePtr<f32>, u32)>(&cl_spec(3, SCALE_CL, "scale"))
        .unwrap_err();
    assert!(kernel_load_detail(&e).contains("SCALE"), "{e}");

    let k: Scale = exec
        .get_kernel(&cl_spec(3, SCALE_CL, "scale").with_opencl_build_options("-D SCALE=3"))
        .unwrap();
    check_scale(&exec, &k, &mut r, 3.0);
    // The same source with other options is a different program (no stale cache).
    let k5: Scale = exec
        .get_kernel(&cl_spec(3, SCALE_CL, "scale").with_opencl_build_options("-D SCALE=5"))
        .unwrap();
    check_scale(&exec, &k5, &mut r, 5.0);
    check_scale(&exec, &k, &mut r, 3.0);

    // Bad options are a KernelLoad error, not a panic.
    let e = exec
        .get_untyped_kernel(
            &cl_spec(3, SCALE_CL, "scale")
                .with_opencl_build_options("-D SCALE=3 -no-such-flag-xyz"),
        )
        .unwrap_err();
    assert!(matches!(e, Error::KernelLoad { .. }), "{e:?}");
    assert_still_usable(&exec, &mut r);
}

// ---------------------------------------------------------------------------------------------
// 9. Sub-slices as kernel arguments
// ---------------------------------------------------------------------------------------------
