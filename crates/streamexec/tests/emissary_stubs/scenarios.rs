//! The scenarios both platforms run: each installs the mock, launches one kernel of
//! kernels/emissary_mpi.cu or kernels/cl/emissary_mpi.cl, and checks the calls the mock saw and
//! what the kernel wrote.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::RngExt;
use streamexec::StreamExecutor;

use super::{Call, Mock, Rec, Responder, View, dptr, int};

/// An output word no kernel writes by accident.
pub const POISON: i32 = 0x5EED_0BAD;

/// What one platform runs the kernels on.
pub trait Platform {
    fn exec(&self) -> &StreamExecutor;
    /// Lanes that share a port: 32 on CUDA, 1 on OpenCL.
    fn warp(&self) -> usize;
    /// (threads per block, blocks) of the launches with more than one warp.
    fn grid(&self) -> (u32, u32);
    /// The record of `emissary_generic`'s floating-point argument `t + 0.25 k`.
    fn float_rec(&self, t: usize, k: usize) -> Rec;
    fn send_recv(&self, buf: &View, errors: &View, n: i32);
    /// One block of `threads`.
    fn allreduce(&self, threads: u32, data: &View, sum: &View, errors: &View, n: i32);
    fn every_stub(&self, buf: &View, out: &View);
    fn odd_lanes(&self, buf: &View, out: &View);
    fn generic(&self, hbuf: &View, out: &View<u64>);
}

fn threads_of(p: &dyn Platform) -> usize {
    let (t, b) = p.grid();
    (t * b) as usize
}

fn install(
    p: &dyn Platform,
    fail: bool,
    respond: impl Fn(usize, &Call) -> [u64; 8] + Send + Sync + 'static,
) -> Mock {
    let respond: Arc<Responder> = Arc::new(respond);
    Mock::install(p.exec().rpc().unwrap().server(), fail, respond)
}

/// Replies of a host that ran the call, padded with words a stub must not read.
fn ok(ret: u64, outs: &[u64]) -> [u64; 8] {
    let mut r = [0, ret, 0, 0, 0, 0, 0x6666, 0x7777];
    r[2..2 + outs.len()].copy_from_slice(outs);
    r
}

fn isend_handle(lane: usize) -> u64 {
    ((lane as u64 + 1) << 32) | 3
}
fn irecv_handle(lane: usize) -> u64 {
    ((lane as u64 + 1) << 32) | 4
}
fn wait_ret(lane: usize) -> u64 {
    5 * (lane as u64 % 2)
}

/// The mock host of `mpi_every_stub`: lane-dependent out values and return codes.
fn every_stub_reply(lane: usize, c: &Call) -> [u64; 8] {
    let l = lane as u64;
    match c.function {
        10 => ok(0, &[10 + l]),
        11 => ok(0, &[50 + l]),
        2 => ok(
            0,
            &[1000 + l, c.args[4].value, 2000 + l, 4 * c.args[1].value],
        ),
        3 => ok(0, &[isend_handle(lane)]),
        4 => ok(0, &[irecv_handle(lane)]),
        5 => {
            let req = c.args[0].value;
            ok(wait_ret(lane), &[req & 0xffff, req >> 32, 7, 12])
        }
        9 => ok(l % 4, &[]),
        _ => ok(0, &[]),
    }
}

