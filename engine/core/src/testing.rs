//! Running a pack's test cases (`switchyard test`): inputs -> expected outputs and status.

use chrono::{DateTime, Utc};
use serde_json::Value;

use std::sync::Arc;

use crate::model::{
    Expectation, ExpectedStatus, ObjectSelector, TestCase, TestStep, TestSuiteDocument,
};
use crate::names::{
    ANNOTATION_OWNERS, ANNOTATION_PACK_VERSION, ANNOTATION_RULE, LABEL_MANAGED_BY, LABEL_PACK,
};
use crate::object::{MemoryWorld, World};
use crate::pack::Pack;
use crate::params::Values;
use crate::plan::{Plan, parse_inputs, to_yaml, world_of};
use crate::simulate::Simulation;
use crate::validate::InputCheck;
use crate::yaml;

/// The default clock of test cases.
pub const DEFAULT_CLOCK: &str = "2000-01-01T00:00:00Z";

/// The result of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseReport {
    /// The suite's file, relative to the pack.
    pub file: String,
    pub suite: String,
    pub case: String,
    /// Every mismatch, each readable on its own (with a unified diff where useful).
    pub failures: Vec<String>,
    /// The golden files that differ or are missing, with the text they should hold (so
    /// `--update` can write them) and the failure each is reported as.
    pub golden_updates: Vec<GoldenUpdate>,
    /// Inputs the API server would refuse (their kind's CRD says so): the case still runs,
    /// but a tenant could never create such an object.
    pub warnings: Vec<String>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// A golden file `--update` would write.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenUpdate {
    /// The path in the pack.
    pub file: String,
    /// What it should hold.
    pub text: String,
    /// It does not exist yet.
    pub created: bool,
    /// The entry of [`CaseReport::failures`] that writing it settles.
    pub failure: String,
}

/// Runs every case of every suite of the pack, its parameters bound to `values` and each
/// suite's own `values` over them.
pub fn run_tests(pack: &mut Pack, values: &Values) -> Vec<CaseReport> {
    let mut reports = Vec::new();
    let suites = pack.test_suites().to_vec();
    for (file, suite) in &suites {
        let bound = suite_values(pack, file, suite, values).and_then(|v| pack.set_values(&v));
        if let Err(problems) = bound {
            for case in &suite.spec.cases {
                reports.push(CaseReport {
                    file: file.clone(),
                    suite: suite.metadata.name.clone(),
                    case: case.name.clone(),
                    failures: problems.clone(),
                    golden_updates: Vec::new(),
                    warnings: Vec::new(),
                });
            }
            continue;
        }
        let pack: &Pack = pack;
        for case in &suite.spec.cases {
            let clock = case
                .clock
                .as_deref()
                .or(suite.spec.clock.as_deref())
                .unwrap_or(DEFAULT_CLOCK);
            let clusters = case.clusters.as_ref().unwrap_or(&suite.spec.clusters);
            let rules = case.rules.as_ref().unwrap_or(&suite.spec.rules);
            reports.push(run_case(
                pack,
                file,
                &suite.metadata.name,
                case,
                Setting {
                    clock,
                    clusters,
                    rules,
                },
            ));
        }
    }
    reports
}

/// `values` with the suite's `values` over them, positioned in the suite's file.
fn suite_values(
    pack: &Pack,
    file: &str,
    suite: &TestSuiteDocument,
    values: &Values,
) -> Result<Values, Vec<String>> {
    let mut values = values.clone();
    let Some(given) = &suite.spec.values else {
        return Ok(values);
    };
    let shown = pack.files().display(file);
    // The suite's node, for positions; the decoded value when the file cannot be read again.
    let node = pack
        .files()
        .files
        .get(file)
        .and_then(|text| yaml::parse_documents(text).ok())
        .and_then(|documents| {
            documents.into_iter().find(|d| {
                d.to_json()
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    == Some(suite.metadata.name.as_str())
            })
        })
        .map(|d| {
            d.closest(&[
                yaml::PathSegment::Key("spec".into()),
                yaml::PathSegment::Key("values".into()),
            ])
            .clone()
        })
        .filter(|n| n.to_json() == *given);
    let added = match node {
        Some(node) => values.add_node(&shown, &node),
        None => values
            .add_file(&yaml::to_yaml(given), &shown)
            .map_err(|d| d.message),
    };
    added.map_err(|e| vec![format!("{shown}: suite `{}`: {e}", suite.metadata.name)])?;
    Ok(values)
}

