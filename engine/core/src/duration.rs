//! Durations as packs and tests write them: Go's form (`30s`, `10m`, `1h30m`, `1.5h`).

use chrono::TimeDelta;

/// Parses a Go-style duration: one or more `<number><unit>` with units `h`, `m`, `s`, `ms`.
/// Negative durations are refused: every use here is a wait or a clock step.
pub fn parse_duration(text: &str) -> Result<TimeDelta, String> {
    let invalid = || format!("`{text}` is not a duration (e.g. `30s`, `10m`, `1h30m`)");
    if text.is_empty() {
        return Err(invalid());
    }
    if text == "0" {
        return Ok(TimeDelta::zero());
    }
    let mut millis: f64 = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3_600_000.0,
            "m" => 60_000.0,
            "s" => 1_000.0,
            "ms" => 1.0,
            _ => return Err(invalid()),
        };
        millis += value * scale;
        rest = tail;
    }
    // A year is far beyond any stage or clock step; the bound keeps the arithmetic exact.
    if !millis.is_finite() || millis > 366.0 * 86_400_000.0 {
        return Err(format!("`{text}` is longer than a year"));
    }
    Ok(TimeDelta::milliseconds(millis.round() as i64))
}

/// A duration the way `parse_duration` reads it back (`1h30m0s`, `45s`).
pub fn format_duration(duration: TimeDelta) -> String {
    let total = duration.num_seconds();
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("30s"), Ok(TimeDelta::seconds(30)));
        assert_eq!(parse_duration("1h30m"), Ok(TimeDelta::minutes(90)));
        assert_eq!(parse_duration("1.5h"), Ok(TimeDelta::minutes(90)));
        assert_eq!(parse_duration("250ms"), Ok(TimeDelta::milliseconds(250)));
        assert_eq!(parse_duration("0"), Ok(TimeDelta::zero()));
        assert_eq!(
            parse_duration("10 minutes"),
            Err("`10 minutes` is not a duration (e.g. `30s`, `10m`, `1h30m`)".to_string())
        );
        assert_eq!(
            parse_duration("-5s"),
            Err("`-5s` is not a duration (e.g. `30s`, `10m`, `1h30m`)".to_string())
        );
        assert_eq!(
            parse_duration("9000h"),
            Err("`9000h` is longer than a year".to_string())
        );
        assert_eq!(format_duration(TimeDelta::minutes(90)), "1h30m0s");
        assert_eq!(format_duration(TimeDelta::seconds(45)), "45s");
    }
}
