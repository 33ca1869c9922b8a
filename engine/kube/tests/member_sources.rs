//! Members found while the broker runs, from kubeconfig Secrets, with the `mesh-fanout` test
//! pack: the broker starts with no `mesh` member; three member API servers join as their
//! Secrets are created, one leaves when its Secret is deleted (what the pack made there stays)
//! and comes back, and one's credentials rotate (a new ServiceAccount token, the old account
//! deleted) without a restart. At each step the GlobalService's fan-out follows.
//!
//! Figures (printed; `-- --nocapture` shows them): from a Secret's creation to the member's
//! ConfigMap, and from a Secret's deletion to the member's watches stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "switchyard-system";

fn global_service() -> Value {
    json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
           "metadata": {"name": "dns", "namespace": "kube-system"},
           "spec": {"shared": true}})
}

fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "dns", "namespace": "kube-system"},
           "spec": {"ports": [{"port": 53, "protocol": "UDP"}]}})
}

/// The GlobalService once its `status.meshClusters` is `count`.
async fn mesh_clusters(home: &Cluster, count: u64) -> Value {
    wait_global_service(home, &format!("status.meshClusters = {count}"), |gs| {
        gs.pointer("/status/meshClusters") == Some(&json!(count))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_from_secrets_join_leave_return_and_rotate() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home", "m1", "m2", "m3"])
        .await
        .unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    home.put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
        .await;
    let mut members = Vec::new();
    for name in ["m1", "m2", "m3"] {
        let server = plane.cluster(name).unwrap();
        let cluster = Cluster::new(server.client().await.unwrap());
        cluster.put(&service()).await;
        members.push((name, server, cluster));
    }

    let dir = tempfile::tempdir().unwrap();
    copy_mesh_fanout(&dir.path().join("mesh-fanout"));
    let broker = Broker::start_with(
        dir.path(),
        &[("source", home_server.kubeconfig_path())],
        |config| {
            config.members = vec![mesh_from_secrets(NAMESPACE)];
        },
    )
    .await;
    home.put(&global_service()).await;

    // No member: the pack runs, and says the role is empty.
    mesh_clusters(&home, 0).await;
    let (status, body) = broker.readyz().await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("[+]members mesh: 0 live\n"), "{body}");

    // Three members join, each by a Secret holding a token kubeconfig.
    let mut joined = Vec::new();
    for (name, server, cluster) in &members {
        let kubeconfig = token_kubeconfig(server, "switchyard-a").await;
        let started = Instant::now();
        home.put(&kubeconfig_secret(
            NAMESPACE,
            name,
            "mesh",
            None,
            &kubeconfig,
        ))
        .await;
        wait_export(cluster, name).await;
        joined.push(started.elapsed());
    }
    let gs = mesh_clusters(&home, 3).await;
    assert_eq!(gs["status"]["annotated"], json!(["m1", "m2", "m3"]));
    let (_, body) = broker.readyz().await;
    assert!(
        body.contains("[+]members mesh: 3 live (m1, m2, m3)\n"),
        "{body}"
    );
    assert!(
        body.contains("[+]members source: 1 live (one unnamed cluster)\n"),
        "{body}"
    );
    let (_, metrics) = http_get(broker.health_port, "/metrics").await;
    assert!(
        metrics.contains("switchyard_cluster_members{role=\"mesh\"} 3\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_cluster_members_joining{role=\"mesh\"} 0\n"),
        "{metrics}"
    );
    for (name, _, cluster) in &members {
        let svc = cluster
            .get("v1", "Service", Some("kube-system"), "dns")
            .await
            .unwrap();
        assert_eq!(
            svc["metadata"]["annotations"]["service.cilium.io/global"], "true",
            "mesh/{name}: {}",
            svc["metadata"]
        );
    }

    // m2 leaves: its watches stop, what the pack made there stays, the status says so.
    let started = Instant::now();
    home.delete("v1", "Secret", Some(NAMESPACE), "m2").await;
    wait_for("m2's watches stopped", CONVERGE, || async {
        let (_, body) = broker.readyz().await;
        if !body.contains("mesh/m2/") && body.contains("[+]members mesh: 2 live (m1, m3)\n") {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    let left = started.elapsed();
    let gs = mesh_clusters(&home, 2).await;
    let synced = condition(&gs, "Synced").unwrap();
    assert_eq!(synced["status"], "True", "{synced}");
    assert_eq!(synced["reason"], "MemberGone", "{synced}");
    assert_eq!(
        synced["message"],
        "cluster `mesh/m2` is gone (its Secret switchyard-system/m2 was deleted): its outputs \
         there are left as they were, unwatched, until it comes back"
    );
    let m2 = &members[1].2;
    let cm = m2
        .get("v1", "ConfigMap", Some("kube-system"), "global-dns")
        .await;
    assert!(cm.is_some(), "the ConfigMap in the member that left stays");
    let svc = m2
        .get("v1", "Service", Some("kube-system"), "dns")
        .await
        .unwrap();
    assert_eq!(
        svc["metadata"]["annotations"]["service.cilium.io/global"], "true",
        "the patch in the member that left stays: {}",
        svc["metadata"]
    );

    // m2 comes back: once its watches list, it is live and the pack takes it in again.
    let kubeconfig = token_kubeconfig(members[1].1, "switchyard-a").await;
    let started = Instant::now();
    home.put(&kubeconfig_secret(
        NAMESPACE,
        "m2",
        "mesh",
        None,
        &kubeconfig,
    ))
    .await;
    mesh_clusters(&home, 3).await;
    let back = started.elapsed();
    wait_global_service(&home, "Synced without MemberGone", |gs| {
        condition(gs, "Synced").is_some_and(|c| c["reason"] == "Synced")
    })
    .await;

    // m3's credentials rotate: a new account's token, then the old account is deleted (its
    // token stops working). The broker keeps managing m3 without a restart: a ConfigMap
    // deleted there comes back.
    let (_, m3_server, m3) = &members[2];
    let rotated = token_kubeconfig(m3_server, "switchyard-b").await;
    home.put(&kubeconfig_secret(NAMESPACE, "m3", "mesh", None, &rotated))
        .await;
    m3.delete("v1", "ServiceAccount", Some("kube-system"), "switchyard-a")
        .await;
    // Bound tokens of a deleted account are refused from then on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    m3.delete("v1", "ConfigMap", Some("kube-system"), "global-dns")
        .await;
    wait_export(m3, "m3").await;
    let (_, body) = broker.readyz().await;
    assert!(
        body.contains("[+]members mesh: 3 live (m1, m2, m3)\n"),
        "{body}"
    );
    assert!(!body.contains("cannot be used"), "{body}");

    // A Secret without a kubeconfig is reported, and makes no member.
    home.put(&json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "broken", "namespace": NAMESPACE,
                     "labels": {"switchyard.dev/cluster-role": "mesh"}},
        "stringData": {"other": "x"}}))
        .await;
    wait_for("the broken Secret reported", CONVERGE, || async {
        let (status, body) = broker.readyz().await;
        if status == 200
            && body.contains(
                "[!]Secret switchyard-system/broken cannot be used: no key `kubeconfig` holding a kubeconfig\n",
            )
        {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;

    eprintln!(
        "figure: Secret created -> the member's ConfigMap applied: {}",
        joined
            .iter()
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    eprintln!(
        "figure: Secret deleted -> the member's watches stopped (seen on /readyz): {:.2} s",
        left.as_secs_f64()
    );
    eprintln!(
        "figure: Secret created again -> the member back in `clusters`: {:.2} s",
        back.as_secs_f64()
    );
    broker.stop().await;
}
