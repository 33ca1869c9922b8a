//! The broker with exactly the RBAC `switchyard rbac` generates: a ServiceAccount token per
//! cluster, bound to the generated roles and nothing else, runs the kcp-karmada pack against
//! real API servers through apply, status, a Warning Event, delete and cleanup (FleetWorkloads,
//! and a KubernetesCluster through the management plane's Cluster CR and kubeconfig Secret to
//! Karmada's member Cluster and its Secret), and no request is refused (the broker logs every refusal; a refused Event at debug level). It runs with
//! leader election, so the Lease's rules are exercised too.
//!
//! With `SWITCHYARD_IMAGE` set (`switchyard:0.1.0`, from scripts/image.sh), the broker is the
//! image's entrypoint run by `SWITCHYARD_IMAGE_RUN` (default `podman run`; where the sandbox
//! refuses rlimits and cgroups, e.g. `podman --runtime runc run --ulimit nofile=1024:1024
//! --ulimit nproc=1024:1024`), read-only, as uid 65532, with no capabilities.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests panic on purpose

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use support::{root, stderr, stdout, switchyard};
use switchyard_testenv::{ApiServer, ControlPlane, read_crds};

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn apply_as_admin(client: &kube::Client, object: &Value) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (ar, caps) =
        kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .unwrap();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) if caps.scope == kube::discovery::Scope::Namespaced => {
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        _ => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        object["metadata"]["name"].as_str().unwrap(),
        &PatchParams::apply("e2e-admin"),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("{kind}: {e}"));
}

/// The broker's identity in one cluster: the ServiceAccount, the generated RBAC of the role
/// this cluster holds, and a kubeconfig with a token of that account.
async fn broker_identity(cluster: &ApiServer, role: &str, dir: &Path) -> PathBuf {
    let mut args = vec![
        "rbac",
        "--packs",
        "rules/kcp-karmada",
        "--crds",
        "config/crds",
        "--crds",
        "../shared/crds/karmada",
        "--role",
        role,
    ];
    args.extend(["--lease-namespace", "switchyard-system"]);
    let out = switchyard(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    identity_with(cluster, &stdout(&out), dir).await
}

/// A ServiceAccount `switchyard-system/switchyard` bound to exactly `rbac` (generated YAML),
/// and a kubeconfig with a token of it.
async fn identity_with(cluster: &ApiServer, rbac: &str, dir: &Path) -> PathBuf {
    let admin = cluster.client().await.unwrap();
    apply_as_admin(
        &admin,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "switchyard-system"}}),
    )
    .await;
    apply_as_admin(
        &admin,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "switchyard", "namespace": "switchyard-system"}}),
    )
    .await;
    for doc in switchyard_core::yaml::parse_documents(rbac).unwrap() {
        let doc = doc.to_json();
        if doc.is_object() {
            // Roles for namespaces the pack writes in (Karmada's `karmada-cluster`): the
            // namespace is there before its Role, as an installer would have made it.
            if let Some(ns) = doc["metadata"]["namespace"].as_str() {
                apply_as_admin(
                    &admin,
                    &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                )
                .await;
            }
            apply_as_admin(&admin, &doc).await;
        }
    }
    let accounts: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "switchyard-system",
        &resource("", "v1", "ServiceAccount", "serviceaccounts"),
    );
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}});
    let answer: Value = accounts
        .create_subresource("token", "switchyard", &PostParams::default(), &request)
        .await
        .unwrap();
    let token = answer["status"]["token"].as_str().unwrap().to_string();
    let admin_config: Value =
        serde_json::from_str(&std::fs::read_to_string(cluster.kubeconfig_path()).unwrap()).unwrap();
    let ca = admin_config["clusters"][0]["cluster"]["certificate-authority"].clone();
    let name = cluster.name();
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": cluster.url(), "certificate-authority": ca}}],
        "users": [{"name": "switchyard", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "switchyard"}}],
        "current-context": name,
    });
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    path
}

