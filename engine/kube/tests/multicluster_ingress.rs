//! The multicluster-ingress pack under the broker, against a real API server standing in for
//! the Karmada control plane (Karmada's CRDs and the pack's input CRDs installed): a
//! MultiClusterIngress of the fake provider's default class gets its load balancer (1.2.3.4,
//! then 1.2.3.5), its service locations and blocked clusters; its backend Services get a
//! ServiceExport and a PropagationPolicy, pruned when no longer referenced; a LoadBalancer
//! MultiClusterService gets its load balancer, loses it with the type and starts again from
//! 1.2.3.4; the ServiceExport CRD's ClusterPropagationPolicy follows the Clusters and comes
//! back when deleted; deleting the ingress and a Service cleans everything up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, WatchEvent, WatchParams};
use serde_json::{Value, json};
use support::*;
use switchyard_testenv::ControlPlane;
use tokio::task::JoinHandle;

const CONVERGE: Duration = Duration::from_secs(90);
const NETWORKING: &str = "networking.karmada.io/v1alpha1";
const EXPORT: &str = "multicluster.x-k8s.io/v1alpha1";
const POLICY: &str = "policy.karmada.io/v1alpha1";

/// Every `status.loadBalancer.ingress[0].ip` an object of `kind` named `name` in `default`
/// takes, in order, as a watch started before it exists sees them (a value repeated by
/// later changes is recorded once).
/// Records every address the object takes, from a watch that is open when this returns: the
/// changes made after are all seen, however fast they come.
async fn record_addresses(client: kube::Client, kind: &str, plural: &str, name: &str) -> Recorder {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("networking.karmada.io", "v1alpha1", kind),
        plural,
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(290);
    let (opened, open) = tokio::sync::oneshot::channel();
    let mut opened = Some(opened);
    let task = tokio::spawn(async move {
        let mut version = "0".to_string();
        loop {
            let mut stream = api.watch(&params, &version).await.unwrap().boxed();
            if let Some(opened) = opened.take() {
                let _ = opened.send(());
            }
            while let Some(event) = stream.next().await {
                let object = match event.unwrap() {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => o,
                    WatchEvent::Bookmark(b) => {
                        version = b.metadata.resource_version;
                        continue;
                    }
                    WatchEvent::Error(e) => panic!("watch of {}: {e}", resource.kind),
                };
                if let Some(v) = &object.metadata.resource_version {
                    version = v.clone();
                }
                let ip = object
                    .data
                    .pointer("/status/loadBalancer/ingress/0/ip")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let mut seen = sink.lock().unwrap();
                if seen.last() != Some(&ip) {
                    seen.push(ip);
                }
            }
        }
    });
    open.await.unwrap();
    Recorder { seen, task }
}