/// The twelve calls thread `t` of `mpi_every_stub` makes; `req` gives the request it waits
/// on (the handle Isend/Irecv returned, or the untouched initial value).
fn every_stub_calls(t: usize, base: u64, req: impl Fn(u32) -> u64) -> Vec<Call> {
    let b = dptr(base + 4 * t as u64);
    let t = t as i64;
    let wait = |r| {
        Call::mpi(
            5,
            vec![Rec {
                kind: 0,
                size: 8,
                value: r,
            }],
        )
    };
    vec![
        Call::mpi(10, vec![int(0)]),
        Call::mpi(11, vec![int(0)]),
        Call::mpi(
            1,
            vec![b, int(t + 1), int(3), int(t + 2), int(100 + t), int(0)],
        ),
        Call::mpi(
            2,
            vec![b, int(2 * t + 1), int(8), int(-1), int(200 + t), int(0)],
        ),
        Call::mpi(3, vec![b, int(3), int(9), int(1), int(300 + t), int(0)]),
        wait(req(3)),
        Call::mpi(4, vec![b, int(4), int(5), int(-1), int(400 + t), int(0)]),
        wait(req(4)),
        Call::mpi(6, vec![dptr(1), b, int(5), int(3), int(4), int(0)]),
        Call::mpi(
            7,
            vec![
                b,
                if t % 2 == 1 { dptr(0) } else { b },
                int(6),
                int(4),
                int(3),
                int(t % 3),
                int(0),
            ],
        ),
        Call::mpi(8, vec![b, int(7), int(2), int(t % 2), int(0)]),
        Call::mpi(9, vec![int(0)]),
    ]
}

/// Checks the mock saw exactly `want` (thread, call) pairs: every port's mask is one `masks`
/// allows and names exactly the lanes that sent, all its lanes make the same call, and the
/// (lane, call) multiset equals the expected one.
fn check_calls(
    p: &dyn Platform,
    mock: &Mock,
    want: Vec<(usize, Call)>,
    masks: impl Fn(u64) -> bool,
) {
    let trips = mock.trips();
    for t in &trips {
        assert!(masks(t.mask), "a port with mask {:#x}", t.mask);
        let lanes: Vec<usize> = t.calls.iter().map(|(l, _)| *l).collect();
        let from_mask: Vec<usize> = (0..64).filter(|l| t.mask >> l & 1 == 1).collect();
        assert_eq!(lanes, from_mask);
        let first = t.calls[0].1.as_ref().map(|c| (c.api, c.function));
        // Lanes of one port make the same MPI call (emissary_generic varies them per lane).
        for (l, c) in t
            .calls
            .iter()
            .filter(|(_, c)| c.as_ref().is_ok_and(|c| c.api == 3))
        {
            assert_eq!(
                c.as_ref().map(|c| (c.api, c.function)),
                first,
                "lane {l} in a port of {first:?}"
            );
        }
    }
    let mut got: Vec<(usize, Call)> = mock.calls().into_iter().map(|(_, l, c)| (l, c)).collect();
    let mut want: Vec<(usize, Call)> = want.into_iter().map(|(t, c)| (t % p.warp(), c)).collect();
    assert_eq!(got.len(), want.len(), "calls served");
    got.sort();
    want.sort();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

fn full_mask(p: &dyn Platform) -> u64 {
    if p.warp() == 64 {
        u64::MAX
    } else {
        (1u64 << p.warp()) - 1
    }
}

/// Every stub, every thread, a host that ran each call: the buffers are exactly as the spec
/// says and every out value lands where MPI puts it.
pub fn every_stub_ok(p: &dyn Platform) {
    let n = threads_of(p);
    let buf = View::new(p.exec(), n, 0);
    let out = View::new(p.exec(), 32 * n, POISON);
    let mock = install(p, false, every_stub_reply);
    p.every_stub(&buf, &out);
    assert_eq!(
        mock.trips().len(),
        12 * n / p.warp(),
        "one port per warp and call"
    );
    let want: Vec<(usize, Call)> = (0..n)
        .flat_map(|t| {
            let lane = t % p.warp();
            every_stub_calls(t, buf.base, |f| {
                if f == 3 {
                    isend_handle(lane)
                } else {
                    irecv_handle(lane)
                }
            })
            .into_iter()
            .map(move |c| (t, c))
        })
        .collect();
    check_calls(p, &mock, want, |m| m == full_mask(p));
    let got = out.to_vec();
    for t in 0..n {
        let l = (t % p.warp()) as i32;
        let ti = t as i32;
        let waited = |h: i32| if l % 2 == 1 { h } else { 0 };
        let want = [
            0,
            10 + l,
            0,
            50 + l,
            0,
            0,
            1000 + l,
            200 + ti,
            2000 + l,
            4 * (2 * ti + 1),
            0,
            3,
            l + 1,
            5 * (l % 2),
            waited(3),
            3,
            l + 1,
            7,
            12,
            0,
            4,
            l + 1,
            5 * (l % 2),
            waited(4),
            0,
            0,
            0,
            l % 4,
            POISON,
            POISON,
            POISON,
            POISON,
        ];
        assert_eq!(got[32 * t..32 * t + 32], want, "thread {t}");
    }
}

/// What `mpi_every_stub` writes when the host ran none of its calls: MPI_ERR_OTHER everywhere,
/// every out-parameter as the kernel set it.
fn check_all_failed(p: &dyn Platform, mock: &Mock, buf: &View, out: &View) {
    let n = threads_of(p);
    let untouched = 0x77;
    let want: Vec<(usize, Call)> = (0..n)
        .flat_map(|t| {
            every_stub_calls(t, buf.base, |_| 0x77_0000_0077)
                .into_iter()
                .map(move |c| (t, c))
        })
        .collect();
    check_calls(p, mock, want, |m| m == full_mask(p));
    let got = out.to_vec();
    for t in 0..n {
        let e = 16;
        let want = [
            e, -7, e, -7, e, e, -7, -7, -7, -7, e, untouched, untouched, e, untouched, -7, -7, -7,
            -7, e, untouched, untouched, e, untouched, e, e, e, e, POISON, POISON, POISON, POISON,
        ];
        assert_eq!(got[32 * t..32 * t + 32], want, "thread {t}");
    }
}

/// A reply status other than 0 (statuses 1..=5 across the lanes): every stub returns
/// MPI_ERR_OTHER and writes no out-parameter, whatever the reply's other words say.
pub fn every_stub_status_fails(p: &dyn Platform) {
    let n = threads_of(p);
    let buf = View::new(p.exec(), n, 0);
    let out = View::new(p.exec(), 32 * n, POISON);
    let mock = install(p, false, |lane, _| {
        [
            1 + lane as u64 % 5,
            0,
            0x5A5A,
            0x5A5A,
            0x5A5A,
            0x5A5A,
            0x5A5A,
            0,
        ]
    });
    p.every_stub(&buf, &out);
    check_all_failed(p, &mock, &buf, &out);
}

/// The host's handler fails (the server's error reply): the same as a failed status, and the
/// server logs each failure.
pub fn every_stub_handler_fails(p: &dyn Platform) {
    let n = threads_of(p);
    let buf = View::new(p.exec(), n, 0);
    let out = View::new(p.exec(), 32 * n, POISON);
    let server = p.exec().rpc().unwrap().server();
    let _ = server.take_errors();
    let mock = install(p, true, |_, _| {
        unreachable!("the failing mock replies nothing")
    });
    p.every_stub(&buf, &out);
    check_all_failed(p, &mock, &buf, &out);
    let errors = server.take_errors();
    assert_eq!(errors.len(), mock.trips().len(), "{errors:?}");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("mock Emissary host fails")),
        "{errors:?}"
    );
}

