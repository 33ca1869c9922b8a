//! What packs and tenants write cannot slip past the dry run: missing partials and broken
//! templates are load errors at their place, kinds declared with the wrong scope fail
//! `check`, outputs with the wrong scope fail evaluation, scope patterns with many stars
//! match in one pass, the engine's own functions pay for what they read, and names and
//! messages printed or written to JUnit cannot forge lines, escape sequences or XML.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use support::*;

/// A one-rule pack in a temporary folder: `App` objects of `example.com/v1` make what
/// `template` renders; `scope` is the pack's scope entry (YAML, indented for `scope:`).
fn pack(template: &str, scope: &str, extra: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "pack.yaml",
        &format!(
            "apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {{name: hostile, version: 0.1.0}}
spec:
  clusters:
    - name: source
      access: [read, write, writeStatus]
  scope:
{scope}"
        ),
    );
    write(
        "rules/app.yaml",
        "apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: app}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  outputs:
    - {name: out, cluster: source, template: out.yaml.hbs}
",
    );
    write("templates/out.yaml.hbs", template);
    for (path, text) in extra {
        write(path, text);
    }
    dir
}

const CONFIGMAP_SCOPE: &str = "    - cluster: source
      kinds: [{apiVersion: v1, kind: ConfigMap}]
      namespaces: ['*']
";

fn check(dir: &Path) -> (Option<i32>, String) {
    let out = switchyard(&["check", dir.to_str().unwrap()]);
    (
        out.status.code(),
        stdout(&out).replace(&format!("{}/", dir.display()), ""),
    )
}

