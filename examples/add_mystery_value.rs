//! StreamExecutor's seed example: a kernel adds a "mystery value" (123.0) to its input.
//!
//! One loader spec holds the kernel two ways — PTX and OpenCL C — and the platform picks the
//! one it loads: CUDA JIT-compiles the PTX, OpenCL builds the C, and the host platform runs the
//! very same PTX in its PTX engine (pass `--native` to give host a native Rust kernel instead).
//! Run with `--platform NAME` (default `host`); prints `result = 165.5` and exits non-zero on
//! any error or mismatch.

use std::process::ExitCode;

use streamexec::{
    BlockDim, DevicePtr, HostKernel, MultiKernelLoaderSpec, PlatformManager, ThreadDim, TypedKernel,
};

/// The kernel in PTX: `*out = x + 123.0f` (0f42F60000 is 123.0).
const KERNEL_PTX: &str = r#"
.version 6.0
.target sm_30
.address_size 64

.visible .entry add_mystery_value(
    .param .f32 add_mystery_value_param_0,
    .param .u64 add_mystery_value_param_1
)
{
    .reg .f32   %f<3>;
    .reg .b64   %rd<3>;

    ld.param.f32        %f1, [add_mystery_value_param_0];
    ld.param.u64        %rd1, [add_mystery_value_param_1];
    cvta.to.global.u64  %rd2, %rd1;
    add.f32             %f2, %f1, 0f42F60000;
    st.global.f32       [%rd2], %f2;
    ret;
}
"#;

/// The kernel in OpenCL C.
const KERNEL_CL: &str = r#"
__kernel void add_mystery_value(float x, __global float *out) {
    *out = x + 123.0f;
}
"#;

fn spec(native: bool) -> MultiKernelLoaderSpec {
    let spec = MultiKernelLoaderSpec::new(2)
        .add_cuda_ptx_in_memory(KERNEL_PTX, "add_mystery_value")
        .add_opencl_text_in_memory(KERNEL_CL, "add_mystery_value");
    if !native {
        return spec;
    }
    // The host platform prefers a native kernel over PTX when a spec has both.
    spec.add_host_kernel(HostKernel::new(
        "add_mystery_value",
        |ctx, (x, out): (f32, DevicePtr<f32>)| {
            if ctx.global_id_x() == 0 {
                ctx.global(out).set(0, x + 123.0);
            }
        },
    ))
}

fn run(platform_name: &str, native: bool) -> streamexec::Result<f32> {
    let platform = PlatformManager::platform_with_name(platform_name)?;
    let executor = platform.executor_for_device(0)?;
    let kernel: TypedKernel<(f32, DevicePtr<f32>)> = executor.get_kernel(&spec(native))?;
    let result = executor.allocate_scalar::<f32>()?;
    let mut stream = executor.create_stream()?;
    stream
        .then_launch(
            ThreadDim::default(),
            BlockDim::default(),
            &kernel,
            (42.5, result.ptr()),
        )
        .block_host_until_done()?;
    executor.synchronous_copy_scalar_to_host(&result)
}

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let native = args.iter().any(|a| a == "--native");
    args.retain(|a| a != "--native");
    let platform = match args.as_slice() {
        [] => PlatformManager::DEFAULT_PLATFORM.to_string(),
        [flag, name] if flag == "--platform" => name.clone(),
        [flag] if flag.starts_with("--platform=") => flag["--platform=".len()..].to_string(),
        _ => {
            eprintln!(
                "usage: add_mystery_value [--platform NAME] [--native]   (host, opencl, cuda, hip)"
            );
            return ExitCode::from(2);
        }
    };
    match run(&platform, native) {
        Ok(value) => {
            println!("result = {value}");
            if value == 165.5 {
                ExitCode::SUCCESS
            } else {
                eprintln!("error: expected 165.5 on platform `{platform}`");
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
