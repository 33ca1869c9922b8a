//! The cilium-mesh pack end to end: `switchyard run` against real API servers, a kcp-like
//! source (one API server, objects carrying `kcp.io/cluster`) and two mesh clusters holding
//! Nodes, Cilium's DaemonSet, a tenant Service and its EndpointSlice. The binding's status is
//! read from the clusters, the GlobalService annotates the Service in both, the
//! ConnectivityIntents become Cilium policies in both, statuses are written back, and
//! deleting the GlobalService and the intents takes the annotations and policies away. The
//! mesh's members come from the management plane's Cluster CRs and their kubeconfig Secrets
//! (the broker run with the pack's `broker.yaml`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests panic on purpose

mod support;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::{Value, json};
use support::{free_port, root};
use switchyard_testenv::{ControlPlane, read_crds};

const MEMBERS: [&str; 2] = ["cluster-ffm-1", "cluster-ber-2"];
const WORKSPACE: &str = "ws1";

/// The API of an object's kind, namespaced or not as discovery says.
async fn api_for(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (ar, caps): (ApiResource, _) =
        kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
    match namespace {
        Some(ns) if caps.scope == Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    }
}

async fn api_of(client: &kube::Client, object: &Value) -> Api<DynamicObject> {
    api_for(
        client,
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
        object["metadata"]["namespace"].as_str(),
    )
    .await
}

/// Server-side apply as the tenant (or the cluster's own controllers), then the object's
/// `status` through the status subresource when it has one.
async fn apply(client: &kube::Client, object: Value) {
    let api = api_of(client, &object).await;
    let name = object["metadata"]["name"].as_str().unwrap().to_string();
    let params = PatchParams::apply("e2e-tenant").force();
    let mut spec = object.clone();
    let status = spec.as_object_mut().unwrap().remove("status");
    api.patch(&name, &params, &Patch::Apply(&spec))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    if let Some(status) = status {
        let mut with_status = spec;
        with_status["status"] = status;
        api.patch_status(&name, &params, &Patch::Apply(&with_status))
            .await
            .unwrap_or_else(|e| panic!("{name} status: {e}"));
    }
}

async fn get(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Option<Value> {
    api_for(client, api_version, kind, namespace)
        .await
        .get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

const NETWORKING: &str = "networking.edge-portal.eu/v1alpha1";

/// A networking object of the tenant's workspace (namespace `default`).
async fn tenant_object(source: &kube::Client, kind: &str, name: &str) -> Option<Value> {
    get(source, NETWORKING, kind, Some("default"), name).await
}

/// The tenant's Service `production/nginx` in a mesh cluster: its annotations.
async fn service_annotations(member: &kube::Client) -> Value {
    let service = get(member, "v1", "Service", Some("production"), "nginx")
        .await
        .unwrap();
    service["metadata"]["annotations"].clone()
}

/// The two intents' policies as a mesh cluster holds them.
async fn policies(member: &kube::Client) -> (Option<Value>, Option<Value>) {
    let namespaced = get(
        member,
        "cilium.io/v2",
        "CiliumNetworkPolicy",
        Some("production"),
        "frontend-to-backend",
    )
    .await;
    let clusterwide = get(
        member,
        "cilium.io/v2",
        "CiliumClusterwideNetworkPolicy",
        None,
        "deny-web-to-db",
    )
    .await;
    (namespaced, clusterwide)
}

/// Waits until `check` holds, at most 60 s; the last value it saw is in the panic.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let last = check().await;
        match last {
            Ok(()) => return,
            Err(seen) if Instant::now() > deadline => panic!("{what}: not within 60s: {seen}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn source_object(api_version: &str, kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"kcp.io/cluster": WORKSPACE}},
        "spec": spec,
    })
}

/// What one mesh cluster holds before the pack runs: `nodes` Ready Nodes, Cilium's agents
/// ready on all of them, the tenant's Service `production/nginx` (with an annotation of its
/// own) and an EndpointSlice with `nodes` ready endpoints.
async fn seed_member(client: &kube::Client, index: usize, nodes: usize) {
    for n in 0..nodes {
        apply(client, json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{n}")},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "KubeletReady", "message": "ready"}]}})).await;
    }
    let count = i64::try_from(nodes).unwrap();
    apply(client, json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": "kube-system", "labels": {"k8s-app": "cilium"}},
        "spec": {"selector": {"matchLabels": {"k8s-app": "cilium"}},
                 "template": {"metadata": {"labels": {"k8s-app": "cilium"}},
                              "spec": {"containers": [{"name": "cilium-agent", "image": "quay.io/cilium/cilium:v1.16.5"}]}}},
        "status": {"currentNumberScheduled": count, "desiredNumberScheduled": count,
                   "numberMisscheduled": 0, "numberReady": count}})).await;
    apply(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "production"}}),
    )
    .await;
    apply(client, json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "nginx", "namespace": "production", "annotations": {"owner": "tenant"}},
        "spec": {"selector": {"app": "nginx"}, "ports": [{"port": 80, "protocol": "TCP"}]}})).await;
    let endpoints: Vec<Value> = (0..nodes)
        .map(|n| json!({"addresses": [format!("10.{index}.0.{}", n + 10)], "conditions": {"ready": true}}))
        .collect();
    apply(
        client,
        json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "nginx-1", "namespace": "production",
                     "labels": {"kubernetes.io/service-name": "nginx"}},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": [{"port": 80, "protocol": "TCP"}]}),
    )
    .await;
}

