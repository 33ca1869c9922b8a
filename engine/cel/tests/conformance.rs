//! The CEL conformance suite's "simple" tests, run through `Env::kubernetes()` and
//! `Program::eval`.
//!
//! The suite (cel-spec `tests/simple/testdata/*.textproto`) is not part of this repository:
//! it is read from `shared/cel-spec` beside the workspace. Without it, the test says so and
//! passes. Nothing of the suite is copied here.
//!
//! A test is skipped, by an explicit rule below, when it needs what this crate does not have
//! by design: protobuf messages (object values, message literals, `google.protobuf.*`
//! types, proto enums), a container, a type checker (`check_only`), unknowns, or syntax and
//! functions Kubernetes does not enable (quoted field names, `reverse` of the strings
//! library version 3). Every other
//! test is run: compile, bind, evaluate, compare with CEL's equality but with `int`, `uint`
//! and `double` kept apart (and `NaN` equal to itself). An `eval_error` test passes on any
//! evaluation error; a compile error fails every test.
//!
//! The figures are printed per file; the test fails when a file passes fewer tests than its
//! floor in [`FLOORS`].

#[path = "support/textproto.rs"]
mod textproto;
use textproto::{Field, Message, parse_textproto};

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use switchyard_cel::{Activation, Env, Inspect, Value};

/// Tests that pass per file today. These are floors to raise as the crate improves, not
/// targets: a regression below one fails the test.
///
/// Files with no entry have no floor: those of libraries Kubernetes lacks and this crate
/// does not enable (`block_ext`, `encoders_ext`), and those whose tests all need protobuf
/// messages (`dynamic`, `enums`, `proto2`, `proto3`, `wrappers`, ...).
const FLOORS: &[(&str, usize)] = &[
    ("basic", 43),
    // `cel.bind` (cel-go `ext.Bindings`)
    ("bindings_ext", 6),
    ("comparisons", 334),
    ("conversions", 109),
    ("fields", 54),
    ("fp_math", 30),
    ("integer_math", 64),
    ("lists", 39),
    ("logic", 30),
    ("macros", 44),
    // two-variable comprehensions (cel-go `ext.TwoVarComprehensions`, Kubernetes 1.32+)
    ("macros2", 46),
    // the math library is not enabled (Kubernetes lacks it): only its error tests pass
    ("math_ext", 17),
    ("namespace", 3),
    // Kubernetes' `ip` and `cidr` (the colleague's `k8s` module)
    ("network_ext", 67),
    ("optionals", 59),
    ("parse", 193),
    ("plumbing", 5),
    ("string", 51),
    ("string_ext", 210),
    ("timestamps", 75),
    ("type_deduction", 12),
];

/// Failing test names printed per file, at most.
const MAX_LISTED: usize = 20;

fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/cel-spec")
}

#[test]
fn conformance() {
    let dir = suite_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "the CEL conformance suite is not at {}: skipping the conformance tests",
            dir.display()
        );
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "textproto"))
        .collect();
    files.sort();

    // Quiet the panics of the interpreter, which `Program::eval` turns into errors.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let env = Env::kubernetes();
    let mut results = Vec::new();
    for path in &files {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).unwrap();
        let file = match parse_textproto(&text) {
            Ok(file) => file,
            Err(e) => panic!("{}: {e}", path.display()),
        };
        results.push((name, run_file(&env, &file)));
    }
    std::panic::set_hook(hook);

    let mut report = String::new();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    writeln!(
        report,
        "{:<20} {:>7} {:>7} {:>8}",
        "file", "passed", "failed", "skipped"
    )
    .unwrap();
    for (name, r) in &results {
        writeln!(
            report,
            "{name:<20} {:>7} {:>7} {:>8}",
            r.passed,
            r.failures.len(),
            r.skipped
        )
        .unwrap();
        passed += r.passed;
        failed += r.failures.len();
        skipped += r.skipped;
    }
    writeln!(
        report,
        "{:<20} {passed:>7} {failed:>7} {skipped:>8}",
        "total"
    )
    .unwrap();
    for (name, r) in &results {
        if r.failures.is_empty() {
            continue;
        }
        writeln!(report, "\nfailing in {name}:").unwrap();
        for failure in r.failures.iter().take(MAX_LISTED) {
            writeln!(report, "  {failure}").unwrap();
        }
        if r.failures.len() > MAX_LISTED {
            writeln!(report, "  ... and {} more", r.failures.len() - MAX_LISTED).unwrap();
        }
    }
    let mut skip_reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, r) in &results {
        for (reason, n) in &r.skip_reasons {
            *skip_reasons.entry(reason).or_default() += n;
        }
    }
    writeln!(report, "\nskipped: {skip_reasons:?}").unwrap();
    println!("{report}");

    let mut regressions = Vec::new();
    for (name, floor) in FLOORS {
        let passed = results
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, r)| r.passed);
        if passed < *floor {
            regressions.push(format!("{name}: {passed} passed, floor {floor}"));
        }
    }
    assert!(
        regressions.is_empty(),
        "conformance regressions: {regressions:#?}"
    );
}

