//! The soak test: for about a minute (`STREAMEXEC_SOAK_SECS`, default 60, shared among the
//! platforms), several threads per platform each drive two streams that copy, launch, record
//! and wait on events, and now and then enqueue a launch that must fail; every result is checked
//! against a Rust reference on random inputs with poisoned outputs. Afterwards the executor's
//! allocator holds what it held before the run and the process has as many threads as before.

#[path = "common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{Error, MultiKernelLoaderSpec, StreamExecutor};

use common::{POISON_U32, random_u32s, rng};

/// The conformance suite's kernels (only `affine` is used here).
#[path = "conformance/kernels.rs"]
#[allow(dead_code)]
mod kernels;

use kernels::Affine;

/// `x[i] = x[i] * mul + add` for `i < n`: PTX (the host platform runs it on the PTX JIT) and
/// OpenCL C, no native host kernel (the generated spec as it is).
fn affine() -> MultiKernelLoaderSpec {
    kernels::generated::affine::spec()
}

/// Threads driving streams on each platform at once.
const WORKERS: usize = 3;
/// Elements past the kernel's range in every buffer, which must stay poisoned.
const PAD: usize = 17;

#[derive(Default)]
struct Counts {
    launches: AtomicU64,
    copies: AtomicU64,
    events: AtomicU64,
    failures: AtomicU64,
    checked: AtomicU64,
}

