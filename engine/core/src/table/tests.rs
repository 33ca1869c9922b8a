//! Unit tests for decision tables. Messages and locations are asserted exactly: the loader
//! and `switchyard check` show them to users as they are.

use serde_json::{Map, Value, json};

use super::cell::Lit;
use super::*;

fn spec(v: Value) -> TableSpec {
    serde_json::from_value(v).expect("valid spec JSON")
}

fn compile(v: Value) -> Table {
    Table::compile("t", &spec(v), None).expect("table compiles")
}

fn compile_csv(v: Value, csv: &str) -> Table {
    Table::compile("t", &spec(v), Some(csv)).expect("table compiles")
}

fn errors(v: Value, csv: Option<&str>) -> Vec<(TableLocation, String)> {
    Table::compile("t", &spec(v), csv)
        .expect_err("compile fails")
        .into_iter()
        .map(|e| (e.location, e.message))
        .collect()
}

fn at(path: &str) -> TableLocation {
    TableLocation::Spec(path.to_string())
}

fn line(line: usize, column: Option<usize>) -> TableLocation {
    TableLocation::CsvLine { line, column }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn decide(t: &Table, inputs: Value) -> Decision {
    t.decide(&obj(inputs)).expect("decide succeeds")
}

fn decide_err(t: &Table, inputs: Value) -> TableError {
    t.decide(&obj(inputs)).expect_err("decide fails")
}

fn lints(t: &Table) -> Vec<(Severity, TableLocation, String)> {
    t.lint()
        .into_iter()
        .map(|l| (l.severity, l.location, l.message))
        .collect()
}

/// The example from the table documentation.
fn strategies() -> Value {
    json!({
        "hitPolicy": "first",
        "inputs": [
            {"name": "strategy", "type": "string", "allowedValues": ["Weighted", "Spread", "FixedReplicas"]},
            {"name": "replicas", "type": "int"}
        ],
        "outputs": [
            {"name": "replicaSchedulingType", "type": "string"},
            {"name": "replicaDivisionPreference", "type": "string", "optional": true}
        ],
        "rows": [
            {"when": {"strategy": "Weighted"},
             "then": {"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}},
            {"when": {"strategy": ["Spread", "Weighted"], "replicas": ">= 2"},
             "then": {"replicaSchedulingType": "Divided"}}
        ],
        "default": {"replicaSchedulingType": "Duplicated"}
    })
}

fn strategies_csv_spec() -> Value {
    with(
        without(strategies(), "rows"),
        "rowsFrom",
        json!("strategies.csv"),
    )
}

const STRATEGIES_CSV: &str = "\
strategy,replicas,replicaSchedulingType,replicaDivisionPreference
Weighted,,Divided,Weighted
Spread|Weighted,>= 2,Divided,
";

fn with_rows(mut base: Value, rows: Value) -> Value {
    base["rows"] = rows;
    base
}

fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

fn without(mut base: Value, key: &str) -> Value {
    if let Some(m) = base.as_object_mut() {
        m.remove(key);
    }
    base
}

// ---------------------------------------------------------------------------------------
// Hit policies and evaluation

#[test]
fn first_returns_the_first_matching_row() {
    let t = compile(strategies());
    assert_eq!(t.name(), "t");
    assert_eq!(t.hit_policy(), HitPolicy::First);
    assert_eq!(t.row_count(), 2);
    assert_eq!(
        decide(&t, json!({"strategy": "Weighted", "replicas": 3})),
        Decision {
            value: json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": "Weighted"}),
            matched_rows: vec![0],
            used_default: false,
        }
    );
    assert_eq!(
        decide(&t, json!({"strategy": "Spread", "replicas": 2})),
        Decision {
            value: json!({"replicaSchedulingType": "Divided", "replicaDivisionPreference": null}),
            matched_rows: vec![1],
            used_default: false,
        }
    );
}

#[test]
fn first_uses_the_default_when_no_row_matches() {
    let t = compile(strategies());
    let default = Decision {
        value: json!({"replicaSchedulingType": "Duplicated", "replicaDivisionPreference": null}),
        matched_rows: vec![],
        used_default: true,
    };
    assert_eq!(
        decide(&t, json!({"strategy": "Spread", "replicas": 1})),
        default
    );
    // A missing or null input only matches "any" cells.
    assert_eq!(decide(&t, json!({"replicas": 5})), default);
    assert_eq!(
        decide(&t, json!({"strategy": null, "replicas": 5})),
        default
    );
    assert_eq!(decide(&t, json!({"strategy": "Spread"})), default);
}

#[test]
fn first_without_default_returns_null() {
    let t = compile(without(strategies(), "default"));
    assert_eq!(
        decide(&t, json!({"strategy": "FixedReplicas"})),
        Decision {
            value: Value::Null,
            matched_rows: vec![],
            used_default: false,
        }
    );
}

fn tiers(policy: &str) -> Value {
    json!({
        "hitPolicy": policy,
        "inputs": [{"name": "tier", "type": "string"}, {"name": "size", "type": "int"}],
        "outputs": [{"name": "plan", "type": "string"}],
        "rows": [
            {"when": {"tier": "gold", "size": "< 10"}, "then": {"plan": "A"}},
            {"when": {"tier": "gold", "size": ">= 10"}, "then": {"plan": "B"}},
            {"when": {"tier": "!= gold"}, "then": {"plan": "C"}}
        ]
    })
}

#[test]
fn unique_returns_the_only_matching_row() {
    let t = compile(tiers("unique"));
    assert_eq!(
        decide(&t, json!({"tier": "gold", "size": 10})),
        Decision {
            value: json!({"plan": "B"}),
            matched_rows: vec![1],
            used_default: false,
        }
    );
    assert_eq!(
        decide(&t, json!({"tier": "silver", "size": 3})).matched_rows,
        vec![2]
    );
    // `!= gold` does not match a missing tier.
    assert_eq!(
        decide(&t, json!({"size": 3})),
        Decision {
            value: Value::Null,
            matched_rows: vec![],
            used_default: false,
        }
    );
    assert_eq!(lints(&t), vec![]);
}

#[test]
fn unique_with_two_or_more_matching_rows_is_an_evaluation_error() {
    let mut v = tiers("unique");
    if let Some(rows) = v["rows"].as_array_mut() {
        rows.push(json!({"when": {"size": "5..20"}, "then": {"plan": "D"}}));
        rows.push(json!({"when": {"tier": "silver"}, "then": {"plan": "E"}}));
    }
    let t = compile(v);
    let e = decide_err(&t, json!({"tier": "gold", "size": 10}));
    assert_eq!(e.location, TableLocation::Evaluation);
    assert_eq!(
        e.to_string(),
        "rows 2 and 4 both match, but hit policy `unique` allows only one matching row"
    );
    let e = decide_err(&t, json!({"tier": "silver", "size": 7}));
    assert_eq!(
        e.message,
        "rows 3, 4 and 5 all match, but hit policy `unique` allows only one matching row"
    );
    // Each overlapping pair is a lint error at the later row, with a shared input.
    assert_eq!(
        lints(&t),
        vec![
            (
                Severity::Error,
                at("spec.rows[3]"),
                "rows 1 and 4 overlap: both match tier=gold, size=5".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[3]"),
                "rows 2 and 4 overlap: both match tier=gold, size=10".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[3]"),
                "rows 3 and 4 overlap: both match tier!=gold, size=5".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[4]"),
                "rows 3 and 5 overlap: both match tier=silver".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[4]"),
                "rows 4 and 5 overlap: both match tier=silver, size=5".to_string()
            ),
        ]
    );
}

fn alerts(default: bool) -> Value {
    let mut v = json!({
        "hitPolicy": "collect",
        "inputs": [{"name": "env", "type": "string"}, {"name": "region", "type": "string"}],
        "outputs": [{"name": "alert", "type": "string"}],
        "rows": [
            {"when": {"env": "prod"}, "then": {"alert": "pager"}},
            {"when": {"region": "eu"}, "then": {"alert": "gdpr"}},
            {"when": {"env": "!= prod"}, "then": {"alert": "email"}}
        ]
    });
    if default {
        v["default"] = json!({"alert": "none"});
    }
    v
}

#[test]
fn collect_returns_every_matching_row_in_row_order() {
    let t = compile(alerts(true));
    assert_eq!(
        decide(&t, json!({"env": "prod", "region": "eu"})),
        Decision {
            value: json!([{"alert": "pager"}, {"alert": "gdpr"}]),
            matched_rows: vec![0, 1],
            used_default: false,
        }
    );
    assert_eq!(
        decide(&t, json!({"env": "dev", "region": "eu"})),
        Decision {
            value: json!([{"alert": "gdpr"}, {"alert": "email"}]),
            matched_rows: vec![1, 2],
            used_default: false,
        }
    );
    // Overlapping rows are the point of `collect`: no lints.
    assert_eq!(lints(&t), vec![]);
}

#[test]
fn collect_uses_the_default_only_when_no_row_matches() {
    let t = compile(alerts(true));
    assert_eq!(
        decide(&t, json!({"region": "us"})),
        Decision {
            value: json!([{"alert": "none"}]),
            matched_rows: vec![],
            used_default: true,
        }
    );
    let t = compile(alerts(false));
    assert_eq!(
        decide(&t, json!({"region": "us"})),
        Decision {
            value: json!([]),
            matched_rows: vec![],
            used_default: false,
        }
    );
}

#[test]
fn decide_rejects_unknown_inputs_wrong_types_and_disallowed_values() {
    let t = compile(strategies());
    let e = decide_err(&t, json!({"strategy": "Weighted", "replica": 2}));
    assert_eq!(e.location, TableLocation::Evaluation);
    assert_eq!(
        e.message,
        "unknown input `replica` (the inputs are strategy, replicas)"
    );
    assert_eq!(
        decide_err(&t, json!({"replicas": "2"})).message,
        "expected an int for `replicas`, got the string \"2\""
    );
    assert_eq!(
        decide_err(&t, json!({"replicas": 2.5})).message,
        "expected an int for `replicas`, got the number 2.5"
    );
    assert_eq!(
        decide_err(&t, json!({"strategy": "Even"})).message,
        "input `strategy` is \"Even\", which is not one of its allowed values (Weighted, Spread, FixedReplicas)"
    );
    // Whole floats are accepted for int inputs.
    assert_eq!(
        decide(&t, json!({"strategy": "Spread", "replicas": 2.0})).matched_rows,
        vec![1]
    );
}

#[test]
fn table_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<TableError>();
}

// ---------------------------------------------------------------------------------------
// Cell syntax

/// A one-input table with one row per cell, compiled with `collect`; returns which rows
/// match each input.
fn cell_matches(ty: &str, cells: Vec<Value>, inputs: Vec<Value>) -> Vec<Vec<usize>> {
    let rows: Vec<Value> = cells
        .into_iter()
        .map(|c| json!({"when": {"x": c}, "then": {"o": 1}}))
        .collect();
    let t = compile(json!({
        "hitPolicy": "collect",
        "inputs": [{"name": "x", "type": ty}],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": rows
    }));
    inputs
        .into_iter()
        .map(|x| decide(&t, json!({"x": x})).matched_rows)
        .collect()
}

#[test]
fn int_cells() {
    let cells = vec![
        json!(null),
        json!("-"),
        json!(2),
        json!([1, 3]),
        json!(">= 2"),
        json!(">2"),
        json!(" < 2 "),
        json!("<= 2"),
        json!("!= 2"),
        json!("1..3"),
        json!("-3..-1"),
        json!("2"),
        json!(["4", 5]),
    ];
    let got = cell_matches(
        "int",
        cells,
        vec![
            json!(null),
            json!(-2),
            json!(1),
            json!(2),
            json!(3),
            json!(4),
        ],
    );
    assert_eq!(
        got,
        vec![
            vec![0, 1],
            vec![0, 1, 6, 7, 8, 10],
            vec![0, 1, 3, 6, 7, 8, 9],
            vec![0, 1, 2, 4, 7, 9, 11],
            vec![0, 1, 3, 4, 5, 8, 9],
            vec![0, 1, 4, 5, 8, 12],
        ]
    );
}

#[test]
fn number_cells() {
    let cells = vec![
        json!(2.5),
        json!("> 2"),
        json!(">= 2"),
        json!("< 0.5"),
        json!("!= 2.5"),
        json!("0.5..2.5"),
        json!([1, 2.5]),
    ];
    let got = cell_matches(
        "number",
        cells,
        vec![
            json!(2),
            json!(2.000_000_000_000_000_4),
            json!(2.5),
            json!(0.5),
            json!(-0.0),
            json!(1),
        ],
    );
    assert_eq!(
        got,
        vec![
            vec![2, 4, 5],
            vec![1, 2, 4, 5],
            vec![0, 1, 2, 5, 6],
            vec![4, 5],
            vec![3, 4],
            vec![4, 5, 6],
        ]
    );
}

#[test]
fn string_cells() {
    let cells = vec![
        json!("a"),
        json!(["a", "b"]),
        json!("!= a"),
        json!("!=a"),
        json!(["-"]),
        json!(["!= a"]),
        json!("a|b"),
        json!(" a"),
    ];
    let got = cell_matches(
        "string",
        cells,
        vec![
            json!("a"),
            json!("b"),
            json!("-"),
            json!("!= a"),
            json!("a|b"),
            json!(" a"),
            json!(null),
        ],
    );
    assert_eq!(
        got,
        vec![
            vec![0, 1],
            vec![1, 2, 3],
            vec![2, 3, 4],
            vec![2, 3, 5],
            vec![2, 3, 6],
            vec![2, 3, 7],
            vec![],
        ]
    );
}

#[test]
fn bool_cells() {
    let cells = vec![
        json!(true),
        json!("false"),
        json!("!= true"),
        json!([true, false]),
        json!("-"),
    ];
    let got = cell_matches("bool", cells, vec![json!(true), json!(false), json!(null)]);
    assert_eq!(got, vec![vec![0, 3, 4], vec![1, 2, 3, 4], vec![4]]);
}

#[test]
fn csv_cells() {
    let v = json!({
        "hitPolicy": "collect",
        "rowsFrom": "rows.csv",
        "inputs": [{"name": "n", "type": "int"}, {"name": "s", "type": "string"}, {"name": "b", "type": "bool"}],
        "outputs": [{"name": "o", "type": "number"}, {"name": "p", "type": "string", "optional": true}]
    });
    let csv = "n,s,b,o,p\n\
               ,,,1,\n\
               -, a | b ,TRUE,2.5,x\n\
               1..3,!= a,false,-1,\n\
               \"> 2\",\"c,d\",,3, y \n";
    let t = compile_csv(v, csv);
    assert_eq!(
        decide(&t, json!({"n": 2, "s": "b", "b": true})),
        Decision {
            value: json!([{"o": 1, "p": null}, {"o": 2.5, "p": "x"}]),
            matched_rows: vec![0, 1],
            used_default: false,
        }
    );
    assert_eq!(
        decide(&t, json!({"n": 3, "s": "c,d", "b": false})).matched_rows,
        vec![0, 2, 3]
    );
    assert_eq!(
        decide(&t, json!({"n": 3, "s": "c,d", "b": false})).value[1],
        json!({"o": -1, "p": null})
    );
    assert_eq!(
        decide(&t, json!({"n": 4, "s": "c,d"})).value[1],
        json!({"o": 3, "p": "y"})
    );
    assert_eq!(t.row_location(3), Some(line(5, None)));
    assert_eq!(t.row_location(4), None);
}

#[test]
fn csv_rows_are_equivalent_to_inline_rows() {
    let inline = compile(strategies());
    let csv = compile_csv(strategies_csv_spec(), STRATEGIES_CSV);
    for (a, b) in inline.rows.iter().zip(&csv.rows) {
        assert_eq!(a.conds, b.conds);
        assert_eq!(a.outputs, b.outputs);
    }
    assert_eq!(inline.rows.len(), csv.rows.len());
    assert_eq!(inline.default, csv.default);
    for strategy in [
        json!(null),
        json!("Weighted"),
        json!("Spread"),
        json!("FixedReplicas"),
    ] {
        for replicas in [json!(null), json!(0), json!(1), json!(2), json!(3)] {
            let inputs = json!({"strategy": strategy, "replicas": replicas});
            assert_eq!(decide(&inline, inputs.clone()), decide(&csv, inputs));
        }
    }
    assert_eq!(csv.spec().rows_from.as_deref(), Some("strategies.csv"));
    assert_eq!(csv.row_location(1), Some(line(3, None)));
    assert_eq!(inline.row_location(1), Some(at("spec.rows[1]")));
}

#[test]
fn csv_line_numbers_follow_quoted_newlines_and_blank_lines() {
    let csv = "strategy,replicas,replicaSchedulingType,replicaDivisionPreference\n\
               Weighted,,\"Divi\nded\",\n\
               \n\
               Spread,x,Divided,\n";
    assert_eq!(
        errors(strategies_csv_spec(), Some(csv)),
        vec![(
            line(5, Some(2)),
            "expected an int for `replicas`, got \"x\"".to_string()
        )]
    );
}

// ---------------------------------------------------------------------------------------
// Compile errors

fn base() -> Value {
    json!({
        "hitPolicy": "first",
        "inputs": [
            {"name": "strategy", "type": "string", "allowedValues": ["Weighted", "Spread"]},
            {"name": "replicas", "type": "int"}
        ],
        "outputs": [
            {"name": "mode", "type": "string"},
            {"name": "weight", "type": "int", "optional": true}
        ],
        "rows": [{"then": {"mode": "x"}}]
    })
}

/// The errors of `base()` with one row `when`.
fn when_errors(when: Value) -> Vec<(TableLocation, String)> {
    errors(
        with_rows(base(), json!([{"when": when, "then": {"mode": "x"}}])),
        None,
    )
}

fn one(path: &str, message: &str) -> Vec<(TableLocation, String)> {
    vec![(at(path), message.to_string())]
}

#[test]
fn error_unknown_columns_in_rows() {
    assert_eq!(
        when_errors(json!({"strat": "Weighted"})),
        one(
            "spec.rows[0].when.strat",
            "unknown input `strat` (the inputs are strategy, replicas)"
        )
    );
    assert_eq!(
        when_errors(json!({"mode": "x"})),
        one(
            "spec.rows[0].when.mode",
            "`mode` is an output; set it under `then`"
        )
    );
    assert_eq!(
        errors(
            with_rows(base(), json!([{"then": {"mode": "x", "colour": "red"}}])),
            None
        ),
        one(
            "spec.rows[0].then.colour",
            "unknown output `colour` (the outputs are mode, weight)"
        )
    );
    assert_eq!(
        errors(
            with_rows(base(), json!([{"then": {"mode": "x", "replicas": 2}}])),
            None
        ),
        one(
            "spec.rows[0].then.replicas",
            "`replicas` is an input; test it under `when`"
        )
    );
}

#[test]
fn error_cells_that_do_not_fit_the_column_type() {
    let cases = [
        (
            json!({"replicas": "abc"}),
            "spec.rows[0].when.replicas",
            "expected an int for `replicas`, got \"abc\"",
        ),
        (
            json!({"replicas": true}),
            "spec.rows[0].when.replicas",
            "expected an int for `replicas`, got the bool true",
        ),
        (
            json!({"replicas": 2.5}),
            "spec.rows[0].when.replicas",
            "expected an int for `replicas`, got the number 2.5",
        ),
        (
            json!({"replicas": {"a": 1}}),
            "spec.rows[0].when.replicas",
            "expected an int for `replicas`, got an object",
        ),
        (
            json!({"replicas": [1, null]}),
            "spec.rows[0].when.replicas",
            "expected an int for `replicas`, got null in the list",
        ),
        (
            json!({"replicas": [1, [2]]}),
            "spec.rows[0].when.replicas",
            "expected an int for `replicas`, got a list",
        ),
        (
            json!({"replicas": []}),
            "spec.rows[0].when.replicas",
            "an empty list for `replicas` matches nothing; leave `replicas` out or use \"-\" to match any value",
        ),
        (
            json!({"strategy": 5}),
            "spec.rows[0].when.strategy",
            "expected a string for `strategy`, got the number 5",
        ),
    ];
    for (when, path, message) in cases {
        assert_eq!(when_errors(when), one(path, message));
    }
}

#[test]
fn error_malformed_comparisons_and_ranges() {
    let cases = [
        (
            ">= x",
            "malformed comparison \">= x\" for `replicas`: \"x\" is not an int",
        ),
        (
            ">=",
            "malformed comparison \">=\" for `replicas`: \"\" is not an int",
        ),
        (
            "< 2.5",
            "malformed comparison \"< 2.5\" for `replicas`: \"2.5\" is not an int",
        ),
        (
            "!=",
            "malformed comparison \"!=\" for `replicas`: expected a value after \"!=\"",
        ),
        (
            "!= two",
            "malformed comparison \"!= two\" for `replicas`: \"two\" is not an int",
        ),
        (
            "1..x",
            "malformed range \"1..x\" for `replicas`: \"x\" is not an int",
        ),
        (
            "..5",
            "malformed range \"..5\" for `replicas`: ranges need both bounds (use \">=\" or \"<=\" for one)",
        ),
        (
            "5..1",
            "empty range \"5..1\" for `replicas`: the lower bound 5 is greater than the upper bound 1",
        ),
        ("=> 2", "expected an int for `replicas`, got \"=> 2\""),
    ];
    for (cell, message) in cases {
        assert_eq!(
            when_errors(json!({"replicas": cell})),
            one("spec.rows[0].when.replicas", message),
            "cell {cell:?}"
        );
    }
}

#[test]
fn error_values_not_in_allowed_values() {
    assert_eq!(
        when_errors(json!({"strategy": "Fixed"})),
        one(
            "spec.rows[0].when.strategy",
            "\"Fixed\" is not an allowed value of `strategy` (Weighted, Spread)"
        )
    );
    assert_eq!(
        when_errors(json!({"strategy": ["Weighted", "Foo", "Bar"]})),
        one(
            "spec.rows[0].when.strategy",
            "\"Foo\", \"Bar\" are not allowed values of `strategy` (Weighted, Spread)"
        )
    );
    assert_eq!(
        when_errors(json!({"strategy": "!= Foo"})),
        one(
            "spec.rows[0].when.strategy",
            "\"Foo\" is not an allowed value of `strategy` (Weighted, Spread)"
        )
    );
}

#[test]
fn error_then_missing_or_invalid_outputs() {
    let missing = "row 1 is missing the required output `mode` (mark an output `optional: true` to allow leaving it out)";
    assert_eq!(
        errors(with_rows(base(), json!([{"then": {"weight": 1}}])), None),
        one("spec.rows[0].then", missing)
    );
    assert_eq!(
        errors(with_rows(base(), json!([{"then": {"mode": null}}])), None),
        one("spec.rows[0].then", missing)
    );
    assert_eq!(
        errors(with_rows(base(), json!([{"then": {"mode": 3}}])), None),
        one(
            "spec.rows[0].then.mode",
            "expected a string for `mode`, got the number 3"
        )
    );
    assert_eq!(
        errors(
            with_rows(base(), json!([{"then": {"mode": "x", "weight": 1.5}}])),
            None
        ),
        one(
            "spec.rows[0].then.weight",
            "expected an int for `weight`, got the number 1.5"
        )
    );
    let two_outputs = with(
        base(),
        "outputs",
        json!([{"name": "mode", "type": "string"}, {"name": "weight", "type": "int"}]),
    );
    assert_eq!(
        errors(
            with_rows(two_outputs, json!([{"when": {}, "then": {}}])),
            None
        ),
        one(
            "spec.rows[0].then",
            "row 1 is missing the required outputs `mode`, `weight` (mark an output `optional: true` to allow leaving it out)"
        )
    );
}

#[test]
fn error_duplicate_and_invalid_column_names() {
    let v = with(
        base(),
        "inputs",
        json!([
            {"name": "strategy", "type": "string"},
            {"name": "strategy", "type": "int"},
            {"name": "my col", "type": "int"}
        ]),
    );
    let v = with(
        v,
        "outputs",
        json!([{"name": "strategy", "type": "string"}, {"name": "mode", "type": "string"}]),
    );
    assert_eq!(
        errors(v, None),
        vec![
            (
                at("spec.inputs[1].name"),
                "duplicate column name `strategy` (first declared at spec.inputs[0])".to_string()
            ),
            (
                at("spec.inputs[2].name"),
                "invalid column name \"my col\": use letters, digits, `_` and `-`, starting with a letter or `_`"
                    .to_string()
            ),
            (
                at("spec.outputs[0].name"),
                "duplicate column name `strategy` (first declared at spec.inputs[0])".to_string()
            ),
        ]
    );
}

#[test]
fn error_rows_and_rows_from() {
    let both = with(base(), "rowsFrom", json!("rows.csv"));
    assert_eq!(
        errors(both, Some("strategy,replicas,mode,weight\n")),
        one(
            "spec.rowsFrom",
            "give either `rows` or `rowsFrom`, not both"
        )
    );
    let neither = without(base(), "rows");
    assert_eq!(
        errors(neither.clone(), None),
        one("spec", "the table has no rows: give `rows` or `rowsFrom`")
    );
    assert_eq!(
        errors(with(neither, "rowsFrom", json!("rows.csv")), None),
        one(
            "spec.rowsFrom",
            "the rows file \"rows.csv\" was not provided"
        )
    );
}

#[test]
fn error_allowed_values() {
    let input = |allowed: Value| {
        with(
            base(),
            "inputs",
            json!([{"name": "strategy", "type": "string", "allowedValues": allowed}]),
        )
    };
    assert_eq!(
        errors(input(json!([])), None),
        one(
            "spec.inputs[0].allowedValues",
            "`allowedValues` of `strategy` is empty; remove it to allow any value"
        )
    );
    assert_eq!(
        errors(input(json!(["a", 1, "a", null])), None),
        vec![
            (
                at("spec.inputs[0].allowedValues[1]"),
                "expected a string for `strategy`, got the number 1".to_string()
            ),
            (
                at("spec.inputs[0].allowedValues[2]"),
                "duplicate allowed value \"a\" for `strategy`".to_string()
            ),
            (
                at("spec.inputs[0].allowedValues[3]"),
                "null cannot be an allowed value of `strategy` (a missing input is always allowed)"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn error_default() {
    let cases = [
        (
            json!({"mode": "x", "colour": "red"}),
            "spec.default.colour",
            "unknown output `colour` in `default` (the outputs are mode, weight)",
        ),
        (
            json!({"mode": "x", "replicas": 1}),
            "spec.default.replicas",
            "`replicas` is an input; `default` sets outputs only",
        ),
        (
            json!({"weight": 1}),
            "spec.default",
            "the default is missing the required output `mode` (mark an output `optional: true` to allow leaving it out)",
        ),
        (
            json!({"mode": 1}),
            "spec.default.mode",
            "expected a string for `mode`, got the number 1",
        ),
    ];
    for (default, path, message) in cases {
        assert_eq!(
            errors(with(base(), "default", default), None),
            one(path, message)
        );
    }
}

#[test]
fn error_no_outputs() {
    let v = with_rows(with(base(), "outputs", json!([])), json!([{"then": {}}]));
    assert_eq!(
        errors(v, None),
        one("spec.outputs", "a table needs at least one output")
    );
}

#[test]
fn compile_reports_every_error() {
    let v = with(
        with_rows(
            base(),
            json!([
                {"when": {"replicas": "> x"}, "then": {"mode": "a"}},
                {"when": {"strategy": "Fixed", "size": 1}, "then": {}},
                {"then": {"mode": "c", "weight": "heavy"}}
            ]),
        ),
        "default",
        json!({"modes": "x"}),
    );
    assert_eq!(
        errors(v, None),
        vec![
            (
                at("spec.rows[0].when.replicas"),
                "malformed comparison \"> x\" for `replicas`: \"x\" is not an int".to_string()
            ),
            (
                at("spec.rows[1].when.size"),
                "unknown input `size` (the inputs are strategy, replicas)".to_string()
            ),
            (
                at("spec.rows[1].when.strategy"),
                "\"Fixed\" is not an allowed value of `strategy` (Weighted, Spread)".to_string()
            ),
            (
                at("spec.rows[1].then"),
                "row 2 is missing the required output `mode` (mark an output `optional: true` to allow leaving it out)"
                    .to_string()
            ),
            (
                at("spec.rows[2].then.weight"),
                "expected an int for `weight`, got the string \"heavy\"".to_string()
            ),
            (
                at("spec.default.modes"),
                "unknown output `modes` in `default` (the outputs are mode, weight)".to_string()
            ),
            (
                at("spec.default"),
                "the default is missing the required output `mode` (mark an output `optional: true` to allow leaving it out)"
                    .to_string()
            ),
        ]
    );
}

fn csv_base() -> Value {
    with(without(base(), "rows"), "rowsFrom", json!("rows.csv"))
}

#[test]
fn error_csv_header() {
    let all = |csv: &str| errors(csv_base(), Some(csv));
    assert_eq!(
        all("strategy,replicas,mode,weight,extra\nWeighted,,x,,\n"),
        vec![(
            line(1, Some(5)),
            "unknown column \"extra\" in the CSV header (the inputs are strategy, replicas; the outputs are mode, weight)"
                .to_string()
        )]
    );
    assert_eq!(
        all("strategy,strategy,replicas,mode,weight\n"),
        vec![(
            line(1, Some(2)),
            "column `strategy` appears twice in the CSV header".to_string()
        )]
    );
    assert_eq!(
        all("strategy,mode\nWeighted,x\n"),
        vec![
            (
                line(1, None),
                "the CSV header is missing the input `replicas` column".to_string()
            ),
            (
                line(1, None),
                "the CSV header is missing the output `weight` column".to_string()
            ),
        ]
    );
    assert_eq!(
        all(""),
        vec![(
            line(1, None),
            "the CSV file is empty: its first line must be a header naming the columns".to_string()
        )]
    );
}

#[test]
fn error_csv_cells() {
    let csv = "strategy,replicas,mode,weight\n\
               Weighted,abc,x,\n\
               Fixed,,x,\n\
               Weighted,,x,1.5\n\
               Weighted,,,\n\
               Weighted||Spread,,x,\n\
               Weighted,2,x\n\
               Spread,1..0,x,2\n";
    assert_eq!(
        errors(csv_base(), Some(csv)),
        vec![
            (line(2, Some(2)), "expected an int for `replicas`, got \"abc\"".to_string()),
            (
                line(3, Some(1)),
                "\"Fixed\" is not an allowed value of `strategy` (Weighted, Spread)".to_string()
            ),
            (line(4, Some(4)), "expected an int for `weight`, got \"1.5\"".to_string()),
            (
                line(5, None),
                "row 4 is missing the required output `mode` (mark an output `optional: true` to allow leaving it out)"
                    .to_string()
            ),
            (line(6, Some(1)), "empty alternative in \"Weighted||Spread\" for `strategy`".to_string()),
            (line(7, None), "row 6 has 3 fields, but the header has 4".to_string()),
            (
                line(8, Some(2)),
                "empty range \"1..0\" for `replicas`: the lower bound 1 is greater than the upper bound 0".to_string()
            ),
        ]
    );
}

#[test]
fn table_error_and_location_display() {
    let e = TableError {
        location: line(3, Some(2)),
        message: "boom".to_string(),
    };
    assert_eq!(e.to_string(), "boom");
    assert_eq!(line(3, Some(2)).to_string(), "CSV line 3, field 2");
    assert_eq!(line(3, None).to_string(), "CSV line 3");
    assert_eq!(at("spec.rows[0]").to_string(), "spec.rows[0]");
    assert_eq!(TableLocation::Evaluation.to_string(), "evaluation");
}

// ---------------------------------------------------------------------------------------
// Lints

#[test]
fn lint_clean_table_has_no_findings() {
    assert_eq!(lints(&compile(strategies())), vec![]);
}

#[test]
fn lint_unique_overlap_names_a_shared_input() {
    let t = compile(json!({
        "hitPolicy": "unique",
        "inputs": [
            {"name": "strategy", "type": "string", "allowedValues": ["Weighted", "Spread", "FixedReplicas"]},
            {"name": "replicas", "type": "number"}
        ],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [
            {"when": {"strategy": "Spread"}, "then": {"o": 1}},
            {"when": {"strategy": "FixedReplicas", "replicas": "> 2.5"}, "then": {"o": 2}},
            {"when": {"strategy": "FixedReplicas", "replicas": "<= 2.5"}, "then": {"o": 3}},
            {"when": {"strategy": ["Spread", "Weighted"], "replicas": "!= 0"}, "then": {"o": 4}},
            {"when": {"replicas": "> 2.5"}, "then": {"o": 5}},
            {"then": {"o": 6}}
        ],
        "default": {"o": 0}
    }));
    assert_eq!(
        lints(&t),
        vec![
            (
                Severity::Error,
                at("spec.rows[3]"),
                "rows 1 and 4 overlap: both match strategy=Spread, replicas=1".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[4]"),
                "rows 1 and 5 overlap: both match strategy=Spread, replicas=3".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[4]"),
                "rows 2 and 5 overlap: both match strategy=FixedReplicas, replicas=3".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[4]"),
                "rows 4 and 5 overlap: both match strategy=Weighted, replicas=3".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[5]"),
                "rows 1 and 6 overlap: both match strategy=Spread".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[5]"),
                "rows 2 and 6 overlap: both match strategy=FixedReplicas, replicas=3".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[5]"),
                "rows 3 and 6 overlap: both match strategy=FixedReplicas, replicas=0".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[5]"),
                "rows 4 and 6 overlap: both match strategy=Weighted, replicas=1".to_string()
            ),
            (
                Severity::Error,
                at("spec.rows[5]"),
                "rows 5 and 6 overlap: both match replicas=3".to_string()
            ),
            (
                Severity::Warning,
                at("spec.default"),
                "the default is never used: every input, including a missing one, matches some row"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn lint_unique_overlap_of_unconstrained_rows() {
    let t = compile(json!({
        "hitPolicy": "unique",
        "inputs": [{"name": "a", "type": "string"}],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [{"then": {"o": 1}}, {"when": {"a": "-"}, "then": {"o": 2}}]
    }));
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Error,
            at("spec.rows[1]"),
            "rows 1 and 2 overlap: both match every input".to_string()
        )]
    );
}

#[test]
fn lint_unique_overlap_in_csv_rows_points_at_the_line() {
    let mut v = strategies_csv_spec();
    v["hitPolicy"] = json!("unique");
    let t = compile_csv(v, STRATEGIES_CSV);
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Error,
            line(3, None),
            "rows 1 and 2 overlap: both match strategy=Weighted, replicas=2".to_string()
        )]
    );
}

#[test]
fn lint_first_dead_row_subsumed_by_one_row() {
    let t = compile(json!({
        "hitPolicy": "first",
        "inputs": [{"name": "tier", "type": "string"}, {"name": "size", "type": "int"}],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [
            {"when": {"size": ">= 2"}, "then": {"o": 1}},
            {"when": {"tier": "gold", "size": "< 2"}, "then": {"o": 2}},
            {"when": {"tier": ["gold", "silver"], "size": "3..7"}, "then": {"o": 3}},
            {"when": {"tier": "gold", "size": [0, 1]}, "then": {"o": 4}},
            {"when": {"tier": "gold", "size": "!= 100"}, "then": {"o": 5}},
            {"when": {"tier": "gold"}, "then": {"o": 6}}
        ]
    }));
    // Row 6 is live: rows 1 and 2 do not match a missing size.
    assert_eq!(
        lints(&t),
        vec![
            (
                Severity::Warning,
                at("spec.rows[2]"),
                "row 3 can never match: row 1 matches every input it matches".to_string()
            ),
            (
                Severity::Warning,
                at("spec.rows[3]"),
                "row 4 can never match: row 2 matches every input it matches".to_string()
            ),
            (
                Severity::Warning,
                at("spec.rows[4]"),
                "row 5 can never match: rows 1 and 2 together match every input it matches"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn lint_first_dead_row_covered_by_a_union_over_allowed_values_and_bools() {
    let t = compile(json!({
        "hitPolicy": "first",
        "inputs": [
            {"name": "x", "type": "string", "allowedValues": ["A", "B"]},
            {"name": "paused", "type": "bool"}
        ],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [
            {"when": {"x": "A", "paused": true}, "then": {"o": 0}},
            {"when": {"x": ["A", "B"], "paused": true}, "then": {"o": 1}},
            {"when": {"x": "A"}, "then": {"o": 2}},
            {"when": {"x": "B", "paused": "!= true"}, "then": {"o": 3}},
            {"when": {"x": ["A", "B"], "paused": [true, false]}, "then": {"o": 4}},
            {"when": {"paused": "-"}, "then": {"o": 5}}
        ]
    }));
    // Row 1 intersects row 5 too, but rows 2-4 cover it without row 1.
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.rows[4]"),
            "row 5 can never match: rows 2, 3 and 4 together match every input it matches"
                .to_string()
        )]
    );
}

#[test]
fn lint_first_dead_row_over_an_infinite_domain() {
    let t = compile(json!({
        "hitPolicy": "first",
        "inputs": [{"name": "n", "type": "number"}],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [
            {"when": {"n": "< 2"}, "then": {"o": 1}},
            {"when": {"n": "> 2"}, "then": {"o": 2}},
            {"when": {"n": "!= 2"}, "then": {"o": 3}},
            {"when": {"n": "1..3"}, "then": {"o": 4}},
            {"when": {"n": 2}, "then": {"o": 5}}
        ],
        "default": {"o": 0}
    }));
    assert_eq!(
        lints(&t),
        vec![
            (
                Severity::Warning,
                at("spec.rows[2]"),
                "row 3 can never match: rows 1 and 2 together match every input it matches"
                    .to_string()
            ),
            (
                Severity::Warning,
                at("spec.rows[4]"),
                "row 5 can never match: row 4 matches every input it matches".to_string()
            ),
        ]
    );
}

#[test]
fn table_without_inputs() {
    let t = compile(json!({
        "hitPolicy": "first",
        "inputs": [],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [{"then": {"o": 1}}, {"when": {}, "then": {"o": 2}}]
    }));
    assert_eq!(decide(&t, json!({})).value, json!({"o": 1}));
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.rows[1]"),
            "row 2 can never match: row 1 matches every input it matches".to_string()
        )]
    );
    let header_only = json!({
        "hitPolicy": "collect",
        "rowsFrom": "empty.csv",
        "inputs": [],
        "outputs": [{"name": "o", "type": "int"}]
    });
    let t = compile_csv(header_only, "o\n");
    assert_eq!(t.row_count(), 0);
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.rowsFrom"),
            "no row matches any input".to_string()
        )]
    );
}

