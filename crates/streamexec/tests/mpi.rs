//! Stream-ordered MPI operations under mpirun (feature `mpi`; run by scripts/test-mpi.sh with
//! 2, 3 and 4 ranks). A plain `main`: every rank runs every case in the same order (the
//! collectives need it), prints what failed, and exits non-zero if anything did.
//!
//! Inputs are random, seeded by case and rank, so every rank can rebuild every other rank's
//! input and compute the expected result with a plain loop in f64 (exact for the integer
//! ranges used; floats within a bound derived from the summation order below).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use streamexec::mpi::{Communicator, Mpi, MpiElement, ReduceOp};
use streamexec::{DeviceMemory, Error, PlatformManager, StreamExecutor};

type Check = Result<(), String>;

trait El: MpiElement + PartialEq + std::fmt::Debug {
    const FLOAT: bool;
    /// Machine epsilon (floats).
    const EPS: f64;
    fn random(r: &mut StdRng, op: ReduceOp) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// A value no input or result takes.
    fn poison() -> Self;
}

macro_rules! int_el {
    ($t:ty, $lo:expr, $hi:expr, $plo:expr, $phi:expr) => {
        impl El for $t {
            const FLOAT: bool = false;
            const EPS: f64 = 0.0;
            fn random(r: &mut StdRng, op: ReduceOp) -> Self {
                match op {
                    // |product| <= 4^4: exact everywhere.
                    ReduceOp::Prod => r.random_range($plo..=$phi),
                    // |sum| of 4 stays far below 2^53: exact in f64.
                    _ => r.random_range($lo..$hi),
                }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn poison() -> Self {
                <$t>::MAX - 7
            }
        }
    };
}
int_el!(i32, -1_000_000, 1_000_000, -4, 4);
int_el!(i64, -(1i64 << 40), 1i64 << 40, -4, 4);
int_el!(u32, 0, 1_000_000, 0, 4);
int_el!(u64, 0, 1u64 << 40, 0, 4);

macro_rules! float_el {
    ($t:ty) => {
        impl El for $t {
            const FLOAT: bool = true;
            const EPS: f64 = <$t>::EPSILON as f64;
            fn random(r: &mut StdRng, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Prod => {
                        let m: $t = r.random_range(0.5..2.0);
                        if r.random_range(0..2) == 0 { m } else { -m }
                    }
                    _ => r.random_range(-1.0..1.0),
                }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn poison() -> Self {
                <$t>::NAN
            }
        }
    };
}
float_el!(f32);
float_el!(f64);

fn input<T: El>(case: u64, rank: i32, n: usize, op: ReduceOp) -> Vec<T> {
    let mut r = StdRng::seed_from_u64(case * 1000 + rank as u64);
    (0..n).map(|_| T::random(&mut r, op)).collect()
}

struct Ctx {
    comm: Communicator,
    rank: i32,
    size: i32,
    failures: Vec<String>,
    case: u64,
}

impl Ctx {
    fn run(&mut self, name: &str, f: impl FnOnce(&Ctx) -> Check) {
        self.case += 1;
        match f(self) {
            Ok(()) if self.rank == 0 => println!("ok   {name} ({} ranks)", self.size),
            Ok(()) => {}
            Err(e) => {
                eprintln!("FAIL rank {}: {name}: {e}", self.rank);
                self.failures.push(name.to_string());
            }
        }
    }
}

fn ck<T>(r: streamexec::Result<T>, what: &str) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// `data` with `GUARD` poisoned elements either side on the device: a write past the slice or
/// a slice left unwritten shows.
const GUARD: usize = 5;

fn guarded<T: El>(exec: &StreamExecutor, data: &[T]) -> Result<DeviceMemory<T>, String> {
    let mut v = vec![T::poison(); data.len() + 2 * GUARD];
    v[GUARD..GUARD + data.len()].copy_from_slice(data);
    ck(exec.copy_to_device(&v), "copy_to_device")
}

fn check_guards<T: El>(all: &[T]) -> Check {
    let n = all.len();
    let bad = all[..GUARD]
        .iter()
        .chain(&all[n - GUARD..])
        .any(|v| bytemuck::bytes_of(v) != bytemuck::bytes_of(&T::poison()));
    if bad {
        return Err("an element outside the slice was written".into());
    }
    Ok(())
}

fn all_reduce_case<T: El>(cx: &Ctx, exec: &StreamExecutor, op: ReduceOp, n: usize) -> Check {
    let mine = input::<T>(cx.case, cx.rank, n, op);
    let mem = guarded(exec, &mine)?;
    let mut s = ck(exec.create_stream(), "create_stream")?;
    let slice = ck(mem.slice(GUARD..GUARD + n), "slice")?;
    s.then_all_reduce(&cx.comm, slice, op);
    ck(s.block_host_until_done(), "then_all_reduce")?;
    let all = ck(exec.copy_to_vec(&mem), "copy_to_vec")?;
    check_guards(&all)?;
    let inputs: Vec<Vec<T>> = (0..cx.size)
        .map(|r| input::<T>(cx.case, r, n, op))
        .collect();
    for i in 0..n {
        let xs: Vec<f64> = inputs.iter().map(|v| v[i].to_f64()).collect();
        let mut want = xs[0];
        for &x in &xs[1..] {
            want = match op {
                ReduceOp::Sum => want + x,
                ReduceOp::Prod => want * x,
                ReduceOp::Min => want.min(x),
                ReduceOp::Max => want.max(x),
            };
        }
        let got = all[GUARD + i];
        let ok = if !T::FLOAT || matches!(op, ReduceOp::Min | ReduceOp::Max) {
            got == T::from_f64(want)
        } else {
            // MPI combines the p inputs in T with p - 1 roundings, each at most eps/2 of a
            // partial result: |partial sum| <= sum |x|, |partial product| <= prod |x| (= |want|).
            // The f64 reference is exact to far below that (p <= 4 terms).
            let scale = match op {
                ReduceOp::Sum => xs.iter().map(|x| x.abs()).sum::<f64>(),
                _ => want.abs(),
            };
            let tol = (cx.size as f64 - 1.0) * T::EPS / 2.0 * scale * 1.0001;
            (got.to_f64() - want).abs() <= tol
        };
        if !ok {
            return Err(format!(
                "element {i}: got {got:?}, want {want} (inputs {xs:?})"
            ));
        }
    }
    Ok(())
}

fn all_reduce_type<T: El>(cx: &mut Ctx, exec: &StreamExecutor, plat: &str) {
    for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod] {
        let name = format!("{plat}: then_all_reduce {op} of 1031 {}", T::NAME);
        cx.run(&name, |cx| all_reduce_case::<T>(cx, exec, op, 1031));
    }
}

