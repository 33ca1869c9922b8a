//! `switchyard run` as an operator runs it: the binary against real API servers, probed
//! over HTTP, stopped with SIGTERM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::free_port;
use switchyard_testenv::{ControlPlane, read_crds};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, response.split_once("\r\n\r\n")?.1.to_string()))
}

async fn apply(
    client: &kube::Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    object: Value,
) {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    api.patch(
        &name,
        &PatchParams::apply("e2e-user"),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_applies_reports_ready_and_stops_on_sigterm() {
    let plane = ControlPlane::start(&["source", "karmada"]).await.unwrap();
    let source = plane.cluster("source").unwrap();
    let karmada = plane.cluster("karmada").unwrap();
    source
        .install_crds(&read_crds(&root().join("config/crds")).unwrap())
        .await
        .unwrap();
    let shared = root().join("../shared/crds/karmada");
    let mut karmada_crds = Vec::new();
    for file in [
        "policy.karmada.io_propagationpolicies.yaml",
        "work.karmada.io_resourcebindings.yaml",
    ] {
        let text = std::fs::read_to_string(shared.join(file)).unwrap();
        karmada_crds.extend(
            switchyard_core::yaml::parse_documents(&text)
                .unwrap()
                .iter()
                .map(|d| d.to_json()),
        );
    }
    // Karmada's member Cluster kind, which the pack reads for KubernetesClusters.
    karmada_crds.extend(
        read_crds(&root().join("config/crds"))
            .unwrap()
            .into_iter()
            .filter(|c| c["spec"]["group"] == "cluster.karmada.io"),
    );
    karmada.install_crds(&karmada_crds).await.unwrap();

    let client = source.client().await.unwrap();
    let group = "platform.edge-portal.eu";
    let fleet = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, "v1alpha1", "Fleet"),
        "fleets",
    );
    let workload = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, "v1alpha1", "FleetWorkload"),
        "fleetworkloads",
    );
    let annotations = json!({"kcp.io/cluster": "ws1"});
    apply(
        &client,
        &fleet,
        Some("default"),
        json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "Fleet",
        "metadata": {"name": "f", "namespace": "default", "annotations": annotations},
        "spec": {"clusterRefs": [{"name": "a"}]}}),
    )
    .await;
    apply(&client, &workload, Some("default"), json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "FleetWorkload",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": {"fleetRef": {"name": "f"}, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})).await;

    let port = free_port();
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .current_dir(root())
        .args([
            "run",
            "--packs",
            "rules/kcp-karmada",
            "--log-format",
            "json",
            // One API server holds the tenant's objects (the pack's source role is a kcp
            // virtual workspace).
            "--no-workspace-paths",
            "source",
        ])
        .arg("--cluster")
        .arg(format!("source={}", source.kubeconfig_path().display()))
        .arg("--cluster")
        .arg(format!(
            "karmada={}@karmada",
            karmada.kubeconfig_path().display()
        ))
        // The management plane (KubernetesClusters) on the source server, which serves
        // cluster-operator's Cluster (config/crds).
        .arg("--cluster")
        .arg(format!("management={}", source.kubeconfig_path().display()))
        .args(["--health-addr", &format!("127.0.0.1:{port}")])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = loop {
        let last = http_get(port, "/readyz?verbose");
        if let Some((200, body)) = &last {
            break body.clone();
        }
        assert!(Instant::now() < deadline, "not ready in 60s: {last:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(ready.contains("kcp-karmada"), "{ready}");
    assert_eq!(http_get(port, "/healthz").unwrap().0, 200);

    // The Deployment reaches Karmada and the FleetWorkload gets its status.
    let deployments: Api<DynamicObject> = Api::all_with(
        karmada.client().await.unwrap(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        ),
    );
    let workloads: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &workload);
    loop {
        let applied = deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len()
            == 1;
        let status = serde_json::to_value(workloads.get("web").await.unwrap()).unwrap();
        let synced = status.pointer("/status/conditions/0/reason").cloned();
        if applied && synced == Some(json!("Synced")) {
            break;
        }
        assert!(Instant::now() < deadline, "not converged: {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // SIGTERM: in-flight work finishes, the process exits 0.
    let status = support::terminate(&mut child);
    let mut logs = String::new();
    log.reopen().unwrap().read_to_string(&mut logs).unwrap();
    assert_eq!(status.code(), Some(0), "logs:\n{logs}");
    // --log-format json: every line is a JSON object.
    assert!(logs.lines().count() > 2, "{logs}");
    for line in logs.lines() {
        let parsed: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(parsed.get("level").is_some(), "{line}");
    }
    assert!(logs.contains("shutting down"), "{logs}");
}

#[test]
fn run_refuses_a_malformed_cluster_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["run", "--packs", "rules", "--cluster", "source"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--cluster `source`"), "{stderr}");
}
