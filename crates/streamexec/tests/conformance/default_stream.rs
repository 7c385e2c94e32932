//! The default stream (CUDA's legacy default stream) on every platform, checked on random
//! programs against the ordering rules: a blocking stream's operation waits for the default
//! stream's earlier work, the default stream's operation waits for every blocking stream's
//! earlier work, non-blocking streams opt out, and event waits order what they name.
//!
//! Every operation is bracketed by host callbacks that take a tick of a shared clock when they
//! start and when they end, with a random sleep between, so an operation that ran too early
//! shows as a span that starts before a span it had to wait for ended.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use rand::RngExt;
use rand::rngs::StdRng;
use streamexec::{Event, HostMemory, Stream, StreamExecutor};

use crate::common::rng;
use crate::kernels::{self, Affine};
use crate::on_each_platform;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Which {
    Default,
    Blocking(usize),
    NonBlocking(usize),
}

#[derive(Clone, Copy, Debug)]
enum Work {
    Callback,
    Copy,
    Launch,
    Memset,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Op(Which, Work),
    Record(Which, usize),
    Wait(Which, usize),
}

const BLOCKING: usize = 2;
const NON_BLOCKING: usize = 1;
const EVENTS: usize = 2;

fn random_stream(r: &mut StdRng) -> Which {
    match r.random_range(0..4) {
        0 => Which::Default,
        1 | 2 => Which::Blocking(r.random_range(0..BLOCKING)),
        _ => Which::NonBlocking(r.random_range(0..NON_BLOCKING)),
    }
}

fn random_program(r: &mut StdRng, len: usize) -> Vec<Step> {
    (0..len)
        .map(|_| {
            let s = random_stream(r);
            match r.random_range(0..10) {
                0 => Step::Record(s, r.random_range(0..EVENTS)),
                1 => Step::Wait(s, r.random_range(0..EVENTS)),
                _ => Step::Op(
                    s,
                    [Work::Callback, Work::Copy, Work::Launch, Work::Memset][r.random_range(0..4)],
                ),
            }
        })
        .collect()
}

/// Which operations must have finished before which started, from the rules; the transitive
/// closure, as `before[b]` = every op that must precede op `b` (indices into the program).
fn required_order(program: &[Step]) -> Vec<Vec<bool>> {
    let n = program.len();
    let mut edges = vec![Vec::new(); n]; // edges[b]: direct predecessors of b
    // Per event: the ops that its latest record follows.
    let mut recorded: Vec<Vec<usize>> = vec![Vec::new(); EVENTS];
    // Per stream (by a key): ops that later ops on it must follow through event waits.
    let mut waited: Vec<(Which, Vec<usize>)> = Vec::new();
    for (b, step) in program.iter().enumerate() {
        match *step {
            Step::Op(sb, _) => {
                for (a, prev) in program[..b].iter().enumerate() {
                    let Step::Op(sa, _) = *prev else { continue };
                    let rule = sa == sb
                        || (sa == Which::Default && matches!(sb, Which::Blocking(_)))
                        || (matches!(sa, Which::Blocking(_)) && sb == Which::Default);
                    if rule {
                        edges[b].push(a);
                    }
                }
                if let Some((_, ops)) = waited.iter().find(|(w, _)| *w == sb) {
                    edges[b].extend(ops);
                }
            }
            Step::Record(s, e) => {
                // Everything before it on `s`, and what `s` itself had to wait for, which
                // the closure adds.
                recorded[e] = program[..b]
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| matches!(p, Step::Op(sa, _) if *sa == s))
                    .map(|(a, _)| a)
                    .collect();
            }
            Step::Wait(s, e) => {
                let ops = recorded[e].clone();
                match waited.iter_mut().find(|(w, _)| *w == s) {
                    Some((_, v)) => v.extend(ops),
                    None => waited.push((s, ops)),
                }
            }
        }
    }
    let mut before = vec![vec![false; n]; n];
    for b in 0..n {
        let mut queue: VecDeque<usize> = edges[b].iter().copied().collect();
        while let Some(a) = queue.pop_front() {
            if !before[b][a] {
                before[b][a] = true;
                queue.extend(edges[a].iter().copied());
            }
        }
    }
    before
}

struct Streams {
    default: Stream,
    blocking: Vec<Stream>,
    non_blocking: Vec<Stream>,
}

impl Streams {
    fn new(exec: &StreamExecutor) -> Self {
        Streams {
            default: exec.default_stream().unwrap(),
            blocking: (0..BLOCKING)
                .map(|_| exec.create_stream().unwrap())
                .collect(),
            non_blocking: (0..NON_BLOCKING)
                .map(|_| exec.create_stream_non_blocking().unwrap())
                .collect(),
        }
    }

    fn get(&mut self, w: Which) -> &mut Stream {
        match w {
            Which::Default => &mut self.default,
            Which::Blocking(i) => &mut self.blocking[i],
            Which::NonBlocking(i) => &mut self.non_blocking[i],
        }
    }
}

type Spans = Arc<Mutex<Vec<(u64, u64)>>>;

