//! What a template edit changes (`edit`): every trigger it leaves out renders exactly as
//! before the edit.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::{TemplateEdit, TemplateSet};

const BEFORE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{self.metadata.name}}
  namespace: {{vars.namespace}}
  labels:
    app: {{self.metadata.name}}
data:
  replicas: \"{{self.spec.replicas}}\"
{{#each self.spec.ports}}
  port-{{@index}}: \"{{this}}\"
{{/each}}
";

fn set(source: &str) -> TemplateSet {
    let mut set = TemplateSet::new(None);
    set.add_template("t", "templates/t.yaml.hbs", source)
        .unwrap();
    set
}

fn trigger(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": spec})
}

fn triggers() -> Vec<Value> {
    vec![
        trigger("plain", json!({"replicas": 1})),
        trigger("placed", json!({"replicas": 2, "placement": {"name": "p"}})),
        trigger("ports", json!({"replicas": 3, "ports": [80, 443]})),
        trigger("empty-placement", json!({"replicas": 1, "placement": {}})),
    ]
}

/// The names of the triggers `edit` says may change; every other one renders exactly as
/// before (checked).
fn changed(before: &str, after: &str) -> (TemplateEdit, Vec<String>) {
    let (old, new) = (set(before), set(after));
    let edit = new.edit_since(&old, &["t"]);
    let mut names = Vec::new();
    for t in triggers() {
        let context = json!({"self": t, "vars": {"namespace": "ns"}});
        if edit.may_change(&t) {
            names.push(t["metadata"]["name"].as_str().unwrap().to_owned());
        } else {
            assert_eq!(
                old.render("t", &context),
                new.render("t", &context),
                "{} renders differently",
                t["metadata"]["name"]
            );
        }
    }
    (edit, names)
}

#[test]
fn a_block_added_under_a_condition_on_the_trigger_changes_the_triggers_it_holds_for() {
    let after = BEFORE.replace(
        "  namespace: {{vars.namespace}}\n",
        "  namespace: {{vars.namespace}}\n{{#if self.spec.placement}}\n  annotations:\n    edited: \"true\"\n{{/if}}\n",
    );
    let (edit, names) = changed(BEFORE, &after);
    assert!(!edit.is_everywhere());
    assert_eq!(names, ["placed"]);
}

#[test]
fn an_edit_inside_a_block_changes_the_triggers_the_block_renders_for() {
    // Inside `#if`: the condition; inside `#unless`: its negation; inside `#each`: the
    // list has elements (the conditions within an `#each` read its elements, not the
    // trigger).
    let before = BEFORE.replace(
        "  labels:\n",
        "{{#if self.spec.placement}}\n  annotations:\n    placed: \"yes\"\n{{/if}}\n  labels:\n",
    );
    let after = before.replace("placed: \"yes\"", "placed: \"indeed\"");
    assert_eq!(changed(&before, &after).1, ["placed"]);

    let before = BEFORE.replace(
        "  labels:\n",
        "{{#unless self.spec.placement}}\n  annotations:\n    placed: \"no\"\n{{/unless}}\n  labels:\n",
    );
    let after = before.replace("placed: \"no\"", "placed: \"never\"");
    assert_eq!(
        changed(&before, &after).1,
        ["plain", "ports", "empty-placement"]
    );

    let after = BEFORE.replace("port-{{@index}}", "p-{{@index}}");
    assert_eq!(changed(BEFORE, &after).1, ["ports"]);
}

#[test]
fn an_edit_in_the_inverse_changes_the_triggers_the_condition_does_not_hold_for() {
    let before = BEFORE.replace(
        "  labels:\n",
        "{{#if self.spec.placement}}\n  annotations:\n    a: x\n{{else}}\n  annotations:\n    b: y\n{{/if}}\n  labels:\n",
    );
    let after = before.replace("b: y", "b: z");
    assert_eq!(
        changed(&before, &after).1,
        ["plain", "ports", "empty-placement"]
    );
}

#[test]
fn an_edit_anywhere_else_changes_every_trigger() {
    let after = BEFORE.replace(
        "app: {{self.metadata.name}}",
        "app: x-{{self.metadata.name}}",
    );
    let (edit, names) = changed(BEFORE, &after);
    assert!(edit.is_everywhere());
    assert_eq!(names.len(), triggers().len());
}

#[test]
fn a_condition_reading_more_than_the_trigger_is_not_evaluated() {
    // `vars` takes the whole evaluation: the condition counts as holding.
    let after = BEFORE.replace(
        "  labels:\n",
        "{{#if vars.namespace}}\n  annotations:\n    a: x\n{{/if}}\n  labels:\n",
    );
    assert!(changed(BEFORE, &after).0.is_everywhere());
    // Within a condition on the trigger, it narrows nothing but does not widen either.
    let after = BEFORE.replace(
        "  labels:\n",
        "{{#if self.spec.placement}}\n{{#if vars.namespace}}\n  annotations:\n    a: x\n{{/if}}\n{{/if}}\n  labels:\n",
    );
    assert_eq!(changed(BEFORE, &after).1, ["placed"]);
    // A comparison of the trigger's fields is evaluated.
    let after = BEFORE.replace(
        "  labels:\n",
        "{{#if (gt self.spec.replicas 2)}}\n  annotations:\n    a: x\n{{/if}}\n  labels:\n",
    );
    assert_eq!(changed(BEFORE, &after).1, ["ports"]);
}

#[test]
fn text_the_structure_does_not_keep_changes_nothing() {
    let after = format!("# a comment\n{BEFORE}\n\n");
    let (edit, names) = changed(BEFORE, &after);
    assert!(edit.changes_nothing());
    assert!(names.is_empty());
}

#[test]
fn a_template_rendered_as_text_changes_every_trigger_when_edited() {
    // A block inside a scalar keeps the template from compiling into structure.
    let before = BEFORE.replace(
        "app: {{self.metadata.name}}",
        "app: a{{#if self.spec.placement}}-placed{{/if}}",
    );
    assert!(!set(&before).is_structured("t"));
    let after = before.replace("-placed", "-put");
    assert!(changed(&before, &after).0.is_everywhere());
    assert!(changed(&before, &before).0.changes_nothing());
}

#[test]
fn an_edit_of_a_partial_changes_the_triggers_of_the_blocks_including_it() {
    let template = BEFORE.replace(
        "  labels:\n",
        "{{#if self.spec.placement}}\n  annotations:\n    {{> notes}}\n{{/if}}\n  labels:\n",
    );
    let with_partial = |partial: &str| {
        let mut set = TemplateSet::new(None);
        set.add_partial("notes", "templates/notes.hbs", partial)
            .unwrap();
        set.add_template("t", "templates/t.yaml.hbs", &template)
            .unwrap();
        set
    };
    let (old, new) = (with_partial("a: x"), with_partial("a: y"));
    assert!(new.is_structured("t"));
    let edit = new.edit_since(&old, &["t"]);
    let changed: Vec<Value> = triggers()
        .into_iter()
        .filter(|t| edit.may_change(t))
        .map(|t| t["metadata"]["name"].clone())
        .collect();
    assert_eq!(changed, [json!("placed")]);
}