/// What a case takes from its suite unless it says otherwise.
struct Setting<'s> {
    clock: &'s str,
    clusters: &'s [String],
    /// The rules the expectations are about (empty: all).
    rules: &'s [String],
}

fn run_case(
    pack: &Pack,
    file: &str,
    suite: &str,
    case: &TestCase,
    setting: Setting<'_>,
) -> CaseReport {
    let clock = setting.clock;
    let mut report = CaseReport {
        file: file.to_string(),
        suite: suite.to_string(),
        case: case.name.clone(),
        failures: Vec::new(),
        golden_updates: Vec::new(),
        warnings: Vec::new(),
    };
    for rule in setting.rules {
        if !pack.rule_names().any(|r| r == rule) {
            report.failures.push(format!(
                "`rules` names `{rule}`, which is not a rule of pack `{}`",
                pack.name()
            ));
        }
    }
    if !report.failures.is_empty() {
        return report;
    }
    let expectations = Scope {
        rules: setting.rules,
    };
    let now = match DateTime::parse_from_rfc3339(clock) {
        Ok(t) => t.with_timezone(&Utc),
        Err(e) => {
            report
                .failures
                .push(format!("clock `{clock}` is not RFC 3339: {e}"));
            return report;
        }
    };
    let mut objects = Vec::new();
    for input in &case.input_files {
        let text = match pack_path(input) {
            Ok(key) => pack.files().files.get(&key),
            Err(reason) => {
                report
                    .failures
                    .push(format!("input file `{input}` is refused: {reason}"));
                continue;
            }
        };
        let Some(text) = text else {
            report
                .failures
                .push(format!("input file `{input}` not found in the pack"));
            continue;
        };
        match parse_inputs(text, input, pack.source_cluster()) {
            Ok(mut found) => objects.append(&mut found),
            Err(d) => report.failures.push(d.to_string()),
        }
    }
    for inline in &case.inputs {
        let text = yaml::to_yaml(inline);
        match parse_inputs(
            &text,
            &format!("{file} (case `{}`)", case.name),
            pack.source_cluster(),
        ) {
            Ok(mut found) => objects.append(&mut found),
            Err(d) => report.failures.push(d.to_string()),
        }
    }
    if let Err(e) = pack.place_all(&mut objects) {
        report.failures.push(e);
    }
    if !report.failures.is_empty() {
        return report;
    }
    report.warnings = invalid_inputs(pack, &objects);
    let world = match world_of(&objects, setting.clusters) {
        Ok(w) => w,
        Err(e) => {
            report.failures.push(e);
            return report;
        }
    };
    // `clusters: []` in the case: no members on purpose.
    let members_on_purpose = case.clusters.is_some();
    let mut simulation = Simulation::new(pack, world, now);
    let first = simulation.evaluate().clone();
    if !members_on_purpose {
        unmet_members(pack, &first, &simulation.world, &mut report);
    }
    check_expectations(pack, &case.expect, &first, expectations, &mut report);
    check_world(&case.expect, &mut simulation, &mut report);
    for (i, step) in case.steps.iter().enumerate() {
        let label = match &step.name {
            Some(name) => format!("step {} ({name})", i + 1),
            None => format!("step {}", i + 1),
        };
        simulation.settle();
        if let Err(e) = apply_step(pack, step, &label, &mut simulation) {
            report.failures.push(e);
            return report;
        }
        let plan = simulation.evaluate().clone();
        let before = report.failures.len();
        let golden_before = report.golden_updates.len();
        if !members_on_purpose {
            unmet_members(pack, &plan, &simulation.world, &mut report);
        }
        check_expectations(pack, &step.expect, &plan, expectations, &mut report);
        check_world(&step.expect, &mut simulation, &mut report);
        for failure in &mut report.failures[before..] {
            *failure = format!("{label}: {failure}");
        }
        for update in &mut report.golden_updates[golden_before..] {
            update.failure = format!("{label}: {}", update.failure);
        }
    }
    report
}

