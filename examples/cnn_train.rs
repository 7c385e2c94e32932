//! Trains a small CNN on synthetic data with the DNN and BLAS operations of one platform.
//!
//! `cargo run --release --example cnn_train -- [--platform NAME] [--steps N] [--log-every N]
//! [--lr RATE]` (defaults: `host`, 300 steps, a line every 25, learning rate 0.01).
//!
//! The network, its data and one step are in `cnn/model.rs`: two convolutions with ReLU and a
//! dense layer to 4 classes under softmax cross-entropy, on 12×12 images of noise holding a
//! bright blob in the quadrant of their class, 8 images a step. The data and the initial
//! weights come from fixed seeds on the host, so every platform starts from the same numbers;
//! all the math runs on the device. Prints one line per `--log-every` steps,
//! `step <s> loss <l>` with `l` the mean loss of those steps, then `final_loss=<l>` (the last
//! line's loss) and `accuracy=<a>` (of the trained network on the first 64 images, read back
//! and evaluated on the host). Exits non-zero with a message on any error.

#[path = "cnn/model.rs"]
mod model;

use std::process::ExitCode;
use std::time::Instant;

use model::{Dataset, Net};
use streamexec::{PlatformManager, StreamExecutor};

/// The data set's seed.
const DATA_SEED: u64 = 2024;
/// The initial weights' seed.
const WEIGHT_SEED: u64 = 7;

/// Command-line options.
struct Options {
    platform: String,
    steps: usize,
    log_every: usize,
    learning_rate: f32,
}

const USAGE: &str = "usage: cnn_train [--platform NAME] [--steps N] [--log-every N] [--lr RATE]\n\
                     (platforms: host, opencl, cuda, hip; N ≥ 1, RATE > 0)";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        platform: PlatformManager::DEFAULT_PLATFORM.to_string(),
        steps: 300,
        log_every: 25,
        learning_rate: 0.01,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let count = || match value.parse::<usize>() {
            Ok(v) if v >= 1 => Ok(v),
            _ => Err(format!(
                "{flag} {value}: expected a whole number ≥ 1\n{USAGE}"
            )),
        };
        match flag.as_str() {
            "--platform" => o.platform = value.clone(),
            "--steps" => o.steps = count()?,
            "--log-every" => o.log_every = count()?,
            "--lr" => {
                o.learning_rate = match value.parse::<f32>() {
                    Ok(v) if v > 0.0 && v.is_finite() => v,
                    _ => return Err(format!("--lr {value}: expected a number > 0\n{USAGE}")),
                }
            }
            _ => return Err(format!("unknown argument `{flag}`\n{USAGE}")),
        }
    }
    Ok(o)
}

/// The share of the first `images` images that `params` classifies right, evaluated on the
/// host in f64 (an independent check that the device trained something).
fn accuracy(data: &Dataset, params: &[f32], images: usize) -> f64 {
    let right = (0..images)
        .filter(|&i| {
            let px = &data.images[i * model::SIDE * model::SIDE..][..model::SIDE * model::SIDE];
            let logits = model::reference_logits(params, px);
            let best = (0..model::CLASSES)
                .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
                .unwrap_or(0);
            best == data.labels[i]
        })
        .count();
    right as f64 / images as f64
}

fn run(o: &Options) -> streamexec::Result<()> {
    let exec: StreamExecutor =
        PlatformManager::platform_with_name(&o.platform)?.executor_for_device(0)?;
    let data = Dataset::new(DATA_SEED);
    let mut net = Net::new(
        &exec,
        &data,
        &model::initial_params(WEIGHT_SEED),
        o.learning_rate,
    )?;
    let mut stream = exec.create_stream()?;
    eprintln!(
        "cnn_train on {} ({}): {} steps of {} images, learning rate {}",
        o.platform,
        exec.description().name,
        o.steps,
        model::BATCH,
        o.learning_rate
    );
    let start = Instant::now();
    let mut last = None;
    for step in 0..o.steps {
        net.enqueue_step(&mut stream, step)?;
        let log = (step + 1).is_multiple_of(o.log_every) || step + 1 == o.steps;
        if log && let Some(loss) = net.take_mean_loss(&exec, &mut stream)? {
            println!("step {:4} loss {loss:.6}", step + 1);
            last = Some(loss);
        }
    }
    let elapsed = start.elapsed();
    let params = net.params(&exec)?;
    if let Some(loss) = last {
        println!("final_loss={loss:.6}");
    }
    println!("accuracy={:.4}", accuracy(&data, &params, 64));
    eprintln!(
        "{:.3} ms per step ({} steps in {:.3} s)",
        elapsed.as_secs_f64() * 1e3 / o.steps as f64,
        o.steps,
        elapsed.as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("error: {msg}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
