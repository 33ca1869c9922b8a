//! Memory per idle member: the broker (in this process) runs the `mesh-fanout` pack with no
//! GlobalService, and N members join through N kubeconfig Secrets, all reaching one API
//! server under different names (each member has its own client and its own watches, as
//! separate clusters would). Prints the resident set before and after, and the difference
//! per member (`-- --nocapture`; `SWITCHYARD_IDLE_MEMBERS=N`, default 40).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::*;
use switchyard_testenv::ControlPlane;

const NAMESPACE: &str = "switchyard-system";

async fn members_live(broker: &Broker, count: usize) {
    let line = format!("[+]members mesh: {count} live");
    wait_for(&line, Duration::from_secs(120), || async {
        let (status, body) = broker.readyz().await;
        if status == 200 && body.contains(&line) {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_per_idle_member() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let count: usize = std::env::var("SWITCHYARD_IDLE_MEMBERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40);
    let plane = ControlPlane::start(&["home", "member"]).await.unwrap();
    let home_server = plane.cluster("home").unwrap();
    home_server
        .install_crds(&[global_service_crd()])
        .await
        .unwrap();
    let home = Cluster::new(home_server.client().await.unwrap());
    home.put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
        .await;
    let kubeconfig = token_kubeconfig(plane.cluster("member").unwrap(), "switchyard").await;

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
    members_live(&broker, 0).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_bytes();

    let started = Instant::now();
    for i in 0..count {
        let name = format!("idle-{i:03}");
        home.put(&kubeconfig_secret(
            NAMESPACE,
            &name,
            "mesh",
            Some(&name),
            &kubeconfig,
        ))
        .await;
    }
    members_live(&broker, count).await;
    let joined = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_bytes();
    assert!(before > 0 && after > 0, "RSS read from /proc/self/status");
    let per_member = after.saturating_sub(before) as f64 / count as f64;
    eprintln!(
        "figure: {count} idle members (2 watches each, own client): RSS {:.1} MiB -> {:.1} MiB, \
         {:.0} KiB per member; all live {:.2} s after the first Secret",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        per_member / 1024.0,
        joined.as_secs_f64()
    );
    broker.stop().await;
}
