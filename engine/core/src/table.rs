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
mod lint;
mod spec;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
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
    /// Compiles a spec; `csv` is the text of the rowsFrom file when the spec names one.
    /// Returns every error found (not just the first).
    pub fn compile(
        name: &str,
        spec: &TableSpec,
        csv: Option<&str>,
    ) -> Result<Table, Vec<TableError>> {
        let mut c = Compiler {
            errors: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
        };
        c.columns(spec);
        let rows = c.rows(spec, csv);
        let default = c.default(spec);
        if !c.errors.is_empty() {
            return Err(c.errors);
        }
        Ok(Table {
            name: name.to_string(),
            spec: spec.clone(),
            inputs: c.inputs,
            rows,
            default,
        })
    }

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

    /// Static checks for `switchyard check`: overlapping rows (`unique`, errors), rows that
    /// can never match (`first` dead rows; any policy for rows matching no allowed value),
    /// input combinations no row matches (when every input has finite values and there is
    /// no default), and a default that can never be used (warnings). Bounded in time and
    /// memory (well under a second); see the module docs.
    pub fn lint(&self) -> Vec<TableLint> {
        lint::lint(self)
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

fn valid_column_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Maps CSV record positions to 1-based line numbers. The csv crate's own line count
/// skips blank lines, and its byte offset can point at the line break before a record, so
/// this starts from the offset, skips line breaks and counts the newlines before.
struct Lines<'a> {
    text: &'a str,
    /// A byte offset already counted, and its line.
    offset: usize,
    line: usize,
}

impl Lines<'_> {
    fn at(&mut self, pos: Option<&csv::Position>) -> Option<usize> {
        let byte = usize::try_from(pos?.byte()).ok()?;
        let rest = self.text.get(byte..)?;
        let start = byte + (rest.len() - rest.trim_start_matches(['\r', '\n']).len());
        if start < self.offset {
            self.offset = 0;
            self.line = 1;
        }
        let between = self.text.as_bytes().get(self.offset..start)?;
        self.line += between.iter().filter(|&&b| b == b'\n').count();
        self.offset = start;
        Some(self.line)
    }
}

/// Collects compile errors while building the compiled columns and rows.
struct Compiler {
    errors: Vec<TableError>,
    inputs: Vec<InputCol>,
    outputs: Vec<OutputCol>,
}

/// A column referenced by a row cell.
#[derive(Clone, Copy)]
enum ColRef {
    Input(usize),
    Output(usize),
}

impl Compiler {
    fn error(&mut self, location: TableLocation, message: impl Into<String>) {
        self.errors.push(TableError::new(location, message));
    }

