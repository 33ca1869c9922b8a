//! `string.format(list)` of the strings extension: printf-style clauses
//! `%[.precision]conversion` (`s d f e b x X o`), `%%` a literal `%`, each clause taking the
//! next argument of the list, as cel-go's formatting at version 2 of the library
//! (Kubernetes 1.34; `%f` and `%e` as its locale printer writes them: see `locale.rs`).

mod locale;

use crate::value::{Value, format_timestamp};

/// The precision of `%f` and `%e` when the clause has none.
const DEFAULT_PRECISION: usize = 6;

/// `format` with each clause replaced by its argument, in order.
pub(crate) fn format(format: &str, args: &[Value]) -> Result<String, String> {
    let mut out = String::with_capacity(format.len());
    let mut rest = format;
    let mut next_arg = 0;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('%') {
            out.push('%');
            rest = after;
            continue;
        }
        let arg = args
            .get(next_arg)
            .ok_or_else(|| format!("index {next_arg} out of range"))?;
        if rest.is_empty() {
            return Err("unexpected end of string".to_owned());
        }
        let (clause, after) =
            Clause::parse(rest).map_err(|e| format!("could not parse formatting clause: {e}"))?;
        out.push_str(
            &clause
                .format(arg)
                .map_err(|e| format!("error during formatting: {e}"))?,
        );
        bounded(out.len())?;
        rest = after;
        next_arg += 1;
    }
    out.push_str(rest);
    Ok(out)
}

/// The conversion of each clause of `format` (`s`, `d`, `f`, `e`, `b`, `x`, `o`), in order,
/// each taking the next of `args` arguments: what the type checker verifies of a literal
/// format string, with [`format`]'s errors (`index 1 out of range`, ...).
pub(crate) fn conversions(format: &str, args: usize) -> Result<Vec<char>, String> {
    let mut out = Vec::new();
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('%') {
            rest = after;
            continue;
        }
        if out.len() >= args {
            return Err(format!("index {} out of range", out.len()));
        }
        if rest.is_empty() {
            return Err("unexpected end of string".to_owned());
        }
        let (clause, after) =
            Clause::parse(rest).map_err(|e| format!("could not parse formatting clause: {e}"))?;
        out.push(match clause {
            Clause::String => 's',
            Clause::Decimal => 'd',
            Clause::Fixed(_) => 'f',
            Clause::Scientific(_) => 'e',
            Clause::Binary => 'b',
            Clause::Hex { .. } => 'x',
            Clause::Octal => 'o',
        });
        rest = after;
    }
    Ok(out)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Clause {
    String,
    Decimal,
    Fixed(usize),
    Scientific(usize),
    Binary,
    Hex { upper: bool },
    Octal,
}

impl Clause {
    fn parse(clause: &str) -> Result<(Self, &str), String> {
        let (precision, rest) =
            precision(clause).map_err(|e| format!("error while parsing precision: {e}"))?;
        let mut chars = rest.chars();
        let parsed = match chars.next() {
            Some('s') => Self::String,
            Some('d') => Self::Decimal,
            Some('f') => Self::Fixed(precision),
            Some('e') => Self::Scientific(precision),
            Some('b') => Self::Binary,
            Some('x') => Self::Hex { upper: false },
            Some('X') => Self::Hex { upper: true },
            Some('o') => Self::Octal,
            Some(c) => return Err(format!("unrecognized formatting clause \"{c}\"")),
            None => return Err("unexpected end of string".to_owned()),
        };
        Ok((parsed, chars.as_str()))
    }

