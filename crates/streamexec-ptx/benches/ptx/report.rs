//! The end of the run: compile times (the JIT's per kernel, PoCL's build and first launches)
//! and a table of this run's criterion medians and their ratios, the JIT against Rust and
//! against PoCL first, with the geometric mean of each ratio over the cases that have both
//! times. The medians are criterion's own estimates (`new/estimates.json`), read back after it
//! wrote them, so the table says what criterion measured; estimates older than this run (a
//! filtered-out case's) are left out.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::Env;

/// The bench names of a group, in table order.
const BENCHES: [&str; 4] = ["rust", "pocl", "jit", "interpreter"];

/// The table's ratios: (column title, numerator, denominator), as indices into `BENCHES`.
const RATIOS: [(&str, usize, usize); 5] = [
    ("jit / rust", 2, 0),
    ("jit / pocl", 2, 1),
    ("pocl / rust", 1, 0),
    ("interpreter / rust", 3, 0),
    ("interpreter / jit", 3, 2),
];

/// When this run started: estimates older than this are another run's.
static START: OnceLock<SystemTime> = OnceLock::new();

pub fn mark_start() {
    START.get_or_init(SystemTime::now);
}

/// Where criterion writes, by its own rule: `$CRITERION_HOME`, else `criterion` in
/// `$CARGO_TARGET_DIR`, else in the target directory `cargo metadata` names, else in
/// `./target`. The `cargo metadata` step matters: `cargo bench` runs a bench in its package's
/// folder, while the workspace's target directory is at the repository root.
fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return home.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(cargo_target_dir)
        .unwrap_or_else(|| "target".into());
    target.join("criterion")
}

/// The target directory of the workspace `cargo` (`$CARGO`, set by `cargo bench`) is in.
fn cargo_target_dir() -> Option<PathBuf> {
    let out = std::process::Command::new(std::env::var_os("CARGO")?)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .ok()?;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(json["target_directory"].as_str()?.into())
}

/// The median time per iteration, in seconds, criterion measured for `group/bench` in this
/// run (`None` if it did not run this time: filtered out, skipped, or `cargo test` mode).
fn median_s(dir: &Path, group: &str, bench: &str) -> Option<f64> {
    let path = dir.join(group).join(bench).join("new/estimates.json");
    let fresh = std::fs::metadata(&path).and_then(|m| m.modified()).ok()? >= *START.get()?;
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    let ns = json["median"]["point_estimate"].as_f64()?;
    fresh.then_some(ns * 1e-9)
}

fn ms(t: std::time::Duration) -> String {
    format!("{:.2} ms", t.as_secs_f64() * 1e3)
}

/// `x` with three significant digits (more below 0.1).
fn sig3(x: f64) -> String {
    let decimals = match x {
        x if x >= 100.0 => 0,
        x if x >= 10.0 => 1,
        x if x >= 1.0 => 2,
        _ => 3,
    };
    format!("{x:.decimals$}")
}

fn ratio(r: f64) -> String {
    format!("{}x", sig3(r))
}

/// A time in s, ms or µs.
fn seconds(t: f64) -> String {
    match t {
        t if t >= 1.0 => format!("{} s", sig3(t)),
        t if t >= 1e-3 => format!("{} ms", sig3(t * 1e3)),
        t => format!("{} µs", sig3(t * 1e6)),
    }
}

fn print_compile_times(env: &Env) {
    println!("\nPTX JIT compile times (kernel: time):");
    let compiles = streamexec_ptx::jit_compile_times();
    if compiles.is_empty() {
        println!("  none: the JIT compiled no kernel in this run");
    }
    for (kernel, t) in compiles {
        println!("  {kernel}: {}", ms(t));
    }
    match &env.pocl {
        Ok(p) => {
            println!(
                "\nPoCL ({}): clBuildProgram of kernels/cl/bench.cl (all kernels): {}",
                p.name,
                ms(p.build)
            );
            println!(
                "PoCL first launch per kernel (its compile for the local size, then one run):"
            );
            for (kernel, t) in p.first_launches() {
                println!("  {kernel}: {}", ms(t));
            }
        }
        Err(e) => println!("\npocl: skipped ({e})"),
    }
}

pub fn print_summary(cases: &[&str], env: &Env) {
    print_compile_times(env);
    println!("\nMedians of this run and their ratios (- : not run this time):");
    let titles: Vec<&str> = RATIOS.iter().map(|r| r.0).collect();
    println!(
        "| case | {} | {} |",
        BENCHES.join(" | "),
        titles.join(" | ")
    );
    println!("|---{}|", "|---".repeat(BENCHES.len() + RATIOS.len()));
    let dir = criterion_dir();
    let time = |t: Option<f64>| t.map_or("-".into(), seconds);
    // Per ratio column: the sum of the logarithms and how many cases had both times.
    let mut logs = [(0.0f64, 0usize); RATIOS.len()];
    for case in cases {
        let group = format!("ptx_{case}");
        let times = BENCHES.map(|b| median_s(&dir, &group, b));
        let mut cells: Vec<String> = times.iter().map(|t| time(*t)).collect();
        for ((_, num, den), log) in RATIOS.iter().zip(&mut logs) {
            cells.push(match (times[*num], times[*den]) {
                (Some(a), Some(b)) => {
                    *log = (log.0 + (a / b).ln(), log.1 + 1);
                    ratio(a / b)
                }
                _ => "-".into(),
            });
        }
        println!("| {case} | {} |", cells.join(" | "));
    }
    // The last row: no times, each ratio's geometric mean and (in parentheses) its count.
    let mut cells = vec![String::new(); BENCHES.len()];
    cells.extend(logs.iter().map(|&(sum, n)| match n {
        0 => "-".into(),
        n => format!("{} ({n})", ratio((sum / n as f64).exp())),
    }));
    println!("| geometric mean | {} |", cells.join(" | "));
}