fn gaps_table(rows: Value) -> Value {
    json!({
        "hitPolicy": "first",
        "inputs": [
            {"name": "strategy", "type": "string", "allowedValues": ["Weighted", "Spread", "FixedReplicas"]},
            {"name": "paused", "type": "bool"}
        ],
        "outputs": [{"name": "o", "type": "string"}],
        "rows": rows
    })
}

#[test]
fn lint_gaps_over_finite_inputs() {
    let t = compile(gaps_table(json!([
        {"when": {"strategy": "Weighted"}, "then": {"o": "a"}},
        {"when": {"strategy": "Spread", "paused": false}, "then": {"o": "b"}},
        {"when": {"strategy": "FixedReplicas", "paused": [true, false]}, "then": {"o": "c"}}
    ])));
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.rows"),
            "no row matches strategy=Spread, paused=true".to_string()
        )]
    );
    // A default fills the gaps.
    let mut v = gaps_table(json!([{"when": {"strategy": "Weighted"}, "then": {"o": "a"}}]));
    v["default"] = json!({"o": "z"});
    assert_eq!(lints(&compile(v)), vec![]);
    // An input with infinitely many values: no gap listing.
    let mut v = gaps_table(json!([{"when": {"strategy": "Weighted"}, "then": {"o": "a"}}]));
    v["inputs"][0] = json!({"name": "strategy", "type": "string"});
    assert_eq!(lints(&compile(v)), vec![]);
}

