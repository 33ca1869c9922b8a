//! Differential test: Switchyard's CEL against Kubernetes' own (cel-go with the API server's
//! base environment, `tools/cel-oracle`).
//!
//! Each expression of `differential/corpus.jsonl` (one `{"expr": "..."}` a line, optionally
//! with `"bindings"`; by default `self` is bound to `differential/object.json`, the benchmark
//! Deployment) is evaluated by both, then a number of generated expressions
//! (`SWITCHYARD_CEL_DIFF_COUNT`, default 200; seed `SWITCHYARD_CEL_DIFF_SEED`, default 1).
//! They agree when both fail (in any phase, whatever the message) or both succeed with the
//! same JSON. Switchyard's side compiles in strict mode (`Env::strict`: type-checked as
//! Kubernetes checks, with its checker and validators, no quoted field names, no engine
//! functions), every variable `dyn` as the oracle declares them. Results are compared as
//! `switchyard cel` prints them (a type value as its name); `int`, `uint` and `double` stay apart only as far as JSON
//! keeps them (`1` and `1u` print alike, `1.0` does not), and doubles within one unit in
//! the last place are equal (see [`same_json`]).
//!
//! cel-go iterates a map in Go's random order. The oracle binds JSON objects as maps that
//! iterate in key order, as Switchyard's do; a map *literal* still iterates at random in
//! cel-go, so the corpus never depends on the order of one (`.map(k, k).sort()`).
//!
//! Known disagreements are listed in `differential/known-differences.txt`: an expression
//! (exact text), a tab, the reason. The test fails on a disagreement of the corpus that is
//! not listed, and on a listed expression that now agrees or is no longer in the corpus, so
//! the list shrinks as fixes land. A line `class:NAME<TAB>reason` tolerates a class of
//! disagreement (see [`classify`]) for generated expressions only; corpus expressions are
//! always listed one by one. A generated disagreement of no listed class fails the test.
//!
//! The oracle: `SWITCHYARD_CEL_ORACLE` names the binary; otherwise `scripts/cel-oracle.sh`
//! builds it (once per machine, with Go) and its last line is the path. Without Go the test
//! fails, unless `SWITCHYARD_SKIP_CEL_ORACLE=1`.
//!
//! `SWITCHYARD_CEL_DIFF_DUMP=FILE` writes the unlisted corpus disagreements to `FILE`, one a
//! line (`EXPRESSION<TAB>kubernetes<TAB>switchyard`), to help update the list.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value as Json, json};
use switchyard_cel::check::{Type as CheckType, TypeEnv};
use switchyard_cel::{Activation, Env, Key, Value};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential")
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The oracle binary, or `None` when the test is to be skipped.
fn oracle_path() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("SWITCHYARD_CEL_ORACLE")
        && !path.is_empty()
    {
        return Some(PathBuf::from(path));
    }
    if std::env::var("SWITCHYARD_SKIP_CEL_ORACLE").as_deref() == Ok("1") {
        eprintln!("differential: skipped (SWITCHYARD_SKIP_CEL_ORACLE=1)");
        return None;
    }
    let script = workspace_root().join("scripts/cel-oracle.sh");
    let output = match Command::new("bash").arg(&script).output() {
        Ok(output) => output,
        Err(e) => panic!("cannot run {}: {e}", script.display()),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or("").trim().to_string();
    if !output.status.success() || last.is_empty() {
        panic!(
            "the CEL oracle (Kubernetes' CEL, tools/cel-oracle) could not be built: {} failed:\n{}\n\
             It needs Go and the Go module proxy. Set SWITCHYARD_CEL_ORACLE to a built oracle, \
             or SWITCHYARD_SKIP_CEL_ORACLE=1 to skip this test.",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Some(PathBuf::from(last))
}

/// What one side made of an expression.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Value(Json),
    /// The phase (`parse`, `check`, `eval`, `result`, `panic`) and the message.
    Error(String, String),
}

impl Outcome {
    fn show(&self) -> String {
        match self {
            Outcome::Value(json) => json.to_string(),
            Outcome::Error(phase, message) => {
                let first = message.lines().next().unwrap_or("");
                format!("{phase} error: {first}")
            }
        }
    }
}

fn agree(a: &Outcome, b: &Outcome) -> bool {
    match (a, b) {
        (Outcome::Error(..), Outcome::Error(..)) => true,
        (Outcome::Value(x), Outcome::Value(y)) => same_json(x, y),
        _ => false,
    }
}

/// JSON equality, but two doubles also agree when they are neighbours: serde_json (without
/// its `float_roundtrip` feature) may read the oracle's shortest form of a double one unit in
/// the last place off. Integers and doubles stay apart.
fn same_json(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (x.is_f64(), y.is_f64()) {
            (true, true) => match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => {
                    x == y
                        || (x.is_sign_negative() == y.is_sign_negative()
                            && x.to_bits().abs_diff(y.to_bits()) <= 1)
                }
                _ => false,
            },
            (false, false) => x == y,
            _ => false,
        },
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Kubernetes' outcomes for `requests` (JSON lines), from one run of the oracle.
fn run_oracle(oracle: &Path, requests: &[Json]) -> Vec<Outcome> {
    let mut child = match Command::new(oracle)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => panic!("cannot run the CEL oracle {}: {e}", oracle.display()),
    };
    let Some(mut stdin) = child.stdin.take() else {
        panic!("the oracle has no stdin");
    };
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let Some(stdout) = child.stdout.take() else {
        panic!("the oracle has no stdout");
    };
    let mut outcomes = Vec::with_capacity(requests.len());
    for line in BufReader::new(stdout).lines() {
        let line = match line {
            Ok(line) => line,
            Err(e) => panic!("reading the oracle's output: {e}"),
        };
        let response: Json = match serde_json::from_str(&line) {
            Ok(json) => json,
            Err(e) => panic!("the oracle wrote `{line}`, not JSON: {e}"),
        };
        outcomes.push(match (response.get("result"), response.get("error")) {
            (_, Some(error)) => Outcome::Error(
                response
                    .get("phase")
                    .and_then(Json::as_str)
                    .unwrap_or("?")
                    .to_string(),
                error.as_str().unwrap_or("").to_string(),
            ),
            (Some(result), None) => Outcome::Value(result.clone()),
            (None, None) => Outcome::Value(Json::Null),
        });
    }
    match writer.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("writing to the oracle: {e}"),
        Err(_) => panic!("the thread writing to the oracle panicked"),
    }
    match child.wait() {
        Ok(status) if status.success() => {}
        other => panic!("the oracle ended with {other:?}"),
    }
    assert_eq!(
        outcomes.len(),
        requests.len(),
        "the oracle answered {} of {} requests",
        outcomes.len(),
        requests.len()
    );
    outcomes
}