/// A rule that reads the members of a role (`clusters.<role>`, an `allClusters` lookup)
/// evaluated in a case that gives the role none would pass on an empty list: a failure,
/// unless the case says `clusters: []`.
fn unmet_members(pack: &Pack, plan: &Plan, world: &MemoryWorld, report: &mut CaseReport) {
    for outcome in &plan.outcomes {
        for rule in &outcome.rules {
            let Some(roles) = pack.member_roles(rule) else {
                continue;
            };
            for (role, place) in roles {
                if !world.members(role).is_empty() {
                    continue;
                }
                let message = format!(
                    "rule `{rule}` reads the members of role `{role}` ({place}), and the case gives it none: \
                     name them in the suite's or the case's `clusters` (`{role}/NAME`), or write \
                     `clusters: []` in the case to test a role without members"
                );
                if !report.failures.contains(&message) {
                    report.failures.push(message);
                }
            }
        }
    }
}

/// `expect.world`, checked once the broker's part of the last evaluation is done.
fn check_world(expect: &Expectation, simulation: &mut Simulation<'_>, report: &mut CaseReport) {
    let Some(world) = &expect.world else {
        return;
    };
    simulation.settle();
    for wanted in &world.present {
        let selector = match crate::object::ObjectKey::of(
            wanted.cluster.as_deref().unwrap_or(""),
            &wanted.object,
        ) {
            Ok(key) => ObjectSelector {
                cluster: wanted.cluster.clone(),
                kind: key.kind,
                namespace: key.namespace,
                name: key.name,
            },
            Err(e) => {
                report.failures.push(format!("world: expected object: {e}"));
                continue;
            }
        };
        let api_version = wanted.object.get("apiVersion");
        let found: Vec<Arc<Value>> = simulation
            .world
            .iter()
            .filter(|(key, _)| {
                selects(&selector, key)
                    && api_version.and_then(Value::as_str) == Some(key.api_version.as_str())
            })
            .map(|(_, object)| object.clone())
            .collect();
        let Some(first) = found.first() else {
            report.failures.push(format!(
                "world: object {} does not exist",
                describe(&selector)
            ));
            continue;
        };
        if found
            .iter()
            .any(|o| differences(&wanted.object, o, "").is_empty())
        {
            continue;
        }
        report.failures.push(format!(
            "world: object {} differs: {}",
            describe(&selector),
            differences(&wanted.object, first, "").join("; ")
        ));
    }
    for absent in &world.absent {
        if simulation
            .world
            .iter()
            .any(|(key, _)| selects(absent, &key))
        {
            report.failures.push(format!(
                "world: object {} exists but must be absent",
                describe(absent)
            ));
        }
    }
}

/// Where `have` does not hold what `want` gives: maps field by field, the rest whole.
fn differences(want: &Value, have: &Value, path: &str) -> Vec<String> {
    match (want, have) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .flat_map(|(field, w)| {
                let path = if path.is_empty() {
                    field.clone()
                } else {
                    format!("{path}.{field}")
                };
                match have.get(field) {
                    Some(h) => differences(w, h, &path),
                    None if w.is_null() => Vec::new(),
                    None => vec![format!("`{path}` is absent, expected {w}")],
                }
            })
            .collect(),
        _ if want == have => Vec::new(),
        _ => vec![format!("`{path}` is {have}, expected {want}")],
    }
}

/// What the CRDs of the inputs' kinds refuse in them, one message per problem.
pub fn invalid_inputs(pack: &Pack, objects: &[(String, Value)]) -> Vec<String> {
    let mut found = Vec::new();
    for (_, object) in objects {
        let InputCheck::Checked(violations) = pack.validator.check_input(object) else {
            continue;
        };
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let who = match object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
        {
            Some(ns) => format!("{kind} `{ns}/{name}`"),
            None => format!("{kind} `{name}`"),
        };
        for violation in violations {
            found.push(format!("input {who} is invalid: {violation}"));
        }
    }
    found
}

