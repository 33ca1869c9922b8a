//! Members from ClusterProfiles of the Cluster Inventory API (sigs.k8s.io/cluster-inventory-api)
//! with credentials through its access-provider mechanism: the profile's status gives the
//! cluster's server and CA under a provider's name, the broker's configuration gives that
//! provider's exec credentials plugin (here a script printing an ExecCredential with a
//! ServiceAccount token). A profile that appears joins; one deleted leaves.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_kube::config::{AccessProvider, ClusterProfilesSource, MemberSource};
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);
const NAMESPACE: &str = "fleet";

/// The ClusterProfile CRD, as much of it as the test needs (the status is kept whole).
fn profile_crd() -> Value {
    open_crd("multicluster.x-k8s.io", "ClusterProfile", "clusterprofiles")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_from_cluster_profiles_through_an_access_provider() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home", "m1"]).await.unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd(), profile_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    let m1_server = plane.cluster("m1").unwrap();
    let m1 = Cluster::new(m1_server.client().await.unwrap());

    // The provider's credentials plugin: prints an ExecCredential with a token of m1.
    let dir = tempfile::tempdir().unwrap();
    let token = account_token(m1_server, "switchyard").await;
    let plugin = dir.path().join("token-plugin");
    let credential = json!({"apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential", "status": {"token": token}});
    std::fs::write(
        &plugin,
        format!("#!/bin/sh\ncat <<'EOF'\n{credential}\nEOF\n"),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();

    copy_mesh_fanout(&dir.path().join("packs/mesh-fanout"));
    let broker = Broker::start_with(
        &dir.path().join("packs"),
        &[("source", home_server.kubeconfig_path())],
        |config| {
            config.members = vec![MemberSource {
                role: "mesh".into(),
                secrets: None,
                objects: None,
                cluster_profiles: Some(ClusterProfilesSource {
                    namespace: NAMESPACE.into(),
                    labels: None,
                    providers: vec![AccessProvider {
                        name: "test-tokens".into(),
                        exec_config: Some(json!({
                            "apiVersion": "client.authentication.k8s.io/v1",
                            "command": plugin.to_string_lossy(),
                            "interactiveMode": "Never",
                        })),
                        kubeconfig_secret: false,
                    }],
                    usable: None,
                    cluster: None,
                }),
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
    home.put(
        &json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "m1", "namespace": NAMESPACE},
        "spec": {"displayName": "m1", "clusterManager": {"name": "test"}},
        "status": {"accessProviders": [
            {"name": "other", "cluster": {"server": "https://127.0.0.1:1"}},
            {"name": "test-tokens", "cluster": {"server": m1_server.url(),
                                                "certificate-authority-data": ca_data(m1_server)}}
        ]}}),
    )
    .await;
    wait_export(&m1, "m1").await;
    let (_, body) = broker.readyz().await;
    assert!(body.contains("[+]members mesh: 1 live (m1)\n"), "{body}");

    // The profile deleted: the member leaves, its ConfigMap stays.
    home.delete(
        "multicluster.x-k8s.io/v1alpha1",
        "ClusterProfile",
        Some(NAMESPACE),
        "m1",
    )
    .await;
    wait_for("m1 gone", CONVERGE, || async {
        let (_, body) = broker.readyz().await;
        if body.contains("[+]members mesh: 0 live\n") && !body.contains("mesh/m1/") {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    assert!(
        m1.get("v1", "ConfigMap", Some("kube-system"), "global-dns")
            .await
            .is_some()
    );
    broker.stop().await;
}

/// The Cluster Inventory API's other way to credentials: the profile's access-provider entry
/// names a kubeconfig Secret (its `client.authentication.k8s.io/exec` extension: `name`,
/// `key`), which the broker reads itself, as the `kubeconfig-secretreader` plugin would. The
/// Secret's user authenticates at the server the profile gives (the Secret's own server is
/// wrong on purpose); the Secret deleted, the member leaves and `/readyz` says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_from_cluster_profiles_through_a_secret_they_name() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home", "m1"]).await.unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd(), profile_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    let m1_server = plane.cluster("m1").unwrap();
    let m1 = Cluster::new(m1_server.client().await.unwrap());

    let mut kubeconfig: Value =
        serde_json::from_str(&token_kubeconfig(m1_server, "switchyard").await).unwrap();
    kubeconfig["clusters"][0]["cluster"]["server"] = json!("https://127.0.0.1:1");
    home.put(&json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "m1-access", "namespace": NAMESPACE},
        "stringData": {"value": kubeconfig.to_string()}}))
        .await;

    let dir = tempfile::tempdir().unwrap();
    copy_mesh_fanout(&dir.path().join("packs/mesh-fanout"));
    let broker = Broker::start_with(
        &dir.path().join("packs"),
        &[("source", home_server.kubeconfig_path())],
        |config| {
            config.members = vec![MemberSource {
                role: "mesh".into(),
                secrets: None,
                objects: None,
                cluster_profiles: Some(ClusterProfilesSource {
                    namespace: NAMESPACE.into(),
                    labels: None,
                    providers: vec![AccessProvider {
                        name: "kubeconfig-secretreader".into(),
                        exec_config: None,
                        kubeconfig_secret: true,
                    }],
                    usable: None,
                    cluster: None,
                }),
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
    home.put(
        &json!({"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "m1", "namespace": NAMESPACE},
        "spec": {"displayName": "m1", "clusterManager": {"name": "test"}},
        "status": {"accessProviders": [
            {"name": "kubeconfig-secretreader", "cluster": {
                "server": m1_server.url(),
                "certificate-authority-data": ca_data(m1_server),
                "extensions": [{"name": "client.authentication.k8s.io/exec",
                                "extension": {"name": "m1-access", "key": "value"}}]}}
        ]}}),
    )
    .await;
    wait_export(&m1, "m1").await;

    home.delete("v1", "Secret", Some(NAMESPACE), "m1-access")
        .await;
    wait_for("m1 gone", CONVERGE, || async {
        let (_, body) = broker.readyz().await;
        if body.contains("[+]members mesh: 0 live\n") {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    broker.stop().await;
}
