//! The broker end to end: the kcp-karmada pack through `switchyard_kube::run` against two
//! real API servers (source and karmada), with faults from a proxy in front of each, restarts
//! of the broker, hot reloads and deletes. What the broker applies is compared with what
//! `render` prints for the same objects.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::{ControlPlane, FaultProxy};

const CONVERGE: Duration = Duration::from_secs(60);

fn karmada_key_objects(inputs: &[(String, Value)]) -> (Vec<Value>, Vec<Value>) {
    let source = inputs
        .iter()
        .filter(|(c, _)| c == "source")
        .map(|(_, o)| o.clone())
        .collect();
    let karmada = inputs
        .iter()
        .filter(|(c, _)| c == "karmada")
        .map(|(_, o)| o.clone())
        .collect();
    (source, karmada)
}

fn fleet_workload(namespace: &str, name: &str, fleet: &str) -> Value {
    json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {"kcp.io/cluster": "2vmzxwqzc9k1ajk0"}},
        "spec": {
            "fleetRef": {"name": fleet},
            "replicas": 1,
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}}
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcp_karmada_through_the_broker() {
    // Local API servers behind fault proxies, or a real cluster holding both roles.
    let external = switchyard_testenv::external_kubeconfig();
    let (mut plane, proxies) = match &external {
        Some(_) => (None, None),
        None => {
            let plane = ControlPlane::start(&["source", "karmada"]).await.unwrap();
            let source_proxy = FaultProxy::start(plane.cluster("source").unwrap())
                .await
                .unwrap();
            let karmada_proxy = FaultProxy::start(plane.cluster("karmada").unwrap())
                .await
                .unwrap();
            (Some(plane), Some((source_proxy, karmada_proxy)))
        }
    };
    let (source, karmada, kubeconfigs) = match (&plane, &proxies, &external) {
        (Some(plane), Some((sp, kp)), _) => (
            Cluster::new(plane.cluster("source").unwrap().client().await.unwrap()),
            Cluster::new(plane.cluster("karmada").unwrap().client().await.unwrap()),
            vec![
                ("source", sp.kubeconfig_path().to_path_buf()),
                ("karmada", kp.kubeconfig_path().to_path_buf()),
                // The management plane (KubernetesClusters) on the Karmada server.
                ("management", kp.kubeconfig_path().to_path_buf()),
            ],
        ),
        (_, _, Some(kubeconfig)) => {
            let config = kube::Config::from_custom_kubeconfig(
                kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .unwrap();
            let client = kube::Client::try_from(config).unwrap();
            (
                Cluster::new(client.clone()),
                Cluster::new(client),
                vec![
                    ("source", kubeconfig.clone()),
                    ("karmada", kubeconfig.clone()),
                    ("management", kubeconfig.clone()),
                ],
            )
        }
        _ => unreachable!(),
    };
    switchyard_testenv::install_crds(&source.client, &source_crds())
        .await
        .unwrap();
    switchyard_testenv::install_crds(&karmada.client, &karmada_crds())
        .await
        .unwrap();
    let clusters: BTreeMap<&str, Cluster> =
        [("source", source.clone()), ("karmada", karmada.clone())].into();
    // On a real cluster the tenant objects go to namespaces of their own.
    let ns = |name: &str| {
        if external.is_some() {
            format!("switchyard-e2e-{name}")
        } else {
            name.to_string()
        }
    };
    let default_ns = ns("default");

    // The examples, without the ResourceBinding: Karmada has not picked anything up yet.
    let mut inputs = example_inputs();
    for (cluster, object) in &mut inputs {
        if cluster == "source"
            && let Some(n) = object.pointer_mut("/metadata/namespace")
        {
            *n = json!(ns(n.as_str().unwrap()));
        }
    }
    let (source_objects, karmada_objects) = karmada_key_objects(&inputs);
    for o in &source_objects {
        source.put(o).await;
    }
    let mut world: Vec<(String, Value)> = source_objects
        .iter()
        .map(|o| ("source".to_string(), o.clone()))
        .collect();

    let packs = PackDir::new();
    let kubeconfigs: Vec<(&str, &std::path::Path)> =
        kubeconfigs.iter().map(|(r, p)| (*r, p.as_path())).collect();
    let broker = Broker::start(&packs.packs(), &kubeconfigs).await;

    // 1. Every object render prints is applied; every FleetWorkload gets render's status.
    let plan = render(&packs.packs(), &world);
    assert!(
        plan.objects.len() >= 8,
        "render makes {} objects",
        plan.objects.len()
    );
    wait_for("the broker to apply what render prints", CONVERGE, || {
        matches_plan(&plan, &clusters)
    })
    .await;
    for outcome in &plan.outcomes {
        let key = &outcome.trigger;
        let want = outcome.status.clone().unwrap();
        wait_condition_as_rendered(&source, key, "Synced", &want).await;
        if outcome.finalizer.is_some() {
            let live = source.get_key(key).await.unwrap();
            assert_eq!(
                live["metadata"]["finalizers"],
                json!(["switchyard.dev/kcp-karmada"]),
                "{key}"
            );
        }
    }
    wait_for("readiness", CONVERGE, || async {
        let (code, body) = broker.readyz().await;
        if code == 200 {
            Ok(())
        } else {
            Err(format!("{code}: {body}"))
        }
    })
    .await;

    // 2. A converged system writes nothing on resync.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = broker.controller.writes();
    eprintln!("writes to converge: {before:?}");
    let proxy_writes = || {
        proxies
            .as_ref()
            .map(|(s, k)| s.requests().writes() + k.requests().writes())
    };
    let proxy_before = proxy_writes();
    broker.controller.resync();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        broker.controller.writes(),
        before,
        "a resync of a converged system wrote"
    );
    assert_eq!(
        proxy_writes(),
        proxy_before,
        "a resync of a converged system sent writes"
    );

    // 3. The PlacementPolicy changes: the PropagationPolicy follows.
    let policy_index = world
        .iter()
        .position(|(_, o)| o["kind"] == "PlacementPolicy" && o["metadata"]["name"] == "weighted-eu")
        .unwrap();
    world[policy_index].1["spec"]["weights"][1]["weight"] = json!(7);
    source.put(&world[policy_index].1).await;
    let plan = render(&packs.packs(), &world);
    wait_for(
        "the PropagationPolicy to follow the PlacementPolicy",
        CONVERGE,
        || matches_plan(&plan, &clusters),
    )
    .await;

    // 4. Karmada binds the Deployment: the FleetWorkload's Ready condition reflects it.
    for o in &karmada_objects {
        karmada.put(o).await;
        world.push(("karmada".to_string(), o.clone()));
    }
    let plan = render(&packs.packs(), &world);
    let web = plan
        .outcomes
        .iter()
        .find(|o| o.trigger.name == "web")
        .unwrap();
    wait_condition_as_rendered(&source, &web.trigger, "Ready", web.status.as_ref().unwrap()).await;

    // 5. An output deleted by hand comes back.
    let deployment = plan
        .objects
        .iter()
        .find(|d| d.key.kind == "Deployment")
        .unwrap()
        .key
        .clone();
    karmada
        .delete(
            &deployment.api_version,
            &deployment.kind,
            deployment.namespace.as_deref(),
            &deployment.name,
        )
        .await;
    wait_for("the deleted Deployment to come back", CONVERGE, || {
        matches_plan(&plan, &clusters)
    })
    .await;

    // 6. A FleetWorkload whose Fleet is missing: Synced=False/FleetNotFound; the others converge.
    let orphan = fleet_workload(&default_ns, "lost", "no-such-fleet");
    source.put(&orphan).await;
    let fresh = fleet_workload(&default_ns, "fresh", "edge-eu");
    source.put(&fresh).await;
    world.push(("source".to_string(), orphan.clone()));
    world.push(("source".to_string(), fresh.clone()));
    let plan = render(&packs.packs(), &world);
    wait_synced(
        &source,
        "lost to report FleetNotFound",
        &default_ns,
        "lost",
        |c| c["status"] == "False" && c["reason"] == "FleetNotFound",
    )
    .await;
    wait_for("a Warning Event on lost", CONVERGE, || async {
        let events = source.list("events.k8s.io/v1", "Event").await;
        events
            .iter()
            .find(|e| {
                e["regarding"]["name"] == "lost"
                    && e["reason"] == "FleetNotFound"
                    && e["type"] == "Warning"
                    && e["reportingController"] == "switchyard"
            })
            .map(|_| ())
            .ok_or_else(|| format!("{} events, none for lost", events.len()))
    })
    .await;
    wait_for("fresh to converge beside lost", CONVERGE, || {
        matches_plan(&plan, &clusters)
    })
    .await;

    // 7. The pack changes on disk: outputs change without a restart.
    packs.edit("templates/deployment.yaml.hbs", |t| {
        t.replacen("spec:\n", "spec:\n  revisionHistoryLimit: 3\n", 1)
    });
    let plan = render(&packs.packs(), &world);
    assert!(
        plan.objects
            .iter()
            .any(|d| d.object.pointer("/spec/revisionHistoryLimit") == Some(&json!(3)))
    );
    wait_for(
        "the edited template to reach every Deployment",
        CONVERGE,
        || matches_plan(&plan, &clusters),
    )
    .await;

    // 8. A broken pack: the old one keeps working, readiness says why, nothing is deleted.
    let deletes_before = broker.controller.writes().deletes;
    packs.edit("rules/fleet-workload.yaml", |t| {
        t.replacen(
            "kind: FleetWorkload",
            "kind: FleetWorkload\n    bogusField: 1",
            1,
        )
    });
    wait_for(
        "readiness to report the failed reload",
        CONVERGE,
        || async {
            let (code, body) = broker.readyz().await;
            if body.contains("bogusField") {
                Ok((code, body))
            } else {
                Err(format!("{code}: {body}"))
            }
        },
    )
    .await;
    let another = fleet_workload(&default_ns, "after-broken-reload", "edge-eu");
    source.put(&another).await;
    world.push(("source".to_string(), another));
    let good_plan = {
        // The running pack is the last good one: the edited template, not the broken rule.
        let scratch = PackDir::new();
        scratch.edit("templates/deployment.yaml.hbs", |t| {
            t.replacen("spec:\n", "spec:\n  revisionHistoryLimit: 3\n", 1)
        });
        render(&scratch.packs(), &world)
    };
    wait_for(
        "the last good pack to keep serving new FleetWorkloads",
        CONVERGE,
        || matches_plan(&good_plan, &clusters),
    )
    .await;
    assert_eq!(
        broker.controller.writes().deletes,
        deletes_before,
        "a broken reload deleted something"
    );
    packs.edit("rules/fleet-workload.yaml", |t| {
        t.replacen("\n    bogusField: 1", "", 1)
    });

    // 9. Faults: every watch dropped, the API servers answer 500 and 429 for a while; the
    //    broker converges with nothing lost, nothing duplicated and no desired object pruned.
    let deletes_before = broker.controller.writes().deletes;
    if let Some((source_proxy, karmada_proxy)) = &proxies {
        source_proxy.drop_watches();
        karmada_proxy.drop_watches();
        karmada_proxy.fail_next(20, 500);
        source_proxy.fail_next(10, 429);
    }
    let during = fleet_workload(&default_ns, "during-faults", "edge-eu");
    source.put(&during).await;
    world.push(("source".to_string(), during));
    let plan = render(&packs.packs(), &world);
    wait_for("convergence after faults", CONVERGE, || {
        matches_plan(&plan, &clusters)
    })
    .await;
    assert_eq!(
        broker.controller.writes().deletes,
        deletes_before,
        "faults made the broker prune"
    );

    // 9b. The karmada API server goes away and comes back (same data): applies fail and are
    //     retried, watches resume, nothing is pruned; a stalled source API server only delays.
    if let Some(plane) = plane.as_mut() {
        let server = plane.cluster_mut("karmada").unwrap();
        server.stop().await.unwrap();
        let during_outage = fleet_workload(&default_ns, "during-outage", "edge-eu");
        source.put(&during_outage).await;
        world.push(("source".to_string(), during_outage));
        tokio::time::sleep(Duration::from_secs(3)).await;
        server.restart().await.unwrap();
        if let Some((source_proxy, _)) = &proxies {
            source_proxy.stall(Duration::from_millis(300));
        }
        let plan = render(&packs.packs(), &world);
        wait_for("convergence after an API server outage", CONVERGE, || {
            matches_plan(&plan, &clusters)
        })
        .await;
        if let Some((source_proxy, _)) = &proxies {
            source_proxy.stall(Duration::ZERO);
        }
        assert_eq!(
            broker.controller.writes().deletes,
            deletes_before,
            "an API server outage made the broker prune"
        );
    }

    // 9c. A Fleet goes away: its FleetWorkloads fail (FleetNotFound) and keep their outputs.
    let plant_a = ns("plant-a");
    let factory_index = world
        .iter()
        .position(|(_, o)| o["kind"] == "Fleet" && o["metadata"]["name"] == "factory")
        .unwrap();
    let factory = world[factory_index].1.clone();
    let plan_with_factory = render(&packs.packs(), &world);
    source
        .delete(
            "platform.edge-portal.eu/v1alpha1",
            "Fleet",
            Some(&plant_a),
            "factory",
        )
        .await;
    for name in ["batch", "cache"] {
        wait_synced(
            &source,
            &format!("{name} to report FleetNotFound"),
            &plant_a,
            name,
            |c| c["reason"] == "FleetNotFound",
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    matches_plan(&plan_with_factory, &clusters)
        .await
        .expect("a failing trigger keeps its outputs");
    assert_eq!(
        broker.controller.writes().deletes,
        deletes_before,
        "a failing evaluation pruned outputs"
    );

    // 10. A restarted broker rebuilds its view and changes nothing, also for triggers that
    //     fail (their outputs are known only from the owners annotation).
    broker.stop().await;
    let changed_while_down = fleet_workload(&default_ns, "while-down", "edge-eu");
    source.put(&changed_while_down).await;
    world.push(("source".to_string(), changed_while_down));
    let broker = Broker::start(&packs.packs(), &kubeconfigs).await;
    let plan = render(&packs.packs(), &world);
    wait_for(
        "convergence after a restart, failing triggers' outputs kept",
        CONVERGE,
        || matches_plan(&plan, &clusters),
    )
    .await;
    assert_eq!(
        broker.controller.writes().deletes,
        0,
        "a restart pruned something"
    );
    // The Fleet comes back: batch and cache are Synced again.
    source.put(&factory).await;
    wait_synced(
        &source,
        "batch to be Synced again",
        &plant_a,
        "batch",
        |c| c["status"] == "True",
    )
    .await;
    wait_for("convergence after a restart", CONVERGE, || {
        matches_plan(&plan, &clusters)
    })
    .await;
    wait_for("readiness after a restart", CONVERGE, || async {
        let (code, body) = broker.readyz().await;
        if code == 200 {
            Ok(())
        } else {
            Err(format!("{code}: {body}"))
        }
    })
    .await;
    eprintln!("writes after restart: {:?}", broker.controller.writes());
    assert_eq!(
        broker.controller.writes().deletes,
        0,
        "a restart pruned something"
    );
    let deployments: Vec<Value> = karmada
        .list("apps/v1", "Deployment")
        .await
        .into_iter()
        .filter(|d| {
            d.pointer("/metadata/labels/switchyard.dev~1pack") == Some(&json!("kcp-karmada"))
        })
        .collect();
    let expected = plan
        .objects
        .iter()
        .filter(|d| d.key.kind == "Deployment")
        .count();
    assert_eq!(
        deployments.len(),
        expected,
        "a restart duplicated or lost Deployments"
    );

    // 11. Delete a FleetWorkload: its outputs go, then its finalizer, then the object.
    let fresh_owner = format!("{default_ns}/fresh");
    let fresh_outputs: Vec<_> = plan
        .objects
        .iter()
        .filter(|d| d.owners.len() == 1 && d.owners.iter().any(|o| o.ends_with(&fresh_owner)))
        .map(|d| d.key.clone())
        .collect();
    assert!(!fresh_outputs.is_empty());
    source
        .delete(
            "platform.edge-portal.eu/v1alpha1",
            "FleetWorkload",
            Some(&default_ns),
            "fresh",
        )
        .await;
    wait_for("fresh and its outputs to be gone", CONVERGE, || {
        let source = source.clone();
        let karmada = karmada.clone();
        let fresh_outputs = fresh_outputs.clone();
        let default_ns = default_ns.clone();
        async move {
            for key in &fresh_outputs {
                if karmada.get_key(key).await.is_some() {
                    return Err(format!("{key} still exists"));
                }
            }
            match source
                .get(
                    "platform.edge-portal.eu/v1alpha1",
                    "FleetWorkload",
                    Some(&default_ns),
                    "fresh",
                )
                .await
            {
                Some(o) => Err(format!(
                    "fresh still exists with finalizers {}",
                    o["metadata"]["finalizers"]
                )),
                None => Ok(()),
            }
        }
    })
    .await;
    world.retain(|(_, o)| o["metadata"]["name"] != "fresh");
    let plan = render(&packs.packs(), &world);
    matches_plan(&plan, &clusters).await.unwrap();

    // A real cluster is left as it was: every FleetWorkload deleted (the broker removes the
    // outputs and finalizers), then the other tenant objects and their namespaces.
    if external.is_some() {
        for (_, o) in world
            .iter()
            .filter(|(c, o)| c == "source" && o["kind"] == "FleetWorkload")
        {
            source
                .delete(
                    "platform.edge-portal.eu/v1alpha1",
                    "FleetWorkload",
                    o.pointer("/metadata/namespace").and_then(Value::as_str),
                    o["metadata"]["name"].as_str().unwrap(),
                )
                .await;
        }
        wait_for("every output to be cleaned up", CONVERGE, || {
            let karmada = karmada.clone();
            async move {
                let left = karmada
                    .list("apps/v1", "Deployment")
                    .await
                    .into_iter()
                    .filter(|d| {
                        d.pointer("/metadata/labels/switchyard.dev~1pack")
                            == Some(&json!("kcp-karmada"))
                    })
                    .count();
                if left == 0 {
                    Ok(())
                } else {
                    Err(format!("{left} Deployments left"))
                }
            }
        })
        .await;
        broker.stop().await;
        for (cluster, o) in world.iter().rev() {
            let cluster = &clusters[cluster.as_str()];
            cluster
                .delete(
                    o["apiVersion"].as_str().unwrap(),
                    o["kind"].as_str().unwrap(),
                    o.pointer("/metadata/namespace").and_then(Value::as_str),
                    o["metadata"]["name"].as_str().unwrap(),
                )
                .await;
        }
        for n in ["default", "plant-a"] {
            source.delete("v1", "Namespace", None, &ns(n)).await;
        }
    } else {
        broker.stop().await;
    }
    drop(plane);
}

/// Source and karmada API servers of their own, with the CRDs installed, and their
/// kubeconfigs by role: for scenarios that need a clean slate.
async fn local_clusters() -> (
    ControlPlane,
    Cluster,
    Cluster,
    Vec<(&'static str, std::path::PathBuf)>,
) {
    let plane = ControlPlane::start(&["source", "karmada"]).await.unwrap();
    let source = Cluster::new(plane.cluster("source").unwrap().client().await.unwrap());
    let karmada = Cluster::new(plane.cluster("karmada").unwrap().client().await.unwrap());
    switchyard_testenv::install_crds(&source.client, &source_crds())
        .await
        .unwrap();
    switchyard_testenv::install_crds(&karmada.client, &karmada_crds())
        .await
        .unwrap();
    // The management plane (KubernetesClusters) on the Karmada server.
    let kubeconfigs = [
        ("source", "source"),
        ("karmada", "karmada"),
        ("management", "karmada"),
    ]
    .map(|(role, server)| {
        (
            role,
            plane
                .cluster(server)
                .unwrap()
                .kubeconfig_path()
                .to_path_buf(),
        )
    })
    .to_vec();
    (plane, source, karmada, kubeconfigs)
}

/// One Fleet and one FleetWorkload `default/web` of it, created in `source`: the world as
/// `render` takes it.
async fn one_fleet_workload(source: &Cluster) -> Vec<(String, Value)> {
    let fleet = json!({"apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "Fleet",
        "metadata": {"name": "edge-eu", "namespace": "default",
                     "annotations": {"kcp.io/cluster": "2vmzxwqzc9k1ajk0"}},
        "spec": {"clusterRefs": [{"name": "a"}]}});
    let workload = fleet_workload("default", "web", "edge-eu");
    source.put(&fleet).await;
    source.put(&workload).await;
    vec![
        ("source".to_string(), fleet),
        ("source".to_string(), workload),
    ]
}

/// An output the API server refuses: the trigger says why with the API's own reason and
/// message (`Synced=False/Invalid` naming the object, no debug dump), the work is retried
/// with backoff, nothing is pruned, and a fixed pack converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_apply_is_reported_and_retried() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return; // The scenario above covers a real cluster.
    }
    let (_plane, source, karmada, kubeconfigs) = local_clusters().await;
    let clusters: BTreeMap<&str, Cluster> =
        [("source", source.clone()), ("karmada", karmada.clone())].into();
    let world = one_fleet_workload(&source).await;

    // Kubernetes refuses a negative minReadySeconds. The pack as shipped (its source role a
    // kcp virtual workspace), on one API server that holds the tenant's objects itself.
    let packs = PackDir::with_workspaces();
    packs.edit("templates/deployment.yaml.hbs", |t| {
        t.replacen("spec:\n", "spec:\n  minReadySeconds: -5\n", 1)
    });
    let kubeconfigs: Vec<(&str, &std::path::Path)> =
        kubeconfigs.iter().map(|(r, p)| (*r, p.as_path())).collect();
    let broker = Broker::start_with(&packs.packs(), &kubeconfigs, |config| {
        for cluster in config.clusters.iter_mut().filter(|c| c.role == "source") {
            cluster.workspace_paths = false;
        }
    })
    .await;
    let message = wait_synced(
        &source,
        "web to report the refused apply",
        "default",
        "web",
        |c| c["reason"] == "Invalid",
    )
    .await;
    assert_eq!(message["status"], "False");
    let text = message["message"].as_str().unwrap();
    assert!(
        text.starts_with("create karmada:Deployment.apps:kcp-"),
        "{text}"
    );
    assert!(
        text.ends_with("/web: Deployment.apps \"web\" is invalid: spec.minReadySeconds: Invalid value: -5: must be greater than or equal to 0"),
        "{text}"
    );
    // The Namespace and PropagationPolicy applied before the refused Deployment stay.
    assert!(
        karmada
            .list("v1", "Namespace")
            .await
            .iter()
            .any(|n| n["metadata"]["name"].as_str().unwrap().starts_with("kcp-"))
    );
    assert_eq!(broker.controller.writes().deletes, 0);

    // Fixed on disk: the retry converges and Synced turns True.
    packs.edit("templates/deployment.yaml.hbs", |t| {
        t.replacen("  minReadySeconds: -5\n", "", 1)
    });
    let plan = render(&packs.packs(), &world);
    wait_for("the fixed pack to converge", CONVERGE, || {
        matches_plan(&plan, &clusters)
    })
    .await;
    wait_synced(&source, "Synced=True", "default", "web", |c| {
        c["status"] == "True"
    })
    .await;
    broker.stop().await;
}

/// Two FleetWorkloads of one workspace render one Deployment differently: the one created
/// first wins it, whatever the names; the other reports `Synced=False/Conflict` naming it;
/// when the winner goes, the other takes the object over and turns `Synced=True`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_won_by_the_older_trigger_and_reported_by_the_other() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return; // Cluster-wide fixtures of its own; the scenarios above cover a real cluster.
    }
    let (_plane, source, karmada, kubeconfigs) = local_clusters().await;
    source
        .put(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}))
        .await;
    for namespace in ["default", "team-b"] {
        source
            .put(
                &json!({"apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "Fleet",
                "metadata": {"name": "edge-eu", "namespace": namespace,
                             "annotations": {"kcp.io/cluster": "2vmzxwqzc9k1ajk0"}},
                "spec": {"clusterRefs": [{"name": "a"}]}}),
            )
            .await;
    }
    // The older one sorts last by name: the name must not decide.
    let mut older = fleet_workload("team-b", "web", "edge-eu");
    older["spec"]["template"]["spec"]["containers"][0]["image"] = json!("httpd:2.4");
    source.put(&older).await;
    // creationTimestamp has a resolution of one second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    source
        .put(&fleet_workload("default", "web", "edge-eu"))
        .await;

    let packs = PackDir::new();
    let kubeconfigs: Vec<(&str, &std::path::Path)> =
        kubeconfigs.iter().map(|(r, p)| (*r, p.as_path())).collect();
    let broker = Broker::start(&packs.packs(), &kubeconfigs).await;

    // The merge's conflict, not a write's (a `409 Conflict` retried meanwhile).
    let lost = wait_synced(&source, "default/web to lose", "default", "web", |c| {
        c["reason"] == "Conflict"
            && c["message"]
                .as_str()
                .is_some_and(|m| m.contains("is rendered with different contents"))
    })
    .await;
    assert_eq!(lost["status"], "False");
    let message = lost["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "is rendered with different contents by source:FleetWorkload.platform.edge-portal.eu:team-b/web, which desired it first"
        ),
        "{message}"
    );
    wait_synced(&source, "team-b/web to win", "team-b", "web", |c| {
        c["status"] == "True"
    })
    .await;
    let image = |deployments: Vec<Value>| {
        deployments
            .iter()
            .find(|d| d["metadata"]["name"] == "web")
            .map(|d| d["spec"]["template"]["spec"]["containers"][0]["image"].clone())
    };
    wait_for("the older trigger's Deployment", CONVERGE, || async {
        match image(karmada.list("apps/v1", "Deployment").await) {
            Some(i) if i == "httpd:2.4" => Ok(()),
            other => Err(format!("image {other:?}")),
        }
    })
    .await;

    // The winner goes: the other takes the Deployment over and is Synced.
    source
        .delete(
            "platform.edge-portal.eu/v1alpha1",
            "FleetWorkload",
            Some("team-b"),
            "web",
        )
        .await;
    wait_synced(&source, "default/web to take over", "default", "web", |c| {
        c["status"] == "True"
    })
    .await;
    wait_for("the remaining trigger's Deployment", CONVERGE, || async {
        match image(karmada.list("apps/v1", "Deployment").await) {
            Some(i) if i == "nginx:1.27" => Ok(()),
            other => Err(format!("image {other:?}")),
        }
    })
    .await;
    assert_eq!(broker.controller.writes().deletes, 0);
    broker.stop().await;
}

