//! Test suites: suite-level `clusters`, a case that gives a role the pack reads no members,
//! and expectations on the world after an evaluation is acted on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;
use std::path::Path;

use switchyard_core::testing::{CaseReport, run_tests};
use switchyard_core::{PackFiles, load};

/// The mesh-fanout fixture pack with `suite` as its only test suite.
fn reports(suite: &str) -> Vec<CaseReport> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/packs/mesh-fanout");
    let mut files = BTreeMap::new();
    for relative in [
        "pack.yaml",
        "rules/global-service.yaml",
        "templates/annotate.yaml.hbs",
        "templates/export.yaml.hbs",
        "templates/primary.yaml.hbs",
    ] {
        files.insert(
            relative.to_string(),
            std::fs::read_to_string(root.join(relative)).unwrap(),
        );
    }
    files.insert("tests/suite.yaml".to_string(), suite.to_string());
    let result = load(&PackFiles {
        root: "mesh-fanout".into(),
        files,
        shared_partials: BTreeMap::new(),
    });
    let errors: Vec<String> = result.diagnostics.iter().map(ToString::to_string).collect();
    let mut pack = result.pack.unwrap_or_else(|| panic!("{errors:#?}"));
    run_tests(&mut pack, &switchyard_core::params::Values::new())
}

fn failures(reports: &[CaseReport]) -> Vec<(String, Vec<String>)> {
    reports
        .iter()
        .map(|r| (r.case.clone(), r.failures.clone()))
        .collect()
}

const GLOBAL_SERVICE: &str = "
        - apiVersion: mesh.example.dev/v1alpha1
          kind: GlobalService
          metadata: {name: dns, namespace: kube-system}
          spec: {shared: false}";

#[test]
fn suite_clusters_are_every_cases_members_unless_the_case_gives_its_own() {
    let suite = format!(
        "apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {{name: s}}
spec:
  clusters: [mesh/c1, mesh/c2]
  cases:
    - name: shared
      inputs:{GLOBAL_SERVICE}
      expect:
        outputCount: 2
        status:
          - trigger: {{kind: GlobalService, namespace: kube-system, name: dns}}
            status: {{meshClusters: 2}}
    - name: own
      clusters: [mesh/x]
      inputs:{GLOBAL_SERVICE}
      expect:
        outputCount: 1
"
    );
    assert_eq!(
        failures(&reports(&suite)),
        [("shared".to_string(), vec![]), ("own".to_string(), vec![])]
    );
}

#[test]
fn a_case_without_members_of_a_role_the_rule_reads_fails_unless_it_says_so() {
    let suite = format!(
        "apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {{name: s}}
spec:
  cases:
    - name: forgotten
      inputs:{GLOBAL_SERVICE}
      expect:
        outputCount: 0
    - name: on purpose
      clusters: []
      inputs:{GLOBAL_SERVICE}
      expect:
        outputCount: 0
"
    );
    assert_eq!(
        failures(&reports(&suite)),
        [
            (
                "forgotten".to_string(),
                vec![
                    "rule `global-service` reads the members of role `mesh` (lookup `services` \
                     reads every member), and the case gives it none: name them in the suite's \
                     or the case's `clusters` (`mesh/NAME`), or write `clusters: []` in the case \
                     to test a role without members"
                        .to_string()
                ]
            ),
            ("on purpose".to_string(), vec![])
        ]
    );
}

#[test]
fn world_expectations_see_what_the_broker_would_have_done() {
    let suite = format!(
        "apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {{name: s}}
spec:
  clusters: [mesh/c1]
  cases:
    - name: world
      inputs:{GLOBAL_SERVICE}
      expect:
        world:
          present:
            - cluster: mesh/c1
              object:
                apiVersion: v1
                kind: ConfigMap
                metadata: {{name: global-dns, namespace: kube-system}}
                data: {{cluster: c1}}
      steps:
        - name: gone
          delete: [{{kind: GlobalService, namespace: kube-system, name: dns}}]
          expect:
            world:
              absent: [{{cluster: mesh/c1, kind: ConfigMap, namespace: kube-system, name: global-dns}}]
    - name: wrong
      inputs:{GLOBAL_SERVICE}
      expect:
        world:
          present:
            - object:
                apiVersion: v1
                kind: ConfigMap
                metadata: {{name: global-dns, namespace: kube-system}}
                data: {{cluster: c2, service: dns, extra: x}}
            - object:
                apiVersion: v1
                kind: ConfigMap
                metadata: {{name: nothing, namespace: kube-system}}
          absent: [{{kind: GlobalService, namespace: kube-system, name: dns}}]
"
    );
    assert_eq!(
        failures(&reports(&suite)),
        [
            ("world".to_string(), vec![]),
            (
                "wrong".to_string(),
                vec![
                    "world: object ConfigMap kube-system/global-dns differs: `data.cluster` is \
                     \"c1\", expected \"c2\"; `data.extra` is absent, expected \"x\""
                        .to_string(),
                    "world: object ConfigMap kube-system/nothing does not exist".to_string(),
                    "world: object GlobalService kube-system/dns exists but must be absent"
                        .to_string(),
                ]
            )
        ]
    );
}

