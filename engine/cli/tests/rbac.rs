//! `switchyard rbac`: the checked-in RBAC of the shipped packs (deploy/rbac/*.yaml, and the
//! Helm chart's rules) is what the command prints today, and kinds it cannot resolve are
//! errors naming them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests panic on purpose

mod support;

use std::path::Path;

use support::{root, stderr, stdout, switchyard};

/// The CRDs each shipped pack's RBAC is computed with: its own (`config/crds`) and, for the
/// packs writing Karmada's or Cilium's kinds, those CRDs, which the repository keeps beside
/// itself (`../shared`).
fn crd_args(pack: &str) -> Vec<String> {
    let mut args = vec!["--crds".to_string(), "config/crds".to_string()];
    match pack {
        "datum-federation" | "kcp-karmada" | "multicluster-ingress" => {
            args.extend(["--crds".to_string(), "../shared/crds/karmada".to_string()]);
        }
        "cilium-mesh" => args.extend(["--crds".to_string(), "../shared/crds/cilium".to_string()]),
        _ => {}
    }
    args
}

fn shipped_packs() -> Vec<String> {
    let mut packs: Vec<String> = std::fs::read_dir(root().join("rules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("pack.yaml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    packs.sort();
    packs
}

fn generate(pack: &str, format: &str) -> String {
    let pack_dir = format!("rules/{pack}");
    let mut args = vec!["rbac", "--packs", &pack_dir, "-o", format];
    let crds = crd_args(pack);
    args.extend(crds.iter().map(String::as_str));
    let out = switchyard(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// Compares a generated file with its checked-in copy; `SWITCHYARD_UPDATE_DEPLOY=1`
/// rewrites the copy instead.
fn compare(path: &Path, generated: &str, command: &str) {
    if std::env::var_os("SWITCHYARD_UPDATE_DEPLOY").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, generated).unwrap();
        return;
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is not what `{command}` prints now; regenerate every generated deploy file with \
         `SWITCHYARD_UPDATE_DEPLOY=1 cargo test -p switchyard-cli --test rbac`, or this one \
         with `cargo run -q -p switchyard-cli -- {command} > {}`",
        path.display(),
        path.strip_prefix(root()).unwrap_or(path).display()
    );
}

#[test]
fn checked_in_rbac_is_generated() {
    let packs = shipped_packs();
    assert!(packs.contains(&"kcp-karmada".to_string()));
    for pack in &packs {
        let command = format!("rbac --packs rules/{pack} {}", crd_args(pack).join(" "));
        compare(
            &root().join(format!("deploy/rbac/{pack}.yaml")),
            &generate(pack, "yaml"),
            &command,
        );
        compare(
            &root().join(format!("deploy/helm/switchyard/rbac/{pack}.json")),
            &generate(pack, "json"),
            &format!("{command} -o json"),
        );
    }
}

#[test]
fn generated_rbac_parses_and_grants_what_the_broker_does() {
    let text = generate("resource-broker", "yaml");
    let docs: Vec<serde_json::Value> = switchyard_core::yaml::parse_documents(&text)
        .unwrap()
        .iter()
        .map(|d| d.to_json())
        .collect();
    let find = |kind: &str, name: &str, namespace: Option<&str>| {
        docs.iter()
            .find(|d| {
                d["kind"] == kind
                    && d["metadata"]["name"] == name
                    && d["metadata"]["namespace"].as_str() == namespace
            })
            .unwrap_or_else(|| panic!("{kind} {name} in {namespace:?}"))
            .clone()
    };
    let verbs = |role: &serde_json::Value, resource: &str| -> Vec<String> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| {
                r["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == resource)
            })
            .flat_map(|r| r["verbs"].as_array().unwrap().clone())
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    // Status where the role has writeStatus; the finalizer's patch on the trigger.
    let consumer = find("ClusterRole", "switchyard-resource-broker-consumer", None);
    assert_eq!(verbs(&consumer, "vms/status"), ["patch"]);
    assert!(verbs(&consumer, "vms").contains(&"patch".to_string()));
    assert_eq!(verbs(&consumer, "events"), ["create", "patch"]);
    // A role without writeStatus and without triggers: no status, no Events.
    let provider = find("ClusterRole", "switchyard-resource-broker-provider", None);
    assert!(verbs(&provider, "vms/status").is_empty());
    assert!(verbs(&provider, "events").is_empty());
    assert_eq!(verbs(&provider, "acceptapis"), ["get", "list", "watch"]);
    // A scope with a fixed namespace: writes in a Role there, list and watch across
    // namespaces (the broker's watches span them).
    let compute = find("ClusterRole", "switchyard-resource-broker-compute", None);
    assert_eq!(verbs(&compute, "configmaps"), ["list", "watch"]);
    let in_default = find(
        "Role",
        "switchyard-resource-broker-compute",
        Some("default"),
    );
    assert_eq!(
        verbs(&in_default, "configmaps"),
        ["get", "create", "patch", "delete"]
    );
    find(
        "RoleBinding",
        "switchyard-resource-broker-compute",
        Some("default"),
    );
    // Leader election in the broker's own namespace.
    let lease = find(
        "Role",
        "switchyard-resource-broker-leader-election",
        Some("switchyard-system"),
    );
    assert_eq!(
        verbs(&lease, "leases"),
        [
            "get", "list", "watch", "create", "update", "patch", "delete"
        ]
    );
    // A pattern is a ClusterRole, and the output says why.
    assert!(text.contains("RBAC has no namespace"));
}

/// An output that renders a status (datum-federation's Instance write-back and projection) is
/// applied through the status subresource: its role is granted `patch` on it, even without
/// `writeStatus` access (that is for triggers).
#[test]
fn outputs_that_render_status_get_the_status_subresource() {
    let text = generate("datum-federation", "yaml");
    let docs: Vec<serde_json::Value> = switchyard_core::yaml::parse_documents(&text)
        .unwrap()
        .iter()
        .map(|d| d.to_json())
        .collect();
    let role = |name: &str| {
        docs.iter()
            .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("ClusterRole {name}"))
            .clone()
    };
    let resources_with = |role: &serde_json::Value, verb: &str| -> Vec<String> {
        role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["verbs"].as_array().unwrap().iter().any(|v| v == verb))
            .flat_map(|r| r["resources"].as_array().unwrap().clone())
            .map(|v| v.as_str().unwrap().to_string())
            .filter(|r| r.ends_with("/status"))
            .collect()
    };
    // Karmada: the write-back's status; no trigger status (its triggers write none).
    let karmada = role("switchyard-datum-federation-karmada");
    assert_eq!(resources_with(&karmada, "patch"), ["instances/status"]);
    // The projects: their triggers' status and the projection's.
    let source = role("switchyard-datum-federation-project");
    assert_eq!(
        resources_with(&source, "patch"),
        [
            "workloaddeployments/status",
            "workloads/status",
            "instances/status"
        ]
    );
    // The cells: the finalizer only.
    let cell = role("switchyard-datum-federation-cell");
    assert!(resources_with(&cell, "patch").is_empty());
}

