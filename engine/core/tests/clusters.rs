//! Member clusters of a role, outputs to clusters chosen at evaluation, lookups over every
//! member, and patch outputs, on a small pack built in memory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use switchyard_core::plan::{plan, to_json, world_of};
use switchyard_core::{MemoryWorld, Outcome, Pack, PackFiles, Trigger, evaluate, load};

const PACK: &str = r#"
apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: copies, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read, write, writeStatus]}
    - {name: provider, access: [read, write]}
  scope:
    - cluster: provider
      kinds: [{apiVersion: example.com/v1, kind: VM}, {apiVersion: v1, kind: ConfigMap}]
      namespaces: ["*"]
    - cluster: source
      kinds: [{apiVersion: example.com/v1, kind: VM}]
      namespaces: ["*"]
"#;

const RULE: &str = r#"
apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: copy}
spec:
  watch: {apiVersion: example.com/v1, kind: VM}
  lookups:
    - name: accepting
      cluster: provider
      allClusters: true
      apiVersion: v1
      kind: ConfigMap
      namespace: "'accept'"
      matchLabels: "{'kind': 'vm'}"
    - name: existing
      cluster: provider
      clusterName: vars.provider
      apiVersion: example.com/v1
      kind: VM
      objectName: vars.name
  vars:
    - name: provider
      expression: "accepting.size() > 0 ? accepting[0].cluster.name : ''"
    - name: name
      expression: "'copy-' + self.metadata.name"
    - name: copy
      expression: stripClusterMetadata(self)
  outputs:
    - name: copy
      cluster: provider
      when: vars.provider != ''
      clusterName: vars.provider
      template: copy.yaml.hbs
    - name: mark
      cluster: source
      mode: patch
      when: vars.provider != ''
      template: mark.yaml.hbs
  status:
    fields:
      here: cluster
      providers: clusters.provider
      provider: vars.provider
      copyStatus: "existing == null ? null : existing.status"
"#;

const COPY: &str = "apiVersion: {{vars.copy.apiVersion}}
kind: {{vars.copy.kind}}
metadata:
  name: {{vars.name}}
  namespace: {{self.metadata.namespace}}
spec: {{vars.copy.spec}}
";

const MARK: &str = "apiVersion: example.com/v1
kind: VM
metadata:
  name: {{self.metadata.name}}
  namespace: {{self.metadata.namespace}}
  annotations:
    example.com/provider-cluster: {{vars.provider}}
";

fn pack() -> Pack {
    let files: BTreeMap<String, String> = [
        ("pack.yaml", PACK),
        ("rules/copy.yaml", RULE),
        ("templates/copy.yaml.hbs", COPY),
        ("templates/mark.yaml.hbs", MARK),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let result = load(&PackFiles {
        root: "copies".into(),
        files,
        shared_partials: BTreeMap::new(),
    });
    let diagnostics: Vec<String> = result
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    result.pack.unwrap_or_else(|| panic!("{diagnostics:#?}"))
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// Evaluates the VM of consumer `consumer-a` in `world`.
fn evaluate_vm(pack: &Pack, world: &MemoryWorld) -> Outcome {
    evaluate(
        pack,
        Trigger {
            cluster: "source/consumer-a",
            object: &vm(),
        },
        world,
        now(),
    )
    .unwrap()
}

fn vm() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "VM",
           "metadata": {"name": "db", "namespace": "team", "uid": "u-1", "resourceVersion": "7",
                        "labels": {"tier": "data"}, "annotations": {"a": "b"},
                        "finalizers": ["x"], "generation": 3},
           "spec": {"arch": "arm64", "cpus": 2},
           "status": {"state": "Running"}})
}

fn accept(cluster: &str, world: &mut MemoryWorld) {
    world
        .insert(
            cluster,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "vms", "namespace": "accept", "labels": {"kind": "vm"}}}),
        )
        .unwrap();
}

fn world() -> MemoryWorld {
    let mut world = MemoryWorld::new();
    world.insert("source/consumer-a", vm()).unwrap();
    world.add_cluster("provider/x86").unwrap();
    accept("provider/arm", &mut world);
    accept("provider/zeta", &mut world);
    world
}

#[test]
fn the_copy_goes_to_the_member_chosen_by_cel_without_the_source_clusters_metadata() {
    let world = world();
    let outcome = evaluate_vm(&pack(), &world);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let keys: Vec<String> = outcome.desired.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "provider/arm:VM.example.com:team/copy-db",
            "source/consumer-a:VM.example.com:team/db"
        ]
    );
    let copy = &outcome.desired[0].object;
    assert_eq!(copy["spec"], json!({"arch": "arm64", "cpus": 2}));
    assert_eq!(
        copy["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "switchyard", "switchyard.dev/pack": "copies"})
    );
    assert!(copy.get("status").is_none());
    // The patch of the trigger: only the pack's field, no engine metadata.
    assert_eq!(
        outcome.desired[1].object,
        json!({"apiVersion": "example.com/v1", "kind": "VM",
               "metadata": {"name": "db", "namespace": "team",
                            "annotations": {"example.com/provider-cluster": "arm"}}})
    );
    let status = outcome.status.unwrap();
    assert_eq!(
        status["here"],
        json!({"role": "source", "name": "consumer-a"})
    );
    assert_eq!(status["providers"], json!(["arm", "x86", "zeta"]));
    assert_eq!(status["provider"], json!("arm"));
    assert!(status.get("copyStatus").is_none());
}

