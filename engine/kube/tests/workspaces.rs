//! Tenants in two kcp workspaces using the same names, through a virtual workspace (two real
//! API servers behind `switchyard_testenv::WorkspaceProxy`): the shipped kcp-karmada pack
//! keeps them apart. Each FleetWorkload finds only its own workspace's Fleet (another
//! workspace's is "not found", in the words used for a name that exists nowhere), each gets
//! its own outputs and its own status and finalizer written back to its workspace, and
//! deleting one tenant's FleetWorkload removes only that tenant's outputs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::{ControlPlane, WorkspaceProxy};

const CONVERGE: Duration = Duration::from_secs(60);

fn fleet(workspace: &str, name: &str, cluster: &str) -> Value {
    json!({"apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "Fleet",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"kcp.io/cluster": workspace}},
        "spec": {"clusterRefs": [{"name": cluster}]}})
}

fn workload(workspace: &str, name: &str, fleet: &str, image: &str) -> Value {
    json!({"apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "FleetWorkload",
        "metadata": {"name": name, "namespace": "default",
                     "annotations": {"kcp.io/cluster": workspace}},
        "spec": {"fleetRef": {"name": fleet}, "replicas": 1,
                 "template": {"spec": {"containers": [{"name": "main", "image": image}]}}}})
}

/// The Karmada namespace of a workspace, as the pack names it.
fn namespace_of(workspace: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(workspace.as_bytes());
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("kcp-{hex}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workspaces_with_the_same_names_stay_apart() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return; // A real cluster is not a kcp virtual workspace.
    }
    let plane = ControlPlane::start(&["ws-a", "ws-b", "karmada"])
        .await
        .unwrap();
    let karmada = Cluster::new(plane.cluster("karmada").unwrap().client().await.unwrap());
    switchyard_testenv::install_crds(&karmada.client, &karmada_crds())
        .await
        .unwrap();
    let mut tenants = Vec::new();
    for ws in ["ws-a", "ws-b"] {
        let server = Cluster::new(plane.cluster(ws).unwrap().client().await.unwrap());
        switchyard_testenv::install_crds(&server.client, &source_crds())
            .await
            .unwrap();
        tenants.push(server);
    }
    let proxy = WorkspaceProxy::start(&[
        ("ws-a", plane.cluster("ws-a").unwrap()),
        ("ws-b", plane.cluster("ws-b").unwrap()),
    ])
    .await
    .unwrap();
    let (a, b) = (&tenants[0], &tenants[1]);

    // The same names in both workspaces; B also has a Fleet A asks for.
    a.put(&fleet("ws-a", "edge", "a-1")).await;
    b.put(&fleet("ws-b", "edge", "b-1")).await;
    b.put(&fleet("ws-b", "only-b", "b-2")).await;
    a.put(&workload("ws-a", "shop", "edge", "shop:a")).await;
    b.put(&workload("ws-b", "shop", "edge", "shop:b")).await;
    a.put(&workload("ws-a", "steal", "only-b", "steal:a")).await;

    let packs = PackDir::with_workspaces();
    let broker = Broker::start(
        &packs.packs(),
        &[
            ("source", proxy.kubeconfig_path()),
            (
                "karmada",
                plane.cluster("karmada").unwrap().kubeconfig_path(),
            ),
            // The management plane (KubernetesClusters) on the Karmada server.
            (
                "management",
                plane.cluster("karmada").unwrap().kubeconfig_path(),
            ),
        ],
    )
    .await;

    // Each tenant's Deployment in its own namespace, with its own image.
    for (ws, image) in [("ws-a", "shop:a"), ("ws-b", "shop:b")] {
        let namespace = namespace_of(ws);
        wait_for(&format!("{ws}'s Deployment"), CONVERGE, || async {
            let deployment = karmada
                .get("apps/v1", "Deployment", Some(&namespace), "shop")
                .await
                .ok_or("absent")?;
            let found = deployment
                .pointer("/spec/template/spec/containers/0/image")
                .cloned();
            if found == Some(json!(image)) {
                Ok(())
            } else {
                Err(format!("image {found:?}"))
            }
        })
        .await;
    }

    // Status and finalizer written back to each workspace's own object.
    for (tenant, ws) in [(a, "ws-a"), (b, "ws-b")] {
        wait_for(&format!("{ws}'s shop to be Synced"), CONVERGE, || async {
            let live = tenant
                .get(
                    "platform.edge-portal.eu/v1alpha1",
                    "FleetWorkload",
                    Some("default"),
                    "shop",
                )
                .await
                .ok_or("gone")?;
            let synced = condition(&live, "Synced");
            let finalizers = live["metadata"]["finalizers"].clone();
            match synced {
                Some(c)
                    if c["status"] == "True"
                        && finalizers == json!(["switchyard.dev/kcp-karmada"]) =>
                {
                    Ok(())
                }
                other => Err(format!("Synced {other:?}, finalizers {finalizers}")),
            }
        })
        .await;
    }

    // A's FleetWorkload that names B's Fleet: not found, and nothing says it exists elsewhere.
    let steal = wait_for("steal to report FleetNotFound", CONVERGE, || async {
        let live = a
            .get(
                "platform.edge-portal.eu/v1alpha1",
                "FleetWorkload",
                Some("default"),
                "steal",
            )
            .await
            .ok_or("gone")?;
        match condition(&live, "Synced") {
            Some(c) if c["reason"] == "FleetNotFound" => Ok(c),
            other => Err(format!("Synced {other:?}")),
        }
    })
    .await;
    assert_eq!(
        steal["message"],
        "Fleet `only-b` not found in namespace `default` of workspace `ws-a` (lookup `fleet` of rule `fleet-workload`)"
    );
    assert!(
        karmada
            .get(
                "apps/v1",
                "Deployment",
                Some(&namespace_of("ws-a")),
                "steal"
            )
            .await
            .is_none()
    );

    // B's shop goes: B's outputs are pruned, A's stay as they are.
    let a_deployment = karmada
        .get("apps/v1", "Deployment", Some(&namespace_of("ws-a")), "shop")
        .await
        .unwrap();
    b.delete(
        "platform.edge-portal.eu/v1alpha1",
        "FleetWorkload",
        Some("default"),
        "shop",
    )
    .await;
    wait_for(
        "B's outputs to go and B's shop with them",
        CONVERGE,
        || async {
            let deployment = karmada
                .get("apps/v1", "Deployment", Some(&namespace_of("ws-b")), "shop")
                .await;
            let workload = b
                .get(
                    "platform.edge-portal.eu/v1alpha1",
                    "FleetWorkload",
                    Some("default"),
                    "shop",
                )
                .await;
            match (deployment, workload) {
                (None, None) => Ok(()),
                other => Err(format!("still there: {other:?}")),
            }
        },
    )
    .await;
    let a_after = karmada
        .get("apps/v1", "Deployment", Some(&namespace_of("ws-a")), "shop")
        .await
        .unwrap();
    assert_eq!(
        a_after["metadata"]["uid"], a_deployment["metadata"]["uid"],
        "A's Deployment was replaced"
    );
    assert_eq!(
        a_after["metadata"]["resourceVersion"], a_deployment["metadata"]["resourceVersion"],
        "A's Deployment was written to"
    );
    broker.stop().await;
}
