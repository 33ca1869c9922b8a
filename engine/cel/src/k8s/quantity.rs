//! Kubernetes quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`) and the CEL
//! quantity library (`k8s.io/apiserver/pkg/cel/library/quantity.go`).
//!
//! A quantity keeps the two representations Go's does, because they are observable:
//!
//! - an `int64` mantissa with a power-of-ten scale (`int64Amount`), used when a string
//!   parses on the fast path (at most 19 digits, at least nano precision) and when
//!   arithmetic between two such values does not overflow;
//! - an exact decimal (`inf.Dec`) otherwise (`1.5Gi`, `0.1n`, 20-digit numbers, `Pi`/`Ei`).
//!
//! `isInteger`/`asInteger` answer from the first only (Go's `AsInt64`): `quantity("1.5Gi")`
//! is 1610612736 but not an integer for Kubernetes, nor is `quantity("1000m")`;
//! `asApproximateFloat` multiplies the mantissa by a power of ten as Go does, so results
//! agree to the last bit.
//!
//! Differences from Go, all on inputs no real quantity has: a value or an operation that
//! needs more than [`decimal::MAX_DIGITS`] digits (`1e100000000` plus `1m`) is an error where
//! Go allocates, and Go's in-place mutation of shared quantities (a quantity compared with
//! a decimal one becomes decimal itself) is not reproduced: values here are immutable.

use std::cmp::Ordering;
use std::fmt;

use super::decimal::{self, Dec, Nat, TooLarge};

/// Errors of `quantity()` and the quantity functions, with Kubernetes' messages.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `resource.ErrFormatWrong`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    FormatWrong,
    /// `resource.ErrNumeric`.
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// `resource.ErrSuffix`.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// `asInteger()` of a quantity that is not an exact `int64`.
    #[error("cannot convert value to integer")]
    NotInteger,
    /// Switchyard's bound on exact arithmetic (Go has none).
    #[error("quantity needs more than {} decimal digits", decimal::MAX_DIGITS)]
    TooLarge,
}

impl From<TooLarge> for QuantityError {
    fn from(_: TooLarge) -> Self {
        QuantityError::TooLarge
    }
}

/// The format a quantity is written in (Go's `resource.Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `12e6`.
    DecimalExponent,
    /// `12Mi`.
    BinarySI,
    /// `12M`.
    DecimalSI,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Amount {
    /// `value × 10^scale` (`int64Amount`).
    Int { value: i64, scale: i32 },
    /// `inf.Dec`.
    Dec(Dec),
}

/// A Kubernetes resource quantity (`kubernetes.Quantity`).
#[derive(Clone, Debug)]
pub struct Quantity {
    amount: Amount,
    format: Format,
    /// The string it was parsed from, when that string is already canonical (Go caches it
    /// and `String()` returns it as written: `+1k`, `1E3`).
    cached: Option<String>,
}

const NANO: i32 = -9;
/// Go's `maxInt64Factors`.
const MAX_INT64_FACTORS: i32 = 19;

