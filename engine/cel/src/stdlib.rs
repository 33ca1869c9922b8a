//! The standard library the evaluator does not implement inline: timestamps and durations,
//! the strings extension (version 2, as Kubernetes enables it, and `reverse` of version 3),
//! and the engine's functions, registered as [`Overload`]s. The conversions, which the
//! evaluator runs as builtins, are in `conversions.rs`.

use std::sync::Arc;

use chrono::{Datelike, Timelike};

use crate::environment::Library;
use crate::error::EvalError;
use crate::limits;
use crate::registry::{Overload, Param, Registry};
use crate::value::{Duration, Map, Timestamp, Value, timestamp_in_range};

/// Every function of the standard environment that is not a builtin of the evaluator.
pub(crate) fn register(registry: &mut Registry) {
    registry.add_all(time_functions());
    registry.add_all(string_functions().into_iter().map(|o| {
        let library = match o.name.as_str() {
            "format" | "strings.quote" | "join" => Library::StringsV2,
            "reverse" => Library::StringsV3,
            _ => Library::Base,
        };
        o.in_library(library)
    }));
    registry.add_all(optional_list_functions());
    registry.add_all(
        engine_functions()
            .into_iter()
            .map(|o| o.in_library(Library::Switchyard)),
    );
}

fn err(message: impl Into<String>) -> EvalError {
    EvalError::new(message)
}

/// The arguments, which the overload's params guarantee; an internal error otherwise.
fn mismatch(function: &str) -> EvalError {
    err(format!("{function}: unexpected argument types"))
}

// ---- optional values of lists -----------------------------------------------------------

/// cel-go's optional library, version 2 (Kubernetes 1.34): `list.first()` and
/// `list.last()`, `optional.none()` for an empty list.
fn optional_list_functions() -> Vec<Overload> {
    let end = |name: &'static str, last: bool| {
        Overload::method(name, &[Param::List], move |a| match &a[0] {
            Value::List(items) => {
                let item = if last { items.last() } else { items.first() };
                Ok(Value::Optional(item.cloned().map(Arc::new)))
            }
            _ => Err(mismatch(name)),
        })
    };
    vec![end("first", false), end("last", true)]
}

// ---- timestamps and durations -------------------------------------------------------------

fn time_functions() -> Vec<Overload> {
    let mut out = vec![
        Overload::global("duration", &[Param::String], |a| match &a[0] {
            Value::String(s) => parse_duration(s)
                .map(Value::Duration)
                .map_err(|e| err(format!("duration: {e}"))),
            _ => Err(mismatch("duration")),
        }),
        Overload::global("duration", &[Param::Duration], |a| Ok(a[0].clone())),
        Overload::global("timestamp", &[Param::String], |a| match &a[0] {
            Value::String(s) => parse_timestamp(s).map(Value::Timestamp),
            _ => Err(mismatch("timestamp")),
        }),
        Overload::global("timestamp", &[Param::Timestamp], |a| Ok(a[0].clone())),
        Overload::global("timestamp", &[Param::Int], |a| match &a[0] {
            Value::Int(secs) => chrono::DateTime::from_timestamp(*secs, 0)
                .map(Timestamp::from_utc)
                .filter(timestamp_in_range)
                .map(Value::Timestamp)
                .ok_or_else(|| err("timestamp: timestamp out of range")),
            _ => Err(mismatch("timestamp")),
        }),
    ];
    type Get = fn(&chrono::DateTime<chrono::FixedOffset>) -> i64;
    let accessors: [(&str, Get); 10] = [
        ("getFullYear", |t| i64::from(t.year())),
        ("getMonth", |t| i64::from(t.month0())),
        ("getDayOfYear", |t| i64::from(t.ordinal0())),
        ("getDayOfMonth", |t| i64::from(t.day0())),
        ("getDate", |t| i64::from(t.day())),
        ("getDayOfWeek", |t| {
            i64::from(t.weekday().num_days_from_sunday())
        }),
        ("getHours", |t| i64::from(t.hour())),
        ("getMinutes", |t| i64::from(t.minute())),
        ("getSeconds", |t| i64::from(t.second())),
        ("getMilliseconds", |t| {
            i64::from(t.timestamp_subsec_millis() % 1000)
        }),
    ];
    for (name, get) in accessors {
        out.push(Overload::method(
            name,
            &[Param::Timestamp],
            move |a| match &a[0] {
                Value::Timestamp(t) => Ok(Value::Int(get(&t.instant().fixed_offset()))),
                _ => Err(mismatch(name)),
            },
        ));
        out.push(Overload::method(
            name,
            &[Param::Timestamp, Param::String],
            move |a| match (&a[0], &a[1]) {
                (Value::Timestamp(t), Value::String(tz)) => Ok(Value::Int(get(&in_zone(t, tz)?))),
                _ => Err(mismatch(name)),
            },
        ));
    }
    type DGet = fn(&Duration) -> i64;
    let duration_accessors: [(&str, DGet); 4] = [
        ("getHours", Duration::num_hours),
        ("getMinutes", Duration::num_minutes),
        ("getSeconds", Duration::num_seconds),
        // cel-go answers the whole duration in milliseconds, not those of the second
        ("getMilliseconds", Duration::num_milliseconds),
    ];
    for (name, get) in duration_accessors {
        out.push(Overload::method(
            name,
            &[Param::Duration],
            move |a| match &a[0] {
                Value::Duration(d) => Ok(Value::Int(get(d))),
                _ => Err(mismatch(name)),
            },
        ));
    }
    out
}

