//! `%f` and `%e` as Kubernetes' `string.format` writes them: cel-go's strings library at
//! version 2 (Kubernetes 1.34) prints doubles with golang.org/x/text's number printer for
//! the locale `en_US`, not with Go's `fmt`:
//!
//! - `%.Nf`: N decimals (default 6), the integer part grouped by thousands
//!   (`1,234,567.891000`), `∞`, `-∞` and `NaN`;
//! - `%.Ne`: always 6 decimals and a superscript exponent of at least two digits
//!   (`1.230000×10⁻⁰⁴`): cel-go writes the format `%Ne`, so N is the width the result is
//!   padded to with spaces on the left (`'%.5e'` of NaN is `  NaN`), not a precision.
//!
//! A negative number keeps its sign when it rounds to zero (`-0.0`); `-0.0` itself has
//! none.

/// The decimals `%e` writes, whatever the clause says.
const SCIENTIFIC_DECIMALS: usize = 6;

/// `%.{decimals}f`.
pub(super) fn fixed(d: f64, decimals: usize) -> String {
    if let Some(special) = non_finite(d) {
        return special.to_owned();
    }
    // Go's strconv and Rust both round the exact binary value to the nearest, ties to even.
    let digits = format!("{:.decimals$}", d.abs());
    let (integer, fraction) = digits.split_once('.').unwrap_or((&digits, ""));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if d < 0.0 {
        out.push('-');
    }
    out.push_str(&grouped(integer));
    if !fraction.is_empty() {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `%{width}e`: six decimals, `×10` and the exponent in superscript, padded to `width`
/// characters.
pub(super) fn scientific(d: f64, width: usize) -> String {
    let formatted = match non_finite(d) {
        Some(special) => special.to_owned(),
        None => {
            let digits = format!("{:.SCIENTIFIC_DECIMALS$e}", d.abs());
            let (mantissa, exponent) = digits.split_once('e').unwrap_or((&digits, "0"));
            let exponent: i32 = exponent.parse().unwrap_or(0);
            let sign = if d < 0.0 { "-" } else { "" };
            format!("{sign}{mantissa}×10{}", superscript(exponent))
        }
    };
    let len = formatted.chars().count();
    if len >= width {
        return formatted;
    }
    let mut out = " ".repeat(width - len);
    out.push_str(&formatted);
    out
}

fn non_finite(d: f64) -> Option<&'static str> {
    if d.is_nan() {
        Some("NaN")
    } else if d.is_infinite() {
        Some(if d > 0.0 { "∞" } else { "-∞" })
    } else {
        None
    }
}

/// Decimal digits with a `,` between each group of three, from the right.
fn grouped(digits: &str) -> String {
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An exponent in superscript digits, at least two, with a superscript minus.
fn superscript(exponent: i32) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut out = String::new();
    if exponent < 0 {
        out.push('⁻');
    }
    let digits = format!("{:02}", exponent.unsigned_abs());
    out.extend(
        digits
            .bytes()
            .map(|b| DIGITS[usize::from(b.saturating_sub(b'0')).min(9)]),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_groups_thousands() {
        assert_eq!(fixed(1234567.891, 6), "1,234,567.891000");
        assert_eq!(fixed(-1234.5678, 2), "-1,234.57");
        assert_eq!(fixed(999.5, 0), "1,000");
        assert_eq!(fixed(2.5, 0), "2");
        assert_eq!(fixed(3.5, 0), "4");
        assert_eq!(fixed(-0.01, 1), "-0.0");
        assert_eq!(fixed(-0.0, 6), "0.000000");
        assert_eq!(fixed(f64::INFINITY, 2), "∞");
        assert_eq!(fixed(f64::NEG_INFINITY, 2), "-∞");
        assert_eq!(fixed(f64::NAN, 2), "NaN");
        assert_eq!(fixed(123.0, 6), "123.000000");
    }

    #[test]
    fn scientific_ignores_the_precision() {
        assert_eq!(scientific(0.000123, 2), "1.230000×10⁻⁰⁴");
        assert_eq!(scientific(1234.5, 6), "1.234500×10⁰³");
        assert_eq!(scientific(0.0, 6), "0.000000×10⁰⁰");
        assert_eq!(scientific(-0.0, 6), "0.000000×10⁰⁰");
        assert_eq!(scientific(1e300, 6), "1.000000×10³⁰⁰");
        assert_eq!(scientific(-9.9999999, 6), "-1.000000×10⁰¹");
        assert_eq!(scientific(5.5, 20), "       5.500000×10⁰⁰");
        assert_eq!(scientific(f64::NAN, 5), "  NaN");
        assert_eq!(scientific(f64::NEG_INFINITY, 10), "        -∞");
    }
}
