//! Members from a kcp APIExportEndpointSlice, over real API servers: two virtual workspace
//! URLs (two `WorkspaceProxy`s, standing for two shards) with three workspaces behind them,
//! each its own API server. A workspace joins the `mesh` role when an APIBinding appears in it
//! (seen through its URL's wildcard with its `kcp.io/cluster`), a URL added to the slice brings
//! its workspaces, a binding deleted takes its workspace out, and a URL removed from the slice
//! takes its members out and stops their watches. The fan-out pack writes a ConfigMap into each
//! workspace through `<url>/clusters/<name>` and counts the members in the GlobalService's
//! status; outputs of members gone stay.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;
use switchyard_kube::config::{KcpSource, MemberSource};
use switchyard_testenv::{ControlPlane, WorkspaceProxy, api_binding_crd, endpoint_slice_crd};

const CONVERGE: Duration = Duration::from_secs(60);
const SLICE: &str = "mesh-export";

fn slice(urls: &[&str]) -> Value {
    let endpoints: Vec<Value> = urls.iter().map(|u| json!({"url": u})).collect();
    json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExportEndpointSlice",
        "metadata": {"name": SLICE},
        "spec": {"export": {"path": "root", "name": "mesh"}},
        "status": {"endpoints": endpoints}})
}

fn binding() -> Value {
    json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding",
        "metadata": {"name": "mesh"},
        "spec": {"reference": {"export": {"path": "root", "name": "mesh"}}}})
}

async fn wait_members(broker: &Broker, line: &str) -> Duration {
    let started = Instant::now();
    wait_for(line, CONVERGE, || async {
        let (_, body) = broker.readyz().await;
        if body.contains(line) {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_behind_an_endpoint_slice_join_and_leave() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return; // A real cluster is not a kcp virtual workspace.
    }
    let plane = ControlPlane::start(&["home", "ws-a", "ws-b", "ws-c"])
        .await
        .unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd(), endpoint_slice_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    let mut workspaces = Vec::new();
    for ws in ["ws-a", "ws-b", "ws-c"] {
        let server = plane.cluster(ws).unwrap();
        server.install_crds(&[api_binding_crd()]).await.unwrap();
        workspaces.push(Cluster::new(server.client().await.unwrap()));
    }
    let (a, b, c) = (&workspaces[0], &workspaces[1], &workspaces[2]);
    // Two shards: ws-a and ws-b behind one URL, ws-c behind another.
    let shard1 = WorkspaceProxy::start(&[
        ("ws-a", plane.cluster("ws-a").unwrap()),
        ("ws-b", plane.cluster("ws-b").unwrap()),
    ])
    .await
    .unwrap();
    let shard2 = WorkspaceProxy::start(&[("ws-c", plane.cluster("ws-c").unwrap())])
        .await
        .unwrap();

    home.put(&slice(&[shard1.url()])).await;
    home.put(
        &json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
                "metadata": {"name": "dns", "namespace": "kube-system"}, "spec": {}}),
    )
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
                cluster_profiles: None,
                kcp: Some(KcpSource {
                    endpoint_slice: SLICE.into(),
                    api_version: "apis.kcp.io/v1alpha1".into(),
                    kind: "APIBinding".into(),
                    cluster: None,
                }),
            }];
        },
    )
    .await;
    // No workspace binds the export yet: no member.
    wait_members(&broker, "[+]members mesh: 0 live\n").await;

    // A workspace binds the export: it joins, and the fan-out reaches it.
    let started = Instant::now();
    a.put(&binding()).await;
    wait_export(a, "ws-a").await;
    let workspace_to_output = started.elapsed();
    b.put(&binding()).await;
    wait_export(b, "ws-b").await;
    wait_global_service(&home, "two members counted", |gs| {
        gs["status"]["meshClusters"] == 2
    })
    .await;

    // A URL added to the slice: its workspace (bound before) joins.
    c.put(&binding()).await;
    let started = Instant::now();
    home.put(&slice(&[shard1.url(), shard2.url()])).await;
    wait_export(c, "ws-c").await;
    let url_to_output = started.elapsed();
    wait_members(&broker, "[+]members mesh: 3 live (ws-a, ws-b, ws-c)\n").await;
    wait_global_service(&home, "three members counted", |gs| {
        gs["status"]["meshClusters"] == 3
    })
    .await;

    // A binding deleted: its workspace leaves; its ConfigMap stays.
    b.delete("apis.kcp.io/v1alpha1", "APIBinding", None, "mesh")
        .await;
    wait_members(&broker, "[+]members mesh: 2 live (ws-a, ws-c)\n").await;
    wait_global_service(&home, "two members counted", |gs| {
        gs["status"]["meshClusters"] == 2
    })
    .await;
    assert!(
        b.get("v1", "ConfigMap", Some("kube-system"), "global-dns")
            .await
            .is_some()
    );

    // The first URL removed: ws-a leaves, and nothing is watched through that URL any more.
    let started = Instant::now();
    home.put(&slice(&[shard2.url()])).await;
    let url_removed_to_gone = wait_members(&broker, "[+]members mesh: 1 live (ws-c)\n").await;
    let (_, body) = broker.readyz().await;
    assert!(!body.contains("mesh/ws-a/"), "{body}");
    wait_global_service(&home, "one member counted", |gs| {
        gs["status"]["meshClusters"] == 1
    })
    .await;
    let url_removed_to_stopped = started.elapsed();
    // Cut whatever still streams through the first URL: a watch still running would come back.
    shard1.reset_counts();
    shard1.drop_watches();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = shard1.requests();
    assert_eq!(
        after.total, 0,
        "requests through the removed URL: {after:?}"
    );
    // Its outputs stay.
    assert!(
        a.get("v1", "ConfigMap", Some("kube-system"), "global-dns")
            .await
            .is_some()
    );
    // The remaining member still follows the pack; the member gone gets nothing new.
    home.put(
        &json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
                "metadata": {"name": "api", "namespace": "kube-system"}, "spec": {}}),
    )
    .await;
    wait_for("ws-c's second ConfigMap", CONVERGE, || async {
        c.get("v1", "ConfigMap", Some("kube-system"), "global-api")
            .await
            .map(|_| ())
            .ok_or_else(|| "missing".to_string())
    })
    .await;
    assert!(
        a.get("v1", "ConfigMap", Some("kube-system"), "global-api")
            .await
            .is_none()
    );

    eprintln!(
        "kcp members: binding created to output {workspace_to_output:?}; URL added to output \
         {url_to_output:?}; URL removed to member gone from /readyz {url_removed_to_gone:?} \
         (polled every 0.2 s), to the pack's status counting without it {url_removed_to_stopped:?}"
    );
    broker.stop().await;
}
