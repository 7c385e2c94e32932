//! `examples/cnn_train.rs`: the loss falls, the trained network classifies its images (checked
//! by the example's f64 host forward pass), and host, OpenCL and CUDA agree.

use super::{example, platform_available};

/// Steps of each run and the interval of its loss lines: 3 lines, seconds per platform.
const STEPS: &str = "60";
const LOG_EVERY: &str = "20";

/// Agreement of each logged loss with the host's, relative: float rounding differs between the
/// platforms' kernels (about 1e-7 relative after 300 steps here), a wrong gradient or update
/// differs by far more.
const REL_TOL: f64 = 1e-3;

/// What one run printed: the logged mean losses, `final_loss` and `accuracy`.
struct Run {
    losses: Vec<f64>,
    final_loss: f64,
    accuracy: f64,
}

fn cnn_train(platform: &str) -> Run {
    let out = example("cnn_train")
        .args([
            "--platform",
            platform,
            "--steps",
            STEPS,
            "--log-every",
            LOG_EVERY,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{platform}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value = |prefix: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{platform}: no `{prefix}` line in:\n{text}"))
    };
    let losses: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with("step "))
        .map(|l| {
            l.rsplit_once("loss ")
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{platform}: bad line `{l}`"))
        })
        .collect();
    Run {
        losses,
        final_loss: value("final_loss="),
        accuracy: value("accuracy="),
    }
}

#[test]
fn cnn_train_loss_falls_the_same_way_on_every_platform() {
    let mut runs = vec![("host", cnn_train("host"))];
    for name in ["opencl", "cuda"] {
        if platform_available(name, "cnn_train") {
            runs.push((name, cnn_train(name)));
        }
    }
    for (name, run) in &runs {
        let l = &run.losses;
        assert_eq!(l.len(), 3, "{name}: {l:?}");
        // The first 20 steps start from chance (ln 4 ≈ 1.386).
        assert!(l[0] > 0.8 && l[0] < 1.6, "{name}: {l:?}");
        assert!(l[1] < l[0] && l[2] < l[1], "{name}: not falling: {l:?}");
        assert!(l[2] < 0.5 * l[0], "{name}: fell too little: {l:?}");
        assert_eq!(run.final_loss, l[2], "{name}");
        assert!(run.accuracy >= 0.9, "{name}: accuracy {}", run.accuracy);
    }
    let host = &runs[0].1.losses;
    for (name, run) in &runs[1..] {
        for (a, h) in run.losses.iter().zip(host) {
            assert!(
                (a - h).abs() <= REL_TOL * h.abs(),
                "{name} {:?} vs host {host:?}",
                run.losses
            );
        }
    }
}
