//! Input files as a hostile pull request writes them: byte order marks, malformed lists,
//! annotations of the wrong type, JSON escapes, and names that would forge identities.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use serde_json::json;
use switchyard_core::ObjectKey;
use switchyard_core::plan::parse_inputs;

fn error(text: &str) -> String {
    parse_inputs(text, "in.yaml", "source")
        .unwrap_err()
        .to_string()
}

#[test]
fn a_byte_order_mark_is_ignored() {
    let text = "\u{feff}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
    let objects = parse_inputs(text, "in.yaml", "source").unwrap();
    assert_eq!(objects[0].1["apiVersion"], json!("v1"));
}

#[test]
fn list_items_are_reported_where_they_are() {
    let text = "\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: ConfigMap
    metadata: {name: a}
  - apiVersion: v1
    metadata: {name: b}
";
    assert_eq!(
        error(text),
        "in.yaml:7:5: error[input::object]: object has no `kind`"
    );
}

#[test]
fn list_items_must_be_a_list() {
    assert_eq!(
        error("apiVersion: v1\nkind: List\nitems: 5\n"),
        "in.yaml:3:8: error[input::object]: `items` of a `kind: List` must be a list of objects"
    );
    assert_eq!(
        error("apiVersion: v1\nkind: List\nitems: {a: 1}\n"),
        "in.yaml:3:8: error[input::object]: `items` of a `kind: List` must be a list of objects"
    );
    // An empty list, or none, is no object.
    assert!(
        parse_inputs(
            "apiVersion: v1\nkind: List\nitems: []\n",
            "in.yaml",
            "source"
        )
        .unwrap()
        .is_empty()
    );
    assert!(
        parse_inputs("apiVersion: v1\nkind: List\n", "in.yaml", "source")
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_cluster_annotation_that_is_not_a_string_is_an_error() {
    let text = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
  annotations:
    switchyard.dev/cluster: [edge]
";
    assert_eq!(
        error(text),
        "in.yaml:6:29: error[input::object]: annotation `switchyard.dev/cluster` must be a string naming a cluster (`ROLE` or `ROLE/NAME`), not `[\"edge\"]`"
    );
    let text = "---\nkind: List\napiVersion: v1\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    annotations: {switchyard.dev/cluster: 7}\n";
    assert_eq!(
        error(text),
        "in.yaml:9:43: error[input::object]: annotation `switchyard.dev/cluster` must be a string naming a cluster (`ROLE` or `ROLE/NAME`), not `7`"
    );
}

#[test]
fn json_surrogate_pairs_are_read() {
    // `json.dumps` of an object with an emoji in an annotation.
    let text = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"note": "\ud83d\ude00"}}}"#;
    let objects = parse_inputs(text, "in.json", "source").unwrap();
    assert_eq!(objects[0].1["metadata"]["annotations"]["note"], json!("😀"));
    let text = r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "\ud83d"}}"#;
    assert_eq!(
        parse_inputs(text, "in.json", "source")
            .unwrap_err()
            .to_string(),
        "in.json:1:65: error[input::yaml]: invalid YAML: lone UTF-16 surrogate `\\ud83d` in a string"
    );
}

#[test]
fn names_that_would_forge_identities_are_refused() {
    assert_eq!(
        error(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: 'a,source:App:default/b', namespace: default}\n"
        ),
        "in.yaml:1:1: error[input::object]: metadata.name `a,source:App:default/b` is not a valid Kubernetes name"
    );
    assert_eq!(
        error("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: 'x,y'}\n"),
        "in.yaml:1:1: error[input::object]: metadata.namespace `x,y` is not a valid Kubernetes namespace name"
    );
    assert_eq!(
        error("apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n"),
        "in.yaml:1:1: error[input::object]: metadata.name `a.b` is not a valid Kubernetes name"
    );
}

#[test]
fn names_follow_kubernetes_rules_per_kind() {
    let key = |api: &str, kind: &str, name: &str, ns: Option<&str>| {
        let mut metadata = json!({"name": name});
        if let Some(ns) = ns {
            metadata["namespace"] = json!(ns);
        }
        ObjectKey::of(
            "c",
            &json!({"apiVersion": api, "kind": kind, "metadata": metadata}),
        )
    };
    // Valid everywhere Kubernetes takes them.
    assert!(key("v1", "ConfigMap", "kube-root-ca.crt", Some("kube-system")).is_ok());
    assert!(key("apps/v1", "Deployment", "a-1", Some("x")).is_ok());
    // Upper case is refused, as Kubernetes refuses it.
    assert_eq!(
        key("example.com/v1", "Widget", "Web", Some("x")).unwrap_err(),
        "metadata.name `Web` is not a valid Kubernetes name"
    );
    assert!(key("v1", "Namespace", "team-a", None).is_ok());
    assert!(key("example.com/v1", "Widget", &"a".repeat(253), Some("x")).is_ok());
    // RBAC names are path segments.
    assert!(
        key(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            "system:controller:x",
            None
        )
        .is_ok()
    );
    assert!(
        key(
            "rbac.authorization.k8s.io/v1",
            "Role",
            "Admin Role",
            Some("x")
        )
        .is_ok()
    );
    // Not valid.
    for (api, kind, name) in [
        ("v1", "ConfigMap", "-a"),
        ("v1", "ConfigMap", "a..b"),
        ("v1", "ConfigMap", "a b"),
        ("v1", "ConfigMap", ""),
        ("example.com/v1", "Widget", &"a".repeat(254)),
        ("v1", "Namespace", &"a".repeat(64)),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "a/b"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", ".."),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", "a,b"),
    ] {
        assert_eq!(
            key(api, kind, name, None).unwrap_err(),
            format!("metadata.name `{name}` is not a valid Kubernetes name"),
            "{kind} {name}"
        );
    }
    assert_eq!(
        key("v1", "ConfigMap", "a", Some("Team")).unwrap_err(),
        "metadata.namespace `Team` is not a valid Kubernetes namespace name"
    );
    // An empty namespace is a cluster-scoped object, as before.
    assert_eq!(
        key("v1", "ConfigMap", "a", Some("")).unwrap().namespace,
        None
    );
}