fn run_program(exec: &StreamExecutor, program: &[Step], r: &mut StdRng) -> Vec<(u64, u64)> {
    let k: Affine = exec.get_kernel(&kernels::affine()).unwrap();
    let clock = Arc::new(AtomicU64::new(1));
    let spans: Spans = Arc::new(Mutex::new(vec![(0, 0); program.len()]));
    // Events are recorded again, on any stream, while waits on earlier records are queued.
    let events: Vec<Event> = (0..EVENTS).map(|_| exec.create_event().unwrap()).collect();
    let dev = exec.copy_to_device(&[0u32; 256]).unwrap();
    let host = HostMemory::from_slice(&[7u32; 256]).unwrap();
    let mut streams = Streams::new(exec);
    for (i, step) in program.iter().enumerate() {
        match *step {
            Step::Op(w, work) => {
                let s = streams.get(w);
                let (c, sp) = (clock.clone(), spans.clone());
                s.then_host_callback(move || sp.lock()[i].0 = c.fetch_add(1, Ordering::SeqCst));
                match work {
                    Work::Callback => {}
                    Work::Copy => {
                        s.then_memcpy_h2d(&host, &dev);
                    }
                    Work::Launch => {
                        s.then_launch(64, 4, &k, (dev.ptr(), 256, 1, 1));
                    }
                    Work::Memset => {
                        s.then_memset32(&dev, 3);
                    }
                }
                let (c, sp, us) = (clock.clone(), spans.clone(), r.random_range(0..300));
                s.then_host_callback(move || {
                    std::thread::sleep(Duration::from_micros(us));
                    sp.lock()[i].1 = c.fetch_add(1, Ordering::SeqCst);
                });
            }
            Step::Record(w, e) => {
                streams.get(w).then_record_event(&events[e]);
            }
            Step::Wait(w, e) => {
                streams.get(w).then_wait_for(&events[e]);
            }
        }
    }
    for w in [Which::Default]
        .into_iter()
        .chain((0..BLOCKING).map(Which::Blocking))
        .chain((0..NON_BLOCKING).map(Which::NonBlocking))
    {
        streams.get(w).block_host_until_done().unwrap();
    }
    spans.lock().clone()
}

#[test]
fn random_programs_keep_the_default_stream_ordering_rules() {
    on_each_platform(|exec| {
        let mut r = rng("default_stream_programs");
        for round in 0..6 {
            let program = random_program(&mut r, 40);
            let spans = run_program(exec, &program, &mut r);
            let before = required_order(&program);
            for (b, preds) in before.iter().enumerate() {
                for (a, &must) in preds.iter().enumerate() {
                    if must {
                        assert!(
                            spans[a].1 < spans[b].0,
                            "round {round}: op #{a} {:?} (ran {:?}) must finish before op #{b} \
                             {:?} (ran {:?}) starts\nprogram: {program:?}",
                            program[a],
                            spans[a],
                            program[b],
                            spans[b]
                        );
                    }
                }
            }
            for (i, step) in program.iter().enumerate() {
                if let Step::Op(..) = step {
                    assert!(
                        spans[i].0 > 0 && spans[i].1 > spans[i].0,
                        "op #{i} never ran"
                    );
                }
            }
        }
    });
}

/// Every handle on the default stream is the same stream, in one order. (The default stream
/// is shared by every test running on the executor, so no test here fails it.)
#[test]
fn default_stream_handles_share_one_stream() {
    on_each_platform(|exec| {
        let mut a = exec.default_stream().unwrap();
        let mut b = exec.default_stream().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        a.then_host_callback(move || {
            std::thread::sleep(Duration::from_millis(20));
            l.lock().push(1);
        });
        let l = log.clone();
        b.then_host_callback(move || l.lock().push(2));
        b.block_host_until_done().unwrap();
        assert_eq!(*log.lock(), vec![1, 2]);
        a.block_host_until_done().unwrap();
    });
}

/// The default stream waits for a failed blocking stream's earlier work but does not take
/// its failure (which would then pass to every blocking stream), and the failed stream's
/// skipped work is not waited for.
#[test]
fn a_failed_blocking_stream_orders_but_does_not_fail_the_default_stream() {
    on_each_platform(|exec| {
        let mut failed = exec.create_stream().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        failed
            .then_host_callback(move || {
                std::thread::sleep(Duration::from_millis(20));
                l.lock().push("before the failure");
            })
            .then_host_callback_with_status(|| {
                Err(streamexec::Error::HostCallback {
                    detail: "injected".into(),
                })
            });
        let mut d = exec.default_stream().unwrap();
        let l = log.clone();
        d.then_host_callback(move || l.lock().push("default"));
        d.block_host_until_done().unwrap();
        assert_eq!(*log.lock(), vec!["before the failure", "default"]);
        assert!(failed.block_host_until_done().is_err());
        // A blocking stream made afterwards orders after the default stream and is fine.
        let mut later = exec.create_stream().unwrap();
        later
            .then_host_callback(|| {})
            .block_host_until_done()
            .unwrap();
    });
}

/// A wait is for the record made before it, even when the event is recorded again, on another
/// stream, and that later record completes first. (Host events track each generation's
/// completion, OpenCL waits for each record's own marker, and CUDA/HIP record each generation
/// on a driver event of its own.)
#[test]
fn an_event_rerecorded_before_a_queued_wait_reaches_it() {
    on_each_platform(|exec| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let event = exec.create_event().unwrap();
        let mut slow = exec.create_stream_non_blocking().unwrap();
        let l = log.clone();
        slow.then_host_callback(move || {
            std::thread::sleep(Duration::from_millis(200));
            l.lock().push("slow work");
        })
        .then_record_event(&event);
        let mut waiter = exec.create_stream_non_blocking().unwrap();
        let l = log.clone();
        waiter
            .then_host_callback(|| std::thread::sleep(Duration::from_millis(50)))
            .then_wait_for(&event)
            .then_host_callback(move || l.lock().push("after the wait"));
        // Recorded again at once, on a stream with no work, before `waiter` reaches its wait.
        let mut idle = exec.create_stream_non_blocking().unwrap();
        idle.then_record_event(&event);
        waiter.block_host_until_done().unwrap();
        slow.block_host_until_done().unwrap();
        idle.block_host_until_done().unwrap();
        assert_eq!(*log.lock(), vec!["slow work", "after the wait"]);
    });
}
