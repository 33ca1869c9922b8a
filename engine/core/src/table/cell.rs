//! Cells: parsing input conditions and output values from YAML (as JSON values) and CSV
//! text, and matching conditions against input values.
//!
//! Matching here works on the parsed literals directly; the set algebra the lints use lives
//! in `algebra`, and the tests check the two against each other.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

use super::spec::ColumnType;

/// A literal of a column's type.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Lit {
    Str(String),
    Int(i64),
    /// Finite, and never `-0.0` (normalised to `0.0`).
    Num(f64),
    Bool(bool),
}

impl Lit {
    /// Compares two literals of the same column type; `None` for mixed types.
    pub(super) fn compare(&self, other: &Lit) -> Option<Ordering> {
        match (self, other) {
            (Lit::Str(a), Lit::Str(b)) => Some(a.cmp(b)),
            (Lit::Int(a), Lit::Int(b)) => Some(a.cmp(b)),
            (Lit::Num(a), Lit::Num(b)) => a.partial_cmp(b),
            (Lit::Bool(a), Lit::Bool(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }

    fn same(&self, other: &Lit) -> bool {
        self.compare(other) == Some(Ordering::Equal)
    }

    /// How the literal is written in messages: JSON-style, strings quoted.
    pub(super) fn quoted(&self) -> String {
        match self {
            Lit::Str(s) => Value::String(s.clone()).to_string(),
            other => other.to_string(),
        }
    }
}

impl fmt::Display for Lit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lit::Str(s) => f.write_str(s),
            Lit::Int(i) => write!(f, "{i}"),
            Lit::Num(n) => write!(f, "{n}"),
            Lit::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A numeric comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A parsed input cell.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cond {
    /// Any value, including a missing input.
    Any,
    /// Equal to one of the values (one value for a plain equality).
    In(Vec<Lit>),
    /// Present and not equal.
    Ne(Lit),
    /// A numeric comparison `input op literal`.
    Cmp(CmpOp, Lit),
    /// A closed numeric range `lo..hi`, `lo <= hi`.
    Range(Lit, Lit),
}

impl Cond {
    /// Whether an input value (`None` = missing or null) satisfies the condition.
    pub(super) fn matches(&self, input: Option<&Lit>) -> bool {
        let Some(x) = input else {
            return matches!(self, Cond::Any);
        };
        match self {
            Cond::Any => true,
            Cond::In(values) => values.iter().any(|v| x.same(v)),
            Cond::Ne(v) => matches!(x.compare(v), Some(o) if o != Ordering::Equal),
            Cond::Cmp(op, v) => match x.compare(v) {
                Some(o) => match op {
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Le => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Ge => o != Ordering::Less,
                },
                None => false,
            },
            Cond::Range(lo, hi) => {
                matches!(x.compare(lo), Some(Ordering::Greater | Ordering::Equal))
                    && matches!(x.compare(hi), Some(Ordering::Less | Ordering::Equal))
            }
        }
    }

    /// The literals an allowed-values check applies to (comparison bounds are not checked).
    pub(super) fn named_values(&self) -> &[Lit] {
        match self {
            Cond::In(values) => values,
            Cond::Ne(v) => std::slice::from_ref(v),
            Cond::Any | Cond::Cmp(..) | Cond::Range(..) => &[],
        }
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cond::Any => f.write_str("-"),
            Cond::In(values) => {
                let parts: Vec<String> = values.iter().map(Lit::to_string).collect();
                f.write_str(&parts.join("|"))
            }
            Cond::Ne(v) => write!(f, "!= {v}"),
            Cond::Cmp(op, v) => write!(f, "{} {v}", op.symbol()),
            Cond::Range(lo, hi) => write!(f, "{lo}..{hi}"),
        }
    }
}

/// Normalises `-0.0` to `0.0` so equal numbers have one representation.
pub(super) fn norm_f64(f: f64) -> f64 {
    if f == 0.0 { 0.0 } else { f }
}

/// Describes a JSON value for "got ..." in messages.
pub(super) fn describe_json(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the bool {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", Value::String(s.clone())),
        Value::Array(_) => "a list".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

fn expected(name: &str, ty: ColumnType, got: &str) -> String {
    format!("expected {} for `{name}`, got {got}", ty.with_article())
}

/// A JSON value as a literal of the column type, strictly (no strings for other types).
/// `Ok(None)` for null.
pub(super) fn json_lit(name: &str, ty: ColumnType, v: &Value) -> Result<Option<Lit>, String> {
    let lit = match (ty, v) {
        (_, Value::Null) => return Ok(None),
        (ColumnType::String, Value::String(s)) => Lit::Str(s.clone()),
        (ColumnType::Int, Value::Number(n)) => match n.as_i64() {
            Some(i) => Lit::Int(i),
            None => return Err(expected(name, ty, &describe_json(v))),
        },
        (ColumnType::Number, Value::Number(n)) => match n.as_f64() {
            Some(f) if f.is_finite() => Lit::Num(norm_f64(f)),
            _ => return Err(expected(name, ty, &describe_json(v))),
        },
        (ColumnType::Bool, Value::Bool(b)) => Lit::Bool(*b),
        _ => return Err(expected(name, ty, &describe_json(v))),
    };
    Ok(Some(lit))
}

/// An input value passed to `decide`: like [`json_lit`], but an int column also accepts a
/// whole number written as a float (`3.0`), as computed values often are.
pub(super) fn input_lit(name: &str, ty: ColumnType, v: &Value) -> Result<Option<Lit>, String> {
    // -2^63 is i64::MIN exactly; 2^63 is the first float above i64::MAX.
    const I64_RANGE: std::ops::Range<f64> =
        -9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0;
    if let (ColumnType::Int, Value::Number(n)) = (ty, v)
        && n.as_i64().is_none()
        && let Some(f) = n.as_f64()
        && f.fract() == 0.0
        && I64_RANGE.contains(&f)
    {
        return Ok(Some(Lit::Int(f as i64)));
    }
    json_lit(name, ty, v)
}

/// A plain value written as text (a CSV cell, a list element or a comparison operand).
pub(super) fn text_lit(name: &str, ty: ColumnType, text: &str) -> Result<Lit, String> {
    let bad = || expected(name, ty, &Value::String(text.to_string()).to_string());
    match ty {
        ColumnType::String => Ok(Lit::Str(text.to_string())),
        ColumnType::Int => text.parse::<i64>().map(Lit::Int).map_err(|_| bad()),
        ColumnType::Number => match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Lit::Num(norm_f64(f))),
            _ => Err(bad()),
        },
        ColumnType::Bool => {
            if text.eq_ignore_ascii_case("true") {
                Ok(Lit::Bool(true))
            } else if text.eq_ignore_ascii_case("false") {
                Ok(Lit::Bool(false))
            } else {
                Err(bad())
            }
        }
    }
}

/// An input cell from YAML (already converted to JSON).
pub(super) fn yaml_cond(name: &str, ty: ColumnType, v: &Value) -> Result<Cond, String> {
    match v {
        Value::Null => Ok(Cond::Any),
        Value::String(s) => text_cond(name, ty, s, false),
        Value::Array(items) => {
            if items.is_empty() {
                return Err(format!(
                    "an empty list for `{name}` matches nothing; leave `{name}` out or use \"-\" to match any value"
                ));
            }
            let mut values = Vec::with_capacity(items.len());
            for item in items {
                let lit = match item {
                    Value::String(s) if ty != ColumnType::String => text_lit(name, ty, s.trim())?,
                    Value::Null => return Err(expected(name, ty, "null in the list")),
                    other => match json_lit(name, ty, other)? {
                        Some(lit) => lit,
                        None => return Err(expected(name, ty, "null in the list")),
                    },
                };
                values.push(lit);
            }
            Ok(Cond::In(dedup(values)))
        }
        Value::Object(_) => Err(expected(name, ty, "an object")),
        other => match json_lit(name, ty, other)? {
            Some(lit) => Ok(Cond::In(vec![lit])),
            None => Ok(Cond::Any),
        },
    }
}

/// An input cell from CSV text (already trimmed).
pub(super) fn csv_cond(name: &str, ty: ColumnType, text: &str) -> Result<Cond, String> {
    if text.is_empty() {
        return Ok(Cond::Any);
    }
    text_cond(name, ty, text, true)
}

/// An input cell written as text: `-`, `!= x`, comparisons and ranges for numeric columns,
/// `a|b` when `pipes` (CSV), else a plain value.
fn text_cond(name: &str, ty: ColumnType, text: &str, pipes: bool) -> Result<Cond, String> {
    let trimmed = text.trim();
    if trimmed == "-" {
        return Ok(Cond::Any);
    }
    let quoted = || Value::String(text.to_string()).to_string();
    if let Some(rest) = trimmed.strip_prefix("!=") {
        let rest = rest.trim();
        if rest.is_empty() {
            return Err(format!(
                "malformed comparison {} for `{name}`: expected a value after \"!=\"",
                quoted()
            ));
        }
        return text_lit(name, ty, rest).map(Cond::Ne).map_err(|_| {
            format!(
                "malformed comparison {} for `{name}`: {} is not {}",
                quoted(),
                Value::String(rest.to_string()),
                ty.with_article()
            )
        });
    }
    if pipes && trimmed.contains('|') {
        let mut values = Vec::new();
        for part in trimmed.split('|') {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("empty alternative in {} for `{name}`", quoted()));
            }
            values.push(text_lit(name, ty, part)?);
        }
        return Ok(Cond::In(dedup(values)));
    }
    if ty.is_numeric() {
        for (prefix, op) in [
            (">=", CmpOp::Ge),
            ("<=", CmpOp::Le),
            (">", CmpOp::Gt),
            ("<", CmpOp::Lt),
        ] {
            if let Some(rest) = trimmed.strip_prefix(prefix) {
                let rest = rest.trim();
                return text_lit(name, ty, rest)
                    .map(|v| Cond::Cmp(op, v))
                    .map_err(|_| {
                        format!(
                            "malformed comparison {} for `{name}`: {} is not {}",
                            quoted(),
                            Value::String(rest.to_string()),
                            ty.with_article()
                        )
                    });
            }
        }
        if let Some((lo, hi)) = trimmed.split_once("..") {
            let (lo, hi) = (lo.trim(), hi.trim());
            let bound = |side: &str| {
                text_lit(name, ty, side).map_err(|_| {
                    if side.is_empty() {
                        format!(
                            "malformed range {} for `{name}`: ranges need both bounds (use \">=\" or \"<=\" for one)",
                            quoted()
                        )
                    } else {
                        format!(
                            "malformed range {} for `{name}`: {} is not {}",
                            quoted(),
                            Value::String(side.to_string()),
                            ty.with_article()
                        )
                    }
                })
            };
            let (lo, hi) = (bound(lo)?, bound(hi)?);
            if lo.compare(&hi) == Some(Ordering::Greater) {
                return Err(format!(
                    "empty range {} for `{name}`: the lower bound {lo} is greater than the upper bound {hi}",
                    quoted()
                ));
            }
            return Ok(Cond::Range(lo, hi));
        }
    }
    let value = if ty == ColumnType::String && !pipes {
        text
    } else {
        trimmed
    };
    text_lit(name, ty, value).map(|lit| Cond::In(vec![lit]))
}

