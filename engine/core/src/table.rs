//! Decision tables: a rule pack's `kind: DecisionTable` files, compiled once and evaluated
//! from CEL (`decide('name', {'input': value})`) and templates.
//!
//! A table has typed input and output columns and rows (inline in the YAML, or in a CSV
//! file named by `rowsFrom`). Each row has a condition per input and a value per output;
//! the hit policy says how matching rows become the result (see [`HitPolicy`]).
//!
//! # Input cells
//!
//! | YAML                      | CSV           | matches                                        |
//! |---------------------------|---------------|------------------------------------------------|
//! | absent, `null`, `"-"`     | empty, `-`    | any value, including a missing input           |
//! | `Weighted`, `3`, `true`   | `Weighted`    | that value                                     |
//! | `[Spread, Weighted]`      | `Spread\|Weighted` | any of the values                         |
//! | `">= 2"` `"> 2"` `"< 2"` `"<= 2"` | same  | numeric comparison (int and number columns)    |
//! | `"1..5"`                  | `1..5`        | closed range, `1 <= x <= 5` (int and number)   |
//! | `"!= x"`                  | `!= x`        | present and not equal to `x` (any column type) |
//!
//! Every condition except "any" is false for a missing (or null) input. In YAML a string
//! cell of a string column is taken literally unless it is `"-"` or starts with `!=`; a
//! one-element list matches such strings literally. In CSV, cells are trimmed; bools are
//! `true`/`false` in any case.
//!
//! # Outputs
//!
//! Every result object has every output column; an optional output a row leaves out is
//! null. In CSV an empty output cell is absent.
//!
//! # Row numbers
//!
//! [`Decision::matched_rows`] and [`Table::row_location`] use 0-based row indices (for inline
//! rows, `i` in `spec.rows[i]`; for CSV rows, the data rows after the header in order).
//! Messages for people (errors, lints) say `row N` with N 1-based, so `row 1` is
//! `spec.rows[0]` or the first CSV line after the header.
//!
//! # Lints
//!
//! [`Table::lint`] runs static checks on an exact set algebra of the conditions (see
//! `algebra`): overlapping rows in `unique` tables, rows shadowed by earlier rows in
//! `first` tables, uncovered input combinations when every input has finite values, rows
//! that match no allowed value, and a default that is never used. They run at every pack
//! load, so each is bounded: 20 findings per kind are listed and the rest counted, and the
//! pairwise and region work has a budget; a check that reaches it stops with a
//! `table::lint-budget` warning.

mod algebra;
mod cell;
mod compile;
mod lint;
mod spec;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use cell::{Cond, Lit};
pub use spec::{ColumnType, HitPolicy, InputColumn, OutputColumn, RowSpec, TableSpec};

/// Where a table error or lint is: a path in the table YAML, a place in the CSV rows file,
/// or evaluation (for `decide` errors).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum TableLocation {
    /// A dotted, indexed path in the table YAML starting at `spec`, e.g.
    /// `spec.rows[2].when.strategy` or `spec.inputs[0].type`.
    Spec(String),
    /// A place in the `rowsFrom` CSV file.
    CsvLine {
        /// 1-based line number (the header is usually line 1).
        line: usize,
        /// 1-based field number within the line, when the problem is one cell.
        column: Option<usize>,
    },
    /// Evaluation (`decide`), not a place in a file.
    Evaluation,
}

impl TableLocation {
    fn spec(path: impl Into<String>) -> Self {
        TableLocation::Spec(path.into())
    }
}

impl fmt::Display for TableLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableLocation::Spec(path) => f.write_str(path),
            TableLocation::CsvLine { line, column: None } => write!(f, "CSV line {line}"),
            TableLocation::CsvLine {
                line,
                column: Some(column),
            } => write!(f, "CSV line {line}, field {column}"),
            TableLocation::Evaluation => f.write_str("evaluation"),
        }
    }
}

/// A table that does not compile, or an evaluation that fails. Displays as its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{message}")]
pub struct TableError {
    pub location: TableLocation,
    pub message: String,
}

