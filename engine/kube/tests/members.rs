//! Member clusters and patch outputs under the broker, with the `mesh-fanout` test pack
//! (tests/fixtures/packs): a GlobalService in the source cluster becomes a ConfigMap in every
//! member of the `mesh` role (two API servers), and the tenant's Service in each gets the
//! pack's annotations by server-side apply. The patched Service carries no engine metadata,
//! and when the GlobalService goes, only the pack's annotations are removed from it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);

fn service(owner: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "dns", "namespace": "kube-system",
                        "annotations": {"owner": owner}},
           "spec": {"ports": [{"port": 53, "protocol": "UDP"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_to_members_and_patch_what_the_tenant_owns() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["one", "two"]).await.unwrap();
    let one = plane.cluster("one").unwrap();
    let two = plane.cluster("two").unwrap();
    one.install_crds(&[global_service_crd()]).await.unwrap();
    let c1 = Cluster::new(one.client().await.unwrap());
    let c2 = Cluster::new(two.client().await.unwrap());
    c1.put(&service("tenant-one")).await;
    c2.put(&service("tenant-two")).await;

    let dir = tempfile::tempdir().unwrap();
    copy_mesh_fanout(&dir.path().join("mesh-fanout"));
    let broker = Broker::start(
        dir.path(),
        &[
            ("source", one.kubeconfig_path()),
            ("mesh/c1", one.kubeconfig_path()),
            ("mesh/c2", two.kubeconfig_path()),
        ],
    )
    .await;
    c1.put(
        &json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
                   "metadata": {"name": "dns", "namespace": "kube-system"},
                   "spec": {"shared": true}}),
    )
    .await;

    // One ConfigMap per member, each saying which member it is in.
    for (cluster, name) in [(&c1, "c1"), (&c2, "c2")] {
        wait_export(cluster, name).await;
    }
    // The tenant's Services carry the pack's annotations and nothing else of the engine.
    for (cluster, owner) in [(&c1, "tenant-one"), (&c2, "tenant-two")] {
        let svc = wait_for("the annotations", CONVERGE, || async {
            let svc = cluster
                .get("v1", "Service", Some("kube-system"), "dns")
                .await
                .ok_or("missing")?;
            if svc["metadata"]["annotations"]["service.cilium.io/global"] == "true" {
                Ok(svc)
            } else {
                Err(format!("{}", svc["metadata"]))
            }
        })
        .await;
        let annotations = &svc["metadata"]["annotations"];
        assert_eq!(annotations["service.cilium.io/shared"], "true");
        assert_eq!(annotations["owner"], owner);
        assert!(
            svc.pointer("/metadata/labels").is_none(),
            "{}",
            svc["metadata"]
        );
        assert!(
            annotations
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.starts_with("switchyard.dev/")),
            "{annotations}"
        );
        let managers: Vec<&str> = svc["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["manager"].as_str())
            .collect();
        assert!(managers.contains(&"switchyard/mesh-fanout"), "{managers:?}");
    }
    let gs = wait_for("the GlobalService's status", CONVERGE, || async {
        let gs = c1
            .get(
                "mesh.example.dev/v1alpha1",
                "GlobalService",
                Some("kube-system"),
                "dns",
            )
            .await
            .ok_or("missing")?;
        if gs["status"]["meshClusters"] == 2 {
            Ok(gs)
        } else {
            Err(format!("{}", gs["status"]))
        }
    })
    .await;
    assert_eq!(gs["status"]["annotated"], json!(["c1", "c2"]));

    // The GlobalService goes: the ConfigMaps go, the Services stay with only the tenant's
    // annotation, and the finalizer is removed.
    c1.delete(
        "mesh.example.dev/v1alpha1",
        "GlobalService",
        Some("kube-system"),
        "dns",
    )
    .await;
    for (cluster, owner) in [(&c1, "tenant-one"), (&c2, "tenant-two")] {
        wait_for("the cleanup", CONVERGE, || async {
            if cluster
                .get("v1", "ConfigMap", Some("kube-system"), "global-dns")
                .await
                .is_some()
            {
                return Err("the ConfigMap is still there".to_string());
            }
            let svc = cluster
                .get("v1", "Service", Some("kube-system"), "dns")
                .await
                .ok_or("the tenant's Service was deleted")?;
            if svc["metadata"]["annotations"] == json!({"owner": owner}) {
                Ok(())
            } else {
                Err(format!("{}", svc["metadata"]["annotations"]))
            }
        })
        .await;
    }
    wait_for("the GlobalService to be gone", CONVERGE, || async {
        match c1
            .get(
                "mesh.example.dev/v1alpha1",
                "GlobalService",
                Some("kube-system"),
                "dns",
            )
            .await
        {
            None => Ok(()),
            Some(gs) => Err(format!("still there: {}", gs["metadata"])),
        }
    })
    .await;
    broker.stop().await;
}