/// Several all-reduces queued back to back before one wait: each must get staging memory no
/// queued operation still uses (the session reuses idle staging buffers).
fn queued_case(cx: &Ctx, exec: &StreamExecutor) -> Check {
    let n = 4096;
    let sizes = [n, n, n / 2, n];
    let mut s = ck(exec.create_stream(), "create_stream")?;
    let mut mems = Vec::new();
    for (k, &len) in sizes.iter().enumerate() {
        let mine = input::<i64>(cx.case * 10 + k as u64, cx.rank, len, ReduceOp::Sum);
        mems.push(ck(exec.copy_to_device(&mine), "copy_to_device")?);
    }
    for m in &mems {
        s.then_all_reduce(&cx.comm, m, ReduceOp::Sum);
    }
    ck(s.block_host_until_done(), "then_all_reduce x4")?;
    for (k, (&len, m)) in sizes.iter().zip(&mems).enumerate() {
        let got = ck(exec.copy_to_vec(m), "copy_to_vec")?;
        let mut want = vec![0i64; len];
        for r in 0..cx.size {
            for (w, x) in
                want.iter_mut()
                    .zip(input::<i64>(cx.case * 10 + k as u64, r, len, ReduceOp::Sum))
            {
                *w += x;
            }
        }
        if got != want {
            return Err(format!("all-reduce {k} of the queued four is wrong"));
        }
    }
    Ok(())
}