/// A value as JSON, as `switchyard cel` prints it, but a type value as its name.
fn to_json(value: &Value) -> Result<Json, String> {
    match value {
        Value::Type(t) => Ok(Json::String(t.name().to_string())),
        Value::List(items) => items
            .iter()
            .map(to_json)
            .collect::<Result<Vec<_>, _>>()
            .map(Json::Array),
        Value::Map(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map.iter() {
                if matches!(k, Key::Double(_) | Key::Null) {
                    return Err(format!(
                        "a map key of type {} has no JSON form",
                        k.to_value().type_name()
                    ));
                }
                out.insert(k.to_json_key(), to_json(v)?);
            }
            Ok(Json::Object(out))
        }
        Value::Optional(Some(inner)) => to_json(inner),
        other => other.to_json().map_err(|e| e.message),
    }
}

/// Switchyard's outcome for `expr` with `bindings`: compiled in strict mode (type-checked as
/// Kubernetes checks, every variable `dyn` as the oracle declares them), evaluated as
/// `switchyard cel --strict` evaluates it.
fn switchyard(env: &Env, expr: &str, bindings: &BTreeMap<String, Value>) -> Outcome {
    let run = || {
        let mut types = TypeEnv::new();
        for name in bindings.keys() {
            types.add_variable(name, CheckType::Dyn);
        }
        let program = match env.compile_with_types(expr, &types) {
            Ok(program) => program,
            Err(e) => {
                return Outcome::Error(
                    "compile".into(),
                    format!("{}:{}: {}", e.line, e.column, e.message),
                );
            }
        };
        let mut activation = Activation::new(env);
        for (name, value) in bindings {
            activation.bind(name, value.clone());
        }
        match program.eval(&activation) {
            Ok(value) => match to_json(&value) {
                Ok(json) => Outcome::Value(json),
                Err(message) => Outcome::Error("result".into(), message),
            },
            Err(e) => Outcome::Error("eval".into(), e.message),
        }
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Error("panic".into(), "Switchyard panicked".into()),
    }
}

/// The classes [`classify`] knows, but `other`.
const CLASSES: [&str; 5] = [
    "dyn-receiver",
    "free-type",
    "kubernetes-panic",
    "library-types",
    "program",
];

/// What an expression holds when cel-go may leave a type free in it (see [`classify`]).
const FREE_TYPES: [&str; 5] = ["[]", "{}", "optional.none()", "[?'", ".flatten()"];

/// The calls of optionals whose receiver may be a `dyn` (see [`classify`]).
const OPTIONAL_CALLS: [&str; 3] = [".or(", ".orValue(", ".optMap("];

/// The calls that make a value of a Kubernetes library type (see [`classify`]).
const LIBRARY_VALUES: [&str; 6] = [
    "quantity(",
    "isQuantity(",
    "url(",
    "ip(",
    "cidr(",
    "semver(",
];

/// The class of a disagreement, for the generated expressions.
///
/// - `kubernetes-panic`: cel-go panics (its homogeneous literal validator takes the type of
///   an optional entry `?k: x[?j]`, `[?x[?j]]` of a `dyn` `x` for an optional, which cel-go
///   types `dyn`), Switchyard evaluates it.
/// - `free-type`: the expression holds an empty literal (`[]`, `{}`), `optional.none()`,
///   `x[?'k']` or `flatten()`: cel-go leaves the type of their elements (of `x[?'k']` of a
///   `dyn` `x`, the value; of `flatten()` of a list of `dyn`, the elements) free, and binds
///   it to the first overload that accepts it or to what it meets later
///   (`[].map(x, x - 1.0)` is a `list(double)`, `[[], [1]] + y` types `[]` by `y`), so it
///   refuses, computes or checks differently what follows; Switchyard keeps such types
///   `dyn`.
/// - `dyn-receiver`: `or`, `orValue` or `optMap` of a `dyn` receiver: cel-go types the
///   result by the alternative (or leaves the mapped value free) and binds the call that
///   follows to that type's overload, while at run time a receiver that is not an optional
///   is returned as it is (`string(name.orValue(1))` fails as `string(int)` of a string).
/// - `program`: cel-go fails while planning the program (it evaluates constant calls then,
///   `uint(-1)` even in a branch never taken), Switchyard evaluates it.
/// - `library-types`: Kubernetes' checker refuses the expression through the type of a
///   library value (`c ? false : q.asInteger()`, `q.asInteger() == 1u`): Switchyard's
///   checker leaves library values and their functions' results `dyn` (never reported),
///   so the error surfaces at evaluation, or not at all in a branch not taken.
/// - `other`: anything else.
fn classify(expr: &str, kubernetes: &Outcome, switchyard: &Outcome) -> &'static str {
    match (kubernetes, switchyard) {
        (Outcome::Error(_, message), _) if message.starts_with("panic:") => "kubernetes-panic",
        (Outcome::Error(phase, _), Outcome::Value(_)) if phase == "program" => "program",
        _ if FREE_TYPES.iter().any(|p| expr.contains(p)) => "free-type",
        (Outcome::Error(phase, _), _)
            if phase == "check" && LIBRARY_VALUES.iter().any(|p| expr.contains(p)) =>
        {
            "library-types"
        }
        _ if OPTIONAL_CALLS.iter().any(|p| expr.contains(p)) => "dyn-receiver",
        _ => "other",
    }
}

struct Known {
    /// Expression -> reason.
    expressions: BTreeMap<String, String>,
    /// Tolerated classes of generated disagreements.
    classes: BTreeSet<String>,
}

fn known_differences() -> Known {
    let path = data_dir().join("known-differences.txt");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let mut known = Known {
        expressions: BTreeMap::new(),
        classes: BTreeSet::new(),
    };
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((expr, reason)) = line.split_once('\t') else {
            panic!(
                "{}:{}: expected `EXPRESSION<TAB>REASON`",
                path.display(),
                n + 1
            );
        };
        assert!(
            !reason.trim().is_empty(),
            "{}:{}: no reason given",
            path.display(),
            n + 1
        );
        if let Some(class) = expr.strip_prefix("class:") {
            assert!(
                CLASSES.contains(&class),
                "{}:{}: unknown class `{class}` (known: {CLASSES:?})",
                path.display(),
                n + 1
            );
            known.classes.insert(class.to_string());
        } else if known
            .expressions
            .insert(expr.to_string(), reason.to_string())
            .is_some()
        {
            panic!("{}:{}: listed twice", path.display(), n + 1);
        }
    }
    known
}

