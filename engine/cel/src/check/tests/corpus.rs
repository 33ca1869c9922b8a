//! The checker over real expressions, which are all valid: it must report none of them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::textproto::{Message, parse_textproto};
use super::{check_with, read_yaml, repository, rule_env, yaml};
use crate::check::{
    ObjectType, Type, TypeEnv, object_type_from_crd, object_type_without_schema, type_from_openapi,
};
use crate::env::Env;

/// `../shared` beside the workspace (CRDs of other projects, the CEL conformance suite),
/// which the repository does not contain.
fn shared() -> PathBuf {
    repository().join("../shared")
}

// ---- the kcp-karmada rule -----------------------------------------------------------------

/// `(where, source)` of expressions; `(name, source)` of variables.
pub(super) type Sources = Vec<(String, String)>;

/// Every CEL expression of a rule document, with where it is, and its variables apart.
pub(super) fn rule_expressions(rule: &Json) -> (Sources, Sources) {
    let spec = &rule["spec"];
    let mut expressions = Vec::new();
    let mut push = |path: String, value: &Json| {
        if let Some(source) = value.as_str() {
            expressions.push((path, source.to_string()));
        }
    };
    let items = |name: &str| spec[name].as_array().cloned().unwrap_or_default();
    for (i, lookup) in items("lookups").iter().enumerate() {
        for key in ["namespace", "objectName", "matchLabels", "when"] {
            push(format!("lookups[{i}].{key}"), &lookup[key]);
        }
    }
    for (i, guard) in items("when").iter().enumerate() {
        for key in ["expression", "messageExpression"] {
            push(format!("when[{i}].{key}"), &guard[key]);
        }
    }
    for (i, output) in items("outputs").iter().enumerate() {
        for key in ["when", "forEach"] {
            push(format!("outputs[{i}].{key}"), &output[key]);
        }
    }
    if let Some(fields) = spec["status"]["fields"].as_object() {
        for (name, value) in fields {
            push(format!("status.fields.{name}"), value);
        }
    }
    for (i, condition) in spec["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for key in ["status", "reason", "message"] {
            push(format!("status.conditions[{i}].{key}"), &condition[key]);
        }
    }
    let vars = items("vars")
        .iter()
        .filter_map(|v| {
            Some((
                v["name"].as_str()?.to_string(),
                v["expression"].as_str()?.to_string(),
            ))
        })
        .collect();
    (expressions, vars)
}

/// The types of the rule's variables, each checked with those of the others: repeated
/// until they settle (variables are evaluated in dependency order, not file order).
fn infer_vars(env: &TypeEnv, vars: &[(String, String)]) -> BTreeMap<String, Type> {
    let mut types: BTreeMap<String, Type> = BTreeMap::new();
    for _ in 0..=vars.len() {
        let mut object = ObjectType::new("vars").open();
        object.fields = types.clone();
        let env = env.clone().with_variable("vars", Type::object(object));
        let next: BTreeMap<String, Type> = vars
            .iter()
            .map(|(name, source)| (name.clone(), check_with(source, &env).0))
            .collect();
        if next == types {
            break;
        }
        types = next;
    }
    types
}

pub(super) fn fleet_workload_rule() -> Json {
    read_yaml(&repository().join("rules/kcp-karmada/rules/fleet-workload.yaml"))
}

/// Checks every expression of the rule with `env`: the issues, one a line.
fn rule_issues(env: &TypeEnv, rule: &Json) -> (usize, Vec<String>) {
    let (expressions, vars) = rule_expressions(rule);
    let all = expressions.iter().chain(vars.iter());
    let mut count = 0;
    let mut issues = Vec::new();
    for (path, source) in all {
        count += 1;
        for issue in check_with(source, env).1 {
            issues.push(format!("{path}: {issue}\n  {source}"));
        }
    }
    (count, issues)
}

#[test]
fn the_kcp_karmada_rule_has_no_issues_with_vars_as_a_map() {
    let rule = fleet_workload_rule();
    let (count, issues) = rule_issues(&rule_env(), &rule);
    assert!(count > 40, "only {count} expressions found");
    assert!(issues.is_empty(), "false positives:\n{}", issues.join("\n"));
    println!("fleet-workload.yaml: {count} expressions, 0 issues (vars: map(string, dyn))");
}

