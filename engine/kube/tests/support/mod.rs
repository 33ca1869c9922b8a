//! What the broker's end-to-end tests share: the kcp-karmada pack copied to a folder the test
//! may edit, objects created through real API servers, the broker run in-process, and waits
//! with deadlines that say what they waited for.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use switchyard_core::plan::{self, Plan};
use switchyard_core::{MemoryWorld, ObjectKey};
use switchyard_kube::config::{BrokerConfig, ClusterConfig};
use switchyard_kube::controller::{Controller, is_subset};
use switchyard_kube::health::Health;
use switchyard_kube::watch::resolve;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// CRDs the source cluster serves (the seed kinds) and the Karmada ones the pack reads/writes.
pub fn source_crds() -> Vec<Value> {
    switchyard_testenv::read_crds(&repo().join("config/crds")).unwrap()
}

pub fn karmada_crds() -> Vec<Value> {
    let dir = repo().join("../shared/crds/karmada");
    let mut crds = Vec::new();
    for file in [
        "policy.karmada.io_propagationpolicies.yaml",
        "policy.karmada.io_clusterpropagationpolicies.yaml",
        "work.karmada.io_resourcebindings.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for d in switchyard_core::yaml::parse_documents(&text).unwrap() {
            crds.push(d.to_json());
        }
    }
    // Karmada's member clusters (served by karmada-aggregated-apiserver, not a CRD, in
    // Karmada), and cluster-operator's Cluster: the pack's `management` role, which the
    // FleetWorkload tests point at the Karmada server (one cluster may hold several roles).
    crds.extend(
        switchyard_testenv::read_crds(&repo().join("config/crds"))
            .unwrap()
            .into_iter()
            .filter(|c| {
                c["spec"]["group"] == "cluster.karmada.io"
                    || c["spec"]["group"] == "cluster.edge-connect.eu"
            }),
    );
    crds
}

/// CRDs of the repository's config/crds, by file name.
pub fn config_crds(files: &[&str]) -> Vec<Value> {
    let dir = repo().join("config/crds");
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for d in switchyard_core::yaml::parse_documents(&text).unwrap() {
            crds.push(d.to_json());
        }
    }
    crds
}

/// Copies a folder and everything under it.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A scratch copy of the repository's pack layout: `packs/kcp-karmada`, `templates/`,
/// `config/crds/`, so a test can edit the pack while the broker runs.
pub struct PackDir {
    pub dir: tempfile::TempDir,
}

impl PackDir {
    /// The pack for a plain API server as its source cluster: the tenants' objects carry
    /// `kcp.io/cluster` but one server holds them all, so the source role is declared as
    /// one cluster rather than kcp workspaces (see [`PackDir::with_workspaces`]).
    pub fn new() -> PackDir {
        let packs = PackDir::with_workspaces();
        packs.edit("pack.yaml", |t| t.replace("      workspaces: kcp\n", ""));
        packs
    }

    /// The pack as shipped: its source role is a kcp virtual workspace.
    pub fn with_workspaces() -> PackDir {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(
            &repo().join("rules/kcp-karmada"),
            &dir.path().join("packs/kcp-karmada"),
        );
        copy_dir(&repo().join("templates"), &dir.path().join("templates"));
        copy_dir(&repo().join("config/crds"), &dir.path().join("config/crds"));
        PackDir { dir }
    }

    pub fn packs(&self) -> PathBuf {
        self.dir.path().join("packs")
    }

    pub fn file(&self, relative: &str) -> PathBuf {
        self.packs().join("kcp-karmada").join(relative)
    }

    pub fn edit(&self, relative: &str, f: impl FnOnce(String) -> String) {
        let path = self.file(relative);
        let text = std::fs::read_to_string(&path).unwrap();
        let edited = f(text.clone());
        assert_ne!(text, edited, "the edit of {relative} changed nothing");
        std::fs::write(&path, edited).unwrap();
    }
}

