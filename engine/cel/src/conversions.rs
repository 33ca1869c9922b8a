//! CEL's conversion functions (`int`, `uint`, `double`, `string`, `bool`, `bytes`), which
//! the evaluator runs as builtins, and how `string(double)` writes a double (which `format`
//! shares).

use std::sync::Arc;

use crate::golang;
use crate::value::{Value, format_timestamp};

/// cel-go's error for a string that does not convert.
fn conversion_error(to: &str) -> String {
    format!("type conversion error from 'string' to '{to}'")
}

pub(crate) fn to_int(v: &Value) -> Result<Value, String> {
    match v {
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Uint(u) => i64::try_from(*u)
            .map(Value::Int)
            .map_err(|_| "int: integer overflow".to_string()),
        Value::Double(d) => {
            if *d > -9_223_372_036_854_775_808.0 && *d < 9_223_372_036_854_775_808.0 {
                Ok(Value::Int(*d as i64))
            } else {
                Err("int: integer overflow".to_string())
            }
        }
        // Go's strconv.ParseInt: a sign, then decimal digits.
        Value::String(s) => golang::parse_int(s)
            .map(Value::Int)
            .ok_or_else(|| conversion_error("int")),
        Value::Timestamp(t) => Ok(Value::Int(t.unix_seconds())),
        // cel-go: the nanoseconds; a duration in range always fits an int64
        Value::Duration(d) => d
            .num_nanoseconds()
            .map(Value::Int)
            .ok_or_else(|| "int: integer overflow".to_string()),
        other => Err(format!(
            "no matching overload for 'int' applied to ({})",
            other.type_name()
        )),
    }
}

pub(crate) fn to_uint(v: &Value) -> Result<Value, String> {
    match v {
        Value::Uint(u) => Ok(Value::Uint(*u)),
        Value::Int(i) => u64::try_from(*i)
            .map(Value::Uint)
            .map_err(|_| "uint: unsigned integer overflow".to_string()),
        Value::Double(d) => {
            // cel-go refuses every negative double, -0.5 too (-0.0 is not negative)
            if *d >= 0.0 && *d < 18_446_744_073_709_551_616.0 {
                Ok(Value::Uint(*d as u64))
            } else {
                Err("uint: unsigned integer overflow".to_string())
            }
        }
        // Go's strconv.ParseUint: decimal digits, no sign (`uint('+1')` fails).
        Value::String(s) => golang::parse_uint(s)
            .map(Value::Uint)
            .ok_or_else(|| conversion_error("uint")),
        other => Err(format!(
            "no matching overload for 'uint' applied to ({})",
            other.type_name()
        )),
    }
}

pub(crate) fn to_double(v: &Value) -> Result<Value, String> {
    match v {
        Value::Double(d) => Ok(Value::Double(*d)),
        Value::Int(i) => Ok(Value::Double(*i as f64)),
        Value::Uint(u) => Ok(Value::Double(*u as f64)),
        // Go's strconv.ParseFloat: hexadecimal (`0x1p-2`) and `_` between digits read,
        // a number beyond the double range (`1e400`) does not.
        Value::String(s) => golang::parse_float(s)
            .map(Value::Double)
            .ok_or_else(|| conversion_error("double")),
        other => Err(format!(
            "no matching overload for 'double' applied to ({})",
            other.type_name()
        )),
    }
}

/// A double as `string(d)` writes it, which is cel-go's `strconv.FormatFloat(d, 'g', -1,
/// 64)`: the shortest digits that read back, with an exponent (`1e+06`, `1.5e-07`) when it
/// is below -4 or at least 6.
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".to_string();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    // Rust's `{:e}` has the same shortest digits as Go, written `1.5e-7`
    let scientific = format!("{d:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return d.to_string();
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return d.to_string();
    };
    if (-4..6).contains(&exponent) {
        d.to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    }
}

pub(crate) fn to_string(v: &Value) -> Result<Value, String> {
    Ok(Value::String(Arc::from(match v {
        Value::String(s) => return Ok(Value::String(Arc::clone(s))),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => format_double(*d),
        Value::Bool(b) => b.to_string(),
        Value::Bytes(b) => std::str::from_utf8(b)
            .map_err(|_| "string: invalid UTF-8 in bytes, cannot convert to string".to_string())?
            .to_string(),
        Value::Timestamp(t) => format_timestamp(t),
        // cel-go writes the seconds as a double, not `format_duration`'s exact form.
        Value::Duration(d) => golang::format_duration_seconds(d.num_nanoseconds().unwrap_or(0)),
        Value::Type(t) => t.name().to_string(),
        Value::Opaque(o) => o.to_display().ok_or_else(|| {
            format!(
                "no matching overload for 'string' applied to ({})",
                o.type_name()
            )
        })?,
        other => {
            return Err(format!(
                "no matching overload for 'string' applied to ({})",
                other.type_name()
            ));
        }
    })))
}

pub(crate) fn to_bool(v: &Value) -> Result<Value, String> {
    match v {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        Value::String(s) => golang::parse_bool(s)
            .map(Value::Bool)
            .ok_or_else(|| conversion_error("bool")),
        other => Err(format!(
            "no matching overload for 'bool' applied to ({})",
            other.type_name()
        )),
    }
}

pub(crate) fn to_bytes(v: &Value) -> Result<Value, String> {
    match v {
        Value::Bytes(b) => Ok(Value::Bytes(Arc::clone(b))),
        Value::String(s) => Ok(Value::Bytes(Arc::from(s.as_bytes()))),
        other => Err(format!(
            "no matching overload for 'bytes' applied to ({})",
            other.type_name()
        )),
    }
}