#[test]
fn the_kcp_karmada_rule_has_no_issues_with_typed_vars() {
    let rule = fleet_workload_rule();
    let (_, vars) = rule_expressions(&rule);
    // The binding's kind has no schema here: its metadata is typed all the same.
    let env = rule_env().with_variable("binding", object_type_without_schema("ResourceBinding"));
    let types = infer_vars(&env, &vars);
    let mut report = String::new();
    for (name, ty) in &types {
        writeln!(report, "  vars.{name}: {ty}").unwrap();
    }
    println!("inferred variable types:\n{report}");
    assert_eq!(types["replicas"], Type::Int);
    assert_eq!(types["workspace"], Type::String);
    assert_eq!(types["clusterNames"], Type::list(Type::String));
    assert_eq!(types["emitService"], Type::Bool);
    assert_eq!(types["podLabels"], Type::map(Type::String, Type::String));
    let mut object = ObjectType::new("vars");
    object.fields = types;
    let env = env.with_variable("vars", Type::object(object));
    let (count, issues) = rule_issues(&env, &rule);
    assert!(issues.is_empty(), "false positives:\n{}", issues.join("\n"));
    println!("fleet-workload.yaml: {count} expressions, 0 issues (typed vars)");
}

/// With `binding` typed by Karmada's ResourceBinding CRD (outside the repository).
#[test]
fn the_kcp_karmada_rule_has_no_issues_with_a_typed_binding() {
    let path = shared().join("crds/karmada/work.karmada.io_resourcebindings.yaml");
    if !path.exists() {
        println!("{} is missing: skipped", path.display());
        return;
    }
    let binding = object_type_from_crd(&read_yaml(&path), "v1alpha2").unwrap();
    let rule = fleet_workload_rule();
    let (_, vars) = rule_expressions(&rule);
    let env = rule_env().with_variable("binding", binding);
    let mut object = ObjectType::new("vars");
    object.fields = infer_vars(&env, &vars);
    let env = env.with_variable("vars", Type::object(object));
    let (count, issues) = rule_issues(&env, &rule);
    assert!(issues.is_empty(), "false positives:\n{}", issues.join("\n"));
    println!("fleet-workload.yaml: {count} expressions, 0 issues (typed binding)");
}

#[test]
fn the_kcp_karmada_rule_with_a_typo_is_reported() {
    let rule = fleet_workload_rule();
    let text = serde_json::to_string(&rule)
        .unwrap()
        .replace("self.spec.fleetRef.name", "self.spec.fleetRef.nmae");
    let rule: Json = serde_json::from_str(&text).unwrap();
    let (_, issues) = rule_issues(&rule_env(), &rule);
    assert!(!issues.is_empty());
    assert!(
        issues
            .iter()
            .all(|i| i.contains("undefined field 'nmae' (did you mean 'name'?)")),
        "{issues:#?}"
    );
}

// ---- the validation rules of CRDs ---------------------------------------------------------

/// `(where, self's type, rule)` for every `x-kubernetes-validations` rule under `schema`.
fn validation_rules(
    schema: &Json,
    path: &str,
    root: Option<Type>,
    out: &mut Vec<(String, Type, String)>,
) {
    let Some(node) = schema.as_object() else {
        return;
    };
    if let Some(rules) = node
        .get("x-kubernetes-validations")
        .and_then(Json::as_array)
    {
        let ty = root.unwrap_or_else(|| type_from_openapi(schema, path));
        for rule in rules {
            if let Some(rule) = rule.get("rule").and_then(Json::as_str) {
                out.push((path.to_string(), ty.clone(), rule.to_string()));
            }
        }
    }
    if let Some(properties) = node.get("properties").and_then(Json::as_object) {
        for (name, property) in properties {
            validation_rules(property, &format!("{path}.{name}"), None, out);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = node.get(key) {
            validation_rules(child, &format!("{path}.@{key}"), None, out);
        }
    }
}

#[test]
fn the_validation_rules_of_crds_have_no_issues() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [
        repository().join("config/crds"),
        shared().join("crds/karmada"),
        shared().join("crds/cilium"),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        files.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml")),
        );
    }
    files.sort();
    let (mut kinds, mut rules, mut issues) = (0, 0, Vec::new());
    for file in &files {
        let crd = read_yaml(file);
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            let name = version["name"].as_str().unwrap_or_default();
            let schema = &version["schema"]["openAPIV3Schema"];
            let root = object_type_from_crd(&crd, name).unwrap();
            kinds += 1;
            let mut found = Vec::new();
            validation_rules(schema, "self", Some(root), &mut found);
            for (path, ty, rule) in found {
                rules += 1;
                let env = TypeEnv::new()
                    .with_variable("self", ty.clone())
                    .with_variable("oldSelf", ty);
                for issue in check_with(&rule, &env).1 {
                    issues.push(format!("{}: {path}: {issue}\n  {rule}", file.display()));
                }
            }
        }
    }
    println!(
        "{} CRD files, {kinds} kinds, {rules} validation rules",
        files.len()
    );
    assert!(rules >= 7, "only {rules} rules found");
    assert!(issues.is_empty(), "false positives:\n{}", issues.join("\n"));
}

// ---- the CEL conformance suite ------------------------------------------------------------