struct Case {
    expr: String,
    bindings: serde_json::Map<String, Json>,
}

fn corpus(default_bindings: &serde_json::Map<String, Json>) -> Vec<Case> {
    let path = data_dir().join("corpus.jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let mut cases = Vec::new();
    let mut seen = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let json: Json = match serde_json::from_str(line) {
            Ok(json) => json,
            Err(e) => panic!("{}:{}: {e}", path.display(), n + 1),
        };
        let Some(expr) = json.get("expr").and_then(Json::as_str) else {
            panic!("{}:{}: no \"expr\"", path.display(), n + 1);
        };
        assert!(
            seen.insert(expr.to_string()),
            "{}:{}: `{expr}` is already in the corpus",
            path.display(),
            n + 1
        );
        let bindings = match json.get("bindings") {
            Some(Json::Object(map)) => map.clone(),
            Some(_) => panic!("{}:{}: \"bindings\" must be a map", path.display(), n + 1),
            None => default_bindings.clone(),
        };
        cases.push(Case {
            expr: expr.to_string(),
            bindings,
        });
    }
    cases
}

/// `text` on one line, at most `width` characters.
fn cell(text: &str, width: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\t' { ' ' } else { c })
        .collect();
    if flat.chars().count() <= width {
        flat
    } else {
        let cut: String = flat.chars().take(width.saturating_sub(3)).collect();
        format!("{cut}...")
    }
}

fn table(title: &str, rows: &[(String, Outcome, Outcome)]) -> String {
    let mut out = format!("\n{title} ({}):\n", rows.len());
    for (expr, kubernetes, switchyard) in rows {
        let _ = writeln!(out, "  {}", cell(expr, 160));
        let _ = writeln!(out, "      kubernetes: {}", cell(&kubernetes.show(), 150));
        let _ = writeln!(out, "      switchyard: {}", cell(&switchyard.show(), 150));
    }
    out
}

#[test]
fn switchyard_agrees_with_kubernetes() {
    let Some(oracle) = oracle_path() else {
        return;
    };
    let object_path = data_dir().join("object.json");
    let object: Json = match std::fs::read_to_string(&object_path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
    {
        Ok(json) => json,
        Err(e) => panic!("{}: {e}", object_path.display()),
    };
    let mut default_bindings = serde_json::Map::new();
    default_bindings.insert("self".into(), object.clone());

    let known = known_differences();
    let cases = corpus(&default_bindings);
    let count: usize = match std::env::var("SWITCHYARD_CEL_DIFF_COUNT") {
        Ok(n) => match n.parse() {
            Ok(n) => n,
            Err(e) => panic!("SWITCHYARD_CEL_DIFF_COUNT=`{n}`: {e}"),
        },
        Err(_) => 200,
    };
    let seed: u64 = match std::env::var("SWITCHYARD_CEL_DIFF_SEED") {
        Ok(n) => match n.parse() {
            Ok(n) => n,
            Err(e) => panic!("SWITCHYARD_CEL_DIFF_SEED=`{n}`: {e}"),
        },
        Err(_) => 1,
    };
    let generated = generate(seed, count);

    let mut requests: Vec<Json> = cases
        .iter()
        .map(|c| json!({"expr": c.expr, "bindings": c.bindings}))
        .collect();
    requests.extend(
        generated
            .iter()
            .map(|e| json!({"expr": e, "bindings": default_bindings})),
    );
    let kubernetes = run_oracle(&oracle, &requests);

    let env = Env::kubernetes().strict();
    let mut unlisted = Vec::new();
    let mut listed = 0;
    let mut agreed = BTreeSet::new();
    for (case, k) in cases.iter().zip(&kubernetes) {
        let bindings: BTreeMap<String, Value> = case
            .bindings
            .iter()
            .map(|(name, json)| (name.clone(), Value::from_json(json)))
            .collect();
        let s = switchyard(&env, &case.expr, &bindings);
        if agree(k, &s) {
            agreed.insert(case.expr.clone());
        } else if known.expressions.contains_key(&case.expr) {
            listed += 1;
        } else {
            unlisted.push((case.expr.clone(), k.clone(), s));
        }
    }
    let in_corpus: BTreeSet<&str> = cases.iter().map(|c| c.expr.as_str()).collect();
    let stale: Vec<(&String, &String)> = known
        .expressions
        .iter()
        .filter(|(expr, _)| agreed.contains(*expr) || !in_corpus.contains(expr.as_str()))
        .collect();

    let self_binding: BTreeMap<String, Value> =
        BTreeMap::from([("self".to_string(), Value::from_json(&object))]);
    let mut generated_failures = Vec::new();
    let mut tolerated: BTreeMap<&str, Vec<(String, Outcome, Outcome)>> = BTreeMap::new();
    let mut generated_agreed = 0;
    let mut generated_values = 0;
    for (expr, k) in generated.iter().zip(&kubernetes[cases.len()..]) {
        let s = switchyard(&env, expr, &self_binding);
        if agree(k, &s) {
            generated_agreed += 1;
            if matches!(s, Outcome::Value(_)) {
                generated_values += 1;
            }
            continue;
        }
        let class = classify(expr, k, &s);
        let row = (expr.clone(), k.clone(), s);
        if known.classes.contains(class) {
            tolerated.entry(class).or_default().push(row);
        } else {
            generated_failures.push(row);
        }
    }

    let mut report = format!(
        "corpus: {} expressions, {} agree, {} listed in known-differences.txt, {} not listed\n\
         generated (seed {seed}): {} expressions, {generated_agreed} agree ({generated_values} with a value, \
         the rest both errors), {} of a tolerated class, {} not\n",
        cases.len(),
        agreed.len(),
        listed,
        unlisted.len(),
        generated.len(),
        tolerated.values().map(Vec::len).sum::<usize>(),
        generated_failures.len(),
    );
    for (class, rows) in &tolerated {
        let shown: Vec<_> = rows.iter().take(3).cloned().collect();
        report += &table(
            &format!(
                "generated, tolerated class `{class}` ({} in all, the first shown)",
                rows.len()
            ),
            &shown,
        );
    }
    eprintln!("{report}");

    // For updating the list: the unlisted corpus disagreements, `EXPR<TAB>kubernetes<TAB>switchyard`.
    if let Ok(path) = std::env::var("SWITCHYARD_CEL_DIFF_DUMP") {
        let dump: String = unlisted
            .iter()
            .map(|(expr, k, s)| format!("{expr}\t{}\t{}\n", k.show(), s.show()))
            .collect();
        if let Err(e) = std::fs::write(&path, dump) {
            panic!("{path}: {e}");
        }
    }
    let mut failure = String::new();
    if !unlisted.is_empty() {
        failure += &table(
            "corpus disagreements not in known-differences.txt",
            &unlisted,
        );
    }
    if !stale.is_empty() {
        let _ = writeln!(
            failure,
            "\nknown-differences.txt lists expressions that now agree or are not in the corpus \
             (remove them) ({}):",
            stale.len()
        );
        for (expr, reason) in &stale {
            let _ = writeln!(failure, "  {}  ({reason})", cell(expr, 120));
        }
    }
    if !generated_failures.is_empty() {
        failure += &table(
            &format!("generated disagreements of no tolerated class (seed {seed})"),
            &generated_failures,
        );
    }
    assert!(failure.is_empty(), "{report}{failure}");
}

// ---- the expression generator -------------------------------------------------------------

/// splitmix64: a small deterministic generator (no dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap_or(0)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    Int,
    Uint,
    Double,
    String,
    Bool,
    IntList,
    StringList,
    /// `list(list(int))`.
    NestedList,
    Timestamp,
    Duration,
    /// A Kubernetes quantity.
    Quantity,
    /// `optional(string)`.
    OptString,
    /// `optional(int)`.
    OptInt,
    /// `map(string, string)`.
    StringMap,
}

