//! The number formats every report shares, defined once: thousands separators, percentages,
//! C's `%g` and `%W.2f` (the gprof-style text reports print both).

/// `n` as text with thousands separators (`9,812`).
pub fn thousands(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub fn percent(part: impl Into<u128>, whole: impl Into<u128>) -> f64 {
    let (part, whole) = (part.into(), whole.into());
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// C's `%g`: six significant digits, trailing zeros removed, exponent form for very small or large.
pub fn fmt_g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is a number");
    if !(-4..6).contains(&exp) {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    strip_zeros(&format!("{:.*}", (5 - exp) as usize, x))
}

fn strip_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// Appends `hundredths / 100` with two decimals, right-aligned in `width` (as `%W.2f`).
pub fn fixed2(s: &mut Vec<u8>, hundredths: u128, width: usize) {
    let mut digits = [0u8; 48];
    let mut n = hundredths;
    let mut len = 0;
    while len < 4 || n > 0 {
        if len == 2 {
            digits[len] = b'.';
            len += 1;
            continue;
        }
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
    }
    for _ in len..width {
        s.push(b' ');
    }
    s.extend(digits[..len].iter().rev());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn like_printf_g() {
        assert_eq!(fmt_g(0.01), "0.01");
        assert_eq!(fmt_g(0.001001001), "0.001001");
        assert_eq!(fmt_g(0.010101010), "0.010101");
        assert_eq!(fmt_g(1.0), "1");
        assert_eq!(fmt_g(0.00001), "1e-05");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
    }

    #[test]
    fn fixed_point_like_printf() {
        let f = |h, w| {
            let mut s = Vec::new();
            fixed2(&mut s, h, w);
            String::from_utf8(s).unwrap()
        };
        assert_eq!(f(0, 7), "   0.00");
        assert_eq!(f(5, 7), "   0.05");
        assert_eq!(f(40, 7), "   0.40");
        assert_eq!(f(12345, 7), " 123.45");
        assert_eq!(f(123_456_789, 7), "1234567.89");
    }
}