/// A step's changes to the world and the clock.
fn apply_step(
    pack: &Pack,
    step: &TestStep,
    label: &str,
    simulation: &mut Simulation<'_>,
) -> Result<(), String> {
    if let Some(advance) = &step.advance {
        let by = crate::duration::parse_duration(advance)
            .map_err(|e| format!("{label}: advance: {e}"))?;
        simulation.advance(by);
    }
    let parse = |objects: &[Value], what: &str| -> Result<Vec<(String, Value)>, String> {
        let mut parsed = Vec::new();
        for object in objects {
            let text = yaml::to_yaml(object);
            let mut found = parse_inputs(&text, &format!("{label} {what}"), pack.source_cluster())
                .map_err(|d| d.to_string())?;
            pack.place_all(&mut found)
                .map_err(|e| format!("{label} {what}: {e}"))?;
            parsed.extend(found);
        }
        Ok(parsed)
    };
    for (cluster, object) in parse(&step.apply, "apply")? {
        simulation
            .world
            .insert(&cluster, object)
            .map_err(|e| format!("{label}: {e}"))?;
    }
    for (cluster, patch) in parse(&step.merge, "merge")? {
        let key =
            crate::object::ObjectKey::of(&cluster, &patch).map_err(|e| format!("{label}: {e}"))?;
        let Some(existing) = simulation.world.get_key(&key) else {
            return Err(format!("{label}: merge: {key} does not exist"));
        };
        let mut merged = Value::clone(&existing);
        crate::simulate::merge(&mut merged, &patch);
        simulation
            .world
            .insert(&cluster, merged)
            .map_err(|e| format!("{label}: {e}"))?;
    }
    for selector in &step.delete {
        let found: Vec<crate::object::ObjectKey> = simulation
            .world
            .iter()
            .map(|(key, _)| key)
            .filter(|key| selects(selector, key))
            .collect();
        if found.is_empty() {
            return Err(format!("{label}: delete: no object {}", describe(selector)));
        }
        for key in found {
            simulation.world.remove(&key);
        }
    }
    Ok(())
}

/// What a case's expectations are about.
#[derive(Clone, Copy)]
struct Scope<'s> {
    /// Only objects these rules render (empty: every rule's).
    rules: &'s [String],
}

impl Scope<'_> {
    /// The plan with only the objects the expectations are about.
    fn of<'p>(&self, plan: &'p Plan) -> std::borrow::Cow<'p, Plan> {
        if self.rules.is_empty() {
            return std::borrow::Cow::Borrowed(plan);
        }
        let mut scoped = plan.clone();
        scoped.objects.retain(|o| {
            o.sources.iter().any(|source| {
                let rule = source.split_once('/').map_or(source.as_str(), |(r, _)| r);
                self.rules.iter().any(|r| r == rule)
            })
        });
        std::borrow::Cow::Owned(scoped)
    }
}

fn check_expectations(
    pack: &Pack,
    expect: &Expectation,
    plan: &Plan,
    scope: Scope<'_>,
    report: &mut CaseReport,
) {
    if let Some(raw) = &expect.golden {
        // A path outside the pack is refused here, so `--update` is never asked to write it.
        match pack_path(raw) {
            Ok(golden) => check_golden(pack, golden, plan, report),
            Err(reason) => report.failures.push(format!(
                "golden file `{raw}` of {} is refused: {reason}",
                report.file
            )),
        }
    }
    check_rest(expect, &scope.of(plan), report);
}

fn check_golden(pack: &Pack, golden: String, plan: &Plan, report: &mut CaseReport) {
    let actual = to_yaml(plan);
    let (failure, created) = match pack.files().files.get(&golden) {
        // A version bump alone changes no golden file (as `diff` ignores it).
        Some(expected) if without_version(expected) == without_version(&actual) => return,
        Some(expected) => (
            format!(
                "rendered output differs from golden file `{golden}`:\n{}",
                unified_diff(expected, &actual, &golden, "rendered")
            ),
            false,
        ),
        None => (
            format!("golden file `{golden}` not found (run with --update to create it)"),
            true,
        ),
    };
    report.failures.push(failure.clone());
    report.golden_updates.push(GoldenUpdate {
        file: golden,
        text: actual,
        created,
        failure,
    });
}

