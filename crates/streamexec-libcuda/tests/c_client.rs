//! A client we did not write on the CPU libcuda: tests/c/driver_api.c, a C program on the
//! driver API (declarations of its own, no cuda.h), built here with the system C compiler
//! (`$CC`, else `cc`), linked with `-lcuda` against the library of `$STREAMEXEC_LIBCUDA_DIR`
//! (else `target/libcuda` of the workspace, where scripts/build-libcuda.sh puts it) and run with
//! that directory on `LD_LIBRARY_PATH`. The program checks every result itself; this test wants
//! exit status 0 and its `driver_api: OK` line.
//!
//! Without the library or a C compiler the test prints a note and passes, unless
//! `STREAMEXEC_REQUIRE` names `cuda`: then it fails.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the program may run before it counts as hung.
const TIME_LIMIT: Duration = Duration::from_secs(120);

const TEST: &str = "driver_api_c_program";

#[test]
fn driver_api_c_program() {
    let lib = support::libcuda_dir();
    if !lib.join("libcuda.so").is_file() {
        support::skip(
            TEST,
            &format!(
                "{} has no libcuda.so (build it with scripts/build-libcuda.sh, or set \
             STREAMEXEC_LIBCUDA_DIR)",
                lib.display()
            ),
        );
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let works = Command::new(&cc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        support::skip(TEST, &format!("no C compiler (`{cc}`; set CC)"));
        return;
    }

    let dir = std::env::temp_dir().join(format!("streamexec-driver-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("driver_api");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/driver_api.c");
    let built = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .args(["-lcuda", "-lm"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{cc} failed to build {}:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );

    // The library first on the path; the seed from support::rng, so a failure can be replayed.
    let seed: u64 = rand::RngExt::random(&mut support::rng("driver_api_c_program"));
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(p) if !p.is_empty() => {
            let mut v = lib.clone().into_os_string();
            v.push(":");
            v.push(p);
            v
        }
        _ => lib.clone().into_os_string(),
    };
    // Output to files (no pipe to fill while the test polls for the exit).
    let (out_path, err_path) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", path)
        .env("STREAMEXEC_TEST_SEED", seed.to_string())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let Some(status) = status else {
        panic!("driver_api ran past {TIME_LIMIT:?} and was killed:\n{stdout}{stderr}");
    };
    eprint!("{stdout}{stderr}");
    assert!(
        status.success(),
        "driver_api failed ({status}):\n{stdout}{stderr}"
    );
    assert!(
        stdout.lines().any(|l| l == "driver_api: OK"),
        "driver_api exited 0 without its OK line:\n{stdout}{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
