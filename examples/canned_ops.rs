//! Canned operations on one platform: an sgemm checked against an f64 reference, and the
//! Philox generator.
//!
//! Run with `--platform NAME` (default `host`). Prints, one per line:
//! - `gemm_max_rel_err=<e>`: a 257×129×193 `then_blas_gemm` (f32, column-major, no transposes)
//!   against an f64 loop on the host; `e = max|C − C_ref| / max|C_ref|`;
//! - `philox_u32=<8 hex words>`: the first 8 `u32`s after `then_set_rng_seed(&[0, 1, ..., 15])`,
//!   the same on every platform;
//! - `uniform_mean=… uniform_var=…` and `gaussian_mean=… gaussian_var=…` of 1M `f32` each
//!   (expected 0.5, 1/12 and 0, 1).
//!
//! Exits non-zero on any error, if the GEMM error is 1e-4 or more, or if a moment is off.

use std::process::ExitCode;

use streamexec::{PlatformManager, StreamExecutor, Transpose, philox};

const M: usize = 257;
const N: usize = 129;
const K: usize = 193;
const FILL: usize = 1 << 20;

/// Deterministic inputs in [-1, 1) (Philox blocks of a fixed key, mapped to floats).
fn inputs(len: usize, key: u32) -> Vec<f32> {
    let s = philox::PhiloxStream {
        key: [key, 0],
        counter_hi: [0, 0],
        offset: 0,
    };
    (0..len)
        .map(|i| 2.0 * philox::uniform_f32(s.block(i as u64 / 4)[i % 4]) - 1.0)
        .collect()
}

fn mean_var(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = v
        .iter()
        .map(|&x| (f64::from(x) - mean).powi(2))
        .sum::<f64>()
        / n;
    (mean, var)
}

fn gemm_error(exec: &StreamExecutor) -> streamexec::Result<f64> {
    let (a, b) = (inputs(M * K, 1), inputs(K * N, 2));
    let (da, db) = (exec.allocate_array(M * K)?, exec.allocate_array(K * N)?);
    let dc = exec.allocate_zeroed_array::<f32>(M * N)?;
    exec.synchronous_memcpy_h2d(&a, &da)?;
    exec.synchronous_memcpy_h2d(&b, &db)?;
    let mut stream = exec.create_stream()?;
    stream
        .then_blas_gemm(
            Transpose::None,
            Transpose::None,
            M,
            N,
            K,
            1.0f32,
            &da,
            M,
            &db,
            K,
            0.0,
            &dc,
            M,
        )
        .block_host_until_done()?;
    let mut c = vec![0f32; M * N];
    exec.synchronous_memcpy_d2h(&dc, &mut c)?;
    let (mut max_diff, mut max_ref) = (0f64, 0f64);
    for j in 0..N {
        for i in 0..M {
            let r: f64 = (0..K)
                .map(|l| f64::from(a[i + l * M]) * f64::from(b[l + j * K]))
                .sum();
            max_diff = max_diff.max((f64::from(c[i + j * M]) - r).abs());
            max_ref = max_ref.max(r.abs());
        }
    }
    Ok(max_diff / max_ref)
}

fn run(platform_name: &str) -> streamexec::Result<bool> {
    let exec = PlatformManager::platform_with_name(platform_name)?.executor_for_device(0)?;
    let err = gemm_error(&exec)?;
    println!("gemm_max_rel_err={err:.3e}");

    let words = exec.allocate_array::<u32>(8)?;
    let uniform = exec.allocate_array::<f32>(FILL)?;
    let gaussian = exec.allocate_array::<f32>(FILL)?;
    let seed: Vec<u8> = (0..16).collect();
    exec.create_stream()?
        .then_set_rng_seed(&seed)
        .then_populate_rand_uniform(&words)
        .then_populate_rand_uniform(&uniform)
        .then_populate_rand_gaussian(0.0f32, 1.0, &gaussian)
        .block_host_until_done()?;
    let mut w = [0u32; 8];
    exec.synchronous_memcpy_d2h(&words, &mut w)?;
    let hex: Vec<String> = w.iter().map(|x| format!("{x:08x}")).collect();
    println!("philox_u32={}", hex.join(","));
    let mut host = vec![0f32; FILL];
    exec.synchronous_memcpy_d2h(&uniform, &mut host)?;
    let (um, uv) = mean_var(&host);
    println!("uniform_mean={um:.5} uniform_var={uv:.5}");
    exec.synchronous_memcpy_d2h(&gaussian, &mut host)?;
    let (gm, gv) = mean_var(&host);
    println!("gaussian_mean={gm:.5} gaussian_var={gv:.5}");
    // 1M samples: standard errors are 2.9e-4 (uniform mean), 1e-3 (gaussian mean), 1.4e-3
    // (gaussian variance); these bounds are more than five of them.
    Ok(err < 1e-4
        && (um - 0.5).abs() < 2e-3
        && (uv - 1.0 / 12.0).abs() < 2e-3
        && gm.abs() < 6e-3
        && (gv - 1.0).abs() < 1e-2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let platform = match args.as_slice() {
        [] => PlatformManager::DEFAULT_PLATFORM.to_string(),
        [flag, name] if flag == "--platform" => name.clone(),
        _ => {
            eprintln!("usage: canned_ops [--platform NAME]   (host, opencl, cuda, hip)");
            return ExitCode::from(2);
        }
    };
    match run(&platform) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("error: a result on platform `{platform}` is out of its bound");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
