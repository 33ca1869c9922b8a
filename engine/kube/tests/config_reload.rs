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

/// A broker started on the configuration file at `path` and watching it, its probes on
/// `port`.
async fn start_watching(path: &Path, port: u16) -> Broker {
    let mut config = BrokerConfig::from_file(path)
        .unwrap()
        .with_flags(Flags::default())
        .unwrap();
    config.origin = Some(ConfigOrigin {
        path: path.to_path_buf(),
        flags: Flags::default(),
    });
    Broker::start_config(config, port).await
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
    let broker = start_watching(&path, port).await;
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

/// The values bound to a pack's parameters, changed in the configuration file: the packs
/// reload with them and every trigger renders with the new values; values the parameters
/// refuse keep the running set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_values_reach_every_output() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["one"]).await.unwrap();
    let server = plane.cluster("one").unwrap();
    let mut app_crd = open_crd("example.com", "App", "apps");
    app_crd["spec"]["versions"][0]["name"] = json!("v1");
    server.install_crds(&[app_crd]).await.unwrap();
    let cluster = Cluster::new(server.client().await.unwrap());
    cluster
        .put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .await;
    for name in ["web", "api"] {
        cluster
            .put(&json!({"apiVersion": "example.com/v1", "kind": "App",
                         "metadata": {"name": name, "namespace": "team"}, "spec": {}}))
            .await;
    }
    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("packs");
    copy_dir(
        &repo().join("tests/fixtures/packs/params"),
        &packs.join("params"),
    );
    let path = dir.path().join("broker.yaml");
    let port = free_port();
    let kubeconfig = server.kubeconfig_path();
    let write = |values: &str| {
        let text = format!(
            "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  packs: {}\n  \
             resyncSeconds: 3600\n  workers: 4\n  healthAddr: 127.0.0.1:{port}\n  \
             metricsAddr: 127.0.0.1:{port}\n  reloadDebounceMillis: 200\n  clusters:\n    \
             - {{role: source, kubeconfig: {k}}}\n    - {{role: edge, kubeconfig: {k}}}\n  \
             values:\n    params: {values}\n",
            packs.display(),
            k = kubeconfig.display()
        );
        let next = path.with_extension("next");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, &path).unwrap();
    };
    write("{ingressClass: traefik, replicas: 3}");
    let broker = start_watching(&path, port).await;
    let configs_say = |class: &'static str, replicas: &'static str| {
        let cluster = cluster.clone();
        async move {
            for name in ["web", "api"] {
                let c = cluster
                    .get("v1", "ConfigMap", Some("team"), name)
                    .await
                    .ok_or(format!("{name} missing"))?;
                if c["data"]["class"] != class || c["data"]["replicas"] != replicas {
                    return Err(format!("{name}: {}", c["data"]));
                }
            }
            Ok(())
        }
    };
    wait_for("the outputs with the first values", CONVERGE, || {
        configs_say("traefik", "3")
    })
    .await;

    write("{ingressClass: nginx, replicas: 4}");
    wait_for("the outputs with the new values", CONVERGE, || {
        configs_say("nginx-public", "4")
    })
    .await;

    // A value the parameter refuses: the running set stays, and readiness says why.
    write("{ingressClass: haproxy, replicas: 4}");
    let body = readyz_until(&broker, "the refused values", |body| {
        body.contains("haproxy")
    })
    .await;
    assert!(body.contains("Unsupported value"), "{body}");
    configs_say("nginx-public", "4").await.unwrap();
    broker.stop().await;
}