/// Only odd lanes call: one port per warp, holding just them.
pub fn odd_lanes(p: &dyn Platform) {
    let n = threads_of(p);
    let buf = View::new(p.exec(), n, 0);
    let out = View::new(p.exec(), n, POISON);
    let mock = install(p, false, |lane, _| ok(3 * lane as u64 + 1, &[]));
    p.odd_lanes(&buf, &out);
    let odd: u64 = if p.warp() == 1 {
        1
    } else {
        0xAAAA_AAAA_AAAA_AAAA & full_mask(p)
    };
    let want: Vec<(usize, Call)> = (1..n)
        .step_by(2)
        .map(|t| {
            let b = dptr(buf.base + 4 * t as u64);
            (
                t,
                Call::mpi(1, vec![b, int(1), int(3), int(0), int(t as i64), int(0)]),
            )
        })
        .collect();
    assert_eq!(
        mock.trips().len(),
        if p.warp() == 1 { n / 2 } else { n / p.warp() }
    );
    check_calls(p, &mock, want, |m| m == odd);
    let got = out.to_vec();
    for (t, g) in got.iter().enumerate() {
        let l = (t % p.warp()) as i32;
        assert_eq!(*g, if t % 2 == 1 { 3 * l + 1 } else { -7 }, "thread {t}");
    }
}