#[test]
fn lint_gaps_are_capped_at_twenty() {
    let t = compile(json!({
        "hitPolicy": "collect",
        "inputs": [
            {"name": "a", "type": "int", "allowedValues": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]},
            {"name": "b", "type": "int", "allowedValues": [0, 1, 2]}
        ],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [{"when": {"a": 0, "b": 0}, "then": {"o": 1}}]
    }));
    let mut expected: Vec<(Severity, TableLocation, String)> = Vec::new();
    for a in 0..10 {
        for b in 0..3 {
            if (a, b) != (0, 0) && expected.len() < 20 {
                expected.push((
                    Severity::Warning,
                    at("spec.rows"),
                    format!("no row matches a={a}, b={b}"),
                ));
            }
        }
    }
    expected.push((
        Severity::Warning,
        at("spec.rows"),
        "and 9 more input combinations match no row (add rows or a `default`)".to_string(),
    ));
    assert_eq!(lints(&t), expected);
}

#[test]
fn lint_gaps_in_csv_tables_point_at_rows_from() {
    let v = json!({
        "hitPolicy": "first",
        "rowsFrom": "flags.csv",
        "inputs": [{"name": "on", "type": "bool"}],
        "outputs": [{"name": "o", "type": "int"}]
    });
    let t = compile_csv(v, "on,o\ntrue,1\n");
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.rowsFrom"),
            "no row matches on=false".to_string()
        )]
    );
}