/// The broker's log lines that tell of a refused request: kube's errors for a 403 say
/// "forbidden" (watches, applies, status, finalizers; Events at debug level).
fn refusals(logs: &str) -> Vec<&str> {
    // The API server's refusal always says "forbidden" (`... is forbidden: User ... cannot
    // ...`); a bare 403 would also match timestamps and names.
    logs.lines()
        .filter(|l| l.to_ascii_lowercase().contains("forbidden"))
        .collect()
}

/// The broker process: the binary, or the image's entrypoint in a container.
struct Broker {
    child: Child,
    container: Option<String>,
    log: tempfile::NamedTempFile,
}

/// The repository's pack layout (`rules/kcp-karmada`, `templates`, `config`) copied into a
/// folder, with the source role declared one cluster rather than kcp workspaces: the test's
/// source is a plain API server holding one tenant's objects.
fn plain_source_layout() -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for sub in ["rules/kcp-karmada", "templates", "config"] {
        copy(&root().join(sub), &dir.path().join(sub));
    }
    let manifest = dir.path().join("rules/kcp-karmada/pack.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let plain = text.replace("      workspaces: kcp\n", "");
    assert_ne!(text, plain, "the shipped pack declares workspaces");
    std::fs::write(&manifest, plain).unwrap();
    dir
}

impl Broker {
    fn start(
        layout: &Path,
        [source, karmada, management]: [&Path; 3],
        plane_dir: &Path,
        port: u16,
    ) -> Broker {
        let log = tempfile::NamedTempFile::new().unwrap();
        let broker_args = |packs: &str| -> Vec<String> {
            vec![
                "run".into(),
                "--packs".into(),
                packs.into(),
                "--cluster".into(),
                format!("source={}", source.display()),
                "--cluster".into(),
                format!("karmada={}", karmada.display()),
                "--cluster".into(),
                format!("management={}", management.display()),
                // The Lease too is held under the generated RBAC.
                "--leader-elect".into(),
                "--leader-elect-cluster".into(),
                "source".into(),
                "--leader-elect-namespace".into(),
                "switchyard-system".into(),
                "--health-addr".into(),
                format!("127.0.0.1:{port}"),
                "--metrics-addr".into(),
                format!("127.0.0.1:{port}"),
            ]
        };
        let (mut command, container) = match std::env::var("SWITCHYARD_IMAGE") {
            Ok(image) => {
                let run = std::env::var("SWITCHYARD_IMAGE_RUN")
                    .unwrap_or_else(|_| "podman run".to_string());
                let mut words = run.split_whitespace();
                let mut command = Command::new(words.next().unwrap());
                command.args(words);
                let name = format!("switchyard-rbac-e2e-{port}");
                let repo = layout.canonicalize().unwrap();
                let mount = |from: &Path, to: &str| format!("{}:{to}:ro", from.display());
                command
                    .args(["--rm", "--name", &name, "--network", "host", "--read-only"])
                    .args(["--user", "65532:65532", "--cap-drop", "ALL"])
                    .args(["--security-opt", "no-new-privileges"])
                    .args(["-e", &format!("SWITCHYARD_LOG={LOG_FILTER}")])
                    .args(["-v", &mount(&repo.join("rules"), "/w/rules")])
                    .args(["-v", &mount(&repo.join("templates"), "/w/templates")])
                    .args(["-v", &mount(&repo.join("config"), "/w/config")])
                    .args(["-v", &mount(plane_dir, &plane_dir.display().to_string())])
                    .arg(image)
                    .args(broker_args("/w/rules/kcp-karmada"));
                (command, Some(name))
            }
            Err(_) => {
                let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
                command
                    .current_dir(layout)
                    .args(broker_args("rules/kcp-karmada"));
                (command, None)
            }
        };
        let child = command
            .env("SWITCHYARD_LOG", LOG_FILTER)
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        Broker {
            child,
            container,
            log,
        }
    }

