//! Least-privilege RBAC computed from what packs declare: what the broker needs, in each
//! cluster role, to run them (`switchyard rbac`).
//!
//! The verbs follow what the broker does with each kind (engine/kube's `apply.rs` and
//! `watch.rs`):
//!
//! - triggers and looked-up kinds are watched whole, across all namespaces: `get`, `list`,
//!   `watch`;
//! - a trigger gets the pack's finalizer by a merge patch (`patch`) when one of its rules has
//!   outputs that are deleted with it;
//! - a trigger's status (the engine's `Synced` condition and the pack's fields) is written by
//!   server-side apply on the `status` subresource (`patch`), where the role has
//!   `writeStatus` and the kind has that subresource;
//! - the scope's kinds are created and updated by server-side apply (`create`, `patch`),
//!   watched (metadata, by the pack's label, across all namespaces: `list`, `watch`), deleted
//!   with a uid precondition (`delete`) and orphaned by a merge patch (`patch`);
//! - a failing trigger gets a Warning Event (`events.k8s.io`: `create`, `patch` for a
//!   repeated one) in the trigger's cluster;
//! - leader election holds a Lease in the broker's own cluster (`coordination.k8s.io`).
//!
//! Kinds become resources without discovery ([`crate::kinds`]): built-in kinds from its
//! table, custom kinds from the CRDs the pack is loaded with. A kind neither knows is an
//! error naming it.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

pub use crate::kinds::{KindInfo, group_of};
use crate::model::Access;
use crate::pack::{Pack, literal_kind, template_status_line};

/// Why RBAC cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RbacError {
    /// A kind that is neither built in nor defined by one of the CRDs given.
    #[error(
        "pack `{pack}`: {api_version} {kind} ({usage} in cluster role `{role}`) is neither a \
         built-in kind nor defined by a CRD given (`--crds`, default the nearest config/crds/): \
         its resource name is unknown"
    )]
    UnknownKind {
        pack: String,
        role: String,
        api_version: String,
        kind: String,
        usage: &'static str,
    },
    /// No pack to compute RBAC for.
    #[error("no pack given")]
    NoPack,
}

/// Kinds to resources: Kubernetes' own table (`crate::kinds`) and the CRDs given.
#[derive(Debug, Clone, Default)]
pub struct Kinds {
    crds: Vec<Value>,
}

impl Kinds {
    /// The built-in kinds and those of `crds` (CustomResourceDefinitions as JSON; other
    /// documents are ignored). A CRD wins over the table for the same group and kind.
    pub fn new(crds: &[Value]) -> Self {
        Kinds {
            crds: crds.to_vec(),
        }
    }

    /// The kind's resource, scope and status subresource.
    pub fn get(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        crate::kinds::lookup(&self.crds, api_version, kind)
    }
}

/// A verb, in the order RBAC rules are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

const READ: &[Verb] = &[Verb::Get, Verb::List, Verb::Watch];

/// One RBAC rule, with why the broker needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<Verb>,
    /// Only the objects of these names (empty: every object).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Shown as a comment above the rule; not part of the Kubernetes object.
    pub why: String,
}

/// What the broker needs in the clusters of one role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRbac {
    /// The cluster role's name (`source`, `karmada`).
    pub role: String,
    /// The packs that name it.
    pub packs: Vec<String>,
    /// The packs' descriptions of the role.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub descriptions: Vec<String>,
    /// Rules for a ClusterRole: everything across namespaces, and cluster-scoped kinds.
    pub cluster_rules: Vec<PolicyRule>,
    /// Rules for a Role in each namespace the scope names literally.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub namespace_rules: BTreeMap<String, Vec<PolicyRule>>,
    /// What the rules cannot say, or what the pack should change.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// What the broker needs in its own cluster: a Lease for leader election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElection {
    pub namespace: String,
    pub rules: Vec<PolicyRule>,
}

