//! The datum-federation pack under the broker, against real API servers: two project control
//! planes (members `project/projects/p1` and `project/projects/p2`, named as datum's Milo
//! provider names them), Karmada and a POP cell (`cell/dfw-1`). Karmada's scheduler and
//! aggregation and the cell's WorkloadDeploymentReconciler are played by the test. The pack
//! keeps the ResourceInterpreterCustomization from the start; a Workload gets one
//! WorkloadDeployment per served city, each federated into `ns-<project namespace uid>` with
//! its city's PropagationPolicy; Karmada's aggregated status comes back verbatim and is summed
//! into the Workload; the cell's Instance is written back to Karmada and projected into the
//! project with its status; deleting the cell's Instance removes the write-back (the
//! projection stays for its WorkloadDeployment's garbage collection); a city leaving a
//! placement and a Workload deleted remove their deployments, Karmada copies and the city's
//! policy, while the federation namespace stays.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;

const CONVERGE: Duration = Duration::from_secs(90);
const COMPUTE: &str = "compute.datumapis.com/v1alpha";
const POLICY: &str = "policy.karmada.io/v1alpha1";
const CONFIG: &str = "config.karmada.io/v1alpha1";
const FINALIZER: &str = "switchyard.dev/datum-federation";

/// Karmada's own CRDs the pack writes: PropagationPolicy and ResourceInterpreterCustomization.
fn karmada_policy_crds() -> Vec<Value> {
    let dir = repo().join("../shared/crds/karmada");
    let mut crds = Vec::new();
    for file in [
        "policy.karmada.io_propagationpolicies.yaml",
        "config.karmada.io_resourceinterpretercustomizations.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for d in switchyard_core::yaml::parse_documents(&text).unwrap() {
            crds.push(d.to_json());
        }
    }
    crds
}

fn location(name: &str, city: &str) -> Value {
    json!({"apiVersion": "networking.datumapis.com/v1alpha", "kind": "Location",
           "metadata": {"name": name, "namespace": "datum-system"},
           "spec": {"locationClassName": "datum-managed",
                    "topology": {"topology.datum.net/city-code": city}}})
}

fn workload(name: &str, placement: &str, cities: &[&str]) -> Value {
    json!({"apiVersion": COMPUTE, "kind": "Workload",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"template": {"spec": {"runtime": {"sandbox": {"containers": [
                        {"name": name, "image": "nginx"}]}}}},
                    "placements": [{"name": placement, "cityCodes": cities,
                                    "scaleSettings": {"minReplicas": 1}}]}})
}

async fn uid(
    cluster: &Cluster,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    name: &str,
) -> String {
    let object = cluster.get(api_version, kind, ns, name).await.unwrap();
    object["metadata"]["uid"].as_str().unwrap().to_string()
}

/// Waits until the object exists and `check` accepts it; returns it.
async fn wait_object(
    cluster: &Cluster,
    what: &str,
    (api_version, kind, ns, name): (&str, &str, Option<&str>, &str),
    check: impl Fn(&Value) -> Result<(), String>,
) -> Value {
    wait_for(what, CONVERGE, || async {
        let object = cluster
            .get(api_version, kind, ns, name)
            .await
            .ok_or("missing")?;
        check(&object)?;
        Ok::<Value, String>(object)
    })
    .await
}

async fn wait_gone(
    cluster: &Cluster,
    what: &str,
    (api_version, kind, ns, name): (&str, &str, Option<&str>, &str),
) {
    wait_for(what, CONVERGE, || async {
        match cluster.get(api_version, kind, ns, name).await {
            None => Ok(()),
            Some(o) => Err(format!("still there: {}", o["metadata"])),
        }
    })
    .await;
}

