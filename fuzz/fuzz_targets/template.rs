//! Any template either fails to load with a diagnostic or renders: never a panic; whatever it
//! renders, tenant strings stay values (checked by the render itself, which parses the YAML).
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use switchyard_core::{MemoryWorld, PackFiles, Trigger, evaluate, load};

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

const RULE: &str = "apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: rule}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  vars:
    - {name: items, expression: self.spec.items}
  outputs:
    - {name: out, cluster: edge, template: t.yaml.hbs}
";

fuzz_target!(|data: &[u8]| {
    let Ok(template) = std::str::from_utf8(data) else {
        return;
    };
    let files = PackFiles {
        root: "fuzz".into(),
        files: BTreeMap::from([
            ("pack.yaml".to_string(), PACK.to_string()),
            ("rules/rule.yaml".to_string(), RULE.to_string()),
            ("templates/t.yaml.hbs".to_string(), template.to_string()),
        ]),
        shared_partials: BTreeMap::new(),
    };
    let Some(pack) = load(&files).pack else {
        return;
    };
    // Hostile strings in the trigger: line breaks, document markers, YAML indicators.
    let trigger = json!({"apiVersion": "example.com/v1", "kind": "App",
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {"note": "x\n---\nkind: Secret\u{2028}: y", "items": ["a: b", "- c", "{d}"]}});
    let mut world = MemoryWorld::new();
    let _ = world.insert("source", trigger.clone());
    let now = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    if let Ok(outcome) = evaluate(&pack, Trigger { cluster: "source", object: &trigger }, &world, now) {
        for d in &outcome.desired {
            let text = d.object.to_string();
            assert!(!text.contains("kind\":\"Secret"), "a tenant string became structure: {text}");
        }
    }
});