#[test]
fn lint_row_matching_no_allowed_value() {
    let t = compile(json!({
        "hitPolicy": "first",
        "inputs": [
            {"name": "replicas", "type": "int", "allowedValues": [1, 2, 3]},
            {"name": "name", "type": "string"}
        ],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [
            {"when": {"replicas": "<= 3"}, "then": {"o": 1}},
            {"when": {"replicas": "> 5"}, "then": {"o": 2}}
        ]
    }));
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.rows[1]"),
            "row 2 can never match: no allowed value of `replicas` satisfies `> 5`".to_string()
        )]
    );
}

#[test]
fn lint_default_never_used() {
    let t = compile(json!({
        "hitPolicy": "first",
        "inputs": [{"name": "tier", "type": "string"}],
        "outputs": [{"name": "o", "type": "int"}],
        "rows": [
            {"when": {"tier": "gold"}, "then": {"o": 1}},
            {"then": {"o": 2}}
        ],
        "default": {"o": 0}
    }));
    assert_eq!(
        lints(&t),
        vec![(
            Severity::Warning,
            at("spec.default"),
            "the default is never used: every input, including a missing one, matches some row"
                .to_string()
        )]
    );
}

// ---------------------------------------------------------------------------------------
// Spec serialisation and schema

#[test]
fn spec_serde_round_trip_and_strictness() {
    let s = spec(strategies());
    assert_eq!(s.hit_policy, HitPolicy::First);
    assert_eq!(s.inputs[0].r#type, ColumnType::String);
    assert!(s.outputs[1].optional);
    assert_eq!(serde_json::to_value(&s).expect("serialises"), strategies());
    let csv = spec(strategies_csv_spec());
    let out = serde_json::to_value(&csv).expect("serialises");
    assert_eq!(out.get("rows"), None);
    assert_eq!(out["rowsFrom"], json!("strategies.csv"));

    let unknown =
        serde_json::from_value::<TableSpec>(with(strategies(), "hitpolicy", json!("first")));
    assert!(unknown.is_err());
    let bad_policy =
        serde_json::from_value::<TableSpec>(with(strategies(), "hitPolicy", json!("First")));
    assert!(bad_policy.is_err());
    let row_typo = serde_json::from_value::<TableSpec>(with_rows(
        strategies(),
        json!([{"when": {}, "than": {}}]),
    ));
    assert!(row_typo.is_err());
}

#[test]
fn spec_schema_has_help_text_and_cell_shapes() {
    let schema = serde_json::to_value(schemars::schema_for!(TableSpec)).expect("schema serialises");
    let props = &schema["properties"];
    assert!(
        props["hitPolicy"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("first matching row"))
    );
    assert!(
        props["rowsFrom"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("CSV"))
    );
    assert_eq!(props["default"]["type"], json!(["object", "null"]));
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        required,
        vec![json!("hitPolicy"), json!("inputs"), json!("outputs")]
    );
    let defs = &schema["$defs"];
    let when = &defs["RowSpec"]["properties"]["when"];
    assert!(
        when["description"]
            .as_str()
            .is_some_and(|d| d.contains("closed range"))
    );
    assert_eq!(
        when["additionalProperties"]["anyOf"][1]["type"],
        json!("array")
    );
    assert_eq!(defs["ColumnType"]["oneOf"][0]["const"], json!("string"));
    assert!(defs["InputColumn"]["properties"]["type"]["description"].is_string());
    assert_eq!(
        defs["InputColumn"]["properties"]["allowedValues"]["minItems"],
        json!(1)
    );
}