    fn logs(&self) -> String {
        let mut logs = String::new();
        self.log
            .reopen()
            .unwrap()
            .read_to_string(&mut logs)
            .unwrap();
        logs
    }

    async fn stop(&mut self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let stopped = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert_eq!(status.code(), Some(0), "logs:\n{}", self.logs());
                return;
            }
            assert!(
                stopped.elapsed() < Duration::from_secs(40),
                "still running after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(name) = &self.container {
            let _ = Command::new("podman").args(["rm", "-f", name]).output();
        }
    }
}

/// Debug for the broker: a refused Event is logged only there.
const LOG_FILTER: &str = "info,switchyard_kube=debug";

async fn eventually<F, Fut>(what: &str, broker: &Broker, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let last = check().await;
        if last.is_ok() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {last:?}\nbroker logs:\n{}",
            broker.logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_needs_nothing_beyond_the_generated_rbac() {
    let layout = plain_source_layout();
    let plane = ControlPlane::start(&["source", "karmada", "mgmt"])
        .await
        .unwrap();
    let source = plane.cluster("source").unwrap();
    let karmada = plane.cluster("karmada").unwrap();
    let mgmt = plane.cluster("mgmt").unwrap();
    let crds_of = |group: &str| -> Vec<Value> {
        read_crds(&root().join("config/crds"))
            .unwrap()
            .into_iter()
            .filter(|c| c["spec"]["group"] == group)
            .collect()
    };
    source
        .install_crds(&crds_of("platform.edge-portal.eu"))
        .await
        .unwrap();
    mgmt.install_crds(&crds_of("cluster.edge-connect.eu"))
        .await
        .unwrap();
    let shared = root().join("../shared/crds/karmada");
    let mut karmada_crds = Vec::new();
    for file in [
        "policy.karmada.io_propagationpolicies.yaml",
        "work.karmada.io_resourcebindings.yaml",
    ] {
        let text = std::fs::read_to_string(shared.join(file)).unwrap();
        karmada_crds.extend(
            switchyard_core::yaml::parse_documents(&text)
                .unwrap()
                .iter()
                .map(|d| d.to_json()),
        );
    }
    karmada_crds.extend(crds_of("cluster.karmada.io"));
    karmada.install_crds(&karmada_crds).await.unwrap();

    let dir = plane.dir().join("broker-identity");
    std::fs::create_dir_all(&dir).unwrap();
    let source_config = broker_identity(source, "source", &dir).await;
    let karmada_config = broker_identity(karmada, "karmada", &dir).await;
    let management_config = broker_identity(mgmt, "management", &dir).await;

    let admin = source.client().await.unwrap();
    let annotations = json!({"kcp.io/cluster": "ws1"});
    apply_as_admin(
        &admin,
        &json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "Fleet",
        "metadata": {"name": "f", "namespace": "default", "annotations": annotations},
        "spec": {"clusterRefs": [{"name": "a"}]}}),
    )
    .await;
    apply_as_admin(
        &admin,
        &json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "FleetWorkload",
        "metadata": {"name": "web", "namespace": "default", "annotations": annotations},
        "spec": {"fleetRef": {"name": "f"}, "service": {"ports": [{"port": 80}]},
                 "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
    .await;
    // No workspace annotation: Synced=False, and a Warning Event.
    apply_as_admin(&admin, &json!({
        "apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "FleetWorkload",
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"fleetRef": {"name": "f"}, "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})).await;

    let port = support::free_port();
    let mut broker = Broker::start(
        layout.path(),
        [&source_config, &karmada_config, &management_config],
        plane.dir(),
        port,
    );

    let workloads: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "default",
        &resource(
            "platform.edge-portal.eu",
            "v1alpha1",
            "FleetWorkload",
            "fleetworkloads",
        ),
    );
    let karmada_admin = karmada.client().await.unwrap();
    let deployments: Api<DynamicObject> = Api::all_with(
        karmada_admin.clone(),
        &resource("apps", "v1", "Deployment", "deployments"),
    );
    let policies: Api<DynamicObject> = Api::all_with(
        karmada_admin.clone(),
        &resource(
            "policy.karmada.io",
            "v1alpha1",
            "PropagationPolicy",
            "propagationpolicies",
        ),
    );
    let events: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "default",
        &resource("events.k8s.io", "v1", "Event", "events"),
    );
    let reason = |w: &DynamicObject| {
        w.data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Synced"))
            .map(|c| {
                format!(
                    "{}/{}",
                    c["status"].as_str().unwrap_or(""),
                    c["reason"].as_str().unwrap_or("")
                )
            })
    };
    eventually("converged", &broker, || async {
        let web = workloads.get("web").await.map_err(|e| e.to_string())?;
        let bad = workloads.get("bad").await.map_err(|e| e.to_string())?;
        let deployed = deployments
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let warned = events
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let warned = warned
            .items
            .iter()
            .any(|e| e.data["regarding"]["name"] == "bad" && e.data["type"] == "Warning");
        let state = (reason(&web), reason(&bad), deployed.items.len(), warned);
        if state.0.as_deref() == Some("True/Synced")
            && state.1.as_deref().is_some_and(|r| r.starts_with("False/"))
            && state.2 == 1
            && state.3
        {
            Ok(())
        } else {
            Err(format!("{state:?}"))
        }
    })
    .await;
    // A KubernetesCluster: the Cluster CR on the management plane; cluster-operator (the
    // admin here) makes it Ready with a kubeconfig Secret; the broker reads the Secret and
    // writes Karmada's member Cluster and its credentials.
    apply_as_admin(
        &admin,
        &json!({"apiVersion": "platform.edge-portal.eu/v1alpha1", "kind": "KubernetesCluster",
            "metadata": {"name": "edge-1", "namespace": "default", "annotations": annotations},
            "spec": {"provider": "KIND"}}),
    )
    .await;
    let mgmt_admin = mgmt.client().await.unwrap();
    let cluster_crs: Api<DynamicObject> = Api::namespaced_with(
        mgmt_admin.clone(),
        "default",
        &resource("cluster.edge-connect.eu", "v1alpha1", "Cluster", "clusters"),
    );
    eventually("the management-plane Cluster CR", &broker, || async {
        cluster_crs
            .get("edge-1")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    let kubeconfig = "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    insecure-skip-tls-verify: true\n    server: https://edge-1.example:6443\n  name: edge-1\nusers:\n- name: admin\n  user:\n    token: member-token\n";
    apply_as_admin(
        &mgmt_admin,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "edge-1-kubeconfig", "namespace": "default"},
            "stringData": {"kubeconfig": kubeconfig}}),
    )
    .await;
    cluster_crs
        .patch_status(
            "edge-1",
            &PatchParams::apply("e2e-admin"),
            &Patch::Apply(json!({"apiVersion": "cluster.edge-connect.eu/v1alpha1",
                "kind": "Cluster", "metadata": {"name": "edge-1", "namespace": "default"},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                    "reason": "Provisioned", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                  "kubeconfigSecretRef": {"name": "edge-1-kubeconfig"}}})),
        )
        .await
        .unwrap();
    apply_as_admin(
        &karmada_admin,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karmada-cluster"}}),
    )
    .await;
    let members: Api<DynamicObject> = Api::all_with(
        karmada_admin.clone(),
        &resource("cluster.karmada.io", "v1alpha1", "Cluster", "clusters"),
    );
    let member_secrets: Api<DynamicObject> = Api::namespaced_with(
        karmada_admin.clone(),
        "karmada-cluster",
        &resource("", "v1", "Secret", "secrets"),
    );
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        "default",
        &resource(
            "platform.edge-portal.eu",
            "v1alpha1",
            "KubernetesCluster",
            "kubernetesclusters",
        ),
    );
    eventually("joined to Karmada", &broker, || async {
        let member = members.get("edge-1").await.map_err(|e| e.to_string())?;
        member_secrets
            .get("edge-1")
            .await
            .map_err(|e| e.to_string())?;
        let phase = clusters
            .get("edge-1")
            .await
            .map_err(|e| e.to_string())?
            .data
            .pointer("/status/phase")
            .cloned();
        if member.data["spec"]["apiEndpoint"] == "https://edge-1.example:6443"
            && phase == Some(json!("Joining"))
        {
            Ok(())
        } else {
            Err(format!("phase {phase:?}, member {:?}", member.data["spec"]))
        }
    })
    .await;

    let web = workloads.get("web").await.unwrap();
    assert!(
        web.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"switchyard.dev/kcp-karmada".to_string())
    );

    // Delete: the outputs go, then the finalizer. No namespace controller runs here, so the
    // test finalizes the deleted Namespace as that controller would.
    workloads
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    clusters
        .delete("edge-1", &DeleteParams::default())
        .await
        .unwrap();
    let namespaces: Api<DynamicObject> = Api::all_with(
        karmada_admin.clone(),
        &resource("", "v1", "Namespace", "namespaces"),
    );
    eventually("cleaned up", &broker, || async {
        for ns in namespaces
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?
            .items
        {
            if ns.metadata.deletion_timestamp.is_some() {
                let name = ns.metadata.name.clone().unwrap_or_default();
                let mut body = serde_json::to_value(&ns).map_err(|e| e.to_string())?;
                body["spec"]["finalizers"] = json!([]);
                let _ = namespaces
                    .replace_subresource("finalize", &name, &PostParams::default(), &body)
                    .await;
            }
        }
        let absent = |r: Result<DynamicObject, kube::Error>| {
            matches!(r, Err(kube::Error::Api(s)) if s.code == 404)
        };
        let gone = absent(workloads.get("web").await)
            && absent(clusters.get("edge-1").await)
            && absent(members.get("edge-1").await)
            && absent(member_secrets.get("edge-1").await)
            && absent(cluster_crs.get("edge-1").await);
        let left = deployments
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len()
            + policies
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
        if gone && left == 0 {
            Ok(())
        } else {
            Err(format!("trigger gone: {gone}, outputs left: {left}"))
        }
    })
    .await;
    broker.stop().await;

    let logs = broker.logs();
    let refused = refusals(&logs);
    assert!(
        refused.is_empty(),
        "refused requests:\n{}",
        refused.join("\n")
    );
    // The debug lines are there: a refused Event would have been seen.
    assert!(logs.contains("DEBUG"), "{logs}");

    // The token is bound to the generated roles only: anything else is refused.
    let limited = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&source_config).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let secrets: Api<DynamicObject> =
        Api::all_with(limited, &resource("", "v1", "Secret", "secrets"));
    match secrets.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403),
        other => panic!("listing Secrets with the broker's token: {other:?}"),
    }
}