    fn columns(&mut self, spec: &TableSpec) {
        let mut seen: BTreeMap<&str, String> = BTreeMap::new();
        let mut duplicates: Vec<String> = Vec::new();
        let declared = spec
            .inputs
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("spec.inputs[{i}]"), c.name.as_str()))
            .chain(
                spec.outputs
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("spec.outputs[{i}]"), c.name.as_str())),
            );
        for (path, name) in declared {
            if !valid_column_name(name) {
                self.error(
                    TableLocation::spec(format!("{path}.name")),
                    format!(
                        "invalid column name {}: use letters, digits, `_` and `-`, starting with a letter or `_`",
                        Value::String(name.to_string())
                    ),
                );
            }
            if let Some(first) = seen.get(name) {
                duplicates.push(path.clone());
                let message = format!("duplicate column name `{name}` (first declared at {first})");
                self.error(TableLocation::spec(format!("{path}.name")), message);
            } else {
                seen.insert(name, path);
            }
        }
        if spec.outputs.is_empty() {
            self.error(
                TableLocation::spec("spec.outputs"),
                "a table needs at least one output",
            );
        }
        for (i, col) in spec.inputs.iter().enumerate() {
            let allowed = col
                .allowed_values
                .as_ref()
                .and_then(|values| self.allowed(i, col, values));
            self.inputs.push(InputCol {
                name: col.name.clone(),
                ty: col.r#type,
                allowed,
            });
        }
        self.outputs = spec
            .outputs
            .iter()
            .enumerate()
            .map(|(i, c)| OutputCol {
                name: c.name.clone(),
                ty: c.r#type,
                optional: c.optional,
                reachable: !duplicates.contains(&format!("spec.outputs[{i}]")),
            })
            .collect();
    }

    /// Parses an input's allowed values; `None` (after reporting) when any is invalid.
    fn allowed(&mut self, i: usize, col: &InputColumn, values: &[Value]) -> Option<Vec<Lit>> {
        let path = format!("spec.inputs[{i}].allowedValues");
        if values.is_empty() {
            self.error(
                TableLocation::spec(path),
                format!(
                    "`allowedValues` of `{}` is empty; remove it to allow any value",
                    col.name
                ),
            );
            return None;
        }
        let mut lits: Vec<Lit> = Vec::new();
        let mut ok = true;
        for (j, v) in values.iter().enumerate() {
            let at = TableLocation::spec(format!("{path}[{j}]"));
            match cell::json_lit(&col.name, col.r#type, v) {
                Ok(Some(lit)) => {
                    if lits
                        .iter()
                        .any(|l| l.compare(&lit) == Some(std::cmp::Ordering::Equal))
                    {
                        self.error(
                            at,
                            format!(
                                "duplicate allowed value {} for `{}`",
                                lit.quoted(),
                                col.name
                            ),
                        );
                        ok = false;
                    } else {
                        lits.push(lit);
                    }
                }
                Ok(None) => {
                    self.error(
                        at,
                        format!(
                            "null cannot be an allowed value of `{}` (a missing input is always allowed)",
                            col.name
                        ),
                    );
                    ok = false;
                }
                Err(message) => {
                    self.error(at, message);
                    ok = false;
                }
            }
        }
        ok.then_some(lits)
    }

    fn column_by_name(&self, name: &str) -> Option<ColRef> {
        if let Some(i) = self.inputs.iter().position(|c| c.name == name) {
            return Some(ColRef::Input(i));
        }
        self.outputs
            .iter()
            .position(|c| c.name == name)
            .map(ColRef::Output)
    }

    fn input_names(&self) -> String {
        names(
            "the inputs are",
            self.inputs.iter().map(|c| c.name.as_str()),
        )
    }

    fn output_names(&self) -> String {
        names(
            "the outputs are",
            self.outputs.iter().map(|c| c.name.as_str()),
        )
    }

    fn rows(&mut self, spec: &TableSpec, csv: Option<&str>) -> Vec<Row> {
        match (&spec.rows_from, spec.rows.is_empty()) {
            (Some(_), false) => {
                self.error(
                    TableLocation::spec("spec.rowsFrom"),
                    "give either `rows` or `rowsFrom`, not both",
                );
                Vec::new()
            }
            (None, true) => {
                self.error(
                    TableLocation::spec("spec"),
                    "the table has no rows: give `rows` or `rowsFrom`",
                );
                Vec::new()
            }
            (None, false) => spec
                .rows
                .iter()
                .enumerate()
                .filter_map(|(i, row)| self.inline_row(i, row))
                .collect(),
            (Some(file), true) => match csv {
                Some(text) => self.csv_rows(text),
                None => {
                    self.error(
                        TableLocation::spec("spec.rowsFrom"),
                        format!(
                            "the rows file {} was not provided",
                            Value::String(file.clone())
                        ),
                    );
                    Vec::new()
                }
            },
        }
    }

    fn inline_row(&mut self, i: usize, row: &RowSpec) -> Option<Row> {
        let before = self.errors.len();
        let mut conds = vec![Cond::Any; self.inputs.len()];
        for (key, value) in &row.when {
            let at = TableLocation::spec(format!("spec.rows[{i}].when.{key}"));
            match self.column_by_name(key) {
                Some(ColRef::Input(c)) => {
                    if let Some(cond) =
                        self.cond(at, c, cell::yaml_cond(key, self.inputs[c].ty, value))
                    {
                        conds[c] = cond;
                    }
                }
                Some(ColRef::Output(_)) => {
                    self.error(at, format!("`{key}` is an output; set it under `then`"));
                }
                None => {
                    let message = format!("unknown input `{key}` ({})", self.input_names());
                    self.error(at, message);
                }
            }
        }
        let mut outputs: Vec<Option<Value>> = vec![None; self.outputs.len()];
        for (key, value) in &row.then {
            let at = TableLocation::spec(format!("spec.rows[{i}].then.{key}"));
            match self.column_by_name(key) {
                Some(ColRef::Output(o)) => outputs[o] = self.yaml_output(at, o, value),
                Some(ColRef::Input(_)) => {
                    self.error(at, format!("`{key}` is an input; test it under `when`"));
                }
                None => {
                    let message = format!("unknown output `{key}` ({})", self.output_names());
                    self.error(at, message);
                }
            }
        }
        let location = TableLocation::spec(format!("spec.rows[{i}].then"));
        let outputs = self.outputs_object(&format!("row {}", i + 1), location, outputs);
        (self.errors.len() == before).then_some(Row {
            conds,
            outputs,
            origin: RowOrigin::Inline(i),
        })
    }

    /// Records a cell parse result and checks its values against the allowed values.
    fn cond(&mut self, at: TableLocation, c: usize, parsed: Result<Cond, String>) -> Option<Cond> {
        let cond = match parsed {
            Ok(cond) => cond,
            Err(message) => {
                self.error(at, message);
                return None;
            }
        };
        let col = &self.inputs[c];
        if let Some(allowed) = &col.allowed {
            let bad: Vec<&Lit> = cond
                .named_values()
                .iter()
                .filter(|v| {
                    !allowed
                        .iter()
                        .any(|a| a.compare(v) == Some(std::cmp::Ordering::Equal))
                })
                .collect();
            if !bad.is_empty() {
                let what = bad
                    .iter()
                    .map(|v| v.quoted())
                    .collect::<Vec<_>>()
                    .join(", ");
                let message = format!(
                    "{what} {} not {} of `{}` ({})",
                    if bad.len() == 1 { "is" } else { "are" },
                    if bad.len() == 1 {
                        "an allowed value"
                    } else {
                        "allowed values"
                    },
                    col.name,
                    list_lits(allowed)
                );
                self.error(at, message);
                return None;
            }
        }
        Some(cond)
    }

    /// An output value from YAML; `None` for null (absent). An invalid value is reported
    /// and returned as a null placeholder: the row is discarded, as compilation fails.
    fn yaml_output(&mut self, at: TableLocation, o: usize, value: &Value) -> Option<Value> {
        let col = &self.outputs[o];
        if value.is_null() {
            return None;
        }
        match cell::check_output(&col.name, col.ty, value) {
            Ok(()) => Some(value.clone()),
            Err(message) => {
                self.error(at, message);
                // Reported; a placeholder keeps it from being reported missing too.
                Some(Value::Null)
            }
        }
    }

    /// Builds an outputs object, reporting required outputs that are absent. Outputs that
    /// failed to parse are reported already, so callers discard the object then.
    fn outputs_object(
        &mut self,
        what: &str,
        at: TableLocation,
        values: Vec<Option<Value>>,
    ) -> Map<String, Value> {
        let mut map = Map::new();
        let mut missing = Vec::new();
        for (col, value) in self.outputs.iter().zip(values) {
            if value.is_none() && !col.optional && col.reachable {
                missing.push(format!("`{}`", col.name));
            }
            map.insert(col.name.clone(), value.unwrap_or(Value::Null));
        }
        if !missing.is_empty() {
            let (noun, list) = if missing.len() == 1 {
                ("output", missing.join(""))
            } else {
                ("outputs", missing.join(", "))
            };
            self.error(
                at,
                format!("{what} is missing the required {noun} {list} (mark an output `optional: true` to allow leaving it out)"),
            );
        }
        map
    }

    fn default(&mut self, spec: &TableSpec) -> Option<Map<String, Value>> {
        let default = spec.default.as_ref()?;
        let before = self.errors.len();
        let mut outputs: Vec<Option<Value>> = vec![None; self.outputs.len()];
        for (key, value) in default {
            let at = TableLocation::spec(format!("spec.default.{key}"));
            match self.column_by_name(key) {
                Some(ColRef::Output(o)) => outputs[o] = self.yaml_output(at, o, value),
                Some(ColRef::Input(_)) => {
                    self.error(
                        at,
                        format!("`{key}` is an input; `default` sets outputs only"),
                    );
                }
                None => {
                    let message = format!(
                        "unknown output `{key}` in `default` ({})",
                        self.output_names()
                    );
                    self.error(at, message);
                }
            }
        }
        let map = self.outputs_object("the default", TableLocation::spec("spec.default"), outputs);
        (self.errors.len() == before).then_some(map)
    }

    fn csv_rows(&mut self, text: &str) -> Vec<Row> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut records = reader.records();
        let mut lines = Lines {
            text,
            offset: 0,
            line: 1,
        };
        let mut line_of =
            |pos: Option<&csv::Position>, fallback: usize| lines.at(pos).unwrap_or(fallback);
        let header = match records.next() {
            None => {
                self.error(
                    TableLocation::CsvLine {
                        line: 1,
                        column: None,
                    },
                    "the CSV file is empty: its first line must be a header naming the columns",
                );
                return Vec::new();
            }
            Some(Err(e)) => {
                let line = line_of(e.position(), 1);
                self.error(
                    TableLocation::CsvLine { line, column: None },
                    format!("malformed CSV: {e}"),
                );
                return Vec::new();
            }
            Some(Ok(record)) => record,
        };
        let header_line = line_of(header.position(), 1);
        let mut columns: Vec<Option<ColRef>> = Vec::with_capacity(header.len());
        let mut seen_inputs = vec![false; self.inputs.len()];
        let mut seen_outputs = vec![false; self.outputs.len()];
        for (k, name) in header.iter().enumerate() {
            let at = TableLocation::CsvLine {
                line: header_line,
                column: Some(k + 1),
            };
            let col = self.column_by_name(name);
            let seen = match col {
                Some(ColRef::Input(i)) => &mut seen_inputs[i],
                Some(ColRef::Output(o)) => &mut seen_outputs[o],
                None => {
                    let message = format!(
                        "unknown column {} in the CSV header ({}; {})",
                        Value::String(name.to_string()),
                        self.input_names(),
                        self.output_names()
                    );
                    self.error(at, message);
                    columns.push(None);
                    continue;
                }
            };
            if *seen {
                self.error(
                    at,
                    format!("column `{name}` appears twice in the CSV header"),
                );
                columns.push(None);
            } else {
                *seen = true;
                columns.push(col);
            }
        }
        let missing: Vec<String> = self
            .inputs
            .iter()
            .zip(&seen_inputs)
            .filter(|(_, seen)| !**seen)
            .map(|(c, _)| format!("input `{}`", c.name))
            .chain(
                self.outputs
                    .iter()
                    .zip(&seen_outputs)
                    .filter(|(_, seen)| !**seen)
                    .map(|(c, _)| format!("output `{}`", c.name)),
            )
            .collect();
        for m in missing {
            self.error(
                TableLocation::CsvLine {
                    line: header_line,
                    column: None,
                },
                format!("the CSV header is missing the {m} column"),
            );
        }

        let mut rows = Vec::new();
        let mut last_line = header_line;
        for (index, record) in records.enumerate() {
            let record = match record {
                Ok(record) => record,
                Err(e) => {
                    let line = line_of(e.position(), last_line + 1);
                    self.error(
                        TableLocation::CsvLine { line, column: None },
                        format!("malformed CSV: {e}"),
                    );
                    break;
                }
            };
            let line = line_of(record.position(), last_line + 1);
            last_line = line;
            if record.len() != header.len() {
                self.error(
                    TableLocation::CsvLine { line, column: None },
                    format!(
                        "row {} has {} fields, but the header has {}",
                        index + 1,
                        record.len(),
                        header.len()
                    ),
                );
                continue;
            }
            let before = self.errors.len();
            let mut conds = vec![Cond::Any; self.inputs.len()];
            // Outputs missing from the header are reported once, not as missing in every row.
            let mut outputs: Vec<Option<Value>> = seen_outputs
                .iter()
                .map(|&seen| if seen { None } else { Some(Value::Null) })
                .collect();
            for (k, (text, col)) in record.iter().zip(&columns).enumerate() {
                let at = TableLocation::CsvLine {
                    line,
                    column: Some(k + 1),
                };
                match col {
                    Some(ColRef::Input(c)) => {
                        let input = &self.inputs[*c];
                        let parsed = cell::csv_cond(&input.name, input.ty, text);
                        if let Some(cond) = self.cond(at, *c, parsed) {
                            conds[*c] = cond;
                        }
                    }
                    Some(ColRef::Output(o)) => {
                        let output = &self.outputs[*o];
                        match cell::csv_output(&output.name, output.ty, text) {
                            Ok(value) => outputs[*o] = value,
                            Err(message) => {
                                self.error(at, message);
                                outputs[*o] = Some(Value::Null);
                            }
                        }
                    }
                    None => {}
                }
            }
            let at = TableLocation::CsvLine { line, column: None };
            let outputs = self.outputs_object(&format!("row {}", index + 1), at, outputs);
            if self.errors.len() == before {
                rows.push(Row {
                    conds,
                    outputs,
                    origin: RowOrigin::Csv(line),
                });
            }
        }
        rows
    }
}
