//! The emissary wire format and dispatcher, without a server (pure Rust: Miri runs these).

use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;

fn random_args(rng: &mut StdRng) -> Vec<EmissaryArg> {
    let n = rng.random_range(0..=EMISSARY_MAX_ARGS);
    (0..n)
        .map(|_| match rng.random_range(0..3u32) {
            0 => {
                let size = [1u32, 2, 4, 8][rng.random_range(0..4usize)];
                EmissaryArg::Value {
                    size,
                    bits: rng.random(),
                }
            }
            1 => EmissaryArg::Device(rng.random()),
            _ => EmissaryArg::Host(rng.random()),
        })
        .collect()
}

/// A buffer built field by field, as the module docs of `emissary.rs` lay it out (independent of
/// `encode`).
fn by_hand(api: u32, function: u32, args: &[EmissaryArg]) -> Vec<u8> {
    let mut b = vec![0xA5u8; 16 + 16 * args.len()];
    b[0..4].copy_from_slice(&api.to_le_bytes());
    b[4..8].copy_from_slice(&function.to_le_bytes());
    b[8..12].copy_from_slice(&(args.len() as u32).to_le_bytes());
    b[12..16].copy_from_slice(&0u32.to_le_bytes());
    for (k, a) in args.iter().enumerate() {
        let r = &mut b[16 + 16 * k..32 + 16 * k];
        let (kind, size, v) = match *a {
            EmissaryArg::Value { size, bits } => (0u32, size, bits),
            EmissaryArg::Device(p) => (1, 8, p),
            EmissaryArg::Host(p) => (2, 8, p),
        };
        r[0..4].copy_from_slice(&kind.to_le_bytes());
        r[4..8].copy_from_slice(&size.to_le_bytes());
        r[8..16].copy_from_slice(&v.to_le_bytes());
    }
    b
}

#[test]
fn buffers_round_trip_and_match_the_documented_layout() {
    let mut rng = StdRng::seed_from_u64(0x5EED_E515);
    for _ in 0..if cfg!(miri) { 8 } else { 300 } {
        let (api, function) = (rng.random(), rng.random());
        let args = random_args(&mut rng);
        let b = encode(api, function, &args);
        assert_eq!(b, by_hand(api, function, &args));
        assert_eq!(decode(&b).unwrap(), (api, function, args));
    }
}

#[test]
fn malformed_buffers_are_refused_with_the_reason() {
    let good = encode(3, 1, &[EmissaryArg::i32(7), EmissaryArg::Device(0x1000)]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..10].to_vec(), "fewer than its 16-byte header"),
        (
            good[..good.len() - 1].to_vec(),
            "its header says 2 arguments",
        ),
        (
            [good.clone(), vec![0; 16]].concat(),
            "its header says 2 arguments",
        ),
        (
            {
                let mut b = good.clone();
                b[8..12].copy_from_slice(&33u32.to_le_bytes());
                b
            },
            "at most 32",
        ),
        (
            {
                let mut b = good.clone();
                b[16..20].copy_from_slice(&9u32.to_le_bytes());
                b
            },
            "argument 0 has kind 9",
        ),
        (
            {
                let mut b = good.clone();
                b[20..24].copy_from_slice(&3u32.to_le_bytes());
                b
            },
            "argument 0 has kind 0 and size 3",
        ),
        (
            {
                let mut b = good.clone();
                b[36..40].copy_from_slice(&4u32.to_le_bytes());
                b
            },
            "argument 1 has kind 1 and size 4",
        ),
    ];
    for (b, why) in cases {
        let e = decode(&b).unwrap_err();
        assert!(e.contains(why), "{e:?} should say {why:?}");
    }
}

/// Device memory for the tests: one region of host bytes at a fake device address; staged
/// unless `in_place`.
struct FakeMemory {
    base: u64,
    bytes: Arc<Mutex<Vec<u8>>>,
    in_place: bool,
}

impl EmissaryMemory for FakeMemory {
    fn buffer(&self, arg: EmissaryArg, len: u64) -> Result<HostBuffer> {
        let EmissaryArg::Device(addr) = arg else {
            return Err(Error::invalid("fake", "host pointers are not fake memory"));
        };
        let size = self.bytes.lock().len() as u64;
        let off = addr.wrapping_sub(self.base);
        if addr < self.base || off.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::invalid("fake", format!("{len} bytes at {addr:#x}")));
        }
        let off = off as usize;
        if self.in_place {
            let ptr = self.bytes.lock()[off..].as_mut_ptr();
            // SAFETY: the Vec is never resized, and `keep` holds its Arc.
            return Ok(unsafe {
                HostBuffer::in_place(ptr, len as usize, Box::new(self.bytes.clone()))
            });
        }
        let data = self.bytes.lock()[off..off + len as usize].to_vec();
        let dst = self.bytes.clone();
        Ok(HostBuffer::staged(
            data,
            move |d| {
                dst.lock()[off..off + d.len()].copy_from_slice(d);
                Ok(())
            },
            Box::new(()),
        ))
    }
}

/// API 9: `add(i32, i32)` returns the sum; `negate(ptr, n)` negates n i32s in place and
/// returns their old sum with n as an out value; `fail()` fails.
fn test_api() -> EmissaryApi {
    EmissaryApi::new(9, "test")
        .function(1, "add", 2, |c| {
            Ok(EmissaryReply::ret(
                i64::from(c.i32(0)?) + i64::from(c.i32(1)?),
            ))
        })
        .function(2, "negate", 2, |c| {
            let n = c.i32(1)? as usize;
            let buf = c.buffer(0, 4 * n as u64)?;
            let mut sum = 0i64;
            for k in 0..n {
                // SAFETY: `buf` holds 4 * n bytes; unaligned reads and writes of plain bytes.
                unsafe {
                    let p = buf.as_mut_ptr().add(4 * k).cast::<i32>();
                    let v = p.read_unaligned();
                    sum += i64::from(v);
                    p.write_unaligned(v.wrapping_neg());
                }
            }
            buf.write_back()?;
            let mut r = EmissaryReply::ret(sum);
            r.outs[0] = n as u64;
            Ok(r)
        })
        .function(3, "fail", 0, |_| {
            Err(Error::invalid("test fail", "it always fails"))
        })
}

