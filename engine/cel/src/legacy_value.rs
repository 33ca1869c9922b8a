//! [`Value`]: a CEL value that crosses the boundary of this crate.
//!
//! Internally a value is a boxed `cel` value (`dyn Val`). Scalars (`int`, `uint`, `double`,
//! `bool`, `null`, `duration`, `timestamp`, `type`) are stored as they are; every other value
//! (strings, bytes, lists, maps, optionals) is wrapped in [`Shared`], an `Arc` that behaves
//! exactly like the value it wraps. Cloning a [`Value`], binding it into an evaluation, or
//! reading a nested list or map out of it therefore never copies the data.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use cel::common::traits::{
    Adder, Comparer, Container, Divider, Indexer, Iterable, Modder, Multiplier, Negator, Sizer,
    Subtractor, Zeroer,
};
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelList, CelMap, CelMapKey, CelNull,
    CelOptional, CelString, CelTimestamp, CelType, CelUInt, DYN_TYPE, Kind, Type,
};
use cel::common::value::{Builtin, BuiltinRef, StaticVal, Val};

use crate::EvalError;

/// A CEL value. Cheap to clone: strings, lists and maps are shared, so one Kubernetes object
/// converted once can be bound into every evaluation that reads it.
///
/// Equality (`==`) is CEL's: `1 == 1.0` holds, `NaN` equals nothing, lists and maps compare
/// element by element.
pub struct Value(pub(crate) Box<dyn Val + 'static>);

impl Clone for Value {
    fn clone(&self) -> Self {
        // A scalar is copied, anything else is a `Shared`, whose clone shares the data.
        Value(self.0.clone_as_boxed())
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_json() {
            Ok(json) => write!(f, "Value({}: {json})", self.type_name()),
            Err(_) => write!(f, "Value({:?})", self.0),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.0.equals(other.0.as_ref())
    }
}

impl Value {
    /// Converts JSON with Kubernetes conventions: integers become `int` (a `u64` beyond
    /// `i64::MAX` becomes `uint`), other numbers `double`, objects maps with string keys.
    pub fn from_json(json: &serde_json::Value) -> Value {
        Value::from_boxed(json_to_val(json))
    }

    /// Converts back to JSON:
    ///
    /// - a map becomes an object; `int`, `uint` and `bool` keys use their string forms
    ///   (`1`, `true`);
    /// - `bytes` become standard base64 (with padding);
    /// - a `timestamp` becomes an RFC 3339 string in UTC (`2024-01-02T03:04:05Z`, with a
    ///   fractional part only when it is not zero), as CEL's `string(timestamp)`;
    /// - a `duration` becomes CEL's `string(duration)` form: seconds with an `s` suffix
    ///   (`"5400s"`, `"1.5s"`);
    /// - an optional becomes its value, or `null` when it has none;
    /// - a `double` stays a JSON float (`3.0`, not `3`); NaN and the infinities, which JSON
    ///   numbers cannot hold, become the strings `"NaN"`, `"Infinity"` and `"-Infinity"`, as in
    ///   the protobuf JSON mapping.
    ///
    /// Type values (`type(x)`) have no JSON form and are an error.
    pub fn to_json(&self) -> Result<serde_json::Value, EvalError> {
        val_to_json(self.0.as_ref())
            .map_err(|e| EvalError::new(format!("the result cannot be represented as JSON: {e}")))
    }

    /// The value if it is a `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        self.0.downcast_ref::<CelBool>().map(|b| *b.inner())
    }

    /// `null`.
    pub fn null() -> Value {
        Value(Box::new(CelNull))
    }

    /// A map with string keys.
    pub fn map<I: IntoIterator<Item = (String, Value)>>(entries: I) -> Value {
        let map: HashMap<CelMapKey<'static>, Box<dyn Val>> = entries
            .into_iter()
            .map(|(k, v)| (CelMapKey::from(k), v.0))
            .collect();
        Value::shared(CelMap::from(map))
    }

    /// A list.
    pub fn list<I: IntoIterator<Item = Value>>(items: I) -> Value {
        let items: Vec<Box<dyn Val>> = items.into_iter().map(|v| v.0).collect();
        Value::shared(CelList::from(items))
    }

    /// A `bool`.
    pub fn bool(value: bool) -> Value {
        Value(Box::new(CelBool::from(value)))
    }

    /// An `int`.
    pub fn int(value: i64) -> Value {
        Value(Box::new(CelInt::from(value)))
    }

    /// A `uint`, which JSON cannot express below `2^63`.
    pub fn uint(value: u64) -> Value {
        Value(Box::new(CelUInt::from(value)))
    }

    /// A `double`, also when it is integral (JSON `3` would be an `int`).
    pub fn double(value: f64) -> Value {
        Value(Box::new(CelDouble::from(value)))
    }

    /// A `string`.
    pub fn string(value: impl Into<String>) -> Value {
        Value::shared(CelString::from(value.into()))
    }

    /// A `bytes` value.
    pub fn bytes(value: impl Into<Vec<u8>>) -> Value {
        Value::shared(CelBytes::from(value.into()))
    }

    /// A map with keys of any of CEL's key types (`int`, `uint`, `bool`, `string`).
    ///
    /// Fails on a key of another type, or on a repeated key.
    pub fn map_from_entries<I: IntoIterator<Item = (Value, Value)>>(
        entries: I,
    ) -> Result<Value, EvalError> {
        let mut map: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::new();
        for (k, v) in entries {
            let type_name = k.type_name();
            let key = CelMapKey::try_from(k.0)
                .map_err(|_| EvalError::new(format!("a map key cannot be of type {type_name}")))?;
            let shown = key_to_string(&key);
            if map.insert(key, v.0).is_some() {
                return Err(EvalError::new(format!("repeated map key: {shown}")));
            }
        }
        Ok(Value::shared(CelMap::from(map)))
    }

    /// The CEL type name of this value (`int`, `double`, `string`, `list`, `map`,
    /// `google.protobuf.Duration`, ...), for messages.
    pub fn type_name(&self) -> String {
        self.0.get_type().name().to_string()
    }

    /// A structural view of the value, for tests that must tell `1`, `1u` and `1.0` apart.
    #[doc(hidden)]
    pub fn inspect(&self) -> Inspect {
        inspect(self.0.as_ref())
    }

    /// Wraps a non-scalar value so that clones share it.
    fn shared<T: Val + 'static>(value: T) -> Value {
        Value(Box::new(Shared(Arc::new(value))))
    }

    /// Takes an evaluation result (or any value) as a [`Value`], sharing it unless it is a
    /// scalar or already shared.
    pub(crate) fn from_boxed(value: Box<dyn Val + 'static>) -> Value {
        if value.as_any().is_some() {
            // A scalar (they are `Any`), or already a `Shared` (which answers `Any` too).
            Value(value)
        } else {
            Value(Box::new(Shared(Arc::from(value))))
        }
    }

    /// A clone of the value, boxed for binding into an evaluation.
    pub(crate) fn to_boxed(&self) -> Box<dyn Val + 'static> {
        self.0.clone_as_boxed()
    }
}

