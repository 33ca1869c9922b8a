//! Status against a real API server: an output's rendered `status` lands through the status
//! subresource (server-side apply by the pack's field manager, as `render` shows it), and a
//! rule with `writeStatus: false` and `finalizer: false` leaves its triggers untouched: no
//! status written, no finalizer, and its outputs still go when the trigger goes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);

/// A namespaced kind of `example.com/v1` with a status subresource.
fn crd(kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

const PACK: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: RulePack
metadata: {name: mirror, version: 0.1.0}
spec:
  clusters:
    - {name: source, access: [read]}
    - {name: target, access: [read, write]}
  scope:
    - cluster: target
      kinds: [{apiVersion: example.com/v1, kind: Mirror}]
      namespaces: ["*"]
"#;

const RULE: &str = r#"apiVersion: switchyard.dev/v1alpha1
kind: Rule
metadata: {name: mirror}
spec:
  watch: {apiVersion: example.com/v1, kind: Source}
  writeStatus: false
  finalizer: false
  outputs:
    - {name: mirror, cluster: target, template: mirror.yaml.hbs}
"#;

const TEMPLATE: &str = "apiVersion: example.com/v1\nkind: Mirror\nmetadata:\n  name: {{self.metadata.name}}\n  namespace: {{self.metadata.namespace}}\nspec:\n  from: {{self.metadata.name}}\nstatus:\n  phase: {{self.spec.phase}}\n";

fn write_pack(dir: &Path) {
    let pack = dir.join("mirror");
    for sub in ["rules", "templates"] {
        std::fs::create_dir_all(pack.join(sub)).unwrap();
    }
    std::fs::write(pack.join("pack.yaml"), PACK).unwrap();
    std::fs::write(pack.join("rules/mirror.yaml"), RULE).unwrap();
    std::fs::write(pack.join("templates/mirror.yaml.hbs"), TEMPLATE).unwrap();
}

fn source(phase: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Source",
           "metadata": {"name": "s1", "namespace": "team"},
           "spec": {"phase": phase}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_status_lands_and_opted_out_triggers_are_left_alone() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["source", "target"]).await.unwrap();
    let source_server = plane.cluster("source").unwrap();
    let target_server = plane.cluster("target").unwrap();
    let source_cluster = Cluster::new(source_server.client().await.unwrap());
    let target = Cluster::new(target_server.client().await.unwrap());
    switchyard_testenv::install_crds(&source_cluster.client, &[crd("Source", "sources")])
        .await
        .unwrap();
    switchyard_testenv::install_crds(&target.client, &[crd("Mirror", "mirrors")])
        .await
        .unwrap();
    target
        .put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .await;
    source_cluster.put(&source("Provisioning")).await;

    let dir = tempfile::tempdir().unwrap();
    write_pack(dir.path());
    // What the dry run says the broker applies.
    let (_, loaded) =
        switchyard_files::load_pack_dir(&dir.path().join("mirror"), None, &[]).unwrap();
    let pack = loaded.pack.expect("the pack loads");
    let mut world = switchyard_core::MemoryWorld::new();
    world.insert("source", source("Provisioning")).unwrap();
    let plan = switchyard_core::plan::plan(&pack, &world, chrono::Utc::now());
    let rendered = &plan.objects[0].object;
    assert_eq!(rendered["status"], json!({"phase": "Provisioning"}));
    assert!(plan.outcomes[0].status.is_none() && plan.outcomes[0].finalizer.is_none());

    let broker = Broker::start(
        dir.path(),
        &[
            ("source", source_server.kubeconfig_path()),
            ("target", target_server.kubeconfig_path()),
        ],
    )
    .await;
    let mirror_status = |phase: &'static str| {
        let target = target.clone();
        move || {
            let target = target.clone();
            async move {
                let mirror = target
                    .get("example.com/v1", "Mirror", Some("team"), "s1")
                    .await
                    .ok_or("no Mirror yet")?;
                if mirror["status"] == json!({"phase": phase}) {
                    Ok(mirror)
                } else {
                    Err(format!("status {}", mirror["status"]))
                }
            }
        }
    };
    let mirror = wait_for(
        "the Mirror's status",
        CONVERGE,
        mirror_status("Provisioning"),
    )
    .await;
    assert!(holds_rendered(rendered, &mirror), "{mirror:#}");
    // Written by the pack's own field manager, through the status subresource.
    let managers: Vec<(String, String)> = mirror["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default().to_string(),
                m["subresource"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        managers.contains(&("switchyard/mirror".to_string(), "status".to_string())),
        "{managers:?}"
    );

    // A new phase: the status follows.
    source_cluster.put(&source("Ready")).await;
    wait_for("the new status", CONVERGE, mirror_status("Ready")).await;

    // The trigger itself: no finalizer, no status.
    let trigger = source_cluster
        .get("example.com/v1", "Source", Some("team"), "s1")
        .await
        .unwrap();
    assert_eq!(trigger["metadata"].get("finalizers"), None, "{trigger:#}");
    assert_eq!(trigger.get("status"), None, "{trigger:#}");

    // Without a finalizer, the trigger goes at once, and its output after it.
    source_cluster
        .delete("example.com/v1", "Source", Some("team"), "s1")
        .await;
    wait_for("the Mirror to go", CONVERGE, || async {
        match target
            .get("example.com/v1", "Mirror", Some("team"), "s1")
            .await
        {
            None => Ok(()),
            Some(_) => Err("the Mirror is still there".to_string()),
        }
    })
    .await;
    broker.stop().await;
}