// ---- running -------------------------------------------------------------------------

#[derive(Default)]
struct FileResult {
    passed: usize,
    skipped: usize,
    skip_reasons: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
}

fn run_file(env: &Env, file: &Message) -> FileResult {
    let mut result = FileResult::default();
    for section in file.messages("section") {
        let section_name = section.string("name").unwrap_or_default();
        for test in section.messages("test") {
            let name = format!("{section_name}/{}", test.string("name").unwrap_or_default());
            match run_test(env, test) {
                Outcome::Pass => result.passed += 1,
                Outcome::Skip(reason) => {
                    result.skipped += 1;
                    *result.skip_reasons.entry(reason).or_default() += 1;
                }
                Outcome::Fail(why) => result.failures.push(format!("{name}: {why}")),
            }
        }
    }
    result
}

enum Outcome {
    Pass,
    Skip(&'static str),
    Fail(String),
}

/// Names in an expression that only make sense with protobuf messages or enums.
const PROTOBUF_NAMES: &[&str] = &[
    "TestAllTypes",
    "TestRequired",
    "NestedMessage",
    "NestedEnum",
    "GlobalEnum",
    "google.protobuf",
    "cel.expr.conformance",
    "proto2",
    "proto3",
];

/// The explicit skip rule.
fn skip_reason(test: &Message, expr: &str) -> Option<&'static str> {
    if test.bool("check_only") {
        return Some("needs type checker (check_only)");
    }
    if test.get("unknown").is_some() || test.get("any_unknowns").is_some() {
        return Some("unknowns");
    }
    if test.string("container").is_some_and(|c| !c.is_empty()) {
        return Some("container");
    }
    if PROTOBUF_NAMES.iter().any(|n| expr.contains(n)) {
        return Some("protobuf messages or enums");
    }
    if test.contains_field_deep("object_value") || test.contains_field_deep("enum_value") {
        return Some("protobuf messages or enums");
    }
    if test.contains_field_deep("message_type") {
        return Some("protobuf messages or enums");
    }
    // Kubernetes' parser does not enable quoted field names (`a.`b-c``).
    if expr.contains(".`") {
        return Some("quoted field names (not enabled in Kubernetes)");
    }
    // Kubernetes' `ip()` refuses IPv4-mapped IPv6 addresses, which cel-go's accepts.
    if expr.contains("::ffff:")
        && test
            .string("name")
            .is_some_and(|n| n.starts_with("ipv4_") && n.ends_with("equals_ipv6"))
    {
        return Some("IPv4-mapped IPv6 addresses (Kubernetes refuses them)");
    }
    // `reverse` is in the strings library from version 3; Kubernetes enables version 2.
    if expr.contains(".reverse()") {
        return Some("strings.reverse (strings library v3; Kubernetes has v2)");
    }
    None
}

