//! The CPU NVRTC (this crate, CUDA C++ compiled to PTX by clang) with the CPU libcuda: cudarc's
//! `compile_ptx` and our CUDA backend's `add_cuda_source_in_memory` compile, load and run CUDA
//! C++ without the CUDA toolkit; compile errors carry clang's diagnostics in the program log,
//! and a missing clang is a clear log, not a panic.
//!
//! Run with both libraries on the library path:
//! `LD_LIBRARY_PATH=$(bash scripts/build-libcuda.sh) cargo test -p streamexec-libnvrtc`. Without them
//! (or with NVIDIA's NVRTC first on the path) the tests skip with a note; with `cuda` in
//! `STREAMEXEC_REQUIRE` they fail instead.

// The tests of the CPU libcuda and NVRTC share one support module.
#[path = "../../streamexec-libcuda/tests/support/mod.rs"]
mod support;

use std::ffi::{CStr, CString, c_char};
use std::process::Command;

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::sys::nvrtcResult;
use cudarc::nvrtc::{CompileError, CompileOptions, Ptx, compile_ptx, compile_ptx_with_opts};
use rand::RngExt;
use streamexec::{DevicePtr, Error, MultiKernelLoaderSpec, PlatformManager, TypedKernel};

use support::{POISON_F32_BITS, POISON_U32, random_f32s, random_u32s, rng};

/// Whether streamexec's libnvrtc is the one cudarc loads (its extra export is there).
fn nvrtc_is_streamexecs() -> bool {
    // SAFETY: cudarc's loader only dlopens its candidate names; `culib` is called only after
    // one of them loaded. Looking a symbol up calls nothing.
    unsafe {
        cudarc::nvrtc::sys::is_culib_present()
            && cudarc::nvrtc::sys::culib()
                .get::<unsafe extern "C" fn(*mut c_char, usize) -> usize>(
                    b"streamexec_nvrtc_last_error_detail",
                )
                .is_ok()
    }
}

/// The clang the library runs by default is installed.
fn clang_installed() -> bool {
    Command::new("clang++-19").arg("--version").output().is_ok()
        || Command::new("clang++").arg("--version").output().is_ok()
}

/// True when `test` can run: a libcuda and streamexec's libnvrtc load (and, when `needs_clang`,
/// clang is installed). Otherwise skips with a note, or fails when `STREAMEXEC_REQUIRE` names
/// `cuda`.
fn available(test: &str, needs_clang: bool) -> bool {
    if !support::libcuda_loads(test) {
        return false;
    }
    let why = if !nvrtc_is_streamexecs() {
        "streamexec's libnvrtc is not the libnvrtc found first on the library path"
    } else if needs_clang && !clang_installed() {
        "clang++-19 is not installed (Debian: apt-get install clang-19)"
    } else {
        // libnvrtc is loaded now: it too must be the one of STREAMEXEC_LIBCUDA_DIR.
        support::check_loaded_from();
        return true;
    };
    support::skip(test, why);
    false
}

