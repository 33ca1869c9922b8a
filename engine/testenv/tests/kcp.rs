//! The emulated kcp virtual workspace against real API servers, one per workspace: what code
//! written for kcp sees through the wildcard URL and through `/clusters/<workspace>`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers panic on purpose

use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
    Preconditions,
};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use switchyard_testenv::{CLUSTER_ANNOTATION, ControlPlane, WorkspaceProxy, read_crds};

/// How long any one expected event may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

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

/// A control plane with one API server per workspace, and the proxy serving them.
async fn workspaces(names: &[&str]) -> (ControlPlane, WorkspaceProxy) {
    let control_plane = ControlPlane::start(names).await.unwrap();
    let servers: Vec<(&str, _)> = names
        .iter()
        .map(|name| (*name, control_plane.cluster(name).unwrap()))
        .collect();
    let proxy = WorkspaceProxy::start(&servers).await.unwrap();
    (control_plane, proxy)
}

fn config_maps() -> ApiResource {
    ApiResource::erase::<ConfigMap>(&())
}

fn config_map(name: &str, labels: serde_json::Value, value: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": name, "namespace": "default", "labels": labels },
        "data": { "key": value },
    }))
    .unwrap()
}

/// Direct access to one workspace's server, bypassing the proxy.
async fn server_maps(control_plane: &ControlPlane, workspace: &str) -> Api<DynamicObject> {
    let client = control_plane
        .cluster(workspace)
        .unwrap()
        .client()
        .await
        .unwrap();
    Api::namespaced_with(client, "default", &config_maps())
}

fn cluster_of<K: Resource>(object: &K) -> String {
    object
        .meta()
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(CLUSTER_ANNOTATION))
        .cloned()
        .unwrap_or_default()
}

/// `(workspace, name)` of an object served by the proxy.
fn key<K: Resource>(object: &K) -> (String, String) {
    (
        cluster_of(object),
        object.meta().name.clone().unwrap_or_default(),
    )
}

/// The next item of a watcher, failing the test after [`EVENT_TIMEOUT`].
async fn next<K, S>(stream: &mut S) -> Result<Event<K>, watcher::Error>
where
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
{
    match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("the watcher ended"),
        Err(_) => panic!("no watcher event within {EVENT_TIMEOUT:?}"),
    }
}

/// Drains a watcher's initial list: `Init`, the objects, `InitDone`.
async fn initial_objects<K, S>(stream: &mut S) -> Vec<K>
where
    K: std::fmt::Debug,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
{
    assert!(matches!(next(stream).await, Ok(Event::Init)));
    let mut objects = Vec::new();
    loop {
        match next(stream).await {
            Ok(Event::InitApply(object)) => objects.push(object),
            Ok(Event::InitDone) => return objects,
            other => panic!("unexpected during the initial list: {other:?}"),
        }
    }
}

/// The changes a watcher delivers in the test's namespace (the servers keep objects of their
/// own in kube-system) until `done` holds for them; errors and relists fail the test.
async fn events_until<K, S>(stream: &mut S, done: impl Fn(&[Event<K>]) -> bool) -> Vec<Event<K>>
where
    K: Resource + std::fmt::Debug,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Unpin,
{
    let mut events = Vec::new();
    while !done(&events) {
        match next(stream).await {
            Ok(Event::Apply(object) | Event::Delete(object))
                if object.meta().namespace.as_deref() != Some("default") =>
            {
                eprintln!("ignored: {object:?}");
            }
            Ok(event @ (Event::Apply(_) | Event::Delete(_))) => events.push(event),
            other => panic!("expected Apply or Delete, got {other:?} after {events:?}"),
        }
    }
    events
}

/// `(workspace, name, "apply" | "delete", data.key)` of a config map event.
fn summary(event: &Event<DynamicObject>) -> (String, String, &'static str, String) {
    let (object, what) = match event {
        Event::Apply(object) => (object, "apply"),
        Event::Delete(object) => (object, "delete"),
        other => panic!("not a change: {other:?}"),
    };
    let (workspace, name) = key(object);
    let value = object.data["data"]["key"].as_str().unwrap_or_default();
    (workspace, name, what, value.to_string())
}