/// Go's `time.Parse(time.RFC3339, s)`, which cel-go converts strings with: the offset is
/// kept, the instant must be in CEL's range.
fn parse_timestamp(s: &str) -> Result<Timestamp, EvalError> {
    let invalid = || err("type conversion error from 'string' to 'google.protobuf.Timestamp'");
    let parsed = crate::golang::parse_rfc3339(s).ok_or_else(invalid)?;
    let instant =
        chrono::DateTime::from_timestamp(parsed.seconds, parsed.nanos).ok_or_else(invalid)?;
    let ts = Timestamp::with_offset(instant, parsed.offset);
    if !timestamp_in_range(&ts) {
        return Err(err("timestamp: range error parsing timestamp"));
    }
    Ok(ts)
}

/// The timestamp in a time zone: an IANA name, or a `[+-]HH:MM` offset.
fn in_zone(t: &Timestamp, tz: &str) -> Result<chrono::DateTime<chrono::FixedOffset>, EvalError> {
    let Some((hours, minutes)) = tz.split_once(':') else {
        let zone: chrono_tz::Tz = if tz.is_empty() {
            chrono_tz::UTC
        } else {
            tz.parse()
                .map_err(|_| err(format!("timezone: unknown time zone {tz}")))?
        };
        return Ok(t.instant().with_timezone(&zone).fixed_offset());
    };
    let hr: i32 = hours
        .parse()
        .map_err(|e| err(format!("timezone: {tz}: {e}")))?;
    let min: i32 = minutes
        .parse()
        .map_err(|e| err(format!("timezone: {tz}: {e}")))?;
    if !(-23..=23).contains(&hr) || !(0..=59).contains(&min) {
        return Err(err(format!("timezone: offset out of range: {tz}")));
    }
    let offset = if hours.starts_with('-') {
        hr * 60 - min
    } else {
        hr * 60 + min
    };
    let offset = chrono::FixedOffset::east_opt(offset * 60)
        .ok_or_else(|| err(format!("timezone: offset out of range: {tz}")))?;
    Ok(t.instant().with_timezone(&offset))
}

/// Go's `time.ParseDuration` (see [`crate::golang::parse_duration`]).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    match crate::golang::parse_duration(s) {
        Ok(nanos) => Ok(Duration::nanoseconds(nanos)),
        Err(crate::golang::DurationError::Invalid) => Err(format!("invalid duration '{s}'")),
        Err(crate::golang::DurationError::Range) => Err("range error parsing duration".to_string()),
    }
}

// ---- strings ------------------------------------------------------------------------------

fn out_of_range(function: &str, i: i64) -> EvalError {
    err(format!("{function}: index out of range: {i}"))
}

