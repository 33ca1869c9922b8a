//! Go's readings and writings of the strings cel-go converts, ported so that conversions
//! answer as Kubernetes does: `strconv.ParseInt`, `ParseUint`, `ParseFloat` and
//! `ParseBool` (`int('+1')` is 1 but `uint('+1')` fails; `double('0x1p-2')` and
//! `double('1_000')` read), `time.ParseDuration`, `time.Parse(time.RFC3339, s)` (a one-digit
//! hour, a comma before the fraction, an offset up to `+24:60`, the offset kept), the
//! `RFC3339Nano` form of a time at its offset, and the seconds of a duration as a double.
//!
//! Plain functions over strings and numbers: the callers make values of them.

/// `strconv.ParseInt(s, 10, 64)`: an optional sign, then decimal digits only.
pub(crate) fn parse_int(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = parse_uint(digits)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// `strconv.ParseUint(s, 10, 64)`: decimal digits only, no sign.
pub(crate) fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.bytes().try_fold(0u64, |n, b| {
        let digit = u64::from(b.checked_sub(b'0').filter(|d| *d <= 9)?);
        n.checked_mul(10)?.checked_add(digit)
    })
}

/// `strconv.ParseBool`.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `strconv.ParseFloat(s, 64)`: Go's floating-point literals (decimal, or hexadecimal with
/// a `p` exponent, `_` between digits), `Inf`, `Infinity` (signed) and `NaN` in any case;
/// `None` for anything else, or a number beyond the double range (Go's `ErrRange`).
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    if let Some((value, read)) = special(s) {
        return (read == s.len()).then_some(value);
    }
    let float = read_float(s.as_bytes())?;
    if float.read != s.len() {
        return None;
    }
    if float.hex {
        return hex_float(
            float.mantissa,
            float.exponent,
            float.negative,
            float.truncated,
        );
    }
    // Go rounds a decimal to the nearest double as Rust does; only the syntax differs,
    // which `read_float` checked.
    let digits: String = s.chars().filter(|&c| c != '_').collect();
    digits.parse::<f64>().ok().filter(|d| d.is_finite())
}

/// Go's `special`: `[+-]inf`, `[+-]infinity` and `nan` (any case), and how many bytes
/// they take.
fn special(s: &str) -> Option<(f64, usize)> {
    let bytes = s.as_bytes();
    let prefix = |s: &[u8], word: &str| {
        s.iter()
            .zip(word.bytes())
            .take_while(|(a, b)| a.eq_ignore_ascii_case(b))
            .count()
    };
    let (sign, rest, signed) = match bytes.first()? {
        b'+' => (1.0, &bytes[1..], 1),
        b'-' => (-1.0, &bytes[1..], 1),
        b'n' | b'N' => {
            return (prefix(bytes, "nan") == 3).then_some((f64::NAN, 3));
        }
        _ => (1.0, bytes, 0),
    };
    if !matches!(rest.first(), Some(b'i' | b'I')) {
        return None;
    }
    // Anything longer than "inf" reads "inf" only, unless it is "infinity".
    let n = match prefix(rest, "infinity") {
        8 => 8,
        3..=7 => 3,
        _ => return None,
    };
    Some((sign * f64::INFINITY, signed + n))
}

/// What Go's `readFloat` makes of the longest number at the start of a string.
struct ReadFloat {
    mantissa: u64,
    exponent: i64,
    negative: bool,
    truncated: bool,
    hex: bool,
    /// Bytes read.
    read: usize,
}