impl TableError {
    fn new(location: TableLocation, message: impl Into<String>) -> Self {
        TableError {
            location,
            message: message.into(),
        }
    }
}

/// How serious a lint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A finding of [`Table::lint`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableLint {
    pub severity: Severity,
    /// The diagnostic code: `table::lint`, or `table::lint-budget` when a check stopped at
    /// its work budget.
    pub code: &'static str,
    pub location: TableLocation,
    pub message: String,
}

/// The result of [`Table::decide`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// `first`/`unique`: the outputs object of the matched row, the default when no row
    /// matches, or null when no row matches and there is no default. `collect`: a list of
    /// the outputs objects of every matching row in row order, `[default]` when none
    /// matches and there is a default, else `[]`.
    pub value: Value,
    /// 0-based indices of the rows that produced `value`, in row order.
    pub matched_rows: Vec<usize>,
    /// Whether `value` is (or, for `collect`, holds) the default.
    pub used_default: bool,
}

/// A compiled decision table. Cheap to share: `Send + Sync`, evaluation takes `&self`.
#[derive(Debug, Clone)]
pub struct Table {
    name: String,
    spec: TableSpec,
    inputs: Vec<InputCol>,
    rows: Vec<Row>,
    /// The default outputs object (every output present, null for absent optional ones).
    default: Option<Map<String, Value>>,
}

#[derive(Debug, Clone)]
struct InputCol {
    name: String,
    ty: ColumnType,
    /// The allowed values, in declaration order.
    allowed: Option<Vec<Lit>>,
}

#[derive(Debug, Clone)]
struct OutputCol {
    name: String,
    ty: ColumnType,
    optional: bool,
    /// False when an earlier column has the same name (reported), so cells cannot reach
    /// this output; it is then not reported missing from rows.
    reachable: bool,
}

#[derive(Debug, Clone)]
struct Row {
    /// One condition per input column, in column order.
    conds: Vec<Cond>,
    /// The outputs object (every output present, null for absent optional ones).
    outputs: Map<String, Value>,
    origin: RowOrigin,
}

#[derive(Debug, Clone, Copy)]
enum RowOrigin {
    /// `spec.rows[i]`.
    Inline(usize),
    /// A CSV row on this 1-based line.
    Csv(usize),
}

impl RowOrigin {
    fn location(self) -> TableLocation {
        match self {
            RowOrigin::Inline(i) => TableLocation::spec(format!("spec.rows[{i}]")),
            RowOrigin::Csv(line) => TableLocation::CsvLine { line, column: None },
        }
    }
}

impl Table {
    /// Every row's outputs object, in row order: what `tables.<name>` holds in CEL and
    /// templates (a table with no inputs is plain data).
    pub fn row_outputs(&self) -> Vec<Value> {
        self.rows
            .iter()
            .map(|r| Value::Object(r.outputs.clone()))
            .collect()
    }

    /// The table's name (`metadata.name`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The spec the table was compiled from.
    pub fn spec(&self) -> &TableSpec {
        &self.spec
    }

    /// The table's hit policy.
    pub fn hit_policy(&self) -> HitPolicy {
        self.spec.hit_policy
    }

    /// The number of rows (inline or from CSV).
    pub fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// Where row `row` (0-based) is defined: `spec.rows[row]`, or its CSV line.
    pub fn row_location(&self, row: usize) -> Option<TableLocation> {
        self.rows.get(row).map(|r| r.origin.location())
    }

