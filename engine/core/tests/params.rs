//! Pack parameters: declared with a schema, type-checked in CEL, read by templates, bound to
//! values with every problem named.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;

use serde_json::json;
use switchyard_core::params::Values;
use switchyard_core::{LoadResult, PackFiles, load};

const PACK: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: p, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: target, access: [read, write]}
  scope:
    - cluster: target
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ["*"]
  parameters:
    - name: namespace
      schema: {type: string, pattern: "^[a-z]+$"}
      default: locations
    - name: zones
      schema: {type: array, items: {type: string}, maxItems: 3}
PARAMS
"#;

const TEMPLATE: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: {{params.namespace}}\n";

fn load_with(params: &str, expression: &str, template: &str) -> LoadResult {
    let rule = format!(
        "apiVersion: switchyard.dev/v1alpha1\nkind: Rule\nmetadata: {{name: r}}\nspec:\n  watch: {{apiVersion: v1, kind: ConfigMap}}\n  vars:\n    - name: v\n      expression: \"{expression}\"\n  outputs:\n    - {{name: o, cluster: target, template: cm.yaml.hbs}}\n"
    );
    let files: BTreeMap<String, String> = [
        ("pack.yaml".to_string(), PACK.replace("PARAMS\n", params)),
        ("rules/r.yaml".to_string(), rule),
        ("templates/cm.yaml.hbs".to_string(), template.to_string()),
    ]
    .into_iter()
    .collect();
    load(&PackFiles {
        root: "p".into(),
        files,
        shared_partials: BTreeMap::new(),
    })
}

fn errors(result: &LoadResult) -> Vec<String> {
    result
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect()
}

#[test]
fn expressions_are_type_checked_against_the_parameters() {
    let result = load_with("", "params.zones.size() + params.namespace", TEMPLATE);
    assert_eq!(
        errors(&result),
        [
            "p/rules/r.yaml:8:40: error[cel::type]: found no matching overload for '_+_' applied to '(int, string)'\n  in rule `r`\n  |       expression: \"params.zones.size() + params.namespace\"\n  |                                        ^"
        ]
    );
    let result = load_with("", "params.zone", TEMPLATE);
    assert_eq!(
        errors(&result)[0].lines().next().unwrap(),
        "p/rules/r.yaml:8:27: error[cel::type]: undefined field 'zone' (did you mean 'zones'?)"
    );
}

#[test]
fn templates_read_only_declared_parameters() {
    let result = load_with(
        "",
        "1",
        &TEMPLATE.replace("params.namespace", "params.namespaces"),
    );
    assert_eq!(
        errors(&result)[0].lines().next().unwrap(),
        "p/templates/cm.yaml.hbs:5:14: error[template::unknown-variable]: parameter `params.namespaces` is not declared in `spec.parameters` (did you mean `namespace`?) (template `cm.yaml.hbs` used by output `o`)"
    );
}

#[test]
fn parameter_declarations_are_checked() {
    let result = load_with(
        "    - {name: self, schema: {type: string}}\n    - {name: zones, schema: {type: string}}\n    - {name: n, schema: {type: strin}}\n    - {name: m, schema: {type: integer, minimum: 1}, default: 0}\n",
        "1",
        TEMPLATE,
    );
    assert_eq!(
        errors(&result),
        [
            "p/pack.yaml:18:14: error[pack::invalid-name]: parameter name `self` must be a CEL identifier (letters, digits and `_`, not starting with a digit)",
            "p/pack.yaml:19:14: error[pack::duplicate-name]: two parameters are named `zones`",
            "p/pack.yaml:20:25: error[pack::invalid-value]: parameter `n`: the schema's `type` must be one of string, integer, number, boolean, array, object",
            "p/pack.yaml:21:63: error[pack::invalid-value]: the default of parameter `m` is refused by its schema: params.m: Invalid value: 0: params.m in body should be greater than or equal to 1 (minimum)",
        ]
    );
}

#[test]
fn values_are_bound_over_defaults_and_checked() {
    let mut pack = load_with("", "1", TEMPLATE).pack.unwrap();
    // Before values are given, `params` holds the defaults.
    assert_eq!(pack.params(), &json!({"namespace": "locations"}));
    let mut values = Values::new();
    values
        .add_file("zones: [a, b]\nnamespace: Bad\n", "v.yaml")
        .unwrap();
    values.add_set("zones=[a, b, c, d]").unwrap();
    assert_eq!(
        pack.set_values(&values).unwrap_err(),
        [
            "v.yaml:2:12: params.namespace: Invalid value: \"Bad\": params.namespace in body should match '^[a-z]+$' (pattern)",
            "--set zones=[a, b, c, d]: params.zones: Too many: 4: must have at most 3 items (maxItems)",
        ]
    );
    let mut values = Values::new();
    values.add_set("zones=[a]").unwrap();
    pack.set_values(&values).unwrap();
    assert_eq!(
        pack.params(),
        &json!({"namespace": "locations", "zones": ["a"]})
    );
    assert_eq!(
        pack.set_values(&Values::new()).unwrap_err(),
        ["pack `p`: parameter `zones` (array) has no default, and no value was given for it"]
    );
}