#[test]
fn a_missing_partial_is_a_load_error_where_it_is_called() {
    let dir = pack(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: {{self.metadata.namespace}}\n  labels:\n    {{> label.hbs}}\n",
        CONFIGMAP_SCOPE,
        &[("templates/labels.hbs", "app: web\n")],
    );
    let (code, out) = check(dir.path());
    assert_eq!(code, Some(1), "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.contains(": error[")).collect();
    assert_eq!(
        errors,
        [
            "templates/out.yaml.hbs:7:5: error[template::not-found]: partial `label.hbs` not found: no template, shared partial or inline partial has that name (did you mean `labels.hbs`?)"
        ],
        "{out}"
    );
    // No note blaming the template's size or structure.
    assert!(!out.contains("MiB"), "{out}");
    assert!(!out.contains("note[template"), "{out}");
}

#[test]
fn a_broken_template_is_reported_where_it_breaks_and_only_there() {
    let dir = pack(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{#if self.metadata.name}}x\n",
        CONFIGMAP_SCOPE,
        &[],
    );
    let (code, out) = check(dir.path());
    assert_eq!(code, Some(1), "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.contains(": error[")).collect();
    assert_eq!(errors.len(), 1, "{out}");
    assert!(
        errors[0].starts_with("templates/out.yaml.hbs:")
            && errors[0].contains("error[template::syntax]"),
        "{out}"
    );
    assert!(!out.contains("not found"), "{out}");
}

#[test]
fn a_kind_declared_with_the_wrong_scope_fails_check() {
    let dir = pack(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{self.metadata.name}}\n",
        "    - cluster: source
      kinds: [{apiVersion: v1, kind: Namespace}, {apiVersion: apps/v1, kind: Deployment, clusterScoped: true}]
      namespaces: ['prod']
",
        &[],
    );
    let (code, out) = check(dir.path());
    assert_eq!(code, Some(1), "{out}");
    let errors: Vec<&str> = out.lines().filter(|l| l.contains(": error[")).collect();
    assert_eq!(
        errors,
        [
            "pack.yaml:10:15: error[pack::scope]: scope entry v1 Namespace: v1 Namespace is cluster-scoped: declare it with `clusterScoped: true`",
            "pack.yaml:10:50: error[pack::scope]: scope entry apps/v1 Deployment: apps/v1 Deployment is namespaced: remove `clusterScoped: true`",
        ],
        "{out}"
    );
}

#[test]
fn an_output_with_the_wrong_scope_fails_evaluation() {
    let dir = pack(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: {{self.metadata.namespace}}\n",
        "    - cluster: source
      kinds: [{apiVersion: v1, kind: Namespace, clusterScoped: true}]
",
        &[],
    );
    let input = dir.path().join("app.yaml");
    std::fs::write(
        &input,
        "apiVersion: example.com/v1\nkind: App\nmetadata: {name: prod, namespace: team-a}\n",
    )
    .unwrap();
    let out = switchyard(&[
        "render",
        "--pack",
        dir.path().to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--clock",
        "2026-01-01T00:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("v1 Namespace `prod` has namespace `team-a`, but Namespace is cluster-scoped in cluster `source`: remove metadata.namespace from the template"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn scope_patterns_with_many_stars_match_in_one_pass() {
    let stars = "*a".repeat(13);
    let dir = pack(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: {{self.metadata.namespace}}\n",
        &format!(
            "    - cluster: source
      kinds: [{{apiVersion: v1, kind: ConfigMap}}]
      namespaces: ['{stars}b']
"
        ),
        &[],
    );
    let input = dir.path().join("app.yaml");
    let namespace = "a".repeat(63);
    std::fs::write(
        &input,
        format!("apiVersion: example.com/v1\nkind: App\nmetadata: {{name: web, namespace: {namespace}}}\n"),
    )
    .unwrap();
    // Outside the scope (no `b`): refused, at once.
    let out = switchyard(&[
        "render",
        "--pack",
        dir.path().to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is outside the pack's scope"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn engine_functions_pay_for_what_they_read() {
    // 50,000 calls of goFormat on a 100 KB object: the cost limit stops them early.
    let dir = pack(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: {{self.metadata.namespace}}\ndata:\n  n: '{{vars.n}}'\n",
        CONFIGMAP_SCOPE,
        &[(
            "rules/app.yaml",
            "apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: app}
spec:
  watch: {apiVersion: example.com/v1, kind: App}
  vars:
    - name: n
      expression: lists.range(50000).map(i, goFormat(self)).size()
      maxCost: 1000000
  outputs:
    - {name: out, cluster: source, template: out.yaml.hbs}
",
        )],
    );
    let input = dir.path().join("app.yaml");
    std::fs::write(
        &input,
        format!(
            "apiVersion: example.com/v1\nkind: App\nmetadata: {{name: web, namespace: team-a}}\nspec: {{blob: '{}'}}\n",
            "x".repeat(100_000)
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = switchyard(&[
        "render",
        "--pack",
        dir.path().to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("cost limit exceeded"),
        "{}",
        stderr(&out)
    );
    eprintln!("stopped by the cost limit after {:?}", started.elapsed());
}

#[test]
fn names_and_messages_cannot_forge_output_or_break_junit() {
    let dir = pack(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: {{self.metadata.namespace}}\ndata:\n  note: {{self.spec.note}}\n",
        CONFIGMAP_SCOPE,
        &[(
            "tests/render.yaml",
            "apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {name: render}
spec:
  cases:
    - name: \"ok\\nPASS forged \\e[31mred\\e[0m \\x01 \\u202e\"
      inputs:
        - apiVersion: example.com/v1
          kind: App
          metadata: {name: web, namespace: team-a}
          spec: {note: \"\\e]0;owned\\a\"}
      expect:
        outputCount: 2
",
        )],
    );
    let junit = dir.path().join("junit.xml");
    let out = switchyard(&[
        "test",
        dir.path().to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{1}'),
        "{text:?}"
    );
    assert!(
        text.contains(
            "FAIL hostile render: ok\\nPASS forged \\u{1b}[31mred\\u{1b}[0m \\u{1} \\u{202e}\n"
        ),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("PASS")), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let document = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{e}:\n{xml}"));
    let case = document
        .descendants()
        .find(|n| n.has_tag_name("testcase"))
        .unwrap();
    assert_eq!(
        case.attribute("name"),
        Some("ok\nPASS forged \\u{1b}[31mred\\u{1b}[0m \\u{1} \u{202e}")
    );
}
