//! The serialised form of a decision table: the `spec` of a `kind: DecisionTable` file.
//!
//! The doc comments here become the help text editors show for table files, so they are
//! written for rule authors.

use std::collections::BTreeMap;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// A decision table: input columns, output columns and rows mapping conditions on the
/// inputs to output values. Call it from CEL with `decide('name', {'input': value})`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableSpec {
    /// How matching rows become the result. `first`: the outputs of the first matching row
    /// (later rows are fallbacks). `unique`: at most one row may match any input; two
    /// matching rows are an error. `collect`: a list with the outputs of every matching
    /// row, in row order.
    pub hit_policy: HitPolicy,
    /// The columns a row's `when` conditions test, in the order they are shown.
    pub inputs: Vec<InputColumn>,
    /// The columns a row's `then` sets. Every output is required in every row unless it is
    /// marked `optional: true`.
    pub outputs: Vec<OutputColumn>,
    /// The rows, tried in order. Give either `rows` or `rowsFrom`, not both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<RowSpec>,
    /// A CSV file, relative to this file, holding the rows: a header line naming every
    /// input and output column, then one row per line. Input cells: empty or `-` = any
    /// value, `a|b` = any of, `>= 2`, `> 2`, `< 2`, `<= 2`, `!= 2` and `1..5` for int and
    /// number columns, `!= x` for any column. Output cells: empty = absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_from: Option<String>,
    /// The outputs when no row matches. Without it, `decide` returns null (or an empty list
    /// for `collect`) when no row matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "default_schema")]
    pub default: Option<Map<String, Value>>,
}

/// How the matching rows of a decision table become its result.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum HitPolicy {
    /// The outputs of the first matching row; later rows act as fallbacks.
    First,
    /// The outputs of the only matching row; two matching rows are an error.
    Unique,
    /// A list of the outputs of every matching row, in row order.
    Collect,
}

impl HitPolicy {
    /// The name used in table files: `first`, `unique` or `collect`.
    pub fn as_str(self) -> &'static str {
        match self {
            HitPolicy::First => "first",
            HitPolicy::Unique => "unique",
            HitPolicy::Collect => "collect",
        }
    }
}

impl fmt::Display for HitPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The type of a table column's values.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// Text.
    String,
    /// A whole number (64-bit).
    Int,
    /// Any number, whole or fractional.
    Number,
    /// `true` or `false`.
    Bool,
}

impl ColumnType {
    /// The name used in table files: `string`, `int`, `number` or `bool`.
    pub fn as_str(self) -> &'static str {
        match self {
            ColumnType::String => "string",
            ColumnType::Int => "int",
            ColumnType::Number => "number",
            ColumnType::Bool => "bool",
        }
    }

    /// The type name with its article, for messages: "a string", "an int".
    pub(super) fn with_article(self) -> &'static str {
        match self {
            ColumnType::String => "a string",
            ColumnType::Int => "an int",
            ColumnType::Number => "a number",
            ColumnType::Bool => "a bool",
        }
    }

    pub(super) fn is_numeric(self) -> bool {
        matches!(self, ColumnType::Int | ColumnType::Number)
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An input column: a value passed to `decide` that rows test in their `when`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputColumn {
    /// The input's name: the key in `decide`'s input map, in rows' `when` and in the CSV
    /// header. Letters, digits, `_` and `-`, starting with a letter or `_`.
    pub name: String,
    /// The input's type: `string`, `int`, `number` or `bool`. A missing or null input
    /// only matches rows that accept any value for it.
    #[serde(rename = "type")]
    pub r#type: ColumnType,
    /// The only values this input may take. Rows may only name these values, `decide`
    /// rejects other inputs, and `switchyard check` reports the combinations no row
    /// matches when every input has a finite set of values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "allowed_values_schema")]
    pub allowed_values: Option<Vec<Value>>,
}

/// An output column: a value a row sets in its `then`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputColumn {
    /// The output's name: the key in the result of `decide`, in rows' `then` and in the
    /// CSV header. Letters, digits, `_` and `-`, starting with a letter or `_`.
    pub name: String,
    /// The output's type: `string`, `int`, `number` or `bool`.
    #[serde(rename = "type")]
    pub r#type: ColumnType,
    /// Whether rows may leave this output out (or set it to null). An absent optional
    /// output is null in the result.
    #[serde(default, skip_serializing_if = "is_false")]
    pub optional: bool,
}

/// One row of a decision table: conditions on the inputs and the outputs they select.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RowSpec {
    /// A condition per input; an input left out (or `null` or `"-"`) matches any value.
    /// A value of the input's type matches that value; a list matches any of its values;
    /// for int and number inputs `">= 2"`, `"> 2"`, `"< 2"`, `"<= 2"`, `"!= 2"` and the
    /// closed range `"1..5"`; for any input `"!= x"` matches every value but `x` (not a
    /// missing input). To match a string that is literally `-` or starts with `!=`, use a
    /// one-element list.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "when_schema")]
    pub when: BTreeMap<String, Value>,
    /// The output values of this row, one per output column (optional outputs may be left
    /// out).
    #[schemars(schema_with = "then_schema")]
    pub then: BTreeMap<String, Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn scalar() -> Value {
    json!({ "type": ["string", "number", "boolean"] })
}

fn schema_from(value: Value) -> Schema {
    match value {
        Value::Object(map) => Schema::from(map),
        _ => Schema::from(true),
    }
}

fn allowed_values_schema(_: &mut SchemaGenerator) -> Schema {
    schema_from(json!({ "type": "array", "items": scalar(), "minItems": 1 }))
}

fn when_schema(_: &mut SchemaGenerator) -> Schema {
    schema_from(json!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [
                { "type": ["string", "number", "boolean", "null"] },
                { "type": "array", "items": scalar(), "minItems": 1 }
            ]
        }
    }))
}

fn then_schema(_: &mut SchemaGenerator) -> Schema {
    schema_from(json!({
        "type": "object",
        "additionalProperties": { "type": ["string", "number", "boolean", "null"] }
    }))
}

fn default_schema(_: &mut SchemaGenerator) -> Schema {
    schema_from(json!({
        "type": ["object", "null"],
        "additionalProperties": { "type": ["string", "number", "boolean", "null"] }
    }))
}
