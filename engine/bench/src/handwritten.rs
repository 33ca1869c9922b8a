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

mod access;
mod binding;
mod names;
mod rule;
mod tables;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};
use switchyard_core::evaluate::Precedence;
use switchyard_core::object::cluster_id;
use switchyard_core::plan::Conflict;
use switchyard_core::{MemoryWorld, ObjectKey, World};

use access::Stop;
use names::{FINALIZER, PACK, PACK_VERSION, PORTAL, RULE, SOURCE};
use rule::fleet_workload;

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

/// Renders every FleetWorkload of `world` like `plan(&kcp_karmada, world, now)`.
pub fn handwritten(world: &MemoryWorld, now: DateTime<Utc>) -> Rendered {
    let now_text = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let mut merged: BTreeMap<ObjectKey, (Value, BTreeSet<&'static str>, BTreeSet<String>)> =
        BTreeMap::new();
    let mut conflicts = Vec::new();
    let mut triggers = Vec::new();
    // In the order FleetWorkloads claim an object they render differently: the one that
    // desired it first (oldest creationTimestamp, then uid, then key) keeps it.
    // Every workspace of the source role is a member: `source/<workspace>`.
    let mut workloads: Vec<(Precedence, ObjectKey, std::sync::Arc<Value>)> = world
        .members(SOURCE)
        .iter()
        .flat_map(|member| {
            let cluster = cluster_id(SOURCE, member);
            world
                .list(&cluster, PORTAL, "FleetWorkload", None)
                .into_iter()
                .filter_map(move |fw| {
                    let key = ObjectKey::of(&cluster, &fw).ok()?;
                    Some((Precedence::of(&fw), key, fw))
                })
        })
        .collect();
    workloads.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    for (_, key, fw) in &workloads {
        let fw = fw.as_ref();
        let Some(name) = fw.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let namespace = fw
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty());
        let trigger = ObjectKey {
            cluster: key.cluster.clone(),
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
        let owner = owner_of(&key.cluster, namespace, name);
        let (synced, rule_status) = match fleet_workload(world, &key.cluster, fw) {
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
fn owner_of(cluster: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{cluster}:FleetWorkload.platform.edge-portal.eu:{ns}/{name}"),
        None => format!("{cluster}:FleetWorkload.platform.edge-portal.eu:{name}"),
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
