//! C `printf` on the host: the argument layout a device's `va_list` has (so the server can tell
//! the device how many bytes to send), and formatting from those bytes.

/// One conversion of a format string.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spec {
    flags: String,
    width: Option<usize>,
    star_width: bool,
    precision: Option<usize>,
    star_precision: bool,
    long: bool,
    short: u8, // 1 = h, 2 = hh
    conv: char,
}

/// A piece of a format string.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Piece {
    Text(Vec<u8>),
    Conv(Spec),
}

/// Splits a format (without its NUL) into text and conversions; a malformed conversion is
/// printed as text.
pub(crate) fn parse(fmt: &[u8]) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            text.push(fmt[i]);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        if fmt.get(i) == Some(&b'%') {
            text.push(b'%');
            i += 1;
            continue;
        }
        let mut s = Spec {
            flags: String::new(),
            width: None,
            star_width: false,
            precision: None,
            star_precision: false,
            long: false,
            short: 0,
            conv: '\0',
        };
        while let Some(&c) = fmt.get(i).filter(|c| b"-+ #0".contains(c)) {
            s.flags.push(c as char);
            i += 1;
        }
        if fmt.get(i) == Some(&b'*') {
            s.star_width = true;
            i += 1;
        } else {
            let n = digits(fmt, &mut i);
            s.width = n;
        }
        if fmt.get(i) == Some(&b'.') {
            i += 1;
            if fmt.get(i) == Some(&b'*') {
                s.star_precision = true;
                i += 1;
            } else {
                s.precision = Some(digits(fmt, &mut i).unwrap_or(0));
            }
        }
        while let Some(&c) = fmt.get(i).filter(|c| b"hljztqL".contains(c)) {
            match c {
                b'h' => s.short += 1,
                _ => s.long = true,
            }
            i += 1;
        }
        match fmt.get(i) {
            Some(&c) if b"diuoxXcspnfFeEgGaA".contains(&c) => {
                s.conv = c as char;
                i += 1;
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Conv(s));
            }
            _ => text.extend_from_slice(&fmt[start..i.min(fmt.len())]),
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

fn digits(fmt: &[u8], i: &mut usize) -> Option<usize> {
    let start = *i;
    while fmt.get(*i).is_some_and(u8::is_ascii_digit) {
        *i += 1;
    }
    std::str::from_utf8(&fmt[start..*i]).ok()?.parse().ok()
}

impl Spec {
    /// Byte size of the argument of this conversion (not counting `*` widths).
    fn arg_size(&self) -> usize {
        match self.conv {
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'a' | 'A' | 's' | 'p' | 'n' => 8,
            _ if self.long => 8,
            _ => 4,
        }
    }
}

/// Where each argument sits: (offset, size) in order, `*` arguments included, and the total
/// size. Non-packed arguments are aligned to their size; packed ones are not.
pub(crate) fn layout(pieces: &[Piece], packed: bool) -> (Vec<(usize, usize)>, usize) {
    let mut at = 0usize;
    let mut slots = Vec::new();
    let mut push = |size: usize| {
        if !packed {
            at = at.next_multiple_of(size);
        }
        slots.push((at, size));
        at += size;
    };
    for p in pieces {
        if let Piece::Conv(s) = p {
            if s.star_width {
                push(4);
            }
            if s.star_precision {
                push(4);
            }
            push(s.arg_size());
        }
    }
    (slots, at)
}

/// Offsets of the `%s` pointers (to fetch their strings from the device), in format order.
pub(crate) fn string_slots(pieces: &[Piece], slots: &[(usize, usize)]) -> Vec<usize> {
    let mut k = 0;
    let mut out = Vec::new();
    for p in pieces {
        if let Piece::Conv(s) = p {
            k += usize::from(s.star_width) + usize::from(s.star_precision);
            if s.conv == 's' {
                out.push(slots[k].0);
            }
            k += 1;
        }
    }
    out
}

fn read(args: &[u8], (off, size): (usize, usize)) -> u64 {
    let mut b = [0u8; 8];
    if let Some(src) = args.get(off..off + size) {
        b[..size].copy_from_slice(src);
    }
    u64::from_le_bytes(b)
}

