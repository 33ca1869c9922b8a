//! The `kcp-karmada` pack written by hand: what a Go or Rust controller author would write
//! instead of the pack, for the same inputs and byte-identical results (desired objects with
//! the engine's ownership labels and annotations, merged as `plan::merge` merges them; status
//! patches with the engine's `Synced` condition; conflicts).
//!
//! Read alongside `rules/kcp-karmada/rules/fleet-workload.yaml`: every guard, lookup and
//! variable has its counterpart below, in the order the engine runs them
//! (`pack::order_steps`: guards as soon as what they read is available). The decision
//! tables are `match`es.
//!
//! Inputs the pack's CEL would fail on (a field of the wrong JSON type) stop the trigger
//! with reason `EvaluationError` like the engine, but with this module's own message.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use switchyard_core::evaluate::Precedence;
use switchyard_core::plan::Conflict;
use switchyard_core::{MemoryWorld, ObjectKey, World};

const PACK: &str = "kcp-karmada";
const PACK_VERSION: &str = "0.1.0";
const RULE: &str = "fleet-workload";
const FINALIZER: &str = "switchyard.dev/kcp-karmada";
const SOURCE: &str = "source";
const KARMADA: &str = "karmada";
const PORTAL: &str = "platform.edge-portal.eu/v1alpha1";
const ANNOTATION_WORKSPACE: &str = "kcp.io/cluster";
const LABEL_WORKSPACE: &str = "edge-connect.eu/source-workspace";
const LABEL_NAME: &str = "edge-connect.eu/source-name";

/// What the engine decided for one FleetWorkload.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerResult {
    pub trigger: ObjectKey,
    /// The status patch (`None` while the FleetWorkload is being deleted).
    pub status: Option<Value>,
    pub finalizer: Option<String>,
}

/// Everything [`handwritten()`] renders, in `plan()`'s order.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The merged desired objects as (cluster role, object): per cluster, cluster-scoped
    /// ones first, then by key.
    pub objects: Vec<(String, Value)>,
    /// One per FleetWorkload, in key order.
    pub triggers: Vec<TriggerResult>,
    pub conflicts: Vec<Conflict>,
}

/// Why a trigger renders nothing: the `Synced=False` reason and message.
struct Stop {
    reason: &'static str,
    message: String,
}

fn stop(reason: &'static str, message: impl Into<String>) -> Stop {
    Stop {
        reason,
        message: message.into(),
    }
}

/// An input the pack's CEL expressions cannot evaluate.
fn type_error(what: &str) -> Stop {
    stop("EvaluationError", format!("unsupported input: {what}"))
}

/// What a FleetWorkload renders when no guard stops it.
struct Fired {
    /// (key, output name, object without ownership), in key order.
    outputs: Vec<(ObjectKey, &'static str, Value)>,
    fields: Map<String, Value>,
    ready: Value,
}

/// Renders every FleetWorkload of `world` like `plan(&kcp_karmada, world, now)`.
pub fn handwritten(world: &MemoryWorld, now: DateTime<Utc>) -> Rendered {
    let now_text = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut merged: BTreeMap<ObjectKey, (Value, BTreeSet<&'static str>, BTreeSet<String>)> =
        BTreeMap::new();
    let mut conflicts = Vec::new();
    let mut triggers = Vec::new();
    // In the order FleetWorkloads claim an object they render differently: the one that
    // desired it first (oldest creationTimestamp, then uid, then key) keeps it.
    let mut workloads: Vec<(Precedence, ObjectKey, std::sync::Arc<Value>)> = world
        .list(SOURCE, PORTAL, "FleetWorkload", None)
        .into_iter()
        .filter_map(|fw| {
            let key = ObjectKey::of(SOURCE, &fw).ok()?;
            Some((Precedence::of(&fw), key, fw))
        })
        .collect();
    workloads.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    for (_, _, fw) in &workloads {
        let fw = fw.as_ref();
        let Some(name) = fw.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let namespace = fw
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty());
        let trigger = ObjectKey {
            cluster: SOURCE.to_string(),
            api_version: PORTAL.to_string(),
            kind: "FleetWorkload".to_string(),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        };
        if fw
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
        {
            triggers.push(TriggerResult {
                trigger,
                status: None,
                finalizer: None,
            });
            continue;
        }
        let owner = owner_of(namespace, name);
        let (synced, rule_status) = match fleet_workload(world, fw) {
            Ok(fired) => {
                let mut synced = json!({"type": "Synced", "status": "True", "reason": "Synced",
                    "message": format!("rendered by {RULE} ({} outputs)", fired.outputs.len())});
                let mut refused: Option<String> = None;
                for (key, output, object) in fired.outputs {
                    match merged.get_mut(&key) {
                        None => {
                            merged.insert(
                                key,
                                (
                                    object,
                                    BTreeSet::from([output]),
                                    BTreeSet::from([owner.clone()]),
                                ),
                            );
                        }
                        Some((existing, sources, owners)) => {
                            if *existing == object {
                                sources.insert(output);
                                owners.insert(owner.clone());
                            } else {
                                let conflict = Conflict {
                                    key,
                                    kept: owners.iter().cloned().collect(),
                                    refused: BTreeSet::from([owner.clone()]),
                                };
                                refused.get_or_insert_with(|| conflict.refused_message());
                                conflicts.push(conflict);
                            }
                        }
                    }
                }
                if let Some(message) = refused {
                    synced = json!({"type": "Synced", "status": "False", "reason": "Conflict",
                        "message": message});
                }
                (synced, Some((fired.fields, fired.ready)))
            }
            Err(Stop { reason, message }) => (
                json!({"type": "Synced", "status": "False", "reason": reason, "message": message}),
                None,
            ),
        };
        triggers.push(TriggerResult {
            trigger,
            status: Some(status_patch(fw, &now_text, synced, rule_status)),
            finalizer: Some(FINALIZER.to_string()),
        });
    }

    triggers.sort_by(|a, b| a.trigger.cmp(&b.trigger));
    let mut cluster_scoped = Vec::new();
    let mut namespaced = Vec::new();
    for (key, (mut object, sources, owners)) in merged {
        let sources: Vec<String> = sources.iter().map(|s| format!("{RULE}/{s}")).collect();
        // At most 8 owners are named, then `+more`: annotations stay bounded.
        let mut owners: Vec<&str> = owners.iter().take(9).map(String::as_str).collect();
        if owners.len() == 9 {
            owners[8] = "+more";
        }
        stamp_ownership(&mut object, &sources.join(","), &owners.join(","));
        if key.namespace.is_none() {
            cluster_scoped.push((key, object));
        } else {
            namespaced.push((key, object));
        }
    }
    // One cluster role (karmada): cluster-scoped objects first, each group in key order.
    let objects = cluster_scoped
        .into_iter()
        .chain(namespaced)
        .map(|(key, object)| (key.cluster, object))
        .collect();
    Rendered {
        objects,
        triggers,
        conflicts,
    }
}

/// The owner string of a FleetWorkload (`ObjectKey`'s display).
fn owner_of(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{SOURCE}:FleetWorkload.platform.edge-portal.eu:{ns}/{name}"),
        None => format!("{SOURCE}:FleetWorkload.platform.edge-portal.eu:{name}"),
    }
}

