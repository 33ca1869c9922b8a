//! `spec.cel` of pack.yaml: the Kubernetes version and extensions expressions compile in.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;

use switchyard_core::{PackFiles, load};

const PACK: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: demo, version: 1.2.3}
spec:
  clusters:
    - {name: source, access: [read, writeStatus]}
  scope: []
"#;

const RULE: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: app}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  when:
    - expression: cel.bind(n, self.spec.replicas, n > 0 && n < 10)
  status:
    fields:
      replicas: self.spec.replicas
"#;

/// The diagnostics of loading the pack with `cel` (lines under `spec:`) and `rule`.
fn diagnostics(cel: &str, rule: &str) -> Vec<String> {
    let pack = PACK.replace("spec:\n", &format!("spec:\n{cel}"));
    let files = PackFiles {
        root: "demo".into(),
        files: BTreeMap::from([
            ("pack.yaml".to_string(), pack),
            ("rules/app.yaml".to_string(), rule.to_string()),
        ]),
        shared_partials: BTreeMap::new(),
    };
    let result = load(&files);
    // The first line: the position and the message, without the source excerpt. Notes
    // (the demo kind has no schema) are not what these tests are about.
    let mut messages: Vec<String> = result
        .diagnostics
        .iter()
        .filter(|d| d.severity != switchyard_core::Severity::Note)
        .map(|d| d.to_string().lines().next().unwrap_or_default().to_string())
        .collect();
    if result.pack.is_some() {
        messages.push("loaded".to_string());
    }
    messages
}

#[test]
fn cel_bind_needs_the_bindings_extension() {
    assert_eq!(
        diagnostics("", RULE),
        [
            "demo/rules/app.yaml:7:19: error[cel::syntax]: invalid CEL expression: function \
             'cel.bind' is not in this environment: it needs the extension 'bindings' \
             (spec.cel.extensions)"
        ]
    );
    assert_eq!(
        diagnostics("  cel:\n    extensions: [bindings]\n", RULE),
        ["loaded"]
    );
}

#[test]
fn the_kubernetes_version_decides_the_libraries() {
    let rule = RULE.replace(
        "cel.bind(n, self.spec.replicas, n > 0 && n < 10)",
        "isIP(self.spec.address)",
    );
    assert_eq!(
        diagnostics("  cel:\n    kubernetes: \"1.29\"\n", &rule),
        [
            "demo/rules/app.yaml:7:19: error[cel::syntax]: invalid CEL expression: function \
             'isIP' is not in this environment: it was introduced in Kubernetes 1.30 \
             (spec.cel.kubernetes is 1.29)"
        ]
    );
    assert_eq!(
        diagnostics("  cel:\n    kubernetes: \"1.30\"\n", &rule),
        ["loaded"]
    );
    // The default is the newest version.
    assert_eq!(diagnostics("", &rule), ["loaded"]);
}

#[test]
fn unknown_extensions_and_versions_do_not_load() {
    assert_eq!(
        diagnostics("  cel:\n    extensions: [bindings, maths]\n", RULE),
        [
            "demo/pack.yaml:6:28: error[pack::invalid-value]: unknown variant `maths`, expected \
             one of `bindings`, `encoders`, `math`, `strings-v3` at `spec.cel.extensions[1]`"
        ]
    );
    assert_eq!(
        diagnostics(
            "  cel:\n    kubernetes: \"1.27\"\n    extensions: [bindings]\n",
            RULE
        ),
        [
            "demo/pack.yaml:6:17: error[pack::invalid-value]: spec.cel.kubernetes: unsupported \
             Kubernetes version '1.27': the engine implements the CEL environments of 1.28 to \
             1.34"
        ]
    );
    assert_eq!(
        diagnostics("  cel:\n    kubernetes: 1.30\n", RULE),
        [
            "demo/pack.yaml:6:17: error[pack::invalid-value]: invalid type: floating point \
             `1.3`, expected a string at `spec.cel.kubernetes`"
        ]
    );
    assert_eq!(
        diagnostics("  cel:\n    extension: [bindings]\n", RULE)[0],
        "demo/pack.yaml:6:5: error[pack::unknown-field]: unknown field `extension`, expected \
         `kubernetes` or `extensions` at `spec.cel.extension`"
    );
}