impl Counts {
    fn add(&self, c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// The process's thread count (Linux: `/proc/self/status`).
fn threads_now() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Threads: line")
}

fn ck<T>(r: Result<T, Error>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// One round on two streams: poison a padded buffer, copy random data in, transform it on
/// stream 1, record an event, wait for it on stream 2, transform again, copy out, check.
fn round(
    exec: &StreamExecutor,
    k: &Affine,
    r: &mut StdRng,
    streams: &mut [streamexec::Stream; 2],
    event: &streamexec::Event,
    counts: &Counts,
) -> Result<(), String> {
    let n = r.random_range(1..40_000usize);
    let x = random_u32s(r, n, u32::MAX);
    let (m1, a1, m2, a2): (u32, u32, u32, u32) = r.random();
    let mut host_in = ck(exec.allocate_host::<u32>(n), "allocate_host")?;
    host_in.as_mut_slice().copy_from_slice(&x);
    let mut host_out = ck(exec.allocate_host::<u32>(n + PAD), "allocate_host")?;
    host_out.as_mut_slice().fill(!POISON_U32);
    let dev = ck(exec.allocate_array::<u32>(n + PAD), "allocate_array")?;
    let head = ck(dev.slice(..n), "slice")?;
    let threads = [32u32, 64, 128, 256][r.random_range(0..4)];
    let blocks = (n as u32).div_ceil(threads);
    let [s1, s2] = streams;
    s1.then_memset32(&dev, POISON_U32)
        .then_memcpy_h2d(&host_in, head)
        .then_launch(threads, blocks, k, (dev.ptr(), n as u32, m1, a1))
        .then_record_event(event);
    s2.then_wait_for(event)
        .then_launch(threads, blocks, k, (dev.ptr(), n as u32, m2, a2))
        .then_memcpy_d2h(&dev, &mut host_out);
    ck(s2.block_host_until_done(), "stream 2")?;
    ck(s1.block_host_until_done(), "stream 1")?;
    counts.add(&counts.launches, 2);
    counts.add(&counts.copies, 3);
    counts.add(&counts.events, 1);
    let got = host_out.as_slice();
    for (i, v) in x.iter().enumerate() {
        let want = v.wrapping_mul(m1).wrapping_add(a1);
        let want = want.wrapping_mul(m2).wrapping_add(a2);
        if got[i] != want {
            return Err(format!(
                "element {i} of {n}: got {:#x}, want {want:#x}",
                got[i]
            ));
        }
    }
    if let Some(i) = got[n..].iter().position(|v| *v != POISON_U32) {
        return Err(format!("padding element {} of {n} was written", n + i));
    }
    counts.add(&counts.checked, (n + PAD) as u64);
    Ok(())
}

/// A launch that must fail, on a fresh stream: a pointer to freed memory, a block larger than
/// the device allows, or (host and OpenCL) a kernel writing past its buffer. The
/// stream must report it, and the other streams go on.
fn failing(exec: &StreamExecutor, k: &Affine, which: u32, counts: &Counts) -> Result<(), String> {
    let mut s = ck(exec.create_stream(), "create_stream")?;
    let (what, want): (&str, &[&str]) = match which % 3 {
        0 => {
            let gone = ck(exec.allocate_array::<u32>(64), "allocate_array")?;
            let p = gone.ptr();
            drop(gone);
            s.then_launch(64u32, 1u32, k, (p, 64, 3, 1));
            ("a pointer to freed memory", &["freed", "not live"])
        }
        1 => {
            let mem = ck(exec.allocate_array::<u32>(64), "allocate_array")?;
            let too_many = exec.description().max_threads_per_block.saturating_add(1);
            s.then_launch(too_many, 1u32, k, (mem.ptr(), 64, 3, 1));
            ("a block over the device's limit", &["thread"])
        }
        // A device fault is sticky for a CUDA context; host and OpenCL (red zones on CPU
        // devices) report it on the stream. 256 elements: 1 KiB past the end, inside
        // OpenCL's red zone.
        _ if exec.platform_name() != "cuda" => {
            let mem = ck(exec.allocate_array::<u32>(64), "allocate_array")?;
            s.then_launch(64u32, 5u32, k, (mem.ptr(), 64 + 256, 3, 1));
            (
                "a kernel writing past its buffer",
                &["out-of-bounds", "out of bounds"],
            )
        }
        _ => return Ok(()),
    };
    match s.block_host_until_done() {
        Ok(()) => Err(format!("{what}: the stream reported no error")),
        Err(e) => {
            let text = e.to_string().to_lowercase();
            if !want.iter().any(|w| text.contains(w)) {
                return Err(format!("{what}: unexpected error `{e}`"));
            }
            counts.add(&counts.failures, 1);
            Ok(())
        }
    }
}

/// One worker: rounds until `deadline`, a failing launch every fifth round.
fn worker(
    exec: &StreamExecutor,
    k: &Affine,
    seed: u64,
    deadline: Instant,
) -> Result<Counts, String> {
    let counts = Counts::default();
    let mut r = rng(&format!("soak {} worker {seed}", exec.platform_name()));
    let mut streams = [
        ck(exec.create_stream(), "create_stream")?,
        ck(exec.create_stream(), "create_stream")?,
    ];
    let event = ck(exec.create_event(), "create_event")?;
    let mut i = 0u32;
    loop {
        round(exec, k, &mut r, &mut streams, &event, &counts)?;
        if i % 5 == 4 {
            failing(exec, k, i / 5 + seed as u32, &counts)?;
        }
        i += 1;
        if Instant::now() >= deadline {
            return Ok(counts);
        }
    }
}

/// The leak check's instrument: `allocator_stats` follows allocations and frees exactly, and
/// memory leaked with `mem::forget` stays counted. (Here, not in the conformance suite: its
/// tests run in parallel on shared executors.)
fn allocator_stats_count_what_is_held(exec: &StreamExecutor) {
    let mut r = rng("allocator_stats_count_what_is_held");
    let (n1, n2) = (
        r.random_range(1..50_000usize),
        r.random_range(1..50_000usize),
    );
    let s0 = exec.allocator_stats();
    let a = exec.allocate_array::<u32>(n1).unwrap();
    let b = exec.allocate_array::<u64>(n2).unwrap();
    let s1 = exec.allocator_stats();
    let (ab, bb) = (4 * n1 as u64, 8 * n2 as u64);
    assert_eq!(
        s1.bytes_in_use,
        s0.bytes_in_use + ab + bb,
        "{s0:?} -> {s1:?}"
    );
    assert_eq!(s1.num_allocs, s0.num_allocs + 2);
    assert_eq!(
        s1.peak_bytes_in_use,
        s0.peak_bytes_in_use.max(s1.bytes_in_use)
    );
    assert!(s1.largest_alloc_size >= ab.max(bb));
    drop(a);
    assert_eq!(exec.allocator_stats().bytes_in_use, s0.bytes_in_use + bb);
    std::mem::forget(b);
    assert_eq!(exec.allocator_stats().bytes_in_use, s0.bytes_in_use + bb);
}

fn soak(exec: &StreamExecutor, budget: Duration) {
    let plat = exec.platform_name();
    allocator_stats_count_what_is_held(exec);
    let k: Affine = exec.get_kernel(&affine()).expect("load affine");
    // A warm-up (compiles, thread pools), then the starting point.
    worker(exec, &k, 99, Instant::now()).unwrap_or_else(|e| panic!("{plat} warm-up: {e}"));
    exec.synchronize_all().expect("synchronize_all");
    let (bytes0, threads0) = (exec.allocator_stats().bytes_in_use, threads_now());
    let deadline = Instant::now() + budget;
    let started = Instant::now();
    let results: Vec<Result<Counts, String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let k = &k;
                sc.spawn(move || worker(exec, k, w as u64, deadline))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let total = Counts::default();
    for (w, r) in results.into_iter().enumerate() {
        let c = r.unwrap_or_else(|e| panic!("{plat} worker {w}: {e}"));
        for (t, c) in [
            (&total.launches, &c.launches),
            (&total.copies, &c.copies),
            (&total.events, &c.events),
            (&total.failures, &c.failures),
            (&total.checked, &c.checked),
        ] {
            total.add(t, c.load(Ordering::Relaxed));
        }
    }
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    eprintln!(
        "soak {plat}: {:.1} s, {WORKERS} threads: {} launches, {} copies, {} events, {} \
         failures on purpose (each reported), {} elements checked",
        started.elapsed().as_secs_f64(),
        get(&total.launches),
        get(&total.copies),
        get(&total.events),
        get(&total.failures),
        get(&total.checked)
    );
    assert!(get(&total.failures) > 0, "{plat}: no failing launch ran");
    exec.synchronize_all()
        .expect("synchronize_all after the soak");
    let stats = exec.allocator_stats();
    assert_eq!(
        stats.bytes_in_use, bytes0,
        "{plat}: the allocator holds {} bytes after the soak, {bytes0} before ({stats:?})",
        stats.bytes_in_use
    );
    // Stream workers end when their streams drop; give them a moment.
    let wait = Instant::now();
    while threads_now() > threads0 && wait.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        threads_now() <= threads0,
        "{plat}: {} threads after the soak, {threads0} before",
        threads_now()
    );
}

#[test]
fn soak_every_platform() {
    let execs = common::executors();
    let secs: f64 = std::env::var("STREAMEXEC_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60.0);
    let each = Duration::from_secs_f64(secs / execs.len() as f64);
    for exec in &execs {
        soak(exec, each);
    }
}