fn run_test(env: &Env, test: &Message) -> Outcome {
    let Some(expr) = test.string("expr") else {
        return Outcome::Fail("no expr".into());
    };
    if let Some(reason) = skip_reason(test, &expr) {
        return Outcome::Skip(reason);
    }
    let mut bindings = Vec::new();
    for binding in test.messages("bindings") {
        let key = binding.string("key").unwrap_or_default();
        let Some(value) = binding.message("value").and_then(|v| v.message("value")) else {
            return Outcome::Skip("binding without a value");
        };
        match expected(value).and_then(|e| to_value(&e)) {
            Ok(v) => bindings.push((key, v)),
            Err(_) => return Outcome::Skip("binding of a type this crate cannot build"),
        }
    }
    let matcher = if let Some(v) = test.message("value") {
        match expected(v) {
            Ok(e) => Expect::Value(e),
            Err(reason) => return Outcome::Fail(format!("unreadable expected value: {reason}")),
        }
    } else if let Some(typed) = test.message("typed_result") {
        match typed.message("result").map(expected) {
            Some(Ok(e)) => Expect::Value(e),
            _ => return Outcome::Skip("typed result without a value"),
        }
    } else if test.get("eval_error").is_some() || test.get("any_eval_errors").is_some() {
        Expect::Error
    } else {
        Expect::Value(Expected::Bool(true))
    };

    let run = (|| {
        let program = env
            .compile(&expr)
            .map_err(|e| format!("compile error: {e}"))?;
        let mut activation = Activation::new(env);
        for (name, value) in &bindings {
            activation.bind(name, value.clone());
        }
        Ok::<_, String>(program.eval(&activation))
    })();
    match (Ok::<_, ()>(run), matcher) {
        (Err(()), _) => Outcome::Fail("panicked".into()),
        (Ok(Err(e)), _) => Outcome::Fail(e),
        (Ok(Ok(Err(_))), Expect::Error) => Outcome::Pass,
        (Ok(Ok(Ok(v))), Expect::Error) => {
            Outcome::Fail(format!("expected an error, got {:?}", v.inspect()))
        }
        (Ok(Ok(Err(e))), Expect::Value(_)) => Outcome::Fail(format!("error: {}", e.message)),
        (Ok(Ok(Ok(v))), Expect::Value(want)) => {
            let got = v.inspect();
            if matches(&got, &want) {
                Outcome::Pass
            } else {
                Outcome::Fail(format!("got {got:?}, want {want:?}"))
            }
        }
    }
}

enum Expect {
    Value(Expected),
    Error,
}

// ---- expected values -------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Expected {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(String),
    Bytes(Vec<u8>),
    List(Vec<Expected>),
    Map(Vec<(Expected, Expected)>),
    Type(String),
}

/// Reads a `cel.expr.Value`.
fn expected(v: &Message) -> Result<Expected, String> {
    let Some((field, value)) = v.fields.first() else {
        return Err("empty value".into());
    };
    let scalar = || match value {
        Field::Scalar(s) => Ok(s),
        Field::Message(_) => Err(format!("{field} is a message")),
    };
    Ok(match field.as_str() {
        "null_value" => Expected::Null,
        "bool_value" => Expected::Bool(scalar()?.text() == "true"),
        "int64_value" => Expected::Int(
            scalar()?
                .text()
                .parse()
                .map_err(|e| format!("int64_value: {e}"))?,
        ),
        "uint64_value" => Expected::Uint(
            scalar()?
                .text()
                .parse()
                .map_err(|e| format!("uint64_value: {e}"))?,
        ),
        "double_value" => Expected::Double(parse_double(&scalar()?.text())?),
        "string_value" => Expected::String(String::from_utf8_lossy(&scalar()?.bytes()).into()),
        "bytes_value" => Expected::Bytes(scalar()?.bytes()),
        "type_value" => Expected::Type(scalar()?.text()),
        "list_value" => {
            let Field::Message(list) = value else {
                return Err("list_value is not a message".into());
            };
            Expected::List(
                list.messages("values")
                    .map(expected)
                    .collect::<Result<_, _>>()?,
            )
        }
        "map_value" => {
            let Field::Message(map) = value else {
                return Err("map_value is not a message".into());
            };
            let mut entries = Vec::new();
            for entry in map.messages("entries") {
                let key = entry.message("key").ok_or("map entry without a key")?;
                let value = entry.message("value").ok_or("map entry without a value")?;
                entries.push((expected(key)?, expected(value)?));
            }
            Expected::Map(entries)
        }
        other => return Err(format!("unsupported value kind {other}")),
    })
}

