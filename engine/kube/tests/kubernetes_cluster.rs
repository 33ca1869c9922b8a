//! The kcp-karmada pack's KubernetesCluster path against real API servers: a tenant's
//! KubernetesCluster in a kcp workspace (behind `switchyard_testenv::WorkspaceProxy`) gets its
//! cluster-operator `Cluster` CR on the management plane; once cluster-operator (played by
//! the test) reports it Ready and writes the kubeconfig Secret, the broker writes what
//! `karmadactl join` would in Karmada (the member `Cluster` in Push mode and its credentials
//! Secret); Karmada (played by the test) reporting the member Ready makes the
//! KubernetesCluster Ready; deleting the KubernetesCluster removes all three and releases
//! its finalizer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use k8s_openapi::ByteString;
use serde_json::{Value, json};
use support::*;
use switchyard_testenv::{ControlPlane, WorkspaceProxy};

const CONVERGE: Duration = Duration::from_secs(60);
const KC: &str = "platform.edge-portal.eu/v1alpha1";
const MGMT: &str = "cluster.edge-connect.eu/v1alpha1";
const KARMADA: &str = "cluster.karmada.io/v1alpha1";

/// Secret data as the API server stores it (base64, through k8s-openapi's ByteString).
fn b64(text: &str) -> String {
    serde_json::to_value(ByteString(text.as_bytes().to_vec()))
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

/// The management plane's CRD: cluster-operator's Cluster.
fn management_crds() -> Vec<Value> {
    switchyard_testenv::read_crds(&repo().join("config/crds"))
        .unwrap()
        .into_iter()
        .filter(|c| c["spec"]["group"] == "cluster.edge-connect.eu")
        .collect()
}

/// A kubeconfig as cluster-operator would store it: one cluster, one user with a token.
fn kubeconfig(server: &str, ca: &str, token: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: edge-1\ncontexts:\n- context:\n    cluster: edge-1\n    user: admin\n  name: edge-1\ncurrent-context: edge-1\nusers:\n- name: admin\n  user:\n    token: {token}\n"
    )
}

async fn status_of(tenant: &Cluster) -> Result<Value, String> {
    let live = tenant
        .get(KC, "KubernetesCluster", Some("default"), "edge-1")
        .await
        .ok_or("the KubernetesCluster is gone")?;
    Ok(live["status"].clone())
}