const TYPES: [Ty; 14] = [
    Ty::Int,
    Ty::Uint,
    Ty::Double,
    Ty::String,
    Ty::Bool,
    Ty::IntList,
    Ty::StringList,
    Ty::NestedList,
    Ty::Timestamp,
    Ty::Duration,
    Ty::Quantity,
    Ty::OptString,
    Ty::OptInt,
    Ty::StringMap,
];

/// The types an operand of the wrong type is drawn from: not a quantity, whose equality
/// with other types is a listed disagreement (`quantity('1') == 1`).
const OTHER_TYPES: [Ty; 13] = [
    Ty::Int,
    Ty::Uint,
    Ty::Double,
    Ty::String,
    Ty::Bool,
    Ty::IntList,
    Ty::StringList,
    Ty::NestedList,
    Ty::Timestamp,
    Ty::Duration,
    Ty::OptString,
    Ty::OptInt,
    Ty::StringMap,
];

/// The types `==`, `!=` and the orderings compare (both operands of one type).
const COMPARED: [Ty; 8] = [
    Ty::Int,
    Ty::Uint,
    Ty::Double,
    Ty::String,
    Ty::Bool,
    Ty::Timestamp,
    Ty::Duration,
    Ty::IntList,
];

/// `count` expressions over `self` (the benchmark object): mostly well typed, about one in
/// six with an operand of another type somewhere (so ill typed for Kubernetes' checker).
/// Numbers, strings and their conversions (Go's parsing: `'+1'`, `'0x1p-2'`, `'1_000'`),
/// `string.format` with every clause, lists (nested ones, `flatten`, `sort`, `distinct`,
/// `slice`, `first`), optionals, maps, timestamps (at offsets, with time zones), durations
/// and quantities.
///
/// To keep the generated disagreements to the tolerated classes, the generator avoids what
/// the corpus already lists one by one: `x in []` (cel-go answers `false` without
/// evaluating `x`), iterating a map literal (cel-go iterates it in Go's random order),
/// regex classes (`\w`, ...), `string()` of a quantity and a quantity compared with
/// another type.
fn generate(seed: u64, count: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let ty = TYPES[rng.below(TYPES.len())];
            expr(&mut rng, ty, 3)
        })
        .collect()
}

/// A `string.format` call: a format and arguments of the types its clauses take.
fn format_call(rng: &mut Rng, d: usize) -> String {
    let templates: [(&str, &[Ty]); 20] = [
        ("%s", &[Ty::String]),
        ("%d", &[Ty::Int]),
        ("%s-%d", &[Ty::String, Ty::Int]),
        ("%.2f", &[Ty::Double]),
        ("%f", &[Ty::Double]),
        ("%.0f", &[Ty::Double]),
        ("%e", &[Ty::Double]),
        ("%.3e", &[Ty::Double]),
        ("%.12e", &[Ty::Double]),
        ("%x", &[Ty::Int]),
        ("%X", &[Ty::String]),
        ("%o", &[Ty::Uint]),
        ("%b", &[Ty::Int]),
        ("%s", &[Ty::IntList]),
        ("%s", &[Ty::StringList]),
        ("%s", &[Ty::Double]),
        ("%s and %s", &[Ty::Timestamp, Ty::Duration]),
        ("%%%d%%", &[Ty::Uint]),
        ("%s %s", &[Ty::Bool, Ty::NestedList]),
        ("%d items", &[Ty::Int, Ty::Int]),
    ];
    let (template, types) = templates[rng.below(templates.len())];
    let args: Vec<String> = types.iter().map(|t| expr(rng, *t, d)).collect();
    format!("'{template}'.format([{}])", args.join(", "))
}