/// The RBAC of a set of packs run by one broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rbac {
    pub packs: Vec<String>,
    pub roles: Vec<RoleRbac>,
    pub leader_election: LeaderElection,
    /// Namespaces of the broker's own cluster holding the kubeconfig Secrets of members
    /// found at run time (`members[].secrets` of its configuration), and what it does there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_secrets: Vec<LeaderElection>,
    /// Namespaces of the broker's own cluster holding the objects member sources read (an
    /// `objects` source's kind, ClusterProfiles), and what it does there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_sources: Vec<LeaderElection>,
    /// Cluster-scoped objects member sources read in the broker's own cluster (a `kcp`
    /// source's APIExportEndpointSlice).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_sources_cluster: Vec<PolicyRule>,
}

impl Rbac {
    /// Adds reading the kubeconfig Secrets of members found at run time in `namespace`.
    pub fn add_member_secrets(&mut self, namespace: &str) {
        if self.member_secrets.iter().any(|m| m.namespace == namespace) {
            return;
        }
        self.member_secrets.push(LeaderElection {
            namespace: namespace.to_string(),
            rules: vec![PolicyRule {
                api_groups: vec![String::new()],
                resources: vec!["secrets".into()],
                verbs: vec![Verb::Get, Verb::List, Verb::Watch],
                resource_names: Vec::new(),
                why: "Members found at run time: the broker watches the kubeconfig Secrets here."
                    .into(),
            }],
        });
        self.member_secrets
            .sort_by(|a, b| a.namespace.cmp(&b.namespace));
    }
}