#[tokio::test]
async fn wildcard_reads_merge_every_workspace() {
    let mut steps = Steps::new("reads");
    let (control_plane, proxy) = workspaces(&["ws-a", "ws-b"]).await;
    steps.done("start etcd, 2 kube-apiservers and the proxy");

    // The same namespace/name in both workspaces: in ws-a through the proxy, in ws-b straight
    // on its server; one more object in each, the other way round.
    let ws_a: Api<DynamicObject> = Api::namespaced_with(
        proxy.workspace_client("ws-a").await.unwrap(),
        "default",
        &config_maps(),
    );
    let ws_b: Api<DynamicObject> = Api::namespaced_with(
        proxy.workspace_client("ws-b").await.unwrap(),
        "default",
        &config_maps(),
    );
    let labels = json!({ "app": "kcp-test" });
    let created = ws_a
        .create(
            &PostParams::default(),
            &config_map("shared", labels.clone(), "a"),
        )
        .await
        .unwrap();
    assert_eq!(cluster_of(&created), "ws-a");
    assert!(created.resource_version().unwrap().starts_with("kcp."));
    let server_b = server_maps(&control_plane, "ws-b").await;
    server_b
        .create(
            &PostParams::default(),
            &config_map("shared", labels.clone(), "b"),
        )
        .await
        .unwrap();
    server_maps(&control_plane, "ws-a")
        .await
        .create(
            &PostParams::default(),
            &config_map("only-a", json!({}), "a"),
        )
        .await
        .unwrap();
    ws_b.create(
        &PostParams::default(),
        &config_map("only-b", json!({}), "b"),
    )
    .await
    .unwrap();
    // The servers hold the objects without the annotation.
    let stored = server_maps(&control_plane, "ws-a")
        .await
        .get("shared")
        .await
        .unwrap();
    assert_eq!(cluster_of(&stored), "");
    steps.done("create through /clusters/<ws> and on the servers");

    let expected: Vec<(String, String, String)> = [
        ("ws-a", "only-a", "a"),
        ("ws-a", "shared", "a"),
        ("ws-b", "only-b", "b"),
        ("ws-b", "shared", "b"),
    ]
    .iter()
    .map(|(ws, name, value)| (ws.to_string(), name.to_string(), value.to_string()))
    .collect();
    // Only the test's namespace: the servers keep config maps of their own in kube-system.
    let seen = |objects: &[DynamicObject]| {
        let mut seen: Vec<(String, String, String)> = objects
            .iter()
            .filter(|object| object.namespace().as_deref() == Some("default"))
            .map(|object| {
                let (ws, name) = key(object);
                let value = object.data["data"]["key"].as_str().unwrap_or_default();
                (ws, name, value.to_string())
            })
            .collect();
        seen.sort();
        seen
    };

    // A list through the wildcard URL: every workspace's objects, each with its own.
    let all: Api<DynamicObject> = Api::all_with(proxy.client().await.unwrap(), &config_maps());
    let list = all.list(&ListParams::default()).await.unwrap();
    assert_eq!(seen(&list.items), expected);
    assert!(
        list.metadata
            .resource_version
            .as_deref()
            .unwrap()
            .starts_with("kcp.")
    );
    // The same under kcp's explicit wildcard, and one workspace alone under its path.
    let star = kube::Client::try_from(kube::Config::new(
        format!("{}/clusters/*", proxy.url()).parse().unwrap(),
    ))
    .unwrap();
    let star: Api<DynamicObject> = Api::all_with(star, &config_maps());
    assert_eq!(
        seen(&star.list(&ListParams::default()).await.unwrap().items),
        expected
    );
    assert_eq!(
        seen(&ws_b.list(&ListParams::default()).await.unwrap().items),
        expected[2..]
    );
    steps.done("lists");

    // kube's watcher through the wildcard URL: the initial list, then live events.
    let mut stream = watcher(all.clone(), watcher::Config::default()).boxed();
    assert_eq!(seen(&initial_objects(&mut stream).await), expected);
    steps.done("watcher's initial list");

    // Created, modified and deleted later in each workspace: in order per workspace.
    for (api, value) in [(&ws_a, "a"), (&server_b, "b")] {
        api.create(
            &PostParams::default(),
            &config_map("later", json!({}), value),
        )
        .await
        .unwrap();
        api.patch(
            "later",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "key": format!("{value}2") } })),
        )
        .await
        .unwrap();
        api.delete("later", &DeleteParams::default()).await.unwrap();
    }
    let events = events_until(&mut stream, |events| events.len() >= 6).await;
    for workspace in ["ws-a", "ws-b"] {
        let value = &workspace[3..];
        let mine: Vec<_> = events
            .iter()
            .map(summary)
            .filter(|(ws, ..)| ws == workspace)
            .map(|(_, name, what, data)| (name, what, data))
            .collect();
        assert_eq!(
            mine,
            [
                ("later".to_string(), "apply", value.to_string()),
                ("later".to_string(), "apply", format!("{value}2")),
                ("later".to_string(), "delete", format!("{value}2")),
            ],
            "{workspace}"
        );
    }
    steps.done("watcher's live events");

    // Metadata only (PartialObjectMetadata), with a label selector.
    let metadata: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(proxy.client().await.unwrap(), &config_maps());
    let mut stream = watcher(metadata, watcher::Config::default().labels("app=kcp-test")).boxed();
    let mut initial: Vec<_> = initial_objects(&mut stream).await.iter().map(key).collect();
    initial.sort();
    assert_eq!(
        initial,
        [
            ("ws-a".to_string(), "shared".to_string()),
            ("ws-b".to_string(), "shared".to_string()),
        ]
    );
    server_b
        .create(
            &PostParams::default(),
            &config_map("unlabelled", json!({}), "b"),
        )
        .await
        .unwrap();
    ws_a.create(
        &PostParams::default(),
        &config_map("labelled", labels.clone(), "a"),
    )
    .await
    .unwrap();
    let events = events_until(&mut stream, |events| !events.is_empty()).await;
    match &events[..] {
        [Event::Apply(object)] => {
            assert_eq!(key(object), ("ws-a".to_string(), "labelled".to_string()));
            assert!(object.resource_version().unwrap().starts_with("kcp."));
            assert_eq!(object.labels()["app"], "kcp-test");
        }
        other => panic!("expected one Apply, got {other:?}"),
    }
    steps.done("metadata watcher with a label selector");
}