/// se_emissary_call itself: user APIs, 0 to 7 records of every kind and several value sizes
/// (buffers of 1 to 3 packets, a different length in each lane), and the reply's eight words.
/// Lanes that diverged in building their records may reach the call apart (each group its own
/// port); with `mixed`, some port must have carried lanes of different lengths.
pub fn generic(p: &dyn Platform, mixed: bool) {
    let n = threads_of(p);
    let hbuf = View::new(p.exec(), 8, 0);
    let out = View::new(p.exec(), 8 * n, POISON as u64);
    let mock = install(p, false, |lane, c| {
        let sum = c.args.iter().fold(0u64, |s, a| s.wrapping_add(a.value));
        [
            0,
            u64::from(c.api) * 1000 + u64::from(c.function),
            c.args.len() as u64,
            sum,
            lane as u64,
            0,
            0x6666,
            0x7777,
        ]
    });
    p.generic(&hbuf, &out);
    let want: Vec<(usize, Call)> = (0..n)
        .map(|t| {
            let args = (0..t % 8)
                .map(|k| match k % 4 {
                    0 => int(-((t * 8 + k) as i64)),
                    1 => p.float_rec(t, k),
                    2 => Rec {
                        kind: 2,
                        size: 8,
                        value: hbuf.base + 4 * k as u64,
                    },
                    _ => Rec {
                        kind: 0,
                        size: 2,
                        value: 0xBE00 + t as u64,
                    },
                })
                .collect();
            (
                t,
                Call {
                    api: 42 + (t % 2) as u32,
                    function: t as u32 + 1,
                    args,
                },
            )
        })
        .collect();
    let replies: BTreeMap<usize, [u64; 8]> = want
        .iter()
        .map(|(t, c)| {
            let sum = c.args.iter().fold(0u64, |s, a| s.wrapping_add(a.value));
            let r = [
                0,
                u64::from(c.api) * 1000 + u64::from(c.function),
                c.args.len() as u64,
                sum,
                (t % p.warp()) as u64,
                0,
                0x6666,
                0x7777,
            ];
            (*t, r)
        })
        .collect();
    check_calls(p, &mock, want, |m| m != 0 && m & !full_mask(p) == 0);
    if mixed {
        let lens = |t: &super::Trip| {
            let mut l: Vec<usize> = t
                .calls
                .iter()
                .map(|(_, c)| c.as_ref().unwrap().args.len())
                .collect();
            l.dedup();
            l.len()
        };
        assert!(
            mock.trips().iter().any(|t| lens(t) > 1),
            "no port carried lanes of different lengths"
        );
    }
    let words = out.to_vec();
    for (t, r) in replies {
        assert_eq!(words[8 * t..8 * t + 8], r, "thread {t}");
    }
}