impl Rbac {
    /// Adds reading `resource` of `group` (only the objects `names`, when given) for a member
    /// source: in `namespace`, or cluster-wide.
    pub fn add_member_source(
        &mut self,
        namespace: Option<&str>,
        group: &str,
        resource: &str,
        names: &[String],
        why: &str,
    ) {
        let rule = PolicyRule {
            api_groups: vec![group.to_string()],
            resources: vec![resource.to_string()],
            verbs: READ.to_vec(),
            resource_names: names.to_vec(),
            why: why.to_string(),
        };
        let rules = match namespace {
            None => &mut self.member_sources_cluster,
            Some(namespace) => {
                let index = match self
                    .member_sources
                    .iter()
                    .position(|m| m.namespace == namespace)
                {
                    Some(index) => index,
                    None => {
                        self.member_sources.push(LeaderElection {
                            namespace: namespace.to_string(),
                            rules: Vec::new(),
                        });
                        self.member_sources
                            .sort_by(|a, b| a.namespace.cmp(&b.namespace));
                        self.member_sources
                            .iter()
                            .position(|m| m.namespace == namespace)
                            .unwrap_or_default()
                    }
                };
                match self.member_sources.get_mut(index) {
                    Some(entry) => &mut entry.rules,
                    None => return,
                }
            }
        };
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
}

/// A (group, resource) pair.
type Resource = (String, String);

/// Grants of one role as they accumulate.
#[derive(Default)]
struct Grants {
    packs: BTreeSet<String>,
    descriptions: Vec<String>,
    /// Watched whole: triggers, lookups, outputs read back.
    read: BTreeSet<Resource>,
    /// Triggers that get the pack's finalizer.
    finalizers: BTreeSet<Resource>,
    /// `<resource>/status` of triggers.
    status: BTreeSet<Resource>,
    /// `<resource>/status` of outputs whose template renders a status.
    output_status: BTreeSet<Resource>,
    /// Triggers live here: Events are recorded here.
    events: bool,
    /// The scope's kinds, watched (metadata) across all namespaces, with the verbs granted
    /// across namespaces (empty: written only in the namespaces of `scope_in`).
    scope_all: BTreeMap<Resource, BTreeSet<Verb>>,
    /// The scope's namespaced kinds written only in these namespaces, with their verbs.
    scope_in: BTreeMap<String, BTreeMap<Resource, BTreeSet<Verb>>>,
    notes: BTreeSet<String>,
}

/// Which kinds of a role a pack's outputs may write, and how.
#[derive(Default)]
struct OutputKinds {
    /// Kinds created and deleted (apply and create outputs), by (apiVersion, kind).
    owned: BTreeSet<(String, String)>,
    /// An owned output whose template names no literal kind: any kind of the scope.
    owned_any: bool,
    /// Kinds only patched (patch outputs).
    patched: BTreeSet<(String, String)>,
    patched_any: bool,
    /// Owned kinds whose template renders `status`, applied through the status subresource.
    status: BTreeSet<(String, String)>,
}

/// The kinds each role's outputs write, from the pack's rule files and templates: a
/// template that writes one document with a literal apiVersion and kind writes that kind;
/// any other may write any kind of its role's scope.
fn output_kinds(pack: &Pack) -> BTreeMap<String, OutputKinds> {
    let files = &pack.files().files;
    let mut by_role: BTreeMap<String, OutputKinds> = BTreeMap::new();
    let mut unknown = false;
    for (path, text) in files {
        let is_rule =
            path.starts_with("rules/") && (path.ends_with(".yaml") || path.ends_with(".yml"));
        if !is_rule {
            continue;
        }
        let documents = match crate::yaml::parse_documents(text) {
            Ok(documents) => documents,
            Err(_) => {
                unknown = true;
                continue;
            }
        };
        for document in documents {
            let Ok(rule) = serde_json::from_value::<crate::model::RuleDocument>(document.to_json())
            else {
                unknown = true;
                continue;
            };
            let spec = rule.spec;
            let stages = spec.stages.iter().flat_map(|s| {
                s.items
                    .iter()
                    .flat_map(|stage| stage.outputs.iter())
                    .chain(s.from.iter().flat_map(|f| f.outputs.iter()))
            });
            for output in spec.outputs.iter().chain(stages) {
                let kinds = by_role.entry(output.cluster.clone()).or_default();
                let literal = files
                    .get(&format!("templates/{}", output.template))
                    .and_then(|t| literal_kind(t));
                match (output.mode, literal) {
                    (crate::model::OutputMode::Patch, Some(kind)) => {
                        kinds.patched.insert(kind);
                    }
                    (crate::model::OutputMode::Patch, None) => kinds.patched_any = true,
                    (_, Some(kind)) => {
                        if let Some(text) = files.get(&format!("templates/{}", output.template))
                            && template_status_line(text).is_some()
                        {
                            kinds.status.insert(kind.clone());
                        }
                        kinds.owned.insert(kind);
                    }
                    (_, None) => kinds.owned_any = true,
                }
            }
        }
    }
    if unknown {
        // The pack loaded, so this does not happen; if it did, grant what the scope allows.
        for scope in &pack.spec().scope {
            by_role.entry(scope.cluster.clone()).or_default().owned_any = true;
        }
    }
    by_role
}

/// Computes the RBAC the broker needs to run `packs`, resolving kinds with `kinds`; the
/// leader-election Lease lives in `lease_namespace` of the broker's own cluster.
pub fn compute(packs: &[&Pack], kinds: &Kinds, lease_namespace: &str) -> Result<Rbac, RbacError> {
    if packs.is_empty() {
        return Err(RbacError::NoPack);
    }
    let mut roles: BTreeMap<String, Grants> = BTreeMap::new();
    for pack in packs {
        add_pack(pack, kinds, &mut roles)?;
    }
    let roles = roles
        .into_iter()
        .map(|(role, grants)| role_rules(role, grants))
        .collect();
    let mut names: Vec<String> = packs.iter().map(|p| p.name().to_string()).collect();
    names.sort();
    names.dedup();
    Ok(Rbac {
        packs: names,
        roles,
        leader_election: LeaderElection {
            namespace: lease_namespace.to_string(),
            rules: vec![PolicyRule {
                api_groups: vec!["coordination.k8s.io".into()],
                resources: vec!["leases".into()],
                verbs: vec![Verb::Get, Verb::List, Verb::Watch, Verb::Create, Verb::Update, Verb::Patch, Verb::Delete],
                resource_names: Vec::new(),
                why: "Leader election: the replicas hold one Lease (with --shards, one per shard and one each to count the replicas); only its holder writes; the others watch them; a replica deletes its own when it stops.".into(),
            }],
        },
        member_secrets: Vec::new(),
        member_sources: Vec::new(),
        member_sources_cluster: Vec::new(),
    })
}

fn add_pack(
    pack: &Pack,
    kinds: &Kinds,
    roles: &mut BTreeMap<String, Grants>,
) -> Result<(), RbacError> {
    let resolve = |role: &str, api_version: &str, kind: &str, usage: &'static str| match kinds
        .get(api_version, kind)
    {
        Some(info) => Ok(info),
        None => Err(RbacError::UnknownKind {
            pack: pack.name().to_string(),
            role: role.to_string(),
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            usage,
        }),
    };
    let spec = pack.spec();
    // This pack's access in each role: another pack's access to a shared role grants nothing.
    let access: BTreeMap<&str, &[Access]> = spec
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.access.as_slice()))
        .collect();
    let has = |role: &str, a: Access| access.get(role).is_some_and(|list| list.contains(&a));
    for cluster in &spec.clusters {
        let grants = roles.entry(cluster.name.clone()).or_default();
        grants.packs.insert(pack.name().to_string());
        if let Some(d) = &cluster.description {
            grants.descriptions.push(format!("{}: {d}", pack.name()));
        }
    }
    for rule in pack.rule_kinds() {
        let watch = &rule.watch;
        // A rule without `watch` has the pack's own trigger, which no cluster holds.
        if !rule.triggerless {
            let info = resolve(&watch.cluster, &watch.api_version, &watch.kind, "watched")?;
            let key = (info.group.clone(), info.resource.clone());
            let grants = roles.entry(watch.cluster.clone()).or_default();
            grants.packs.insert(pack.name().to_string());
            grants.read.insert(key.clone());
            grants.events = true;
            // The finalizer is set when a rule has outputs deleted with the trigger (evaluate).
            if rule.finalizer
                && rule.deletion == crate::model::DeletionPolicy::Delete
                && !rule.output_clusters.is_empty()
            {
                grants.finalizers.insert(key.clone());
            }
            // The engine writes the `Synced` condition of every trigger, status mapping or not,
            // unless the rule says `writeStatus: false`.
            if info.status && rule.write_status {
                if has(&watch.cluster, Access::WriteStatus) {
                    grants
                        .status
                        .insert((info.group.clone(), format!("{}/status", info.resource)));
                } else {
                    grants.notes.insert(format!(
                        "{} {} is watched here but the role has no `writeStatus` access: the \
                         broker writes the `Synced` condition of every trigger, and those writes \
                         are refused. Add `writeStatus` to the role in pack `{}` to allow them.",
                        watch.api_version,
                        watch.kind,
                        pack.name()
                    ));
                }
            }
        }
        for lookup in &rule.lookups {
            let info = resolve(
                &lookup.cluster,
                &lookup.api_version,
                &lookup.kind,
                "looked up",
            )?;
            let grants = roles.entry(lookup.cluster.clone()).or_default();
            grants.packs.insert(pack.name().to_string());
            grants.read.insert((info.group, info.resource));
        }
        // Outputs read back whole (patch targets, stage outputs): watched by the broker.
        for observed in &rule.observed_outputs {
            if let Some((api_version, kind)) = &observed.kind {
                let info = resolve(&observed.cluster, api_version, kind, "read back")?;
                let grants = roles.entry(observed.cluster.clone()).or_default();
                grants.read.insert((info.group, info.resource));
            }
        }
    }
    let outputs = output_kinds(pack);
    let none = OutputKinds::default();
    for scope in &spec.scope {
        let grants = roles.entry(scope.cluster.clone()).or_default();
        grants.packs.insert(pack.name().to_string());
        let writes = has(&scope.cluster, Access::Write);
        let written = outputs.get(&scope.cluster).unwrap_or(&none);
        let patterns: Vec<&String> = scope
            .namespaces
            .iter()
            .filter(|n| n.contains('*'))
            .collect();
        for k in &scope.kinds {
            let info = resolve(&scope.cluster, &k.api_version, &k.kind, "in the scope")?;
            let key = (info.group.clone(), info.resource.clone());
            let this = (k.api_version.clone(), k.kind.clone());
            // What the outputs do to the kind: apply and create outputs create, update and
            // delete it; patch outputs only patch objects others own.
            let mut verbs: BTreeSet<Verb> = BTreeSet::new();
            if writes && (written.owned_any || written.owned.contains(&this)) {
                verbs.extend([Verb::Get, Verb::Create, Verb::Patch, Verb::Delete]);
            }
            if writes && (written.patched_any || written.patched.contains(&this)) {
                verbs.extend([Verb::Get, Verb::Patch]);
            }
            if writes && info.status && written.status.contains(&this) {
                grants
                    .output_status
                    .insert((info.group.clone(), format!("{}/status", info.resource)));
            }
            // Every kind of the scope is watched (metadata) across all namespaces.
            let all = grants.scope_all.entry(key.clone()).or_default();
            if info.scope.is_cluster() || !patterns.is_empty() {
                all.extend(verbs);
            } else if !verbs.is_empty() {
                for ns in &scope.namespaces {
                    grants
                        .scope_in
                        .entry(ns.clone())
                        .or_default()
                        .entry(key.clone())
                        .or_default()
                        .extend(verbs.iter().copied());
                }
            }
        }
        if writes && !patterns.is_empty() {
            let names: Vec<String> = patterns.iter().map(|n| format!("`{n}`")).collect();
            grants.notes.insert(format!(
                "Pack `{}` may write in namespaces matching {}: RBAC has no namespace \
                 patterns, so its kinds are granted in every namespace (a ClusterRole); the \
                 broker's scope check is what keeps outputs inside the pattern.",
                pack.name(),
                names.join(", ")
            ));
        }
        if !writes && !scope.kinds.is_empty() {
            grants.notes.insert(format!(
                "Pack `{}` has a scope in this role without `write` access: its kinds are \
                 only watched.",
                pack.name()
            ));
        }
    }
    Ok(())
}