fn string_functions() -> Vec<Overload> {
    use Param::{Int, List, String as S};
    vec![
        Overload::method("charAt", &[S, Int], |a| match (&a[0], &a[1]) {
            (Value::String(s), Value::Int(i)) => {
                let len = s.chars().count() as i64;
                if *i < 0 || *i > len {
                    return Err(out_of_range("charAt", *i));
                }
                Ok(Value::string(
                    s.chars()
                        .nth(usize::try_from(*i).unwrap_or(usize::MAX))
                        .map(String::from)
                        .unwrap_or_default(),
                ))
            }
            _ => Err(mismatch("charAt")),
        }),
        Overload::method("indexOf", &[S, S], |a| index_of(a, false)).linear_cost(),
        Overload::method("indexOf", &[S, S, Int], |a| index_of(a, false)).linear_cost(),
        Overload::method("lastIndexOf", &[S, S], |a| index_of(a, true)).linear_cost(),
        Overload::method("lastIndexOf", &[S, S, Int], |a| index_of(a, true)).linear_cost(),
        Overload::method("lowerAscii", &[S], |a| match &a[0] {
            Value::String(s) => Ok(Value::string(s.to_ascii_lowercase())),
            _ => Err(mismatch("lowerAscii")),
        })
        .linear_cost(),
        Overload::method("upperAscii", &[S], |a| match &a[0] {
            Value::String(s) => Ok(Value::string(s.to_ascii_uppercase())),
            _ => Err(mismatch("upperAscii")),
        })
        .linear_cost(),
        // Version 3 of cel-go's strings library, which Kubernetes' (version 2) lacks: the
        // extension `strings-v3`.
        Overload::method("reverse", &[S], |a| match &a[0] {
            Value::String(s) => Ok(Value::string(s.chars().rev().collect::<String>())),
            _ => Err(mismatch("reverse")),
        })
        .linear_cost(),
        Overload::method("trim", &[S], |a| match &a[0] {
            Value::String(s) => Ok(Value::string(s.trim())),
            _ => Err(mismatch("trim")),
        })
        .linear_cost(),
        Overload::method("replace", &[S, S, S], |a| replace(a, None))
            .linear_cost()
            .builds(),
        Overload::method("replace", &[S, S, S, Int], |a| match &a[3] {
            Value::Int(n) => replace(a, usize::try_from(*n).ok()),
            _ => Err(mismatch("replace")),
        })
        .linear_cost()
        .builds(),
        Overload::method("split", &[S, S], |a| split(a, -1))
            .linear_cost()
            .builds(),
        Overload::method("split", &[S, S, Int], |a| match &a[2] {
            Value::Int(n) => split(a, *n),
            _ => Err(mismatch("split")),
        })
        .linear_cost()
        .builds(),
        Overload::method("substring", &[S, Int], |a| match (&a[0], &a[1]) {
            (Value::String(s), Value::Int(start)) => {
                let len = s.chars().count() as i64;
                substring(s, *start, len)
            }
            _ => Err(mismatch("substring")),
        })
        .linear_cost(),
        Overload::method("substring", &[S, Int, Int], |a| {
            match (&a[0], &a[1], &a[2]) {
                (Value::String(s), Value::Int(start), Value::Int(end)) => {
                    substring(s, *start, *end)
                }
                _ => Err(mismatch("substring")),
            }
        })
        .linear_cost(),
        Overload::method("join", &[List], |a| join(&a[0], ""))
            .linear_cost()
            .builds(),
        Overload::method("join", &[List, S], |a| match &a[1] {
            Value::String(sep) => join(&a[0], sep),
            _ => Err(mismatch("join")),
        })
        .linear_cost()
        .builds(),
        Overload::method("format", &[S, List], |a| match (&a[0], &a[1]) {
            (Value::String(f), Value::List(items)) => crate::format::format(f, items)
                .map_err(|e| err(format!("format: {e}")))
                .and_then(|s| limits::bounded_string("format", s).map_err(err)),
            _ => Err(mismatch("format")),
        })
        .linear_cost()
        .builds(),
        Overload::global("strings.quote", &[S], |a| match &a[0] {
            Value::String(s) => limits::bounded_string("strings.quote", quote(s)).map_err(err),
            _ => Err(mismatch("strings.quote")),
        })
        .linear_cost()
        .builds(),
    ]
}