/// The seed example as rank 0, rank 1 and a rank that does neither, with the mock playing the
/// other rank: rank 0 sends buf[i] = -i with tag i; rank 1 receives what the mock writes
/// (wrong values at i % 7 == 3, which the kernel must count).
pub fn send_recv(p: &dyn Platform) {
    let n = threads_of(p) - 5;
    for rank in 0..3u64 {
        let buf = View::new(p.exec(), n + 5, POISON);
        let errors = View::new(p.exec(), 1, 0);
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (view, log) = (buf.clone(), sent.clone());
        let mock = install(p, false, move |_, c| match c.function {
            10 => ok(0, &[rank]),
            1 | 2 => {
                let (addr, tag) = (c.args[0].value, c.args[4].value as i32);
                assert_eq!(c.args[0].kind, 1);
                assert_eq!(addr, view.base + 4 * tag as u64, "tag {tag}");
                assert_eq!(
                    c.args[1..],
                    [
                        int(1),
                        int(3),
                        int(1 - rank as i64),
                        int(tag as i64),
                        int(0)
                    ]
                );
                if c.function == 1 {
                    log.lock().unwrap().push((tag, view.load(addr)));
                    ok(0, &[])
                } else {
                    view.store(addr, if tag % 7 == 3 { tag + 1000 } else { -tag });
                    ok(0, &[0, tag as u64, 0, 4])
                }
            }
            f => panic!("rank {rank}: function {f}"),
        });
        p.send_recv(&buf, &errors, n as i32);
        let calls = mock.calls();
        let got = buf.to_vec();
        let mut sent = sent.lock().unwrap().clone();
        sent.sort();
        match rank {
            0 => {
                let want: Vec<(i32, i32)> = (0..n as i32).map(|i| (i, -i)).collect();
                assert_eq!(sent, want);
                assert_eq!(errors.to_vec(), [0]);
                for (i, g) in got.iter().enumerate() {
                    assert_eq!(*g, if i < n { -(i as i32) } else { POISON }, "buf[{i}]");
                }
            }
            1 => {
                assert!(sent.is_empty());
                let bad = (0..n).filter(|i| i % 7 == 3).count() as i32;
                assert_eq!(errors.to_vec(), [bad], "the kernel counts the wrong values");
                for (i, g) in got.iter().enumerate() {
                    let i32i = i as i32;
                    let want = if i >= n {
                        POISON
                    } else if i % 7 == 3 {
                        i32i + 1000
                    } else {
                        -i32i
                    };
                    assert_eq!(*g, want, "buf[{i}]");
                }
            }
            _ => {
                assert_eq!(errors.to_vec(), [0]);
                assert!(got.iter().all(|&g| g == POISON));
            }
        }
        let moves = calls.iter().filter(|(_, _, c)| c.function != 10).count();
        assert_eq!(moves, if rank < 2 { n } else { 0 }, "rank {rank}");
        assert_eq!(
            calls.len() - moves,
            threads_of(p),
            "every thread asks its rank"
        );
    }
}

/// Allreduce from one thread as a random rank of a random world size (n random too); the mock
/// adds the other ranks' data to this rank's (read from the kernel's buffer) and writes the
/// sums. With `corrupt`, one random sum is off by one and the kernel must count exactly that
/// element.
pub fn allreduce(p: &dyn Platform, threads: u32, corrupt: bool) {
    let mut r = super::common::rng("emissary_allreduce");
    let size: i32 = r.random_range(2..=5);
    let rank: i32 = r.random_range(0..size);
    let n: usize = r.random_range(1..300);
    let bad = r.random_range(0..n);
    let data = View::new(p.exec(), n, POISON);
    let sum = View::new(p.exec(), n, POISON);
    let errors = View::new(p.exec(), 1, 0);
    let (d, s) = (data.clone(), sum.clone());
    let mock = install(p, false, move |lane, c| {
        assert_eq!(lane, 0, "one caller");
        match c.function {
            10 => ok(0, &[rank as u64]),
            11 => ok(0, &[size as u64]),
            6 => {
                assert_eq!(
                    c.args,
                    [
                        dptr(d.base),
                        dptr(s.base),
                        int(n as i64),
                        int(3),
                        int(1),
                        int(0)
                    ]
                );
                for i in 0..n {
                    let mine = d.load(d.base + 4 * i as u64);
                    let others: i32 = (0..size)
                        .filter(|&q| q != rank)
                        .map(|q| 1000 * q + i as i32)
                        .sum();
                    let off = i32::from(corrupt && i == bad);
                    s.store(s.base + 4 * i as u64, mine + others + off);
                }
                ok(0, &[])
            }
            f => panic!("function {f}"),
        }
    });
    p.allreduce(threads, &data, &sum, &errors, n as i32);
    let fs: Vec<u32> = mock
        .calls()
        .iter()
        .map(|(m, _, c)| {
            assert_eq!(*m, 1, "lane 0 alone");
            c.function
        })
        .collect();
    assert_eq!(fs, [10, 11, 6]);
    let want_data: Vec<i32> = (0..n as i32).map(|i| 1000 * rank + i).collect();
    assert_eq!(data.to_vec(), want_data);
    assert_eq!(errors.to_vec(), [i32::from(corrupt)]);
}