#[derive(Default)]
struct Tally {
    /// Tests the checker is expected to pass (cel-go type-checks them).
    checked: usize,
    /// ... and reported: false positives.
    false_positives: Vec<String>,
    /// Tests cel-go does not type-check (`disable_check`).
    unchecked: usize,
    /// ... which the checker reports (not necessarily a mistake of the expression).
    unchecked_reported: usize,
    /// Expressions the environment does not compile.
    not_compiled: usize,
    /// Tests the suite (newer cel-go, no validators) checks and Kubernetes refuses: see
    /// [`kubernetes_refuses`].
    kubernetes_refuses: usize,
}

/// Why Kubernetes 1.34's checker refuses a test the suite type-checks, if it does: the
/// checker follows Kubernetes, so it must report these.
fn kubernetes_refuses(file: &str, section: &str, test: &str) -> Option<&'static str> {
    match (file, section) {
        ("string_ext", "format")
            if test.starts_with("default precision for fixed-point clause with")
                || test.starts_with("default precision for scientific notation with")
                || test.ends_with("support for decimal") =>
        {
            Some("cel-go v0.26's format validator: `%f` and `%e` take doubles, `%d` integers")
        }
        ("timestamps", "timestamp_range")
            if matches!(
                test,
                "from_string_under" | "from_int_under" | "from_string_over" | "from_int_over"
            ) =>
        {
            Some("Kubernetes' literal validators refuse an out-of-range literal")
        }
        ("timestamps", "duration_range")
            if matches!(
                test,
                "from_string_under"
                    | "from_string_over"
                    | "add_under"
                    | "add_over"
                    | "sub_under"
                    | "sub_over"
            ) =>
        {
            Some("Kubernetes' literal validators refuse an out-of-range literal")
        }
        _ => None,
    }
}

fn check_conformance_file(env: &Env, name: &str, file: &Message, tally: &mut Tally) {
    for section in file.messages("section") {
        let section_name = section.string("name").unwrap_or_default();
        for test in section.messages("test") {
            let Some(expr) = test.string("expr") else {
                continue;
            };
            let Ok(program) = env.compile(&expr) else {
                tally.not_compiled += 1;
                continue;
            };
            // Every variable is `dyn`; the test's own functions are custom functions.
            let mut types = TypeEnv::new();
            for decl in test.messages("type_env") {
                if let Some(name) = decl.string("name") {
                    if decl.get("function").is_some() {
                        types.add_function(&name);
                    } else {
                        types.add_variable(&name, Type::Dyn);
                    }
                }
            }
            for binding in test.messages("bindings") {
                if let Some(key) = binding.string("key") {
                    types.add_variable(&key, Type::Dyn);
                }
            }
            let (_, issues) = crate::check::check(&program, &types);
            let test_name = test.string("name").unwrap_or_default();
            if let Some(reason) = kubernetes_refuses(name, &section_name, &test_name) {
                assert!(
                    !issues.is_empty(),
                    "{name}/{section_name}/{test_name}: `{expr}` is not reported ({reason})"
                );
                tally.kubernetes_refuses += 1;
            } else if test.bool("disable_check") {
                tally.unchecked += 1;
                tally.unchecked_reported += usize::from(!issues.is_empty());
            } else {
                tally.checked += 1;
                if let Some(issue) = issues.first() {
                    tally.false_positives.push(format!(
                        "{name}/{section_name}/{test_name}: `{expr}`: {}:{}: {}",
                        issue.line, issue.column, issue.message
                    ));
                }
            }
        }
    }
}

#[test]
fn no_false_positives_on_the_conformance_suite() {
    let dir: &Path = &shared().join("cel-spec");
    let Some(files) = super::textproto::suite_files(dir) else {
        println!(
            "the CEL conformance suite is not at {}: skipped",
            dir.display()
        );
        return;
    };
    let env = Env::new(crate::environment::CelEnvironment::all());
    let mut tally = Tally::default();
    for path in &files {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path).unwrap();
        let file = parse_textproto(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        check_conformance_file(&env, &name, &file, &mut tally);
    }
    println!(
        "conformance: {} type-checked tests, {} false positives, {} refused as Kubernetes \
         refuses them; {} tests cel-go does not type-check, {} of them reported; {} \
         expressions do not compile",
        tally.checked,
        tally.false_positives.len(),
        tally.kubernetes_refuses,
        tally.unchecked,
        tally.unchecked_reported,
        tally.not_compiled
    );
    assert!(tally.checked > 1000, "only {} tests", tally.checked);
    assert!(
        tally.false_positives.is_empty(),
        "false positives:\n{}",
        tally.false_positives.join("\n")
    );
}

#[test]
fn the_yaml_reader_reads_every_crd() {
    for dir in [shared().join("crds/karmada"), shared().join("crds/cilium")] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            let crd =
                yaml::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
            assert_eq!(
                crd["kind"],
                "CustomResourceDefinition",
                "{}",
                entry.path().display()
            );
            assert!(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].is_object());
        }
    }
}