fn dedup(values: Vec<Lit>) -> Vec<Lit> {
    let mut out: Vec<Lit> = Vec::with_capacity(values.len());
    for v in values {
        if !out.iter().any(|o| o.same(&v)) {
            out.push(v);
        }
    }
    out
}

/// Checks an output value from YAML against the output type. Null is handled by callers.
pub(super) fn check_output(name: &str, ty: ColumnType, v: &Value) -> Result<(), String> {
    let ok = match ty {
        ColumnType::String => v.is_string(),
        ColumnType::Int => v.as_i64().is_some(),
        ColumnType::Number => v.is_number(),
        ColumnType::Bool => v.is_boolean(),
    };
    if ok {
        Ok(())
    } else {
        Err(expected(name, ty, &describe_json(v)))
    }
}

/// An output value from CSV text (already trimmed); `None` for an empty cell.
pub(super) fn csv_output(name: &str, ty: ColumnType, text: &str) -> Result<Option<Value>, String> {
    if text.is_empty() {
        return Ok(None);
    }
    let value = match (ty, text_lit(name, ty, text)?) {
        (_, Lit::Str(s)) => Value::String(s),
        (_, Lit::Int(i)) => Value::from(i),
        (_, Lit::Bool(b)) => Value::Bool(b),
        // Whole numbers stay JSON integers, as YAML `2` would.
        (_, Lit::Num(f)) => match text.parse::<i64>() {
            Ok(i) => Value::from(i),
            Err(_) => Value::from(f),
        },
    };
    Ok(Some(value))
}
