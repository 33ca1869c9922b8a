//! A deterministic world of FleetWorkloads for the benchmark.
//!
//! `n` FleetWorkloads, 50 per workspace (annotation `kcp.io/cluster`), spread over two kcp
//! namespaces per workspace. Every kcp namespace holds the same set of Fleets and
//! PlacementPolicies (valid ones for every strategy, a few invalid ones and one of another
//! workspace), and the FleetWorkloads cycle through:
//!
//! | `i % 10` | Fleet | PlacementPolicy |
//! |---|---|---|
//! | 0 | clusterRefs | Weighted with weights and requirements (field and label) |
//! | 1 | selector | Weighted without weights |
//! | 2 | clusterRefs | Weighted with requirements only |
//! | 3 | clusterRefs | Spread by cluster |
//! | 4 | selector | Spread by region, with a requirement |
//! | 5 | selector | Spread by label |
//! | 6 | clusterRefs + expressions | Spread by zone |
//! | 7 | clusterRefs | FixedReplicas (weights ignored) |
//! | 8 | selector | none |
//! | 9 | matchLabels only | none |
//!
//! One in three has a Service; one in four has a Karmada ResourceBinding (ready, not
//! scheduled, not fully applied, or without status); one in eight carries a previous status;
//! one in 25 is invalid (each guard in turn); one in 500 is being deleted; in one
//! workspace in ten two FleetWorkloads of different kcp namespaces share a name (a
//! conflict on Karmada). Names and images come from a seeded LCG: the same `n` always gives
//! the same world.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_core::MemoryWorld;

/// FleetWorkloads per workspace.
const PER_WORKSPACE: usize = 50;
const PORTAL: &str = "platform.edge-portal.eu/v1alpha1";

/// A 64-bit linear congruential generator (Knuth's MMIX constants).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// `len` characters of `[0-9a-z]`.
    fn word(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        (0..len)
            .map(|_| {
                let i = usize::try_from(self.next() % 36).unwrap_or(0);
                char::from(ALPHABET[i])
            })
            .collect()
    }
}

fn karmada_namespace(workspace: &str) -> String {
    let digest = Sha256::digest(workspace.as_bytes());
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    format!("kcp-{hex}")
}

fn meta(name: &str, namespace: &str, workspace: &str) -> Value {
    json!({"name": name, "namespace": namespace, "annotations": {"kcp.io/cluster": workspace}})
}

fn insert(world: &mut MemoryWorld, cluster: &str, object: Value) {
    // The source role's objects live in the workspace their annotation names, as the
    // pack declares (`workspaces: kcp`).
    let cluster = match object
        .pointer("/metadata/annotations/kcp.io~1cluster")
        .and_then(Value::as_str)
    {
        Some(workspace) if cluster == "source" => format!("source/{workspace}"),
        _ => cluster.to_string(),
    };
    // Every generated object has apiVersion, kind and metadata.name.
    if let Err(e) = world.insert(&cluster, object) {
        unreachable!("generated object without identity: {e}");
    }
}

/// Builds the world of `n` FleetWorkloads (see the module documentation).
pub fn generate(n: usize) -> MemoryWorld {
    let mut world = MemoryWorld::new();
    let mut lcg = Lcg(0x5eed_0f57_17c4_ad00);
    let workspaces = n.div_ceil(PER_WORKSPACE).max(1);
    let names: Vec<String> = (0..workspaces)
        .map(|w| format!("{:04x}{}", w, lcg.word(12)))
        .collect();
    for (w, workspace) in names.iter().enumerate() {
        let other = &names[(w + 1) % names.len()];
        for team in ["a", "b"] {
            placement_objects(&mut world, &format!("team-{team}-{w:04}"), workspace, other);
        }
    }
    for i in 0..n {
        let w = i / PER_WORKSPACE;
        let j = i % PER_WORKSPACE;
        let workspace = &names[w];
        let namespace = format!(
            "team-{}-{w:04}",
            if j.is_multiple_of(2) { "a" } else { "b" }
        );
        // A conflict: in one workspace in ten, app-007 (team b) takes app-006's name.
        let name = if w % 10 == 3 && j == 7 {
            "app-006".to_string()
        } else {
            format!("app-{j:03}")
        };
        let tag = lcg.word(7);
        let fw = fleet_workload(i, &name, &namespace, workspace, &tag);
        insert(&mut world, "source", fw);
        if i.is_multiple_of(4) {
            let binding = resource_binding(i, &name, &karmada_namespace(workspace));
            insert(&mut world, "karmada", binding);
        }
    }
    world
}