/// A namespaced CRD of `group` whose spec and status keep any field.
fn open_crd(group: &str, kind: &str, plural: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// The RBAC `switchyard rbac --config` generates for the member sources' own kinds (an
/// `objects` source's Cluster kind, ClusterProfiles whose credentials are Secrets they name,
/// a kcp source's APIExportEndpointSlice), applied to a real API server: the broker's
/// account lists and watches each as its source does (the slice by a field selector on its
/// name), and nothing wider (another namespace, another slice, every slice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_sources_read_their_kinds_with_the_generated_rbac() {
    if switchyard_testenv::external_kubeconfig().is_some() {
        return;
    }
    let plane = ControlPlane::start(&["home"]).await.unwrap();
    let home = plane.cluster("home").unwrap();
    let cluster_crd = open_crd("fleet.example.dev", "Cluster", "clusters");
    let profile_crd = open_crd("multicluster.x-k8s.io", "ClusterProfile", "clusterprofiles");
    home.install_crds(&[
        cluster_crd.clone(),
        profile_crd,
        switchyard_testenv::endpoint_slice_crd(),
    ])
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let crds = dir.path().join("crds");
    std::fs::create_dir_all(&crds).unwrap();
    std::fs::write(crds.join("clusters.yaml"), cluster_crd.to_string()).unwrap();
    let config = dir.path().join("broker.yaml");
    std::fs::write(
        &config,
        "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  clusters:\n    - {role: source, inCluster: true}\n  members:\n    - role: mesh\n      objects: {apiVersion: fleet.example.dev/v1alpha1, kind: Cluster, namespace: fleet, secretRef: self.status.secretRef}\n    - role: edge\n      clusterProfiles:\n        namespace: inventory\n        providers: [{name: kubeconfig-secretreader, kubeconfigSecret: true}]\n    - role: tenants\n      kcp: {endpointSlice: mesh-export}\n",
    )
    .unwrap();
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/resource-broker",
        "--crds",
        "config/crds",
        "--crds",
        &crds.to_string_lossy(),
        "--config",
        &config.to_string_lossy(),
        "--lease-namespace",
        "switchyard-system",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rbac = stdout(&out);
    assert!(
        rbac.contains(
            "  - apiGroups: [apis.kcp.io]\n    resources: [apiexportendpointslices]\n    resourceNames: [mesh-export]\n    verbs: [get, list, watch]\n"
        ),
        "{rbac}"
    );
    let kubeconfig = identity_with(home, &rbac, dir.path()).await;
    let broker = switchyard_testenv::client_from_kubeconfig(&kubeconfig)
        .await
        .unwrap();

    let reads = async |api: Api<DynamicObject>, params: kube::api::ListParams| {
        let listed = api.list(&params).await.map(|_| ());
        let watch = kube::api::WatchParams {
            field_selector: params.field_selector.clone(),
            timeout: Some(1),
            ..Default::default()
        };
        let watched = api.watch(&watch, "0").await.map(|_| ());
        listed.and(watched).map_err(|e| e.to_string())
    };
    let clusters = resource("fleet.example.dev", "v1alpha1", "Cluster", "clusters");
    let profiles = resource(
        "multicluster.x-k8s.io",
        "v1alpha1",
        "ClusterProfile",
        "clusterprofiles",
    );
    let secrets = resource("", "v1", "Secret", "secrets");
    let slices = resource(
        "apis.kcp.io",
        "v1alpha1",
        "APIExportEndpointSlice",
        "apiexportendpointslices",
    );
    let all = kube::api::ListParams::default();
    let by_name =
        |name: &str| kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
    for (what, api, params) in [
        (
            "Clusters in fleet",
            Api::namespaced_with(broker.clone(), "fleet", &clusters),
            all.clone(),
        ),
        (
            "Secrets in fleet",
            Api::namespaced_with(broker.clone(), "fleet", &secrets),
            all.clone(),
        ),
        (
            "ClusterProfiles in inventory",
            Api::namespaced_with(broker.clone(), "inventory", &profiles),
            all.clone(),
        ),
        (
            "Secrets in inventory",
            Api::namespaced_with(broker.clone(), "inventory", &secrets),
            all.clone(),
        ),
        (
            "the slice by name",
            Api::all_with(broker.clone(), &slices),
            by_name("mesh-export"),
        ),
    ] {
        reads(api, params)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    for (what, api, params) in [
        (
            "Clusters elsewhere",
            Api::namespaced_with(broker.clone(), "default", &clusters),
            all.clone(),
        ),
        (
            "another slice",
            Api::all_with(broker.clone(), &slices),
            by_name("other"),
        ),
        (
            "every slice",
            Api::all_with(broker.clone(), &slices),
            all.clone(),
        ),
    ] {
        let e = reads(api, params).await.expect_err(what);
        assert!(e.contains("forbidden"), "{what}: {e}");
    }
}
