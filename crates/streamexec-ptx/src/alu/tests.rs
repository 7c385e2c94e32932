//! Edge cases of the lane functions.
use super::*;

fn f(x: f32) -> u64 {
    x.to_bits() as u64
}
fn g(b: u64) -> f32 {
    f32::from_bits(b as u32)
}

#[test]
fn directed_rounding_brackets_the_exact_result() {
    let (a, b) = (f(1.0), f(3.0));
    let rn = g(fdiv::<f32, RN, false>(a, b));
    let rz = g(fdiv::<f32, RZ, false>(a, b));
    let rm = g(fdiv::<f32, RM, false>(a, b));
    let rp = g(fdiv::<f32, RP, false>(a, b));
    assert!(rm < rp && rz == rm && (rn == rm || rn == rp));
    let exact = 1.0f64 / 3.0;
    assert!((rm as f64) < exact && (rp as f64) > exact);
    let s = g(fadd::<f32, RP, false, false>(f(1.0), f(1e-10)));
    assert_eq!(s, 1.0f32.next_up());
    let s = g(fadd::<f32, RZ, false, false>(f(-1.0), f(-1e-10)));
    assert_eq!(s, -1.0);
}

#[test]
fn conversions_saturate_and_map_nan_to_zero() {
    assert_eq!(cvt_fi::<f32, i32, 2, false>(f(f32::NAN)), 0);
    assert_eq!(cvt_fi::<f32, i32, 2, false>(f(3e10)) as i32, i32::MAX);
    assert_eq!(cvt_fi::<f32, u32, 2, false>(f(-5.0)), 0);
    assert_eq!(cvt_fi::<f32, i32, 1, false>(f(2.5)) as i32, 2);
    assert_eq!(cvt_fi::<f32, i32, 3, false>(f(-2.5)) as i32, -3);
    assert_eq!(cvt_ii::<i32, u8, true>((-5i32) as u32 as u64), 0);
    assert_eq!(cvt_ii::<u32, i16, true>(70000), i16::MAX as u64);
    assert_eq!(cvt_ii::<i32, i64, false>(u32::MAX as u64) as i64, -1);
    let big = u64::MAX;
    assert_eq!(
        g(cvt_if::<u64, f32, RZ, false>(big)),
        1.8446744e19f32.next_down()
    );
    assert_eq!(g(cvt_if::<u64, f32, RN, false>(big)), 1.8446744e19);
}

#[test]
fn integer_edge_cases() {
    assert_eq!(ishift::<u32, true>(1, 40), 0);
    assert_eq!(ishift::<i32, false>((-8i32) as u32 as u64, 99) as i32, -1);
    assert_eq!(ibin::<u32, 4>(7, 0), u32::MAX as u64);
    assert_eq!(
        ibin::<i32, 4>(i32::MIN as u32 as u64, u32::MAX as u64) as i32,
        i32::MIN
    );
    assert_eq!(ibin::<i32, 11>(i32::MAX as u64, 5) as i32, i32::MAX);
    assert_eq!(imul_wide::<i32, i64>((-3i32) as u32 as u64, 7) as i64, -21);
    assert_eq!(ibin::<u32, 3>(u32::MAX as u64, 2), 1);
    assert_eq!(iunary::<u32, 5>(1), 31);
    assert_eq!(iunary::<u32, 6>(1), 0x8000_0000);
    assert_eq!(iunary::<u32, 7>(0), u32::MAX as u64);
    assert_eq!(iunary::<i32, 7>((-1i32) as u32 as u64), u32::MAX as u64);
    assert_eq!(bfe::<u32>(0xF0, 4, 4), 0xF);
    assert_eq!(bfe::<i32>(0xF0, 4, 4) as i32, -1);
    assert_eq!(bfi(false, 0xF, 0, 4, 4), 0xF0);
    assert_eq!(prmt(0x44332211, 0x88776655, 0x3210), 0x44332211);
    assert_eq!(prmt(0x44332211, 0x88776655, 0x7654), 0x88776655);
}

#[test]
fn float_min_max_and_compares() {
    assert_eq!(g(fminmax::<f32, false, false>(f(f32::NAN), f(2.0))), 2.0);
    assert!(g(fminmax::<f32, false, false>(f(0.0), f(-0.0))).is_sign_negative());
    assert_eq!(fcmp::<f32, 8, false>(f(f32::NAN), f(1.0)), 1);
    assert_eq!(fcmp::<f32, 2, false>(f(f32::NAN), f(1.0)), 0);
    assert_eq!(fcmp::<f32, 1, false>(f(f32::NAN), f(1.0)), 0);
    assert_eq!(fcmp::<f32, 7, false>(f(f32::NAN), f(1.0)), 1);
}
