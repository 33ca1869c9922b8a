//! Compiling a decision table: [`Table::compile`] checks the spec's columns, reads its rows
//! (inline or from the CSV file named by `rowsFrom`) into conditions and outputs objects, and
//! reports every error it finds, with its place in the YAML or the CSV.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::cell::{self, Cond, Lit};
use super::spec::{InputColumn, RowSpec, TableSpec};
use super::{
    InputCol, OutputCol, Row, RowOrigin, Table, TableError, TableLocation, list_lits, names,
};

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