    fn format(self, val: &Value) -> Result<String, String> {
        let formatted = match self {
            // cel-go converts a double with `string()` (`1e+06`); inside a list or map
            // it prints it otherwise (`%f`, quoted), which is not followed (see `string`)
            Self::String => {
                return match val {
                    Value::Double(d) => Ok(crate::conversions::format_double(*d)),
                    _ => string(val),
                };
            }
            // Kubernetes (cel-go v0.26) takes integers only for `%d`, doubles only for `%f`
            // and `%e` (and the strings naming the doubles JSON cannot hold); cel-spec's
            // newer suite accepts either
            Self::Decimal => match val {
                Value::Int(i) => Some(i.to_string()),
                Value::Uint(u) => Some(u.to_string()),
                _ => None,
            },
            Self::Fixed(precision) => {
                bounded(precision)?;
                as_double(val).map(|d| locale::fixed(d, precision))
            }
            // cel-go makes the precision a width (`%6e`): see `locale.rs`.
            Self::Scientific(width) => {
                bounded(width)?;
                as_double(val).map(|d| locale::scientific(d, width))
            }
            Self::Binary => match val {
                Value::Bool(b) => Some(u8::from(*b).to_string()),
                Value::Int(i) => Some(format!("{}{:b}", sign(*i), i.unsigned_abs())),
                Value::Uint(u) => Some(format!("{u:b}")),
                _ => None,
            },
            Self::Hex { upper } => match val {
                Value::Int(i) if upper => Some(format!("{}{:X}", sign(*i), i.unsigned_abs())),
                Value::Int(i) => Some(format!("{}{:x}", sign(*i), i.unsigned_abs())),
                Value::Uint(u) if upper => Some(format!("{u:X}")),
                Value::Uint(u) => Some(format!("{u:x}")),
                Value::String(s) => Some(hex(s.as_bytes(), upper)),
                Value::Bytes(b) => Some(hex(b, upper)),
                _ => None,
            },
            Self::Octal => match val {
                Value::Int(i) => Some(format!("{}{:o}", sign(*i), i.unsigned_abs())),
                Value::Uint(u) => Some(format!("{u:o}")),
                _ => None,
            },
        };
        formatted.ok_or_else(|| self.type_error(val))
    }

    fn type_error(self, val: &Value) -> String {
        let accepted = match self {
            Self::String => return string_type_error(val),
            Self::Decimal => "decimal clause can only be used on integers",
            Self::Fixed(_) => "fixed-point clause can only be used on doubles",
            Self::Scientific(_) => "scientific clause can only be used on doubles",
            Self::Binary => "only ints, uints, and bools can be formatted as binary",
            Self::Hex { .. } => "only ints, uints, bytes, and strings can be formatted as hex",
            Self::Octal => "octal clause can only be used on ints and uints",
        };
        format!("{accepted}, was given {}", val.type_name())
    }
}

fn precision(clause: &str) -> Result<(usize, &str), String> {
    let Some(rest) = clause.strip_prefix('.') else {
        return Ok((DEFAULT_PRECISION, clause));
    };
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .ok_or("could not find end of precision specifier")?;
    let precision: usize = rest[..end]
        .parse()
        .map_err(|e| format!("error while converting precision to integer: {e}"))?;
    Ok((precision, &rest[end..]))
}

/// `%s`: any value but a library one; lists and maps as long as what they hold is.
fn string(val: &Value) -> Result<String, String> {
    Ok(match val {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => double(*d),
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => lossy_utf8(b),
        Value::Duration(d) => {
            crate::golang::format_duration_seconds(d.num_nanoseconds().unwrap_or(0))
        }
        Value::Timestamp(t) => format_timestamp(t),
        Value::Null => "null".to_owned(),
        Value::Type(t) => t.name().to_owned(),
        Value::List(_) | Value::Map(_) => nested(val)?,
        Value::Optional(_) | Value::Opaque(_) => return Err(string_type_error(val)),
    })
}