fn stop(mut child: Child, log: &tempfile::NamedTempFile) -> String {
    let status = support::terminate(&mut child);
    let mut logs = String::new();
    log.reopen().unwrap().read_to_string(&mut logs).unwrap();
    assert_eq!(status.code(), Some(0), "logs:\n{logs}");
    logs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cilium_mesh_exports_services_applies_policies_and_undoes_both() {
    let plane = ControlPlane::start(&["source", MEMBERS[0], MEMBERS[1]])
        .await
        .unwrap();
    let source_server = plane.cluster("source").unwrap();
    source_server
        .install_crds(&read_crds(&root().join("config/crds")).unwrap())
        .await
        .unwrap();
    let cilium_crds = read_crds(&root().join("../shared/crds/cilium")).unwrap();
    let source = source_server.client().await.unwrap();
    let mut members = Vec::new();
    for (i, name) in MEMBERS.iter().enumerate() {
        let server = plane.cluster(name).unwrap();
        server.install_crds(&cilium_crds).await.unwrap();
        let client = server.client().await.unwrap();
        seed_member(&client, i + 1, 3 - i).await;
        members.push(client);
    }

    // The tenant's workspace: the clusters, the mesh, an exported Service, two intents.
    for name in MEMBERS {
        let mut cluster = source_object(
            "platform.edge-portal.eu/v1alpha1",
            "KubernetesCluster",
            name,
            json!({"provider": "KIND"}),
        );
        cluster["status"] =
            json!({"capabilities": [{"name": "cilium-cni", "details": {"status": "ready"}}]});
        apply(&source, cluster).await;
    }
    let networking = NETWORKING;
    apply(
        &source,
        source_object(
            networking,
            "ClusterMeshBinding",
            "edge-mesh-eu",
            json!({
        "clusterRefs": [{"name": MEMBERS[0]}, {"name": MEMBERS[1]}],
        "meshConfig": {"serviceType": "LoadBalancer"}}),
        ),
    )
    .await;
    apply(
        &source,
        source_object(
            networking,
            "GlobalService",
            "nginx-global",
            json!({
        "meshRef": {"name": "edge-mesh-eu"},
        "selector": {"namespace": "production", "name": "nginx"},
        "globalAnnotations": {"service.cilium.io/affinity": "local"}}),
        ),
    )
    .await;
    apply(
        &source,
        source_object(
            networking,
            "ConnectivityIntent",
            "frontend-to-backend",
            json!({
        "meshRef": {"name": "edge-mesh-eu"}, "action": "Allow", "policyMode": "Namespaced",
        "source": {"namespace": "production", "name": "frontend"},
        "destination": {"namespace": "production", "name": "backend"},
        "ports": [{"protocol": "TCP", "port": 8080}, {"protocol": "TCP", "port": 443}],
        "probe": {"enabled": true, "intervalSeconds": 60}}),
        ),
    )
    .await;
    apply(
        &source,
        source_object(
            networking,
            "ConnectivityIntent",
            "deny-web-to-db",
            json!({
        "meshRef": {"name": "edge-mesh-eu"}, "action": "Deny", "policyMode": "Clusterwide",
        "source": {"namespace": "web", "selector": {"role": "web"}},
        "destination": {"namespace": "data", "selector": {"k8s:role": "db"}},
        "ports": [{"protocol": "TCP", "port": 5432}]}),
        ),
    )
    .await;

    // The mesh's members as the seed finds them: the management plane's Cluster CRs (here on
    // the source API server), Ready, naming their kubeconfig Secret (one under the seed's
    // other key, `value`).
    for (i, name) in MEMBERS.iter().enumerate() {
        let key = if i == 0 { "kubeconfig" } else { "value" };
        let kubeconfig = plane.cluster(name).unwrap().embedded_kubeconfig().unwrap();
        apply(
            &source,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": format!("{name}-kubeconfig"), "namespace": "default"},
                   "stringData": {key: kubeconfig}}),
        )
        .await;
        apply(
            &source,
            json!({"apiVersion": "cluster.edge-connect.eu/v1alpha1", "kind": "Cluster",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"provider": "KIND"},
                   "status": {"kubeconfigSecretRef": {"name": format!("{name}-kubeconfig"), "key": key},
                              "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                              "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}),
        )
        .await;
    }
    // The pack's broker configuration, pointed at these API servers: one holds both the
    // tenant's objects (a kcp virtual workspace's: they carry kcp.io/cluster) and the
    // management plane's.
    let shipped = std::fs::read_to_string(root().join("rules/cilium-mesh/broker.yaml")).unwrap();
    let mut config = switchyard_core::yaml::parse_documents(&shipped).unwrap()[0].to_json();
    config["spec"]["packs"] = json!(root().join("rules/cilium-mesh"));
    let kubeconfig = source_server.kubeconfig_path();
    config["spec"]["clusters"] = json!([
        {"role": "source", "kubeconfig": kubeconfig, "workspacePaths": false},
        {"role": "management", "kubeconfig": kubeconfig}]);
    let config_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config_file.path(), serde_json::to_string(&config).unwrap()).unwrap();

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.current_dir(root()).args([
        "run",
        "--config",
        config_file.path().to_str().unwrap(),
        "--log-format",
        "json",
    ]);
    let child = command
        .args(["--health-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--metrics-addr", &format!("127.0.0.1:{}", free_port())])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();

    // The binding's status, read from the clusters.
    eventually("the binding is Connected", || async {
        let binding = tenant_object(&source, "ClusterMeshBinding", "edge-mesh-eu")
            .await
            .unwrap();
        let status = &binding["status"];
        let expected = json!([
            {"clusterName": "cluster-ffm-1", "clusterId": 1, "connected": true, "readyNodes": 3, "totalNodes": 3},
            {"clusterName": "cluster-ber-2", "clusterId": 2, "connected": true, "readyNodes": 2, "totalNodes": 2}]);
        let mesh_connected = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "MeshConnected" && c["status"] == "True"
                && c["message"] == "Mesh established between 2 clusters");
        if status["phase"] == "Connected" && status["meshStatus"] == expected && mesh_connected {
            Ok(())
        } else {
            Err(status.to_string())
        }
    })
    .await;

    // Every mesh cluster's Service carries the annotations; the tenant's own stays.
    for (member, name) in members.iter().zip(MEMBERS) {
        eventually(&format!("the Service in {name} is global"), || async {
            let annotations = &service_annotations(member).await;
            if annotations
                == &json!({"owner": "tenant", "io.cilium/global-service": "true",
                           "io.cilium/shared-service": "true", "service.cilium.io/affinity": "local"})
            {
                Ok(())
            } else {
                Err(annotations.to_string())
            }
        })
        .await;
    }
    eventually("the GlobalService is Exported", || async {
        let gs = tenant_object(&source, "GlobalService", "nginx-global")
            .await
            .unwrap();
        let status = &gs["status"];
        let ok = status["phase"] == "Exported"
            && status["exportedClusters"] == json!(MEMBERS)
            && status["endpointSummary"]
                == json!([{"clusterName": "cluster-ffm-1", "endpoints": 3, "ready": true},
                          {"clusterName": "cluster-ber-2", "endpoints": 2, "ready": true}])
            && gs["metadata"]["finalizers"] == json!(["switchyard.dev/cilium-mesh"]);
        if ok { Ok(()) } else { Err(gs.to_string()) }
    })
    .await;

    // The intents' policies in every mesh cluster, then their status.
    for (member, name) in members.iter().zip(MEMBERS) {
        eventually(&format!("the policies in {name}"), || async {
            let (cnp, ccnp) = policies(member).await;
            let (Some(cnp), Some(ccnp)) = (cnp, ccnp) else {
                return Err("not yet".to_string());
            };
            assert_eq!(
                cnp["spec"],
                json!({
                "endpointSelector": {"matchLabels": {"k8s:app": "backend"}},
                "ingress": [{"fromEndpoints": [{"matchLabels": {"k8s:app": "frontend",
                                "k8s:io.kubernetes.pod.namespace": "production"}}],
                             "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"},
                                                    {"port": "443", "protocol": "TCP"}]}]}]})
            );
            assert_eq!(
                cnp["metadata"]["labels"]["edge-connect.eu/source-workspace"],
                WORKSPACE
            );
            assert_eq!(
                cnp["metadata"]["labels"]["edge-connect.eu/source-name"],
                "frontend-to-backend"
            );
            assert_eq!(
                ccnp["spec"],
                json!({
                "endpointSelector": {"matchLabels": {"k8s:role": "db",
                                                     "k8s:io.kubernetes.pod.namespace": "data"}},
                "ingressDeny": [{"fromEndpoints": [{"matchLabels": {"role": "web",
                                    "k8s:io.kubernetes.pod.namespace": "web"}}],
                                 "toPorts": [{"ports": [{"port": "5432", "protocol": "TCP"}]}]}]})
            );
            Ok(())
        })
        .await;
    }
    for intent in ["frontend-to-backend", "deny-web-to-db"] {
        eventually(&format!("{intent} is Applied"), || async {
            let ci = tenant_object(&source, "ConnectivityIntent", intent)
                .await
                .unwrap();
            let status = &ci["status"];
            // probeStatus only where probe.enabled.
            let probe_ok = if intent == "frontend-to-backend" {
                let probe = &status["probeStatus"];
                probe["success"] == true
                    && probe["message"]
                        == "probe not yet implemented; reporting apply status as proxy"
                    && probe["lastProbeTime"].is_string()
            } else {
                status.get("probeStatus").is_none()
            };
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True" && c["reason"] == "Applied");
            if status["phase"] == "Applied"
                && status["appliedClusters"] == json!(MEMBERS)
                && probe_ok
                && ready
            {
                Ok(())
            } else {
                Err(status.to_string())
            }
        })
        .await;
    }

    // Gated on the binding: Cilium's agents stop on one cluster, the binding is Connecting
    // and the GlobalService Pending. A stopped rule never prunes, so what was exported stays
    // (as the seed returns before touching the clusters); with the agents back the
    // GlobalService is Exported again.
    let set_ready = |ready: i64| {
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
               "metadata": {"name": "cilium", "namespace": "kube-system"},
               "status": {"currentNumberScheduled": 2, "desiredNumberScheduled": 2,
                          "numberMisscheduled": 0, "numberReady": ready}})
    };
    let daemonsets = api_for(&members[1], "apps/v1", "DaemonSet", Some("kube-system")).await;
    let status_params = PatchParams::apply("e2e-tenant").force();
    daemonsets
        .patch_status("cilium", &status_params, &Patch::Apply(&set_ready(0)))
        .await
        .unwrap();
    eventually("the GlobalService is Pending", || async {
        let gs = tenant_object(&source, "GlobalService", "nginx-global")
            .await
            .unwrap();
        let binding = tenant_object(&source, "ClusterMeshBinding", "edge-mesh-eu")
            .await
            .unwrap();
        if gs["status"]["phase"] == "Pending" && binding["status"]["phase"] == "Connecting" {
            Ok(())
        } else {
            Err(format!("{} / {}", gs["status"], binding["status"]))
        }
    })
    .await;
    for (member, name) in members.iter().zip(MEMBERS) {
        let annotations = service_annotations(member).await;
        assert_eq!(
            annotations["io.cilium/global-service"], "true",
            "{name}: {annotations}"
        );
    }
    daemonsets
        .patch_status("cilium", &status_params, &Patch::Apply(&set_ready(2)))
        .await
        .unwrap();
    eventually("the GlobalService is Exported again", || async {
        let gs = tenant_object(&source, "GlobalService", "nginx-global")
            .await
            .unwrap();
        if gs["status"]["phase"] == "Exported" {
            Ok(())
        } else {
            Err(gs["status"].to_string())
        }
    })
    .await;

    // Deleting the GlobalService takes the pack's annotations back, and only those; the
    // finalizer lets it go once that is done.
    let delete = DeleteParams::default();
    api_for(&source, networking, "GlobalService", Some("default"))
        .await
        .delete("nginx-global", &delete)
        .await
        .unwrap();
    for (member, name) in members.iter().zip(MEMBERS) {
        eventually(
            &format!("the Service in {name} is no longer global"),
            || async {
                let annotations = &service_annotations(member).await;
                if annotations == &json!({"owner": "tenant"}) {
                    Ok(())
                } else {
                    Err(annotations.to_string())
                }
            },
        )
        .await;
    }
    eventually("the GlobalService is gone", || async {
        match tenant_object(&source, "GlobalService", "nginx-global").await {
            None => Ok(()),
            Some(gs) => Err(gs.to_string()),
        }
    })
    .await;

    // Deleting the intents deletes their policies in every cluster.
    for intent in ["frontend-to-backend", "deny-web-to-db"] {
        api_for(&source, networking, "ConnectivityIntent", Some("default"))
            .await
            .delete(intent, &delete)
            .await
            .unwrap();
    }
    for (member, name) in members.iter().zip(MEMBERS) {
        eventually(&format!("the policies in {name} are gone"), || async {
            let (cnp, ccnp) = policies(member).await;
            match (cnp, ccnp) {
                (None, None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }

    let logs = stop(child, &log);
    assert!(logs.contains("shutting down"), "{logs}");
}

/// The pack's own test cases, with every output validated against Cilium v1.16.5's CRDs as
/// the mesh clusters' API servers would validate it.
#[test]
fn cilium_mesh_outputs_are_valid_cilium_objects() {
    let out = support::switchyard(&[
        "test",
        "rules/cilium-mesh",
        "--validate-against",
        "../shared/crds/cilium",
    ]);
    let text = support::stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        support::stderr(&out)
    );
    assert!(!text.contains("FAIL") && !text.contains("WARN"), "{text}");
    let last = text.lines().last().unwrap_or("");
    assert!(
        last.ends_with(" passed, 0 failed") && !last.starts_with("0 "),
        "{last}"
    );
}
