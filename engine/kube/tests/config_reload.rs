//! The configuration file watched and read again while the broker runs, with the
//! `mesh-fanout` test pack: a member added to the file joins (the fan-out reaches it), a
//! broken file is refused and the running configuration stays, a member removed from the
//! file leaves (its watches stop, the pack's ConfigMap there stays).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::*;
use switchyard_kube::config::{BrokerConfig, ConfigOrigin, Flags};
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);

fn write_config(path: &Path, packs: &Path, port: u16, clusters: &[(&str, &Path)]) {
    let mut text = format!(
        "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  packs: {}\n  \
         resyncSeconds: 3600\n  workers: 4\n  healthAddr: 127.0.0.1:{port}\n  \
         metricsAddr: 127.0.0.1:{port}\n  reloadDebounceMillis: 200\n  clusters:\n",
        packs.display()
    );
    for (id, kubeconfig) in clusters {
        let (role, name) = match id.split_once('/') {
            Some((role, name)) => (role, Some(name)),
            None => (*id, None),
        };
        text.push_str(&format!("    - role: {role}\n"));
        if let Some(name) = name {
            text.push_str(&format!("      name: {name}\n"));
        }
        text.push_str(&format!("      kubeconfig: {}\n", kubeconfig.display()));
    }
    // Written whole and renamed, as editors and the kubelet do.
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

async fn readyz_until(broker: &Broker, what: &str, check: impl Fn(&str) -> bool) -> String {
    wait_for(what, CONVERGE, || async {
        let (_, body) = broker.readyz().await;
        if check(&body) { Ok(body) } else { Err(body) }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_follow_the_configuration_file() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home", "m1", "m2"]).await.unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    let m1 = plane.cluster("m1").unwrap();
    let m2 = plane.cluster("m2").unwrap();
    let c1 = Cluster::new(m1.client().await.unwrap());
    let c2 = Cluster::new(m2.client().await.unwrap());

    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("packs");
    copy_mesh_fanout(&packs.join("mesh-fanout"));
    let path = dir.path().join("broker.yaml");
    let port = free_port();
    let source = ("source", home_server.kubeconfig_path());
    write_config(
        &path,
        &packs,
        port,
        &[source, ("mesh/m1", m1.kubeconfig_path())],
    );
    let mut config = BrokerConfig::from_file(&path)
        .unwrap()
        .with_flags(Flags::default())
        .unwrap();
    config.origin = Some(ConfigOrigin {
        path: path.clone(),
        flags: Flags::default(),
    });
    let broker = Broker::start_config(config, port).await;
    home.put(
        &json!({"apiVersion": "mesh.example.dev/v1alpha1", "kind": "GlobalService",
                "metadata": {"name": "dns", "namespace": "kube-system"}, "spec": {}}),
    )
    .await;
    wait_export(&c1, "m1").await;

    // A member added to the file joins.
    write_config(
        &path,
        &packs,
        port,
        &[
            source,
            ("mesh/m1", m1.kubeconfig_path()),
            ("mesh/m2", m2.kubeconfig_path()),
        ],
    );
    wait_export(&c2, "m2").await;
    readyz_until(&broker, "m2's watches synced", |body| {
        body.contains("[+]watch mesh/m2/v1/Service synced")
    })
    .await;

    // A broken file is refused: the running configuration stays, and /readyz says so.
    std::fs::write(
        &path,
        "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec: [\n",
    )
    .unwrap();
    let body = readyz_until(&broker, "the refused configuration", |body| {
        body.contains("[!]configuration reload failed at ")
    })
    .await;
    assert!(body.contains("the running configuration stays"), "{body}");
    assert!(
        body.contains("[+]watch mesh/m2/v1/Service synced"),
        "{body}"
    );
    assert!(body.ends_with("readyz check passed\n"), "{body}");

    // A member removed from the file leaves: its watches stop, what the pack made stays.
    write_config(
        &path,
        &packs,
        port,
        &[source, ("mesh/m1", m1.kubeconfig_path())],
    );
    let body = readyz_until(&broker, "m2's watches stopped", |body| {
        !body.contains("mesh/m2/") && !body.contains("configuration reload failed")
    })
    .await;
    assert!(
        body.contains("[+]watch mesh/m1/v1/Service synced"),
        "{body}"
    );
    let gs = wait_global_service(&home, "meshClusters = 1", |gs| {
        gs.pointer("/status/meshClusters") == Some(&json!(1))
    })
    .await;
    assert_eq!(condition(&gs, "Synced").unwrap()["reason"], "MemberGone");
    assert!(
        c2.get("v1", "ConfigMap", Some("kube-system"), "global-dns")
            .await
            .is_some(),
        "the ConfigMap in the member that left stays"
    );
    broker.stop().await;
}