#[tokio::test]
async fn merged_watches_resume_without_relisting() {
    let mut steps = Steps::new("resume");
    let (mut control_plane, proxy) = workspaces(&["ws-a", "ws-b"]).await;
    let server_a = server_maps(&control_plane, "ws-a").await;
    let server_b = server_maps(&control_plane, "ws-b").await;
    server_a
        .create(
            &PostParams::default(),
            &config_map("before", json!({}), "a"),
        )
        .await
        .unwrap();
    let all: Api<DynamicObject> = Api::all_with(proxy.client().await.unwrap(), &config_maps());
    steps.done("start");

    // The servers end each watch after 2 s: the merged watch ends cleanly with the first, and
    // the watcher watches again from the last version it got.
    let mut stream = watcher(all.clone(), watcher::Config::default().timeout(2)).boxed();
    initial_objects(&mut stream).await;
    let lists = proxy.requests().get;
    // Polling starts the watch; nothing happens in it.
    assert!(
        tokio::time::timeout(Duration::from_secs(1), stream.next())
            .await
            .is_err()
    );
    let watches = proxy.requests().watches;
    assert_eq!(watches, 1);
    // The servers end that watch while the watcher is not polled; these changes come after.
    tokio::time::sleep(Duration::from_secs(4)).await;
    server_b
        .create(
            &PostParams::default(),
            &config_map("between", json!({}), "b"),
        )
        .await
        .unwrap();
    server_a
        .patch(
            "before",
            &PatchParams::default(),
            &Patch::Merge(json!({ "data": { "key": "a2" } })),
        )
        .await
        .unwrap();
    let mut events: Vec<_> = events_until(&mut stream, |events| events.len() >= 2)
        .await
        .iter()
        .map(summary)
        .collect();
    events.sort();
    assert_eq!(
        events,
        [
            ("ws-a".into(), "before".into(), "apply", "a2".into()),
            ("ws-b".into(), "between".into(), "apply", "b".into()),
        ]
    );
    assert_eq!(proxy.requests().get, lists, "the watcher listed again");
    assert!(proxy.requests().watches > watches);
    steps.done("server timeout: resumed, nothing missed, no relist");

    // The proxy cuts a watch mid-stream. kube reads a cut chunked body as the end of the watch
    // (no error), so the watcher watches again from its last version on its next poll.
    let mut stream = watcher(all.clone(), watcher::Config::default()).boxed();
    initial_objects(&mut stream).await;
    let lists = proxy.requests().get;
    assert!(
        tokio::time::timeout(Duration::from_secs(1), stream.next())
            .await
            .is_err()
    );
    let watches = proxy.requests().watches;
    proxy.drop_watches();
    // Changes while no watch is open.
    server_a
        .create(
            &PostParams::default(),
            &config_map("after-cut", json!({}), "a"),
        )
        .await
        .unwrap();
    server_b
        .delete("between", &DeleteParams::default())
        .await
        .unwrap();
    let mut events: Vec<_> = events_until(&mut stream, |events| events.len() >= 2)
        .await
        .iter()
        .map(summary)
        .collect();
    events.sort();
    assert_eq!(
        events,
        [
            ("ws-a".into(), "after-cut".into(), "apply", "a".into()),
            ("ws-b".into(), "between".into(), "delete", "b".into()),
        ]
    );
    assert_eq!(proxy.requests().get, lists, "the watcher listed again");
    assert_eq!(proxy.requests().watches, watches + 1);
    steps.done("cut: resumed, nothing missed, no relist");

    // A server restarted since the watcher's version: its watch cache begins after that
    // version, so it answers the resumed watch with 410 Gone, which reaches the watcher as the
    // server sent it, and the watcher lists again. The other server's stream was fine.
    let mut stream = watcher(all.clone(), watcher::Config::default()).boxed();
    initial_objects(&mut stream).await;
    assert!(
        tokio::time::timeout(Duration::from_secs(1), stream.next())
            .await
            .is_err()
    );
    // A write nobody watches moves etcd's revision (shared by both servers) past the version.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(
        control_plane
            .cluster("ws-a")
            .unwrap()
            .client()
            .await
            .unwrap(),
        "default",
    );
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "revision" } })).unwrap(),
        )
        .await
        .unwrap();
    control_plane
        .cluster_mut("ws-b")
        .unwrap()
        .restart()
        .await
        .unwrap();
    steps.done("restart ws-b");
    match next(&mut stream).await {
        Err(watcher::Error::WatchError(status)) => assert_eq!(status.code, 410, "{status:?}"),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
    let mut objects: Vec<_> = initial_objects(&mut stream).await.iter().map(key).collect();
    objects.retain(|(_, name)| name == "before" || name == "after-cut");
    objects.sort();
    assert_eq!(
        objects,
        [
            ("ws-a".to_string(), "after-cut".to_string()),
            ("ws-a".to_string(), "before".to_string()),
        ]
    );
    steps.done("410 Gone from one server: relisted");
}