#[test]
fn the_copys_status_is_read_back_from_the_chosen_member() {
    let mut world = world();
    world
        .insert(
            "provider/arm",
            json!({"apiVersion": "example.com/v1", "kind": "VM",
                   "metadata": {"name": "copy-db", "namespace": "team"},
                   "status": {"state": "Provisioned"}}),
        )
        .unwrap();
    let outcome = evaluate_vm(&pack(), &world);
    assert_eq!(
        outcome.status.unwrap()["copyStatus"],
        json!({"state": "Provisioned"})
    );
    // Reads name the member, so a change there re-evaluates the trigger.
    let reads: Vec<String> = outcome
        .reads
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    assert!(
        reads
            .iter()
            .any(|r| r.contains("\"provider/arm\"") && r.contains("copy-db")),
        "{reads:?}"
    );
    assert!(
        reads.iter().any(|r| r.contains("\"provider/zeta\"")),
        "{reads:?}"
    );
}

#[test]
fn an_output_without_cluster_name_to_a_role_of_several_members_is_an_error() {
    let rule = RULE.replace(
        "      clusterName: vars.provider\n      template",
        "      template",
    );
    let files: BTreeMap<String, String> = [
        ("pack.yaml", PACK),
        ("rules/copy.yaml", rule.as_str()),
        ("templates/copy.yaml.hbs", COPY),
        ("templates/mark.yaml.hbs", MARK),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let pack = load(&PackFiles {
        root: "copies".into(),
        files,
        shared_partials: BTreeMap::new(),
    })
    .pack
    .unwrap();
    let outcome = evaluate_vm(&pack, &world());
    assert_eq!(
        outcome.errors[0].to_string(),
        "rule `copy`, output `copy`: role `provider` has 3 clusters: name one with `clusterName` (its clusters: `provider/arm`, `provider/x86`, `provider/zeta`)"
    );
    assert!(outcome.desired.is_empty());
}

#[test]
fn patches_of_one_object_join_and_show_as_patches() {
    let world = world();
    let plan = plan(&pack(), &world, now());
    let json = to_json(&plan);
    let modes: Vec<(String, Option<String>)> = json["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["cluster"].as_str().unwrap().to_string(),
                o["mode"].as_str().map(str::to_string),
            )
        })
        .collect();
    assert_eq!(
        modes,
        [
            ("provider/arm".to_string(), None),
            ("source/consumer-a".to_string(), Some("patch".to_string()))
        ]
    );
}

#[test]
fn strip_cluster_metadata_keeps_name_namespace_and_spec() {
    assert_eq!(
        switchyard_core::object::strip_cluster_metadata(&vm()),
        json!({"apiVersion": "example.com/v1", "kind": "VM",
               "metadata": {"name": "db", "namespace": "team"},
               "spec": {"arch": "arm64", "cpus": 2}})
    );
}

#[test]
fn world_of_knows_members_without_objects() {
    let world = world_of(&[], &["provider/a".to_string(), "provider/b".to_string()]).unwrap();
    use switchyard_core::World;
    assert_eq!(world.members("provider"), ["a", "b"]);
    assert_eq!(
        world_of(&[], &["Provider/a".to_string()]).unwrap_err(),
        "cluster `Provider/a`: the role `Provider` is not a DNS-1123 label"
    );
    assert_eq!(
        world_of(&[], &["provider/a,b".to_string()]).unwrap_err(),
        "cluster `provider/a,b`: the member name `a,b` must be 1-253 letters, digits and `-._#:/`"
    );
    assert_eq!(
        world_of(&[], &["provider/a=b".to_string()]).unwrap_err(),
        "cluster `provider/a=b`: the member name `a=b` must be 1-253 letters, digits and `-._#:/`"
    );
}

/// Member names may be paths (a project control plane `projects/p1`, a kubeconfig provider's
/// `consumer#/kubeconfigs/a`): the role is what precedes the first `/`, the rest is the name,
/// everywhere a cluster is named (ids, `cluster.name`, `clusters.<role>`, owners).
#[test]
fn member_names_may_hold_slashes() {
    let mut world = MemoryWorld::new();
    world.insert("source/projects/p1", vm()).unwrap();
    accept("provider/consumer#/kubeconfigs/a", &mut world);
    world.add_cluster("provider/x86").unwrap();
    use switchyard_core::World;
    assert_eq!(world.members("source"), ["projects/p1"]);
    assert_eq!(
        world.members("provider"),
        ["consumer#/kubeconfigs/a", "x86"]
    );
    let outcome = evaluate(
        &pack(),
        Trigger {
            cluster: "source/projects/p1",
            object: &vm(),
        },
        &world,
        now(),
    )
    .unwrap();
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    let keys: Vec<String> = outcome.desired.iter().map(|d| d.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "provider/consumer#/kubeconfigs/a:VM.example.com:team/copy-db",
            "source/projects/p1:VM.example.com:team/db"
        ]
    );
    assert_eq!(
        outcome.desired[0].object["metadata"]["annotations"]["switchyard.dev/owners"],
        json!("source/projects/p1:VM.example.com:team/db")
    );
    let status = outcome.status.unwrap();
    assert_eq!(
        status["here"],
        json!({"role": "source", "name": "projects/p1"})
    );
    assert_eq!(
        status["providers"],
        json!(["consumer#/kubeconfigs/a", "x86"])
    );
    // Inputs name them with the same annotation.
    let inputs = switchyard_core::plan::parse_inputs(
        "apiVersion: example.com/v1\nkind: VM\nmetadata:\n  name: db\n  namespace: team\n  \
         annotations: {switchyard.dev/cluster: source/projects/p1}\n",
        "in.yaml",
        "source",
    )
    .unwrap();
    assert_eq!(inputs[0].0, "source/projects/p1");
    let world = world_of(&inputs, &["provider/projects/p1/cell".to_string()]).unwrap();
    assert_eq!(world.members("source"), ["projects/p1"]);
    assert_eq!(world.members("provider"), ["projects/p1/cell"]);
}