/// The engine's ownership labels and annotations.
fn stamp_ownership(object: &mut Value, sources: &str, owners: &str) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if let Value::Object(labels) = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        labels.insert("app.kubernetes.io/managed-by".into(), "switchyard".into());
        labels.insert("switchyard.dev/pack".into(), PACK.into());
    }
    if let Value::Object(annotations) = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        annotations.insert("switchyard.dev/pack-version".into(), PACK_VERSION.into());
        annotations.insert("switchyard.dev/rule".into(), sources.into());
        annotations.insert("switchyard.dev/owners".into(), owners.into());
    }
}

/// `{conditions: [Synced, Ready?], observedGeneration?, placements, clusters}` with the
/// engine's transition times and observed generation on each condition.
fn status_patch(
    fw: &Value,
    now_text: &str,
    synced: Value,
    rule_status: Option<(Map<String, Value>, Value)>,
) -> Value {
    let mut status = Map::new();
    let mut conditions = vec![synced];
    if let Some((fields, ready)) = rule_status {
        status.extend(fields);
        conditions.push(ready);
    }
    let generation = fw.pointer("/metadata/generation");
    let previous = fw
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for condition in &mut conditions {
        let before = previous
            .iter()
            .find(|p| p.get("type") == condition.get("type"));
        let transition = match before {
            Some(p)
                if p.get("status") == condition.get("status")
                    && p.get("lastTransitionTime").is_some() =>
            {
                p["lastTransitionTime"].clone()
            }
            _ => Value::String(now_text.to_string()),
        };
        if let Value::Object(m) = condition {
            m.insert("lastTransitionTime".into(), transition);
            if let Some(g) = generation {
                m.insert("observedGeneration".into(), g.clone());
            }
        }
    }
    status.insert("conditions".into(), Value::Array(conditions));
    Value::Object(status)
}

// --- JSON access with CEL's semantics for the pack's expressions ---------------------------

/// A JSON object from its entries (moved in, not copied through serde as `json!` would).
fn obj<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `v.?key` (CEL: selecting on a non-map is an error).
fn opt<'a>(v: &'a Value, key: &str) -> Result<Option<&'a Value>, Stop> {
    match v {
        Value::Object(m) => Ok(m.get(key)),
        _ => Err(type_error(&format!("`{key}` of a non-map"))),
    }
}

/// `v.key` (an error when absent).
fn req<'a>(v: &'a Value, key: &str) -> Result<&'a Value, Stop> {
    opt(v, key)?.ok_or_else(|| type_error(&format!("no `{key}`")))
}

/// `size(v)`.
fn size(v: &Value) -> Result<usize, Stop> {
    match v {
        Value::String(s) => Ok(s.chars().count()),
        Value::Array(a) => Ok(a.len()),
        Value::Object(m) => Ok(m.len()),
        _ => Err(type_error("size() of a scalar")),
    }
}