/// The pack is loaded while the reload debounce runs, from the first pause in the writes: an
/// edit written again after that pause, within the debounce, is the one installed, and the
/// first is never applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_written_again_within_the_debounce_is_the_one_installed() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return; // Cluster-wide fixtures of its own; the scenarios above cover a real cluster.
    }
    let (_plane, source, karmada, kubeconfigs) = local_clusters().await;
    let clusters: BTreeMap<&str, Cluster> =
        [("source", source.clone()), ("karmada", karmada.clone())].into();
    let world = one_fleet_workload(&source).await;
    let packs = PackDir::new();
    let kubeconfigs: Vec<(&str, &std::path::Path)> =
        kubeconfigs.iter().map(|(r, p)| (*r, p.as_path())).collect();
    let debounce = Duration::from_millis(1500);
    let broker = Broker::start_with(&packs.packs(), &kubeconfigs, |config| {
        config.reload_debounce_millis = debounce.as_millis() as u64;
    })
    .await;
    let plan = render(&packs.packs(), &world);
    wait_for("convergence", CONVERGE, || matches_plan(&plan, &clusters)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = broker.controller.writes();

    // The first edit, then a pause well past the 50 ms that starts a load, then the second,
    // all within one debounce.
    let template = "templates/deployment.yaml.hbs";
    let original = std::fs::read_to_string(packs.file(template)).unwrap();
    let name_line = "metadata:\n  name: {{self.metadata.name}}\n";
    assert!(original.contains(name_line));
    let annotated = |value: &str| {
        original.replacen(
            name_line,
            &format!("{name_line}  annotations:\n    reload-edit: {value}\n"),
            1,
        )
    };
    std::fs::write(packs.file(template), annotated("first")).unwrap();
    tokio::time::sleep(debounce / 3).await;
    std::fs::write(packs.file(template), annotated("second")).unwrap();

    let edited = render(&packs.packs(), &world);
    let deployment = edited
        .objects
        .iter()
        .find(|d| d.key.kind == "Deployment")
        .unwrap();
    assert_eq!(
        deployment.object["metadata"]["annotations"]["reload-edit"],
        "second"
    );
    wait_for("the second edit to be applied", CONVERGE, || {
        matches_plan(&edited, &clusters)
    })
    .await;
    // Settled: one apply, of the second edit (the first, had it been installed, would have
    // been one more).
    tokio::time::sleep(debounce * 2).await;
    let after = broker.controller.writes();
    assert_eq!(after.applies - before.applies, 1, "{before:?} -> {after:?}");
    let live = karmada.get_key(&deployment.key).await.unwrap();
    assert_eq!(live["metadata"]["annotations"]["reload-edit"], "second");
    broker.stop().await;
}