fn index_of(a: &[Value], last: bool) -> Result<Value, EvalError> {
    let name = if last { "lastIndexOf" } else { "indexOf" };
    let (Value::String(s), Value::String(needle)) = (&a[0], &a[1]) else {
        return Err(mismatch(name));
    };
    let runes: Vec<char> = s.chars().collect();
    let needle: Vec<char> = needle.chars().collect();
    let len = runes.len() as i64;
    let offset = match a.get(2) {
        Some(Value::Int(o)) => Some(*o),
        Some(_) => return Err(mismatch(name)),
        None => None,
    };
    // cel-go v0.26 answers the offset itself for an empty needle, unchecked, and -1 for an
    // offset at or past the end
    if needle.is_empty() {
        return Ok(Value::Int(offset.unwrap_or(if last { len } else { 0 })));
    }
    match offset {
        Some(o) if o < 0 => return Err(out_of_range(name, o)),
        Some(o) if o >= len => return Ok(Value::Int(-1)),
        _ => {}
    }
    if needle.len() > runes.len() {
        return Ok(Value::Int(-1));
    }
    let found = if last {
        let start = offset.map_or(runes.len(), |o| usize::try_from(o).unwrap_or(0));
        let last_start = start.min(runes.len() - needle.len());
        (0..=last_start)
            .rev()
            .find(|&i| runes[i..i + needle.len()] == *needle)
    } else {
        let start = offset.map_or(0, |o| usize::try_from(o).unwrap_or(0));
        runes
            .get(start..)
            .and_then(|r| r.windows(needle.len()).position(|w| w == needle.as_slice()))
            .map(|i| i + start)
    };
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn replace(a: &[Value], n: Option<usize>) -> Result<Value, EvalError> {
    let (Value::String(s), Value::String(from), Value::String(to)) = (&a[0], &a[1], &a[2]) else {
        return Err(mismatch("replace"));
    };
    // The result's size is known before it is built: the number of matches (each gap of
    // the string when `from` is empty) times the growth.
    if to.len() > from.len() {
        let found = if from.is_empty() {
            s.chars().count() + 1
        } else {
            s.matches(&**from).count()
        };
        let found = n.map_or(found, |n| found.min(n));
        let len = s
            .len()
            .saturating_add(found.saturating_mul(to.len() - from.len()));
        limits::check_bytes("replace", len).map_err(err)?;
    }
    Ok(Value::string(match n {
        Some(n) => s.replacen(&**from, to, n),
        None => s.replace(&**from, to),
    }))
}

fn split(a: &[Value], n: i64) -> Result<Value, EvalError> {
    let (Value::String(s), Value::String(sep)) = (&a[0], &a[1]) else {
        return Err(mismatch("split"));
    };
    let s: &str = s;
    // Counted before the parts are collected (each part is a new value).
    let count = if sep.is_empty() {
        s.chars().count()
    } else {
        s.matches(&**sep).count() + 1
    };
    let count = usize::try_from(n).map_or(count, |n| count.min(n));
    limits::check_elements("split", count).map_err(err)?;
    let parts: Vec<&str> = match (usize::try_from(n), sep.is_empty()) {
        (Ok(0), _) => Vec::new(),
        (Ok(n), true) => {
            let mut parts: Vec<&str> = Vec::new();
            let mut rest = s;
            while let Some(c) = rest.chars().next() {
                if parts.len() + 1 == n {
                    break;
                }
                let (head, tail) = rest.split_at(c.len_utf8());
                parts.push(head);
                rest = tail;
            }
            if !rest.is_empty() {
                parts.push(rest);
            }
            parts
        }
        (Ok(n), false) => s.splitn(n, &**sep).collect(),
        (Err(_), true) => s
            .char_indices()
            .map(|(i, c)| &s[i..i + c.len_utf8()])
            .collect(),
        (Err(_), false) => s.split(&**sep).collect(),
    };
    Ok(Value::List(parts.into_iter().map(Value::string).collect()))
}

fn substring(s: &str, start: i64, end: i64) -> Result<Value, EvalError> {
    let len = s.chars().count() as i64;
    if start < 0 || start > len {
        return Err(out_of_range("substring", start));
    }
    if end < 0 || end > len {
        return Err(out_of_range("substring", end));
    }
    if start > end {
        return Err(err(format!(
            "substring: invalid substring range. start: {start}, end: {end}"
        )));
    }
    let (start, end) = (
        usize::try_from(start).unwrap_or(0),
        usize::try_from(end).unwrap_or(0),
    );
    Ok(Value::string(
        s.chars().skip(start).take(end - start).collect::<String>(),
    ))
}

fn join(list: &Value, sep: &str) -> Result<Value, EvalError> {
    let Value::List(items) = list else {
        return Err(mismatch("join"));
    };
    let mut parts = Vec::with_capacity(items.len());
    // A list can hold the same long string many times: the result is bounded before it
    // is built.
    let mut len = sep.len().saturating_mul(items.len().saturating_sub(1));
    for item in items.iter() {
        match item {
            Value::String(s) => {
                len = len.saturating_add(s.len());
                parts.push(&**s);
            }
            other => {
                return Err(err(format!(
                    "join: list elements must be strings, got {}",
                    other.type_name()
                )));
            }
        }
    }
    limits::check_bytes("join", len).map_err(err)?;
    Ok(Value::string(parts.join(sep)))
}

fn quote(s: &str) -> String {
    let mut quoted = String::with_capacity(s.len() + 2);
    quoted.push('"');
    for c in s.chars() {
        match c {
            '\x07' => quoted.push_str("\\a"),
            '\x08' => quoted.push_str("\\b"),
            '\x0c' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\x0b' => quoted.push_str("\\v"),
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

// ---- the engine's functions ----------------------------------------------------------------

fn engine_functions() -> Vec<Overload> {
    use crate::functions::{dns1123_label, is_dns1123_label, is_dns1123_subdomain, sha256_hex};
    vec![
        Overload::global("sha256", &[Param::String], |a| match &a[0] {
            Value::String(s) => Ok(Value::string(sha256_hex(s.as_bytes()))),
            _ => Err(mismatch("sha256")),
        })
        .linear_cost(),
        Overload::global("sha256", &[Param::Bytes], |a| match &a[0] {
            Value::Bytes(b) => Ok(Value::string(sha256_hex(b))),
            _ => Err(mismatch("sha256")),
        })
        .linear_cost(),
        Overload::global("isDNS1123Label", &[Param::String], |a| match &a[0] {
            Value::String(s) => Ok(Value::Bool(is_dns1123_label(s))),
            _ => Err(mismatch("isDNS1123Label")),
        }),
        Overload::global("isDNS1123Subdomain", &[Param::String], |a| match &a[0] {
            Value::String(s) => Ok(Value::Bool(is_dns1123_subdomain(s))),
            _ => Err(mismatch("isDNS1123Subdomain")),
        }),
        Overload::global("dns1123Label", &[Param::String], |a| match &a[0] {
            Value::String(s) => Ok(Value::string(dns1123_label(s))),
            _ => Err(mismatch("dns1123Label")),
        })
        .linear_cost(),
        // kro's `merge` (its maps library): shallow, the argument's value wins.
        Overload::method("merge", &[Param::Map, Param::Map], |a| {
            match (&a[0], &a[1]) {
                (Value::Map(base), Value::Map(over)) => {
                    let entries = base
                        .iter()
                        .chain(over.iter())
                        .map(|(k, v)| (k.clone(), Some(v.clone())))
                        .collect();
                    Ok(Value::Map(Arc::new(Map::from_literal(entries))))
                }
                _ => Err(mismatch("merge")),
            }
        })
        .linear_cost()
        .builds(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_go_does() {
        let ok = |s: &str| parse_duration(s).unwrap();
        assert_eq!(ok("1h30m"), Duration::seconds(5400));
        assert_eq!(ok("1.5s"), Duration::milliseconds(1500));
        assert_eq!(ok("-90ms"), Duration::milliseconds(-90));
        assert_eq!(ok("0"), Duration::zero());
        assert_eq!(ok("1us"), Duration::microseconds(1));
        assert_eq!(ok(".5s"), Duration::milliseconds(500));
        for bad in ["", "1", "1x", "h", "1.s.", "--1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("9999999999h").is_err());
    }
}