#[tokio::test]
async fn writes_reach_one_workspace() {
    let mut steps = Steps::new("writes");
    let (control_plane, proxy) = workspaces(&["ws-a", "ws-b"]).await;
    let crds: Vec<_> =
        read_crds(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crds"))
            .unwrap()
            .into_iter()
            .filter(|crd| crd["metadata"]["name"] == "fleetworkloads.platform.edge-portal.eu")
            .collect();
    assert_eq!(crds.len(), 1);
    for server in control_plane.clusters() {
        server.install_crds(&crds).await.unwrap();
    }
    steps.done("start and install FleetWorkload");

    let resource = ApiResource {
        group: "platform.edge-portal.eu".into(),
        version: "v1alpha1".into(),
        api_version: "platform.edge-portal.eu/v1alpha1".into(),
        kind: "FleetWorkload".into(),
        plural: "fleetworkloads".into(),
    };
    let workload = |replicas: i64| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "platform.edge-portal.eu/v1alpha1",
            "kind": "FleetWorkload",
            "metadata": { "name": "web", "namespace": "default" },
            "spec": {
                "fleetRef": { "name": "edge" },
                "replicas": replicas,
                "template": { "spec": { "containers": [{ "name": "web", "image": "nginx" }] } },
            },
        }))
        .unwrap()
    };
    let server = |name: &str| {
        let server = control_plane.cluster(name).unwrap();
        let resource = resource.clone();
        async move {
            Api::<DynamicObject>::namespaced_with(
                server.client().await.unwrap(),
                "default",
                &resource,
            )
        }
    };
    let server_a = server("ws-a").await;
    let server_b = server("ws-b").await;
    server_b
        .create(&PostParams::default(), &workload(5))
        .await
        .unwrap();
    let untouched = server_b.get("web").await.unwrap();
    let ws_a: Api<DynamicObject> = Api::namespaced_with(
        proxy.workspace_client("ws-a").await.unwrap(),
        "default",
        &resource,
    );
    let apply = PatchParams::apply("switchyard-testenv").force();
    proxy.reset_counts();

    // Server-side apply, of a body that carries the annotation as read objects do: the server
    // stores the object without it.
    let mut body = workload(2);
    body.annotations_mut()
        .insert(CLUSTER_ANNOTATION.to_string(), "ws-a".to_string());
    let applied = ws_a
        .patch("web", &apply, &Patch::Apply(body))
        .await
        .unwrap();
    assert_eq!(cluster_of(&applied), "ws-a");
    let stored = server_a.get("web").await.unwrap();
    assert_eq!(stored.data["spec"]["replicas"], 2);
    assert_eq!(cluster_of(&stored), "");
    steps.done("server-side apply");

    // Server-side apply of the status subresource.
    let status = json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": { "name": "web", "namespace": "default" },
        "status": { "observedGeneration": 1, "placements": [{ "cluster": "c1", "replicas": 2 }] },
    });
    let applied = ws_a
        .patch_status("web", &apply, &Patch::Apply(status))
        .await
        .unwrap();
    assert_eq!(cluster_of(&applied), "ws-a");
    let stored = server_a.get("web").await.unwrap();
    assert_eq!(stored.data["status"]["placements"][0]["cluster"], "c1");
    steps.done("status apply");

    // A merge patch with an encoded resource version as its precondition: the current one
    // holds, a stale one conflicts.
    let current = ws_a.get("web").await.unwrap();
    let version = current.resource_version().unwrap();
    assert!(version.starts_with("kcp."));
    let patch = |replicas: i64| {
        Patch::Merge(json!({
            "metadata": { "resourceVersion": version },
            "spec": { "replicas": replicas },
        }))
    };
    let patched = ws_a
        .patch("web", &PatchParams::default(), &patch(3))
        .await
        .unwrap();
    assert_ne!(patched.resource_version().unwrap(), version);
    match ws_a.patch("web", &PatchParams::default(), &patch(4)).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409),
        other => panic!("expected 409 Conflict, got {other:?}"),
    }
    assert_eq!(
        server_a.get("web").await.unwrap().data["spec"]["replicas"],
        3
    );
    steps.done("merge patch with resourceVersion preconditions");

    // Delete with a uid precondition: another uid conflicts, the object's own deletes it.
    let uid = |uid: &str| DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match ws_a.delete("web", &uid(&untouched.uid().unwrap())).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409),
        other => panic!("expected 409 Conflict, got {other:?}"),
    }
    ws_a.delete("web", &uid(&current.uid().unwrap()))
        .await
        .unwrap();
    assert!(server_a.get_opt("web").await.unwrap().is_none());
    steps.done("delete with a uid precondition");

    // Every write went to ws-a's server alone.
    let counts = proxy.requests();
    assert_eq!((counts.patch, counts.delete), (4, 2));
    let after = server_b.get("web").await.unwrap();
    assert_eq!(after.resource_version(), untouched.resource_version());
    assert_eq!(after.data["spec"]["replicas"], 5);
    assert!(after.data.get("status").is_none());

    // Writes without a workspace, or under the wildcard, are refused; so is a get of one
    // object there. Nothing reaches a server.
    let star = kube::Client::try_from(kube::Config::new(
        format!("{}/clusters/*", proxy.url()).parse().unwrap(),
    ))
    .unwrap();
    for client in [proxy.client().await.unwrap(), star] {
        let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
        let refused: Vec<Result<(), kube::Error>> = vec![
            api.create(&PostParams::default(), &workload(1))
                .await
                .map(drop),
            api.patch("web", &apply, &Patch::Apply(workload(1)))
                .await
                .map(drop),
            api.patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": { "replicas": 9 } })),
            )
            .await
            .map(drop),
            api.delete("web", &DeleteParams::default()).await.map(drop),
            api.get("web").await.map(drop),
        ];
        for result in refused {
            match result {
                Err(kube::Error::Api(status)) => assert_eq!(status.code, 400),
                other => panic!("expected 400, got {other:?}"),
            }
        }
    }
    assert_eq!(
        server_b.get("web").await.unwrap().resource_version(),
        untouched.resource_version()
    );
    assert!(server_a.get_opt("web").await.unwrap().is_none());
    steps.done("writes without a workspace: 400");

    // An unknown workspace is not found.
    let unknown = kube::Client::try_from(kube::Config::new(
        proxy.workspace_url("ws-z").parse().unwrap(),
    ))
    .unwrap();
    let api: Api<DynamicObject> = Api::namespaced_with(unknown, "default", &resource);
    match api.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 404),
        other => panic!("expected 404, got {other:?}"),
    }
    assert!(proxy.workspace_kubeconfig_path("ws-z").is_none());
    assert!(proxy.workspace_kubeconfig_path("ws-a").unwrap().exists());
}