#[test]
fn lease_namespace_and_service_account_are_flags() {
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/resource-broker",
        "--lease-namespace",
        "brokers",
        "--service-account",
        "yard",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("  name: switchyard-resource-broker-leader-election\n  namespace: brokers\n")
    );
    assert!(text.contains("    name: yard\n    namespace: brokers\n"));
}

#[test]
fn member_secrets_are_read_where_the_configuration_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("broker.yaml");
    std::fs::write(
        &config,
        "apiVersion: switchyard.dev/v1alpha1\nkind: BrokerConfig\nspec:\n  clusters:\n    - {role: source, inCluster: true}\n  members:\n    - role: mesh\n      secrets: {namespace: fleet-secrets}\n",
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/resource-broker",
        "--member-secrets",
        "more-secrets",
        "--config",
        &config,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for namespace in ["fleet-secrets", "more-secrets"] {
        let role = format!(
            "kind: Role\nmetadata:\n  name: switchyard-resource-broker-member-secrets\n  namespace: {namespace}\n"
        );
        assert!(text.contains(&role), "{text}");
    }
    assert!(
        text.contains("resources: [secrets]\n    verbs: [get, list, watch]\n"),
        "{text}"
    );
}

#[test]
fn an_unknown_kind_is_an_error_naming_it() {
    // Without Karmada's CRDs the PropagationPolicy the pack writes has no known resource.
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/kcp-karmada",
        "--crds",
        "config/crds",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("policy.karmada.io/v1alpha1 PropagationPolicy")
            && err.contains("cluster role `karmada`")
            && err.contains("--crds"),
        "{err}"
    );
}

#[test]
fn a_folder_of_packs_merges_roles() {
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules",
        "--crds",
        "config/crds",
        "--crds",
        "../shared/crds/karmada",
        "--crds",
        "../shared/crds/cilium",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rbac: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        rbac["packs"],
        serde_json::json!([
            "cilium-mesh",
            "datum-federation",
            "kcp-karmada",
            "multicluster-ingress",
            "resource-broker"
        ])
    );
    let roles: Vec<&str> = rbac["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "cell",
            "compute",
            "consumer",
            "coordination",
            "karmada",
            "management",
            "mesh",
            "project",
            "provider",
            "source"
        ]
    );
}

#[test]
fn role_limits_the_output_to_one_cluster_s_roles() {
    let out = switchyard(&[
        "rbac",
        "--packs",
        "rules/resource-broker",
        "--role",
        "compute",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("switchyard-resource-broker-compute"));
    assert!(!text.contains("switchyard-resource-broker-consumer"));
    assert!(text.contains("switchyard-resource-broker-leader-election"));
    let out = switchyard(&["rbac", "--packs", "rules/resource-broker", "--role", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--role `nope`"), "{}", stderr(&out));
}