/// A structural view of a [`Value`] (see [`Value::inspect`]).
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq)]
pub enum Inspect {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    List(Vec<Inspect>),
    /// Entries in no particular order.
    Map(Vec<(Inspect, Inspect)>),
    /// A type value, by name (`int`, `google.protobuf.Duration`).
    Type(String),
    /// Seconds and nanoseconds (both negative for a negative duration).
    Duration(i64, i32),
    /// Seconds and nanoseconds since the Unix epoch.
    Timestamp(i64, u32),
    Optional(Option<Box<Inspect>>),
    /// Anything else, by type name.
    Other(String),
}

fn inspect(v: &dyn Val) -> Inspect {
    let t = v.get_type();
    match t.kind() {
        Kind::NullType => Inspect::Null,
        Kind::Boolean => v
            .downcast_ref::<CelBool>()
            .map_or(Inspect::Other(t.name().into()), |b| {
                Inspect::Bool(*b.inner())
            }),
        Kind::Int => v
            .downcast_ref::<CelInt>()
            .map_or(Inspect::Other(t.name().into()), |i| {
                Inspect::Int(*i.inner())
            }),
        Kind::UInt => v
            .downcast_ref::<CelUInt>()
            .map_or(Inspect::Other(t.name().into()), |u| {
                Inspect::Uint(*u.inner())
            }),
        Kind::Double => v
            .downcast_ref::<CelDouble>()
            .map_or(Inspect::Other(t.name().into()), |d| {
                Inspect::Double(*d.inner())
            }),
        Kind::String => v
            .downcast_ref::<CelString>()
            .map_or(Inspect::Other(t.name().into()), |s| {
                Inspect::String(s.inner().to_string())
            }),
        Kind::Bytes => v
            .downcast_ref::<CelBytes>()
            .map_or(Inspect::Other(t.name().into()), |b| {
                Inspect::Bytes(b.inner().to_vec())
            }),
        Kind::Duration => {
            v.downcast_ref::<CelDuration>()
                .map_or(Inspect::Other(t.name().into()), |d| {
                    let d = d.inner();
                    Inspect::Duration(d.num_seconds(), d.subsec_nanos())
                })
        }
        Kind::Timestamp => {
            v.downcast_ref::<CelTimestamp>()
                .map_or(Inspect::Other(t.name().into()), |ts| {
                    let ts = ts.inner();
                    Inspect::Timestamp(ts.timestamp(), ts.timestamp_subsec_nanos())
                })
        }
        Kind::Type => v
            .downcast_ref::<CelType>()
            .map_or(Inspect::Other(t.name().into()), |ty| {
                Inspect::Type(ty.name().to_string())
            }),
        Kind::List => match v.as_iterable() {
            Some(items) => {
                let mut out = Vec::new();
                let mut it = items.iter();
                while let Some(item) = it.next() {
                    out.push(inspect(item));
                }
                Inspect::List(out)
            }
            None => Inspect::Other(t.name().into()),
        },
        Kind::Map => match v.downcast_ref::<CelMap>() {
            Some(map) => Inspect::Map(
                map.inner()
                    .iter()
                    .map(|(k, v)| (inspect(k.inner()), inspect(v.as_ref())))
                    .collect(),
            ),
            None => Inspect::Other(t.name().into()),
        },
        _ => match v.downcast_ref::<CelOptional>() {
            Some(opt) => Inspect::Optional(opt.option().map(|v| Box::new(inspect(v)))),
            None => Inspect::Other(t.name().into()),
        },
    }
}