/// One rule per API group and set of verbs, resources sorted.
fn by_group(resources: &BTreeMap<Resource, BTreeSet<Verb>>, why: &str, out: &mut Vec<PolicyRule>) {
    let mut groups: BTreeMap<(&str, Vec<Verb>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in resources {
        if verbs.is_empty() {
            continue;
        }
        groups
            .entry((group, verbs.iter().copied().collect()))
            .or_default()
            .push(resource.clone());
    }
    for ((group, verbs), resources) in groups {
        out.push(PolicyRule {
            api_groups: vec![group.to_string()],
            resources,
            verbs,
            resource_names: Vec::new(),
            why: why.to_string(),
        });
    }
}

fn with_verbs(
    resources: &BTreeSet<Resource>,
    verbs: &[Verb],
) -> BTreeMap<Resource, BTreeSet<Verb>> {
    resources
        .iter()
        .map(|k| (k.clone(), verbs.iter().copied().collect()))
        .collect()
}

fn role_rules(role: String, g: Grants) -> RoleRbac {
    let mut cluster_rules = Vec::new();
    // The scope's kinds: list and watch across namespaces, the verbs of the outputs, and
    // what triggers and lookups of the same kind need, in one rule.
    let mut scope: BTreeMap<Resource, BTreeSet<Verb>> = BTreeMap::new();
    for (key, verbs) in &g.scope_all {
        let mut all: BTreeSet<Verb> = verbs.clone();
        all.extend([Verb::List, Verb::Watch]);
        if g.read.contains(key) {
            all.insert(Verb::Get);
        }
        if g.finalizers.contains(key) {
            all.insert(Verb::Patch);
        }
        scope.insert(key.clone(), all);
    }
    let read: BTreeSet<Resource> = g
        .read
        .iter()
        .filter(|k| !scope.contains_key(*k))
        .cloned()
        .collect();
    by_group(
        &with_verbs(&read, READ),
        "Triggers and looked-up objects: watched whole, across all namespaces.",
        &mut cluster_rules,
    );
    let finalizers: BTreeSet<Resource> = g
        .finalizers
        .iter()
        .filter(|k| !scope.contains_key(*k))
        .cloned()
        .collect();
    by_group(
        &with_verbs(&finalizers, &[Verb::Patch]),
        "The pack's finalizer on triggers (a merge patch), so outputs are cleaned up on delete.",
        &mut cluster_rules,
    );
    by_group(
        &with_verbs(&g.status, &[Verb::Patch]),
        "Triggers' status: server-side apply on the status subresource.",
        &mut cluster_rules,
    );
    by_group(
        &with_verbs(&g.output_status, &[Verb::Patch]),
        "Outputs' rendered status: server-side apply on the status subresource, after the object.",
        &mut cluster_rules,
    );
    let mut why = String::from(
        "The scope's kinds, watched (metadata, by the pack's label) across all namespaces. \
         Outputs the pack owns: server-side apply (create, patch), deleted with a uid \
         precondition, orphaned by a merge patch; objects it only patches: patch.",
    );
    if !g.scope_in.is_empty() {
        why.push_str(" Writes limited to named namespaces are in the Roles below.");
    }
    by_group(&scope, &why, &mut cluster_rules);
    if g.events {
        cluster_rules.push(PolicyRule {
            api_groups: vec!["events.k8s.io".into()],
            resources: vec!["events".into()],
            verbs: vec![Verb::Create, Verb::Patch],
            resource_names: Vec::new(),
            why: "Warning Events on triggers whose rules fail, in the trigger's namespace.".into(),
        });
    }
    let namespace_rules = g
        .scope_in
        .iter()
        .map(|(ns, kinds)| {
            let mut rules = Vec::new();
            by_group(
                kinds,
                "Outputs in this namespace: server-side apply (create, patch), deleted with a \
                 uid precondition, orphaned by a merge patch; objects only patched: patch.",
                &mut rules,
            );
            (ns.clone(), rules)
        })
        .collect();
    RoleRbac {
        role,
        packs: g.packs.into_iter().collect(),
        descriptions: g.descriptions,
        cluster_rules,
        namespace_rules,
        notes: g.notes.into_iter().collect(),
    }
}

/// How the objects are named and bound.
#[derive(Debug, Clone)]
pub struct Naming {
    /// Prefix of every object's name (`switchyard-kcp-karmada`).
    pub prefix: String,
    /// The ServiceAccount bound, and its namespace.
    pub service_account: String,
    pub namespace: String,
}

impl Naming {
    /// `switchyard-<pack>` for one pack, `switchyard` for several.
    pub fn for_packs(rbac: &Rbac, service_account: &str) -> Self {
        let prefix = match rbac.packs.as_slice() {
            [one] => format!("switchyard-{one}"),
            _ => "switchyard".to_string(),
        };
        Naming {
            prefix,
            service_account: service_account.to_string(),
            namespace: rbac.leader_election.namespace.clone(),
        }
    }
}

/// The RBAC as a YAML stream: for each role, a comment header saying where to bind it, then
/// its ClusterRole and ClusterRoleBinding and a Role and RoleBinding per namespace; then the
/// leader-election Role of the broker's own cluster. Stable order: roles by name.
pub fn to_yaml(rbac: &Rbac, naming: &Naming) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "# Generated by `switchyard rbac` from the pack{} {}: do not edit.\n",
        if rbac.packs.len() == 1 { "" } else { "s" },
        rbac.packs
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    push_comment(
        &mut out,
        &format!(
            "Apply each role's part in every cluster of that role (the broker's `--cluster \
             ROLE=...`). The bindings name the ServiceAccount `{}` of namespace `{}`; where \
             the broker reaches a cluster with another identity (a kubeconfig's user), bind \
             that identity instead.",
            naming.service_account, naming.namespace
        ),
    );
    for role in &rbac.roles {
        out.push_str("---\n");
        out.push_str(&format!(
            "# Cluster role `{}` (pack{} {}): bind in every cluster of this role.\n",
            role.role,
            if role.packs.len() == 1 { "" } else { "s" },
            role.packs.join(", ")
        ));
        for d in &role.descriptions {
            push_comment(&mut out, d);
        }
        for n in &role.notes {
            push_comment(&mut out, &format!("NOTE: {n}"));
        }
        let name = format!("{}-{}", naming.prefix, role.role);
        push_role(&mut out, "ClusterRole", &name, None, &role.cluster_rules);
        out.push_str("---\n");
        push_binding(
            &mut out,
            "ClusterRoleBinding",
            "ClusterRole",
            &name,
            None,
            naming,
        );
        for (ns, rules) in &role.namespace_rules {
            out.push_str("---\n");
            out.push_str(&format!(
                "# Cluster role `{}`: writes in namespace `{ns}` only.\n",
                role.role
            ));
            push_role(&mut out, "Role", &name, Some(ns), rules);
            out.push_str("---\n");
            push_binding(&mut out, "RoleBinding", "Role", &name, Some(ns), naming);
        }
    }
    let le = &rbac.leader_election;
    push_own_role(
        &mut out,
        &format!("leader election in namespace `{}`", le.namespace),
        &format!("{}-leader-election", naming.prefix),
        &le.namespace,
        &le.rules,
        naming,
    );
    for secrets in &rbac.member_secrets {
        push_own_role(
            &mut out,
            &format!(
                "the kubeconfig Secrets of members found at run time, in namespace `{}`",
                secrets.namespace
            ),
            &format!("{}-member-secrets", naming.prefix),
            &secrets.namespace,
            &secrets.rules,
            naming,
        );
    }
    for sources in &rbac.member_sources {
        push_own_role(
            &mut out,
            &format!(
                "the objects member sources read, in namespace `{}`",
                sources.namespace
            ),
            &format!("{}-member-sources", naming.prefix),
            &sources.namespace,
            &sources.rules,
            naming,
        );
    }
    if !rbac.member_sources_cluster.is_empty() {
        let name = format!("{}-member-sources", naming.prefix);
        out.push_str("---\n");
        out.push_str(
            "# The broker's own cluster (where it runs): the cluster-scoped objects member sources read.\n",
        );
        push_role(
            &mut out,
            "ClusterRole",
            &name,
            None,
            &rbac.member_sources_cluster,
        );
        out.push_str("---\n");
        push_binding(
            &mut out,
            "ClusterRoleBinding",
            "ClusterRole",
            &name,
            None,
            naming,
        );
    }
    out
}

