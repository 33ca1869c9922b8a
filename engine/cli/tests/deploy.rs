//! The Helm chart (deploy/helm/switchyard) and the kustomize base (deploy/kustomize): `helm
//! lint`, `helm template` and `kustomize build` of the shipped packs' set-ups, their RBAC
//! equal to what `switchyard rbac` computes, and every rendered object applied with
//! server-side dry-run (strict field validation) to a real API server, the pod template also
//! as a Pod in a namespace that enforces the restricted Pod Security Standard.
//!
//! helm and kustomize are built from their Go modules once per machine by
//! `scripts/deploy-tools.sh` (or taken from the folder `SWITCHYARD_DEPLOY_TOOLS` names).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests panic on purpose

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kube::api::{Api, DynamicObject, Patch, PatchParams, ValidationDirective};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::{Value, json};
use support::{root, stderr, stdout, switchyard};
use switchyard_testenv::ControlPlane;

/// The folder holding helm and kustomize, built once per machine.
fn tools() -> &'static Path {
    static TOOLS: OnceLock<PathBuf> = OnceLock::new();
    TOOLS.get_or_init(|| {
        if let Some(dir) = std::env::var_os("SWITCHYARD_DEPLOY_TOOLS") {
            return PathBuf::from(dir);
        }
        let out = Command::new(root().join("scripts/deploy-tools.sh"))
            .output()
            .expect("scripts/deploy-tools.sh runs");
        assert!(
            out.status.success(),
            "scripts/deploy-tools.sh failed (it builds helm and kustomize with Go):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(
            text.lines()
                .last()
                .expect("the script prints the folder")
                .trim(),
        )
    })
}

fn run(program: &str, args: &[&str]) -> std::process::Output {
    Command::new(tools().join(program))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"))
}

fn ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {}:\n{}{}",
        args.join(" "),
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

