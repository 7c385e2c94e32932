//! Rounding to the half formats against a search over every value of the format.
use super::*;
use crate::alu::RP;

/// The nearest value of the format by search over all positive finite bit patterns (which
/// are ordered like their values), in mode `r`.
fn search(x: f64, bf: bool, r: u8) -> u16 {
    if x.is_nan() {
        return CANON_NAN;
    }
    let neg = x.is_sign_negative();
    let a = x.abs();
    let max = inf(bf) - 1;
    // The largest finite value <= a.
    let (mut lo, mut hi) = (0u16, max);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if to_f64(mid, bf) <= a {
            lo = mid
        } else {
            hi = mid - 1
        }
    }
    let below = lo;
    let exact = to_f64(below, bf) == a;
    let above = below + 1; // may be infinity
    let pick_up = if exact {
        false
    } else {
        // The value just past the largest finite one, for ties at overflow: 2^(emax+1).
        let up = if above == inf(bf) {
            to_f64(max, bf) + (to_f64(max, bf) - to_f64(max - 1, bf))
        } else {
            to_f64(above, bf)
        };
        let (dl, du) = (a - to_f64(below, bf), up - a);
        match r {
            RN => du < dl || (du == dl && above & 1 == 0),
            RZ => false,
            RM => neg,
            _ => !neg,
        }
    };
    let m = if pick_up { above } else { below };
    let m = if a.is_infinite() { inf(bf) } else { m };
    if neg { m | 0x8000 } else { m }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "every half value in every mode: hours under Miri; no unsafe code"
)]
fn round_matches_a_search_in_every_mode() {
    let mut s = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    for bf in [false, true] {
        let mut xs: Vec<f64> = vec![0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 1e-8, 6e-8];
        for h in 0..=u16::MAX {
            let v = to_f64(h, bf);
            xs.push(v);
            // Midpoints and their neighbours.
            let w = to_f64(h.wrapping_add(1), bf);
            if v.is_finite() && w.is_finite() {
                let m = (v + w) / 2.0;
                xs.extend([m, m.next_up(), m.next_down()]);
            }
        }
        for _ in 0..20000 {
            xs.push(f64::from_bits(next()) % 1e6);
            xs.push(f32::from_bits(next() as u32) as f64);
        }
        for x in xs {
            for r in [RN, RZ, RM, RP] {
                let (got, want) = (round(x, bf, r), search(x, bf, r));
                assert_eq!(
                    got, want,
                    "x={x:e} bf={bf} r={r}: {got:#06x} vs {want:#06x}"
                );
            }
        }
    }
}

#[test]
fn to_odd_then_round_is_the_correct_rounding_of_a_fused_result() {
    // 3 * 87 = 261 is halfway between the bfloat16 values 260 and 262; an addend far below
    // f64's precision decides.
    let (a, b) = (round(3.0, true, RN) as u64, round(87.0, true, RN) as u64);
    let tiny = round(1e-30, true, RN) as u64;
    let r = hfma::<true, false, false, false, false>(a, b, tiny);
    assert_eq!(to_f64(r as u16, true), 262.0);
    let r = hfma::<true, false, false, false, false>(a, b, tiny | 0x8000);
    assert_eq!(to_f64(r as u16, true), 260.0);
    let r = hfma::<true, false, false, false, false>(a, b, 0);
    assert_eq!(to_f64(r as u16, true), 260.0); // the tie goes to even
}

#[test]
fn cvt_spec_round_trips() {
    for dst in [
        Kind::F16,
        Kind::Bf16,
        Kind::F32,
        Kind::F64,
        Kind::Int {
            bytes: 8,
            signed: true,
        },
        Kind::Int {
            bytes: 1,
            signed: false,
        },
    ] {
        let s = CvtSpec {
            dst,
            src: Kind::Int {
                bytes: 2,
                signed: true,
            },
            round: RM,
            int_round: true,
            ftz: true,
            sat: false,
            relu: true,
            satfinite: true,
        };
        assert_eq!(CvtSpec::decode(s.encode()), s);
    }
}