/// A list or map, or a value inside one, as cel-go v0.26 prints it for `%s` (Kubernetes
/// 1.34): as a CEL literal, mostly. Strings and bytes quoted as Go quotes them (`"a"`,
/// `b"a"`), doubles with six decimals (`1.500000`; `"NaN"`, `"+Inf"`, `"-Inf"` quoted),
/// timestamps and durations as `timestamp("...")` and `duration("60s")`, maps as
/// `{key:value, ...}` sorted by the printed key.
fn nested(val: &Value) -> Result<String, String> {
    Ok(match val {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) if d.is_nan() => "\"NaN\"".to_owned(),
        Value::Double(d) if d.is_infinite() => {
            (if *d > 0.0 { "\"+Inf\"" } else { "\"-Inf\"" }).to_owned()
        }
        Value::Double(d) => format!("{d:.DEFAULT_PRECISION$}"),
        Value::String(s) => crate::k8s::go::quote(s),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => format!("b{}", crate::k8s::go::quote(s)),
            Err(_) => {
                return Err(
                    "could not convert argument \"invalid UTF-8 in bytes, cannot convert to string\" to string"
                        .to_owned(),
                );
            }
        },
        Value::Duration(d) => format!(
            "duration(\"{}\")",
            crate::golang::format_duration_seconds(d.num_nanoseconds().unwrap_or(0))
        ),
        Value::Timestamp(t) => format!("timestamp(\"{}\")", format_timestamp(t)),
        Value::Null => "null".to_owned(),
        Value::Type(t) => t.name().to_owned(),
        Value::List(items) => {
            let mut formatted: Vec<String> = Vec::with_capacity(items.len());
            let mut len = 0usize;
            for item in items.iter() {
                let s = nested(item)?;
                len = len.saturating_add(s.len() + 2);
                bounded(len)?;
                formatted.push(s);
            }
            format!("[{}]", formatted.join(", "))
        }
        Value::Map(m) => {
            let mut entries = Vec::with_capacity(m.len());
            let mut len = 0usize;
            for (k, v) in m.iter() {
                let entry = (nested(&k.to_value())?, nested(v)?);
                len = len.saturating_add(entry.0.len() + entry.1.len() + 3);
                bounded(len)?;
                entries.push(entry);
            }
            // cel-go sorts by the printed key only (stable, and keys are unique).
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(key, value)| format!("{key}:{value}"))
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Optional(_) | Value::Opaque(_) => {
            return Err(format!("no formatting function for {}", val.type_name()));
        }
    })
}

/// A list can hold the same long string many times: the result is bounded as it is
/// built, not after.
fn bounded(len: usize) -> Result<(), String> {
    crate::limits::check_bytes("the formatted string", len)
}

fn string_type_error(val: &Value) -> String {
    format!(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, \
         types, durations, and timestamps, was given {}",
        val.type_name()
    )
}

/// The argument of `%f` and `%e`: a double, or one of the strings that name the doubles
/// JSON cannot hold, which cel-go takes too.
fn as_double(val: &Value) -> Option<f64> {
    match val {
        Value::Double(d) => Some(*d),
        Value::String(s) => match &**s {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

fn double(d: f64) -> String {
    if d.is_nan() {
        "NaN".to_owned()
    } else if d.is_infinite() {
        (if d > 0.0 { "Infinity" } else { "-Infinity" }).to_owned()
    } else {
        d.to_string()
    }
}

fn sign(i: i64) -> &'static str {
    if i < 0 { "-" } else { "" }
}

fn hex(bytes: &[u8], upper: bool) -> String {
    bytes
        .iter()
        .map(|b| {
            if upper {
                format!("{b:02X}")
            } else {
                format!("{b:02x}")
            }
        })
        .collect()
}

/// `bytes` as a string: a run of invalid UTF-8 sequences becomes a single U+FFFD.
fn lossy_utf8(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for (i, chunk) in bytes.utf8_chunks().enumerate() {
        out.push_str(chunk.valid());
        if !chunk.invalid().is_empty() && (i == 0 || !chunk.valid().is_empty()) {
            out.push(char::REPLACEMENT_CHARACTER);
        }
    }
    out
}

#[cfg(test)]
mod tests;