fn documents(text: &str) -> Vec<Value> {
    switchyard_core::yaml::parse_documents(text)
        .unwrap()
        .iter()
        .map(|d| d.to_json())
        .filter(|d| d.is_object())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The packs-to-yaml.sh values of a pack, written to a file in `dir`.
fn pack_values(dir: &Path, pack: &str, crds: bool) -> PathBuf {
    let mut args = vec!["helm-values", "--partials", "templates"];
    if crds {
        args.extend(["--crds", "config/crds"]);
    }
    let pack_dir = format!("rules/{pack}");
    args.push(&pack_dir);
    let out = Command::new(root().join("deploy/packs-to-yaml.sh"))
        .args(&args)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.join(format!("{pack}-packs.yaml"));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// The generated rules of a role as Kubernetes PolicyRules.
fn generated_rules(rbac: &Value, role: &str) -> Value {
    let role = rbac["roles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == role)
        .unwrap();
    strip_why(&role["clusterRules"])
}

fn strip_why(rules: &Value) -> Value {
    Value::Array(
        rules
            .as_array()
            .unwrap()
            .iter()
            .map(|r| json!({"apiGroups": r["apiGroups"], "resources": r["resources"], "verbs": r["verbs"]}))
            .collect(),
    )
}

const CHART: &str = "deploy/helm/switchyard";

/// The kcp-karmada set-up: the broker on the Karmada host (`karmada` in-cluster), kcp
/// through a kubeconfig Secret, every optional object on.
const KCP_KARMADA_VALUES: &str = r#"
clusters:
  - role: karmada
    inCluster: true
  - role: source
    kubeconfigSecret:
      name: kcp-kubeconfig
    context: root:platform
rbac:
  packs: [kcp-karmada]
serviceMonitor:
  enabled: true
networkPolicy:
  enabled: true
  metricsFrom:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: monitoring
"#;

/// The resource-broker set-up: the compute role in-cluster (a scope with a fixed namespace:
/// Roles in `default`), the others through Secrets, RBAC given as `switchyard rbac -o json`.
const RESOURCE_BROKER_VALUES: &str = r#"
clusters:
  - role: compute
    inCluster: true
  - role: coordination
    kubeconfigSecret: {name: coordination, key: config}
  - role: consumer
    name: tenant-a
    kubeconfigSecret: {name: tenant-a}
  - role: provider
    name: x86
    kubeconfigSecret: {name: x86}
leaderElection:
  leaseName: brokers
  namespace: leases
"#;

struct Rendered {
    kcp_karmada: Vec<Value>,
    resource_broker: Vec<Value>,
    kustomize: Vec<Value>,
}

/// Renders the chart and the kustomize example, checking what needs no API server.
fn render(dir: &Path) -> Rendered {
    // kcp-karmada, with the chart's own copy of the pack's generated RBAC.
    let packs = pack_values(dir, "kcp-karmada", true);
    let values = write(dir, "kcp-karmada.yaml", KCP_KARMADA_VALUES);
    let packs = packs.to_string_lossy().into_owned();
    ok(
        "helm",
        &["lint", "--strict", CHART, "-f", &packs, "-f", &values],
    );
    let text = ok(
        "helm",
        &[
            "template",
            "sy",
            CHART,
            "-n",
            "switchyard-system",
            "-f",
            &packs,
            "-f",
            &values,
        ],
    );
    let kcp_karmada = documents(&text);

    let deployment = find(&kcp_karmada, "Deployment", "sy-switchyard");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for expected in [
        "--leader-elect",
        "--leader-elect-lease-name=sy-switchyard",
        "--leader-elect-namespace=switchyard-system",
        "--health-addr=0.0.0.0:8081",
        "--metrics-addr=0.0.0.0:8080",
    ] {
        assert!(args.contains(&expected), "{expected} in {args:?}");
    }
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["runAsUser"], 65532);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    // The pack's files come back at their paths; the config names the mounted folders.
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "pack-kcp-karmada")
        .unwrap();
    assert!(volume["configMap"]["items"].as_array().unwrap().contains(
        &json!({"key": "rules_fleet-workload.yaml", "path": "rules/fleet-workload.yaml"})
    ));
    let pack_cm = find(&kcp_karmada, "ConfigMap", "sy-switchyard-pack-kcp-karmada");
    assert_eq!(
        pack_cm["data"]["rules_fleet-workload.yaml"]
            .as_str()
            .unwrap(),
        std::fs::read_to_string(root().join("rules/kcp-karmada/rules/fleet-workload.yaml"))
            .unwrap()
    );
    let config = find(&kcp_karmada, "ConfigMap", "sy-switchyard-config");
    let config = documents(config["data"]["broker.yaml"].as_str().unwrap()).remove(0);
    assert_eq!(config["kind"], "BrokerConfig");
    assert_eq!(
        config["spec"]["clusters"],
        json!([
            {"role": "karmada", "inCluster": true},
            {"role": "source", "kubeconfig": "/etc/switchyard/kubeconfigs/source/kubeconfig", "context": "root:platform"}
        ])
    );
    assert_eq!(config["spec"]["partials"], "/etc/switchyard/partials");
    assert_eq!(config["spec"]["crds"], json!(["/etc/switchyard/crds"]));
    // The RBAC of the in-cluster role is the generated one; the remote role's is not here.
    let generated: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join(format!("{CHART}/rbac/kcp-karmada.json"))).unwrap(),
    )
    .unwrap();
    let role = find(
        &kcp_karmada,
        "ClusterRole",
        "sy-switchyard-kcp-karmada-karmada",
    );
    assert_eq!(role["rules"], generated_rules(&generated, "karmada"));
    assert!(!kcp_karmada.iter().any(|d| {
        d["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-source"))
    }));
    let lease = find(&kcp_karmada, "Role", "sy-switchyard-leader-election");
    assert_eq!(
        lease["rules"],
        strip_why(&generated["leaderElection"]["rules"])
    );
    find(&kcp_karmada, "ServiceMonitor", "sy-switchyard");
    find(&kcp_karmada, "NetworkPolicy", "sy-switchyard");
    find(&kcp_karmada, "PodDisruptionBudget", "sy-switchyard");
    find(&kcp_karmada, "Service", "sy-switchyard");

    // resource-broker, with RBAC given as `switchyard rbac -o json`.
    let packs = pack_values(dir, "resource-broker", false);
    let packs = packs.to_string_lossy().into_owned();
    let values = write(dir, "resource-broker.yaml", RESOURCE_BROKER_VALUES);
    let out = switchyard(&["rbac", "--packs", "rules/resource-broker", "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rbac_json = write(dir, "resource-broker-rbac.json", &stdout(&out));
    let set_file = format!("rbac.generated={rbac_json}");
    let text = ok(
        "helm",
        &[
            "template",
            "rb",
            CHART,
            "-n",
            "brokers",
            "-f",
            &packs,
            "-f",
            &values,
            "--set-file",
            &set_file,
        ],
    );
    let resource_broker = documents(&text);
    let generated: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let role = find(
        &resource_broker,
        "ClusterRole",
        "rb-switchyard-resource-broker-compute",
    );
    assert_eq!(role["rules"], generated_rules(&generated, "compute"));
    let in_default = resource_broker
        .iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == "default")
        .expect("the compute role's writes in `default`");
    assert_eq!(
        in_default["rules"],
        strip_why(&generated["roles"][0]["namespaceRules"]["default"])
    );
    let lease = find(&resource_broker, "Role", "rb-switchyard-leader-election");
    assert_eq!(lease["metadata"]["namespace"], "leases");
    let config = find(&resource_broker, "ConfigMap", "rb-switchyard-config");
    let config = documents(config["data"]["broker.yaml"].as_str().unwrap()).remove(0);
    assert_eq!(
        config["spec"]["clusters"][1],
        json!({"role": "coordination", "kubeconfig": "/etc/switchyard/kubeconfigs/coordination/config"})
    );
    assert_eq!(
        config["spec"]["clusters"][2],
        json!({"role": "consumer", "name": "tenant-a", "kubeconfig": "/etc/switchyard/kubeconfigs/consumer-tenant-a/kubeconfig"})
    );

    // Packs from a volume another container fills (git-sync), instead of ConfigMaps.
    let values = write(
        dir,
        "packs-volume.yaml",
        r#"
clusters: [{role: karmada, inCluster: true}]
packsVolume:
  volume: {emptyDir: {}}
  subPath: repo/rules
extraContainers:
  - name: git-sync
    image: git-sync:v4
    volumeMounts: [{name: packs, mountPath: /git}]
"#,
    );
    ok("helm", &["lint", "--strict", CHART, "-f", &values]);
    let docs = documents(&ok("helm", &["template", "pv", CHART, "-f", &values]));
    let config = find(&docs, "ConfigMap", "pv-switchyard-config");
    let config = documents(config["data"]["broker.yaml"].as_str().unwrap()).remove(0);
    assert_eq!(
        config["spec"]["packs"],
        "/etc/switchyard/packs-volume/repo/rules"
    );
    let pod = &find(&docs, "Deployment", "pv-switchyard")["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][1]["name"], "git-sync");

    // What the chart refuses.
    let two_writers = run(
        "helm",
        &[
            "template",
            "x",
            CHART,
            "-f",
            &packs,
            "--set",
            "leaderElection.enabled=false",
        ],
    );
    assert!(!two_writers.status.success());
    assert!(
        stderr(&two_writers).contains("leaderElection"),
        "{}",
        stderr(&two_writers)
    );
    let writable_root = run(
        "helm",
        &[
            "template",
            "x",
            CHART,
            "-f",
            &packs,
            "--set",
            "securityContext.readOnlyRootFilesystem=false",
        ],
    );
    assert!(!writable_root.status.success());
    assert!(
        stderr(&writable_root).contains("readOnlyRootFilesystem"),
        "{}",
        stderr(&writable_root)
    );
    let no_packs = run("helm", &["template", "x", CHART]);
    assert!(!no_packs.status.success());
    assert!(
        stderr(&no_packs).contains("no packs"),
        "{}",
        stderr(&no_packs)
    );

    // kustomize: the example overlay with its generated files, in a copy of deploy/kustomize.
    let copy = dir.join("kustomize");
    copy_dir(&root().join("deploy/kustomize"), &copy);
    let overlay = copy.join("examples/kcp-karmada");
    let out = Command::new(root().join("deploy/packs-to-yaml.sh"))
        .args([
            "kustomize",
            &overlay.to_string_lossy(),
            "--partials",
            "templates",
        ])
        .arg("rules/kcp-karmada")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/kcp-karmada",
        "--role",
        "karmada",
        "--crds",
        "config/crds",
        "--crds",
        "../shared/crds/karmada",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(overlay.join("rbac.yaml"), stdout(&out)).unwrap();
    let text = ok("kustomize", &["build", &overlay.to_string_lossy()]);
    let kustomize = documents(&text);
    let deployment = find(&kustomize, "Deployment", "switchyard");
    let pod = &deployment["spec"]["template"]["spec"];
    let mounts: Vec<&str> = pod["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap())
        .collect();
    for path in [
        "/etc/switchyard/config",
        "/etc/switchyard/packs/kcp-karmada",
        "/etc/switchyard/partials",
        "/etc/switchyard/kubeconfigs/source",
    ] {
        assert!(mounts.contains(&path), "{path} in {mounts:?}");
    }
    // The config volume follows the generated ConfigMap's hashed name.
    let config_name = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "config")
        .unwrap()["configMap"]["name"]
        .as_str()
        .unwrap();
    assert!(
        config_name.starts_with("switchyard-config-"),
        "{config_name}"
    );
    find(&kustomize, "ConfigMap", config_name);
    find(&kustomize, "ClusterRole", "switchyard-kcp-karmada-karmada");
    find(&kustomize, "Role", "switchyard-kcp-karmada-leader-election");
    Rendered {
        kcp_karmada,
        resource_broker,
        kustomize,
    }
}

fn copy_dir(from: &Path, to: &Path) {
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

/// The ServiceMonitor kind, for the dry-run: only its names (Prometheus Operator's CRD
/// defines the fields).
fn service_monitor_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList",
                      "plural": "servicemonitors", "singular": "servicemonitor"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]
        }
    })
}

