//! The side-by-side benchmark gives kro and Switchyard the same work: kro's templates
//! (`engine/bench/versus-kro/kro/rgd.yaml`, its `${...}` references filled from the example
//! App) and the pack's render of that App are the same objects, Switchyard's ownership labels
//! and annotations aside.
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::Utc;
use serde_json::{Map, Value};
use switchyard_bench::repo_root;
use switchyard_core::plan::{self, parse_inputs, world_of};

/// The value a kro reference names: `schema.` paths in the App, `deployment.metadata.name`
/// in the Deployment kro creates first (the App's name).
fn reference(path: &str, app: &Value) -> Value {
    let path = path
        .strip_prefix("schema.")
        .or_else(|| {
            path.strip_prefix("deployment.metadata.")
                .map(|_| "metadata.name")
        })
        .unwrap_or_else(|| panic!("a reference this test does not know: {path}"));
    let pointer = format!("/{}", path.replace('.', "/"));
    app.pointer(&pointer)
        .cloned()
        .unwrap_or_else(|| panic!("the example App has no {path}"))
}

/// kro's template with every whole-string `${...}` replaced by what it names.
fn fill(template: &Value, app: &Value) -> Value {
    match template {
        Value::String(s) if s.starts_with("${") && s.ends_with('}') => {
            reference(&s[2..s.len() - 1], app)
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), fill(v, app)))
                .collect::<Map<_, _>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, app)).collect()),
        other => other.clone(),
    }
}

/// Switchyard's own metadata taken out: what kro would create.
fn without_ownership(object: &Value) -> Value {
    let mut object = object.clone();
    let metadata = object["metadata"].as_object_mut().unwrap();
    metadata.remove("annotations");
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        labels.retain(|k, _| {
            !k.starts_with("switchyard.dev/") && k != "app.kubernetes.io/managed-by"
        });
        if labels.is_empty() {
            metadata.remove("labels");
        }
    }
    object
}

#[test]
fn kro_and_the_pack_render_the_same_objects() {
    let dir = repo_root().join("engine/bench/versus-kro");
    let (_, loaded) = switchyard_files::load_pack_dir(&dir.join("packs/apps"), None, &[]).unwrap();
    let diagnostics: Vec<String> = loaded.diagnostics.iter().map(ToString::to_string).collect();
    assert!(
        loaded.diagnostics.iter().all(|d| !d.is_error()),
        "{diagnostics:?}"
    );
    let pack = loaded.pack.unwrap();
    let example = std::fs::read_to_string(dir.join("packs/apps/examples/app.yaml")).unwrap();
    let inputs = parse_inputs(&example, "app.yaml", "main").unwrap();
    let app = inputs[0].1.clone();
    let rendered = plan::plan(&pack, &world_of(&inputs, &[]).unwrap(), Utc::now());
    assert!(
        rendered.error_messages().is_empty(),
        "{:?}",
        rendered.error_messages()
    );

    let rgd_text = std::fs::read_to_string(dir.join("kro/rgd.yaml")).unwrap();
    let rgd = switchyard_core::yaml::parse_documents(&rgd_text).unwrap()[0].to_json();
    let resources = rgd["spec"]["resources"].as_array().unwrap();
    assert_eq!(resources.len(), rendered.objects.len());
    for resource in resources {
        let want = fill(&resource["template"], &app);
        let kind = want["kind"].as_str().unwrap();
        let have = rendered
            .objects
            .iter()
            .find(|o| o.key.kind == kind)
            .unwrap_or_else(|| panic!("the pack renders no {kind}"));
        assert_eq!(without_ownership(&have.object), want, "{kind}");
    }
}