/// An expression of type `ty` (or, now and then, deliberately of another).
fn expr(rng: &mut Rng, ty: Ty, depth: usize) -> String {
    if depth > 0 && rng.chance(16) {
        // an operand of a random type where `ty` is expected
        let other = OTHER_TYPES[rng.below(OTHER_TYPES.len())];
        return leaf(rng, other);
    }
    if depth == 0 || rng.chance(25) {
        return leaf(rng, ty);
    }
    let d = depth - 1;
    match ty {
        Ty::Int => match rng.below(17) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Int, d),
                rng.pick(&["+", "-", "*", "/", "%"]),
                expr(rng, Ty::Int, d)
            ),
            1 => format!("size({})", expr(rng, Ty::String, d)),
            2 => format!("size({})", expr(rng, Ty::IntList, d)),
            3 => format!("int({})", expr(rng, Ty::Uint, d)),
            4 => format!(
                "{}.indexOf({})",
                expr(rng, Ty::String, d),
                leaf(rng, Ty::String)
            ),
            5 => format!("{}.sum()", expr(rng, Ty::IntList, d)),
            6 => format!("{}.max()", expr(rng, Ty::IntList, d)),
            7 => format!(
                "({} ? {} : {})",
                expr(rng, Ty::Bool, d),
                expr(rng, Ty::Int, d),
                expr(rng, Ty::Int, d)
            ),
            8 => format!("int({})", numeric_string(rng)),
            9 => format!(
                "{}.{}()",
                expr(rng, Ty::Timestamp, d),
                rng.pick(&[
                    "getFullYear",
                    "getMonth",
                    "getDate",
                    "getDayOfWeek",
                    "getDayOfYear",
                    "getHours",
                    "getMinutes",
                    "getSeconds",
                    "getMilliseconds",
                ])
            ),
            10 => format!(
                "{}.{}({})",
                expr(rng, Ty::Timestamp, d),
                rng.pick(&["getHours", "getDate", "getDayOfWeek", "getMinutes"]),
                rng.pick(&[
                    "'UTC'",
                    "'America/New_York'",
                    "'Asia/Kolkata'",
                    "'+05:30'",
                    "'-02:00'",
                    "'02:00'",
                    "'Nowhere/Else'",
                ])
            ),
            11 => format!(
                "{}.{}()",
                expr(rng, Ty::Duration, d),
                rng.pick(&["getHours", "getMinutes", "getSeconds", "getMilliseconds"])
            ),
            12 => format!(
                "int({})",
                if rng.chance(50) {
                    expr(rng, Ty::Timestamp, d)
                } else {
                    expr(rng, Ty::Duration, d)
                }
            ),
            13 => match rng.below(3) {
                0 => format!("{}.asInteger()", expr(rng, Ty::Quantity, d)),
                1 => format!(
                    "{}.compareTo({})",
                    expr(rng, Ty::Quantity, d),
                    expr(rng, Ty::Quantity, d)
                ),
                _ => format!("sign({})", expr(rng, Ty::Quantity, d)),
            },
            14 => format!(
                "{}.orValue({})",
                expr(rng, Ty::OptInt, d),
                leaf(rng, Ty::Int)
            ),
            15 => format!("size({})", expr(rng, Ty::StringMap, d)),
            _ => format!(
                "{}.{}({})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["indexOf", "lastIndexOf"]),
                leaf(rng, Ty::Int)
            ),
        },
        Ty::Uint => match rng.below(5) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Uint, d),
                rng.pick(&["+", "-", "*", "/", "%"]),
                expr(rng, Ty::Uint, d)
            ),
            1 => format!("uint({})", expr(rng, Ty::Int, d)),
            2 => format!(
                "({} ? {} : {})",
                expr(rng, Ty::Bool, d),
                expr(rng, Ty::Uint, d),
                expr(rng, Ty::Uint, d)
            ),
            3 => format!("uint({})", numeric_string(rng)),
            _ => leaf(rng, Ty::Uint),
        },
        Ty::Double => match rng.below(7) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Double, d),
                rng.pick(&["+", "-", "*", "/"]),
                expr(rng, Ty::Double, d)
            ),
            1 => format!("double({})", expr(rng, Ty::Int, d)),
            2 => format!("-{}", expr(rng, Ty::Double, d)),
            3 => format!("double({})", numeric_string(rng)),
            4 => format!("{}.asApproximateFloat()", expr(rng, Ty::Quantity, d)),
            5 => format!("double({})", expr(rng, Ty::Uint, d)),
            _ => leaf(rng, Ty::Double),
        },
        Ty::String => match rng.below(19) {
            0 => format!(
                "({} + {})",
                expr(rng, Ty::String, d),
                expr(rng, Ty::String, d)
            ),
            1 => format!("string({})", expr(rng, Ty::Int, d)),
            2 => format!("{}.upperAscii()", expr(rng, Ty::String, d)),
            3 => format!(
                "{}.substring({})",
                expr(rng, Ty::String, d),
                rng.pick(&["0", "1", "3", "-1", "100"])
            ),
            4 => format!(
                "{}.replace({}, {})",
                expr(rng, Ty::String, d),
                leaf(rng, Ty::String),
                leaf(rng, Ty::String)
            ),
            5 => format!(
                "{}.join({})",
                expr(rng, Ty::StringList, d),
                leaf(rng, Ty::String)
            ),
            6 => format!("{}.trim()", expr(rng, Ty::String, d)),
            7 => format!(
                "{}.charAt({})",
                expr(rng, Ty::String, d),
                rng.pick(&["0", "1", "5", "-1"])
            ),
            8 => format!(
                "({} ? {} : {})",
                expr(rng, Ty::Bool, d),
                expr(rng, Ty::String, d),
                expr(rng, Ty::String, d)
            ),
            9 | 10 => format_call(rng, d),
            11 => format!(
                "string({})",
                match rng.below(5) {
                    0 => expr(rng, Ty::Double, d),
                    1 => expr(rng, Ty::Timestamp, d),
                    2 => expr(rng, Ty::Duration, d),
                    3 => expr(rng, Ty::Uint, d),
                    _ => expr(rng, Ty::Bool, d),
                }
            ),
            12 => format!("strings.quote({})", expr(rng, Ty::String, d)),
            13 => format!(
                "{}.substring({}, {})",
                expr(rng, Ty::String, d),
                rng.pick(&["0", "1", "2"]),
                rng.pick(&["1", "3", "4", "50"])
            ),
            14 => format!(
                "{}.{}({}, {})",
                expr(rng, Ty::String, d),
                rng.pick(&["indexOf", "lastIndexOf"]),
                leaf(rng, Ty::String),
                rng.pick(&["0", "1", "3", "-1", "100"])
            ),
            15 => format!(
                "{}.orValue({})",
                expr(rng, Ty::OptString, d),
                leaf(rng, Ty::String)
            ),
            16 => format!("{}.lowerAscii()", expr(rng, Ty::String, d)),
            17 => format!(
                "{}[?{}].orValue('-')",
                expr(rng, Ty::StringMap, d),
                rng.pick(&["'app'", "'tier'", "'a'", "'nope'"])
            ),
            _ => format!("{}[0]", expr(rng, Ty::StringList, d)),
        },
        Ty::Bool => match rng.below(19) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Bool, d),
                rng.pick(&["&&", "||", "==", "!="]),
                expr(rng, Ty::Bool, d)
            ),
            1 => format!("!{}", expr(rng, Ty::Bool, d)),
            2 | 3 => {
                let t = COMPARED[rng.below(COMPARED.len())];
                let ops: &[&str] = if t == Ty::IntList {
                    &["==", "!="]
                } else {
                    &["==", "!=", "<", "<=", ">", ">="]
                };
                format!(
                    "({} {} {})",
                    expr(rng, t, d),
                    rng.pick(ops),
                    expr(rng, t, d)
                )
            }
            4 => format!(
                "{}.{}({})",
                expr(rng, Ty::String, d),
                rng.pick(&["startsWith", "endsWith", "contains", "matches"]),
                leaf(rng, Ty::String)
            ),
            5 => format!(
                "{}.{}(x, x {} {})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["all", "exists", "exists_one"]),
                rng.pick(&["<", ">", "=="]),
                leaf(rng, Ty::Int)
            ),
            6 => {
                let mut list = expr(rng, Ty::IntList, d);
                if list == "[]" {
                    // `x in []`: see above
                    list = "[1, 2, 3]".into();
                }
                format!("{} in {list}", leaf(rng, Ty::Int))
            }
            7 => format!(
                "{} in {}",
                leaf(rng, Ty::String),
                expr(rng, Ty::StringList, d)
            ),
            8 => format!(
                "has(self.{})",
                rng.pick(&[
                    "spec.replicas",
                    "spec.paused",
                    "metadata.labels.app",
                    "metadata.labels.nope",
                    "status.readyReplicas",
                ])
            ),
            9 => format!(
                "self.metadata.labels.{}(k, v, {})",
                rng.pick(&["all", "exists", "existsOne"]),
                rng.pick(&["k == v", "v.startsWith('p')", "size(k) > 3", "k != 'app'"])
            ),
            10 => format!("{}.isSorted()", expr(rng, Ty::IntList, d)),
            11 => format!("bool({})", bool_string(rng)),
            12 => format!(
                "{}.hasValue()",
                if rng.chance(50) {
                    expr(rng, Ty::OptString, d)
                } else {
                    expr(rng, Ty::OptInt, d)
                }
            ),
            13 => format!(
                "{}.{}({})",
                expr(rng, Ty::Quantity, d),
                rng.pick(&["isGreaterThan", "isLessThan"]),
                expr(rng, Ty::Quantity, d)
            ),
            // Both operands quantities: see `OTHER_TYPES`.
            14 => format!(
                "({} {} {})",
                leaf(rng, Ty::Quantity),
                rng.pick(&["==", "!="]),
                leaf(rng, Ty::Quantity)
            ),
            15 => format!("isQuantity({})", quantity_string(rng)),
            16 => format!(
                "optional.ofNonZeroValue({}).hasValue()",
                match rng.below(5) {
                    0 => expr(rng, Ty::Timestamp, d),
                    1 => expr(rng, Ty::Duration, d),
                    2 => expr(rng, Ty::String, d),
                    3 => expr(rng, Ty::IntList, d),
                    _ => expr(rng, Ty::Double, d),
                }
            ),
            17 => format!(
                "{} in {}",
                rng.pick(&["'app'", "'tier'", "'a'", "'nope'"]),
                expr(rng, Ty::StringMap, d)
            ),
            _ => format!(
                "({} {} {})",
                expr(rng, Ty::StringMap, d),
                rng.pick(&["==", "!="]),
                expr(rng, Ty::StringMap, d)
            ),
        },
        Ty::IntList => match rng.below(15) {
            0 => format!(
                "{}.map(x, x {} {})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["+", "*", "-", "/", "%"]),
                leaf(rng, Ty::Int)
            ),
            1 => format!(
                "{}.filter(x, x {} {})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["<", ">", "==", "!="]),
                leaf(rng, Ty::Int)
            ),
            2 => format!(
                "({} + {})",
                expr(rng, Ty::IntList, d),
                expr(rng, Ty::IntList, d)
            ),
            3 => format!(
                "{}.{}()",
                expr(rng, Ty::IntList, d),
                rng.pick(&["sort", "distinct", "reverse"])
            ),
            4 => format!(
                "{}.slice({}, {})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["0", "1", "2"]),
                rng.pick(&["1", "2", "3", "20"])
            ),
            5 => format!("lists.range({})", rng.pick(&["0", "3", "5", "-1"])),
            6 => format!("{}.transformList(i, v, i + v)", expr(rng, Ty::IntList, d)),
            7 => format!("{}.map(s, size(s))", expr(rng, Ty::StringList, d)),
            8 => format!("{}.flatten()", expr(rng, Ty::NestedList, d)),
            9 => format!(
                "{}.flatten({})",
                expr(rng, Ty::NestedList, d),
                rng.pick(&["0", "1", "2", "-1"])
            ),
            10 => format!("{}.flatten()", expr(rng, Ty::IntList, d)),
            11 => format!(
                "{}.sortBy(x, {})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["-x", "x % 3", "string(x)"])
            ),
            12 => format!("[?{}, {}]", expr(rng, Ty::OptInt, d), leaf(rng, Ty::Int)),
            13 => format!("[{}, {}]", expr(rng, Ty::Int, d), expr(rng, Ty::Int, d)),
            _ => leaf(rng, Ty::IntList),
        },
        Ty::StringList => match rng.below(9) {
            0 => format!(
                "{}.map(s, s + {})",
                expr(rng, Ty::StringList, d),
                leaf(rng, Ty::String)
            ),
            1 => format!(
                "{}.split({})",
                expr(rng, Ty::String, d),
                leaf(rng, Ty::String)
            ),
            2 => format!(
                "{}.{}()",
                expr(rng, Ty::StringList, d),
                rng.pick(&["sort", "distinct", "reverse"])
            ),
            3 => format!("{}.findAll('[a-z]+')", expr(rng, Ty::String, d)),
            4 => format!(
                "{}.filter(s, s.{}({}))",
                expr(rng, Ty::StringList, d),
                rng.pick(&["startsWith", "contains"]),
                leaf(rng, Ty::String)
            ),
            5 => format!(
                "[?{}, {}]",
                expr(rng, Ty::OptString, d),
                leaf(rng, Ty::String)
            ),
            6 => format!(
                "[{}, {}]",
                expr(rng, Ty::String, d),
                expr(rng, Ty::String, d)
            ),
            // The map literals of `leaf` have one key at most: they iterate in one order.
            7 => format!("{}.map(k, k)", leaf(rng, Ty::StringMap)),
            _ => leaf(rng, Ty::StringList),
        },
        Ty::NestedList => match rng.below(4) {
            0 => format!(
                "[{}, {}]",
                expr(rng, Ty::IntList, d),
                expr(rng, Ty::IntList, d)
            ),
            1 => format!("{}.map(x, [x, x])", expr(rng, Ty::IntList, d)),
            2 => format!(
                "({} + {})",
                expr(rng, Ty::NestedList, d),
                expr(rng, Ty::NestedList, d)
            ),
            _ => leaf(rng, Ty::NestedList),
        },
        Ty::Timestamp => match rng.below(6) {
            0 => format!(
                "({} + {})",
                expr(rng, Ty::Timestamp, d),
                expr(rng, Ty::Duration, d)
            ),
            1 => format!(
                "({} - {})",
                expr(rng, Ty::Timestamp, d),
                expr(rng, Ty::Duration, d)
            ),
            2 => format!(
                "({} + {})",
                expr(rng, Ty::Duration, d),
                expr(rng, Ty::Timestamp, d)
            ),
            3 => format!("timestamp(string({}))", expr(rng, Ty::Timestamp, d)),
            4 => format!("timestamp({})", timestamp_string(rng)),
            _ => leaf(rng, Ty::Timestamp),
        },
        Ty::Duration => match rng.below(6) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Duration, d),
                rng.pick(&["+", "-"]),
                expr(rng, Ty::Duration, d)
            ),
            1 => format!(
                "({} - {})",
                expr(rng, Ty::Timestamp, d),
                expr(rng, Ty::Timestamp, d)
            ),
            2 => format!("-{}", expr(rng, Ty::Duration, d)),
            3 => format!("duration(string({}))", expr(rng, Ty::Duration, d)),
            4 => format!("duration({})", duration_string(rng)),
            _ => leaf(rng, Ty::Duration),
        },
        Ty::Quantity => match rng.below(4) {
            0 => format!(
                "{}.{}({})",
                expr(rng, Ty::Quantity, d),
                rng.pick(&["add", "sub"]),
                expr(rng, Ty::Quantity, d)
            ),
            1 => format!(
                "{}.{}({})",
                expr(rng, Ty::Quantity, d),
                rng.pick(&["add", "sub"]),
                expr(rng, Ty::Int, d)
            ),
            2 => format!("quantity({})", quantity_string(rng)),
            _ => leaf(rng, Ty::Quantity),
        },
        Ty::OptString => match rng.below(6) {
            0 => format!(
                "{}.or({})",
                expr(rng, Ty::OptString, d),
                expr(rng, Ty::OptString, d)
            ),
            1 => format!("optional.of({})", expr(rng, Ty::String, d)),
            2 => format!(
                "{}.optMap(s, s + {})",
                opt_map_receiver(rng),
                leaf(rng, Ty::String)
            ),
            3 => format!(
                "{}.{}()",
                expr(rng, Ty::StringList, d),
                rng.pick(&["first", "last"])
            ),
            4 => format!("optional.ofNonZeroValue({})", expr(rng, Ty::String, d)),
            _ => leaf(rng, Ty::OptString),
        },
        Ty::OptInt => match rng.below(5) {
            0 => format!(
                "{}.optMap(x, x * {})",
                expr(rng, Ty::OptInt, d),
                leaf(rng, Ty::Int)
            ),
            1 => format!(
                "{}.{}()",
                expr(rng, Ty::IntList, d),
                rng.pick(&["first", "last"])
            ),
            2 => format!(
                "{}.or({})",
                expr(rng, Ty::OptInt, d),
                expr(rng, Ty::OptInt, d)
            ),
            3 => format!("optional.ofNonZeroValue({})", expr(rng, Ty::Int, d)),
            _ => leaf(rng, Ty::OptInt),
        },
        Ty::StringMap => match rng.below(4) {
            0 => format!(
                "{{{}: {}, {}: {}}}",
                rng.pick(&["'a'", "'b'", "self.metadata.name"]),
                expr(rng, Ty::String, d),
                rng.pick(&["'a'", "'c'", "self.metadata.namespace"]),
                expr(rng, Ty::String, d)
            ),
            1 => format!(
                "{{'a': {}, ?{}: {}}}",
                expr(rng, Ty::String, d),
                rng.pick(&["'a'", "'b'"]),
                expr(rng, Ty::OptString, d)
            ),
            2 => format!(
                "{}.transformMap(k, v, v + {})",
                leaf(rng, Ty::StringMap),
                leaf(rng, Ty::String)
            ),
            _ => leaf(rng, Ty::StringMap),
        },
    }
}