/// A Role and its RoleBinding in the broker's own cluster, after a comment saying what for.
fn push_own_role(
    out: &mut String,
    what: &str,
    name: &str,
    namespace: &str,
    rules: &[PolicyRule],
    naming: &Naming,
) {
    out.push_str("---\n");
    out.push_str(&format!(
        "# The broker's own cluster (where it runs): {what}.\n"
    ));
    push_role(out, "Role", name, Some(namespace), rules);
    out.push_str("---\n");
    push_binding(out, "RoleBinding", "Role", name, Some(namespace), naming);
}

/// A comment, wrapped at 96 columns.
fn push_comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 96 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// A scalar in a flow sequence or after `key: `.
fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-./".contains(c))
        && !s.starts_with(['-', '.'])
        && !matches!(
            s,
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
        );
    if plain {
        s.to_string()
    } else {
        serde_json::Value::String(s.to_string()).to_string()
    }
}

fn flow(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| scalar(s)).collect();
    format!("[{}]", items.join(", "))
}

fn push_metadata(out: &mut String, name: &str, namespace: Option<&str>) {
    out.push_str("metadata:\n");
    out.push_str(&format!("  name: {}\n", scalar(name)));
    if let Some(ns) = namespace {
        out.push_str(&format!("  namespace: {}\n", scalar(ns)));
    }
    out.push_str("  labels:\n    app.kubernetes.io/part-of: switchyard\n");
}