fn as_str<'a>(v: &'a Value, what: &str) -> Result<&'a str, Stop> {
    v.as_str()
        .ok_or_else(|| type_error(&format!("{what} is not a string")))
}

/// A number as f64 for CEL's cross-type numeric comparisons.
fn number(v: &Value, what: &str) -> Result<f64, Stop> {
    v.as_f64()
        .ok_or_else(|| type_error(&format!("{what} is not a number")))
}

/// `needle in haystack` for a map (keys) or a list (elements).
fn contains(haystack: &Value, needle: &str) -> Result<bool, Stop> {
    match haystack {
        Value::Object(m) => Ok(m.contains_key(needle)),
        Value::Array(a) => Ok(a.iter().any(|v| v.as_str() == Some(needle))),
        _ => Err(type_error("`in` on a scalar")),
    }
}

/// `v != ''` (CEL's heterogeneous equality: a non-string is not `''`).
fn non_empty(v: &Value) -> bool {
    v.as_str() != Some("")
}

/// Handlebars' `{{#if}}` truthiness.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(f64::is_normal),
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// A label value: `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`.
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (None, _) | (_, None) => true,
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, any length.
fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-')
        }
        _ => false,
    }
}

/// Kubernetes' `IsDNS1123Subdomain`.
fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_shape)
}

/// `^[a-z]([-a-z0-9]*[a-z0-9])?$` (DNS-1035 label, any length).
fn is_dns1035_label(s: &str) -> bool {
    s.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_label_shape(s)
}

/// `'kcp-' + sha256(workspace).substring(0, 12)`.
fn namespace_of(workspace: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(workspace.as_bytes());
    let mut out = String::with_capacity(16);
    out.push_str("kcp-");
    for b in &digest[..6] {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    out
}

/// The workspace annotation of a Fleet or PlacementPolicy, `''` when absent.
fn workspace_of(object: &Value) -> Result<Option<&Value>, Stop> {
    let metadata = req(object, "metadata")?;
    match opt(metadata, "annotations")? {
        None => Ok(None),
        Some(annotations) => opt(annotations, ANNOTATION_WORKSPACE),
    }
}

// --- decision tables ------------------------------------------------------------------------

/// `tables/strategies.yaml`.
struct Scheduling {
    replica_scheduling_type: &'static str,
    replica_division_preference: Option<&'static str>,
    static_weights: bool,
    dynamic_weight: Option<&'static str>,
    spread_constraints: bool,
}

fn strategies(strategy: &str, has_weights: bool) -> Result<Scheduling, Stop> {
    let divided = |static_weights, dynamic_weight, spread_constraints| Scheduling {
        replica_scheduling_type: "Divided",
        replica_division_preference: Some("Weighted"),
        static_weights,
        dynamic_weight,
        spread_constraints,
    };
    let duplicated = Scheduling {
        replica_scheduling_type: "Duplicated",
        replica_division_preference: None,
        static_weights: false,
        dynamic_weight: None,
        spread_constraints: false,
    };
    match (strategy, has_weights) {
        ("Weighted", true) => Ok(divided(true, None, false)),
        ("Weighted", false) => Ok(divided(false, None, false)),
        ("Spread", _) => Ok(divided(false, Some("AvailableReplicas"), true)),
        ("FixedReplicas" | "None", _) => Ok(duplicated),
        _ => Err(type_error("strategy outside the table")),
    }
}

/// `tables/requirement-targets.{yaml,csv}`: `Ok(true)` for fieldSelector, `Ok(false)` for
/// labelSelector, `Err(problem)` for invalid.
fn requirement_target(key: &str, operator: &str, has_values: bool) -> Result<bool, &'static str> {
    let cluster_field = matches!(key, "provider" | "region" | "zone");
    match (cluster_field, operator, has_values) {
        (true, "In" | "NotIn", true) => Ok(true),
        (true, _, _) => Err(
            "the cluster fields provider, region and zone take only the operators In and NotIn, with values",
        ),
        (false, "In" | "NotIn", true) | (false, "Exists" | "DoesNotExist", false) => Ok(false),
        _ => Err(
            "the operator must be In or NotIn with values, or Exists or DoesNotExist without values",
        ),
    }
}

/// `tables/readiness.yaml`: (status, reason, message).
fn readiness(
    binding_found: bool,
    scheduled: &str,
    fully_applied: &str,
) -> Result<(&'static str, &'static str, &'static str), Stop> {
    let allowed = |s: &str| matches!(s, "True" | "False" | "Unknown");
    if !allowed(scheduled) || !allowed(fully_applied) {
        return Err(type_error(
            "a binding condition status outside True, False, Unknown",
        ));
    }
    Ok(match (binding_found, scheduled, fully_applied) {
        (false, _, _) => (
            "Unknown",
            "BindingPending",
            "waiting for the workload to be scheduled",
        ),
        (true, "False" | "Unknown", _) => {
            ("False", "NotScheduled", "the workload is not scheduled")
        }
        (true, _, "False" | "Unknown") => (
            "False",
            "NotFullyApplied",
            "the workload is scheduled but not applied on every cluster",
        ),
        (true, _, _) => (
            "True",
            "FullyApplied",
            "the workload is applied on every scheduled cluster",
        ),
    })
}