fn broadcast_case<T: El>(cx: &Ctx, exec: &StreamExecutor, n: usize) -> Check {
    let root = cx.size - 1;
    let data = input::<T>(cx.case, root, n, ReduceOp::Sum);
    let start = if cx.rank == root {
        data.clone()
    } else {
        vec![T::poison(); n]
    };
    let mem = guarded(exec, &start)?;
    let mut s = ck(exec.create_stream(), "create_stream")?;
    s.then_broadcast(&cx.comm, ck(mem.slice(GUARD..GUARD + n), "slice")?, root);
    ck(s.block_host_until_done(), "then_broadcast")?;
    let all = ck(exec.copy_to_vec(&mem), "copy_to_vec")?;
    check_guards(&all)?;
    if all[GUARD..GUARD + n] != data[..] {
        return Err("the broadcast data differs from the root's".into());
    }
    Ok(())
}

/// Rank r sends to r + 1 and receives from r - 1 (mod size), on two streams: a large send
/// waits for its receiver, so one stream holding both would wait for itself.
fn ring_case<T: El>(cx: &Ctx, exec: &StreamExecutor, n: usize) -> Check {
    let (next, prev) = ((cx.rank + 1) % cx.size, (cx.rank + cx.size - 1) % cx.size);
    let mine = input::<T>(cx.case, cx.rank, n, ReduceOp::Sum);
    let src = ck(exec.copy_to_device(&mine), "copy_to_device")?;
    let dst = guarded(exec, &vec![T::poison(); n])?;
    let mut sender = ck(exec.create_stream(), "create_stream")?;
    let mut receiver = ck(exec.create_stream(), "create_stream")?;
    receiver.then_recv(&cx.comm, ck(dst.slice(GUARD..GUARD + n), "slice")?, prev, 7);
    sender.then_send(&cx.comm, &src, next, 7);
    ck(sender.block_host_until_done(), "then_send")?;
    ck(receiver.block_host_until_done(), "then_recv")?;
    let all = ck(exec.copy_to_vec(&dst), "copy_to_vec")?;
    check_guards(&all)?;
    if all[GUARD..GUARD + n] != input::<T>(cx.case, prev, n, ReduceOp::Sum)[..] {
        return Err(format!(
            "the data received from rank {prev} differs from what it sent"
        ));
    }
    Ok(())
}

/// A stream's error, and that it stays: later work is skipped and reports the same error.
fn expect_failed(
    s: &mut streamexec::Stream,
    what: &str,
    needles: &[&str],
) -> Result<Error, String> {
    let e = match s.block_host_until_done() {
        Ok(()) => return Err(format!("{what} succeeded; it should have failed")),
        Err(e) => e,
    };
    let text = e.to_string();
    for n in needles {
        if !text.contains(n) {
            return Err(format!("{what}: error {text:?} does not mention {n:?}"));
        }
    }
    if !matches!(e, Error::Mpi { .. }) {
        return Err(format!("{what}: not an Error::Mpi: {e:?}"));
    }
    Ok(e)
}

fn stays_failed(s: &mut streamexec::Stream, exec: &StreamExecutor, first: &Error) -> Check {
    let scratch = ck(exec.allocate_zeroed_array::<u8>(16), "allocate")?;
    s.then_memset(&scratch, 1);
    match s.block_host_until_done() {
        Err(e) if &e == first => {}
        other => {
            return Err(format!(
                "the failed stream reported {other:?} after more work"
            ));
        }
    }
    if ck(exec.copy_to_vec(&scratch), "copy_to_vec")? != vec![0u8; 16] {
        return Err("work queued on the failed stream ran".into());
    }
    Ok(())
}

fn recv_timeout_case(cx: &Ctx, exec: &StreamExecutor) -> Check {
    // Rank 0 waits for a message rank 1 never sends; the other ranks do nothing.
    if cx.rank != 0 {
        return Ok(());
    }
    let comm = cx.comm.with_timeout(Duration::from_millis(500));
    let dst = ck(exec.copy_to_device(&[f32::NAN; 8]), "copy_to_device")?;
    let mut s = ck(exec.create_stream(), "create_stream")?;
    s.then_recv(&comm, &dst, 1, 99);
    let e = expect_failed(
        &mut s,
        "then_recv from a rank that never sends",
        &[
            "MPI rank 0: then_recv from rank 1 (tag 99)",
            "no message after 0.5 s",
            "is rank 1 alive and sending",
        ],
    )?;
    if ck(exec.copy_to_vec(&dst), "copy_to_vec")?
        .iter()
        .any(|v| !v.is_nan())
    {
        return Err("the timed-out receive wrote its destination".into());
    }
    stays_failed(&mut s, exec, &e)
}

