//! Any template either fails to load with a diagnostic or renders: never a panic, and the
//! trigger's hostile strings stay values, never structure. A template compiled into
//! structure renders as its text does.
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use switchyard_core::template::TemplateSet;

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
    let mut set = TemplateSet::new(None);
    if set.add_template("t", "t.yaml.hbs", template).is_ok() {
        let trigger = common::trigger();
        let contexts = [
            json!({"self": trigger, "vars": {"items": trigger["spec"]["items"]}}),
            json!({"self": {"metadata": {}, "spec": {"items": [], "note": ""}}, "vars": {}}),
        ];
        for context in &contexts {
            if let Some(documents) = set.render_structured("t", context) {
                assert_eq!(
                    Ok(documents),
                    set.render_as_text("t", context),
                    "the structure and the text disagree"
                );
            }
        }
    }
    if let Some(outcome) = common::evaluate_with(RULE, template, &common::trigger()) {
        for d in &outcome.desired {
            let text = d.object.to_string();
            assert!(!text.contains("kind\":\"Secret"), "a tenant string became structure: {text}");
        }
    }
});