/// Copies a folder recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A broker running in this process.
pub struct Broker {
    pub controller: Arc<Controller>,
    pub health: Health,
    pub health_port: u16,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Logs of the broker under test on stderr when `SWITCHYARD_LOG` is set.
fn init_logs() {
    if let Ok(filter) = std::env::var("SWITCHYARD_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

impl Broker {
    pub async fn start(packs: &Path, clusters: &[(&str, &Path)]) -> Broker {
        Broker::start_with(packs, clusters, |_| {}).await
    }

    /// As [`Broker::start`], with the configuration changed by `adjust` first.
    pub async fn start_with(
        packs: &Path,
        clusters: &[(&str, &Path)],
        adjust: impl FnOnce(&mut BrokerConfig),
    ) -> Broker {
        init_logs();
        let health_port = free_port();
        let config = BrokerConfig {
            packs: Some(packs.to_path_buf()),
            clusters: clusters
                .iter()
                .map(|(id, kubeconfig)| ClusterConfig {
                    // `ROLE` or `ROLE/NAME`, as `--cluster` takes them.
                    role: id.split('/').next().unwrap_or_default().to_string(),
                    name: id.split_once('/').map(|(_, name)| name.to_string()),
                    kubeconfig: Some(kubeconfig.to_path_buf()),
                    context: None,
                    in_cluster: false,
                    workspace_paths: true,
                })
                .collect(),
            resync_seconds: 3600,
            workers: 4,
            // One address for probes and metrics: tests run brokers side by side.
            health_addr: format!("127.0.0.1:{health_port}"),
            metrics_addr: format!("127.0.0.1:{health_port}"),
            reload_debounce_millis: 200,
            ..BrokerConfig::default()
        };
        let mut config = config;
        adjust(&mut config);
        Broker::start_config(config, health_port).await
    }

    /// A broker with exactly this configuration, its probes on `health_port`.
    pub async fn start_config(config: BrokerConfig, health_port: u16) -> Broker {
        init_logs();
        let (stop, stopped) = oneshot::channel::<()>();
        let (started, handle) = oneshot::channel();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            let result = switchyard_kube::run(config, shutdown, move |h| {
                let _ = started.send(h);
            })
            .await;
            if let Err(e) = result {
                panic!("broker failed: {e}");
            }
        });
        let handle = handle.await.expect("the broker starts");
        Broker {
            controller: handle.controller,
            health: handle.health,
            health_port,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// SIGTERM's path: stop taking work, finish in-flight work, return.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(40), task)
                .await
                .expect("the broker stops within 40s")
                .unwrap();
        }
    }

    pub async fn readyz(&self) -> (u16, String) {
        http_get(self.health_port, "/readyz?verbose").await
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A plain HTTP/1.1 GET on loopback: status and body.
pub async fn http_get(port: u16, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Polls `check` until it returns `Some`, or fails the test naming what was awaited and the
/// last thing `check` saw.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(value) => return value,
            Err(why) => why,
        };
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}: {last}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// (apiVersion, kind) -> resource and whether it is namespaced.
type Resources = BTreeMap<(String, String), (kube::api::ApiResource, bool)>;

/// Typed access to any kind in a cluster.
#[derive(Clone)]
pub struct Cluster {
    pub client: Client,
    resources: Arc<Mutex<Resources>>,
}

impl Cluster {
    pub fn new(client: Client) -> Cluster {
        Cluster {
            client,
            resources: Arc::default(),
        }
    }

    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Api<DynamicObject> {
        let key = (api_version.to_string(), kind.to_string());
        let cached = self.resources.lock().unwrap().get(&key).cloned();
        let (resource, namespaced) = match cached {
            Some(found) => found,
            None => {
                let (resource, caps) = resolve(&self.client, api_version, kind).await.unwrap();
                let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
                self.resources
                    .lock()
                    .unwrap()
                    .insert(key, (resource.clone(), namespaced));
                (resource, namespaced)
            }
        };
        match (namespace, namespaced) {
            (Some(ns), true) => Api::namespaced_with(self.client.clone(), ns, &resource),
            _ => Api::all_with(self.client.clone(), &resource),
        }
    }

    /// Creates or updates an object as a user would (server-side apply as `e2e-user`); a
    /// `status` is written through the status subresource.
    pub async fn put(&self, object: &Value) {
        let av = object["apiVersion"].as_str().unwrap();
        let kind = object["kind"].as_str().unwrap();
        let ns = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let name = object["metadata"]["name"].as_str().unwrap();
        let params = PatchParams::apply("e2e-user").force();
        if let Some(ns) = ns {
            let namespaces = self.api("v1", "Namespace", None).await;
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            namespaces
                .patch(ns, &params, &Patch::Apply(&body))
                .await
                .unwrap();
        }
        let api = self.api(av, kind, ns).await;
        let mut body = object.clone();
        let status = body.as_object_mut().unwrap().remove("status");
        api.patch(name, &params, &Patch::Apply(&body))
            .await
            .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
        if let Some(status) = status {
            let body = json!({"apiVersion": av, "kind": kind, "metadata": {"name": name, "namespace": ns}, "status": status});
            api.patch_status(name, &params, &Patch::Apply(&body))
                .await
                .unwrap_or_else(|e| panic!("status of {kind} {name}: {e}"));
        }
    }

    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let api = self.api(api_version, kind, namespace).await;
        api.get_opt(name)
            .await
            .unwrap()
            .map(|o| serde_json::to_value(o).unwrap())
    }

    pub async fn get_key(&self, key: &ObjectKey) -> Option<Value> {
        self.get(
            &key.api_version,
            &key.kind,
            key.namespace.as_deref(),
            &key.name,
        )
        .await
    }

    pub async fn delete(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) {
        let api = self.api(api_version, kind, namespace).await;
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("delete {kind} {name}: {e}"),
        }
    }