fn json_to_val(json: &serde_json::Value) -> Box<dyn Val + 'static> {
    match json {
        serde_json::Value::Null => Box::new(CelNull),
        serde_json::Value::Bool(b) => Box::new(CelBool::from(*b)),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Box::new(CelInt::from(i))
            } else if let Some(u) = n.as_u64() {
                Box::new(CelUInt::from(u))
            } else {
                Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
            }
        }
        serde_json::Value::String(s) => Box::new(CelString::from(s.clone())),
        serde_json::Value::Array(items) => {
            let items: Vec<Box<dyn Val>> = items.iter().map(json_to_val).collect();
            Box::new(Shared(Arc::new(CelList::from(items))))
        }
        serde_json::Value::Object(map) => {
            let map: HashMap<CelMapKey<'static>, Box<dyn Val>> = map
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.clone()), json_to_val(v)))
                .collect();
            Box::new(Shared(Arc::new(CelMap::from(map))))
        }
    }
}

/// Converts a CEL value to JSON; the error names what could not be converted.
pub(crate) fn val_to_json(v: &dyn Val) -> Result<serde_json::Value, String> {
    let t = v.get_type();
    let unexpected = || format!("a value of type {} has no JSON form", t.name());
    Ok(match t.kind() {
        Kind::NullType => serde_json::Value::Null,
        Kind::Boolean => {
            serde_json::Value::Bool(*v.downcast_ref::<CelBool>().ok_or_else(unexpected)?.inner())
        }
        Kind::Int => {
            serde_json::Value::from(*v.downcast_ref::<CelInt>().ok_or_else(unexpected)?.inner())
        }
        Kind::UInt => {
            serde_json::Value::from(*v.downcast_ref::<CelUInt>().ok_or_else(unexpected)?.inner())
        }
        Kind::Double => {
            let d = *v
                .downcast_ref::<CelDouble>()
                .ok_or_else(unexpected)?
                .inner();
            match serde_json::Number::from_f64(d) {
                Some(n) => serde_json::Value::Number(n),
                None if d.is_nan() => serde_json::Value::String("NaN".into()),
                None if d > 0.0 => serde_json::Value::String("Infinity".into()),
                None => serde_json::Value::String("-Infinity".into()),
            }
        }
        Kind::String => serde_json::Value::String(
            v.downcast_ref::<CelString>()
                .ok_or_else(unexpected)?
                .inner()
                .to_string(),
        ),
        Kind::Bytes => serde_json::Value::String(base64_encode(
            v.downcast_ref::<CelBytes>().ok_or_else(unexpected)?.inner(),
        )),
        Kind::Duration => serde_json::Value::String(format_duration(
            v.downcast_ref::<CelDuration>()
                .ok_or_else(unexpected)?
                .inner(),
        )),
        Kind::Timestamp => serde_json::Value::String(format_timestamp(
            v.downcast_ref::<CelTimestamp>()
                .ok_or_else(unexpected)?
                .inner(),
        )),
        Kind::List => {
            let items = v.as_iterable().ok_or_else(unexpected)?;
            let mut out = Vec::new();
            let mut it = items.iter();
            while let Some(item) = it.next() {
                out.push(val_to_json(item)?);
            }
            serde_json::Value::Array(out)
        }
        Kind::Map => {
            let map = v.downcast_ref::<CelMap>().ok_or_else(unexpected)?;
            let mut out = serde_json::Map::new();
            for (k, v) in map.inner() {
                out.insert(key_to_string(k), val_to_json(v.as_ref())?);
            }
            serde_json::Value::Object(out)
        }
        Kind::Type => {
            let name = v
                .downcast_ref::<CelType>()
                .map_or_else(|| t.name().to_string(), |ty| ty.name().to_string());
            return Err(format!("the type value {name} has no JSON form"));
        }
        _ => match v.downcast_ref::<CelOptional>() {
            Some(opt) => match opt.option() {
                Some(inner) => val_to_json(inner)?,
                None => serde_json::Value::Null,
            },
            None => return Err(unexpected()),
        },
    })
}

