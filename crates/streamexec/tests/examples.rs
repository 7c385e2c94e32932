//! The examples do what the README says: the seed example prints `result = 165.5` on the host
//! platform, fails cleanly on a platform that is not there, and device_query lists all four.

#[path = "common/mod.rs"]
mod common;
use common::example;

#[test]
fn seed_example_prints_the_result_on_host() {
    let out = example("add_mystery_value").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
    let out = example("add_mystery_value")
        .args(["--platform", "Host"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
    // The host platform runs the PTX by default; `--native` swaps in the Rust kernel.
    let out = example("add_mystery_value")
        .args(["--native"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
}

#[test]
fn seed_example_fails_cleanly_where_a_platform_is_missing() {
    for info in streamexec::PlatformManager::platforms()
        .into_iter()
        .filter(|i| !i.is_available())
    {
        let out = example("add_mystery_value")
            .args(["--platform", info.name])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", info.name);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("unavailable") && !err.contains("panicked"),
            "{err}"
        );
    }
    let out = example("add_mystery_value")
        .args(["--platform", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no platform named `nope`"));
}

#[test]
fn device_query_lists_every_platform() {
    let out = example("device_query").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for name in ["host", "opencl", "cuda", "hip"] {
        assert!(
            text.contains(&format!("Platform {name}")),
            "{name} missing from:\n{text}"
        );
    }
    assert!(
        text.contains("Platform host: available, 1 device(s)"),
        "{text}"
    );
    assert!(text.contains("max threads per block:   1024"), "{text}");
    // The plugin report of each available device, one line per family.
    assert!(
        text.contains("    blas: gemm crate (Plugin::Auto: "),
        "{text}"
    );
    assert!(
        text.contains(
            "    dnn: built-in (im2col + gemm crate) (the platform's only implementation)"
        ),
        "{text}"
    );
}

#[test]
fn a_missing_opencl_driver_is_reported_not_a_crash() {
    // An ICD loader with no vendor files finds no OpenCL platform.
    let out = example("add_mystery_value")
        .args(["--platform", "opencl"])
        .env("OCL_ICD_VENDORS", "/nonexistent-streamexec-test")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("platform `opencl` is unavailable") && !err.contains("panicked"),
        "{err}"
    );
    let out = example("device_query")
        .env("OCL_ICD_VENDORS", "/nonexistent-streamexec-test")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("Platform opencl (cargo feature `opencl`): unavailable")
    );
}

#[test]
fn seed_example_runs_on_every_available_platform() {
    for info in streamexec::PlatformManager::platforms()
        .into_iter()
        .filter(|i| i.is_available() && !common::TEMPLATE_PLATFORMS.contains(&i.name))
    {
        let out = example("add_mystery_value")
            .args(["--platform", info.name])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "result = 165.5\n",
            "{}",
            info.name
        );
    }
}

#[test]
fn canned_ops_agrees_across_platforms() {
    let mut philox_lines = Vec::new();
    for info in streamexec::PlatformManager::platforms()
        .into_iter()
        .filter(|i| i.is_available() && (i.name == "host" || i.name == "opencl"))
    {
        let out = example("canned_ops")
            .args(["--platform", info.name])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{}: {text}{}",
            info.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{}: {text}", info.name);
        let err: f64 = lines[0]
            .strip_prefix("gemm_max_rel_err=")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{}: {}", info.name, lines[0]));
        assert!(err < 1e-4 && err > 0.0, "{}: {err}", info.name);
        // Random123's Philox4x32-10 with key = LE words of bytes 0..8, counter words 2-3 = LE
        // words of bytes 8..16, counter words 0-1 = 0, 1.
        let words = |c: u32| {
            streamexec::philox::philox4x32_10(
                [c, 0, 0x0b0a_0908, 0x0f0e_0d0c],
                [0x0302_0100, 0x0706_0504],
            )
        };
        let want: Vec<String> = [words(0), words(1)]
            .concat()
            .iter()
            .map(|w| format!("{w:08x}"))
            .collect();
        assert_eq!(lines[1], format!("philox_u32={}", want.join(",")));
        assert!(lines[2].starts_with("uniform_mean=0.50"), "{}", lines[2]);
        assert!(lines[3].starts_with("gaussian_mean="), "{}", lines[3]);
        philox_lines.push(lines[1].to_string());
    }
    assert!(!philox_lines.is_empty());
}

#[test]
fn rpc_hello_prints_through_the_server_on_host() {
    let out = example("rpc_hello")
        .args(["--platform", "host"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello world!\nanswer=42 x=2.50\n"
    );
}

#[test]
fn rpc_hello_prints_through_the_server_on_opencl() {
    let required = common::required_platforms().iter().any(|p| p == "opencl");
    let available = streamexec::PlatformManager::platforms()
        .into_iter()
        .any(|i| i.name == "opencl" && i.is_available());
    if !available {
        assert!(
            !required,
            "STREAMEXEC_REQUIRE names `opencl` but it is unavailable"
        );
        eprintln!("rpc_hello on opencl: skipping, the opencl platform is unavailable");
        return;
    }
    let out = example("rpc_hello")
        .args(["--platform", "opencl"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello world!\nanswer=42 x=2.50\n"
    );
}

/// The RPC program of `rpc_hello --platform cuda` on the host platform's PTX engine, in both
/// layouts and at both optimisation levels: the host executor fills in the module's
/// `__llvm_rpc_client` and serves the engine's warps, which print exactly what they print on
/// cuda; four blocks of two warps at once all get served.
#[test]
fn rpc_hello_ptx_prints_through_the_server_on_the_host_ptx_engine() {
    for opt in ["O0", "O3"] {
        for variant in ["", ".pre_doorbell"] {
            let file = format!("kernels/ptx/rpc_hello{variant}.{opt}.ptx");
            let (code, out, err) = run_kernel(&[
                "--platform",
                "host",
                "--ptx",
                &file,
                "--kernel",
                "hello",
                "--grid",
                "1",
                "--block",
                "32",
                "f32:2.5",
            ]);
            assert_eq!(code, Some(0), "{file}: {err}");
            assert_eq!(out, cuda_hello_lines(), "{file}");
        }
    }
    let (code, out, err) = run_kernel(&[
        "--platform",
        "host",
        "--ptx",
        "kernels/ptx/rpc_hello.O3.ptx",
        "--kernel",
        "hello",
        "--grid",
        "4",
        "--block",
        "64",
        "f32:-0.75",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let mut want = Vec::new();
    for _ in 0..4 {
        want.push("Hello world!".to_string());
        want.push("answer=42 x=-0.75".to_string());
        for t in 0..64 {
            want.push(format!(
                "lane {t:2} of the warp, one RPC port for all 32: {}, x*lane={:.2}",
                if t % 2 == 1 { "odd" } else { "even" },
                -0.75 * f64::from(t)
            ));
        }
    }
    let mut got: Vec<String> = out.lines().map(String::from).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

/// False (after a note) where platform `name` is missing and not required; a missing platform
/// that `STREAMEXEC_REQUIRE` names fails the test.
fn platform_available(name: &str, what: &str) -> bool {
    let available = streamexec::PlatformManager::platforms()
        .into_iter()
        .any(|i| i.name == name && i.is_available());
    let required = common::required_platforms().iter().any(|p| p == name);
    assert!(
        available || !required,
        "STREAMEXEC_REQUIRE names `{name}` but it is unavailable"
    );
    if !available {
        eprintln!("{what}: skipping, the {name} platform is unavailable");
    }
    available
}

/// What `rpc_hello --platform cuda` prints: lane 0's greeting, then one line per lane of the
/// warp (`kernels/rpc_hello.cu`).
fn cuda_hello_lines() -> String {
    let mut want = String::from("Hello world!\nanswer=42 x=2.50\n");
    for lane in 0..32 {
        want += &format!(
            "lane {lane:2} of the warp, one RPC port for all 32: {}, x*lane={:.2}\n",
            if lane % 2 == 1 { "odd" } else { "even" },
            2.5 * f64::from(lane)
        );
    }
    want
}

/// CUDA C compiled by clang with `include/streamexec_rpc.h`, in both RPC layouts: the executor
/// finds `__llvm_rpc_client`, starts its server in the layout the symbol's size names, and the
/// device's 32 lanes print through it (on the CPU libcuda, `target/libcuda`).
#[test]
fn rpc_hello_prints_through_the_server_on_cuda_in_both_layouts() {
    if !platform_available("cuda", "rpc_hello on cuda") {
        return;
    }
    let want = cuda_hello_lines();
    let lines: Vec<&str> = want.lines().collect();
    assert_eq!(lines.len(), 34);
    assert_eq!(
        lines[2],
        "lane  0 of the warp, one RPC port for all 32: even, x*lane=0.00"
    );
    assert_eq!(
        lines[33],
        "lane 31 of the warp, one RPC port for all 32: odd, x*lane=77.50"
    );
    for (flags, layout) in [
        (&[][..], "Current"),
        (&["--pre-doorbell"][..], "PreDoorbell"),
    ] {
        let out = example("rpc_hello")
            .args(["--platform", "cuda"])
            .args(flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{layout}: {err}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{layout}");
        assert!(
            err.contains(&format!("RPC server runs the {layout} layout, 32 lanes")),
            "{layout}: {err}"
        );
    }
}

#[test]
fn seed_example_prints_the_result_on_cuda() {
    if !platform_available("cuda", "add_mystery_value on cuda") {
        return;
    }
    let out = example("add_mystery_value")
        .args(["--platform", "cuda"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "result = 165.5\n");
}

// ---- examples/cnn_train.rs (tests/examples/cnn_train.rs) ----

#[path = "examples/cnn_train.rs"]
mod cnn_train;

// ---- examples/run_kernel.rs ----

/// Runs `run_kernel` with `args`: (exit code, stdout, stderr).
fn run_kernel<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> (Option<i32>, String, String) {
    let out = example("run_kernel").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// False (after a note) where the opencl platform is missing and not required.
fn opencl_available(what: &str) -> bool {
    platform_available("opencl", what)
}

/// x0 = seed, x(k+1) = (1103515245 x(k) + 12345) mod 2^31: x(1..=n).
fn lcg(seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed as u128;
    (0..n)
        .map(|_| {
            x = (1103515245 * x + 12345) % (1 << 31);
            x as u64
        })
        .collect()
}

const VADD_CL: &str = "kernels/cl/vadd.cl";

fn cl_args<'a>(kernel: &'a str, grid: &'a str, block: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--platform",
        "opencl",
        "--cl",
        VADD_CL,
        "--kernel",
        kernel,
        "--grid",
        grid,
        "--block",
        block,
    ];
    v.extend_from_slice(rest);
    v
}

#[test]
fn run_kernel_prints_out_buffers_for_every_init_on_opencl() {
    if !opencl_available("run_kernel") {
        return;
    }
    // iota + fill, 7 elements over 2 groups of 4 (one work-item idle); arg1 is not printed.
    let (code, out, err) = run_kernel(&cl_args(
        "vadd_i32",
        "2",
        "4",
        &[
            "out:buf:i32:7:iota",
            "buf:i32:7:fill:-3",
            "out:buf:i32:7:zero",
            "i32:7",
        ],
    ));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "arg0: 0 1 2 3 4 5 6\narg2: -3 -2 -1 0 1 2 3\n");
    // lcg (x / 2^31 for floats, printed with `{}`) + mod, f32.
    let (code, out, err) = run_kernel(&cl_args(
        "vadd_f32",
        "1",
        "8",
        &[
            "out:buf:f32:5:lcg:1",
            "buf:f32:5:mod:3",
            "out:buf:f32:5:fill:0.25",
            "i32:5",
        ],
    ));
    assert_eq!(code, Some(0), "{err}");
    let xs: Vec<f32> = lcg(1, 5)
        .iter()
        .map(|&x| (x as f64 / 2147483648.0) as f32)
        .collect();
    let sums: Vec<f32> = xs
        .iter()
        .enumerate()
        .map(|(i, x)| x + (i % 3) as f32)
        .collect();
    let show = |v: &[f32]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(out, format!("arg0: {}\narg2: {}\n", show(&xs), show(&sums)));
    // The same five values, written out: x(1) = 1103527590, x(1)/2^31 = 0.51387...
    assert!(out.starts_with("arg0: 0.51387006 0.1757413 0.3086515 0.53453386 0.9476279\n"));
    // lcg integers are x mod 1000, for every integer type; f64 prints full precision.
    for ty in ["i32", "u32", "i64", "u64"] {
        let bufs = [
            format!("out:buf:{ty}:6:lcg:42"),
            format!("out:buf:{ty}:6:mod:4"),
            format!("out:buf:{ty}:6:zero"),
        ];
        let kernel = format!("vadd_{ty}");
        let mut rest: Vec<&str> = bufs.iter().map(String::as_str).collect();
        rest.push("i32:5");
        let (code, out, err) = run_kernel(&cl_args(&kernel, "1", "8", &rest));
        assert_eq!(code, Some(0), "{ty}: {err}");
        assert_eq!(
            out, "arg0: 27 264 753 806 735 532\narg1: 0 1 2 3 0 1\narg2: 27 265 755 809 735 0\n",
            "{ty}"
        );
    }
    let (code, out, err) = run_kernel(&cl_args(
        "vadd_f64",
        "1",
        "4",
        &[
            "out:buf:f64:3:lcg:42",
            "buf:f64:3:iota",
            "out:buf:f64:3:zero",
            "i32:3",
        ],
    ));
    assert_eq!(code, Some(0), "{err}");
    let xs: Vec<f64> = lcg(42, 3)
        .iter()
        .map(|&x| x as f64 / 2147483648.0)
        .collect();
    assert_eq!(
        out,
        format!(
            "arg0: {} {} {}\narg2: {} {} {}\n",
            xs[0],
            xs[1],
            xs[2],
            xs[0],
            xs[1] + 1.0,
            xs[2] + 2.0
        )
    );
    assert!(out.starts_with("arg0: 0.5823075897060335 0.5198187492787838 0.46597642498090863\n"));
}

#[test]
fn run_kernel_passes_every_scalar_type_and_local_memory_on_opencl() {
    if !opencl_available("run_kernel") {
        return;
    }
    let (code, out, err) = run_kernel(&cl_args(
        "scalars",
        "1",
        "3",
        &[
            "out:buf:i32:3:zero",
            "out:buf:u32:3:zero",
            "out:buf:i64:3:zero",
            "out:buf:u64:3:zero",
            "out:buf:f32:3:zero",
            "out:buf:f64:3:zero",
            "i32:-5",
            "u32:4294967290",
            "i64:-9000000000",
            "u64:18446744073709551610",
            "f32:1.5",
            "f64:0.1",
        ],
    ));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        format!(
            "arg0: -5 -4 -3\narg1: 4294967290 4294967291 4294967292\n\
             arg2: -9000000000 -8999999999 -8999999998\n\
             arg3: 18446744073709551610 18446744073709551611 18446744073709551612\n\
             arg4: 1.5 2.5 3.5\narg5: {} {} {}\n",
            0.1f64,
            0.1f64 + 1.0,
            0.1f64 + 2.0
        )
    );
    // --shared-bytes: the __local argument after the command-line ones; groups of 4 reversed,
    // the partial last group (4..7) only where the mirrored element exists.
    let (code, out, err) = run_kernel(&cl_args(
        "reverse_groups",
        "2",
        "4",
        &["--shared-bytes", "16", "out:buf:i32:7:iota", "i32:7"],
    ));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "arg0: 3 2 1 0 4 6 5\n");
}

#[test]
fn run_kernel_rejects_bad_command_lines_with_a_message() {
    let base = |rest: &[&'static str]| cl_args("vadd_i32", "1", "4", rest);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (base(&["out:buf:i33:4:iota"]), "unknown type `i33`"),
        (base(&["q16:4"]), "unknown type `q16`"),
        (base(&["out:buf:i32:4:ramp"]), "unknown INIT `ramp`"),
        (base(&["buf:i32:4:fill:x"]), "`x` is not a valid i32 value"),
        (base(&["buf:i32:4:mod:0"]), "mod:0"),
        (base(&["buf:i32:4:lcg:-1"]), "lcg seed `-1`"),
        (base(&["buf:i32:0:zero"]), "N = `0`"),
        (base(&["buf:i32:4"]), "expected [out:]buf:T:N:INIT"),
        (base(&["f32:abc"]), "`abc` is not a valid f32 value"),
        (base(&["out:i32:3"]), "`out:` applies to buffers"),
        (base(&["--grid", "1,2,3,4"]), "expected X[,Y[,Z]]"),
        (base(&["--frobnicate"]), "unknown option `--frobnicate`"),
        (
            vec![
                "--platform",
                "opencl",
                "--cl",
                VADD_CL,
                "--grid",
                "1",
                "--block",
                "1",
            ],
            "missing --kernel NAME",
        ),
        (
            vec![
                "--platform",
                "opencl",
                "--kernel",
                "k",
                "--grid",
                "1",
                "--block",
                "1",
            ],
            "missing --ptx FILE or --cl FILE",
        ),
        (
            base(&["--ptx", "kernels/ptx/corpus_basic.O3.ptx"]),
            "give one of --ptx and --cl, not both",
        ),
        (
            vec![
                "--cl", VADD_CL, "--kernel", "k", "--grid", "1", "--block", "1",
            ],
            "missing --platform NAME",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = run_kernel(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            err.contains(want) && err.contains("usage: run_kernel") && !err.contains("panicked"),
            "{args:?}: wanted `{want}` in:\n{err}"
        );
    }
}

#[test]
fn run_kernel_reports_load_and_launch_errors() {
    let (code, _, err) = run_kernel(&[
        "--platform",
        "nope",
        "--cl",
        VADD_CL,
        "--kernel",
        "k",
        "--grid",
        "1",
        "--block",
        "1",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no platform named `nope`"), "{err}");
    if !opencl_available("run_kernel errors") {
        return;
    }
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            cl_args("nope", "1", "1", &["i32:1"]),
            "no kernel named `nope`",
        ),
        (
            cl_args("vadd_i32", "1", "4", &["i32:1"]),
            "declares 1 parameter(s) but the OpenCL kernel takes 4 parameter(s)",
        ),
        (
            cl_args(
                "vadd_i32",
                "1,0",
                "4",
                &[
                    "buf:i32:4:iota",
                    "buf:i32:4:iota",
                    "out:buf:i32:4:zero",
                    "i32:4",
                ],
            ),
            "empty launch",
        ),
        (
            cl_args(
                "vadd_i32",
                "1",
                "4",
                &[
                    "--race-check",
                    "buf:i32:4:iota",
                    "buf:i32:4:iota",
                    "out:buf:i32:4:zero",
                    "i32:4",
                ],
            ),
            "`set_race_check` is not supported",
        ),
        (
            vec![
                "--platform",
                "opencl",
                "--cl",
                "/nonexistent/k.cl",
                "--kernel",
                "k",
                "--grid",
                "1",
                "--block",
                "1",
            ],
            "/nonexistent/k.cl",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = run_kernel(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(
            err.starts_with("run_kernel: ") && err.contains(want) && !err.contains("panicked"),
            "{args:?}: wanted `{want}` in:\n{err}"
        );
    }
}

// ---- run_kernel --ptx on the host platform: needs the host PTX engine (issue 7) ----

/// `--ptx` on host with the committed corpus PTX: vector add at -O0 and -O3, dynamic shared
/// memory (`--shared-bytes`) and the race checker (`--race-check`).
#[test]
fn run_kernel_ptx_on_host() {
    for opt in ["O0", "O3"] {
        let basic = format!("kernels/ptx/corpus_basic.{opt}.ptx");
        let sync = format!("kernels/ptx/corpus_sync.{opt}.ptx");
        let faults = format!("kernels/ptx/corpus_faults.{opt}.ptx");
        let host = |file: &str, kernel: &str, grid: &str, block: &str, rest: &[&str]| {
            let mut v: Vec<String> = [
                "--platform",
                "host",
                "--ptx",
                file,
                "--kernel",
                kernel,
                "--grid",
                grid,
                "--block",
                block,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            v.extend(rest.iter().map(|s| s.to_string()));
            run_kernel(&v)
        };
        let (code, out, err) = host(
            &basic,
            "vadd_i32",
            "2",
            "4",
            &[
                "out:buf:i32:7:iota",
                "buf:i32:7:fill:-3",
                "out:buf:i32:7:zero",
                "i32:7",
            ],
        );
        assert_eq!(code, Some(0), "{opt}: {err}");
        assert_eq!(
            out, "arg0: 0 1 2 3 4 5 6\narg2: -3 -2 -1 0 1 2 3\n",
            "{opt}"
        );

        let (code, out, err) = host(
            &basic,
            "vadd_f64",
            "1",
            "8",
            &[
                "buf:f64:3:lcg:42",
                "buf:f64:3:iota",
                "out:buf:f64:3:zero",
                "i32:3",
            ],
        );
        assert_eq!(code, Some(0), "{opt}: {err}");
        let xs: Vec<f64> = lcg(42, 3)
            .iter()
            .map(|&x| x as f64 / 2147483648.0)
            .collect();
        assert_eq!(
            out,
            format!("arg2: {} {} {}\n", xs[0], xs[1] + 1.0, xs[2] + 2.0)
        );

        // block_reduce_f32_dyn: 8 threads, 8 floats of dynamic shared memory; 0+1+...+7 = 28,
        // 8+...+15 = 92, 16+...+19 = 70.
        let (code, out, err) = host(
            &sync,
            "block_reduce_f32_dyn",
            "3",
            "8",
            &[
                "--shared-bytes",
                "32",
                "buf:f32:20:iota",
                "out:buf:f32:3:zero",
                "i32:20",
            ],
        );
        assert_eq!(code, Some(0), "{opt}: {err}");
        assert_eq!(out, "arg1: 28 92 70\n", "{opt}");

        // The race checker flags the racy kernel and passes its atomic twin (64 threads).
        let racy = ["--race-check", "buf:i32:64:fill:1", "out:buf:i32:1:zero"];
        let (code, out, err) = host(&faults, "racy_shared_sum", "1", "64", &racy);
        assert_eq!(code, Some(1), "{opt}: {out}{err}");
        assert!(
            err.contains("data race") && err.contains("racy_shared_sum"),
            "{opt}: {err}"
        );
        let (code, out, err) = host(&faults, "atomic_shared_sum", "1", "64", &racy);
        assert_eq!(code, Some(0), "{opt}: {err}");
        assert_eq!(out, "arg1: 64\n", "{opt}");
    }
}

// ---- run_kernel --ptx on the cuda platform (the CPU libcuda, `target/libcuda`) ----

/// `run_kernel --platform cuda PTX-FILE KERNEL GRID BLOCK ARGS...`: (exit code, stdout, stderr).
fn run_kernel_cuda(
    file: &str,
    kernel: &str,
    grid: &str,
    block: &str,
    rest: &[&str],
) -> (Option<i32>, String, String) {
    let mut v = vec![
        "--platform",
        "cuda",
        "--ptx",
        file,
        "--kernel",
        kernel,
        "--grid",
        grid,
        "--block",
        block,
    ];
    v.extend_from_slice(rest);
    run_kernel(&v)
}

/// `--ptx` on cuda with the committed corpus PTX at -O0 and -O3: vector adds, dynamic shared
/// memory, shared atomics, a store past a small buffer (tolerated inside its granule, a fault
/// with the sticky launch error under memcheck) and the race checker refused; a
/// module with `__llvm_rpc_client` launched untyped is an RPC launch (both layouts).
#[test]
fn run_kernel_ptx_on_cuda() {
    if !platform_available("cuda", "run_kernel on cuda") {
        return;
    }
    for opt in ["O0", "O3"] {
        let basic = format!("kernels/ptx/corpus_basic.{opt}.ptx");
        let sync = format!("kernels/ptx/corpus_sync.{opt}.ptx");
        let faults = format!("kernels/ptx/corpus_faults.{opt}.ptx");
        let vadd = [
            "out:buf:i32:7:iota",
            "buf:i32:7:fill:-3",
            "out:buf:i32:7:zero",
            "i32:7",
        ];
        let (code, out, err) = run_kernel_cuda(&basic, "vadd_i32", "2", "4", &vadd);
        assert_eq!(code, Some(0), "{opt}: {err}");
        assert_eq!(
            out, "arg0: 0 1 2 3 4 5 6\narg2: -3 -2 -1 0 1 2 3\n",
            "{opt}"
        );

        let f64s = [
            "buf:f64:3:lcg:42",
            "buf:f64:3:iota",
            "out:buf:f64:3:zero",
            "i32:3",
        ];
        let (code, out, err) = run_kernel_cuda(&basic, "vadd_f64", "1", "8", &f64s);
        assert_eq!(code, Some(0), "{opt}: {err}");
        let xs: Vec<f64> = lcg(42, 3)
            .iter()
            .map(|&x| x as f64 / 2147483648.0)
            .collect();
        assert_eq!(
            out,
            format!("arg2: {} {} {}\n", xs[0], xs[1] + 1.0, xs[2] + 2.0),
            "{opt}"
        );

        // 0+...+7 = 28, 8+...+15 = 92, 16+...+19 = 70.
        let reduce = [
            "--shared-bytes",
            "32",
            "buf:f32:20:iota",
            "out:buf:f32:3:zero",
            "i32:20",
        ];
        let (code, out, err) = run_kernel_cuda(&sync, "block_reduce_f32_dyn", "3", "8", &reduce);
        assert_eq!(code, Some(0), "{opt}: {err}");
        assert_eq!(out, "arg1: 28 92 70\n", "{opt}");

        let sum = ["buf:i32:64:fill:1", "out:buf:i32:1:zero"];
        let (code, out, err) = run_kernel_cuda(&faults, "atomic_shared_sum", "1", "64", &sum);
        assert_eq!(code, Some(0), "{opt}: {err}");
        assert_eq!(out, "arg1: 64\n", "{opt}");

        // 4 threads store into 2 elements: inside the allocation's 256-byte granule, which a
        // GPU (and the CPU libcuda by default) tolerates; with the libcuda's memcheck mode the
        // launch fails with the sticky error.
        let (code, out, err) =
            run_kernel_cuda(&faults, "oob_store", "1", "4", &["out:buf:i32:2:zero"]);
        assert_eq!(code, Some(0), "{opt}: {out}{err}");
        assert_eq!(out, "arg0: 0 1\n", "{opt}");
        let memcheck = example("run_kernel")
            .env("STREAMEXEC_CUDA_MEMCHECK", "1")
            .args([
                "--platform",
                "cuda",
                "--ptx",
                faults.as_str(),
                "--kernel",
                "oob_store",
                "--grid",
                "1",
                "--block",
                "4",
                "out:buf:i32:2:zero",
            ])
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&memcheck.stdout),
            String::from_utf8_lossy(&memcheck.stderr),
        );
        assert_eq!(memcheck.status.code(), Some(1), "{opt}: {out}{err}");
        assert!(
            out.is_empty() && err.contains("run_kernel: ") && err.contains("ILLEGAL_ADDRESS"),
            "{opt}: {err}"
        );

        let racy = ["--race-check", "buf:i32:64:fill:1", "out:buf:i32:1:zero"];
        let (code, _, err) = run_kernel_cuda(&faults, "racy_shared_sum", "1", "64", &racy);
        assert_eq!(code, Some(1), "{opt}: {err}");
        assert!(
            err.contains("`set_race_check` is not supported"),
            "{opt}: {err}"
        );

        // The RPC program of rpc_hello, launched untyped: one warp prints through the server.
        for variant in ["", ".pre_doorbell"] {
            let file = format!("kernels/ptx/rpc_hello{variant}.{opt}.ptx");
            let (code, out, err) = run_kernel_cuda(&file, "hello", "1", "32", &["f32:2.5"]);
            assert_eq!(code, Some(0), "{file}: {err}");
            assert_eq!(out, cuda_hello_lines(), "{file}");
        }
    }
    // OpenCL C is not a format the cuda platform loads.
    let (code, _, err) = run_kernel(&[
        "--platform",
        "cuda",
        "--cl",
        VADD_CL,
        "--kernel",
        "vadd_i32",
        "--grid",
        "1",
        "--block",
        "1",
        "i32:1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cuda cannot load kernel `vadd_i32`") && err.contains("OpenCL C text"),
        "{err}"
    );
}