/// The Fleets and PlacementPolicies of one kcp namespace.
fn placement_objects(world: &mut MemoryWorld, namespace: &str, workspace: &str, other: &str) {
    let fleet = |name: &str, ws: &str, spec: Value| json!({"apiVersion": PORTAL, "kind": "Fleet", "metadata": meta(name, namespace, ws), "spec": spec});
    let fleets = [
        fleet(
            "edge-refs",
            workspace,
            json!({"clusterRefs": [{"name": "edge-fra-1"}, {"name": "edge-ams-1"}, {"name": "edge-par-1"}]}),
        ),
        fleet(
            "edge-selector",
            workspace,
            json!({"selector": {
                "matchLabels": {"edge-connect.eu/tier": "edge"},
                "matchExpressions": [{"key": "edge-connect.eu/maintenance", "operator": "DoesNotExist"}]}}),
        ),
        fleet(
            "gpu-labels",
            workspace,
            json!({"selector": {"matchLabels": {"edge-connect.eu/gpu": "true", "edge-connect.eu/tier": "core"}}}),
        ),
        fleet(
            "mixed",
            workspace,
            json!({"clusterRefs": [{"name": "plant-1"}, {"name": "plant-2"}],
                   "selector": {"matchExpressions": [{"key": "edge-connect.eu/site", "operator": "In", "values": ["north", "south"]}]}}),
        ),
        fleet("empty", workspace, json!({"selector": {}})),
        fleet(
            "foreign",
            other,
            json!({"clusterRefs": [{"name": "other-tenant-cluster"}]}),
        ),
    ];
    for f in fleets {
        insert(world, "source", f);
    }
    let policy = |name: &str, ws: &str, spec: Value| json!({"apiVersion": PORTAL, "kind": "PlacementPolicy", "metadata": meta(name, namespace, ws), "spec": spec});
    let policies = [
        policy(
            "weighted",
            workspace,
            json!({"strategy": "Weighted",
                   "requirements": [
                       {"key": "region", "operator": "In", "values": ["eu-central-1", "eu-west-1"]},
                       {"key": "edge-connect.eu/gpu", "operator": "Exists"},
                       {"key": "edge-connect.eu/tier", "operator": "NotIn", "values": ["lab"]}],
                   "weights": [{"cluster": "edge-fra-1", "weight": 3}, {"cluster": "edge-ams-1", "weight": 1}]}),
        ),
        policy("weighted-equal", workspace, json!({"strategy": "Weighted"})),
        policy(
            "weighted-reqs",
            workspace,
            json!({"strategy": "Weighted",
                   "requirements": [
                       {"key": "zone", "operator": "NotIn", "values": ["eu-central-1c"]},
                       {"key": "provider", "operator": "In", "values": ["otc"]},
                       {"key": "edge-connect.eu/legacy", "operator": "DoesNotExist"}]}),
        ),
        policy(
            "spread-cluster",
            workspace,
            json!({"strategy": "Spread", "spread": {"spreadByField": "cluster", "maxGroups": 3}}),
        ),
        policy(
            "spread-region",
            workspace,
            json!({"strategy": "Spread",
                   "requirements": [{"key": "provider", "operator": "NotIn", "values": ["kind"]}],
                   "spread": {"spreadByField": "region", "minGroups": 2, "maxGroups": 3}}),
        ),
        policy(
            "spread-zone",
            workspace,
            json!({"strategy": "Spread", "spread": {"spreadByField": "zone", "minGroups": 1, "maxGroups": 2}}),
        ),
        policy(
            "spread-label",
            workspace,
            json!({"strategy": "Spread",
                   "spread": {"spreadByLabel": "topology.edge-connect.eu/site", "minGroups": 2, "maxGroups": 4}}),
        ),
        policy(
            "fixed",
            workspace,
            json!({"strategy": "FixedReplicas", "weights": [{"cluster": "edge-fra-1", "weight": 5}]}),
        ),
        policy("bad-strategy", workspace, json!({"strategy": "Balanced"})),
        policy(
            "bad-requirement",
            workspace,
            json!({"strategy": "FixedReplicas",
                   "requirements": [{"key": "edge-connect.eu/cpus", "operator": "Gt", "values": ["8"]}]}),
        ),
        policy(
            "bad-spread",
            workspace,
            json!({"strategy": "Spread", "spread": {"spreadByField": "zone", "minGroups": 3, "maxGroups": 2}}),
        ),
        policy(
            "bad-weight",
            workspace,
            json!({"strategy": "Weighted", "weights": [{"cluster": "edge-fra-1", "weight": 0}]}),
        ),
        policy(
            "foreign-policy",
            other,
            json!({"strategy": "FixedReplicas"}),
        ),
    ];
    for p in policies {
        insert(world, "source", p);
    }
}

