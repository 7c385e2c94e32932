//! Waiting for many streams: 10 000 stream completions (100 streams × 100 rounds of one
//! empty host callback each) awaited with `Stream::done` on one thread (`futures`' `join_all`
//! and `block_on`), against the baseline of one blocking thread per stream calling
//! `block_host_until_done` after each callback, on the host platform in the same run.
//!
//! Run with `cargo bench --bench async_done`.

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use futures::executor::block_on;
use futures::future::join_all;
use streamexec::{PlatformManager, Stream, StreamExecutor};

const STREAMS: usize = 100;
const ROUNDS: usize = 100;

fn executor() -> StreamExecutor {
    PlatformManager::platform_with_name("host")
        .expect("host platform")
        .executor_for_device(0)
        .expect("host executor")
}

/// One thread awaits every stream each round.
fn awaited(streams: &mut [Stream]) {
    for _ in 0..ROUNDS {
        for s in streams.iter_mut() {
            s.then_host_callback(|| {});
        }
        let all = block_on(join_all(streams.iter_mut().map(|s| s.done())));
        assert!(all.iter().all(Result::is_ok));
    }
}

/// A thread per stream blocks on it each round.
fn blocking(streams: &mut [Stream]) {
    std::thread::scope(|scope| {
        for s in streams.iter_mut() {
            scope.spawn(move || {
                for _ in 0..ROUNDS {
                    s.then_host_callback(|| {});
                    s.block_host_until_done().expect("stream");
                }
            });
        }
    });
}

fn bench(c: &mut Criterion) {
    let exec = executor();
    let mut streams: Vec<Stream> = (0..STREAMS)
        .map(|_| exec.create_stream().expect("stream"))
        .collect();
    let mut group = c.benchmark_group("completions_10k");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("done_join_all_one_thread", |b| {
        b.iter(|| awaited(&mut streams))
    });
    group.bench_function("block_host_until_done_thread_per_stream", |b| {
        b.iter(|| blocking(&mut streams))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