/// Rendered YAML with the pack version's value blanked.
fn without_version(text: &str) -> String {
    let marker = format!("{ANNOTATION_PACK_VERSION}:");
    text.lines()
        .map(|line| match line.find(&marker) {
            Some(at) => &line[..at + marker.len()],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An object without the engine's ownership labels and annotations (maps left empty go too).
fn without_ownership(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for (field, keys) in [
            ("labels", &[LABEL_MANAGED_BY, LABEL_PACK][..]),
            (
                "annotations",
                &[ANNOTATION_PACK_VERSION, ANNOTATION_RULE, ANNOTATION_OWNERS][..],
            ),
        ] {
            if let Some(Value::Object(map)) = metadata.get_mut(field) {
                for key in keys {
                    map.remove(*key);
                }
                if map.is_empty() {
                    metadata.remove(field);
                }
            }
        }
    }
    copy
}

/// The expectations other than the golden file.
fn check_rest(expect: &Expectation, plan: &Plan, report: &mut CaseReport) {
    for expected in &expect.outputs {
        let selector = match selector_of(&expected.cluster, &expected.object) {
            Ok(s) => s,
            Err(e) => {
                report.failures.push(format!("expected output: {e}"));
                continue;
            }
        };
        match find_output(plan, &selector) {
            None => report.failures.push(format!(
                "expected output {} was not rendered",
                describe(&selector)
            )),
            Some(actual) => {
                // The engine's ownership metadata is compared only when asked for: an
                // expectation states what the pack renders, not the engine's bookkeeping.
                let (want, have) = if expect.ownership {
                    (expected.object.clone(), actual.clone())
                } else {
                    (
                        without_ownership(&expected.object),
                        without_ownership(actual),
                    )
                };
                if want != have {
                    report.failures.push(format!(
                        "output {} differs:\n{}",
                        describe(&selector),
                        unified_diff(
                            &yaml::to_yaml(&want),
                            &yaml::to_yaml(&have),
                            "expected",
                            "rendered"
                        )
                    ));
                }
            }
        }
    }
    for absent in &expect.absent {
        if find_output(plan, absent).is_some() {
            report.failures.push(format!(
                "output {} was rendered but must be absent",
                describe(absent)
            ));
        }
    }
    if let Some(count) = expect.output_count
        && plan.objects.len() != count
    {
        report.failures.push(format!(
            "expected {count} outputs, rendered {}",
            plan.objects.len()
        ));
    }
    for status in &expect.status {
        check_status(plan, status, report);
    }
    let errors = plan.error_messages();
    for wanted in &expect.errors {
        if !errors.iter().any(|e| e.contains(wanted.as_str())) {
            report.failures.push(format!(
                "expected an error containing `{wanted}`; errors were: {}",
                if errors.is_empty() {
                    "none".to_string()
                } else {
                    errors.join("; ")
                }
            ));
        }
    }
    if expect.errors.is_empty() {
        for error in errors {
            report.failures.push(format!("unexpected error: {error}"));
        }
    }
}

fn check_status(plan: &Plan, expected: &ExpectedStatus, report: &mut CaseReport) {
    let selector = &expected.trigger;
    let Some(outcome) = plan.outcomes.iter().find(|o| selects(selector, &o.trigger)) else {
        report
            .failures
            .push(format!("no trigger {} was evaluated", describe(selector)));
        return;
    };
    let actual = outcome.status.clone().unwrap_or(Value::Null);
    let Value::Object(wanted) = &expected.status else {
        report
            .failures
            .push("expected status must be a map".to_string());
        return;
    };
    for (field, want) in wanted {
        if field == "conditions" {
            let Value::Array(want_conditions) = want else {
                report
                    .failures
                    .push("expected `conditions` must be a list".to_string());
                continue;
            };
            let have = actual
                .get("conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for want_condition in want_conditions {
                let t = want_condition.get("type");
                let Some(have_condition) = have.iter().find(|c| c.get("type") == t) else {
                    report.failures.push(format!(
                        "{}: condition {} not set; conditions are {}",
                        describe(selector),
                        want_condition
                            .get("type")
                            .map(|t| t.to_string())
                            .unwrap_or_default(),
                        serde_json::to_string(&have).unwrap_or_default()
                    ));
                    continue;
                };
                if let Value::Object(fields) = want_condition {
                    for (k, v) in fields {
                        if have_condition.get(k) != Some(v) {
                            report.failures.push(format!(
                                "{}: condition {} has {k} = {}, expected {}",
                                describe(selector),
                                t.map(|t| t.to_string()).unwrap_or_default(),
                                have_condition
                                    .get(k)
                                    .map(|v| v.to_string())
                                    .unwrap_or_else(|| "nothing".into()),
                                v
                            ));
                        }
                    }
                }
            }
        } else if actual.get(field).unwrap_or(&Value::Null) != want {
            // A null expectation: the field is absent (a null value leaves a field out).
            report.failures.push(format!(
                "{}: status.{field} differs:\n{}",
                describe(selector),
                unified_diff(
                    &yaml::to_yaml(want),
                    &actual
                        .get(field)
                        .map(yaml::to_yaml)
                        .unwrap_or_else(|| "(absent)\n".into()),
                    "expected",
                    "actual"
                )
            ));
        }
    }
}

fn selector_of(cluster: &str, object: &Value) -> Result<ObjectSelector, String> {
    let key = crate::object::ObjectKey::of(cluster, object)?;
    Ok(ObjectSelector {
        cluster: Some(cluster.to_string()),
        kind: key.kind,
        namespace: key.namespace,
        name: key.name,
    })
}

fn find_output<'p>(plan: &'p Plan, selector: &ObjectSelector) -> Option<&'p Value> {
    plan.objects
        .iter()
        .find(|d| selects(selector, &d.key))
        .map(|d| &d.object)
}