/// The receiver of `optMap`: an optional whose value has a type. cel-go types `x[?k]` of a
/// `dyn` `x` as `dyn`, and `optional.none()` as an optional of a free type, so that the
/// value `optMap` names has a free type, which cel-go binds to the first overload that
/// accepts it, as the elements of `[]` (see the `empty-list` class): the corpus has those.
fn opt_map_receiver(rng: &mut Rng) -> String {
    rng.pick(&[
        "optional.of('a')",
        "optional.of(self.metadata.name)",
        "self.?spec.?strategy.?type",
        "self.metadata.?annotations.?missing",
        "optional.ofNonZeroValue('')",
    ])
    .to_string()
}

/// A string literal for `int()`, `uint()` and `double()`: numbers as Go reads them or not.
fn numeric_string(rng: &mut Rng) -> String {
    rng.pick(&[
        "'1'",
        "'+1'",
        "'-0'",
        "'010'",
        "'1_000'",
        "'0x1p-2'",
        "'0x10'",
        "'1e400'",
        "'1e-400'",
        "'inf'",
        "'-Infinity'",
        "'NaN'",
        "'-nan'",
        "' 1'",
        "'1.5'",
        "'.5'",
        "'5.'",
        "'18446744073709551615'",
        "'9223372036854775808'",
        "'-9223372036854775808'",
        "self.metadata.resourceVersion",
        "self.metadata.generation",
    ])
    .to_string()
}

