//! Loading a pack whose rule file is arbitrary never panics; when it loads, evaluating it on a
//! fixed trigger never panics either.
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

const TEMPLATE: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: {{self.metadata.name}}
  namespace: default
data:
  note: {{self.spec.note}}
";

fuzz_target!(|data: &[u8]| {
    let Ok(rule) = std::str::from_utf8(data) else {
        return;
    };
    let files = PackFiles {
        root: "fuzz".into(),
        files: BTreeMap::from([
            ("pack.yaml".to_string(), PACK.to_string()),
            ("rules/rule.yaml".to_string(), rule.to_string()),
            ("templates/cm.yaml.hbs".to_string(), TEMPLATE.to_string()),
        ]),
        shared_partials: BTreeMap::new(),
    };
    let Some(pack) = load(&files).pack else {
        return;
    };
    let trigger = json!({"apiVersion": "example.com/v1", "kind": "App",
        "metadata": {"name": "a", "namespace": "default", "labels": {"x": "y"}},
        "spec": {"note": "n", "items": [1, 2, 3], "team": "red"}});
    let mut world = MemoryWorld::new();
    let _ = world.insert("source", trigger.clone());
    let now = chrono::DateTime::from_timestamp(1_767_225_600, 0).unwrap_or_default();
    let _ = evaluate(&pack, Trigger { cluster: "source", object: &trigger }, &world, now);
});