    pub async fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let api = self.api(api_version, kind, None).await;
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap())
            .collect()
    }
}

/// The kcp-karmada example inputs: (cluster role, object).
pub fn example_inputs() -> Vec<(String, Value)> {
    let path = repo().join("rules/kcp-karmada/examples/fleet-workloads.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    plan::parse_inputs(&text, "examples", "source").unwrap()
}

/// What `switchyard render` makes of these inputs with the pack as it is in `packs`.
pub fn render(packs: &Path, inputs: &[(String, Value)]) -> Plan {
    let pack_dir = packs.join("kcp-karmada");
    let (_, result) = switchyard_files::load_pack_dir(&pack_dir, None, &[]).unwrap();
    let pack = result.pack.expect("the pack loads");
    // Each object in its workspace, where the pack's roles have them, as the dry run does.
    let mut placed = inputs.to_vec();
    pack.place_all(&mut placed).unwrap();
    let mut world = MemoryWorld::new();
    for (cluster, object) in placed {
        world.insert(&cluster, object).unwrap();
    }
    plan::plan(&pack, &world, chrono::Utc::now())
}

/// The live object holds what `render` printed: every field, and an owners annotation
/// that names every rendered owner (an owner that left is not written away: the broker
/// rewrites the annotation only when a trigger joins, or with another change).
pub fn holds_rendered(desired: &Value, live: &Value) -> bool {
    let owners = |o: &Value| {
        o.pointer("/metadata/annotations/switchyard.dev~1owners")
            .and_then(Value::as_str)
            .map(|s| s.split(',').map(str::to_string).collect::<Vec<String>>())
    };
    let mut rest = desired.clone();
    let wanted = owners(desired);
    if let Some(a) = rest
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove("switchyard.dev/owners");
    }
    let covered = match (wanted, owners(live)) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(want), Some(have)) => {
            have.iter().any(|o| o == "+more") || want.iter().all(|o| have.contains(o))
        }
    };
    covered && is_subset(&rest, live)
}

/// Every object of the plan exists in its cluster with the rendered content.
pub async fn matches_plan(plan: &Plan, clusters: &BTreeMap<&str, Cluster>) -> Result<(), String> {
    for desired in &plan.objects {
        let cluster = &clusters[desired.key.cluster.as_str()];
        match cluster.get_key(&desired.key).await {
            None => return Err(format!("{} does not exist", desired.key)),
            Some(live) if !holds_rendered(&desired.object, &live) => {
                return Err(format!(
                    "{} differs from render: want {}, live {}",
                    desired.key, desired.object, live
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Waits until the FleetWorkload's `Synced` condition satisfies `ok`; returns the condition.
pub async fn wait_synced(
    source: &Cluster,
    what: &str,
    namespace: &str,
    name: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(what, Duration::from_secs(60), || async {
        let live = source
            .get(
                "platform.edge-portal.eu/v1alpha1",
                "FleetWorkload",
                Some(namespace),
                name,
            )
            .await
            .ok_or("gone")?;
        match condition(&live, "Synced") {
            Some(c) if ok(&c) => Ok(c),
            other => Err(format!("Synced is {other:?}")),
        }
    })
    .await
}

/// Waits until the trigger's condition `kind` has the status and reason `render` gave it
/// (`rendered` is the outcome's status).
pub async fn wait_condition_as_rendered(
    source: &Cluster,
    trigger: &ObjectKey,
    kind: &str,
    rendered: &Value,
) {
    let want = condition(&json!({"status": rendered}), kind)
        .unwrap_or_else(|| panic!("render gives {trigger} no {kind} condition"));
    wait_for(
        &format!("{kind} of {trigger}"),
        Duration::from_secs(60),
        || async {
            let live = source.get_key(trigger).await.ok_or("gone")?;
            let have = condition(&live, kind).ok_or(format!("no {kind} condition"))?;
            if have["status"] == want["status"] && have["reason"] == want["reason"] {
                Ok(())
            } else {
                Err(format!("{kind} is {have}, render says {want}"))
            }
        },
    )
    .await;
}

/// A condition of an object's status.
pub fn condition(object: &Value, kind: &str) -> Option<Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// The GlobalService CRD of the `mesh-fanout` test pack (tests/fixtures/packs).
pub fn global_service_crd() -> Value {
    open_crd("mesh.example.dev", "GlobalService", "globalservices")
}

/// A namespaced CRD of version `v1alpha1` whose spec and status keep any field, with a
/// status subresource.
pub fn open_crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(),
                      "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                }}
            }]
        }
    })
}