fn bool_string(rng: &mut Rng) -> String {
    rng.pick(&[
        "'true'", "'True'", "'TRUE'", "'tRuE'", "'t'", "'1'", "'F'", "'0'", "'no'", "''",
    ])
    .to_string()
}

fn timestamp_string(rng: &mut Rng) -> String {
    rng.pick(&[
        "'2024-06-01T12:00:00+02:00'",
        "'2024-06-01t12:00:00z'",
        "'2024-06-01T1:00:00Z'",
        "'2024-06-01T12:00:00,25Z'",
        "'2024-02-30T00:00:00Z'",
        "'2024-01-01T00:00:00+24:00'",
        "'2024-01-01T00:00:00.123456789123-05:45'",
        "'0001-01-01T00:00:00Z'",
        "'9999-12-31T23:59:59+01:00'",
        "self.metadata.creationTimestamp",
        "self.metadata.name",
    ])
    .to_string()
}

fn duration_string(rng: &mut Rng) -> String {
    rng.pick(&[
        "'1h30m'",
        "'+1.5s'",
        "'-0'",
        "'1us'",
        "'1µs'",
        "'.5h'",
        "'1d'",
        "'2562047h'",
        "'-9223372036854775808ns'",
        "'9223372036854775808ns'",
        "'1h-1m'",
        "self.spec.strategy.rollingUpdate.maxSurge",
    ])
    .to_string()
}

