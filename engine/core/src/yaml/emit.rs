//! The emitter: a value as YAML in the style of `kubectl get -o yaml` (block style, sorted
//! keys), with strings quoted only where a plain scalar would read back as something else,
//! under a YAML 1.2 reader or a YAML 1.1 one (kubectl).

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use super::core_schema::{is_float, resolve_plain};

/// Emits a value as one YAML document body (no `---`), kubectl style.
///
/// The text reads back as the same JSON under YAML 1.2 readers and YAML 1.1 ones (libyaml,
/// go-yaml, PyYAML: what `kubectl apply -f` and kustomize use): every character that one of
/// them takes as a break, a control or a non-printable is escaped in a double-quoted string,
/// and no plain scalar is one a YAML 1.1 reader types as anything but a string.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => emit_map(&mut out, map, 0),
        Value::Array(items) if !items.is_empty() => emit_seq(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

/// Emits several documents separated by `---`.
pub fn to_yaml_stream<'a>(values: impl IntoIterator<Item = &'a Value>) -> String {
    let mut out = String::new();
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&to_yaml(value));
    }
    out
}

/// The longest key written as `key: value`. YAML 1.1 readers (libyaml, PyYAML) refuse an
/// implicit key whose `:` comes more than 1,024 characters after its start; longer keys are
/// written with the explicit `? ` indicator.
const MAX_IMPLICIT_KEY: usize = 1000;

fn emit_map(out: &mut String, map: &Map<String, Value>, indent: usize) {
    for (key, value) in map {
        out.push_str(&" ".repeat(indent));
        emit_entry(out, key, value, indent);
    }
}

/// Emits `key: value` (the indentation is already written).
fn emit_entry(out: &mut String, key: &str, value: &Value, indent: usize) {
    let key = string_scalar(key);
    if key.len() > MAX_IMPLICIT_KEY {
        let _ = writeln!(out, "? {key}");
        out.push_str(&" ".repeat(indent));
        out.push(':');
        // A sequence value sits deeper than the `:`, which no reader can misplace.
        match value {
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                emit_seq(out, items, indent + 2);
            }
            _ => emit_child(out, value, indent, false),
        }
    } else {
        out.push_str(&key);
        out.push(':');
        emit_child(out, value, indent, false);
    }
}

fn emit_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        emit_child(out, item, indent, true);
    }
}

/// Emits the value after `key:` or `-`.
fn emit_child(out: &mut String, value: &Value, indent: usize, in_seq: bool) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            if in_seq {
                // `- key: value` with the rest of the mapping aligned under the first key.
                out.push(' ');
                let mut first = true;
                for (key, child) in map {
                    if !first {
                        out.push_str(&" ".repeat(indent + 2));
                    }
                    first = false;
                    emit_entry(out, key, child, indent + 2);
                }
            } else {
                out.push('\n');
                emit_map(out, map, indent + 2);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            // kubectl style: a sequence under a key sits at the key's indentation.
            emit_seq(out, items, if in_seq { indent + 2 } else { indent });
        }
        Value::String(s) if is_block_candidate(s) => {
            let chomp = if s.ends_with("\n\n") {
                "+"
            } else if s.ends_with('\n') {
                ""
            } else {
                "-"
            };
            let _ = writeln!(out, " |{chomp}");
            let body = s.strip_suffix('\n').unwrap_or(s);
            for line in body.split('\n') {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "{}{line}", " ".repeat(indent + 2));
                }
            }
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

/// A literal block keeps multi-line text readable; only `\n` may break its lines, so any
/// other character a reader could take as a break (or drop) sends the string to double quotes.
fn is_block_candidate(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\t', '\n'])
        && s.chars()
            .all(|c| c == '\n' || c == '\t' || !needs_escape(c))
        && !s.split('\n').any(|l| l.ends_with(' ') || l.ends_with('\t'))
        && !s.ends_with("\n\n\n")
}

/// Whether `c` must be escaped in a double-quoted scalar: outside YAML 1.1's printable set
/// (controls, DEL, C1, surrogates, U+FFFE/U+FFFF), a break in YAML 1.1 (U+0085, U+2028,
/// U+2029), a byte order mark, or a Unicode non-character.
fn needs_escape(c: char) -> bool {
    let u = u32::from(c);
    let printable = matches!(u, 0x20..=0x7E | 0xA0..=0xD7FF | 0xE000..=0xFFFD | 0x10000..);
    !printable || matches!(u, 0x2028 | 0x2029 | 0xFEFF | 0xFDD0..=0xFDEF) || u & 0xFFFE == 0xFFFE
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => string_scalar(s),
        Value::Array(_) => "[]".to_string(),
        Value::Object(_) => "{}".to_string(),
    }
}

