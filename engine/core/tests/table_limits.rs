//! Hostile decision tables: the lint that runs at every pack load must stay bounded in time
//! and memory, say when it stopped at its budget, and still refuse overlapping `unique` rows.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use switchyard_core::table::{Severity, Table, TableLint, TableSpec};
use switchyard_core::{PackFiles, load};

const PACK: &str = "apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata:
  name: limits
  version: 0.1.0
spec:
  clusters:
    - name: source
      access: [read, write, writeStatus]
  scope:
    - cluster: source
      kinds:
        - apiVersion: v1
          kind: ConfigMap
      namespaces: [\"*\"]
";

/// A table spec from its JSON text.
fn spec(json: &str) -> TableSpec {
    serde_json::from_str(json).unwrap()
}

/// 20,000 "any" rows under `unique`: every pair overlaps (200 million pairs).
fn any_rows_csv(rows: usize) -> String {
    let mut csv = String::from("x,out\n");
    for _ in 0..rows {
        csv.push_str("-,v\n");
    }
    csv
}

/// 100 rows x 80 inputs x 60 allowed values, `first`, no default: the coverage analysis
/// splits the input space into a huge number of regions.
fn wide_table() -> (String, String) {
    let values: Vec<String> = (0..60).map(|v| format!("\"v{v}\"")).collect();
    let inputs: Vec<String> = (0..80)
        .map(|c| {
            format!(
                "{{\"name\": \"i{c}\", \"type\": \"string\", \"allowedValues\": [{}]}}",
                values.join(", ")
            )
        })
        .collect();
    let spec = format!(
        "{{\"hitPolicy\": \"first\", \"inputs\": [{}], \"outputs\": [{{\"name\": \"out\", \"type\": \"string\"}}], \"rowsFrom\": \"t.csv\"}}",
        inputs.join(", ")
    );
    // A fixed pseudo-random pattern: half the cells are "any", the others 30 of the 60 values.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut csv: String = (0..80).map(|c| format!("i{c},")).collect();
    csv.push_str("out\n");
    for _ in 0..100 {
        for _ in 0..80 {
            if next() % 2 == 0 {
                csv.push_str("-,");
            } else {
                let start = next() % 60;
                let cell: Vec<String> = (0..30).map(|k| format!("v{}", (start + k) % 60)).collect();
                let _ = write!(csv, "{},", cell.join("|"));
            }
        }
        csv.push_str("o\n");
    }
    (spec, csv)
}

fn timed_lint(table: &Table, what: &str) -> Vec<TableLint> {
    let start = Instant::now();
    let lints = table.lint();
    eprintln!("{what}: lint in {:?}", start.elapsed());
    lints
}

fn budget_warnings(lints: &[TableLint]) -> Vec<&TableLint> {
    lints
        .iter()
        .filter(|l| l.code == "table::lint-budget")
        .collect()
}

#[test]
fn twenty_thousand_overlapping_any_rows_stop_at_the_budget() {
    let spec = spec(
        r#"{"hitPolicy": "unique", "inputs": [{"name": "x", "type": "string"}],
            "outputs": [{"name": "out", "type": "string"}], "rowsFrom": "t.csv"}"#,
    );
    let csv = any_rows_csv(20_000);
    let table = Table::compile("t", &spec, Some(&csv)).unwrap();
    let lints = timed_lint(&table, "20,000 any rows under unique");

    let errors: Vec<&str> = lints
        .iter()
        .filter(|l| l.severity == Severity::Error)
        .map(|l| l.message.as_str())
        .collect();
    // The first 20 pairs with a witness, then a count of the rest.
    assert_eq!(errors.len(), 21, "{errors:#?}");
    assert_eq!(errors[0], "rows 1 and 2 overlap: both match every input");
    assert_eq!(errors[1], "rows 1 and 3 overlap: both match every input");
    assert!(
        errors[20].starts_with("and at least ")
            && errors[20].ends_with(" more pairs of rows overlap"),
        "{}",
        errors[20]
    );
    let budget = budget_warnings(&lints);
    assert_eq!(budget.len(), 1, "{lints:#?}");
    assert_eq!(budget[0].severity, Severity::Warning);
    assert!(
        budget[0].message.starts_with(
            "the table is too large to check completely: analysis stopped at the budget; rows from row "
        ) && budget[0].message.ends_with(" on were not checked for overlaps"),
        "{}",
        budget[0].message
    );
}

#[test]
fn a_wide_table_stops_its_coverage_analysis_at_the_budget() {
    let (spec_text, csv) = wide_table();
    let table = Table::compile("t", &spec(&spec_text), Some(&csv)).unwrap();
    let lints = timed_lint(&table, "100 rows x 80 inputs x 60 values");
    assert!(
        lints.len() <= 2 * 20 + 4,
        "findings are capped: {}",
        lints.len()
    );
    let budget: Vec<&str> = budget_warnings(&lints)
        .iter()
        .map(|l| l.message.as_str())
        .collect();
    assert!(
        budget.contains(
            &"the table is too large to check completely: analysis stopped at the budget; input combinations no row matches were not listed"
        ),
        "{lints:#?}"
    );
}

#[test]
fn a_pack_with_overlapping_unique_rows_is_refused_quickly() {
    let table = "apiVersion: switchyard.dev/v1alpha1
kind: DecisionTable
metadata:
  name: t
spec:
  hitPolicy: unique
  inputs:
    - name: x
      type: string
  outputs:
    - name: out
      type: string
  rowsFrom: t.csv
";
    let files = PackFiles {
        root: "limits".into(),
        files: BTreeMap::from([
            ("pack.yaml".to_string(), PACK.to_string()),
            ("tables/t.yaml".to_string(), table.to_string()),
            ("tables/t.csv".to_string(), any_rows_csv(20_000)),
        ]),
        shared_partials: BTreeMap::new(),
    };
    let start = Instant::now();
    let result = load(&files);
    eprintln!("pack with 20,000 any rows: load in {:?}", start.elapsed());
    assert!(result.pack.is_none());
    let lines: Vec<String> = result.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("limits/tables/t.csv:3:1: ")
                && l.contains("error[table::lint]: rows 1 and 2 overlap: both match every input")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("analysis stopped at the budget; rows from row ")),
        "{lines:#?}"
    );
}
