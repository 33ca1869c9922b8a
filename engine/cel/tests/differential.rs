//! Differential test: Switchyard's CEL against Kubernetes' own (cel-go with the API server's
//! base environment, `tools/cel-oracle`).
//!
//! Each expression of `differential/corpus.jsonl` (one `{"expr": "..."}` a line, optionally
//! with `"bindings"`; by default `self` is bound to `differential/object.json`, the benchmark
//! Deployment) is evaluated by both, then a number of generated expressions
//! (`SWITCHYARD_CEL_DIFF_COUNT`, default 200; seed `SWITCHYARD_CEL_DIFF_SEED`, default 1).
//! They agree when both fail (in any phase, whatever the message) or both succeed with the
//! same JSON. Switchyard's side is type-checked as Kubernetes checks first
//! (`TypeEnv::kubernetes`: Kubernetes' checker and validators). Results are compared as
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
use switchyard_cel::check::{Type as CheckType, TypeEnv, check};
use switchyard_cel::{Activation, Env, Value};

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
                out.insert(k.to_json_key(), to_json(v)?);
            }
            Ok(Json::Object(out))
        }
        Value::Optional(Some(inner)) => to_json(inner),
        other => other.to_json().map_err(|e| e.message),
    }
}

/// Switchyard's outcome for `expr` with `bindings`: compiled, type-checked as Kubernetes
/// checks ([`TypeEnv::kubernetes`], every variable `dyn` as the oracle declares them; rules
/// and `switchyard cel` check without Kubernetes' literal validators), evaluated as
/// `switchyard cel` evaluates it.
fn switchyard(env: &Env, expr: &str, bindings: &BTreeMap<String, Value>) -> Outcome {
    let run = || {
        let program = match env.compile(expr) {
            Ok(program) => program,
            Err(e) => return Outcome::Error("compile".into(), e.message),
        };
        let mut types = TypeEnv::new().kubernetes();
        for name in bindings.keys() {
            types.add_variable(name, CheckType::Dyn);
        }
        if let Some(issue) = check(&program, &types).1.first() {
            return Outcome::Error(
                "check".into(),
                format!("{}:{}: {}", issue.line, issue.column, issue.message),
            );
        }
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
const CLASSES: [&str; 2] = ["empty-list", "program"];

/// The class of a disagreement, for the generated expressions.
///
/// - `empty-list`: the expression reads the elements of an empty list literal (`[].`), whose
///   type cel-go binds to the first overload that accepts it: it refuses, fails or computes
///   differently (`0.0` for `0`) what Switchyard, keeping those elements `dyn`, evaluates.
/// - `program`: cel-go fails while planning the program (it evaluates constant calls then,
///   `uint(-1)` even in a branch never taken), Switchyard evaluates it.
/// - `other`: anything else.
fn classify(expr: &str, kubernetes: &Outcome, switchyard: &Outcome) -> &'static str {
    match (kubernetes, switchyard) {
        // cel-go gives the elements of an empty list literal the type of the first overload
        // that accepts them, so what follows `[].` is typed (and run) as that type.
        _ if expr.contains("[].") => "empty-list",
        (Outcome::Error(phase, _), Outcome::Value(_)) if phase == "program" => "program",
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

    let env = Env::kubernetes();
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
}

const TYPES: [Ty; 7] = [
    Ty::Int,
    Ty::Uint,
    Ty::Double,
    Ty::String,
    Ty::Bool,
    Ty::IntList,
    Ty::StringList,
];

/// `count` expressions over `self` (the benchmark object): mostly well typed, about one in
/// six with an operand of another type somewhere (so ill typed for Kubernetes' checker).
///
/// To keep the generated disagreements to the tolerated classes, the generator avoids what
/// the corpus already lists one by one: `string.format`, doubles printed as strings
/// (`string(double)`), `x in []` (cel-go answers `false` without evaluating `x`), map
/// literals (iterated in insertion order by cel-go), strings' `indexOf` with an offset,
/// regex classes (`\w`, ...), and the library types (quantity, IP, ...), which the corpus
/// covers.
fn generate(seed: u64, count: usize) -> Vec<String> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            let ty = TYPES[rng.below(TYPES.len())];
            expr(&mut rng, ty, 3)
        })
        .collect()
}

