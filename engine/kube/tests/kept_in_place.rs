//! A rule without a trigger under the broker, with the `kept-in-place` test pack
//! (tests/fixtures/packs): the pack keeps a ConfigMap in every member of the `mesh` role (two
//! API servers) from the start, with the members' names and a configured parameter, without
//! any input object; a rule with a trigger works beside it; when the rule goes from the pack,
//! what it kept is deleted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_without_trigger_keeps_its_objects_in_every_member() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["one", "two"]).await.unwrap();
    let one = plane.cluster("one").unwrap();
    let two = plane.cluster("two").unwrap();
    let c1 = Cluster::new(one.client().await.unwrap());
    let c2 = Cluster::new(two.client().await.unwrap());

    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("kept-in-place");
    copy_dir(&repo().join("tests/fixtures/packs/kept-in-place"), &pack);
    let broker = Broker::start_with(
        dir.path(),
        &[
            ("mesh/c1", one.kubeconfig_path()),
            ("mesh/c2", two.kubeconfig_path()),
        ],
        |config| {
            config.values.insert(
                "kept-in-place".to_string(),
                json!({"greeting": "hey"}).as_object().unwrap().clone(),
            );
        },
    )
    .await;

    // Kept in place from the start, in each member, saying which member it is in.
    for (cluster, name) in [(&c1, "c1"), (&c2, "c2")] {
        let cm = wait_for(
            &format!("the members' ConfigMap in mesh/{name}"),
            CONVERGE,
            || async {
                let cm = cluster
                    .get("v1", "ConfigMap", Some("default"), "mesh-members")
                    .await
                    .ok_or("missing")?;
                if cm["data"]["here"] == name {
                    Ok(cm)
                } else {
                    Err(format!("{}", cm["data"]))
                }
            },
        )
        .await;
        assert_eq!(
            cm["data"],
            json!({"members": "c1,c2", "here": name, "greeting": "hey"})
        );
        assert_eq!(
            cm["metadata"]["annotations"]["switchyard.dev/owners"],
            "mesh:RulePack.switchyard.dev:kept-in-place"
        );
    }

    // The rule with a trigger beside it.
    c2.put(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "namespace": "default",
                                "labels": {"kept-in-place/echo": "true"}},
                   "data": {"x": "1"}}))
        .await;
    wait_for("the echo in mesh/c2", CONVERGE, || async {
        let cm = c2
            .get("v1", "ConfigMap", Some("default"), "echo-a")
            .await
            .ok_or("missing")?;
        if cm["data"] == json!({"x": "1"}) {
            Ok(())
        } else {
            Err(format!("{}", cm["data"]))
        }
    })
    .await;

    // The rule goes from the pack: what it kept goes too; the other rule's output stays.
    std::fs::remove_file(pack.join("rules/members.yaml")).unwrap();
    for (cluster, name) in [(&c1, "c1"), (&c2, "c2")] {
        wait_for(
            &format!("the members' ConfigMap gone from mesh/{name}"),
            CONVERGE,
            || async {
                match cluster
                    .get("v1", "ConfigMap", Some("default"), "mesh-members")
                    .await
                {
                    None => Ok(()),
                    Some(cm) => Err(format!("still there: {}", cm["metadata"])),
                }
            },
        )
        .await;
    }
    assert!(
        c2.get("v1", "ConfigMap", Some("default"), "echo-a")
            .await
            .is_some()
    );
    broker.stop().await;
}