// ---------------------------------------------------------------------------------------
// The set algebra

#[test]
fn float_keys_preserve_order_and_round_trip() {
    use super::algebra::{fkey, fval};
    let xs = [
        -f64::MAX,
        -1e300,
        -2.5,
        -1.0,
        -f64::MIN_POSITIVE,
        -5e-324,
        0.0,
        5e-324,
        f64::MIN_POSITIVE,
        1.0,
        2.0,
        2.0_f64.next_up(),
        1e300,
        f64::MAX,
    ];
    for w in xs.windows(2) {
        assert!(fkey(w[0]) < fkey(w[1]), "{} < {}", w[0], w[1]);
    }
    for x in xs {
        assert_eq!(fval(fkey(x)), x);
    }
    assert_eq!(fkey(-0.0), fkey(0.0));
    assert_eq!(fkey(2.0) + 1, fkey(2.0_f64.next_up()));
    assert_eq!(fkey(-5e-324) + 1, fkey(0.0) - 1);
}

#[test]
fn set_operations_on_ranges_and_strings() {
    use super::algebra::{Domain, Set, Vals};
    use super::cell::{CmpOp, Cond};
    let int = Domain::new(ColumnType::Int, None);
    let ge2 = int.set(&Cond::Cmp(CmpOp::Ge, Lit::Int(2)));
    let ne3 = int.set(&Cond::Ne(Lit::Int(3)));
    let range = int.set(&Cond::Range(Lit::Int(1), Lit::Int(5)));
    let any = int.set(&Cond::Any);
    assert_eq!(
        ge2.intersect(&ne3).vals,
        Vals::Ranges(vec![(2, 2), (4, i64::MAX)])
    );
    assert_eq!(range.minus(&ge2).vals, Vals::Ranges(vec![(1, 1)]));
    assert_eq!(
        any.minus(&ne3),
        Set {
            null: true,
            vals: Vals::Ranges(vec![(3, 3)])
        }
    );
    assert!(
        int.set(&Cond::Cmp(CmpOp::Lt, Lit::Int(i64::MIN)))
            .is_empty()
    );
    assert!(
        int.set(&Cond::Cmp(CmpOp::Gt, Lit::Int(i64::MAX)))
            .is_empty()
    );
    assert!(range.is_subset(&any) && !any.is_subset(&range));

    let string = Domain::new(ColumnType::String, None);
    let a = string.set(&Cond::In(vec![Lit::Str("a".into())]));
    let not_a = string.set(&Cond::Ne(Lit::Str("a".into())));
    let not_b = string.set(&Cond::Ne(Lit::Str("b".into())));
    assert!(a.intersect(&not_a).is_empty());
    assert_eq!(
        not_a.intersect(&not_b).vals,
        Vals::CoFin(["a".into(), "b".into()].into())
    );
    assert_eq!(not_a.minus(&not_b).vals, Vals::Fin(["b".into()].into()));
    assert_eq!(
        string.witness(&not_a.intersect(&not_b)),
        Some(" not in [a, b]".to_string())
    );

    let number = Domain::new(ColumnType::Number, None);
    let gt2 = number.set(&Cond::Cmp(CmpOp::Gt, Lit::Num(2.0)));
    assert!(!gt2.vals.contains(&Lit::Num(2.0)));
    assert!(gt2.vals.contains(&Lit::Num(2.0_f64.next_up())));
    assert_eq!(number.witness(&gt2), Some("=3".to_string()));
    let lt0 = number.set(&Cond::Cmp(CmpOp::Lt, Lit::Num(0.0)));
    let ge0 = number.set(&Cond::Cmp(CmpOp::Ge, Lit::Num(0.0)));
    assert!(lt0.intersect(&ge0).is_empty());
    assert!(number.full(false).minus(&lt0).minus(&ge0).is_empty());
}