/// An expression of type `ty` (or, now and then, deliberately of another).
fn expr(rng: &mut Rng, ty: Ty, depth: usize) -> String {
    if depth > 0 && rng.chance(16) {
        // an operand of a random type where `ty` is expected
        let other = TYPES[rng.below(TYPES.len())];
        return leaf(rng, other);
    }
    if depth == 0 || rng.chance(25) {
        return leaf(rng, ty);
    }
    let d = depth - 1;
    match ty {
        Ty::Int => match rng.below(9) {
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
            _ => format!("-{}", expr(rng, Ty::Int, d)),
        },
        Ty::Uint => match rng.below(4) {
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
            _ => leaf(rng, Ty::Uint),
        },
        Ty::Double => match rng.below(4) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Double, d),
                rng.pick(&["+", "-", "*", "/"]),
                expr(rng, Ty::Double, d)
            ),
            1 => format!("double({})", expr(rng, Ty::Int, d)),
            2 => format!("-{}", expr(rng, Ty::Double, d)),
            _ => leaf(rng, Ty::Double),
        },
        Ty::String => match rng.below(10) {
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
            _ => format!("{}[0]", expr(rng, Ty::StringList, d)),
        },
        Ty::Bool => match rng.below(11) {
            0 => format!(
                "({} {} {})",
                expr(rng, Ty::Bool, d),
                rng.pick(&["&&", "||", "==", "!="]),
                expr(rng, Ty::Bool, d)
            ),
            1 => format!("!{}", expr(rng, Ty::Bool, d)),
            2 => {
                let t = TYPES[rng.below(5)];
                format!(
                    "({} {} {})",
                    expr(rng, t, d),
                    rng.pick(&["==", "!=", "<", "<=", ">", ">="]),
                    expr(rng, t, d)
                )
            }
            3 => format!(
                "{}.{}({})",
                expr(rng, Ty::String, d),
                rng.pick(&["startsWith", "endsWith", "contains", "matches"]),
                leaf(rng, Ty::String)
            ),
            4 => format!(
                "{}.{}(x, x {} {})",
                expr(rng, Ty::IntList, d),
                rng.pick(&["all", "exists", "exists_one"]),
                rng.pick(&["<", ">", "=="]),
                leaf(rng, Ty::Int)
            ),
            5 => {
                let mut list = expr(rng, Ty::IntList, d);
                if list == "[]" {
                    // `x in []`: see above
                    list = "[1, 2, 3]".into();
                }
                format!("{} in {list}", leaf(rng, Ty::Int))
            }
            6 => format!(
                "{} in {}",
                leaf(rng, Ty::String),
                expr(rng, Ty::StringList, d)
            ),
            7 => format!(
                "has(self.{})",
                rng.pick(&[
                    "spec.replicas",
                    "spec.paused",
                    "metadata.labels.app",
                    "metadata.labels.nope",
                    "status.readyReplicas",
                ])
            ),
            8 => format!(
                "self.metadata.labels.{}(k, v, {})",
                rng.pick(&["all", "exists", "existsOne"]),
                rng.pick(&["k == v", "v.startsWith('p')", "size(k) > 3", "k != 'app'"])
            ),
            9 => format!("{}.isSorted()", expr(rng, Ty::IntList, d)),
            _ => leaf(rng, Ty::Bool),
        },
        Ty::IntList => match rng.below(9) {
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
            5 => format!("lists.range({})", rng.pick(&["0", "3", "5"])),
            6 => format!("{}.transformList(i, v, i + v)", expr(rng, Ty::IntList, d)),
            7 => format!("{}.map(s, size(s))", expr(rng, Ty::StringList, d)),
            _ => leaf(rng, Ty::IntList),
        },
        Ty::StringList => match rng.below(6) {
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
            _ => leaf(rng, Ty::StringList),
        },
    }
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
            .pick(&["0.0", "1.5", "-2.25", "0.5", "double(self.spec.replicas)"])
            .to_string(),
        Ty::String => rng
            .pick(&[
                "''",
                "'a'",
                "'héllo'",
                "'👍'",
                "'-'",
                "'l'",
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
    }
}