fn push_role(
    out: &mut String,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    rules: &[PolicyRule],
) {
    out.push_str("apiVersion: rbac.authorization.k8s.io/v1\n");
    out.push_str(&format!("kind: {kind}\n"));
    push_metadata(out, name, namespace);
    if rules.is_empty() {
        out.push_str("rules: []\n");
        return;
    }
    out.push_str("rules:\n");
    let mut last_why = "";
    for rule in rules {
        if rule.why != last_why {
            let mut comment = String::new();
            push_comment(&mut comment, &rule.why);
            for line in comment.lines() {
                out.push_str("  ");
                out.push_str(line);
                out.push('\n');
            }
            last_why = &rule.why;
        }
        let verbs: Vec<String> = rule.verbs.iter().map(|v| v.as_str().to_string()).collect();
        out.push_str(&format!("  - apiGroups: {}\n", flow(&rule.api_groups)));
        out.push_str(&format!("    resources: {}\n", flow(&rule.resources)));
        if !rule.resource_names.is_empty() {
            out.push_str(&format!(
                "    resourceNames: {}\n",
                flow(&rule.resource_names)
            ));
        }
        out.push_str(&format!("    verbs: {}\n", flow(&verbs)));
    }
}

fn push_binding(
    out: &mut String,
    kind: &str,
    role_kind: &str,
    name: &str,
    namespace: Option<&str>,
    naming: &Naming,
) {
    out.push_str("apiVersion: rbac.authorization.k8s.io/v1\n");
    out.push_str(&format!("kind: {kind}\n"));
    push_metadata(out, name, namespace);
    out.push_str("roleRef:\n  apiGroup: rbac.authorization.k8s.io\n");
    out.push_str(&format!("  kind: {role_kind}\n  name: {}\n", scalar(name)));
    out.push_str("subjects:\n  - kind: ServiceAccount\n");
    out.push_str(&format!(
        "    name: {}\n    namespace: {}\n",
        scalar(&naming.service_account),
        scalar(&naming.namespace)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_name_their_resources() {
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "spec": {
                "group": "example.dev",
                "names": {"kind": "Widget", "plural": "widgets"},
                "scope": "Cluster",
                "versions": [{"name": "v1", "subresources": {"status": {}}}]
            }
        });
        let kinds = Kinds::new(&[crd]);
        let info = kinds.get("example.dev/v1", "Widget").unwrap();
        assert_eq!(info.resource, "widgets");
        assert!(info.scope.is_cluster() && info.status);
        assert!(kinds.get("example.dev/v1", "Gadget").is_none());
        assert_eq!(
            kinds.get("apps/v1", "Deployment").map(|k| k.resource),
            Some("deployments".to_string())
        );
    }

    #[test]
    fn scalars_that_need_quotes() {
        assert_eq!(scalar(""), "\"\"");
        assert_eq!(scalar("apps"), "apps");
        assert_eq!(scalar("deployments/status"), "deployments/status");
        assert_eq!(scalar("on"), "\"on\"");
        assert_eq!(scalar("kcp-*"), "\"kcp-*\"");
    }
}