/// FleetWorkload number `i`.
fn fleet_workload(i: usize, name: &str, namespace: &str, workspace: &str, tag: &str) -> Value {
    let (mut fleet, mut policy) = match i % 10 {
        0 => ("edge-refs", Some("weighted")),
        1 => ("edge-selector", Some("weighted-equal")),
        2 => ("edge-refs", Some("weighted-reqs")),
        3 => ("edge-refs", Some("spread-cluster")),
        4 => ("edge-selector", Some("spread-region")),
        5 => ("edge-selector", Some("spread-label")),
        6 => ("mixed", Some("spread-zone")),
        7 => ("edge-refs", Some("fixed")),
        8 => ("edge-selector", None),
        _ => ("gpu-labels", None),
    };
    let mut metadata = meta(name, namespace, workspace);
    metadata["generation"] = json!(1 + i % 4);
    let tier = ["web", "api", "worker"][i % 3];
    let mut pod_labels = json!({"app": name, "tier": tier});
    let mut with_pod_metadata = i % 5 != 4;
    let mut service = i.is_multiple_of(3).then(
        || json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}),
    );
    if i % 21 == 1 {
        // A Service without ports renders none.
        service = Some(json!({}));
    }
    // One in 25 is invalid, each guard in turn.
    if i % 25 == 24 {
        match (i / 25) % 12 {
            0 => fleet = "does-not-exist",
            1 => fleet = "foreign",
            2 => fleet = "empty",
            3 => policy = Some("does-not-exist"),
            4 => policy = Some("foreign-policy"),
            5 => policy = Some("bad-strategy"),
            6 => policy = Some("bad-requirement"),
            7 => policy = Some("bad-spread"),
            8 => policy = Some("bad-weight"),
            9 => metadata["annotations"]["kcp.io/cluster"] = json!("root:org:ws"),
            10 => {
                pod_labels["edge-connect.eu/source-name"] = json!("someone-else");
                with_pod_metadata = true;
            }
            _ => {
                metadata["name"] = json!(format!("app.{i}"));
                service = Some(json!({"ports": [{"port": 80}]}));
            }
        }
    }
    if i % 500 == 250 {
        metadata["deletionTimestamp"] = json!("2025-12-31T00:00:00Z");
        metadata["finalizers"] = json!(["switchyard.dev/kcp-karmada"]);
    }
    let mut pod_metadata = json!({"labels": pod_labels});
    if i % 4 == 1 {
        pod_metadata["annotations"] =
            json!({"prometheus.io/scrape": "true", "prometheus.io/port": "9090"});
    }
    let container = json!({
        "name": name,
        "image": format!("ghcr.io/edge-connect/{name}:{tag}"),
        "ports": [{"containerPort": 8080, "name": "http"}],
        "env": [{"name": "WORKLOAD_INDEX", "value": i.to_string()}, {"name": "LOG_LEVEL", "value": "info"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
    });
    let mut template = json!({"spec": {"containers": [container]}});
    if with_pod_metadata {
        template["metadata"] = pod_metadata;
    }
    let mut spec = json!({"fleetRef": {"name": fleet}, "template": template});
    if let Some(p) = policy {
        spec["placementPolicyRef"] = json!({"name": p});
    }
    if i % 6 != 5 {
        spec["replicas"] = json!(1 + i % 5);
    }
    if let Some(s) = service {
        spec["service"] = s;
    }
    let mut fw =
        json!({"apiVersion": PORTAL, "kind": "FleetWorkload", "metadata": metadata, "spec": spec});
    if i % 8 == 3 {
        fw["status"] = json!({"conditions": [
            {"type": "Synced", "status": "True", "reason": "Synced", "message": "rendered",
             "lastTransitionTime": "2025-06-01T00:00:00Z"},
            {"type": "Ready", "status": "False", "reason": "NotScheduled", "message": "not yet",
             "lastTransitionTime": "2025-06-01T00:00:00Z"}]});
    }
    fw
}

/// The Karmada ResourceBinding of FleetWorkload `i`'s Deployment.
fn resource_binding(i: usize, name: &str, namespace: &str) -> Value {
    let mut binding = json!({
        "apiVersion": "work.karmada.io/v1alpha2",
        "kind": "ResourceBinding",
        "metadata": {"name": format!("{name}-deployment"), "namespace": namespace},
        "spec": {
            "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "namespace": namespace},
            "replicas": 1 + i % 5,
            "clusters": [{"name": "edge-fra-1", "replicas": 2}, {"name": "edge-ams-1", "replicas": 1}, {"name": "edge-par-1"}],
        },
    });
    let scheduled = |status: &str, message: &str| {
        json!({"type": "Scheduled", "status": status, "reason": "Success", "message": message,
               "lastTransitionTime": "2025-12-31T23:00:00Z"})
    };
    let applied = |status: &str, message: &str| {
        json!({"type": "FullyApplied", "status": status, "reason": "Applied", "message": message,
               "lastTransitionTime": "2025-12-31T23:00:05Z"})
    };
    let aggregated = json!([
        {"clusterName": "edge-fra-1", "applied": true, "health": "Healthy"},
        {"clusterName": "edge-ams-1", "applied": false, "appliedMessage": "quota exceeded"},
        {"clusterName": "edge-par-1", "applied": true},
    ]);
    match (i / 4) % 4 {
        0 => {
            binding["status"] = json!({
                "conditions": [scheduled("True", "Binding has been scheduled successfully."),
                               applied("True", "All works have been successfully applied")],
                "aggregatedStatus": aggregated});
        }
        1 => {
            binding["status"] =
                json!({"conditions": [scheduled("False", "0/3 clusters are available")]});
        }
        2 => {
            binding["status"] = json!({
                "conditions": [scheduled("True", ""), applied("False", "edge-ams-1: quota exceeded")],
                "aggregatedStatus": aggregated});
        }
        _ => {}
    }
    binding
}

/// Workspaces (and kcp namespaces) of [`fleet_workloads_yaml`].
pub const RENDER_WORKSPACES: usize = 100;

/// The input file of the render benchmark as YAML text: `n` FleetWorkloads
/// `app-<i>` in namespace `ns<i % 100>` of workspace `ws<i % 100>` (annotation
/// `kcp.io/cluster`), each with `spec.fleetRef.name: f`, `replicas: 2` and a pod template of
/// one labelled container with one port, then one Fleet `f` with two clusterRefs per
/// namespace. 10,000 FleetWorkloads make about 3.6 MB.
pub fn fleet_workloads_yaml(n: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(n * 370 + RENDER_WORKSPACES * 200);
    let mut first = true;
    let mut separator = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push_str("---\n");
        }
    };
    for i in 0..n {
        separator(&mut out);
        let w = i % RENDER_WORKSPACES;
        let _ = write!(
            out,
            "apiVersion: {PORTAL}\nkind: FleetWorkload\nmetadata:\n  name: app-{i}\n  \
             namespace: ns{w}\n  annotations: {{kcp.io/cluster: ws{w}}}\nspec:\n  \
             fleetRef: {{name: f}}\n  replicas: 2\n  template:\n    metadata: {{labels: \
             {{app: app-{i}}}}}\n    spec:\n      containers:\n        - name: app\n          \
             image: nginx:1.27\n          ports: [{{containerPort: 80}}]\n"
        );
    }
    for w in 0..RENDER_WORKSPACES {
        separator(&mut out);
        let _ = write!(
            out,
            "apiVersion: {PORTAL}\nkind: Fleet\nmetadata:\n  name: f\n  namespace: ns{w}\n  \
             annotations: {{kcp.io/cluster: ws{w}}}\nspec:\n  clusterRefs: [{{name: c1}}, \
             {{name: c2}}]\n"
        );
    }
    out
}