impl Quantity {
    /// `resource.ParseQuantity`.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if s == "0" {
            return Ok(Quantity {
                amount: Amount::Int { value: 0, scale: 0 },
                format: Format::DecimalSI,
                cached: Some(s.to_string()),
            });
        }
        let parts = scan(s.as_bytes())?;
        let (base, exponent, format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;

        let num_len = parts.num.len() as i32;
        let denom_len = parts.denom.len() as i32;
        let (mut scale, precision, mantissa) = match format {
            Format::DecimalExponent | Format::DecimalSI => {
                (exponent, MAX_INT64_FACTORS - (num_len + denom_len), 1i64)
            }
            Format::BinarySI => {
                if exponent >= 0 && parts.denom.is_empty() {
                    // 1Mi (2^20) has ~6 digits of decimal precision
                    (0, 15 - num_len - exponent * 3 / 10 - 1, 1i64 << exponent)
                } else {
                    (0, -1, 1)
                }
            }
        };

        if precision >= 0 {
            scale = scale.wrapping_sub(denom_len);
            if scale >= NANO {
                let mut shifted = Vec::with_capacity(parts.num.len() + parts.denom.len());
                shifted.extend_from_slice(parts.num);
                shifted.extend_from_slice(parts.denom);
                let value: i64 = std::str::from_utf8(&shifted)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or(QuantityError::Numeric)?;
                if let Some(mut result) = value.checked_mul(mantissa) {
                    if !parts.positive {
                        result = -result;
                    }
                    let canonical = match format {
                        Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                        _ => {
                            scale % 3 == 0
                                && !shifted.ends_with(b"000")
                                && shifted.first() != Some(&b'0')
                        }
                    };
                    return Ok(Quantity {
                        amount: Amount::Int {
                            value: result,
                            scale,
                        },
                        format,
                        cached: canonical.then(|| s.to_string()),
                    });
                }
            }
        }

        // The exact path.
        let mut amount = parse_dec(parts.value).ok_or(QuantityError::Numeric)?;
        if base == 10 {
            amount.scale -= i64::from(exponent);
        } else {
            amount.unscaled = amount.unscaled.mul_pow2(exponent.unsigned_abs());
        }
        let negative = amount.negative;
        amount.negative = false;
        // Round non-zero values up to the nearest nano: asking for a little gets a little.
        if !amount.is_zero() {
            amount = amount.round_up(-i64::from(NANO))?.0;
        }
        let mut format = format;
        if format == Format::BinarySI {
            let max = Dec::from_i64(i64::MAX, 0);
            if amount.cmp_dec(&max) == Ordering::Greater {
                amount = max;
            }
            if amount.cmp_dec(&Dec::from_i64(1, 0)) == Ordering::Less && !amount.is_zero() {
                format = Format::DecimalSI;
            }
        }
        if negative {
            amount = amount.neg();
        }
        Ok(Quantity {
            amount: Amount::Dec(amount),
            format,
            cached: None,
        })
    }

    /// A quantity of an integer, as `add(int)`/`sub(int)` make it
    /// (`resource.NewQuantity(i, DecimalExponent)`).
    pub fn from_int(value: i64) -> Quantity {
        Quantity {
            amount: Amount::Int { value, scale: 0 },
            format: Format::DecimalExponent,
            cached: None,
        }
    }

    #[allow(dead_code)] // API: the format the canonical form is written in
    pub fn format(&self) -> Format {
        self.format
    }

    fn as_dec(&self) -> Dec {
        match &self.amount {
            Amount::Int { value, scale } => Dec::from_i64(*value, -i64::from(*scale)),
            Amount::Dec(d) => d.clone(),
        }
    }

    fn is_zero(&self) -> bool {
        self.sign() == 0
    }

    /// `sign()`: -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        match &self.amount {
            Amount::Int { value, .. } => value.signum(),
            Amount::Dec(d) => d.sign(),
        }
    }

    /// `compareTo()` (and `isLessThan`/`isGreaterThan`, `==`): exact.
    pub fn compare(&self, other: &Quantity) -> Ordering {
        self.as_dec().cmp_dec(&other.as_dec())
    }

    pub fn is_less_than(&self, other: &Quantity) -> bool {
        self.compare(other) == Ordering::Less
    }

    pub fn is_greater_than(&self, other: &Quantity) -> bool {
        self.compare(other) == Ordering::Greater
    }

    /// `compareTo()`: -1, 0 or 1.
    pub fn compare_to(&self, other: &Quantity) -> i64 {
        match self.compare(other) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }
    }

    /// Go's `AsInt64`: the value when it is held as an `int64` mantissa at a scale ≥ 0 that
    /// does not overflow; never for the exact representation.
    fn as_int64(&self) -> Option<i64> {
        match self.amount {
            Amount::Int { value, scale } if scale >= 0 => positive_scale(value, scale),
            _ => None,
        }
    }

    /// `isInteger()`.
    pub fn is_integer(&self) -> bool {
        self.as_int64().is_some()
    }

    /// `asInteger()`.
    pub fn as_integer(&self) -> Result<i64, QuantityError> {
        self.as_int64().ok_or(QuantityError::NotInteger)
    }

    /// `asApproximateFloat()`: Go's `AsApproximateFloat64`, bit for bit.
    pub fn as_approximate_float(&self) -> f64 {
        let (base, exponent) = match &self.amount {
            Amount::Int { value, scale } => (*value as f64, i64::from(*scale)),
            Amount::Dec(d) => {
                let digits = d.unscaled.to_decimal();
                let magnitude: f64 = digits.parse().unwrap_or(f64::INFINITY);
                (if d.negative { -magnitude } else { magnitude }, -d.scale)
            }
        };
        if exponent == 0 {
            return base;
        }
        base * pow10(exponent)
    }

    /// `add(quantity)`: Go's `Quantity.Add` on a copy.
    pub fn add(&self, y: &Quantity) -> Result<Quantity, QuantityError> {
        let mut q = Quantity {
            cached: None,
            ..self.clone()
        };
        match (&self.amount, &y.amount) {
            (
                Amount::Int { value, scale },
                Amount::Int {
                    value: yv,
                    scale: ys,
                },
            ) => {
                if *value == 0 {
                    q.format = y.format;
                }
                if let Some((v, s)) = int_add((*value, *scale), (*yv, *ys)) {
                    q.amount = Amount::Int { value: v, scale: s };
                    return Ok(q);
                }
            }
            _ => {
                if self.is_zero() {
                    q.format = y.format;
                }
            }
        }
        q.amount = Amount::Dec(self.as_dec().add(&y.as_dec())?);
        Ok(q)
    }

    /// `sub(quantity)`: Go's `Quantity.Sub` on a copy.
    pub fn sub(&self, y: &Quantity) -> Result<Quantity, QuantityError> {
        let mut q = Quantity {
            cached: None,
            ..self.clone()
        };
        if self.is_zero() {
            q.format = y.format;
        }
        if let (
            Amount::Int { value, scale },
            Amount::Int {
                value: yv,
                scale: ys,
            },
        ) = (&self.amount, &y.amount)
        {
            // Go negates in int64: -MinInt64 wraps to MinInt64, which is then added
            // (`1000 - MinInt64` is `1000 + MinInt64`), as Kubernetes answers.
            if let Some((v, s)) = int_add((*value, *scale), (yv.wrapping_neg(), *ys)) {
                q.amount = Amount::Int { value: v, scale: s };
                return Ok(q);
            }
        }
        q.amount = Amount::Dec(self.as_dec().sub(&y.as_dec())?);
        Ok(q)
    }

    /// `add(int)`.
    pub fn add_int(&self, y: i64) -> Result<Quantity, QuantityError> {
        self.add(&Quantity::from_int(y))
    }

    /// `sub(int)`.
    pub fn sub_int(&self, y: i64) -> Result<Quantity, QuantityError> {
        self.sub(&Quantity::from_int(y))
    }

    /// The canonical string (Go's `Quantity.String`): the largest suffix that loses no
    /// precision and writes no fraction, in the quantity's format (`1000m` is `1`, `1.5Gi`
    /// is `1536Mi`, `1.5` is `1500m`). A string that was parsed in canonical form is
    /// returned as written.
    ///
    /// Kubernetes' CEL has no `string(quantity)`; this is the serialized form.
    pub fn canonical(&self) -> String {
        if let Some(s) = &self.cached {
            return s.clone();
        }
        if self.is_zero() {
            return "0".to_string();
        }
        let dec = self.as_dec();
        let mut format = self.format;
        let mut rounded = None;
        if format == Format::BinarySI {
            let lo = Dec::from_i64(-1024, 0);
            let hi = Dec::from_i64(1024, 0);
            if dec.cmp_dec(&lo) == Ordering::Greater && dec.cmp_dec(&hi) == Ordering::Less {
                format = Format::DecimalSI;
            } else {
                match dec.round_up(0) {
                    Ok((r, true)) => rounded = Some(r),
                    _ => format = Format::DecimalSI,
                }
            }
        }
        match (format, rounded) {
            (Format::BinarySI, Some(r)) => {
                // remove factors of 1024
                let mut n = r.unscaled;
                let mut times = 0usize;
                loop {
                    let (q, rem) = n.divrem_small(1024);
                    if rem != 0 || n.is_zero() {
                        break;
                    }
                    n = q;
                    times += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .get(times)
                    .copied()
                    .unwrap_or("");
                let sign = if r.negative { "-" } else { "" };
                format!("{sign}{}{suffix}", n.to_decimal())
            }
            (format, _) => {
                // mantissa × 10^exponent, factors of ten moved into the exponent, the
                // exponent brought down to a multiple of 3
                let zeros = dec.unscaled.trailing_zeros();
                let (mut mantissa, _) = dec.unscaled.div_pow10(zeros);
                let mut exponent = i128::from(zeros) - i128::from(dec.scale);
                while exponent % 3 != 0 {
                    mantissa = mantissa.mul_small(10);
                    exponent -= 1;
                }
                let suffix = match format {
                    Format::DecimalExponent if exponent == 0 => String::new(),
                    Format::DecimalExponent => format!("e{exponent}"),
                    // Go finds no suffix beyond E (10^18) and writes none.
                    _ => match exponent {
                        -9 => "n",
                        -6 => "u",
                        -3 => "m",
                        3 => "k",
                        6 => "M",
                        9 => "G",
                        12 => "T",
                        15 => "P",
                        18 => "E",
                        _ => "",
                    }
                    .to_string(),
                };
                let sign = if dec.negative { "-" } else { "" };
                format!("{sign}{}{suffix}", mantissa.to_decimal())
            }
        }
    }
}