async fn wait_phase(tenant: &Cluster, phase: &str, reason: &str) -> Value {
    wait_for(
        &format!("the KubernetesCluster's phase {phase} ({reason})"),
        CONVERGE,
        || async {
            let status = status_of(tenant).await?;
            let ready = condition(&json!({"status": status.clone()}), "Ready");
            match ready {
                Some(c) if status["phase"] == phase && c["reason"] == reason => Ok(status),
                _ => Err(format!("status {status}")),
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_cluster_is_provisioned_joined_and_removed() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return; // A real cluster is not a kcp virtual workspace.
    }
    let plane = ControlPlane::start(&["ws-a", "karmada", "mgmt"])
        .await
        .unwrap();
    let tenant = Cluster::new(plane.cluster("ws-a").unwrap().client().await.unwrap());
    let karmada = Cluster::new(plane.cluster("karmada").unwrap().client().await.unwrap());
    let mgmt = Cluster::new(plane.cluster("mgmt").unwrap().client().await.unwrap());
    switchyard_testenv::install_crds(&tenant.client, &source_crds())
        .await
        .unwrap();
    switchyard_testenv::install_crds(&karmada.client, &karmada_crds())
        .await
        .unwrap();
    switchyard_testenv::install_crds(&mgmt.client, &management_crds())
        .await
        .unwrap();
    // Karmada's installer creates the namespace karmadactl join writes credentials to.
    karmada
        .put(&json!({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": "karmada-cluster"}}))
        .await;
    let proxy = WorkspaceProxy::start(&[("ws-a", plane.cluster("ws-a").unwrap())])
        .await
        .unwrap();

    tenant
        .put(&json!({"apiVersion": KC, "kind": "KubernetesCluster",
            "metadata": {"name": "edge-1", "namespace": "default",
                         "annotations": {"kcp.io/cluster": "ws-a"}},
            "spec": {"provider": "KIND", "region": "eu-central", "zones": ["fra-a"]}}))
        .await;

    let packs = PackDir::with_workspaces();
    let broker = Broker::start(
        &packs.packs(),
        &[
            ("source", proxy.kubeconfig_path()),
            (
                "karmada",
                plane.cluster("karmada").unwrap().kubeconfig_path(),
            ),
            (
                "management",
                plane.cluster("mgmt").unwrap().kubeconfig_path(),
            ),
        ],
    )
    .await;

    // 1. The Cluster CR on the management plane, in the default --mgmt-namespace.
    let cr = wait_for("the management-plane Cluster CR", CONVERGE, || async {
        mgmt.get(MGMT, "Cluster", Some("default"), "edge-1")
            .await
            .ok_or_else(|| "absent".to_string())
    })
    .await;
    assert_eq!(
        cr["spec"],
        json!({"provider": "KIND", "region": "eu-central", "zones": ["fra-a"]})
    );
    assert_eq!(
        cr["metadata"]["labels"]["edge-connect.eu/source-workspace"],
        "ws-a"
    );
    let status = wait_phase(&tenant, "Provisioning", "Provisioning").await;
    assert!(status.get("karmadaClusterName").is_none(), "{status}");
    assert!(
        karmada
            .get(KARMADA, "Cluster", None, "edge-1")
            .await
            .is_none(),
        "joined before the Cluster CR is Ready"
    );

    // 2. cluster-operator: the kubeconfig Secret, then the CR Ready naming it.
    let ca = b64("-----BEGIN CERTIFICATE-----\nMIIBe2e\n-----END CERTIFICATE-----\n");
    let config = kubeconfig("https://edge-1.example:6443", &ca, "member-token");
    mgmt.put(&json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "kind-edge-1-kubeconfig", "namespace": "default"},
        "data": {"kubeconfig": b64(&config)}}))
        .await;
    mgmt.put(&json!({"apiVersion": MGMT, "kind": "Cluster",
        "metadata": {"name": "edge-1", "namespace": "default"},
        "spec": {"provider": "KIND"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "kubeconfigSecretRef": {"name": "kind-edge-1-kubeconfig", "key": "kubeconfig"}}}))
        .await;

    // 3. What karmadactl join creates: the member in Push mode and its credentials.
    let member = wait_for("the Karmada Cluster", CONVERGE, || async {
        karmada
            .get(KARMADA, "Cluster", None, "edge-1")
            .await
            .ok_or_else(|| "absent".to_string())
    })
    .await;
    assert_eq!(
        member["spec"],
        json!({"syncMode": "Push", "apiEndpoint": "https://edge-1.example:6443",
               "secretRef": {"namespace": "karmada-cluster", "name": "edge-1"},
               "provider": "KIND", "region": "eu-central", "zones": ["fra-a"]})
    );
    // Applied independently of the Cluster: it may land a moment later.
    let secret = wait_for("the credentials Secret", CONVERGE, || async {
        karmada
            .get("v1", "Secret", Some("karmada-cluster"), "edge-1")
            .await
            .ok_or_else(|| "absent".to_string())
    })
    .await;
    assert_eq!(
        secret["data"],
        json!({"caBundle": ca, "token": b64("member-token")})
    );
    let status = wait_phase(&tenant, "Joining", "Joining").await;
    assert_eq!(status["karmadaClusterName"], "edge-1");
    assert_eq!(status["apiEndpoint"], "https://edge-1.example:6443");

    // 4. Karmada's cluster status controller reports the member Ready.
    karmada
        .put(&json!({"apiVersion": KARMADA, "kind": "Cluster",
            "metadata": {"name": "edge-1"},
            "spec": {"syncMode": "Push"},
            "status": {"kubernetesVersion": "v1.31.0", "conditions": [
                {"type": "Ready", "status": "True", "reason": "ClusterReady",
                 "message": "cluster is healthy and ready to accept workloads",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
        .await;
    let status = wait_phase(&tenant, "Ready", "Joined").await;
    let ready = condition(&json!({"status": status}), "Ready").unwrap();
    assert_eq!(ready["status"], "True");
    assert_eq!(ready["message"], "Karmada reports cluster `edge-1` Ready");
    let live = tenant
        .get(KC, "KubernetesCluster", Some("default"), "edge-1")
        .await
        .unwrap();
    assert_eq!(
        live["metadata"]["finalizers"],
        json!(["switchyard.dev/kcp-karmada"])
    );

    // 5. The tenant deletes it: unjoined from Karmada, the Cluster CR removed, finalizer
    // released.
    tenant
        .delete(KC, "KubernetesCluster", Some("default"), "edge-1")
        .await;
    wait_for("everything to go", CONVERGE, || async {
        let left = [
            karmada.get(KARMADA, "Cluster", None, "edge-1").await,
            karmada
                .get("v1", "Secret", Some("karmada-cluster"), "edge-1")
                .await,
            mgmt.get(MGMT, "Cluster", Some("default"), "edge-1").await,
            tenant
                .get(KC, "KubernetesCluster", Some("default"), "edge-1")
                .await,
        ];
        if left.iter().all(Option::is_none) {
            Ok(())
        } else {
            Err(format!("still there: {left:?}"))
        }
    })
    .await;
    // The kubeconfig Secret is cluster-operator's: left alone.
    assert!(
        mgmt.get("v1", "Secret", Some("default"), "kind-edge-1-kubeconfig")
            .await
            .is_some()
    );
    broker.stop().await;
}