// ---------------------------------------------------------------------------------------
// The lints against a brute-force scan

/// A small deterministic PRNG (xorshift64*), so the property test needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
}

/// A column of the property test: its declaration, the constants its cells use and
/// sample inputs that hit every region those cells can carve out.
struct PCol {
    name: &'static str,
    decl: Value,
    kind: PKind,
    /// Values cells may name (also the allowed values, when the column has them).
    named: Vec<Value>,
    /// Bounds for comparisons and ranges (numeric columns).
    bounds: Vec<Value>,
    /// Sample inputs (without null).
    samples: Vec<Value>,
    finite: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum PKind {
    Numeric,
    Str,
    Bool,
}

fn pcols() -> Vec<PCol> {
    let ints = |xs: &[i64]| xs.iter().map(|&x| json!(x)).collect::<Vec<_>>();
    vec![
        PCol {
            name: "n",
            decl: json!({"name": "n", "type": "int"}),
            kind: PKind::Numeric,
            named: ints(&[0, 1, 2, 3, 4]),
            bounds: ints(&[0, 1, 2, 3, 4]),
            samples: ints(&[-1, 0, 1, 2, 3, 4, 5]),
            finite: false,
        },
        PCol {
            name: "x",
            decl: json!({"name": "x", "type": "number"}),
            kind: PKind::Numeric,
            named: vec![json!(0), json!(1), json!(2.5)],
            bounds: vec![json!(0), json!(1), json!(2.5)],
            samples: vec![
                json!(-1),
                json!(0),
                json!(0.5),
                json!(1),
                json!(1.5),
                json!(2.5),
                json!(3),
            ],
            finite: false,
        },
        PCol {
            name: "s",
            decl: json!({"name": "s", "type": "string"}),
            kind: PKind::Str,
            named: vec![json!("a"), json!("b"), json!("c")],
            bounds: vec![],
            samples: vec![json!("a"), json!("b"), json!("c"), json!("zz")],
            finite: false,
        },
        PCol {
            name: "b",
            decl: json!({"name": "b", "type": "bool"}),
            kind: PKind::Bool,
            named: vec![json!(false), json!(true)],
            bounds: vec![],
            samples: vec![json!(false), json!(true)],
            finite: true,
        },
        PCol {
            name: "k",
            decl: json!({"name": "k", "type": "string", "allowedValues": ["p", "q", "r"]}),
            kind: PKind::Str,
            named: vec![json!("p"), json!("q"), json!("r")],
            bounds: vec![],
            samples: vec![json!("p"), json!("q"), json!("r")],
            finite: true,
        },
        PCol {
            name: "m",
            decl: json!({"name": "m", "type": "int", "allowedValues": [1, 2, 4]}),
            kind: PKind::Numeric,
            named: ints(&[1, 2, 4]),
            bounds: ints(&[0, 1, 2, 3, 4, 5]),
            samples: ints(&[1, 2, 4]),
            finite: true,
        },
    ]
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A random cell for a column: `None` = left out; else the YAML value and the CSV text.
fn random_cell(rng: &mut Rng, col: &PCol) -> Option<(Value, String)> {
    let named = rng.pick(&col.named);
    let t = text(&named);
    let choice = match col.kind {
        PKind::Numeric => rng.below(12),
        PKind::Str | PKind::Bool => rng.pick(&[0, 1, 2, 3, 4, 10]),
    };
    Some(match choice {
        0 => return None,
        1 => (Value::Null, String::new()),
        2 => (json!("-"), "-".to_string()),
        3 => (named, t),
        4 => {
            let other = rng.pick(&col.named);
            let csv = format!("{t}|{}", text(&other));
            (json!([named, other]), csv)
        }
        10 => (json!(format!("!= {t}")), format!("!= {t}")),
        11 => {
            let (a, b) = (rng.pick(&col.bounds), rng.pick(&col.bounds));
            let (lo, hi) = if a.as_f64() <= b.as_f64() {
                (a, b)
            } else {
                (b, a)
            };
            let cell = format!("{}..{}", text(&lo), text(&hi));
            (json!(cell), cell)
        }
        op => {
            let sym = ["<", "<=", ">", ">=", "<"][op - 5];
            let cell = format!("{sym} {}", text(&rng.pick(&col.bounds)));
            (json!(cell), cell)
        }
    })
}

/// Every combination of sample inputs (each column: its samples, plus null when `null`).
fn combinations(cols: &[&PCol], null: bool) -> Vec<Vec<Value>> {
    let mut out = vec![Vec::new()];
    for col in cols {
        let mut values = col.samples.clone();
        if null {
            values.push(Value::Null);
        }
        out = out
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push(v.clone());
                    p
                })
            })
            .collect();
    }
    out
}