/// Formats `pieces` with the argument bytes `args` and the fetched `%s` strings (in format
/// order; `None` for a null pointer).
pub(crate) fn format_pieces(
    pieces: &[Piece],
    slots: &[(usize, usize)],
    args: &[u8],
    strings: &[Option<Vec<u8>>],
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut k = 0;
    let mut next_string = 0;
    for p in pieces {
        let s = match p {
            Piece::Text(t) => {
                out.extend_from_slice(t);
                continue;
            }
            Piece::Conv(s) => s,
        };
        let mut s = s.clone();
        if s.star_width {
            let w = read(args, slots[k]) as u32 as i32;
            k += 1;
            if w < 0 {
                s.flags.push('-');
            }
            s.width = Some(w.unsigned_abs() as usize);
        }
        if s.star_precision {
            let p = read(args, slots[k]) as u32 as i32;
            k += 1;
            s.precision = (p >= 0).then_some(p as usize);
        }
        let raw = read(args, slots[k]);
        k += 1;
        let body = convert(&s, raw, || {
            let st = strings.get(next_string).cloned().flatten();
            next_string += 1;
            st
        });
        pad(&mut out, &s, body);
    }
    out
}

/// Formats C `printf`'s `format` (without its NUL) with arguments in a buffer laid out as
/// CUDA's `vprintf` and a `va_list` of the GPU targets have them: each argument (`int` and
/// smaller promoted to 4 bytes, `long`/`long long`, pointers, `%s` pointers and floats promoted
/// to `double` 8 bytes, `*` widths 4) at the next offset aligned to its size. The project's one
/// printf formatter: the RPC printf services and the PTX engines' `vprintf` both use it.
///
/// `read_args(bytes)` gives the buffer's first `bytes` bytes; `read_string(ptr)` the
/// NUL-terminated string of a non-null `%s` pointer (a null one prints `(null)`). Returns the
/// text and the number of arguments the format took (what CUDA's `vprintf` returns), or the
/// first error of a callback.
pub fn format_args_buffer<E>(
    format: &[u8],
    read_args: impl FnOnce(usize) -> Result<Vec<u8>, E>,
    mut read_string: impl FnMut(u64) -> Result<Vec<u8>, E>,
) -> Result<(Vec<u8>, usize), E> {
    let pieces = parse(format);
    let (slots, size) = layout(&pieces, false);
    let args = if size == 0 {
        Vec::new()
    } else {
        read_args(size)?
    };
    let mut strings = Vec::new();
    for off in string_slots(&pieces, &slots) {
        let ptr = read(&args, (off, 8));
        strings.push(if ptr == 0 {
            None
        } else {
            Some(read_string(ptr)?)
        });
    }
    Ok((format_pieces(&pieces, &slots, &args, &strings), slots.len()))
}

fn signed(s: &Spec, raw: u64) -> i64 {
    match (s.long, s.short) {
        (true, _) => raw as i64,
        (_, 1) => raw as u16 as i16 as i64,
        (_, 2) => raw as u8 as i8 as i64,
        _ => raw as u32 as i32 as i64,
    }
}

fn unsigned(s: &Spec, raw: u64) -> u64 {
    match (s.long, s.short) {
        (true, _) => raw,
        (_, 1) => raw as u16 as u64,
        (_, 2) => raw as u8 as u64,
        _ => raw as u32 as u64,
    }
}

/// The converted text, before width padding; numbers carry their sign and prefix.
fn convert(s: &Spec, raw: u64, mut string: impl FnMut() -> Option<Vec<u8>>) -> Vec<u8> {
    let plus = |neg: bool| {
        if neg {
            "-"
        } else if s.flags.contains('+') {
            "+"
        } else if s.flags.contains(' ') {
            " "
        } else {
            ""
        }
    };
    let int_digits = |d: String| match s.precision {
        Some(0) if d == "0" => String::new(),
        Some(p) if d.len() < p => format!("{}{d}", "0".repeat(p - d.len())),
        _ => d,
    };
    match s.conv {
        'd' | 'i' => {
            let v = signed(s, raw);
            format!(
                "{}{}",
                plus(v < 0),
                int_digits(v.unsigned_abs().to_string())
            )
            .into_bytes()
        }
        'u' => int_digits(unsigned(s, raw).to_string()).into_bytes(),
        'o' => {
            let d = int_digits(format!("{:o}", unsigned(s, raw)));
            let alt = s.flags.contains('#') && !d.starts_with('0');
            format!("{}{d}", if alt { "0" } else { "" }).into_bytes()
        }
        'x' | 'X' => {
            let v = unsigned(s, raw);
            let d = int_digits(format!("{v:x}"));
            let pre = if s.flags.contains('#') && v != 0 {
                "0x"
            } else {
                ""
            };
            let t = format!("{pre}{d}");
            if s.conv == 'X' { t.to_uppercase() } else { t }.into_bytes()
        }
        'c' => vec![raw as u8],
        'p' => format!("0x{raw:x}").into_bytes(),
        'n' => Vec::new(), // never writes device memory
        's' => {
            let mut t = match string() {
                Some(mut b) => {
                    if let Some(z) = b.iter().position(|&c| c == 0) {
                        b.truncate(z);
                    }
                    b
                }
                None => b"(null)".to_vec(),
            };
            if let Some(p) = s.precision {
                t.truncate(p);
            }
            t
        }
        _ => float(s, f64::from_bits(raw), plus).into_bytes(),
    }
}