/// Does a test's selector name this object? (The cluster only when the selector gives one.)
fn selects(selector: &ObjectSelector, key: &crate::object::ObjectKey) -> bool {
    key.kind == selector.kind
        && key.name == selector.name
        && key.namespace == selector.namespace
        && selector.cluster.as_ref().is_none_or(|c| *c == key.cluster)
}

fn describe(selector: &ObjectSelector) -> String {
    let mut s = String::new();
    if let Some(c) = &selector.cluster {
        s.push_str(c);
        s.push(':');
    }
    s.push_str(&selector.kind);
    s.push(' ');
    if let Some(ns) = &selector.namespace {
        s.push_str(ns);
        s.push('/');
    }
    s.push_str(&selector.name);
    s
}

/// The key in [`PackFiles`](crate::PackFiles) of a path a test names (`expect.golden`,
/// `inputFiles`), or why it is refused: the path must be relative and stay inside the pack
/// folder. `.` and `x/..` are resolved and `\\` counts as a separator, so one file has one key
/// on every platform. Writers of golden files (`switchyard test --update`) apply the same rule.
pub fn pack_path(path: &str) -> Result<String, String> {
    if path.is_empty() {
        return Err("the path is empty".to_string());
    }
    if path.contains('\0') {
        return Err("the path contains a NUL character".to_string());
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if path.starts_with(['/', '\\']) || drive {
        return Err("the path is absolute; it must be relative to the pack folder".to_string());
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("the path leads outside the pack folder".to_string());
                }
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Err("the path names the pack folder itself, not a file".to_string());
    }
    Ok(parts.join("/"))
}

/// A unified diff of two texts.
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, new_name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::pack_path;

    #[test]
    fn pack_paths_stay_inside_the_pack() {
        assert_eq!(
            pack_path("tests/golden/a.golden"),
            Ok("tests/golden/a.golden".into())
        );
        assert_eq!(
            pack_path("./tests//x/../a.golden"),
            Ok("tests/a.golden".into())
        );
        assert_eq!(pack_path("tests\\a.golden"), Ok("tests/a.golden".into()));
        let outside = Err("the path leads outside the pack folder".to_string());
        assert_eq!(pack_path("../../home/.bashrc"), outside);
        assert_eq!(pack_path("tests/../../x"), outside);
        assert_eq!(pack_path("..\\x"), outside);
        let absolute =
            Err("the path is absolute; it must be relative to the pack folder".to_string());
        assert_eq!(pack_path("/etc/passwd"), absolute);
        assert_eq!(pack_path("\\x"), absolute);
        assert_eq!(pack_path("C:x"), absolute);
        assert!(pack_path("").is_err());
        assert!(pack_path("tests/..").is_err());
        assert!(pack_path("a\0b").is_err());
    }
}