fn matching_rows(t: &Table, cols: &[&PCol], combo: &[Value]) -> Vec<usize> {
    let inputs: Map<String, Value> = cols
        .iter()
        .zip(combo)
        .filter(|(_, v)| !v.is_null())
        .map(|(c, v)| (c.name.to_string(), v.clone()))
        .collect();
    t.decide(&inputs).expect("decide succeeds").matched_rows
}

#[test]
fn lints_agree_with_a_brute_force_scan() {
    use super::algebra::Budget;
    use super::lint::Analysis;

    let all = pcols();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut seen_dead = 0;
    let mut seen_overlaps = 0;
    let mut seen_gaps = 0;
    for round in 0..400 {
        // Half the tables use only finite columns, so gaps are checked often.
        let pool: Vec<&PCol> = if round % 2 == 0 {
            all.iter().filter(|c| c.finite).collect()
        } else {
            all.iter().collect()
        };
        let width = 1 + rng.below(3);
        let mut cols: Vec<&PCol> = Vec::new();
        while cols.len() < width.min(pool.len()) {
            let c = rng.pick(&pool);
            if !cols.iter().any(|x| x.name == c.name) {
                cols.push(c);
            }
        }
        cols.sort_by_key(|c| all.iter().position(|a| a.name == c.name));

        let rows_n = 1 + rng.below(6);
        let mut rows = Vec::new();
        let mut csv = cols.iter().map(|c| c.name).collect::<Vec<_>>().join(",") + ",o\n";
        for r in 0..rows_n {
            let mut when = Map::new();
            let mut cells = Vec::new();
            for col in &cols {
                match random_cell(&mut rng, col) {
                    Some((yaml, text)) => {
                        when.insert(col.name.to_string(), yaml);
                        cells.push(format!("\"{text}\""));
                    }
                    None => cells.push(String::new()),
                }
            }
            rows.push(json!({"when": when, "then": {"o": r}}));
            csv.push_str(&format!("{},{r}\n", cells.join(",")));
        }
        let decls: Vec<Value> = cols.iter().map(|c| c.decl.clone()).collect();
        let v = json!({
            "hitPolicy": "collect",
            "inputs": decls,
            "outputs": [{"name": "o", "type": "int"}],
            "rows": rows
        });
        let context = format!("round {round}: {v}");
        let t = Table::compile("p", &spec(v.clone()), None)
            .unwrap_or_else(|e| panic!("{context}: {e:?}"));

        // The same rows from CSV compile to the same conditions.
        let csv_spec = with(without(v.clone(), "rows"), "rowsFrom", json!("p.csv"));
        let from_csv = Table::compile("p", &spec(csv_spec), Some(&csv))
            .unwrap_or_else(|e| panic!("{context}\n{csv}: {e:?}"));
        let conds: Vec<_> = t.rows.iter().map(|r| r.conds.clone()).collect();
        let csv_conds: Vec<_> = from_csv.rows.iter().map(|r| r.conds.clone()).collect();
        assert_eq!(conds, csv_conds, "{context}\n{csv}");

        // Brute force over the samples (with null: a missing input).
        let samples = combinations(&cols, true);
        let matches: Vec<Vec<usize>> = samples
            .iter()
            .map(|s| matching_rows(&t, &cols, s))
            .collect();
        let hits = |r: usize| -> Vec<usize> {
            (0..samples.len())
                .filter(|&s| matches[s].contains(&r))
                .collect()
        };
        let row_hits: Vec<Vec<usize>> = (0..rows_n).map(hits).collect();

        let analysis = Analysis::new(&t);
        let never: Vec<usize> = analysis
            .never_matching()
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        let brute_never: Vec<usize> = (0..rows_n).filter(|&r| row_hits[r].is_empty()).collect();
        assert_eq!(never, brute_never, "never matching, {context}");

        let scan = analysis.overlaps(usize::MAX, &mut Budget::new(1_000_000, 10_000));
        assert_eq!(scan.stopped_at, None);
        assert_eq!(scan.total, scan.found.len());
        let overlaps = scan.found;
        let pairs: Vec<(usize, usize)> = overlaps.iter().map(|o| (o.first, o.second)).collect();
        let mut brute_pairs = Vec::new();
        for j in 0..rows_n {
            for i in 0..j {
                if row_hits[j].iter().any(|s| row_hits[i].contains(s)) {
                    brute_pairs.push((i, j));
                }
            }
        }
        assert_eq!(pairs, brute_pairs, "overlaps, {context}");
        seen_overlaps += pairs.len();
        // Each `name=value` part of a witness is matched by both rows.
        for o in &overlaps {
            for part in &o.witness {
                let Some((name, value)) = part.split_once('=') else {
                    continue;
                };
                if name.ends_with('!') {
                    continue;
                }
                let c = cols
                    .iter()
                    .position(|c| c.name == name)
                    .expect("witness names a column");
                let ty = t.inputs[c].ty;
                let lit = super::cell::text_lit(name, ty, value).expect("witness value parses");
                for r in [o.first, o.second] {
                    assert!(
                        t.rows[r].conds[c].matches(Some(&lit)),
                        "witness {part} for row {r}, {context}"
                    );
                }
            }
        }

        let scan = analysis.dead_rows(usize::MAX, &mut Budget::new(1_000_000, 10_000));
        assert_eq!(scan.stopped_at, None);
        assert_eq!(scan.total, scan.found.len());
        let dead = scan.found;
        let brute_dead: Vec<usize> = (0..rows_n)
            .filter(|&j| {
                !row_hits[j].is_empty()
                    && row_hits[j]
                        .iter()
                        .all(|s| matches[*s].iter().any(|&i| i < j))
            })
            .collect();
        assert_eq!(
            dead.iter().map(|d| d.row).collect::<Vec<_>>(),
            brute_dead,
            "dead rows, {context}"
        );
        seen_dead += dead.len();
        let covers = |j: usize, by: &[usize]| {
            row_hits[j]
                .iter()
                .all(|s| matches[*s].iter().any(|i| by.contains(i)))
        };
        for d in &dead {
            assert!(
                covers(d.row, &d.covered_by),
                "cover of row {}, {context}",
                d.row
            );
            for c in &d.covered_by {
                assert!(*c < d.row && !brute_dead.contains(c), "{context}");
                let without: Vec<usize> = d.covered_by.iter().copied().filter(|x| x != c).collect();
                assert!(
                    !covers(d.row, &without),
                    "redundant cover row {c} of {}, {context}",
                    d.row
                );
            }
        }

        let brute_cover_all = matches.iter().all(|m| !m.is_empty());
        assert_eq!(
            analysis.rows_cover_everything(&mut Budget::new(1_000_000, 10_000)),
            Some(brute_cover_all),
            "{context}"
        );

        let gaps = analysis.gaps(&mut Budget::new(1_000_000, 10_000));
        if cols.iter().all(|c| c.finite) {
            // Without null: a missing input is not a gap. Samples of finite columns are
            // their values in domain order, so index tuples sort like the combinations.
            let combos = combinations(&cols, false);
            let index =
                |c: &PCol, v: &Value| c.samples.iter().position(|s| s == v).expect("sample");
            let brute: Vec<Vec<usize>> = combos
                .iter()
                .filter(|s| matching_rows(&t, &cols, s).is_empty())
                .map(|s| cols.iter().zip(s).map(|(c, v)| index(c, v)).collect())
                .collect();
            let expected = super::lint::Gaps {
                total: brute.len() as u128,
                first: brute.iter().take(super::lint::MAX_GAPS).cloned().collect(),
            };
            assert_eq!(gaps, Some(Some(expected)), "gaps, {context}");
            seen_gaps += brute.len();
        } else {
            assert_eq!(gaps, None);
        }
    }
    // The random tables exercise every check.
    assert!(seen_dead > 50, "{seen_dead} dead rows");
    assert!(seen_overlaps > 200, "{seen_overlaps} overlaps");
    assert!(seen_gaps > 50, "{seen_gaps} gaps");
}