fn float(s: &Spec, v: f64, plus: impl Fn(bool) -> &'static str) -> String {
    let upper = s.conv.is_ascii_uppercase();
    let sign = plus(v.is_sign_negative() && !v.is_nan());
    let a = v.abs();
    if !a.is_finite() {
        let t = if a.is_nan() { "nan" } else { "inf" };
        return format!("{sign}{}", if upper { t.to_uppercase() } else { t.into() });
    }
    let p = s.precision.unwrap_or(6);
    let body = match s.conv.to_ascii_lowercase() {
        'f' => format!("{a:.p$}"),
        'e' => exp(a, p),
        'a' => format!("{a:e}"), // hexadecimal floats are printed in decimal notation
        _ => {
            // %g: the shorter of %e and %f at precision P (trailing zeros dropped unless '#').
            let p = if p == 0 { 1 } else { p };
            let x = if a == 0.0 {
                0
            } else {
                exp(a, p - 1)
                    .rsplit('e')
                    .next()
                    .and_then(|e| e.parse::<i32>().ok())
                    .unwrap_or(0)
            };
            let t = if x < -4 || x >= p as i32 {
                exp(a, p - 1)
            } else {
                format!("{a:.*}", (p as i32 - 1 - x).max(0) as usize)
            };
            if s.flags.contains('#') {
                t
            } else {
                trim_zeros(t)
            }
        }
    };
    let body = if upper { body.to_uppercase() } else { body };
    format!("{sign}{body}")
}

