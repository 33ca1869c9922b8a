//! Members from objects that name a kubeconfig Secret (the cilium seed's management plane:
//! a Cluster object, `status.kubeconfigSecretRef.{name,key}`, usable while `Ready=True`),
//! with the `mesh-fanout` test pack: two members join as their Clusters become Ready, one's
//! Ready condition flaps (it leaves, the pack's outputs there stay; it comes back), and the
//! fan-out follows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_kube::config::{MemberSource, ObjectsSource};
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "fleet";

fn cluster_crd() -> Value {
    open_crd("fleet.example.dev", "Cluster", "clusters")
}

fn cluster(name: &str, ready: bool) -> Value {
    json!({"apiVersion": "fleet.example.dev/v1alpha1", "kind": "Cluster",
    "metadata": {"name": name, "namespace": NAMESPACE},
    "spec": {},
    "status": {
        "kubeconfigSecretRef": {"name": format!("{name}-kubeconfig"), "key": "value"},
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                        "reason": "Test", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    }})
}

async fn live(broker: &Broker, line: &str) {
    wait_for(line, CONVERGE, || async {
        let (_, body) = broker.readyz().await;
        if body.contains(line) {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_from_objects_follow_their_ready_condition() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home", "m1", "m2"]).await.unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd(), cluster_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    let mut members = Vec::new();
    for name in ["m1", "m2"] {
        let server = plane.cluster(name).unwrap();
        let kubeconfig = token_kubeconfig(server, "switchyard").await;
        home.put(&json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{name}-kubeconfig"), "namespace": NAMESPACE},
            "stringData": {"value": kubeconfig}}))
            .await;
        members.push((name, Cluster::new(server.client().await.unwrap())));
    }

    let dir = tempfile::tempdir().unwrap();
    copy_mesh_fanout(&dir.path().join("mesh-fanout"));
    let broker = Broker::start_with(
        dir.path(),
        &[("source", home_server.kubeconfig_path())],
        |config| {
            config.members = vec![MemberSource {
                role: "mesh".into(),
                secrets: None,
                objects: Some(ObjectsSource {
                    api_version: "fleet.example.dev/v1alpha1".into(),
                    kind: "Cluster".into(),
                    namespace: NAMESPACE.into(),
                    labels: None,
                    name: "self.metadata.name".into(),
                    secret_ref: "self.status.kubeconfigSecretRef".into(),
                    usable: Some(
                        "self.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
                            .into(),
                    ),
                    key: "kubeconfig".into(),
                    cluster: None,
                }),
                cluster_profiles: None,
                kcp: None,
            }];
        },
    )
    .await;
    home.put(
        &json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
                "metadata": {"name": "dns", "namespace": "kube-system"}, "spec": {}}),
    )
    .await;
    // m1 Ready, m2 not yet: only m1 is a member.
    home.put(&cluster("m1", true)).await;
    home.put(&cluster("m2", false)).await;
    live(&broker, "[+]members mesh: 1 live (m1)\n").await;
    for (name, member) in &members {
        let cm = wait_for(&format!("the ConfigMap in {name}"), CONVERGE, || async {
            match member
                .get("v1", "ConfigMap", Some("kube-system"), "global-dns")
                .await
            {
                Some(cm) if *name == "m1" => Ok(Some(cm)),
                None if *name == "m2" => Ok(None),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        assert_eq!(cm.is_some(), *name == "m1");
    }

    // m2 becomes Ready: it joins.
    home.put(&cluster("m2", true)).await;
    live(&broker, "[+]members mesh: 2 live (m1, m2)\n").await;
    let m2 = &members[1].1;
    wait_for("the ConfigMap in m2", CONVERGE, || async {
        m2.get("v1", "ConfigMap", Some("kube-system"), "global-dns")
            .await
            .map(|_| ())
            .ok_or_else(|| "missing".to_string())
    })
    .await;

    // Ready flaps to False: m2 leaves, its ConfigMap stays, the status says why.
    home.put(&cluster("m2", false)).await;
    live(&broker, "[+]members mesh: 1 live (m1)\n").await;
    let gs = wait_global_service(&home, "MemberGone", |gs| {
        condition(gs, "Synced").is_some_and(|c| c["reason"] == "MemberGone")
    })
    .await;
    let gs = condition(&gs, "Synced").unwrap();
    assert_eq!(
        gs["message"],
        "cluster `mesh/m2` is gone (its Cluster fleet/m2: it is not usable): its outputs there \
         are left as they were, unwatched, until it comes back"
    );
    assert!(
        m2.get("v1", "ConfigMap", Some("kube-system"), "global-dns")
            .await
            .is_some()
    );
    // And back to True, then a quick False-True flap: it ends a member, the status clean.
    home.put(&cluster("m2", true)).await;
    live(&broker, "[+]members mesh: 2 live (m1, m2)\n").await;
    home.put(&cluster("m2", false)).await;
    home.put(&cluster("m2", true)).await;
    live(&broker, "[+]members mesh: 2 live (m1, m2)\n").await;
    wait_global_service(&home, "Synced again", |gs| {
        condition(gs, "Synced").is_some_and(|c| c["reason"] == "Synced")
            && gs["status"]["meshClusters"] == 2
    })
    .await;
    broker.stop().await;
}