fn condition_of(list: &Value, kind: &str) -> Option<Value> {
    list.as_array()?.iter().find(|c| c["type"] == kind).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_are_federated_projected_and_cleaned_up_across_projects() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["p1", "p2", "karmada", "cell"])
        .await
        .unwrap();
    let server = |name: &str| plane.cluster(name).unwrap();
    let p1 = Cluster::new(server("p1").client().await.unwrap());
    let p2 = Cluster::new(server("p2").client().await.unwrap());
    let karmada = Cluster::new(server("karmada").client().await.unwrap());
    let cell = Cluster::new(server("cell").client().await.unwrap());
    let project_crds = config_crds(&[
        "compute.datumapis.com_workloads.yaml",
        "compute.datumapis.com_workloaddeployments.yaml",
        "compute.datumapis.com_instances.yaml",
        "networking.datumapis.com_locations.yaml",
    ]);
    for project in [&p1, &p2] {
        switchyard_testenv::install_crds(&project.client, &project_crds)
            .await
            .unwrap();
    }
    let mut crds = config_crds(&[
        "compute.datumapis.com_workloaddeployments.yaml",
        "compute.datumapis.com_instances.yaml",
    ]);
    crds.extend(karmada_policy_crds());
    switchyard_testenv::install_crds(&karmada.client, &crds)
        .await
        .unwrap();
    switchyard_testenv::install_crds(
        &cell.client,
        &config_crds(&["compute.datumapis.com_instances.yaml"]),
    )
    .await
    .unwrap();

    // Project p1 has locations in Dallas and London, p2 in Dallas.
    p1.put(&location("us-central-dfw", "DFW")).await;
    p1.put(&location("eu-west-lhr", "LHR")).await;
    p2.put(&location("us-central-dfw", "DFW")).await;
    let ns1 = format!("ns-{}", uid(&p1, "v1", "Namespace", None, "default").await);
    let ns2 = format!("ns-{}", uid(&p2, "v1", "Namespace", None, "default").await);
    assert_ne!(ns1, ns2);

    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &repo().join("rules/datum-federation"),
        &dir.path().join("packs/datum-federation"),
    );
    copy_tree(&repo().join("config/crds"), &dir.path().join("config/crds"));
    let broker = Broker::start(
        &dir.path().join("packs"),
        &[
            ("project/projects/p1", server("p1").kubeconfig_path()),
            ("project/projects/p2", server("p2").kubeconfig_path()),
            ("karmada", server("karmada").kubeconfig_path()),
            ("cell/dfw-1", server("cell").kubeconfig_path()),
        ],
    )
    .await;

    // §2.6: the interpreter is kept in place with no object at all.
    let interpreter = wait_object(
        &karmada,
        "the ResourceInterpreterCustomization",
        (
            CONFIG,
            "ResourceInterpreterCustomization",
            None,
            "workloaddeployment",
        ),
        |_| Ok(()),
    )
    .await;
    assert_eq!(
        interpreter["spec"]["target"],
        json!({"apiVersion": COMPUTE, "kind": "WorkloadDeployment"})
    );
    let customizations = &interpreter["spec"]["customizations"];
    assert!(customizations["statusReflection"]["luaScript"].is_string());
    assert!(customizations["statusAggregation"]["luaScript"].is_string());

    // §2.2: a deployment per served city (SJC has no location).
    p1.put(&workload("web", "edge", &["DFW", "LHR", "SJC"]))
        .await;
    p2.put(&workload("api", "us", &["DFW"])).await;
    let web_uid = uid(&p1, COMPUTE, "Workload", Some("default"), "web").await;
    let dfw = wait_object(
        &p1,
        "web-edge-dfw in project p1",
        (
            COMPUTE,
            "WorkloadDeployment",
            Some("default"),
            "web-edge-dfw",
        ),
        |_| Ok(()),
    )
    .await;
    assert_eq!(
        dfw["metadata"]["labels"]["compute.datumapis.com/workload-uid"],
        web_uid.as_str()
    );
    assert_eq!(
        dfw["metadata"]["ownerReferences"],
        json!([{"apiVersion": COMPUTE, "kind": "Workload", "name": "web", "uid": web_uid,
                "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(dfw["spec"]["cityCode"], "DFW");
    assert_eq!(
        dfw["spec"]["workloadRef"],
        json!({"name": "web", "uid": web_uid})
    );
    wait_object(
        &p1,
        "web-edge-lhr in project p1",
        (
            COMPUTE,
            "WorkloadDeployment",
            Some("default"),
            "web-edge-lhr",
        ),
        |_| Ok(()),
    )
    .await;
    assert!(
        p1.get(
            COMPUTE,
            "WorkloadDeployment",
            Some("default"),
            "web-edge-sjc"
        )
        .await
        .is_none()
    );
    wait_object(
        &p2,
        "api-us-dfw in project p2",
        (COMPUTE, "WorkloadDeployment", Some("default"), "api-us-dfw"),
        |_| Ok(()),
    )
    .await;

    // §2.3: each project's namespace, deployments and city policies in Karmada.
    let namespace = wait_object(
        &karmada,
        "p1's federation namespace",
        ("v1", "Namespace", None, &ns1),
        |_| Ok(()),
    )
    .await;
    assert_eq!(
        namespace["metadata"]["labels"]["meta.datumapis.com/upstream-cluster-name"],
        "cluster-projects_p1"
    );
    assert_eq!(
        namespace["metadata"]["labels"]["meta.datumapis.com/upstream-namespace"],
        "default"
    );
    let copy = wait_object(
        &karmada,
        "web-edge-dfw in Karmada",
        (COMPUTE, "WorkloadDeployment", Some(&ns1), "web-edge-dfw"),
        |_| Ok(()),
    )
    .await;
    assert_eq!(copy["spec"], dfw["spec"]);
    assert_eq!(
        copy["metadata"]["labels"]["topology.datum.net/city-code"],
        "DFW"
    );
    for (ns, city, code) in [
        (&ns1, "dfw", "DFW"),
        (&ns1, "lhr", "LHR"),
        (&ns2, "dfw", "DFW"),
    ] {
        let policy = wait_object(
            &karmada,
            &format!("city-{city} in {ns}"),
            (
                POLICY,
                "PropagationPolicy",
                Some(ns),
                &format!("city-{city}"),
            ),
            |_| Ok(()),
        )
        .await;
        let selector = json!({"matchLabels": {"topology.datum.net/city-code": code}});
        assert_eq!(
            policy["spec"]["resourceSelectors"],
            json!([{"apiVersion": COMPUTE, "kind": "WorkloadDeployment", "labelSelector": selector}])
        );
        assert_eq!(
            policy["spec"]["placement"]["clusterAffinity"]["labelSelector"],
            selector
        );
    }
    wait_object(
        &karmada,
        "api-us-dfw in p2's federation namespace",
        (COMPUTE, "WorkloadDeployment", Some(&ns2), "api-us-dfw"),
        |_| Ok(()),
    )
    .await;
    let dfw = p1
        .get(
            COMPUTE,
            "WorkloadDeployment",
            Some("default"),
            "web-edge-dfw",
        )
        .await
        .unwrap();
    assert_eq!(dfw["metadata"]["finalizers"], json!([FINALIZER]));

    // §2.3 step 5, §2.2 status: Karmada aggregates the cell's status onto its copy; the
    // project's deployment gets it verbatim, the Workload sums it.
    let available = json!({"type": "Available", "status": "True", "reason": "StableInstanceFound",
                           "message": "At least one stable instance was found",
                           "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let mut aggregated = copy.clone();
    aggregated["status"] = json!({"replicas": 2, "currentReplicas": 2, "desiredReplicas": 2,
                                  "readyReplicas": 1, "conditions": [available.clone()]});
    for field in [
        "resourceVersion",
        "managedFields",
        "uid",
        "creationTimestamp",
        "generation",
    ] {
        aggregated["metadata"]
            .as_object_mut()
            .unwrap()
            .remove(field);
    }
    karmada.put(&aggregated).await;
    let status = wait_object(
        &p1,
        "web-edge-dfw's status pulled from Karmada",
        (
            COMPUTE,
            "WorkloadDeployment",
            Some("default"),
            "web-edge-dfw",
        ),
        |o| {
            if o["status"]["replicas"] == 2 {
                Ok(())
            } else {
                Err(format!("{}", o["status"]))
            }
        },
    )
    .await["status"]
        .clone();
    assert_eq!(status["readyReplicas"], 1);
    assert_eq!(
        condition_of(&status["conditions"], "Available"),
        Some(available)
    );
    assert_eq!(
        condition_of(&status["conditions"], "Synced").unwrap()["reason"],
        "Synced"
    );
    let web = wait_object(
        &p1,
        "web's status",
        (COMPUTE, "Workload", Some("default"), "web"),
        |o| match condition_of(&o["status"]["conditions"], "Available") {
            Some(c) if c["status"] == "True" => Ok(()),
            _ => Err(format!("{}", o["status"])),
        },
    )
    .await;
    assert_eq!(web["status"]["deployments"], 2);
    let edge = &web["status"]["placements"][0];
    assert_eq!(edge["name"], "edge");
    assert_eq!(edge["replicas"], 2);
    assert_eq!(edge["readyReplicas"], 1);
    assert_eq!(
        condition_of(&edge["conditions"], "Available").unwrap()["reason"],
        "AvailableDeploymentFound"
    );
    let web_available = condition_of(&web["status"]["conditions"], "Available").unwrap();
    assert_eq!(web_available["reason"], "AvailablePlacementFound");

    // §2.4: the cell's Instance is written back to Karmada with the project's labels.
    let dfw_uid = dfw["metadata"]["uid"].as_str().unwrap().to_string();
    let ready = json!({"type": "Ready", "status": "False", "reason": "SchedulingGatesPresent",
                       "message": "quota", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let instance = |ready: &Value| {
        json!({"apiVersion": COMPUTE, "kind": "Instance",
               "metadata": {"name": "web-edge-dfw-0", "namespace": ns1,
                            "labels": {"compute.datumapis.com/workload-uid": web_uid,
                                       "compute.datumapis.com/workload-deployment-uid": dfw_uid,
                                       "compute.datumapis.com/instance-index": "0",
                                       "cell.example/rack": "r12"}},
               "spec": {"runtime": {"sandbox": {"containers": [{"name": "web", "image": "nginx"}]}}},
               "status": {"conditions": [ready]}})
    };
    cell.put(&instance(&ready)).await;
    let write_back = wait_object(
        &karmada,
        "the write-back",
        (COMPUTE, "Instance", Some(&ns1), "web-edge-dfw-0"),
        |o| {
            if o["status"]["conditions"][0]["reason"] == "SchedulingGatesPresent" {
                Ok(())
            } else {
                Err(format!("{}", o["status"]))
            }
        },
    )
    .await;
    let labels = &write_back["metadata"]["labels"];
    assert_eq!(
        labels["meta.datumapis.com/upstream-cluster-name"],
        "cluster-projects_p1"
    );
    assert_eq!(labels["meta.datumapis.com/upstream-namespace"], "default");
    assert_eq!(
        labels["compute.datumapis.com/workload-deployment-uid"],
        dfw_uid.as_str()
    );
    assert!(labels.get("cell.example/rack").is_none(), "{labels}");
    assert_eq!(write_back["spec"], instance(&ready)["spec"]);
    let local = cell
        .get(COMPUTE, "Instance", Some(&ns1), "web-edge-dfw-0")
        .await
        .unwrap();
    assert_eq!(local["metadata"]["finalizers"], json!([FINALIZER]));
    // The cell's Instance gets no status from the pack.
    assert_eq!(local["status"]["conditions"], json!([ready]));

    // §2.5: projected into project p1, owned by its deployment, with the status.
    let projection = wait_object(
        &p1,
        "the projection",
        (COMPUTE, "Instance", Some("default"), "web-edge-dfw-0"),
        |o| {
            if o["status"]["conditions"][0]["reason"] == "SchedulingGatesPresent" {
                Ok(())
            } else {
                Err(format!("{}", o["status"]))
            }
        },
    )
    .await;
    assert_eq!(
        projection["metadata"]["ownerReferences"],
        json!([{"apiVersion": COMPUTE, "kind": "WorkloadDeployment", "name": "web-edge-dfw",
                "uid": dfw_uid}])
    );
    assert_eq!(projection["spec"], write_back["spec"]);
    for key in [
        "meta.datumapis.com/upstream-cluster-name",
        "compute.datumapis.com/instance-index",
    ] {
        assert_eq!(projection["metadata"]["labels"][key], labels[key]);
    }
    // Karmada's Instance gets no status and no finalizer from the pack.
    let write_back = karmada
        .get(COMPUTE, "Instance", Some(&ns1), "web-edge-dfw-0")
        .await
        .unwrap();
    assert!(
        write_back["metadata"].get("finalizers").is_none(),
        "{write_back}"
    );
    assert!(condition_of(&write_back["status"]["conditions"], "Synced").is_none());

    // The instance runs: the status travels cell -> Karmada -> project.
    let running = json!({"type": "Ready", "status": "True", "reason": "InstanceIsRunning",
                         "message": "", "lastTransitionTime": "2026-01-01T00:01:00Z"});
    cell.put(&instance(&running)).await;
    wait_object(
        &p1,
        "the projection's status follows",
        (COMPUTE, "Instance", Some("default"), "web-edge-dfw-0"),
        |o| {
            if o["status"]["conditions"] == json!([running]) {
                Ok(())
            } else {
                Err(format!("{}", o["status"]))
            }
        },
    )
    .await;

    // The cell deletes its Instance: the write-back goes first, then the Instance; the
    // projection stays (the seed leaves it to its deployment's garbage collection).
    cell.delete(COMPUTE, "Instance", Some(&ns1), "web-edge-dfw-0")
        .await;
    wait_gone(
        &karmada,
        "the write-back removed",
        (COMPUTE, "Instance", Some(&ns1), "web-edge-dfw-0"),
    )
    .await;
    wait_gone(
        &cell,
        "the cell's Instance released",
        (COMPUTE, "Instance", Some(&ns1), "web-edge-dfw-0"),
    )
    .await;
    let projection = p1
        .get(COMPUTE, "Instance", Some("default"), "web-edge-dfw-0")
        .await
        .expect("the projection stays");
    assert!(
        projection["metadata"]["labels"]
            .get("switchyard.dev/pack")
            .is_none(),
        "orphaned: {}",
        projection["metadata"]
    );

    // London leaves the placement: its deployment, Karmada copy and city policy go; Dallas
    // and the federation namespace stay.
    p1.put(&workload("web", "edge", &["DFW"])).await;
    wait_gone(
        &p1,
        "web-edge-lhr removed",
        (
            COMPUTE,
            "WorkloadDeployment",
            Some("default"),
            "web-edge-lhr",
        ),
    )
    .await;
    wait_gone(
        &karmada,
        "web-edge-lhr's copy removed",
        (COMPUTE, "WorkloadDeployment", Some(&ns1), "web-edge-lhr"),
    )
    .await;
    wait_gone(
        &karmada,
        "city-lhr removed",
        (POLICY, "PropagationPolicy", Some(&ns1), "city-lhr"),
    )
    .await;
    assert!(
        karmada
            .get(POLICY, "PropagationPolicy", Some(&ns1), "city-dfw")
            .await
            .is_some()
    );
    assert!(karmada.get("v1", "Namespace", None, &ns1).await.is_some());

    // Project p2's Workload is deleted: its deployment, copy and policy go; its federation
    // namespace stays, no longer the pack's.
    p2.delete(COMPUTE, "Workload", Some("default"), "api").await;
    wait_gone(
        &p2,
        "api-us-dfw removed",
        (COMPUTE, "WorkloadDeployment", Some("default"), "api-us-dfw"),
    )
    .await;
    wait_gone(
        &karmada,
        "api-us-dfw's copy removed",
        (COMPUTE, "WorkloadDeployment", Some(&ns2), "api-us-dfw"),
    )
    .await;
    wait_gone(
        &karmada,
        "p2's city-dfw removed",
        (POLICY, "PropagationPolicy", Some(&ns2), "city-dfw"),
    )
    .await;
    wait_gone(
        &p2,
        "the Workload released",
        (COMPUTE, "Workload", Some("default"), "api"),
    )
    .await;
    let namespace = wait_object(
        &karmada,
        "p2's federation namespace orphaned",
        ("v1", "Namespace", None, &ns2),
        |o| match o["metadata"]["labels"].get("switchyard.dev/pack") {
            None => Ok(()),
            Some(_) => Err(format!("{}", o["metadata"])),
        },
    )
    .await;
    assert_eq!(
        namespace["metadata"]["labels"]["meta.datumapis.com/upstream-cluster-name"],
        "cluster-projects_p2"
    );
    // p1 is untouched.
    assert!(
        karmada
            .get(POLICY, "PropagationPolicy", Some(&ns1), "city-dfw")
            .await
            .is_some()
    );
    broker.stop().await;
}
