//! The fixed pack the pack and template targets put their input into.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use switchyard_core::{MemoryWorld, Outcome, PackFiles, Trigger, evaluate, load};

const PACK: &str = "apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: fuzz, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
    - {name: edge, access: [read, write]}
  scope:
    - cluster: edge
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ['*']
";

/// Loads the pack with this rule and template; when it loads, evaluates `trigger` with it.
pub fn evaluate_with(rule: &str, template: &str, trigger: &Value) -> Option<Outcome> {
    let files = PackFiles {
        root: "fuzz".into(),
        files: BTreeMap::from([
            ("pack.yaml".to_string(), PACK.to_string()),
            ("rules/rule.yaml".to_string(), rule.to_string()),
            ("templates/t.yaml.hbs".to_string(), template.to_string()),
        ]),
        shared_partials: BTreeMap::new(),
    };
    let pack = load(&files).pack?;
    let mut world = MemoryWorld::new();
    let _ = world.insert("source", trigger.clone());
    let now = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    evaluate(&pack, Trigger { cluster: "source", object: trigger }, &world, now).ok()
}

/// A trigger with hostile strings: line breaks, document markers, YAML indicators.
pub fn trigger() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "App",
        "metadata": {"name": "a", "namespace": "default", "labels": {"x": "y"}},
        "spec": {"note": "x\n---\nkind: Secret\u{2028}: y", "items": ["a: b", "- c", "{d}"],
                 "team": "red"}})
}