// --- the rule ------------------------------------------------------------------------------

/// One requirement: its key (for messages), target and Karmada form.
struct Requirement {
    key: Value,
    target: Result<bool, &'static str>,
    expression: Value,
}

/// The rule `fleet-workload` for one FleetWorkload.
fn fleet_workload(world: &MemoryWorld, fw: &Value) -> Result<Fired, Stop> {
    let metadata = req(fw, "metadata")?;
    let name = as_str(req(metadata, "name")?, "metadata.name")?;

    // Guard InvalidWorkspace.
    let workspace = match opt(metadata, "annotations")? {
        Some(annotations) if contains(annotations, ANNOTATION_WORKSPACE)? => {
            match req(annotations, ANNOTATION_WORKSPACE)? {
                Value::String(ws) if is_label_value(ws) && !ws.is_empty() && ws.len() <= 63 => {
                    Some(ws.as_str())
                }
                Value::String(_) => None,
                _ => return Err(type_error("kcp.io/cluster is not a string")),
            }
        }
        _ => None,
    };
    let Some(workspace) = workspace else {
        return Err(stop(
            "InvalidWorkspace",
            "the annotation kcp.io/cluster must name the workspace's logical cluster: a \
             non-empty label value (at most 63 characters of [A-Za-z0-9-_.], starting and \
             ending with a letter or digit)",
        ));
    };

    // Guard InvalidFleetWorkload: fleetRef.name and template.spec.
    let spec = opt(fw, "spec")?;
    let fleet_ref = match spec {
        Some(spec) => opt(spec, "fleetRef")?,
        None => None,
    };
    let fleet_name = match fleet_ref {
        Some(r) => opt(r, "name")?.filter(|n| non_empty(n)),
        None => None,
    };
    let template = match (spec, fleet_name) {
        (Some(spec), Some(_)) => opt(spec, "template")?,
        _ => None,
    };
    let pod_spec = match template {
        Some(t) => opt(t, "spec")?,
        None => None,
    };
    let (Some(spec), Some(fleet_name), Some(template), Some(pod_spec)) =
        (spec, fleet_name, template, pod_spec)
    else {
        return Err(stop(
            "InvalidFleetWorkload",
            "spec.fleetRef.name and spec.template.spec are required",
        ));
    };

    // Guard InvalidName.
    let service = opt(spec, "service")?;
    let ports = match service {
        Some(s) => opt(s, "ports")?,
        None => None,
    };
    let emit_service = match ports {
        Some(p) => size(p)? > 0,
        None => false,
    };
    if !(is_dns1123_subdomain(name)
        && name.chars().count() <= 63
        && (!emit_service || is_dns1035_label(name)))
    {
        return Err(stop(
            "InvalidName",
            "the FleetWorkload's name must be at most 63 characters of [a-z0-9-.] (a label \
             value and a DNS subdomain), and a DNS-1035 label (starting with a letter, no dots) \
             when spec.service.ports is set",
        ));
    }

    // Guard InvalidFleetWorkload: spoofed source labels.
    let pod_metadata = opt(template, "metadata")?;
    let pod_labels = match pod_metadata {
        Some(m) => opt(m, "labels")?,
        None => None,
    };
    let pod_annotations = match pod_metadata {
        Some(m) => opt(m, "annotations")?,
        None => None,
    };
    if let Some(labels) = pod_labels
        && (contains(labels, LABEL_WORKSPACE)? || contains(labels, LABEL_NAME)?)
    {
        return Err(stop(
            "InvalidFleetWorkload",
            "spec.template.metadata.labels may not set edge-connect.eu/source-workspace or \
             edge-connect.eu/source-name: the platform sets them",
        ));
    }

    // Lookup fleet (required), then guard FleetNotFound (other workspace).
    let kcp_namespace = metadata.get("namespace").and_then(Value::as_str);
    let fleet_name = as_str(fleet_name, "spec.fleetRef.name")?;
    let Some(fleet) = world.get(SOURCE, PORTAL, "Fleet", kcp_namespace, fleet_name) else {
        return Err(stop(
            "FleetNotFound",
            format!(
                "Fleet `{fleet_name}` not found in namespace `{}` of cluster `{SOURCE}` \
                 (lookup `fleet` of rule `{RULE}`)",
                kcp_namespace.unwrap_or("")
            ),
        ));
    };
    if workspace_of(&fleet)?.and_then(Value::as_str).unwrap_or("") != workspace {
        let namespace = as_str(req(metadata, "namespace")?, "metadata.namespace")?;
        return Err(stop(
            "FleetNotFound",
            format!(
                "Fleet `{fleet_name}` not found in namespace `{namespace}` of workspace \
                 `{workspace}`"
            ),
        ));
    }

    // vars.namespace, vars.bindingName, lookup binding (not required).
    let namespace = namespace_of(workspace);
    let binding_name = format!("{name}-deployment").to_ascii_lowercase();
    let binding = world.get(
        KARMADA,
        "work.karmada.io/v1alpha2",
        "ResourceBinding",
        Some(namespace.as_str()),
        &binding_name,
    );

    // vars.policyName, lookup policy (required when named).
    let policy_name = match opt(spec, "placementPolicyRef")? {
        Some(r) => opt(r, "name")?.cloned().unwrap_or(Value::from("")),
        None => Value::from(""),
    };
    let policy = if non_empty(&policy_name) {
        let policy_name = as_str(&policy_name, "spec.placementPolicyRef.name")?;
        let Some(policy) = world.get(
            SOURCE,
            PORTAL,
            "PlacementPolicy",
            kcp_namespace,
            policy_name,
        ) else {
            return Err(stop(
                "PlacementPolicyNotFound",
                format!(
                    "PlacementPolicy `{policy_name}` not found in namespace `{}` of cluster \
                     `{SOURCE}` (lookup `policy` of rule `{RULE}`)",
                    kcp_namespace.unwrap_or("")
                ),
            ));
        };
        Some((policy_name, policy))
    } else {
        None
    };

    // Guards on the policy: PlacementPolicyNotFound (other workspace), then
    // InvalidPlacementPolicy (strategy, weights, spread).
    let mut strategy = "None";
    let mut weights: &[Value] = &[];
    let mut policy_spec: Option<&Value> = None;
    if let Some((policy_name, policy)) = &policy {
        let policy = policy.as_ref();
        if workspace_of(policy)?.and_then(Value::as_str).unwrap_or("") != workspace {
            let namespace = as_str(req(metadata, "namespace")?, "metadata.namespace")?;
            return Err(stop(
                "PlacementPolicyNotFound",
                format!(
                    "PlacementPolicy `{policy_name}` not found in namespace `{namespace}` of \
                     workspace `{workspace}`"
                ),
            ));
        }
        let policy_metadata_name = || -> Result<&str, Stop> {
            as_str(
                req(req(policy, "metadata")?, "name")?,
                "PlacementPolicy metadata.name",
            )
        };
        let spec = opt(policy, "spec")?;
        let strategy_value = match spec {
            Some(s) => opt(s, "strategy")?,
            None => None,
        };
        strategy = match strategy_value.and_then(Value::as_str) {
            Some(s @ ("Weighted" | "Spread" | "FixedReplicas")) => s,
            _ => {
                return Err(stop(
                    "InvalidPlacementPolicy",
                    format!(
                        "PlacementPolicy `{}`: spec.strategy must be Weighted, Spread or \
                         FixedReplicas",
                        policy_metadata_name()?
                    ),
                ));
            }
        };
        let spec = req(policy, "spec")?;
        policy_spec = Some(spec);
        weights = match opt(spec, "weights")? {
            None => &[],
            Some(Value::Array(w)) => w,
            Some(_) => return Err(type_error("spec.weights is not a list")),
        };
        if strategy == "Weighted" {
            let mut valid = true;
            for w in weights {
                let cluster_ok = opt(w, "cluster")?.is_some_and(non_empty);
                let weight_ok = match opt(w, "weight")? {
                    Some(v) => number(v, "a weight")? > 0.0,
                    None => false,
                };
                valid &= cluster_ok && weight_ok;
            }
            if !valid {
                return Err(stop(
                    "InvalidPlacementPolicy",
                    format!(
                        "PlacementPolicy `{}`: every spec.weights entry needs a cluster and a \
                         weight of at least 1",
                        policy_metadata_name()?
                    ),
                ));
            }
        }
        if strategy == "Spread" && !valid_spread(spec)? {
            return Err(stop(
                "InvalidPlacementPolicy",
                format!(
                    "PlacementPolicy `{}`: strategy Spread needs spec.spread with exactly one of \
                     spreadByField (cluster, region, zone or provider) and spreadByLabel, \
                     maxGroups, and minGroups (default 1) between 1 and maxGroups",
                    policy_metadata_name()?
                ),
            ));
        }
    }

    // vars.replicas, vars.podLabels, vars.podAnnotations.
    let replicas = opt(spec, "replicas")?.cloned().unwrap_or(json!(1));
    let pod_labels = pod_labels.cloned().unwrap_or_else(|| json!({}));
    let pod_annotations = pod_annotations.cloned().unwrap_or_else(|| json!({}));

    // vars.clusterNames, vars.fleetSelector, guard InvalidFleet.
    let fleet_spec = req(&fleet, "spec")?;
    let cluster_names: Vec<Value> = match opt(fleet_spec, "clusterRefs")? {
        None => Vec::new(),
        Some(Value::Array(refs)) => refs
            .iter()
            .map(|r| req(r, "name").cloned())
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(type_error("spec.clusterRefs is not a list")),
    };
    let empty = Map::new();
    let fleet_selector = match opt(fleet_spec, "selector")? {
        None => &empty,
        Some(Value::Object(s)) => s,
        Some(_) => return Err(type_error("spec.selector is not a map")),
    };
    let match_labels = fleet_selector.get("matchLabels");
    let fleet_expressions: &[Value] = match fleet_selector.get("matchExpressions") {
        None => &[],
        Some(Value::Array(e)) => e,
        Some(_) => return Err(type_error("matchExpressions is not a list")),
    };
    let match_labels_size = match match_labels {
        Some(m) => size(m)?,
        None => 0,
    };
    if cluster_names.is_empty() && match_labels_size == 0 && fleet_expressions.is_empty() {
        let fleet_metadata_name = as_str(
            req(req(&fleet, "metadata")?, "name")?,
            "Fleet metadata.name",
        )?;
        return Err(stop(
            "InvalidFleet",
            format!(
                "Fleet `{fleet_metadata_name}` selects no cluster: set spec.clusterRefs or a \
                 non-empty spec.selector (an empty one would select every Karmada cluster)"
            ),
        ));
    }

    // vars.scheduling (table strategies), vars.requirements (table requirement-targets),
    // guard InvalidPlacementPolicy (requirements).
    let scheduling = strategies(strategy, !weights.is_empty())?;
    let mut requirements = Vec::new();
    if let Some(spec) = policy_spec {
        match opt(spec, "requirements")? {
            None => {}
            Some(Value::Array(list)) => {
                for r in list {
                    let key = req(r, "key")?;
                    let operator = req(r, "operator")?;
                    let values = opt(r, "values")?;
                    let has_values = match values {
                        Some(v) => size(v)? > 0,
                        None => false,
                    };
                    let target = requirement_target(
                        as_str(key, "a requirement key")?,
                        as_str(operator, "a requirement operator")?,
                        has_values,
                    );
                    let mut expression = Map::new();
                    expression.insert("key".into(), key.clone());
                    expression.insert("operator".into(), operator.clone());
                    if has_values && let Some(v) = values {
                        expression.insert("values".into(), v.clone());
                    }
                    requirements.push(Requirement {
                        key: key.clone(),
                        target,
                        expression: Value::Object(expression),
                    });
                }
            }
            Some(_) => return Err(type_error("spec.requirements is not a list")),
        }
    }
    if let Some(invalid) = requirements.iter().find(|r| r.target.is_err())
        && let (Err(problem), Some((_, policy))) = (&invalid.target, &policy)
    {
        let policy_metadata_name = as_str(
            req(req(policy, "metadata")?, "name")?,
            "PlacementPolicy metadata.name",
        )?;
        let key = as_str(&invalid.key, "a requirement key")?;
        return Err(stop(
            "InvalidPlacementPolicy",
            format!("PlacementPolicy `{policy_metadata_name}`: requirement `{key}`: {problem}"),
        ));
    }

    // vars.fieldExpressions, vars.labelExpressions, vars.labelSelector.
    let field_expressions: Vec<Value> = requirements
        .iter()
        .filter(|r| r.target == Ok(true))
        .map(|r| r.expression.clone())
        .collect();
    let label_expressions: Vec<Value> = fleet_expressions
        .iter()
        .cloned()
        .chain(
            requirements
                .iter()
                .filter(|r| r.target == Ok(false))
                .map(|r| r.expression.clone()),
        )
        .collect();
    let mut label_selector = Map::new();
    if match_labels_size > 0
        && let Some(m) = match_labels
    {
        label_selector.insert("matchLabels".into(), m.clone());
    }
    if !label_expressions.is_empty() {
        label_selector.insert("matchExpressions".into(), Value::Array(label_expressions));
    }

    // vars.weightPreference.
    let mut weight_preference = Map::new();
    if scheduling.static_weights {
        let list = weights
            .iter()
            .map(|w| {
                Ok(
                    json!({"targetCluster": {"clusterNames": [req(w, "cluster")?]},
                          "weight": req(w, "weight")?}),
                )
            })
            .collect::<Result<Vec<Value>, Stop>>()?;
        weight_preference.insert("staticWeightList".into(), Value::Array(list));
    }
    if let Some(dynamic) = scheduling.dynamic_weight {
        weight_preference.insert("dynamicWeight".into(), dynamic.into());
    }

    // vars.spreadConstraints.
    let mut spread_constraints = Vec::new();
    if scheduling.spread_constraints
        && let Some(spec) = policy_spec
    {
        let spread = req(spec, "spread")?;
        let by_field = opt(spread, "spreadByField")?;
        let by_label = opt(spread, "spreadByLabel")?;
        let max_groups = req(spread, "maxGroups")?;
        let min_groups = opt(spread, "minGroups")?.cloned().unwrap_or(json!(1));
        let mut constraint = Map::new();
        if let Some(f) = by_field {
            constraint.insert("spreadByField".into(), f.clone());
        }
        if let Some(l) = by_label {
            constraint.insert("spreadByLabel".into(), l.clone());
        }
        constraint.insert("maxGroups".into(), max_groups.clone());
        constraint.insert("minGroups".into(), min_groups.clone());
        spread_constraints.push(Value::Object(constraint));
        if by_field.is_some_and(|f| f.as_str() != Some("cluster")) {
            spread_constraints.push(json!({"spreadByField": "cluster",
                "maxGroups": max_groups, "minGroups": min_groups}));
        }
    }

    // Status: vars.placements, the binding's conditions, vars.readiness (table readiness),
    // vars.readyMessage, status.clusters.
    let (placements, clusters, ready) = binding_status(binding.as_deref())?;

    // Outputs, in key order: Deployment, PropagationPolicy, Namespace, Service. Built from
    // maps directly: `json!` would copy embedded values through serde.
    let source_labels = obj([
        (LABEL_WORKSPACE, workspace.into()),
        (LABEL_NAME, name.into()),
    ]);
    let metadata_of = |labels: Value| {
        obj([
            ("name", name.into()),
            ("namespace", namespace.as_str().into()),
            ("labels", labels),
        ])
    };
    let mut outputs = Vec::with_capacity(4);
    let key = |api_version: &str, kind: &str, namespace: Option<&str>, name: &str| ObjectKey {
        cluster: KARMADA.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        namespace: namespace.map(str::to_string),
        name: name.to_string(),
    };

    let mut template_labels = match pod_labels {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    template_labels.insert(LABEL_WORKSPACE.into(), workspace.into());
    template_labels.insert(LABEL_NAME.into(), name.into());
    let mut template_metadata = Map::new();
    template_metadata.insert("labels".into(), Value::Object(template_labels));
    if truthy(&pod_annotations) {
        template_metadata.insert("annotations".into(), pod_annotations);
    }
    outputs.push((
        key("apps/v1", "Deployment", Some(&namespace), name),
        "deployment",
        obj([
            ("apiVersion", "apps/v1".into()),
            ("kind", "Deployment".into()),
            ("metadata", metadata_of(source_labels.clone())),
            (
                "spec",
                obj([
                    ("replicas", replicas),
                    ("selector", obj([("matchLabels", source_labels.clone())])),
                    (
                        "template",
                        obj([
                            ("metadata", Value::Object(template_metadata)),
                            ("spec", pod_spec.clone()),
                        ]),
                    ),
                ]),
            ),
        ]),
    ));

    let selector = |api_version: &str, kind: &str| {
        obj([
            ("apiVersion", api_version.into()),
            ("kind", kind.into()),
            ("name", name.into()),
        ])
    };
    let mut resource_selectors = vec![selector("apps/v1", "Deployment")];
    if emit_service {
        resource_selectors.push(selector("v1", "Service"));
    }
    let mut cluster_affinity = Map::new();
    if !cluster_names.is_empty() {
        cluster_affinity.insert("clusterNames".into(), Value::Array(cluster_names));
    }
    if !label_selector.is_empty() {
        cluster_affinity.insert("labelSelector".into(), Value::Object(label_selector));
    }
    if !field_expressions.is_empty() {
        cluster_affinity.insert(
            "fieldSelector".into(),
            obj([("matchExpressions", Value::Array(field_expressions))]),
        );
    }
    let mut replica_scheduling = Map::new();
    replica_scheduling.insert(
        "replicaSchedulingType".into(),
        scheduling.replica_scheduling_type.into(),
    );
    if let Some(preference) = scheduling.replica_division_preference {
        replica_scheduling.insert("replicaDivisionPreference".into(), preference.into());
    }
    if !weight_preference.is_empty() {
        replica_scheduling.insert("weightPreference".into(), Value::Object(weight_preference));
    }
    let mut placement = Map::new();
    placement.insert(
        "clusterAffinity".into(),
        if cluster_affinity.is_empty() {
            Value::Null
        } else {
            Value::Object(cluster_affinity)
        },
    );
    placement.insert(
        "replicaScheduling".into(),
        Value::Object(replica_scheduling),
    );
    if !spread_constraints.is_empty() {
        placement.insert("spreadConstraints".into(), Value::Array(spread_constraints));
    }
    outputs.push((
        key(
            "policy.karmada.io/v1alpha1",
            "PropagationPolicy",
            Some(&namespace),
            name,
        ),
        "propagation-policy",
        obj([
            ("apiVersion", "policy.karmada.io/v1alpha1".into()),
            ("kind", "PropagationPolicy".into()),
            ("metadata", metadata_of(source_labels.clone())),
            (
                "spec",
                obj([
                    ("resourceSelectors", Value::Array(resource_selectors)),
                    ("placement", Value::Object(placement)),
                ]),
            ),
        ]),
    ));

    outputs.push((
        key("v1", "Namespace", None, &namespace),
        "namespace",
        obj([
            ("apiVersion", "v1".into()),
            ("kind", "Namespace".into()),
            (
                "metadata",
                obj([
                    ("name", namespace.as_str().into()),
                    ("labels", obj([(LABEL_WORKSPACE, workspace.into())])),
                ]),
            ),
        ]),
    ));

    if emit_service && let Some(ports) = ports {
        outputs.push((
            key("v1", "Service", Some(&namespace), name),
            "service",
            obj([
                ("apiVersion", "v1".into()),
                ("kind", "Service".into()),
                ("metadata", metadata_of(source_labels.clone())),
                (
                    "spec",
                    obj([("selector", source_labels), ("ports", ports.clone())]),
                ),
            ]),
        ));
    }

    let mut fields = Map::new();
    if let Some(generation) = metadata.get("generation")
        && !generation.is_null()
    {
        fields.insert("observedGeneration".into(), generation.clone());
    }
    fields.insert("placements".into(), placements);
    fields.insert("clusters".into(), clusters);
    Ok(Fired {
        outputs,
        fields,
        ready,
    })
}

/// The spread guard of InvalidPlacementPolicy.
fn valid_spread(spec: &Value) -> Result<bool, Stop> {
    let Some(spread) = opt(spec, "spread")? else {
        return Ok(false);
    };
    let by_field = opt(spread, "spreadByField")?;
    let by_label = opt(spread, "spreadByLabel")?;
    if by_field.is_some() == by_label.is_some() {
        return Ok(false);
    }
    let field_ok = by_field
        .is_none_or(|f| matches!(f.as_str(), Some("cluster" | "region" | "zone" | "provider")));
    let label_ok = by_label.is_none_or(non_empty);
    if !field_ok || !label_ok {
        return Ok(false);
    }
    let min_groups = match opt(spread, "minGroups")? {
        Some(v) => number(v, "minGroups")?,
        None => 1.0,
    };
    let Some(max_groups) = opt(spread, "maxGroups")? else {
        return Ok(false);
    };
    Ok(min_groups >= 1.0 && number(max_groups, "maxGroups")? >= min_groups)
}

/// status.placements, status.clusters and the Ready condition from the ResourceBinding.
fn binding_status(binding: Option<&Value>) -> Result<(Value, Value, Value), Stop> {
    let Some(binding) = binding else {
        let (status, reason, message) = readiness(false, "Unknown", "Unknown")?;
        return Ok((
            json!([]),
            json!([]),
            json!({"type": "Ready", "status": status, "reason": reason, "message": message}),
        ));
    };
    let mut placements = Vec::new();
    let mut cluster_names = Vec::new();
    match opt(req(binding, "spec")?, "clusters")? {
        None => {}
        Some(Value::Array(list)) => {
            for c in list {
                let name = req(c, "name")?;
                cluster_names.push(name);
                let mut p = Map::new();
                p.insert("cluster".into(), name.clone());
                if let Some(r) = opt(c, "replicas")? {
                    p.insert("replicas".into(), r.clone());
                }
                placements.push(Value::Object(p));
            }
        }
        Some(_) => return Err(type_error("spec.clusters is not a list")),
    }
    let status = opt(binding, "status")?;
    let conditions: &[Value] = match status.map(|s| opt(s, "conditions")).transpose()? {
        Some(Some(Value::Array(c))) => c,
        Some(Some(_)) => return Err(type_error("status.conditions is not a list")),
        _ => &[],
    };
    let mut scheduled = None;
    let mut applied = None;
    for c in conditions {
        match req(c, "type")?.as_str() {
            Some("Scheduled") if scheduled.is_none() => scheduled = Some(c),
            Some("FullyApplied") if applied.is_none() => applied = Some(c),
            _ => {}
        }
    }
    let (ready_status, reason, base) = readiness(
        true,
        condition_status(scheduled)?,
        condition_status(applied)?,
    )?;
    let message_of = |c: Option<&Value>| -> Result<Option<String>, Stop> {
        match c.map(|c| opt(c, "message")).transpose()?.flatten() {
            Some(m) if non_empty(m) => Ok(Some(as_str(m, "a condition message")?.to_string())),
            _ => Ok(None),
        }
    };
    let message = match reason {
        "FullyApplied" => {
            let names = cluster_names
                .iter()
                .map(|n| as_str(n, "a binding cluster name"))
                .collect::<Result<Vec<&str>, Stop>>()?;
            format!("{base} ({})", names.join(", "))
        }
        "NotScheduled" => match message_of(scheduled)? {
            Some(m) => format!("{base}: {m}"),
            None => base.to_string(),
        },
        "NotFullyApplied" => match message_of(applied)? {
            Some(m) => format!("{base}: {m}"),
            None => base.to_string(),
        },
        _ => base.to_string(),
    };
    let mut clusters = Vec::new();
    if let Some(status) = status {
        match opt(status, "aggregatedStatus")? {
            None => {}
            Some(Value::Array(list)) => {
                for s in list {
                    let mut c = Map::new();
                    c.insert("cluster".into(), req(s, "clusterName")?.clone());
                    c.insert(
                        "applied".into(),
                        opt(s, "applied")?.cloned().unwrap_or(Value::Bool(false)),
                    );
                    c.insert(
                        "health".into(),
                        opt(s, "health")?
                            .cloned()
                            .unwrap_or_else(|| "Unknown".into()),
                    );
                    if let Some(m) = opt(s, "appliedMessage")? {
                        c.insert("message".into(), m.clone());
                    }
                    clusters.push(Value::Object(c));
                }
            }
            Some(_) => return Err(type_error("status.aggregatedStatus is not a list")),
        }
    }
    Ok((
        Value::Array(placements),
        Value::Array(clusters),
        json!({"type": "Ready", "status": ready_status, "reason": reason, "message": message}),
    ))
}

/// A binding condition's status, `Unknown` without the condition.
fn condition_status(condition: Option<&Value>) -> Result<&str, Stop> {
    match condition {
        None => Ok("Unknown"),
        Some(c) => as_str(req(c, "status")?, "a condition status"),
    }
}
