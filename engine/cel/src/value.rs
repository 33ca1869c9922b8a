use std::collections::HashMap;
use std::sync::Arc;

use crate::EvalError;

/// A CEL value. Cheap to clone: lists, maps and strings are shared, so one Kubernetes object
/// converted once can be bound into every evaluation that reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Value(pub(crate) cel::Value);

impl Value {
    /// Converts JSON with Kubernetes conventions: integers become `int` (a `u64` beyond
    /// `i64::MAX` becomes `uint`), other numbers `double`.
    pub fn from_json(json: &serde_json::Value) -> Value {
        Value(json_to_cel(json))
    }

    /// Converts back to JSON: a map with non-string keys uses their string forms, bytes are
    /// base64, timestamps and durations their string forms.
    pub fn to_json(&self) -> Result<serde_json::Value, EvalError> {
        self.0
            .json()
            .map_err(|e| EvalError::new(format!("result cannot be represented as JSON: {e}")))
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.0 {
            cel::Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn null() -> Value {
        Value(cel::Value::Null)
    }

    /// A map with string keys.
    pub fn map<I: IntoIterator<Item = (String, Value)>>(entries: I) -> Value {
        let map: HashMap<cel::objects::Key, cel::Value> = entries
            .into_iter()
            .map(|(k, v)| (cel::objects::Key::String(Arc::new(k)), v.0))
            .collect();
        Value(cel::Value::Map(cel::objects::Map { map: Arc::new(map) }))
    }

    /// The CEL type name of this value, for messages.
    pub fn type_name(&self) -> String {
        self.0.type_of().to_string()
    }
}

fn json_to_cel(json: &serde_json::Value) -> cel::Value {
    match json {
        serde_json::Value::Null => cel::Value::Null,
        serde_json::Value::Bool(b) => cel::Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(items) => {
            cel::Value::List(Arc::new(items.iter().map(json_to_cel).collect()))
        }
        serde_json::Value::Object(map) => {
            let map: HashMap<cel::objects::Key, cel::Value> = map
                .iter()
                .map(|(k, v)| (cel::objects::Key::String(Arc::new(k.clone())), json_to_cel(v)))
                .collect();
            cel::Value::Map(cel::objects::Map { map: Arc::new(map) })
        }
    }
}