const SAXPY: &str = r#"
// out = a * x + y, written only below n.
extern "C" __global__ void saxpy(int n, float a, const float* x, const float* y, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"#;

/// Checks `got` against `a * x + y` computed in f64 (the device may fuse the multiply-add, so
/// within a few f32 ulps), and the poisoned tail after `n` untouched.
fn check_saxpy(got: &[f32], n: usize, a: f32, x: &[f32], y: &[f32]) {
    for i in 0..n {
        let want = a as f64 * x[i] as f64 + y[i] as f64;
        let tol =
            4.0 * f32::EPSILON as f64 * ((a as f64 * x[i] as f64).abs() + (y[i] as f64).abs());
        assert!(
            (got[i] as f64 - want).abs() <= tol,
            "saxpy[{i}]: got {} want {want} (a {a}, x {}, y {})",
            got[i],
            x[i],
            y[i]
        );
    }
    for (i, g) in got.iter().enumerate().skip(n) {
        assert_eq!(
            g.to_bits(),
            POISON_F32_BITS,
            "out[{i}] past n = {n} was written"
        );
    }
}

#[test]
fn cudarc_compile_ptx_runs_on_the_cpu_libcuda() {
    let test = "cudarc_compile_ptx_runs_on_the_cpu_libcuda";
    if !available(test, true) {
        return;
    }
    let ptx = compile_ptx(SAXPY).unwrap_or_else(|e| panic!("{e:?}"));
    let text = ptx.to_src();
    assert!(text.contains(".visible .entry saxpy("), "{text}");
    if std::env::var_os("STREAMEXEC_CUDA_CC").is_none() {
        assert!(
            text.contains(".target sm_70"),
            "the default architecture: {text}"
        );
    }

    let ctx = CudaContext::new(0).unwrap();
    let module = ctx.load_module(ptx).unwrap();
    let f = module.load_function("saxpy").unwrap();
    let stream = ctx.default_stream();
    let mut r = rng(test);
    for _ in 0..3 {
        let n = r.random_range(1..5000usize);
        let pad = r.random_range(1..64usize);
        let a = r.random_range(-4.0f32..4.0);
        let (x, y) = (random_f32s(&mut r, n), random_f32s(&mut r, n));
        let dx = stream.clone_htod(&x).unwrap();
        let dy = stream.clone_htod(&y).unwrap();
        let mut dout = stream
            .clone_htod(&vec![f32::from_bits(POISON_F32_BITS); n + pad])
            .unwrap();
        let n_i32 = n as i32;
        let cfg = LaunchConfig {
            grid_dim: ((n as u32).div_ceil(128), 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&f);
        launch.arg(&n_i32).arg(&a).arg(&dx).arg(&dy).arg(&mut dout);
        // SAFETY: the arguments match saxpy's parameters; `out` has n + pad elements.
        unsafe { launch.launch(cfg) }.unwrap();
        let got = stream.clone_dtoh(&dout).unwrap();
        check_saxpy(&got, n, a, &x, &y);
    }
}

/// C++ (a template, warp shuffles and atomics from the prelude, shared memory): the sum of
/// squares of `x` (mod 2^32) into `out[0]`, and each block's count of odd squares into
/// `per_block[blockIdx.x]`.
const SUM_SQUARES: &str = r#"
template <typename T> __device__ T square(T v) { return v * v; }

extern "C" __global__ void sum_squares(const unsigned* x, unsigned* out, unsigned* per_block,
                                       unsigned n) {
    __shared__ unsigned odd;
    if (threadIdx.x == 0) odd = 0;
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned v = i < n ? square(x[i]) : 0u;
    if (v & 1u) atomicAdd(&odd, 1u);
    for (int d = 16; d > 0; d /= 2) v += (unsigned)__shfl_down_sync(0xffffffffu, (int)v, d);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
    __syncthreads();
    if (threadIdx.x == 0) per_block[blockIdx.x] = odd;
}
"#;

type SumSquares = TypedKernel<(DevicePtr<u32>, DevicePtr<u32>, DevicePtr<u32>, u32)>;

#[test]
fn cuda_platform_runs_cuda_cpp_source_through_nvrtc() {
    let test = "cuda_platform_runs_cuda_cpp_source_through_nvrtc";
    if !available(test, true) {
        return;
    }
    let exec = PlatformManager::platform_with_name("cuda")
        .and_then(|p| p.executor_for_device(0))
        .unwrap();
    let spec = MultiKernelLoaderSpec::new(4).add_cuda_source_in_memory(SUM_SQUARES, "sum_squares");
    let k: SumSquares = exec.get_kernel(&spec).unwrap_or_else(|e| panic!("{e}"));
    let mut r = rng(test);
    for _ in 0..3 {
        let n = r.random_range(1..6000usize);
        let x = random_u32s(&mut r, n, u32::MAX);
        let blocks = (n as u32).div_ceil(256);
        let dx = exec.copy_to_device(&x).unwrap();
        let dout = exec.copy_to_device(&[0u32]).unwrap();
        let dper = exec
            .copy_to_device(&vec![POISON_U32; blocks as usize + 1])
            .unwrap();
        let mut s = exec.create_stream().unwrap();
        s.then_launch(
            256,
            blocks,
            &k,
            (dx.ptr(), dout.ptr(), dper.ptr(), n as u32),
        )
        .block_host_until_done()
        .unwrap();
        let want = x
            .iter()
            .fold(0u32, |acc, v| acc.wrapping_add(v.wrapping_mul(*v)));
        assert_eq!(exec.copy_to_vec(&dout).unwrap(), [want], "n = {n}");
        let mut want_odd: Vec<u32> = x
            .chunks(256)
            .map(|c| c.iter().filter(|v| v.wrapping_mul(**v) & 1 == 1).count() as u32)
            .collect();
        want_odd.push(POISON_U32);
        assert_eq!(exec.copy_to_vec(&dper).unwrap(), want_odd, "n = {n}");
    }
}

#[test]
fn compile_errors_carry_clangs_diagnostics_in_the_log() {
    if !available("compile_errors_carry_clangs_diagnostics_in_the_log", true) {
        return;
    }
    let src = "extern \"C\" __global__ void k(float* p) {\n    p[0] = not_declared;\n}\n";
    match compile_ptx(src) {
        Err(CompileError::CompileError { nvrtc, log, .. }) => {
            assert_eq!(nvrtc.0, nvrtcResult::NVRTC_ERROR_COMPILATION);
            let log = log.to_string_lossy();
            assert!(
                log.contains(
                    "default_program:2:12: error: use of undeclared identifier 'not_declared'"
                ),
                "{log}"
            );
        }
        other => panic!("{other:?}"),
    }
    // An option NVRTC does not have is named in the log.
    let opts = CompileOptions {
        options: vec!["--not-an-nvrtc-option".into()],
        ..Default::default()
    };
    match compile_ptx_with_opts(SAXPY, opts) {
        Err(CompileError::CompileError { nvrtc, log, .. }) => {
            assert_eq!(nvrtc.0, nvrtcResult::NVRTC_ERROR_INVALID_OPTION);
            let log = log.to_string_lossy();
            assert!(
                log.contains("unrecognized option --not-an-nvrtc-option"),
                "{log}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Through the CUDA platform: the kernel-load error has the log.
    let exec = PlatformManager::platform_with_name("cuda")
        .and_then(|p| p.executor_for_device(0))
        .unwrap();
    let spec = MultiKernelLoaderSpec::new(1).add_cuda_source_in_memory(src, "k");
    match exec.get_untyped_kernel(&spec) {
        Err(e @ Error::KernelLoad { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("NVRTC failed to compile") && text.contains("'not_declared'"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
}

/// Set in the child process of [`a_missing_clang_is_a_clear_log_not_a_panic`].
const CHILD: &str = "STREAMEXEC_NVRTC_TEST_MISSING_CLANG";

#[test]
fn a_missing_clang_is_a_clear_log_not_a_panic() {
    let test = "a_missing_clang_is_a_clear_log_not_a_panic";
    if std::env::var_os(CHILD).is_some() {
        // The child: STREAMEXEC_NVRTC_CLANG names a clang that does not exist.
        match compile_ptx(SAXPY) {
            Err(CompileError::CompileError { nvrtc, log, .. }) => {
                assert_eq!(nvrtc.0, nvrtcResult::NVRTC_ERROR_BUILTIN_OPERATION_FAILURE);
                let log = log.to_string_lossy();
                println!("log: {log}");
                for needle in [
                    "`/nonexistent/clang++` (not found)",
                    "apt-get install clang-19",
                ] {
                    assert!(log.contains(needle), "`{needle}` not in: {log}");
                }
            }
            other => panic!("{other:?}"),
        }
        let exec = PlatformManager::platform_with_name("cuda")
            .and_then(|p| p.executor_for_device(0))
            .unwrap();
        let spec = MultiKernelLoaderSpec::new(5).add_cuda_source_in_memory(SAXPY, "saxpy");
        let err = exec.get_untyped_kernel(&spec).unwrap_err().to_string();
        assert!(err.contains("clang-19"), "{err}");
        return;
    }
    if !available(test, false) {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("STREAMEXEC_NVRTC_CLANG", "/nonexistent/clang++")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(
        text.contains("1 passed") && text.contains("log: "),
        "{text}"
    );
}

/// Set in the child process of [`without_libnvrtc_cuda_source_is_a_clear_error`].
const CHILD_NO_NVRTC: &str = "STREAMEXEC_NVRTC_TEST_NO_NVRTC";

/// The CUDA backend's refusal when no libnvrtc can be loaded (the child runs with a library
/// path holding only the CPU libcuda).
#[test]
fn without_libnvrtc_cuda_source_is_a_clear_error() {
    let test = "without_libnvrtc_cuda_source_is_a_clear_error";
    if std::env::var_os(CHILD_NO_NVRTC).is_some() {
        // SAFETY: only tries to dlopen the library names cudarc would use.
        if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            println!("note: a libnvrtc outside the library path was found; nothing to check");
            return;
        }
        let exec = PlatformManager::platform_with_name("cuda")
            .and_then(|p| p.executor_for_device(0))
            .unwrap();
        let spec = MultiKernelLoaderSpec::new(5).add_cuda_source_in_memory(SAXPY, "saxpy");
        let err = exec.get_untyped_kernel(&spec).unwrap_err().to_string();
        assert!(
            err.contains("CUDA C++ source needs NVRTC (libnvrtc.so)"),
            "{err}"
        );
        println!("checked: {err}");
        return;
    }
    if !available(test, false) {
        return;
    }
    // The directory holding the libraries, from the library path.
    let path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let Some(dir) = std::env::split_paths(&path)
        .find(|d| d.join("libcuda.so").exists() && d.join("libnvrtc.so").exists())
    else {
        eprintln!(
            "{test}: skipped: no directory with libcuda.so and libnvrtc.so on LD_LIBRARY_PATH"
        );
        return;
    };
    let only_cuda =
        std::env::temp_dir().join(format!("streamexec-only-libcuda-{}", std::process::id()));
    std::fs::create_dir_all(&only_cuda).unwrap();
    for name in ["libcuda.so", "libcuda.so.1"] {
        let link = only_cuda.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(dir.join("libcuda.so"), &link).unwrap();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_NO_NVRTC, "1")
        .env("LD_LIBRARY_PATH", &only_cuda)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&only_cuda);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{text}");
    assert!(
        text.contains("1 passed") && (text.contains("checked: ") || text.contains("note: ")),
        "{text}"
    );
}

#[test]
fn name_expressions_and_headers_reach_a_template_kernel() {
    use cudarc::nvrtc::sys;
    let test = "name_expressions_and_headers_reach_a_template_kernel";
    if !available(test, true) {
        return;
    }
    let src = CString::new(
        "#include \"ops/affine.h\"\n\
         template <typename T> __global__ void affine(const T* x, T* y, int n) {\n\
             int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
             if (i < n) y[i] = apply(x[i]);\n\
         }\n",
    )
    .unwrap();
    let header = c"template <typename T> __device__ T apply(T v) { return v * T(MUL) + T(1); }\n";
    let (headers, names) = ([header.as_ptr()], [c"ops/affine.h".as_ptr()]);
    let expr = c"affine<unsigned>";
    let opts = [c"-DMUL=3".as_ptr(), c"--std=c++17".as_ptr()];
    let mut prog = std::ptr::null_mut();
    let mut lowered = std::ptr::null();
    let (mut ptx_len, mut log_len) = (0usize, 0usize);
    // SAFETY: NVRTC's contract: valid strings and arrays of the given lengths, out-pointers
    // to locals, buffers of the sizes NVRTC reported.
    let (ptx, name) = unsafe {
        assert_eq!(
            sys::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                c"affine.cu".as_ptr(),
                1,
                headers.as_ptr(),
                names.as_ptr()
            ),
            nvrtcResult::NVRTC_SUCCESS
        );
        assert_eq!(
            sys::nvrtcAddNameExpression(prog, expr.as_ptr()),
            nvrtcResult::NVRTC_SUCCESS
        );
        let compiled = sys::nvrtcCompileProgram(prog, 2, opts.as_ptr());
        assert_eq!(
            sys::nvrtcGetProgramLogSize(prog, &mut log_len),
            nvrtcResult::NVRTC_SUCCESS
        );
        let mut log = vec![0 as c_char; log_len];
        assert_eq!(
            sys::nvrtcGetProgramLog(prog, log.as_mut_ptr()),
            nvrtcResult::NVRTC_SUCCESS
        );
        let log = CStr::from_ptr(log.as_ptr()).to_string_lossy().into_owned();
        assert_eq!(compiled, nvrtcResult::NVRTC_SUCCESS, "{log}");
        assert_eq!(
            sys::nvrtcGetLoweredName(prog, expr.as_ptr(), &mut lowered),
            nvrtcResult::NVRTC_SUCCESS
        );
        let name = CStr::from_ptr(lowered).to_str().unwrap().to_string();
        assert_eq!(
            sys::nvrtcGetPTXSize(prog, &mut ptx_len),
            nvrtcResult::NVRTC_SUCCESS
        );
        let mut ptx = vec![0 as c_char; ptx_len];
        assert_eq!(
            sys::nvrtcGetPTX(prog, ptx.as_mut_ptr()),
            nvrtcResult::NVRTC_SUCCESS
        );
        let ptx = CStr::from_ptr(ptx.as_ptr()).to_str().unwrap().to_string();
        assert_eq!(
            sys::nvrtcDestroyProgram(&mut prog),
            nvrtcResult::NVRTC_SUCCESS
        );
        assert!(prog.is_null());
        (ptx, name)
    };
    assert_eq!(name, "_Z6affineIjEvPKT_PS0_i");

    let ctx = CudaContext::new(0).unwrap();
    let module = ctx.load_module(Ptx::from_src(ptx)).unwrap();
    let f = module.load_function(&name).unwrap();
    let stream = ctx.default_stream();
    let mut r = rng(test);
    let n = r.random_range(1..3000usize);
    let x = random_u32s(&mut r, n, u32::MAX);
    let dx = stream.clone_htod(&x).unwrap();
    let mut dy = stream.clone_htod(&vec![POISON_U32; n + 1]).unwrap();
    let n_i32 = n as i32;
    let mut launch = stream.launch_builder(&f);
    launch.arg(&dx).arg(&mut dy).arg(&n_i32);
    // SAFETY: the arguments match affine<unsigned>'s parameters; `y` has n + 1 elements.
    unsafe { launch.launch(LaunchConfig::for_num_elems(n as u32)) }.unwrap();
    let got = stream.clone_dtoh(&dy).unwrap();
    let mut want: Vec<u32> = x
        .iter()
        .map(|v| v.wrapping_mul(3).wrapping_add(1))
        .collect();
    want.push(POISON_U32);
    assert_eq!(got, want);
}
