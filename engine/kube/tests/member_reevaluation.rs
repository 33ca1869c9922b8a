//! A member joining or leaving evaluates again only the triggers of rules that can see it:
//! the `mesh-fanout` pack with one more rule, `copy`, which watches ConfigMaps of the source
//! cluster and writes a copy there (it reads no `clusters`, looks up and writes nothing in
//! `mesh`). When a member joins and when it leaves, the GlobalService (its rule fans out over
//! `clusters.mesh`) is evaluated again; the ConfigMap `copy` watches is not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;
use switchyard_core::ObjectKey;
use switchyard_testenv::ControlPlane;

const NAMESPACE: &str = "switchyard-system";

const COPY_RULE: &str = "\
apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata:
  name: copy
spec:
  watch:
    apiVersion: v1
    kind: ConfigMap
    selector:
      matchLabels: {copy: \"yes\"}
  outputs:
    - name: copy
      cluster: source
      template: copy.yaml.hbs
";

const COPY_TEMPLATE: &str = "\
apiVersion: v1
kind: ConfigMap
metadata:
  name: copy-{{self.metadata.name}}
  namespace: {{self.metadata.namespace}}
data:
  from: {{self.metadata.name}}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_change_evaluates_only_the_rules_that_can_see_it() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home", "m1"]).await.unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    home.put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
        .await;
    let m1_server = plane.cluster("m1").unwrap();
    let m1 = Cluster::new(m1_server.client().await.unwrap());

    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("packs/mesh-fanout");
    copy_mesh_fanout(&pack);
    let manifest = std::fs::read_to_string(pack.join("pack.yaml")).unwrap();
    let manifest = manifest
        .replace(
            "    - name: source\n      access: [read, writeStatus]\n",
            "    - name: source\n      access: [read, write, writeStatus]\n",
        )
        .replace(
            "  scope:\n",
            "  scope:\n    - cluster: source\n      kinds:\n        - apiVersion: v1\n          kind: ConfigMap\n      namespaces: [\"*\"]\n",
        );
    std::fs::write(pack.join("pack.yaml"), manifest).unwrap();
    std::fs::write(pack.join("rules/copy.yaml"), COPY_RULE).unwrap();
    std::fs::write(pack.join("templates/copy.yaml.hbs"), COPY_TEMPLATE).unwrap();

    let broker = Broker::start_with(
        &dir.path().join("packs"),
        &[("source", home_server.kubeconfig_path())],
        |config| config.members = vec![mesh_from_secrets(NAMESPACE)],
    )
    .await;
    home.put(
        &json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
                "metadata": {"name": "dns", "namespace": "kube-system"}, "spec": {}}),
    )
    .await;
    home.put(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default", "labels": {"copy": "yes"}},
        "data": {"a": "1"}}))
        .await;
    wait_for("the copy", Duration::from_secs(60), || async {
        home.get("v1", "ConfigMap", Some("default"), "copy-settings")
            .await
            .map(|_| ())
            .ok_or_else(|| "missing".to_string())
    })
    .await;
    wait_global_service(&home, "no member counted", |gs| {
        gs["status"]["meshClusters"] == 0
    })
    .await;

    let global = ObjectKey {
        cluster: "source".into(),
        api_version: "mesh.example.dev/v1alpha1".into(),
        kind: "GlobalService".into(),
        namespace: Some("kube-system".into()),
        name: "dns".into(),
    };
    let copied = ObjectKey {
        cluster: "source".into(),
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("default".into()),
        name: "settings".into(),
    };
    let counts = || {
        (
            broker.controller.evaluations_of(&global),
            broker.controller.evaluations_of(&copied),
        )
    };
    // Settled: the copy's own watch event is in, nothing else is pending.
    let mut settled = counts();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = counts();
        if now == settled {
            break;
        }
        settled = now;
    }
    let (global_before, copied_before) = settled;
    assert!(copied_before > 0, "the copy rule evaluated its trigger");

    // A member joins: the fan-out is evaluated again, the copy is not.
    let kubeconfig = token_kubeconfig(m1_server, "switchyard").await;
    home.put(&kubeconfig_secret(
        NAMESPACE,
        "m1",
        "mesh",
        None,
        &kubeconfig,
    ))
    .await;
    wait_export(&m1, "m1").await;
    wait_global_service(&home, "one member counted", |gs| {
        gs["status"]["meshClusters"] == 1
    })
    .await;
    let (global_joined, copied_joined) = counts();
    assert!(
        global_joined > global_before,
        "{global_joined} > {global_before}"
    );
    assert_eq!(copied_joined, copied_before, "the copy after the join");

    // It leaves: the same.
    home.delete("v1", "Secret", Some(NAMESPACE), "m1").await;
    wait_global_service(&home, "no member counted", |gs| {
        gs["status"]["meshClusters"] == 0
    })
    .await;
    let (global_left, copied_left) = counts();
    assert!(
        global_left > global_joined,
        "{global_left} > {global_joined}"
    );
    assert_eq!(copied_left, copied_before, "the copy after the leave");
    eprintln!(
        "evaluations: GlobalService {global_before} -> {global_joined} -> {global_left}, \
         copied ConfigMap {copied_before} -> {copied_joined} -> {copied_left}"
    );
    broker.stop().await;
}