async fn apply(client: &kube::Client, object: &Value, dry_run: bool) -> Result<(), String> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let name = object["metadata"]["name"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (resource, capabilities) =
        kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .map_err(|e| format!("{api_version} {kind}: {e}"))?;
    let api: Api<DynamicObject> =
        match (capabilities.scope, object["metadata"]["namespace"].as_str()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (Scope::Namespaced, None) => return Err(format!("{kind} {name} has no namespace")),
            _ => Api::all_with(client.clone(), &resource),
        };
    let mut params = PatchParams::apply("switchyard-deploy-test");
    params.field_validation = Some(ValidationDirective::Strict);
    if dry_run {
        params = params.dry_run();
    }
    api.patch(name, &params, &Patch::Apply(object))
        .await
        .map(|_| ())
        .map_err(|e| format!("{kind} {name}: {e}"))
}

async fn ensure_namespace(client: &kube::Client, name: &str, restricted: bool) {
    let mut labels = serde_json::Map::new();
    if restricted {
        labels.insert(
            "pod-security.kubernetes.io/enforce".into(),
            "restricted".into(),
        );
    }
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}});
    apply(client, &namespace, false).await.unwrap();
}

/// Every object with server-side dry-run; then the Deployment's pod template as a Pod in a
/// namespace enforcing the restricted Pod Security Standard.
async fn dry_run(client: &kube::Client, docs: &[Value], label: &str) {
    let mut namespaces: Vec<&str> = docs
        .iter()
        .filter_map(|d| d["metadata"]["namespace"].as_str())
        .collect();
    namespaces.sort();
    namespaces.dedup();
    for ns in namespaces {
        ensure_namespace(client, ns, true).await;
    }
    let mut failures = Vec::new();
    for doc in docs {
        if let Err(e) = apply(client, doc, true).await {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{label}: refused:\n{}",
        failures.join("\n")
    );
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    // The Pod's ServiceAccount must exist for admission.
    let account = deployment["spec"]["template"]["spec"]["serviceAccountName"].clone();
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": namespace}}),
        false,
    )
    .await
    .unwrap();
    let template = &deployment["spec"]["template"];
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restricted-check", "namespace": namespace,
                     "labels": template["metadata"]["labels"]},
        "spec": template["spec"],
    });
    apply(client, &pod, true)
        .await
        .unwrap_or_else(|e| panic!("{label}: the pod template under restricted Pod Security: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_and_kustomize_render_and_pass_server_side_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    // Rendering first: it needs no API server, and its failures read more plainly.
    let rendered = tokio::task::block_in_place(|| render(dir.path()));

    let plane = ControlPlane::start(&["host"]).await.unwrap();
    let host = plane.cluster("host").unwrap();
    host.install_crds(&[service_monitor_crd()]).await.unwrap();
    let client = host.client().await.unwrap();
    dry_run(&client, &rendered.kcp_karmada, "helm, kcp-karmada").await;
    dry_run(&client, &rendered.resource_broker, "helm, resource-broker").await;
    dry_run(&client, &rendered.kustomize, "kustomize, kcp-karmada").await;
}

/// The chart's `members`: written into the broker's configuration as given (which the broker
/// reads back as its member sources), with a Role per source for what it reads in the
/// broker's cluster (Secrets, ClusterProfiles, the kcp slice by name) and, from
/// `rbac.generated` (`switchyard rbac --config`), the `objects` source's own kind; every
/// object passes a real API server's server-side dry-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_members_configure_the_sources_and_grant_what_they_read() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let members = r#"
members:
  - role: mesh
    secrets: {namespace: fleet-secrets}
  - role: edge
    objects: {apiVersion: fleet.example.dev/v1alpha1, kind: Cluster, namespace: fleet, secretRef: self.status.secretRef}
  - role: inv
    clusterProfiles:
      namespace: inventory
      providers: [{name: kubeconfig-secretreader, kubeconfigSecret: true}]
  - role: tenants
    kcp: {endpointSlice: mesh-export}
"#;
    let crds = dir.join("crds");
    std::fs::create_dir_all(&crds).unwrap();
    write(
        &crds,
        "clusters.yaml",
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "clusters.fleet.example.dev"},
            "spec": {"group": "fleet.example.dev", "scope": "Namespaced",
                "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster", "listKind": "ClusterList"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
        .to_string(),
    );
    let broker_config = write(
        dir,
        "broker.yaml",
        &format!(
            "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  clusters:\n    - {{role: source, inCluster: true}}\n{}",
            members
                .replace("\nmembers:", "  members:")
                .replace("\n  ", "\n    ")
        ),
    );
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/resource-broker",
        "--crds",
        "config/crds",
        "--crds",
        &crds.to_string_lossy(),
        "--config",
        &broker_config,
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let generated = write(dir, "rbac.json", &stdout(&out));
    let packs = pack_values(dir, "resource-broker", false);
    let values = write(
        dir,
        "members.yaml",
        &format!("clusters: [{{role: consumer, inCluster: true}}]\n{members}"),
    );
    let args = [
        "-f",
        packs.to_str().unwrap(),
        "-f",
        &values,
        "--set-file",
        &format!("rbac.generated={generated}"),
    ];
    let docs = tokio::task::block_in_place(|| {
        let mut lint = vec!["lint", "--strict", CHART];
        lint.extend(args);
        ok("helm", &lint);
        let mut template = vec!["template", "m", CHART, "--namespace", "switchyard-system"];
        template.extend(args);
        documents(&ok("helm", &template))
    });

    // The configuration the broker reads: the members as given.
    let config = find(&docs, "ConfigMap", "m-switchyard-config");
    let text = config["data"]["broker.yaml"].as_str().unwrap();
    let config = switchyard_kube::config::BrokerConfig::from_yaml(text, "broker.yaml").unwrap();
    let roles: Vec<&str> = config.members.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["mesh", "edge", "inv", "tenants"]);
    assert_eq!(
        config.members[3].kcp.as_ref().unwrap().endpoint_slice,
        "mesh-export"
    );
    assert!(
        config.members[2]
            .cluster_profiles
            .as_ref()
            .unwrap()
            .providers[0]
            .kubeconfig_secret
    );

    // What each source reads.
    let rules = |kind: &str, name: &str| strip_why(&find(&docs, kind, name)["rules"]);
    let secrets =
        json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]});
    assert_eq!(rules("Role", "m-switchyard-members-mesh"), json!([secrets]));
    assert_eq!(rules("Role", "m-switchyard-members-edge"), json!([secrets]));
    assert_eq!(
        rules("Role", "m-switchyard-members-inv"),
        json!([{"apiGroups": ["multicluster.x-k8s.io"], "resources": ["clusterprofiles"],
                "verbs": ["get", "list", "watch"]}, secrets])
    );
    assert_eq!(
        find(&docs, "ClusterRole", "m-switchyard-members-tenants")["rules"],
        json!([{"apiGroups": ["apis.kcp.io"], "resources": ["apiexportendpointslices"],
                "resourceNames": ["mesh-export"], "verbs": ["get", "list", "watch"]}])
    );
    let generated = docs
        .iter()
        .find(|d| {
            d["kind"] == "Role"
                && d["metadata"]["name"] == "m-switchyard-member-sources"
                && d["metadata"]["namespace"] == "fleet"
        })
        .expect("the objects source's kind, from rbac.generated");
    assert!(
        strip_why(&generated["rules"]).as_array().unwrap().contains(
            &json!({"apiGroups": ["fleet.example.dev"], "resources": ["clusters"],
                               "verbs": ["get", "list", "watch"]})
        ),
        "{}",
        generated["rules"]
    );
    for (kind, name) in [
        ("RoleBinding", "m-switchyard-members-mesh"),
        ("ClusterRoleBinding", "m-switchyard-members-tenants"),
    ] {
        assert_eq!(
            find(&docs, kind, name)["subjects"][0]["name"],
            "m-switchyard"
        );
    }

    let plane = ControlPlane::start(&["host"]).await.unwrap();
    let client = plane.cluster("host").unwrap().client().await.unwrap();
    dry_run(&client, &docs, "helm, members").await;
}