fn quantity_string(rng: &mut Rng) -> String {
    rng.pick(&[
        "'1Gi'",
        "'500m'",
        "'1.5'",
        "'1e3'",
        "'-2k'",
        "'0.1Mi'",
        "'1.5.5'",
        "'Ki'",
        "self.spec.template.spec.containers[0].resources.limits.cpu",
        "self.spec.template.spec.containers[0].resources.requests.memory",
    ])
    .to_string()
}

fn leaf(rng: &mut Rng, ty: Ty) -> String {
    match ty {
        Ty::Int => rng
            .pick(&[
                "0",
                "1",
                "-1",
                "7",
                "9223372036854775807",
                "-9223372036854775808",
                "self.spec.replicas",
                "self.metadata.generation",
                "self.spec.clusters[1].weight",
                "self.status.readyReplicas",
                "self.spec.template.spec.containers[0].ports[0].containerPort",
            ])
            .to_string(),
        Ty::Uint => rng
            .pick(&[
                "0u",
                "1u",
                "7u",
                "18446744073709551615u",
                "uint(self.spec.replicas)",
            ])
            .to_string(),
        Ty::Double => rng
            .pick(&[
                "0.0",
                "1.5",
                "-2.25",
                "0.5",
                "-0.0",
                "1e100",
                "0.000123",
                "1234567.891",
                "2.5",
                "double(self.spec.replicas)",
                "(1.0 / 0.0)",
                "(0.0 / 0.0)",
            ])
            .to_string(),
        Ty::String => rng
            .pick(&[
                "''",
                "'a'",
                "'héllo'",
                "'👍'",
                "'-'",
                "'l'",
                "'a,b,,c'",
                "'NaN'",
                "self.metadata.name",
                "self.metadata.namespace",
                "self.metadata.labels.tier",
                "self.spec.strategy.type",
                "self.spec.clusters[0].region",
                "self.spec.template.spec.containers[2].image",
            ])
            .to_string(),
        Ty::Bool => rng
            .pick(&[
                "true",
                "false",
                "self.spec.clusters[0].ready",
                "self.spec.clusters[1].ready",
            ])
            .to_string(),
        Ty::IntList => rng
            .pick(&[
                "[]",
                "[1, 2, 3]",
                "[3, 1, 2, 3]",
                "[-1]",
                "self.spec.clusters.map(c, c.weight)",
                "self.spec.template.spec.containers.map(c, c.ports[0].containerPort)",
            ])
            .to_string(),
        Ty::StringList => rng
            .pick(&[
                "['b', 'a']",
                "['']",
                "self.spec.clusters.map(c, c.region)",
                "self.metadata.labels.map(k, k)",
                "self.spec.template.spec.containers.map(c, c.name)",
            ])
            .to_string(),
        Ty::NestedList => rng
            .pick(&[
                "[[1, 2], [3]]",
                "[[], [1]]",
                "[[0]]",
                "self.spec.clusters.map(c, [c.weight])",
                "lists.range(3).map(i, lists.range(i))",
            ])
            .to_string(),
        Ty::Timestamp => rng
            .pick(&[
                "timestamp('2024-06-01T12:00:00Z')",
                "timestamp('2024-06-01T12:00:00+02:00')",
                "timestamp('2024-02-29T23:59:59.5-08:00')",
                "timestamp(0)",
                "timestamp(self.metadata.creationTimestamp)",
                "timestamp('0001-01-01T00:00:00Z')",
                "timestamp('9999-12-31T23:59:59Z')",
            ])
            .to_string(),
        Ty::Duration => rng
            .pick(&[
                "duration('1h30m')",
                "duration('-1.5s')",
                "duration('0')",
                "duration('1ms')",
                "duration('24h')",
                "duration('2562047h')",
                "(timestamp('2026-06-01T12:00:00Z') - timestamp(self.metadata.creationTimestamp))",
            ])
            .to_string(),
        Ty::Quantity => rng
            .pick(&[
                "quantity('1Gi')",
                "quantity('500m')",
                "quantity('1.5')",
                "quantity('0')",
                "quantity('1e3')",
                "quantity('-2k')",
                "quantity(self.spec.template.spec.containers[0].resources.limits.cpu)",
                "quantity(self.spec.template.spec.containers[0].resources.requests.memory)",
            ])
            .to_string(),
        Ty::OptString => rng
            .pick(&[
                "optional.of('a')",
                "optional.none()",
                "self.metadata.labels[?'app']",
                "self.metadata.labels[?'nope']",
                "self.?spec.?strategy.?type",
                "self.metadata.?annotations.?missing",
                "optional.ofNonZeroValue('')",
            ])
            .to_string(),
        Ty::OptInt => rng
            .pick(&[
                "optional.of(1)",
                "optional.none()",
                "self.?spec.?replicas",
                "self.?status.?missing",
                "optional.ofNonZeroValue(0)",
                "lists.range(0).first()",
                "[4, 5].last()",
            ])
            .to_string(),
        Ty::StringMap => rng
            .pick(&[
                "self.metadata.labels",
                "self.spec.selector.matchLabels",
                "{'a': 'x'}",
                "{'a': 'x', 'a': 'y'}",
                "{}",
            ])
            .to_string(),
    }
}