/// Waits for the `mesh-fanout` pack's ConfigMap in a member, saying it is in `member`.
pub async fn wait_export(cluster: &Cluster, member: &str) {
    wait_for(
        &format!("the ConfigMap in mesh/{member}"),
        Duration::from_secs(60),
        || async {
            let cm = cluster
                .get("v1", "ConfigMap", Some("kube-system"), "global-dns")
                .await
                .ok_or("missing")?;
            if cm["data"]["cluster"] == member {
                Ok(())
            } else {
                Err(format!("{}", cm["data"]))
            }
        },
    )
    .await;
}

/// Waits until the `mesh-fanout` pack's GlobalService `kube-system/dns` passes `check`.
pub async fn wait_global_service(
    home: &Cluster,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    wait_for(what, Duration::from_secs(60), || async {
        let gs = home
            .get(
                "mesh.example.dev/v1alpha1",
                "GlobalService",
                Some("kube-system"),
                "dns",
            )
            .await
            .ok_or("no GlobalService")?;
        if check(&gs) {
            Ok(gs)
        } else {
            Err(format!("{}", gs["status"]))
        }
    })
    .await
}

/// A `mesh` role whose members come from kubeconfig Secrets in `namespace`.
pub fn mesh_from_secrets(namespace: &str) -> switchyard_kube::config::MemberSource {
    switchyard_kube::config::MemberSource {
        role: "mesh".into(),
        secrets: Some(switchyard_kube::config::SecretsSource {
            namespace: namespace.into(),
            key: "kubeconfig".into(),
            cluster: None,
        }),
        objects: None,
        cluster_profiles: None,
        kcp: None,
    }
}

/// The `mesh-fanout` test pack copied to `to`.
pub fn copy_mesh_fanout(to: &std::path::Path) {
    let from = repo().join("tests/fixtures/packs/mesh-fanout");
    for sub in ["", "rules", "templates"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
}

/// A kubeconfig (text) for `cluster` that authenticates with a token of the ServiceAccount
/// `account` (made cluster-admin), with the CA embedded: what a kubeconfig Secret holds.
/// Deleting the account makes the token fail.
pub async fn token_kubeconfig(cluster: &switchyard_testenv::ApiServer, account: &str) -> String {
    let token = account_token(cluster, account).await;
    let name = cluster.name();
    serde_json::to_string_pretty(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": cluster.url(), "certificate-authority-data": ca_data(cluster)}}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": account}}],
        "current-context": name,
    }))
    .unwrap()
}

/// The API server's CA certificate, base64 (a kubeconfig's `certificate-authority-data`).
pub fn ca_data(cluster: &switchyard_testenv::ApiServer) -> String {
    use base64::Engine as _;
    let admin_config: Value =
        serde_json::from_str(&std::fs::read_to_string(cluster.kubeconfig_path()).unwrap()).unwrap();
    let ca_path = admin_config["clusters"][0]["cluster"]["certificate-authority"]
        .as_str()
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(ca_path).unwrap())
}

/// A token of the ServiceAccount `account` of `kube-system`, made cluster-admin.
pub async fn account_token(cluster: &switchyard_testenv::ApiServer, account: &str) -> String {
    let admin = Cluster::new(cluster.client().await.unwrap());
    admin
        .put(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": "kube-system"}}))
        .await;
    admin
        .put(&json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": account},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": "kube-system"}]}))
        .await;
    let (resource, _) = resolve(&admin.client, "v1", "ServiceAccount")
        .await
        .unwrap();
    let accounts: Api<DynamicObject> =
        Api::namespaced_with(admin.client.clone(), "kube-system", &resource);
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}});
    let answer: Value = accounts
        .create_subresource("token", account, &Default::default(), &request)
        .await
        .unwrap();
    answer["status"]["token"].as_str().unwrap().to_string()
}

/// A kubeconfig Secret of the role `role` in `namespace`, naming its member `member`.
pub fn kubeconfig_secret(
    namespace: &str,
    name: &str,
    role: &str,
    member: Option<&str>,
    kubeconfig: &str,
) -> Value {
    let mut secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"switchyard.dev/cluster-role": role}},
        "stringData": {"kubeconfig": kubeconfig}});
    if let Some(member) = member {
        secret["metadata"]["annotations"] = json!({"switchyard.dev/cluster-name": member});
    }
    secret
}

/// The resident set size of this process, in bytes (Linux).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
