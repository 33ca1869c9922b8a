//! JSON access with CEL's semantics for the pack's expressions, the string checks its guards
//! make, and [`Stop`]: why a trigger renders nothing.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Why a trigger renders nothing: the `Synced=False` reason and message.
pub(super) struct Stop {
    pub(super) reason: &'static str,
    pub(super) message: String,
}

pub(super) fn stop(reason: &'static str, message: impl Into<String>) -> Stop {
    Stop {
        reason,
        message: message.into(),
    }
}

/// An input the pack's CEL expressions cannot evaluate.
pub(super) fn type_error(what: &str) -> Stop {
    stop("EvaluationError", format!("unsupported input: {what}"))
}

/// A JSON object from its entries (moved in, not copied through serde as `json!` would).
pub(super) fn obj<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `v.?key` (CEL: selecting on a non-map is an error).
pub(super) fn opt<'a>(v: &'a Value, key: &str) -> Result<Option<&'a Value>, Stop> {
    match v {
        Value::Object(m) => Ok(m.get(key)),
        _ => Err(type_error(&format!("`{key}` of a non-map"))),
    }
}

/// `v.key` (an error when absent).
pub(super) fn req<'a>(v: &'a Value, key: &str) -> Result<&'a Value, Stop> {
    opt(v, key)?.ok_or_else(|| type_error(&format!("no `{key}`")))
}

/// `size(v)`.
pub(super) fn size(v: &Value) -> Result<usize, Stop> {
    match v {
        Value::String(s) => Ok(s.chars().count()),
        Value::Array(a) => Ok(a.len()),
        Value::Object(m) => Ok(m.len()),
        _ => Err(type_error("size() of a scalar")),
    }
}

pub(super) fn as_str<'a>(v: &'a Value, what: &str) -> Result<&'a str, Stop> {
    v.as_str()
        .ok_or_else(|| type_error(&format!("{what} is not a string")))
}

/// A number as f64 for CEL's cross-type numeric comparisons.
pub(super) fn number(v: &Value, what: &str) -> Result<f64, Stop> {
    v.as_f64()
        .ok_or_else(|| type_error(&format!("{what} is not a number")))
}

/// `needle in haystack` for a map (keys) or a list (elements).
pub(super) fn contains(haystack: &Value, needle: &str) -> Result<bool, Stop> {
    match haystack {
        Value::Object(m) => Ok(m.contains_key(needle)),
        Value::Array(a) => Ok(a.iter().any(|v| v.as_str() == Some(needle))),
        _ => Err(type_error("`in` on a scalar")),
    }
}

/// `v != ''` (CEL's heterogeneous equality: a non-string is not `''`).
pub(super) fn non_empty(v: &Value) -> bool {
    v.as_str() != Some("")
}

/// Handlebars' `{{#if}}` truthiness.
pub(super) fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(f64::is_normal),
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// A label value: `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`.
pub(super) fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (None, _) | (_, None) => true,
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, any length.
pub(super) fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-')
        }
        _ => false,
    }
}

/// Kubernetes' `IsDNS1123Subdomain`.
pub(super) fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_shape)
}

/// `^[a-z]([-a-z0-9]*[a-z0-9])?$` (DNS-1035 label, any length).
pub(super) fn is_dns1035_label(s: &str) -> bool {
    s.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_label_shape(s)
}

/// `'kcp-' + sha256(workspace).substring(0, 12)`.
pub(super) fn namespace_of(workspace: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(workspace.as_bytes());
    let mut out = String::with_capacity(16);
    out.push_str("kcp-");
    for b in &digest[..6] {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}
