//! The seed example with typed kernels generated at build time (`build.rs`, streamexec-build):
//! no PTX string, no hand-written `TypedKernel<(..)>`, no loader spec. The kernels come from
//! `kernels/*.cu` (PTX for sm_70 and sm_80) and `kernels/add_mystery_value.cl` (OpenCL C), and
//! each generated module's `launch` is the whole call.
//!
//! Run with `--platform NAME` (default `host`; `opencl`, `cuda` on the CPU libcuda, `hip`).
//! Prints `result = 165.5`, then checks the other kernels against plain Rust on random inputs
//! with poisoned outputs (`--seed N` picks the inputs); exits non-zero on any error or mismatch.

use std::process::ExitCode;

use streamexec::{PlatformManager, SharedMemory, StreamExecutor};

/// The generated kernels: one module per kernel, and the structs they take by value.
mod kernels {
    include!(concat!(env!("OUT_DIR"), "/kernels.rs"));
}

use kernels::Affine;

/// Elements per test vector, and threads per block.
const N: usize = 1000;
const THREADS: u32 = 128;

/// A small deterministic generator (xorshift64*), so the example needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [-100, 100).
    fn f32(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 200.0 - 100.0
    }
}

fn blocks() -> u32 {
    (N as u32).div_ceil(THREADS)
}

/// Fails with a message naming the first element that differs.
fn compare<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
) -> Result<(), String> {
    match got.iter().zip(want).position(|(g, w)| g != w) {
        None if got.len() == want.len() => Ok(()),
        None => Err(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        )),
        Some(i) => Err(format!(
            "{what}: element {i} is {:?}, expected {:?}",
            got[i], want[i]
        )),
    }
}

fn add_mystery_value(executor: &StreamExecutor) -> Result<f32, String> {
    let result = executor
        .allocate_scalar::<f32>()
        .map_err(|e| e.to_string())?;
    let mut stream = executor.create_stream().map_err(|e| e.to_string())?;
    kernels::add_mystery_value::launch(&mut stream, 1, 1, 42.5, result.ptr())
        .block_host_until_done()
        .map_err(|e| e.to_string())?;
    executor
        .synchronous_copy_scalar_to_host(&result)
        .map_err(|e| e.to_string())
}

fn scale_and_affine(executor: &StreamExecutor, rng: &mut Rng) -> Result<(), String> {
    let err = |e: streamexec::Error| e.to_string();
    let xs: Vec<f32> = (0..N).map(|_| rng.f32()).collect();
    let ds: Vec<f64> = xs.iter().map(|x| f64::from(*x) * 1.5).collect();
    let (factor, dfactor) = (rng.f32(), f64::from(rng.f32()));
    let p = Affine::new(
        rng.f32(),
        f64::from(rng.f32()),
        (rng.next() % 200) as i32 - 100,
    );

    let v = executor.copy_to_device(&xs).map_err(err)?;
    let dv = executor.copy_to_device(&ds).map_err(err)?;
    let input = executor.copy_to_device(&xs).map_err(err)?;
    // Poisoned outputs: an element the kernel does not write stays NaN and fails the check.
    let with_bias = executor.copy_to_device(&vec![f64::NAN; N]).map_err(err)?;
    let without_bias = executor.copy_to_device(&vec![f64::NAN; N]).map_err(err)?;
    let mut stream = executor.create_stream().map_err(err)?;
    let staging = SharedMemory::<f32>::new(THREADS as usize);
    kernels::scale_float::launch(&mut stream, THREADS, blocks(), v.ptr(), factor, N as i32);
    kernels::scale_double::launch(&mut stream, THREADS, blocks(), dv.ptr(), dfactor, N as i32);
    kernels::affine::launch(
        &mut stream,
        THREADS,
        blocks(),
        p,
        true,
        input.ptr(),
        with_bias.ptr(),
        N as u32,
        staging,
    );
    kernels::affine::launch(
        &mut stream,
        THREADS,
        blocks(),
        p,
        false,
        input.ptr(),
        without_bias.ptr(),
        N as u32,
        staging,
    )
    .block_host_until_done()
    .map_err(err)?;

    let want: Vec<f32> = xs.iter().map(|x| x * factor).collect();
    compare(
        "scale<float>",
        &executor.copy_to_vec(&v).map_err(err)?,
        &want,
    )?;
    let want: Vec<f64> = ds.iter().map(|x| x * dfactor).collect();
    compare(
        "scale<double>",
        &executor.copy_to_vec(&dv).map_err(err)?,
        &want,
    )?;
    // The f32 × f32 product is exact in f64, so contracting it into an FMA changes nothing.
    let affine = |x: &f32, bias: bool| {
        f64::from(p.scale) * f64::from(*x) + p.offset + if bias { f64::from(p.bias) } else { 0.0 }
    };
    let want: Vec<f64> = xs.iter().map(|x| affine(x, true)).collect();
    compare(
        "affine (bias)",
        &executor.copy_to_vec(&with_bias).map_err(err)?,
        &want,
    )?;
    let want: Vec<f64> = xs.iter().map(|x| affine(x, false)).collect();
    compare(
        "affine (no bias)",
        &executor.copy_to_vec(&without_bias).map_err(err)?,
        &want,
    )?;
    Ok(())
}

fn run(platform_name: &str, seed: u64) -> Result<(), String> {
    let platform = PlatformManager::platform_with_name(platform_name).map_err(|e| e.to_string())?;
    let executor = platform.executor_for_device(0).map_err(|e| e.to_string())?;
    let value = add_mystery_value(&executor)?;
    println!("result = {value}");
    if value != 165.5 {
        return Err("expected 165.5".into());
    }
    scale_and_affine(&executor, &mut Rng(seed.max(1)))?;
    println!("scale<float>, scale<double>, affine: {N} elements each match plain Rust");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut platform = PlatformManager::DEFAULT_PLATFORM.to_string();
    let mut seed = 0x5eed_u64;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match (arg.as_str(), it.next()) {
            ("--platform", Some(name)) => platform = name.clone(),
            ("--seed", Some(s)) if s.parse::<u64>().is_ok() => seed = s.parse().unwrap_or(1),
            _ => {
                eprintln!("usage: streamexec-typed-kernels [--platform NAME] [--seed N]");
                return ExitCode::from(2);
            }
        }
    }
    match run(&platform, seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error on platform `{platform}` (seed {seed}): {e}");
            ExitCode::FAILURE
        }
    }
}