#[test]
fn golden_files_to_write_say_whether_they_exist() {
    let suite = format!(
        "apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {{name: s}}
spec:
  clusters: [mesh/c1]
  cases:
    - name: new golden
      inputs:{GLOBAL_SERVICE}
      expect: {{golden: tests/golden/new.yaml}}
"
    );
    let reports = reports(&suite);
    let update = &reports[0].golden_updates[0];
    assert_eq!(
        (
            update.file.as_str(),
            update.created,
            update.failure.as_str()
        ),
        (
            "tests/golden/new.yaml",
            true,
            "golden file `tests/golden/new.yaml` not found (run with --update to create it)"
        )
    );
    assert_eq!(reports[0].failures, std::slice::from_ref(&update.failure));
    assert!(
        update.text.contains("name: global-dns\n"),
        "{}",
        update.text
    );
}

/// Every file of a fixture pack, read from disk.
fn fixture(name: &str) -> PackFiles {
    fn walk(dir: &Path, base: &Path, files: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, files);
            } else {
                let relative = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                files.insert(relative, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/packs")
        .join(name);
    let mut files = BTreeMap::new();
    walk(&root, &root, &mut files);
    PackFiles {
        root: name.into(),
        files,
        shared_partials: BTreeMap::new(),
    }
}

/// A rule without `watch` is evaluated once per pack, for the pack's own trigger: its
/// outputs are rendered without any input, and the trigger gets no status or finalizer.
#[test]
fn a_rule_without_trigger_renders_once_per_pack() {
    let files = fixture("kept-in-place");
    let mut pack = load(&files).pack.unwrap();
    let reports = run_tests(&mut pack, &switchyard_core::params::Values::new());
    assert!(reports.iter().all(CaseReport::passed), "{reports:#?}");
    assert_eq!(reports.len(), 3);

    let world = switchyard_core::plan::world_of(&[], &["mesh/c1".to_string()]).unwrap();
    let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let plan = switchyard_core::plan(&pack, &world, now);
    let triggers: Vec<String> = plan
        .outcomes
        .iter()
        .map(|o| o.trigger.to_string())
        .collect();
    assert_eq!(triggers, ["mesh:RulePack.switchyard.dev:kept-in-place"]);
    assert_eq!(plan.outcomes[0].rules, ["members"]);
    assert!(plan.outcomes[0].status.is_none());
    assert!(plan.outcomes[0].finalizer.is_none());
    let outputs: Vec<String> = plan.objects.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(outputs, ["mesh/c1:ConfigMap:default/mesh-members"]);

    // It has no trigger to write a status to.
    let mut files = files;
    files.files.insert(
        "rules/members.yaml".into(),
        files.files["rules/members.yaml"].clone() + "  status:\n    fields: {n: '1'}\n",
    );
    let errors: Vec<String> = load(&files)
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        [
            "kept-in-place/rules/members.yaml:19:5: error[pack::invalid-value]: a rule without `watch` has no trigger to write `status` to: it keeps its outputs in place once per pack\n  in rule `members`"
        ]
    );
}

/// `rules` scopes a suite's or a case's output expectations to what those rules render, so
/// a rule without a trigger (rendered in every case) does not enter every count; a null
/// status expectation says the field is absent.
#[test]
fn expectations_scoped_to_rules_compare_only_their_outputs() {
    let mut files = fixture("kept-in-place");
    files.files.retain(|path, _| !path.starts_with("tests/"));
    let suite = "apiVersion: switchyard.dev/v1alpha1
kind: TestSuite
metadata: {name: scoped}
spec:
  clusters: [mesh/c1]
  rules: [marked]
  cases:
    - name: the suite's rules
      inputs:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default, labels: {kept-in-place/echo: 'true'}}, data: {k: v}}
      expect:
        outputCount: 1
        absent: [{kind: ConfigMap, namespace: default, name: mesh-members}]
        status:
          - trigger: {kind: ConfigMap, namespace: default, name: a}
            status: {missing: null}
    - name: the case's rules
      rules: [members, marked]
      expect:
        outputCount: 1
    - name: every rule
      rules: []
      inputs:
        - {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: default, labels: {kept-in-place/echo: 'true'}}, data: {k: v}}
      expect:
        # The echo, and the members' ConfigMap in c1 and in the input's own (unnamed) member.
        outputCount: 3
    - name: an unknown rule
      rules: [marks]
      expect:
        outputCount: 0
";
    files.files.insert("tests/scoped.yaml".into(), suite.into());
    let mut pack = load(&files).pack.unwrap();
    let reports = run_tests(&mut pack, &switchyard_core::params::Values::new());
    assert_eq!(
        failures(&reports),
        [
            ("the suite's rules".to_string(), vec![]),
            ("the case's rules".to_string(), vec![]),
            ("every rule".to_string(), vec![]),
            (
                "an unknown rule".to_string(),
                vec![
                    "`rules` names `marks`, which is not a rule of pack `kept-in-place`"
                        .to_string()
                ]
            ),
        ]
    );
}