    /// Evaluates with the given inputs (missing input = null, which matches only "any" cells).
    ///
    /// `first`/`unique`: the matched row's outputs as a JSON object (the default when none
    /// matches, null when no row and no default); `unique` with two or more matching rows is
    /// an error naming them. `collect`: a JSON array of every matching row's outputs in row
    /// order (`[default]` only when none match). Unknown input names, values of the wrong
    /// type and values outside `allowedValues` are errors. Error messages do not name the
    /// table; callers add it.
    pub fn decide(&self, inputs: &Map<String, Value>) -> Result<Decision, TableError> {
        let fail = |message: String| TableError::new(TableLocation::Evaluation, message);
        for key in inputs.keys() {
            if !self.inputs.iter().any(|c| &c.name == key) {
                return Err(fail(format!(
                    "unknown input `{key}` ({})",
                    names(
                        "the inputs are",
                        self.inputs.iter().map(|c| c.name.as_str())
                    )
                )));
            }
        }
        let mut values = Vec::with_capacity(self.inputs.len());
        for col in &self.inputs {
            let value = match inputs.get(&col.name) {
                None => None,
                Some(v) => cell::input_lit(&col.name, col.ty, v).map_err(fail)?,
            };
            if let (Some(v), Some(allowed)) = (&value, &col.allowed)
                && !allowed
                    .iter()
                    .any(|a| a.compare(v) == Some(std::cmp::Ordering::Equal))
            {
                return Err(fail(format!(
                    "input `{}` is {}, which is not one of its allowed values ({})",
                    col.name,
                    v.quoted(),
                    list_lits(allowed)
                )));
            }
            values.push(value);
        }
        let matches = |row: &Row| {
            row.conds
                .iter()
                .zip(&values)
                .all(|(c, v)| c.matches(v.as_ref()))
        };
        let default = || self.default.clone().map(Value::Object);
        match self.spec.hit_policy {
            HitPolicy::First => Ok(match self.rows.iter().position(matches) {
                Some(i) => self.single(i),
                None => self.fallback(default()),
            }),
            HitPolicy::Unique => {
                let matched: Vec<usize> = (0..self.rows.len())
                    .filter(|&i| matches(&self.rows[i]))
                    .collect();
                match matched.as_slice() {
                    [] => Ok(self.fallback(default())),
                    [i] => Ok(self.single(*i)),
                    many => Err(fail(format!(
                        "{} {} match, but hit policy `unique` allows only one matching row",
                        row_list(many),
                        if many.len() == 2 { "both" } else { "all" }
                    ))),
                }
            }
            HitPolicy::Collect => {
                let matched: Vec<usize> = (0..self.rows.len())
                    .filter(|&i| matches(&self.rows[i]))
                    .collect();
                if matched.is_empty() {
                    let value = default();
                    let used_default = value.is_some();
                    return Ok(Decision {
                        value: Value::Array(value.into_iter().collect()),
                        matched_rows: Vec::new(),
                        used_default,
                    });
                }
                Ok(Decision {
                    value: Value::Array(
                        matched
                            .iter()
                            .map(|&i| Value::Object(self.rows[i].outputs.clone()))
                            .collect(),
                    ),
                    matched_rows: matched,
                    used_default: false,
                })
            }
        }
    }

    fn single(&self, i: usize) -> Decision {
        Decision {
            value: Value::Object(self.rows[i].outputs.clone()),
            matched_rows: vec![i],
            used_default: false,
        }
    }

    fn fallback(&self, default: Option<Value>) -> Decision {
        let used_default = default.is_some();
        Decision {
            value: default.unwrap_or(Value::Null),
            matched_rows: Vec::new(),
            used_default,
        }
    }

    /// Where the rows are, for lints about the rows as a whole.
    fn rows_location(&self) -> TableLocation {
        if self.spec.rows_from.is_some() {
            TableLocation::spec("spec.rowsFrom")
        } else {
            TableLocation::spec("spec.rows")
        }
    }
}

/// "row 3", "rows 2 and 4", "rows 1, 2 and 5" for 0-based indices.
fn row_list(rows: &[usize]) -> String {
    let labels: Vec<String> = rows.iter().map(|r| (r + 1).to_string()).collect();
    match labels.as_slice() {
        [one] => format!("row {one}"),
        [init @ .., last] => format!("rows {} and {last}", init.join(", ")),
        [] => "no rows".to_string(),
    }
}

fn list_lits(values: &[Lit]) -> String {
    values
        .iter()
        .map(Lit::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn names<'a>(intro: &str, names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.is_empty() {
        "the table has none".to_string()
    } else {
        format!("{intro} {}", names.join(", "))
    }
}
