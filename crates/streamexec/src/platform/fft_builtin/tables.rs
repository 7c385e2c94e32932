//! The host half of a plan: how each axis is factored, and the tables (twiddles, Bluestein
//! chirps and filters) computed once in f64 at plan creation.

use crate::error::{Error, Result};

/// The radices of the Stockham passes (kernels/fft_body.h handles 2, 3, 4, 5 and 7).
const RADICES: [u64; 5] = [4, 2, 3, 5, 7];

/// `n` as a product of supported radices (4s first), or `None` if it has another prime factor.
/// `n = 1` is the empty product (no pass).
pub(super) fn factor(mut n: u64) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for r in RADICES {
        while n.is_multiple_of(r) {
            out.push(r as u32);
            n /= r;
        }
    }
    (n == 1).then_some(out)
}

/// How one axis of length `n > 1` is transformed.
#[derive(Clone, Debug)]
pub(super) enum Method {
    /// Stockham passes of these radices; `twiddles` is the table offset (complex numbers) of
    /// `w_n^t`, `t < n`.
    Stockham { radices: Vec<u32>, twiddles: u64 },
    /// Bluestein over a padded power-of-two length `m ≥ 2n − 1`: `twiddles` (`w_m^t`, for the
    /// passes of `radices`), `chirp` (`a_j = e^{−πi·j²/n}`, `j < n`) and `filter` (the
    /// length-`m` transform of the conjugate chirp, scaled by `1/m`) are table offsets.
    Bluestein {
        m: u64,
        radices: Vec<u32>,
        twiddles: u64,
        chirp: u64,
        filter: u64,
    },
}

/// One axis of the contiguous working array: lines of `n` elements `s` apart, `lines` of them.
#[derive(Clone, Debug)]
pub(super) struct Axis {
    pub n: u64,
    pub s: u64,
    pub lines: u64,
    pub method: Method,
}

/// The forward twiddles `e^{−2πi·t/n}`, `t < n`, as (re, im) pairs.
fn twiddles(n: u64) -> Vec<[f64; 2]> {
    (0..n)
        .map(|t| {
            let (s, c) = (-2.0 * std::f64::consts::PI * t as f64 / n as f64).sin_cos();
            [c, s]
        })
        .collect()
}

/// In-place forward FFT of a power-of-two length (f64, for the Bluestein filter only).
fn fft_pow2(x: &mut [[f64; 2]]) {
    let n = x.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            x.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let w = twiddles(len as u64);
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let (a, b) = (x[start + k], x[start + k + len / 2]);
                let t = [
                    b[0] * w[k][0] - b[1] * w[k][1],
                    b[0] * w[k][1] + b[1] * w[k][0],
                ];
                x[start + k] = [a[0] + t[0], a[1] + t[1]];
                x[start + k + len / 2] = [a[0] - t[0], a[1] - t[1]];
            }
        }
        len <<= 1;
    }
}

/// The axes of a working array of `shape` (outermost first, batch included as the first
/// extent, which is not transformed) and the table they read, in complex numbers.
pub(super) fn plan_axes(shape: &[u64], op: &str) -> Result<(Vec<Axis>, Vec<[f64; 2]>)> {
    let total: u64 = shape.iter().product();
    let mut table = Vec::new();
    let mut axes = Vec::new();
    for a in 1..shape.len() {
        let n = shape[a];
        if n == 1 {
            continue;
        }
        let s: u64 = shape[a + 1..].iter().product();
        let method = match factor(n) {
            Some(radices) => {
                let twiddles = table.len() as u64;
                table.extend(twiddles_checked(n, op)?);
                Method::Stockham { radices, twiddles }
            }
            None => {
                let m = (2 * n - 1).checked_next_power_of_two().ok_or_else(|| {
                    Error::invalid(op, format!("size {n} is too large for Bluestein's padding"))
                })?;
                let radices = factor(m).ok_or_else(|| {
                    Error::internal(format!("Bluestein's padded length {m} did not factor"))
                })?;
                let twiddles = table.len() as u64;
                table.extend(twiddles_checked(m, op)?);
                let chirp_at = table.len() as u64;
                let chirp: Vec<[f64; 2]> = (0..n)
                    .map(|j| {
                        let sq = (u128::from(j) * u128::from(j) % (2 * u128::from(n))) as f64;
                        let (s, c) = (-std::f64::consts::PI * sq / n as f64).sin_cos();
                        [c, s]
                    })
                    .collect();
                let mut h = vec![[0.0; 2]; m as usize];
                for (j, c) in chirp.iter().enumerate() {
                    h[j] = [c[0], -c[1]];
                    if j > 0 {
                        h[m as usize - j] = [c[0], -c[1]];
                    }
                }
                fft_pow2(&mut h);
                let scale = 1.0 / m as f64;
                table.extend(chirp);
                let filter = table.len() as u64;
                table.extend(h.iter().map(|v| [v[0] * scale, v[1] * scale]));
                Method::Bluestein {
                    m,
                    radices,
                    twiddles,
                    chirp: chirp_at,
                    filter,
                }
            }
        };
        axes.push(Axis {
            n,
            s,
            lines: total / n,
            method,
        });
    }
    Ok((axes, table))
}

/// [`twiddles`] for a table that must fit in host memory.
fn twiddles_checked(n: u64, op: &str) -> Result<Vec<[f64; 2]>> {
    if n > (1 << 40) {
        return Err(Error::invalid(
            op,
            format!("a transform of length {n} needs a twiddle table too large to build"),
        ));
    }
    Ok(twiddles(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_supported_sizes_and_refuses_others() {
        assert_eq!(factor(1), Some(vec![]));
        assert_eq!(factor(4096), Some(vec![4; 6]));
        assert_eq!(factor(2 * 3 * 5 * 7 * 8), Some(vec![4, 4, 3, 5, 7]));
        assert_eq!(factor(17), None);
        assert_eq!(factor(2 * 11), None);
    }

    #[test]
    fn host_fft_matches_a_direct_dft() {
        let n = 64;
        let x: Vec<[f64; 2]> = (0..n)
            .map(|i| [(i as f64 * 0.37).sin(), (i as f64 * 1.3).cos()])
            .collect();
        let mut y = x.clone();
        fft_pow2(&mut y);
        for (k, yk) in y.iter().enumerate() {
            let mut want = [0.0; 2];
            for (j, xj) in x.iter().enumerate() {
                let (s, c) =
                    (-2.0 * std::f64::consts::PI * (j * k % n) as f64 / n as f64).sin_cos();
                want[0] += xj[0] * c - xj[1] * s;
                want[1] += xj[0] * s + xj[1] * c;
            }
            assert!((want[0] - yk[0]).abs() < 1e-12 && (want[1] - yk[1]).abs() < 1e-12);
        }
    }
}
