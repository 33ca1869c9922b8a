//! What `check` says about stages written wrong.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;

use switchyard_core::{PackFiles, load};

const PACK: &str = r#"
apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: staged, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: target, access: [read, write]}
  scope:
    - cluster: target
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ["*"]
"#;

const TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: y\n";

fn diagnostics(stages: &str) -> Vec<String> {
    let rule = format!(
        "apiVersion: switchyard.dev/v1alpha1\nkind: Rule\nmetadata: {{name: r}}\nspec:\n  watch: {{apiVersion: v1, kind: ConfigMap}}\n  stages:\n{stages}"
    );
    let files: BTreeMap<String, String> = [
        ("pack.yaml".to_string(), PACK.to_string()),
        ("rules/r.yaml".to_string(), rule),
        ("templates/cm.yaml.hbs".to_string(), TEMPLATE.to_string()),
    ]
    .into_iter()
    .collect();
    load(&PackFiles {
        root: "staged".into(),
        files,
        shared_partials: BTreeMap::new(),
    })
    .diagnostics
    .iter()
    .filter(|d| d.is_error())
    .map(|d| d.to_string().lines().next().unwrap_or_default().to_string())
    .collect()
}

#[test]
fn a_gate_that_is_not_a_bool_is_a_type_error() {
    assert_eq!(
        diagnostics(
            "    items:\n      - name: one\n        outputs: [{name: cm, cluster: target, template: cm.yaml.hbs}]\n        gates: [\"'done'\"]\n"
        ),
        [
            "staged/rules/r.yaml:10:18: error[cel::type]: expected a bool, the expression gives string"
        ]
    );
}

#[test]
fn a_gate_may_read_resources_but_nothing_unknown() {
    assert_eq!(
        diagnostics(
            "    items:\n      - name: one\n        outputs: [{name: cm, cluster: target, template: cm.yaml.hbs}]\n        gates: [\"has(resources.cm.data) && job.done\"]\n"
        ),
        ["staged/rules/r.yaml:10:44: error[cel::unknown-variable]: unknown variable `job`"]
    );
}

#[test]
fn stages_need_items_or_from_and_a_valid_timeout() {
    assert_eq!(
        diagnostics("    statusField: progress\n"),
        [
            "staged/rules/r.yaml:7:5: error[pack::invalid-value]: `stages` needs exactly one of `items` (stages written here) and `from` (stages from data)"
        ]
    );
    assert_eq!(
        diagnostics("    items:\n      - name: one\n        timeout: soon\n"),
        [
            "staged/rules/r.yaml:9:18: error[pack::invalid-value]: timeout: `soon` is not a duration (e.g. `30s`, `10m`, `1h30m`)"
        ]
    );
}

#[test]
fn type_names_are_not_unknown_variables() {
    assert_eq!(
        diagnostics(
            "    items:\n      - name: one\n        outputs: [{name: cm, cluster: target, template: cm.yaml.hbs}]\n        gates: [\"type(resources.cm) == map && type(1) == int\"]\n"
        ),
        Vec::<String>::new()
    );
}
