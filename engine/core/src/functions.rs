//! The engine's own CEL functions for packs that reproduce Go controllers: reading a field by
//! a dotted path as `unstructured.NestedFieldNoCopy` does, formatting a value as Go's
//! `fmt.Sprintf("%v", ...)` does for JSON-decoded values, and keeping a timestamp while what
//! it stamps is unchanged (`keepTime`, and `setConditions` as `meta.SetStatusCondition`).

use serde_json::Value;

/// `keepTime(previousTime, previousValue, value, now)`: `previousTime` when it is a string
/// and `previousValue == value` (what the time stamps has not changed), else `now`. The
/// previous values come from the trigger's own status (`self.?status.?lastSyncTime`; an
/// absent optional is null), so evaluation stays a function of the objects and the clock.
pub fn keep_time(
    previous_time: &Value,
    previous_value: &Value,
    value: &Value,
    now: &Value,
) -> Value {
    match previous_time {
        Value::String(_) if previous_value == value => previous_time.clone(),
        _ => now.clone(),
    }
}

/// `setConditions(previous, conditions, now)`: `conditions`, each with its
/// `lastTransitionTime` as Kubernetes' `meta.SetStatusCondition` sets it against the
/// `previous` list (null for none): the previous condition's time when one of the same `type`
/// has the same `status`, else the condition's own time when it has one, else `now`.
pub fn set_conditions(previous: &Value, conditions: &Value, now: &Value) -> Result<Value, String> {
    let previous: &[Value] = match previous {
        Value::Null => &[],
        Value::Array(list) => list,
        _ => {
            return Err(
                "setConditions(previous, conditions, now): previous must be a list or null".into(),
            );
        }
    };
    let Value::Array(conditions) = conditions else {
        return Err("setConditions(previous, conditions, now): conditions must be a list".into());
    };
    let mut out = Vec::with_capacity(conditions.len());
    for condition in conditions {
        let Value::Object(fields) = condition else {
            return Err("setConditions(previous, conditions, now): every condition must be a map with a `type`".into());
        };
        let Some(kind) = fields.get("type") else {
            return Err("setConditions(previous, conditions, now): every condition must be a map with a `type`".into());
        };
        let before = previous.iter().find(|p| p.get("type") == Some(kind));
        let kept = before
            .filter(|b| b.get("status") == fields.get("status"))
            .and_then(|b| b.get("lastTransitionTime"))
            .filter(|t| t.is_string());
        let own = fields.get("lastTransitionTime").filter(|t| t.is_string());
        let time = kept.or(own).unwrap_or(now).clone();
        let mut fields = fields.clone();
        fields.insert("lastTransitionTime".into(), time);
        out.push(Value::Object(fields));
    }
    Ok(Value::Array(out))
}

/// `nestedField(object, 'a.b.c')`: `[value]` when every step is a map holding the next key
/// (an explicit null is found: `[null]`), `[]` when a key is absent or a step is not a map.
/// The path splits on `.` without escapes, as the resource-broker's AcceptAPI filters do.
pub fn nested_field(object: &Value, path: &str) -> Value {
    let mut current = object;
    for key in path.split('.') {
        match current {
            Value::Object(fields) => match fields.get(key) {
                Some(next) => current = next,
                None => return Value::Array(Vec::new()),
            },
            _ => return Value::Array(Vec::new()),
        }
    }
    Value::Array(vec![current.clone()])
}

/// `goFormat(value)`: the value as Go prints a JSON-decoded value with `%v`: strings as they
/// are, integral numbers as integers (Kubernetes decodes them to int64), other numbers in Go's
/// shortest `%g` form (`1.5`, `1.2345675e+06`), `true`/`false`, `<nil>` for null, lists as
/// `[a b]` and maps as `map[k:v]` with sorted keys.
pub fn go_format(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (None, None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.2e18 => (f as i64).to_string(),
            (None, None, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_format).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_format(&fields[k.as_str()])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 64)`: the shortest digits, in exponent form when
/// the exponent is below -4 or at least 6 (Go's rule for the shortest precision).
fn go_float(f: f64) -> String {
    if !f.is_finite() {
        return if f.is_nan() {
            "NaN".into()
        } else if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `1.2345675e6`.
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return scientific;
    };
    if !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    // Plain decimal notation with the same digits.
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let point = 1 + exponent;
    let body = if point <= 0 {
        format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    if negative { format!("-{body}") } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_formatting_of_json_values() {
        let cases = [
            (json!("x86"), "x86"),
            (json!(4), "4"),
            (json!(2.0), "2"),
            (json!(1.5), "1.5"),
            (json!(-0.25), "-0.25"),
            (json!(123456.5), "123456.5"),
            (json!(1234567.5), "1.2345675e+06"),
            (json!(0.00001), "1e-05"),
            (json!(0.0001), "0.0001"),
            (json!(true), "true"),
            (json!(null), "<nil>"),
            (json!(["a", "b", 1]), "[a b 1]"),
            (json!({"z": 1, "a": "b"}), "map[a:b z:1]"),
        ];
        for (value, want) in cases {
            assert_eq!(go_format(&value), want, "{value}");
        }
    }

    #[test]
    fn nested_fields_by_dotted_path() {
        let spec = json!({"a": {"b": 5, "n": null, "l": [1]}});
        assert_eq!(nested_field(&spec, "a.b"), json!([5]));
        assert_eq!(nested_field(&spec, "a.n"), json!([null]));
        assert_eq!(nested_field(&spec, "a.missing"), json!([]));
        assert_eq!(nested_field(&spec, "a.l.0"), json!([]));
        assert_eq!(nested_field(&spec, "a.b.c"), json!([]));
    }
}