/// A number as YAML 1.1 and 1.2 both read it: YAML 1.1 floats need a `.` in the mantissa
/// and a sign in the exponent (`1.0e-07`), which JSON's shortest form (`1e-7`) lacks.
fn number(n: &Number) -> String {
    let text = n.to_string();
    let Some((mantissa, exponent)) = text.split_once(['e', 'E']) else {
        return text;
    };
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    let exponent = if exponent.starts_with(['-', '+']) {
        exponent.to_string()
    } else {
        format!("+{exponent}")
    };
    format!("{mantissa}e{exponent}")
}

/// A string as a YAML scalar that reads back as the same string under both YAML 1.1
/// (go-yaml, kubectl, PyYAML) and 1.2 readers: plain when that is unambiguous, else
/// double-quoted with every character that is not plainly printable escaped.
pub fn string_scalar(s: &str) -> String {
    if is_safe_plain(s) {
        s.to_string()
    } else {
        double_quoted(s)
    }
}

fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0b' => out.push_str("\\v"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\x1b' => out.push_str("\\e"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if needs_escape(c) => {
                let u = u32::from(c);
                let _ = if u <= 0xFF {
                    write!(out, "\\x{u:02X}")
                } else if u <= 0xFFFF {
                    write!(out, "\\u{u:04X}")
                } else {
                    write!(out, "\\U{u:08X}")
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn is_safe_plain(s: &str) -> bool {
    if s.is_empty() || s.len() > 200 {
        return false;
    }
    let first = s.chars().next().unwrap_or(' ');
    if !(first.is_ascii_alphanumeric() || first == '/' || first == '_' || first == '.') {
        return false;
    }
    if s.ends_with(':') || s.contains(": ") || s.contains(" #") || s.ends_with(' ') {
        return false;
    }
    if s.starts_with("..") {
        // `...` ends a document.
        return false;
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " _./:@%+=-()~,".contains(c))
    {
        return false;
    }
    if resolve_plain(s) != Value::String(s.to_string()) {
        return false;
    }
    let numeric_like = s
        .chars()
        .all(|c| c.is_ascii_digit() || "_:.-+eExXoObB".contains(c));
    if numeric_like && s.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    !yaml11_typed(s)
}

/// Whether a YAML 1.1 reader types the plain scalar `s` as something other than a string:
/// PyYAML's implicit resolvers, and go-yaml v2's (kubectl, sigs.k8s.io/yaml), which also
/// take `y`/`n`, drop underscores and parse numbers the way Go does.
fn yaml11_typed(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    if matches!(
        lower.as_str(),
        "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "~" | "null" | "=" | "<<"
    ) {
        return true;
    }
    let bytes = s.as_bytes();
    // Timestamps: 2001-12-14, 2001-12-14t21:59:43.10-05:00, 2001-1-2 3:04:05 (a prefix is
    // enough to quote).
    if bytes.len() >= 8
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[5].is_ascii_digit()
        && (bytes[6] == b'-' || bytes[6].is_ascii_digit() && bytes[7] == b'-')
    {
        return true;
    }
    if !s.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c)) {
        return false;
    }
    let plain: String = lower.chars().filter(|&c| c != '_').collect();
    let body = plain.strip_prefix(['+', '-']).unwrap_or(&plain);
    if matches!(
        body,
        "inf" | "infinity" | "nan" | ".inf" | ".infinity" | ".nan"
    ) {
        return true;
    }
    let all = |t: &str, f: fn(char) -> bool| !t.is_empty() && t.chars().all(f);
    if let Some(hex) = body.strip_prefix("0x") {
        if all(hex, |c| c.is_ascii_hexdigit()) {
            return true;
        }
        // Go's hexadecimal floats: 0x1.8p3.
        let Some((mantissa, exponent)) = hex.split_once('p') else {
            return false;
        };
        let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
        let mantissa_ok = match mantissa.split_once('.') {
            Some((int, frac)) => {
                !(int.is_empty() && frac.is_empty())
                    && int.chars().all(|c| c.is_ascii_hexdigit())
                    && frac.chars().all(|c| c.is_ascii_hexdigit())
            }
            None => all(mantissa, |c| c.is_ascii_hexdigit()),
        };
        return mantissa_ok && all(exponent, |c| c.is_ascii_digit());
    }
    if let Some(binary) = body.strip_prefix("0b") {
        return all(binary, |c| c == '0' || c == '1');
    }
    if let Some(octal) = body.strip_prefix("0o") {
        return all(octal, |c| ('0'..='7').contains(&c));
    }
    // Decimal integers and floats, and YAML 1.1's sexagesimal numbers (1:20, 1:20.5).
    let sexagesimal = body.contains(':')
        && body.split(':').enumerate().all(|(i, part)| {
            i > 0 && is_float(part) || i == 0 && all(part, |c| c.is_ascii_digit())
        });
    is_float(body) || sexagesimal
}