impl PartialEq for Quantity {
    /// Kubernetes' quantity equality: the values compare equal (`200M == 0.2G`).
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// `isQuantity(s)`.
pub fn is_quantity(s: &str) -> bool {
    Quantity::parse(s).is_ok()
}

struct Parts<'a> {
    positive: bool,
    value: &'a [u8],
    num: &'a [u8],
    denom: &'a [u8],
    suffix: &'a [u8],
}

const SUFFIX_CHARS: &[u8] = b"eEinumkKMGTP";

/// Go's `parseQuantityString`.
fn scan(s: &[u8]) -> Result<Parts<'_>, QuantityError> {
    let end = s.len();
    let mut pos = 0;
    let mut positive = true;
    match s.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    // leading zeros
    while pos < end && s[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            value: b"0",
            num: b"0",
            denom: b"",
            suffix: b"",
        });
    }
    let num_start = pos;
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    let mut num = &s[num_start..pos];
    if pos >= end {
        return Ok(Parts {
            positive,
            value: s,
            num,
            denom: b"",
            suffix: b"",
        });
    }
    if num.is_empty() {
        num = b"0";
    }
    let mut denom: &[u8] = b"";
    if s[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && s[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[denom_start..pos];
        if pos >= end {
            return Ok(Parts {
                positive,
                value: s,
                num,
                denom,
                suffix: b"",
            });
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && SUFFIX_CHARS.contains(&s[pos]) {
        pos += 1;
    }
    if pos < end && (s[pos] == b'-' || s[pos] == b'+') {
        pos += 1;
    }
    while pos < end && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// The suffix's base, exponent and format (Go's `quantitySuffixer.interpret`).
fn interpret(suffix: &[u8]) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        b"" => decimal(0),
        b"n" => decimal(-9),
        b"u" => decimal(-6),
        b"m" => decimal(-3),
        b"k" => decimal(3),
        b"M" => decimal(6),
        b"G" => decimal(9),
        b"T" => decimal(12),
        b"P" => decimal(15),
        b"E" => decimal(18),
        b"Ki" => binary(10),
        b"Mi" => binary(20),
        b"Gi" => binary(30),
        b"Ti" => binary(40),
        b"Pi" => binary(50),
        b"Ei" => binary(60),
        [b'e' | b'E', rest @ ..] if !rest.is_empty() => {
            let parsed: i64 = std::str::from_utf8(rest).ok()?.parse().ok()?;
            // Go converts with int32(parsed): larger exponents wrap.
            Some((10, parsed as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// `inf.Dec.SetString` of `[sign]digits[.digits]`.
fn parse_dec(value: &[u8]) -> Option<Dec> {
    let (negative, body) = match value.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, value),
    };
    let (int_part, frac_part) = match body.iter().position(|&b| b == b'.') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (body, &body[body.len()..]),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.iter().chain(frac_part).all(u8::is_ascii_digit) {
        return None;
    }
    let mut digits = int_part.to_vec();
    digits.extend_from_slice(frac_part);
    Some(Dec::new(
        negative,
        Nat::from_digits(&digits),
        frac_part.len() as i64,
    ))
}

/// Go's `positiveScaleInt64`: `base × 10^scale`, `None` on overflow.
fn positive_scale(base: i64, scale: i32) -> Option<i64> {
    if base == 0 {
        return Some(0);
    }
    let mut result = base;
    for _ in 0..scale {
        result = result.checked_mul(10)?;
    }
    Some(result)
}

/// Go's `int64Amount.Add`: `None` where Go falls back to `inf.Dec`.
fn int_add(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    let ((av, ascale), (bv, bscale)) = (a, b);
    if bv == 0 {
        return Some(a);
    }
    if av == 0 {
        return Some(b);
    }
    match ascale.cmp(&bscale) {
        Ordering::Equal => Some((av.checked_add(bv)?, ascale)),
        Ordering::Greater => {
            let diff = i32::try_from(i64::from(ascale) - i64::from(bscale)).ok()?;
            let c = positive_scale(av, diff)?;
            Some((c.checked_add(bv)?, bscale))
        }
        Ordering::Less => {
            let diff = i32::try_from(i64::from(bscale) - i64::from(ascale)).ok()?;
            let c = positive_scale(bv, diff)?;
            Some((av.checked_add(c)?, ascale))
        }
    }
}

/// Go's `math.Pow10`, table for table, so products round as Go's do.
fn pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e00, 1e01, 1e02, 1e03, 1e04, 1e05, 1e06, 1e07, 1e08, 1e09, 1e10, 1e11, 1e12, 1e13, 1e14,
        1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29,
        1e30, 1e31,
    ];
    const POS32: [f64; 10] = [
        1e00, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288,
    ];
    const NEG32: [f64; 11] = [
        1e-00, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    if (0..=308).contains(&n) {
        let n = n as usize;
        return POS32[n / 32] * TAB[n % 32];
    }
    if (-323..=0).contains(&n) {
        let n = n.unsigned_abs() as usize;
        return NEG32[n / 32] / TAB[n % 32];
    }
    if n > 0 { f64::INFINITY } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn canonical_form() {
        for (input, want) in [
            ("1000m", "1"),
            ("1.5Gi", "1536Mi"),
            ("1.5", "1500m"),
            ("12Mi", "12Mi"),
            ("1024Ki", "1Mi"),
            ("8Ki", "8Ki"),
            ("1Ki", "1Ki"),
            ("200k", "200k"),
            ("0.2G", "200M"),
            ("10000k", "10M"),
            ("1e3", "1e3"),
            ("1E3", "1E3"),
            ("1e4", "10e3"),
            ("+1k", "+1k"),
            ("0.1n", "1n"),
            ("-0.1n", "-1n"),
            ("0", "0"),
            ("-0", "0"),
            ("0.5Ki", "512"),
            ("100Mi", "100Mi"),
            ("1.1Ki", "1126400m"),
            ("0.0000001Ki", "102400n"),
            ("1000E", "1"),
            ("99999999999999999999", "99999999999999999999"),
            ("7Ei", "7Ei"),
            ("8Ei", "9223372036854775807"),
            ("16Ei", "9223372036854775807"),
            // Go caches a parsed string it deems canonical, even this one
            ("50.703k", "50.703k"),
            ("Mi", "0"),
            (".", "0"),
        ] {
            assert_eq!(q(input).canonical(), want, "canonical of {input}");
        }
    }

    #[test]
    fn parse_errors() {
        let format_wrong = QuantityError::FormatWrong.to_string();
        assert_eq!(
            format_wrong,
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        for (input, want) in [
            ("", QuantityError::FormatWrong),
            ("10Mo", QuantityError::FormatWrong),
            ("Three", QuantityError::FormatWrong),
            ("1,3G", QuantityError::FormatWrong),
            ("1 ", QuantityError::FormatWrong),
            ("10Mm", QuantityError::Suffix),
            ("200K", QuantityError::Suffix),
            ("1e", QuantityError::Suffix),
            ("1e-", QuantityError::Suffix),
            ("1ee5", QuantityError::Suffix),
            ("9999999999999999999", QuantityError::Numeric),
            (".e-10", QuantityError::Numeric),
        ] {
            assert_eq!(
                Quantity::parse(input).unwrap_err(),
                want,
                "parse of {input:?}"
            );
        }
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
        assert!(is_quantity("1.3Gi") && is_quantity("10000k") && !is_quantity("200K"));
        // Go's own scanner accepts a bare suffix as zero, whatever the library doc says.
        assert!(is_quantity("Mi"));
        assert_eq!(q("Mi").format(), Format::BinarySI);
        assert_eq!(q("1e3").format(), Format::DecimalExponent);
    }

    #[test]
    fn comparisons() {
        assert_eq!(q("200M").compare_to(&q("0.2G")), 0);
        assert_eq!(q("50M").compare_to(&q("50Mi")), -1);
        assert_eq!(q("50Mi").compare_to(&q("50M")), 1);
        assert!(q("150Mi").is_greater_than(&q("100Mi")));
        assert!(!q("50Mi").is_greater_than(&q("100Mi")));
        assert!(q("50M").is_less_than(&q("100M")));
        assert!(!q("100M").is_less_than(&q("50M")));
        assert!(q("1Gi").is_greater_than(&q("512Mi")));
        assert_eq!(q("2M"), q("0.002G"));
        assert_eq!(q("2000k"), q("2M"));
        assert_ne!(q("200M"), q("0.3G"));
        assert!(q("1e1000").is_greater_than(&q("999Ei")));
        assert!(q("-1e1000").is_less_than(&q("-1")));
        assert!(q("1n").is_greater_than(&q("0")));
    }

    #[test]
    fn integers_and_floats() {
        assert_eq!(q("50k").as_integer(), Ok(50000));
        assert!(q("50000000G").is_integer());
        assert!(q("50").is_integer());
        assert!(!q("9999999999999999999999999999999999999G").is_integer());
        assert_eq!(
            q("9999999999999999999999999999999999999G").as_integer(),
            Err(QuantityError::NotInteger)
        );
        assert_eq!(
            QuantityError::NotInteger.to_string(),
            "cannot convert value to integer"
        );
        // Go's AsInt64 answers from the int64 representation only.
        assert!(!q("1000m").is_integer());
        assert!(!q("1.5Gi").is_integer());
        assert!(q("9223372036854775807").is_integer());
        assert!(!q("9223372036854775807k").is_integer());
        assert_eq!(q("50.703k").as_approximate_float(), 50703.0);
        assert_eq!(q("1.5Gi").as_approximate_float(), 1610612736.0);
        assert_eq!(q("1m").as_approximate_float(), 1e-3);
        assert_eq!(q("1e400").as_approximate_float(), f64::INFINITY);
        assert_eq!(
            q("50k").sub_int(20000).unwrap().as_approximate_float(),
            30000.0
        );
        assert_eq!(q("-2").sign(), -1);
        assert_eq!(q("0").sign(), 0);
        assert_eq!(q("3m").sign(), 1);
    }

    #[test]
    fn arithmetic() {
        assert_eq!(q("50k").add(&q("20k")).unwrap(), q("70k"));
        assert_eq!(q("50k").add_int(20).unwrap(), q("50020"));
        assert_eq!(q("50k").sub(&q("20k")).unwrap(), q("30k"));
        assert_eq!(q("50k").sub_int(20000).unwrap(), q("30k"));
        let chain = q("50k")
            .add_int(20)
            .and_then(|x| x.sub(&q("100k")))
            .and_then(|x| x.sub_int(-50000))
            .unwrap();
        assert_eq!(chain, q("20"));
        assert_eq!(chain.as_integer(), Ok(20));
        assert_eq!(
            q("50k")
                .add_int(20)
                .unwrap()
                .sub(&q("100k"))
                .unwrap()
                .as_integer(),
            Ok(-49980)
        );
        assert_eq!(q("50k").add(&q("20")).unwrap(), q("50.02k"));
        assert_eq!(q("50k").sub(&q("20")).unwrap(), q("49.98k"));
        // results are canonical
        assert_eq!(q("1Gi").add(&q("512Mi")).unwrap().canonical(), "1536Mi");
        assert_eq!(q("1.5").add(&q("1.5")).unwrap().canonical(), "3");
        assert_eq!(q("0").add_int(5000).unwrap().canonical(), "5e3");
        assert_eq!(q("1").add(&q("1.5Gi")).unwrap().canonical(), "1610612737");
        // overflow of the int64 path moves to exact arithmetic
        let big = q("9223372036854775807").add_int(1).unwrap();
        assert_eq!(big.canonical(), "9223372036854775808");
        assert!(!big.is_integer());
        assert_eq!(q("-9223372036854775807").sub_int(i64::MIN).unwrap(), q("1"));
        assert_eq!(
            q("1e99999").add(&q("1n")).unwrap_err(),
            QuantityError::TooLarge
        );
    }

    #[test]
    fn go_pow10_table() {
        assert_eq!(pow10(-9), 1.0 / 1e9);
        assert_eq!(pow10(300), 1e300);
        assert_eq!(pow10(309), f64::INFINITY);
        assert_eq!(pow10(-324), 0.0);
    }
}
