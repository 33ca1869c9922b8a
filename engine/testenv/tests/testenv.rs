//! The harness against real kube-apiserver and etcd processes on 127.0.0.1.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use serde_json::json;
use switchyard_testenv::{ControlPlane, FaultProxy, TestEnvError, read_crds};

/// Prints how long each step took (visible with `--nocapture`).
struct Steps {
    test: &'static str,
    last: Instant,
}

impl Steps {
    fn new(test: &'static str) -> Self {
        Steps {
            test,
            last: Instant::now(),
        }
    }

    fn done(&mut self, step: &str) {
        eprintln!("[{}] {step}: {:?}", self.test, self.last.elapsed());
        self.last = Instant::now();
    }
}

fn config_map(name: &str, value: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            ..ObjectMeta::default()
        },
        data: Some([("key".to_string(), value.to_string())].into()),
        ..ConfigMap::default()
    }
}

#[tokio::test]
async fn clusters_are_isolated_and_data_survives_a_restart() {
    let mut steps = Steps::new("clusters");
    let mut control_plane = ControlPlane::start(&["source", "karmada"]).await.unwrap();
    steps.done("start etcd + 2 kube-apiservers");

    let source = control_plane.cluster("source").unwrap();
    let karmada = control_plane.cluster("karmada").unwrap();
    assert_ne!(source.url(), karmada.url());
    assert!(source.url().starts_with("https://127.0.0.1:"));

    let source_maps: Api<ConfigMap> = Api::namespaced(source.client().await.unwrap(), "default");
    let karmada_maps: Api<ConfigMap> = Api::namespaced(karmada.client().await.unwrap(), "default");
    source_maps
        .create(&PostParams::default(), &config_map("hello", "world"))
        .await
        .unwrap();
    assert!(karmada_maps.get_opt("hello").await.unwrap().is_none());
    steps.done("create in source, absent in karmada");

    // The kubeconfig also works for kubectl, when it is installed.
    if let Ok(output) = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(source.kubeconfig_path())
        .args(["get", "configmap", "hello", "-n", "default", "-o", "name"])
        .output()
    {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(stdout.trim(), "configmap/hello");
        steps.done("kubectl get");
    }

    let source = control_plane.cluster_mut("source").unwrap();
    let url = source.url().to_string();
    source.restart().await.unwrap();
    assert_eq!(source.url(), url);
    steps.done("restart source");
    // The old client still works: same port, same certificates.
    let hello = source_maps.get("hello").await.unwrap();
    assert_eq!(hello.data.unwrap()["key"], "world");

    source.stop().await.unwrap();
    assert!(!source.is_running());
    assert!(source_maps.get("hello").await.is_err());
    steps.done("stop source");
    drop(control_plane);
    steps.done("drop");
}

#[tokio::test]
async fn crds_and_fault_proxy() {
    let mut steps = Steps::new("proxy");
    let control_plane = ControlPlane::start(&["source"]).await.unwrap();
    let source = control_plane.cluster("source").unwrap();
    steps.done("start etcd + 1 kube-apiserver");

    // CRDs from a folder of YAML, the way a repository keeps them.
    let crd_dir = tempfile::tempdir().unwrap();
    std::fs::write(
        crd_dir.path().join("widgets.yaml"),
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.switchyard.dev
spec:
  group: test.switchyard.dev
  scope: Namespaced
  names: { kind: Widget, plural: widgets, singular: widget, listKind: WidgetList }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
---
apiVersion: v1
kind: Namespace
metadata: { name: ignored }
"#,
    )
    .unwrap();
    let crds = read_crds(crd_dir.path()).unwrap();
    assert_eq!(crds.len(), 1);
    source.install_crds(&crds).await.unwrap();
    steps.done("install CRD");
    let widget = ApiResource {
        group: "test.switchyard.dev".into(),
        version: "v1".into(),
        api_version: "test.switchyard.dev/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(source.client().await.unwrap(), "default", &widget);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.switchyard.dev/v1",
        "kind": "Widget",
        "metadata": { "name": "w1" },
        "spec": { "size": 3 },
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    assert_eq!(widgets.get("w1").await.unwrap().data["spec"]["size"], 3);
    steps.done("create a Widget");

    let proxy = FaultProxy::start(source).await.unwrap();
    assert!(proxy.url().starts_with("http://127.0.0.1:"));
    let maps: Api<ConfigMap> = Api::namespaced(proxy.client().await.unwrap(), "default");
    maps.list(&ListParams::default()).await.unwrap();
    assert_eq!(proxy.requests().get, 1);

    // 500 is not retried by kube's client: two failures, then it recovers.
    proxy.fail_next(2, 500);
    for _ in 0..2 {
        match maps.list(&ListParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 500),
            other => panic!("expected an injected 500, got {other:?}"),
        }
    }
    maps.list(&ListParams::default()).await.unwrap();
    // 429 with Retry-After: kube's client retries it by itself after a second.
    proxy.fail_next(1, 429);
    proxy.reset_counts();
    maps.list(&ListParams::default()).await.unwrap();
    assert_eq!(proxy.requests().get, 2);
    steps.done("fail_next 500 and 429");

    proxy.stall(Duration::from_millis(300));
    let stalled = Instant::now();
    maps.list(&ListParams::default()).await.unwrap();
    assert!(stalled.elapsed() >= Duration::from_millis(300));
    proxy.stall(Duration::ZERO);
    steps.done("stall");

    // A watch streams through the proxy as events happen, and drop_watches cuts it.
    let mut stream = maps
        .watch(&WatchParams::default().timeout(290), "0")
        .await
        .unwrap()
        .boxed();
    proxy.reset_counts();
    maps.create(&PostParams::default(), &config_map("watched", "1"))
        .await
        .unwrap();
    let added = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = stream.next().await {
            if let WatchEvent::Added(map) = event.unwrap()
                && map.metadata.name.as_deref() == Some("watched")
            {
                return;
            }
        }
        panic!("the watch ended before the Added event");
    })
    .await;
    assert!(added.is_ok(), "no Added event within 10 s");
    proxy.drop_watches();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream.next().await {
                None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "drop_watches did not end the watch");
    steps.done("watch and drop_watches");

    // Writes are counted by method.
    maps.patch(
        "watched",
        &PatchParams::default(),
        &Patch::Merge(json!({ "data": { "key": "2" } })),
    )
    .await
    .unwrap();
    maps.delete("watched", &DeleteParams::default())
        .await
        .unwrap();
    let counts = proxy.requests();
    assert_eq!((counts.post, counts.patch, counts.delete), (1, 1, 1));
    assert_eq!(counts.writes(), 3);
    assert_eq!(counts.watches, 0);
    // A new watch is counted as one.
    let _stream = maps.watch(&WatchParams::default(), "0").await.unwrap();
    assert_eq!(proxy.requests().watches, 1);
    steps.done("counts");
}

#[tokio::test]
async fn invalid_cluster_names_are_rejected() {
    for names in [&["Source"][..], &[""], &["a", "a"], &["a/b"]] {
        assert!(matches!(
            ControlPlane::start(names).await,
            Err(TestEnvError::InvalidClusterName(_))
        ));
    }
}
