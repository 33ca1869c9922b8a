//! One tenant object built to exhaust the evaluator (a million integers behind `distinct()`):
//! its rule fails on the cost limit, and the other objects render as usual.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Instant;

const PACK: &str = "apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: bomb, version: 0.1.0}
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
metadata: {name: app}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  vars:
    - name: distinct
      expression: size(self.spec.items.distinct())
  outputs:
    - {name: cm, cluster: edge, template: cm.yaml.hbs}
";

const TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: default\ndata:\n  n: \"{{vars.distinct}}\"\n";

#[test]
fn a_million_integers_fail_their_rule_and_the_others_render() {
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("pack");
    std::fs::create_dir_all(pack.join("rules")).unwrap();
    std::fs::create_dir_all(pack.join("templates")).unwrap();
    std::fs::write(pack.join("pack.yaml"), PACK).unwrap();
    std::fs::write(pack.join("rules/app.yaml"), RULE).unwrap();
    std::fs::write(pack.join("templates/cm.yaml.hbs"), TEMPLATE).unwrap();
    let items: Vec<String> = (0..1_000_000).map(|i| i.to_string()).collect();
    let inputs = format!(
        "{{\"apiVersion\": \"example.com/v1\", \"kind\": \"App\", \"metadata\": {{\"name\": \"bomb\", \"namespace\": \"default\"}}, \"spec\": {{\"items\": [{}]}}}}\n---\n{{\"apiVersion\": \"example.com/v1\", \"kind\": \"App\", \"metadata\": {{\"name\": \"ok\", \"namespace\": \"default\"}}, \"spec\": {{\"items\": [1, 2, 2]}}}}\n",
        items.join(",")
    );
    let input = dir.path().join("inputs.yaml");
    std::fs::write(&input, inputs).unwrap();

    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("render")
        .arg("--pack")
        .arg(&pack)
        .arg("--input")
        .arg(&input)
        .output()
        .unwrap();
    println!(
        "render of the million-integer object: {:?} (debug build)",
        started.elapsed()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("name: ok"), "{stdout}");
    assert!(stdout.contains("\"n\": \"2\""), "{stdout}");
    assert!(!stdout.contains("name: bomb"), "{stdout}");
    assert!(
        stderr.contains("source:App.example.com:default/bomb: rule `app`, vars.distinct at ")
            && stderr.contains("/pack/rules/app.yaml:8:48: cost limit exceeded: 2000000000015 > 1000000 (spec.limits.celCostPerExpression)\n  |       expression: size(self.spec.items.distinct())\n  |                                                ^\n"),
        "{stderr}"
    );
}