fn parse_double(text: &str) -> Result<f64, String> {
    match text.to_ascii_lowercase().as_str() {
        "inf" | "infinity" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        "nan" | "-nan" => Ok(f64::NAN),
        t => t
            .trim_end_matches(['f', 'F'])
            .parse()
            .map_err(|e| format!("double_value {text}: {e}")),
    }
}

fn to_value(e: &Expected) -> Result<Value, String> {
    Ok(match e {
        Expected::Null => Value::null(),
        Expected::Bool(b) => Value::bool(*b),
        Expected::Int(i) => Value::int(*i),
        Expected::Uint(u) => Value::uint(*u),
        Expected::Double(d) => Value::double(*d),
        Expected::String(s) => Value::string(s.clone()),
        Expected::Bytes(b) => Value::bytes(b.clone()),
        Expected::List(items) => {
            Value::list(items.iter().map(to_value).collect::<Result<Vec<_>, _>>()?)
        }
        Expected::Map(entries) => Value::map_from_entries(
            entries
                .iter()
                .map(|(k, v)| Ok((to_value(k)?, to_value(v)?)))
                .collect::<Result<Vec<_>, String>>()?,
        )
        .map_err(|e| e.message)?,
        Expected::Type(_) => return Err("type values cannot be bound".into()),
    })
}

/// CEL equality, but with `int`, `uint` and `double` distinct, and `NaN` equal to itself.
fn matches(got: &Inspect, want: &Expected) -> bool {
    match (got, want) {
        (Inspect::Null, Expected::Null) => true,
        (Inspect::Bool(a), Expected::Bool(b)) => a == b,
        (Inspect::Int(a), Expected::Int(b)) => a == b,
        (Inspect::Uint(a), Expected::Uint(b)) => a == b,
        (Inspect::Double(a), Expected::Double(b)) => a == b || (a.is_nan() && b.is_nan()),
        (Inspect::String(a), Expected::String(b)) => a == b,
        (Inspect::Bytes(a), Expected::Bytes(b)) => a == b,
        (Inspect::Type(a), Expected::Type(b)) => a == b,
        (Inspect::List(a), Expected::List(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| matches(x, y))
        }
        (Inspect::Map(a), Expected::Map(b)) => {
            a.len() == b.len()
                && b.iter()
                    .all(|(wk, wv)| a.iter().any(|(gk, gv)| matches(gk, wk) && matches(gv, wv)))
        }
        _ => false,
    }
}

#[test]
fn textproto_reader() {
    let m = parse_textproto(
        r#"
        # a comment
        name: "x" 'y'
        section {
          test { name: "t1" expr: "1 + 1" value: { int64_value: -2 } }
          test < name: 't\x41\101\u00e9\n' value { list_value { values: [{ bool_value: true }, { null_value: NULL_VALUE }] } } >
        }
        ext { [type.googleapis.com/a.B] { single_int64: 1 } }
        nums: [1, 2.5e3, -inf]
        "#,
    )
    .unwrap();
    assert_eq!(m.string("name").as_deref(), Some("xy"));
    let tests: Vec<&Message> = m.message("section").unwrap().messages("test").collect();
    assert_eq!(tests.len(), 2);
    assert_eq!(tests[1].string("name").as_deref(), Some("tAAé\n"));
    assert!(matches!(
        expected(tests[0].message("value").unwrap()),
        Ok(Expected::Int(-2))
    ));
    let Ok(Expected::List(items)) = expected(tests[1].message("value").unwrap()) else {
        panic!("a list");
    };
    assert!(matches!(
        items.as_slice(),
        [Expected::Bool(true), Expected::Null]
    ));
    assert!(m.contains_field_deep("[type.googleapis.com/a.B]"));
    assert_eq!(m.fields.iter().filter(|(n, _)| n == "nums").count(), 3);
    assert!(parse_double("-inf").unwrap().is_infinite());
}
