//! Any template either fails to load with a diagnostic or renders: never a panic, and the
//! trigger's hostile strings stay values, never structure.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;

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
    if let Some(outcome) = common::evaluate_with(RULE, template, &common::trigger()) {
        for d in &outcome.desired {
            let text = d.object.to_string();
            assert!(!text.contains("kind\":\"Secret"), "a tenant string became structure: {text}");
        }
    }
});