/// Go's `readFloat`: the number at the start of `s`, `None` when there is none or its
/// underscores are misplaced.
fn read_float(s: &[u8]) -> Option<ReadFloat> {
    let len = s.len();
    let mut i = 0;
    let mut underscores = false;
    let mut negative = false;
    match s.first()? {
        b'+' => i += 1,
        b'-' => {
            i += 1;
            negative = true;
        }
        _ => {}
    }
    let mut base = 10u64;
    let mut max_digits = 19;
    let mut exponent_char = b'e';
    let mut hex = false;
    if i + 2 < len && s[i] == b'0' && s[i + 1].eq_ignore_ascii_case(&b'x') {
        base = 16;
        max_digits = 16;
        i += 2;
        exponent_char = b'p';
        hex = true;
    }
    let (mut saw_dot, mut saw_digits) = (false, false);
    let (mut digits, mut mantissa_digits, mut point) = (0i64, 0i64, 0i64);
    let mut mantissa = 0u64;
    let mut truncated = false;
    while i < len {
        let c = s[i];
        let lower = c.to_ascii_lowercase();
        if c == b'_' {
            underscores = true;
        } else if c == b'.' {
            if saw_dot {
                break;
            }
            saw_dot = true;
            point = digits;
        } else if c.is_ascii_digit() {
            saw_digits = true;
            if c == b'0' && digits == 0 {
                // leading zeros
                point -= 1;
            } else {
                digits += 1;
                if mantissa_digits < max_digits {
                    mantissa = mantissa * base + u64::from(c - b'0');
                    mantissa_digits += 1;
                } else if c != b'0' {
                    truncated = true;
                }
            }
        } else if base == 16 && (b'a'..=b'f').contains(&lower) {
            saw_digits = true;
            digits += 1;
            if mantissa_digits < max_digits {
                mantissa = mantissa * 16 + u64::from(lower - b'a' + 10);
                mantissa_digits += 1;
            } else {
                truncated = true;
            }
        } else {
            break;
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if !saw_dot {
        point = digits;
    }
    if base == 16 {
        point *= 4;
        mantissa_digits *= 4;
    }
    if i < len && s[i].to_ascii_lowercase() == exponent_char {
        i += 1;
        let mut sign = 1;
        match s.get(i)? {
            b'+' => i += 1,
            b'-' => {
                i += 1;
                sign = -1;
            }
            _ => {}
        }
        if !s.get(i)?.is_ascii_digit() {
            return None;
        }
        let mut e = 0i64;
        while i < len && (s[i].is_ascii_digit() || s[i] == b'_') {
            if s[i] == b'_' {
                underscores = true;
            } else if e < 10_000 {
                e = e * 10 + i64::from(s[i] - b'0');
            }
            i += 1;
        }
        point += e * sign;
    } else if base == 16 {
        // A hexadecimal mantissa needs a `p` exponent.
        return None;
    }
    let exponent = if mantissa != 0 {
        point - mantissa_digits
    } else {
        0
    };
    if underscores && !underscores_ok(&s[..i]) {
        return None;
    }
    Some(ReadFloat {
        mantissa,
        exponent,
        negative,
        truncated,
        hex,
        read: i,
    })
}

/// Go's `underscoreOK`: each `_` between digits, or between a base prefix and a digit.
fn underscores_ok(s: &[u8]) -> bool {
    // The last thing seen: '^' the start, '0' a digit or base prefix, '_', '!' other.
    let mut saw = b'^';
    let mut s = s;
    if let Some(b'+' | b'-') = s.first() {
        s = &s[1..];
    }
    let mut i = 0;
    let mut hex = false;
    if s.len() >= 2 && s[0] == b'0' && matches!(s[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = s[1].eq_ignore_ascii_case(&b'x');
    }
    while i < s.len() {
        let c = s[i];
        if c.is_ascii_digit() || hex && (b'a'..=b'f').contains(&c.to_ascii_lowercase()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// Go's `atofHex` for a double: `mantissa * 2^exponent`, rounded to even; `None` past the
/// largest double.
fn hex_float(mut mantissa: u64, exponent: i64, negative: bool, truncated: bool) -> Option<f64> {
    const MANTISSA_BITS: u32 = 52;
    const BIAS: i64 = -1023;
    const MAX_EXPONENT: i64 = (1 << 11) + BIAS - 2;
    const MIN_EXPONENT: i64 = BIAS + 1;
    let mut exponent = exponent + i64::from(MANTISSA_BITS);
    // A leading 1 and the mantissa bits, and two more bits for rounding (the lowest one
    // sticky: set when any bit below it was).
    while mantissa != 0 && mantissa >> (MANTISSA_BITS + 2) == 0 {
        mantissa <<= 1;
        exponent -= 1;
    }
    if truncated {
        mantissa |= 1;
    }
    while mantissa >> (1 + MANTISSA_BITS + 2) != 0 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exponent += 1;
    }
    // Too small: denormalize.
    while mantissa > 1 && exponent < MIN_EXPONENT - 2 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exponent += 1;
    }
    let mut round = mantissa & 3;
    mantissa >>= 2;
    round |= mantissa & 1;
    exponent += 2;
    if round == 3 {
        mantissa += 1;
        if mantissa == 1 << (1 + MANTISSA_BITS) {
            mantissa >>= 1;
            exponent += 1;
        }
    }
    if mantissa >> MANTISSA_BITS == 0 {
        // denormal or zero
        exponent = BIAS;
    }
    if exponent > MAX_EXPONENT {
        return None;
    }
    let biased = u64::try_from((exponent - BIAS) & 0x7ff).ok()?;
    let mut bits = (mantissa & ((1 << MANTISSA_BITS) - 1)) | (biased << MANTISSA_BITS);
    if negative {
        bits |= 1 << 63;
    }
    Some(f64::from_bits(bits))
}

/// Why [`parse_duration`] refused a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DurationError {
    Invalid,
    /// More than an `int64` of nanoseconds.
    Range,
}

/// Go's `time.ParseDuration`, in nanoseconds: an optional sign, then numbers with an
/// optional fraction, each followed by a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`,
/// `h`); `0` alone. A fraction is scaled in floating point, as Go does.
pub(crate) fn parse_duration(s: &str) -> Result<i64, DurationError> {
    const LIMIT: u64 = 1 << 63;
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(DurationError::Invalid);
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(DurationError::Invalid);
        }
        // [0-9]*
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for b in rest[..digits].bytes() {
            if whole > LIMIT / 10 {
                return Err(DurationError::Invalid);
            }
            whole = whole * 10 + u64::from(b - b'0');
            if whole > LIMIT {
                return Err(DurationError::Invalid);
            }
        }
        rest = &rest[digits..];
        let before = digits > 0;
        // (\.[0-9]*)?
        let (mut fraction, mut scale, mut after) = (0u64, 1.0f64, false);
        if let Some(tail) = rest.strip_prefix('.') {
            let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for b in tail[..digits].bytes() {
                if overflow {
                    continue;
                }
                if fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let next = fraction * 10 + u64::from(b - b'0');
                if next > LIMIT {
                    overflow = true;
                    continue;
                }
                fraction = next;
                scale *= 10.0;
            }
            after = digits > 0;
            rest = &tail[digits..];
        }
        if !before && !after {
            return Err(DurationError::Invalid);
        }
        let unit_len = rest
            .bytes()
            .position(|b| b == b'.' || b.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(DurationError::Invalid);
        }
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(DurationError::Invalid),
        };
        rest = &rest[unit_len..];
        if whole > LIMIT / unit {
            return Err(DurationError::Range);
        }
        let mut value = whole * unit;
        if fraction > 0 {
            // Go: `uint64(float64(f) * (float64(unit) / scale))`, below one unit.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(DurationError::Range);
            }
        }
        total = total.checked_add(value).ok_or(DurationError::Range)?;
        if total > LIMIT {
            return Err(DurationError::Range);
        }
    }
    if negative {
        0i64.checked_sub_unsigned(total).ok_or(DurationError::Range)
    } else {
        i64::try_from(total).map_err(|_| DurationError::Range)
    }
}