fn mismatch_case(cx: &Ctx, exec: &StreamExecutor) -> Check {
    // Rank 1 passes one element more; every rank must fail with every rank's count.
    let n = if cx.rank == 1 { 11 } else { 10 };
    let mine: Vec<i32> = (0..n).map(|i| i + 100 * cx.rank).collect();
    let mem = ck(exec.copy_to_device(&mine), "copy_to_device")?;
    let mut s = ck(exec.create_stream(), "create_stream")?;
    s.then_all_reduce(&cx.comm, &mem, ReduceOp::Sum);
    let mut needles = vec![
        format!("MPI rank {}: then_all_reduce (sum of {n} i32)", cx.rank),
        "element counts differ".to_string(),
    ];
    for r in 0..cx.size {
        needles.push(format!("rank {r}: {}", if r == 1 { 11 } else { 10 }));
    }
    let needles: Vec<&str> = needles.iter().map(|s| s.as_str()).collect();
    let e = expect_failed(&mut s, "then_all_reduce with different counts", &needles)?;
    if ck(exec.copy_to_vec(&mem), "copy_to_vec")? != mine {
        return Err("the mismatched all-reduce changed the data".into());
    }
    stays_failed(&mut s, exec, &e)
}

fn op_mismatch_case(cx: &Ctx, exec: &StreamExecutor) -> Check {
    let op = if cx.rank == 0 {
        ReduceOp::Max
    } else {
        ReduceOp::Sum
    };
    let mem = ck(exec.copy_to_device(&[1.5f64; 4]), "copy_to_device")?;
    let mut s = ck(exec.create_stream(), "create_stream")?;
    s.then_all_reduce(&cx.comm, &mem, op);
    expect_failed(
        &mut s,
        "then_all_reduce with different ops",
        &["reduce ops differ (rank 0: max, rank 1: sum"],
    )?;
    Ok(())
}

fn platform(cx: &mut Ctx, plat: &str) {
    let exec =
        match PlatformManager::platform_with_name(plat).and_then(|p| p.executor_for_device(0)) {
            Ok(e) => e,
            Err(e) => {
                let required = std::env::var("STREAMEXEC_REQUIRE").unwrap_or_default();
                if required.split(',').any(|p| p.trim() == plat) {
                    cx.run(&format!("{plat}: platform available"), |_| {
                        Err(e.to_string())
                    });
                } else if cx.rank == 0 {
                    println!("skip {plat}: {e}");
                }
                return;
            }
        };
    all_reduce_type::<i32>(cx, &exec, plat);
    all_reduce_type::<i64>(cx, &exec, plat);
    all_reduce_type::<u32>(cx, &exec, plat);
    all_reduce_type::<u64>(cx, &exec, plat);
    all_reduce_type::<f32>(cx, &exec, plat);
    all_reduce_type::<f64>(cx, &exec, plat);
    cx.run(&format!("{plat}: then_all_reduce sum of 1 Mi f32"), |cx| {
        all_reduce_case::<f32>(cx, &exec, ReduceOp::Sum, 1 << 20)
    });
    cx.run(
        &format!("{plat}: four then_all_reduce queued before one wait"),
        |cx| queued_case(cx, &exec),
    );
    cx.run(
        &format!("{plat}: then_broadcast f64 from the last rank"),
        |cx| broadcast_case::<f64>(cx, &exec, 777),
    );
    cx.run(
        &format!("{plat}: then_broadcast 300 Ki i32 from the last rank"),
        |cx| broadcast_case::<i32>(cx, &exec, 300 << 10),
    );
    cx.run(&format!("{plat}: then_send/then_recv ring, 3 u64"), |cx| {
        ring_case::<u64>(cx, &exec, 3)
    });
    cx.run(
        &format!("{plat}: then_send/then_recv ring, 256 Ki f32"),
        |cx| ring_case::<f32>(cx, &exec, 256 << 10),
    );
    cx.run(
        &format!("{plat}: then_recv timeout (peer never sends)"),
        |cx| recv_timeout_case(cx, &exec),
    );
    cx.run(&format!("{plat}: then_all_reduce count mismatch"), |cx| {
        mismatch_case(cx, &exec)
    });
    cx.run(&format!("{plat}: then_all_reduce op mismatch"), |cx| {
        op_mismatch_case(cx, &exec)
    });
    cx.run(
        &format!("{plat}: a new stream works after the failures"),
        |cx| all_reduce_case::<i64>(cx, &exec, ReduceOp::Sum, 4099),
    );
}