/// The string form of a map key, as a JSON object key.
fn key_to_string(key: &CelMapKey<'_>) -> String {
    match key {
        CelMapKey::Bool(b) => b.inner().to_string(),
        CelMapKey::Int(i) => i.inner().to_string(),
        CelMapKey::UInt(u) => u.inner().to_string(),
        CelMapKey::String(s) => s.inner().to_string(),
    }
}

/// CEL's `string(duration)`: whole seconds, a trimmed fractional part when not zero, `s`.
pub(crate) fn format_duration(d: &chrono::Duration) -> String {
    let secs = d.num_seconds();
    let nanos = d.subsec_nanos();
    let sign = if secs < 0 || nanos < 0 { "-" } else { "" };
    let (secs, nanos) = (secs.unsigned_abs(), nanos.unsigned_abs());
    if nanos == 0 {
        format!("{sign}{secs}s")
    } else {
        let frac = format!("{nanos:09}");
        format!("{sign}{secs}.{}s", frac.trim_end_matches('0'))
    }
}

/// CEL's `string(timestamp)`: RFC 3339 in UTC, a trimmed fractional part when not zero.
pub(crate) fn format_timestamp(ts: &chrono::DateTime<chrono::FixedOffset>) -> String {
    let utc = ts.with_timezone(&chrono::Utc);
    let nanos = utc.timestamp_subsec_nanos() % 1_000_000_000;
    let base = utc.format("%Y-%m-%dT%H:%M:%S");
    if nanos == 0 {
        format!("{base}Z")
    } else {
        let frac = format!("{nanos:09}");
        format!("{base}.{}Z", frac.trim_end_matches('0'))
    }
}