fn exp(a: f64, p: usize) -> String {
    let t = format!("{a:.p$e}");
    let (m, e) = t.split_once('e').unwrap_or((&t, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

fn trim_zeros(t: String) -> String {
    let (m, e) = match t.find('e') {
        Some(i) => (&t[..i], &t[i..]),
        None => (&t[..], ""),
    };
    let m = if m.contains('.') {
        m.trim_end_matches('0').trim_end_matches('.')
    } else {
        m
    };
    format!("{m}{e}")
}

fn pad(out: &mut Vec<u8>, s: &Spec, body: Vec<u8>) {
    let width = s.width.unwrap_or(0);
    if body.len() >= width {
        out.extend_from_slice(&body);
        return;
    }
    let fill = width - body.len();
    let numeric = !matches!(s.conv, 's' | 'c');
    let zero_ok = numeric && !(s.precision.is_some() && "diouxX".contains(s.conv));
    if s.flags.contains('-') {
        out.extend_from_slice(&body);
        out.extend(std::iter::repeat_n(b' ', fill));
    } else if s.flags.contains('0') && zero_ok {
        // Zeros go after the sign and the 0x prefix.
        let pre = body.iter().take_while(|c| b"+- ".contains(c)).count().max(
            if body.starts_with(b"0x") || body.starts_with(b"0X") {
                2
            } else {
                0
            },
        );
        out.extend_from_slice(&body[..pre]);
        out.extend(std::iter::repeat_n(b'0', fill));
        out.extend_from_slice(&body[pre..]);
    } else {
        out.extend(std::iter::repeat_n(b' ', fill));
        out.extend_from_slice(&body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(fmt: &str, args: &[u8], strings: &[Option<&str>]) -> String {
        let pieces = parse(fmt.as_bytes());
        let (slots, _) = layout(&pieces, false);
        let strings: Vec<_> = strings
            .iter()
            .map(|s| s.map(|s| s.as_bytes().to_vec()))
            .collect();
        String::from_utf8(format_pieces(&pieces, &slots, args, &strings)).unwrap()
    }

    fn bytes(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn layout_aligns_unless_packed() {
        let p = parse(b"%d %f %c %ld %*d %s");
        assert_eq!(layout(&p, false).1, 4 + 4 + 8 + 4 + 4 + 8 + 4 + 4 + 8);
        assert_eq!(layout(&p, true).1, 4 + 8 + 4 + 8 + 4 + 4 + 8);
    }

    #[test]
    fn formats_like_c() {
        let a = bytes(&[&42i32.to_le_bytes(), &[0; 4], &3.25f64.to_le_bytes()]);
        assert_eq!(run("x=%d y=%.2f!", &a, &[]), "x=42 y=3.25!");
        let a = bytes(&[&(-7i32).to_le_bytes(), &255u32.to_le_bytes()]);
        assert_eq!(run("[%5d|%-4x|%%]", &a, &[]), "[   -7|ff  |%]");
        assert_eq!(run("%05d %#X", &a, &[]), "-0007 0XFF");
        let a = 1234.5f64.to_le_bytes();
        assert_eq!(run("%e", &a, &[]), "1.234500e+03");
        assert_eq!(run("%g", &a, &[]), "1234.5");
        assert_eq!(run("%10.3f", &a, &[]), "  1234.500");
        let a = bytes(&[&1u64.to_le_bytes(), &0u64.to_le_bytes()]);
        assert_eq!(run("%s and %s", &a, &[Some("hi"), None]), "hi and (null)");
        assert_eq!(run("%.1s|%lu", &1u64.to_le_bytes(), &[Some("abc")]), "a|0");
        assert_eq!(run("100%% %q", &[], &[]), "100% %q");
    }

    /// CUDA's vprintf buffer (each argument aligned to its size) for random values, formatted
    /// by `format_args_buffer`, against Rust's `format!` of the same values; `%s` strings
    /// come through the callback by pointer.
    #[test]
    fn vprintf_buffers_format_like_rusts_format_on_random_values() {
        use rand::RngExt;
        let mut r = streamexec_test_support::rng(module_path!());
        for _ in 0..if cfg!(miri) { 20 } else { 500 } {
            let (i, u, l) = (r.random::<i32>(), r.random::<u32>(), r.random::<i64>());
            let d = (r.random::<f64>() - 0.5) * 10f64.powi(r.random_range(-3..9));
            let c = r.random_range(b'!'..=b'~');
            let w = r.random_range(0..12usize);
            let p = r.random_range(0..8usize);
            let text: String = (0..r.random_range(0..10))
                .map(|_| r.random_range(b'a'..=b'z') as char)
                .collect();
            let ptr = 0x1000 + r.random_range(0..1000u64) * 8;
            // i@0 d@8 s@16 l@24 u@32 c@36 (int) v@40, as CUDA lays out `printf`'s arguments.
            let mut buf = Vec::new();
            buf.extend_from_slice(&i.to_le_bytes());
            buf.extend_from_slice(&[0xEE; 4]); // padding: never read
            buf.extend_from_slice(&d.to_bits().to_le_bytes());
            buf.extend_from_slice(&ptr.to_le_bytes());
            buf.extend_from_slice(&l.to_le_bytes());
            buf.extend_from_slice(&u.to_le_bytes());
            buf.extend_from_slice(&(c as u32).to_le_bytes());
            let v = r.random::<u32>();
            buf.extend_from_slice(&v.to_le_bytes());
            let fmt = format!("i=%{w}d d=%.{p}f s=%s l=%lld u=%x c=%c|%-{w}u|");
            let mut asked = Vec::new();
            let (out, n) = format_args_buffer::<()>(
                fmt.as_bytes(),
                |bytes| Ok(buf[..bytes].to_vec()),
                |at| {
                    asked.push(at);
                    Ok(text.clone().into_bytes())
                },
            )
            .unwrap();
            let want = format!(
                "i={i:w$} d={d:.p$} s={text} l={l} u={u:x} c={}|{:<w$}|",
                c as char, v
            );
            assert_eq!(String::from_utf8(out).unwrap(), want, "{fmt}");
            assert_eq!(asked, vec![ptr]);
            assert_eq!(n, 7);
        }
        // A null %s pointer prints (null) without a callback; no argument reads nothing.
        let (out, n) =
            format_args_buffer::<()>(b"[%s]", |_| Ok(vec![0; 8]), |_| panic!("no string to read"))
                .unwrap();
        assert_eq!((out.as_slice(), n), (&b"[(null)]"[..], 1));
        let (out, n) =
            format_args_buffer::<()>(b"plain\n", |_| panic!("no arguments"), |_| Err(())).unwrap();
        assert_eq!((out.as_slice(), n), (&b"plain\n"[..], 0));
    }
}