/// `STREAMEXEC_MPI_DEAD_PEER=exit|exit0|kill`: rank 1 dies (exits with status 3 or 0 without
/// finalizing, or SIGKILLs itself) while the other ranks wait for it in a receive and an all-reduce. Not a case of the
/// suite: scripts/test-mpi.sh runs it to check that the survivors end (mpirun ends the job, or
/// their waits time out) instead of hanging.
fn dead_peer(mpi: Mpi, how: &str) -> ! {
    let comm = mpi.world();
    let exec = PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .expect("host platform");
    let mem = exec
        .copy_to_device(&[1.0f32; 1024])
        .expect("copy_to_device");
    let mut s = exec.create_stream().expect("create_stream");
    s.then_all_reduce(&comm, &mem, ReduceOp::Sum);
    s.block_host_until_done()
        .expect("the all-reduce before the death");
    if mpi.rank() == 1 {
        std::thread::sleep(Duration::from_millis(200));
        eprintln!("rank 1: dying ({how})");
        match how {
            "exit0" => std::process::exit(0),
            "kill" => {
                // SAFETY: plain libc calls on this process.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            _ => std::process::exit(3),
        }
    }
    let start = std::time::Instant::now();
    if mpi.rank() == 0 {
        s.then_recv(&comm, &mem, 1, 5);
    }
    s.then_all_reduce(&comm, &mem, ReduceOp::Sum);
    let r = s.block_host_until_done();
    let outcome = match &r {
        Ok(()) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    let line = format!(
        "rank {} after {:.1} s: {outcome}\n",
        mpi.rank(),
        start.elapsed().as_secs_f64()
    );
    eprint!("{line}");
    // Finalize with a peer gone: must not hang either (it is skipped, with an Err saying why).
    let rank = mpi.rank();
    drop((s, mem, comm));
    let done = match mpi.finalize() {
        Ok(()) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    let line = format!("rank {rank}: finalize: {done}\n");
    eprint!("{line}");
    std::process::exit(if r.is_err() { 4 } else { 0 })
}

fn main() {
    let mpi = Mpi::init().expect("Mpi::init");
    if let Ok(how) = std::env::var("STREAMEXEC_MPI_DEAD_PEER") {
        dead_peer(mpi, &how);
    }
    let mut cx = Ctx {
        comm: mpi.world(),
        rank: mpi.rank(),
        size: mpi.size(),
        failures: Vec::new(),
        case: 0,
    };
    cx.run("a second Mpi::init is an Err", |_| match Mpi::init() {
        Err(Error::Mpi { detail, .. }) if detail.contains("already initialized") => Ok(()),
        other => Err(format!("got {other:?}")),
    });
    cx.run("rank and size", |cx| {
        let ok = (0..cx.size).contains(&cx.rank) && cx.size >= 2 && cx.comm.size() == cx.size;
        ok.then_some(())
            .ok_or_else(|| format!("rank {} of {}", cx.rank, cx.size))
    });
    let platforms = std::env::var("STREAMEXEC_MPI_PLATFORMS").unwrap_or("host,opencl".into());
    for plat in platforms.split(',') {
        platform(&mut cx, plat.trim());
    }

    // After finalize, a communicator still around refuses to call MPI.
    let comm = cx.comm.clone();
    let exec = PlatformManager::platform_with_name("host")
        .and_then(|p| p.executor_for_device(0))
        .expect("host platform");
    drop(mpi);
    cx.run("an operation after finalize is an Err", |_| {
        let mem = ck(exec.copy_to_device(&[1i32; 4]), "copy_to_device")?;
        let mut s = ck(exec.create_stream(), "create_stream")?;
        s.then_all_reduce(&comm, &mem, ReduceOp::Sum);
        expect_failed(
            &mut s,
            "then_all_reduce after finalize",
            &["MPI was finalized"],
        )?;
        Ok(())
    });

    if !cx.failures.is_empty() {
        eprintln!("rank {}: {} case(s) failed", cx.rank, cx.failures.len());
        std::process::exit(1);
    }
    if cx.rank == 0 {
        println!("all MPI cases passed on {} ranks", cx.size);
    }
}