/// cel-go's `string(duration)`: Go's `strconv.FormatFloat(d.Seconds(), 'f', -1, 64)` and
/// `s`: the seconds as a double, so that a long duration loses its last nanoseconds
/// (`1704087900.123456789s` is `1704087900.1234567s`).
pub(crate) fn format_duration_seconds(nanos: i64) -> String {
    let seconds = (nanos / 1_000_000_000) as f64 + (nanos % 1_000_000_000) as f64 / 1e9;
    // Rust writes a double as Go's 'f' with precision -1 does: the shortest digits that
    // read back, never an exponent.
    format!("{seconds}s")
}

/// A time as `time.Parse(time.RFC3339, s)` reads it: the instant (seconds since the Unix
/// epoch and nanoseconds) and the offset from UTC it was written with, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParsedTime {
    pub seconds: i64,
    pub nanos: u32,
    pub offset: i32,
}

/// `time.Parse(time.RFC3339, s)`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±hh:mm)`, with Go's
/// leniencies: the hour may have one digit, the fraction may follow a comma and have any
/// number of digits (the first nine count), and the offset's hours go to 24 and its
/// minutes to 60. `T` and `Z` are upper case.
pub(crate) fn parse_rfc3339(s: &str) -> Option<ParsedTime> {
    let b = s.as_bytes();
    let digits = |at: usize, n: usize| -> Option<i64> {
        let part = b.get(at..at + n)?;
        part.iter().try_fold(0i64, |v, d| {
            d.is_ascii_digit().then(|| v * 10 + i64::from(d - b'0'))
        })
    };
    let year = digits(0, 4)?;
    let mut at = 4;
    let expect =
        |at: &mut usize, c: u8| -> Option<()> { (b.get(*at) == Some(&c)).then(|| *at += 1) };
    expect(&mut at, b'-')?;
    let month = digits(at, 2)?;
    at += 2;
    if !(1..=12).contains(&month) {
        return None;
    }
    expect(&mut at, b'-')?;
    let day = digits(at, 2)?;
    at += 2;
    expect(&mut at, b'T')?;
    // The hour: one or two digits.
    let hour = match (digits(at, 1)?, digits(at + 1, 1)) {
        (tens, Some(units)) => {
            at += 2;
            tens * 10 + units
        }
        (units, None) => {
            at += 1;
            units
        }
    };
    if hour >= 24 {
        return None;
    }
    expect(&mut at, b':')?;
    let minute = digits(at, 2)?;
    at += 2;
    if minute >= 60 {
        return None;
    }
    expect(&mut at, b':')?;
    let second = digits(at, 2)?;
    at += 2;
    if second >= 60 {
        return None;
    }
    let mut nanos = 0i64;
    if matches!(b.get(at), Some(b'.' | b',')) && b.get(at + 1).is_some_and(u8::is_ascii_digit) {
        let count = b[at + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .count();
        let kept = count.min(9);
        nanos = digits(at + 1, kept)? * 10i64.pow(u32::try_from(9 - kept).ok()?);
        at += 1 + count;
    }
    let offset = match b.get(at)? {
        b'Z' => {
            at += 1;
            0
        }
        sign @ (b'+' | b'-') => {
            // ±hh:mm, two digits each
            let hours = digits(at + 1, 2)?;
            if b.get(at + 3) != Some(&b':') {
                return None;
            }
            let minutes = digits(at + 4, 2)?;
            if hours > 24 || minutes > 60 {
                return None;
            }
            at += 6;
            let offset = (hours * 60 + minutes) * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    if at != b.len() || day < 1 || day > days_in(month, year) {
        return None;
    }
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some(ParsedTime {
        seconds: local - offset,
        nanos: u32::try_from(nanos).ok()?,
        offset: i32::try_from(offset).ok()?,
    })
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day counted from 1970-01-01: `(year, month, day)`.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Go's `t.Format(time.RFC3339Nano)` of the instant `seconds`/`nanos` at `offset` seconds
/// east of UTC: the local date and time, the fraction without trailing zeros (none when
/// zero), then `Z` for a zero offset, else `±hh:mm`.
pub(crate) fn format_rfc3339_nano(seconds: i64, nanos: u32, offset: i32) -> String {
    let local = seconds + i64::from(offset);
    let (days, time) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    let mut out = format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        time / 3600,
        time / 60 % 60,
        time % 60
    );
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    if offset == 0 {
        out.push('Z');
    } else {
        let minutes = offset.unsigned_abs() / 60;
        let sign = if offset < 0 { '-' } else { '+' };
        out.push_str(&format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60));
    }
    out
}

#[cfg(test)]
mod tests;