struct Recorder {
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Recorder {
    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn ingress(paths: &[&str]) -> Value {
    let paths: Vec<Value> = paths
        .iter()
        .map(|svc| {
            json!({"path": format!("/{svc}"), "pathType": "Prefix",
                   "backend": {"service": {"name": svc, "port": {"number": 80}}}})
        })
        .collect();
    // No ingressClassName: the default IngressClass, the fake provider's.
    json!({"apiVersion": NETWORKING, "kind": "MultiClusterIngress",
           "metadata": {"name": "shop", "namespace": "default"},
           "spec": {"rules": [{"host": "shop.example.com", "http": {"paths": paths}}]}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"ports": [{"port": 80, "targetPort": 8080}], "selector": {"app": name}}})
}

fn binding(service: &str, clusters: &[&str]) -> Value {
    let clusters: Vec<Value> = clusters.iter().map(|c| json!({"name": c})).collect();
    json!({"apiVersion": "work.karmada.io/v1alpha2", "kind": "ResourceBinding",
           "metadata": {"name": format!("{service}-service"), "namespace": "default"},
           "spec": {"resource": {"apiVersion": "v1", "kind": "Service", "name": service,
                                 "namespace": "default"},
                    "clusters": clusters}})
}

fn multicluster_service(types: &[&str]) -> Value {
    json!({"apiVersion": NETWORKING, "kind": "MultiClusterService",
           "metadata": {"name": "api", "namespace": "default"},
           "spec": {"types": types, "ports": [{"name": "http", "port": 80}]}})
}

/// The ServiceExport and the PropagationPolicy of Service `svc`, where they exist.
async fn exports(karmada: &Cluster, svc: &str) -> (Option<Value>, Option<Value>) {
    let export = karmada
        .get(EXPORT, "ServiceExport", Some("default"), svc)
        .await;
    let policy = karmada
        .get(
            POLICY,
            "PropagationPolicy",
            Some("default"),
            &format!("propagate-service-{svc}"),
        )
        .await;
    (export, policy)
}

/// The ServiceExport and PropagationPolicy of Service `svc`: Ok with the policy's clusters
/// when both exist, Err otherwise.
async fn exported(karmada: &Cluster, svc: &str) -> Result<Value, String> {
    let (export, policy) = exports(karmada, svc).await;
    match (export, policy) {
        (Some(_), Some(policy)) => {
            let selectors = &policy["spec"]["resourceSelectors"];
            if *selectors != json!([{"apiVersion": EXPORT, "kind": "ServiceExport", "name": svc}]) {
                return Err(format!("resourceSelectors are {selectors}"));
            }
            Ok(policy["spec"]["placement"]["clusterAffinity"]["clusterNames"].clone())
        }
        (export, policy) => Err(format!(
            "ServiceExport {}, PropagationPolicy {}",
            export.is_some(),
            policy.is_some()
        )),
    }
}

async fn gone(karmada: &Cluster, svc: &str) -> Result<(), String> {
    let (export, policy) = exports(karmada, svc).await;
    match (export, policy) {
        (None, None) => Ok(()),
        (export, policy) => Err(format!(
            "ServiceExport {}, PropagationPolicy {}",
            export.is_some(),
            policy.is_some()
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingresses_services_and_multicluster_services_as_the_seed_handles_them() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["karmada"]).await.unwrap();
    let server = plane.cluster("karmada").unwrap();
    // Karmada's MultiClusterIngress status declares no conditions: the rule writes none.
    let mut crds = config_crds(&[
        "networking.karmada.io_multiclusteringresses.yaml",
        "networking.karmada.io_multiclusterservices.yaml",
        "cluster.karmada.io_clusters.yaml",
        "multicluster.x-k8s.io_serviceexports.yaml",
    ]);
    crds.extend(karmada_crds());
    server.install_crds(&crds).await.unwrap();
    let client = server.client().await.unwrap();
    let karmada = Cluster::new(client.clone());

    // The fake provider's IngressClass, marked default, and two members; Karmada blocks
    // traffic to member2.
    karmada
        .put(&json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                     "metadata": {"name": "fake",
                                  "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
                     "spec": {"controller": "karmada.io/fake"}}))
        .await;
    karmada
        .put(
            &json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                     "metadata": {"name": "member1"}, "spec": {"syncMode": "Push"}}),
        )
        .await;
    karmada
        .put(
            &json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                     "metadata": {"name": "member2"}, "spec": {"syncMode": "Push"},
                     "status": {"remedyActions": ["TrafficControl"]}}),
        )
        .await;
    for svc in ["serve", "cart", "api"] {
        karmada.put(&service(svc)).await;
    }
    karmada
        .put(&binding("serve", &["member2", "member1"]))
        .await;
    karmada.put(&binding("cart", &["member1"])).await;
    karmada.put(&binding("api", &["member1"])).await;

    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &repo().join("rules/multicluster-ingress"),
        &dir.path().join("packs/multicluster-ingress"),
    );
    copy_tree(&repo().join("config/crds"), &dir.path().join("config/crds"));
    let broker = Broker::start(
        &dir.path().join("packs"),
        &[("karmada", server.kubeconfig_path())],
    )
    .await;

    // The ingress: the load balancer is created (1.2.3.4), then found (1.2.3.5); where its
    // Services run and which of those clusters are blocked.
    let addresses = record_addresses(
        client.clone(),
        "MultiClusterIngress",
        "multiclusteringresses",
        "shop",
    )
    .await;
    karmada.put(&ingress(&["serve", "cart"])).await;
    let status = wait_for("the ingress's status", CONVERGE, || async {
        let live = karmada
            .get(NETWORKING, "MultiClusterIngress", Some("default"), "shop")
            .await
            .ok_or("gone")?;
        let status = live["status"].clone();
        if status["loadBalancer"] == json!({"ingress": [{"ip": "1.2.3.5"}]}) {
            Ok(status)
        } else {
            Err(format!("{status}"))
        }
    })
    .await;
    assert_eq!(addresses.seen(), ["", "1.2.3.4", "1.2.3.5"]);
    assert_eq!(
        status["serviceLocations"],
        json!([{"name": "cart", "clusters": ["member1"]},
               {"name": "serve", "clusters": ["member1", "member2"]}])
    );
    assert_eq!(status["trafficBlockClusters"], json!(["member2"]));
    let live = karmada
        .get(NETWORKING, "MultiClusterIngress", Some("default"), "shop")
        .await
        .unwrap();
    // No outputs, so no finalizer of the pack; no `Synced` where the CRD has no conditions.
    assert!(live["metadata"].get("finalizers").is_none(), "{live}");
    assert!(live["status"].get("conditions").is_none(), "{live}");

    // The ServiceExport CRD's ClusterPropagationPolicy, kept in place without a trigger:
    // every Cluster, following them as they join; applied again when deleted.
    let crd_policy = || async {
        karmada
            .get(
                POLICY,
                "ClusterPropagationPolicy",
                None,
                "serviceexportpropagation-policy",
            )
            .await
            .ok_or_else(|| "no ClusterPropagationPolicy".to_string())
    };
    let clusters_are = |want: Value| {
        let crd_policy = &crd_policy;
        move || {
            let want = want.clone();
            async move {
                let policy = crd_policy().await?;
                let have = &policy["spec"]["placement"]["clusterAffinity"]["clusterNames"];
                if *have == want {
                    Ok(())
                } else {
                    Err(format!("{have}"))
                }
            }
        }
    };
    wait_for(
        "the CRD's policy",
        CONVERGE,
        clusters_are(json!(["member1", "member2"])),
    )
    .await;
    let policy = crd_policy().await.unwrap();
    assert_eq!(
        policy["spec"]["placement"]["clusterTolerations"],
        json!([{"key": "cluster.karmada.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
               {"key": "cluster.karmada.io/unreachable", "operator": "Exists", "effect": "NoExecute"}])
    );
    karmada
        .put(
            &json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster",
                     "metadata": {"name": "member3"}, "spec": {"syncMode": "Pull"}}),
        )
        .await;
    wait_for(
        "member3 in the CRD's policy",
        CONVERGE,
        clusters_are(json!(["member1", "member2", "member3"])),
    )
    .await;
    karmada
        .delete(
            POLICY,
            "ClusterPropagationPolicy",
            None,
            "serviceexportpropagation-policy",
        )
        .await;
    wait_for(
        "the CRD's policy applied again",
        CONVERGE,
        clusters_are(json!(["member1", "member2", "member3"])),
    )
    .await;

    // Its backend Services are exported to the clusters of their bindings.
    let clusters = wait_for("serve exported", CONVERGE, || exported(&karmada, "serve")).await;
    assert_eq!(clusters, json!(["member1", "member2"]));
    let clusters = wait_for("cart exported", CONVERGE, || exported(&karmada, "cart")).await;
    assert_eq!(clusters, json!(["member1"]));
    // Karmada moves serve: the policy follows.
    karmada.put(&binding("serve", &["member1"])).await;
    wait_for("serve's policy on member1 only", CONVERGE, || async {
        let clusters = exported(&karmada, "serve").await?;
        if clusters == json!(["member1"]) {
            Ok(())
        } else {
            Err(format!("{clusters}"))
        }
    })
    .await;
    // member2 runs nothing of the ingress any more: no blocked cluster.
    wait_for("no blocked cluster", CONVERGE, || async {
        let live = karmada
            .get(NETWORKING, "MultiClusterIngress", Some("default"), "shop")
            .await
            .ok_or("gone")?;
        if live["status"].get("trafficBlockClusters").is_none()
            && live["status"]["serviceLocations"]
                == json!([{"name": "cart", "clusters": ["member1"]},
                          {"name": "serve", "clusters": ["member1"]}])
        {
            Ok(())
        } else {
            Err(format!("{}", live["status"]))
        }
    })
    .await;

    // cart is no longer a backend: its ServiceExport and policy are pruned.
    karmada.put(&ingress(&["serve"])).await;
    wait_for("cart's exports pruned", CONVERGE, || gone(&karmada, "cart")).await;
    exported(&karmada, "serve").await.unwrap();

    // A LoadBalancer MultiClusterService: 1.2.3.4, then 1.2.3.5, and its Service exported.
    let mcs_addresses = record_addresses(
        client.clone(),
        "MultiClusterService",
        "multiclusterservices",
        "api",
    )
    .await;
    karmada.put(&multicluster_service(&["LoadBalancer"])).await;
    wait_for("api exported", CONVERGE, || exported(&karmada, "api")).await;
    wait_for("the MultiClusterService's address", CONVERGE, || async {
        match mcs_addresses.seen().last().map(String::as_str) {
            Some("1.2.3.5") => Ok(()),
            _ => Err(format!("{:?}", mcs_addresses.seen())),
        }
    })
    .await;
    // Without LoadBalancer: not the provider's; the address goes, so do the exports.
    karmada.put(&multicluster_service(&["CrossCluster"])).await;
    wait_for("api's exports pruned", CONVERGE, || gone(&karmada, "api")).await;
    wait_for("the address removed", CONVERGE, || async {
        match mcs_addresses.seen().last().map(String::as_str) {
            Some("") => Ok(()),
            _ => Err(format!("{:?}", mcs_addresses.seen())),
        }
    })
    .await;
    // LoadBalancer again: a new load balancer.
    karmada.put(&multicluster_service(&["LoadBalancer"])).await;
    wait_for("the address again", CONVERGE, || async {
        match mcs_addresses.seen().last().map(String::as_str) {
            Some("1.2.3.5") => Ok(()),
            _ => Err(format!("{:?}", mcs_addresses.seen())),
        }
    })
    .await;
    assert_eq!(
        mcs_addresses.seen(),
        ["", "1.2.3.4", "1.2.3.5", "", "1.2.3.4", "1.2.3.5"]
    );
    wait_for("api exported again", CONVERGE, || exported(&karmada, "api")).await;

    // The ingress deleted: serve is referenced no more; the ingress goes at once.
    karmada
        .delete(NETWORKING, "MultiClusterIngress", Some("default"), "shop")
        .await;
    wait_for("serve's exports pruned", CONVERGE, || {
        gone(&karmada, "serve")
    })
    .await;
    assert!(
        karmada
            .get(NETWORKING, "MultiClusterIngress", Some("default"), "shop")
            .await
            .is_none()
    );

    // The Service api deleted: it carries neither the pack's finalizer nor a condition
    // (the rule opts out of both, as the seed writes neither); it goes at once and its
    // exports after it.
    let api = karmada
        .get("v1", "Service", Some("default"), "api")
        .await
        .unwrap();
    assert!(api["metadata"].get("finalizers").is_none(), "{api}");
    assert!(condition(&api, "Synced").is_none(), "{api}");
    karmada
        .delete("v1", "Service", Some("default"), "api")
        .await;
    wait_for("api and its exports gone", CONVERGE, || async {
        gone(&karmada, "api").await?;
        match karmada.get("v1", "Service", Some("default"), "api").await {
            None => Ok(()),
            Some(live) => Err(format!("Service api: {}", live["metadata"])),
        }
    })
    .await;
    broker.stop().await;
}