#[test]
fn the_dispatcher_serves_values_and_pointers_in_place_and_staged() {
    let mut rng = StdRng::seed_from_u64(0xE515_0002);
    for in_place in [true, false] {
        let d = Dispatcher::default();
        d.register(test_api()).unwrap();
        let values: Vec<i32> = (0..64).map(|_| rng.random()).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mem = Arc::new(Mutex::new(bytes));
        d.set_memory(Arc::new(FakeMemory {
            base: 0x10_0000,
            bytes: mem.clone(),
            in_place,
        }));
        let (a, b): (i32, i32) = (rng.random(), rng.random());
        let w = d.serve_lane(
            0,
            &encode(9, 1, &[EmissaryArg::i32(a), EmissaryArg::i32(b)]),
        );
        assert_eq!(w[..2], [0, (i64::from(a) + i64::from(b)) as u64]);
        // Elements 8..40 (skipping the first 8).
        let w = d.serve_lane(
            5,
            &encode(
                9,
                2,
                &[EmissaryArg::Device(0x10_0000 + 32), EmissaryArg::i32(32)],
            ),
        );
        let want_sum: i64 = values[8..40].iter().map(|&v| i64::from(v)).sum();
        assert_eq!(w[..3], [0, want_sum as u64, 32]);
        let after: Vec<i32> = mem
            .lock()
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        for (k, (&old, &new)) in values.iter().zip(&after).enumerate() {
            let want = if (8..40).contains(&k) {
                old.wrapping_neg()
            } else {
                old
            };
            assert_eq!(new, want, "element {k} (in place: {in_place})");
        }
        assert!(d.take_errors().is_empty());
    }
}

#[test]
fn refused_calls_get_a_status_and_a_logged_reason() {
    let d = Dispatcher::default();
    d.register(test_api()).unwrap();
    d.set_memory(Arc::new(FakeMemory {
        base: 0x1000,
        bytes: Arc::new(Mutex::new(vec![0; 16])),
        in_place: true,
    }));
    let cases: Vec<(Vec<u8>, EmissaryStatus, &str)> = vec![
        (encode(8, 1, &[]), EmissaryStatus::UnknownApi, "API 8"),
        (
            encode(9, 7, &[]),
            EmissaryStatus::UnknownFunction,
            "function 7",
        ),
        (
            encode(9, 0, &[]),
            EmissaryStatus::UnknownFunction,
            "function 0",
        ),
        (
            encode(9, 1, &[EmissaryArg::i32(1)]),
            EmissaryStatus::BadArguments,
            "takes 2 arguments; the call sent 1",
        ),
        (
            encode(9, 1, &[EmissaryArg::i32(1), EmissaryArg::u64(2)]),
            EmissaryStatus::BadArguments,
            "argument 1 is a 8-byte value",
        ),
        (
            encode(9, 2, &[EmissaryArg::i32(1), EmissaryArg::i32(2)]),
            EmissaryStatus::BadArguments,
            "argument 0 is a 4-byte value; this function takes a pointer",
        ),
        (
            encode(9, 2, &[EmissaryArg::Device(0x1000), EmissaryArg::i32(5)]),
            EmissaryStatus::BadPointer,
            "20 bytes at 0x1000",
        ),
        (
            encode(9, 2, &[EmissaryArg::Host(0x1000), EmissaryArg::i32(1)]),
            EmissaryStatus::BadPointer,
            "host pointers",
        ),
        (
            encode(9, 3, &[]),
            EmissaryStatus::HostError,
            "it always fails",
        ),
        (vec![1, 2, 3], EmissaryStatus::BadArguments, "header"),
    ];
    for (b, status, why) in cases {
        let w = d.serve_lane(3, &b);
        assert_eq!(w, {
            let mut x = [0u64; 8];
            x[0] = status as u64;
            x
        });
        let errors = d.take_errors();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains(why) && errors[0].contains("lane 3"),
            "{errors:?} should say {why:?}"
        );
    }
}

#[test]
fn tables_with_reserved_ids_are_refused() {
    let d = Dispatcher::default();
    let e = d.register(EmissaryApi::new(0, "zero")).unwrap_err();
    assert!(e.to_string().contains("id 0"), "{e}");
    let e = d
        .register(EmissaryApi::new(4, "x").function(0, "f", 0, |_| Ok(EmissaryReply::ret(0))))
        .unwrap_err();
    assert!(e.to_string().contains("index 0"), "{e}");
    let e = d
        .register(EmissaryApi::new(4, "x").function(1, "f", 33, |_| Ok(EmissaryReply::ret(0))))
        .unwrap_err();
    assert!(e.to_string().contains("at most 32"), "{e}");
}

#[test]
fn a_standalone_server_refuses_pointers() {
    let d = Dispatcher::default();
    d.register(test_api()).unwrap();
    let w = d.serve_lane(
        0,
        &encode(9, 2, &[EmissaryArg::Device(8), EmissaryArg::i32(1)]),
    );
    assert_eq!(w[0], EmissaryStatus::BadPointer as u64);
    assert!(d.take_errors()[0].contains("standalone"));
}