/// Standard base64 with padding (RFC 4648 section 4).
pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A non-scalar value shared between clones: it answers every operation as the value it
/// wraps does, so the interpreter cannot tell them apart, but cloning it (to bind it, to
/// bind a comprehension variable to a list element, or to return it) copies an `Arc`.
#[derive(Debug, Clone)]
pub(crate) struct Shared(Arc<dyn Val + 'static>);

impl StaticVal for Shared {}

impl Val for Shared {
    fn get_type(&self) -> &Type {
        self.0.get_type()
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        // Only reached through the overload macros, which never name `Shared`.
        &DYN_TYPE
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        self.0.as_adder()
    }

    fn as_comparer(&self) -> Option<&dyn Comparer> {
        self.0.as_comparer()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.0.as_container()
    }

    fn as_divider<'b, 'v>(&'b self) -> Option<&'b (dyn Divider + 'v)>
    where
        Self: 'v,
    {
        self.0.as_divider()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        self.0.as_indexer()
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        // The interpreter steals from a built-in container it owns alone: hand it a copy
        // of this level (nested containers stay shared).
        self.0.clone_as_boxed().into_indexer()
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.0.as_iterable()
    }

    fn as_modder<'b, 'v>(&'b self) -> Option<&'b (dyn Modder + 'v)>
    where
        Self: 'v,
    {
        self.0.as_modder()
    }

    fn as_multiplier<'b, 'v>(&'b self) -> Option<&'b (dyn Multiplier + 'v)>
    where
        Self: 'v,
    {
        self.0.as_multiplier()
    }

    fn as_negator<'b, 'v>(&'b self) -> Option<&'b (dyn Negator + 'v)>
    where
        Self: 'v,
    {
        self.0.as_negator()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.0.as_sizer()
    }

    fn as_subtractor<'b, 'v>(&'b self) -> Option<&'b (dyn Subtractor + 'v)>
    where
        Self: 'v,
    {
        self.0.as_subtractor()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.0.as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.0.equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(self.clone())
    }

    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }

    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        self.0.as_builtin()
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        self.0.clone_as_boxed().into_builtin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_round_trip_keeps_kubernetes_conventions() {
        let json = json!({"a": 1, "b": [true, null, "x"], "c": 1.5, "d": {"e": 3.0}});
        let value = Value::from_json(&json);
        assert_eq!(value.to_json().unwrap(), json);
        assert_eq!(Value::from_json(&json!(3)).type_name(), "int");
        assert_eq!(Value::from_json(&json!(3.0)).type_name(), "double");
        assert_eq!(Value::from_json(&json!(u64::MAX)).type_name(), "uint");
        assert_eq!(Value::from_json(&json!({})).type_name(), "map");
        assert_eq!(Value::from_json(&json!([])).type_name(), "list");
        assert_eq!(Value::from_json(&json!("s")).type_name(), "string");
    }

    #[test]
    fn integral_doubles_stay_doubles() {
        let json = Value::double(3.0).to_json().unwrap();
        assert_eq!(json.to_string(), "3.0");
        assert!(json.is_f64());
        assert_eq!(Value::double(f64::NAN).to_json().unwrap(), json!("NaN"));
        assert_eq!(
            Value::double(f64::INFINITY).to_json().unwrap(),
            json!("Infinity")
        );
        assert_eq!(
            Value::double(f64::NEG_INFINITY).to_json().unwrap(),
            json!("-Infinity")
        );
    }

    #[test]
    fn map_keys_use_their_string_forms() {
        let value = Value::map_from_entries([
            (Value::int(-1), Value::string("int")),
            (Value::uint(2), Value::string("uint")),
            (Value::bool(true), Value::string("bool")),
            (Value::string("s"), Value::string("string")),
        ])
        .unwrap();
        assert_eq!(
            value.to_json().unwrap(),
            json!({"-1": "int", "2": "uint", "true": "bool", "s": "string"})
        );
        let err = Value::map_from_entries([(Value::double(1.0), Value::null())]).unwrap_err();
        assert_eq!(err.message, "a map key cannot be of type double");
        let err = Value::map_from_entries([
            (Value::int(1), Value::null()),
            (Value::int(1), Value::null()),
        ])
        .unwrap_err();
        assert_eq!(err.message, "repeated map key: 1");
    }

    #[test]
    fn bytes_are_base64() {
        assert_eq!(Value::bytes(b"".to_vec()).to_json().unwrap(), json!(""));
        assert_eq!(
            Value::bytes(b"f".to_vec()).to_json().unwrap(),
            json!("Zg==")
        );
        assert_eq!(
            Value::bytes(b"fo".to_vec()).to_json().unwrap(),
            json!("Zm8=")
        );
        assert_eq!(
            Value::bytes(b"foo".to_vec()).to_json().unwrap(),
            json!("Zm9v")
        );
        assert_eq!(
            Value::bytes(vec![0xff, 0xfe, 0x00, 0x10])
                .to_json()
                .unwrap(),
            json!("//4AEA==")
        );
    }

    #[test]
    fn durations_and_timestamps_use_cel_string_forms() {
        use chrono::TimeZone;
        assert_eq!(format_duration(&chrono::Duration::seconds(5400)), "5400s");
        assert_eq!(
            format_duration(&chrono::Duration::milliseconds(1500)),
            "1.5s"
        );
        assert_eq!(
            format_duration(&chrono::Duration::milliseconds(-1500)),
            "-1.5s"
        );
        assert_eq!(format_duration(&chrono::Duration::zero()), "0s");
        let ts = chrono::FixedOffset::east_opt(3600)
            .unwrap()
            .with_ymd_and_hms(2024, 1, 2, 4, 4, 5)
            .unwrap();
        assert_eq!(format_timestamp(&ts), "2024-01-02T03:04:05Z");
        let ts = ts + chrono::Duration::milliseconds(250);
        assert_eq!(format_timestamp(&ts), "2024-01-02T03:04:05.25Z");
    }

    #[test]
    fn clones_share_lists_and_maps() {
        let value = Value::from_json(&json!({"items": [1, 2, 3]}));
        let clone = value.clone();
        let (Some(a), Some(b)) = (
            value.0.downcast_ref::<Shared>(),
            clone.0.downcast_ref::<Shared>(),
        ) else {
            panic!("maps are shared");
        };
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(value, clone);
    }

    #[test]
    fn equality_is_cel_equality() {
        assert_eq!(Value::int(1), Value::double(1.0));
        assert_eq!(Value::int(1), Value::uint(1));
        assert_ne!(Value::double(f64::NAN), Value::double(f64::NAN));
        assert_eq!(
            Value::from_json(&json!({"a": [1, "x"]})),
            Value::map([(
                "a".to_string(),
                Value::list([Value::int(1), Value::string("x")])
            )])
        );
        assert_ne!(Value::string("1"), Value::int(1));
    }

    #[test]
    fn accessors() {
        assert_eq!(Value::bool(true).as_bool(), Some(true));
        assert_eq!(Value::int(1).as_bool(), None);
        assert_eq!(Value::null().to_json().unwrap(), json!(null));
        assert_eq!(Value::null().type_name(), "null_type");
        assert_eq!(
            Value::list([Value::uint(1), Value::double(2.0)]).inspect(),
            Inspect::List(vec![Inspect::Uint(1), Inspect::Double(2.0)])
        );
    }
}
